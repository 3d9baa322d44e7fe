/* audit.c - `warren audit verify|export`: a session's audit chain, read
 * from the store (no server needed), or from the log file an older server
 * left in the data directory while the store has no record of the
 * session. In warren-serve, which links the store (`warren audit` execs
 * it). */
#include "cli/serve/audit.h"

#include "cli/cli.h"
#include "cli/serve/config.h"
#include "security/audit.h"
#include "snapshot/build.h"
#include "store/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char audit_usage[] =
    "usage: warren audit verify ID [--data DIR] [--store URL] [--config FILE]\n"
    "                              [--json] [--quiet] [--anchor HASH]\n"
    "       warren audit export ID [--data DIR] [--store URL] [--config FILE]\n"
    "\n"
    "verify  checks the session's hash chain (in the store; an older\n"
    "        server's DATA/audit/ID.jsonl while the store has none), lists\n"
    "        its records and prints the head hash; exit 0 if intact, 1 at\n"
    "        the first broken link (or no log), 2 on a usage error\n"
    "export  writes the log as it is, JSON Lines, to stdout\n"
    "\n"
    "options: --data DIR     the data directory (default $WARREN_HOME, else\n"
    "                        ./.warren)\n"
    "         --store URL    the store, as warren serve's --store (default:\n"
    "                        the configuration's \"store\", else\n"
    "                        DATA/warren.db)\n"
    "         --config FILE  warren serve's configuration file (its store)\n"
    "         --json         verify: the result as JSON\n"
    "         --quiet        verify: no listing, only the result\n"
    "         --anchor HASH  verify: a head hash noted earlier must still be\n"
    "                        in the chain (catches records cut off the end)\n";

#define EXIT_BROKEN 1

struct audit_cli {
	const char *data;
	const char *store;
	const char *config;
	const char *anchor;
	bool json;
	bool quiet;
	const char *id;
};

static int usage_error(const char *verb, const char *fmt, const char *arg)
{
	fprintf(stderr, "warren audit%s%s: ", verb ? " " : "",
		verb ? verb : "");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'warren audit --help'.\n");
	return WR_EXIT_USAGE;
}

static int parse(int argc, char **argv, const char *verb, struct audit_cli *a)
{
	static const struct option opts[] = {
	    {"data", required_argument, NULL, 'd'},
	    {"store", required_argument, NULL, 's'},
	    {"config", required_argument, NULL, 'c'},
	    {"json", no_argument, NULL, 'j'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"anchor", required_argument, NULL, 'a'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	memset(a, 0, sizeof(*a));
	optind = 1;
	opterr = 0;
	int ch;
	bool is_verify = !strcmp(verb, "verify");
	while ((ch = getopt_long(argc, argv, ":hq", opts, NULL)) != -1) {
		switch (ch) {
		case 'd': a->data = optarg; break;
		case 's': a->store = optarg; break;
		case 'c': a->config = optarg; break;
		case 'j': a->json = true; break;
		case 'q': a->quiet = true; break;
		case 'a': a->anchor = optarg; break;
		case 'h': fputs(audit_usage, stdout); exit(0);
		case ':':
			return usage_error(verb, "option '%s' needs a value",
					   argv[optind - 1]);
		default:
			return usage_error(verb, "unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (!is_verify && (a->json || a->quiet || a->anchor))
		return usage_error(verb, "%s",
				   "--json, --quiet and --anchor "
				   "are options of verify");
	if (optind + 1 != argc)
		return usage_error(verb, "%s",
				   optind >= argc ? "a session id is needed"
						  : "one session id only");
	a->id = argv[optind];
	if (!audit_session_id_ok(a->id))
		return usage_error(verb, "'%s' is not a session id", a->id);
	if (a->anchor) {
		size_t len = strlen(a->anchor);
		bool hex = len == AUDIT_HASH_HEX;
		for (size_t i = 0; hex && i < len; i++)
			hex = (a->anchor[i] >= '0' && a->anchor[i] <= '9') ||
			      (a->anchor[i] >= 'a' && a->anchor[i] <= 'f');
		if (!hex)
			return usage_error(verb,
					   "--anchor '%s': expected 64 "
					   "lowercase hex digits",
					   a->anchor);
	}
	return 0;
}

static char *data_dir(const struct audit_cli *a)
{
	if (a->data) {
		char real[PATH_MAX];
		return wr_strdup(realpath(a->data, real) ? real : a->data);
	}
	return snap_default_data_dir();
}

/* Where the chain is read from: the store (shown: its URL without a
 * password), or the file (shown: its path). */
struct source {
	struct store *st; /* NULL: no store (an SQLite file not there) */
	const char *store_shown;
	const char *path;
};

/* The store as warren serve finds it: --store, else the configuration's
 * "store", else DATA/warren.db. An SQLite store that does not exist is
 * none (*out NULL): opening it would create it. */
static int open_store(const struct audit_cli *a, const char *data,
		      struct store **out, char **shown, struct wr_error **err)
{
	struct serve_config cfg;
	serve_config_defaults(&cfg);
	int r = 0;
	_cleanup_free_ char *url = NULL;
	if (!a->store && a->config)
		r = serve_config_load(a->config, &cfg, err);
	if (r == 0) {
		url = a->store	   ? wr_strdup(a->store)
		      : cfg.store ? wr_strdup(cfg.store)
				  : wr_asprintf("%s/warren.db", data);
		if (!url)
			r = wr_error_set(err, ENOMEM, "store");
	}
	serve_config_clear(&cfg);
	if (r < 0)
		return r;
	*shown = store_url_redact(url);
	if (!*shown)
		return wr_error_set(err, ENOMEM, "store");
	*out = NULL;
	if (!store_url_is_pg(url)) {
		const char *path = strncmp(url, "sqlite:", 7) ? url : url + 7;
		if (access(path, F_OK) < 0 && errno == ENOENT)
			return 0;
	}
	*out = store_open(url, err);
	return *out ? 0 : -(err && *err && (*err)->errnum ? (*err)->errnum
							   : EIO);
}

/* What the walk collects for the listing and the anchor. */
struct listing {
	const struct audit_cli *a;
	bool anchor_seen;
	uint64_t anchor_seq;
	json_t *kinds; /* kind -> count */
};

/* One line per record: seq, UTC time, actor, kind, details. */
static void print_record(const json_t *rec)
{
	json_int_t ms = json_integer_value(json_object_get(rec, "time_ms"));
	time_t secs = (time_t)(ms / 1000);
	struct tm tm;
	char when[32] = "?";
	if (gmtime_r(&secs, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	_cleanup_free_ char *details = json_dumps(
	    json_object_get(rec, "details"), JSON_COMPACT | JSON_SORT_KEYS);
	const char *d = details ? details : "{}";
	int width = 1000; /* a long record still fits on a screenful */
	printf("%5lld  %s.%03dZ  %-14s %-15s %.*s%s\n",
	       (long long)json_integer_value(json_object_get(rec, "seq")), when,
	       (int)(ms % 1000),
	       json_string_value(json_object_get(rec, "actor")),
	       json_string_value(json_object_get(rec, "kind")), width, d,
	       strlen(d) > (size_t)width ? "..." : "");
}

static int each_record(void *ctx, uint64_t line, const json_t *rec)
{
	(void)line;
	struct listing *l = ctx;
	const char *kind = json_string_value(json_object_get(rec, "kind"));
	json_object_set_new(
	    l->kinds, kind,
	    json_integer(json_integer_value(json_object_get(l->kinds, kind)) +
			 1));
	const char *hash = json_string_value(json_object_get(rec, "hash"));
	if (l->a->anchor && !strcmp(hash, l->a->anchor)) {
		l->anchor_seen = true;
		l->anchor_seq =
		    (uint64_t)json_integer_value(json_object_get(rec, "seq"));
	}
	if (!l->a->json && !l->a->quiet)
		print_record(rec);
	return 0;
}

static int run_verify(const struct audit_cli *a, const struct source *src)
{
	struct listing l = {.a = a, .kinds = json_object()};
	struct audit_verify_result res;
	struct wr_error *err = NULL;
	if (!l.kinds)
		return WR_EXIT_FAILURE;
	/* the store's chain; an older server's file while it has none */
	const char *path = src->store_shown;
	bool from_store = src->st != NULL;
	int r = -ENOENT;
	if (src->st)
		r = audit_store_walk(src->st, a->id, each_record, &l, &res,
				     &err);
	if (r == -ENOENT) {
		wr_error_free(err);
		err = NULL;
		path = src->path;
		from_store = false;
		r = audit_walk(path, each_record, &l, &res, &err);
	}
	if (r < 0) {
		fprintf(stderr, "warren audit verify: %s%s\n",
			r == -ENOENT ? "no audit log for the session: " : "",
			err && err->msg ? err->msg : "failed");
		wr_error_free(err);
		json_decref(l.kinds);
		return r == -ENOENT ? EXIT_BROKEN : WR_EXIT_FAILURE;
	}
	/* the chain holds, but a head noted earlier must be in it */
	char anchor_problem[200] = "";
	if (res.ok && a->anchor && !l.anchor_seen)
		snprintf(anchor_problem, sizeof(anchor_problem),
			 "the anchored hash %.12s... is not in the chain "
			 "(records cut off the end, or the log rewritten)",
			 a->anchor);
	bool ok = res.ok && !anchor_problem[0];
	if (a->json) {
		json_t *j = json_pack(
		    "{s:s, s:s, s:s, s:b, s:I, s:s?, s:o, s:o}", "session",
		    a->id, "source", from_store ? "store" : "file", "path",
		    path, "ok", ok, "records", (json_int_t)res.records,
		    "head", res.head[0] ? res.head : NULL, "kinds", l.kinds,
		    "broken",
		    !res.ok
			? json_pack("{s:I, s:s}", "line", (json_int_t)res.line,
				    "problem", res.problem)
		    : anchor_problem[0] ? json_pack("{s:n, s:s}", "line",
						    "problem", anchor_problem)
					: json_null());
		if (j && a->anchor)
			json_object_set_new(
			    j, "anchor_seq",
			    l.anchor_seen
				? json_integer((json_int_t)l.anchor_seq)
				: json_null());
		char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
		if (text)
			printf("%s\n", text);
		free(text);
		json_decref(j);
		return ok ? 0 : EXIT_BROKEN;
	}
	json_decref(l.kinds);
	if (!res.ok) {
		printf("BROKEN: %s\n", res.problem);
		printf("%llu record(s) before it are intact%s%s\n",
		       (unsigned long long)res.records,
		       res.head[0] ? "; their head: " : "", res.head);
		return EXIT_BROKEN;
	}
	if (anchor_problem[0]) {
		printf("BROKEN: %s\n", anchor_problem);
		return EXIT_BROKEN;
	}
	printf("ok: %llu record(s), chain intact\n",
	       (unsigned long long)res.records);
	if (res.head[0])
		printf("head: %s\n", res.head);
	if (a->anchor)
		printf("anchor: found at seq %llu\n",
		       (unsigned long long)l.anchor_seq);
	return 0;
}

static int run_export(const struct audit_cli *a, const struct source *src)
{
	struct wr_error *err = NULL;
	int r = -ENOENT;
	if (src->st)
		r = audit_store_export(src->st, a->id, STDOUT_FILENO, &err);
	if (r == -ENOENT) {
		wr_error_free(err);
		err = NULL;
		r = audit_export(src->path, STDOUT_FILENO, &err);
	}
	if (r < 0) {
		fprintf(stderr, "warren audit export: %s%s\n",
			r == -ENOENT ? "no audit log for the session: " : "",
			err && err->msg ? err->msg : "failed");
		wr_error_free(err);
		return r == -ENOENT ? EXIT_BROKEN : WR_EXIT_FAILURE;
	}
	return 0;
}

int cmd_audit(int argc, char **argv)
{
	if (argc < 2) {
		fputs(audit_usage, stderr);
		return WR_EXIT_USAGE;
	}
	const char *verb = argv[1];
	if (!strcmp(verb, "--help") || !strcmp(verb, "-h") ||
	    !strcmp(verb, "help")) {
		fputs(audit_usage, stdout);
		return 0;
	}
	if (strcmp(verb, "verify") && strcmp(verb, "export"))
		return usage_error(NULL, "unknown command '%s'", verb);
	struct audit_cli a;
	int r = parse(argc - 1, argv + 1, verb, &a);
	if (r)
		return r;
	_cleanup_free_ char *data = data_dir(&a);
	_cleanup_free_ char *path = data ? audit_path(data, a.id) : NULL;
	if (!path) {
		fprintf(stderr, "warren audit %s: out of memory\n", verb);
		return WR_EXIT_FAILURE;
	}
	struct wr_error *err = NULL;
	struct store *st = NULL;
	_cleanup_free_ char *shown = NULL;
	r = open_store(&a, data, &st, &shown, &err);
	if (r < 0) {
		fprintf(stderr, "warren audit %s: %s\n", verb,
			err && err->msg ? err->msg : "cannot open the store");
		bool usage = err && err->bad_input;
		wr_error_free(err);
		return usage ? WR_EXIT_USAGE : WR_EXIT_FAILURE;
	}
	struct source src = {.st = st, .store_shown = shown, .path = path};
	r = !strcmp(verb, "verify") ? run_verify(&a, &src)
				    : run_export(&a, &src);
	store_close(st);
	if (fflush(stdout) != 0 && r == 0)
		r = WR_EXIT_FAILURE;
	return r;
}

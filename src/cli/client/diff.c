/* diff.c - `warren diff ID`: a session's change, as the reviewer sees it.
 *
 *   GET /sessions/{id}/diff -> the diff (text/x-diff): on a terminal with
 *                              its controls made visible, else (and with
 *                              --raw) as it is
 *   GET /sessions/{id}      -> outcome.result, for --stat and --json */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char diff_usage[] =
    "usage: warren diff ID [--stat] [--raw] [--json]\n"
    "\n"
    "Prints the change session ID made (the diff of its branch against the\n"
    "commit it started from). There is one once the session has reached\n"
    "review. On a terminal, control characters in it are shown visibly\n"
    "(^[ for ESC, ^M for CR, \\u202e for a bidi override, \\xff for a\n"
    "byte that is not UTF-8); into a pipe or a file it is printed as it\n"
    "is, a patch `git apply` takes.\n"
    "\n"
    "  --stat         the changed files with their added and deleted "
    "lines\n"
    "  --raw          the diff as it is, on a terminal too\n"
    "  --json         the session's outcome.result: {\"branch\", "
    "\"commit\",\n"
    "                 \"base\", \"files\", \"additions\", \"deletions\"}\n"
    "  --server URL   Warren server (default $WARREN_SERVER, else\n"
    "                 " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T      API token (default $WARREN_TOKEN, else\n"
    "                 $WARREN_HOME/admin.token, ./.warren/admin.token)\n";

enum {
	OPT_STAT = 0x100,
	OPT_RAW,
};

static const struct option diff_options[] = {
    {"stat", no_argument, NULL, OPT_STAT},
    {"raw", no_argument, NULL, OPT_RAW},
    {NULL, 0, NULL, 0},
};

struct diff_opts {
	bool stat, raw;
};

static int on_option(struct client *c, void *ctx, int opt, const char *arg)
{
	struct diff_opts *o = ctx;
	(void)c;
	(void)arg;
	switch (opt) {
	case OPT_STAT: o->stat = true; return 0;
	case OPT_RAW: o->raw = true; return 0;
	}
	return -1;
}

/* The diff as the server sends it, to stdout: the agent wrote every byte
 * of it, so a terminal gets it through client_visible. A pipe or a file
 * gets the bytes, since `warren diff ID > x.patch` must apply. */
static int print_diff(struct client *c, const char *id, bool raw)
{
	_cleanup_free_ char *path = wr_asprintf("/sessions/%s/diff", id);
	if (!path)
		return client_exit(c, -ENOMEM, NULL);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	struct wr_error *err = NULL;
	int r = client_get_bytes(c, path, "text/x-diff", &text, &len, &err);
	if (r < 0)
		return client_exit(c, r, err);
	if (!raw && isatty(STDOUT_FILENO)) {
		char *shown = client_visible(text, len, false, &len);
		if (!shown)
			return client_exit(c, -ENOMEM, NULL);
		free(text);
		text = shown;
	}
	if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0)
		return client_exit(c, errno ? -errno : -EIO, NULL);
	return CLIENT_EXIT_OK;
}

/* "src/main.c  +12 -3" per file (binary files say so), the counts
 * aligned, and a summary. */
static int print_stat(const json_t *result)
{
	json_t *files = json_object_get(result, "files");
	size_t width = 0, num_width = 1, i;
	json_t *f;
	json_array_foreach(files, i, f)
	{
		_cleanup_free_ char *path =
		    client_clean(client_or(client_json_str(f, "path"), "?"));
		size_t w = path ? strlen(path) : 1;
		if (w > width)
			width = w;
		char n[32];
		int k = snprintf(n, sizeof(n), "%lld",
				 (long long)client_json_int(f, "additions", 0));
		if (k > 0 && (size_t)k > num_width)
			num_width = (size_t)k;
	}
	json_array_foreach(files, i, f)
	{
		_cleanup_free_ char *path =
		    client_clean(client_or(client_json_str(f, "path"), "?"));
		if (!path)
			return -ENOMEM;
		if (json_is_true(json_object_get(f, "binary")))
			printf("%-*s  binary\n", (int)width, path);
		else
			printf("%-*s  +%-*lld -%lld\n", (int)width, path,
			       (int)num_width,
			       (long long)client_json_int(f, "additions", 0),
			       (long long)client_json_int(f, "deletions", 0));
	}
	size_t n = json_array_size(files);
	printf("%zu file%s changed, +%lld -%lld\n", n, n == 1 ? "" : "s",
	       (long long)client_json_int(result, "additions", 0),
	       (long long)client_json_int(result, "deletions", 0));
	return fflush(stdout) == 0 && !ferror(stdout) ? 0
						      : (errno ? -errno : -EIO);
}

/* --stat and --json: outcome.result of the session. */
static int print_result(struct client *c, const char *id, bool show_stat)
{
	_cleanup_free_ char *path = wr_asprintf("/sessions/%s", id);
	if (!path)
		return client_exit(c, -ENOMEM, NULL);
	json_t *session = NULL;
	struct wr_error *err = NULL;
	int r = client_get(c, path, &session, &err);
	if (r < 0)
		return client_exit(c, r, err);
	json_t *result =
	    json_object_get(json_object_get(session, "outcome"), "result");
	if (!json_is_object(result)) {
		_cleanup_free_ char *state = client_clean(
		    client_or(client_json_str(session, "state"), "?"));
		_cleanup_free_ char *shown = client_clean(c->args[0]);
		wr_error_set(&err, 0,
			     "session %s has no result (it is %s): a "
			     "session has one once it reaches review",
			     shown ? shown : "?", state ? state : "?");
		json_decref(session);
		return client_exit(c, -EPROTO, err);
	}
	if (show_stat && !c->json)
		r = print_stat(result);
	else
		r = client_print_json(result);
	json_decref(session);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

int client_cmd_diff(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "diff",
	    .usage = diff_usage,
	    .options = diff_options,
	    .on_option = on_option,
	};
	struct diff_opts o = {0};
	int code = client_parse(c, &verb, &o, argc, argv);
	if (code != CLIENT_CONTINUE)
		return code;
	code = client_check_args(c, 1, 1, "session ID");
	if (code != CLIENT_CONTINUE)
		return code;

	_cleanup_free_ char *id = client_escape(c->args[0]);
	if (!id)
		return client_exit(c, -ENOMEM, NULL);
	if (o.stat || c->json)
		return print_result(c, id, o.stat);
	return print_diff(c, id, o.raw);
}

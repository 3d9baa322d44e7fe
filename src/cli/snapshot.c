/* snapshot.c - `warren snapshot build|list|show|rm|gc|verify` (push and
 * pull: src/cli/registry/main.c, its own executable). */
#include "cli/cli.h"

#include "snapshot/build.h"
#include "snapshot/git.h"
#include "snapshot/refresh.h"
#include "snapshot/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/parse.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char snapshot_usage[] =
    "usage: warren snapshot build REPO [--ref REF] [--rebuild-deps] [--json]\n"
    "                                  [--egress-config FILE]\n"
    "       warren snapshot refresh REPO [--ref REF] [--max-age DURATION]\n"
    "                                    [--max-behind N] [--json]\n"
    "                                    [--egress-config FILE]\n"
    "       warren snapshot list [REPO] [--json]\n"
    "       warren snapshot show ID [--json]\n"
    "       warren snapshot rm ID\n"
    "       warren snapshot gc [--blobs FILE [--keep ID]...\n"
    "                          [--store URL | --config FILE]] [--dry-run] "
    "[--json]\n"
    "       warren snapshot verify ID [--json]\n"
    "       warren snapshot push ID --blobs FILE [--json]\n"
    "       warren snapshot pull ID --blobs FILE [--cache-max BYTES] [--json]\n"
    "options: --data DIR   the data directory (default $WARREN_HOME, else "
    "./.warren)\n"
    "         --quiet      no progress output (build)\n"
    "         --egress-config FILE  deny rules for the build's egress proxy\n"
    "                      (the server configuration's \"egress\" object)\n"
    "         --repo-name NAME  the repository's registered name, for the\n"
    "                      secrets granted to some repositories only\n"
    "         --backend NAME       the build steps' sandboxes: native (default)\n"
    "                              or gvisor, unless the spec's\n"
    "                              customizations.warren.backend says\n"
    "         --hung-after DURATION  a build step that prints nothing this\n"
    "                      long is stopped as hung (default 10m)\n";

struct snap_cli {
	const char *max_age;
	const char *max_behind;
	const char *data;
	const char *ref;
	const char *egress_config;
	const char *repo_name;
	const char *hung_after;
	const char *backend; /* the steps' backend unless the spec says */
	bool json;
	bool quiet;
	bool rebuild_deps;
	char **args;
	int n_args;
};

static int parse(int argc, char **argv, const char *verb, struct snap_cli *c)
{
	static const struct option opts[] = {
	    {"data", required_argument, NULL, 'd'},
	    {"ref", required_argument, NULL, 'r'},
	    {"json", no_argument, NULL, 'j'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"rebuild-deps", no_argument, NULL, 'R'},
	    {"max-age", required_argument, NULL, 'A'},
	    {"max-behind", required_argument, NULL, 'B'},
	    {"egress-config", required_argument, NULL, 'E'},
	    {"repo-name", required_argument, NULL, 'N'},
	    {"hung-after", required_argument, NULL, 'H'},
	    {"backend", required_argument, NULL, 'K'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	memset(c, 0, sizeof(*c));
	optind = 1;
	opterr = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'd': c->data = optarg; break;
		case 'r': c->ref = optarg; break;
		case 'j': c->json = true; break;
		case 'q': c->quiet = true; break;
		case 'R': c->rebuild_deps = true; break;
		case 'A': c->max_age = optarg; break;
		case 'B': c->max_behind = optarg; break;
		case 'E': c->egress_config = optarg; break;
		case 'N': c->repo_name = optarg; break;
		case 'H': c->hung_after = optarg; break;
		case 'K': c->backend = optarg; break;
		case 'h': fputs(snapshot_usage, stdout); exit(0);
		case ':':
			fprintf(
			    stderr,
			    "warren snapshot %s: option '%s' needs a value\n",
			    verb, argv[optind - 1]);
			return -1;
		default:
			fprintf(stderr,
				"warren snapshot %s: unknown option '%s'\n",
				verb, argv[optind - 1]);
			return -1;
		}
	}
	c->args = argv + optind;
	c->n_args = argc - optind;
	return 0;
}

static char *data_dir(const struct snap_cli *c)
{
	if (c->data) {
		char real[4096];
		if (realpath(c->data, real))
			return wr_strdup(real);
		return wr_strdup(c->data);
	}
	return snap_default_data_dir();
}

static void print_manifest(const struct snap_manifest *m)
{
	printf("id        %s\n", m->id);
	printf("repo      %s\n", m->repo ? m->repo : "-");
	printf("ref       %s\n", m->ref ? m->ref : "-");
	printf("commit    %s\n", m->commit ? m->commit : "-");
	time_t created = (time_t)(m->created_ms / 1000);
	char when[64];
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime(&created));
	printf("created   %s\n", when);
	printf("status    %s\n", m->status ? m->status : "-");
	for (size_t i = 0; i < m->n_layers; i++)
		printf("layer     %s  %-5s %llu bytes\n", m->layers[i].id,
		       m->layers[i].role ? m->layers[i].role : "-",
		       (unsigned long long)m->layers[i].bytes);
	for (size_t i = 0; i < m->n_timings; i++)
		printf("time      %-10s %9.1f ms\n", m->timings[i].phase,
		       m->timings[i].ms);
	for (size_t i = 0; i < m->n_lockfiles; i++)
		printf("lockfile  %s  %.12s\n", m->lockfiles[i].path,
		       m->lockfiles[i].sha256);
}

static char *self_exe(void)
{
	char buf[4096];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return wr_strdup(buf);
}

/* Build options from the command line; data and warren are the strings
 * o borrows (caller frees). */
static int build_opts(const struct snap_cli *c, struct snap_build_opts *o,
		      char **data, char **warren)
{
	uint64_t hung_ms = 0;
	if (c->hung_after &&
	    (wr_parse_duration(c->hung_after, &hung_ms) < 0 || hung_ms == 0)) {
		fprintf(stderr, "warren snapshot: --hung-after '%s': expected a "
				"duration (\"90s\", \"10m\")\n",
			c->hung_after);
		return -EINVAL;
	}
	enum sandbox_backend backend = SANDBOX_BACKEND_NATIVE;
	if (c->backend && sandbox_backend_parse(c->backend, &backend) < 0) {
		fprintf(stderr, "warren snapshot: --backend '%s': expected "
				"native or gvisor\n",
			c->backend);
		return -EINVAL;
	}
	*data = data_dir(c);
	*warren = self_exe();
	if (!*data || !*warren)
		return -ENOMEM;
	*o = (struct snap_build_opts){
	    .data_dir = *data,
	    .repo = c->args[0],
	    .ref = c->ref,
	    .warren = *warren,
	    .progress_fd = c->quiet ? -1 : STDERR_FILENO,
	    .rebuild_deps = c->rebuild_deps,
	    .egress_config = c->egress_config,
	    .repo_name = c->repo_name,
	    .hung_after_ms = hung_ms,
	    .backend = backend,
	};
	return 0;
}

static int cmd_build(int argc, char **argv)
{
	struct snap_cli c;
	if (parse(argc, argv, "build", &c) < 0)
		return WR_EXIT_USAGE;
	if (c.n_args != 1) {
		fprintf(stderr,
			"warren snapshot build: expected one REPO (a path "
			"or a git URL)\n");
		return WR_EXIT_USAGE;
	}
	_cleanup_free_ char *data = NULL, *warren = NULL;
	struct snap_build_opts o;
	int bo = build_opts(&c, &o, &data, &warren);
	if (bo < 0)
		return bo == -EINVAL ? WR_EXIT_USAGE : WR_EXIT_FAILURE;
	struct wr_error *err = NULL;
	struct snap_manifest *m = NULL;
	if (snap_build(&o, &m, &err) < 0)
		return cli_snapshot_fail("build", err);
	if (c.json)
		cli_print_json(snap_manifest_to_json(m));
	else
		printf("%s\n", m->id);
	snap_manifest_free(m);
	return 0;
}

/* `refresh`: build when the ref moved past the newest snapshot; with a
 * policy (--max-age, --max-behind), only when the newest is beyond it. */
static int cmd_refresh(int argc, char **argv)
{
	struct snap_cli c;
	if (parse(argc, argv, "refresh", &c) < 0)
		return WR_EXIT_USAGE;
	if (c.n_args != 1) {
		fprintf(stderr, "warren snapshot refresh: expected one REPO\n");
		return WR_EXIT_USAGE;
	}
	struct snap_staleness policy = {0};
	uint64_t v;
	if (c.max_age) {
		if (wr_parse_duration(c.max_age, &v) < 0) {
			fprintf(stderr,
				"warren snapshot refresh: --max-age '%s': "
				"expected a duration like 30m\n",
				c.max_age);
			return WR_EXIT_USAGE;
		}
		policy.max_age_ms = (int64_t)v;
	}
	if (c.max_behind) {
		if (wr_parse_uint(c.max_behind, 1, 1000000, &v) < 0) {
			fprintf(stderr,
				"warren snapshot refresh: --max-behind "
				"'%s': expected a number of commits\n",
				c.max_behind);
			return WR_EXIT_USAGE;
		}
		policy.max_commits_behind = (int)v;
	}
	_cleanup_free_ char *data = NULL, *warren = NULL;
	struct snap_build_opts o;
	int bo = build_opts(&c, &o, &data, &warren);
	if (bo < 0)
		return bo == -EINVAL ? WR_EXIT_USAGE : WR_EXIT_FAILURE;
	struct wr_error *err = NULL;
	struct snap_refresh_result res;
	bool policy_set = c.max_age || c.max_behind;
	if (snap_refresh(&o, &policy, policy_set, &res, &err) < 0)
		return cli_snapshot_fail("refresh", err);
	if (c.json) {
		json_t *j =
		    json_pack("{s:s, s:i, s:I, s:b}", "before",
			      snap_freshness_name(res.before), "commits_behind",
			      res.commits_behind, "age_ms",
			      (json_int_t)res.age_ms, "built", res.built);
		if (j)
			json_object_set_new(
			    j, "snapshot", snap_manifest_to_json(res.manifest));
		cli_print_json(j);
	} else {
		printf("%s %s (newest was %s, %d commit%s behind)\n",
		       res.built ? "built" : "kept", res.manifest->id,
		       snap_freshness_name(res.before), res.commits_behind,
		       res.commits_behind == 1 ? "" : "s");
	}
	snap_refresh_result_clear(&res);
	return 0;
}

static int open_store(const struct snap_cli *c, struct snap_store **store,
		      struct wr_error **err)
{
	_cleanup_free_ char *data = data_dir(c);
	if (!data)
		return wr_error_set(err, ENOMEM, "data directory");
	return snap_store_open(data, store, err);
}

static int cmd_list(int argc, char **argv)
{
	struct snap_cli c;
	if (parse(argc, argv, "list", &c) < 0 || c.n_args > 1)
		return WR_EXIT_USAGE;
	struct wr_error *err = NULL;
	struct snap_store *store = NULL;
	struct snap_manifest **ms = NULL;
	size_t n = 0;
	_cleanup_free_ char *repo =
	    c.n_args ? git_repo_canonical(c.args[0]) : NULL;
	if (open_store(&c, &store, &err) < 0 ||
	    snap_store_list(store, repo, &ms, &n, &err) < 0) {
		snap_store_close(store);
		return cli_snapshot_fail("list", err);
	}
	if (err) { /* corrupt manifests were skipped: say so */
		fprintf(stderr, "warren snapshot list: warning: %s\n",
			err->msg);
		wr_error_free(err);
		err = NULL;
	}
	if (c.json) {
		json_t *arr = json_array();
		for (size_t i = 0; i < n; i++)
			json_array_append_new(arr,
					      snap_manifest_to_json(ms[i]));
		cli_print_json(arr);
	} else {
		printf("%-14s %-10s %-20s %-8s %s\n", "ID", "COMMIT", "CREATED",
		       "STATUS", "REPO");
		for (size_t i = 0; i < n; i++) {
			time_t created = (time_t)(ms[i]->created_ms / 1000);
			char when[32];
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S",
				 gmtime(&created));
			printf("%-14.12s %-10.10s %-20s %-8s %s\n", ms[i]->id,
			       ms[i]->commit ? ms[i]->commit : "-", when,
			       ms[i]->status ? ms[i]->status : "-",
			       ms[i]->repo ? ms[i]->repo : "-");
		}
	}
	snap_manifest_free_array(ms, n);
	snap_store_close(store);
	return 0;
}

static int cmd_show(int argc, char **argv)
{
	struct snap_cli c;
	if (parse(argc, argv, "show", &c) < 0 || c.n_args != 1) {
		fprintf(stderr, "usage: warren snapshot show ID [--json]\n");
		return WR_EXIT_USAGE;
	}
	struct wr_error *err = NULL;
	struct snap_store *store = NULL;
	struct snap_manifest *m = NULL;
	if (open_store(&c, &store, &err) < 0 ||
	    snap_store_get(store, c.args[0], &m, &err) < 0) {
		snap_store_close(store);
		return cli_snapshot_fail("show", err);
	}
	if (c.json)
		cli_print_json(snap_manifest_to_json(m));
	else
		print_manifest(m);
	snap_manifest_free(m);
	snap_store_close(store);
	return 0;
}

static int cmd_rm(int argc, char **argv)
{
	struct snap_cli c;
	if (parse(argc, argv, "rm", &c) < 0 || c.n_args < 1) {
		fprintf(stderr, "usage: warren snapshot rm ID...\n");
		return WR_EXIT_USAGE;
	}
	struct wr_error *err = NULL;
	struct snap_store *store = NULL;
	if (open_store(&c, &store, &err) < 0)
		return cli_snapshot_fail("rm", err);
	int ret = 0;
	for (int i = 0; i < c.n_args; i++) {
		if (snap_store_remove(store, c.args[i], &err) < 0) {
			ret = cli_snapshot_fail("rm", err);
			err = NULL;
		}
	}
	snap_store_close(store);
	return ret;
}

static int cmd_gc(int argc, char **argv)
{
	struct snap_cli c;
	if (parse(argc, argv, "gc", &c) < 0 || c.n_args != 0)
		return WR_EXIT_USAGE;
	struct wr_error *err = NULL;
	struct snap_store *store = NULL;
	if (open_store(&c, &store, &err) < 0)
		return cli_snapshot_fail("gc", err);
	/* stale sandbox records first: their layers are not in use */
	sandbox_reap_stale(NULL);
	_cleanup_free_ char *layers =
	    wr_asprintf("%s/layers", snap_store_dir(store));
	size_t n_in_use = 0;
	char **in_use =
	    layers ? sandbox_layers_in_use(layers, &n_in_use) : NULL;
	size_t removed = 0;
	uint64_t bytes = 0;
	int r = snap_store_gc(store, (const char *const *)in_use, n_in_use,
			      &removed, &bytes, &err);
	for (size_t i = 0; i < n_in_use; i++)
		free(in_use[i]);
	free(in_use);
	snap_store_close(store);
	if (r < 0)
		return cli_snapshot_fail("gc", err);
	if (c.json)
		cli_print_json(json_pack("{s:I, s:I, s:I}", "removed_layers",
				     (json_int_t)removed, "removed_bytes",
				     (json_int_t)bytes, "layers_in_use",
				     (json_int_t)n_in_use));
	else
		printf("removed %zu layer%s (%llu bytes); %zu in use by "
		       "sandboxes\n",
		       removed, removed == 1 ? "" : "s",
		       (unsigned long long)bytes, n_in_use);
	return 0;
}

static int cmd_verify(int argc, char **argv)
{
	struct snap_cli c;
	if (parse(argc, argv, "verify", &c) < 0 || c.n_args != 1) {
		fprintf(stderr, "usage: warren snapshot verify ID [--json]\n");
		return WR_EXIT_USAGE;
	}
	struct wr_error *err = NULL;
	struct snap_store *store = NULL;
	struct snap_verify_result res = {0};
	if (open_store(&c, &store, &err) < 0 ||
	    snap_store_verify(store, c.args[0], &res, &err) < 0) {
		snap_store_close(store);
		return cli_snapshot_fail("verify", err);
	}
	if (c.json) {
		json_t *bad = json_array();
		for (size_t i = 0; i < res.n_bad; i++)
			json_array_append_new(bad, json_string(res.bad_ids[i]));
		cli_print_json(json_pack("{s:b, s:I, s:o}", "ok", res.n_bad == 0,
				     "layers", (json_int_t)res.n_layers,
				     "bad_layers", bad));
	} else if (res.n_bad == 0) {
		printf("ok: %zu layer%s match their recorded hashes\n",
		       res.n_layers, res.n_layers == 1 ? "" : "s");
	} else {
		for (size_t i = 0; i < res.n_bad; i++)
			printf("MODIFIED layer %s\n", res.bad_ids[i]);
	}
	int code = res.n_bad == 0 ? 0 : 1;
	snap_verify_result_clear(&res);
	snap_store_close(store);
	return code;
}

int cmd_snapshot(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(snapshot_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? WR_EXIT_USAGE : 0;
	}
	const char *sub = argv[1];
	if (!strcmp(sub, "build"))
		return cmd_build(argc - 1, argv + 1);
	if (!strcmp(sub, "refresh"))
		return cmd_refresh(argc - 1, argv + 1);
	if (!strcmp(sub, "list") || !strcmp(sub, "ls"))
		return cmd_list(argc - 1, argv + 1);
	if (!strcmp(sub, "show"))
		return cmd_show(argc - 1, argv + 1);
	if (!strcmp(sub, "rm"))
		return cmd_rm(argc - 1, argv + 1);
	if (!strcmp(sub, "gc"))
		return cmd_gc(argc - 1, argv + 1);
	if (!strcmp(sub, "verify"))
		return cmd_verify(argc - 1, argv + 1);
	fprintf(stderr, "warren snapshot: unknown command '%s'\n", sub);
	fputs(snapshot_usage, stderr);
	return WR_EXIT_USAGE;
}

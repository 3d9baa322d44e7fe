/* main.c - warren-registry: `warren snapshot push|pull`, which `warren`
 * execs with its own arguments (like warren-serve) so that the lean static
 * `warren` links neither libcurl nor libarchive. A thin layer over
 * registry/registry.h.
 *
 *   warren snapshot push SNAPSHOT --blobs FILE [--data DIR] [--json]
 *   warren snapshot pull SNAPSHOT --blobs FILE [--data DIR] [--json]
 *                                 [--cache-max BYTES]
 *   warren snapshot gc [--blobs FILE] [--keep ID]... [--dry-run]
 *                      [--store URL | --config FILE] [--data DIR] [--json]
 *
 * gc is the local gc of `warren snapshot gc` (every layer no snapshot
 * references, their blob records) and, with --blobs, the registry's
 * (registry/gc.c), with --store or --config over what the control plane's
 * store references too (refs.c); `warren` execs it for gc with --blobs,
 * --keep, --store, --config or --dry-run.
 *
 * FILE holds the "blobs" object's fields ({"registry", "repository",
 * "username", "password_file"}), or an object with a "blobs" key (the
 * server's configuration file does); besides them, "cache_max" (bytes, or
 * a size such as "10G") caps the layer cache, which --cache-max
 * overrides. */
#include "blobs/blobs.h"
#include "cli/cli.h"
#include "cli/registry/refs.h"
#include "registry/registry.h"
#include "sandbox/sandbox.h"
#include "snapshot/build.h" /* snap_data_dir */
#include "snapshot/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/json_alloc.h"
#include "util/parse.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the server's configuration file may be the FILE */
#define BLOBS_FILE_MAX (1u << 20)

static const char usage_text[] =
    "usage: warren snapshot push SNAPSHOT --blobs FILE [--data DIR] [--json]\n"
    "       warren snapshot pull SNAPSHOT --blobs FILE [--data DIR] [--json]\n"
    "                            [--cache-max BYTES]\n"
    "       warren snapshot gc [--blobs FILE] [--keep ID]... [--dry-run]\n"
    "                          [--store URL | --config FILE] [--data DIR]\n"
    "                          [--json]\n"
    "options: --blobs FILE      the registry: a JSON file with the \"blobs\"\n"
    "                           object's fields (registry, repository,\n"
    "                           username, password_file), or with a "
    "\"blobs\" key;\n"
    "                           \"cache_max\" there caps the layer cache\n"
    "         --data DIR        the data directory (default $WARREN_HOME,\n"
    "                           else ./.warren)\n"
    "         --cache-max BYTES after a pull, evict unreferenced layers,\n"
    "                           least recently used first, down to BYTES\n"
    "         --keep ID         gc: a snapshot the registry keeps although\n"
    "                           this data directory lacks it (another host's)\n"
    "         --store URL       gc: the control plane's store (as warren\n"
    "                           serve's --store): its snapshots and its\n"
    "                           sessions' checkpoints are referenced, and\n"
    "                           checkpoint tags it does not keep go\n"
    "         --config FILE     gc: the store of warren serve's\n"
    "                           configuration (its \"store\", else\n"
    "                           DATA/warren.db)\n"
    "         --dry-run         gc: say what would go, remove nothing\n"
    "         --json            a machine-readable answer\n";

/* --keep: at most this many */
#define KEEP_MAX 4096

struct opts {
	const char *verb;
	const char *snapshot;
	const char *data;
	const char *blobs;
	const char *cache_max;
	const char *store;
	const char *config;
	const char **keep;
	size_t n_keep;
	bool json;
	bool dry_run;
};

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option long_opts[] = {
	    {"data", required_argument, NULL, 'd'},
	    {"blobs", required_argument, NULL, 'b'},
	    {"cache-max", required_argument, NULL, 'c'},
	    {"keep", required_argument, NULL, 'k'},
	    {"store", required_argument, NULL, 's'},
	    {"config", required_argument, NULL, 'C'},
	    {"dry-run", no_argument, NULL, 'n'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	memset(o, 0, sizeof(*o));
	/* argv: warren-registry snapshot VERB [SNAPSHOT] [options] */
	if (argc < 3 || strcmp(argv[1], "snapshot")) {
		fputs(usage_text, stderr);
		return -1;
	}
	o->verb = argv[2];
	bool gc = !strcmp(o->verb, "gc");
	/* every --keep fits: argc bounds them */
	o->keep = wr_calloc((size_t)argc, sizeof(*o->keep));
	if (!o->keep)
		return -1;
	optind = 3;
	int ch;
	while ((ch = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
		switch (ch) {
		case 'd': o->data = optarg; break;
		case 'b': o->blobs = optarg; break;
		case 'c': o->cache_max = optarg; break;
		case 'k': o->keep[o->n_keep++] = optarg; break;
		case 's': o->store = optarg; break;
		case 'C': o->config = optarg; break;
		case 'n': o->dry_run = true; break;
		case 'j': o->json = true; break;
		case 'h': fputs(usage_text, stdout); exit(0);
		default: fputs(usage_text, stderr); return -1;
		}
	}
	if (argc - optind != (gc ? 0 : 1)) {
		fprintf(stderr, "warren snapshot %s: expected %s\n", o->verb,
			gc ? "no argument" : "one SNAPSHOT");
		fputs(usage_text, stderr);
		return -1;
	}
	o->snapshot = gc ? NULL : argv[optind];
	if (!o->blobs && !gc) {
		fprintf(stderr, "warren snapshot %s: --blobs FILE is needed\n",
			o->verb);
		return -1;
	}
	if (o->cache_max && strcmp(o->verb, "pull")) {
		fprintf(stderr, "warren snapshot %s: --cache-max is for pull\n",
			o->verb);
		return -1;
	}
	if ((o->n_keep || o->dry_run) && !gc) {
		fprintf(stderr,
			"warren snapshot %s: --keep and --dry-run are for gc\n",
			o->verb);
		return -1;
	}
	if ((o->store || o->config) && !gc) {
		fprintf(stderr,
			"warren snapshot %s: --store and --config are for gc\n",
			o->verb);
		return -1;
	}
	if (o->store && o->config) {
		fprintf(stderr, "warren snapshot gc: --store or --config, not "
				"both\n");
		return -1;
	}
	if ((o->store || o->config) && !o->blobs) {
		fprintf(stderr, "warren snapshot gc: --store and --config need "
				"--blobs\n");
		return -1;
	}
	if (o->n_keep && !o->blobs) {
		fprintf(stderr, "warren snapshot gc: --keep needs --blobs\n");
		return -1;
	}
	if (o->n_keep > KEEP_MAX) {
		fprintf(stderr, "warren snapshot gc: more than %d --keep\n",
			KEEP_MAX);
		return -1;
	}
	return 0;
}

/* The blobs configuration and the cache cap (UINT64_MAX: none) from
 * FILE. */
static int read_blobs_file(const char *path, struct blobs_config *cfg,
			   uint64_t *cache_max, struct wr_error **err)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = wr_read_file(path, BLOBS_FILE_MAX, &text, &len);
	if (r < 0)
		return wr_error_input(err, -r, "--blobs %s", path);
	json_error_t jerr;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return wr_error_input(err, EINVAL, "--blobs %s: %d:%d: %s",
				      path, jerr.line, jerr.column,
				      doc ? "expected an object" : jerr.text);
	}
	json_t *fields = json_object_get(doc, "blobs");
	fields = json_deep_copy(fields ? fields : doc);
	json_t *cap = json_object_get(doc, "cache_max");
	json_incref(cap);
	if (fields)
		json_object_del(fields, "cache_max");
	json_decref(doc);
	if (!fields) {
		json_decref(cap);
		return wr_error_set(err, ENOMEM, "--blobs %s", path);
	}
	r = 0;
	*cache_max = UINT64_MAX;
	if (json_is_integer(cap) && json_integer_value(cap) >= 0)
		*cache_max = (uint64_t)json_integer_value(cap);
	else if (json_is_string(cap)) {
		if (wr_parse_size(json_string_value(cap), cache_max) < 0)
			r = wr_error_input(err, EINVAL,
					   "--blobs %s: cache_max: '%s' is "
					   "not a size",
					   path, json_string_value(cap));
	} else if (cap) {
		r = wr_error_input(err, EINVAL,
				   "--blobs %s: cache_max: expected a size",
				   path);
	}
	json_decref(cap);
	if (r == 0 && (r = blobs_config_parse(fields, cfg, err)) < 0)
		wr_error_wrap(err, "--blobs %s", path);
	json_decref(fields);
	return r;
}

static int do_push(struct snap_store *store, struct blobs_client *c,
		   const struct opts *o, struct wr_error **err)
{
	struct reg_push_result res;
	int r = reg_push(store, c, o->snapshot, &res, err);
	if (r < 0)
		return r;
	if (o->json)
		cli_print_json(json_pack(
		    "{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:f}", "snapshot",
		    res.snapshot, "manifest_digest", res.manifest_digest,
		    "layers", (json_int_t)res.layers, "layers_uploaded",
		    (json_int_t)res.layers_uploaded, "layers_archived",
		    (json_int_t)res.layers_archived, "bytes_uploaded",
		    (json_int_t)res.bytes_uploaded, "bytes_layers",
		    (json_int_t)res.bytes_layers, "ms", res.ms));
	else
		printf("%s\npushed snapshot %s: %zu layer%s, %zu uploaded "
		       "(%" PRIu64 " bytes of %" PRIu64 "), %.1f ms\n",
		       res.manifest_digest, res.snapshot, res.layers,
		       res.layers == 1 ? "" : "s", res.layers_uploaded,
		       res.bytes_uploaded, res.bytes_layers, res.ms);
	return 0;
}

/* The ids of the layers live sandboxes use (free with free_in_use). */
static char **layers_in_use(struct snap_store *store, size_t *n)
{
	/* stale records first: their layers are not in use */
	sandbox_reap_stale(NULL);
	_cleanup_free_ char *layers =
	    wr_asprintf("%s/layers", snap_store_dir(store));
	*n = 0;
	return layers ? sandbox_layers_in_use(layers, n) : NULL;
}

static void free_in_use(char **in_use, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(in_use[i]);
	free(in_use);
}

static json_t *items_json(const struct reg_gc_item *v, size_t n,
			  const char *name_key)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		json_t *o = json_pack("{s:s, s:I}", "digest", v[i].digest,
				      "bytes", (json_int_t)v[i].bytes);
		if (o && v[i].name[0])
			json_object_set_new(o, name_key,
					    json_string(v[i].name));
		json_array_append_new(a, o);
	}
	return a;
}

static void items_print(const char *verb, const char *kind,
			const struct reg_gc_item *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%s %s %s%s%s%s (%" PRIu64 " bytes)\n", verb, kind,
		       v[i].digest, v[i].name[0] ? " (" : "",
		       v[i].name[0] ? v[i].name : "", v[i].name[0] ? ")" : "",
		       v[i].bytes);
}

/* The registry's gc (with c), then the local one: layers no snapshot
 * references, which trims the layer cache to what snapshots use. */
static int do_gc(struct snap_store *store, struct blobs_client *c,
		 const struct opts *o, const char *data_dir,
		 struct wr_error **err)
{
	struct reg_gc_result res = {0};
	_cleanup_free_ char *url = NULL;
	struct gc_store_source src;
	int r = 0;
	if (o->store || o->config) {
		if ((r = gc_store_url(o->store, o->config, data_dir, &url,
				      err)) < 0)
			return r;
		gc_store_source_init(&src, url);
	}
	if (c &&
	    (r = reg_gc(store, c, o->keep, o->n_keep, url ? &src.base : NULL,
			o->dry_run, &res, err)) < 0)
		return r;
	size_t n_in_use = 0;
	char **in_use = layers_in_use(store, &n_in_use);
	size_t removed = 0;
	uint64_t removed_bytes = 0;
	struct reg_trim_result trim = {0};
	if (!o->dry_run)
		r = snap_store_gc(store, (const char *const *)in_use, n_in_use,
				  &removed, &removed_bytes, err);
	/* dry run: what gc would take; else the records of what it took */
	if (r == 0)
		r = reg_cache_trim(store, 0, (const char *const *)in_use,
				   n_in_use, o->dry_run, &trim, err);
	free_in_use(in_use, n_in_use);
	if (r < 0) {
		reg_gc_result_clear(&res);
		return r;
	}
	if (o->dry_run) {
		removed = trim.evicted;
		removed_bytes = trim.evicted_bytes;
	}
	if (o->json) {
		json_t *doc = json_pack(
		    "{s:b, s:{s:I, s:I, s:I}}", "dry_run", o->dry_run, "local",
		    "removed_layers", (json_int_t)removed, "removed_bytes",
		    (json_int_t)removed_bytes, "layers_in_use",
		    (json_int_t)n_in_use);
		if (doc && c)
			json_object_set_new(
			    doc, "registry",
			    json_pack(
				"{s:o, s:o, s:I, s:I, s:I, s:I, s:b}",
				"manifests",
				items_json(res.manifests, res.n_manifests,
					   "snapshot"),
				"blobs",
				items_json(res.blobs, res.n_blobs, "layer"),
				"bytes", (json_int_t)res.bytes, "kept",
				(json_int_t)res.kept, "checkpoints_kept",
				(json_int_t)res.checkpoints_kept, "other_tags",
				(json_int_t)res.other_tags, "store",
				res.store));
		cli_print_json(doc);
	} else {
		const char *verb = o->dry_run ? "would delete" : "deleted";
		if (c) {
			items_print(verb, "manifest", res.manifests,
				    res.n_manifests);
			items_print(verb, "blob", res.blobs, res.n_blobs);
			printf("registry: %s %zu manifest%s and %zu blob%s "
			       "(%" PRIu64 " bytes); kept %zu snapshot%s",
			       verb, res.n_manifests,
			       res.n_manifests == 1 ? "" : "s", res.n_blobs,
			       res.n_blobs == 1 ? "" : "s", res.bytes, res.kept,
			       res.kept == 1 ? "" : "s");
			if (res.store)
				printf(", %zu checkpoint%s",
				       res.checkpoints_kept,
				       res.checkpoints_kept == 1 ? "" : "s");
			printf("%s\n", res.other_tags ? " and other tags" : "");
		}
		printf("local: %s %zu layer%s (%" PRIu64 " bytes); %zu in use "
		       "by sandboxes\n",
		       o->dry_run ? "would remove" : "removed", removed,
		       removed == 1 ? "" : "s", removed_bytes, n_in_use);
	}
	reg_gc_result_clear(&res);
	return 0;
}

/* cache_max: the cap, UINT64_MAX for none */
static int do_pull(struct snap_store *store, struct blobs_client *c,
		   const struct opts *o, uint64_t cache_max,
		   struct wr_error **err)
{
	struct reg_pull_result res;
	int r = reg_pull(store, c, o->snapshot, &res, err);
	if (r < 0)
		return r;
	struct reg_trim_result trim = {0};
	if (cache_max != UINT64_MAX) {
		size_t n_in_use = 0;
		char **in_use = layers_in_use(store, &n_in_use);
		r = reg_cache_trim(store, cache_max,
				   (const char *const *)in_use, n_in_use, false,
				   &trim, err);
		free_in_use(in_use, n_in_use);
		if (r < 0)
			return r;
	}
	if (o->json)
		cli_print_json(json_pack(
		    "{s:s, s:s, s:b, s:I, s:I, s:I, s:f, s:I, s:I, s:I}",
		    "snapshot", o->snapshot, "manifest_digest",
		    res.manifest_digest, "already", res.already, "layers",
		    (json_int_t)res.layers, "layers_fetched",
		    (json_int_t)res.layers_fetched, "bytes_fetched",
		    (json_int_t)res.bytes_fetched, "ms", res.ms, "cache_bytes",
		    (json_int_t)trim.total_bytes, "evicted_layers",
		    (json_int_t)trim.evicted, "evicted_bytes",
		    (json_int_t)trim.evicted_bytes));
	else if (res.already)
		printf("snapshot %s is here already: nothing fetched\n",
		       o->snapshot);
	else
		printf("pulled snapshot %s: %zu layer%s, %zu fetched (%" PRIu64
		       " bytes), %.1f ms\n",
		       o->snapshot, res.layers, res.layers == 1 ? "" : "s",
		       res.layers_fetched, res.bytes_fetched, res.ms);
	if (!o->json && trim.evicted)
		printf("evicted %zu unused layer%s (%" PRIu64
		       " bytes) from the cache\n",
		       trim.evicted, trim.evicted == 1 ? "" : "s",
		       trim.evicted_bytes);
	return 0;
}

int main(int argc, char **argv)
{
	wr_json_alloc_init();
	struct opts o;
	int pr = parse(argc, argv, &o);
	_cleanup_free_ const char **keep = o.keep;
	if (pr < 0)
		return WR_EXIT_USAGE;
	bool push = !strcmp(o.verb, "push"), gc = !strcmp(o.verb, "gc");
	if (!push && !gc && strcmp(o.verb, "pull")) {
		fprintf(stderr, "warren-registry: unknown verb '%s'\n", o.verb);
		return WR_EXIT_USAGE;
	}
	struct wr_error *err = NULL;
	struct blobs_config cfg = {0};
	uint64_t cache_max = UINT64_MAX;
	if (o.blobs && read_blobs_file(o.blobs, &cfg, &cache_max, &err) < 0)
		return cli_snapshot_fail(o.verb, err);
	if (o.cache_max && wr_parse_size(o.cache_max, &cache_max) < 0) {
		blobs_config_clear(&cfg);
		fprintf(stderr,
			"warren snapshot pull: --cache-max: '%s' is not "
			"a size\n",
			o.cache_max);
		return WR_EXIT_USAGE;
	}
	_cleanup_free_ char *dir = snap_data_dir(o.data);
	struct blobs_client *c = NULL;
	struct snap_store *store = NULL;
	int r = dir ? 0 : wr_error_set(&err, ENOMEM, "data directory");
	if (r == 0 && o.blobs)
		r = blobs_client_new(&cfg, &c, &err);
	blobs_config_clear(&cfg);
	if (r == 0)
		r = snap_store_open(dir, &store, &err);
	if (r == 0)
		r = gc	   ? do_gc(store, c, &o, dir, &err)
		    : push ? do_push(store, c, &o, &err)
			   : do_pull(store, c, &o, cache_max, &err);
	snap_store_close(store);
	blobs_client_free(c);
	return r < 0 ? cli_snapshot_fail(o.verb, err) : 0;
}

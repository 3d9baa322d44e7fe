/* main.c - warren-registry: `warren snapshot push|pull`, which `warren`
 * execs with its own arguments (like warren-serve) so that the lean static
 * `warren` links neither libcurl nor libarchive. A thin layer over
 * registry/registry.h.
 *
 *   warren snapshot push SNAPSHOT --blobs FILE [--data DIR] [--json]
 *   warren snapshot pull SNAPSHOT --blobs FILE [--data DIR] [--json]
 *                                 [--cache-max BYTES]
 *
 * FILE holds the "blobs" object's fields ({"registry", "repository",
 * "username", "password_file"}), or an object with a "blobs" key (the
 * server's configuration file does); besides them, "cache_max" (bytes, or
 * a size such as "10G") caps the layer cache, which --cache-max
 * overrides. */
#include "blobs/blobs.h"
#include "cli/cli.h"
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
    "options: --blobs FILE      the registry: a JSON file with the \"blobs\"\n"
    "                           object's fields (registry, repository,\n"
    "                           username, password_file), or with a "
    "\"blobs\" key;\n"
    "                           \"cache_max\" there caps the layer cache\n"
    "         --data DIR        the data directory (default $WARREN_HOME,\n"
    "                           else ./.warren)\n"
    "         --cache-max BYTES after a pull, evict unreferenced layers,\n"
    "                           least recently used first, down to BYTES\n"
    "         --json            a machine-readable answer\n";

struct opts {
	const char *verb;
	const char *snapshot;
	const char *data;
	const char *blobs;
	const char *cache_max;
	bool json;
};

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option long_opts[] = {
	    {"data", required_argument, NULL, 'd'},
	    {"blobs", required_argument, NULL, 'b'},
	    {"cache-max", required_argument, NULL, 'c'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	memset(o, 0, sizeof(*o));
	/* argv: warren-registry snapshot VERB SNAPSHOT [options] */
	if (argc < 3 || strcmp(argv[1], "snapshot")) {
		fputs(usage_text, stderr);
		return -1;
	}
	o->verb = argv[2];
	optind = 3;
	int ch;
	while ((ch = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
		switch (ch) {
		case 'd': o->data = optarg; break;
		case 'b': o->blobs = optarg; break;
		case 'c': o->cache_max = optarg; break;
		case 'j': o->json = true; break;
		case 'h': fputs(usage_text, stdout); exit(0);
		default: fputs(usage_text, stderr); return -1;
		}
	}
	if (argc - optind != 1) {
		fprintf(stderr, "warren snapshot %s: expected one SNAPSHOT\n",
			o->verb);
		fputs(usage_text, stderr);
		return -1;
	}
	o->snapshot = argv[optind];
	if (!o->blobs) {
		fprintf(stderr, "warren snapshot %s: --blobs FILE is needed\n",
			o->verb);
		return -1;
	}
	if (o->cache_max && strcmp(o->verb, "pull")) {
		fprintf(stderr, "warren snapshot %s: --cache-max is for pull\n",
			o->verb);
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
		/* stale records first: their layers are not in use */
		sandbox_reap_stale(NULL);
		_cleanup_free_ char *layers =
		    wr_asprintf("%s/layers", snap_store_dir(store));
		size_t n_in_use = 0;
		char **in_use =
		    layers ? sandbox_layers_in_use(layers, &n_in_use) : NULL;
		r = reg_cache_trim(store, cache_max,
				   (const char *const *)in_use, n_in_use, &trim,
				   err);
		for (size_t i = 0; i < n_in_use; i++)
			free(in_use[i]);
		free(in_use);
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
	if (parse(argc, argv, &o) < 0)
		return WR_EXIT_USAGE;
	bool push = !strcmp(o.verb, "push");
	if (!push && strcmp(o.verb, "pull")) {
		fprintf(stderr, "warren-registry: unknown verb '%s'\n", o.verb);
		return WR_EXIT_USAGE;
	}
	struct wr_error *err = NULL;
	struct blobs_config cfg = {0};
	uint64_t cache_max = UINT64_MAX;
	if (read_blobs_file(o.blobs, &cfg, &cache_max, &err) < 0)
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
	if (r == 0)
		r = blobs_client_new(&cfg, &c, &err);
	blobs_config_clear(&cfg);
	if (r == 0)
		r = snap_store_open(dir, &store, &err);
	if (r == 0)
		r = push ? do_push(store, c, &o, &err)
			 : do_pull(store, c, &o, cache_max, &err);
	snap_store_close(store);
	blobs_client_free(c);
	return r < 0 ? cli_snapshot_fail(o.verb, err) : 0;
}

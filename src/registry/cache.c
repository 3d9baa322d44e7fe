/* cache.c - the blob records of layers (DATA/blobs/<layer id>) and the
 * layer cache's size cap (registry.h). */
#include "registry/registry.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RECORD_MAX 128
/* the layers one trim considers */
#define TRIM_MAX_LAYERS 65536

static char *record_path(const char *data_dir, const char *layer_id)
{
	if (!snap_id_valid(layer_id)) {
		errno = EINVAL;
		return NULL;
	}
	return wr_asprintf("%s/blobs/%s", data_dir, layer_id);
}

int reg_blob_get(const char *data_dir, const char *layer_id,
		 struct reg_blob *out)
{
	_cleanup_free_ char *path = record_path(data_dir, layer_id);
	if (!path)
		return -errno;
	_cleanup_free_ char *text = NULL;
	int r = wr_read_file(path, RECORD_MAX, &text, NULL);
	if (r < 0)
		return r == -ENOENT ? r : -ENOENT;
	struct reg_blob b = {0};
	char digest[BLOBS_DIGEST_MAX + 1];
	uint64_t size;
	if (sscanf(text, "%72s %" SCNu64, digest, &size) != 2 ||
	    !blobs_digest_valid(digest))
		return -ENOENT;
	memcpy(b.digest, digest, strlen(digest) + 1);
	b.size = size;
	*out = b;
	return 0;
}

int reg_blob_put(const char *data_dir, const char *layer_id,
		 const struct reg_blob *b, struct wr_error **err)
{
	_cleanup_free_ char *dir = wr_asprintf("%s/blobs", data_dir);
	_cleanup_free_ char *path = record_path(data_dir, layer_id);
	if (!dir || !path)
		return wr_error_set(err, errno, "record the blob of layer %s",
				    layer_id);
	int r = wr_mkdir_p(dir, 0700);
	if (r < 0)
		return wr_error_set(err, -r, "record the blob of layer %s: %s",
				    layer_id, dir);
	char line[RECORD_MAX];
	snprintf(line, sizeof(line), "%s %" PRIu64 "\n", b->digest, b->size);
	r = wr_write_file_atomic(path, line, strlen(line), 0600, false);
	if (r < 0)
		return wr_error_set(err, -r, "record the blob of layer %s: %s",
				    layer_id, path);
	return 0;
}

void reg_blob_touch(const char *data_dir, const char *layer_id)
{
	_cleanup_free_ char *path = record_path(data_dir, layer_id);
	/* only the LRU order depends on it: a failure is not an error */
	if (path)
		(void)utimensat(AT_FDCWD, path, NULL, 0);
}

struct cached_layer {
	char id[SNAP_ID_LEN + 1];
	uint64_t bytes;
	int64_t last_use_ns;
	bool kept; /* a snapshot references it, or a sandbox uses it */
};

static int cmp_lru(const void *a, const void *b)
{
	const struct cached_layer *x = a, *y = b;
	if (x->last_use_ns != y->last_use_ns)
		return x->last_use_ns < y->last_use_ns ? -1 : 1;
	return strcmp(x->id, y->id);
}

static int64_t mtime_ns(const char *path)
{
	struct stat st;
	if (!path || lstat(path, &st) < 0)
		return 0;
	return (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

/* The layers of DATA, each with its size, last use and whether it is
 * kept. */
static int list_layers(struct snap_store *store, const char *const *in_use,
		       size_t n_in_use, struct cached_layer **out,
		       size_t *n_out, struct wr_error **err)
{
	const char *data = snap_store_dir(store);
	struct snap_manifest **ms = NULL;
	size_t n_ms = 0;
	struct wr_error *lerr = NULL;
	int r = snap_store_list(store, NULL, &ms, &n_ms, &lerr);
	if (r < 0) {
		if (err && !*err)
			*err = lerr;
		else
			wr_error_free(lerr);
		return r;
	}
	/* a manifest that cannot be read may reference anything: then
	 * nothing is evicted (gc keeps what such a manifest names, and
	 * evict rechecks, but the LRU order would be a guess) */
	bool corrupt = r > 0;
	wr_error_free(lerr);
	_cleanup_free_ char *layers_dir = wr_asprintf("%s/layers", data);
	DIR *d = layers_dir ? opendir(layers_dir) : NULL;
	if (!d) {
		snap_manifest_free_array(ms, n_ms);
		return wr_error_set(err, errno ? errno : ENOMEM,
				    "cache: list %s/layers", data);
	}
	struct cached_layer *ls = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	r = 0;
	while ((de = readdir(d))) {
		if (!snap_id_valid(de->d_name))
			continue;
		if (n == TRIM_MAX_LAYERS) {
			r = wr_error_set(err, E2BIG,
					 "cache: more than %d layers in %s",
					 TRIM_MAX_LAYERS, layers_dir);
			break;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			struct cached_layer *grown =
			    wr_realloc(ls, cap * sizeof(*ls));
			if (!grown) {
				r = wr_error_set(err, ENOMEM, "cache");
				break;
			}
			ls = grown;
		}
		struct cached_layer *l = &ls[n];
		memset(l, 0, sizeof(*l));
		memcpy(l->id, de->d_name, SNAP_ID_LEN + 1);
		_cleanup_free_ char *path = snap_store_layer_path(store, l->id);
		_cleanup_free_ char *record =
		    wr_asprintf("%s/blobs/%s", data, l->id);
		if (!path || snap_layer_size(path, &l->bytes, NULL) < 0)
			continue; /* going away under us */
		/* a pushed or pulled layer's last use is its record's; a
		 * layer only built here, when it was published */
		l->last_use_ns = mtime_ns(record);
		if (!l->last_use_ns)
			l->last_use_ns = mtime_ns(path);
		l->kept = corrupt;
		for (size_t i = 0; !l->kept && i < n_in_use; i++)
			l->kept = !strcmp(in_use[i], l->id);
		for (size_t i = 0; !l->kept && i < n_ms; i++)
			for (size_t k = 0; !l->kept && k < ms[i]->n_layers; k++)
				l->kept = !strcmp(ms[i]->layers[k].id, l->id);
		n++;
	}
	closedir(d);
	snap_manifest_free_array(ms, n_ms);
	if (r < 0) {
		free(ls);
		return r;
	}
	*out = ls;
	*n_out = n;
	return 0;
}

/* Removes the records of DATA/blobs whose layer is gone (a plain gc
 * removed it). */
static void records_sweep(struct snap_store *store)
{
	_cleanup_free_ char *dir =
	    wr_asprintf("%s/blobs", snap_store_dir(store));
	DIR *d = dir ? opendir(dir) : NULL;
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!snap_id_valid(de->d_name))
			continue;
		_cleanup_free_ char *layer =
		    snap_store_layer_path(store, de->d_name);
		struct stat st;
		if (layer && lstat(layer, &st) < 0 && errno == ENOENT)
			(void)unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

int reg_cache_trim(struct snap_store *store, uint64_t max,
		   const char *const *in_use, size_t n_in_use, bool dry_run,
		   struct reg_trim_result *res, struct wr_error **err)
{
	struct cached_layer *ls = NULL;
	size_t n = 0;
	int r = list_layers(store, in_use, n_in_use, &ls, &n, err);
	if (r < 0)
		return wr_error_wrap(err, "trim the layer cache");
	struct reg_trim_result out = {0};
	for (size_t i = 0; i < n; i++)
		out.total_bytes += ls[i].bytes;
	if (n)
		qsort(ls, n, sizeof(*ls), cmp_lru);
	const char **doomed = n ? wr_calloc(n, sizeof(*doomed)) : NULL;
	if (n && !doomed) {
		free(ls);
		return wr_error_set(err, ENOMEM, "trim the layer cache");
	}
	size_t n_doomed = 0;
	uint64_t total = out.total_bytes;
	for (size_t i = 0; i < n && total > max; i++) {
		if (ls[i].kept)
			continue;
		doomed[n_doomed++] = ls[i].id;
		total -= ls[i].bytes;
	}
	if (dry_run) {
		/* what would go, not rechecked under the lock */
		out.evicted = n_doomed;
		out.evicted_bytes = out.total_bytes - total;
		free(doomed);
		free(ls);
		*res = out;
		return 0;
	}
	if (n_doomed)
		r = snap_store_evict(store, in_use, n_in_use, doomed, n_doomed,
				     &out.evicted, &out.evicted_bytes, err);
	for (size_t i = 0; r == 0 && i < n_doomed; i++) {
		_cleanup_free_ char *layer =
		    snap_store_layer_path(store, doomed[i]);
		_cleanup_free_ char *record = wr_asprintf(
		    "%s/blobs/%s", snap_store_dir(store), doomed[i]);
		struct stat st;
		/* the record goes with its layer; one the store kept (a
		 * pin, a new reference) stays */
		if (layer && record && lstat(layer, &st) < 0 && errno == ENOENT)
			unlink(record);
	}
	free(doomed);
	free(ls);
	if (r < 0)
		return wr_error_wrap(err, "trim the layer cache");
	records_sweep(store);
	*res = out;
	return 0;
}

/* layer_cache.c - a worker's layer cache under blobs.cache_max.
 *
 * A worker keeps the snapshots it built or pulled in its data directory
 * (DATA/snapshots/<id>.json and their layers in DATA/layers). With
 * "blobs": {"cache_max": SIZE}, after each pull and build the snapshots that the
 * registry holds (every layer has its DATA/blobs record: pushed or pulled,
 * so it can be pulled again) and that nothing here needs are removed,
 * least recently used first, until the layers the remaining snapshots
 * reference add up to at most the cap; then the layers no snapshot
 * references and no live sandbox uses go (`warren snapshot gc --data`,
 * safe beside the running server).
 *
 * Needed, never removed: the snapshot just pulled, the snapshot of every
 * session this server runs, and every snapshot a session resolved in the
 * last LAYER_CACHE_GRACE_MS (its sandbox may not exist yet). A snapshot
 * whose layers are not all in the registry (built here, its push failed)
 * is never removed: it could not come back. Last use: the newest of the
 * server's own record (a session resolved it) and its layers' DATA/blobs
 * records (touched by each push and pull). */
#include "sched/internal.h"

#include "snapshot/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/log.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define LAYER_CACHE_GRACE_MS 10000

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void layer_cache_used(struct control *c, const char *snapshot_id)
{
	if (!c->cfg.blobs || !c->cfg.blobs->cache_max || !snapshot_id)
		return;
	pthread_mutex_lock(&c->builds.mu);
	if (!c->builds.used)
		c->builds.used = json_object();
	if (c->builds.used)
		json_object_set_new(c->builds.used, snapshot_id,
				    json_integer(now_ms()));
	pthread_mutex_unlock(&c->builds.mu);
}

struct cached_snapshot {
	const struct snap_manifest *m;
	int64_t last_use_ms;
	bool needed;	 /* kept whatever the cap */
	bool republish;	 /* every layer is in the registry */
	bool removed;
};

/* ms of the mtime of DATA/blobs/<layer>, 0 when there is no record. */
static int64_t record_ms(const char *data_dir, const char *layer_id)
{
	_cleanup_free_ char *path =
	    wr_asprintf("%s/blobs/%s", data_dir, layer_id);
	struct stat st;
	if (!path || lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	return (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
}

/* Is snapshot id needed by a run of this server, or resolved lately? */
static bool needed(struct control *c, const char *id, const char *keep,
		   int64_t now)
{
	if (keep && !strcmp(id, keep))
		return true;
	bool yes = false;
	pthread_mutex_lock(&c->mu);
	for (struct run *r = c->runs; r && !yes; r = r->next)
		yes = !r->done && !strcmp(r->snapshot_id, id);
	pthread_mutex_unlock(&c->mu);
	if (yes)
		return true;
	pthread_mutex_lock(&c->builds.mu);
	int64_t used =
	    json_integer_value(json_object_get(c->builds.used, id));
	yes = used && now - used < LAYER_CACHE_GRACE_MS;
	pthread_mutex_unlock(&c->builds.mu);
	return yes;
}

static int by_id(const void *a, const void *b)
{
	const struct snap_layer_ref *x = *(const struct snap_layer_ref *const *)a;
	const struct snap_layer_ref *y = *(const struct snap_layer_ref *const *)b;
	return strcmp(x->id, y->id);
}

/* The bytes of the layers the snapshots not removed reference, each
 * layer once (sorted by id; UINT64_MAX when out of memory: over any cap,
 * so nothing more is removed). */
static uint64_t referenced_bytes(const struct cached_snapshot *v, size_t n)
{
	size_t count = 0;
	for (size_t i = 0; i < n; i++)
		if (!v[i].removed)
			count += v[i].m->n_layers;
	if (!count)
		return 0;
	const struct snap_layer_ref **refs = wr_calloc(count, sizeof(*refs));
	if (!refs)
		return UINT64_MAX;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; !v[i].removed && j < v[i].m->n_layers; j++)
			refs[k++] = &v[i].m->layers[j];
	qsort(refs, count, sizeof(*refs), by_id);
	uint64_t total = 0;
	for (size_t i = 0; i < count; i++)
		if (i == 0 || strcmp(refs[i]->id, refs[i - 1]->id))
			total += refs[i]->bytes;
	free(refs);
	return total;
}

static int by_last_use(const void *a, const void *b)
{
	const struct cached_snapshot *x = a, *y = b;
	return (x->last_use_ms > y->last_use_ms) -
	       (x->last_use_ms < y->last_use_ms);
}

/* The local layer gc, as `warren snapshot gc --data DATA` does it. */
static void layers_gc(struct control *c)
{
	char *argv[] = {(char *)c->warren_bin, "snapshot", "gc", "--data",
			(char *)c->data_dir, NULL};
	_cleanup_free_ char *out = NULL, *errors = NULL;
	struct wr_error *err = NULL;
	int status = proc_run(argv, 16 << 10, -1, &out, &errors, &err);
	if (status != 0)
		wr_log(WR_LOG_WARN, "layers",
		       "the layer cache's gc failed: %s",
		       err && err->msg ? err->msg
				       : (errors && *errors ? errors : "exit status"));
	wr_error_free(err);
}

void layer_cache_trim(struct control *c, const char *keep)
{
	uint64_t cap = c->cfg.blobs ? c->cfg.blobs->cache_max : 0;
	if (!cap)
		return;
	struct snap_store *store = NULL;
	struct wr_error *err = NULL;
	if (snap_store_open(c->data_dir, &store, &err) < 0) {
		wr_log(WR_LOG_WARN, "layers", "the layer cache: %s",
		       err && err->msg ? err->msg : "cannot open the store");
		wr_error_free(err);
		return;
	}
	struct snap_manifest **ms = NULL;
	size_t n = 0;
	int corrupt = snap_store_list(store, NULL, &ms, &n, &err);
	wr_error_free(err);
	err = NULL;
	struct cached_snapshot *v = n ? wr_calloc(n, sizeof(*v)) : NULL;
	/* a manifest that cannot be read may reference anything: nothing
	 * is removed then */
	if (corrupt != 0 || (n && !v)) {
		free(v);
		snap_manifest_free_array(ms, n);
		snap_store_close(store);
		return;
	}
	int64_t now = now_ms();
	for (size_t i = 0; i < n; i++) {
		struct cached_snapshot *s = &v[i];
		s->m = ms[i];
		s->republish = s->m->n_layers > 0;
		for (size_t k = 0; k < s->m->n_layers; k++) {
			int64_t t = record_ms(c->data_dir, s->m->layers[k].id);
			if (!t)
				s->republish = false;
			if (t > s->last_use_ms)
				s->last_use_ms = t;
		}
		pthread_mutex_lock(&c->builds.mu);
		int64_t used = json_integer_value(
		    json_object_get(c->builds.used, s->m->id));
		pthread_mutex_unlock(&c->builds.mu);
		if (used > s->last_use_ms)
			s->last_use_ms = used;
		s->needed = needed(c, s->m->id, keep, now);
	}
	if (n)
		qsort(v, n, sizeof(*v), by_last_use);
	uint64_t total = referenced_bytes(v, n), before = total;
	size_t removed = 0;
	for (size_t i = 0; i < n && total > cap; i++) {
		if (v[i].needed || !v[i].republish)
			continue;
		if (snap_store_remove(store, v[i].m->id, &err) < 0) {
			wr_log(WR_LOG_WARN, "layers",
			       "the layer cache: remove snapshot %.12s: %s",
			       v[i].m->id,
			       err && err->msg ? err->msg : "failed");
			wr_error_free(err);
			err = NULL;
			continue;
		}
		v[i].removed = true;
		removed++;
		total = referenced_bytes(v, n);
		pthread_mutex_lock(&c->builds.mu);
		json_object_del(c->builds.used, v[i].m->id);
		pthread_mutex_unlock(&c->builds.mu);
		wr_log(WR_LOG_INFO, "layers",
		       "the layer cache (cap %llu bytes): snapshot %.12s "
		       "removed from the data directory, least recently used "
		       "(the registry has it)",
		       (unsigned long long)cap, v[i].m->id);
	}
	free(v);
	snap_manifest_free_array(ms, n);
	snap_store_close(store);
	if (removed) {
		layers_gc(c);
		wr_log(WR_LOG_INFO, "layers",
		       "the layer cache: %zu snapshot%s removed, %llu of "
		       "%llu bytes of layers referenced (cap %llu)",
		       removed, removed == 1 ? "" : "s",
		       (unsigned long long)total, (unsigned long long)before,
		       (unsigned long long)cap);
	} else if (total > cap)
		wr_log(WR_LOG_INFO, "layers",
		       "the layer cache holds %llu bytes of layers, over its "
		       "cap of %llu: every snapshot here is in use or not in "
		       "the registry",
		       (unsigned long long)total, (unsigned long long)cap);
}

/* store.h - the snapshot layer store: content-addressed layers, cache keys
 * and snapshot manifests under a data directory.
 *
 *   DATA/.lock                 flock: publish, remove, gc, staging
 *   DATA/layers/<id>/          immutable layer directories
 *   DATA/layers/.keys/<key>    cache key -> layer id (a file holding the id)
 *   DATA/snapshots/<id>.json   manifests, one per snapshot
 *   DATA/tmp/                  everything being built; a crash leaves only
 *                              things here, and open/gc sweep them
 *
 * Ids. A layer id is the sha256 (64 lowercase hex) of the layer's content,
 * as snap_layer_hash() computes it: every entry in sorted name order with
 * its relative path, type, mode (07777), uid, gid, content (regular files),
 * target (symlinks), rdev (devices: overlay whiteouts are 0/0) and all its
 * extended attributes. A manifest id is the sha256 of the manifest's compact
 * JSON with sorted keys and without "id" (created_ms included), so it is
 * assigned at publish and publishing the same manifest twice is a no-op.
 * Every id that names a path is checked first (snap_id_valid).
 *
 * Building. snap_store_stage_dir() gives a fresh directory under DATA/tmp;
 * the builder fills it (or DIR/upper of it, as a sandbox's --upper does)
 * and snap_store_publish_layer() hashes it and renames it into layers/.
 * A stage directory is locked (flock) by its handle for as long as it lives:
 * open and gc remove only stage directories whose handle is gone, and close
 * removes the handle's unpublished ones.
 *
 * Liveness. A layer stays while a manifest references it, while a caller
 * passes it to gc as in use (a live sandbox), or while it is pinned: a layer
 * that a handle published, looked up by key or held (snap_store_layer_hold)
 * is pinned until a manifest
 * published through the same handle references it, or until the handle is
 * closed (pins live in a locked lease file under DATA/tmp, so gc in another
 * process sees them). Cache keys keep nothing alive by themselves; gc
 * removes keys whose layer is gone.
 *
 * Concurrency. Any number of processes may use one data directory. Writers
 * (publish, remove, gc, staging, and layer_by_key, which pins) serialise on
 * DATA/.lock; readers (get, list, verify) take no lock and never see a
 * partial manifest or layer, since both appear by rename. A handle is not
 * thread-safe: one per thread.
 *
 * Corruption. get on a manifest that is not valid gives -EBADMSG with an
 * error naming the file. list skips such files: it returns how many it
 * skipped and, when that is not 0, leaves a warning naming them in *err
 * (which the caller frees) while still succeeding. gc keeps every layer id
 * that appears anywhere in the text of a manifest it cannot parse.
 *
 * Errors follow util/error.h: 0 or a count on success, -errno on failure,
 * out-parameters written only on success. Bad input (a malformed id, an
 * unknown or ambiguous snapshot) is reported with wr_error_input(). */
#ifndef WR_SNAPSHOT_STORE_H
#define WR_SNAPSHOT_STORE_H

#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SNAP_ID_LEN 64
#define SNAP_ID_PREFIX_MIN 6 /* shortest id prefix get/remove/verify take */
#define SNAP_KEY_MAX 128

struct snap_store;

/* 64 lowercase hex digits. */
bool snap_id_valid(const char *id);
/* A cache key: 1..SNAP_KEY_MAX of [A-Za-z0-9._-], not starting with '.'. */
bool snap_key_valid(const char *key);

/* Opens (creating DATA, DATA/layers, DATA/snapshots, DATA/tmp, 0700) and
 * sweeps DATA/tmp of what dead builders left. */
int snap_store_open(const char *data_dir, struct snap_store **out,
		    struct wr_error **err);
/* Releases pins and removes this handle's unpublished stage directories. */
void snap_store_close(struct snap_store *store);
/* The data directory, absolute. */
const char *snap_store_dir(const struct snap_store *store);

/* A fresh empty directory (0700) under DATA/tmp for a builder to fill;
 * label ([A-Za-z0-9_-], up to 32) only shows in its name. The caller frees
 * the path. */
char *snap_store_stage_dir(struct snap_store *store, const char *label,
			   struct wr_error **err);

/* The content hash of a layer directory (see the top of this file) and the
 * apparent size of its regular files in bytes. Neither follows symlinks nor
 * crosses mount points (a mount inside the layer is -EXDEV); depth is
 * capped at 256 and relative paths at 4096 bytes. */
int snap_layer_hash(const char *dir, char id_out[SNAP_ID_LEN + 1],
		    uint64_t *bytes_out, struct wr_error **err);
/* Only the size, without reading any content. */
int snap_layer_size(const char *dir, uint64_t *bytes_out,
		    struct wr_error **err);

/* Publishes staged_dir, which must be a stage directory of this store
 * (DATA/tmp/NAME) or a directory directly inside one (DATA/tmp/NAME/upper):
 * hashes it and renames it to DATA/layers/<id>, or, if that layer exists,
 * reuses it. The stage directory is removed either way. With key, records
 * key -> id (replacing an older mapping). The layer is pinned. */
int snap_store_publish_layer(struct snap_store *store, const char *staged_dir,
			     const char *key, char id_out[SNAP_ID_LEN + 1],
			     uint64_t *bytes_out, struct wr_error **err);
/* The layer a key maps to, pinned: 0, or -ENOENT when there is no such key
 * or the layer it names is gone, -EINVAL for a malformed key. */
int snap_store_layer_by_key(struct snap_store *store, const char *key,
			    char id_out[SNAP_ID_LEN + 1]);
/* Pins layer_id if the store has it, as layer_by_key does (gc and evict
 * leave it until a manifest of this handle references it or the handle
 * closes): 0, or -ENOENT without such a layer. */
int snap_store_layer_hold(struct snap_store *store, const char *layer_id,
			  struct wr_error **err);
/* DATA/layers/<id> (caller frees); NULL with errno EINVAL for a bad id. */
char *snap_store_layer_path(const struct snap_store *store,
			    const char *layer_id);

struct snap_layer_ref {
	char id[SNAP_ID_LEN + 1];
	char *role; /* "base", "deps", "build", ...; may be NULL */
	uint64_t bytes;
};

struct snap_timing {
	char *phase; /* "clone", "install", "build", "services", ... */
	double ms;
};

struct snap_lockfile {
	char *path; /* relative to the repository */
	char sha256[SNAP_ID_LEN + 1];
};

/* Every pointer is owned by the manifest (allocated with util/alloc.h or
 * jansson) and released by snap_manifest_free(). Caps: 128 layers, 256
 * lockfiles, 64 timings, strings of 4096 bytes, 1 MiB of JSON. */
struct snap_manifest {
	char id[SNAP_ID_LEN + 1]; /* assigned by publish */
	char *repo;		  /* required */
	char *ref;
	char *commit;
	char *spec_hash;
	struct snap_lockfile *lockfiles;
	size_t n_lockfiles;
	struct snap_layer_ref *layers; /* bottom first */
	size_t n_layers;
	struct snap_timing *timings;
	size_t n_timings;
	int64_t created_ms; /* unix epoch ms; 0 at publish: now */
	char *warren_version;
	char *status;	/* NULL at publish: "ready" */
	char *deps_key; /* a cache key (snap_key_valid) */
	json_t *extra;	/* an object of further fields, kept as is */
};

/* Checks the manifest and that every layer it names exists, assigns m->id
 * (and created_ms, status when unset), and writes DATA/snapshots/<id>.json
 * durably (temp file, fsync, rename, fsync of the directory). Unpins the
 * manifest's layers. */
int snap_store_publish_manifest(struct snap_store *store,
				struct snap_manifest *m, struct wr_error **err);
/* id: a full id or a unique prefix of at least 6 hex digits. */
int snap_store_get(struct snap_store *store, const char *id,
		   struct snap_manifest **out, struct wr_error **err);
/* Manifests of repo (NULL: all), newest first (ties by id). Returns the
 * number of corrupt manifests skipped; see "Corruption" above. */
int snap_store_list(struct snap_store *store, const char *repo,
		    struct snap_manifest ***out, size_t *n_out,
		    struct wr_error **err);
/* Removes the manifest only (id or unique prefix); layers go at gc. */
int snap_store_remove(struct snap_store *store, const char *id,
		      struct wr_error **err);

struct snap_verify_result {
	size_t n_layers;
	size_t n_bad;
	char **bad_ids; /* layers missing or whose content no longer matches */
};
/* Rehashes every layer of a snapshot. 0 even when layers are bad: see
 * res->n_bad. */
int snap_store_verify(struct snap_store *store, const char *id,
		      struct snap_verify_result *res, struct wr_error **err);
void snap_verify_result_clear(struct snap_verify_result *res);

/* Removes every layer that no manifest references, that no handle pins and
 * that is not in in_use (ids of layers live sandboxes use), then every key
 * whose layer is gone, and sweeps DATA/tmp. */
int snap_store_gc(struct snap_store *store, const char *const *in_use,
		  size_t n_in_use, size_t *removed_layers,
		  uint64_t *removed_bytes, struct wr_error **err);

/* gc of the layers in ids alone (n_ids of them): each is removed unless a
 * manifest references it, a handle pins it or it is in in_use; the others
 * are left. What the layer cache (registry/cache.c) evicts. */
int snap_store_evict(struct snap_store *store, const char *const *in_use,
		     size_t n_in_use, const char *const *ids, size_t n_ids,
		     size_t *removed_layers, uint64_t *removed_bytes,
		     struct wr_error **err);

void snap_manifest_free(struct snap_manifest *m);
void snap_manifest_free_array(struct snap_manifest **ms, size_t n);
/* The manifest as stored (with "format": 1 and "id" when set); NULL on
 * allocation failure. */
json_t *snap_manifest_to_json(const struct snap_manifest *m);
/* A manifest from the JSON snap_manifest_to_json gives (len bytes),
 * checked as a stored one is, and its id that of its content: -EBADMSG
 * otherwise, with the reason. */
int snap_manifest_from_json(const char *text, size_t len,
			    struct snap_manifest **out, struct wr_error **err);

#endif

/* registry.h - snapshots published to and pulled from an OCI registry, and
 * the local layer cache.
 *
 * A snapshot in the registry (the repository of the blobs configuration):
 *
 *   one blob per layer      the layer directory as a pax tar, zstd
 *                           (archive.c), media type REG_MEDIA_LAYER,
 *                           addressed by the sha256 of those bytes
 *   the config blob         the snapshot's manifest as the data directory
 *                           stores it (snap_manifest_to_json), media type
 *                           REG_MEDIA_CONFIG
 *   an OCI image manifest   config and layers bottom first, each layer
 *                           annotated with its layer id and role; the
 *                           manifest annotated with the snapshot id, its
 *                           repository and commit; tagged with the
 *                           snapshot id
 *
 * Locally, under the data directory, besides the layer store (store.h):
 *
 *   DATA/blobs/<layer id>   the blob of a layer pushed or pulled:
 *                           "sha256:HEX SIZE\n"; its mtime is the layer's
 *                           last use by a push or a pull (the cache's LRU)
 *
 * The layer cache is DATA/layers itself: a pulled layer stays after its
 * snapshot is removed, and a later pull of any snapshot using it fetches
 * nothing. reg_cache_trim keeps the layers' total size under a cap by
 * evicting layers no snapshot references and no live sandbox uses, the
 * least recently used first; a layer a snapshot in DATA references is
 * never evicted, so the total may stay above the cap.
 *
 * Errors follow util/error.h; each message says which snapshot, layer or
 * blob, and the registry's own words where it sent some. */
#ifndef WR_REGISTRY_REGISTRY_H
#define WR_REGISTRY_REGISTRY_H

#include "blobs/blobs.h"
#include "snapshot/store.h"
#include "util/error.h"

#include <stddef.h>
#include <stdint.h>

#define REG_MEDIA_LAYER "application/vnd.warren.layer.v1.tar+zstd"
#define REG_MEDIA_CONFIG "application/vnd.warren.snapshot.v1+json"
#define REG_ANNOTATION_SNAPSHOT "org.warren.snapshot.id"
#define REG_ANNOTATION_REPOSITORY "org.warren.snapshot.repository"
#define REG_ANNOTATION_COMMIT "org.warren.snapshot.commit"
#define REG_ANNOTATION_LAYER "org.warren.layer.id"
#define REG_ANNOTATION_ROLE "org.warren.layer.role"

/* ---- archives (archive.c) ------------------------------------------------ */

/* The layer directory dir as a zstd pax tar into out_fd (see archive.c:
 * deterministic, owners numeric, xattrs and ACLs kept, hard links as
 * links, mount points refused). */
int reg_archive_write(const char *dir, int out_fd, struct wr_error **err);
/* Extracts what reg_archive_write wrote (read from in_fd) into dest, an
 * existing empty directory, the root entry's mode, owner and xattrs onto
 * dest itself; at most max_entries entries and max_bytes of regular files
 * (0: no cap); -EBADMSG for a device other than a whiteout (0:0). Changes
 * the working directory while it runs: single-threaded callers only. */
int reg_archive_extract(int in_fd, const char *dest, uint64_t max_entries,
			uint64_t max_bytes, struct wr_error **err);

/* ---- blob records and the cache (cache.c) -------------------------------- */

struct reg_blob {
	char digest[BLOBS_DIGEST_MAX];
	uint64_t size;
};

/* DATA/blobs/<layer_id>: 0, -ENOENT without one (or a malformed one). */
int reg_blob_get(const char *data_dir, const char *layer_id,
		 struct reg_blob *out);
/* Writes (or rewrites) the record, which also marks the layer used now. */
int reg_blob_put(const char *data_dir, const char *layer_id,
		 const struct reg_blob *b, struct wr_error **err);
/* Marks the layer used now (its record's mtime; nothing without one). */
void reg_blob_touch(const char *data_dir, const char *layer_id);

struct reg_trim_result {
	uint64_t total_bytes;	/* all layers, before */
	size_t evicted;		/* layers removed */
	uint64_t evicted_bytes; /* their size */
};

/* Evicts unreferenced layers, least recently used first, until the
 * layers of DATA add up to at most max bytes or none is left to evict;
 * in_use: the ids of layers live sandboxes use (kept). The store rechecks
 * each under its lock (snap_store_evict); then the records whose layer is
 * gone are removed. dry_run: res says what would go, nothing is removed. */
int reg_cache_trim(struct snap_store *store, uint64_t max,
		   const char *const *in_use, size_t n_in_use, bool dry_run,
		   struct reg_trim_result *res, struct wr_error **err);

/* ---- push and pull (publish.c, pull.c) ----------------------------------- */

/* An anonymous file (O_TMPFILE) under DATA/tmp, gone when closed. */
int reg_anon_file(struct snap_store *store, struct wr_error **err);
/* CLOCK_MONOTONIC in ms, for the timings reported. */
double reg_now_ms(void);

struct reg_push_result {
	char snapshot[SNAP_ID_LEN + 1];
	char manifest_digest[BLOBS_DIGEST_MAX];
	size_t layers;		 /* in the snapshot */
	size_t layers_uploaded;	 /* the others were in the registry */
	size_t layers_archived;	 /* tarred now (no record, or gone there) */
	uint64_t bytes_uploaded; /* layers and config */
	uint64_t bytes_layers;	 /* the layer blobs' sizes, all of them */
	double ms;
};

/* Publishes snapshot (an id or a unique prefix) of store to c's
 * repository: each layer whose blob the registry lacks, the config, the
 * manifest under the snapshot id's tag. */
int reg_push(struct snap_store *store, struct blobs_client *c,
	     const char *snapshot, struct reg_push_result *res,
	     struct wr_error **err);

struct reg_pull_result {
	char manifest_digest[BLOBS_DIGEST_MAX];
	size_t layers;		/* in the snapshot */
	size_t layers_fetched;	/* the others were in DATA/layers */
	uint64_t bytes_fetched; /* blobs, config and manifest */
	bool already;		/* the snapshot was in DATA: nothing fetched */
	double ms;
};

/* Pulls the snapshot tagged snapshot_id (the full id) from c's repository
 * into store: each layer DATA/layers lacks is fetched (its digest
 * checked), extracted into a stage directory, its content hash checked
 * against the layer id, and renamed into the store; then the snapshot's
 * manifest is published as a local build publishes it. A failure leaves
 * neither a layer of its own nor the snapshot. */
int reg_pull(struct snap_store *store, struct blobs_client *c,
	     const char *snapshot_id, struct reg_pull_result *res,
	     struct wr_error **err);

/* ---- garbage collection (gc.c) ------------------------------------------- */

/* The tags of session checkpoints (sched/checkpoint.c pushes
 * ckpt-<session id>-e<lease epoch>) */
#define REG_CKPT_PREFIX "ckpt-"
#define REG_TAG_MAX 129

/* A session a store still holds, as gc sees it. */
struct reg_gc_session {
	char *id;
	char *tag;		 /* its outcome's checkpoint tag, or NULL */
	int64_t keep_from_epoch; /* its tags of this lease epoch or later
				    stay (the worker holding it may have
				    pushed one not yet recorded); INT64_MAX:
				    none beyond tag */
};

/* What a store references, besides the data directory and --keep. */
struct reg_gc_refs {
	char **snapshots; /* snapshot ids */
	size_t n_snapshots;
	struct reg_gc_session *sessions; /* every session the store holds */
	size_t n_sessions;
	char **blobs; /* digests recorded in the sessions' checkpoints
			 (bundles, artifacts): kept */
	size_t n_blobs;
};
void reg_gc_refs_clear(struct reg_gc_refs *refs);

/* Where those references come from (the CLI reads a store; registry/
 * does not link one): read fills out (cleared first) or fails, after the
 * registry's tags were listed, so that a checkpoint pushed before the
 * list was taken is in the store read. */
struct reg_gc_source {
	int (*read)(struct reg_gc_source *src, struct reg_gc_refs *out,
		    struct wr_error **err);
};

struct reg_gc_item {
	char name[REG_TAG_MAX]; /* the tag (a manifest), the layer id (a
				   layer's blob), or "" (config, other) */
	char digest[BLOBS_DIGEST_MAX];
	uint64_t bytes;
};

struct reg_gc_result {
	struct reg_gc_item *manifests; /* deleted (dry_run: to delete) */
	size_t n_manifests;
	struct reg_gc_item *blobs; /* the same, blobs no manifest left uses */
	size_t n_blobs;
	uint64_t bytes;		 /* manifests' and blobs' sizes */
	size_t kept;		 /* snapshot manifests kept: referenced */
	size_t checkpoints_kept; /* checkpoint tags kept (with a source) */
	size_t other_tags;	 /* tags that are not ours: kept */
	bool store;		 /* a source was read */
	bool dry_run;
};

/* Deletes from c's repository every snapshot (a tag that is a snapshot
 * id) whose manifest store's data directory lacks, keep (n_keep full ids)
 * does not name and src (NULL: none) does not reference; with src, every
 * checkpoint tag (REG_CKPT_PREFIX) whose session src lacks, or that is
 * neither the session's recorded one nor of its current lease epoch or
 * later; then each blob those manifests used that no remaining manifest,
 * no local blob record and no blob src records uses. Without src,
 * checkpoint tags are other tags (kept). Everything is read before
 * anything is deleted (a failure then deletes nothing); manifests go
 * before blobs. dry_run: res says what would go. */
int reg_gc(struct snap_store *store, struct blobs_client *c,
	   const char *const *keep, size_t n_keep, struct reg_gc_source *src,
	   bool dry_run, struct reg_gc_result *res, struct wr_error **err);
void reg_gc_result_clear(struct reg_gc_result *res);

#endif

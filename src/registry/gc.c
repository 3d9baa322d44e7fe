/* gc.c - the registry's garbage collection (registry.h): the snapshots
 * of the repository that nothing here references go, then the blobs that
 * only they used.
 *
 * A snapshot is referenced when the data directory holds its manifest
 * (DATA/snapshots/<id>.json: `warren snapshot rm` is what unreferences
 * one; the server never removes them) or when the caller names it (keep:
 * what other hosts use). The distribution API lists tags, not blobs, so
 * the blobs that may go are those of the manifests that go, less those of
 * every manifest that stays and those DATA/blobs records for the layers
 * of local snapshots (a push in progress has recorded them before its
 * manifest is in the registry). Everything is read and decided before
 * anything is deleted: a registry answer that cannot be read stops the gc
 * with nothing deleted. Tags that are not snapshot ids are not ours: kept,
 * and their blobs with them.
 *
 * With a source (a store: the CLI reads it, struct reg_gc_source), its
 * snapshots are referenced too, and the checkpoint tags are ours as well
 * (ckpt-<session>-e<epoch>, sched/checkpoint.c): one stays when its
 * session is in the store and the tag is the one its outcome records, or
 * when the session is not over and the tag's epoch is its current lease
 * epoch or later (pushed by the worker holding it, maybe not recorded
 * yet); the rest (a session gone from the store, an older epoch's tag, an
 * orphan of a worker that lost its lease) go. The blobs the store's
 * checkpoints record (bundles, artifacts: the artifacts are plain blobs
 * in older checkpoints, no manifest names them) stay. The source is read
 * after the tags are listed: a checkpoint listed was pushed before the
 * store was read, so its session is in what was read. */
#include "registry/registry.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a set of strings: appended to, then sealed (sorted) before it is
 * asked; 10,000 tags of a few blobs each stay n log n */
struct strset {
	char **v;
	size_t n, cap;
	bool sealed;
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void strset_seal(struct strset *s)
{
	if (s->n)
		qsort(s->v, s->n, sizeof(*s->v), cmp_str);
	s->sealed = true;
}

static bool strset_has(const struct strset *s, const char *x)
{
	return s->sealed && s->n &&
	       bsearch(&x, s->v, s->n, sizeof(*s->v), cmp_str) != NULL;
}

static int strset_add(struct strset *s, const char *x)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 32;
		char **grown = wr_realloc(s->v, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		s->v = grown;
		s->cap = cap;
	}
	if (!(s->v[s->n] = wr_strdup(x)))
		return -ENOMEM;
	s->n++;
	s->sealed = false;
	return 0;
}

static void strset_clear(struct strset *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* The snapshot ids of DATA/snapshots (file names: a manifest that does
 * not parse still references its snapshot). */
static int local_snapshots(struct snap_store *store, struct strset *ids,
			   struct wr_error **err)
{
	_cleanup_free_ char *dir =
	    wr_asprintf("%s/snapshots", snap_store_dir(store));
	DIR *d = dir ? opendir(dir) : NULL;
	if (!d)
		return wr_error_set(err, dir ? errno : ENOMEM,
				    "list the local snapshots");
	struct dirent *de;
	int r = 0;
	while (r == 0 && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char id[SNAP_ID_LEN + 1];
		if (len != SNAP_ID_LEN + 5 || strcmp(de->d_name + SNAP_ID_LEN,
						     ".json"))
			continue;
		memcpy(id, de->d_name, SNAP_ID_LEN);
		id[SNAP_ID_LEN] = '\0';
		if (snap_id_valid(id) && strset_add(ids, id) < 0)
			r = wr_error_set(err, ENOMEM, "gc");
	}
	closedir(d);
	return r;
}

/* The blob digests recorded for the layers of the local snapshots. */
static int local_blobs(struct snap_store *store, struct strset *digests,
		       struct wr_error **err)
{
	struct snap_manifest **ms = NULL;
	size_t n = 0;
	struct wr_error *lerr = NULL;
	int r = snap_store_list(store, NULL, &ms, &n, &lerr);
	wr_error_free(lerr);
	if (r < 0)
		return wr_error_set(err, -r, "list the local snapshots");
	r = 0;
	for (size_t i = 0; r == 0 && i < n; i++)
		for (size_t k = 0; r == 0 && k < ms[i]->n_layers; k++) {
			struct reg_blob b;
			if (reg_blob_get(snap_store_dir(store),
					 ms[i]->layers[k].id, &b) == 0 &&
			    strset_add(digests, b.digest) < 0)
				r = wr_error_set(err, ENOMEM, "gc");
		}
	snap_manifest_free_array(ms, n);
	return r;
}

/* The manifest under tag, parsed; its digest and length. */
static int manifest_of(struct blobs_client *c, const char *tag,
		       struct blobs_manifest *m, char digest[BLOBS_DIGEST_MAX],
		       size_t *len, struct wr_error **err)
{
	_cleanup_free_ char *json = NULL;
	int r = blobs_manifest_get(c, tag, &json, len, digest, err);
	if (r < 0)
		return wr_error_wrap(err, "tag %s", tag);
	if ((r = blobs_manifest_parse(json, *len, m, err)) < 0)
		return wr_error_wrap(err, "tag %s: its manifest", tag);
	return 0;
}

/* The layer id a layer descriptor is annotated with, or NULL. */
static const char *annotation_layer(const struct blobs_descriptor *d)
{
	return json_string_value(
	    json_object_get(d->annotations, REG_ANNOTATION_LAYER));
}

/* The name of a layer descriptor's blob: its layer id, a checkpoint
 * artifact's name, or NULL. */
static const char *descriptor_name(const struct blobs_descriptor *d)
{
	const char *name = annotation_layer(d);
	return name ? name
		    : json_string_value(json_object_get(
			  d->annotations, "org.warren.checkpoint.artifact"));
}

/* ckpt-<session>-e<epoch>: the session into sid, the epoch; false for a
 * tag of another shape (not ours: kept). Session ids hold '-' ("s-..."):
 * the epoch is after the last "-e". */
static bool ckpt_parse(const char *tag, char sid[REG_TAG_MAX], int64_t *epoch)
{
	size_t plen = strlen(REG_CKPT_PREFIX);
	if (strncmp(tag, REG_CKPT_PREFIX, plen))
		return false;
	const char *rest = tag + plen;
	const char *dash = strrchr(rest, '-');
	if (!dash || dash == rest || dash[1] != 'e' || !dash[2] ||
	    strlen(dash + 2) > 18 || (size_t)(dash - rest) >= REG_TAG_MAX)
		return false;
	int64_t v = 0;
	for (const char *p = dash + 2; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		v = v * 10 + (*p - '0');
	}
	memcpy(sid, rest, (size_t)(dash - rest));
	sid[dash - rest] = '\0';
	*epoch = v;
	return true;
}

static int cmp_session(const void *a, const void *b)
{
	return strcmp(((const struct reg_gc_session *)a)->id,
		      ((const struct reg_gc_session *)b)->id);
}

/* Does the store keep checkpoint tag (of session sid, epoch)? sessions
 * sorted by id. */
static bool ckpt_kept(const struct reg_gc_refs *refs, const char *tag,
		      const char *sid, int64_t epoch)
{
	struct reg_gc_session key = {.id = (char *)sid};
	const struct reg_gc_session *s =
	    refs->n_sessions ? bsearch(&key, refs->sessions, refs->n_sessions,
				       sizeof(key), cmp_session)
			     : NULL;
	if (!s)
		return false; /* gone from the store, or never in it */
	return (s->tag && !strcmp(s->tag, tag)) || epoch >= s->keep_from_epoch;
}

void reg_gc_refs_clear(struct reg_gc_refs *refs)
{
	for (size_t i = 0; i < refs->n_snapshots; i++)
		free(refs->snapshots[i]);
	free(refs->snapshots);
	for (size_t i = 0; i < refs->n_sessions; i++) {
		free(refs->sessions[i].id);
		free(refs->sessions[i].tag);
	}
	free(refs->sessions);
	for (size_t i = 0; i < refs->n_blobs; i++)
		free(refs->blobs[i]);
	free(refs->blobs);
	memset(refs, 0, sizeof(*refs));
}

static int add_descriptors(struct strset *s, const struct blobs_manifest *m)
{
	int r = strset_add(s, m->config.digest);
	for (size_t i = 0; r == 0 && i < m->n_layers; i++)
		r = strset_add(s, m->layers[i].digest);
	return r;
}

static int item_add(struct reg_gc_item **v, size_t *n, const char *name,
		    const char *digest, uint64_t bytes)
{
	struct reg_gc_item *grown = wr_realloc(*v, (*n + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	*v = grown;
	struct reg_gc_item *it = &grown[*n];
	memset(it, 0, sizeof(*it));
	snprintf(it->name, sizeof(it->name), "%s", name ? name : "");
	snprintf(it->digest, sizeof(it->digest), "%s", digest);
	it->bytes = bytes;
	(*n)++;
	return 0;
}

void reg_gc_result_clear(struct reg_gc_result *res)
{
	free(res->manifests);
	free(res->blobs);
	memset(res, 0, sizeof(*res));
}

static int cmp_item_digest(const void *a, const void *b)
{
	return strcmp(((const struct reg_gc_item *)a)->digest,
		      ((const struct reg_gc_item *)b)->digest);
}

/* Keeps the items of v whose digest kept lacks, one per digest (sorted
 * by digest). */
static void items_filter(struct reg_gc_item *v, size_t *n,
			 const struct strset *kept)
{
	if (*n)
		qsort(v, *n, sizeof(*v), cmp_item_digest);
	size_t w = 0;
	for (size_t i = 0; i < *n; i++) {
		if (strset_has(kept, v[i].digest) ||
		    (w && !strcmp(v[w - 1].digest, v[i].digest)))
			continue;
		v[w++] = v[i];
	}
	*n = w;
}

/* What goes: the unreferenced snapshots' manifests and the blobs no
 * manifest that stays uses. */
static int plan(struct snap_store *store, struct blobs_client *c,
		const char *const *keep, size_t n_keep,
		struct reg_gc_source *src, struct reg_gc_result *out,
		struct wr_error **err)
{
	struct strset referenced = {0}, kept_blobs = {0}, kept_manifests = {0};
	struct reg_gc_refs refs = {0};
	char **tags = NULL;
	size_t n_tags = 0;
	int r = local_snapshots(store, &referenced, err);
	for (size_t i = 0; r == 0 && i < n_keep; i++)
		if (strset_add(&referenced, keep[i]) < 0)
			r = wr_error_set(err, ENOMEM, "gc");
	if (r == 0)
		r = local_blobs(store, &kept_blobs, err);
	if (r == 0 && (r = blobs_tags(c, &tags, &n_tags, err)) == -ENOENT) {
		/* a repository nothing was ever pushed to: NAME_UNKNOWN */
		wr_error_free(*err);
		*err = NULL;
		r = 0;
	}
	/* the store after the tags (see the top) */
	if (r == 0 && src) {
		r = src->read(src, &refs, err);
		out->store = true;
	}
	for (size_t i = 0; r == 0 && i < refs.n_snapshots; i++)
		if (strset_add(&referenced, refs.snapshots[i]) < 0)
			r = wr_error_set(err, ENOMEM, "gc");
	for (size_t i = 0; r == 0 && i < refs.n_blobs; i++)
		if (strset_add(&kept_blobs, refs.blobs[i]) < 0)
			r = wr_error_set(err, ENOMEM, "gc");
	if (refs.n_sessions)
		qsort(refs.sessions, refs.n_sessions, sizeof(*refs.sessions),
		      cmp_session);
	strset_seal(&referenced);
	/* the blobs of what goes, with their sizes, until the kept set is
	 * complete */
	struct reg_gc_item *cand = NULL;
	size_t n_cand = 0;
	for (size_t i = 0; r == 0 && i < n_tags; i++) {
		struct blobs_manifest m = {0};
		char digest[BLOBS_DIGEST_MAX];
		size_t len = 0;
		if ((r = manifest_of(c, tags[i], &m, digest, &len, err)) < 0)
			break;
		char sid[REG_TAG_MAX];
		int64_t epoch = 0;
		bool snapshot = snap_id_valid(tags[i]);
		bool ckpt =
		    !snapshot && src && ckpt_parse(tags[i], sid, &epoch);
		bool stays = snapshot ? strset_has(&referenced, tags[i])
			     : ckpt   ? ckpt_kept(&refs, tags[i], sid, epoch)
				      : true;
		if (stays) {
			if (snapshot)
				out->kept++;
			else if (ckpt)
				out->checkpoints_kept++;
			else
				out->other_tags++;
			if (add_descriptors(&kept_blobs, &m) < 0 ||
			    strset_add(&kept_manifests, digest) < 0)
				r = wr_error_set(err, ENOMEM, "gc");
		} else {
			if (item_add(&out->manifests, &out->n_manifests,
				     tags[i], digest, len) < 0 ||
			    item_add(&cand, &n_cand, NULL, m.config.digest,
				     m.config.size) < 0)
				r = wr_error_set(err, ENOMEM, "gc");
			for (size_t k = 0; r == 0 && k < m.n_layers; k++)
				if (item_add(&cand, &n_cand,
					     descriptor_name(&m.layers[k]),
					     m.layers[k].digest,
					     m.layers[k].size) < 0)
					r = wr_error_set(err, ENOMEM, "gc");
		}
		blobs_manifest_clear(&m);
	}
	strset_seal(&kept_manifests);
	strset_seal(&kept_blobs);
	if (r == 0) {
		/* a manifest another tag keeps (the same digest) stays */
		items_filter(out->manifests, &out->n_manifests,
			     &kept_manifests);
		items_filter(cand, &n_cand, &kept_blobs);
		out->blobs = TAKE_PTR(cand);
		out->n_blobs = n_cand;
	}
	free(cand);
	blobs_tags_free(tags, n_tags);
	reg_gc_refs_clear(&refs);
	strset_clear(&referenced);
	strset_clear(&kept_blobs);
	strset_clear(&kept_manifests);
	return r;
}

int reg_gc(struct snap_store *store, struct blobs_client *c,
	   const char *const *keep, size_t n_keep, struct reg_gc_source *src,
	   bool dry_run, struct reg_gc_result *res, struct wr_error **err)
{
	for (size_t i = 0; i < n_keep; i++)
		if (!snap_id_valid(keep[i]))
			return wr_error_input(err, EINVAL,
					      "--keep '%s': not a snapshot id "
					      "(64 hex digits)",
					      keep[i]);
	struct reg_gc_result out = {0};
	int r = plan(store, c, keep, n_keep, src, &out, err);
	if (r < 0) {
		reg_gc_result_clear(&out);
		return wr_error_wrap(err, "registry gc (nothing deleted)");
	}
	for (size_t i = 0; i < out.n_manifests; i++)
		out.bytes += out.manifests[i].bytes;
	for (size_t i = 0; i < out.n_blobs; i++)
		out.bytes += out.blobs[i].bytes;
	out.dry_run = dry_run;
	if (dry_run) {
		*res = out;
		return 0;
	}
	/* the manifests first: a blob a manifest still names is never
	 * deleted, whatever stops the gc half way */
	size_t done = 0;
	for (; r == 0 && done < out.n_manifests; done++) {
		r = blobs_manifest_delete(c, out.manifests[done].digest, err);
		if (r == -ENOENT) { /* gone meanwhile */
			wr_error_free(*err);
			*err = NULL;
			r = 0;
		}
	}
	if (r == -EOPNOTSUPP)
		wr_error_wrap(err, "the registry does not allow deletes "
				   "(docker-registry: storage.delete.enabled, "
				   "REGISTRY_STORAGE_DELETE_ENABLED=true)");
	if (r < 0) {
		wr_error_wrap(err,
			      "registry gc: tag %s (%zu of %zu manifests "
			      "deleted, no blob)",
			      out.manifests[done - 1].name, done - 1,
			      out.n_manifests);
		reg_gc_result_clear(&out);
		return r;
	}
	for (done = 0; r == 0 && done < out.n_blobs; done++) {
		r = blobs_blob_delete(c, out.blobs[done].digest, err);
		if (r == -ENOENT) {
			wr_error_free(*err);
			*err = NULL;
			r = 0;
		}
	}
	if (r < 0) {
		wr_error_wrap(err,
			      "registry gc: %zu manifests deleted, then %zu of "
			      "%zu blobs",
			      out.n_manifests, done - 1, out.n_blobs);
		reg_gc_result_clear(&out);
		return r;
	}
	*res = out;
	return 0;
}

/* pull.c - a snapshot pulled from an OCI registry into a data directory
 * (registry.h).
 *
 * Every layer the data directory lacks is fetched and extracted into a
 * stage directory of its own and its content hash checked against its id
 * before any of them is published, so a blob that fails (a wrong digest,
 * a broken archive, content that is not the layer) leaves nothing behind:
 * the stages go with the store handle. Then the layers are renamed into
 * DATA/layers and the manifest published, as a local build does. */
#include "registry/registry.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* the config blob is a snapshot manifest: store.h caps those at 1 MiB */
#define CONFIG_MAX (1u << 20)
/* entries in one layer's archive */
#define LAYER_ENTRIES_MAX (4u << 20)

static const char *annotation(const json_t *a, const char *key)
{
	return json_string_value(json_object_get(a, key));
}

/* The config blob: the snapshot's manifest, its id checked. */
static int fetch_config(struct snap_store *store, struct blobs_client *c,
			const struct blobs_manifest *om, const char *id,
			struct snap_manifest **out, uint64_t *bytes,
			struct wr_error **err)
{
	if (!om->config.media_type ||
	    strcmp(om->config.media_type, REG_MEDIA_CONFIG))
		return wr_error_set(
		    err, EBADMSG,
		    "the config is a '%s', not a Warren "
		    "snapshot's (%s)",
		    om->config.media_type ? om->config.media_type : "(none)",
		    REG_MEDIA_CONFIG);
	if (om->config.size > CONFIG_MAX)
		return wr_error_set(err, EFBIG,
				    "the config is larger than %u bytes",
				    CONFIG_MAX);
	_cleanup_close_ int fd = reg_anon_file(store, err);
	if (fd < 0)
		return fd;
	uint64_t written = 0;
	int r = blobs_pull(c, om->config.digest, fd, om->config.size, &written,
			   err);
	*bytes += written;
	if (r < 0)
		return wr_error_wrap(err, "the config");
	_cleanup_free_ char *text = wr_malloc(written + 1);
	if (!text)
		return wr_error_set(err, ENOMEM, "the config");
	if (pread(fd, text, written, 0) != (ssize_t)written)
		return wr_error_set(err, errno ? errno : EIO, "the config");
	text[written] = '\0';
	struct snap_manifest *m = NULL;
	if ((r = snap_manifest_from_json(text, written, &m, err)) < 0)
		return wr_error_wrap(err, "the config");
	if (strcmp(m->id, id)) {
		snap_manifest_free(m);
		return wr_error_set(err, EBADMSG,
				    "the config is snapshot %s, not %s", m->id,
				    id);
	}
	*out = m;
	return 0;
}

/* The OCI manifest says the same layers as the snapshot's, in order. */
static int check_layers(const struct blobs_manifest *om,
			const struct snap_manifest *m, struct wr_error **err)
{
	if (om->n_layers != m->n_layers)
		return wr_error_set(err, EBADMSG,
				    "the manifest has %zu layers, the "
				    "snapshot %zu",
				    om->n_layers, m->n_layers);
	for (size_t i = 0; i < om->n_layers; i++) {
		const struct blobs_descriptor *d = &om->layers[i];
		const char *id =
		    annotation(d->annotations, REG_ANNOTATION_LAYER);
		if (strcmp(d->media_type, REG_MEDIA_LAYER))
			return wr_error_set(err, EBADMSG,
					    "layer %zu is a '%s', not %s", i,
					    d->media_type, REG_MEDIA_LAYER);
		if (!id || strcmp(id, m->layers[i].id))
			return wr_error_set(err, EBADMSG,
					    "layer %zu is annotated as %s, "
					    "the snapshot's is %s",
					    i, id ? id : "(nothing)",
					    m->layers[i].id);
	}
	return 0;
}

/* One layer into a fresh stage directory, its content checked; *stage
 * (caller frees) is the extracted directory. */
static int fetch_layer(struct snap_store *store, struct blobs_client *c,
		       const struct blobs_descriptor *d,
		       const struct snap_layer_ref *ref, char **stage,
		       uint64_t *bytes, struct wr_error **err)
{
	_cleanup_free_ char *dir = snap_store_stage_dir(store, "pull", err);
	if (!dir)
		return -EIO;
	_cleanup_close_ int fd = reg_anon_file(store, err);
	if (fd < 0)
		return fd;
	uint64_t written = 0;
	/* the descriptor's size is the cap: a registry sending more is
	 * refused before the digest is */
	int r = blobs_pull(c, d->digest, fd, d->size, &written, err);
	*bytes += written;
	if (r < 0)
		return r;
	_cleanup_free_ char *layer = wr_asprintf("%s/layer", dir);
	if (!layer)
		return wr_error_set(err, ENOMEM, "layer");
	if (mkdir(layer, 0700) < 0)
		return wr_error_set(err, errno, "mkdir %s", layer);
	if (lseek(fd, 0, SEEK_SET) < 0)
		return wr_error_set(err, errno, "the blob %s", d->digest);
	/* the manifest's size of the layer caps what it extracts to (a
	 * layer of no bytes has no cap to give: it holds no file content) */
	if ((r = reg_archive_extract(fd, layer, LAYER_ENTRIES_MAX,
				     ref->bytes ? ref->bytes : 1, err)) < 0)
		return r;
	char got[SNAP_ID_LEN + 1];
	uint64_t size = 0;
	if ((r = snap_layer_hash(layer, got, &size, err)) < 0)
		return r;
	if (strcmp(got, ref->id))
		return wr_error_set(err, EBADMSG,
				    "blob %s extracts to a layer whose "
				    "content hashes to %s",
				    d->digest, got);
	*stage = TAKE_PTR(layer);
	return 0;
}

int reg_pull(struct snap_store *store, struct blobs_client *c,
	     const char *snapshot_id, struct reg_pull_result *res,
	     struct wr_error **err)
{
	double start = reg_now_ms();
	if (!snap_id_valid(snapshot_id))
		return wr_error_input(err, EINVAL,
				      "pull: '%s' is not a snapshot id (64 "
				      "hex digits, the registry's tag)",
				      snapshot_id);
	const char *data = snap_store_dir(store);
	struct reg_pull_result out = {0};
	struct snap_manifest *m = NULL;
	struct wr_error *lerr = NULL;
	if (snap_store_get(store, snapshot_id, &m, &lerr) == 0 &&
	    !strcmp(m->id, snapshot_id)) {
		/* here already: nothing to fetch, its layers used now */
		out.already = true;
		out.layers = m->n_layers;
		for (size_t i = 0; i < m->n_layers; i++)
			reg_blob_touch(data, m->layers[i].id);
		snap_manifest_free(m);
		out.ms = reg_now_ms() - start;
		*res = out;
		return 0;
	}
	wr_error_free(lerr);
	snap_manifest_free(m);
	m = NULL;

	struct blobs_manifest om = {0};
	char **stages = NULL;
	_cleanup_free_ char *json = NULL;
	size_t len = 0;
	int r = blobs_manifest_get(c, snapshot_id, &json, &len,
				   out.manifest_digest, err);
	if (r < 0)
		goto fail;
	out.bytes_fetched += len;
	if ((r = blobs_manifest_parse(json, len, &om, err)) < 0)
		goto fail;
	const char *tagged =
	    annotation(om.annotations, REG_ANNOTATION_SNAPSHOT);
	if (!tagged || strcmp(tagged, snapshot_id)) {
		r = wr_error_set(err, EBADMSG,
				 "the manifest tagged %s is annotated as "
				 "snapshot %s",
				 snapshot_id, tagged ? tagged : "(none)");
		goto fail;
	}
	if ((r = fetch_config(store, c, &om, snapshot_id, &m,
			      &out.bytes_fetched, err)) < 0 ||
	    (r = check_layers(&om, m, err)) < 0)
		goto fail;
	out.layers = m->n_layers;
	stages = wr_calloc(m->n_layers ? m->n_layers : 1, sizeof(*stages));
	if (!stages) {
		r = wr_error_set(err, ENOMEM, "pull");
		goto fail;
	}
	for (size_t i = 0; i < m->n_layers; i++) {
		const char *id = m->layers[i].id;
		/* in the cache: pinned, so that no gc or eviction takes it
		 * before the manifest references it */
		r = snap_store_layer_hold(store, id, err);
		if (r == 0)
			continue;
		if (r != -ENOENT)
			goto fail;
		r = fetch_layer(store, c, &om.layers[i], &m->layers[i],
				&stages[i], &out.bytes_fetched, err);
		if (r < 0) {
			wr_error_wrap(err, "layer %.12s", id);
			goto fail;
		}
		out.layers_fetched++;
	}
	/* every layer is here or checked in its stage: publish */
	for (size_t i = 0; i < m->n_layers; i++) {
		const char *id = m->layers[i].id;
		if (stages[i]) {
			char got[SNAP_ID_LEN + 1];
			r = snap_store_publish_layer(store, stages[i], NULL,
						     got, NULL, err);
			if (r < 0)
				goto fail;
			struct reg_blob b = {.size = om.layers[i].size};
			memcpy(b.digest, om.layers[i].digest, sizeof(b.digest));
			if ((r = reg_blob_put(data, id, &b, err)) < 0)
				goto fail;
		} else {
			reg_blob_touch(data, id);
		}
	}
	if ((r = snap_store_publish_manifest(store, m, err)) < 0)
		goto fail;
	if (strcmp(m->id, snapshot_id)) {
		/* cannot be, from_json checked the id: say so all the same */
		r = wr_error_set(err, EBADMSG, "published as %s, not %s", m->id,
				 snapshot_id);
		goto fail;
	}
	out.ms = reg_now_ms() - start;
	*res = out;
	r = 0;
	goto out;
fail:
	wr_error_wrap(err, "pull %s", snapshot_id);
out:
	for (size_t i = 0; stages && m && i < m->n_layers; i++)
		free(stages[i]);
	free(stages);
	snap_manifest_free(m);
	blobs_manifest_clear(&om);
	return r;
}

/* publish.c - a snapshot pushed to an OCI registry (registry.h). */
#include "registry/registry.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HASH_BUF (128 * 1024)

double reg_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* The sha256 digest and size of what fd holds, read from its start; fd is
 * left at its start again. */
static int digest_fd(int fd, struct reg_blob *out)
{
	crypto_hash_sha256_state sha;
	crypto_hash_sha256_init(&sha);
	_cleanup_free_ unsigned char *buf = wr_malloc(HASH_BUF);
	if (!buf)
		return -ENOMEM;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	uint64_t size = 0;
	for (;;) {
		ssize_t n = read(fd, buf, HASH_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		crypto_hash_sha256_update(&sha, buf, (size_t)n);
		size += (uint64_t)n;
	}
	unsigned char h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_final(&sha, h);
	memcpy(out->digest, "sha256:", 7);
	sodium_bin2hex(out->digest + 7, sizeof(out->digest) - 7, h, sizeof(h));
	out->size = size;
	return lseek(fd, 0, SEEK_SET) < 0 ? -errno : 0;
}

/* An anonymous file under DATA/tmp (gone when closed, whatever happens). */
int reg_anon_file(struct snap_store *store, struct wr_error **err)
{
	_cleanup_free_ char *tmp = wr_asprintf("%s/tmp", snap_store_dir(store));
	int fd = tmp ? open(tmp, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600) : -1;
	if (fd < 0)
		return wr_error_set(err, tmp ? errno : ENOMEM,
				    "a temporary file in %s",
				    tmp ? tmp : "DATA/tmp");
	return fd;
}

/* Uploads fd's bytes (of blob b) unless the registry holds b already.
 * 1 when uploaded, 0 when not needed. */
static int upload_missing(struct blobs_client *c, int fd,
			  const struct reg_blob *b, const char *what,
			  struct wr_error **err)
{
	uint64_t size = 0;
	int r = blobs_exists(c, b->digest, &size, err);
	if (r < 0)
		return wr_error_wrap(err, "%s", what);
	if (r == 1)
		return 0;
	char digest[BLOBS_DIGEST_MAX];
	if (lseek(fd, 0, SEEK_SET) < 0)
		return wr_error_set(err, errno, "%s", what);
	if ((r = blobs_push(c, fd, digest, &size, err)) < 0)
		return wr_error_wrap(err, "%s", what);
	if (strcmp(digest, b->digest) || size != b->size)
		return wr_error_set(err, EIO,
				    "%s: uploaded %s (%llu bytes), expected "
				    "%s",
				    what, digest, (unsigned long long)size,
				    b->digest);
	return 1;
}

/* One layer's blob into the registry: from its record when the registry
 * has it, else archived now. */
static int push_layer(struct snap_store *store, struct blobs_client *c,
		      const struct snap_layer_ref *layer, struct reg_blob *out,
		      struct reg_push_result *res, struct wr_error **err)
{
	const char *data = snap_store_dir(store);
	char what[128];
	snprintf(what, sizeof(what), "layer %.12s", layer->id);
	struct reg_blob b = {0};
	if (reg_blob_get(data, layer->id, &b) == 0) {
		uint64_t size = 0;
		int r = blobs_exists(c, b.digest, &size, err);
		if (r < 0)
			return wr_error_wrap(err, "%s", what);
		if (r == 1) {
			reg_blob_touch(data, layer->id);
			*out = b;
			return 0;
		}
	}
	_cleanup_free_ char *dir = snap_store_layer_path(store, layer->id);
	if (!dir)
		return wr_error_set(err, ENOMEM, "%s", what);
	_cleanup_close_ int fd = reg_anon_file(store, err);
	if (fd < 0)
		return wr_error_wrap(err, "%s", what);
	int r = reg_archive_write(dir, fd, err);
	if (r < 0)
		return wr_error_wrap(err, "%s", what);
	res->layers_archived++;
	if ((r = digest_fd(fd, &b)) < 0)
		return wr_error_set(err, -r, "%s: read its archive", what);
	if ((r = upload_missing(c, fd, &b, what, err)) < 0)
		return r;
	if (r == 1) {
		res->layers_uploaded++;
		res->bytes_uploaded += b.size;
	}
	if ((r = reg_blob_put(data, layer->id, &b, err)) < 0)
		return r;
	*out = b;
	return 0;
}

static json_t *annotations(const char *const *kv)
{
	json_t *o = json_object();
	for (size_t i = 0; o && kv[i]; i += 2)
		if (kv[i + 1] &&
		    json_object_set_new(o, kv[i], json_string(kv[i + 1])) < 0) {
			json_decref(o);
			return NULL;
		}
	return o;
}

int reg_push(struct snap_store *store, struct blobs_client *c,
	     const char *snapshot, struct reg_push_result *res,
	     struct wr_error **err)
{
	double start = reg_now_ms();
	struct snap_manifest *m = NULL;
	int r = snap_store_get(store, snapshot, &m, err);
	if (r < 0)
		return wr_error_wrap(err, "push");
	struct reg_push_result out = {.layers = m->n_layers};
	memcpy(out.snapshot, m->id, sizeof(out.snapshot));
	struct blobs_manifest om = {0};
	char *config_text = NULL, *manifest_text = NULL;
	om.layers =
	    wr_calloc(m->n_layers ? m->n_layers : 1, sizeof(*om.layers));
	if (!om.layers) {
		r = wr_error_set(err, ENOMEM, "push %s", m->id);
		goto out;
	}
	for (size_t i = 0; i < m->n_layers; i++) {
		struct reg_blob b = {0};
		if ((r = push_layer(store, c, &m->layers[i], &b, &out, err)) <
		    0)
			goto fail;
		struct blobs_descriptor *d = &om.layers[i];
		d->media_type = wr_strdup(REG_MEDIA_LAYER);
		memcpy(d->digest, b.digest, sizeof(d->digest));
		d->size = b.size;
		const char *kv[] = {REG_ANNOTATION_LAYER, m->layers[i].id,
				    REG_ANNOTATION_ROLE, m->layers[i].role,
				    NULL};
		d->annotations = annotations(kv);
		om.n_layers = i + 1;
		if (!d->media_type || !d->annotations) {
			r = wr_error_set(err, ENOMEM, "push %s", m->id);
			goto out;
		}
		out.bytes_layers += b.size;
	}
	/* the config: the manifest as the data directory holds it, so a
	 * pull publishes the very same snapshot (same id) */
	json_t *cj = snap_manifest_to_json(m);
	config_text = cj ? json_dumps(cj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(cj);
	if (!config_text) {
		r = wr_error_set(err, ENOMEM, "push %s", m->id);
		goto out;
	}
	{
		_cleanup_close_ int fd = reg_anon_file(store, err);
		size_t len = strlen(config_text);
		if (fd < 0) {
			r = fd;
			goto fail;
		}
		if (write(fd, config_text, len) != (ssize_t)len) {
			r = wr_error_set(err, errno ? errno : EIO,
					 "push %s: the config", m->id);
			goto out;
		}
		struct reg_blob b;
		if ((r = digest_fd(fd, &b)) < 0) {
			r = wr_error_set(err, -r, "push %s: the config", m->id);
			goto out;
		}
		if ((r = upload_missing(c, fd, &b, "the config", err)) < 0)
			goto fail;
		if (r == 1)
			out.bytes_uploaded += b.size;
		om.config.media_type = wr_strdup(REG_MEDIA_CONFIG);
		memcpy(om.config.digest, b.digest, sizeof(b.digest));
		om.config.size = b.size;
	}
	const char *kv[] = {REG_ANNOTATION_SNAPSHOT,
			    m->id,
			    REG_ANNOTATION_REPOSITORY,
			    m->repo,
			    REG_ANNOTATION_COMMIT,
			    m->commit,
			    NULL};
	om.annotations = annotations(kv);
	if (!om.config.media_type || !om.annotations) {
		r = wr_error_set(err, ENOMEM, "push %s", m->id);
		goto out;
	}
	if ((r = blobs_manifest_build(&om, &manifest_text, err)) < 0)
		goto fail;
	r = blobs_manifest_put(c, m->id, manifest_text, strlen(manifest_text),
			       out.manifest_digest, err);
	if (r < 0)
		goto fail;
	out.ms = reg_now_ms() - start;
	*res = out;
	r = 0;
	goto out;
fail:
	wr_error_wrap(err, "push %s", m->id);
out:
	free(manifest_text);
	free(config_text);
	blobs_manifest_clear(&om);
	snap_manifest_free(m);
	return r;
}

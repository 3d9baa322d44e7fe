/* checkpoint.c - a session's committed work in the registry, so that
 * another worker can take the session over with it.
 *
 * At each turn's end with a change, a worker pushes the result's bundle
 * (base..commit, the one verification checked out: review/evidence.c) to
 * the registry as an OCI artifact tagged ckpt-<session>-e<epoch>, and the
 * session's outcome records it ("checkpoint": {"tag", "manifest",
 * "bundle", "commit", "base", "turn", "worker", "artifacts"}; the
 * artifacts are layers of the manifest too), written with the review
 * transition, under the worker's lease epoch: a worker that lost the
 * session may push a tag, but never gets it recorded. A worker that
 * provisions a session whose workspace it does not have (its worker died)
 * pulls the recorded bundle (its digest checked), binds it read-only into
 * the new sandbox and checks the commit out in /workspace before the agent
 * runs: the session goes on with the work of its finished turns. */
#include "sched/internal.h"

#include "blobs/blobs.h"
#include "review/evidence.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_MEDIA_BUNDLE "application/vnd.warren.checkpoint.bundle.v1"
#define CKPT_MEDIA_CONFIG "application/vnd.warren.checkpoint.config.v1+json"
#define CKPT_MEDIA_ARTIFACT "application/vnd.warren.checkpoint.artifact.v1"
#define CKPT_ANNOTATION_ARTIFACT "org.warren.checkpoint.artifact"
#define CKPT_BUNDLE_MAX (1ull << 30)
#define CKPT_ARTIFACT_MAX (64ull << 20) /* what the API serves at most */

bool checkpoint_enabled(const struct control *c)
{
	return c->cfg.blobs != NULL && control_is_worker(c);
}

/* Pushes the bytes of a small text as a blob. */
static int push_text(struct blobs_client *bc, const char *text,
		     char digest[BLOBS_DIGEST_MAX], uint64_t *size,
		     struct wr_error **err)
{
	FILE *f = tmpfile();
	if (!f)
		return wr_error_set(err, errno, "checkpoint: a temporary file");
	int r = 0;
	if (fputs(text, f) < 0 || fflush(f) != 0 || fseek(f, 0, SEEK_SET) < 0)
		r = wr_error_set(err, errno, "checkpoint: write");
	if (r == 0)
		r = blobs_push(bc, fileno(f), digest, size, err);
	fclose(f);
	return r;
}

/* Each artifact of the session (at most CKPT_ARTIFACT_MAX bytes) as a
 * blob: {name: {"digest", "size"}}, or NULL. One that cannot be pushed is
 * left out (logged): the artifact stays on this worker. */
static json_t *push_artifacts(struct control *c, struct blobs_client *bc,
			      const char *session_id)
{
	struct store_artifact *v = NULL;
	size_t n = 0;
	if (c->st->ops->artifact_list(c->st, session_id, &v, &n, NULL) < 0)
		return NULL;
	/* this worker's copy of each (the row keeps the path of whoever
	 * wrote it first, maybe another worker's data directory) */
	json_t *o = json_object();
	for (size_t i = 0; o && i < n; i++) {
		if (!v[i].name || strstr(v[i].name, ".."))
			continue;
		_cleanup_free_ char *path = wr_asprintf(
		    "%s/artifacts/%s/%s", c->data_dir, session_id, v[i].name);
		_cleanup_close_ int fd =
		    path ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
		    (uint64_t)st.st_size > CKPT_ARTIFACT_MAX)
			continue;
		char digest[BLOBS_DIGEST_MAX];
		uint64_t size = 0;
		struct wr_error *err = NULL;
		if (blobs_push(bc, fd, digest, &size, &err) < 0) {
			wr_log(WR_LOG_WARN, "session",
			       "%s: artifact %s to the registry: %s", session_id,
			       v[i].name,
			       err && err->msg ? err->msg : "failed");
			wr_error_free(err);
			continue;
		}
		json_object_set_new(o, v[i].name,
				    json_pack("{s:s, s:I}", "digest", digest,
					      "size", (json_int_t)size));
	}
	store_artifacts_free(v, n);
	return o;
}

int checkpoint_push(struct control *c, const char *session_id,
		    const json_t *result, int turn, json_t **out,
		    struct wr_error **err)
{
	*out = NULL;
	const char *commit =
	    json_string_value(json_object_get(result, "commit"));
	const char *base = json_string_value(json_object_get(result, "base"));
	if (!commit || !base || !strcmp(commit, base))
		return 0; /* nothing committed beyond the base */
	_cleanup_free_ char *dir = evidence_bundle_dir(c->data_dir, session_id);
	_cleanup_free_ char *path =
	    dir ? wr_asprintf("%s/" EVIDENCE_BUNDLE_NAME, dir) : NULL;
	if (!path)
		return wr_error_set(err, ENOMEM, "checkpoint");
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return wr_error_set(err, errno, "checkpoint: %s", path);
	int64_t epoch = lease_epoch(c, session_id);
	if (epoch == LEASE_NOT_HELD)
		return wr_error_set(err, ESTALE,
				    "checkpoint: the session's lease is lost");
	struct blobs_client *bc = NULL;
	int r = blobs_client_new(c->cfg.blobs, &bc, err);
	if (r < 0)
		return r;
	struct blobs_descriptor layer = {.media_type = CKPT_MEDIA_BUNDLE};
	struct blobs_descriptor cfgd = {.media_type = CKPT_MEDIA_CONFIG};
	_cleanup_free_ char *cfg_text = NULL;
	json_t *cfg_obj = json_pack("{s:s, s:s, s:s, s:i}", "session",
				    session_id, "commit", commit, "base", base,
				    "turn", turn);
	cfg_text = cfg_obj ? json_dumps(cfg_obj, JSON_COMPACT | JSON_SORT_KEYS)
			   : NULL;
	json_decref(cfg_obj);
	if (!cfg_text)
		r = wr_error_set(err, ENOMEM, "checkpoint");
	if (r == 0)
		r = blobs_push(bc, fd, layer.digest, &layer.size, err);
	if (r == 0)
		r = push_text(bc, cfg_text, cfgd.digest, &cfgd.size, err);
	/* the session's artifacts (its diff first among them), so that an
	 * API server on another host serves them (api/artifacts.c); layers
	 * of the manifest after the bundle, so that what names them is the
	 * manifest: the registry's gc (warren snapshot gc, the registry's
	 * own) takes them with it, never before */
	json_t *arts = r == 0 ? push_artifacts(c, bc, session_id) : NULL;
	size_t n_layers = 1 + (arts ? json_object_size(arts) : 0);
	_cleanup_free_ struct blobs_descriptor *layers =
	    r == 0 ? wr_calloc(n_layers, sizeof(*layers)) : NULL;
	if (r == 0 && !layers)
		r = wr_error_set(err, ENOMEM, "checkpoint");
	if (layers) {
		layers[0] = layer;
		size_t k = 1;
		const char *name;
		json_t *a;
		json_object_foreach(arts, name, a)
		{
			struct blobs_descriptor *d = &layers[k++];
			d->media_type = CKPT_MEDIA_ARTIFACT;
			snprintf(
			    d->digest, sizeof(d->digest), "%s",
			    json_string_value(json_object_get(a, "digest")));
			d->size = (uint64_t)json_integer_value(
			    json_object_get(a, "size"));
			d->annotations =
			    json_pack("{s:s}", CKPT_ANNOTATION_ARTIFACT, name);
		}
	}
	char tag[128];
	snprintf(tag, sizeof(tag), "ckpt-%s-e%lld", session_id,
		 (long long)epoch);
	char manifest_digest[BLOBS_DIGEST_MAX] = "";
	if (r == 0) {
		struct blobs_manifest m = {
		    .config = cfgd,
		    .layers = layers,
		    .n_layers = n_layers,
		    .annotations = json_pack(
			"{s:s, s:s, s:s}", "org.warren.checkpoint.session",
			session_id, "org.warren.checkpoint.commit", commit,
			"org.warren.checkpoint.base", base)};
		_cleanup_free_ char *mj = NULL;
		r = blobs_manifest_build(&m, &mj, err);
		json_decref(m.annotations);
		if (r == 0)
			r = blobs_manifest_put(bc, tag, mj, strlen(mj),
					       manifest_digest, err);
	}
	for (size_t k = 1; layers && k < n_layers; k++)
		json_decref(layers[k].annotations);
	blobs_client_free(bc);
	if (r < 0) {
		json_decref(arts);
		return wr_error_wrap(err, "checkpoint to the registry");
	}
	*out = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:i, s:s}", "tag",
			 tag, "manifest", manifest_digest, "bundle",
			 layer.digest, "bundle_bytes", (json_int_t)layer.size,
			 "commit", commit, "base", base, "turn", turn, "worker",
			 c->cfg.worker_id);
	if (*out && arts)
		json_object_set_new(*out, "artifacts", arts);
	else
		json_decref(arts);
	return 0;
}

bool checkpoint_needed(const struct control *c, const char *session_id,
		       const json_t *outcome)
{
	if (!c->cfg.blobs || !json_is_object(json_object_get(outcome,
							     "checkpoint")))
		return false;
	/* the workspace is here: nothing to take over */
	_cleanup_free_ char *img = wr_asprintf(
	    "%s/sessions/%s/layer.img", c->data_dir, session_id);
	_cleanup_free_ char *plain =
	    wr_asprintf("%s/sessions/%s/upper", c->data_dir, session_id);
	struct stat st;
	return img && plain && lstat(img, &st) < 0 && lstat(plain, &st) < 0;
}

char *checkpoint_dir(const struct control *c, const char *session_id)
{
	return wr_asprintf("%s/sessions/%s.checkpoint", c->data_dir,
			   session_id);
}

int checkpoint_pull_bundle(struct control *c, const json_t *ckpt, int fd,
			   struct wr_error **err)
{
	const char *digest = json_string_value(json_object_get(ckpt, "bundle"));
	if (!digest)
		return wr_error_set(err, EINVAL,
				    "checkpoint: no bundle recorded");
	if (!c->cfg.blobs)
		return wr_error_set(err, ENOTSUP,
				    "checkpoint: this server has no registry "
				    "(blobs)");
	struct blobs_client *bc = NULL;
	int r = blobs_client_new(c->cfg.blobs, &bc, err);
	uint64_t written = 0;
	if (r == 0)
		r = blobs_pull(bc, digest, fd, CKPT_BUNDLE_MAX, &written, err);
	blobs_client_free(bc);
	return r < 0 ? wr_error_wrap(err, "checkpoint from the registry") : 0;
}

int checkpoint_fetch(struct control *c, const char *session_id,
		     const json_t *ckpt, struct wr_error **err)
{
	_cleanup_free_ char *dir = checkpoint_dir(c, session_id);
	_cleanup_free_ char *path =
	    dir ? wr_asprintf("%s/" CHECKPOINT_BUNDLE_NAME, dir) : NULL;
	if (!path)
		return wr_error_set(err, ENOMEM, "checkpoint");
	wr_rm_rf(dir);
	if (mkdir(dir, 0755) < 0)
		return wr_error_set(err, errno, "checkpoint: mkdir %s", dir);
	_cleanup_close_ int fd =
	    open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return wr_error_set(err, errno, "checkpoint: %s", path);
	int r = checkpoint_pull_bundle(c, ckpt, fd, err);
	if (r < 0)
		wr_rm_rf(dir);
	return r;
}

void checkpoint_forget(const struct control *c, const char *session_id)
{
	_cleanup_free_ char *dir = checkpoint_dir(c, session_id);
	if (dir)
		wr_rm_rf(dir);
}

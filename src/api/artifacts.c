/* artifacts.c - a session's artifacts: the list, one artifact's bytes,
 * and the diff (the artifact diff.patch, written when the session reaches
 * review).
 *
 * The store's record of an artifact names a path on the host. The API
 * never shows that path, and serves a file only if it really is a regular
 * file below <data>/artifacts/<session id>/: a record that points anywhere
 * else (written by mistake or tampered with) must not turn the API into a
 * way to read the server's other files. The check is made on the resolved
 * path (realpath) and again by the kernel when the file is opened
 * (openat2 with RESOLVE_BENEATH from the directory), so that a symlink
 * swapped in between cannot lead out. */
#include "api/internal.h"

#include "blobs/blobs.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define OCTET_STREAM "application/octet-stream"
#define DIFF_TYPE "text/x-diff; charset=utf-8"

static bool token_char(char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
	       (ch >= 'A' && ch <= 'Z') || strchr("!#$%&'*+-.^_`|~", ch);
}

/* A media type fit for a Content-Type header: "type/subtype", then
 * parameters of printable ASCII only (nothing that could end the header
 * line), shorter than buf. */
static bool media_type_ok(const char *s, size_t max)
{
	if (!s || strlen(s) >= max)
		return false;
	const char *p = s;
	while (*p && token_char(*p))
		p++;
	if (p == s || *p != '/')
		return false;
	const char *sub = ++p;
	while (*p && token_char(*p))
		p++;
	if (p == sub)
		return false;
	for (; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			return false;
	return true;
}

/* What an artifact is served as: its recorded media type if it is a
 * valid one, else application/octet-stream. */
static const char *served_type(const struct store_artifact *a, char *buf,
			       size_t size)
{
	if (!media_type_ok(a->media_type, size))
		return OCTET_STREAM;
	snprintf(buf, size, "%s", a->media_type);
	return buf;
}

int api_open_beneath(int dirfd, const char *rel)
{
	struct open_how how = {
	    .flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK,
	    .resolve =
		RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	if (fd >= 0)
		return (int)fd;
	if (errno != ENOSYS && errno != EPERM)
		return -errno;
	/* No openat2 (Linux < 5.6, or a seccomp filter that does not know
	 * it): rel was found free of symlinks by realpath a moment ago, and
	 * O_NOFOLLOW keeps its last component from having become one. */
	int plain = openat(dirfd, rel, (int)how.flags);
	return plain >= 0 ? plain : -errno;
}

/* The file of artifact record path, opened for reading: its descriptor
 * (the caller closes it) and size. -ENOENT if it does not exist (or there
 * is no data directory); -EXDEV if it is not below
 * <data_dir>/artifacts/<session_id>/ (a relative path is taken from the
 * working directory, as the runner wrote it);
 * -ENODEV if it is not a regular file; -EFBIG past API_ARTIFACT_SERVE_MAX;
 * another -errno on failure. */
static int artifact_open(const char *data_dir, const char *session_id,
			 const char *path, uint64_t *size_out)
{
	if (!data_dir || !path)
		return -ENOENT;
	_cleanup_free_ char *dir =
	    wr_asprintf("%s/artifacts/%s", data_dir, session_id);
	if (!dir)
		return -ENOMEM;
	/* both resolved: the data directory may be reached through a
	 * symlink of its own */
	_cleanup_free_ char *dir_real = realpath(dir, NULL);
	if (!dir_real)
		return errno == ENOENT || errno == ENOTDIR ? -ENOENT : -errno;
	_cleanup_free_ char *file_real = realpath(path, NULL);
	if (!file_real)
		return errno == ENOENT || errno == ENOTDIR ? -ENOENT : -errno;
	size_t n = strlen(dir_real);
	if (strncmp(file_real, dir_real, n) != 0 || file_real[n] != '/')
		return -EXDEV;

	_cleanup_close_ int dirfd =
	    open(dir_real, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return errno == ENOENT ? -ENOENT : -errno;
	_cleanup_close_ int fd = api_open_beneath(dirfd, file_real + n + 1);
	if (fd == -ELOOP || fd == -EXDEV)
		return -EXDEV; /* it became a symlink, or leads out */
	if (fd < 0)
		return fd;
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return -errno;
	if (!S_ISREG(sb.st_mode))
		return -ENODEV;
	if ((uint64_t)sb.st_size > API_ARTIFACT_SERVE_MAX)
		return -EFBIG;
	*size_out = (uint64_t)sb.st_size;
	return TAKE_FD(fd);
}

/* The artifacts of session c->id (visible to the caller: checked by the
 * handler), or -1 after an answer. */
static int list_artifacts(struct api_ctx *c, struct store_artifact **v,
			  size_t *n)
{
	struct wr_error *err = NULL;
	int r = c->a->st->ops->artifact_list(c->a->st, c->id, v, n, &err);
	if (r == -ENOENT) {
		wr_error_free(err);
		return api_reject(c->out, 404, "session %s not found", c->id);
	}
	if (r < 0) {
		api_reply_failure(c, r, err, "list the artifacts");
		wr_error_free(err);
		return -1;
	}
	return 0;
}

/* Answers with the bytes of artifact `name` of session c->id as
 * content_type (NULL: the artifact's own media type); missing is the
 * 404 answer when the session has no such artifact. */
/* Is path in this server's artifact directory of the session (as given,
 * or resolved)? */
static bool path_is_ours(struct api_ctx *c, const char *path)
{
	if (!c->a->data_dir || !path)
		return false;
	_cleanup_free_ char *dir =
	    wr_asprintf("%s/artifacts/%s", c->a->data_dir, c->id);
	_cleanup_free_ char *real = dir ? realpath(dir, NULL) : NULL;
	const char *const prefixes[] = {dir, real};
	for (size_t i = 0; i < 2; i++) {
		size_t n = prefixes[i] ? strlen(prefixes[i]) : 0;
		if (n && !strncmp(path, prefixes[i], n) && path[n] == '/')
			return true;
	}
	return false;
}

/* An artifact written on another host (a worker's data directory): the
 * copy its worker checkpointed to the registry (outcome.checkpoint.
 * artifacts), fetched once into this server's DATA/artifacts/<id>/ with
 * its digest checked. Returns the open file as artifact_open does, or
 * -ENOENT when there is none to fetch. */
static int fetch_remote(struct api_ctx *c, const char *outcome_json,
			const char *name, uint64_t *size)
{
	if (!c->a->blobs || !c->a->data_dir || !outcome_json)
		return -ENOENT;
	json_t *o = json_loads(outcome_json, 0, NULL);
	json_t *art = json_object_get(
	    json_object_get(json_object_get(o, "checkpoint"), "artifacts"),
	    name);
	const char *digest = json_string_value(json_object_get(art, "digest"));
	int r = -ENOENT;
	_cleanup_free_ char *dir =
	    wr_asprintf("%s/artifacts/%s", c->a->data_dir, c->id);
	/* a flat name of our own: the recorded one may have directories */
	char flat[API_ARTIFACT_NAME_MAX + 16];
	snprintf(flat, sizeof(flat), "remote.%s", name);
	for (char *p = flat; *p; p++)
		if (*p == '/')
			*p = '_';
	_cleanup_free_ char *path = dir ? wr_asprintf("%s/%s", dir, flat) : NULL;
	_cleanup_free_ char *tmp = path ? wr_asprintf("%s.part", path) : NULL;
	if (digest && tmp) {
		r = artifact_open(c->a->data_dir, c->id, path, size);
		if (r == -ENOENT && wr_mkdir_p(dir, 0700) == 0) {
			int fd = open(tmp,
				      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				      0600);
			struct blobs_client *bc = NULL;
			struct wr_error *err = NULL;
			uint64_t written = 0;
			int pr = fd < 0 ? -errno
				 : blobs_client_new(c->a->blobs, &bc, &err);
			if (pr == 0)
				pr = blobs_pull(bc, digest, fd,
						API_ARTIFACT_SERVE_MAX, &written,
						&err);
			blobs_client_free(bc);
			if (fd >= 0)
				close(fd);
			if (pr == 0 && rename(tmp, path) == 0) {
				r = artifact_open(c->a->data_dir, c->id, path,
						  size);
			} else {
				char qp[80];
				api_log(WR_LOG_WARN,
					"%s %s: artifact %s from the registry: "
					"%s",
					c->req->method,
					api_quote(c->req->path, qp), name,
					err && err->msg ? err->msg
							: strerror(-pr));
				unlink(tmp);
				r = -ENOENT;
			}
			wr_error_free(err);
		}
	}
	json_decref(o);
	return r;
}

static int serve(struct api_ctx *c, const char *name, const char *content_type,
		 const char *missing)
{
	struct store_session s = {0};
	struct store_artifact *v = NULL;
	size_t n = 0;
	if (api_session_load(c, &s) < 0)
		return 0;
	_cleanup_free_ char *outcome =
	    s.outcome_json ? wr_strdup(s.outcome_json) : NULL;
	store_session_clear(&s);
	if (list_artifacts(c, &v, &n) < 0)
		return 0;
	const struct store_artifact *a = NULL;
	for (size_t i = 0; i < n && !a; i++)
		if (v[i].name && strcmp(v[i].name, name) == 0)
			a = &v[i];
	if (!a) {
		store_artifacts_free(v, n);
		return api_reply_error(c->out, 404, "%s", missing);
	}

	uint64_t size = 0;
	int fd = artifact_open(c->a->data_dir, c->id, a->path, &size);
	/* recorded by a server of another data directory (a worker on
	 * another host): the registry's copy, never that path */
	if ((fd == -ENOENT || fd == -EXDEV) && c->a->blobs &&
	    !path_is_ours(c, a->path))
		fd = fetch_remote(c, outcome, name, &size);
	if (fd == -EXDEV || fd == -ENODEV) {
		/* not something the runner writes: say so to the operator */
		char path[80];
		api_log(WR_LOG_WARN, "%s %s: refused: artifact %s %s",
			c->req->method, api_quote(c->req->path, path), name,
			fd == -EXDEV ? "is recorded outside the session's "
				       "artifact directory"
				     : "is not a regular file");
	}
	if (fd < 0) {
		store_artifacts_free(v, n);
		if (fd == -ENOENT || fd == -EXDEV || fd == -ENODEV)
			return api_reply_error(c->out, 404,
					       "artifact %s of session %s not "
					       "found",
					       name, c->id);
		if (fd == -EFBIG)
			return api_reply_error(c->out, 409,
					       "artifact %s is too large to "
					       "serve (more than %u MiB)",
					       name,
					       API_ARTIFACT_SERVE_MAX >> 20);
		char path[80];
		api_log(WR_LOG_ERROR, "%s %s: open artifact %s: %s",
			c->req->method, api_quote(c->req->path, path), name,
			strerror(-fd));
		return api_reply_error(c->out, 500, "internal error");
	}
	api_response_clear(c->out);
	c->out->status = 200;
	c->out->content_type =
	    content_type
		? content_type
		: served_type(a, c->out->type_buf, sizeof(c->out->type_buf));
	c->out->file = true;
	c->out->file_fd = fd;
	c->out->file_size = size;
	store_artifacts_free(v, n);
	return 0;
}

int api_session_diff(struct api_ctx *c)
{
	char missing[160];
	snprintf(missing, sizeof(missing),
		 "session %s has no diff: one is written when the session "
		 "reaches review",
		 c->id);
	return serve(c, API_DIFF_ARTIFACT, DIFF_TYPE, missing);
}

int api_session_artifact(struct api_ctx *c)
{
	char missing[STORE_ID_MAX + API_ARTIFACT_NAME_MAX + 64];
	snprintf(missing, sizeof(missing), "session %s has no artifact %s",
		 c->id, c->name);
	return serve(c, c->name, NULL, missing);
}

int api_session_artifacts(struct api_ctx *c)
{
	struct store_session s = {0};
	struct store_artifact *v = NULL;
	size_t n = 0;
	if (api_session_load(c, &s) < 0)
		return 0;
	store_session_clear(&s);
	if (list_artifacts(c, &v, &n) < 0)
		return 0;
	json_t *list = json_array();
	int bad = !list;
	for (size_t i = 0; i < n && !bad; i++) {
		/* the media type it would be served as; never the path */
		char type[sizeof(c->out->type_buf)];
		json_t *o = json_pack(
		    "{s:o,s:s,s:I,s:I}", "name", api_json_string(v[i].name),
		    "media_type", served_type(&v[i], type, sizeof(type)),
		    "size", (json_int_t)v[i].size, "created_ms",
		    (json_int_t)v[i].created_ms);
		bad = json_array_append_new(list, o);
	}
	store_artifacts_free(v, n);
	json_t *obj = bad ? NULL : json_pack("{s:o}", "artifacts", list);
	if (bad)
		json_decref(list);
	return api_reply_render(c, 200, obj, "render the artifacts");
}

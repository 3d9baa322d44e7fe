/* web.c - the web UI's static files (web/ in the source tree), served at
 * "/" to anyone: they hold no data. The page signs in with an API token
 * and asks /api/v1 for everything it shows.
 *
 * Only paths made of [A-Za-z0-9._-] segments that do not start with a
 * dot (no "..", no hidden files); opened beneath the web directory without
 * following symlinks; only regular files of a known media type; anything
 * else is a 404 whatever the method. An existing page answers GET and
 * HEAD, other methods 405. "/" is index.html. The transport adds the security headers
 * (Content-Security-Policy among them) to every answer marked web. */
#include "api/internal.h"

#include "util/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WEB_PATH_MAX 256
#define WEB_FILE_MAX (16u * 1024 * 1024)

static const struct {
	const char *ext;
	const char *type;
} media_types[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".json", "application/json"},
    {".webmanifest", "application/manifest+json"},
    {".woff2", "font/woff2"},
    {".txt", "text/plain; charset=utf-8"},
};

static const char *media_type(const char *path)
{
	const char *dot = strrchr(path, '.');
	if (!dot || strchr(dot, '/'))
		return NULL;
	for (size_t i = 0; i < ARRAY_SIZE(media_types); i++)
		if (strcmp(dot, media_types[i].ext) == 0)
			return media_types[i].type;
	return NULL;
}

/* Is rel ("app.js", "img/logo.svg") a name we would serve? */
static bool web_path_valid(const char *rel)
{
	size_t len = strlen(rel);
	if (len == 0 || len > WEB_PATH_MAX)
		return false;
	bool seg_start = true;
	for (const char *p = rel; *p; p++) {
		char ch = *p;
		if (ch == '/') {
			if (seg_start)
				return false; /* "//" or a trailing '/' */
			seg_start = true;
			continue;
		}
		if (seg_start && ch == '.')
			return false; /* ".", "..", ".hidden" */
		seg_start = false;
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' ||
		      ch == '-'))
			return false;
	}
	return !seg_start;
}

static int not_found(struct api_response *out)
{
	return api_reply_error(out, 404, "no such page");
}

int api_web_serve(struct api *a, const struct api_request *req,
		  struct api_response *out)
{
	bool head = strcmp(req->method, "HEAD") == 0;
	if (a->web_dir_fd < 0 || req->path[0] != '/')
		return not_found(out);
	const char *rel = req->path + 1;
	if (*rel == '\0')
		rel = "index.html";
	const char *type = media_type(rel);
	if (!web_path_valid(rel) || !type)
		return not_found(out);

	_cleanup_close_ int fd = api_open_beneath(a->web_dir_fd, rel);
	if (fd < 0)
		return not_found(out);
	struct stat sb;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) ||
	    (uint64_t)sb.st_size > WEB_FILE_MAX)
		return not_found(out);
	/* a page that exists, asked with another method */
	if (strcmp(req->method, "GET") != 0 && !head) {
		char m[80];
		api_reply_error(out, 405, "method %s not allowed; use GET",
				api_quote(req->method, m));
		snprintf(out->allow, sizeof(out->allow), "GET, HEAD");
		return 0;
	}
	out->status = 200;
	snprintf(out->type_buf, sizeof(out->type_buf), "%s", type);
	out->content_type = out->type_buf;
	out->web = true;
	/* HEAD too: the transport sends the headers alone, Content-Length
	 * the file's */
	out->file = true;
	out->file_fd = TAKE_FD(fd);
	out->file_size = (uint64_t)sb.st_size;
	return 0;
}

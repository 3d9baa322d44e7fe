/* config.c - the "blobs" configuration and the names the distribution
 * API accepts (blobs.h). */
#include "blobs/blobs.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/parse.h"
#include "util/url.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PASSWORD_MAX 4096

static bool lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One path component: [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)* */
static bool component_valid(const char *s, size_t len)
{
	size_t i = 0;
	if (!len || !lower_alnum(s[0]))
		return false;
	while (i < len) {
		while (i < len && lower_alnum(s[i]))
			i++;
		if (i == len)
			return true;
		/* a separator, then an alphanumeric */
		size_t start = i;
		if (s[i] == '.')
			i++;
		else if (s[i] == '_')
			i += (i + 1 < len && s[i + 1] == '_') ? 2 : 1;
		else if (s[i] == '-')
			while (i < len && s[i] == '-')
				i++;
		if (i == start || i == len || !lower_alnum(s[i]))
			return false;
	}
	return true;
}

bool blobs_repository_valid(const char *name)
{
	size_t len = strlen(name);
	if (!len || len > BLOBS_REPOSITORY_MAX)
		return false;
	const char *p = name;
	for (;;) {
		const char *slash = memchr(p, '/', len - (size_t)(p - name));
		size_t n =
		    slash ? (size_t)(slash - p) : len - (size_t)(p - name);
		if (!component_valid(p, n))
			return false;
		if (!slash)
			return true;
		p = slash + 1;
	}
}

bool blobs_digest_valid(const char *digest)
{
	if (strncmp(digest, "sha256:", 7) || strlen(digest) != 7 + 64)
		return false;
	for (const char *p = digest + 7; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

bool blobs_tag_valid(const char *tag)
{
	size_t len = strlen(tag);
	if (!len || len > 128 || tag[0] == '.' || tag[0] == '-')
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = tag[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '-'))
			return false;
	}
	return true;
}

/* The password file, opened without following a last symlink: a regular
 * file that only its owner may read or write. */
static int password_read(const char *file, char **out, struct wr_error **err)
{
	_cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return wr_error_input(err, errno, "blobs.password_file %s",
				      file);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return wr_error_input(err, errno, "blobs.password_file %s",
				      file);
	if (!S_ISREG(st.st_mode)) {
		wr_error_input(
		    err, 0, "blobs.password_file %s: not a regular file", file);
		return -EINVAL;
	}
	if (st.st_mode & 077) {
		wr_error_input(err, 0,
			       "blobs.password_file %s: readable or writable "
			       "by group or others (chmod 600 it)",
			       file);
		return -EPERM;
	}
	if (st.st_size > PASSWORD_MAX) {
		wr_error_input(err, 0,
			       "blobs.password_file %s: larger than %d bytes",
			       file, PASSWORD_MAX);
		return -EFBIG;
	}
	char *text = wr_malloc(PASSWORD_MAX + 1);
	if (!text)
		return wr_error_set(err, ENOMEM, "blobs.password_file");
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, text + len, PASSWORD_MAX - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			explicit_bzero(text, len);
			free(text);
			return wr_error_input(err, e, "blobs.password_file %s",
					      file);
		}
		if (n == 0 || (len += (size_t)n) == PASSWORD_MAX)
			break;
	}
	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
		len--;
	text[len] = '\0';
	if (!len || memchr(text, '\0', len)) {
		explicit_bzero(text, len);
		free(text);
		wr_error_input(err, 0,
			       "blobs.password_file %s: empty, or holds a NUL",
			       file);
		return -EINVAL;
	}
	*out = text;
	return 0;
}

int blobs_config_password(const struct blobs_config *cfg, char **out,
			  struct wr_error **err)
{
	if (!cfg->password_file) {
		wr_error_set(err, 0, "blobs: no password_file");
		return -ENOENT;
	}
	return password_read(cfg->password_file, out, err);
}

static int want_string(const json_t *o, const char *key, bool required,
		       const char **out, struct wr_error **err)
{
	const json_t *v = json_object_get(o, key);
	*out = NULL;
	if (!v) {
		if (!required)
			return 0;
		wr_error_input(err, 0, "blobs.%s: required", key);
		return -EINVAL;
	}
	if (!json_is_string(v) || !json_string_length(v) ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		wr_error_input(err, 0, "blobs.%s: expected a non-empty string",
			       key);
		return -EINVAL;
	}
	*out = json_string_value(v);
	return 0;
}

/* http(s)://host[:port] with nothing after it but one '/' */
static int registry_check(const char *url, struct wr_error **err)
{
	struct wr_url_parts parts;
	if (!wr_url_http_parts(url, &parts) ||
	    (url[parts.origin_len] && strcmp(url + parts.origin_len, "/")) ||
	    memchr(parts.host, '@', parts.host_len)) {
		wr_error_input(err, 0,
			       "blobs.registry: '%s': expected http(s)://"
			       "HOST[:PORT], without a path or user",
			       url);
		return -EINVAL;
	}
	return 0;
}

int blobs_config_parse(const json_t *v, struct blobs_config *out,
		       struct wr_error **err)
{
	static const char *const keys[] = {"registry", "repository", "username",
					   "password_file", "cache_max"};
	if (!json_is_object(v)) {
		wr_error_input(err, 0,
			       "blobs: expected {\"registry\": URL, "
			       "\"repository\": NAME, \"username\": NAME, "
			       "\"password_file\": PATH}");
		return -EINVAL;
	}
	const char *key;
	const json_t *val;
	json_object_foreach((json_t *)v, key, val)
	{
		size_t i = 0;
		while (i < ARRAY_SIZE(keys) && strcmp(keys[i], key))
			i++;
		if (i == ARRAY_SIZE(keys)) {
			wr_error_input(err, 0, "blobs: unknown key '%s'", key);
			return -EINVAL;
		}
	}
	const char *registry, *repository, *username, *password_file;
	int r = want_string(v, "registry", true, &registry, err);
	if (r == 0)
		r = want_string(v, "repository", true, &repository, err);
	if (r == 0)
		r = want_string(v, "username", false, &username, err);
	if (r == 0)
		r = want_string(v, "password_file", false, &password_file, err);
	if (r < 0)
		return r;
	uint64_t cache_max = 0;
	const json_t *cap = json_object_get(v, "cache_max");
	if (json_is_integer(cap) && json_integer_value(cap) > 0)
		cache_max = (uint64_t)json_integer_value(cap);
	else if (cap && (!json_is_string(cap) ||
			 wr_parse_size(json_string_value(cap), &cache_max) < 0 ||
			 cache_max == 0)) {
		wr_error_input(err, 0,
			       "blobs.cache_max: expected a size of at least "
			       "one byte (\"20G\", or bytes)");
		return -EINVAL;
	}
	if ((r = registry_check(registry, err)) < 0)
		return r;
	if (!blobs_repository_valid(repository)) {
		wr_error_input(err, 0,
			       "blobs.repository: '%s': expected lowercase "
			       "letters and digits, separated by '.', '_', "
			       "'__' or '-'s, in '/'-separated components, "
			       "at most %d bytes",
			       repository, BLOBS_REPOSITORY_MAX);
		return -EINVAL;
	}
	if (!username != !password_file) {
		wr_error_input(err, 0, "blobs.%s: needs blobs.%s",
			       username ? "username" : "password_file",
			       username ? "password_file" : "username");
		return -EINVAL;
	}
	if (username && strchr(username, ':')) {
		wr_error_input(err, 0, "blobs.username: holds a ':'");
		return -EINVAL;
	}
	if (password_file) {
		/* checked now, so a bad file fails the start; read again at
		 * each use */
		char *password = NULL;
		if ((r = password_read(password_file, &password, err)) < 0)
			return r;
		explicit_bzero(password, strlen(password));
		free(password);
	}
	struct blobs_config cfg = {0};
	size_t reg_len = strlen(registry);
	if (registry[reg_len - 1] == '/')
		reg_len--;
	cfg.registry = wr_strndup(registry, reg_len);
	cfg.repository = wr_strdup(repository);
	cfg.username = username ? wr_strdup(username) : NULL;
	cfg.password_file = password_file ? wr_strdup(password_file) : NULL;
	cfg.cache_max = cache_max;
	if (!cfg.registry || !cfg.repository || (username && !cfg.username) ||
	    (password_file && !cfg.password_file)) {
		blobs_config_clear(&cfg);
		return wr_error_set(err, ENOMEM, "blobs");
	}
	*out = cfg;
	return 0;
}

void blobs_config_clear(struct blobs_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->registry);
	free(cfg->repository);
	free(cfg->username);
	free(cfg->password_file);
	memset(cfg, 0, sizeof(*cfg));
}

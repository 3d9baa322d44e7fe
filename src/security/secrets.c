/* secrets.c - named secrets encrypted at rest (see secrets.h).
 *
 * File format of DATA/secrets/NAME.enc:
 *
 *   0   8  magic "WRSECRT1" (format version 1)
 *   8   8  created_ms, big-endian
 *   16  8  updated_ms, big-endian
 *   24 24  nonce (random)
 *   48  -  XChaCha20-Poly1305 ciphertext of the value, with its 16-byte tag
 *
 * The associated data is the 24-byte header followed by the name, so the
 * times cannot be edited and a file cannot be renamed to another secret
 * without the decryption failing. The header is in clear so that a list
 * needs neither the key nor a decryption. */
#include "security/secrets.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAGIC "WRSECRT1"
#define MAGIC_BYTES 8
#define HEADER_BYTES 24
#define NONCE_BYTES crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
#define TAG_BYTES crypto_aead_xchacha20poly1305_ietf_ABYTES
#define PREFIX_BYTES (HEADER_BYTES + NONCE_BYTES)
#define FILE_MAX (PREFIX_BYTES + SECRETS_VALUE_MAX + TAG_BYTES)
#define SUFFIX ".enc"
#define REPOS_SUFFIX ".repos" /* which repositories may have it */
#define SCAN_CHUNK (1u << 20)
#define REPOS_FILE_MAX (64 * 1024)

_Static_assert(SECRETS_KEY_BYTES == crypto_aead_xchacha20poly1305_ietf_KEYBYTES,
	       "key size");
_Static_assert(NONCE_BYTES == 24, "XChaCha20 nonce");

bool secrets_name_valid(const char *name)
{
	size_t len = name ? strlen(name) : 0;
	if (len == 0 || len > SECRETS_NAME_MAX ||
	    (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return false;
	}
	return true;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put_be64(unsigned char *p, int64_t v)
{
	uint64_t u = (uint64_t)v;
	for (int i = 7; i >= 0; i--) {
		p[i] = (unsigned char)(u & 0xff);
		u >>= 8;
	}
}

static int64_t get_be64(const unsigned char *p)
{
	uint64_t u = 0;
	for (int i = 0; i < 8; i++)
		u = (u << 8) | p[i];
	return (int64_t)u;
}

static int init_sodium(struct wr_error **err)
{
	if (sodium_init() < 0)
		return wr_error_set(err, EIO, "secrets: initialize libsodium");
	return 0;
}

static int name_error(const char *name, struct wr_error **err)
{
	return wr_error_input(err, 0,
			      "'%.80s' is not a secret name (1 to %d of A-Z, "
			      "0-9 and '_', not starting with a digit)",
			      name ? name : "", SECRETS_NAME_MAX);
}

/* fsync a directory so that a rename or unlink in it is durable. */
static void sync_dir(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		fsync(fd);
}

/* st must describe something only we can read: owned by our euid, no
 * permission bits for group or others. */
static int check_private(const struct stat *st, const char *path,
			 const char *what, const char *want,
			 struct wr_error **err)
{
	if (st->st_uid != geteuid())
		return wr_error_set(
		    err, EPERM, "%s: %s owned by uid %u, not by uid %u", path,
		    what, (unsigned)st->st_uid, (unsigned)geteuid());
	if (st->st_mode & 077)
		return wr_error_set(err, EPERM,
				    "%s: %s has mode %04o, which lets group "
				    "or others in; it must be %s",
				    path, what, (unsigned)(st->st_mode & 07777),
				    want);
	return 0;
}

/* DATA/secrets, checked (and created with create). -ENOENT if it does not
 * exist and create is false. */
static int secrets_dir(const char *data_dir, bool create, char **out,
		       struct wr_error **err)
{
	_cleanup_free_ char *dir = wr_asprintf("%s/secrets", data_dir);
	if (!dir)
		return wr_error_set(err, ENOMEM, "secrets");
	if (create) {
		int r = wr_mkdir_p(data_dir, 0700);
		if (r < 0)
			return wr_error_set(err, -r, "create %s", data_dir);
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return wr_error_set(err, errno, "create %s", dir);
	}
	struct stat st;
	if (lstat(dir, &st) < 0) {
		if (errno == ENOENT && !create)
			return -ENOENT;
		return wr_error_set(err, errno, "%s", dir);
	}
	if (!S_ISDIR(st.st_mode))
		return wr_error_set(err, ENOTDIR, "%s: not a directory", dir);
	int r = check_private(&st, dir, "the directory", "0700", err);
	if (r < 0)
		return r;
	*out = TAKE_PTR(dir);
	return 0;
}

static int read_full(int fd, void *buf, size_t len)
{
	unsigned char *p = buf;
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (int)(got == len ? 0 : -EIO);
}

static int write_full(int fd, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- the key ------------------------------------------------------------ */

static int key_from_fd(int fd, const char *path,
		       unsigned char key[SECRETS_KEY_BYTES],
		       struct wr_error **err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return wr_error_set(err, errno, "%s", path);
	if (!S_ISREG(st.st_mode))
		return wr_error_set(err, EPERM, "%s: not a regular file", path);
	int r = check_private(&st, path, "the key", "0400 or 0600", err);
	if (r < 0)
		return r;
	if (st.st_size != SECRETS_KEY_BYTES)
		return wr_error_set(
		    err, EINVAL, "%s: %lld bytes, a key is %d (damaged?)", path,
		    (long long)st.st_size, SECRETS_KEY_BYTES);
	r = read_full(fd, key, SECRETS_KEY_BYTES);
	if (r < 0)
		return wr_error_set(err, -r, "read %s", path);
	return 0;
}

/* A new key: written to a temporary file, then linked into place, so that
 * nobody ever reads half a key, and of two processes creating it at once
 * one wins and both use its key (link, unlike rename, does not replace). */
static int key_create(const char *data_dir, const char *path,
		      struct wr_error **err)
{
	unsigned char key[SECRETS_KEY_BYTES];
	uint64_t tag;
	randombytes_buf(&tag, sizeof(tag));
	_cleanup_free_ char *tmp = wr_asprintf(
	    "%s/.secrets.key.%016llx", data_dir, (unsigned long long)tag);
	if (!tmp)
		return wr_error_set(err, ENOMEM, "secrets key");
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		      0400);
	if (fd < 0)
		return wr_error_set(err, errno, "create %s", tmp);
	randombytes_buf(key, sizeof(key));
	int r = write_full(fd, key, sizeof(key));
	sodium_memzero(key, sizeof(key));
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	close(fd);
	if (r == 0 && link(tmp, path) < 0 && errno != EEXIST)
		r = -errno;
	unlink(tmp);
	if (r < 0)
		return wr_error_set(err, -r, "create %s", path);
	sync_dir(data_dir);
	return 0;
}

/* The key file the configuration names (secrets_key_file), set once at
 * start before any thread reads it; NULL: DATA/secrets.key. */
static char *key_file;

int secrets_use_key_file(const char *path, struct wr_error **err)
{
	if (!path || path[0] != '/')
		return wr_error_input(err, 0,
				      "secrets_key_file: '%.200s' is not an "
				      "absolute path",
				      path ? path : "");
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return wr_error_input(err, errno, "secrets_key_file: open %s",
				      path);
	unsigned char key[SECRETS_KEY_BYTES];
	int r = key_from_fd(fd, path, key, err);
	sodium_memzero(key, sizeof(key));
	if (r < 0) {
		if (err && *err)
			(*err)->bad_input = true;
		return wr_error_wrap(err, "secrets_key_file");
	}
	char *copy = wr_strdup(path);
	if (!copy)
		return wr_error_set(err, ENOMEM, "secrets_key_file");
	free(key_file);
	key_file = copy;
	return 0;
}

const char *secrets_key_file(void)
{
	return key_file;
}

/* Reads the key (secrets_key_file, else DATA/secrets.key) into key; with
 * create, makes DATA/secrets.key if missing (a configured file is never
 * made). Without, a missing key is -ENOKEY. */
static int key_load(const char *data_dir, bool create,
		    unsigned char key[SECRETS_KEY_BYTES], struct wr_error **err)
{
	if (key_file) {
		_cleanup_close_ int fd =
		    open(key_file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return wr_error_set(
			    err, errno == ENOENT ? ENOKEY : errno,
			    "open %s (secrets_key_file)", key_file);
		return key_from_fd(fd, key_file, key, err);
	}
	_cleanup_free_ char *path = wr_asprintf("%s/secrets.key", data_dir);
	if (!path)
		return wr_error_set(err, ENOMEM, "secrets key");
	for (int attempt = 0; attempt < 2; attempt++) {
		_cleanup_close_ int fd =
		    open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			return key_from_fd(fd, path, key, err);
		if (errno != ENOENT)
			return wr_error_set(err, errno, "open %s", path);
		if (!create)
			return wr_error_set(err, ENOKEY,
					    "%s is missing: the secrets "
					    "cannot be decrypted",
					    path);
		int r = key_create(data_dir, path, err);
		if (r < 0)
			return r;
	}
	return wr_error_set(err, EIO, "%s: created but not readable", path);
}

/* ---- files -------------------------------------------------------------- */

static size_t make_ad(unsigned char *ad, const unsigned char *header,
		      const char *name)
{
	size_t len = strlen(name);
	memcpy(ad, header, HEADER_BYTES);
	memcpy(ad + HEADER_BYTES, name, len);
	return HEADER_BYTES + len;
}

/* Writes data to dir/file through a new temporary file and a rename. The
 * temporary name is random: two writers of one secret never share it. */
static int write_atomic(const char *dir, const char *path, const void *data,
			size_t len, struct wr_error **err)
{
	uint64_t tag;
	randombytes_buf(&tag, sizeof(tag));
	_cleanup_free_ char *tmp =
	    wr_asprintf("%s/.tmp.%016llx", dir, (unsigned long long)tag);
	if (!tmp)
		return wr_error_set(err, ENOMEM, "secrets");
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		      0600);
	if (fd < 0)
		return wr_error_set(err, errno, "create %s", tmp);
	int r = write_full(fd, data, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return wr_error_set(err, -r, "write %s", path);
	}
	sync_dir(dir);
	return 0;
}

/* The header of a secret's file; -ENOENT if there is none, -EBADMSG if it
 * is not one of ours. */
static int read_header(int dir_fd, const char *file,
		       unsigned char header[HEADER_BYTES])
{
	_cleanup_close_ int fd =
	    openat(dir_fd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (read_full(fd, header, HEADER_BYTES) < 0 ||
	    memcmp(header, MAGIC, MAGIC_BYTES) != 0)
		return -EBADMSG;
	return 0;
}

static int count_secrets(const char *dir)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? wr_opendir_at(fd) : NULL;
	if (!d)
		return -errno;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (len > strlen(SUFFIX) &&
		    !strcmp(de->d_name + len - strlen(SUFFIX), SUFFIX))
			n++;
	}
	closedir(d);
	return n;
}

static int check_value(const void *value, size_t len, struct wr_error **err)
{
	if (!value || len == 0)
		return wr_error_input(err, 0, "the value is empty");
	if (len > SECRETS_VALUE_MAX)
		return wr_error_input(err, 0,
				      "the value is longer than %d bytes",
				      SECRETS_VALUE_MAX);
	if (memchr(value, '\0', len))
		return wr_error_input(err, 0,
				      "the value contains a NUL byte (it "
				      "must fit in an environment variable)");
	return 0;
}

int secrets_set(const char *data_dir, const char *name, const void *value,
		size_t len, struct secret_info *out, struct wr_error **err)
{
	if (!secrets_name_valid(name))
		return name_error(name, err);
	int r = check_value(value, len, err);
	if (r < 0 || (r = init_sodium(err)) < 0)
		return r;
	_cleanup_free_ char *dir = NULL;
	r = secrets_dir(data_dir, true, &dir, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *file = wr_asprintf("%s" SUFFIX, name);
	_cleanup_free_ char *path = wr_asprintf("%s/%s", dir, file);
	_cleanup_free_ unsigned char *buf =
	    wr_malloc(PREFIX_BYTES + len + TAG_BYTES);
	if (!file || !path || !buf)
		return wr_error_set(err, ENOMEM, "secrets");

	int64_t now = now_ms(), created = now;
	unsigned char header[HEADER_BYTES];
	{
		_cleanup_close_ int dir_fd =
		    open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dir_fd < 0)
			return wr_error_set(err, errno, "open %s", dir);
		r = read_header(dir_fd, file, header);
	}
	if (r == 0) {
		created = get_be64(header + 8); /* a replacement */
	} else if (r == -ENOENT) {
		int n = count_secrets(dir);
		if (n < 0)
			return wr_error_set(err, -n, "read %s", dir);
		if (n >= SECRETS_MAX)
			return wr_error_set(err, ENOSPC,
					    "the store holds %d secrets "
					    "already (the most it takes)",
					    SECRETS_MAX);
	} /* an unreadable old file is replaced */

	unsigned char key[SECRETS_KEY_BYTES];
	r = key_load(data_dir, true, key, err);
	if (r < 0)
		return r;
	memcpy(buf, MAGIC, MAGIC_BYTES);
	put_be64(buf + 8, created);
	put_be64(buf + 16, now);
	unsigned char *nonce = buf + HEADER_BYTES;
	randombytes_buf(nonce, NONCE_BYTES);
	unsigned char ad[HEADER_BYTES + SECRETS_NAME_MAX];
	size_t ad_len = make_ad(ad, buf, name);
	unsigned long long clen = 0;
	crypto_aead_xchacha20poly1305_ietf_encrypt(buf + PREFIX_BYTES, &clen,
						   value, len, ad, ad_len, NULL,
						   nonce, key);
	sodium_memzero(key, sizeof(key));
	r = write_atomic(dir, path, buf, PREFIX_BYTES + (size_t)clen, err);
	if (r < 0)
		return r;
	if (out) {
		memset(out, 0, sizeof(*out));
		snprintf(out->name, sizeof(out->name), "%s", name);
		out->created_ms = created;
		out->updated_ms = now;
	}
	return 0;
}

void secrets_value_free(char *value, size_t len)
{
	if (!value)
		return;
	sodium_memzero(value, len);
	free(value);
}

int secrets_get(const char *data_dir, const char *name, char **value,
		size_t *len, struct wr_error **err)
{
	if (!secrets_name_valid(name))
		return name_error(name, err);
	int r = init_sodium(err);
	if (r < 0)
		return r;
	_cleanup_free_ char *dir = NULL;
	r = secrets_dir(data_dir, false, &dir, err);
	if (r == -ENOENT)
		return wr_error_absent(err, false, "no secret named %s", name);
	if (r < 0)
		return r;
	_cleanup_free_ char *path = wr_asprintf("%s/%s" SUFFIX, dir, name);
	if (!path)
		return wr_error_set(err, ENOMEM, "secrets");
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return wr_error_absent(err, false, "no secret named %s", name);
	if (fd < 0)
		return wr_error_set(err, errno, "open %s", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return wr_error_set(err, errno, "%s", path);
	if (!S_ISREG(st.st_mode) ||
	    st.st_size < (off_t)(PREFIX_BYTES + TAG_BYTES + 1) ||
	    st.st_size > (off_t)FILE_MAX)
		return wr_error_set(err, EBADMSG,
				    "%s: not a secret file (size %lld)", path,
				    (long long)st.st_size);
	size_t size = (size_t)st.st_size;
	_cleanup_free_ unsigned char *buf = wr_malloc(size);
	if (!buf)
		return wr_error_set(err, ENOMEM, "secrets");
	r = read_full(fd, buf, size);
	if (r < 0)
		return wr_error_set(err, -r, "read %s", path);
	if (memcmp(buf, MAGIC, MAGIC_BYTES) != 0)
		return wr_error_set(err, EBADMSG, "%s: not a secret file",
				    path);
	unsigned char key[SECRETS_KEY_BYTES];
	r = key_load(data_dir, false, key, err);
	if (r < 0)
		return r;
	size_t clen = size - PREFIX_BYTES;
	char *plain = wr_malloc(clen - TAG_BYTES + 1);
	if (!plain) {
		sodium_memzero(key, sizeof(key));
		return wr_error_set(err, ENOMEM, "secrets");
	}
	unsigned char ad[HEADER_BYTES + SECRETS_NAME_MAX];
	size_t ad_len = make_ad(ad, buf, name);
	unsigned long long plen = 0;
	int bad = crypto_aead_xchacha20poly1305_ietf_decrypt(
	    (unsigned char *)plain, &plen, NULL, buf + PREFIX_BYTES, clen, ad,
	    ad_len, buf + HEADER_BYTES, key);
	sodium_memzero(key, sizeof(key));
	if (bad || plen == 0 || memchr(plain, '\0', (size_t)plen)) {
		secrets_value_free(plain, clen - TAG_BYTES + 1);
		return wr_error_set(err, EBADMSG,
				    "secret %s does not decrypt: the key is "
				    "not the one it was stored with, or %s "
				    "was altered or copied from another "
				    "secret",
				    name, path);
	}
	plain[plen] = '\0';
	*value = plain;
	*len = (size_t)plen;
	return 0;
}

static int info_cmp(const void *a, const void *b)
{
	return strcmp(((const struct secret_info *)a)->name,
		      ((const struct secret_info *)b)->name);
}

int secrets_list(const char *data_dir, struct secret_info **out, size_t *n,
		 struct wr_error **err)
{
	*out = NULL;
	*n = 0;
	_cleanup_free_ char *dir = NULL;
	int r = secrets_dir(data_dir, false, &dir, err);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	_cleanup_close_ int dir_fd =
	    open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dir_fd >= 0 ? wr_opendir_at(dir_fd) : NULL;
	if (!d)
		return wr_error_set(err, errno, "open %s", dir);
	struct secret_info *v = NULL;
	size_t count = 0, cap = 0;
	struct dirent *de;
	r = 0;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name), slen = strlen(SUFFIX);
		if (len <= slen || len - slen > SECRETS_NAME_MAX ||
		    strcmp(de->d_name + len - slen, SUFFIX))
			continue;
		char name[SECRETS_NAME_MAX + 1];
		memcpy(name, de->d_name, len - slen);
		name[len - slen] = '\0';
		if (!secrets_name_valid(name))
			continue;
		if (count == SECRETS_MAX) {
			r = wr_error_set(err, E2BIG, "%s: more than %d secrets",
					 dir, SECRETS_MAX);
			break;
		}
		if (count == cap) {
			cap = cap ? cap * 2 : 16;
			struct secret_info *grown =
			    wr_realloc(v, cap * sizeof(*v));
			if (!grown) {
				r = wr_error_set(err, ENOMEM, "secrets");
				break;
			}
			v = grown;
		}
		struct secret_info *info = &v[count];
		memset(info, 0, sizeof(*info));
		memcpy(info->name, name, len - slen + 1);
		unsigned char header[HEADER_BYTES];
		int h = read_header(dir_fd, de->d_name, header);
		if (h == -ENOENT)
			continue; /* deleted meanwhile */
		if (h == 0) {
			info->created_ms = get_be64(header + 8);
			info->updated_ms = get_be64(header + 16);
		} /* else listed with no times: get will say what is wrong */
		count++;
	}
	closedir(d);
	if (r < 0) {
		free(v);
		return r;
	}
	if (count)
		qsort(v, count, sizeof(*v), info_cmp);
	*out = v;
	*n = count;
	return 0;
}

/* The existing secrets directory for a secret named name: 0, or the
 * error (a bad name, no such secret when there is no directory). */
static int existing_dir(const char *data_dir, const char *name, char **dir,
			struct wr_error **err)
{
	if (!secrets_name_valid(name))
		return name_error(name, err);
	int r = secrets_dir(data_dir, false, dir, err);
	if (r == -ENOENT)
		return wr_error_absent(err, false, "no secret named %s", name);
	return r < 0 ? r : 0;
}

int secrets_delete(const char *data_dir, const char *name,
		   struct wr_error **err)
{
	_cleanup_free_ char *dir = NULL;
	int r = existing_dir(data_dir, name, &dir, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *path = wr_asprintf("%s/%s" SUFFIX, dir, name);
	if (!path)
		return wr_error_set(err, ENOMEM, "secrets");
	if (unlink(path) < 0) {
		if (errno == ENOENT)
			return wr_error_absent(err, false, "no secret named %s",
					    name);
		return wr_error_set(err, errno, "remove %s", path);
	}
	/* and its list of repositories: a secret set again later under the
	 * same name starts open to any, as a new one */
	_cleanup_free_ char *repos = wr_asprintf("%s/%s" REPOS_SUFFIX, dir, name);
	if (repos)
		unlink(repos);
	sync_dir(dir);
	return 0;
}

/* ---- the files as they are (secrets_store.c copies them) ---------------- */

int secrets_check(const char *data_dir, const char *name, struct wr_error **err)
{
	char *value = NULL;
	size_t len = 0;
	int r = secrets_get(data_dir, name, &value, &len, err);
	if (r == 0)
		secrets_value_free(value, len);
	return r;
}

/* Reads up to max bytes of dir/file (not through a link): 0, -ENOENT,
 * -EFBIG past max, -errno. */
static int read_small(int dir_fd, const char *file, size_t max,
		      unsigned char **out, size_t *len)
{
	_cleanup_close_ int fd =
	    openat(dir_fd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EBADMSG;
	if ((size_t)st.st_size > max)
		return -EFBIG;
	size_t size = (size_t)st.st_size;
	unsigned char *buf = wr_malloc(size + 1);
	if (!buf)
		return -ENOMEM;
	int r = read_full(fd, buf, size);
	if (r < 0) {
		free(buf);
		return r;
	}
	buf[size] = '\0';
	*out = buf;
	*len = size;
	return 0;
}

int secrets_file_read(const char *data_dir, const char *name,
		      unsigned char **file, size_t *file_len, char **repos,
		      struct wr_error **err)
{
	*file = NULL;
	*file_len = 0;
	*repos = NULL;
	_cleanup_free_ char *dir = NULL;
	int r = existing_dir(data_dir, name, &dir, err);
	if (r < 0)
		return r;
	_cleanup_close_ int dir_fd =
	    open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir_fd < 0)
		return wr_error_set(err, errno, "open %s", dir);
	_cleanup_free_ char *enc = wr_asprintf("%s" SUFFIX, name);
	_cleanup_free_ char *lst = wr_asprintf("%s" REPOS_SUFFIX, name);
	if (!enc || !lst)
		return wr_error_set(err, ENOMEM, "secrets");
	unsigned char *f = NULL, *text = NULL;
	size_t flen = 0, tlen = 0;
	r = read_small(dir_fd, enc, FILE_MAX, &f, &flen);
	if (r == -ENOENT)
		return wr_error_absent(err, false, "no secret named %s", name);
	if (r < 0)
		return wr_error_set(err, -r, "read %s/%s", dir, enc);
	r = read_small(dir_fd, lst, REPOS_FILE_MAX, &text, &tlen);
	if (r < 0 && r != -ENOENT) {
		free(f);
		return wr_error_set(err, -r, "read %s/%s", dir, lst);
	}
	*file = f;
	*file_len = flen;
	*repos = (char *)text;
	return 0;
}

int secrets_file_write(const char *data_dir, const char *name,
		       const unsigned char *file, size_t file_len,
		       const char *repos, struct wr_error **err)
{
	if (!secrets_name_valid(name))
		return name_error(name, err);
	if (file_len < PREFIX_BYTES + TAG_BYTES + 1 || file_len > FILE_MAX ||
	    memcmp(file, MAGIC, MAGIC_BYTES) != 0)
		return wr_error_set(err, EBADMSG,
				    "secret %s: not a secret file (%zu bytes)",
				    name, file_len);
	if (repos) {
		/* the list must be one secrets_repos_get reads */
		json_t *list = json_loads(repos, 0, NULL);
		size_t k = json_array_size(list);
		bool ok =
		    json_is_array(list) && k > 0 && k <= SECRETS_REPOS_MAX;
		for (size_t i = 0; ok && i < k; i++)
			ok = secrets_repo_name_valid(
			    json_string_value(json_array_get(list, i)));
		json_decref(list);
		if (!ok || strlen(repos) > REPOS_FILE_MAX)
			return wr_error_set(err, EBADMSG,
					    "secret %s: not a list of "
					    "repository names",
					    name);
	}
	_cleanup_free_ char *dir = NULL;
	int r = secrets_dir(data_dir, true, &dir, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *enc = wr_asprintf("%s/%s" SUFFIX, dir, name);
	_cleanup_free_ char *lst = wr_asprintf("%s/%s" REPOS_SUFFIX, dir, name);
	if (!enc || !lst)
		return wr_error_set(err, ENOMEM, "secrets");
	/* the list before the value: no build gets the new value under the
	 * old list, nor a new secret open to any repository for a moment */
	if (repos)
		r = write_atomic(dir, lst, repos, strlen(repos), err);
	else if (unlink(lst) < 0 && errno != ENOENT)
		r = wr_error_set(err, errno, "remove %s", lst);
	if (r == 0)
		r = write_atomic(dir, enc, file, file_len, err);
	return r;
}

/* ---- which repositories a secret goes to -------------------------------- */

bool secrets_repo_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > SECRETS_REPO_NAME_MAX || name[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return false;
	}
	return true;
}

void secrets_repos_free(char **repos, size_t n)
{
	if (!repos)
		return;
	for (size_t i = 0; i < n; i++)
		free(repos[i]);
	free(repos);
}

/* DATA/secrets/NAME<suffix>, or NULL with *err (-ENOENT: no store). */
static char *secret_file(const char *data_dir, const char *name,
			 const char *suffix, struct wr_error **err)
{
	_cleanup_free_ char *dir = NULL;
	if (secrets_dir(data_dir, false, &dir, err) < 0)
		return NULL;
	char *path = wr_asprintf("%s/%s%s", dir, name, suffix);
	if (!path)
		wr_error_set(err, ENOMEM, "secrets");
	return path;
}

int secrets_repos_get(const char *data_dir, const char *name, char ***repos,
		      size_t *n, struct wr_error **err)
{
	*repos = NULL;
	*n = 0;
	if (!secrets_name_valid(name))
		return name_error(name, err);
	struct wr_error *path_err = NULL;
	_cleanup_free_ char *path =
	    secret_file(data_dir, name, REPOS_SUFFIX, &path_err);
	if (!path) {
		int r = path_err ? -path_err->errnum : -ENOMEM;
		if (r == -ENOENT) {
			wr_error_free(path_err);
			return 0; /* no store: no list */
		}
		if (err && !*err)
			*err = path_err;
		else
			wr_error_free(path_err);
		return r;
	}
	_cleanup_free_ char *text = NULL;
	size_t len;
	int r = wr_read_file(path, REPOS_FILE_MAX, &text, &len);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return wr_error_set(err, -r, "read %s", path);
	json_t *list = json_loadb(text, len, 0, NULL);
	size_t k = json_array_size(list);
	bool ok = json_is_array(list) && k > 0 && k <= SECRETS_REPOS_MAX;
	char **v = ok ? wr_calloc(k, sizeof(char *)) : NULL;
	for (size_t i = 0; ok && i < k; i++) {
		const char *repo = json_string_value(json_array_get(list, i));
		ok = v && repo && secrets_repo_name_valid(repo) &&
		     (v[i] = wr_strdup(repo)) != NULL;
	}
	json_decref(list);
	if (!ok) {
		secrets_repos_free(v, k);
		return wr_error_set(err, EBADMSG,
				    "secret %s: %s is not a list of repository "
				    "names",
				    name, path);
	}
	*repos = v;
	*n = k;
	return 0;
}

int secrets_repos_set(const char *data_dir, const char *name,
		      char *const *repos, size_t n, struct wr_error **err)
{
	if (!secrets_name_valid(name))
		return name_error(name, err);
	if (n > SECRETS_REPOS_MAX)
		return wr_error_input(err, 0,
				      "secret %s: more than %d repositories",
				      name, SECRETS_REPOS_MAX);
	for (size_t i = 0; i < n; i++)
		if (!secrets_repo_name_valid(repos[i]))
			return wr_error_input(
			    err, 0,
			    "'%.80s' is not a repository name (1 to %d of "
			    "A-Z, a-z, 0-9, '.', '_' and '-', not starting "
			    "with '.')",
			    repos[i], SECRETS_REPO_NAME_MAX);
	struct wr_error *path_err = NULL;
	_cleanup_free_ char *enc = secret_file(data_dir, name, SUFFIX, &path_err);
	_cleanup_free_ char *path =
	    enc ? secret_file(data_dir, name, REPOS_SUFFIX, &path_err) : NULL;
	if (!path) {
		int r = path_err ? -path_err->errnum : -ENOMEM;
		wr_error_free(path_err);
		return r == -ENOENT ? wr_error_absent(err, false,
						   "no secret named %s", name)
				    : wr_error_set(err, -r, "secrets");
	}
	if (access(enc, F_OK) < 0)
		return wr_error_absent(err, false, "no secret named %s", name);
	if (n == 0) {
		if (unlink(path) < 0 && errno != ENOENT)
			return wr_error_set(err, errno, "remove %s", path);
		return 0;
	}
	json_t *list = json_array();
	for (size_t i = 0; list && i < n; i++)
		if (json_array_append_new(list, json_string(repos[i])) < 0) {
			json_decref(list);
			list = NULL;
		}
	_cleanup_free_ char *text = list ? json_dumps(list, JSON_COMPACT) : NULL;
	json_decref(list);
	if (!text)
		return wr_error_set(err, ENOMEM, "secrets");
	int r = wr_write_file_atomic(path, text, strlen(text), 0600, true);
	if (r < 0)
		return wr_error_set(err, -r, "write %s", path);
	return 0;
}

/* 0 if a build of repo_name may have secret name; an input error saying
 * which repositories may, if not. */
static int check_granted(const char *data_dir, const char *name,
			 const char *repo_name, struct wr_error **err)
{
	char **repos = NULL;
	size_t n = 0;
	int r = secrets_repos_get(data_dir, name, &repos, &n, err);
	if (r < 0 || n == 0)
		return r;
	bool granted = false;
	char list[512] = "";
	for (size_t i = 0; i < n; i++) {
		if (repo_name && !strcmp(repos[i], repo_name))
			granted = true;
		size_t used = strlen(list);
		snprintf(list + used, sizeof(list) - used, "%s%s",
			 i ? ", " : "", repos[i]);
	}
	secrets_repos_free(repos, n);
	if (granted)
		return 0;
	if (!repo_name)
		return wr_error_input(err, 0,
				      "secret %s is for the builds of %s only, "
				      "and this build names no repository "
				      "(--repo-name NAME)",
				      name, list);
	return wr_error_input(err, 0,
			      "secret %s is for the builds of %s only, not "
			      "of %.128s (an admin grants it with `warren "
			      "secret set %s --repo %.128s`)",
			      name, list, repo_name, name, repo_name);
}

/* ---- a spec's secrets ---------------------------------------------------- */

void secret_set_clear(struct secret_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].name);
		secrets_value_free(s->v[i].value, s->v[i].len);
	}
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

int secrets_load(const char *data_dir, char *const *names, size_t n_names,
		 const char *repo_name, struct secret_set *out,
		 struct wr_error **err)
{
	struct secret_set set = {0};
	char missing[1024] = "";
	size_t n_missing = 0;
	int r = 0;
	out->v = NULL;
	out->n = 0;
	if (n_names == 0)
		return 0;
	set.v = wr_calloc(n_names, sizeof(*set.v));
	if (!set.v)
		return wr_error_set(err, ENOMEM, "secrets");
	for (size_t i = 0; i < n_names && r == 0; i++) {
		bool dup = false;
		for (size_t k = 0; k < i && !dup; k++)
			dup = !strcmp(names[k], names[i]);
		if (dup)
			continue;
		char *value = NULL;
		size_t len = 0;
		struct wr_error *get_err = NULL;
		r = secrets_name_valid(names[i])
			? secrets_get(data_dir, names[i], &value, &len,
				      &get_err)
			: -ENOENT;
		if (r == -ENOENT) {
			wr_error_free(get_err);
			size_t used = strlen(missing);
			snprintf(missing + used, sizeof(missing) - used,
				 "%s%.80s", n_missing ? ", " : "", names[i]);
			n_missing++;
			r = 0;
			continue;
		}
		if (r < 0) {
			/* get_err names the secret */
			if (get_err && err && !*err)
				*err = get_err;
			else if (get_err)
				wr_error_free(get_err);
			else
				wr_error_set(err, -r, "secret %s", names[i]);
			break;
		}
		r = check_granted(data_dir, names[i], repo_name, err);
		if (r < 0) {
			secrets_value_free(value, len);
			break;
		}
		struct secret_value *sv = &set.v[set.n];
		sv->name = wr_strdup(names[i]);
		sv->value = value;
		sv->len = len;
		set.n++; /* owns value now */
		if (!sv->name)
			r = wr_error_set(err, ENOMEM, "secrets");
	}
	if (r == 0 && n_missing)
		r = wr_error_input(
		    err, 0,
		    "secret%s %s %s declared by the spec but not set on the "
		    "server (an admin sets %s with `warren secret set NAME`)",
		    n_missing == 1 ? "" : "s", missing,
		    n_missing == 1 ? "is" : "are",
		    n_missing == 1 ? "it" : "them");
	if (r < 0) {
		secret_set_clear(&set);
		return r;
	}
	*out = set;
	return 0;
}

/* ---- finding values in a tree ---------------------------------------------
 */

/* nftw has no argument for its callback: the walk's state is here, one per
 * thread. */
struct scan {
	const struct secret_set *set;
	size_t keep_max; /* longest value scanned - 1 */
	unsigned char *buf;
	size_t prefix; /* strlen of the root and its '/' */
	char *found_name, *found_path;
	int error; /* -errno */
	char error_path[PATH_MAX];
};
static _Thread_local struct scan *scan_state;

static bool scanned(const struct secret_value *v)
{
	return v->len >= SECRETS_SCAN_MIN;
}

/* The first value of the set found in data, or NULL. */
static const struct secret_value *find_in(const struct secret_set *s,
					  const void *data, size_t len)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct secret_value *v = &s->v[i];
		if (scanned(v) && memmem(data, len, v->value, v->len))
			return v;
	}
	return NULL;
}

/* Reads the file in chunks; a value that straddles two chunks is found
 * because the last keep_max bytes of each chunk start the next. */
static const struct secret_value *scan_file(struct scan *sc, const char *path,
					    int *error)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		*error = -errno;
		return NULL;
	}
	size_t keep = 0;
	for (;;) {
		ssize_t n = read(fd, sc->buf + keep, SCAN_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*error = -errno;
			return NULL;
		}
		if (n == 0)
			return NULL;
		size_t total = keep + (size_t)n;
		const struct secret_value *v = find_in(sc->set, sc->buf, total);
		if (v)
			return v;
		keep = total < sc->keep_max ? total : sc->keep_max;
		memmove(sc->buf, sc->buf + total - keep, keep);
	}
}

static int scan_entry(const char *path, const struct stat *st, int type,
		      struct FTW *ftw)
{
	struct scan *sc = scan_state;
	const struct secret_value *v = NULL;
	const char *base = path + ftw->base;
	int error = 0;
	if (type == FTW_DNR || type == FTW_NS) {
		error = -EACCES;
	} else {
		v = find_in(sc->set, base, strlen(base));
		if (!v && type == FTW_F && S_ISREG(st->st_mode)) {
			v = scan_file(sc, path, &error);
		} else if (!v && type == FTW_SL) {
			char target[PATH_MAX];
			ssize_t n = readlink(path, target, sizeof(target));
			if (n < 0)
				error = -errno;
			else
				v = find_in(sc->set, target, (size_t)n);
		}
	}
	if (error) {
		sc->error = error;
		snprintf(sc->error_path, sizeof(sc->error_path), "%s", path);
		return 1;
	}
	if (!v)
		return 0;
	const char *rel = strlen(path) > sc->prefix ? path + sc->prefix : ".";
	sc->found_name = wr_strdup(v->name);
	sc->found_path = wr_asprintf("/%s", rel);
	if (!sc->found_name || !sc->found_path)
		sc->error = -ENOMEM;
	return 1;
}

int secrets_find_in_tree(const char *dir, const struct secret_set *s,
			 char **name, char **path, struct wr_error **err)
{
	struct scan sc = {.set = s, .prefix = strlen(dir) + 1};
	for (size_t i = 0; i < s->n; i++)
		if (scanned(&s->v[i]) && s->v[i].len - 1 > sc.keep_max)
			sc.keep_max = s->v[i].len - 1;
	if (sc.keep_max == 0)
		return 0; /* nothing long enough to look for */
	sc.buf = wr_malloc(SCAN_CHUNK + sc.keep_max);
	if (!sc.buf)
		return wr_error_set(err, ENOMEM, "scan %s", dir);
	scan_state = &sc;
	int r = nftw(dir, scan_entry, 32, FTW_PHYS | FTW_MOUNT);
	scan_state = NULL;
	int e = errno;
	/* what was read may hold a value */
	sodium_memzero(sc.buf, SCAN_CHUNK + sc.keep_max);
	free(sc.buf);
	if (sc.error) {
		free(sc.found_name);
		free(sc.found_path);
		return wr_error_set(err, -sc.error, "scan %s",
				    sc.error == -ENOMEM ? dir : sc.error_path);
	}
	if (r < 0)
		return wr_error_set(err, e, "scan %s", dir);
	if (!sc.found_name)
		return 0;
	*name = sc.found_name;
	*path = sc.found_path;
	return 1;
}

size_t secrets_redact(char *text, const struct secret_set *s)
{
	size_t replaced = 0;
	for (size_t i = 0; s && i < s->n; i++) {
		const struct secret_value *v = &s->v[i];
		if (!scanned(v))
			continue;
		char *p = text;
		while ((p = strstr(p, v->value))) {
			/* "***" is shorter than any value redacted */
			memcpy(p, "***", 3);
			memmove(p + 3, p + v->len, strlen(p + v->len) + 1);
			p += 3;
			replaced++;
		}
	}
	return replaced;
}

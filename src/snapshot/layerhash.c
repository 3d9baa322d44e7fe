/* layerhash.c - the content hash (layer id) and size of a layer directory.
 *
 * A layer is the upper directory of an overlay: besides files, directories
 * and symlinks, its meaning lies in owners, modes, whiteouts (character
 * devices 0/0) and user.overlay.* extended attributes. The hash covers all
 * of it, in one canonical byte stream fed to sha256:
 *
 *   blob("warren-layer-v1")
 *   then for every entry, the root first ("") and each directory's entries
 *   in byte order of their names, depth first:
 *     blob(relative path) u8(type) u32(mode & 07777) u32(uid) u32(gid)
 *     regular file:  u64(size) and the content
 *     symlink:       blob(target)
 *     char/block:    u32(major) u32(minor)
 *     u32(number of xattrs), then blob(name) blob(value) sorted by name
 *
 * where blob(x) is u32(length) and the bytes, and integers are little
 * endian. Every entry carries its full path, so the stream decodes one way
 * only. Times, link counts and inode numbers are left out: they change
 * when a layer is copied and mean nothing to overlayfs. A hard link is
 * hashed as a second regular file. */
#include "snapshot/store.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#define LAYER_HASH_MAGIC "warren-layer-v1"
#define LAYER_MAX_DEPTH 256
#define LAYER_PATH_MAX 4096
#define LAYER_DIR_MAX_ENTRIES (1u << 20)
#define LAYER_XATTR_MAX 65536 /* the kernel's XATTR_LIST_MAX/SIZE_MAX */
#define LAYER_IO_BUF (128 * 1024)

struct layer_walk {
	crypto_hash_sha256_state sha;
	bool content; /* false: only add up sizes */
	uint64_t bytes;
	unsigned dev_major, dev_minor;
	uint64_t mnt_id; /* 0: unknown */
	const char *root;
	char path[LAYER_PATH_MAX + 1]; /* relative to root */
	size_t path_len;
	unsigned char *buf; /* file content, symlink targets, xattr values */
	char *names;	    /* an xattr name list */
	struct wr_error **err;
};

static int walk_fail(struct layer_walk *w, int errnum, const char *what)
{
	return wr_error_set(w->err, errnum, "%s %s%s%s", what, w->root,
			    w->path_len ? "/" : "", w->path);
}

static void feed(struct layer_walk *w, const void *data, size_t len)
{
	crypto_hash_sha256_update(&w->sha, data, len);
}

static void feed_u32(struct layer_walk *w, uint32_t v)
{
	unsigned char b[4];
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	feed(w, b, sizeof(b));
}

static void feed_u64(struct layer_walk *w, uint64_t v)
{
	unsigned char b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	feed(w, b, sizeof(b));
}

static void feed_blob(struct layer_walk *w, const void *data, size_t len)
{
	feed_u32(w, (uint32_t)len);
	feed(w, data, len);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Extended attributes of an entry: through fd itself when name is NULL,
 * else of name in the directory fd, without following it (by the
 * /proc/self/fd path, as the *xattrat calls are too new for our libc). */
static int hash_xattrs(struct layer_walk *w, int fd, const char *name)
{
	char proc[64 + NAME_MAX];
	if (name)
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d/%s", fd, name);
	ssize_t len = name ? llistxattr(proc, w->names, LAYER_XATTR_MAX)
			   : flistxattr(fd, w->names, LAYER_XATTR_MAX);
	if (len < 0) {
		if (errno == ENOTSUP || errno == EOPNOTSUPP) {
			feed_u32(w, 0);
			return 0;
		}
		return walk_fail(w, errno == ERANGE ? E2BIG : errno,
				 "list extended attributes of");
	}
	size_t count = 0;
	for (ssize_t i = 0; i < len; i++)
		count += w->names[i] == '\0';
	feed_u32(w, (uint32_t)count);
	if (count == 0)
		return 0;
	_cleanup_free_ char **sorted = wr_calloc(count, sizeof(char *));
	if (!sorted)
		return walk_fail(w, ENOMEM, "hash");
	size_t n = 0;
	for (char *p = w->names; p < w->names + len; p += strlen(p) + 1)
		sorted[n++] = p;
	qsort(sorted, n, sizeof(char *), cmp_names);
	for (size_t i = 0; i < n; i++) {
		ssize_t vlen =
		    name ? lgetxattr(proc, sorted[i], w->buf, LAYER_XATTR_MAX)
			 : fgetxattr(fd, sorted[i], w->buf, LAYER_XATTR_MAX);
		if (vlen < 0)
			return walk_fail(w, errno == ERANGE ? E2BIG : errno,
					 "read extended attributes of");
		feed_blob(w, sorted[i], strlen(sorted[i]));
		feed_blob(w, w->buf, (size_t)vlen);
	}
	return 0;
}

static int hash_file_content(struct layer_walk *w, int fd, uint64_t size)
{
	feed_u64(w, size);
	uint64_t total = 0;
	for (;;) {
		ssize_t n = read(fd, w->buf, LAYER_IO_BUF);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return walk_fail(w, errno, "read");
		}
		if (n == 0)
			break;
		total += (uint64_t)n;
		if (total > size)
			break;
		feed(w, w->buf, (size_t)n);
	}
	if (total != size)
		return walk_fail(w, EAGAIN, "file changed while hashing:");
	return 0;
}

/* The sorted names in directory fd (the caller keeps fd). */
static int list_dir(struct layer_walk *w, int fd, char ***out, size_t *n_out)
{
	/* a new open file description: a dup would share (and move) the
	 * caller's read position */
	int own_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (own_fd < 0)
		return walk_fail(w, errno, "open directory");
	DIR *dir = fdopendir(own_fd);
	if (!dir) {
		int r = walk_fail(w, errno, "open directory");
		close(own_fd);
		return r;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == LAYER_DIR_MAX_ENTRIES) {
			r = walk_fail(w, E2BIG, "too many entries in");
			break;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 32;
			char **grown = wr_realloc(names, ncap * sizeof(char *));
			if (!grown) {
				r = walk_fail(w, ENOMEM, "list");
				break;
			}
			names = grown;
			cap = ncap;
		}
		names[n] = wr_strdup(de->d_name);
		if (!names[n]) {
			r = walk_fail(w, ENOMEM, "list");
			break;
		}
		n++;
		errno = 0;
	}
	if (r == 0 && errno != 0)
		r = walk_fail(w, errno, "read directory");
	closedir(dir);
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return r;
	}
	if (n)
		qsort(names, n, sizeof(char *), cmp_names);
	*out = names;
	*n_out = n;
	return 0;
}

static int walk_entry(struct layer_walk *w, int parent_fd, const char *name,
		      int depth);

static int walk_children(struct layer_walk *w, int fd, int depth)
{
	if (depth >= LAYER_MAX_DEPTH)
		return walk_fail(w, ELOOP, "directories nested too deep at");
	char **names = NULL;
	size_t n = 0;
	int r = list_dir(w, fd, &names, &n);
	if (r < 0)
		return r;
	size_t saved = w->path_len;
	for (size_t i = 0; i < n && r == 0; i++) {
		size_t len = strlen(names[i]);
		size_t need = saved + (saved ? 1 : 0) + len;
		if (len > NAME_MAX || need > LAYER_PATH_MAX) {
			r = walk_fail(w, ENAMETOOLONG, "path too long under");
			break;
		}
		if (saved)
			w->path[w->path_len++] = '/';
		memcpy(w->path + w->path_len, names[i], len + 1);
		w->path_len += len;
		r = walk_entry(w, fd, names[i], depth + 1);
		w->path_len = saved;
		w->path[saved] = '\0';
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

static char entry_type(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return 'f';
	case S_IFDIR: return 'd';
	case S_IFLNK: return 'l';
	case S_IFCHR: return 'c';
	case S_IFBLK: return 'b';
	case S_IFIFO: return 'p';
	case S_IFSOCK: return 's';
	}
	return '?';
}

/* Opens an entry that statx described, checking it is still that inode
 * (the walk must hash what it stat'ed). O_NONBLOCK: should a FIFO take its
 * place, the open must not hang. */
static int open_entry(struct layer_walk *w, int parent_fd, const char *name,
		      const struct statx *stx, int flags)
{
	int fd = openat(parent_fd, name,
			flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return walk_fail(w, errno, "open");
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_ino != stx->stx_ino ||
	    (st.st_mode & S_IFMT) != (stx->stx_mode & S_IFMT)) {
		close(fd);
		return walk_fail(w, EAGAIN, "entry changed while hashing:");
	}
	return fd;
}

/* One entry; name "" is the root itself, given as parent_fd. */
static int walk_entry(struct layer_walk *w, int parent_fd, const char *name,
		      int depth)
{
	struct statx stx;
	int flags = AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH);
	if (statx(parent_fd, name, flags, STATX_BASIC_STATS | STATX_MNT_ID,
		  &stx) < 0)
		return walk_fail(w, errno, "stat");
	if (depth == 0) {
		w->dev_major = stx.stx_dev_major;
		w->dev_minor = stx.stx_dev_minor;
		w->mnt_id = (stx.stx_mask & STATX_MNT_ID) ? stx.stx_mnt_id : 0;
	} else if (stx.stx_dev_major != w->dev_major ||
		   stx.stx_dev_minor != w->dev_minor ||
		   (w->mnt_id && (stx.stx_mask & STATX_MNT_ID) &&
		    stx.stx_mnt_id != w->mnt_id)) {
		/* a bind mount of the same filesystem has the same st_dev:
		 * the mount id is what tells */
		return walk_fail(w, EXDEV, "mount point inside layer:");
	}
	mode_t mode = stx.stx_mode;
	char type = entry_type(mode);
	if (w->content) {
		feed_blob(w, w->path, w->path_len);
		feed(w, &type, 1);
		feed_u32(w, mode & 07777);
		feed_u32(w, stx.stx_uid);
		feed_u32(w, stx.stx_gid);
	}
	int r = 0;
	if (S_ISREG(mode)) {
		w->bytes += stx.stx_size;
		if (!w->content)
			return 0;
		_cleanup_close_ int fd =
		    open_entry(w, parent_fd, name, &stx, O_RDONLY);
		if (fd < 0)
			return fd;
		r = hash_file_content(w, fd, stx.stx_size);
		return r < 0 ? r : hash_xattrs(w, fd, NULL);
	}
	if (S_ISDIR(mode)) {
		_cleanup_close_ int own_fd = -1;
		int fd = parent_fd;
		if (depth > 0) {
			own_fd = open_entry(w, parent_fd, name, &stx,
					    O_RDONLY | O_DIRECTORY);
			if (own_fd < 0)
				return own_fd;
			fd = own_fd;
		}
		if (w->content && (r = hash_xattrs(w, fd, NULL)) < 0)
			return r;
		return walk_children(w, fd, depth);
	}
	if (!w->content)
		return 0;
	if (S_ISLNK(mode)) {
		if (stx.stx_size > LAYER_PATH_MAX)
			return walk_fail(w, ENAMETOOLONG, "symlink target of");
		ssize_t n = readlinkat(parent_fd, name, (char *)w->buf,
				       LAYER_PATH_MAX + 1);
		if (n < 0)
			return walk_fail(w, errno, "read symlink");
		if (n > LAYER_PATH_MAX)
			return walk_fail(w, ENAMETOOLONG, "symlink target of");
		feed_blob(w, w->buf, (size_t)n);
	} else if (S_ISCHR(mode) || S_ISBLK(mode)) {
		feed_u32(w, stx.stx_rdev_major);
		feed_u32(w, stx.stx_rdev_minor);
	}
	return hash_xattrs(w, parent_fd, name);
}

static int layer_walk(const char *dir, bool content,
		      char id_out[SNAP_ID_LEN + 1], uint64_t *bytes_out,
		      struct wr_error **err)
{
	if (sodium_init() < 0)
		return wr_error_set(err, EIO, "initialise libsodium");
	_cleanup_free_ struct layer_walk *w = wr_calloc(1, sizeof(*w));
	_cleanup_free_ unsigned char *buf = wr_malloc(LAYER_IO_BUF);
	_cleanup_free_ char *names = wr_malloc(LAYER_XATTR_MAX);
	if (!w || !buf || !names)
		return wr_error_set(err, ENOMEM, "hash layer %s", dir);
	w->content = content;
	w->root = dir;
	w->buf = buf;
	w->names = names;
	w->err = err;
	_cleanup_close_ int fd =
	    open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return wr_error_set(err, errno, "open layer %s", dir);
	crypto_hash_sha256_init(&w->sha);
	if (content)
		feed_blob(w, LAYER_HASH_MAGIC, strlen(LAYER_HASH_MAGIC));
	int r = walk_entry(w, fd, "", 0);
	if (r < 0)
		return r;
	if (id_out) {
		unsigned char digest[crypto_hash_sha256_BYTES];
		crypto_hash_sha256_final(&w->sha, digest);
		sodium_bin2hex(id_out, SNAP_ID_LEN + 1, digest, sizeof(digest));
	}
	if (bytes_out)
		*bytes_out = w->bytes;
	return 0;
}

int snap_layer_hash(const char *dir, char id_out[SNAP_ID_LEN + 1],
		    uint64_t *bytes_out, struct wr_error **err)
{
	return layer_walk(dir, true, id_out, bytes_out, err);
}

int snap_layer_size(const char *dir, uint64_t *bytes_out, struct wr_error **err)
{
	return layer_walk(dir, false, NULL, bytes_out, err);
}

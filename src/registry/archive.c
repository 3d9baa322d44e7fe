/* archive.c - a layer directory as a compressed tar and back (libarchive).
 *
 * A layer is an overlay upper directory: what it means lies in owners,
 * modes (setuid too), symlinks, hard links, whiteouts (character devices
 * 0:0), and extended attributes, trusted.overlay.* (opaque directories,
 * redirects) among them; its id (snapshot/layerhash.c) covers all of that
 * and the root directory's own mode, owner and xattrs. The archive is a
 * pax tar (xattrs as SCHILY.xattr/LIBARCHIVE.xattr records, numeric
 * owners only, no user or group names) compressed with zstd, written in
 * the hash's order (names sorted byte-wise, depth first) with atime,
 * ctime and birth time left out, so the same layer gives the same bytes
 * and so the same blob digest on any host. mtimes are kept.
 *
 * The root is the entry "."; extraction applies its mode, owner and
 * xattrs to the destination directory itself and gives every other entry
 * to archive_write_disk with the secure flags: no "..", no absolute
 * paths, nothing written through a symlink, so a hostile blob cannot
 * reach outside the destination; no device but a whiteout, and no more
 * bytes than the caller allows (the layer's size in its manifest). */
#include "registry/registry.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define ARCHIVE_MAX_DEPTH 256
#define ARCHIVE_PATH_MAX 4096
#define ARCHIVE_DIR_MAX_ENTRIES (1u << 20)
#define ARCHIVE_IO_BUF (128 * 1024)
/* what one archive may hold: entries, and bytes once extracted */
#define ARCHIVE_MAX_ENTRIES (4u << 20)

struct walk {
	struct archive *out;
	struct archive *disk; /* entry metadata from files */
	struct archive_entry_linkresolver *links;
	const char *root;
	dev_t dev;
	char path[ARCHIVE_PATH_MAX + 1]; /* relative to root, "." for it */
	char *buf;
	struct wr_error **err;
};

static int walk_fail(struct walk *w, int errnum, const char *what)
{
	return wr_error_set(w->err, errnum, "%s %s/%s", what, w->root, w->path);
}

static int archive_fail(struct walk *w, struct archive *a, const char *what)
{
	int errnum = archive_errno(a) > 0 ? archive_errno(a) : EIO;
	return wr_error_set(w->err, errnum, "%s %s/%s: %s", what, w->root,
			    w->path, archive_error_string(a));
}

static int copy_data(struct walk *w, int fd)
{
	for (;;) {
		ssize_t n = read(fd, w->buf, ARCHIVE_IO_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return walk_fail(w, errno, "read");
		if (n == 0)
			return 0;
		if (archive_write_data(w->out, w->buf, (size_t)n) != n)
			return archive_fail(w, w->out, "archive");
	}
}

static int write_one(struct walk *w, struct archive_entry *e, int fd)
{
	if (archive_write_header(w->out, e) != ARCHIVE_OK)
		return archive_fail(w, w->out, "archive");
	/* a hard link's second name carries no data */
	if (fd >= 0 && archive_entry_size(e) > 0 && !archive_entry_hardlink(e))
		return copy_data(w, fd);
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* The names in dirfd, sorted byte-wise. */
static int list_dir(struct walk *w, int dirfd, char ***out, size_t *n_out)
{
	int dup_fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		return walk_fail(w, errno, "list");
	}
	rewinddir(d);
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == ARCHIVE_DIR_MAX_ENTRIES) {
			r = walk_fail(w, E2BIG, "list");
			break;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			char **grown = wr_realloc(names, cap * sizeof(*names));
			if (!grown) {
				r = walk_fail(w, ENOMEM, "list");
				break;
			}
			names = grown;
		}
		if (!(names[n] = wr_strdup(de->d_name))) {
			r = walk_fail(w, ENOMEM, "list");
			break;
		}
		n++;
	}
	closedir(d);
	if (r < 0) {
		free_names(names, n);
		return r;
	}
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	*out = names;
	*n_out = n;
	return 0;
}

static int walk_dir(struct walk *w, int dirfd, int depth);

/* One entry: w->path names it, fd is open on it for directories and
 * regular files (else -1). */
static int walk_entry(struct walk *w, int fd, const struct stat *st, int depth)
{
	if (st->st_dev != w->dev)
		return walk_fail(w, EXDEV,
				 "archive (a mount inside the layer)");
	_cleanup_free_ char *source = wr_asprintf("%s/%s", w->root, w->path);
	struct archive_entry *e = archive_entry_new();
	if (!source || !e) {
		archive_entry_free(e);
		return walk_fail(w, ENOMEM, "archive");
	}
	archive_entry_copy_pathname(e, w->path);
	archive_entry_copy_sourcepath(e, source);
	/* mode, owner, symlink target, rdev, xattrs and ACLs, read without
	 * following a symlink (the handle is set to physical) */
	if (archive_read_disk_entry_from_file(w->disk, e, fd, st) !=
	    ARCHIVE_OK) {
		archive_entry_free(e);
		return archive_fail(w, w->disk, "read");
	}
	/* what changes when a layer is copied, and would change the digest */
	archive_entry_unset_atime(e);
	archive_entry_unset_ctime(e);
	archive_entry_unset_birthtime(e);
	archive_entry_set_uname(e, NULL);
	archive_entry_set_gname(e, NULL);
	archive_entry_set_ino(e, 0);
	struct archive_entry *spare = NULL;
	int r = 0;
	if (S_ISREG(st->st_mode) && st->st_nlink > 1) {
		/* needs ino and dev to find the other names */
		archive_entry_set_ino64(e, st->st_ino);
		archive_entry_linkify(w->links, &e, &spare);
	} else {
		archive_entry_set_nlink(e, 1);
	}
	if (e)
		r = write_one(w, e, fd);
	if (r == 0 && spare)
		r = write_one(w, spare, -1);
	archive_entry_free(e);
	archive_entry_free(spare);
	if (r == 0 && S_ISDIR(st->st_mode))
		r = walk_dir(w, fd, depth + 1);
	return r;
}

static int walk_dir(struct walk *w, int dirfd, int depth)
{
	if (depth > ARCHIVE_MAX_DEPTH)
		return walk_fail(w, ELOOP, "archive (too deep)");
	char **names = NULL;
	size_t n = 0;
	int r = list_dir(w, dirfd, &names, &n);
	if (r < 0)
		return r;
	/* this directory's path, put back after each entry below it */
	_cleanup_free_ char *self = wr_strdup(w->path);
	if (!self) {
		free_names(names, n);
		return walk_fail(w, ENOMEM, "archive");
	}
	const char *prefix = strcmp(self, ".") ? self : "";
	for (size_t i = 0; r == 0 && i < n; i++) {
		if (strlen(prefix) + 1 + strlen(names[i]) > ARCHIVE_PATH_MAX) {
			r = walk_fail(w, ENAMETOOLONG, "archive");
			break;
		}
		snprintf(w->path, sizeof(w->path), "%s%s%s", prefix,
			 *prefix ? "/" : "", names[i]);
		struct stat st;
		if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = walk_fail(w, errno, "stat");
			break;
		}
		_cleanup_close_ int fd = -1;
		if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)) {
			fd =
			    openat(dirfd, names[i],
				   O_RDONLY | O_NOFOLLOW | O_CLOEXEC |
				       (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
			if (fd < 0) {
				r = walk_fail(w, errno, "open");
				break;
			}
		}
		r = walk_entry(w, fd, &st, depth);
		if (r == 0)
			strcpy(w->path, self);
	}
	free_names(names, n);
	return r;
}

int reg_archive_write(const char *dir, int out_fd, struct wr_error **err)
{
	struct walk w = {.root = dir, .err = err};
	strcpy(w.path, ".");
	int r = 0;
	_cleanup_close_ int root_fd =
	    open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (root_fd < 0 || fstat(root_fd, &st) < 0)
		return wr_error_set(err, errno, "archive %s", dir);
	w.dev = st.st_dev;
	w.buf = wr_malloc(ARCHIVE_IO_BUF);
	w.out = archive_write_new();
	w.disk = archive_read_disk_new();
	w.links = archive_entry_linkresolver_new();
	if (!w.buf || !w.out || !w.disk || !w.links) {
		r = wr_error_set(err, ENOMEM, "archive %s", dir);
		goto out;
	}
	archive_read_disk_set_symlink_physical(w.disk);
	if (archive_write_add_filter_zstd(w.out) != ARCHIVE_OK ||
	    archive_write_set_format_pax_restricted(w.out) != ARCHIVE_OK ||
	    /* one block per write, no padding of the last one to 10 KiB */
	    archive_write_set_bytes_in_last_block(w.out, 1) != ARCHIVE_OK ||
	    archive_write_open_fd(w.out, out_fd) != ARCHIVE_OK) {
		r = archive_fail(&w, w.out, "archive");
		goto out;
	}
	archive_entry_linkresolver_set_strategy(w.links, archive_format(w.out));
	if ((r = walk_entry(&w, root_fd, &st, 0)) < 0)
		goto out;
	/* names of a hard-linked file held back by the resolver */
	for (;;) {
		struct archive_entry *e = NULL, *spare = NULL;
		archive_entry_linkify(w.links, &e, &spare);
		if (!e)
			break;
		r = write_one(&w, e, -1);
		archive_entry_free(e);
		if (r < 0)
			goto out;
	}
	if (archive_write_close(w.out) != ARCHIVE_OK)
		r = archive_fail(&w, w.out, "archive");
out:
	if (w.links)
		archive_entry_linkresolver_free(w.links);
	if (w.disk)
		archive_read_free(w.disk);
	if (w.out)
		archive_write_free(w.out);
	free(w.buf);
	return r;
}

/* ---- extraction ---------------------------------------------------------- */

/* The root entry's mode, owner and xattrs onto the destination itself. */
static int apply_root(int dest_fd, const char *dest, struct archive_entry *e,
		      struct wr_error **err)
{
	if (archive_entry_filetype(e) != AE_IFDIR)
		return wr_error_set(err, EBADMSG,
				    "extract into %s: the root is not a "
				    "directory",
				    dest);
	if (fchown(dest_fd, archive_entry_uid(e), archive_entry_gid(e)) < 0 ||
	    fchmod(dest_fd, archive_entry_mode(e) & 07777) < 0)
		return wr_error_set(err, errno, "extract into %s: the root",
				    dest);
	archive_entry_xattr_reset(e);
	const char *name;
	const void *value;
	size_t size;
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK)
		if (fsetxattr(dest_fd, name, value, size, 0) < 0)
			return wr_error_set(err, errno,
					    "extract into %s: the root's "
					    "xattr %s",
					    dest, name);
	return 0;
}

/* What an entry may be: a layer built in a sandbox holds no device but
 * overlay's whiteouts (a sandbox cannot mknod another), and a layer's
 * files add up to the bytes its manifest says. */
static int entry_check(struct archive_entry *e, const char *path,
		       const char *dest, uint64_t *bytes, uint64_t max_bytes,
		       struct wr_error **err)
{
	mode_t type = archive_entry_filetype(e);
	if (type == AE_IFBLK ||
	    (type == AE_IFCHR && archive_entry_rdev(e) != 0))
		return wr_error_set(err, EBADMSG,
				    "extract %s into %s: a device other than "
				    "a whiteout (0:0)",
				    path, dest);
	if (type == AE_IFREG && !archive_entry_hardlink(e) &&
	    archive_entry_size(e) > 0)
		*bytes += (uint64_t)archive_entry_size(e);
	if (max_bytes && *bytes > max_bytes)
		return wr_error_set(err, EFBIG,
				    "extract into %s: more than the layer's "
				    "%llu bytes",
				    dest, (unsigned long long)max_bytes);
	return 0;
}

int reg_archive_extract(int in_fd, const char *dest, uint64_t max_entries,
			uint64_t max_bytes, struct wr_error **err)
{
	int r = 0;
	_cleanup_close_ int dest_fd =
	    open(dest, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dest_fd < 0)
		return wr_error_set(err, errno, "extract into %s", dest);
	_cleanup_close_ int cwd_fd =
	    open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct archive *in = archive_read_new();
	struct archive *disk = archive_write_disk_new();
	if (!in || !disk) {
		r = wr_error_set(err, ENOMEM, "extract into %s", dest);
		goto out;
	}
	archive_read_support_format_tar(in);
	archive_read_support_filter_zstd(in);
	archive_read_support_filter_gzip(in);
	archive_write_disk_set_options(
	    disk, ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM |
		      ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_XATTR |
		      ARCHIVE_EXTRACT_ACL | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
		      ARCHIVE_EXTRACT_SECURE_NODOTDOT |
		      ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
		      ARCHIVE_EXTRACT_NO_OVERWRITE);
	if (archive_read_open_fd(in, in_fd, ARCHIVE_IO_BUF) != ARCHIVE_OK) {
		r = wr_error_set(err, EBADMSG, "extract into %s: %s", dest,
				 archive_error_string(in));
		goto out;
	}
	/* write_disk resolves relative paths from the working directory:
	 * the destination's, for as long as this runs (single-threaded
	 * callers only) */
	if (cwd_fd < 0 || fchdir(dest_fd) < 0) {
		r = wr_error_set(err, errno, "extract into %s", dest);
		goto out;
	}
	bool root_seen = false;
	uint64_t entries = 0, bytes = 0;
	for (;;) {
		struct archive_entry *e;
		int ar = archive_read_next_header(in, &e);
		if (ar == ARCHIVE_EOF)
			break;
		if (ar != ARCHIVE_OK) {
			r = wr_error_set(err, EBADMSG, "extract into %s: %s",
					 dest, archive_error_string(in));
			break;
		}
		if (max_entries && ++entries > max_entries) {
			r = wr_error_set(err, E2BIG,
					 "extract into %s: more than %llu "
					 "entries",
					 dest, (unsigned long long)max_entries);
			break;
		}
		const char *path = archive_entry_pathname(e);
		if (!path || !*path) {
			r = wr_error_set(err, EBADMSG,
					 "extract into %s: an entry without "
					 "a name",
					 dest);
			break;
		}
		if (!strcmp(path, ".") || !strcmp(path, "./")) {
			if (root_seen) {
				r = wr_error_set(err, EBADMSG,
						 "extract into %s: two roots",
						 dest);
				break;
			}
			root_seen = true;
			if ((r = apply_root(dest_fd, dest, e, err)) < 0)
				break;
			continue;
		}
		if ((r = entry_check(e, path, dest, &bytes, max_bytes, err)) <
		    0)
			break;
		if (archive_write_header(disk, e) != ARCHIVE_OK) {
			r = wr_error_set(err, EBADMSG, "extract %s into %s: %s",
					 path, dest,
					 archive_error_string(disk));
			break;
		}
		if (archive_entry_size(e) > 0) {
			const void *block;
			size_t size;
			la_int64_t offset;
			int dr;
			while ((dr = archive_read_data_block(
				    in, &block, &size, &offset)) == ARCHIVE_OK)
				if (archive_write_data_block(disk, block, size,
							     offset) !=
				    ARCHIVE_OK) {
					dr = ARCHIVE_FATAL;
					break;
				}
			if (dr != ARCHIVE_EOF) {
				r = wr_error_set(
				    err, EBADMSG, "extract %s into %s: %s",
				    path, dest,
				    archive_error_string(
					dr == ARCHIVE_FATAL ? disk : in));
				break;
			}
		}
		if (archive_write_finish_entry(disk) != ARCHIVE_OK) {
			r = wr_error_set(err, EBADMSG, "extract %s into %s: %s",
					 path, dest,
					 archive_error_string(disk));
			break;
		}
	}
	/* directories' modes and times are set last, at close */
	if (archive_write_close(disk) != ARCHIVE_OK && r == 0)
		r = wr_error_set(err, EIO, "extract into %s: %s", dest,
				 archive_error_string(disk));
	if (r == 0 && !root_seen)
		r = wr_error_set(err, EBADMSG,
				 "extract into %s: the archive has no root "
				 "entry: not a Warren layer",
				 dest);
	if (fchdir(cwd_fd) < 0 && r == 0)
		r = wr_error_set(err, errno,
				 "extract into %s: back to the "
				 "working directory",
				 dest);
out:
	if (disk)
		archive_write_free(disk);
	if (in)
		archive_read_free(in);
	return r;
}

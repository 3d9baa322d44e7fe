/* fs.c - filesystem helpers. */
#include "util/fs.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int wr_mkdir_p(const char *path, mode_t mode)
{
	if (!path || !*path)
		return -ENOENT; /* as mkdir("") */
	_cleanup_free_ char *copy = wr_strdup(path);
	if (!copy)
		return -ENOMEM;
	for (char *p = copy + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(copy, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(copy, mode) < 0 && errno != EEXIST)
		return -errno;
	struct stat st;
	if (stat(copy, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	return 0;
}

/* The mount a directory entry belongs to (0 if unknown). A bind mount of
 * the same filesystem has the same st_dev: the mount id is what tells. */
static uint64_t mount_id_at(int dirfd, const char *name)
{
	struct statx stx;
	int flags = AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH);
	if (statx(dirfd, name, flags, STATX_MNT_ID, &stx) < 0 ||
	    !(stx.stx_mask & STATX_MNT_ID))
		return 0;
	return stx.stx_mnt_id;
}

/* Removes the contents of dirfd (consumed), staying on the mount mnt_id.
 * Depth is capped so a hostile tree cannot exhaust the stack. */
static int rm_rf_children(int dirfd, dev_t dev, uint64_t mnt_id, int depth)
{
	if (depth > 512) {
		close(dirfd);
		return -ELOOP;
	}
	DIR *dir = fdopendir(dirfd);
	if (!dir) {
		int r = -errno;
		close(dirfd);
		return r;
	}
	int ret = 0;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT && ret == 0)
				ret = -errno;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			if (st.st_dev != dev ||
			    (mnt_id &&
			     mount_id_at(dirfd, de->d_name) != mnt_id)) {
				/* a mount point: never descend into it */
				if (ret == 0)
					ret = -EBUSY;
				continue;
			}
			int child = openat(dirfd, de->d_name,
					   O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					       O_CLOEXEC);
			if (child < 0) {
				if (ret == 0)
					ret = -errno;
				continue;
			}
			/* overlay work dirs are created mode 000 */
			fchmod(child, 0700);
			int r = rm_rf_children(child, dev, mnt_id, depth + 1);
			if (r < 0 && ret == 0)
				ret = r;
			if (unlinkat(dirfd, de->d_name, AT_REMOVEDIR) < 0 &&
			    errno != ENOENT && ret == 0)
				ret = -errno;
		} else if (unlinkat(dirfd, de->d_name, 0) < 0 &&
			   errno != ENOENT && ret == 0) {
			ret = -errno;
		}
	}
	closedir(dir);
	return ret;
}

int wr_rm_rf(const char *path)
{
	if (!path || !*path)
		return -EINVAL;
	/* "link/" would make lstat follow the link: drop trailing slashes */
	_cleanup_free_ char *clean = wr_strdup(path);
	if (!clean)
		return -ENOMEM;
	size_t len = strlen(clean);
	while (len > 1 && clean[len - 1] == '/')
		clean[--len] = '\0';
	struct stat st;
	if (lstat(clean, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(clean) < 0 && errno != ENOENT ? -errno : 0;
	int fd = open(clean, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	uint64_t mnt_id = mount_id_at(fd, "");
	if (!mnt_id)
		mnt_id = mount_id_at(AT_FDCWD, clean);
	int r = rm_rf_children(fd, st.st_dev, mnt_id, 0);
	if (rmdir(clean) < 0 && errno != ENOENT && r == 0)
		r = -errno;
	return r;
}

int wr_write_file_atomic(const char *path, const void *data, size_t len,
			 mode_t mode, bool durable)
{
	_cleanup_free_ char *tmp = wr_asprintf("%s.tmp.%d", path, getpid());
	if (!tmp)
		return -ENOMEM;
	_cleanup_close_ int fd =
	    open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	const char *p = data;
	size_t left = len;
	while (left) {
		ssize_t n = write(fd, p, left);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int r = -errno;
			unlink(tmp);
			return r;
		}
		p += n;
		left -= (size_t)n;
	}
	if ((durable && fsync(fd) < 0) || rename(tmp, path) < 0) {
		int r = -errno;
		unlink(tmp);
		return r;
	}
	return 0;
}

int wr_write_file(const char *path, const char *text)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = strlen(text);
	ssize_t n = write(fd, text, len);
	if (n < 0)
		return -errno;
	if ((size_t)n != len)
		return -EIO;
	return 0;
}

int wr_read_file(const char *path, size_t max, char **out, size_t *out_len)
{
	if (max >= SIZE_MAX - 1) /* max + 1 must not wrap */
		return -EINVAL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	_cleanup_free_ char *buf = wr_malloc(max + 1);
	if (!buf)
		return -ENOMEM;
	size_t len = 0;
	while (len < max) {
		ssize_t n = read(fd, buf + len, max - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len == max) {
		char extra;
		if (read(fd, &extra, 1) == 1)
			return -EFBIG;
	}
	buf[len] = '\0';
	if (out_len)
		*out_len = len;
	*out = TAKE_PTR(buf);
	return 0;
}

int wr_is_mount_point(const char *path)
{
	struct stat st, parent;
	if (lstat(path, &st) < 0)
		return -errno;
	_cleanup_free_ char *up = wr_asprintf("%s/..", path);
	if (!up)
		return -ENOMEM;
	if (stat(up, &parent) < 0)
		return -errno;
	if (st.st_dev != parent.st_dev)
		return 1;
	return st.st_ino == parent.st_ino ? 1 : 0;
}

char *wr_self_dir(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	char *slash = strrchr(buf, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	return wr_strdup(buf[0] ? buf : "/");
}

DIR *wr_opendir_at(int dirfd)
{
	/* a new open file description, not a dup: a dup shares the read
	 * position, and a second listing of dirfd would start at its end */
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	DIR *dir = fdopendir(fd);
	if (!dir) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return dir;
}

static int copy_file(int src_dir, const char *name, int dst_dir, mode_t mode)
{
	_cleanup_close_ int in =
	    openat(src_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return -errno;
	_cleanup_close_ int out = openat(
	    dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    mode & 07777);
	if (out < 0)
		return -errno;
	char buf[65536];
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));
			if (w < 0)
				return -errno;
			off += w;
		}
	}
	return fchmod(out, mode & 07777) < 0 ? -errno : 0;
}

/* Readable by every user (and searchable, for a directory)? */
static bool is_public(const struct stat *st)
{
	if (!(st->st_mode & S_IROTH))
		return false;
	return !S_ISDIR(st->st_mode) || (st->st_mode & S_IXOTH);
}

static int copy_children(int src_dir, int dst_dir, dev_t dev, int depth,
			 bool public_only)
{
	if (depth > 64)
		return -ELOOP;
	DIR *dir = wr_opendir_at(src_dir);
	if (!dir)
		return -errno;
	int ret = 0;
	struct dirent *de;
	while (ret == 0 && (de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(src_dir, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (public_only && !S_ISLNK(st.st_mode) && !is_public(&st))
			continue;
		if (S_ISREG(st.st_mode)) {
			ret =
			    copy_file(src_dir, de->d_name, dst_dir, st.st_mode);
		} else if (S_ISLNK(st.st_mode)) {
			char target[4096];
			ssize_t n = readlinkat(src_dir, de->d_name, target,
					       sizeof(target) - 1);
			if (n < 0)
				continue;
			target[n] = '\0';
			if (symlinkat(target, dst_dir, de->d_name) < 0)
				ret = -errno;
		} else if (S_ISDIR(st.st_mode) && st.st_dev == dev) {
			if (mkdirat(dst_dir, de->d_name, st.st_mode & 07777) <
			    0) {
				ret = -errno;
				break;
			}
			_cleanup_close_ int s = openat(
			    src_dir, de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			_cleanup_close_ int d = openat(
			    dst_dir, de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (s < 0 || d < 0)
				continue; /* unreadable: skipped */
			/* mkdir's mode went through the umask */
			if (fchmod(d, st.st_mode & 07777) < 0) {
				ret = -errno;
				break;
			}
			ret = copy_children(s, d, dev, depth + 1, public_only);
		}
	}
	closedir(dir);
	return ret;
}

static int copy_tree(const char *src, const char *dst, bool public_only)
{
	struct stat st;
	if (lstat(src, &st) < 0)
		return -errno;
	if (public_only && !S_ISLNK(st.st_mode) && !is_public(&st))
		return 0;
	if (S_ISLNK(st.st_mode)) {
		char target[4096];
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = '\0';
		return symlink(target, dst) < 0 ? -errno : 0;
	}
	_cleanup_free_ char *parent = wr_strdup(dst);
	if (!parent)
		return -ENOMEM;
	char *slash = strrchr(parent, '/');
	if (!slash)
		return -EINVAL;
	*slash = '\0';
	_cleanup_close_ int dst_parent =
	    open(parent[0] ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dst_parent < 0)
		return -errno;
	if (S_ISREG(st.st_mode)) {
		_cleanup_free_ char *sparent = wr_strdup(src);
		if (!sparent)
			return -ENOMEM;
		char *s = strrchr(sparent, '/');
		if (!s)
			return -EINVAL;
		*s = '\0';
		if (strcmp(s + 1, slash + 1))
			return -EINVAL; /* same base name expected */
		_cleanup_close_ int src_parent =
		    open(sparent[0] ? sparent : "/",
			 O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (src_parent < 0)
			return -errno;
		return copy_file(src_parent, s + 1, dst_parent, st.st_mode);
	}
	if (!S_ISDIR(st.st_mode))
		return -EINVAL;
	if (mkdir(dst, st.st_mode & 07777) < 0)
		return -errno;
	_cleanup_close_ int s = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int d = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s < 0 || d < 0)
		return -errno;
	if (fchmod(d, st.st_mode & 07777) < 0)
		return -errno;
	return copy_children(s, d, st.st_dev, 0, public_only);
}

int wr_copy_tree(const char *src, const char *dst)
{
	return copy_tree(src, dst, false);
}

int wr_copy_tree_public(const char *src, const char *dst)
{
	return copy_tree(src, dst, true);
}

static int chown_children(int dirfd, uid_t uid, gid_t gid, int depth)
{
	if (depth > 512)
		return -ELOOP;
	DIR *dir = wr_opendir_at(dirfd);
	if (!dir)
		return -errno;
	int ret = 0;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fchownat(dirfd, de->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) <
			0 &&
		    ret == 0)
			ret = -errno;
		if (de->d_type == DT_DIR) {
			_cleanup_close_ int child = openat(
			    dirfd, de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (child >= 0) {
				int r =
				    chown_children(child, uid, gid, depth + 1);
				if (r < 0 && ret == 0)
					ret = r;
			}
		}
	}
	closedir(dir);
	return ret;
}

int wr_chown_tree(const char *path, uid_t uid, gid_t gid)
{
	if (lchown(path, uid, gid) < 0)
		return -errno;
	_cleanup_close_ int fd =
	    open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOTDIR || errno == ELOOP ? 0 : -errno;
	return chown_children(fd, uid, gid, 0);
}

int wr_read_key_file(const char *path, char **out)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	if (st.st_mode & 077)
		return -EPERM;
	char *text = NULL;
	size_t len = 0;
	int r = wr_read_file(path, 64 * 1024, &text, &len);
	if (r < 0)
		return r;
	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' ||
		       text[len - 1] == ' '))
		text[--len] = '\0';
	*out = text;
	return 0;
}

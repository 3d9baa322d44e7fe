/* fs.c - filesystem helpers. */
#include "util/fs.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int wr_mkdir_p(const char *path, mode_t mode)
{
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

/* Removes the contents of dirfd, staying on device dev. Depth is capped so
 * a hostile tree cannot exhaust the stack. */
static int rm_rf_children(int dirfd, dev_t dev, int depth)
{
	if (depth > 512)
		return -ELOOP;
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
			if (st.st_dev != dev) {
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
			int r = rm_rf_children(child, dev, depth + 1);
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
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = rm_rf_children(fd, st.st_dev, 0);
	if (rmdir(path) < 0 && errno != ENOENT && r == 0)
		r = -errno;
	return r;
}

int wr_write_file_atomic(const char *path, const void *data, size_t len,
			 mode_t mode)
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
	if (fsync(fd) < 0 || rename(tmp, path) < 0) {
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

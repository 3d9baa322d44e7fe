/* sessfs.c - a session's perimeter files in a filesystem of their own.
 *
 * What the sandbox sees of the perimeter (the egress, broker and gateway
 * sockets, the broker's token, the relays and the git client it runs) lives
 * in a small tmpfs per session, made with fsopen/fsmount and mounted
 * nowhere: the server holds it by a descriptor, and every path to it is
 * /proc/PID/fd/N/... . The sandbox's binds are clones of its directories,
 * so its mountinfo shows "/egress" on a tmpfs, never a path of the host
 * (the data directory, the install directory). When the server exits, by
 * a stop or a kill, the kernel frees it with the last descriptor or
 * socket that holds it: nothing is left mounted anywhere.
 *
 * DATA/sessions/<id>.<what> are symlinks into it, for an operator (and the
 * tests) to look at from the host, removed at the close; a server that
 * died leaves dangling ones, which the next start removes with the rest of
 * a session's stale files. */
#include "perimeter/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SESSFS_SIZE "4m"
#define SESSFS_INODES "64"

struct perimeter_fs {
	struct perimeter_fs *next;
	char id[STORE_ID_MAX];
	int fd; /* the detached tmpfs */
};

/* Copies the executable at src to bin/name in the filesystem at mnt. */
static int copy_binary(int mnt, const char *src, const char *name)
{
	_cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	struct stat st;
	if (fstat(in, &st) < 0)
		return -errno;
	char path[PERIMETER_FS_NAME_MAX];
	snprintf(path, sizeof(path), "bin/%s", name);
	_cleanup_close_ int out =
	    openat(mnt, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0555);
	if (out < 0)
		return -errno;
	off_t off = 0;
	while (off < st.st_size) {
		ssize_t n = sendfile(out, in, &off, (size_t)(st.st_size - off));
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
	}
	return 0;
}

/* A new tmpfs, mounted nowhere, with the binaries in bin/. */
static int fs_make(const struct perimeter *p, struct wr_error **err)
{
	_cleanup_close_ int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return wr_error_set(err, errno, "perimeter files: fsopen tmpfs");
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", SESSFS_SIZE,
		    0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "nr_inodes",
		    SESSFS_INODES, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0711",
		    0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return wr_error_set(err, errno, "perimeter files: tmpfs");
	_cleanup_close_ int mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
					       MOUNT_ATTR_NODEV |
						   MOUNT_ATTR_NOSUID);
	if (mnt < 0)
		return wr_error_set(err, errno, "perimeter files: fsmount");
	if (mkdirat(mnt, "bin", 0755) < 0)
		return wr_error_set(err, errno, "perimeter files: bin");
	_cleanup_free_ char *bin = wr_strdup(p->cfg.warren_bin);
	const char *dir = bin ? dirname(bin) : NULL;
	if (!dir)
		return wr_error_set(err, ENOMEM, "perimeter files");
	static const char *const names[] = {PERIMETER_FS_RELAY,
					    PERIMETER_FS_GIT_CLIENT};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		_cleanup_free_ char *src = wr_asprintf("%s/%s", dir, names[i]);
		int r = src ? copy_binary(mnt, src, names[i]) : -ENOMEM;
		if (r < 0)
			return wr_error_set(err, -r,
					    "perimeter files: copy %s (`make` "
					    "builds it)",
					    src ? src : names[i]);
	}
	return TAKE_FD(mnt);
}

static struct perimeter_fs **fs_find(struct perimeter *p, const char *id)
{
	struct perimeter_fs **pp = &p->fs_list;
	while (*pp && strcmp((*pp)->id, id))
		pp = &(*pp)->next;
	return pp;
}

int perimeter_fs_path(struct perimeter *p, const char *session_id,
		      const char *what, char **out, struct wr_error **err)
{
	*out = NULL;
	pthread_mutex_lock(&p->fs_mu);
	struct perimeter_fs *f = *fs_find(p, session_id);
	int fd = f ? f->fd : -1;
	pthread_mutex_unlock(&p->fs_mu);
	if (fd < 0) {
		_cleanup_close_ int made = fs_make(p, err);
		if (made < 0)
			return made;
		struct perimeter_fs *n = wr_calloc(1, sizeof(*n));
		if (!n)
			return wr_error_set(err, ENOMEM, "perimeter files");
		snprintf(n->id, sizeof(n->id), "%s", session_id);
		pthread_mutex_lock(&p->fs_mu);
		struct perimeter_fs **pp = fs_find(p, session_id);
		if (*pp) {
			/* made meanwhile by another caller: theirs stands */
			free(n);
		} else {
			n->fd = TAKE_FD(made);
			*pp = n;
		}
		fd = (*pp)->fd;
		pthread_mutex_unlock(&p->fs_mu);
	}
	*out = wr_asprintf("/proc/%d/fd/%d/%s", (int)getpid(), fd, what);
	if (!*out)
		return wr_error_set(err, ENOMEM, "perimeter files");
	/* the host's view, for an operator: a symlink beside the session's
	 * other files (not a bind source: the sandbox gets the clone) */
	if (!strchr(what, '/')) {
		_cleanup_free_ char *link = wr_asprintf(
		    "%s/sessions/%s.%s", p->cfg.data_dir, session_id, what);
		if (link) {
			unlink(link);
			if (symlink(*out, link) < 0 && errno != EEXIST) {
				/* only a convenience: the session goes on */
			}
		}
	}
	return 0;
}

void perimeter_fs_close(struct perimeter *p, const char *session_id)
{
	pthread_mutex_lock(&p->fs_mu);
	struct perimeter_fs **pp = fs_find(p, session_id);
	struct perimeter_fs *f = *pp;
	if (f)
		*pp = f->next;
	pthread_mutex_unlock(&p->fs_mu);
	static const char *const whats[] = {"egress", "broker", "gateway"};
	for (size_t i = 0; i < sizeof(whats) / sizeof(whats[0]); i++) {
		_cleanup_free_ char *link = wr_asprintf(
		    "%s/sessions/%s.%s", p->cfg.data_dir, session_id, whats[i]);
		struct stat st;
		if (link && lstat(link, &st) == 0 && S_ISLNK(st.st_mode))
			unlink(link);
	}
	if (f) {
		close(f->fd);
		free(f);
	}
}

void perimeter_fs_close_all(struct perimeter *p)
{
	for (;;) {
		pthread_mutex_lock(&p->fs_mu);
		struct perimeter_fs *f = p->fs_list;
		char id[STORE_ID_MAX] = "";
		if (f)
			snprintf(id, sizeof(id), "%s", f->id);
		pthread_mutex_unlock(&p->fs_mu);
		if (!f)
			return;
		perimeter_fs_close(p, id);
	}
}

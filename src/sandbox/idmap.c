/* idmap.c - idmapped mounts of layers and upper directories.
 *
 * mount_setattr(MOUNT_ATTR_IDMAP) takes a user namespace only as a
 * description of a mapping. We make one with a short-lived child: clone it
 * into a new user namespace, write the map from here (we are root in the
 * parent namespace, so any range is allowed), open /proc/PID/ns/user, and let
 * the child exit. The namespace lives as long as the fd does. */
#include "sandbox/internal.h"

#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_map(pid_t pid, const char *file, const char *map)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	return wr_write_file(path, map);
}

int idmap_userns_open(uid_t inside, uid_t outside, uint32_t count)
{
	int hold[2];
	if (pipe2(hold, O_CLOEXEC) < 0)
		return -errno;
	/* raw clone without a new stack: fork semantics in a new userns */
	pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL,
				   NULL, NULL, NULL);
	if (pid < 0) {
		int r = -errno;
		close(hold[0]);
		close(hold[1]);
		return r;
	}
	if (pid == 0) {
		/* wait until the parent has taken the namespace */
		char c;
		close(hold[1]);
		while (read(hold[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(hold[0]);
	char map[96];
	snprintf(map, sizeof(map), "%u %u %u\n", (unsigned)inside,
		 (unsigned)outside, (unsigned)count);
	int r = write_map(pid, "uid_map", map);
	if (r == 0)
		r = write_map(pid, "gid_map", map);
	int fd = -1;
	if (r == 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			r = -errno;
	}
	close(hold[1]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return r < 0 ? r : fd;
}

int idmap_mount_open(const char *path, int userns_fd, uint64_t attr_set)
{
	/* a private, non-recursive clone: no submounts (overlayfs refuses
	 * lower layers with submounts) and nothing propagates back */
	_cleanup_close_ int fd = (int)syscall(SYS_open_tree, AT_FDCWD, path,
					      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct mount_attr attr = { .attr_set = attr_set };
	if (userns_fd >= 0) {
		attr.attr_set |= MOUNT_ATTR_IDMAP;
		attr.userns_fd = (uint64_t)userns_fd;
	}
	if (attr.attr_set &&
	    syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr,
		    sizeof(attr)) < 0)
		return -errno;
	return TAKE_FD(fd);
}

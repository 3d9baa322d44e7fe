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

/* The helper shares our memory (CLONE_VM) and runs on a small stack of its
 * own: it only blocks in read(2) until we have taken its namespace, so there
 * is no page-table copy as with fork, which made this the costliest step of
 * preparing a sandbox. */
struct helper_args {
	int hold_fd;  /* read end: EOF when we are done */
	int other_fd; /* write end: the helper's copy must go, or no EOF */
};

static int helper_main(void *arg)
{
	const struct helper_args *a = arg;
	char c;
	close(a->other_fd);
	while (read(a->hold_fd, &c, 1) < 0 && errno == EINTR)
		;
	return 0;
}

int idmap_userns_open(uid_t inside, uid_t outside, uint32_t count)
{
	static char helper_stack[16384] __attribute__((aligned(16)));
	int hold[2];
	if (pipe2(hold, O_CLOEXEC) < 0)
		return -errno;
	struct helper_args args = {.hold_fd = hold[0], .other_fd = hold[1]};
	pid_t pid = clone(helper_main, helper_stack + sizeof(helper_stack),
			  CLONE_VM | CLONE_NEWUSER | SIGCHLD, &args);
	if (pid < 0) {
		int r = -errno;
		close(hold[0]);
		close(hold[1]);
		return r;
	}
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
	close(hold[1]); /* EOF: the helper returns */
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(hold[0]);
	return r < 0 ? r : fd;
}

int idmap_mount_set(int fd, int userns_fd, uint64_t attr_set)
{
	struct mount_attr attr = {.attr_set = attr_set};
	if (userns_fd >= 0) {
		attr.attr_set |= MOUNT_ATTR_IDMAP;
		attr.userns_fd = (uint64_t)userns_fd;
	}
	if (attr.attr_set && syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH,
				     &attr, sizeof(attr)) < 0)
		return -errno;
	return 0;
}

int idmap_mount_open(const char *path, int userns_fd, uint64_t attr_set)
{
	/* a private, non-recursive clone: no submounts (overlayfs refuses
	 * lower layers with submounts) and nothing propagates back */
	_cleanup_close_ int fd = (int)syscall(
	    SYS_open_tree, AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = idmap_mount_set(fd, userns_fd, attr_set);
	return r < 0 ? r : TAKE_FD(fd);
}

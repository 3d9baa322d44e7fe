/* rootfs.c - the sandbox's root filesystem, built in the cloned child.
 *
 * Runs inside the new user and mount namespaces, before pivot_root. The
 * parent has already opened every host path that needs host privileges
 * (layers, the persistent upper, --bind sources) as detached, idmapped
 * mounts; here we attach them under a private staging tmpfs, mount the
 * overlay, populate it, and pivot into it. Mount points inside the new root
 * are created with openat2(RESOLVE_IN_ROOT) so that a symlink planted in a
 * layer (say /workspace -> /etc) resolves inside the root, never on the
 * host. */
#include "sandbox/internal.h"

#include "util/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define STEP_FAIL(report, fmt, ...) step_fail(report, errno, fmt, ##__VA_ARGS__)

static int step_fail(struct child_report *report, int errnum, const char *fmt,
		     ...) __attribute__((format(printf, 3, 4)));
static int step_fail(struct child_report *report, int errnum, const char *fmt,
		     ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(report->step, sizeof(report->step), fmt, ap);
	va_end(ap);
	report->err = errnum ? errnum : EINVAL;
	return -report->err;
}

static int openat2_in_root(int root_fd, const char *path, int flags)
{
	struct open_how how = {
	    .flags = (uint64_t)(flags | O_CLOEXEC),
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	while (*path == '/')
		path++;
	if (!*path)
		path = ".";
	int fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

/* Creates path (a directory, or an empty file if is_file) inside root_fd,
 * with every component resolved inside the root. Returns an O_PATH fd. */
static int make_in_root(int root_fd, const char *path, bool is_file)
{
	char buf[4096];
	if (strlen(path) >= sizeof(buf))
		return -ENAMETOOLONG;
	snprintf(buf, sizeof(buf), "%s", path);
	size_t len = strlen(buf);
	while (len > 1 && buf[len - 1] == '/')
		buf[--len] = '\0';
	int fd = openat2_in_root(root_fd, buf, O_PATH);
	if (fd >= 0)
		return fd;
	if (fd != -ENOENT)
		return fd;
	char *slash = strrchr(buf, '/');
	const char *leaf = buf;
	_cleanup_close_ int parent = -1;
	if (slash && slash != buf) {
		*slash = '\0';
		parent = make_in_root(root_fd, buf, false);
		leaf = slash + 1;
	} else {
		parent = openat2_in_root(root_fd, "/", O_PATH);
		leaf = slash ? slash + 1 : buf;
	}
	if (parent < 0)
		return parent;
	if (is_file) {
		int f = openat(
		    parent, leaf,
		    O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (f < 0 && errno != EEXIST)
			return -errno;
		if (f >= 0)
			close(f);
	} else if (mkdirat(parent, leaf, 0755) < 0 && errno != EEXIST) {
		return -errno;
	}
	if (slash && slash != buf)
		*slash = '/';
	return openat2_in_root(root_fd, path, O_PATH);
}

static void fd_path(int fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/* mount(2) onto a path inside the new root, resolved safely. */
static int mount_in_root(int root_fd, const char *dest, bool is_file,
			 const char *source, const char *fstype,
			 unsigned long flags, const char *data)
{
	_cleanup_close_ int target = make_in_root(root_fd, dest, is_file);
	if (target < 0) {
		errno = -target;
		return -1;
	}
	char tpath[64];
	fd_path(target, tpath, sizeof(tpath));
	return mount(source, tpath, fstype, flags, data);
}

static int remount_in_root(int root_fd, const char *dest, unsigned long flags)
{
	_cleanup_close_ int target = openat2_in_root(root_fd, dest, O_PATH);
	if (target < 0) {
		errno = -target;
		return -1;
	}
	char tpath[64];
	fd_path(target, tpath, sizeof(tpath));
	return mount(NULL, tpath, NULL, MS_REMOUNT | MS_BIND | flags, NULL);
}

/* Read-only, nosuid, nodev on a bind and every submount under it (a plain
 * remount would change the top mount only). */
static int make_readonly_recursive(int root_fd, const char *dest)
{
	_cleanup_close_ int target = openat2_in_root(root_fd, dest, O_PATH);
	if (target < 0) {
		errno = -target;
		return -1;
	}
	struct mount_attr attr = {
	    .attr_set =
		MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
	};
	return (int)syscall(SYS_mount_setattr, target, "",
			    AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr));
}

static int write_in_root(int root_fd, const char *dir, const char *name,
			 const char *text)
{
	_cleanup_close_ int dfd =
	    openat2_in_root(root_fd, dir, O_PATH | O_DIRECTORY);
	if (dfd < 0) {
		errno = -dfd;
		return -1;
	}
	_cleanup_close_ int fd =
	    openat(dfd, name,
		   O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	size_t len = strlen(text);
	return write(fd, text, len) == (ssize_t)len ? 0 : -1;
}

static int symlink_in_root(int root_fd, const char *target, const char *dir,
			   const char *name)
{
	_cleanup_close_ int dfd =
	    openat2_in_root(root_fd, dir, O_PATH | O_DIRECTORY);
	if (dfd < 0) {
		errno = -dfd;
		return -1;
	}
	if (symlinkat(target, dfd, name) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* Host mode: the host's /usr read-only (and, on hosts without a merged /usr,
 * the real top-level library directories). The rest of the top level and
 * /etc come from the host base layer (hostbase.c). */

static int setup_host_mode(int root_fd, const struct sandbox_config *cfg,
			   struct child_report *report)
{
	if (mount_in_root(root_fd, "/usr", false, "/usr", NULL,
			  MS_BIND | MS_REC, NULL) < 0 ||
	    make_readonly_recursive(root_fd, "/usr") < 0)
		return STEP_FAIL(report, "bind host /usr read-only");
	for (size_t i = 0; i < hostbase_n_top_entries; i++) {
		char host[64];
		snprintf(host, sizeof(host), "/%s", hostbase_top_entries[i]);
		struct stat st;
		if (lstat(host, &st) < 0 || !S_ISDIR(st.st_mode))
			continue; /* symlinks are in the base layer */
		if (mount_in_root(root_fd, host, false, host, NULL,
				  MS_BIND | MS_REC, NULL) < 0 ||
		    make_readonly_recursive(root_fd, host) < 0)
			return STEP_FAIL(report, "bind host %s", host);
	}
	return rootfs_write_host_names(root_fd, cfg, report);
}

int rootfs_write_host_names(int root_fd, const struct sandbox_config *cfg,
			    struct child_report *report)
{
	if (cfg->hostname) {
		char hosts[512], line[128];
		snprintf(
		    hosts, sizeof(hosts),
		    "127.0.0.1\tlocalhost %s\n::1\tlocalhost ip6-localhost\n",
		    cfg->hostname);
		snprintf(line, sizeof(line), "%s\n", cfg->hostname);
		if (write_in_root(root_fd, "/etc", "hosts", hosts) < 0 ||
		    write_in_root(root_fd, "/etc", "hostname", line) < 0)
			return STEP_FAIL(report, "write /etc/hostname");
	}
	return 0;
}

static const char *const dev_nodes[] = {"null",	  "zero",    "full",
					"random", "urandom", "tty"};

/* A minimal /dev: the harmless character devices bound from the host (a user
 * namespace cannot mknod), a private devpts instance, and /dev/shm. */
static int setup_dev(int root_fd, struct child_report *report)
{
	if (mount_in_root(root_fd, "/dev", false, "warren-dev", "tmpfs",
			  MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
		return STEP_FAIL(report, "mount tmpfs on /dev");
	for (size_t i = 0; i < ARRAY_SIZE(dev_nodes); i++) {
		char host[32], dest[32];
		snprintf(host, sizeof(host), "/dev/%s", dev_nodes[i]);
		snprintf(dest, sizeof(dest), "/dev/%s", dev_nodes[i]);
		if (mount_in_root(root_fd, dest, true, host, NULL, MS_BIND,
				  NULL) < 0)
			return STEP_FAIL(report, "bind %s", host);
	}
	if (mount_in_root(root_fd, "/dev/pts", false, "devpts", "devpts",
			  MS_NOSUID | MS_NOEXEC,
			  "newinstance,ptmxmode=0666,mode=0620,gid=5") < 0)
		return STEP_FAIL(report, "mount devpts on /dev/pts");
	if (mount_in_root(root_fd, "/dev/shm", false, "warren-shm", "tmpfs",
			  MS_NOSUID | MS_NODEV, "mode=1777") < 0)
		return STEP_FAIL(report, "mount tmpfs on /dev/shm");
	if (symlink_in_root(root_fd, "pts/ptmx", "/dev", "ptmx") < 0 ||
	    symlink_in_root(root_fd, "/proc/self/fd", "/dev", "fd") < 0 ||
	    symlink_in_root(root_fd, "/proc/self/fd/0", "/dev", "stdin") < 0 ||
	    symlink_in_root(root_fd, "/proc/self/fd/1", "/dev", "stdout") < 0 ||
	    symlink_in_root(root_fd, "/proc/self/fd/2", "/dev", "stderr") < 0)
		return STEP_FAIL(report, "create /dev symlinks");
	/* nothing may add device files later */
	if (remount_in_root(root_fd, "/dev",
			    MS_RDONLY | MS_NOSUID | MS_NOEXEC) < 0)
		return STEP_FAIL(report, "remount /dev read-only");
	return 0;
}

static int attach_fd(int mount_fd, const char *target)
{
	return (int)syscall(SYS_move_mount, mount_fd, "", AT_FDCWD, target,
			    MOVE_MOUNT_F_EMPTY_PATH);
}

/* A read-only directory bind as a read-only overlay of it: its clone is
 * attached in the staging directory (the current directory) under a
 * relative name, with an empty directory as the second lower layer
 * (overlayfs wants two without an upper), so the mount shows "overlay" and
 * relative names where a bind would show its source's host path. The
 * staging directory goes at pivot_root; overlayfs keeps its own
 * references. Returns the overlay's detached mount, or -errno. */
static int bind_overlay_open(int bind_fd, size_t i)
{
	char name[32], empty[40], lower[80];
	snprintf(name, sizeof(name), "bind%zu", i);
	snprintf(empty, sizeof(empty), "bind%zu.e", i);
	snprintf(lower, sizeof(lower), "%s:%s", name, empty);
	if (mkdir(name, 0755) < 0 || mkdir(empty, 0755) < 0 ||
	    attach_fd(bind_fd, name) < 0)
		return -errno;
	_cleanup_close_ int fs =
	    (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -errno;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "lowerdir", lower,
		    0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "userxattr", NULL,
		    0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	int m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
			     MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
				 MOUNT_ATTR_NODEV);
	return m < 0 ? -errno : m;
}

static int attach_binds(struct child_plan *plan, int root_fd,
			struct child_report *report)
{
	const struct sandbox_config *cfg = plan->cfg;
	for (size_t i = 0; i < cfg->n_binds; i++) {
		struct stat st;
		if (fstat(plan->bind_fds[i], &st) < 0)
			return STEP_FAIL(report, "stat bind %s",
					 cfg->binds[i].source);
		_cleanup_close_ int target = make_in_root(
		    root_fd, cfg->binds[i].dest, !S_ISDIR(st.st_mode));
		if (target < 0)
			return step_fail(report, -target,
					 "create bind target %s",
					 cfg->binds[i].dest);
		_cleanup_close_ int ovl = -1;
		if (plan->bind_overlay[i]) {
			ovl = bind_overlay_open(plan->bind_fds[i], i);
			if (ovl < 0)
				return step_fail(report, -ovl,
						 "bind %s: overlay",
						 cfg->binds[i].source);
		}
		/* attach onto the fd itself: a /proc/self/fd path would be a
		 * magic link, which move_mount does not follow */
		if (syscall(SYS_move_mount, ovl >= 0 ? ovl : plan->bind_fds[i],
			    "", target, "",
			    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) <
		    0)
			return STEP_FAIL(report, "bind %s on %s",
					 cfg->binds[i].source,
					 cfg->binds[i].dest);
	}
	return 0;
}

int rootfs_stage_overlay(struct child_plan *plan, struct child_report *report)
{
	const struct sandbox_config *cfg = plan->cfg;
	const char *stage = plan->stage_path;
	char path[4096], opts[8192];

	/* The staging tmpfs holds the mount points of the layers and, for a
	 * scratch sandbox, the writable layer itself: its size is the disk
	 * cap, and it vanishes with the mount namespace. */
	uint64_t disk =
	    cfg->disk_bytes ? cfg->disk_bytes : SANDBOX_DEFAULT_DISK;
	snprintf(opts, sizeof(opts), "mode=0755,size=%llu",
		 (unsigned long long)disk);
	if (mount("warren-stage", stage, "tmpfs", MS_NOSUID | MS_NODEV, opts) <
	    0)
		return STEP_FAIL(report, "mount staging tmpfs on %s", stage);
	if (chdir(stage) < 0)
		return STEP_FAIL(report, "chdir %s", stage);
	if (mkdir("root", 0755) < 0 || mkdir("empty", 0755) < 0)
		return STEP_FAIL(report, "create staging directories");

	/* lowerdir lists the top layer first. Paths are relative to the
	 * staging directory (our cwd), so that /proc/self/mountinfo inside
	 * shows nothing of the host's layout. */
	size_t used = (size_t)snprintf(opts, sizeof(opts), "lowerdir=");
	for (size_t i = 0; i < plan->n_layer_fds; i++) {
		char name[32];
		snprintf(name, sizeof(name), "lower%zu", i);
		if (mkdir(name, 0755) < 0)
			return STEP_FAIL(report, "mkdir %s", name);
		if (attach_fd(plan->layer_fds[i], name) < 0)
			return STEP_FAIL(report, "attach layer %zu", i);
	}
	for (size_t i = plan->n_layer_fds; i-- > 0;) {
		used += (size_t)snprintf(
		    opts + used, sizeof(opts) - used, "%slower%zu",
		    i + 1 == plan->n_layer_fds ? "" : ":", i);
	}
	if (plan->n_layer_fds == 0)
		used +=
		    (size_t)snprintf(opts + used, sizeof(opts) - used, "empty");
	if (plan->upper_parent_fd >= 0) {
		if (mkdir("upperp", 0755) < 0 ||
		    attach_fd(plan->upper_parent_fd, "upperp") < 0)
			return STEP_FAIL(report, "attach upper directory %s",
					 cfg->upper);
		used +=
		    (size_t)snprintf(opts + used, sizeof(opts) - used,
				     ",upperdir=upperp/%s,workdir=upperp/%s",
				     plan->upper_name, plan->work_name);
	} else {
		if (mkdir("upper", 0755) < 0 || mkdir("work", 0755) < 0)
			return STEP_FAIL(report, "create scratch upper");
		/* volatile: a scratch layer is never synced to disk */
		used +=
		    (size_t)snprintf(opts + used, sizeof(opts) - used,
				     ",upperdir=upper,workdir=work,volatile");
	}
	/* userxattr: overlay mounted in a user namespace keeps its metadata
	 * in user.overlay.* (trusted.* needs init-namespace privilege) */
	used +=
	    (size_t)snprintf(opts + used, sizeof(opts) - used, ",userxattr");
	if (used >= sizeof(opts))
		return step_fail(report, E2BIG, "overlay options too long");
	snprintf(path, sizeof(path), "%s/root", stage);
	if (mount("overlay", path, "overlay", MS_NODEV, opts) < 0) {
		if (errno == EOPNOTSUPP || errno == EINVAL)
			return STEP_FAIL(report,
					 "mount overlay root (%s; this needs "
					 "Linux 6.6 or later, see README.md)",
					 opts);
		return STEP_FAIL(report, "mount overlay root (%s)", opts);
	}
	int root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0)
		return STEP_FAIL(report, "open new root");

	static const char *const base_dirs[] = {"/workspace", "/root", "/tmp",
						"/proc", "/run"};
	for (size_t i = 0; i < ARRAY_SIZE(base_dirs); i++) {
		int fd = make_in_root(root_fd, base_dirs[i], false);
		if (fd < 0) {
			close(root_fd);
			return step_fail(report, -fd, "create %s",
					 base_dirs[i]);
		}
		close(fd);
	}
	return root_fd;
}

int rootfs_setup(struct child_plan *plan, struct child_report *report)
{
	const struct sandbox_config *cfg = plan->cfg;
	char opts[256];
	/* Nothing we mount may propagate back to the host. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return STEP_FAIL(report, "make mounts private");
	_cleanup_close_ int root_fd = rootfs_stage_overlay(plan, report);
	if (root_fd < 0)
		return root_fd;
	uint64_t disk =
	    cfg->disk_bytes ? cfg->disk_bytes : SANDBOX_DEFAULT_DISK;
	if (plan->host_mode) {
		int r = setup_host_mode(root_fd, cfg, report);
		if (r < 0)
			return r;
	}
	if (mount_in_root(root_fd, "/proc", false, "proc", "proc",
			  MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return STEP_FAIL(report, "mount /proc");
	int r = setup_dev(root_fd, report);
	if (r < 0)
		return r;
	/* /tmp and /run never persist: with a scratch upper they already live
	 * in the sandbox's private tmpfs; with a persistent upper they get
	 * tmpfs mounts of their own so they stay out of the layer. */
	if (plan->upper_parent_fd >= 0) {
		snprintf(opts, sizeof(opts), "mode=1777,size=%llu",
			 (unsigned long long)disk);
		if (mount_in_root(root_fd, "/tmp", false, "warren-tmp", "tmpfs",
				  MS_NOSUID | MS_NODEV, opts) < 0)
			return STEP_FAIL(report, "mount tmpfs on /tmp");
		if (mount_in_root(root_fd, "/run", false, "warren-run", "tmpfs",
				  MS_NOSUID | MS_NODEV,
				  "mode=0755,size=16m") < 0)
			return STEP_FAIL(report, "mount tmpfs on /run");
	} else {
		_cleanup_close_ int tmp = make_in_root(root_fd, "/tmp", false);
		if (tmp < 0)
			return step_fail(report, -tmp, "create /tmp");
		char tpath[64];
		fd_path(tmp, tpath, sizeof(tpath));
		if (chmod(tpath, 01777) < 0)
			return STEP_FAIL(report, "chmod /tmp");
	}
	r = attach_binds(plan, root_fd, report);
	if (r < 0)
		return r;

	/* pivot_root(".", ".") stacks the old root under the new one at "/";
	 * unmounting "." with MNT_DETACH then drops the old root (and the
	 * staging tmpfs with the layer mounts) out of reach. Overlay keeps its
	 * own references to the layers. */
	if (fchdir(root_fd) < 0)
		return STEP_FAIL(report, "chdir new root");
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return STEP_FAIL(report, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		return STEP_FAIL(report, "detach old root");
	if (chdir("/") < 0)
		return STEP_FAIL(report, "chdir /");
	return 0;
}

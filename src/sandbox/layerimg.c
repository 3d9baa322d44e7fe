/* layerimg.c - a persistent writable layer in a filesystem of its own.
 *
 * `--upper DIR --disk N` keeps the layer in DIR/layer.img: a sparse file
 * holding an ext4 filesystem of N bytes (and --inodes files), made on first
 * use. Its size and inode count are the filesystem's own, so the kernel
 * enforces them at every moment the layer is mounted: while the agent runs,
 * while the sandbox rests, and for any process left running in it. A layer
 * directory on the host's filesystem has no such limit (this kernel has no
 * project quotas).
 *
 * The image is mounted only as a detached mount (fsopen/fsmount) that the
 * sandbox's child attaches inside its own mount namespace: nothing is ever
 * mounted on the host, so nothing is left mounted when the sandbox, or the
 * warren that made it, dies. The loop device is set to clear itself when
 * the filesystem lets go of it. An image already attached to a loop device
 * (a sandbox of a crashed server still holding it) is mounted through that
 * device, so one filesystem never has two superblocks; a lock on the image
 * serialises the lookup and the attach.
 *
 * Inside the filesystem: upper/ (the layer) and work/ (overlayfs's work
 * directory, emptied at each mount), both owned by the store range like a
 * directory layer's. */
#include "sandbox/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/spawn.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <linux/mount.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LOOP_ATTACH_TRIES 16

static char *image_path(const char *dir)
{
	return wr_asprintf("%s/" LAYER_IMAGE_NAME, dir);
}

bool layer_image_present(const char *dir)
{
	_cleanup_free_ char *img = image_path(dir);
	struct stat st;
	return img && lstat(img, &st) == 0 && S_ISREG(st.st_mode);
}

static const char *mke2fs_path(void)
{
	static const char *const paths[] = {"/usr/sbin/mke2fs", "/sbin/mke2fs"};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (access(paths[i], X_OK) == 0)
			return paths[i];
	return NULL;
}

int layer_image_create(const char *dir, uint64_t bytes, uint64_t inodes,
		       struct wr_error **err)
{
	if (layer_image_present(dir))
		return 0;
	const char *mke2fs = mke2fs_path();
	if (!mke2fs)
		return wr_error_set(err, ENOENT,
				    "--disk with --upper: mke2fs not found "
				    "(install e2fsprogs)");
	_cleanup_free_ char *img = image_path(dir);
	_cleanup_free_ char *tmp = wr_asprintf("%s/.layer.img.new", dir);
	if (!img || !tmp)
		return wr_error_set(err, ENOMEM, "layer image");
	unlink(tmp);
	_cleanup_close_ int fd =
	    open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return wr_error_set(err, errno, "create %s", tmp);
	if (ftruncate(fd, (off_t)bytes) < 0) {
		int e = errno;
		unlink(tmp);
		return wr_error_set(err, e, "size %s", tmp);
	}
	char owner[96], count[32];
	snprintf(owner, sizeof(owner),
		 "lazy_itable_init=1,lazy_journal_init=1,nodiscard,"
		 "root_owner=%u:%u",
		 WR_STORE_UID, WR_STORE_UID);
	snprintf(count, sizeof(count), "%llu", (unsigned long long)inodes);
	const char *argv[16];
	size_t n = 0;
	argv[n++] = mke2fs;
	argv[n++] = "-q";
	argv[n++] = "-F";
	argv[n++] = "-t";
	argv[n++] = "ext4";
	argv[n++] = "-m";
	argv[n++] = "0";
	argv[n++] = "-E";
	argv[n++] = owner;
	if (inodes) {
		argv[n++] = "-N";
		argv[n++] = count;
	}
	argv[n++] = tmp;
	argv[n] = NULL;
	static const char *const env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
					  "LC_ALL=C", NULL};
	struct spawn_call call = {.argv = argv,
				  .envp = env,
				  .in_fd = -1,
				  .out_fd = -1,
				  .timeout_ms = 60000};
	int st = spawn_run(&call, err);
	if (st != 0) {
		unlink(tmp);
		if (st > 0)
			return wr_error_set(err, EIO, "mke2fs %s: %s", tmp,
					    call.err_tail);
		return st;
	}
	if (fsync(fd) < 0 || rename(tmp, img) < 0) {
		int e = errno;
		unlink(tmp);
		return wr_error_set(err, e, "install %s", img);
	}
	return 0;
}

/* The loop device (its number) already backed by the file open as fd, or
 * -1. */
static int loop_find(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -1;
	DIR *d = opendir("/sys/block");
	if (!d)
		return -1;
	int found = -1;
	struct dirent *de;
	while (found < 0 && (de = readdir(d))) {
		int n;
		char tail;
		if (sscanf(de->d_name, "loop%d%c", &n, &tail) != 1)
			continue;
		char dev[32];
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		_cleanup_close_ int lfd = open(dev, O_RDONLY | O_CLOEXEC);
		struct loop_info64 info;
		if (lfd >= 0 && ioctl(lfd, LOOP_GET_STATUS64, &info) == 0 &&
		    info.lo_device == st.st_dev && info.lo_inode == st.st_ino)
			found = n;
	}
	closedir(d);
	return found;
}

/* Attaches the image open as fd to a free loop device that clears itself
 * once nothing holds it. Returns the device's fd (which keeps it attached
 * until the filesystem holds it) and its number in *num, or -errno. */
static int loop_attach(int fd, int *num)
{
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return -errno;
	for (int i = 0; i < LOOP_ATTACH_TRIES; i++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			return -errno;
		char dev[32];
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		int lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0)
			return -errno;
		struct loop_config cfg = {.fd = (uint32_t)fd};
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0) {
			*num = n;
			return lfd;
		}
		int e = errno;
		close(lfd);
		if (e != EBUSY)
			return -e;
		/* another attacher took it between GET_FREE and here */
	}
	return -EBUSY;
}

/* The ext4 filesystem on /dev/loopN as a detached mount. The superblock
 * is always writable: a mount that only reads is a read-only mount of it,
 * so it can share a superblock another sandbox writes through. */
static int fs_mount(int n, bool read_only)
{
	_cleanup_close_ int fs = (int)syscall(SYS_fsopen, "ext4", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -errno;
	char dev[32];
	snprintf(dev, sizeof(dev), "/dev/loop%d", n);
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", dev, 0) <
		0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "errors",
		    "remount-ro", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "noinit_itable", NULL,
		    0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	unsigned attrs = MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID;
	if (read_only)
		attrs |= MOUNT_ATTR_RDONLY;
	int m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, attrs);
	return m < 0 ? -errno : m;
}

/* upper/ and an empty work/ in the filesystem mounted at mnt_fd. */
static int layout_prepare(int mnt_fd)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d/work", mnt_fd);
	wr_rm_rf(path); /* a work dir left by an earlier mount is stale */
	static const struct {
		const char *name;
		mode_t mode;
	} dirs[] = {{"upper", 0755}, {"work", 0700}};
	for (size_t i = 0; i < 2; i++) {
		if (mkdirat(mnt_fd, dirs[i].name, dirs[i].mode) < 0 &&
		    errno != EEXIST)
			return -errno;
		if (fchownat(mnt_fd, dirs[i].name, WR_STORE_UID, WR_STORE_UID,
			     AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	}
	/* as a directory layer's DIR: only the store uid may enter (the
	 * mount's fd is a path, not an open file: chmod it by its name) */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mnt_fd);
	if (chmod(path, 0700) < 0)
		return -errno;
	return 0;
}

int layer_image_mount(const char *dir, bool read_only, struct wr_error **err)
{
	_cleanup_free_ char *img = image_path(dir);
	if (!img)
		return wr_error_set(err, ENOMEM, "layer image");
	_cleanup_close_ int fd = open(img, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return wr_error_set(err, errno, "open %s", img);
	if (flock(fd, LOCK_EX) < 0)
		return wr_error_set(err, errno, "lock %s", img);
	int n = loop_find(fd);
	_cleanup_close_ int lfd = -1;
	if (n < 0) {
		lfd = loop_attach(fd, &n);
		if (lfd < 0)
			return wr_error_set(err, -lfd,
					    "%s: attach a loop device", img);
	}
	int m = fs_mount(n, read_only);
	if (m < 0)
		return wr_error_set(err, -m, "%s: mount its filesystem", img);
	if (!read_only) {
		int r = layout_prepare(m);
		if (r < 0) {
			close(m);
			return wr_error_set(err, -r, "%s: prepare upper and work",
					    img);
		}
	}
	return m;
}

int upper_mount_open(const struct sandbox *sb, int store_ns,
		     struct wr_error **err)
{
	if (!sb->upper_image) {
		int fd = idmap_mount_open(sb->upper_real, store_ns,
					  MOUNT_ATTR_NODEV);
		return fd < 0 ? wr_error_set(err, -fd,
					     "--upper %s: idmapped mount",
					     sb->upper_real)
			      : fd;
	}
	_cleanup_close_ int fd = layer_image_mount(sb->upper_real, false, err);
	if (fd < 0)
		return fd;
	int r = idmap_mount_set(fd, store_ns, MOUNT_ATTR_NODEV);
	if (r < 0)
		return wr_error_set(err, -r, "--upper %s: idmapped mount",
				    sb->upper_real);
	return TAKE_FD(fd);
}

int layer_source_open(const char *path, const char *what, uid_t *owner,
		      struct wr_error **err)
{
	const char *given = path;
	char layer[PATH_MAX];
	bool image = false;
	if (sandbox_is_upper_dir(path)) {
		image = layer_image_present(path);
		if (!image) {
			snprintf(layer, sizeof(layer), "%s/upper", path);
			path = layer;
		}
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return wr_error_input(err, errno, "%s %s", what, given);
	if (image) {
		/* upper/ in the image is the store's, as a directory's */
		*owner = WR_STORE_UID;
		_cleanup_close_ int m = layer_image_mount(path, true, err);
		if (m < 0)
			return m;
		int fd = (int)syscall(SYS_open_tree, m, "upper",
				      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
		return fd < 0 ? wr_error_set(err, errno,
					     "%s %s: the image's upper", what,
					     given)
			      : fd;
	}
	*owner = st.st_uid;
	int fd = (int)syscall(SYS_open_tree, AT_FDCWD, path,
			      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	return fd < 0 ? wr_error_set(err, errno, "%s %s: clone", what, given)
		      : fd;
}

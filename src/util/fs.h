/* fs.h - small filesystem helpers with explicit errors (no policy). */
#ifndef WR_UTIL_FS_H
#define WR_UTIL_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <dirent.h>
#include <sys/types.h>

/* mkdir -p; existing directories are fine. Returns 0 or -errno. */
int wr_mkdir_p(const char *path, mode_t mode);
/* rm -rf without following symlinks or crossing mount points.
 * Missing path is success. Returns 0 or -errno. */
int wr_rm_rf(const char *path);
/* Write data to path atomically (temp file + rename): a reader sees the old
 * or the new content, never a mix. With durable, fsync before the rename so
 * the new content also survives a power loss (not needed for runtime state,
 * which a reboot discards anyway). */
int wr_write_file_atomic(const char *path, const void *data, size_t len,
			 mode_t mode, bool durable);
/* Write a short string to an existing file (sysfs/cgroupfs/procfs). */
int wr_write_file(const char *path, const char *text);
/* Read up to max bytes of a file into a new NUL-terminated buffer. */
int wr_read_file(const char *path, size_t max, char **out, size_t *out_len);
/* 1 if path is a mount point, 0 if not, -errno on error. */
/* A secret's file (an API key, a token): its first 64 KiB without the
 * line end and spaces that end it. -EPERM if anyone but its owner may
 * read or write it (mode & 077: chmod 600 it), -errno otherwise. */
int wr_read_key_file(const char *path, char **out);
int wr_is_mount_point(const char *path);
/* cp -a for what a layer needs: directories, regular files and symlinks
 * (others skipped), without following symlinks or crossing mounts. */
int wr_copy_tree(const char *src, const char *dst);
/* The same, skipping every file and directory that is not readable by all
 * users (mode o+r, and o+x for directories): what an unprivileged host
 * user can read, and nothing more. */
int wr_copy_tree_public(const char *src, const char *dst);
/* lchown every entry under path (and path itself). */
int wr_chown_tree(const char *path, uid_t uid, gid_t gid);
/* A directory stream on dirfd's directory, independent of dirfd (the
 * caller keeps and closes dirfd). NULL with errno on failure. */
DIR *wr_opendir_at(int dirfd);
/* Directory of the running executable (from /proc/self/exe). */
char *wr_self_dir(void);

#endif

/* fs.h - small filesystem helpers with explicit errors (no policy). */
#ifndef WR_UTIL_FS_H
#define WR_UTIL_FS_H

#include <stddef.h>
#include <sys/types.h>

/* mkdir -p; existing directories are fine. Returns 0 or -errno. */
int wr_mkdir_p(const char *path, mode_t mode);
/* rm -rf without following symlinks or crossing mount points.
 * Missing path is success. Returns 0 or -errno. */
int wr_rm_rf(const char *path);
/* Write data to path atomically (temp file + fsync + rename). */
int wr_write_file_atomic(const char *path, const void *data, size_t len,
			 mode_t mode);
/* Write a short string to an existing file (sysfs/cgroupfs/procfs). */
int wr_write_file(const char *path, const char *text);
/* Read up to max bytes of a file into a new NUL-terminated buffer. */
int wr_read_file(const char *path, size_t max, char **out, size_t *out_len);
/* 1 if path is a mount point, 0 if not, -errno on error. */
int wr_is_mount_point(const char *path);
/* Directory of the running executable (from /proc/self/exe). */
char *wr_self_dir(void);

#endif

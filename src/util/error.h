/* error.h - errors that carry context up to the boundary that logs them.
 *
 * Library code returns -errno (or NULL) and, where a user needs to know what
 * failed, fills a struct wr_error with the errno and a message. Callers add
 * context with wr_error_wrap() as the error travels up ("create sandbox: mount
 * overlay on /: Invalid argument"). Only the CLI or the daemon prints it. */
#ifndef WR_UTIL_ERROR_H
#define WR_UTIL_ERROR_H

#include <stdbool.h>

struct wr_error {
	int errnum;	/* positive errno, 0 if none applies */
	char *msg;	/* full message including context */
	bool bad_input; /* the caller's input was wrong (CLI: exit 2) */
};

/* Set *err (if err and *err is NULL) and return -errnum (or -EINVAL if 0). */
int wr_error_set(struct wr_error **err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefix the message of *err with "context: "; returns -errnum of *err. */
int wr_error_wrap(struct wr_error **err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* wr_error_set for errors in what the user gave us (options, paths). */
int wr_error_input(struct wr_error **err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Something asked for is not there ("no session s-1", "ref 'x' not found"):
 * errno ENOENT (returns -ENOENT), the message as written - the errno's
 * own text would only say the same again. */
int wr_error_absent(struct wr_error **err, bool bad_input, const char *fmt,
		    ...) __attribute__((format(printf, 3, 4)));
void wr_error_free(struct wr_error *err);
void wr_error_freep(struct wr_error **err);

#endif

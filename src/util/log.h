/* log.h - the server's log: one line per message on stderr, with a level.
 *
 * Every line has one format:
 *
 *     PROGRAM: LEVEL: [MODULE: ]MESSAGE
 *     warren-serve: error: api: GET /v1/sessions: list sessions: ...
 *
 * LEVEL is error, warn, info or debug. A message above the threshold is
 * not written, and its arguments are not evaluated (the check is in the
 * macro, as redis's serverLog does). The threshold is info unless
 * $WARREN_LOG names another level (wr_log_setup). No timestamp: the
 * server runs in the foreground under a service manager, which stamps
 * each line (journald, or `ts` when run by hand).
 *
 * One message is one line: control characters in it (a newline in a
 * name a client sent) are written as \xNN, and a message past
 * WR_LOG_LINE_MAX bytes is cut with "...". Each line is a single write(2),
 * so lines of different threads never interleave. Nothing is allocated:
 * logging an out-of-memory error works.
 *
 * Library code logs only at the boundary where an error is not returned
 * to anyone (a request's 500, a background post given up); everything
 * else returns its error ("log once, at the boundary"). */
#ifndef WR_UTIL_LOG_H
#define WR_UTIL_LOG_H

#include "util/error.h"

#include <stdbool.h>

enum wr_log_level {
	WR_LOG_ERROR,
	WR_LOG_WARN,
	WR_LOG_INFO,
	WR_LOG_DEBUG,
	WR_LOG_LEVEL_MAX,
};

#define WR_LOG_LINE_MAX 2048

/* The threshold: messages at this level or more severe are written. Set
 * by wr_log_setup or wr_log_set_level before any thread starts; read
 * only afterwards. */
extern enum wr_log_level wr_log_threshold;

/* The program's name in every line (default "warren"; the string must
 * outlive the process's logging) and the threshold from $WARREN_LOG
 * (error, warn, info, debug; unset or empty: info). -EINVAL, with err
 * naming the variable and the accepted values, for another value; the
 * threshold is then left as it was. */
int wr_log_setup(const char *program, struct wr_error **err);
/* "error", "warn", "info", "debug" -> *out; -EINVAL for anything else. */
int wr_log_level_parse(const char *name, enum wr_log_level *out);
const char *wr_log_level_name(enum wr_log_level level);
void wr_log_set_level(enum wr_log_level level);

/* Writes one line whatever the threshold (module may be NULL). Use the
 * macros below, which check the threshold first. */
void wr_log_write(enum wr_log_level level, const char *module, const char *fmt,
		  ...) __attribute__((format(printf, 3, 4)));

#define wr_log_enabled(level) ((level) <= wr_log_threshold)
#define wr_log(level, module, ...)                                    \
	do {                                                          \
		if (wr_log_enabled(level))                            \
			wr_log_write((level), (module), __VA_ARGS__); \
	} while (0)

#define wr_log_error(...) wr_log(WR_LOG_ERROR, NULL, __VA_ARGS__)
#define wr_log_warn(...) wr_log(WR_LOG_WARN, NULL, __VA_ARGS__)
#define wr_log_info(...) wr_log(WR_LOG_INFO, NULL, __VA_ARGS__)
#define wr_log_debug(...) wr_log(WR_LOG_DEBUG, NULL, __VA_ARGS__)

#endif

/* log.c - one line per message on stderr (log.h). */
#include "util/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

enum wr_log_level wr_log_threshold = WR_LOG_INFO;
static const char *program = "warren";

static const char *const level_names[WR_LOG_LEVEL_MAX] = {
    [WR_LOG_ERROR] = "error",
    [WR_LOG_WARN] = "warn",
    [WR_LOG_INFO] = "info",
    [WR_LOG_DEBUG] = "debug",
};

int wr_log_level_parse(const char *name, enum wr_log_level *out)
{
	for (int i = 0; name && i < WR_LOG_LEVEL_MAX; i++)
		if (!strcasecmp(name, level_names[i])) {
			*out = (enum wr_log_level)i;
			return 0;
		}
	return -EINVAL;
}

const char *wr_log_level_name(enum wr_log_level level)
{
	return (unsigned)level < WR_LOG_LEVEL_MAX ? level_names[level] : "?";
}

void wr_log_set_level(enum wr_log_level level)
{
	if ((unsigned)level < WR_LOG_LEVEL_MAX)
		wr_log_threshold = level;
}

int wr_log_setup(const char *name, struct wr_error **err)
{
	if (name && *name)
		program = name;
	const char *env = getenv("WARREN_LOG");
	if (!env || !*env)
		return 0;
	enum wr_log_level level;
	if (wr_log_level_parse(env, &level) < 0)
		return wr_error_input(err, 0, /* -EINVAL, no errno text */
				      "WARREN_LOG: unknown level '%.40s' "
				      "(error, warn, info or debug)",
				      env);
	wr_log_threshold = level;
	return 0;
}

/* Appends src to line[*len..max), control characters as \xNN; false when
 * it did not all fit. */
static bool put_escaped(char *line, size_t *len, size_t max, const char *src)
{
	static const char hex[] = "0123456789abcdef";
	for (const unsigned char *s = (const unsigned char *)src; *s; s++) {
		bool control = *s < 0x20 || *s == 0x7f;
		size_t need = control ? 4 : 1;
		if (*len + need > max)
			return false;
		if (control) {
			line[(*len)++] = '\\';
			line[(*len)++] = 'x';
			line[(*len)++] = hex[*s >> 4];
			line[(*len)++] = hex[*s & 0xf];
		} else {
			line[(*len)++] = (char)*s;
		}
	}
	return true;
}

void wr_log_write(enum wr_log_level level, const char *module, const char *fmt,
		  ...)
{
	int saved_errno = errno; /* a caller may log, then look at errno */
	char msg[WR_LOG_LINE_MAX];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		snprintf(msg, sizeof(msg), "(unprintable message: %s)", fmt);

	/* room kept for "...\n" */
	char line[WR_LOG_LINE_MAX + 8];
	const size_t max = WR_LOG_LINE_MAX;
	size_t len = 0;
	bool whole = put_escaped(line, &len, max, program) &&
		     put_escaped(line, &len, max, ": ") &&
		     put_escaped(line, &len, max, wr_log_level_name(level)) &&
		     put_escaped(line, &len, max, ": ") &&
		     (!module || (put_escaped(line, &len, max, module) &&
				  put_escaped(line, &len, max, ": "))) &&
		     put_escaped(line, &len, max, msg) &&
		     (n < 0 || (size_t)n < sizeof(msg));
	if (!whole) {
		memcpy(line + len, "...", 3);
		len += 3;
	}
	line[len++] = '\n';

	/* one write: lines of different threads stay whole */
	for (size_t off = 0; off < len;) {
		ssize_t w = write(STDERR_FILENO, line + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break; /* nowhere to say it */
		off += (size_t)w;
	}
	errno = saved_errno;
}

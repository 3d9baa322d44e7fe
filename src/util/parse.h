/* parse.h - parsers for the values users type on command lines and in
 * configuration: sizes ("512M"), durations ("90s"), counts, names.
 * All reject trailing garbage, overflow and empty input with -EINVAL/-ERANGE.
 */
#ifndef WR_UTIL_PARSE_H
#define WR_UTIL_PARSE_H

#include <stdint.h>

/* "4096", "512K", "1.5G", "2GiB", "10m" (binary units; case-insensitive). */
int wr_parse_size(const char *text, uint64_t *out_bytes);
/* "90", "90s", "1500ms", "5m", "2h", "1h30m". Bare numbers are seconds. */
int wr_parse_duration(const char *text, uint64_t *out_ms);
/* Decimal CPU count: "2", "0.5" -> millicpus (2000, 500). */
int wr_parse_cpus(const char *text, uint64_t *out_millicpus);
/* Unsigned decimal integer within [min, max]. */
int wr_parse_uint(const char *text, uint64_t min, uint64_t max, uint64_t *out);
/* A name for a sandbox/session: [A-Za-z0-9][A-Za-z0-9_.-]{0,62}. */
int wr_validate_name(const char *name);

#endif

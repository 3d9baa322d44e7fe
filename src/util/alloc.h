/* alloc.h - the one allocation path.
 *
 * Every heap allocation in Warren goes through these wrappers so that a test
 * build can fail the Nth allocation (WARREN_ALLOC_FAIL_AT=N) and check that
 * every caller handles NULL. They return NULL with errno = ENOMEM on failure.
 */
#ifndef WR_UTIL_ALLOC_H
#define WR_UTIL_ALLOC_H

#include <stdarg.h>
#include <stddef.h>

void *wr_malloc(size_t size);
void *wr_calloc(size_t count, size_t size);
void *wr_realloc(void *ptr, size_t size);
char *wr_strdup(const char *s);
char *wr_strndup(const char *s, size_t n);
/* printf into a new string; NULL on failure. */
char *wr_vasprintf(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));
char *wr_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Test hook: make the Nth allocation from now fail (0 disables). */
void wr_alloc_fail_at(unsigned long n);

#endif

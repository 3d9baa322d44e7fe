/* alloc.c - allocation wrappers with a failure-injection mode. */
#include "util/alloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long fail_at;	/* 0: never fail */
static unsigned long alloc_seq; /* allocations since fail_at was armed */
static int env_checked;

void wr_alloc_fail_at(unsigned long n)
{
	fail_at = n;
	alloc_seq = 0;
	env_checked = 1;
}

static int should_fail(void)
{
	if (!env_checked) {
		const char *v = getenv("WARREN_ALLOC_FAIL_AT");
		env_checked = 1;
		if (v && *v)
			fail_at = strtoul(v, NULL, 10);
	}
	if (fail_at == 0)
		return 0;
	if (++alloc_seq == fail_at) {
		errno = ENOMEM;
		return 1;
	}
	return 0;
}

void *wr_malloc(size_t size)
{
	if (should_fail())
		return NULL;
	return malloc(size ? size : 1);
}

void *wr_calloc(size_t count, size_t size)
{
	if (should_fail())
		return NULL;
	return calloc(count ? count : 1, size ? size : 1);
}

void *wr_realloc(void *ptr, size_t size)
{
	if (should_fail())
		return NULL;
	return realloc(ptr, size ? size : 1);
}

char *wr_strndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *copy = wr_malloc(len + 1);
	if (!copy)
		return NULL;
	memcpy(copy, s, len);
	copy[len] = '\0';
	return copy;
}

char *wr_strdup(const char *s)
{
	return wr_strndup(s, strlen(s));
}

char *wr_vasprintf(const char *fmt, va_list ap)
{
	va_list copy;
	va_copy(copy, ap);
	int len = vsnprintf(NULL, 0, fmt, copy);
	va_end(copy);
	if (len < 0)
		return NULL;
	char *out = wr_malloc((size_t)len + 1);
	if (out)
		vsnprintf(out, (size_t)len + 1, fmt, ap);
	return out;
}

char *wr_asprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *out = wr_vasprintf(fmt, ap);
	va_end(ap);
	return out;
}

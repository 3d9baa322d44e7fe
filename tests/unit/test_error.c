/* test_error.c - context-carrying errors (wr_error_*) and the allocation
 * wrappers they rely on (wr_malloc & co, wr_asprintf, wr_alloc_fail_at). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/alloc.h"
#include "util/error.h"

static int reset_alloc(void **state)
{
	(void)state;
	wr_alloc_fail_at(0);
	return 0;
}

/* ---- wr_error_set --------------------------------------------------------- */

static void test_set_appends_errno_text(void **state)
{
	(void)state;
	struct wr_error *err = NULL;
	assert_int_equal(wr_error_set(&err, ENOENT, "open %s", "/etc/x"), -ENOENT);
	assert_non_null(err);
	assert_int_equal(err->errnum, ENOENT);
	char want[256];
	snprintf(want, sizeof(want), "open /etc/x: %s", strerror(ENOENT));
	assert_string_equal(err->msg, want);
	assert_string_equal(err->msg, "open /etc/x: No such file or directory");
	wr_error_free(err);
}

static void test_set_formats_arguments(void **state)
{
	(void)state;
	struct wr_error *err = NULL;
	assert_int_equal(wr_error_set(&err, EACCES, "%s %d %u %c %5.2f %%", "s",
				      -42, 7u, 'c', 1.5),
			 -EACCES);
	assert_string_equal(err->msg, "s -42 7 c  1.50 %: Permission denied");
	wr_error_free(err);
}

static void test_set_without_errno(void **state)
{
	(void)state;
	struct wr_error *err = NULL;
	assert_int_equal(wr_error_set(&err, 0, "bad value %d", 42), -EINVAL);
	assert_non_null(err);
	assert_int_equal(err->errnum, 0);
	assert_string_equal(err->msg, "bad value 42");
	wr_error_free(err);
}

static void test_set_with_null_err_pointer(void **state)
{
	(void)state;
	assert_int_equal(wr_error_set(NULL, EPERM, "ignored %s", "x"), -EPERM);
	assert_int_equal(wr_error_set(NULL, 0, "ignored"), -EINVAL);
}

/* The first error wins: a later set does not overwrite (nor leak) it. */
static void test_set_keeps_first_error(void **state)
{
	(void)state;
	struct wr_error *err = NULL;
	wr_error_set(&err, ENOENT, "first");
	struct wr_error *first = err;
	assert_int_equal(wr_error_set(&err, EIO, "second"), -EIO);
	assert_ptr_equal(err, first);
	assert_int_equal(err->errnum, ENOENT);
	assert_string_equal(err->msg, "first: No such file or directory");
	wr_error_free(err);
}

static void test_set_long_message(void **state)
{
	(void)state;
	size_t n = 20000;
	char *big = malloc(n + 1);
	assert_non_null(big);
	memset(big, 'x', n);
	big[n] = '\0';
	struct wr_error *err = NULL;
	wr_error_set(&err, E2BIG, "%s", big);
	assert_non_null(err);
	assert_int_equal(strncmp(err->msg, big, n), 0);
	assert_string_equal(err->msg + n, ": Argument list too long");
	wr_error_free(err);
	free(big);
}

/* ---- wr_error_wrap ------------------------------------------------------- */

static void test_wrap_prefixes_context(void **state)
{
	(void)state;
	struct wr_error *err = NULL;
	wr_error_set(&err, EINVAL, "mount overlay on %s", "/");
	assert_int_equal(wr_error_wrap(&err, "create sandbox %s", "box1"), -EINVAL);
	assert_string_equal(err->msg,
			    "create sandbox box1: mount overlay on /: Invalid argument");
	assert_int_equal(wr_error_wrap(&err, "warren"), -EINVAL);
	assert_string_equal(
		err->msg,
		"warren: create sandbox box1: mount overlay on /: Invalid argument");
	assert_int_equal(err->errnum, EINVAL);
	wr_error_free(err);
}

static void test_wrap_returns_errnum_of_error(void **state)
{
	(void)state;
	struct wr_error *err = NULL;
	wr_error_set(&err, ENOSPC, "write");
	assert_int_equal(wr_error_wrap(&err, "save"), -ENOSPC);
	wr_error_free(err);
	err = NULL;
	wr_error_set(&err, 0, "no errno");
	assert_int_equal(wr_error_wrap(&err, "ctx"), -EINVAL);
	assert_string_equal(err->msg, "ctx: no errno");
	wr_error_free(err);
}

static void test_wrap_without_error(void **state)
{
	(void)state;
	struct wr_error *err = NULL;
	assert_int_equal(wr_error_wrap(&err, "ctx"), -EINVAL);
	assert_null(err);
	assert_int_equal(wr_error_wrap(NULL, "ctx"), -EINVAL);
}

/* ---- free ---------------------------------------------------------------- */

static void test_free_null_and_freep(void **state)
{
	(void)state;
	wr_error_free(NULL);
	struct wr_error *err = NULL;
	wr_error_freep(&err);
	assert_null(err);
	wr_error_set(&err, EIO, "x");
	wr_error_freep(&err);
	assert_null(err);
}

/* ---- out of memory -------------------------------------------------------- */

/* Failing each allocation of wr_error_set in turn: the caller always gets
 * the right return value and a usable error (the static fallback while
 * allocations fail), never NULL or a crash. */
static void test_set_falls_back_on_alloc_failure_at_every_n(void **state)
{
	(void)state;
	int full = 0, fallbacks = 0;
	for (unsigned long n = 1; n < 100 && !full; n++) {
		struct wr_error *err = NULL;
		wr_alloc_fail_at(n);
		int r = wr_error_set(&err, EACCES, "open %s", "/x");
		wr_alloc_fail_at(0);
		assert_int_equal(r, -EACCES);
		assert_non_null(err);
		assert_non_null(err->msg);
		if (strcmp(err->msg, "open /x: Permission denied") == 0) {
			assert_int_equal(err->errnum, EACCES);
			full = 1;
		} else {
			assert_string_equal(err->msg, "out of memory");
			assert_int_equal(err->errnum, ENOMEM);
			fallbacks++;
		}
		wr_error_free(err);
	}
	assert_true(full);
	assert_true(fallbacks >= 2);
}

static void test_set_without_errno_on_alloc_failure_at_every_n(void **state)
{
	(void)state;
	int full = 0;
	for (unsigned long n = 1; n < 100 && !full; n++) {
		struct wr_error *err = NULL;
		wr_alloc_fail_at(n);
		int r = wr_error_set(&err, 0, "plain %d", 1);
		wr_alloc_fail_at(0);
		assert_int_equal(r, -EINVAL);
		assert_non_null(err);
		if (strcmp(err->msg, "plain 1") == 0)
			full = 1;
		else
			assert_string_equal(err->msg, "out of memory");
		wr_error_free(err);
	}
	assert_true(full);
}

/* The fallback error is static: wrapping leaves it alone, freeing it is a
 * no-op, and it can be handed out any number of times. */
static void test_oom_fallback_is_static(void **state)
{
	(void)state;
	struct wr_error *a = NULL, *b = NULL;
	wr_alloc_fail_at(1);
	wr_error_set(&a, EIO, "a");
	wr_alloc_fail_at(1);
	wr_error_set(&b, EIO, "b");
	wr_alloc_fail_at(0);
	assert_non_null(a);
	assert_ptr_equal(a, b);
	assert_int_equal(wr_error_wrap(&a, "context %d", 1), -ENOMEM);
	assert_string_equal(a->msg, "out of memory");
	wr_error_free(a);
	wr_error_freep(&b);
	assert_null(b);
	assert_string_equal(a->msg, "out of memory");
	assert_int_equal(a->errnum, ENOMEM);
}

/* A wrap that cannot allocate keeps the error as it was. */
static void test_wrap_on_alloc_failure_at_every_n(void **state)
{
	(void)state;
	int full = 0;
	for (unsigned long n = 1; n < 100 && !full; n++) {
		struct wr_error *err = NULL;
		wr_error_set(&err, ENOENT, "inner");
		wr_alloc_fail_at(n);
		int r = wr_error_wrap(&err, "outer %s", "ctx");
		wr_alloc_fail_at(0);
		assert_int_equal(r, -ENOENT);
		assert_non_null(err);
		if (strcmp(err->msg, "outer ctx: inner: No such file or directory") ==
		    0)
			full = 1;
		else
			assert_string_equal(err->msg,
					    "inner: No such file or directory");
		assert_int_equal(err->errnum, ENOENT);
		wr_error_free(err);
	}
	assert_true(full);
}

/* ---- allocation wrappers ------------------------------------------------- */

static void test_alloc_fail_at_fails_exactly_the_nth(void **state)
{
	(void)state;
	wr_alloc_fail_at(3);
	void *a = wr_malloc(8);
	void *b = wr_calloc(2, 8);
	errno = 0;
	void *c = wr_malloc(8);
	int saved = errno;
	void *d = wr_malloc(8);
	wr_alloc_fail_at(0);
	assert_non_null(a);
	assert_non_null(b);
	assert_null(c);
	assert_int_equal(saved, ENOMEM);
	assert_non_null(d); /* one failure, then back to normal */
	free(a);
	free(b);
	free(d);
}

static void test_alloc_fail_at_zero_disables(void **state)
{
	(void)state;
	wr_alloc_fail_at(1);
	wr_alloc_fail_at(0);
	for (int i = 0; i < 1000; i++) {
		void *p = wr_malloc(1);
		assert_non_null(p);
		free(p);
	}
}

static void test_alloc_wrappers_fail_cleanly(void **state)
{
	(void)state;
	wr_alloc_fail_at(1);
	assert_null(wr_malloc(16));
	wr_alloc_fail_at(1);
	assert_null(wr_calloc(4, 4));
	wr_alloc_fail_at(1);
	assert_null(wr_strdup("abc"));
	wr_alloc_fail_at(1);
	assert_null(wr_strndup("abc", 2));
	wr_alloc_fail_at(1);
	assert_null(wr_asprintf("%d", 5));
	/* a failed realloc leaves the old block valid */
	char *p = wr_malloc(4);
	assert_non_null(p);
	memcpy(p, "abc", 4);
	wr_alloc_fail_at(1);
	assert_null(wr_realloc(p, 1 << 20));
	wr_alloc_fail_at(0);
	assert_string_equal(p, "abc");
	free(p);
}

static void test_alloc_zero_sizes_return_memory(void **state)
{
	(void)state;
	void *a = wr_malloc(0), *b = wr_calloc(0, 8), *c = wr_calloc(8, 0);
	void *d = wr_realloc(NULL, 0);
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	assert_non_null(d);
	free(a);
	free(b);
	free(c);
	free(d);
}

static void test_strdup_and_strndup(void **state)
{
	(void)state;
	char *a = wr_strdup("");
	char *b = wr_strdup("hello");
	char *c = wr_strndup("hello", 3);
	char *d = wr_strndup("hi", 100);
	assert_string_equal(a, "");
	assert_string_equal(b, "hello");
	assert_string_equal(c, "hel");
	assert_string_equal(d, "hi");
	free(a);
	free(b);
	free(c);
	free(d);
}

static void test_asprintf_formats(void **state)
{
	(void)state;
	char *s = wr_asprintf("%s-%d-%05.1f", "x", 12, 3.25);
	assert_string_equal(s, "x-12-003.2");
	free(s);
	s = wr_asprintf("%s", "");
	assert_string_equal(s, "");
	free(s);
	char big[5000];
	memset(big, 'y', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	s = wr_asprintf("[%s]", big);
	assert_int_equal(strlen(s), sizeof(big) + 1);
	assert_true(s[0] == '[' && s[sizeof(big)] == ']');
	free(s);
}

static void test_asprintf_alloc_failure_at_every_n(void **state)
{
	(void)state;
	int ok = 0;
	for (unsigned long n = 1; n < 100 && !ok; n++) {
		wr_alloc_fail_at(n);
		char *s = wr_asprintf("%s=%d", "k", 1);
		wr_alloc_fail_at(0);
		if (s) {
			assert_string_equal(s, "k=1");
			free(s);
			ok = 1;
		}
	}
	assert_true(ok);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, reset_alloc, reset_alloc)
	const struct CMUnitTest tests[] = {
		T(test_set_appends_errno_text),
		T(test_set_formats_arguments),
		T(test_set_without_errno),
		T(test_set_with_null_err_pointer),
		T(test_set_keeps_first_error),
		T(test_set_long_message),
		T(test_wrap_prefixes_context),
		T(test_wrap_returns_errnum_of_error),
		T(test_wrap_without_error),
		T(test_free_null_and_freep),
		T(test_set_falls_back_on_alloc_failure_at_every_n),
		T(test_set_without_errno_on_alloc_failure_at_every_n),
		T(test_oom_fallback_is_static),
		T(test_wrap_on_alloc_failure_at_every_n),
		T(test_alloc_fail_at_fails_exactly_the_nth),
		T(test_alloc_fail_at_zero_disables),
		T(test_alloc_wrappers_fail_cleanly),
		T(test_alloc_zero_sizes_return_memory),
		T(test_strdup_and_strndup),
		T(test_asprintf_formats),
		T(test_asprintf_alloc_failure_at_every_n),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}

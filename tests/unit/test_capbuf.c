/* test_capbuf.c - util/capbuf.h: appends up to the cap and not a byte
 * past it, the failure remembered, NUL termination, take and free, the
 * libcurl write callback, allocation failures at every step. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/alloc.h"
#include "util/capbuf.h"

static int test_teardown(void **state)
{
	(void)state;
	wr_alloc_fail_at(0);
	return 0;
}

static void test_append_up_to_the_cap(void **state)
{
	(void)state;
	struct capbuf b = CAPBUF_INIT(10);
	assert_null(b.data);
	assert_int_equal(capbuf_append(&b, "hello", 5), 0);
	assert_string_equal(b.data, "hello");
	assert_int_equal(capbuf_puts(&b, "world"), 0); /* exactly the cap */
	assert_int_equal(b.len, 10);
	assert_string_equal(b.data, "helloworld");
	assert_true(b.size <= 11); /* never allocated past the cap */
	assert_false(capbuf_failed(&b));
	/* one byte more: refused, nothing of it kept */
	assert_int_equal(capbuf_append(&b, "!", 1), -E2BIG);
	assert_true(b.overflow);
	assert_false(b.nomem);
	assert_string_equal(b.data, "helloworld");
	/* remembered: even an append that would fit fails */
	assert_int_equal(capbuf_append(&b, "", 0), -E2BIG);
	assert_true(capbuf_failed(&b));
	capbuf_free(&b);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.max, 10); /* kept */
	assert_false(capbuf_failed(&b));
	assert_int_equal(capbuf_puts(&b, "again"), 0);
	assert_string_equal(b.data, "again");
	capbuf_free(&b);
	capbuf_free(&b); /* twice is fine */
}

static void test_one_append_past_the_cap(void **state)
{
	(void)state;
	struct capbuf b = CAPBUF_INIT(4);
	assert_int_equal(capbuf_append(&b, "12345", 5), -E2BIG);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	struct capbuf none = CAPBUF_INIT(0);
	assert_int_equal(capbuf_append(&none, "", 0), 0);
	assert_string_equal(none.data, "");
	assert_int_equal(capbuf_append(&none, "x", 1), -E2BIG);
	capbuf_free(&none);
	struct capbuf big = CAPBUF_INIT(SIZE_MAX);
	assert_int_equal(capbuf_append(&big, "ab", 2), 0);
	assert_int_equal(capbuf_append(&big, "x", SIZE_MAX - 2), -E2BIG);
	assert_string_equal(big.data, "ab");
	capbuf_free(&big);
}

static void test_grows_and_keeps_bytes(void **state)
{
	(void)state;
	struct capbuf b = CAPBUF_INIT(1 << 20);
	char chunk[1000];
	for (size_t i = 0; i < sizeof(chunk); i++)
		chunk[i] = (char)(i % 251);
	for (int i = 0; i < 300; i++)
		assert_int_equal(capbuf_append(&b, chunk, sizeof(chunk)), 0);
	assert_int_equal(b.len, 300 * sizeof(chunk));
	assert_int_equal(b.data[b.len], '\0');
	for (int i = 0; i < 300; i++)
		assert_memory_equal(b.data + i * sizeof(chunk), chunk,
				    sizeof(chunk));
	/* NULs inside are data */
	struct capbuf z = CAPBUF_INIT(16);
	assert_int_equal(capbuf_append(&z, "a\0b", 3), 0);
	assert_int_equal(z.len, 3);
	assert_memory_equal(z.data, "a\0b", 4);
	capbuf_free(&z);
	capbuf_free(&b);
}

static void test_take(void **state)
{
	(void)state;
	struct capbuf b = CAPBUF_INIT(8);
	char *s = capbuf_take(&b); /* nothing appended: "" */
	assert_non_null(s);
	assert_string_equal(s, "");
	free(s);
	assert_int_equal(capbuf_puts(&b, "abc"), 0);
	s = capbuf_take(&b);
	assert_string_equal(s, "abc");
	free(s);
	assert_null(b.data);
	assert_int_equal(b.len, 0);
	assert_int_equal(b.max, 8);
	assert_int_equal(capbuf_puts(&b, "123456789"), -E2BIG);
	assert_null(capbuf_take(&b)); /* failed: NULL, and freed */
	assert_false(capbuf_failed(&b));
}

static void test_curl_write(void **state)
{
	(void)state;
	struct capbuf b = CAPBUF_INIT(6);
	char data[] = "abcdefgh";
	assert_int_equal(capbuf_curl_write(data, 1, 4, &b), 4);
	assert_int_equal(capbuf_curl_write(data, 1, 2, &b), 2);
	assert_string_equal(b.data, "abcdab");
	/* past the cap: 0 stops the transfer */
	assert_int_equal(capbuf_curl_write(data, 1, 1, &b), 0);
	assert_true(b.overflow);
	capbuf_free(&b);
}

static void test_alloc_failure_at_every_n(void **state)
{
	(void)state;
	int failures = 0;
	for (unsigned long n = 1; n < 20; n++) {
		struct capbuf b = CAPBUF_INIT(1 << 16);
		wr_alloc_fail_at(n);
		int r = 0;
		for (int i = 0; i < 40 && r == 0; i++)
			r = capbuf_puts(&b, "0123456789abcdef0123456789");
		wr_alloc_fail_at(0);
		if (r < 0) {
			failures++;
			assert_int_equal(r, -ENOMEM);
			assert_true(b.nomem);
			assert_false(b.overflow);
			/* what was there is intact */
			for (size_t i = 0; i < b.len; i++)
				assert_int_equal(
				    b.data[i],
				    "0123456789abcdef0123456789"[i % 26]);
			assert_int_equal(capbuf_puts(&b, "x"), -ENOMEM);
		}
		capbuf_free(&b);
	}
	assert_true(failures >= 3);
}

int main(void)
{
#define T(f) cmocka_unit_test_teardown(f, test_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_append_up_to_the_cap),
	    T(test_one_append_past_the_cap),
	    T(test_grows_and_keeps_bytes),
	    T(test_take),
	    T(test_curl_write),
	    T(test_alloc_failure_at_every_n),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}

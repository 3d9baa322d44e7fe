/* test_parse.c - wr_parse_size, wr_parse_duration, wr_parse_cpus,
 * wr_parse_uint and wr_validate_name: valid input, invalid input, overflow
 * and the boundaries on both sides of every limit. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "util/parse.h"
#include "util/url.h"

#define SENTINEL 0x5a5a5a5a5a5a5a5aULL
#define KIB (1ULL << 10)
#define MIB (1ULL << 20)
#define GIB (1ULL << 30)
#define TIB (1ULL << 40)

typedef int (*parse_fn)(const char *, uint64_t *);

static int parse_uint_any(const char *text, uint64_t *out)
{
	return wr_parse_uint(text, 0, UINT64_MAX, out);
}

/* Expects fn(in) to succeed with `want`. */
static void expect_ok(parse_fn fn, const char *what, const char *in,
		      uint64_t want)
{
	uint64_t out = SENTINEL;
	int r = fn(in, &out);
	if (r != 0 || out != want)
		fail_msg("%s(\"%s\") = %d (%s), value %llu; want 0, value %llu",
			 what, in, r, r < 0 ? strerror(-r) : "ok",
			 (unsigned long long)out, (unsigned long long)want);
}

/* Expects fn(in) to fail with -err and to leave the output untouched. */
static void expect_err(parse_fn fn, const char *what, const char *in, int err)
{
	uint64_t out = SENTINEL;
	int r = fn(in, &out);
	if (r != -err)
		fail_msg("%s(%s%s%s) = %d, value %llu; want %d (%s)", what,
			 in ? "\"" : "", in ? in : "NULL", in ? "\"" : "", r,
			 (unsigned long long)out, -err, strerror(err));
	if (out != SENTINEL)
		fail_msg("%s(\"%s\") failed but wrote the output (%llu)", what,
			 in ? in : "NULL", (unsigned long long)out);
}

/* ---- wr_parse_size ---------------------------------------------------- */

static void test_size_accepts_plain_bytes(void **state)
{
	(void)state;
	expect_ok(wr_parse_size, "size", "0", 0);
	expect_ok(wr_parse_size, "size", "1", 1);
	expect_ok(wr_parse_size, "size", "4096", 4096);
	expect_ok(wr_parse_size, "size", "000123", 123);
	expect_ok(wr_parse_size, "size", "1b", 1);
	expect_ok(wr_parse_size, "size", "100B", 100);
}

static void test_size_accepts_units(void **state)
{
	(void)state;
	expect_ok(wr_parse_size, "size", "512K", 512 * KIB);
	expect_ok(wr_parse_size, "size", "1K", KIB);
	expect_ok(wr_parse_size, "size", "10m", 10 * MIB);
	expect_ok(wr_parse_size, "size", "512M", 512 * MIB);
	expect_ok(wr_parse_size, "size", "3G", 3 * GIB);
	expect_ok(wr_parse_size, "size", "2T", 2 * TIB);
	expect_ok(wr_parse_size, "size", "0K", 0);
}

static void test_size_accepts_unit_spellings_any_case(void **state)
{
	(void)state;
	static const char *const two_gib[] = {
		"2G", "2g", "2GB", "2gb", "2Gb", "2gB", "2GiB", "2gib", "2GIB", "2Gib",
	};
	for (size_t i = 0; i < sizeof(two_gib) / sizeof(two_gib[0]); i++)
		expect_ok(wr_parse_size, "size", two_gib[i], 2 * GIB);
	expect_ok(wr_parse_size, "size", "1KiB", KIB);
	expect_ok(wr_parse_size, "size", "1kb", KIB);
	expect_ok(wr_parse_size, "size", "1MiB", MIB);
	expect_ok(wr_parse_size, "size", "1TiB", TIB);
}

/* Fractions are exact to the byte (value * unit, rounded down). */
static void test_size_accepts_fractions(void **state)
{
	(void)state;
	expect_ok(wr_parse_size, "size", "0.5K", 512);
	expect_ok(wr_parse_size, "size", "1.5K", 1536);
	expect_ok(wr_parse_size, "size", "1.5M", 1572864);
	expect_ok(wr_parse_size, "size", "1.5G", 1610612736);
	expect_ok(wr_parse_size, "size", "1.5GiB", 1610612736);
	expect_ok(wr_parse_size, "size", "2.25T", 2473901162496ULL);
	expect_ok(wr_parse_size, "size", "0.1K", 102);
	expect_ok(wr_parse_size, "size", ".5K", 512);
	expect_ok(wr_parse_size, "size", "1.0G", GIB);
}

static void test_size_rejects_empty_and_null(void **state)
{
	(void)state;
	expect_err(wr_parse_size, "size", NULL, EINVAL);
	expect_err(wr_parse_size, "size", "", EINVAL);
}

static void test_size_rejects_garbage(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"K", "G", "KiB", "b", ".", ".K", "abc", "1X", "1E", "1P", "1KK",
		"1Ki", "1KiBs", "1KBB", "1Bi", "1BiB", "1BB", "1i", " 1", "1 ",
		"1 K", "\t1", "1\n", "-1", "+1", "-1K", "1.2.3", "1..5K", "1e3",
		"0x10", "1,5G", "1_000", "K1", "1K1", "1G ", "1\xc2\xa0K",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_err(wr_parse_size, "size", bad[i], EINVAL);
}

static void test_size_rejects_overflow(void **state)
{
	(void)state;
	expect_err(wr_parse_size, "size", "16777216T", ERANGE);  /* 2^64 */
	expect_err(wr_parse_size, "size", "17179869184G", ERANGE); /* 2^64 */
	expect_err(wr_parse_size, "size", "18014398509481984K", ERANGE);
	expect_err(wr_parse_size, "size", "99999999999999999999", ERANGE);
	expect_err(wr_parse_size, "size", "99999999999999999999K", ERANGE);
	expect_err(wr_parse_size, "size",
		   "1000000000000000000000000000000000000000", ERANGE);
	expect_err(wr_parse_size, "size", "9999999999999999999.5T", ERANGE);
}

static void test_size_largest_values_fit(void **state)
{
	(void)state;
	expect_ok(wr_parse_size, "size", "16777215T", 18446742974197923840ULL);
	expect_ok(wr_parse_size, "size", "18014398509481983K",
		  18446744073709550592ULL);
	expect_ok(wr_parse_size, "size", "17179869183G", 17179869183ULL * GIB);
}

/* ---- wr_parse_duration ------------------------------------------------ */

static void test_duration_bare_number_is_seconds(void **state)
{
	(void)state;
	expect_ok(wr_parse_duration, "duration", "0", 0);
	expect_ok(wr_parse_duration, "duration", "1", 1000);
	expect_ok(wr_parse_duration, "duration", "90", 90000);
	expect_ok(wr_parse_duration, "duration", "1.5", 1500);
	expect_ok(wr_parse_duration, "duration", "0.001", 1);
}

static void test_duration_accepts_units(void **state)
{
	(void)state;
	expect_ok(wr_parse_duration, "duration", "90s", 90000);
	expect_ok(wr_parse_duration, "duration", "1500ms", 1500);
	expect_ok(wr_parse_duration, "duration", "0ms", 0);
	expect_ok(wr_parse_duration, "duration", "5m", 300000);
	expect_ok(wr_parse_duration, "duration", "2h", 7200000);
	expect_ok(wr_parse_duration, "duration", "1d", 86400000);
	expect_ok(wr_parse_duration, "duration", "0.5s", 500);
	expect_ok(wr_parse_duration, "duration", "1.5h", 5400000);
	expect_ok(wr_parse_duration, "duration", "0.25m", 15000);
	expect_ok(wr_parse_duration, "duration", "0.5d", 43200000);
}

static void test_duration_accepts_compound(void **state)
{
	(void)state;
	expect_ok(wr_parse_duration, "duration", "1h30m", 5400000);
	expect_ok(wr_parse_duration, "duration", "1m30s", 90000);
	expect_ok(wr_parse_duration, "duration", "1d2h3m4s5ms",
		  86400000ULL + 2 * 3600000 + 3 * 60000 + 4000 + 5);
	expect_ok(wr_parse_duration, "duration", "2m500ms", 120500);
	expect_ok(wr_parse_duration, "duration", "1s1s", 2000);
}

static void test_duration_rejects_empty_and_null(void **state)
{
	(void)state;
	expect_err(wr_parse_duration, "duration", NULL, EINVAL);
	expect_err(wr_parse_duration, "duration", "", EINVAL);
}

static void test_duration_rejects_garbage(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"s", "ms", "m", "h", "d", ".", ".s", "x", "1x", "1y", "1w",
		"1h30", "1m30", "1sec", "1min", "1hh", "1msm", "1 s", " 1s", "1s ",
		"1h 30m", "-1", "-1s", "+1s", "1e3", "0x10", "1,5s", "1..5s",
		"1.2.3s", "1s-", "1\n", "h1",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_err(wr_parse_duration, "duration", bad[i], EINVAL);
}

static void test_duration_rejects_overflow(void **state)
{
	(void)state;
	/* 213503982334 days is the most that fits in uint64 milliseconds */
	expect_ok(wr_parse_duration, "duration", "213503982334d",
		  18446744073657600000ULL);
	expect_err(wr_parse_duration, "duration", "213503982335d", ERANGE);
	/* the sum of the parts overflows, each part alone fits */
	expect_ok(wr_parse_duration, "duration", "213503982334d51951615ms",
		  UINT64_MAX);
	expect_err(wr_parse_duration, "duration", "213503982334d51951616ms",
		   ERANGE);
	expect_err(wr_parse_duration, "duration", "213503982334d1d", ERANGE);
	expect_err(wr_parse_duration, "duration",
		   "100000000000d100000000000d100000000000d", ERANGE);
	expect_err(wr_parse_duration, "duration", "99999999999999999999", ERANGE);
	expect_err(wr_parse_duration, "duration", "99999999999999999999ms",
		   ERANGE);
	expect_err(wr_parse_duration, "duration", "9999999999999999h", ERANGE);
}

/* ---- wr_parse_cpus ------------------------------------------------------ */

static void test_cpus_accepts_whole_and_fractional(void **state)
{
	(void)state;
	expect_ok(wr_parse_cpus, "cpus", "1", 1000);
	expect_ok(wr_parse_cpus, "cpus", "2", 2000);
	expect_ok(wr_parse_cpus, "cpus", "0.5", 500);
	expect_ok(wr_parse_cpus, "cpus", ".5", 500);
	expect_ok(wr_parse_cpus, "cpus", "1.25", 1250);
	expect_ok(wr_parse_cpus, "cpus", "0.001", 1);
	expect_ok(wr_parse_cpus, "cpus", "2.0", 2000);
	expect_ok(wr_parse_cpus, "cpus", "02", 2000);
}

static void test_cpus_boundaries(void **state)
{
	(void)state;
	expect_ok(wr_parse_cpus, "cpus", "1024", 1024000);
	expect_ok(wr_parse_cpus, "cpus", "1024.000", 1024000);
	expect_ok(wr_parse_cpus, "cpus", "1023.999", 1023999);
	expect_err(wr_parse_cpus, "cpus", "1024.001", ERANGE);
	expect_err(wr_parse_cpus, "cpus", "1025", ERANGE);
	expect_err(wr_parse_cpus, "cpus", "0", ERANGE);
	expect_err(wr_parse_cpus, "cpus", "0.0", ERANGE);
	expect_err(wr_parse_cpus, "cpus", "0.000", ERANGE);
	expect_err(wr_parse_cpus, "cpus", "99999999999999999999", ERANGE);
}

static void test_cpus_below_one_millicpu_is_rejected(void **state)
{
	(void)state;
	uint64_t out = SENTINEL;
	assert_true(wr_parse_cpus("0.0004", &out) < 0);
	assert_true(out == SENTINEL);
}

static void test_cpus_rejects_garbage(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", ".", "-1", "+1", "1c", "2cpu", "1,5", "1.2.3", "abc", " 1",
		"1 ", "0x1", "1e2", "inf", "nan", "1m", "1.5.",
	};
	expect_err(wr_parse_cpus, "cpus", NULL, EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_err(wr_parse_cpus, "cpus", bad[i], EINVAL);
}

/* ---- wr_parse_uint ------------------------------------------------------ */

static void expect_uint(const char *in, uint64_t min, uint64_t max, int err,
			uint64_t want)
{
	uint64_t out = SENTINEL;
	int r = wr_parse_uint(in, min, max, &out);
	if (r != -err || (err == 0 && out != want) || (err && out != SENTINEL))
		fail_msg("wr_parse_uint(\"%s\", %llu, %llu) = %d, value %llu; "
			 "want %d, value %llu",
			 in ? in : "NULL", (unsigned long long)min,
			 (unsigned long long)max, r, (unsigned long long)out,
			 -err, (unsigned long long)(err ? SENTINEL : want));
}

static void test_uint_accepts_in_range(void **state)
{
	(void)state;
	expect_uint("0", 0, 10, 0, 0);
	expect_uint("42", 1, 100, 0, 42);
	expect_uint("007", 0, 10, 0, 7);
	expect_uint("4194304", 1, 4194304, 0, 4194304);
	expect_uint("1", 1, 4194304, 0, 1);
}

static void test_uint_range_bounds_are_inclusive(void **state)
{
	(void)state;
	expect_uint("10", 10, 20, 0, 10);
	expect_uint("20", 10, 20, 0, 20);
	expect_uint("9", 10, 20, ERANGE, 0);
	expect_uint("21", 10, 20, ERANGE, 0);
	expect_uint("0", 1, 4194304, ERANGE, 0);
	expect_uint("4194305", 1, 4194304, ERANGE, 0);
	expect_uint("5", 5, 5, 0, 5);
	expect_uint("4", 5, 5, ERANGE, 0);
	expect_uint("6", 5, 5, ERANGE, 0);
}

static void test_uint_rejects_garbage(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"", "-1", "+1", " 1", "1 ", "1.0", "1.", ".1", "1e3", "0x10",
		"abc", "1a", "a1", "1,000", "1_000", "\t1", "1\n", "\xd9\xa1",
	};
	expect_uint(NULL, 0, 10, EINVAL, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_uint(bad[i], 0, UINT64_MAX, EINVAL, 0);
}

static void test_uint_rejects_overflow(void **state)
{
	(void)state;
	expect_uint("18446744073709551616", 0, UINT64_MAX, ERANGE, 0);
	expect_uint("18446744073709551620", 0, UINT64_MAX, ERANGE, 0);
	expect_uint("99999999999999999999", 0, UINT64_MAX, ERANGE, 0);
	expect_uint("184467440737095516150", 0, UINT64_MAX, ERANGE, 0);
	expect_uint("1000000000000000000000000000000", 0, UINT64_MAX, ERANGE, 0);
	expect_err(parse_uint_any, "uint", "36893488147419103232", ERANGE);
}

/* Every value of uint64_t is representable: the largest must parse. */
static void test_uint_accepts_uint64_max(void **state)
{
	(void)state;
	expect_uint("18446744073709551609", 0, UINT64_MAX, 0,
		    18446744073709551609ULL);
	expect_uint("18446744073709551610", 0, UINT64_MAX, 0,
		    18446744073709551610ULL);
	expect_uint("18446744073709551615", 0, UINT64_MAX, 0, UINT64_MAX);
	expect_uint("018446744073709551615", 0, UINT64_MAX, 0, UINT64_MAX);
}

/* ---- wr_validate_name --------------------------------------------------- */

static void test_name_accepts_valid(void **state)
{
	(void)state;
	static const char *const good[] = {
		"a", "A", "0", "9z", "web-1", "my_box.v2", "a..b", "a-", "a_",
		"a.", "Sandbox42", "x-y_z.w",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (wr_validate_name(good[i]) != 0)
			fail_msg("wr_validate_name(\"%s\") = %d, want 0", good[i],
				 wr_validate_name(good[i]));
}

static void test_name_length_limit(void **state)
{
	(void)state;
	char name[80];
	memset(name, 'a', sizeof(name));
	name[63] = '\0';
	assert_int_equal(wr_validate_name(name), 0);
	name[62] = '-';
	assert_int_equal(wr_validate_name(name), 0);
	name[62] = 'a';
	name[63] = 'b';
	name[64] = '\0';
	assert_int_equal(wr_validate_name(name), -ENAMETOOLONG);
	name[79] = '\0';
	assert_int_equal(wr_validate_name(name), -ENAMETOOLONG);
}

static void test_name_rejects_invalid(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"-a", "_a", ".a", ".", "..", "a/b", "/a", "a b", " a", "a ", "a\n",
		"a\t", "a:b", "a@b", "a*", "a$", "a~", "a+b", "a=b", "a\\b",
		"\xc3\xa4", "a\xc3\xa4", "a\x7f", "a\x01",
	};
	assert_int_equal(wr_validate_name(NULL), -EINVAL);
	assert_int_equal(wr_validate_name(""), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (wr_validate_name(bad[i]) != -EINVAL)
			fail_msg("wr_validate_name(\"%s\") = %d, want -EINVAL",
				 bad[i], wr_validate_name(bad[i]));
}

/* Every single byte as a one-character name, and as the second character:
 * exactly [A-Za-z0-9] first, [A-Za-z0-9_.-] after. */
static void test_name_every_byte(void **state)
{
	(void)state;
	for (int c = 1; c < 256; c++) {
		int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			    (c >= '0' && c <= '9');
		int tail = alnum || c == '_' || c == '.' || c == '-';
		char first[2] = { (char)c, 0 }, second[3] = { 'a', (char)c, 0 };
		if ((wr_validate_name(first) == 0) != alnum)
			fail_msg("first byte 0x%02x: got %d", c,
				 wr_validate_name(first));
		if ((wr_validate_name(second) == 0) != tail)
			fail_msg("second byte 0x%02x: got %d", c,
				 wr_validate_name(second));
	}
}

/* util/url.c: the host of an http(s) URL, and whether it is loopback. */
static void test_url_parts_and_loopback(void **state)
{
	(void)state;
	struct wr_url_parts u;
	assert_true(wr_url_http_parts("https://slack.com/api", &u));
	assert_true(u.https);
	assert_int_equal(u.host_len, 9);
	assert_memory_equal(u.host, "slack.com", 9);
	assert_int_equal(u.origin_len, strlen("https://slack.com"));
	assert_true(wr_url_http_parts("HTTP://127.0.0.1:8080/x/y", &u));
	assert_false(u.https);
	assert_memory_equal(u.host, "127.0.0.1", 9);
	assert_int_equal(u.host_len, 9);
	assert_int_equal(u.origin_len, strlen("HTTP://127.0.0.1:8080"));
	assert_true(wr_url_host_loopback(u.host, u.host_len));
	assert_true(wr_url_http_parts("http://[::1]:7/", &u));
	assert_int_equal(u.host_len, 5);
	assert_true(wr_url_host_loopback(u.host, u.host_len));
	assert_true(wr_url_http_parts("http://localhost", &u));
	assert_true(wr_url_host_loopback(u.host, u.host_len));
	assert_int_equal(u.origin_len, strlen("http://localhost"));
	/* not loopback: a name that starts like one, another address */
	assert_true(wr_url_http_parts("http://127.0.0.1.evil.com/", &u));
	assert_false(wr_url_host_loopback(u.host, u.host_len));
	assert_true(wr_url_http_parts("http://localhost.evil.com/", &u));
	assert_false(wr_url_host_loopback(u.host, u.host_len));
	assert_true(wr_url_http_parts("http://10.0.0.1/", &u));
	assert_false(wr_url_host_loopback(u.host, u.host_len));
	/* not http(s), or no host */
	assert_false(wr_url_http_parts("ftp://example.com/", &u));
	assert_false(wr_url_http_parts("https://", &u));
	assert_false(wr_url_http_parts("https://:443/", &u));
	assert_false(wr_url_http_parts("https://[::1/", &u));
	assert_false(wr_url_http_parts("example.com", &u));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_url_parts_and_loopback),
		cmocka_unit_test(test_size_accepts_plain_bytes),
		cmocka_unit_test(test_size_accepts_units),
		cmocka_unit_test(test_size_accepts_unit_spellings_any_case),
		cmocka_unit_test(test_size_accepts_fractions),
		cmocka_unit_test(test_size_rejects_empty_and_null),
		cmocka_unit_test(test_size_rejects_garbage),
		cmocka_unit_test(test_size_rejects_overflow),
		cmocka_unit_test(test_size_largest_values_fit),
		cmocka_unit_test(test_duration_bare_number_is_seconds),
		cmocka_unit_test(test_duration_accepts_units),
		cmocka_unit_test(test_duration_accepts_compound),
		cmocka_unit_test(test_duration_rejects_empty_and_null),
		cmocka_unit_test(test_duration_rejects_garbage),
		cmocka_unit_test(test_duration_rejects_overflow),
		cmocka_unit_test(test_cpus_accepts_whole_and_fractional),
		cmocka_unit_test(test_cpus_boundaries),
		cmocka_unit_test(test_cpus_below_one_millicpu_is_rejected),
		cmocka_unit_test(test_cpus_rejects_garbage),
		cmocka_unit_test(test_uint_accepts_in_range),
		cmocka_unit_test(test_uint_range_bounds_are_inclusive),
		cmocka_unit_test(test_uint_rejects_garbage),
		cmocka_unit_test(test_uint_rejects_overflow),
		cmocka_unit_test(test_uint_accepts_uint64_max),
		cmocka_unit_test(test_name_accepts_valid),
		cmocka_unit_test(test_name_length_limit),
		cmocka_unit_test(test_name_rejects_invalid),
		cmocka_unit_test(test_name_every_byte),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* fuzz_parse.c - libFuzzer target for src/util/parse.c.
 *
 * The input, NUL-terminated, goes to every parser. Besides memory safety
 * (ASan/UBSan), each result is checked against properties that must hold
 * for any input; a violation abort()s so the fuzzer keeps the input:
 *   - a failed parse returns -EINVAL/-ERANGE (-ENAMETOOLONG for names) and
 *     leaves the output untouched;
 *   - wr_parse_uint results lie within [min, max];
 *   - wr_parse_cpus results lie within [1, 1024000];
 *   - for a plain decimal integer N: size(N) == uint(N),
 *     size(N "K") == 1024 * size(N), duration(N) == 1000 * uint(N);
 *   - wr_validate_name accepts exactly [A-Za-z0-9][A-Za-z0-9_.-]{0,62}. */
#include "util/parse.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SENTINEL 0xa5a5a5a5a5a5a5a5ULL

static void check(int cond, const char *what, const char *text)
{
	if (!cond) {
		fprintf(stderr, "fuzz_parse: %s (input \"%s\")\n", what, text);
		abort();
	}
}

static void check_result(int r, uint64_t out, const char *what,
			 const char *text)
{
	if (r == 0)
		return;
	check(r == -EINVAL || r == -ERANGE, what, text);
	check(out == SENTINEL, "failed parse wrote its output", text);
}

static int is_alnum(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9');
}

static int name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63 || !is_alnum((unsigned char)s[0]))
		return 0;
	for (size_t i = 1; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!is_alnum(c) && c != '_' && c != '.' && c != '-')
			return 0;
	}
	return 1;
}

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 3);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	uint64_t v = SENTINEL;
	int r = wr_parse_size(text, &v);
	check_result(r, v, "wr_parse_size: unexpected error", text);
	uint64_t size_v = v;
	int size_r = r;

	v = SENTINEL;
	r = wr_parse_duration(text, &v);
	check_result(r, v, "wr_parse_duration: unexpected error", text);
	uint64_t dur_v = v;
	int dur_r = r;

	v = SENTINEL;
	r = wr_parse_cpus(text, &v);
	check_result(r, v, "wr_parse_cpus: unexpected error", text);
	if (r == 0)
		check(v >= 1 && v <= 1024000, "wr_parse_cpus out of range", text);

	static const uint64_t bounds[][2] = {
		{ 0, UINT64_MAX }, { 1, 4194304 }, { 10, 20 }, { 5, 5 }, { 0, 0 },
	};
	uint64_t uint_v = 0;
	int uint_r = -1;
	for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
		v = SENTINEL;
		r = wr_parse_uint(text, bounds[i][0], bounds[i][1], &v);
		check_result(r, v, "wr_parse_uint: unexpected error", text);
		if (r == 0)
			check(v >= bounds[i][0] && v <= bounds[i][1],
			      "wr_parse_uint out of range", text);
		if (i == 0) {
			uint_r = r;
			uint_v = v;
		}
	}

	if (all_digits(text) && uint_r == 0) {
		if (size_r == 0)
			check(size_v == uint_v, "size(N) != uint(N)", text);
		if (dur_r == 0)
			check(dur_v / 1000 == uint_v && dur_v % 1000 == 0,
			      "duration(N) != N seconds", text);
		if (size_r == 0) {
			size_t n = strlen(text); /* the input may hold NULs */
			strcpy(text + n, "K");
			v = SENTINEL;
			r = wr_parse_size(text, &v);
			if (r == 0)
				check(size_v <= UINT64_MAX / 1024 &&
					      v == size_v * 1024,
				      "size(N K) != 1024 * size(N)", text);
			else
				check(r == -ERANGE && size_v > UINT64_MAX / 1024,
				      "size(N K) failed but fits", text);
			text[n] = '\0';
		}
	}

	r = wr_validate_name(text);
	check(r == 0 || r == -EINVAL || r == -ENAMETOOLONG,
	      "wr_validate_name: unexpected error", text);
	check((r == 0) == name_ok(text), "wr_validate_name disagrees with spec",
	      text);
	if (r == -ENAMETOOLONG)
		check(strlen(text) > 63, "ENAMETOOLONG for a short name", text);

	free(text);
	return 0;
}

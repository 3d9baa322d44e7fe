/* test_proto.c - the exec request wire format: round trips, every malformed
 * input rejected with -EBADMSG (without reading out of bounds: each input is
 * copied into a buffer of exactly its length, so ASan builds catch overreads),
 * the caps, and allocation failure at every point. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sandbox/proto.h"
#include "util/alloc.h"

#define HDR_SIZE sizeof(struct wr_proto_request_hdr)

static int reset_alloc(void **state)
{
	(void)state;
	wr_alloc_fail_at(0);
	return 0;
}

/* Parses a copy of buf[0, len) held in an allocation of exactly len bytes. */
static int parse_exact(const void *buf, size_t len, struct wr_proto_request *req)
{
	char *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	if (len)
		memcpy(copy, buf, len);
	memset(req, 0, sizeof(*req));
	int r = wr_proto_parse_request(copy, len, req);
	/* the strings point into the copy: callers only look at the result */
	wr_proto_request_clear(req);
	free(copy);
	return r;
}

/* A raw request: header fields as given, then `blob` of `blob_len` bytes;
 * strings_len is blob_len unless overridden (>= 0). */
struct raw {
	uint32_t magic;
	uint16_t version, flags;
	uint32_t argc, envc;
	long strings_len;
	uint16_t rows, cols;
};

static const struct raw RAW_OK = {
	.magic = WR_PROTO_MAGIC,
	.version = WR_PROTO_VERSION,
	.flags = 0,
	.argc = 2,
	.envc = 1,
	.strings_len = -1,
	.rows = 0,
	.cols = 0,
};

/* "/", argv {"ls", "-l"}, env {"A=1"} */
static const char BLOB_OK[] = "/\0ls\0-l\0A=1";
#define BLOB_OK_LEN sizeof(BLOB_OK)

static size_t make_raw(const struct raw *h, const void *blob, size_t blob_len,
		       char **out)
{
	struct wr_proto_request_hdr hdr = {
		.magic = h->magic,
		.version = h->version,
		.flags = h->flags,
		.argc = h->argc,
		.envc = h->envc,
		.strings_len = h->strings_len >= 0 ? (uint32_t)h->strings_len
						  : (uint32_t)blob_len,
		.rows = h->rows,
		.cols = h->cols,
	};
	size_t len = HDR_SIZE + blob_len;
	char *buf = malloc(len);
	assert_non_null(buf);
	memcpy(buf, &hdr, HDR_SIZE);
	if (blob_len)
		memcpy(buf + HDR_SIZE, blob, blob_len);
	*out = buf;
	return len;
}

static int parse_raw(const struct raw *h, const void *blob, size_t blob_len)
{
	char *buf;
	size_t len = make_raw(h, blob, blob_len, &buf);
	struct wr_proto_request req;
	memset(&req, 0, sizeof(req));
	int r = wr_proto_parse_request(buf, len, &req);
	wr_proto_request_clear(&req);
	free(buf);
	return r;
}

static size_t list_len(char **list)
{
	size_t n = 0;
	while (list && list[n])
		n++;
	return n;
}

static void assert_lists_equal(char **got, char *const want[])
{
	size_t n = 0;
	if (want)
		for (; want[n]; n++) {
			assert_non_null(got[n]);
			assert_string_equal(got[n], want[n]);
		}
	assert_null(got[n]);
}

/* Builds, parses and checks every field; returns the built length. */
static size_t round_trip(const char *cwd, char *const argv[], char *const env[],
			 uint16_t flags, uint16_t rows, uint16_t cols)
{
	void *buf = NULL;
	size_t len = 0;
	assert_int_equal(wr_proto_build_request(cwd, argv, env, flags, rows, cols,
						&buf, &len),
			 0);
	assert_non_null(buf);
	assert_true(len >= HDR_SIZE);
	assert_true(len <= WR_PROTO_MAX_REQUEST);

	struct wr_proto_request req;
	memset(&req, 0, sizeof(req));
	assert_int_equal(wr_proto_parse_request(buf, len, &req), 0);
	assert_int_equal(req.flags, flags);
	assert_int_equal(req.rows, rows);
	assert_int_equal(req.cols, cols);
	assert_string_equal(req.cwd, cwd);
	/* strings are not copied: they point into the caller's buffer */
	assert_true(req.cwd >= (const char *)buf &&
		    req.cwd < (const char *)buf + len);
	assert_non_null(req.argv);
	assert_non_null(req.env);
	assert_lists_equal(req.argv, argv);
	assert_lists_equal(req.env, env);
	wr_proto_request_clear(&req);
	assert_null(req.argv);
	assert_null(req.env);
	free(buf);
	return len;
}

/* ---- round trips ------------------------------------------------------- */

static void test_round_trip_basic(void **state)
{
	(void)state;
	char *argv[] = { "sh", "-c", "echo hello world", NULL };
	char *env[] = { "PATH=/usr/bin:/bin", "HOME=/root", "A=", NULL };
	size_t len = round_trip("/work", argv, env, 0, 0, 0);
	size_t want = HDR_SIZE + sizeof("/work") + sizeof("sh") + sizeof("-c") +
		      sizeof("echo hello world") + sizeof("PATH=/usr/bin:/bin") +
		      sizeof("HOME=/root") + sizeof("A=");
	assert_int_equal(len, want);
}

static void test_round_trip_tty_and_size(void **state)
{
	(void)state;
	char *argv[] = { "bash", NULL };
	char *env[] = { "TERM=xterm-256color", NULL };
	round_trip("/", argv, env, WR_PROTO_FLAG_TTY, 24, 80);
	round_trip("/", argv, env, WR_PROTO_FLAG_TTY, 65535, 65535);
	round_trip("/", argv, env, 0, 1, 2);
}

static void test_round_trip_without_env(void **state)
{
	(void)state;
	char *argv[] = { "true", NULL };
	char *empty[] = { NULL };
	round_trip("/", argv, NULL, 0, 0, 0);
	round_trip("/", argv, empty, 0, 0, 0);
}

static void test_round_trip_odd_strings(void **state)
{
	(void)state;
	/* empty arguments after argv[0], '=' inside values, bytes >= 0x80 */
	char *argv[] = { "printf", "", "%s\n", "\xc3\xa4\xff", " ", NULL };
	char *env[] = { "A==", "B=a=b", "C=\xff", "_=", NULL };
	round_trip("/a dir/with spaces/\xc3\xa4", argv, env, 0, 0, 0);
}

static void test_header_layout(void **state)
{
	(void)state;
	assert_int_equal(HDR_SIZE, 24);
	char *argv[] = { "x", "y", NULL };
	char *env[] = { "K=V", NULL };
	void *buf;
	size_t len;
	assert_int_equal(wr_proto_build_request("/d", argv, env, 1, 3, 4, &buf,
						&len),
			 0);
	struct wr_proto_request_hdr hdr;
	memcpy(&hdr, buf, sizeof(hdr));
	assert_int_equal(hdr.magic, WR_PROTO_MAGIC);
	assert_int_equal(hdr.version, WR_PROTO_VERSION);
	assert_int_equal(hdr.flags, 1);
	assert_int_equal(hdr.argc, 2);
	assert_int_equal(hdr.envc, 1);
	assert_int_equal(hdr.strings_len, len - HDR_SIZE);
	assert_int_equal(hdr.rows, 3);
	assert_int_equal(hdr.cols, 4);
	assert_memory_equal((char *)buf + HDR_SIZE, "/d\0x\0y\0K=V", 11);
	assert_int_equal(len, HDR_SIZE + 11);
	free(buf);
}

/* The parsed request is freshly allocated: the argv/env arrays are
 * NULL-terminated with exactly argc/envc entries. */
static void test_parse_counts(void **state)
{
	(void)state;
	char *buf;
	size_t len = make_raw(&RAW_OK, BLOB_OK, BLOB_OK_LEN, &buf);
	struct wr_proto_request req;
	assert_int_equal(wr_proto_parse_request(buf, len, &req), 0);
	assert_string_equal(req.cwd, "/");
	assert_int_equal(list_len(req.argv), 2);
	assert_int_equal(list_len(req.env), 1);
	assert_string_equal(req.argv[1], "-l");
	assert_string_equal(req.env[0], "A=1");
	wr_proto_request_clear(&req);
	free(buf);
}

/* ---- malformed input ---------------------------------------------------- */

static void test_parse_truncated_at_every_length(void **state)
{
	(void)state;
	char *argv[] = { "sh", "-c", "exit 0", NULL };
	char *env[] = { "A=1", "B=22", NULL };
	void *buf;
	size_t len;
	assert_int_equal(wr_proto_build_request("/tmp", argv, env, 1, 2, 3, &buf,
						&len),
			 0);
	struct wr_proto_request req;
	assert_int_equal(parse_exact(buf, len, &req), 0);
	for (size_t n = 0; n < len; n++)
		if (parse_exact(buf, n, &req) != -EBADMSG)
			fail_msg("truncated to %zu of %zu bytes: not -EBADMSG", n,
				 len);
	free(buf);
}

/* Truncated, and strings_len fixed up to match: the counts promise strings
 * that are missing or unterminated. */
static void test_parse_truncated_with_consistent_length(void **state)
{
	(void)state;
	char *argv[] = { "sh", "-c", "exit 0", NULL };
	char *env[] = { "A=1", "B=22", NULL };
	void *buf;
	size_t len;
	assert_int_equal(wr_proto_build_request("/tmp", argv, env, 0, 0, 0, &buf,
						&len),
			 0);
	struct wr_proto_request req;
	for (size_t n = HDR_SIZE; n < len; n++) {
		struct wr_proto_request_hdr hdr;
		memcpy(&hdr, buf, sizeof(hdr));
		hdr.strings_len = (uint32_t)(n - HDR_SIZE);
		char *copy = malloc(n);
		assert_non_null(copy);
		memcpy(copy, buf, n);
		memcpy(copy, &hdr, sizeof(hdr));
		int r = parse_exact(copy, n, &req);
		free(copy);
		if (r != -EBADMSG)
			fail_msg("truncated to %zu of %zu bytes: %d, not -EBADMSG",
				 n, len, r);
	}
	free(buf);
}

static void test_parse_rejects_bad_magic(void **state)
{
	(void)state;
	struct raw h = RAW_OK;
	assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN), 0);
	static const uint32_t bad[] = { 0, 0x314e5257u, WR_PROTO_MAGIC ^ 1,
					WR_PROTO_MAGIC ^ 0x80000000u, 0xffffffffu };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		h.magic = bad[i];
		assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN), -EBADMSG);
	}
}

static void test_parse_rejects_bad_version(void **state)
{
	(void)state;
	struct raw h = RAW_OK;
	static const uint16_t bad[] = { 0, 2, 0x100, 0xffff };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		h.version = bad[i];
		assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN), -EBADMSG);
	}
}

static void test_parse_rejects_unknown_flags(void **state)
{
	(void)state;
	struct raw h = RAW_OK;
	h.flags = WR_PROTO_FLAG_TTY;
	assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN), 0);
	for (int bit = 1; bit < 16; bit++) {
		h.flags = (uint16_t)(1u << bit);
		assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN), -EBADMSG);
		h.flags |= WR_PROTO_FLAG_TTY;
		assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN), -EBADMSG);
	}
}

static void test_parse_rejects_argc_zero(void **state)
{
	(void)state;
	struct raw h = RAW_OK;
	h.argc = 0;
	h.envc = 3; /* the strings would still all be consumed */
	static const char blob[] = "/\0A=1\0B=2\0C=3";
	assert_int_equal(parse_raw(&h, blob, sizeof(blob)), -EBADMSG);
	h.envc = 0;
	assert_int_equal(parse_raw(&h, "/", 2), -EBADMSG);
}

static void test_parse_rejects_counts_beyond_strings(void **state)
{
	(void)state;
	struct raw h = RAW_OK;
	static const uint32_t argcs[] = { 3, 4, 100, WR_PROTO_MAX_ARGS };
	for (size_t i = 0; i < sizeof(argcs) / sizeof(argcs[0]); i++) {
		h.argc = argcs[i];
		h.envc = 1;
		assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN), -EBADMSG);
	}
	h.argc = 2;
	static const uint32_t envcs[] = { 2, 3, WR_PROTO_MAX_ENV };
	for (size_t i = 0; i < sizeof(envcs) / sizeof(envcs[0]); i++) {
		h.envc = envcs[i];
		assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN), -EBADMSG);
	}
}

static void test_parse_rejects_counts_over_caps(void **state)
{
	(void)state;
	struct raw h = RAW_OK;
	h.argc = WR_PROTO_MAX_ARGS + 1;
	assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN), -EBADMSG);
	h.argc = UINT32_MAX;
	assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN), -EBADMSG);
	h.argc = 2;
	h.envc = WR_PROTO_MAX_ENV + 1;
	assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN), -EBADMSG);
	h.envc = UINT32_MAX;
	assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN), -EBADMSG);
}

static void test_parse_rejects_strings_len_mismatch(void **state)
{
	(void)state;
	struct raw h = RAW_OK;
	static const long lens[] = { 0, 1, BLOB_OK_LEN - 1, BLOB_OK_LEN + 1,
				     BLOB_OK_LEN + 4096, 0xffffffffL };
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		h.strings_len = lens[i];
		assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN), -EBADMSG);
	}
}

static void test_parse_rejects_trailing_bytes(void **state)
{
	(void)state;
	struct raw h = RAW_OK;
	/* one more string than the counts say */
	static const char extra_string[] = "/\0ls\0-l\0A=1\0B=2";
	assert_int_equal(parse_raw(&h, extra_string, sizeof(extra_string)),
			 -EBADMSG);
	/* a single trailing NUL */
	static const char extra_nul[] = "/\0ls\0-l\0A=1\0";
	assert_int_equal(parse_raw(&h, extra_nul, sizeof(extra_nul)), -EBADMSG);
	/* trailing unterminated bytes */
	static const char extra_bytes[] = "/\0ls\0-l\0A=1\0xyz";
	assert_int_equal(parse_raw(&h, extra_bytes, sizeof(extra_bytes) - 1),
			 -EBADMSG);
}

static void test_parse_rejects_unterminated_strings(void **state)
{
	(void)state;
	struct raw h = RAW_OK;
	/* the last env string lacks its NUL */
	assert_int_equal(parse_raw(&h, BLOB_OK, BLOB_OK_LEN - 1), -EBADMSG);
	/* no NUL at all, not even after cwd */
	h.argc = 1;
	h.envc = 0;
	assert_int_equal(parse_raw(&h, "/bin", 4), -EBADMSG);
	/* nothing after the header */
	assert_int_equal(parse_raw(&h, "", 0), -EBADMSG);
}

static void test_parse_rejects_env_without_equals(void **state)
{
	(void)state;
	struct raw h = RAW_OK;
	static const char no_eq[] = "/\0ls\0-l\0PATH";
	assert_int_equal(parse_raw(&h, no_eq, sizeof(no_eq)), -EBADMSG);
	static const char empty[] = "/\0ls\0-l\0";
	assert_int_equal(parse_raw(&h, empty, sizeof(empty)), -EBADMSG);
	static const char leading_eq[] = "/\0ls\0-l\0=x";
	assert_int_equal(parse_raw(&h, leading_eq, sizeof(leading_eq)),
			 -EBADMSG);
	/* the bad one is not the first */
	h.envc = 3;
	static const char second[] = "/\0ls\0-l\0A=1\0B\0C=3";
	assert_int_equal(parse_raw(&h, second, sizeof(second)), -EBADMSG);
}

static void test_parse_rejects_relative_cwd(void **state)
{
	(void)state;
	struct raw h = RAW_OK;
	static const char relative[] = "work\0ls\0-l\0A=1";
	assert_int_equal(parse_raw(&h, relative, sizeof(relative)), -EBADMSG);
	static const char dot[] = "./x\0ls\0-l\0A=1";
	assert_int_equal(parse_raw(&h, dot, sizeof(dot)), -EBADMSG);
	static const char empty[] = "\0ls\0-l\0A=1";
	assert_int_equal(parse_raw(&h, empty, sizeof(empty)), -EBADMSG);
}

static void test_parse_rejects_empty_argv0(void **state)
{
	(void)state;
	struct raw h = RAW_OK;
	static const char blob[] = "/\0\0-l\0A=1";
	assert_int_equal(parse_raw(&h, blob, sizeof(blob)), -EBADMSG);
}

static void test_parse_rejects_short_and_oversized_buffers(void **state)
{
	(void)state;
	struct wr_proto_request req;
	char small[HDR_SIZE];
	memset(small, 0, sizeof(small));
	for (size_t n = 0; n < HDR_SIZE; n++)
		assert_int_equal(parse_exact(small, n, &req), -EBADMSG);

	/* a header that is consistent with an over-cap length */
	size_t len = WR_PROTO_MAX_REQUEST + 1;
	char *big = calloc(1, len);
	assert_non_null(big);
	struct wr_proto_request_hdr hdr = {
		.magic = WR_PROTO_MAGIC,
		.version = WR_PROTO_VERSION,
		.argc = 1,
		.strings_len = (uint32_t)(len - HDR_SIZE),
	};
	memcpy(big, &hdr, sizeof(hdr));
	big[HDR_SIZE] = '/';
	memset(big + HDR_SIZE + 2, 'a', len - HDR_SIZE - 3);
	assert_int_equal(parse_exact(big, len, &req), -EBADMSG);
	/* the same one byte shorter is within the cap and valid */
	hdr.strings_len--;
	memcpy(big, &hdr, sizeof(hdr));
	big[len - 2] = '\0';
	assert_int_equal(parse_exact(big, len - 1, &req), 0);
	free(big);
}

/* Every single-byte corruption of a valid request either still parses into
 * something well formed or is rejected with -EBADMSG. */
static void test_parse_every_byte_flip(void **state)
{
	(void)state;
	char *argv[] = { "sh", "-c", "x", NULL };
	char *env[] = { "A=1", NULL };
	void *buf;
	size_t len;
	assert_int_equal(wr_proto_build_request("/w", argv, env, 1, 5, 6, &buf,
						&len),
			 0);
	static const unsigned char values[] = { 0, 1, '/', '=', 0x7f, 0x80, 0xff };
	for (size_t i = 0; i < len; i++) {
		for (size_t v = 0; v < sizeof(values); v++) {
			char *copy = malloc(len);
			assert_non_null(copy);
			memcpy(copy, buf, len);
			copy[i] = (char)values[v];
			struct wr_proto_request req;
			int r = wr_proto_parse_request(copy, len, &req);
			if (r == 0) {
				assert_true(req.cwd[0] == '/');
				assert_true(req.argv[0] && req.argv[0][0]);
				for (size_t e = 0; req.env[e]; e++)
					assert_true(strchr(req.env[e], '=') &&
						    req.env[e][0] != '=');
				wr_proto_request_clear(&req);
			} else if (r != -EBADMSG) {
				fail_msg("byte %zu = 0x%02x: %d", i, values[v], r);
			}
			free(copy);
		}
	}
	free(buf);
}

/* ---- caps ---------------------------------------------------------------- */

static char **make_list(size_t n, const char *item)
{
	char **list = calloc(n + 1, sizeof(char *));
	assert_non_null(list);
	for (size_t i = 0; i < n; i++)
		list[i] = (char *)item;
	return list;
}

static void test_build_rejects_too_many_args(void **state)
{
	(void)state;
	char **argv = make_list(WR_PROTO_MAX_ARGS + 1, "a");
	void *buf = NULL;
	size_t len = 0;
	assert_int_equal(wr_proto_build_request("/", argv, NULL, 0, 0, 0, &buf,
						&len),
			 -E2BIG);
	assert_null(buf);
	argv[WR_PROTO_MAX_ARGS] = NULL; /* exactly the cap */
	len = round_trip("/", argv, NULL, 0, 0, 0);
	assert_int_equal(len, HDR_SIZE + 2 + 2 * WR_PROTO_MAX_ARGS);
	free(argv);
}

static void test_build_rejects_too_many_env(void **state)
{
	(void)state;
	char *argv[] = { "env", NULL };
	char **env = make_list(WR_PROTO_MAX_ENV + 1, "A=");
	void *buf = NULL;
	size_t len = 0;
	assert_int_equal(wr_proto_build_request("/", argv, env, 0, 0, 0, &buf,
						&len),
			 -E2BIG);
	assert_null(buf);
	env[WR_PROTO_MAX_ENV] = NULL;
	round_trip("/", argv, env, 0, 0, 0);
	free(env);
}

static void test_build_and_parse_at_both_count_caps(void **state)
{
	(void)state;
	char **argv = make_list(WR_PROTO_MAX_ARGS, "a");
	char **env = make_list(WR_PROTO_MAX_ENV, "A=");
	size_t len = round_trip("/", argv, env, 0, 0, 0);
	assert_true(len <= WR_PROTO_MAX_REQUEST);
	free(argv);
	free(env);
}

static void test_build_rejects_oversized_request(void **state)
{
	(void)state;
	/* total = header + "/\0" + arg + NUL; exactly at the cap is fine */
	size_t arg_len = WR_PROTO_MAX_REQUEST - HDR_SIZE - 2 - 1;
	char *arg = malloc(arg_len + 2);
	assert_non_null(arg);
	memset(arg, 'x', arg_len + 1);
	arg[arg_len] = '\0';
	char *argv[] = { arg, NULL };
	size_t len = round_trip("/", argv, NULL, 0, 0, 0);
	assert_int_equal(len, WR_PROTO_MAX_REQUEST);

	arg[arg_len] = 'x'; /* one byte more */
	arg[arg_len + 1] = '\0';
	void *buf = NULL;
	assert_int_equal(wr_proto_build_request("/", argv, NULL, 0, 0, 0, &buf,
						&len),
			 -E2BIG);
	assert_null(buf);

	/* the size spread over env instead */
	char *small[] = { "a", NULL };
	char *env[] = { "A=1", arg, NULL };
	arg[0] = 'B';
	arg[1] = '=';
	assert_int_equal(wr_proto_build_request("/", small, env, 0, 0, 0, &buf,
						&len),
			 -E2BIG);
	free(arg);
}

static void test_build_rejects_missing_argv_or_cwd(void **state)
{
	(void)state;
	char *argv[] = { "true", NULL };
	char *empty[] = { NULL };
	void *buf = NULL;
	size_t len = 0;
	assert_int_equal(wr_proto_build_request("/", NULL, NULL, 0, 0, 0, &buf,
						&len),
			 -EINVAL);
	assert_int_equal(wr_proto_build_request("/", empty, NULL, 0, 0, 0, &buf,
						&len),
			 -EINVAL);
	assert_int_equal(wr_proto_build_request(NULL, argv, NULL, 0, 0, 0, &buf,
						&len),
			 -EINVAL);
	assert_null(buf);
}

static void test_request_clear_is_idempotent(void **state)
{
	(void)state;
	wr_proto_request_clear(NULL);
	struct wr_proto_request req;
	memset(&req, 0, sizeof(req));
	wr_proto_request_clear(&req);
	char *buf;
	size_t len = make_raw(&RAW_OK, BLOB_OK, BLOB_OK_LEN, &buf);
	assert_int_equal(wr_proto_parse_request(buf, len, &req), 0);
	wr_proto_request_clear(&req);
	wr_proto_request_clear(&req);
	assert_null(req.argv);
	assert_null(req.env);
	free(buf);
}

/* ---- allocation failure ------------------------------------------------- */

static void test_build_survives_alloc_failure_at_every_n(void **state)
{
	(void)state;
	char *argv[] = { "a", "b", NULL };
	char *env[] = { "X=1", NULL };
	int ok = 0;
	for (unsigned long n = 1; n < 100 && !ok; n++) {
		void *buf = NULL;
		size_t len = 0;
		wr_alloc_fail_at(n);
		int r = wr_proto_build_request("/", argv, env, 0, 0, 0, &buf, &len);
		wr_alloc_fail_at(0);
		if (r == 0) {
			assert_non_null(buf);
			free(buf);
			ok = 1;
		} else {
			assert_int_equal(r, -ENOMEM);
			assert_null(buf);
		}
	}
	assert_true(ok);
}

static void test_parse_survives_alloc_failure_at_every_n(void **state)
{
	(void)state;
	char *argv[] = { "a", "b", NULL };
	char *env[] = { "X=1", "Y=2", NULL };
	void *buf;
	size_t len;
	assert_int_equal(wr_proto_build_request("/", argv, env, 0, 0, 0, &buf,
						&len),
			 0);
	int ok = 0;
	unsigned long n;
	for (n = 1; n < 100 && !ok; n++) {
		struct wr_proto_request req;
		memset(&req, 0, sizeof(req));
		wr_alloc_fail_at(n);
		int r = wr_proto_parse_request(buf, len, &req);
		wr_alloc_fail_at(0);
		if (r == 0) {
			assert_lists_equal(req.argv, argv);
			assert_lists_equal(req.env, env);
			wr_proto_request_clear(&req);
			ok = 1;
		} else {
			assert_int_equal(r, -ENOMEM);
			assert_null(req.argv);
			assert_null(req.env);
		}
	}
	assert_true(ok);
	assert_true(n > 2); /* at least one failure was injected and handled */
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_round_trip_basic, reset_alloc),
		cmocka_unit_test_setup(test_round_trip_tty_and_size, reset_alloc),
		cmocka_unit_test_setup(test_round_trip_without_env, reset_alloc),
		cmocka_unit_test_setup(test_round_trip_odd_strings, reset_alloc),
		cmocka_unit_test_setup(test_header_layout, reset_alloc),
		cmocka_unit_test_setup(test_parse_counts, reset_alloc),
		cmocka_unit_test_setup(test_parse_truncated_at_every_length,
				       reset_alloc),
		cmocka_unit_test_setup(test_parse_truncated_with_consistent_length,
				       reset_alloc),
		cmocka_unit_test_setup(test_parse_rejects_bad_magic, reset_alloc),
		cmocka_unit_test_setup(test_parse_rejects_bad_version, reset_alloc),
		cmocka_unit_test_setup(test_parse_rejects_unknown_flags, reset_alloc),
		cmocka_unit_test_setup(test_parse_rejects_argc_zero, reset_alloc),
		cmocka_unit_test_setup(test_parse_rejects_counts_beyond_strings,
				       reset_alloc),
		cmocka_unit_test_setup(test_parse_rejects_counts_over_caps,
				       reset_alloc),
		cmocka_unit_test_setup(test_parse_rejects_strings_len_mismatch,
				       reset_alloc),
		cmocka_unit_test_setup(test_parse_rejects_trailing_bytes, reset_alloc),
		cmocka_unit_test_setup(test_parse_rejects_unterminated_strings,
				       reset_alloc),
		cmocka_unit_test_setup(test_parse_rejects_env_without_equals,
				       reset_alloc),
		cmocka_unit_test_setup(test_parse_rejects_relative_cwd, reset_alloc),
		cmocka_unit_test_setup(test_parse_rejects_empty_argv0, reset_alloc),
		cmocka_unit_test_setup(test_parse_rejects_short_and_oversized_buffers,
				       reset_alloc),
		cmocka_unit_test_setup(test_parse_every_byte_flip, reset_alloc),
		cmocka_unit_test_setup(test_build_rejects_too_many_args, reset_alloc),
		cmocka_unit_test_setup(test_build_rejects_too_many_env, reset_alloc),
		cmocka_unit_test_setup(test_build_and_parse_at_both_count_caps,
				       reset_alloc),
		cmocka_unit_test_setup(test_build_rejects_oversized_request,
				       reset_alloc),
		cmocka_unit_test_setup(test_build_rejects_missing_argv_or_cwd,
				       reset_alloc),
		cmocka_unit_test_setup(test_request_clear_is_idempotent, reset_alloc),
		cmocka_unit_test_setup(test_build_survives_alloc_failure_at_every_n,
				       reset_alloc),
		cmocka_unit_test_setup(test_parse_survives_alloc_failure_at_every_n,
				       reset_alloc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* fuzz_proto.c - libFuzzer target for the exec request format
 * (src/sandbox/proto.c). abort()s on any violated property:
 *
 * 1. The input as a request: wr_proto_parse_request either rejects it with
 *    -EBADMSG (never reading outside the input: it is copied into a buffer
 *    of exactly its size) or returns a well-formed request (absolute cwd,
 *    non-empty argv[0], every env entry NAME=..., all strings inside the
 *    input). A parsed request rebuilt with wr_proto_build_request must give
 *    back the very same bytes, and parsing those must give identical
 *    argv/env/cwd/flags/rows/cols.
 * 2. The input as the arguments of a request (split at NUL bytes: cwd, then
 *    argv, then env, the split point chosen by the first byte): whatever
 *    wr_proto_build_request accepts, parse must accept exactly when the
 *    strings are valid, with every field identical; otherwise -EBADMSG. */
#include "sandbox/proto.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HDR_SIZE sizeof(struct wr_proto_request_hdr)

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_proto: %s\n", what);
		abort();
	}
}

static size_t count(char **list)
{
	size_t n = 0;
	while (list[n])
		n++;
	return n;
}

static int lists_equal(char **a, char *const b[])
{
	size_t i = 0;
	for (; a[i] && b[i]; i++)
		if (strcmp(a[i], b[i]))
			return 0;
	return !a[i] && !b[i];
}

static int env_ok(const char *e)
{
	return e[0] != '=' && strchr(e, '=') != NULL;
}

/* The parsed request must be well formed and point into [buf, buf + len). */
static void check_request(const struct wr_proto_request *req, const char *buf,
			  size_t len)
{
	const char *end = buf + len;
	check(req->cwd >= buf + HDR_SIZE && req->cwd < end, "cwd outside input");
	check(req->cwd[0] == '/', "relative cwd accepted");
	check(req->argv && req->env, "missing argv/env array");
	check(req->argv[0] != NULL, "argc 0 accepted");
	check(req->argv[0][0] != '\0', "empty argv[0] accepted");
	check(count(req->argv) <= WR_PROTO_MAX_ARGS, "argc over cap");
	check(count(req->env) <= WR_PROTO_MAX_ENV, "envc over cap");
	check((req->flags & ~WR_PROTO_FLAG_TTY) == 0, "unknown flags accepted");
	for (size_t i = 0; req->argv[i]; i++)
		check(req->argv[i] > buf && req->argv[i] < end,
		      "argv string outside input");
	for (size_t i = 0; req->env[i]; i++) {
		check(req->env[i] > buf && req->env[i] < end,
		      "env string outside input");
		check(env_ok(req->env[i]), "env entry without NAME= accepted");
	}
}

static void check_same(const struct wr_proto_request *a,
		       const struct wr_proto_request *b)
{
	check(a->flags == b->flags, "round trip: flags differ");
	check(a->rows == b->rows && a->cols == b->cols,
	      "round trip: terminal size differs");
	check(strcmp(a->cwd, b->cwd) == 0, "round trip: cwd differs");
	check(lists_equal(a->argv, b->argv), "round trip: argv differs");
	check(lists_equal(a->env, b->env), "round trip: env differs");
}

static void parse_as_request(const uint8_t *data, size_t size)
{
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return;
	if (size)
		memcpy(buf, data, size);
	struct wr_proto_request req;
	memset(&req, 0, sizeof(req));
	int r = wr_proto_parse_request(buf, size, &req);
	if (r != 0) {
		check(r == -EBADMSG, "parse: error other than -EBADMSG");
		free(buf);
		return;
	}
	check_request(&req, buf, size);

	void *out = NULL;
	size_t out_len = 0;
	r = wr_proto_build_request(req.cwd, req.argv, req.env, req.flags,
				   req.rows, req.cols, &out, &out_len);
	check(r == 0, "rebuild of a parsed request failed");
	check(out_len == size, "rebuild: length differs");
	check(memcmp(out, buf, size) == 0, "rebuild: bytes differ");

	struct wr_proto_request again;
	memset(&again, 0, sizeof(again));
	r = wr_proto_parse_request(out, out_len, &again);
	check(r == 0, "parse of the rebuilt request failed");
	check_same(&req, &again);
	wr_proto_request_clear(&again);
	free(out);
	wr_proto_request_clear(&req);
	free(buf);
}

static void build_from_strings(const uint8_t *data, size_t size)
{
	if (size < 2)
		return;
	uint8_t ctl = data[0];
	data++;
	size--;
	/* NUL-separated strings; the last one ends at the end of the input */
	size_t n = 1;
	for (size_t i = 0; i < size; i++)
		n += data[i] == '\0';
	char *copy = malloc(size + 1);
	char **strs = calloc(n + 1, sizeof(char *));
	if (!copy || !strs) {
		free(copy);
		free(strs);
		return;
	}
	memcpy(copy, data, size);
	copy[size] = '\0';
	size_t k = 0;
	for (char *p = copy; k < n; p += strlen(p) + 1)
		strs[k++] = p;

	/* strs[0] is cwd; argc from the control byte, the rest is env */
	size_t rest = n - 1;
	size_t argc = rest ? 1 + (size_t)(ctl & 0x7f) % rest : 0;
	char **argv = calloc(argc + 1, sizeof(char *));
	char **env = calloc(rest - argc + 1, sizeof(char *));
	if (!argv || !env)
		goto out;
	for (size_t i = 0; i < argc; i++)
		argv[i] = strs[1 + i];
	for (size_t i = 0; i < rest - argc; i++)
		env[i] = strs[1 + argc + i];
	uint16_t flags = (ctl & 0x80) ? WR_PROTO_FLAG_TTY : 0;
	uint16_t rows = (uint16_t)(size * 31), cols = (uint16_t)(n * 7);

	void *buf = NULL;
	size_t len = 0;
	int r = wr_proto_build_request(strs[0], argv, env, flags, rows, cols,
				       &buf, &len);
	if (argc == 0) {
		check(r == -EINVAL, "build without argv did not fail");
		goto out;
	}
	if (r != 0) {
		check(r == -E2BIG, "build: unexpected error");
		goto out;
	}
	int valid = strs[0][0] == '/' && argv[0][0] != '\0';
	for (size_t i = 0; env[i]; i++)
		valid = valid && env_ok(env[i]);

	char *exact = malloc(len);
	check(exact != NULL, "out of memory");
	memcpy(exact, buf, len);
	free(buf);
	struct wr_proto_request req;
	memset(&req, 0, sizeof(req));
	r = wr_proto_parse_request(exact, len, &req);
	if (!valid) {
		check(r == -EBADMSG, "invalid strings built and parsed");
	} else {
		check(r == 0, "valid request failed to parse");
		check_request(&req, exact, len);
		check(req.flags == flags && req.rows == rows && req.cols == cols,
		      "build/parse: header fields differ");
		check(strcmp(req.cwd, strs[0]) == 0, "build/parse: cwd differs");
		check(lists_equal(req.argv, argv), "build/parse: argv differs");
		check(lists_equal(req.env, env), "build/parse: env differs");
		wr_proto_request_clear(&req);
	}
	free(exact);
out:
	free(argv);
	free(env);
	free(strs);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	parse_as_request(data, size);
	build_from_strings(data, size);
	return 0;
}

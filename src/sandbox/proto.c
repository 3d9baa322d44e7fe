/* proto.c - building and parsing exec requests (used by warren and init). */
#include "sandbox/proto.h"

#include "util/alloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int count_strings(char *const list[], size_t cap, size_t *count,
			 size_t *bytes)
{
	size_t n = 0;
	if (list) {
		for (; list[n]; n++) {
			if (n >= cap)
				return -E2BIG;
			*bytes += strlen(list[n]) + 1;
		}
	}
	*count = n;
	return 0;
}

int wr_proto_build_request(const char *cwd, char *const argv[],
			   char *const env[], uint16_t flags, uint16_t rows,
			   uint16_t cols, void **out, size_t *out_len)
{
	if (!argv || !argv[0] || !cwd)
		return -EINVAL;
	size_t bytes = strlen(cwd) + 1, argc, envc;
	int r = count_strings(argv, WR_PROTO_MAX_ARGS, &argc, &bytes);
	if (r < 0)
		return r;
	r = count_strings(env, WR_PROTO_MAX_ENV, &envc, &bytes);
	if (r < 0)
		return r;
	size_t total = sizeof(struct wr_proto_request_hdr) + bytes;
	if (total > WR_PROTO_MAX_REQUEST)
		return -E2BIG;
	char *buf = wr_malloc(total);
	if (!buf)
		return -ENOMEM;
	struct wr_proto_request_hdr hdr = {
	    .magic = WR_PROTO_MAGIC,
	    .version = WR_PROTO_VERSION,
	    .flags = flags,
	    .argc = (uint32_t)argc,
	    .envc = (uint32_t)envc,
	    .strings_len = (uint32_t)bytes,
	    .rows = rows,
	    .cols = cols,
	};
	memcpy(buf, &hdr, sizeof(hdr));
	char *p = buf + sizeof(hdr);
	size_t len = strlen(cwd) + 1;
	memcpy(p, cwd, len);
	p += len;
	for (size_t i = 0; i < argc; i++) {
		len = strlen(argv[i]) + 1;
		memcpy(p, argv[i], len);
		p += len;
	}
	for (size_t i = 0; i < envc; i++) {
		len = strlen(env[i]) + 1;
		memcpy(p, env[i], len);
		p += len;
	}
	*out = buf;
	*out_len = total;
	return 0;
}

/* Takes `count` NUL-terminated strings from [*p, end) into a new
 * NULL-terminated array. */
static int take_strings(const char **p, const char *end, uint32_t count,
			char ***out)
{
	char **list = wr_calloc((size_t)count + 1, sizeof(char *));
	if (!list)
		return -ENOMEM;
	for (uint32_t i = 0; i < count; i++) {
		const char *nul = memchr(*p, '\0', (size_t)(end - *p));
		if (!nul) {
			free(list);
			return -EBADMSG;
		}
		list[i] = (char *)*p;
		*p = nul + 1;
	}
	*out = list;
	return 0;
}

int wr_proto_parse_request(const void *buf, size_t len,
			   struct wr_proto_request *out)
{
	struct wr_proto_request_hdr hdr;
	if (len < sizeof(hdr) || len > WR_PROTO_MAX_REQUEST)
		return -EBADMSG;
	memcpy(&hdr, buf, sizeof(hdr));
	if (hdr.magic != WR_PROTO_MAGIC || hdr.version != WR_PROTO_VERSION)
		return -EBADMSG;
	if (hdr.flags & ~WR_PROTO_FLAG_TTY)
		return -EBADMSG;
	if (hdr.argc == 0 || hdr.argc > WR_PROTO_MAX_ARGS ||
	    hdr.envc > WR_PROTO_MAX_ENV)
		return -EBADMSG;
	if (hdr.strings_len != len - sizeof(hdr))
		return -EBADMSG;
	const char *p = (const char *)buf + sizeof(hdr);
	const char *end = (const char *)buf + len;
	const char *nul = memchr(p, '\0', (size_t)(end - p));
	if (!nul)
		return -EBADMSG;
	const char *cwd = p;
	if (cwd[0] != '/')
		return -EBADMSG;
	p = nul + 1;
	char **argv = NULL, **env = NULL;
	int r = take_strings(&p, end, hdr.argc, &argv);
	if (r < 0)
		return r;
	if (argv[0][0] == '\0') {
		free(argv);
		return -EBADMSG;
	}
	r = take_strings(&p, end, hdr.envc, &env);
	if (r < 0) {
		free(argv);
		return r;
	}
	if (p != end) { /* trailing bytes: not what the header promised */
		free(argv);
		free(env);
		return -EBADMSG;
	}
	for (uint32_t i = 0; i < hdr.envc; i++) {
		if (!strchr(env[i], '=') || env[i][0] == '=') {
			free(argv);
			free(env);
			return -EBADMSG;
		}
	}
	out->flags = hdr.flags;
	out->rows = hdr.rows;
	out->cols = hdr.cols;
	out->cwd = cwd;
	out->argv = argv;
	out->env = env;
	return 0;
}

void wr_proto_request_clear(struct wr_proto_request *req)
{
	if (!req)
		return;
	free(req->argv);
	free(req->env);
	req->argv = NULL;
	req->env = NULL;
}

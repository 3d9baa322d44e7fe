/* proto.h - the exec protocol between a client (warren) and warren-init.
 *
 * One SOCK_SEQPACKET connection per command. The client sends one request:
 * a fixed header followed by NUL-terminated strings (cwd, argv..., env...),
 * with its stdin/stdout/stderr attached as SCM_RIGHTS (unless a TTY is
 * requested). Init answers STARTED (with the pty master attached for a TTY),
 * then EXIT with the exact status. The client may send SIGNAL while the
 * command runs; closing the connection kills the command's process group.
 * Passing descriptors means output streams as it is written, with no copy
 * through init. Every length is checked against caps: a malformed request is
 * rejected, never trusted. */
#ifndef WR_SANDBOX_PROTO_H
#define WR_SANDBOX_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define WR_PROTO_MAGIC 0x57524e31u /* "WRN1" */
#define WR_PROTO_VERSION 1
#define WR_PROTO_MAX_REQUEST (64 * 1024)
#define WR_PROTO_MAX_ARGS 4096
#define WR_PROTO_MAX_ENV 4096
#define WR_PROTO_FLAG_TTY 0x1u

struct wr_proto_request_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t flags;
	uint32_t argc;
	uint32_t envc;
	uint32_t strings_len; /* bytes following the header */
	uint16_t rows, cols;  /* initial terminal size (TTY only) */
};

enum wr_proto_msg_type {
	WR_MSG_STARTED = 1, /* value: pid inside the sandbox */
	WR_MSG_EXIT,	    /* value: exit code (128+N if killed by signal N) */
	WR_MSG_ERROR,	    /* value: errno; text: what failed */
	WR_MSG_SIGNAL,	    /* client -> init; value: signal number */
	WR_MSG_MAX,
};

struct wr_proto_msg {
	uint32_t type;
	int32_t value;
	char text[240];
};

/* A parsed request; the strings point into the caller's buffer. */
struct wr_proto_request {
	uint16_t flags;
	uint16_t rows, cols;
	const char *cwd;
	char **argv; /* NULL-terminated, allocated */
	char **env;  /* NULL-terminated, allocated */
};

/* Serialises a request into a new buffer. Returns 0 or -errno
 * (-E2BIG past the caps). */
int wr_proto_build_request(const char *cwd, char *const argv[],
			   char *const env[], uint16_t flags, uint16_t rows,
			   uint16_t cols, void **out, size_t *out_len);
/* Parses and validates a request; -EBADMSG on malformed input. */
int wr_proto_parse_request(const void *buf, size_t len,
			   struct wr_proto_request *out);
void wr_proto_request_clear(struct wr_proto_request *req);

#endif

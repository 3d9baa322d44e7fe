/* tools_internal.h - what the tool implementations share (tools.c,
 * tools_fs.c, tools_run.c); not part of the module's interface. */
#ifndef WR_AGENT_TOOLS_INTERNAL_H
#define WR_AGENT_TOOLS_INTERNAL_H

#include "agent/tools.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOOLS_DEFAULT_MAX_OUTPUT (16u << 10)
#define TOOLS_DEFAULT_BASH_TIMEOUT_MS (120ull * 1000)
#define TOOLS_MAX_BASH_TIMEOUT_MS (30ull * 60 * 1000)
#define TOOLS_DEFAULT_LIST_MAX 1000
/* How much of a command's output is captured before the model's cut (head
 * and tail of this); beyond it output is read and dropped. */
#define TOOLS_CAPTURE_MAX (4u << 20)
/* Files larger than this are read in part (read_file) or not edited. */
#define TOOLS_FILE_MAX (8u << 20)
/* File operations (cat, realpath, find) should be quick. */
#define TOOLS_FS_TIMEOUT_MS (60ull * 1000)

/* One call in progress. */
struct tools_ctx {
	const struct tools_config *cfg;
	const struct tools_exec *ex;
	size_t max_output; /* cfg's, or the default */
	const char *name;  /* the tool's name */
	struct tools_call_result *res;
	struct wr_error **err;
};

/* A growing byte string; an allocation failure is remembered and
 * reported by tools_reply. */
struct tbuf {
	char *s;
	size_t len, cap;
	bool failed;
};

void tbuf_add(struct tbuf *b, const void *data, size_t len);
void tbuf_puts(struct tbuf *b, const char *s);
void tbuf_printf(struct tbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* data, or when longer than max its head and tail around a line
 * "[... N bytes cut ...]" (cut at line ends where one is near). */
void tbuf_add_cut(struct tbuf *b, const char *data, size_t len, size_t max);
void tbuf_free(struct tbuf *b);

/* Sets the call's content from b (made valid UTF-8) and frees b. 0, or
 * -ENOMEM (err set). */
int tools_reply(struct tools_ctx *c, struct tbuf *b);
/* Sets the content to "Error: <tool>: <message>" (the model's call was
 * wrong). Returns 1 (handled), or -ENOMEM. */
int tools_bad(struct tools_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Runs argv through the exec path. 0, or -errno with err set. */
int tools_exec_run(struct tools_ctx *c, char *const argv[], const void *in,
		   size_t in_len, uint64_t timeout_ms, size_t max,
		   struct tools_exec_result *out);
/* The first line of a command's stderr (or stdout), for an error
 * message; "" if there is none. Points into r; *len its length. */
const char *tools_first_line(const struct tools_exec_result *r, size_t *len);

/* Arguments. Each returns 0 (value taken; *out NULL or *present false
 * when an optional one is absent), 1 when the argument is wrong (content
 * set), or -ENOMEM. */
int tools_arg_string(struct tools_ctx *c, const json_t *args, const char *key,
		     bool required, const char **out, size_t *len);
int tools_arg_uint(struct tools_ctx *c, const json_t *args, const char *key,
		   uint64_t min, uint64_t max, bool *present, uint64_t *out);

/* The tools (tools_fs.c, tools_run.c): 0 when handled (content set), 1
 * likewise for a bad call, -errno when the sandbox could not be reached. */
int tools_read_file(struct tools_ctx *c, const json_t *args);
int tools_write_file(struct tools_ctx *c, const json_t *args);
int tools_edit_file(struct tools_ctx *c, const json_t *args);
int tools_list_files(struct tools_ctx *c, const json_t *args);
int tools_bash(struct tools_ctx *c, const json_t *args);
int tools_run_verify(struct tools_ctx *c, const json_t *args);
int tools_screenshot(struct tools_ctx *c, const json_t *args);
int tools_finish(struct tools_ctx *c, const json_t *args);

/* list_files' glob: '*' and '?' stay within a path component, '**'
 * crosses them (and '**' before a '/' may match nothing), [...] classes, '\'
 * escapes. Non-static for the unit test. */
bool tools_glob_match(const char *pattern, const char *path);

#endif

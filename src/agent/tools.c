/* tools.c - the agent's tools: their definitions for the model, the
 * dispatch of a call, and what the tools share (see tools.h; the tools
 * themselves are in tools_fs.c and tools_run.c). */
#include "agent/tools_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- definitions ---------------------------------------------------------
 * One JSON text, checked by the unit test; descriptions say what the model
 * must know to call each tool right the first time. */
static const char definitions[] =
    "["
    "{\"type\": \"function\", \"function\": {\"name\": \"bash\","
    " \"description\": \"Run a shell command in /workspace inside the "
    "sandbox (bash -c, or sh -c where bash is missing). stdout and stderr "
    "are merged; the result starts with the exit status. Long output is "
    "cut in the middle (its head and tail are kept). stdin is empty and "
    "there is no network. The command is killed after timeout_s seconds "
    "(default 120, at most 1800) and its status is then 124. A background "
    "job must redirect its output (cmd >/tmp/log 2>&1 &).\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {"
    "\"command\": {\"type\": \"string\", \"description\": \"the shell "
    "command line\"},"
    "\"timeout_s\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": "
    "1800, \"description\": \"seconds before the command is killed "
    "(default 120)\"}},"
    " \"required\": [\"command\"], \"additionalProperties\": false}}},"

    "{\"type\": \"function\", \"function\": {\"name\": \"read_file\","
    " \"description\": \"Read a text file. Every line comes prefixed with "
    "its number and a tab; the prefix is not part of the file (leave it "
    "out of edit_file's old_text). For a long file give start_line and "
    "end_line (1-based, inclusive). Relative paths are relative to "
    "/workspace.\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {"
    "\"path\": {\"type\": \"string\", \"description\": \"the file\"},"
    "\"start_line\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"description\": \"first line to show (default 1)\"},"
    "\"end_line\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"description\": \"last line to show (default: the end)\"}},"
    " \"required\": [\"path\"], \"additionalProperties\": false}}},"

    "{\"type\": \"function\", \"function\": {\"name\": \"write_file\","
    " \"description\": \"Create a file, or replace its whole content. "
    "Missing parent directories are created. Only files under /workspace "
    "can be written; relative paths are relative to /workspace. To change "
    "part of an existing file, prefer edit_file.\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {"
    "\"path\": {\"type\": \"string\", \"description\": \"the file\"},"
    "\"content\": {\"type\": \"string\", \"description\": \"the complete "
    "new content\"}},"
    " \"required\": [\"path\", \"content\"], \"additionalProperties\": "
    "false}}},"

    "{\"type\": \"function\", \"function\": {\"name\": \"edit_file\","
    " \"description\": \"Replace one exact occurrence of old_text with "
    "new_text in a file under /workspace. old_text must match the file "
    "byte for byte (whitespace and indentation included, without "
    "read_file's line-number prefixes) and occur exactly once: include a "
    "few surrounding lines to make it unique. Nothing changes when it is "
    "absent or occurs more than once.\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {"
    "\"path\": {\"type\": \"string\", \"description\": \"the file\"},"
    "\"old_text\": {\"type\": \"string\", \"description\": \"the exact "
    "text to replace (not empty)\"},"
    "\"new_text\": {\"type\": \"string\", \"description\": \"the "
    "replacement (may be empty)\"}},"
    " \"required\": [\"path\", \"old_text\", \"new_text\"], "
    "\"additionalProperties\": false}}},"

    "{\"type\": \"function\", \"function\": {\"name\": \"list_files\","
    " \"description\": \"List the files under /workspace (not "
    "directories; .git excluded), sorted, as paths relative to "
    "/workspace. pattern is a glob: * and ? stay within a directory, ** "
    "crosses directories (src/**.c, **/test_*.py); a pattern without / "
    "matches file names at any depth (*.md, Makefile). Long listings are "
    "capped: narrow the pattern.\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {"
    "\"pattern\": {\"type\": \"string\", \"description\": \"glob (default: "
    "every file)\"}},"
    " \"additionalProperties\": false}}},"

    "{\"type\": \"function\", \"function\": {\"name\": \"run_verify\","
    " \"description\": \"Run the project's verification commands, the "
    "same ones Warren runs after you finish, and show each one's exit "
    "status and output.\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {},"
    " \"additionalProperties\": false}}},"

    "{\"type\": \"function\", \"function\": {\"name\": \"screenshot\","
    " \"description\": \"Take a 1280x800 PNG screenshot of a web page with "
    "headless Chromium inside the sandbox; it is kept as an artifact for "
    "the reviewer. The sandbox has no outside network: use "
    "http://localhost:PORT/... for a server running in the sandbox, or the "
    "path (or file:// URL) of an HTML file.\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {"
    "\"url\": {\"type\": \"string\", \"description\": \"the page\"},"
    "\"name\": {\"type\": \"string\", \"description\": \"artifact name: "
    "letters, digits, '.', '_', '-' (default: screenshot)\"}},"
    " \"required\": [\"url\"], \"additionalProperties\": false}}},"

    "{\"type\": \"function\", \"function\": {\"name\": \"finish\","
    " \"description\": \"Call once the work is complete. The summary says "
    "what you changed and why, in a few lines: it becomes the commit "
    "message the reviewer reads.\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {"
    "\"summary\": {\"type\": \"string\", \"description\": \"what changed "
    "and why\"}},"
    " \"required\": [\"summary\"], \"additionalProperties\": false}}}"
    "]";

json_t *tools_definitions(void)
{
	return json_loads(definitions, 0, NULL);
}

/* ---- dispatch ------------------------------------------------------------ */

struct tool {
	const char *name;
	int (*run)(struct tools_ctx *c, const json_t *args);
	const char *example; /* arguments, for a malformed call */
};

static const struct tool tools[] = {
    {"bash", tools_bash, "{\"command\": \"make test\"}"},
    {"read_file", tools_read_file,
     "{\"path\": \"src/main.c\", \"start_line\": 1, \"end_line\": 80}"},
    {"write_file", tools_write_file,
     "{\"path\": \"notes.txt\", \"content\": \"hello\\n\"}"},
    {"edit_file", tools_edit_file,
     "{\"path\": \"src/main.c\", \"old_text\": \"return 1;\", "
     "\"new_text\": \"return 0;\"}"},
    {"list_files", tools_list_files, "{\"pattern\": \"src/**.c\"}"},
    {"run_verify", tools_run_verify, "{}"},
    {"screenshot", tools_screenshot,
     "{\"url\": \"http://localhost:8080/\", \"name\": \"home\"}"},
    {"finish", tools_finish, "{\"summary\": \"Fixed the off-by-one.\"}"},
};

static bool blank(const char *s)
{
	for (; s && *s; s++) {
		if (!strchr(" \t\r\n", *s))
			return false;
	}
	return true;
}

int tools_call(const struct tools_config *cfg, const struct tools_exec *ex,
	       const char *name, const char *arguments,
	       struct tools_call_result *out, struct wr_error **err)
{
	struct tools_call_result res = {0};
	struct tools_ctx c = {
	    .cfg = cfg,
	    .ex = ex,
	    .max_output =
		cfg->max_output ? cfg->max_output : TOOLS_DEFAULT_MAX_OUTPUT,
	    .name = name,
	    .res = &res,
	    .err = err,
	};
	const struct tool *t = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(tools); i++) {
		if (name && !strcmp(name, tools[i].name))
			t = &tools[i];
	}
	int r;
	json_t *args = NULL;
	if (!t) {
		struct tbuf b = {0};
		tbuf_printf(&b,
			    "Error: there is no tool named \"%s\". The tools "
			    "are:",
			    name ? name : "");
		for (size_t i = 0; i < ARRAY_SIZE(tools); i++)
			tbuf_printf(&b, "%s %s", i ? "," : "", tools[i].name);
		tbuf_puts(&b, ".");
		r = tools_reply(&c, &b);
		goto out;
	}
	if (blank(arguments)) {
		args = json_object();
	} else {
		json_error_t jerr;
		/* NUL allowed here so that a path holding one is refused by
		 * name rather than cut short */
		args = json_loads(arguments, JSON_ALLOW_NUL, &jerr);
		if (!args) {
			r = tools_bad(
			    &c,
			    "the arguments are not valid JSON (%s, at "
			    "line %d, column %d). Send one JSON object, "
			    "for example %s",
			    jerr.text, jerr.line, jerr.column, t->example);
			goto out;
		}
	}
	if (!args) {
		r = wr_error_set(err, ENOMEM, "tool %s", name);
		goto out;
	}
	if (!json_is_object(args)) {
		r = tools_bad(
		    &c,
		    "the arguments must be a JSON object, for example "
		    "%s",
		    t->example);
		goto out;
	}
	r = t->run(&c, args);
	if (r < 0)
		wr_error_wrap(err, "tool %s", name);
out:
	json_decref(args);
	if (r < 0) {
		tools_call_result_clear(&res);
		return r;
	}
	*out = res;
	return 0;
}

void tools_call_result_clear(struct tools_call_result *r)
{
	if (!r)
		return;
	free(r->content);
	free(r->summary);
	free(r->artifact);
	*r = (struct tools_call_result){0};
}

void tools_exec_result_clear(struct tools_exec_result *r)
{
	if (!r)
		return;
	free(r->out);
	free(r->err);
	*r = (struct tools_exec_result){0};
}

/* ---- text ---------------------------------------------------------------- */

static bool tbuf_reserve(struct tbuf *b, size_t more)
{
	if (b->failed)
		return false;
	if (b->len + more + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + more + 1)
		cap *= 2;
	char *s = wr_realloc(b->s, cap);
	if (!s) {
		b->failed = true;
		return false;
	}
	b->s = s;
	b->cap = cap;
	return true;
}

void tbuf_add(struct tbuf *b, const void *data, size_t len)
{
	if (!tbuf_reserve(b, len))
		return;
	if (len)
		memcpy(b->s + b->len, data, len);
	b->len += len;
	b->s[b->len] = '\0';
}

void tbuf_puts(struct tbuf *b, const char *s)
{
	tbuf_add(b, s, strlen(s));
}

void tbuf_printf(struct tbuf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = wr_vasprintf(fmt, ap);
	va_end(ap);
	if (!s) {
		b->failed = true;
		return;
	}
	tbuf_puts(b, s);
	free(s);
}

void tbuf_free(struct tbuf *b)
{
	free(b->s);
	*b = (struct tbuf){0};
}

/* How far a cut may move to land on a line end. */
#define CUT_SLACK 256

void tbuf_add_cut(struct tbuf *b, const char *data, size_t len, size_t max)
{
	if (len <= max) {
		tbuf_add(b, data, len);
		return;
	}
	size_t head = max / 2, tail = len - (max - head);
	/* end the head after a newline, start the tail after one */
	for (size_t i = head; i > 0 && head - i < CUT_SLACK; i--) {
		if (data[i - 1] == '\n') {
			head = i;
			break;
		}
	}
	for (size_t i = tail; i < len && i - tail < CUT_SLACK; i++) {
		if (data[i] == '\n') {
			tail = i + 1;
			break;
		}
	}
	/* and never inside a UTF-8 sequence */
	while (head > 0 && ((unsigned char)data[head] & 0xC0) == 0x80)
		head--;
	while (tail < len && ((unsigned char)data[tail] & 0xC0) == 0x80)
		tail++;
	tbuf_add(b, data, head);
	if (head && data[head - 1] != '\n')
		tbuf_puts(b, "\n");
	tbuf_printf(b, "[... %zu bytes cut ...]\n", tail - head);
	tbuf_add(b, data + tail, len - tail);
}

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF), 0 if there is none; NUL counts as
 * invalid (the content is a C string). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	if (c >= 0x01 && c < 0x80)
		return 1;
	size_t need;
	unsigned char lo = 0x80, hi = 0xBF;
	if (c >= 0xC2 && c <= 0xDF)
		need = 1;
	else if (c >= 0xE0 && c <= 0xEF) {
		need = 2;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 3;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else
		return 0;
	if (n < need + 1 || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i <= need; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
	}
	return need + 1;
}

int tools_reply(struct tools_ctx *c, struct tbuf *b)
{
	if (b->failed) {
		tbuf_free(b);
		return wr_error_set(c->err, ENOMEM, "tool %s: reply", c->name);
	}
	struct tbuf clean = {0};
	const unsigned char *s = (const unsigned char *)(b->s ? b->s : "");
	size_t i = 0, len = b->len;
	while (i < len) {
		size_t start = i;
		size_t k;
		while (i < len && (k = utf8_seq(s + i, len - i)) > 0)
			i += k;
		tbuf_add(&clean, s + start, i - start);
		if (i < len) {
			tbuf_puts(&clean, "\xEF\xBF\xBD"); /* U+FFFD */
			i++;
		}
	}
	tbuf_free(b);
	if (!clean.s)
		tbuf_puts(&clean, "");
	if (clean.failed) {
		tbuf_free(&clean);
		return wr_error_set(c->err, ENOMEM, "tool %s: reply", c->name);
	}
	free(c->res->content);
	c->res->content = TAKE_PTR(clean.s);
	return 0;
}

int tools_bad(struct tools_ctx *c, const char *fmt, ...)
{
	struct tbuf b = {0};
	tbuf_printf(&b, "Error: %s: ", c->name);
	va_list ap;
	va_start(ap, fmt);
	char *msg = wr_vasprintf(fmt, ap);
	va_end(ap);
	if (!msg)
		b.failed = true;
	else
		tbuf_puts(&b, msg);
	if (msg && (!*msg || msg[strlen(msg) - 1] != '\n'))
		tbuf_puts(&b, "\n");
	free(msg);
	int r = tools_reply(c, &b);
	return r < 0 ? r : 1;
}

/* ---- exec and arguments -------------------------------------------------- */

int tools_exec_run(struct tools_ctx *c, char *const argv[], const void *in,
		   size_t in_len, uint64_t timeout_ms, size_t max,
		   struct tools_exec_result *out)
{
	return c->ex->run(c->ex->ctx, argv, in, in_len, timeout_ms, max, out,
			  c->err);
}

const char *tools_first_line(const struct tools_exec_result *r, size_t *len)
{
	const char *s = r->err && r->err_len ? r->err : r->out;
	if (!s) {
		*len = 0;
		return "";
	}
	while (*s == '\n')
		s++;
	*len = strcspn(s, "\n");
	return s;
}

int tools_arg_string(struct tools_ctx *c, const json_t *args, const char *key,
		     bool required, const char **out, size_t *len)
{
	json_t *v = json_object_get(args, key);
	if (!v || json_is_null(v)) {
		if (required)
			return tools_bad(c, "\"%s\" is required (a string)",
					 key);
		*out = NULL;
		if (len)
			*len = 0;
		return 0;
	}
	if (!json_is_string(v))
		return tools_bad(c, "\"%s\" must be a string", key);
	*out = json_string_value(v);
	if (len)
		*len = json_string_length(v);
	return 0;
}

int tools_arg_uint(struct tools_ctx *c, const json_t *args, const char *key,
		   uint64_t min, uint64_t max, bool *present, uint64_t *out)
{
	json_t *v = json_object_get(args, key);
	*present = false;
	if (!v || json_is_null(v))
		return 0;
	double d;
	/* models send 10, 10.0 or "10" */
	if (json_is_integer(v))
		d = (double)json_integer_value(v);
	else if (json_is_real(v))
		d = json_real_value(v);
	else if (json_is_string(v)) {
		char *end;
		errno = 0;
		d = strtod(json_string_value(v), &end);
		if (end == json_string_value(v) || *end || errno)
			d = -1;
	} else
		d = -1;
	/* in range first (NaN fails too): only then is the cast defined */
	if (!(d >= (double)min && d <= (double)max) || d != (double)(uint64_t)d)
		return tools_bad(c,
				 "\"%s\" must be a whole number from %llu to "
				 "%llu",
				 key, (unsigned long long)min,
				 (unsigned long long)max);
	*out = (uint64_t)d;
	*present = true;
	return 0;
}

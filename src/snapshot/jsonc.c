/* jsonc.c - JSON with comments and trailing commas (the devcontainer.json
 * dialect) turned into plain JSON for jansson.
 *
 * Not a parser: a single pass that only needs to know whether it is inside a
 * string, a line comment or a block comment. Everything it removes becomes a
 * space of the same size (newlines in block comments stay), so the output
 * has the input's length and jansson's line and column numbers point into
 * the user's file. */
#include "snapshot/spec.h"

#include "util/alloc.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

enum jsonc_state {
	JSONC_CODE,
	JSONC_STRING,
	JSONC_LINE_COMMENT,
	JSONC_BLOCK_COMMENT,
	JSONC_STATE_MAX,
};

static int is_json_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int spec_jsonc_to_json(const char *in, size_t len, char **out, size_t *out_len,
		       struct wr_error **err)
{
	if (len >= SIZE_MAX)
		return wr_error_input(err, 0, "JSONC input too large");
	char *buf = wr_malloc(len + 1);
	if (!buf)
		return wr_error_set(err, ENOMEM, "convert JSONC");

	enum jsonc_state state = JSONC_CODE;
	size_t line = 1, start_line = 0;
	/* where the last significant character of the output is a comma that
	 * follows a value, its position: a } or ] that follows blanks it out.
	 * Other commas ("[,]", "[1,,]") are left for jansson to report. */
	size_t comma = SIZE_MAX;
	char last = '\0'; /* the last significant character */
	size_t i = 0;

	/* a UTF-8 byte order mark, which editors on some systems write and
	 * jansson refuses */
	if (len >= 3 && memcmp(in, "\xef\xbb\xbf", 3) == 0) {
		memset(buf, ' ', 3);
		i = 3;
	}
	for (; i < len; i++) {
		char c = in[i];
		char next = i + 1 < len ? in[i + 1] : '\0';
		if (c == '\n')
			line++;
		switch (state) {
		case JSONC_CODE:
			if (c == '/' && (next == '/' || next == '*')) {
				buf[i] = buf[i + 1] = ' ';
				i++;
				start_line = line;
				state = next == '/' ? JSONC_LINE_COMMENT
						    : JSONC_BLOCK_COMMENT;
				break;
			}
			buf[i] = c;
			if (is_json_space(c))
				break;
			if (c == ',' && last != ',' && last != '[' &&
			    last != '{' && last != ':' && last != '\0') {
				comma = i;
			} else {
				if ((c == '}' || c == ']') && comma != SIZE_MAX)
					buf[comma] = ' ';
				comma = SIZE_MAX;
			}
			if (c == '"') {
				start_line = line;
				state = JSONC_STRING;
			}
			last = c;
			break;
		case JSONC_STRING:
			buf[i] = c;
			if (c == '\\' && i + 1 < len) {
				/* the escaped character, whatever it is, cannot
				 * end the string */
				buf[++i] = next;
				if (next == '\n')
					line++;
			} else if (c == '"') {
				state = JSONC_CODE;
			}
			break;
		case JSONC_LINE_COMMENT:
			if (c == '\n') {
				buf[i] = '\n';
				state = JSONC_CODE;
			} else {
				buf[i] = ' ';
			}
			break;
		case JSONC_BLOCK_COMMENT:
			if (c == '*' && next == '/') {
				buf[i] = buf[i + 1] = ' ';
				i++;
				state = JSONC_CODE;
			} else {
				/* keep line breaks so that line numbers hold */
				buf[i] = c == '\n' || c == '\r' ? c : ' ';
			}
			break;
		case JSONC_STATE_MAX: break;
		}
	}
	if (state == JSONC_STRING || state == JSONC_BLOCK_COMMENT) {
		free(buf);
		return wr_error_input(
		    err, 0, "line %zu: unterminated %s", start_line,
		    state == JSONC_STRING ? "string" : "comment");
	}
	buf[len] = '\0';
	*out = buf;
	if (out_len)
		*out_len = len;
	return 0;
}

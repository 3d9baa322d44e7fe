/* fuzz_gitpath.c - libFuzzer target for git_unquote_path (snapshot/git.c):
 * the paths of a snapshot build's outputs come back from the build's
 * sandbox as git's quoted records and are unquoted on the host.
 *
 * Properties that must hold for any input (abort() keeps the input):
 *   - the input as a record: unquoting returns NULL or a string no longer
 *     than the record, and never crashes or leaks (ASan/UBSan);
 *   - the input as a path (bytes up to the first NUL): quoted the way git
 *     quotes it (core.quotePath), then unquoted, it comes back exactly. */
#include "snapshot/git.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_gitpath: %s\n", what);
		abort();
	}
}

/* git's quote_c_style: control bytes, '"', '\\' and bytes >= 0x80
 * escaped; quotes only when something needed escaping. */
static char *quote(const char *path)
{
	size_t len = strlen(path);
	char *out = malloc(len * 4 + 3);
	if (!out)
		return NULL;
	char *o = out;
	int needed = 0;
	*o++ = '"';
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		static const char named[] = "\a\b\t\n\v\f\r";
		static const char letters[] = "abtnvfr";
		const char *k = *p ? strchr(named, *p) : NULL;
		if (k) {
			*o++ = '\\';
			*o++ = letters[k - named];
			needed = 1;
		} else if (*p == '"' || *p == '\\') {
			*o++ = '\\';
			*o++ = (char)*p;
			needed = 1;
		} else if (*p < 0x20 || *p >= 0x7f) {
			o += sprintf(o, "\\%03o", *p);
			needed = 1;
		} else {
			*o++ = (char)*p;
		}
	}
	*o++ = '"';
	*o = '\0';
	if (!needed) {
		memmove(out, out + 1, len);
		out[len] = '\0';
	}
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	char *plain = git_unquote_path(text);
	check(!plain || strlen(plain) <= strlen(text),
	      "unquoted longer than the record");
	free(plain);

	/* a path of the input's bytes (git never prints an empty one) */
	if (text[0]) {
		char *quoted = quote(text);
		if (quoted) {
			char *back = git_unquote_path(quoted);
			check(back && !strcmp(back, text),
			      "quote then unquote changed the path");
			free(back);
			free(quoted);
		}
	}
	free(text);
	return 0;
}

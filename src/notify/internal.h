/* internal.h - what the files of src/notify share: a bounded text buffer
 * and the UTF-8 check. Nothing here leaves the module. */
#ifndef WR_NOTIFY_INTERNAL_H
#define WR_NOTIFY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

/* The length of the valid UTF-8 sequence at s (1 for ASCII), 0 if s
 * does not start one (overlong forms, surrogates and code points past
 * U+10FFFF are not valid). left: the bytes available, at least 1. */
size_t slack_utf8_seq(const unsigned char *s, size_t left);
/* Is s[0..len) all valid UTF-8? */
bool slack_utf8_valid(const char *s, size_t len);

/* A growing text, NUL-terminated once anything was added. Appending past
 * cap bytes (or failing to allocate) sets failed and adds nothing more:
 * the caller checks once, at the end. */
struct slack_buf {
	char *data;
	size_t len, size, cap;
	bool failed;
};
void slack_buf_add(struct slack_buf *b, const char *s, size_t n);
void slack_buf_puts(struct slack_buf *b, const char *s);
void slack_buf_printf(struct slack_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The text (caller frees), or NULL if anything failed (b is freed). */
char *slack_buf_take(struct slack_buf *b);
void slack_buf_clear(struct slack_buf *b);

#endif

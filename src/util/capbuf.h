/* capbuf.h - a growing byte buffer with a cap: what a libcurl client
 * reads a response into.
 *
 * Appending past max bytes, or failing to allocate, appends nothing and
 * is remembered: every later append fails the same way, so a caller may
 * check once, at the end (overflow tells which). Once anything was
 * appended (even 0 bytes) data is NUL-terminated, so a text body can be
 * used as a string; it may hold NULs of its own (use len). */
#ifndef WR_UTIL_CAPBUF_H
#define WR_UTIL_CAPBUF_H

#include <stdbool.h>
#include <stddef.h>

struct capbuf {
	char *data; /* NULL until the first append */
	size_t len;
	size_t size;   /* allocated, the NUL included */
	size_t max;    /* the cap on len */
	bool overflow; /* an append went past max */
	bool nomem;    /* an allocation failed */
};

#define CAPBUF_INIT(cap) ((struct capbuf){.max = (cap)})

/* 0; -E2BIG past max (overflow set), -ENOMEM (nomem set); after either,
 * every append returns it again and adds nothing. */
int capbuf_append(struct capbuf *b, const void *src, size_t n);
int capbuf_puts(struct capbuf *b, const char *s);
/* Did an append fail? */
bool capbuf_failed(const struct capbuf *b);
/* Frees the data: the buffer is empty again, ready for reuse (max kept,
 * failures forgotten). */
void capbuf_free(struct capbuf *b);
/* The data (caller frees; "" if nothing was appended), the buffer left
 * empty; NULL if an append failed (or the "" cannot be allocated), the
 * buffer freed. */
char *capbuf_take(struct capbuf *b);

/* A libcurl CURLOPT_WRITEFUNCTION for CURLOPT_WRITEDATA = a struct capbuf:
 * the bytes appended, or 0 (which stops the transfer with
 * CURLE_WRITE_ERROR) when they do not fit or cannot be allocated. No
 * libcurl header needed: the signature is curl_write_callback's. */
size_t capbuf_curl_write(char *ptr, size_t size, size_t nmemb, void *ud);

#endif

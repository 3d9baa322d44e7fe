/* capbuf.c - a growing byte buffer with a cap (capbuf.h). */
#include "util/capbuf.h"

#include "util/alloc.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CAPBUF_FIRST 256

static int failure(const struct capbuf *b)
{
	return b->overflow ? -E2BIG : -ENOMEM;
}

bool capbuf_failed(const struct capbuf *b)
{
	return b->overflow || b->nomem;
}

/* Room for need bytes (the NUL included): doubling, never past max + 1. */
static int grow(struct capbuf *b, size_t need)
{
	size_t size = b->size ? b->size : CAPBUF_FIRST;
	while (size < need)
		size = size > SIZE_MAX / 2 ? need : size * 2;
	if (b->max < SIZE_MAX && size > b->max + 1)
		size = b->max + 1; /* need <= max + 1: appends check it */
	char *grown = wr_realloc(b->data, size);
	if (!grown) {
		b->nomem = true;
		return -ENOMEM;
	}
	b->data = grown;
	b->size = size;
	return 0;
}

int capbuf_append(struct capbuf *b, const void *src, size_t n)
{
	if (capbuf_failed(b))
		return failure(b);
	if (n > b->max - b->len) {
		b->overflow = true;
		return -E2BIG;
	}
	/* the NUL must fit too (only a max of SIZE_MAX gets here) */
	if (b->len + n == SIZE_MAX) {
		b->overflow = true;
		return -E2BIG;
	}
	if (b->len + n + 1 > b->size && grow(b, b->len + n + 1) < 0)
		return -ENOMEM;
	if (n)
		memcpy(b->data + b->len, src, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int capbuf_puts(struct capbuf *b, const char *s)
{
	return capbuf_append(b, s, strlen(s));
}

void capbuf_free(struct capbuf *b)
{
	free(b->data);
	*b = CAPBUF_INIT(b->max);
}

char *capbuf_take(struct capbuf *b)
{
	if (!capbuf_failed(b) && !b->data)
		(void)capbuf_append(b, "", 0);
	char *data = capbuf_failed(b) ? NULL : b->data;
	if (!data)
		free(b->data);
	*b = CAPBUF_INIT(b->max);
	return data;
}

size_t capbuf_curl_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	/* libcurl promises size == 1; the product cannot wrap */
	size_t n = size * nmemb;
	return capbuf_append(ud, ptr, n) == 0 ? n : 0;
}

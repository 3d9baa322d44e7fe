/* internal.h - what the blobs module's files share: the token cache and a
 * token endpoint's answer (auth.c), the registry's error body
 * (manifest.c). */
#ifndef WR_BLOBS_INTERNAL_H
#define WR_BLOBS_INTERNAL_H

#include "blobs/blobs.h"

#include <stdint.h>

#define BLOBS_TOKEN_CACHE 8	    /* scopes held at once */
#define BLOBS_TOKEN_MAX (16u << 10) /* bytes of one token */

struct blobs_token_entry {
	char *scope; /* NULL: a free slot */
	char *token;
	int64_t expires_at; /* CLOCK_MONOTONIC seconds */
};

struct blobs_token_cache {
	struct blobs_token_entry e[BLOBS_TOKEN_CACHE];
};

/* A token endpoint's JSON answer: "token" (or "access_token"), visible
 * ASCII, and "expires_in" (default 60). -EBADMSG for anything else. */
int blobs_token_parse(const char *body, size_t len, char **token,
		      int64_t *expires_in);
/* The token cached for scope, NULL when none is or it expired. */
const char *blobs_token_lookup(struct blobs_token_cache *tc, const char *scope);
/* Caches token (taken over) for scope until a little before expires_in
 * seconds from now, in the slot of that scope, a free one or the one
 * that expires first; the token, or NULL (token freed) without memory. */
const char *blobs_token_store(struct blobs_token_cache *tc, const char *scope,
			      char *token, int64_t expires_in);
void blobs_token_cache_clear(struct blobs_token_cache *tc);

/* "CODE: message[; CODE: message...]" from a distribution error body
 * ({"errors": [{"code", "message"}]}), at most a few entries, control
 * characters dropped; NULL when the body is not one (caller frees). */
char *blobs_error_body_text(const char *body, size_t len);

#endif

/* auth.c - what the registry's auth needs apart from HTTP: the
 * WWW-Authenticate challenge parser (blobs.h), a token endpoint's answer,
 * and the tokens cached per scope until they expire (internal.h). */
#include "blobs/internal.h"

#include "util/alloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- the challenge (RFC 7235 section 2.1, RFC 7230 section 3.2.6) ------ */

static bool tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c);
}

/* a character a quoted string may hold as it is, or escaped */
static bool qchar(unsigned char c)
{
	return c == '\t' || c == ' ' || (c >= 0x21 && c <= 0x7e) || c >= 0x80;
}

static size_t skip_ows(const char *s, size_t len, size_t i)
{
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	return i;
}

static size_t skip_token(const char *s, size_t len, size_t i)
{
	while (i < len && s[i] && tchar((unsigned char)s[i]))
		i++;
	return i;
}

/* A parameter's value at *i into dst (cap bytes with the NUL), or NULL
 * dst to skip it. */
static int param_value(const char *s, size_t len, size_t *i, char *dst,
		       size_t cap)
{
	size_t n = 0, j = *i;
	bool too_long = false;
	if (j < len && s[j] == '"') {
		for (j++;; j++) {
			if (j >= len)
				return -EINVAL; /* no closing quote */
			unsigned char c = (unsigned char)s[j];
			if (c == '"')
				break;
			if (c == '\\') {
				if (++j >= len)
					return -EINVAL;
				c = (unsigned char)s[j];
			}
			if (!qchar(c))
				return -EINVAL;
			if (dst && n + 1 < cap)
				dst[n] = (char)c;
			else if (dst)
				too_long = true;
			n++;
		}
		j++;
	} else {
		size_t end = skip_token(s, len, j);
		if (end == j)
			return -EINVAL;
		n = end - j;
		if (dst && n + 1 <= cap)
			memcpy(dst, s + j, n);
		else if (dst)
			too_long = true;
		j = end;
	}
	if (too_long)
		return -E2BIG;
	if (dst)
		dst[n] = '\0';
	*i = j;
	return 0;
}

int blobs_challenge_parse(const char *value, size_t len,
			  struct blobs_challenge *out)
{
	struct blobs_challenge ch;
	memset(&ch, 0, sizeof(ch));
	size_t i = 0;
	/* the #rule allows empty list elements before the first */
	while (i < len &&
	       (value[i] == ',' || value[i] == ' ' || value[i] == '\t'))
		i++;
	size_t end = skip_token(value, len, i);
	if (end == i)
		return -EINVAL;
	size_t slen = end - i;
	if (slen == 5 && !strncasecmp(value + i, "Basic", 5))
		ch.scheme = BLOBS_AUTH_BASIC;
	else if (slen == 6 && !strncasecmp(value + i, "Bearer", 6))
		ch.scheme = BLOBS_AUTH_BEARER;
	else
		ch.scheme = BLOBS_AUTH_OTHER;
	i = end;
	if (i < len && value[i] != ' ' && value[i] != '\t' && value[i] != ',')
		return -EINVAL;
	bool seen[3] = {false, false, false};
	bool after_comma = i < len && value[i] == ',';
	i = skip_ows(value, len, i);
	while (i < len) {
		if (value[i] == ',') {
			after_comma = true;
			i = skip_ows(value, len, i + 1);
			continue;
		}
		size_t name = i;
		end = skip_token(value, len, i);
		if (end == name)
			return -EINVAL;
		size_t eq = skip_ows(value, len, end);
		if (eq >= len || value[eq] != '=') {
			/* a token with no '=' after a comma: the next
			 * challenge's scheme, where this one ends */
			if (after_comma)
				break;
			return -EINVAL;
		}
		size_t nlen = end - name;
		char *dst = NULL;
		size_t cap = 0;
		int which = -1;
		if (nlen == 5 && !strncasecmp(value + name, "realm", 5))
			which = 0, dst = ch.realm, cap = sizeof(ch.realm);
		else if (nlen == 7 && !strncasecmp(value + name, "service", 7))
			which = 1, dst = ch.service, cap = sizeof(ch.service);
		else if (nlen == 5 && !strncasecmp(value + name, "scope", 5))
			which = 2, dst = ch.scope, cap = sizeof(ch.scope);
		if (which >= 0) {
			if (seen[which])
				return -EINVAL;
			seen[which] = true;
		}
		i = skip_ows(value, len, eq + 1);
		int r = param_value(value, len, &i, dst, cap);
		if (r < 0)
			return r;
		i = skip_ows(value, len, i);
		if (i < len && value[i] != ',')
			return -EINVAL;
		after_comma = false;
	}
	*out = ch;
	return 0;
}

/* ---- a token endpoint's answer ----------------------------------------- */

int blobs_token_parse(const char *body, size_t len, char **token,
		      int64_t *expires_in)
{
	json_error_t jerr;
	json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return -EBADMSG;
	}
	/* "token", or OAuth2's "access_token" */
	const char *t = json_string_value(json_object_get(doc, "token"));
	if (!t || !*t)
		t = json_string_value(json_object_get(doc, "access_token"));
	json_t *exp = json_object_get(doc, "expires_in");
	int r = 0;
	if (!t || !*t || strlen(t) > BLOBS_TOKEN_MAX ||
	    (exp && (!json_is_integer(exp) || json_integer_value(exp) < 0))) {
		r = -EBADMSG;
		goto out;
	}
	/* it goes into a header line: visible ASCII only */
	for (const char *p = t; *p; p++)
		if (*p < 0x21 || *p > 0x7e) {
			r = -EBADMSG;
			goto out;
		}
	/* the spec's default when none is given */
	*expires_in = exp ? json_integer_value(exp) : 60;
	*token = wr_strdup(t);
	if (!*token)
		r = -ENOMEM;
out:
	json_decref(doc);
	return r;
}

/* ---- the tokens, per scope --------------------------------------------- */

static int64_t now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

static void entry_clear(struct blobs_token_entry *e)
{
	if (e->token) {
		explicit_bzero(e->token, strlen(e->token));
		free(e->token);
	}
	free(e->scope);
	memset(e, 0, sizeof(*e));
}

const char *blobs_token_lookup(struct blobs_token_cache *tc, const char *scope)
{
	int64_t now = now_s();
	for (size_t i = 0; i < BLOBS_TOKEN_CACHE; i++) {
		struct blobs_token_entry *e = &tc->e[i];
		if (!e->scope || strcmp(e->scope, scope))
			continue;
		if (now >= e->expires_at) {
			entry_clear(e);
			return NULL;
		}
		return e->token;
	}
	return NULL;
}

const char *blobs_token_store(struct blobs_token_cache *tc, const char *scope,
			      char *token, int64_t expires_in)
{
	/* a margin for the time the token took to come, and the request's */
	int64_t margin = expires_in > 20 ? 10 : expires_in / 2;
	struct blobs_token_entry *slot = NULL;
	for (size_t i = 0; i < BLOBS_TOKEN_CACHE && !slot; i++)
		if (tc->e[i].scope && !strcmp(tc->e[i].scope, scope))
			slot = &tc->e[i];
	for (size_t i = 0; i < BLOBS_TOKEN_CACHE && !slot; i++)
		if (!tc->e[i].scope)
			slot = &tc->e[i];
	if (!slot) /* full: the one that expires first goes */
		for (size_t i = 0; i < BLOBS_TOKEN_CACHE; i++)
			if (!slot || tc->e[i].expires_at < slot->expires_at)
				slot = &tc->e[i];
	char *scope_copy = wr_strdup(scope);
	if (!scope_copy) {
		explicit_bzero(token, strlen(token));
		free(token);
		return NULL;
	}
	entry_clear(slot);
	slot->scope = scope_copy;
	slot->token = token;
	slot->expires_at = now_s() + expires_in - margin;
	return token;
}

void blobs_token_cache_clear(struct blobs_token_cache *tc)
{
	for (size_t i = 0; i < BLOBS_TOKEN_CACHE; i++)
		entry_clear(&tc->e[i]);
}

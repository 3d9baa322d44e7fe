/* fuzz_blobs.c - libFuzzer target for what the registry client reads from
 * a registry (src/blobs/auth.c, manifest.c): a WWW-Authenticate value, a
 * token endpoint's answer, a manifest, an error body. abort()s on any
 * violated property:
 *
 * 1. The input as a challenge: blobs_challenge_parse returns 0, -EINVAL
 *    or -E2BIG; what it accepts has a known scheme and NUL-terminated
 *    fields within their caps; a Basic or Bearer one, written back as a
 *    challenge with its values quoted, parses to the same fields.
 * 2. The input as a token answer: an accepted token is 1 to
 *    BLOBS_TOKEN_MAX visible ASCII characters, its expiry not negative.
 * 3. The input as a manifest: an accepted one has 1 to BLOBS_LAYERS_MAX
 *    layers, valid digests and media types; built back into JSON it
 *    parses to the same descriptors, and builds to the same bytes.
 * 4. The input as an error body: the text, if any, has no control
 *    characters. */
#include "blobs/internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_blobs: %s\n", what);
		abort();
	}
}

/* value quoted, with '"' and '\' escaped */
static size_t quote(char *dst, const char *v)
{
	size_t n = 0;
	dst[n++] = '"';
	for (; *v; v++) {
		if (*v == '"' || *v == '\\')
			dst[n++] = '\\';
		dst[n++] = *v;
	}
	dst[n++] = '"';
	return n;
}

static void fuzz_challenge(const char *buf, size_t size)
{
	struct blobs_challenge ch;
	int r = blobs_challenge_parse(buf, size, &ch);
	check(r == 0 || r == -EINVAL || r == -E2BIG, "challenge: an errno");
	if (r < 0)
		return;
	check(ch.scheme < BLOBS_AUTH_MAX, "challenge: the scheme");
	check(memchr(ch.realm, 0, sizeof(ch.realm)) &&
		  memchr(ch.service, 0, sizeof(ch.service)) &&
		  memchr(ch.scope, 0, sizeof(ch.scope)),
	      "challenge: NUL-terminated");
	if (ch.scheme == BLOBS_AUTH_OTHER)
		return;
	static char
	    text[2 * (BLOBS_REALM_MAX + BLOBS_SERVICE_MAX + BLOBS_SCOPE_MAX) +
		 64];
	size_t n = (size_t)sprintf(
	    text,
	    "%s realm=", ch.scheme == BLOBS_AUTH_BASIC ? "Basic" : "Bearer");
	n += quote(text + n, ch.realm);
	n += (size_t)sprintf(text + n, ", service=");
	n += quote(text + n, ch.service);
	n += (size_t)sprintf(text + n, ",scope=");
	n += quote(text + n, ch.scope);
	struct blobs_challenge back;
	check(blobs_challenge_parse(text, n, &back) == 0,
	      "challenge: written back, parsed");
	check(back.scheme == ch.scheme && !strcmp(back.realm, ch.realm) &&
		  !strcmp(back.service, ch.service) &&
		  !strcmp(back.scope, ch.scope),
	      "challenge: the same fields");
}

static void fuzz_token(const char *buf, size_t size)
{
	char *tok = NULL;
	int64_t exp = -1;
	int r = blobs_token_parse(buf, size, &tok, &exp);
	check(r == 0 || r == -EBADMSG || r == -ENOMEM, "token: an errno");
	if (r < 0)
		return;
	size_t n = strlen(tok);
	check(n >= 1 && n <= BLOBS_TOKEN_MAX, "token: its length");
	for (size_t i = 0; i < n; i++)
		check(tok[i] > 0x20 && tok[i] < 0x7f, "token: visible ASCII");
	check(exp >= 0, "token: its expiry");
	free(tok);
}

static void fuzz_manifest(const char *buf, size_t size)
{
	struct blobs_manifest m;
	struct wr_error *err = NULL;
	int r = blobs_manifest_parse(buf, size, &m, &err);
	check(r < 0 ? err != NULL : err == NULL,
	      "manifest: an error iff r < 0");
	wr_error_free(err);
	err = NULL;
	if (r < 0)
		return;
	check(m.n_layers >= 1 && m.n_layers <= BLOBS_LAYERS_MAX,
	      "manifest: layers");
	check(blobs_digest_valid(m.config.digest), "manifest: config digest");
	char *json = NULL;
	check(blobs_manifest_build(&m, &json, &err) == 0,
	      "manifest: builds back");
	struct blobs_manifest back;
	check(blobs_manifest_parse(json, strlen(json), &back, &err) == 0,
	      "manifest: built, parsed");
	check(back.n_layers == m.n_layers &&
		  !strcmp(back.config.digest, m.config.digest) &&
		  !strcmp(back.config.media_type, m.config.media_type) &&
		  back.config.size == m.config.size,
	      "manifest: the same config");
	for (size_t i = 0; i < m.n_layers; i++)
		check(!strcmp(back.layers[i].digest, m.layers[i].digest) &&
			  !strcmp(back.layers[i].media_type,
				  m.layers[i].media_type) &&
			  back.layers[i].size == m.layers[i].size,
		      "manifest: the same layers");
	char *again = NULL;
	check(blobs_manifest_build(&back, &again, &err) == 0 &&
		  !strcmp(json, again),
	      "manifest: the same bytes");
	free(again);
	free(json);
	blobs_manifest_clear(&back);
	blobs_manifest_clear(&m);
}

static void fuzz_error_body(const char *buf, size_t size)
{
	char *text = blobs_error_body_text(buf, size);
	if (!text)
		return;
	for (const char *p = text; *p; p++)
		check((unsigned char)*p >= 0x20 && *p != 0x7f,
		      "error body: no control characters");
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	fuzz_challenge(buf, size);
	fuzz_token(buf, size);
	fuzz_manifest(buf, size);
	fuzz_error_body(buf, size);
	return 0;
}

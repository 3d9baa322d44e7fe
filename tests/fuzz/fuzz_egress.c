/* fuzz_egress.c - libFuzzer target for the egress proxy's parsers
 * (src/security/egress_policy.c). abort()s on any violated property:
 *
 * 1. The input as a request head: egress_parse_head returns the head's
 *    length (at most the input's and EGRESS_HEAD_MAX, the head ending in a
 *    line feed), 0 only while no head is complete below the cap, or a
 *    negative error with a reason; it never reads outside the input (it is
 *    copied into a buffer of exactly its size). A parsed head has a
 *    normalized host (normalizing it again gives it back) and a port; for
 *    plain HTTP, the head the proxy sends upstream parses again as the
 *    same method, host and port, in origin form, with no Proxy-* header
 *    (or, from a head at the header cap, passes it by the two lines the
 *    proxy adds).
 * 2. The input as an allowlist entry: what egress_allow_parse takes is
 *    normalized, and an exact entry matches its own host on its port (or
 *    on 443 without one); a wildcard never matches its bare suffix. */
#include "security/egress.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_egress: %s\n", what);
		abort();
	}
}

static void check_host(const char *host, bool ip_literal)
{
	char again[EGRESS_HOST_MAX + 1];
	bool lit = !ip_literal;
	size_t len = strlen(host);
	check(len > 0 && len <= EGRESS_HOST_MAX, "host length");
	if (ip_literal && strchr(host, ':')) {
		char br[EGRESS_HOST_MAX + 3];
		snprintf(br, sizeof(br), "[%s]", host);
		check(egress_host_normalize(br, strlen(br), again, &lit) == 0,
		      "an IPv6 host normalizes again");
	} else {
		check(egress_host_normalize(host, len, again, &lit) == 0,
		      "a host normalizes again");
	}
	check(strcmp(again, host) == 0, "normalizing is idempotent");
	check(lit == ip_literal, "ip_literal is stable");
}

static void fuzz_head(const uint8_t *data, size_t size)
{
	char *buf = malloc(size ? size : 1);
	check(buf != NULL, "malloc");
	memcpy(buf, data, size);
	struct egress_request req;
	const char *why = NULL;
	int r = egress_parse_head(buf, size, &req, &why);
	if (r < 0) {
		check(r == -EBADMSG || r == -E2BIG || r == -EPROTONOSUPPORT,
		      "error code");
		check(why && *why, "an error has a reason");
		free(buf);
		return;
	}
	if (r == 0) {
		check(size < EGRESS_HEAD_MAX, "incomplete only below the cap");
		free(buf);
		return;
	}
	check((size_t)r <= size && (size_t)r <= EGRESS_HEAD_MAX,
	      "head length within the input");
	check(req.head_len == (size_t)r && buf[r - 1] == '\n',
	      "head ends with a line feed");
	check(req.port != 0, "port");
	check(req.kind < EGRESS_KIND_MAX, "kind");
	check_host(req.host, req.ip_literal);
	if (req.kind == EGRESS_HTTP) {
		check(req.path_off + req.path_len <= (size_t)r, "path inside");
		size_t len = 0;
		char *up = egress_http_upstream_head(buf, &req, &len);
		check(up != NULL, "upstream head");
		check(len == strlen(up), "upstream head length");
		check(len >= 4 && !memcmp(up + len - 4, "\r\n\r\n", 4),
		      "upstream head ends with a blank line");
		check(!strcasestr(up, "\nproxy-"),
		      "no Proxy-* header upstream");
		struct egress_request again;
		const char *why2 = NULL;
		int r2 = egress_parse_head(up, len, &again, &why2);
		if (r2 == -E2BIG) {
			/* Host and Connection are added: a head at the
			 * header cap may pass it by two lines */
			size_t lines = 0;
			for (size_t i = 0; i < len; i++)
				lines += up[i] == '\n';
			check(lines <= EGRESS_HEADERS_MAX + 4,
			      "upstream head within the cap plus two");
			free(up);
			free(buf);
			return;
		}
		check(r2 == (int)len, "upstream head parses");
		check(again.kind == EGRESS_HTTP, "upstream kind");
		check(!strcmp(again.method, req.method), "upstream method");
		check(!strcmp(again.host, req.host), "upstream host");
		check(again.port == req.port, "upstream port");
		check(up[again.path_off] == '/', "upstream origin form");
		free(up);
	} else {
		check(!strcmp(req.method, "CONNECT"), "CONNECT method");
	}
	free(buf);
}

static void fuzz_entry(const uint8_t *data, size_t size)
{
	if (size > 400)
		return;
	char text[401];
	memcpy(text, data, size);
	text[size] = '\0';
	struct egress_allow e;
	if (egress_allow_parse(text, &e) < 0)
		return;
	check_host(e.host, e.ip_literal);
	check(!(e.wildcard && e.ip_literal), "no wildcard IP");
	uint16_t port = e.port ? e.port : 443;
	if (e.wildcard) {
		check(!egress_allow_match(&e, e.host, port),
		      "a wildcard does not match its suffix");
		char sub[EGRESS_HOST_MAX + 8];
		snprintf(sub, sizeof(sub), "a.%s", e.host);
		check(strlen(sub) > EGRESS_HOST_MAX ||
			  egress_allow_match(&e, sub, port),
		      "a wildcard matches a name below");
	} else {
		check(egress_allow_match(&e, e.host, port),
		      "an entry matches its host");
	}
	if (e.port)
		check(!egress_allow_match(&e, e.host,
					  (uint16_t)(e.port == 1 ? 2 : 1)),
		      "an entry with a port matches only that port");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_head(data, size);
	fuzz_entry(data, size);
	return 0;
}

/* fuzz_gateway.c - libFuzzer target for what the model gateway reads
 * from outside: the upstream's answers (usage in a whole body and in a
 * stream's lines, src/gateway/usage.c), and its settings
 * (src/gateway/config.c), which an operator writes.
 *
 * The first byte picks the wire format; the rest is scanned as a stream,
 * line by line as the server cuts it, and as a whole body, and parsed as
 * a settings object when it is JSON. Properties that must hold for any
 * input (a violation abort()s so the fuzzer keeps the input):
 *   - a scan that saw no usage object leaves the tokens at zero;
 *   - the settings either fail with a message, or name at least one
 *     upstream with a base URL of http(s) and a port that is not 0. */
#include "gateway/gateway.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_gateway: %s\n", what);
		abort();
	}
}

static void scan(enum meter_wire wire, const char *text, size_t len)
{
	struct gateway_usage_scan u = {.wire = wire};
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = (size_t)((nl ? nl : end) - p);
		gateway_scan_sse_line(&u, p, n);
		p += n + (nl != NULL);
	}
	if (!u.seen)
		check(u.tokens.prompt == 0 && u.tokens.completion == 0 &&
			  u.tokens.cached == 0,
		      "tokens without a usage object");
	struct gateway_usage_scan b = {.wire = wire};
	gateway_scan_body(&b, text, len);
	if (!b.seen)
		check(b.tokens.prompt == 0 && b.tokens.completion == 0,
		      "body tokens without a usage object");
}

static void settings(const char *text, size_t len)
{
	json_t *doc = json_loadb(text, len, 0, NULL);
	if (!doc)
		return;
	struct gateway_settings s = {0};
	struct wr_error *err = NULL;
	int r = gateway_settings_parse(doc, &s, &err);
	json_decref(doc);
	if (r < 0) {
		check(err && err->msg && *err->msg, "an error without a message");
		wr_error_free(err);
		return;
	}
	int any = 0;
	for (int w = 0; w < METER_WIRE_MAX; w++) {
		const char *u = s.upstream[w].base_url;
		if (!u)
			continue;
		any = 1;
		check(!strncmp(u, "http://", 7) || !strncmp(u, "https://", 8),
		      "a base URL that is not http(s)");
	}
	check(any, "settings without an upstream");
	check(s.port != 0, "port 0");
	gateway_settings_clear(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	enum meter_wire wire = (enum meter_wire)(data[0] % METER_WIRE_MAX);
	const char *text = (const char *)data + 1;
	scan(wire, text, size - 1);
	settings(text, size - 1);
	return 0;
}

/* fuzz_broker.c - libFuzzer target for the credential broker's parsers
 * (src/security/broker_policy.c), which read what a sandbox sends: the
 * client's header line and, through receive-pack, its ref updates.
 * abort()s on any violated property:
 *
 * 1. The input as a header line: broker_header_parse accepts it or says
 *    why not; what it accepts has a known service and a token of 1 to
 *    BROKER_TOKEN_MAX of [A-Za-z0-9_-], and prints back as the input.
 * 2. The input as a ref update: what broker_command_parse accepts has two
 *    object ids of one length and a ref, and prints back as the input;
 *    what broker_command_check then lets through for session "s-fuzz" is a
 *    valid ref name, the session's branch or below it, not a deletion.
 * 3. The input as a ref name: a valid one starts with "refs/" and has no
 *    "..", "@{" or "//"; one in the namespace of "s-fuzz" is
 *    refs/heads/warren/s-fuzz or refs/heads/warren/s-fuzz/...
 * 4. Every 4-byte window as a pkt-line length: a flush, delimiter or end,
 *    4 to BROKER_PKT_MAX, or -EBADMSG; a payload formats back to it. */
#include "security/broker.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SESSION "s-fuzz"

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_broker: %s\n", what);
		abort();
	}
}

static void fuzz_header(const char *buf, size_t size)
{
	struct broker_header h;
	const char *why = NULL;
	int r = broker_header_parse(buf, size, &h, &why);
	check(r == 0 || (r == -EBADMSG && why), "header: 0 or a reason");
	if (r < 0)
		return;
	check(h.service < BROKER_SERVICE_MAX, "header: a service");
	size_t n = strlen(h.token);
	check(n > 0 && n <= BROKER_TOKEN_MAX, "header: token length");
	check(strspn(h.token, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
			      "TUVWXYZ0123456789_-") == n,
	      "header: token characters");
	char again[BROKER_HEADER_MAX * 2];
	int k = snprintf(again, sizeof(again), "%s %s %s", BROKER_MAGIC,
			 broker_service_name(h.service), h.token);
	check((size_t)k == size && !memcmp(again, buf, size),
	      "header: prints back as given");
}

static void fuzz_command(const char *buf, size_t size)
{
	struct broker_command c;
	if (broker_command_parse(buf, size, &c) < 0)
		return;
	check(broker_oid_valid(c.old_oid) && broker_oid_valid(c.new_oid),
	      "command: object ids");
	check(strlen(c.old_oid) == strlen(c.new_oid), "command: one length");
	check(c.ref[0] != '\0', "command: a ref");
	char again[BROKER_OID_MAX * 2 + BROKER_REF_MAX + 8];
	int k = snprintf(again, sizeof(again), "%s %s %s", c.old_oid, c.new_oid,
			 c.ref);
	size_t len = size && buf[size - 1] == '\n' ? size - 1 : size;
	check((size_t)k == len && !memcmp(again, buf, len),
	      "command: prints back as given");
	char why[512];
	if (broker_command_check(SESSION, &c, why, sizeof(why)) == 0) {
		check(broker_refname_valid(c.ref), "check: a valid name");
		check(broker_ref_in_namespace(SESSION, c.ref),
		      "check: the session's namespace");
		check(!broker_oid_is_zero(c.new_oid), "check: not a deletion");
	} else {
		check(why[0] != '\0', "check: a reason");
	}
}

static void fuzz_ref(const char *buf, size_t size)
{
	char *ref = malloc(size + 1);
	check(ref != NULL, "malloc");
	memcpy(ref, buf, size);
	ref[size] = '\0';
	if (strlen(ref) == size && broker_refname_valid(ref)) {
		check(!strncmp(ref, "refs/", 5), "ref: under refs/");
		check(!strstr(ref, "..") && !strstr(ref, "@{") &&
			  !strstr(ref, "//"),
		      "ref: no .., @{ or //");
	}
	if (broker_ref_in_namespace(SESSION, ref)) {
		static const char p[] = "refs/heads/warren/" SESSION;
		check(!strncmp(ref, p, sizeof(p) - 1) &&
			  (ref[sizeof(p) - 1] == '\0' ||
			   (ref[sizeof(p) - 1] == '/' && ref[sizeof(p)])),
		      "namespace: the branch or below it");
	}
	free(ref);
}

static void fuzz_pkt(const char *buf, size_t size)
{
	for (size_t i = 0; i + 4 <= size && i < 64; i++) {
		int n = broker_pkt_len(buf + i);
		check(n == -EBADMSG || (n >= 0 && n <= 2) ||
			  (n >= 4 && n <= BROKER_PKT_MAX),
		      "pkt: a length in range");
	}
	char out[256];
	size_t len = size < 200 ? size : 200;
	int n = broker_pkt_format(out, sizeof(out), buf, len);
	check(n == (int)len + 4 && broker_pkt_len(out) == n,
	      "pkt: formats back");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* an exact copy: a read past the end is ASan's to see */
	char *buf = malloc(size ? size : 1);
	check(buf != NULL, "malloc");
	memcpy(buf, data, size);
	fuzz_header(buf, size);
	fuzz_command(buf, size);
	fuzz_ref(buf, size);
	fuzz_pkt(buf, size);
	free(buf);
	return 0;
}

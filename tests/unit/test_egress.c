/* test_egress.c - the egress proxy (src/security/egress*.c): allowlist
 * entries and matching (public suffixes refused, through libpsl), the
 * CONNECT ports (443 and connect_ports), the server's deny rules (IPv4, IPv6,
 * IPv4 carried in IPv6, the control plane, allow_addresses), the request head
 * parser on good and bad heads, the upstream head of a plain HTTP request, and
 * the proxy itself on a unix socket against a loopback server: CONNECT and
 * plain HTTP allowed, a host not in the allowlist, a name that resolves to
 * a private address, the audit records, the per-session policy read at
 * connection time. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "security/egress.h"
#include "util/alloc.h"
#include "util/fdpass.h"

/* ---- allowlist entries ------------------------------------------------- */

static void test_allow_parse(void **state)
{
	(void)state;
	struct egress_allow e;
	assert_int_equal(egress_allow_parse("Example.COM", &e), 0);
	assert_string_equal(e.host, "example.com");
	assert_false(e.wildcard);
	assert_int_equal(e.port, 0);
	assert_int_equal(egress_allow_parse("*.github.com:8443", &e), 0);
	assert_string_equal(e.host, "github.com");
	assert_true(e.wildcard);
	assert_int_equal(e.port, 8443);
	assert_int_equal(egress_allow_parse("example.com.", &e), 0);
	assert_string_equal(e.host, "example.com");
	assert_int_equal(egress_allow_parse("xn--bcher-kva.example", &e), 0);
	assert_int_equal(egress_allow_parse("203.0.113.7:443", &e), 0);
	assert_true(e.ip_literal);
	assert_int_equal(egress_allow_parse("[2001:DB8::1]:443", &e), 0);
	assert_string_equal(e.host, "2001:db8::1");
	assert_true(e.ip_literal);

	static const char *const bad[] = {
	    "",
	    "*",
	    "*.",
	    "*.*.a.com",
	    "a.*.com",
	    "a..com",
	    ".a.com",
	    "-a.com",
	    "a-.com",
	    "a_b.com",
	    "a b.com",
	    "a.com:0",
	    "a.com:65536",
	    "a.com:",
	    "a.com:x",
	    "a.com:+1",
	    "a.com:443:1",
	    "http://a.com",
	    "a.com/path",
	    "user@a.com",
	    "b\xc3\xbc"
	    "cher.example", /* IDN: only its xn-- form */
	    "a.com\n",
	    "::1",
	    "[::1",
	    "[fe80::1%eth0]",
	    "*.10.0.0.1",
	    "127.1",
	    "0x7f.0.0.1",
	    "2130706433",
	    "010.0.0.1",
	    "a.123",
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    ".com", /* a 64-byte label */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (egress_allow_parse(bad[i], &e) == 0)
			fail_msg("'%s' was taken as an entry", bad[i]);
}

static bool matches(const char *entry, const char *host, uint16_t port)
{
	struct egress_allow e;
	assert_int_equal(egress_allow_parse(entry, &e), 0);
	return egress_allow_match(&e, host, port);
}

static void test_allow_match(void **state)
{
	(void)state;
	/* exact: the web ports without a port, that port with one */
	assert_true(matches("example.com", "example.com", 443));
	assert_true(matches("example.com", "example.com", 80));
	assert_false(matches("example.com", "example.com", 22));
	assert_false(matches("example.com", "www.example.com", 443));
	assert_false(matches("example.com", "example.com.evil.net", 443));
	assert_false(matches("example.com", "badexample.com", 443));
	assert_true(matches("example.com:8443", "example.com", 8443));
	assert_false(matches("example.com:8443", "example.com", 443));
	/* suffix: names below, not the name itself */
	assert_true(matches("*.example.com", "a.example.com", 443));
	assert_true(matches("*.example.com", "a.b.example.com", 80));
	assert_false(matches("*.example.com", "example.com", 443));
	assert_false(matches("*.example.com", "aexample.com", 443));
	assert_false(matches("*.example.com", "a.example.com", 8080));
	assert_true(matches("*.example.com:8080", "a.example.com", 8080));
	/* case and a final dot are the request's concern (normalized) */
	char host[EGRESS_HOST_MAX + 1];
	bool literal;
	assert_int_equal(
	    egress_host_normalize("WWW.Example.Com.", 16, host, &literal), 0);
	assert_string_equal(host, "www.example.com");
	assert_true(matches("*.EXAMPLE.com", host, 443));
}

/* ---- deny rules ---------------------------------------------------------- */

static struct sockaddr_storage sa_of(const char *addr, uint16_t port)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
	} else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
	} else {
		fail_msg("bad test address %s", addr);
	}
	return ss;
}

static const char *verdict(const struct egress_rules *r, const char *addr,
			   uint16_t port)
{
	struct sockaddr_storage ss = sa_of(addr, port);
	const char *why = NULL;
	int ret = egress_rules_check(r, (struct sockaddr *)&ss, NULL, 0, &why);
	if (ret == 0)
		return "ok";
	assert_int_equal(ret, -EACCES);
	assert_non_null(why);
	return why;
}

static struct egress_rules *rules_of(const char *json)
{
	json_t *j = json ? json_loads(json, 0, NULL) : NULL;
	if (json)
		assert_non_null(j);
	struct egress_rules *r = NULL;
	struct wr_error *err = NULL;
	if (egress_rules_new(j, &r, &err) < 0)
		fail_msg("rules %s: %s", json, err ? err->msg : "?");
	json_decref(j);
	return r;
}

static void test_rules_default(void **state)
{
	(void)state;
	struct egress_rules *r = rules_of(NULL);
	assert_string_equal(verdict(r, "93.184.216.34", 443), "ok");
	assert_string_equal(verdict(r, "2606:2800:220:1::1", 443), "ok");
	assert_string_equal(verdict(r, "127.0.0.1", 80), "a loopback address");
	assert_string_equal(verdict(r, "127.255.0.9", 80),
			    "a loopback address");
	assert_string_equal(verdict(r, "10.0.0.5", 80), "a private address");
	assert_string_equal(verdict(r, "172.16.0.1", 80), "a private address");
	assert_string_equal(verdict(r, "172.31.255.255", 80),
			    "a private address");
	assert_string_equal(verdict(r, "172.32.0.1", 80), "ok");
	assert_string_equal(verdict(r, "192.168.1.1", 80), "a private address");
	assert_string_equal(verdict(r, "169.254.169.254", 80),
			    "the cloud metadata address");
	assert_string_equal(verdict(r, "169.254.1.1", 80),
			    "a link-local address");
	assert_string_equal(verdict(r, "100.64.0.1", 80),
			    "a shared address (carrier-grade NAT)");
	assert_string_equal(verdict(r, "100.128.0.1", 80), "ok");
	assert_string_equal(verdict(r, "0.0.0.0", 80),
			    "an unspecified address (it reaches this host)");
	assert_string_equal(verdict(r, "224.0.0.1", 80), "a multicast address");
	assert_string_equal(verdict(r, "255.255.255.255", 80),
			    "a reserved address");
	assert_string_equal(verdict(r, "::1", 80), "a loopback address");
	assert_string_equal(verdict(r, "::", 80),
			    "an unspecified address (it reaches this host)");
	assert_string_equal(verdict(r, "fe80::1", 80), "a link-local address");
	assert_string_equal(verdict(r, "fd12:3456::1", 80),
			    "a private address (unique local)");
	assert_string_equal(verdict(r, "fd00:ec2::254", 80),
			    "the cloud metadata address");
	assert_string_equal(verdict(r, "ff02::1", 80), "a multicast address");
	/* IPv4 in IPv6 is checked as the IPv4 address it reaches */
	assert_string_equal(verdict(r, "::ffff:127.0.0.1", 80),
			    "a loopback address");
	assert_string_equal(verdict(r, "::ffff:10.1.2.3", 80),
			    "a private address");
	assert_string_equal(verdict(r, "::ffff:169.254.169.254", 80),
			    "the cloud metadata address");
	assert_string_equal(verdict(r, "64:ff9b::a00:1", 80),
			    "a private address");
	assert_string_equal(verdict(r, "::ffff:93.184.216.34", 80), "ok");
	assert_string_equal(verdict(r, "::10.0.0.1", 80),
			    "a reserved address (IPv4-compatible)");
	/* this host's own addresses */
	struct sockaddr_storage own = sa_of("93.184.216.34", 0);
	struct sockaddr_storage ss = sa_of("93.184.216.34", 443);
	const char *why = NULL;
	assert_int_equal(
	    egress_rules_check(r, (struct sockaddr *)&ss, &own, 1, &why),
	    -EACCES);
	assert_string_equal(why, "an address of this host");
	egress_rules_free(r);
}

static void test_rules_config(void **state)
{
	(void)state;
	struct egress_rules *r =
	    rules_of("{\"deny\": [\"93.184.216.0/24\", \"2001:db8::/32\"],"
		     " \"allow_addresses\": [\"127.0.0.1/32\", \"10.9.0.0/16\","
		     " \"93.184.216.34\"],"
		     " \"hosts\": {\"Allowed.TEST\": \"127.0.0.1\","
		     "             \"two.test\": [\"10.9.1.1\", \"::1\"]}}");
	/* deny beats allow_addresses; allow_addresses beats the defaults */
	assert_string_equal(verdict(r, "93.184.216.34", 443),
			    "an address the server's egress rules deny");
	assert_string_equal(verdict(r, "2001:db8::5", 443),
			    "an address the server's egress rules deny");
	assert_string_equal(verdict(r, "127.0.0.1", 8080), "ok");
	assert_string_equal(verdict(r, "127.0.0.2", 8080),
			    "a loopback address");
	assert_string_equal(verdict(r, "10.9.3.4", 80), "ok");
	assert_string_equal(verdict(r, "10.8.3.4", 80), "a private address");
	/* the control plane: not even allow_addresses opens it */
	assert_int_equal(egress_rules_set_self(r, "127.0.0.1", 7777), 0);
	assert_string_equal(verdict(r, "127.0.0.1", 7777),
			    "the control plane itself");
	assert_string_equal(verdict(r, "::1", 7777),
			    "the control plane itself");
	assert_string_equal(verdict(r, "127.0.0.1", 7778), "ok");
	assert_int_equal(egress_rules_set_self(r, "0.0.0.0", 7777), 0);
	assert_string_equal(verdict(r, "0.0.0.0", 7777),
			    "the control plane itself");
	/* the static table */
	struct sockaddr_storage out[4];
	assert_int_equal(egress_rules_lookup(r, "allowed.test", 81, out, 4), 1);
	assert_int_equal(out[0].ss_family, AF_INET);
	assert_int_equal(ntohs(((struct sockaddr_in *)&out[0])->sin_port), 81);
	assert_int_equal(egress_rules_lookup(r, "two.test", 81, out, 4), 2);
	assert_int_equal(out[1].ss_family, AF_INET6);
	assert_int_equal(egress_rules_lookup(r, "other.test", 81, out, 4), 0);
	assert_false(egress_rules_ip_literals(r));
	egress_rules_free(r);

	static const char *const bad[] = {
	    "[]",
	    "{\"deny\": \"10.0.0.0/8\"}",
	    "{\"deny\": [\"10.0.0.0/33\"]}",
	    "{\"deny\": [\"10.0.0/8\"]}",
	    "{\"allow_addresses\": [\"::1/129\"]}",
	    "{\"allow_addresses\": [\"localhost\"]}",
	    "{\"hosts\": {\"a.test\": \"not-an-address\"}}",
	    "{\"hosts\": {\"10.0.0.1\": \"10.0.0.1\"}}",
	    "{\"hosts\": {\"a.test\": []}}",
	    "{\"ip_literals\": 1}",
	    "{\"allow\": []}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *j = json_loads(bad[i], 0, NULL);
		assert_non_null(j);
		struct egress_rules *x = NULL;
		struct wr_error *err = NULL;
		if (egress_rules_new(j, &x, &err) == 0)
			fail_msg("%s was taken", bad[i]);
		assert_true(err && err->bad_input);
		wr_error_free(err);
		json_decref(j);
	}
}

static void test_allowlist_check(void **state)
{
	(void)state;
	struct egress_rules *r = rules_of(NULL);
	const char *list[] = {"registry.npmjs.org", "*.github.com:443",
			      "not an entry", "10.0.0.1"};
	const char *why;
	assert_int_equal(egress_allowlist_check(r, list, 4,
						"registry.npmjs.org", false,
						443, &why),
			 0);
	assert_int_equal(egress_allowlist_check(r, list, 4, "api.github.com",
						false, 443, &why),
			 0);
	assert_int_equal(egress_allowlist_check(r, list, 4, "api.github.com",
						false, 80, &why),
			 -EACCES);
	assert_string_equal(why, "not in the allowlist");
	assert_int_equal(egress_allowlist_check(r, list, 4, "evil.example",
						false, 443, &why),
			 -EACCES);
	/* IP literals only where the server allows them */
	assert_int_equal(
	    egress_allowlist_check(r, list, 4, "10.0.0.1", true, 443, &why),
	    -EACCES);
	assert_string_equal(why,
			    "an IP address: only host names may be allowed");
	egress_rules_free(r);
	r = rules_of("{\"ip_literals\": true}");
	assert_int_equal(
	    egress_allowlist_check(r, list, 4, "10.0.0.1", true, 443, &why), 0);
	egress_rules_free(r);
}

/* Public suffixes (the Public Suffix List, ICANN and private sections,
 * through libpsl) are no allowlist entries: "*.com" is every name under
 * .com, "github.io" every user's pages. */
static void test_allow_public_suffix(void **state)
{
	(void)state;
	static const char *const refused[] = {
	    "com",	   "*.com",    "co.uk",	      "*.co.uk",
	    "COM.",	   "com:8443", "*.co.uk:443", "github.io",
	    "*.github.io", "uk",       "*.xn--p1ai",
	};
	struct egress_allow e;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (egress_allow_parse(refused[i], &e) == 0)
			fail_msg("public suffix '%s' was taken", refused[i]);
	static const char *const taken[] = {
	    "example.com",	"*.example.com",   "registry.npmjs.org",
	    "example.co.uk",	"*.example.co.uk", "user.github.io",
	    "*.user.github.io", "name.test:8080",  "203.0.113.7:443",
	};
	for (size_t i = 0; i < sizeof(taken) / sizeof(taken[0]); i++)
		if (egress_allow_parse(taken[i], &e) < 0)
			fail_msg("'%s' was refused", taken[i]);
	/* at connection time, an entry that is a public suffix allows
	 * nothing (a spec written before the rule) */
	struct egress_rules *r = rules_of(NULL);
	const char *list[] = {"*.com", "com"};
	const char *why;
	assert_int_equal(
	    egress_allowlist_check(r, list, 2, "evil.com", false, 443, &why),
	    -EACCES);
	assert_int_equal(
	    egress_allowlist_check(r, list, 2, "com", false, 443, &why),
	    -EACCES);
	egress_rules_free(r);
}

/* CONNECT only to 443 and the ports the server's connect_ports adds */
static void test_connect_ports(void **state)
{
	(void)state;
	struct egress_rules *r = rules_of(NULL);
	const char *why = NULL;
	assert_int_equal(egress_connect_check(r, 443, &why), 0);
	assert_int_equal(egress_connect_check(r, 80, &why), -EACCES);
	assert_non_null(strstr(why, "CONNECT only to port 443"));
	assert_int_equal(egress_connect_check(r, 8443, &why), -EACCES);
	egress_rules_free(r);
	r = rules_of("{\"connect_ports\": [8443, 9443]}");
	assert_int_equal(egress_connect_check(r, 443, &why), 0);
	assert_int_equal(egress_connect_check(r, 8443, &why), 0);
	assert_int_equal(egress_connect_check(r, 9443, &why), 0);
	assert_int_equal(egress_connect_check(r, 80, &why), -EACCES);
	egress_rules_free(r);
	static const char *const bad[] = {
	    "{\"connect_ports\": 443}",	    "{\"connect_ports\": [0]}",
	    "{\"connect_ports\": [65536]}", "{\"connect_ports\": [\"443\"]}",
	    "{\"connect_ports\": [4.5]}",   "{\"connect_ports\": [-1]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *j = json_loads(bad[i], 0, NULL);
		assert_non_null(j);
		struct egress_rules *x = NULL;
		struct wr_error *err = NULL;
		if (egress_rules_new(j, &x, &err) == 0)
			fail_msg("%s was taken", bad[i]);
		assert_true(err && err->bad_input);
		assert_non_null(strstr(err->msg, "egress.connect_ports"));
		wr_error_free(err);
		json_decref(j);
	}
}

/* ---- request heads ------------------------------------------------------- */

static int parse(const char *head, struct egress_request *req, const char **why)
{
	*why = NULL;
	return egress_parse_head(head, strlen(head), req, why);
}

static void test_parse_good(void **state)
{
	(void)state;
	struct egress_request req;
	const char *why;
	const char *h = "CONNECT Example.com:443 HTTP/1.1\r\n"
			"Host: example.com:443\r\n"
			"User-Agent: curl/8\r\n\r\nTLS...";
	int n = parse(h, &req, &why);
	assert_int_equal(n, (int)(strstr(h, "TLS") - h));
	assert_int_equal(req.kind, EGRESS_CONNECT);
	assert_string_equal(req.host, "example.com");
	assert_int_equal(req.port, 443);
	assert_false(req.ip_literal);

	h = "GET http://Allowed.test:8080/a/b?c=d HTTP/1.1\r\n"
	    "Host: other.example\r\nAccept: */*\r\n\r\n";
	assert_int_equal(parse(h, &req, &why), (int)strlen(h));
	assert_int_equal(req.kind, EGRESS_HTTP);
	assert_string_equal(req.method, "GET");
	assert_string_equal(req.host, "allowed.test");
	assert_int_equal(req.port, 8080);
	assert_int_equal(req.path_len, 8);
	assert_memory_equal(h + req.path_off, "/a/b?c=d", 8);

	/* bare LF line ends; no path; default port */
	h = "HEAD http://example.com HTTP/1.0\n\n";
	assert_int_equal(parse(h, &req, &why), (int)strlen(h));
	assert_int_equal(req.port, 80);
	assert_int_equal(req.path_len, 0);
	assert_int_equal(req.version_minor, 0);

	/* origin form: the Host header names the target */
	h = "POST /upload HTTP/1.1\r\nhost: Files.Example.com:81\r\n"
	    "Content-Length: 3\r\n\r\nabc";
	assert_int_equal(parse(h, &req, &why), (int)strlen(h) - 3);
	assert_string_equal(req.host, "files.example.com");
	assert_int_equal(req.port, 81);

	h = "CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n";
	assert_int_equal(parse(h, &req, &why), (int)strlen(h));
	assert_string_equal(req.host, "2001:db8::1");
	assert_true(req.ip_literal);

	/* incomplete: more bytes needed */
	assert_int_equal(
	    parse("CONNECT a.com:443 HTTP/1.1\r\nHost: a", &req, &why), 0);
	assert_int_equal(parse("GET", &req, &why), 0);
}

static void test_parse_bad(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", /* TLS */
	    "GET\thttp://a.com/ HTTP/1.1\r\n\r\n",
	    "GET  http://a.com/ HTTP/1.1\r\n\r\n",
	    "GET http://a.com/ HTTP/2.0\r\n\r\n",
	    "GET http://a.com/ HTTP/1.1 \r\n\r\n",
	    "CONNECT a.com HTTP/1.1\r\n\r\n",
	    "CONNECT a.com:0 HTTP/1.1\r\n\r\n",
	    "CONNECT a.com:99999 HTTP/1.1\r\n\r\n",
	    "CONNECT /a HTTP/1.1\r\n\r\n",
	    "CONNECT ::1:443 HTTP/1.1\r\n\r\n",
	    "CONNECT 127.1:443 HTTP/1.1\r\n\r\n",
	    "CONNECT a_b.com:443 HTTP/1.1\r\n\r\n",
	    "GET http://user:pw@a.com/ HTTP/1.1\r\n\r\n",
	    "GET http://a.com#frag HTTP/1.1\r\n\r\n",
	    "GET / HTTP/1.1\r\n\r\n",
	    "GET / HTTP/1.1\r\nHost: a.com\r\nHost: b.com\r\n\r\n",
	    "GET / HTTP/1.1\r\nHost: user@a.com\r\n\r\n",
	    "GET http://a.com/ HTTP/1.1\r\nX-A: b\r\n c\r\n\r\n",
	    "GET http://a.com/ HTTP/1.1\r\nX-A : b\r\n\r\n",
	    "GET http://a.com/ HTTP/1.1\r\nX-A: b\rc\r\n\r\n",
	    "GET http://a.com/ HTTP/1.1\r\nno colon\r\n\r\n",
	    "GET http://a.com/\x7f HTTP/1.1\r\n\r\n",
	    "\r\nGET http://a.com/ HTTP/1.1\r\n\r\n",
	    "GET * HTTP/1.1\r\n\r\n",
	    "GET ftp://a.com/ HTTP/1.1\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct egress_request req;
		const char *why;
		int r = parse(bad[i], &req, &why);
		if (r != -EBADMSG && r != -EPROTONOSUPPORT)
			fail_msg("bad head %zu was answered %d", i, r);
		assert_non_null(why);
	}
	struct egress_request req;
	const char *why;
	assert_int_equal(
	    parse("GET https://a.com/ HTTP/1.1\r\n\r\n", &req, &why),
	    -EPROTONOSUPPORT);
	/* the caps */
	char *big = wr_malloc(EGRESS_HEAD_MAX + 64);
	assert_non_null(big);
	int n = snprintf(big, 64, "GET http://a.com/ HTTP/1.1\r\nX: ");
	memset(big + n, 'a', EGRESS_HEAD_MAX + 10 - (size_t)n);
	assert_int_equal(
	    egress_parse_head(big, EGRESS_HEAD_MAX + 10, &req, &why), -E2BIG);
	char *p = big + snprintf(big, 64, "GET http://a.com/ HTTP/1.1\r\n");
	for (int i = 0; i < EGRESS_HEADERS_MAX + 1; i++)
		p += sprintf(p, "X: %d\r\n", i);
	p += sprintf(p, "\r\n");
	assert_int_equal(egress_parse_head(big, (size_t)(p - big), &req, &why),
			 -E2BIG);
	free(big);
}

static void test_upstream_head(void **state)
{
	(void)state;
	struct egress_request req;
	const char *why;
	const char *h = "GET http://a.test:8080?q=1 HTTP/1.1\r\n"
			"Host: evil.example\r\nProxy-Connection: keep-alive\r\n"
			"Proxy-Authorization: Basic eA==\r\n"
			"Connection: keep-alive\r\nAccept: */*\r\n\r\n";
	assert_int_equal(parse(h, &req, &why), (int)strlen(h));
	size_t len;
	char *out = egress_http_upstream_head(h, &req, &len);
	assert_non_null(out);
	assert_int_equal(len, strlen(out));
	assert_string_equal(out, "GET /?q=1 HTTP/1.1\r\nHost: a.test:8080\r\n"
				 "Accept: */*\r\nConnection: close\r\n\r\n");
	free(out);
	h = "PUT http://[2001:db8::1]/x HTTP/1.0\nX-A: 1\n\n";
	assert_int_equal(parse(h, &req, &why), (int)strlen(h));
	out = egress_http_upstream_head(h, &req, &len);
	assert_string_equal(out, "PUT /x HTTP/1.0\r\nHost: [2001:db8::1]\r\n"
				 "X-A: 1\r\nConnection: close\r\n\r\n");
	free(out);
}

/* ---- the proxy ------------------------------------------------------------
 */

static char tmp_dir[] = "/tmp/warren-egress-test.XXXXXX";
static int server_fd = -1;
static uint16_t server_port;
static pthread_mutex_t audit_mu = PTHREAD_MUTEX_INITIALIZER;
static json_t *audits;
static const char *policy_hosts[6];

static int test_policy(void *ctx, const char *session_id, char ***allow,
		       size_t *n)
{
	(void)ctx;
	if (strcmp(session_id, "s-test"))
		return -ENOENT;
	size_t k = 0;
	while (policy_hosts[k])
		k++;
	char **v = wr_calloc(k + 1, sizeof(char *));
	for (size_t i = 0; i < k; i++)
		v[i] = wr_strdup(policy_hosts[i]);
	*allow = v;
	*n = k;
	return 0;
}

static void test_audit(void *ctx, const char *session_id, const json_t *d)
{
	(void)ctx;
	(void)session_id;
	pthread_mutex_lock(&audit_mu);
	json_array_append(audits, (json_t *)d);
	pthread_mutex_unlock(&audit_mu);
}

/* A loopback server: answers every connection with what it read, once
 * the request head is in, after a fixed line. */
static void *server_main(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept(server_fd, NULL, NULL);
		if (c < 0)
			return NULL;
		char buf[4096];
		size_t len = 0;
		while (len < sizeof(buf) - 1) {
			ssize_t n = read(c, buf + len, sizeof(buf) - 1 - len);
			if (n <= 0)
				break;
			len += (size_t)n;
			buf[len] = '\0';
			if (strstr(buf, "\r\n\r\n") || strstr(buf, "ping"))
				break;
		}
		char out[4300];
		int m =
		    snprintf(out, sizeof(out),
			     "HTTP/1.0 200 OK\r\n\r\nseen:%.*s", (int)len, buf);
		if (write(c, out, (size_t)m) < 0) {
		}
		close(c);
	}
}

static int proxy_connect(const char *sock)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
	assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	return fd;
}

/* Sends text and reads until the proxy closes. */
static char *exchange(const char *sock, const char *text)
{
	int fd = proxy_connect(sock);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	static char buf[16384];
	size_t len = 0;
	ssize_t n;
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	close(fd);
	return buf;
}

/* As warren-relay does: the client's TCP connection passed to the proxy
 * (one byte 0 with the accepted socket), the relay's copies closed; then
 * text from the client, and what the client gets back. */
static char *exchange_passed(const char *sock, const char *text)
{
	int l = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
	socklen_t sl = sizeof(sin);
	getsockname(l, (struct sockaddr *)&sin, &sl);
	assert_int_equal(listen(l, 1), 0);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sin, sizeof(sin)), 0);
	int a = accept(l, NULL, NULL);
	assert_true(a >= 0);
	close(l);
	int u = proxy_connect(sock);
	assert_int_equal(wr_send_fds(u, "", 1, &a, 1), 0);
	close(a);
	close(u);
	assert_int_equal(write(c, text, strlen(text)), (ssize_t)strlen(text));
	static char buf[16384];
	size_t len = 0;
	ssize_t n;
	while ((n = read(c, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	close(c);
	return buf;
}

static json_t *wait_audits(size_t n)
{
	for (int i = 0; i < 500; i++) {
		pthread_mutex_lock(&audit_mu);
		size_t have = json_array_size(audits);
		pthread_mutex_unlock(&audit_mu);
		if (have >= n)
			break;
		usleep(10000);
	}
	pthread_mutex_lock(&audit_mu);
	json_t *a = json_incref(audits);
	pthread_mutex_unlock(&audit_mu);
	return a;
}

static void test_proxy(void **state)
{
	(void)state;
	assert_non_null(mkdtemp(tmp_dir));
	server_fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(server_fd, (struct sockaddr *)&sin, sizeof(sin)),
			 0);
	socklen_t sl = sizeof(sin);
	getsockname(server_fd, (struct sockaddr *)&sin, &sl);
	server_port = ntohs(sin.sin_port);
	assert_int_equal(listen(server_fd, 16), 0);
	pthread_t st;
	pthread_create(&st, NULL, server_main, NULL);
	pthread_detach(st);

	char rules_text[512];
	snprintf(rules_text, sizeof(rules_text),
		 "{\"allow_addresses\": [\"127.0.0.1/32\"],"
		 " \"connect_ports\": [%u],"
		 " \"hosts\": {\"allowed.test\": \"127.0.0.1\","
		 "             \"private.test\": \"10.0.0.1\","
		 "             \"metadata.test\": \"169.254.169.254\","
		 "             \"api.test\": \"127.0.0.1\"}}",
		 server_port);
	json_t *rules = json_loads(rules_text, 0, NULL);
	char allowed[64], priv[64], meta[64], api[64];
	snprintf(allowed, sizeof(allowed), "allowed.test:%u", server_port);
	snprintf(priv, sizeof(priv), "private.test:%u", server_port);
	snprintf(meta, sizeof(meta), "metadata.test:80");
	snprintf(api, sizeof(api), "api.test:7777");
	policy_hosts[0] = allowed;
	policy_hosts[1] = priv;
	policy_hosts[2] = meta;
	policy_hosts[3] = "allowed.test"; /* ports 80 and 443 */
	policy_hosts[4] = NULL;
	audits = json_array();
	struct egress_config cfg = {.rules = rules,
				    .self_addr = "127.0.0.1",
				    .self_port = 7777,
				    .policy = test_policy,
				    .audit = test_audit};
	struct egress *eg = NULL;
	struct wr_error *err = NULL;
	assert_int_equal(egress_start(&cfg, &eg, &err), 0);
	json_decref(rules);
	char dir[256], *sock = NULL;
	snprintf(dir, sizeof(dir), "%s/s-test.egress", tmp_dir);
	assert_int_equal(egress_session_open(eg, "s-test", dir, &sock, &err),
			 0);
	struct stat stt;
	assert_int_equal(stat(dir, &stt), 0);
	assert_int_equal(stt.st_mode & 07777, 0711);
	assert_int_equal(stat(sock, &stt), 0);
	assert_true(S_ISSOCK(stt.st_mode));
	assert_int_equal(stt.st_mode & 0777, 0666);
	/* opening again keeps the listener */
	char *again = NULL;
	assert_int_equal(egress_session_open(eg, "s-test", dir, &again, &err),
			 0);
	assert_string_equal(again, sock);
	free(again);

	char req[512];
	/* plain HTTP, allowed: origin form upstream, Host rewritten */
	snprintf(req, sizeof(req),
		 "GET http://allowed.test:%u/hello HTTP/1.1\r\nHost: x\r\n"
		 "Proxy-Connection: keep-alive\r\n\r\n",
		 server_port);
	char *out = exchange(sock, req);
	assert_non_null(strstr(out, "HTTP/1.0 200 OK"));
	char want[128];
	snprintf(want, sizeof(want),
		 "seen:GET /hello HTTP/1.1\r\nHost: allowed.test:%u\r\n",
		 server_port);
	assert_non_null(strstr(out, want));
	assert_null(strstr(out, "Proxy-Connection"));
	/* CONNECT, allowed: a tunnel that carries bytes both ways */
	snprintf(req, sizeof(req),
		 "CONNECT allowed.test:%u HTTP/1.1\r\n\r\nping", server_port);
	out = exchange(sock, req);
	assert_non_null(
	    strstr(out, "HTTP/1.1 200 Connection established\r\n\r\n"));
	assert_non_null(strstr(out, "seen:ping"));
	/* CONNECT to an allowed host on a port that is not a TLS port of
	 * the server's (443, connect_ports): refused before any connection,
	 * so a plain-HTTP port's virtual hosts are not reachable through a
	 * tunnel */
	out = exchange(sock, "CONNECT allowed.test:80 HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(out, "HTTP/1.1 403 Forbidden"));
	assert_non_null(strstr(out, "warren egress: allowed.test:80 is not "
				    "allowed for session s-test (CONNECT only "
				    "to port 443 and the server's "
				    "egress.connect_ports; plain HTTP goes "
				    "through the proxy as http:// URLs)"));
	/* not in the allowlist */
	out = exchange(sock, "GET http://denied.test/ HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(out, "HTTP/1.1 403 Forbidden"));
	assert_non_null(strstr(out, "warren egress: denied.test:80 is not "
				    "allowed for session s-test (not in the "
				    "allowlist)"));
	/* allowed by name, resolving to a private or metadata address */
	snprintf(req, sizeof(req), "CONNECT private.test:%u HTTP/1.1\r\n\r\n",
		 server_port);
	out = exchange(sock, req);
	assert_non_null(strstr(out, "403 Forbidden"));
	assert_non_null(strstr(out, "resolves to 10.0.0.1, a private address"));
	out =
	    exchange(sock, "GET http://metadata.test/latest HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(out, "resolves to 169.254.169.254, the cloud "
				    "metadata address"));
	/* the control plane, even allowed by name and address */
	policy_hosts[2] = api;
	out = exchange(sock, "GET http://api.test:7777/ HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(out, "the control plane itself"));
	/* the policy is read per connection: a host removed is refused */
	policy_hosts[0] = NULL;
	snprintf(req, sizeof(req),
		 "GET http://allowed.test:%u/ HTTP/1.1\r\n\r\n", server_port);
	out = exchange(sock, req);
	assert_non_null(strstr(out, "not in the allowlist"));
	policy_hosts[0] = allowed;
	/* garbage */
	out = exchange(sock, "\x16\x03\x01 hello");
	assert_non_null(strstr(out, "HTTP/1.1 400 Bad Request"));
	/* the relay's way: the client's socket passed, the proxy reads from
	 * and answers it directly */
	snprintf(req, sizeof(req),
		 "GET http://allowed.test:%u/passed HTTP/1.1\r\n\r\n",
		 server_port);
	out = exchange_passed(sock, req);
	assert_non_null(strstr(out, "HTTP/1.0 200 OK"));
	assert_non_null(strstr(out, "seen:GET /passed HTTP/1.1\r\n"));
	out = exchange_passed(sock, "GET http://denied.test/ HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(out, "HTTP/1.1 403 Forbidden"));
	assert_non_null(strstr(out, "(not in the allowlist)"));
	/* anything but a connected TCP socket is refused */
	int pp[2];
	assert_int_equal(pipe(pp), 0);
	int u = proxy_connect(sock);
	assert_int_equal(wr_send_fds(u, "", 1, &pp[0], 1), 0);
	static char ubuf[4096];
	size_t ulen = 0;
	ssize_t un;
	while ((un = read(u, ubuf + ulen, sizeof(ubuf) - 1 - ulen)) > 0)
		ulen += (size_t)un;
	ubuf[ulen] = '\0';
	close(u);
	close(pp[0]);
	close(pp[1]);
	assert_non_null(strstr(ubuf, "HTTP/1.1 400 Bad Request"));

	json_t *a = wait_audits(12);
	assert_int_equal(json_array_size(a), 12);
	size_t allowed_n = 0, denied_n = 0;
	size_t i;
	json_t *d;
	json_array_foreach(a, i, d)
	{
		const char *dec =
		    json_string_value(json_object_get(d, "decision"));
		if (!strcmp(dec, "allowed")) {
			allowed_n++;
			assert_string_equal(
			    json_string_value(json_object_get(d, "address")),
			    "127.0.0.1");
			assert_true(json_integer_value(
					json_object_get(d, "bytes_down")) > 0);
			assert_true(json_integer_value(
					json_object_get(d, "bytes_up")) > 0);
			assert_non_null(json_object_get(d, "ms"));
		} else if (!strcmp(dec, "denied")) {
			denied_n++;
			assert_non_null(json_object_get(d, "reason"));
		}
	}
	assert_int_equal(allowed_n, 3);
	assert_int_equal(denied_n, 9);
	json_decref(a);

	/* close: the socket and its directory go */
	egress_session_close(eg, "s-test");
	assert_int_equal(stat(sock, &stt), -1);
	assert_int_equal(stat(dir, &stt), -1);
	egress_stop(eg);
	free(sock);
	json_decref(audits);
	rmdir(tmp_dir);
	shutdown(server_fd, SHUT_RDWR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_allow_parse),
	    cmocka_unit_test(test_allow_match),
	    cmocka_unit_test(test_rules_default),
	    cmocka_unit_test(test_rules_config),
	    cmocka_unit_test(test_allowlist_check),
	    cmocka_unit_test(test_allow_public_suffix),
	    cmocka_unit_test(test_connect_ports),
	    cmocka_unit_test(test_parse_good),
	    cmocka_unit_test(test_parse_bad),
	    cmocka_unit_test(test_upstream_head),
	    cmocka_unit_test(test_proxy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

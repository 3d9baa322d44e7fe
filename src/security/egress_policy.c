/* egress_policy.c - the egress proxy's pure parts: host names and
 * allowlist entries, the server's deny rules, request heads (egress.h).
 *
 * No sockets and no threads here, so the unit tests and the fuzz target
 * (tests/fuzz/fuzz_egress.c) take all of it. */
#include "security/egress.h"

#include "util/alloc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libpsl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- host names ---------------------------------------------------------- */

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* An IPv6 literal (the part inside the brackets) in canonical form. */
static int normalize_v6(const char *in, size_t len,
			char out[EGRESS_HOST_MAX + 1])
{
	char tmp[INET6_ADDRSTRLEN];
	struct in6_addr a;
	/* no zone ids ("%eth0"): a sandbox has no business with links */
	if (len == 0 || len >= sizeof(tmp) || memchr(in, '%', len))
		return -EINVAL;
	memcpy(tmp, in, len);
	tmp[len] = '\0';
	if (inet_pton(AF_INET6, tmp, &a) != 1 ||
	    !inet_ntop(AF_INET6, &a, out, EGRESS_HOST_MAX + 1))
		return -EINVAL;
	return 0;
}

int egress_host_normalize(const char *in, size_t len,
			  char out[EGRESS_HOST_MAX + 1], bool *ip_literal)
{
	if (len == 0)
		return -EINVAL;
	if (in[0] == '[') {
		if (len < 3 || in[len - 1] != ']')
			return -EINVAL;
		*ip_literal = true;
		return normalize_v6(in + 1, len - 2, out);
	}
	if (in[len - 1] == '.')
		len--; /* "example.com." is example.com */
	if (len == 0 || len > EGRESS_HOST_MAX)
		return -EINVAL;
	size_t label = 0, last_label = 0;
	for (size_t i = 0; i < len; i++) {
		char c = lower(in[i]);
		if (c == '.') {
			if (label == 0 || out[i - 1] == '-')
				return -EINVAL;
			label = 0;
			last_label = i + 1;
		} else if ((c >= 'a' && c <= 'z') || is_digit(c) || c == '-') {
			if ((label == 0 && c == '-') || ++label > 63)
				return -EINVAL;
		} else {
			return -EINVAL; /* '_', '%', ':', non-ASCII (IDN) */
		}
		out[i] = c;
	}
	out[len] = '\0';
	if (label == 0 || out[len - 1] == '-')
		return -EINVAL;
	/* no top-level domain is numeric: a numeric last label means an
	 * IPv4 address, and only its plain dotted-quad form is taken
	 * (resolvers read "127.1", "0x7f.1" or "2130706433" as 127.0.0.1) */
	if (is_digit(out[last_label])) {
		struct in_addr a;
		char canon[INET_ADDRSTRLEN];
		if (inet_pton(AF_INET, out, &a) != 1 ||
		    !inet_ntop(AF_INET, &a, canon, sizeof(canon)) ||
		    strcmp(canon, out) != 0)
			return -EINVAL;
		*ip_literal = true;
		return 0;
	}
	*ip_literal = false;
	return 0;
}

/* "PORT": 1 to 5 digits, 1..65535. */
static int parse_port(const char *s, size_t len, uint16_t *out)
{
	if (len == 0 || len > 5)
		return -EINVAL;
	unsigned v = 0;
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v == 0 || v > 65535)
		return -EINVAL;
	*out = (uint16_t)v;
	return 0;
}

/* "host", "host:port", "[v6]", "[v6]:port" (no userinfo). */
static int parse_authority(const char *s, size_t len, bool need_port,
			   uint16_t default_port,
			   char host[EGRESS_HOST_MAX + 1], bool *ip_literal,
			   uint16_t *port)
{
	size_t host_len = len;
	const char *colon = NULL;
	if (len > 0 && s[0] == '[') {
		const char *close = memchr(s, ']', len);
		if (!close)
			return -EINVAL;
		host_len = (size_t)(close - s) + 1;
		if (host_len < len) {
			if (s[host_len] != ':')
				return -EINVAL;
			colon = s + host_len;
		}
	} else {
		colon = memchr(s, ':', len);
		if (colon) {
			host_len = (size_t)(colon - s);
			if (memchr(colon + 1, ':', len - host_len - 1))
				return -EINVAL; /* IPv6 without brackets */
		}
	}
	uint16_t p = default_port;
	if (colon) {
		if (parse_port(colon + 1, len - host_len - 1, &p) < 0)
			return -EINVAL;
	} else if (need_port) {
		return -EINVAL;
	}
	if (egress_host_normalize(s, host_len, host, ip_literal) < 0)
		return -EINVAL;
	*port = p;
	return 0;
}

/* ---- allowlist entries --------------------------------------------------- */

/* The Public Suffix List: the newest of libpsl's built-in copy and the
 * system's (Debian's publicsuffix package), loaded once and kept. */
static const psl_ctx_t *psl;
static pthread_once_t psl_once = PTHREAD_ONCE_INIT;

static void psl_load(void)
{
	psl = psl_latest(NULL);
	if (!psl)
		psl = psl_builtin();
}

/* Is host (lowercase, no final dot) a public suffix: "com", "co.uk",
 * "github.io", and (the list's "*" rule) any name of one label? Without
 * a list, every name is (refused rather than let through). */
static bool public_suffix(const char *host)
{
	pthread_once(&psl_once, psl_load);
	return !psl || psl_is_public_suffix2(psl, host, PSL_TYPE_ANY) != 0;
}

int egress_allow_check(const char *entry, struct egress_allow *out,
		       const char **why)
{
	struct egress_allow e = {0};
	size_t len = entry ? strlen(entry) : 0;
	*why = "not a host (\"example.com\", \"*.example.com\", "
	       "\"example.com:8443\")";
	if (len == 0 || len > EGRESS_HOST_MAX + 8)
		return -EINVAL;
	if (len > 2 && entry[0] == '*' && entry[1] == '.') {
		e.wildcard = true;
		entry += 2;
		len -= 2;
	}
	if (parse_authority(entry, len, false, 0, e.host, &e.ip_literal,
			    &e.port) < 0)
		return -EINVAL;
	if (e.wildcard && e.ip_literal)
		return -EINVAL;
	if (!e.ip_literal && public_suffix(e.host)) {
		*why = e.wildcard ? "a wildcard over a public suffix (the "
				    "Public Suffix List): name a domain "
				    "below it (\"*.example.com\")"
				  : "a public suffix (the Public Suffix "
				    "List): name a domain below it "
				    "(\"example.com\")";
		return -EINVAL;
	}
	*out = e;
	return 0;
}

int egress_allow_parse(const char *entry, struct egress_allow *out)
{
	const char *why;
	return egress_allow_check(entry, out, &why);
}

bool egress_allow_match(const struct egress_allow *e, const char *host,
			uint16_t port)
{
	if (e->port ? port != e->port : port != 80 && port != 443)
		return false;
	if (!e->wildcard)
		return strcmp(host, e->host) == 0;
	size_t hl = strlen(host), el = strlen(e->host);
	return hl > el + 1 && host[hl - el - 1] == '.' &&
	       strcmp(host + hl - el, e->host) == 0;
}

/* ---- addresses and rules ------------------------------------------------- */

struct cidr {
	bool v6;
	uint8_t addr[16];
	unsigned prefix;
	const char *why;
};

struct host_entry {
	char *name;
	struct sockaddr_storage *addrs;
	size_t n;
};

struct egress_rules {
	struct cidr *deny, *allow;
	size_t n_deny, n_allow;
	struct host_entry *hosts;
	size_t n_hosts;
	bool ip_literals;
	uint16_t *connect_ports; /* besides 443 */
	size_t n_connect_ports;
	bool has_self;
	uint16_t self_port;
	struct cidr self; /* prefix 0: any local address */
};

/* Denied by default (the order picks the reason: the metadata address
 * before link-local). */
static const struct {
	const char *cidr, *why;
} builtin_deny[] = {
    {"0.0.0.0/8", "an unspecified address (it reaches this host)"},
    {"10.0.0.0/8", "a private address"},
    {"100.64.0.0/10", "a shared address (carrier-grade NAT)"},
    {"127.0.0.0/8", "a loopback address"},
    {"169.254.169.254/32", "the cloud metadata address"},
    {"169.254.0.0/16", "a link-local address"},
    {"172.16.0.0/12", "a private address"},
    {"192.0.0.0/24", "a reserved address (IETF protocol assignments)"},
    {"192.168.0.0/16", "a private address"},
    {"198.18.0.0/15", "a reserved address (benchmarking)"},
    {"224.0.0.0/4", "a multicast address"},
    {"240.0.0.0/4", "a reserved address"},
    {"::/128", "an unspecified address (it reaches this host)"},
    {"::1/128", "a loopback address"},
    {"::/96", "a reserved address (IPv4-compatible)"},
    {"100::/64", "a discard-only address"},
    {"fd00:ec2::254/128", "the cloud metadata address"},
    {"fc00::/7", "a private address (unique local)"},
    {"fe80::/10", "a link-local address"},
    {"fec0::/10", "a site-local address"},
    {"ff00::/8", "a multicast address"},
};

static struct cidr builtin[sizeof(builtin_deny) / sizeof(builtin_deny[0])];
static bool builtin_ready;

/* "a.b.c.d[/n]" or "v6[/n]". */
static int cidr_parse(const char *text, struct cidr *out)
{
	char buf[INET6_ADDRSTRLEN + 8];
	size_t len = strlen(text);
	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, text, len + 1);
	char *slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	struct cidr c = {0};
	if (inet_pton(AF_INET, buf, c.addr) == 1) {
		c.prefix = 32;
	} else if (inet_pton(AF_INET6, buf, c.addr) == 1) {
		c.v6 = true;
		c.prefix = 128;
	} else {
		return -EINVAL;
	}
	if (slash) {
		uint16_t p;
		if (!strcmp(slash + 1, "0"))
			p = 0;
		else if (parse_port(slash + 1, strlen(slash + 1), &p) < 0)
			return -EINVAL;
		if (p > c.prefix)
			return -EINVAL;
		c.prefix = p;
	}
	*out = c;
	return 0;
}

static bool cidr_contains(const struct cidr *c, bool v6, const uint8_t *a)
{
	if (c->v6 != v6)
		return false;
	unsigned full = c->prefix / 8, rest = c->prefix % 8;
	if (memcmp(c->addr, a, full) != 0)
		return false;
	if (rest == 0)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (c->addr[full] & mask) == (a[full] & mask);
}

static void builtin_init(void)
{
	/* a constant table: racing initializers write the same bytes */
	if (__atomic_load_n(&builtin_ready, __ATOMIC_ACQUIRE))
		return;
	for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++) {
		cidr_parse(builtin_deny[i].cidr, &builtin[i]);
		builtin[i].why = builtin_deny[i].why;
	}
	__atomic_store_n(&builtin_ready, true, __ATOMIC_RELEASE);
}

/* The address as 4 or 16 bytes; IPv4 carried in IPv6 (mapped
 * ::ffff:a.b.c.d, NAT64 64:ff9b::a.b.c.d) is checked as the IPv4 address
 * it reaches. */
static int addr_bytes(const struct sockaddr *sa, uint8_t out[16], bool *v6)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0,    0,
					   0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};
	if (sa->sa_family == AF_INET) {
		memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		*v6 = false;
		return 0;
	}
	if (sa->sa_family != AF_INET6)
		return -EAFNOSUPPORT;
	const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	if (!memcmp(a, mapped, 12) || !memcmp(a, nat64, 12)) {
		memcpy(out, a + 12, 4);
		*v6 = false;
		return 0;
	}
	memcpy(out, a, 16);
	*v6 = true;
	return 0;
}

static bool is_loopback(bool v6, const uint8_t *a)
{
	static const uint8_t one[16] = {[15] = 1};
	return v6 ? !memcmp(a, one, 16) : a[0] == 127;
}

static bool is_unspecified(bool v6, const uint8_t *a)
{
	static const uint8_t zero[16];
	return v6 ? !memcmp(a, zero, 16) : a[0] == 0;
}

static bool addr_equal(bool v6, const uint8_t *a,
		       const struct sockaddr_storage *ss)
{
	uint8_t b[16];
	bool bv6;
	if (addr_bytes((const struct sockaddr *)ss, b, &bv6) < 0 || bv6 != v6)
		return false;
	return !memcmp(a, b, v6 ? 16 : 4);
}

int egress_rules_check(const struct egress_rules *r, const struct sockaddr *sa,
		       const struct sockaddr_storage *own, size_t n_own,
		       const char **why)
{
	uint8_t a[16] = {0};
	bool v6;
	if (addr_bytes(sa, a, &v6) < 0) {
		*why = "not an IP address";
		return -EACCES;
	}
	uint16_t port =
	    ntohs(sa->sa_family == AF_INET
		      ? ((const struct sockaddr_in *)sa)->sin_port
		      : ((const struct sockaddr_in6 *)sa)->sin6_port);
	builtin_init();
	for (size_t i = 0; i < r->n_deny; i++)
		if (cidr_contains(&r->deny[i], v6, a)) {
			*why = "an address the server's egress rules deny";
			return -EACCES;
		}
	bool own_addr = false;
	for (size_t i = 0; i < n_own && !own_addr; i++)
		own_addr = addr_equal(v6, a, &own[i]);
	/* the control plane: not even allow_addresses lets a sandbox at
	 * its API */
	if (r->has_self && port == r->self_port &&
	    (is_loopback(v6, a) || is_unspecified(v6, a) || own_addr ||
	     (r->self.prefix && cidr_contains(&r->self, v6, a)))) {
		*why = "the control plane itself";
		return -EACCES;
	}
	for (size_t i = 0; i < r->n_allow; i++)
		if (cidr_contains(&r->allow[i], v6, a))
			return 0;
	if (own_addr) {
		*why = "an address of this host";
		return -EACCES;
	}
	for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
		if (cidr_contains(&builtin[i], v6, a)) {
			*why = builtin[i].why;
			return -EACCES;
		}
	return 0;
}

int egress_rules_set_self(struct egress_rules *r, const char *addr,
			  uint16_t port)
{
	struct cidr c = {0};
	if (addr && *addr && cidr_parse(addr, &c) < 0)
		return -EINVAL;
	/* a wildcard listen address is "any local address", which the
	 * check covers by loopback, unspecified and own addresses */
	if (c.prefix && is_unspecified(c.v6, c.addr))
		c.prefix = 0;
	r->self = c;
	r->self_port = port;
	r->has_self = port != 0;
	return 0;
}

bool egress_rules_ip_literals(const struct egress_rules *r)
{
	return r->ip_literals;
}

size_t egress_rules_lookup(const struct egress_rules *r, const char *host,
			   uint16_t port, struct sockaddr_storage *out,
			   size_t max)
{
	for (size_t i = 0; i < r->n_hosts; i++) {
		if (strcmp(r->hosts[i].name, host))
			continue;
		size_t n = r->hosts[i].n < max ? r->hosts[i].n : max;
		for (size_t k = 0; k < n; k++) {
			out[k] = r->hosts[i].addrs[k];
			if (out[k].ss_family == AF_INET)
				((struct sockaddr_in *)&out[k])->sin_port =
				    htons(port);
			else
				((struct sockaddr_in6 *)&out[k])->sin6_port =
				    htons(port);
		}
		return n;
	}
	return 0;
}

void egress_rules_free(struct egress_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_hosts; i++) {
		free(r->hosts[i].name);
		free(r->hosts[i].addrs);
	}
	free(r->hosts);
	free(r->connect_ports);
	free(r->deny);
	free(r->allow);
	free(r);
}

static int load_cidrs(const json_t *v, const char *key, struct cidr **out,
		      size_t *n_out, struct wr_error **err)
{
	if (!json_is_array(v) || json_array_size(v) > 4096)
		return wr_error_input(err, EINVAL,
				      "egress.%s: expected an array of "
				      "addresses or CIDR ranges",
				      key);
	size_t n = json_array_size(v);
	struct cidr *list = wr_calloc(n ? n : 1, sizeof(*list));
	if (!list)
		return wr_error_set(err, ENOMEM, "egress.%s", key);
	for (size_t i = 0; i < n; i++) {
		const char *t = json_string_value(json_array_get(v, i));
		if (!t || cidr_parse(t, &list[i]) < 0) {
			free(list);
			return wr_error_input(err, EINVAL,
					      "egress.%s[%zu]: expected an "
					      "address or a CIDR range "
					      "(\"10.1.0.0/16\", \"::1/128\")",
					      key, i);
		}
	}
	*out = list;
	*n_out = n;
	return 0;
}

static int load_ports(const json_t *v, struct egress_rules *r,
		      struct wr_error **err)
{
	if (!json_is_array(v) || json_array_size(v) > 64)
		return wr_error_input(err, EINVAL,
				      "egress.connect_ports: expected an "
				      "array of at most 64 ports");
	size_t n = json_array_size(v);
	r->connect_ports = wr_calloc(n ? n : 1, sizeof(*r->connect_ports));
	if (!r->connect_ports)
		return wr_error_set(err, ENOMEM, "egress.connect_ports");
	for (size_t i = 0; i < n; i++) {
		const json_t *p = json_array_get(v, i);
		json_int_t port = json_integer_value(p);
		if (!json_is_integer(p) || port < 1 || port > 65535)
			return wr_error_input(err, EINVAL,
					      "egress.connect_ports[%zu]: "
					      "expected a port, 1 to 65535",
					      i);
		r->connect_ports[r->n_connect_ports++] = (uint16_t)port;
	}
	return 0;
}

static int load_host(const char *name, const json_t *v, struct host_entry *e,
		     struct wr_error **err)
{
	char norm[EGRESS_HOST_MAX + 1];
	bool literal;
	if (egress_host_normalize(name, strlen(name), norm, &literal) < 0 ||
	    literal)
		return wr_error_input(err, EINVAL,
				      "egress.hosts: '%.64s' is not a host "
				      "name",
				      name);
	size_t n = json_is_array(v) ? json_array_size(v) : 1;
	if (n == 0 || n > 16)
		return wr_error_input(err, EINVAL,
				      "egress.hosts.%s: expected 1 to 16 "
				      "addresses",
				      norm);
	e->name = wr_strdup(norm);
	e->addrs = wr_calloc(n, sizeof(*e->addrs));
	if (!e->name || !e->addrs)
		return wr_error_set(err, ENOMEM, "egress.hosts");
	for (size_t i = 0; i < n; i++) {
		const char *t = json_string_value(
		    json_is_array(v) ? json_array_get(v, i) : v);
		struct sockaddr_in *s4 = (struct sockaddr_in *)&e->addrs[i];
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&e->addrs[i];
		if (t && inet_pton(AF_INET, t, &s4->sin_addr) == 1) {
			s4->sin_family = AF_INET;
		} else if (t && inet_pton(AF_INET6, t, &s6->sin6_addr) == 1) {
			s6->sin6_family = AF_INET6;
		} else {
			return wr_error_input(err, EINVAL,
					      "egress.hosts.%s: expected an IP "
					      "address or an array of them",
					      norm);
		}
	}
	e->n = n;
	return 0;
}

int egress_rules_new(const json_t *config, struct egress_rules **out,
		     struct wr_error **err)
{
	struct egress_rules *r = wr_calloc(1, sizeof(*r));
	if (!r)
		return wr_error_set(err, ENOMEM, "egress rules");
	int ret = 0;
	if (config && !json_is_object(config)) {
		ret = wr_error_input(err, EINVAL, "egress: expected an object");
		goto out;
	}
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)config, key, v)
	{
		if (!strcmp(key, "deny")) {
			ret = load_cidrs(v, key, &r->deny, &r->n_deny, err);
		} else if (!strcmp(key, "allow_addresses")) {
			ret = load_cidrs(v, key, &r->allow, &r->n_allow, err);
		} else if (!strcmp(key, "connect_ports")) {
			ret = load_ports(v, r, err);
		} else if (!strcmp(key, "ip_literals")) {
			if (!json_is_boolean(v))
				ret = wr_error_input(err, EINVAL,
						     "egress.ip_literals: "
						     "expected true or false");
			r->ip_literals = json_is_true(v);
		} else if (!strcmp(key, "hosts")) {
			if (!json_is_object(v) || json_object_size(v) > 4096) {
				ret = wr_error_input(err, EINVAL,
						     "egress.hosts: expected "
						     "an object of names");
				goto out;
			}
			r->hosts = wr_calloc(json_object_size(v) + 1,
					     sizeof(*r->hosts));
			if (!r->hosts) {
				ret = wr_error_set(err, ENOMEM, "egress.hosts");
				goto out;
			}
			const char *name;
			json_t *addrs;
			json_object_foreach(v, name, addrs)
			{
				ret = load_host(name, addrs,
						&r->hosts[r->n_hosts++], err);
				if (ret < 0)
					goto out;
			}
		} else {
			ret = wr_error_input(err, EINVAL,
					     "egress: unknown key '%s' "
					     "(expected deny, allow_addresses, "
					     "hosts, ip_literals, "
					     "connect_ports)",
					     key);
		}
		if (ret < 0)
			goto out;
	}
out:
	if (ret < 0) {
		egress_rules_free(r);
		return ret;
	}
	*out = r;
	return 0;
}

int egress_allowlist_check(const struct egress_rules *r,
			   const char *const *allow, size_t n, const char *host,
			   bool ip_literal, uint16_t port, const char **why)
{
	if (ip_literal && !r->ip_literals) {
		*why = "an IP address: only host names may be allowed";
		return -EACCES;
	}
	for (size_t i = 0; i < n && i < EGRESS_ENTRIES_MAX; i++) {
		struct egress_allow e;
		if (egress_allow_parse(allow[i], &e) < 0 ||
		    (e.ip_literal && !r->ip_literals))
			continue;
		if (egress_allow_match(&e, host, port))
			return 0;
	}
	*why = "not in the allowlist";
	return -EACCES;
}

int egress_connect_check(const struct egress_rules *r, uint16_t port,
			 const char **why)
{
	if (port == 443)
		return 0;
	for (size_t i = 0; i < r->n_connect_ports; i++)
		if (r->connect_ports[i] == port)
			return 0;
	*why = "CONNECT only to port 443 and the server's "
	       "egress.connect_ports; plain HTTP goes through the proxy as "
	       "http:// URLs";
	return -EACCES;
}

/* ---- request heads -------------------------------------------------------
 */

static bool is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       is_digit((char)c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A target or version: visible ASCII only. */
static bool visible(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

static int bad(const char **why, const char *what)
{
	*why = what;
	return -EBADMSG;
}

static int parse_request_line(const char *s, size_t n,
			      struct egress_request *req, const char **why)
{
	const char *sp1 = memchr(s, ' ', n);
	if (!sp1 || sp1 == s || (size_t)(sp1 - s) >= sizeof(req->method))
		return bad(why, "malformed request line");
	size_t mlen = (size_t)(sp1 - s);
	for (size_t i = 0; i < mlen; i++)
		if (!is_tchar((unsigned char)s[i]))
			return bad(why, "malformed method");
	memcpy(req->method, s, mlen);
	req->method[mlen] = '\0';
	const char *target = sp1 + 1;
	const char *end = s + n;
	const char *sp2 = memchr(target, ' ', (size_t)(end - target));
	if (!sp2 || sp2 == target)
		return bad(why, "malformed request line");
	size_t tlen = (size_t)(sp2 - target);
	const char *version = sp2 + 1;
	size_t vlen = (size_t)(end - version);
	if (vlen != 8 || memcmp(version, "HTTP/1.", 7) ||
	    (version[7] != '0' && version[7] != '1'))
		return bad(why, "not an HTTP/1.0 or HTTP/1.1 request");
	req->version_minor = version[7] - '0';
	if (!visible(target, tlen))
		return bad(why, "malformed request target");
	if (!strcmp(req->method, "CONNECT")) {
		req->kind = EGRESS_CONNECT;
		if (parse_authority(target, tlen, true, 0, req->host,
				    &req->ip_literal, &req->port) < 0)
			return bad(why, "CONNECT needs host:port");
		return 0;
	}
	req->kind = EGRESS_HTTP;
	if (target[0] == '/') { /* origin form: the Host header names it */
		req->path_off = (size_t)(target - s);
		req->path_len = tlen;
		req->port = 0;
		return 0;
	}
	const char *scheme_end = NULL;
	for (size_t i = 0; i + 2 < tlen; i++)
		if (target[i] == ':' && target[i + 1] == '/' &&
		    target[i + 2] == '/') {
			scheme_end = target + i;
			break;
		}
	if (!scheme_end)
		return bad(why, "malformed request target");
	if ((size_t)(scheme_end - target) != 4 ||
	    strncasecmp(target, "http", 4) != 0) {
		*why = "only http:// URLs are taken in a request line (https "
		       "goes through CONNECT)";
		return -EPROTONOSUPPORT;
	}
	const char *auth = scheme_end + 3;
	const char *auth_end = auth;
	while (auth_end < target + tlen && *auth_end != '/' &&
	       *auth_end != '?' && *auth_end != '#')
		auth_end++;
	if (auth_end < target + tlen && *auth_end == '#')
		return bad(why, "malformed request target");
	if (memchr(auth, '@', (size_t)(auth_end - auth)))
		return bad(why, "user information in the URL is not taken");
	if (parse_authority(auth, (size_t)(auth_end - auth), false, 80,
			    req->host, &req->ip_literal, &req->port) < 0)
		return bad(why, "malformed host in the URL");
	req->path_off = (size_t)(auth_end - s);
	req->path_len = (size_t)(target + tlen - auth_end);
	return 0;
}

/* A header line "Name: value": the name and the value without the
 * surrounding white space. */
static int parse_header(const char *s, size_t n, const char **value,
			size_t *value_len)
{
	const char *colon = memchr(s, ':', n);
	if (!colon || colon == s)
		return -EBADMSG;
	for (const char *p = s; p < colon; p++)
		if (!is_tchar((unsigned char)*p))
			return -EBADMSG; /* also "Name :" (smuggling) */
	const char *v = colon + 1, *e = s + n;
	while (v < e && (*v == ' ' || *v == '\t'))
		v++;
	while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	for (const char *p = v; p < e; p++) {
		unsigned char c = (unsigned char)*p;
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return -EBADMSG;
	}
	*value = v;
	*value_len = (size_t)(e - v);
	return 0;
}

static bool header_is(const char *line, size_t n, const char *name)
{
	size_t len = strlen(name);
	return n > len && line[len] == ':' && !strncasecmp(line, name, len);
}

int egress_parse_head(const char *buf, size_t len, struct egress_request *out,
		      const char **why)
{
	struct egress_request req = {0};
	size_t cap = len < EGRESS_HEAD_MAX ? len : EGRESS_HEAD_MAX;
	/* refuse what is not HTTP at once (say, TLS sent to the proxy port)
	 * rather than wait for a line end that may never come */
	for (size_t i = 0; i < cap && buf[i] != ' '; i++)
		if (!is_tchar((unsigned char)buf[i]) || i >= 20)
			return bad(why, "not an HTTP request");
	const char *host_value = NULL;
	size_t host_len = 0, pos = 0, headers = 0;
	for (unsigned line = 0;; line++) {
		const char *nl = memchr(buf + pos, '\n', cap - pos);
		if (!nl) {
			if (len >= EGRESS_HEAD_MAX) {
				*why = "request head larger than 16 KiB";
				return -E2BIG;
			}
			return 0;
		}
		size_t end = (size_t)(nl - buf), line_end = end;
		if (line_end > pos && buf[line_end - 1] == '\r')
			line_end--;
		const char *s = buf + pos;
		size_t n = line_end - pos;
		if (memchr(s, '\r', n) || memchr(s, '\0', n))
			return bad(why, "control character in the request "
					"head");
		pos = end + 1;
		if (line == 0) {
			int r = parse_request_line(s, n, &req, why);
			if (r < 0)
				return r;
			continue;
		}
		if (n == 0)
			break;
		if (s[0] == ' ' || s[0] == '\t')
			return bad(why, "folded header lines are not taken");
		if (++headers > EGRESS_HEADERS_MAX) {
			*why = "more than 100 header lines";
			return -E2BIG;
		}
		const char *value;
		size_t vlen;
		if (parse_header(s, n, &value, &vlen) < 0)
			return bad(why, "malformed header line");
		if (header_is(s, n, "host")) {
			if (host_value)
				return bad(why, "more than one Host header");
			host_value = value;
			host_len = vlen;
		}
	}
	/* origin form: the Host header is the target */
	if (req.kind == EGRESS_HTTP && req.port == 0) {
		if (!host_value)
			return bad(why, "no host: neither an absolute URL nor "
					"a Host header");
		if (memchr(host_value, '@', host_len) ||
		    parse_authority(host_value, host_len, false, 80, req.host,
				    &req.ip_literal, &req.port) < 0)
			return bad(why, "malformed Host header");
	}
	req.head_len = pos;
	*out = req;
	return (int)pos;
}

char *egress_http_upstream_head(const char *buf,
				const struct egress_request *req,
				size_t *out_len)
{
	size_t cap = req->head_len + 2 * EGRESS_HOST_MAX + 128;
	char *out = wr_malloc(cap);
	if (!out)
		return NULL;
	bool v6 = strchr(req->host, ':') != NULL;
	const char *path = req->path_len ? buf + req->path_off : "/";
	size_t path_len = req->path_len ? req->path_len : 1;
	bool slash = path[0] == '?'; /* "http://h?q" is "/?q" */
	char port[8] = "";
	if (req->port != 80)
		snprintf(port, sizeof(port), ":%u", (unsigned)req->port);
	int n = snprintf(out, cap, "%s %s%.*s HTTP/1.%d\r\nHost: %s%s%s%s\r\n",
			 req->method, slash ? "/" : "", (int)path_len, path,
			 req->version_minor, v6 ? "[" : "", req->host,
			 v6 ? "]" : "", port);
	if (n < 0 || (size_t)n >= cap) {
		free(out);
		return NULL;
	}
	size_t used = (size_t)n;
	/* the header lines after the request line, as they came, less the
	 * proxy's own (Proxy-*) and the connection's */
	const char *p = memchr(buf, '\n', req->head_len);
	size_t pos = p ? (size_t)(p - buf) + 1 : req->head_len;
	while (pos < req->head_len) {
		const char *nl = memchr(buf + pos, '\n', req->head_len - pos);
		size_t end = nl ? (size_t)(nl - buf) : req->head_len;
		size_t line_end = end;
		if (line_end > pos && buf[line_end - 1] == '\r')
			line_end--;
		const char *s = buf + pos;
		size_t len = line_end - pos;
		pos = end + 1;
		if (len == 0)
			break;
		if (header_is(s, len, "host") ||
		    (len > 6 && !strncasecmp(s, "proxy-", 6)) ||
		    header_is(s, len, "connection") ||
		    header_is(s, len, "keep-alive"))
			continue;
		if (used + len + 2 > cap) {
			free(out);
			return NULL;
		}
		memcpy(out + used, s, len);
		memcpy(out + used + len, "\r\n", 2);
		used += len + 2;
	}
	static const char tail[] = "Connection: close\r\n\r\n";
	if (used + sizeof(tail) > cap) {
		free(out);
		return NULL;
	}
	memcpy(out + used, tail, sizeof(tail));
	*out_len = used + sizeof(tail) - 1;
	return out;
}

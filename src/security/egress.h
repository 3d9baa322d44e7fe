/* egress.h - the egress proxy: what a sandbox may reach outside.
 *
 * Sandboxes have no network interface but loopback (ARCHITECTURE.md,
 * "Network modes"). A session whose policy allows any host gets an HTTP
 * proxy of the control plane instead: a unix socket per session
 * (DATA/sessions/<id>.egress/proxy.sock) bound into its sandbox, where a
 * tiny relay (src/init/relay.c) exposes it as 127.0.0.1:3128 with
 * HTTP_PROXY/HTTPS_PROXY set. The proxy takes CONNECT host:port (HTTPS and
 * any TLS, to port 443 and the server's connect_ports only) and plain HTTP
 * requests in absolute form (sent on with Host set to the URL's
 * authority), and for each one:
 *
 *   1. checks host:port against the session's allowlist, read at that
 *      moment through the policy callback (the repository's spec
 *      customizations.warren.egress plus the session's own list), and a
 *      CONNECT's port;
 *   2. resolves the name itself (the server's static host table first,
 *      then getaddrinfo) and checks every address against the server's
 *      deny rules, which no allowlist overrides (loopback, private,
 *      link-local and metadata, carrier-grade NAT, multicast, reserved,
 *      this host's own addresses, the control plane's endpoint); only the
 *      server's configuration can let an address through (allow_addresses);
 *   3. connects only to an address that passed, never resolving again
 *      (a name cannot rebind to a private address between check and use);
 *   4. relays bytes both ways until both sides are done.
 *
 * A refusal is "403 Forbidden" with a body that says why; every decision
 * goes to the audit callback with host, port, address, reason, bytes and
 * duration.
 *
 * egress_policy.c owns the pure parts (allowlist entries, deny rules,
 * request heads); egress.c the connections, over the session server
 * (session_server.h: sockets, threads). Nothing here prints. */
#ifndef WR_SECURITY_EGRESS_H
#define WR_SECURITY_EGRESS_H

#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Where things are inside a sandbox with egress. */
#define EGRESS_SANDBOX_DIR "/run/warren-egress" /* the socket's directory */
#define EGRESS_SANDBOX_SOCKET EGRESS_SANDBOX_DIR "/proxy.sock"
#define EGRESS_SANDBOX_RELAY "/run/warren-egress-relay"
#define EGRESS_SOCKET_NAME "proxy.sock"
#define EGRESS_PROXY_PORT 3128
#define EGRESS_PROXY_URL "http://127.0.0.1:3128"
/* The variables that point a sandbox's commands at the proxy (sessions
 * and snapshot builds alike), for an array initializer. */
#define EGRESS_PROXY_ENV                                                  \
	"HTTP_PROXY=" EGRESS_PROXY_URL, "HTTPS_PROXY=" EGRESS_PROXY_URL,      \
	    "http_proxy=" EGRESS_PROXY_URL, "https_proxy=" EGRESS_PROXY_URL, \
	    "NO_PROXY=localhost,127.0.0.1,::1",                               \
	    "no_proxy=localhost,127.0.0.1,::1"

#define EGRESS_HEAD_MAX (16 * 1024) /* a request head, blank line included */
#define EGRESS_HEADERS_MAX 100	    /* header lines in a head */
#define EGRESS_HOST_MAX 253	    /* a DNS name's length */
#define EGRESS_ENTRIES_MAX 512	    /* allowlist entries of one session */
#define EGRESS_CONN_MAX 256	    /* concurrent connections per session */
#define EGRESS_SESSION_MAX 128	    /* a session id's length */

/* ---- allowlist entries (egress_policy.c) ------------------------------- */

/* "example.com", "*.example.com", "example.com:8443", "*.example.com:443";
 * an IP address ("203.0.113.7", "[2001:db8::1]:443") only where the server
 * allows IP literals. Names are ASCII (IDNs in their xn-- form), matched
 * without regard to case and a final dot. */
struct egress_allow {
	char host[EGRESS_HOST_MAX + 1]; /* lowercase, without "*." */
	bool wildcard;			/* any name below host, not host */
	bool ip_literal;
	uint16_t port; /* 0: the web ports, 80 and 443 */
};

/* 0, or -EINVAL for anything that is not an entry, with *why for the
 * user. A public suffix of the Public Suffix List (ICANN and private
 * sections, through libpsl: "com", "co.uk", "github.io", any one-label
 * name) is no entry, nor a wildcard over one ("*.com", "*.github.io"):
 * "example.com", "*.example.com" and "user.github.io" are. */
int egress_allow_check(const char *entry, struct egress_allow *out,
		       const char **why);
/* The same without the reason. */
int egress_allow_parse(const char *entry, struct egress_allow *out);
bool egress_allow_match(const struct egress_allow *e, const char *host,
			uint16_t port);

/* Normalizes a host as a request names it: lowercase, no final dot, an
 * IPv6 literal without brackets. A name must be LDH labels whose last one
 * is not numeric; anything numeric must be a plain IPv4 or IPv6 address
 * (so "127.1" or "0x7f.0.0.1", which resolvers read as 127.0.0.1, are
 * refused rather than slipped past the name checks). 0 or -EINVAL. */
int egress_host_normalize(const char *in, size_t len,
			  char out[EGRESS_HOST_MAX + 1], bool *ip_literal);

/* ---- the server's rules (egress_policy.c) ------------------------------ */

/* From the server configuration's "egress" object (NULL: defaults):
 *   {"deny": ["203.0.113.0/24", "2001:db8::/32"],    more denied ranges
 *    "allow_addresses": ["127.0.0.1/32"],   let these through the default
 *                                           deny rules (not "deny")
 *    "hosts": {"name.test": "127.0.0.1" | ["127.0.0.1", "::1"]},
 *                                           static resolution table
 *    "ip_literals": false,                  allow IP addresses as hosts
 *    "connect_ports": [8443]}               CONNECT to these besides 443
 * Unknown keys and malformed values are input errors naming the key. */
struct egress_rules;
int egress_rules_new(const json_t *config, struct egress_rules **out,
		     struct wr_error **err);
void egress_rules_free(struct egress_rules *r);
/* The control plane's own endpoint (its API): never reachable, whatever
 * allow_addresses says. addr NULL or a wildcard: any loopback or own
 * address with that port. */
int egress_rules_set_self(struct egress_rules *r, const char *addr,
			  uint16_t port);
bool egress_rules_ip_literals(const struct egress_rules *r);
/* Addresses of host in the static table (port set), at most max; 0 if
 * the table does not name it. */
size_t egress_rules_lookup(const struct egress_rules *r, const char *host,
			   uint16_t port, struct sockaddr_storage *out,
			   size_t max);

/* May a connection go to sa? 0, or -EACCES with *why ("a private
 * address", "the cloud metadata address", ...). own: this host's
 * addresses (the proxy keeps them current), may be NULL. */
int egress_rules_check(const struct egress_rules *r, const struct sockaddr *sa,
		       const struct sockaddr_storage *own, size_t n_own,
		       const char **why);

/* May a CONNECT go to port? Only 443 and the rules' connect_ports: a
 * tunnel carries any Host header, so a plain-HTTP port would open every
 * virtual host of the address (plain HTTP goes through the proxy's
 * forwarding, which sets Host itself). 0, or -EACCES with *why. */
int egress_connect_check(const struct egress_rules *r, uint16_t port,
			 const char **why);

/* The allowlist's verdict on host:port: 0, or -EACCES with *why. */
int egress_allowlist_check(const struct egress_rules *r,
			   const char *const *allow, size_t n, const char *host,
			   bool ip_literal, uint16_t port, const char **why);

/* ---- request heads (egress_policy.c) ----------------------------------- */

enum egress_kind {
	EGRESS_CONNECT, /* CONNECT host:port: a tunnel */
	EGRESS_HTTP, /* GET http://host[:port]/path (or origin form + Host) */
	EGRESS_KIND_MAX,
};

struct egress_request {
	enum egress_kind kind;
	char method[24];
	char host[EGRESS_HOST_MAX + 1]; /* normalized (see above) */
	bool ip_literal;
	uint16_t port;
	int version_minor; /* HTTP/1.x */
	size_t head_len;   /* bytes of the head, blank line included */
	/* EGRESS_HTTP: the origin-form target (path and query) in the
	 * buffer; length 0 means "/" */
	size_t path_off, path_len;
};

/* Parses the head at the start of buf[0..len). Returns the head's length
 * when it is complete and well-formed; 0 if more bytes are needed; -E2BIG
 * past EGRESS_HEAD_MAX or EGRESS_HEADERS_MAX; -EBADMSG if malformed, or
 * -EPROTONOSUPPORT for a scheme other than http, with *why. */
int egress_parse_head(const char *buf, size_t len, struct egress_request *out,
		      const char **why);

/* The head to send upstream for EGRESS_HTTP: the request line in origin
 * form, Host set to the authority that was checked, the proxy's own
 * headers (Proxy-*, Connection, Keep-Alive) dropped, "Connection: close"
 * (one request per connection). NULL on ENOMEM; caller frees. */
char *egress_http_upstream_head(const char *buf,
				const struct egress_request *req,
				size_t *out_len);

/* ---- the proxy (egress.c) ---------------------------------------------- */

/* The session's allowlist, now: *allow gets a new array of n new strings
 * (egress_strv_free), or 0 entries. A negative return refuses every
 * request of the session ("no policy"). */
typedef int (*egress_policy_fn)(void *ctx, const char *session_id,
				char ***allow, size_t *n);
/* One decision: {"decision": "allowed"|"denied"|"failed", "kind":
 * "connect"|"http", "method", "host", "port", "address", "reason",
 * "bytes_up", "bytes_down", "ms"}; allowed connections are reported when
 * they end. Called from the connection's thread. */
typedef void (*egress_audit_fn)(void *ctx, const char *session_id,
				const json_t *details);

struct egress_config {
	const json_t *rules;   /* the server's "egress" object, NULL: none */
	const char *self_addr; /* the control plane's API endpoint */
	uint16_t self_port;
	egress_policy_fn policy;
	egress_audit_fn audit; /* may be NULL */
	void *ctx;
	unsigned max_conns;	     /* per session; 0: EGRESS_CONN_MAX */
	unsigned connect_timeout_ms; /* 0: 10 s */
};

struct egress;

int egress_start(const struct egress_config *cfg, struct egress **out,
		 struct wr_error **err);
/* Listens for the session at dir/proxy.sock (dir made 0711, the socket
 * 0666: the sandbox's processes run as an unmapped uid and reach it only
 * through the bind mount; DATA/sessions itself is 0700). Opening a
 * session that is open already keeps its listener. *sock_path (may be
 * NULL) is set to the socket's path (caller frees). */
int egress_session_open(struct egress *eg, const char *session_id,
			const char *dir, char **sock_path,
			struct wr_error **err);
/* Stops listening, ends the session's connections, removes the socket
 * and its directory. Unknown sessions are fine. */
void egress_session_close(struct egress *eg, const char *session_id);
/* Closes every session and waits for every connection thread. */
void egress_stop(struct egress *eg);

void egress_strv_free(char **v, size_t n);

#endif

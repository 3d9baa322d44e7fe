/* url.h - the parts of an http(s) URL that decide where a credential or a
 * message may go: the scheme, the host, and whether that host is this
 * machine's loopback. No I/O, no policy: the callers (the forge client,
 * the Slack configuration) decide what they accept. */
#ifndef WR_UTIL_URL_H
#define WR_UTIL_URL_H

#include <stdbool.h>
#include <stddef.h>

struct wr_url_parts {
	bool https;	   /* else http */
	const char *host;  /* into the URL: the host, without the port;
			    * an IPv6 one with its brackets */
	size_t host_len;
	size_t origin_len; /* "scheme://host[:port]": the URL's first bytes */
};

/* Splits "http://host[:port][/...]" or "https://…" (scheme case-blind);
 * false when url is neither or has no host. Nothing else is checked:
 * characters, user info, query are the caller's business. */
bool wr_url_http_parts(const char *url, struct wr_url_parts *out);
/* Is host (host_len bytes, as wr_url_http_parts gives it) this machine:
 * "localhost", "[::1]", or 127.x.y.z? */
bool wr_url_host_loopback(const char *host, size_t host_len);

#endif

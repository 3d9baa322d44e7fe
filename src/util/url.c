/* url.c - see url.h. */
#include "util/url.h"

#include <string.h>
#include <strings.h>

bool wr_url_http_parts(const char *url, struct wr_url_parts *out)
{
	size_t scheme;
	bool https;
	if (!strncasecmp(url, "https://", 8)) {
		scheme = 8;
		https = true;
	} else if (!strncasecmp(url, "http://", 7)) {
		scheme = 7;
		https = false;
	} else {
		return false;
	}
	const char *h = url + scheme;
	size_t authority = strcspn(h, "/");
	size_t n = authority;
	if (h[0] == '[') {
		const char *close = memchr(h, ']', authority);
		n = close ? (size_t)(close - h) + 1 : 0;
	} else {
		const char *colon = memchr(h, ':', authority);
		if (colon)
			n = (size_t)(colon - h);
	}
	if (n == 0)
		return false;
	*out = (struct wr_url_parts){.https = https,
				     .host = h,
				     .host_len = n,
				     .origin_len = scheme + authority};
	return true;
}

bool wr_url_host_loopback(const char *host, size_t host_len)
{
	if (host_len == 9 && !strncasecmp(host, "localhost", 9))
		return true;
	if (host_len == 5 && !memcmp(host, "[::1]", 5))
		return true;
	if (host_len >= 4 && !memcmp(host, "127.", 4)) {
		for (size_t i = 4; i < host_len; i++)
			if (host[i] != '.' && (host[i] < '0' || host[i] > '9'))
				return false;
		return true;
	}
	return false;
}

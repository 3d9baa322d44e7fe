/* upstream.c - one call to an upstream model API, its answer pulled as it
 * arrives (internal.h).
 *
 * The gateway answers each agent's call from the thread libmicrohttpd
 * gives that connection, so the upstream's answer is pulled from there:
 * libcurl's multi interface, driven one step at a time by whoever wants
 * the next bytes (gw_upstream_read), with nothing in between to buffer a
 * stream ahead of a slow agent. Waiting is curl_multi_poll with a short
 * timeout so the call's stop callback (the turn ended, the server stops)
 * is looked at while a long generation streams.
 *
 * Connections to upstreams are shared between calls (CURLSH with the
 * connection cache, DNS and TLS sessions), so an agent's next call reuses
 * the connection its last one opened. */
#include "gateway/internal.h"

#include "util/alloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define POLL_MS 200		  /* how often stop is looked at */
#define CONNECT_TIMEOUT_MS 15000  /* to an upstream */
#define PENDING_MAX (1024 * 1024) /* body bytes read ahead, at most */

struct gw_upstream_call {
	CURL *easy;
	CURLM *multi;
	struct curl_slist *headers;
	struct gw_upstream_head head;
	bool head_done; /* the final status line's headers are in */
	bool done;	/* the transfer ended */
	CURLcode result;
	char errbuf[CURL_ERROR_SIZE];
	/* body bytes written by libcurl, not yet read */
	char *pending;
	size_t pending_len, pending_off, pending_cap;
	bool (*stop)(void *ctx);
	void *stop_ctx;
	uint64_t timeout_ms;
};

/* ---- the shared connections ------------------------------------------- */

struct gw_share {
	CURLSH *sh;
	pthread_mutex_t mu[CURL_LOCK_DATA_LAST];
};

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a,
		       void *ctx)
{
	(void)h;
	(void)a;
	struct gw_share *s = ctx;
	pthread_mutex_lock(&s->mu[d]);
}

static void share_unlock(CURL *h, curl_lock_data d, void *ctx)
{
	(void)h;
	struct gw_share *s = ctx;
	pthread_mutex_unlock(&s->mu[d]);
}

struct gw_share *gw_upstream_share_new(void)
{
	struct gw_share *s = wr_calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->sh = curl_share_init();
	if (!s->sh) {
		free(s);
		return NULL;
	}
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&s->mu[i], NULL);
	curl_share_setopt(s->sh, CURLSHOPT_USERDATA, s);
	curl_share_setopt(s->sh, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(s->sh, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(s->sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(s->sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(s->sh, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	return s;
}

void gw_upstream_share_free(struct gw_share *s)
{
	if (!s)
		return;
	curl_share_cleanup(s->sh);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&s->mu[i]);
	free(s);
}

/* ---- one call ---------------------------------------------------------- */

/* A header value into dst (trimmed), if line is "name: value". */
static bool header_value(const char *line, size_t len, const char *name,
			 char *dst, size_t size)
{
	size_t n = strlen(name);
	if (len <= n || strncasecmp(line, name, n) || line[n] != ':')
		return false;
	const char *v = line + n + 1;
	const char *end = line + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' ||
			   end[-1] == ' '))
		end--;
	size_t vl = (size_t)(end - v) < size - 1 ? (size_t)(end - v) : size - 1;
	memcpy(dst, v, vl);
	dst[vl] = '\0';
	return true;
}

static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
	struct gw_upstream_call *c = ctx;
	size_t len = size * n;
	if (len >= 5 && !strncmp(data, "HTTP/", 5)) {
		/* a new status line: 1xx heads come before the real one */
		memset(&c->head, 0, sizeof(c->head));
		const char *sp = memchr(data, ' ', len);
		c->head.status = sp ? atoi(sp + 1) : 0;
	} else if (len <= 2 && (data[0] == '\r' || data[0] == '\n')) {
		if (c->head.status >= 200)
			c->head_done = true;
	} else {
		if (!header_value(data, len, "content-type",
				  c->head.content_type,
				  sizeof(c->head.content_type)) &&
		    !header_value(data, len, "retry-after",
				  c->head.retry_after,
				  sizeof(c->head.retry_after)) &&
		    !header_value(data, len, "x-request-id",
				  c->head.request_id,
				  sizeof(c->head.request_id)))
			header_value(data, len, "request-id",
				     c->head.request_id,
				     sizeof(c->head.request_id));
	}
	return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
	struct gw_upstream_call *c = ctx;
	size_t len = size * n;
	c->head_done = true; /* a body without its blank line seen */
	if (c->pending_off == c->pending_len)
		c->pending_off = c->pending_len = 0;
	if (c->pending_len + len > PENDING_MAX)
		return CURL_WRITEFUNC_PAUSE; /* read what is there first */
	if (c->pending_len + len > c->pending_cap) {
		size_t cap = c->pending_cap ? c->pending_cap : 16384;
		while (cap < c->pending_len + len)
			cap *= 2;
		char *p = wr_realloc(c->pending, cap);
		if (!p)
			return 0; /* fails the transfer: out of memory */
		c->pending = p;
		c->pending_cap = cap;
	}
	memcpy(c->pending + c->pending_len, data, len);
	c->pending_len += len;
	return len;
}

/* One step of the transfer: waits up to POLL_MS for news. */
static void step(struct gw_upstream_call *c)
{
	int running = 0;
	curl_multi_poll(c->multi, NULL, 0, POLL_MS, NULL);
	curl_multi_perform(c->multi, &running);
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(c->multi, &left)))
		if (m->msg == CURLMSG_DONE) {
			c->done = true;
			c->result = m->data.result;
		}
	if (!running)
		c->done = true;
}

static bool stopped(const struct gw_upstream_call *c)
{
	return c->stop && c->stop(c->stop_ctx);
}

static const char *transfer_error(const struct gw_upstream_call *c, int *e)
{
	switch (c->result) {
	case CURLE_OPERATION_TIMEDOUT: *e = -ETIMEDOUT; break;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST: *e = -EHOSTUNREACH; break;
	default: *e = -EIO; break;
	}
	return c->errbuf[0] ? c->errbuf : curl_easy_strerror(c->result);
}

int gw_upstream_begin(struct gw_share *share, struct gw_upstream_req *req,
		      struct gw_upstream_call **out, struct wr_error **err)
{
	struct gw_upstream_call *c = wr_calloc(1, sizeof(*c));
	if (!c) {
		curl_slist_free_all(req->headers);
		return wr_error_set(err, ENOMEM, "gateway");
	}
	c->headers = req->headers;
	c->stop = req->stop;
	c->stop_ctx = req->stop_ctx;
	c->easy = curl_easy_init();
	c->multi = curl_multi_init();
	if (!c->easy || !c->multi) {
		gw_upstream_free(c);
		return wr_error_set(err, ENOMEM, "gateway: libcurl");
	}
	CURL *e = c->easy;
	curl_easy_setopt(e, CURLOPT_URL, req->url);
	curl_easy_setopt(e, CURLOPT_SHARE, share->sh);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, c->headers);
	if (req->post) {
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body);
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)req->body_len);
	}
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, c->errbuf);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)req->timeout_ms);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)CONNECT_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
	/* the agent's bytes as they are: no decoding of an encoding the
	 * gateway did not ask for */
	curl_easy_setopt(e, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	curl_multi_add_handle(c->multi, e);
	while (!c->head_done && !c->done && !stopped(c))
		step(c);
	if (!c->head_done) {
		int r = -ECANCELED;
		const char *why = "the call was stopped";
		if (c->done)
			why = transfer_error(c, &r);
		wr_error_set(err, -r, "upstream %s: %s", req->url, why);
		gw_upstream_free(c);
		return r;
	}
	*out = c;
	return 0;
}

const struct gw_upstream_head *gw_upstream_head(
    const struct gw_upstream_call *c)
{
	return &c->head;
}

ssize_t gw_upstream_read(struct gw_upstream_call *c, char *buf, size_t max,
			 const char **why)
{
	for (;;) {
		if (c->pending_off < c->pending_len) {
			size_t n = c->pending_len - c->pending_off;
			if (n > max)
				n = max;
			memcpy(buf, c->pending + c->pending_off, n);
			c->pending_off += n;
			if (c->pending_off == c->pending_len)
				curl_easy_pause(c->easy, CURLPAUSE_CONT);
			return (ssize_t)n;
		}
		if (c->done) {
			if (c->result == CURLE_OK)
				return 0;
			int r;
			*why = transfer_error(c, &r);
			return r;
		}
		if (stopped(c)) {
			*why = "the call was stopped";
			return -ECANCELED;
		}
		step(c);
	}
}

void gw_upstream_free(struct gw_upstream_call *c)
{
	if (!c)
		return;
	if (c->multi && c->easy)
		curl_multi_remove_handle(c->multi, c->easy);
	if (c->easy)
		curl_easy_cleanup(c->easy);
	if (c->multi)
		curl_multi_cleanup(c->multi);
	curl_slist_free_all(c->headers);
	free(c->pending);
	free(c);
}

/* internal.h - what the gateway's files share: the upstream side
 * (upstream.c) for server.c. */
#ifndef WR_GATEWAY_INTERNAL_H
#define WR_GATEWAY_INTERNAL_H

#include "util/error.h"

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One request to an upstream. The strings and body must outlive the
 * call; headers become the call's. */
struct gw_upstream_req {
	const char *url;
	bool post;
	const char *body;
	size_t body_len;
	struct curl_slist *headers;
	uint64_t timeout_ms;
	/* polled while waiting: true ends the call (-ECANCELED) */
	bool (*stop)(void *ctx);
	void *stop_ctx;
};

struct gw_upstream_call;

/* What the upstream said before its body. */
struct gw_upstream_head {
	int status;
	char content_type[128];
	char retry_after[32];
	char request_id[128];
};

/* The connections to upstreams, shared by every call (kept alive from
 * call to call). */
struct gw_share;
struct gw_share *gw_upstream_share_new(void);
void gw_upstream_share_free(struct gw_share *share);

/* Sends the request and waits for the answer's head. 0 with *out, or
 * -errno with *err ("cannot connect to URL: ...", "no answer within
 * 600 s"). */
int gw_upstream_begin(struct gw_share *share, struct gw_upstream_req *req,
		      struct gw_upstream_call **out, struct wr_error **err);
const struct gw_upstream_head *gw_upstream_head(
    const struct gw_upstream_call *c);
/* Up to max bytes of the body as they come: > 0, 0 at its end, or
 * -errno (-ECANCELED when stop said so, -EIO / -ETIMEDOUT for the
 * transfer, what failed in *why). */
ssize_t gw_upstream_read(struct gw_upstream_call *c, char *buf, size_t max,
			 const char **why);
void gw_upstream_free(struct gw_upstream_call *c);

#endif

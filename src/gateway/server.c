/* server.c - the gateway's sessions and calls (gateway.h).
 *
 * Connections arrive the egress proxy's way: warren-relay in the sandbox
 * connects to the session's unix socket (the session server, under
 * security/session_server.h) and passes the agent's TCP socket over it.
 * That socket is handed to libmicrohttpd (MHD_add_connection on a daemon
 * with no listening socket of its own, a thread per connection), which
 * speaks HTTP; the session a connection belongs to is the socket's it
 * came through, noted by descriptor until libmicrohttpd reports the new
 * connection.
 *
 * A call, once its body is in: the route names the wire format, the
 * token must be the session's live one, the model one the upstream
 * allows, the session's budget must have room; then the body goes
 * upstream (upstream.c) with the real key. An answer that streams (Server-
 * Sent Events) goes to the agent from a content reader that pulls the
 * upstream's bytes as the agent reads, each complete line scanned for
 * usage; any other answer is read whole (capped), the key cut out
 * wherever it appears, and sent. The call is metered and reported when
 * its answer ends, whole or cut short.
 *
 * Locks: the session server's lock guards every session's token, totals
 * and connection count; fd_mu the descriptors waiting for libmicrohttpd.
 * Neither is held across network I/O. */
#include "gateway/gateway.h"
#include "gateway/internal.h"

#include "security/secrets.h"
#include "security/session_server.h"
#include "util/alloc.h"
#include "util/capbuf.h"
#include "util/cleanup.h"

#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CONNS_PER_SESSION 64
#define PENDING_FDS_MAX 256
#define READ_CHUNK (16 * 1024)
#define AUDIT_BODY_MAX (1024 * 1024) /* of a body kept for the audit */
#define LINE_MAX_SCAN (4 * 1024 * 1024) /* one SSE line, scanned */
#define CONNECTION_TIMEOUT_S 900 /* idle connection, between calls */
#define STOP_CHECK_MS 100

struct gw_session {
	struct sess_srv_session base; /* first: the server allocates it */
	/* below: the session server's lock */
	unsigned char token_hash[crypto_hash_sha256_BYTES];
	bool token_live;		/* a turn runs: its token is good */
	bool token_had;			/* a token was made and is dead */
	uint64_t turn_gen;		/* bumped when a turn ends */
	struct meter_totals used;	/* all the session's calls */
	unsigned conns;			/* connections libmicrohttpd holds */
};

_Static_assert(offsetof(struct gw_session, base) == 0,
	       "the session server's part comes first");

struct pending_fd {
	int fd;
	char id[SESS_SRV_ID_MAX];
};

struct gateway {
	struct gateway_config cfg;
	const struct gateway_settings *set;
	struct sess_srv *srv;
	struct MHD_Daemon *mhd;
	struct gw_share *share;
	atomic_bool stopping;
	/* held while a connection is handed to libmicrohttpd, so that none
	 * is once the daemon stops (adding is set false under it) */
	pthread_mutex_t add_mu;
	bool adding;
	pthread_mutex_t fd_mu;
	struct pending_fd pending[PENDING_FDS_MAX];
	size_t n_pending;
};

/* A connection: the session it came through. */
struct gw_conn {
	struct gateway *gw;
	char id[SESS_SRV_ID_MAX];
};

enum route {
	ROUTE_NONE,
	ROUTE_MODELS,	   /* GET /v1/models */
	ROUTE_CALL,	   /* a model call: metered */
	ROUTE_COUNT_TOKENS /* POST /v1/messages/count_tokens */
};

/* One request, from its first byte to the end of its answer. */
struct gw_req {
	struct gateway *gw;
	char id[SESS_SRV_ID_MAX];
	enum route route;
	enum meter_wire wire;
	char method[8];
	char path[64];
	struct capbuf body;
	double t0;
	uint64_t turn_gen;   /* the turn it belongs to */
	double last_check;   /* when stop() last looked */
	char model[257];
	bool metered;	     /* a call to charge when it ends */
	/* what the report will say, once the answer is out (it is made
	 * after the agent has its answer: the audit's write is not on
	 * the call's path) */
	const char *decision;
	bool charged;
	double cost;
	bool reported;
	int status;
	char reason[256];
	/* a streamed answer */
	struct gw_upstream_call *up;
	struct gateway_usage_scan scan;
	struct capbuf line; /* the line being scanned */
	bool line_skip;	    /* that line is too long to scan */
	struct capbuf audit_answer;
	bool streamed;
	bool stream_failed;
	/* the request's, and a streamed answer's: libmicrohttpd may end
	 * the request before it frees the answer */
	atomic_int refs;
};

static void req_unref(struct gw_req *q)
{
	if (atomic_fetch_sub(&q->refs, 1) != 1)
		return;
	gw_upstream_free(q->up);
	capbuf_free(&q->body);
	capbuf_free(&q->line);
	capbuf_free(&q->audit_answer);
	free(q);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

/* ---- answers ----------------------------------------------------------- */

/* The wire format's error object: OpenAI's {"error": {"message", "type",
 * "code"}} or Anthropic's {"type": "error", "error": {"type",
 * "message"}}. */
static char *error_body(enum meter_wire wire, const char *type,
			const char *message)
{
	json_t *o = wire == METER_WIRE_MESSAGES
			? json_pack("{s:s, s:{s:s, s:s}}", "type", "error",
				    "error", "type", type, "message", message)
			: json_pack("{s:{s:s, s:s, s:s}}", "error", "message",
				    message, "type", type, "code", type);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return text;
}

static enum MHD_Result answer_text(struct MHD_Connection *conn, int status,
				   const char *content_type, char *text,
				   size_t len)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
	    len, text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", content_type);
	enum MHD_Result r = MHD_queue_response(conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return r;
}

/* ---- metering and the report -------------------------------------------- */

/* Charges the call to the session, once: before the agent has the end of
 * its answer, so that a turn's totals, read when the agent has exited,
 * hold every call it made. */
static void charge(struct gw_req *q)
{
	if (q->charged)
		return;
	q->charged = true;
	if (!q->metered || q->status >= 400)
		return;
	struct gateway *gw = q->gw;
	struct meter_prices p = gateway_price_of(gw->set, q->model);
	sess_srv_lock(gw->srv);
	struct gw_session *s =
	    (struct gw_session *)sess_srv_find_locked(gw->srv, q->id);
	if (s)
		q->cost = meter_charge(&s->used, &p, &q->scan.tokens);
	sess_srv_unlock(gw->srv);
}

/* The call callback, once the answer is out (its records are not on the
 * call's path). */
static void report(struct gw_req *q, const char *decision)
{
	if (q->reported)
		return;
	q->reported = true;
	charge(q);
	struct gateway *gw = q->gw;
	struct gateway_call call = {
	    .wire = q->wire,
	    .method = q->method,
	    .path = q->path,
	    .model = q->model,
	    .decision = decision,
	    .reason = q->reason,
	    .status = q->status,
	    .streamed = q->streamed,
	    .usage_seen = q->scan.seen,
	    .tokens = q->scan.tokens,
	    .cost = q->cost,
	    .ms = now_ms() - q->t0,
	};
	if (gw->set->audit_bodies) {
		call.request_body = q->body.data ? q->body.data : "";
		call.answer = q->audit_answer.data ? q->audit_answer.data : "";
	}
	if (gw->cfg.on_call)
		gw->cfg.on_call(gw->cfg.ctx, q->id, &call);
}

/* Refuses the request with status and why, in its wire's error shape. */
static enum MHD_Result refuse(struct MHD_Connection *conn, struct gw_req *q,
			      int status, const char *type, const char *why)
{
	char msg[400];
	snprintf(msg, sizeof(msg), "warren gateway: %s", why);
	q->status = status;
	/* why may be q->reason itself */
	snprintf(q->reason, sizeof(q->reason), "%s", msg + 16);
	q->metered = false;
	q->decision = status >= 500 ? "failed" : "refused";
	char *body = error_body(q->wire, type, msg);
	if (!body)
		return MHD_NO;
	return answer_text(conn, status, "application/json", body,
			   strlen(body));
}

/* ---- who may call ------------------------------------------------------- */

/* The token the request carries: "Authorization: Bearer T" or
 * "x-api-key: T" (NULL: none). */
static const char *request_token(struct MHD_Connection *conn)
{
	const char *a = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						    "Authorization");
	if (a && !strncasecmp(a, "Bearer ", 7))
		return a + 7;
	return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "x-api-key");
}

/* 0 if token is the session's live one; else -EACCES with *why. On
 * success the turn it belongs to is noted in q. */
static int check_token(struct gw_req *q, const char *token, const char **why)
{
	if (!token || !*token) {
		*why = "no session token (Authorization: Bearer or x-api-key)";
		return -EACCES;
	}
	unsigned char h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(h, (const unsigned char *)token, strlen(token));
	struct gateway *gw = q->gw;
	int r = -EACCES;
	sess_srv_lock(gw->srv);
	struct gw_session *s =
	    (struct gw_session *)sess_srv_find_locked(gw->srv, q->id);
	if (!s) {
		*why = "the session is over";
	} else if (sodium_memcmp(h, s->token_hash, sizeof(h)) != 0 ||
		   (!s->token_live && !s->token_had)) {
		*why = "not this session's token";
	} else if (!s->token_live) {
		*why = "the session's token is no longer valid: its turn "
		       "ended (the session is resting or over)";
	} else {
		q->turn_gen = s->turn_gen;
		r = 0;
	}
	sess_srv_unlock(gw->srv);
	return r;
}

/* NULL while the session's budget has room for a call, else why not. */
static const char *budget_spent(struct gw_req *q, char *why, size_t size)
{
	struct gateway *gw = q->gw;
	const char *spent = NULL;
	sess_srv_lock(gw->srv);
	struct gw_session *s =
	    (struct gw_session *)sess_srv_find_locked(gw->srv, q->id);
	if (s)
		spent = meter_budget_spent(&gw->set->budget, &s->used,
					   s->used.model_calls, "session", why,
					   (unsigned)size);
	sess_srv_unlock(gw->srv);
	return spent;
}

/* Has the call to stop: the server stops, the session closed or its turn
 * ended? Looked at every STOP_CHECK_MS at most. */
static bool call_stopped(void *ctx)
{
	struct gw_req *q = ctx;
	struct gateway *gw = q->gw;
	if (atomic_load(&gw->stopping))
		return true;
	double t = now_ms();
	if (t - q->last_check < STOP_CHECK_MS)
		return false;
	q->last_check = t;
	sess_srv_lock(gw->srv);
	struct gw_session *s =
	    (struct gw_session *)sess_srv_find_locked(gw->srv, q->id);
	bool stop = !s || s->turn_gen != q->turn_gen;
	sess_srv_unlock(gw->srv);
	return stop;
}

/* ---- routes -------------------------------------------------------------- */

static void route_of(struct gw_req *q, struct MHD_Connection *conn,
		     const char *method, const char *url)
{
	bool post = !strcmp(method, "POST");
	bool get = !strcmp(method, "GET");
	/* the query string is not the route's */
	size_t len = strcspn(url, "?");
	snprintf(q->path, sizeof(q->path), "%.*s", (int)(len < 63 ? len : 63),
		 url);
	q->route = ROUTE_NONE;
	q->wire = METER_WIRE_CHAT;
	if (post && !strcmp(q->path, "/v1/chat/completions")) {
		q->route = ROUTE_CALL;
	} else if (post && !strcmp(q->path, "/v1/responses")) {
		q->route = ROUTE_CALL;
		q->wire = METER_WIRE_RESPONSES;
	} else if (post && !strcmp(q->path, "/v1/messages")) {
		q->route = ROUTE_CALL;
		q->wire = METER_WIRE_MESSAGES;
	} else if (post && !strcmp(q->path, "/v1/messages/count_tokens")) {
		q->route = ROUTE_COUNT_TOKENS;
		q->wire = METER_WIRE_MESSAGES;
	} else if (get && !strcmp(q->path, "/v1/models")) {
		q->route = ROUTE_MODELS;
		/* Anthropic's clients say which API they speak */
		if (MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						"anthropic-version"))
			q->wire = METER_WIRE_MESSAGES;
	}
}

/* The upstream for q's wire: Chat Completions' serves Responses' list of
 * models too, and the other way round. */
static const struct gateway_upstream *upstream_of(const struct gw_req *q)
{
	const struct gateway_settings *s = q->gw->set;
	const struct gateway_upstream *u = &s->upstream[q->wire];
	if (!u->base_url && q->route == ROUTE_MODELS &&
	    q->wire != METER_WIRE_MESSAGES)
		u = &s->upstream[q->wire == METER_WIRE_CHAT
				     ? METER_WIRE_RESPONSES
				     : METER_WIRE_CHAT];
	return u->base_url ? u : NULL;
}

static bool model_allowed(const struct gateway_upstream *u, const char *m)
{
	if (u->n_models == 0)
		return true;
	for (size_t i = 0; i < u->n_models; i++)
		if (!strcmp(u->models[i], m))
			return true;
	return false;
}

/* GET /v1/models of an upstream with a list of allowed models: the list,
 * in the wire's shape. */
static enum MHD_Result answer_models(struct MHD_Connection *conn,
				     struct gw_req *q,
				     const struct gateway_upstream *u)
{
	json_t *data = json_array();
	for (size_t i = 0; data && i < u->n_models; i++)
		json_array_append_new(
		    data, q->wire == METER_WIRE_MESSAGES
			      ? json_pack("{s:s, s:s, s:s}", "type", "model",
					  "id", u->models[i], "display_name",
					  u->models[i])
			      : json_pack("{s:s, s:s, s:s}", "id", u->models[i],
					  "object", "model", "owned_by",
					  "warren"));
	json_t *o = q->wire == METER_WIRE_MESSAGES
			? json_pack("{s:o, s:b}", "data", data, "has_more", 0)
			: json_pack("{s:s, s:o}", "object", "list", "data",
				    data);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text)
		return MHD_NO;
	q->status = 200;
	q->decision = "answered";
	return answer_text(conn, 200, "application/json", text, strlen(text));
}

/* ---- the call upstream ---------------------------------------------------- */

/* The key for u now: its own, or read from the secret store (caller
 * wipes and frees). NULL with *why. */
static char *upstream_key(struct gateway *gw, const struct gateway_upstream *u,
			  size_t *len, const char **why)
{
	if (u->api_key) {
		*len = strlen(u->api_key);
		return wr_strdup(u->api_key);
	}
	if (!u->api_key_secret) {
		*len = 0;
		return wr_strdup("");
	}
	char *v = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	if (secrets_get(gw->cfg.data_dir, u->api_key_secret, &v, &n, &err) <
	    0) {
		*why = "the upstream's key (its secret) cannot be read";
		wr_error_free(err);
		return NULL;
	}
	*len = n;
	return v;
}

static void key_free(char *k, size_t len)
{
	if (k) {
		sodium_memzero(k, len);
		free(k);
	}
}

/* A header "Name: value" appended; false when out of memory. */
static bool add_header(struct curl_slist **h, const char *name,
		       const char *value)
{
	char line[8192];
	int n = snprintf(line, sizeof(line), "%s: %s", name, value);
	if (n < 0 || (size_t)n >= sizeof(line))
		return true; /* a value that long is not passed on */
	struct curl_slist *next = curl_slist_append(*h, line);
	sodium_memzero(line, sizeof(line));
	if (!next)
		return false;
	*h = next;
	return true;
}

/* The headers upstream: the content type, the key in the wire's header,
 * and what the agent said about the API's version. */
static struct curl_slist *upstream_headers(struct MHD_Connection *conn,
					   const struct gw_req *q,
					   const char *key)
{
	struct curl_slist *h = NULL;
	bool ok = add_header(&h, "Content-Type", "application/json") &&
		  add_header(&h, "Expect", "");
	const char *accept =
	    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept");
	if (ok && accept)
		ok = add_header(&h, "Accept", accept);
	if (q->wire == METER_WIRE_MESSAGES) {
		const char *v = MHD_lookup_connection_value(
		    conn, MHD_HEADER_KIND, "anthropic-version");
		const char *beta = MHD_lookup_connection_value(
		    conn, MHD_HEADER_KIND, "anthropic-beta");
		ok = ok && add_header(&h, "anthropic-version",
				      v ? v : "2023-06-01");
		if (ok && beta)
			ok = add_header(&h, "anthropic-beta", beta);
		if (ok && *key)
			ok = add_header(&h, "x-api-key", key);
	} else if (ok && *key) {
		char bearer[8200];
		snprintf(bearer, sizeof(bearer), "Bearer %s", key);
		ok = add_header(&h, "Authorization", bearer);
		sodium_memzero(bearer, sizeof(bearer));
	}
	if (!ok) {
		curl_slist_free_all(h);
		return NULL;
	}
	return h;
}

/* One argument of the query, appended to the capbuf, escaped again. */
static enum MHD_Result add_argument(void *cls, enum MHD_ValueKind kind,
				    const char *key, const char *value)
{
	(void)kind;
	struct capbuf *b = cls;
	char *k = curl_easy_escape(NULL, key, 0);
	char *v = value ? curl_easy_escape(NULL, value, 0) : NULL;
	capbuf_puts(b, b->len ? "&" : "?");
	capbuf_puts(b, k ? k : "");
	if (value) {
		capbuf_puts(b, "=");
		capbuf_puts(b, v ? v : "");
	}
	curl_free(k);
	curl_free(v);
	return MHD_YES;
}

/* The URL of q's route at u, with the agent's query (Claude Code's
 * ?beta=true). */
static char *upstream_url(struct MHD_Connection *conn, const struct gw_req *q,
			  const struct gateway_upstream *u)
{
	struct capbuf query = CAPBUF_INIT(8192);
	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, add_argument,
				  &query);
	if (capbuf_failed(&query))
		capbuf_free(&query); /* a query that long is not passed on */
	/* OpenAI's base URL ends in /v1, Anthropic's does not */
	const char *rest = q->path + 3; /* past "/v1" */
	char *url = wr_asprintf(
	    "%s%s%s", u->base_url,
	    q->wire == METER_WIRE_MESSAGES ? q->path : rest,
	    query.data ? query.data : "");
	capbuf_free(&query);
	return url;
}

/* Every copy of key in buf[0..len) overwritten with '*'. */
static void redact(char *buf, size_t len, const char *key, size_t key_len)
{
	if (key_len < 8)
		return; /* no real key is that short; "" matches nothing */
	char *p = buf;
	while ((p = memmem(p, len - (size_t)(p - buf), key, key_len))) {
		memset(p, '*', key_len);
		p += key_len;
	}
}

/* One line of a stream seen (without its end): scanned for usage. */
static void stream_line(struct gw_req *q)
{
	if (!q->line_skip && q->line.data)
		gateway_scan_sse_line(&q->scan, q->line.data, q->line.len);
	capbuf_free(&q->line);
	q->line_skip = false;
}

static void stream_scan(struct gw_req *q, const char *buf, size_t n)
{
	const char *p = buf, *end = buf + n;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *stop = nl ? nl : end;
		size_t part = (size_t)(stop - p);
		if (part && part >= 1 && stop[-1] == '\r')
			part--;
		if (!q->line_skip && capbuf_append(&q->line, p, part) < 0)
			q->line_skip = true;
		if (!nl)
			break;
		stream_line(q);
		p = nl + 1;
	}
	if (q->gw->set->audit_bodies)
		capbuf_append(&q->audit_answer, buf, n);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct gw_req *q = cls;
	const char *why = NULL;
	ssize_t n = gw_upstream_read(q->up, buf, max, &why);
	if (n > 0) {
		stream_scan(q, buf, (size_t)n);
		return n;
	}
	if (n == 0) {
		stream_line(q);
		charge(q);
		return MHD_CONTENT_READER_END_OF_STREAM;
	}
	q->stream_failed = true;
	snprintf(q->reason, sizeof(q->reason), "the stream was cut: %s",
		 why ? why : "failed");
	return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* The streamed answer is done with (ended, failed, or the agent left). */
static void stream_done(void *cls)
{
	struct gw_req *q = cls;
	gw_upstream_free(q->up);
	q->up = NULL;
	report(q, q->stream_failed ? "failed" : "forwarded");
	req_unref(q);
}

/* The whole answer, read (capped) into a new buffer. */
static int read_whole(struct gw_req *q, struct capbuf *out, const char **why)
{
	char chunk[READ_CHUNK];
	for (;;) {
		ssize_t n = gw_upstream_read(q->up, chunk, sizeof(chunk), why);
		if (n == 0)
			return 0;
		if (n < 0)
			return (int)n;
		if (capbuf_append(out, chunk, (size_t)n) < 0) {
			*why = "the answer is larger than 32 MiB";
			return -EFBIG;
		}
	}
}

static enum MHD_Result forward(struct MHD_Connection *conn, struct gw_req *q,
			       const struct gateway_upstream *u,
			       const char *body, size_t body_len)
{
	struct gateway *gw = q->gw;
	const char *why = NULL;
	size_t key_len = 0;
	char *key = upstream_key(gw, u, &key_len, &why);
	if (!key)
		return refuse(conn, q, 502, "api_error", why);
	struct curl_slist *headers = upstream_headers(conn, q, key);
	_cleanup_free_ char *url = upstream_url(conn, q, u);
	if (!headers || !url) {
		key_free(key, key_len);
		curl_slist_free_all(headers);
		return MHD_NO;
	}
	struct gw_upstream_req req = {
	    .url = url,
	    .post = q->route != ROUTE_MODELS,
	    .body = body,
	    .body_len = body_len,
	    .headers = headers,
	    .timeout_ms = gw->set->timeout_ms,
	    .stop = call_stopped,
	    .stop_ctx = q,
	};
	struct wr_error *err = NULL;
	int r = gw_upstream_begin(gw->share, &req, &q->up, &err);
	if (r < 0) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%s",
			 err && err->msg ? err->msg : "upstream failed");
		wr_error_free(err);
		redact(msg, strlen(msg), key, key_len);
		key_free(key, key_len);
		enum MHD_Result res =
		    refuse(conn, q, r == -ETIMEDOUT ? 504 : 502, "api_error",
			   msg);
		return res;
	}
	const struct gw_upstream_head *head = gw_upstream_head(q->up);
	q->status = head->status;
	const char *ctype =
	    head->content_type[0] ? head->content_type : "application/json";
	struct MHD_Response *resp;
	if (head->status == 200 &&
	    !strncasecmp(ctype, "text/event-stream", 17)) {
		key_free(key, key_len);
		q->streamed = true;
		atomic_fetch_add(&q->refs, 1);
		resp = MHD_create_response_from_callback(
		    MHD_SIZE_UNKNOWN, READ_CHUNK, stream_read, q, stream_done);
		if (!resp) {
			atomic_fetch_sub(&q->refs, 1);
			gw_upstream_free(q->up);
			q->up = NULL;
			return MHD_NO;
		}
		MHD_add_response_header(resp, "Cache-Control", "no-cache");
	} else {
		struct capbuf whole = CAPBUF_INIT(GATEWAY_ANSWER_MAX);
		r = read_whole(q, &whole, &why);
		gw_upstream_free(q->up);
		q->up = NULL;
		if (r < 0) {
			capbuf_free(&whole);
			key_free(key, key_len);
			return refuse(conn, q, 502, "api_error", why);
		}
		size_t len = whole.len;
		char *text = capbuf_take(&whole);
		if (!text) {
			key_free(key, key_len);
			return MHD_NO;
		}
		redact(text, len, key, key_len);
		key_free(key, key_len);
		if (head->status == 200)
			gateway_scan_body(&q->scan, text, len);
		else
			snprintf(q->reason, sizeof(q->reason),
				 "the upstream answered %d", head->status);
		if (gw->set->audit_bodies)
			capbuf_append(&q->audit_answer, text,
				      len < AUDIT_BODY_MAX ? len
							   : AUDIT_BODY_MAX);
		q->decision = head->status < 400 ? "forwarded" : "failed";
		charge(q);
		resp = MHD_create_response_from_buffer(len, text,
						       MHD_RESPMEM_MUST_FREE);
		if (!resp) {
			free(text);
			return MHD_NO;
		}
	}
	MHD_add_response_header(resp, "Content-Type", ctype);
	if (head->retry_after[0])
		MHD_add_response_header(resp, "Retry-After", head->retry_after);
	if (head->request_id[0])
		MHD_add_response_header(resp, "x-request-id", head->request_id);
	enum MHD_Result res = MHD_queue_response(conn, (unsigned)q->status, resp);
	MHD_destroy_response(resp);
	return res;
}

/* For Chat Completions streams: ask for the usage chunk, which the
 * metering needs (the agent may not have asked). */
static bool want_stream_usage(json_t *doc)
{
	if (!json_is_true(json_object_get(doc, "stream")))
		return false;
	json_t *so = json_object_get(doc, "stream_options");
	if (json_is_true(json_object_get(so, "include_usage")))
		return false;
	if (!json_is_object(so)) {
		so = json_object();
		json_object_set_new(doc, "stream_options", so);
	}
	json_object_set_new(so, "include_usage", json_true());
	return true;
}

/* The request is in: check it, then forward it. */
static enum MHD_Result handle(struct MHD_Connection *conn, struct gw_req *q)
{
	if (q->route == ROUTE_NONE) {
		snprintf(q->reason, sizeof(q->reason), "no route %s %s",
			 q->method, q->path);
		return refuse(conn, q, 404, "not_found_error", q->reason);
	}
	if (capbuf_failed(&q->body))
		return refuse(conn, q, 413, "invalid_request_error",
			      "the request is larger than 64 MiB");
	const char *why = NULL;
	if (check_token(q, request_token(conn), &why) < 0)
		return refuse(conn, q, 401, "authentication_error", why);
	const struct gateway_upstream *u = upstream_of(q);
	if (!u) {
		snprintf(q->reason, sizeof(q->reason),
			 "this server's gateway does not serve the %s API",
			 meter_wire_name(q->wire));
		return refuse(conn, q, 404, "not_found_error", q->reason);
	}
	if (q->route == ROUTE_MODELS)
		return u->n_models ? answer_models(conn, q, u)
				   : forward(conn, q, u, NULL, 0);
	json_t *doc = json_loadb(q->body.data ? q->body.data : "", q->body.len,
				 0, NULL);
	const char *model = json_string_value(json_object_get(doc, "model"));
	if (!json_is_object(doc) || !model) {
		json_decref(doc);
		return refuse(conn, q, 400, "invalid_request_error",
			      "the body is not a JSON object naming a model");
	}
	snprintf(q->model, sizeof(q->model), "%s", model);
	if (!model_allowed(u, q->model)) {
		json_decref(doc);
		char msg[400];
		snprintf(msg, sizeof(msg),
			 "the model '%.200s' is not one this server allows",
			 q->model);
		return refuse(conn, q, 403, "permission_error", msg);
	}
	char spent_why[200];
	if (q->route == ROUTE_CALL &&
	    budget_spent(q, spent_why, sizeof(spent_why))) {
		json_decref(doc);
		return refuse(conn, q, 403, "budget_exceeded", spent_why);
	}
	q->metered = q->route == ROUTE_CALL;
	q->scan.wire = q->wire;
	_cleanup_free_ char *changed = NULL;
	if (q->wire == METER_WIRE_CHAT && want_stream_usage(doc))
		changed = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	if (changed)
		return forward(conn, q, u, changed, strlen(changed));
	return forward(conn, q, u, q->body.data ? q->body.data : "",
		       q->body.len);
}

/* ---- libmicrohttpd -------------------------------------------------------- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
				  const char *url, const char *method,
				  const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	(void)version;
	struct gateway *gw = cls;
	struct gw_req *q = *con_cls;
	if (!q) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		    conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		struct gw_conn *gc = ci ? ci->socket_context : NULL;
		q = wr_calloc(1, sizeof(*q));
		if (!q)
			return MHD_NO;
		q->gw = gw;
		atomic_init(&q->refs, 1);
		q->t0 = now_ms();
		q->body = CAPBUF_INIT(GATEWAY_BODY_MAX);
		q->line = CAPBUF_INIT(LINE_MAX_SCAN);
		q->audit_answer = CAPBUF_INIT(AUDIT_BODY_MAX);
		snprintf(q->id, sizeof(q->id), "%s", gc ? gc->id : "");
		snprintf(q->method, sizeof(q->method), "%s", method);
		route_of(q, conn, method, url);
		*con_cls = q;
		return MHD_YES;
	}
	if (*upload_size) {
		if (!capbuf_failed(&q->body))
			capbuf_append(&q->body, upload, *upload_size);
		*upload_size = 0;
		return MHD_YES;
	}
	return handle(conn, q);
}

static void on_completed(void *cls, struct MHD_Connection *conn,
			 void **con_cls, enum MHD_RequestTerminationCode why)
{
	(void)cls;
	(void)conn;
	struct gw_req *q = *con_cls;
	if (!q)
		return;
	if (!q->reported && !q->streamed) {
		/* the answer is out, or the agent left before it (a stream
		 * reports when it is done with) */
		bool sent = why == MHD_REQUEST_TERMINATED_COMPLETED_OK;
		if (!q->decision || (!sent && !q->reason[0]))
			snprintf(q->reason, sizeof(q->reason),
				 "the connection ended before the answer "
				 "(%d)",
				 (int)why);
		report(q, q->decision ? q->decision : "failed");
	}
	*con_cls = NULL;
	req_unref(q);
}

/* A connection starts or ends: the session it came through, from the
 * descriptor noted before it was handed over. */
static void on_connection(void *cls, struct MHD_Connection *conn,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct gateway *gw = cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
		    conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		struct gw_conn *gc = wr_calloc(1, sizeof(*gc));
		if (!gc)
			return;
		gc->gw = gw;
		pthread_mutex_lock(&gw->fd_mu);
		for (size_t i = 0; ci && i < gw->n_pending; i++)
			if (gw->pending[i].fd == ci->connect_fd) {
				memcpy(gc->id, gw->pending[i].id,
				       sizeof(gc->id));
				gw->pending[i] = gw->pending[--gw->n_pending];
				break;
			}
		pthread_mutex_unlock(&gw->fd_mu);
		*socket_context = gc;
		return;
	}
	struct gw_conn *gc = *socket_context;
	if (!gc)
		return;
	sess_srv_lock(gw->srv);
	struct gw_session *s =
	    (struct gw_session *)sess_srv_find_locked(gw->srv, gc->id);
	if (s && s->conns)
		s->conns--;
	sess_srv_unlock(gw->srv);
	free(gc);
	*socket_context = NULL;
}

/* ---- the session server's side ------------------------------------------- */

static bool note_pending(struct gateway *gw, int fd, const char *id)
{
	pthread_mutex_lock(&gw->fd_mu);
	bool ok = gw->n_pending < PENDING_FDS_MAX;
	if (ok) {
		gw->pending[gw->n_pending].fd = fd;
		snprintf(gw->pending[gw->n_pending].id, SESS_SRV_ID_MAX, "%s",
			 id);
		gw->n_pending++;
	}
	pthread_mutex_unlock(&gw->fd_mu);
	return ok;
}

static void drop_pending(struct gateway *gw, int fd)
{
	pthread_mutex_lock(&gw->fd_mu);
	for (size_t i = 0; i < gw->n_pending; i++)
		if (gw->pending[i].fd == fd) {
			gw->pending[i] = gw->pending[--gw->n_pending];
			break;
		}
	pthread_mutex_unlock(&gw->fd_mu);
}

/* The socket the agent's HTTP comes on: the one the relay passes (a 0
 * byte with it), or the unix connection itself when the relay moves the
 * bytes (it could not pass it), taken from cn. -1 when neither comes. */
static int take_client(struct gateway *gw, struct sess_srv_conn *cn)
{
	int fd = cn->client_fd;
	struct pollfd p = {fd, POLLIN, 0};
	if (poll(&p, 1, 30000) <= 0)
		return -1;
	char first;
	if (recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT) != 1)
		return -1;
	if (first == '\0') {
		size_t len;
		int passed = sess_srv_take_passed(fd, &first, 1, &len);
		return passed >= 0 ? passed : -1;
	}
	sess_srv_lock(gw->srv);
	fd = cn->sess->closed ? -1 : cn->client_fd;
	if (fd >= 0)
		cn->client_fd = -1; /* libmicrohttpd's from here */
	sess_srv_unlock(gw->srv);
	return fd;
}

static void serve(void *ctx, struct sess_srv_conn *cn)
{
	struct gateway *gw = ctx;
	struct gw_session *s = (struct gw_session *)cn->sess;
	int client = take_client(gw, cn);
	if (client < 0) {
		sess_srv_conn_hangup(cn);
		return;
	}
	sess_srv_lock(gw->srv);
	bool ok = !s->base.closed && s->conns < gw->cfg.max_conns;
	if (ok)
		s->conns++;
	sess_srv_unlock(gw->srv);
	if (!ok) {
		sess_srv_refuse_http(client, "gateway",
				     "too many connections for one session");
		sess_srv_conn_hangup(cn);
		return;
	}
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	if (getpeername(client, (struct sockaddr *)&peer, &plen) < 0) {
		memset(&peer, 0, sizeof(peer));
		peer.ss_family = AF_UNIX;
		plen = sizeof(sa_family_t);
	}
	pthread_mutex_lock(&gw->add_mu);
	bool handed = gw->adding && note_pending(gw, client, s->base.id);
	/* libmicrohttpd closes a socket it could not take */
	bool added = handed && MHD_add_connection(gw->mhd, client,
						  (struct sockaddr *)&peer,
						  plen) == MHD_YES;
	pthread_mutex_unlock(&gw->add_mu);
	if (!added) {
		if (!handed)
			close(client);
		drop_pending(gw, client);
		sess_srv_lock(gw->srv);
		if (s->conns)
			s->conns--;
		sess_srv_unlock(gw->srv);
	}
	/* the relay lets go of its copies once this hangs up */
	sess_srv_conn_hangup(cn);
}

static void refuse_conn(void *ctx, int fd, const char *why)
{
	(void)ctx;
	sess_srv_refuse_http(fd, "gateway", why);
}

static const struct sess_srv_ops server_ops = {
    .serve = serve,
    .refuse = refuse_conn,
};

/* ---- the gateway ----------------------------------------------------------- */

static void gateway_free(struct gateway *gw)
{
	gw_upstream_share_free(gw->share);
	pthread_mutex_destroy(&gw->fd_mu);
	pthread_mutex_destroy(&gw->add_mu);
	free(gw);
}

int gateway_start(const struct gateway_config *cfg, struct gateway **out,
		  struct wr_error **err)
{
	if (!cfg->settings || !cfg->settings->on)
		return wr_error_set(err, EINVAL, "gateway: no settings");
	if (sodium_init() < 0)
		return wr_error_set(err, EIO, "gateway: libsodium");
	struct gateway *gw = wr_calloc(1, sizeof(*gw));
	if (!gw)
		return wr_error_set(err, ENOMEM, "gateway");
	gw->cfg = *cfg;
	if (!gw->cfg.max_conns)
		gw->cfg.max_conns = CONNS_PER_SESSION;
	gw->set = cfg->settings;
	pthread_mutex_init(&gw->fd_mu, NULL);
	pthread_mutex_init(&gw->add_mu, NULL);
	gw->adding = true;
	gw->share = gw_upstream_share_new();
	if (!gw->share) {
		gateway_free(gw);
		return wr_error_set(err, ENOMEM, "gateway: libcurl");
	}
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION |
			 MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
			 MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
	gw->mhd = MHD_start_daemon(
	    flags, 0, NULL, NULL, on_request, gw, MHD_OPTION_NOTIFY_COMPLETED,
	    on_completed, gw, MHD_OPTION_NOTIFY_CONNECTION, on_connection, gw,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
	    MHD_OPTION_END);
	if (!gw->mhd) {
		gateway_free(gw);
		return wr_error_set(err, EIO, "gateway: start the HTTP server");
	}
	const struct sess_srv_config scfg = {
	    .name = "gateway",
	    .socket_name = GATEWAY_SOCKET_NAME,
	    .token_name = NULL,
	    .session_size = sizeof(struct gw_session),
	    .conn_size = sizeof(struct sess_srv_conn),
	    .max_conns = gw->cfg.max_conns,
	    .spare_workers = 4,
	    .nonblocking = true,
	    .ops = &server_ops,
	    .ctx = gw,
	};
	int r = sess_srv_start(&scfg, &gw->srv, err);
	if (r < 0) {
		MHD_stop_daemon(gw->mhd);
		gateway_free(gw);
		return r;
	}
	*out = gw;
	return 0;
}

void gateway_stop(struct gateway *gw)
{
	if (!gw)
		return;
	atomic_store(&gw->stopping, true);
	/* no connection is handed over from here; the calls end (each
	 * notices stopping within a poll of its upstream) with their
	 * connections, which use the sessions up to their end; then the
	 * sessions go */
	pthread_mutex_lock(&gw->add_mu);
	gw->adding = false;
	pthread_mutex_unlock(&gw->add_mu);
	MHD_stop_daemon(gw->mhd);
	sess_srv_stop(gw->srv, "the server stopped");
	gateway_free(gw);
}

int gateway_session_open(struct gateway *gw, const char *session_id,
			 const char *dir, const struct meter_totals *used,
			 struct wr_error **err)
{
	if (!sess_srv_id_ok(session_id))
		return wr_error_set(err, EINVAL, "gateway: bad session id");
	sess_srv_lock(gw->srv);
	bool open = sess_srv_find_locked(gw->srv, session_id) != NULL;
	sess_srv_unlock(gw->srv);
	if (open)
		return 0;
	struct sess_srv_session *base;
	int r = sess_srv_session_new(gw->srv, session_id, dir, &base, err);
	if (r < 0)
		return r;
	struct gw_session *s = (struct gw_session *)base;
	if (used)
		s->used = *used;
	return sess_srv_session_open(gw->srv, base, NULL, err);
}

int gateway_turn_open(struct gateway *gw, const char *session_id,
		      char token[GATEWAY_TOKEN_LEN + 1])
{
	unsigned char raw[32];
	char hex[65];
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(hex, sizeof(hex), raw, sizeof(raw));
	sodium_memzero(raw, sizeof(raw));
	char t[GATEWAY_TOKEN_LEN + 1];
	snprintf(t, sizeof(t), "%s%s", GATEWAY_TOKEN_PREFIX, hex);
	sodium_memzero(hex, sizeof(hex));
	unsigned char h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(h, (const unsigned char *)t, strlen(t));
	sess_srv_lock(gw->srv);
	struct gw_session *s =
	    (struct gw_session *)sess_srv_find_locked(gw->srv, session_id);
	if (s) {
		memcpy(s->token_hash, h, sizeof(h));
		s->token_live = true;
		s->token_had = false;
		s->turn_gen++;
	}
	sess_srv_unlock(gw->srv);
	if (!s) {
		sodium_memzero(t, sizeof(t));
		return -ENOENT;
	}
	memcpy(token, t, sizeof(t));
	sodium_memzero(t, sizeof(t));
	return 0;
}

void gateway_turn_close(struct gateway *gw, const char *session_id)
{
	if (!gw)
		return;
	sess_srv_lock(gw->srv);
	struct gw_session *s =
	    (struct gw_session *)sess_srv_find_locked(gw->srv, session_id);
	if (s && s->token_live) {
		s->token_live = false;
		s->token_had = true;
		s->turn_gen++;
	}
	sess_srv_unlock(gw->srv);
}

int gateway_session_usage(struct gateway *gw, const char *session_id,
			  struct meter_totals *out)
{
	if (!gw)
		return -ENOENT;
	sess_srv_lock(gw->srv);
	struct gw_session *s =
	    (struct gw_session *)sess_srv_find_locked(gw->srv, session_id);
	if (s)
		*out = s->used;
	sess_srv_unlock(gw->srv);
	return s ? 0 : -ENOENT;
}

void gateway_session_close(struct gateway *gw, const char *session_id)
{
	if (!gw || !session_id)
		return;
	sess_srv_close(gw->srv, session_id, "its sandbox stopped", NULL);
}

void gateway_remove_stale(const char *sessions_dir)
{
	sess_srv_remove_stale(sessions_dir, ".gateway");
}

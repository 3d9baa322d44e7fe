/* api.h - the control plane's HTTP API (docs/api.md).
 *
 * Owns the HTTP server (libmicrohttpd, one thread per connection), request
 * validation, bearer-token authentication and roles, the JSON rendering of
 * sessions, repositories, snapshots and events, the Server-Sent Events
 * stream of a session's log, and the reading of a session's artifacts
 * (its diff among them) from the data directory. It keeps no state of its
 * own beyond caches:
 * every request goes to the store (struct store) or the session manager
 * (struct control).
 *
 * The request handling (api_handle) is transport-independent so that the
 * unit tests and the fuzz target drive it without a socket; server.c is
 * the glue between it and libmicrohttpd. A request that fails changes
 * nothing, and the API never exits the process: it logs one line to stderr
 * per 5xx answer and nothing else. */
#ifndef WR_API_API_H
#define WR_API_API_H

#include "sched/control.h"
#include "store/store.h"
#include "util/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define API_MAX_BODY_DEFAULT (1024 * 1024)
#define API_KEEPALIVE_MS_DEFAULT 15000
#define API_TOKEN_USER_MAX 64

struct slack_config; /* notify/slack.h */
struct slack_outbox; /* notify/outbox.h */
struct blobs_config; /* blobs/blobs.h */

struct api_config {
	struct store *st;
	struct control *ctl;
	const char *listen_addr; /* IPv4 or IPv6 literal; NULL: "127.0.0.1" */
	uint16_t port;		 /* 0: any free port (see api_port) */
	size_t max_body;	 /* request body cap, 0: 1 MiB */
	int keepalive_ms;	 /* SSE keepalive comment interval, 0: 15 s */
	/* The server's data directory: session artifacts are served only
	 * from <data_dir>/artifacts/<session id>/. NULL: none are served. */
	const char *data_dir;
	/* The web UI's static files (index.html, app.js, ...), served at "/"
	 * without a token (the data they show needs one). NULL: no web UI,
	 * every path outside /api/ and /slack/ is a 404. */
	const char *web_dir;
	/* Slack's slash command and events (POST /slack/commands,
	 * /slack/events; docs/slack.md). NULL: not configured (404). With
	 * slack, the outbox its answers and outcomes go to (required). */
	const struct slack_config *slack;
	struct slack_outbox *slack_outbox;
	/* The registry a worker checkpoints a session's artifacts to
	 * (sched/checkpoint.c): one this server lacks is fetched from there
	 * (its strings the caller's). NULL: none. */
	const struct blobs_config *blobs;
	/* What one client may hold (docs/operations.md, "api"): connections
	 * from one address (0: API_MAX_PER_CLIENT_DEFAULT), the time from a
	 * connection's start (or its previous answer plus the keep-alive
	 * idle time) to a request's complete headers, and from the headers
	 * to its complete body (0: the defaults). */
	unsigned max_per_client;
	uint64_t header_timeout_ms, body_timeout_ms;
};
#define API_MAX_PER_CLIENT_DEFAULT 64u
#define API_HEADER_TIMEOUT_MS_DEFAULT 10000u
#define API_BODY_TIMEOUT_MS_DEFAULT 60000u

struct api;

/* Binds listen_addr:port and serves in libmicrohttpd's threads (one per
 * connection). A bind failure comes back as -errno with a message naming
 * the address ("listen on 127.0.0.1:7777: Address already in use"). */
int api_start(const struct api_config *cfg, struct api **out,
	      struct wr_error **err);
/* The handler alone, listening nowhere: for tests and the fuzz target,
 * which call api_handle directly. Free it with api_stop. */
int api_new(const struct api_config *cfg, struct api **out,
	    struct wr_error **err);
/* The port actually bound (useful with cfg->port 0); 0 for api_new. */
uint16_t api_port(const struct api *a);
/* Stops serving (open event streams end within about a second), waits for
 * the connection threads and frees a. Accepts NULL. Call it before
 * control_stop and store_close. */
void api_stop(struct api *a);

/* One HTTP request, as the transport received it. Strings are
 * NUL-terminated; absent headers are NULL. */
struct api_request {
	const char *method;	   /* "GET", "POST", ... (case-sensitive) */
	const char *path;	   /* raw (still percent-encoded), no query */
	const char *query;	   /* raw, without the '?'; NULL or "": none */
	const char *authorization; /* the Authorization header */
	const char *content_type;  /* the Content-Type header */
	const char *last_event_id; /* the Last-Event-ID header */
	/* Slack's signature headers (X-Slack-Signature,
	 * X-Slack-Request-Timestamp) */
	const char *slack_signature;
	const char *slack_timestamp;
	const char *body;	   /* body_len bytes (need not end in NUL) */
	size_t body_len;
};

/* The answer. body is owned (free with api_response_clear); the strings
 * content_type points to are static, or type_buf. */
struct api_response {
	unsigned status;
	const char *content_type; /* NULL when there is no body */
	char *body;
	size_t body_len;
	char type_buf[128]; /* a media type from the store (artifacts) */
	char allow[32];	    /* 405: the methods the path takes ("GET, POST") */
	/* An event stream (GET .../events without ?format=json): the
	 * transport answers status/content_type with headers
	 * Cache-Control: no-cache and streams api_stream_read(api_stream_new(
	 * a, stream_session, stream_after)) as the body. body is NULL. */
	bool stream;
	char stream_session[STORE_ID_MAX];
	int64_t stream_after; /* send events with seq > stream_after */
	/* GET /api/v1/events: stream_session is "" and the stream carries
	 * the sessions' states (api_stream_new_sessions(a, stream_user));
	 * stream_user "" means every user's. */
	bool stream_sessions;
	char stream_user[API_TOKEN_USER_MAX + 1];
	/* a static file of the web UI: the transport adds its security
	 * headers (Content-Security-Policy, X-Frame-Options, ...) */
	bool web;
	/* A file (GET .../diff, .../artifacts/{name}): the transport sends
	 * the file_size bytes of file_fd as the body, read as they go out;
	 * body is NULL. file_fd is owned: api_response_clear closes it
	 * unless the transport took it (then it sets file to false). */
	bool file;
	int file_fd;
	uint64_t file_size;
};

/* Routes, authenticates, validates and answers one request. Always fills
 * *out (an error is an answer: {"error": {"code", "message"}} with the
 * documented status); returns 0, or -ENOMEM when not even an error body
 * could be allocated (then out->status is 500 and out->body NULL). */
int api_handle(struct api *a, const struct api_request *req,
	       struct api_response *out);
void api_response_clear(struct api_response *r);

/* The body of an event stream, transport-independent. api_stream_read
 * blocks (it runs in the connection's own thread) until it has bytes for
 * buf: pending events ("id: N\nevent: KIND\ndata: {...}\n\n", in seq
 * order, read from the store in batches), or ": keepalive\n\n" when
 * nothing happened for keepalive_ms (and once at the start when nothing is
 * pending, so that the headers go out). Once the session rests (review or
 * a terminal state) with every event sent, or the API stops, it returns
 * API_STREAM_END; on a store error API_STREAM_ERROR (logged once). */
#define API_STREAM_END ((ssize_t)-1)
#define API_STREAM_ERROR ((ssize_t)-2)
struct api_stream;
struct api_stream *api_stream_new(struct api *a, const char *session_id,
				  int64_t after_seq);
/* The stream of GET /api/v1/events: "event: session" with a session as
 * in a list (docs/api.md) for every session visible to user ("": all)
 * among the newest API_EVENTS_SESSIONS, first each of them once, then
 * each again when its state or anything else about it changed, then
 * "event: ready" after the first round. It never ends by itself. */
struct api_stream *api_stream_new_sessions(struct api *a, const char *user);
ssize_t api_stream_read(struct api_stream *s, char *buf, size_t max);
void api_stream_free(struct api_stream *s);

/* Tokens. A token is "wr_" + 43 base64url characters (32 random bytes);
 * the store keeps only its SHA-256 (lowercase hex). */
/* out_hex: 64 hex digits and a NUL. -EINVAL for NULL. */
int api_token_hash(const char *plain, char out_hex[65]);
struct api_token_spec {
	const char *user; /* 1..64 of [A-Za-z0-9._@+-], starting with an
			     alphanumeric */
	const char *role; /* "admin", "reviewer" or "submitter" */
	/* unique, STORE_TOKEN_NAME_MAX; NULL: the user (with '@' and '+'
	 * as '_') + "-" + 8 random hex digits */
	const char *name;
	int64_t expires_ms; /* when it stops working (epoch ms), 0: never */
};
/* Creates a token as spec says, stores its hash and returns the plain
 * text (caller frees) — the only time it exists — and its name in
 * name_out (if not NULL). Bad input is -EINVAL with a message naming the
 * field; a name that is taken -EEXIST. */
int api_token_issue(struct store *st, const struct api_token_spec *spec,
		    char **plain_out, char name_out[STORE_TOKEN_NAME_MAX + 1],
		    struct wr_error **err);
/* api_token_issue with a default name and no expiry. */
int api_token_create(struct store *st, const char *user, const char *role,
		     char **plain_out, struct wr_error **err);
/* 0 if user is a valid token user name, else -EINVAL. */
int api_validate_user(const char *user);

#endif

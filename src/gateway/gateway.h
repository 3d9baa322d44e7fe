/* gateway.h - the model gateway: model APIs for the agents inside
 * sandboxes, with the provider's key kept outside.
 *
 * An agent CLI in a session's sandbox (OpenCode, Codex, Claude Code, or a
 * repository's own) needs a model API. The gateway gives it one without
 * the provider's key: a unix socket per session
 * (DATA/sessions/<id>.gateway/gateway.sock), bound read-only into the
 * sandbox at GATEWAY_SANDBOX_DIR, where warren-relay exposes it as
 * http://127.0.0.1:PORT (the egress proxy's way, src/init/relay.c). It
 * speaks, streamed and not:
 *
 *   POST /v1/chat/completions, GET /v1/models   OpenAI Chat Completions
 *   POST /v1/responses                          OpenAI Responses
 *   POST /v1/messages (and /count_tokens)       Anthropic Messages
 *
 * and forwards each call to the upstream configured for its wire format,
 * with the real key in the upstream's own header. What comes back goes to
 * the agent as it arrives, with the key cut out wherever it would appear.
 *
 * Who may call: the bearer of the session's token (Authorization: Bearer
 * or x-api-key), on the session's own socket. A token is 256 random bits,
 * made for one turn (gateway_turn_open) and kept only as its hash; it is
 * refused once the turn ends (the session rests) or the session closes,
 * and every refusal is reported like a call.
 *
 * Metering: each call's usage, read from the upstream's answer (a
 * stream's usage events included; Chat Completions streams are asked
 * for their usage), is priced per model (meter.h) and added to the
 * session's totals, which gateway_session_usage() reports. A call the
 * session's budget has no room for is refused (403, in the wire format's
 * error shape, naming the budget) and never forwarded. Every call, and
 * every refusal, goes to the call callback (model, tokens, cost, status,
 * duration; the bodies when the settings ask).
 *
 * config.c parses the settings; usage.c reads usage out of answers and
 * streams (pure, fuzzed); upstream.c is the libcurl side; server.c the
 * sessions, the HTTP side (libmicrohttpd) and the calls. Nothing here
 * prints. */
#ifndef WR_GATEWAY_GATEWAY_H
#define WR_GATEWAY_GATEWAY_H

#include "meter/meter.h"
#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where things are inside a sandbox. */
#define GATEWAY_SANDBOX_DIR "/run/warren-gateway"
#define GATEWAY_SOCKET_NAME "gateway.sock"
#define GATEWAY_SANDBOX_SOCKET GATEWAY_SANDBOX_DIR "/" GATEWAY_SOCKET_NAME
#define GATEWAY_SANDBOX_RELAY "/run/warren-gateway-relay"
#define GATEWAY_PORT_DEFAULT 17077 /* inside the sandbox, on loopback */

#define GATEWAY_TOKEN_PREFIX "wgw_"
/* the prefix and 64 hex digits (256 bits) */
#define GATEWAY_TOKEN_LEN (sizeof(GATEWAY_TOKEN_PREFIX) - 1 + 64)
#define GATEWAY_BODY_MAX ((size_t)64 << 20)	/* a request body */
#define GATEWAY_ANSWER_MAX ((size_t)32 << 20)	/* an answer not streamed */
#define GATEWAY_MODELS_MAX 256			/* allowed models per upstream */
#define GATEWAY_PRICES_MAX 256			/* priced models */
#define GATEWAY_TIMEOUT_MS_DEFAULT (10 * 60 * 1000ull) /* one call */

/* ---- settings (config.c) ----------------------------------------------- */

/* The upstream of one wire format. */
struct gateway_upstream {
	char *base_url;	      /* NULL: this wire format is not served */
	char *api_key;	      /* from api_key_file or api_key_env; NULL */
	char *api_key_secret; /* a name in the secret store, read per call */
	char **models;	      /* allowed models; none: any */
	size_t n_models;
};

struct gateway_price {
	char *model; /* "*": any model not named */
	struct meter_prices prices;
};

struct gateway_settings {
	bool on;
	uint16_t port; /* inside the sandbox */
	struct gateway_upstream upstream[METER_WIRE_MAX];
	struct gateway_price *prices;
	size_t n_prices;
	struct meter_budget budget; /* per session */
	bool audit_bodies;	    /* bodies go to the call callback */
	uint64_t timeout_ms;	    /* one call, start to end */
};

/* The server configuration's "gateway" object:
 *   {"port": 17077,
 *    "upstreams": {"chat_completions" | "responses" | "messages":
 *                    {"base_url": URL, "api_key_file": PATH (0600) |
 *                     "api_key_env": VAR | "api_key_secret": NAME,
 *                     "models": ["gpt-4.1-mini", ...]}},
 *    "prices": {"MODEL" | "*": {"prompt": P, "completion": C,
 *                               "cached": K}},
 *    "budget": {"tokens": N, "cost": X, "model_calls": N},
 *    "audit_bodies": false, "timeout": "10m"}
 * base_url: OpenAI's with its /v1 (requests go to {base_url}/responses),
 * Anthropic's without (to {base_url}/v1/messages). Unknown keys and bad
 * values are input errors naming the key; a key file readable by others
 * is refused. */
int gateway_settings_parse(const json_t *obj, struct gateway_settings *out,
			   struct wr_error **err);
/* Without a "gateway" object: the built-in agent's model (an OpenAI
 * base URL and key) serves Chat Completions and Responses, with its
 * prices for every model and its budget's tokens and cost. */
int gateway_settings_from_model(const char *base_url, const char *api_key,
				const struct meter_prices *prices,
				const struct meter_budget *budget,
				struct gateway_settings *out,
				struct wr_error **err);
/* Wipes the keys. */
void gateway_settings_clear(struct gateway_settings *s);
/* The prices of model: its own, else "*", else none (cost 0). */
struct meter_prices gateway_price_of(const struct gateway_settings *s,
				     const char *model);

/* ---- usage in answers (usage.c) ---------------------------------------- */

/* What is read out of one answer, as it streams or whole. */
struct gateway_usage_scan {
	enum meter_wire wire;
	struct meter_tokens tokens;
	bool seen; /* a usage object was read */
};

/* One line of a Server-Sent Events stream, without its line end: the
 * usage in a "data:" line of the wire's usage events (Chat Completions'
 * last chunk, Responses' response.completed / .incomplete / .failed,
 * Messages' message_start and message_delta). Other lines are skipped. */
void gateway_scan_sse_line(struct gateway_usage_scan *u, const char *line,
			   size_t len);
/* A whole JSON answer (not streamed): its "usage". */
void gateway_scan_body(struct gateway_usage_scan *u, const char *body,
		       size_t len);

/* ---- the gateway (server.c) -------------------------------------------- */

/* One call, or a refusal, as the call callback sees it. */
struct gateway_call {
	enum meter_wire wire;
	const char *method, *path;
	const char *model;    /* "" when the request named none */
	const char *decision; /* "forwarded", "refused", "failed" */
	const char *reason;   /* why refused or failed, "" */
	int status;	      /* what the agent got */
	bool streamed;
	bool usage_seen; /* the upstream reported usage */
	struct meter_tokens tokens;
	double cost, ms;
	const char *request_body, *answer; /* audit_bodies only, else NULL */
};

/* Called from the call's thread, once per call. */
typedef void (*gateway_call_fn)(void *ctx, const char *session_id,
				const struct gateway_call *call);

struct gateway_config {
	const struct gateway_settings *settings; /* outlives the gateway */
	const char *data_dir;			 /* the secret store's */
	gateway_call_fn on_call;		 /* may be NULL */
	void *ctx;
	unsigned max_conns; /* per session; 0: 64 */
};

struct gateway;

int gateway_start(const struct gateway_config *cfg, struct gateway **out,
		  struct wr_error **err);
/* Ends every call, closes every session, frees gw (NULL is fine). */
void gateway_stop(struct gateway *gw);

/* Listens for the session at dir/gateway.sock (dir made 0711, the socket
 * 0666, as the egress proxy's). used: what the session used before (a
 * server restart), its totals go on from there; NULL: nothing. Opening
 * an open session keeps it, its totals too. */
int gateway_session_open(struct gateway *gw, const char *session_id,
			 const char *dir, const struct meter_totals *used,
			 struct wr_error **err);
/* A new token for the session's next turn in token[] (NUL-terminated);
 * the one before is dead. -ENOENT for a session that is not open. */
int gateway_turn_open(struct gateway *gw, const char *session_id,
		      char token[GATEWAY_TOKEN_LEN + 1]);
/* The turn is over: its token is refused from now on ("the session is
 * resting"), and calls still streaming are cut. */
void gateway_turn_close(struct gateway *gw, const char *session_id);
/* The session's totals so far; -ENOENT for a session that is not open. */
int gateway_session_usage(struct gateway *gw, const char *session_id,
			  struct meter_totals *out);
/* Stops listening, ends its calls, removes the socket and its directory.
 * Unknown sessions are fine. */
void gateway_session_close(struct gateway *gw, const char *session_id);
/* Removes what a previous server left in sessions_dir. */
void gateway_remove_stale(const char *sessions_dir);

#endif

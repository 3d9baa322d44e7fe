/* slack.h - Slack: where people start sessions with a slash command or a
 * mention, and where Warren tells them how each one ended (docs/slack.md).
 *
 * Owns
 *   - the server configuration's "slack" object (slack_config.c): the
 *     signing secret, the bot token, the Web API's URL, the web UI's
 *     public URL for links, and the map from Slack users to Warren users
 *     and roles;
 *   - what Slack sends (slack_request.c): the v0 request signature, form
 *     bodies, the command's text, Events API payloads; pure functions,
 *     fuzzed (tests/fuzz/fuzz_slack.c);
 *   - the text Warren posts (slack_message.c): mrkdwn, with everything a
 *     user or an agent wrote escaped, and the link to the session's page;
 *   - the Web API client (slack_client.c, libcurl): chat.postMessage,
 *     chat.postEphemeral, and a slash command's response_url;
 *   - the outbox (outbox.h): what is to be posted and the Events API
 *     deliveries handled, durable, behind an interface of its own (the
 *     SQLite store implements it);
 *   - the notifier (notifier.c): a thread that posts what the outbox
 *     holds (replies; a session's outcome each time it rests in review or
 *     a terminal state), each once, retrying with back-off.
 *
 * The HTTP routes (POST /slack/commands, /slack/events) are the API's
 * (api/slack.c). Secrets (the signing secret, the bot token) are never
 * logged, never put into an error message and never stored. */
#ifndef WR_NOTIFY_SLACK_H
#define WR_NOTIFY_SLACK_H

#include "notify/outbox.h"
#include "sched/control.h"
#include "store/store.h"
#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLACK_API_URL_DEFAULT "https://slack.com/api"
#define SLACK_USERS_MAX 10000
#define SLACK_SECRET_MAX 4096
#define SLACK_URL_MAX 2048
/* A request's timestamp must be this close to the server's clock. */
#define SLACK_SKEW_S 300
/* The most of a request body the Slack routes read (Slack's are a few
 * KiB). */
#define SLACK_BODY_MAX (64 * 1024)
#define SLACK_FORM_FIELDS_MAX 64
/* Slack's ids (U0123ABC, C…, T…, Ev…) and timestamps ("1515449522.000016") */
#define SLACK_ID_MAX 64
#define SLACK_RETRIES_DEFAULT 6
#define SLACK_BACKOFF_MS_DEFAULT 5000ull
#define SLACK_BACKOFF_MAX_MS (10ull * 60 * 1000)
#define SLACK_TIMEOUT_MS_DEFAULT 10000ull
/* Slack waits three seconds for a slash command's answer, then shows the
 * user a timeout and drops it: an answer that took longer than this
 * (an approval's push, say) also goes through the response_url. */
#define SLACK_ANSWER_WITHIN_MS_DEFAULT 2500ull
#define SLACK_ANSWER_WITHIN_MAX_MS 3000ull
/* A slash command's response_url takes posts for 30 minutes (and five of
 * them): Warren uses it for 29, then posts to the channel instead. */
#define SLACK_RESPONSE_URL_MS (29ull * 60 * 1000)
/* How long an Events API event id is remembered (Slack retries for
 * minutes; a day is plenty). */
#define SLACK_EVENT_KEEP_MS (24ll * 3600 * 1000)

/* ---- configuration (slack_config.c) ---- */

struct slack_user {
	char *slack_id; /* "U0123ABC" */
	char *user;	/* the Warren user it acts as */
	char *role;	/* "admin", "reviewer" or "submitter" */
};

struct slack_config {
	char *signing_secret; /* the app's signing secret */
	char *bot_token;      /* "xoxb-…", for chat.postMessage */
	char *api_url;	      /* the Web API's root, no trailing '/' */
	char *base_url;	      /* the web UI's public URL, no trailing '/' */
	struct slack_user *users;
	size_t n_users;
	unsigned retries;	   /* attempts after the first, per post */
	uint64_t retry_backoff_ms; /* the first wait, doubled each time */
	uint64_t timeout_ms;	   /* one request to Slack */
	uint64_t answer_within_ms; /* SLACK_ANSWER_WITHIN_MS_DEFAULT */
};

/* The "slack" object of the configuration file path:
 *   {"signing_secret_file": PATH (0600) | "signing_secret_env": VAR,
 *    "bot_token_file": PATH (0600) | "bot_token_env": VAR,
 *    "api_url": URL, "base_url": URL,
 *    "users": {"U0123ABC": {"user": "alice", "role": "submitter"}},
 *    "retries": N, "retry_backoff": DURATION, "timeout": DURATION,
 *    "answer_within": DURATION (at most 3 s)}
 * Errors name the key ("FILE: key 'slack.users.U0123ABC.role': expected
 * admin, reviewer or submitter") and are bad_input. *out is written only
 * on success; clear it with slack_config_clear. */
int slack_config_from_json(const char *path, const json_t *v,
			   struct slack_config *out, struct wr_error **err);
/* Wipes the secrets and frees everything. Accepts NULL. */
void slack_config_clear(struct slack_config *cfg);
/* The mapping of a Slack user id, or NULL. */
const struct slack_user *slack_user_find(const struct slack_config *cfg,
					 const char *slack_id);
/* Is url an http(s) URL Warren may send a bot token or a message to:
 * https, or http to a loopback host only (a local stand-in)? */
bool slack_url_ok(const char *url);
/* May a message go to this response_url: https on a Slack host
 * (*.slack.com, *.slack-gov.com), or the same scheme, host and port as
 * cfg->api_url (a stand-in, a proxy of the operator's)? */
bool slack_response_url_ok(const struct slack_config *cfg, const char *url);

/* ---- requests (slack_request.c) ---- */

/* Checks Slack's v0 signature: signature is "v0=" + the hex HMAC-SHA256,
 * keyed with secret, of "v0:" + timestamp + ":" + body, and timestamp
 * (seconds) is within SLACK_SKEW_S of now_s. 0, or -EINVAL (a header
 * missing or malformed, no secret), -ESTALE (the timestamp is too old or
 * too new), -EACCES (the signature does not match). The comparison takes
 * the same time wherever the signatures differ. */
int slack_verify(const char *secret, const char *timestamp,
		 const char *signature, const char *body, size_t len,
		 int64_t now_s);
/* The signature Slack would send ("v0=" + 64 hex digits + NUL): for
 * tests and the stand-ins. */
int slack_sign(const char *secret, const char *timestamp, const char *body,
	       size_t len, char out[68]);

/* An application/x-www-form-urlencoded body, decoded: '+' is a space,
 * %XX a byte; keys are unique; every value is UTF-8 without NUL. */
struct slack_form {
	char *buf; /* the decoded keys and values, owned */
	struct {
		const char *key, *value;
	} f[SLACK_FORM_FIELDS_MAX];
	size_t n;
};
/* 0, or -EINVAL with a message naming the field (a malformed escape, a
 * NUL, invalid UTF-8, a repeated key), -E2BIG (more than
 * SLACK_FORM_FIELDS_MAX fields, or a body over SLACK_BODY_MAX). */
int slack_form_parse(const char *body, size_t len, struct slack_form *out,
		     struct wr_error **err);
const char *slack_form_get(const struct slack_form *f, const char *key);
void slack_form_clear(struct slack_form *f);

enum slack_verb {
	SLACK_VERB_RUN,	    /* REPO[@REF] PROMPT */
	SLACK_VERB_HELP,    /* help, or nothing */
	SLACK_VERB_STATUS,  /* status ID */
	SLACK_VERB_APPROVE, /* approve ID */
	SLACK_VERB_REJECT,  /* reject ID [REASON] */
	SLACK_VERB_MAX
};

/* What a command's text asks for. Strings are owned. */
struct slack_command {
	enum slack_verb verb;
	char *repo;	  /* RUN: a repository's name or id */
	char *ref;	  /* RUN: after '@', or NULL */
	char *prompt;	  /* RUN */
	char *session_id; /* STATUS, APPROVE, REJECT */
	char *reason;	  /* REJECT: or NULL */
};
#define SLACK_PROMPT_MAX (100 * 1024)
#define SLACK_REASON_MAX 4096
/* Parses a command's text (Slack's escaping undone: &amp; &lt; &gt;, and
 * <URL|label> links as their label, <URL> as the URL): "help" or nothing,
 * "status ID", "approve ID", "reject ID [REASON]" (ID a session id, the
 * verbs in any case), else "REPO[@REF] PROMPT". -EINVAL with a message
 * saying what is missing or wrong. *out is written only on success. */
int slack_command_parse(const char *text, struct slack_command *out,
			struct wr_error **err);
void slack_command_clear(struct slack_command *c);
/* text with Slack's escaping undone, as above (caller frees); NULL on
 * allocation failure. */
char *slack_text_decode(const char *text);

enum slack_event_kind {
	SLACK_EVENT_URL_VERIFICATION, /* the Request URL's check */
	SLACK_EVENT_MENTION,	      /* app_mention */
	SLACK_EVENT_OTHER,	      /* anything else: acknowledged, ignored */
	SLACK_EVENT_KIND_MAX
};

/* An Events API payload. Strings are owned. */
struct slack_event {
	enum slack_event_kind kind;
	char *challenge; /* URL_VERIFICATION */
	char *event_id;	 /* MENTION: for deduplication */
	char *user;	 /* MENTION: who wrote it */
	char *channel;
	char *ts;	 /* the message's timestamp */
	char *thread_ts; /* the thread it is in, or NULL */
	char *text;	 /* the text after the mention of the app */
	bool from_bot;	 /* written by a bot (Warren's own, or another) */
};
/* 0, or -EINVAL with a message (not JSON, not an object, a field of the
 * wrong type or shape). *out is written only on success. */
int slack_event_parse(const char *body, size_t len, struct slack_event *out,
		      struct wr_error **err);
void slack_event_clear(struct slack_event *e);

/* ---- messages (slack_message.c) ---- */

/* text for mrkdwn: &, < and > escaped (no mention, link or channel ping
 * can be made of it), control characters but newlines as spaces, cut to
 * max bytes on a character boundary ("…" added when cut). NULL on
 * allocation failure. */
char *slack_escape(const char *text, size_t max);
/* <base_url>/#/sessions/<id> (caller frees). */
char *slack_session_url(const struct slack_config *cfg, const char *id);
/* The outcome of session s (resting in review or a terminal state) on
 * repository repo_name: what happened, the agent's summary, the verify
 * result, the diff's stats (files, +/-), the link. Caller frees. */
char *slack_outcome_text(const struct slack_config *cfg,
			 const struct store_session *s, const char *repo_name);
/* A session's state for `status`, the same details as an outcome. */
char *slack_status_text(const struct slack_config *cfg,
			const struct store_session *s, const char *repo_name);
/* The answer to a started session: its link, its repository, its user. */
char *slack_started_text(const struct slack_config *cfg,
			 const struct store_session *s, const char *repo_name);
/* The usage, with prefix the way the user calls Warren ("/warren",
 * "@Warren"). */
char *slack_help_text(const char *prefix);

/* ---- the Web API (slack_client.c) ---- */

struct slack_message {
	const char *text;	  /* mrkdwn */
	const char *channel;	  /* chat.postMessage/postEphemeral */
	const char *thread_ts;	  /* in this thread, or NULL */
	const char *user;	  /* ephemeral: the one who sees it */
	bool ephemeral;		  /* chat.postEphemeral */
	const char *response_url; /* instead of the Web API, or NULL */
};

/* Posts m: to its response_url (no token goes there), else with the
 * bot token to cfg->api_url's chat.postMessage (chat.postEphemeral).
 * 0 when Slack said ok; else -errno with *err, and *retryable true for
 * what may pass later (a transport failure, a 5xx, a 429, Slack's
 * ratelimited, internal_error, fatal_error, service_unavailable,
 * request_timeout), *retry_after_ms what Slack asked to wait (UINT64_MAX
 * when it did not say). */
int slack_send(const struct slack_config *cfg, const struct slack_message *m,
	       bool *retryable, uint64_t *retry_after_ms,
	       struct wr_error **err);

/* ---- the notifier (notifier.c) ---- */

struct slack_notifier;

/* Starts the thread that posts the outbox's due posts: at start (what a
 * previous server left), whenever a session has an event
 * (control_wait_events), and every second. st is where it reads the
 * sessions an outcome tells of. cfg, outbox, st and ctl must outlive it. */
int slack_notifier_start(const struct slack_config *cfg,
			 struct slack_outbox *outbox, struct store *st,
			 struct control *ctl, struct slack_notifier **out,
			 struct wr_error **err);
/* Stops it (a post under way finishes first) and frees it. Call it before
 * control_stop. Accepts NULL. */
void slack_notifier_stop(struct slack_notifier *n);
/* One pass, in the caller's thread: posts what is due at now_ms (at most
 * a batch) and records each attempt. The number of posts attempted, or
 * -errno if the store failed. For tests; the thread runs the same. */
int slack_notifier_pass(const struct slack_config *cfg,
			struct slack_outbox *outbox, struct store *st,
			int64_t now_ms);

#endif

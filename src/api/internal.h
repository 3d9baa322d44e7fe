/* internal.h - what the files of src/api share: the api object with its
 * caches, the per-request context, and the helpers that validate input and
 * write answers. Nothing here leaves the module. */
#ifndef WR_API_INTERNAL_H
#define WR_API_INTERNAL_H

#include "api/api.h"
#include "util/log.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum api_role {
	API_ROLE_ADMIN,
	API_ROLE_REVIEWER,
	API_ROLE_SUBMITTER,
	API_ROLE_MAX
};

/* Caches. Tokens: the hash of a token found in the store, for a short
 * while, so that a busy client costs one SHA-256 and no store lookup per
 * request. Repositories: id -> name, for rendering sessions (a repository
 * is never renamed). Both are direct-mapped: a slot holds the last entry
 * that hashed to it. */
#define API_TOKEN_CACHE_SLOTS 64
#define API_TOKEN_CACHE_TTL_MS 5000
/* A token's last_used_ms is rewritten when it is older than this. */
#define API_TOKEN_TOUCH_MS 60000
#define API_REPO_CACHE_SLOTS 256

struct api_token_slot {
	char hash[65]; /* "" when empty */
	char user[API_TOKEN_USER_MAX + 1];
	enum api_role role;
	int64_t expires_ms; /* 0: never */
	int64_t cached_ms;
};

struct api_repo_slot {
	char id[STORE_ID_MAX]; /* "" when empty */
	char *name;
};

struct MHD_Daemon;

struct api {
	struct store *st;
	struct control *ctl;
	char *data_dir; /* NULL: no artifacts are served */
	int web_dir_fd;	/* the web UI's directory (O_PATH), -1: none */
	const struct slack_config *slack; /* NULL: no Slack routes */
	struct slack_outbox *outbox;	  /* with slack */
	const struct blobs_config *blobs; /* NULL: artifacts are local only */
	size_t max_body;
	int keepalive_ms;
	atomic_bool stopping;
	struct MHD_Daemon *daemon; /* NULL for api_new */
	struct api_deadlines *deadlines; /* NULL for api_new */
	uint16_t port;
	pthread_mutex_t cache_lock; /* tokens[], token_gen and repos[] */
	uint64_t token_gen;	    /* +1 at every revocation */
	struct api_token_slot tokens[API_TOKEN_CACHE_SLOTS];
	struct api_repo_slot repos[API_REPO_CACHE_SLOTS];
};

/* deadline.c: every connection's deadline for its headers, then its
 * body; none while its answer is written; a watchdog shuts down the
 * socket of one past it. */
struct api_deadlines;
struct api_conn_deadline;
enum api_deadline_phase {
	API_DEADLINE_BODY,   /* the headers are in: the body's deadline */
	API_DEADLINE_ANSWER, /* the request is in: no deadline */
	API_DEADLINE_IDLE,   /* answered: the next request's headers */
	API_DEADLINE_PHASE_MAX,
};
int api_deadlines_start(uint64_t header_ms, uint64_t body_ms, uint64_t idle_ms,
			struct api_deadlines **out);
void api_deadlines_stop(struct api_deadlines *d);
struct api_conn_deadline *api_deadline_open(struct api_deadlines *d, int fd);
void api_deadline_close(struct api_deadlines *d, struct api_conn_deadline *c);
void api_deadline_phase(struct api_deadlines *d, struct api_conn_deadline *c,
			enum api_deadline_phase phase);
/* Connections cut at their deadline so far. */
uint64_t api_deadlines_cut(struct api_deadlines *d);

/* Who is asking (from the bearer token). */
struct api_principal {
	char user[API_TOKEN_USER_MAX + 1];
	enum api_role role;
};

/* The query string, split and percent-decoded in place. */
#define API_QUERY_MAX 2048
#define API_QUERY_PARAMS 16
struct api_query {
	char buf[API_QUERY_MAX + 1];
	struct {
		const char *key, *value;
	} p[API_QUERY_PARAMS];
	size_t n;
};

/* Limits on what clients send (docs/api.md). */
#define API_PATH_MAX 1024
#define API_PROMPT_MAX                                                         \
	(100 * 1024) /* the agent gets it in its environment: one string < 128 \
			KiB */
#define API_TEXT_MAX (100 * 1024)
#define API_URL_MAX 4096
#define API_REF_MAX 256
#define API_AGENT_MAX (64 * 1024)
#define API_AGENT_ARGS_MAX 256
#define API_LIST_LIMIT_DEFAULT 50
#define API_LIST_LIMIT_MAX 500
#define API_EVENTS_JSON_MAX 10000
#define API_LIST_PROMPT_MAX 4096 /* prompts in lists are cut here */
#define API_REASON_MAX 4096	 /* a reviewer's reason for a rejection */
#define API_ARTIFACT_NAME_MAX 128
/* The largest artifact served: a diff or log past this is not something
 * to read over the API, and one request must not stream gigabytes. */
#define API_ARTIFACT_SERVE_MAX (64u * 1024 * 1024)
#define API_DIFF_ARTIFACT "diff.patch"

/* One request on its way through the router and a handler. */
struct api_ctx {
	struct api *a;
	const struct api_request *req;
	struct api_response *out;
	struct api_principal who;
	struct api_query query;
	const char *id;	  /* the path's id segment, well-formed, or NULL */
	const char *name; /* the path's name segment (an artifact's), or NULL */
	json_t *body;	  /* the body (a JSON object) or NULL if none */
	bool head; /* HEAD: answer as GET, the transport drops the body */
};

/* router.c: answers. Each writes c->out (or out) and returns 0, or
 * -ENOMEM if not even the answer could be built (then 500, no body). */
int api_reply_json(struct api_response *out, unsigned status, json_t *obj);
int api_reply_error(struct api_response *out, unsigned status, const char *fmt,
		    ...) __attribute__((format(printf, 3, 4)));
/* api_reply_error, returning -1: for validators ("return api_reject(...)"
 * both answers and reports the failure). */
int api_reject(struct api_response *out, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Maps an -errno (and *err) from the store or control to an answer:
 * -ENOENT 404, -EACCES 403, -EINVAL and other bad input 400, -EPERM/-ESTALE/-EEXIST
 * 409, -EAGAIN/-EBUSY 503, anything else 500 (logged, detail withheld).
 * what names the operation for the log and a message-less error. */
int api_reply_failure(struct api_ctx *c, int r, const struct wr_error *err,
		      const char *what);
/* api_reply_json for a rendered object; a NULL obj (rendering failed)
 * becomes a logged 500 naming what. */
int api_reply_render(struct api_ctx *c, unsigned status, json_t *obj,
		     const char *what);
/* A 500 for a failure inside the API (allocation, rendering), logged. */
int api_reply_internal(struct api_ctx *c, const char *what);
/* One line in the server's log (util/log.h), "api: " before the message:
 * a 5xx answer's cause (error; warn for 503), a refused artifact (warn),
 * every request's method, path and status (debug). */
#define api_log(level, ...) wr_log((level), "api", __VA_ARGS__)

/* request.c: validation. Each returns 0, or -1 after writing a 400
 * answer that names the key. */
const char *api_query_get(const struct api_ctx *c, const char *key);
int api_query_parse(const char *raw, struct api_query *q,
		    const char *const *allowed, struct api_response *out);
/* Rejects any key of the body not in allowed (NULL-terminated). */
int api_body_check_keys(struct api_ctx *c, const char *const *allowed);
/* A string value of 1..max bytes; absent or null leaves *out NULL, which
 * is an error if required. */
#define API_STR_NOT_BLANK 1u  /* not only white space */
#define API_STR_NO_CONTROL 2u /* no control characters (urls, refs) */
int api_body_string(struct api_ctx *c, const char *key, bool required,
		    size_t max, unsigned flags, const char **out);
/* An agent: an argv array of strings or one string (becomes
 * ["sh", "-c", s]); *json_out is the argv as JSON text (caller frees) or
 * NULL if absent. */
int api_body_agent(struct api_ctx *c, const char *key, char **json_out);
/* A JSON object value, or NULL if absent. */
int api_body_object(struct api_ctx *c, const char *key, json_t **out);
/* A duration: a string for wr_parse_duration ("6h") or whole seconds. */
int api_body_duration(struct api_ctx *c, const char *key, bool *present,
		      uint64_t *ms_out);
/* Is s a well-formed id of kind prefix ('s', 'r'): "s-" + 1..32 of
 * [0-9a-z]? */
bool api_id_valid(const char *s, char prefix);
/* Is s a name an artifact may be asked for by: 1..128 of [A-Za-z0-9._-],
 * starting with a letter or digit, without ".."? */
bool api_artifact_name_valid(const char *s);
/* Copies at most 64 bytes of untrusted text into buf, printable ASCII
 * only (others become '?'), for error messages and logs. */
const char *api_quote(const char *s, char buf[80]);
/* Resolves a repository id or name (query parameter) to its id; writes
 * a 400/404 answer and returns -1 if it is malformed or unknown. */
int api_resolve_repo(struct api_ctx *c, const char *param, const char *text,
		     char id_out[STORE_ID_MAX]);

/* auth.c */
int api_role_parse(const char *name);
const char *api_role_name(enum api_role role);
/* 0 and *who for a valid bearer token; -EACCES for a missing, malformed,
 * unknown, revoked or expired one; another -errno (with *err) if the store
 * failed. */
int api_authenticate(struct api *a, const char *authorization,
		     struct api_principal *who, struct wr_error **err);
/* Revokes the token called name (the store's token_revoke) and makes sure
 * no cached lookup lets it through afterwards. */
int api_token_revoke(struct api *a, const char *name, int64_t *revoked_ms,
		     struct wr_error **err);
/* The name of repository repo_id as a new JSON string (null if unknown),
 * through the repository cache. NULL only on allocation failure. */
json_t *api_repo_name_json(struct api *a, const char *repo_id);
void api_cache_clear(struct api *a);

/* sessions.c: loads session c->id into *s if the caller may see it (a
 * submitter sees its own only); else answers 404 (or the store's
 * failure) and returns -1. */
int api_session_load(struct api_ctx *c, struct store_session *s);
enum api_access {
	API_ACCESS_READ,  /* read it, approve or reject it (by its role) */
	API_ACCESS_OWNER, /* message or cancel it: its user or an admin */
	API_ACCESS_MAX
};
/* api_session_load for access: with API_ACCESS_OWNER, a reviewer's load
 * of another user's session is answered 403. */
int api_session_load_as(struct api_ctx *c, struct store_session *s,
			enum api_access access);

/* Rendering (render.c). NULL on allocation failure. */
json_t *api_json_string(const char *s); /* null for NULL; never invalid */
json_t *api_json_embed(const char *json_text); /* parsed, or null */
json_t *api_session_json(struct api *a, const struct store_session *s,
			 bool in_list);
json_t *api_event_json(const struct store_event *e);
json_t *api_repo_json(const struct store_repo *r);
json_t *api_snapshot_json(const struct store_snapshot *s);
/* A token as listed: never its plain text or hash, only its id. */
json_t *api_token_json(const struct store_token *t, int64_t now_ms);

/* Route handlers: c->id is checked, c->query parsed and c->body is an
 * object or NULL as the route's table entry (router.c) demands. */
int api_sessions_create(struct api_ctx *c);
int api_sessions_list(struct api_ctx *c);
int api_session_get(struct api_ctx *c);
int api_session_events(struct api_ctx *c);
int api_session_message(struct api_ctx *c);
int api_session_cancel(struct api_ctx *c);
int api_session_approve(struct api_ctx *c);
int api_session_reject(struct api_ctx *c);
int api_session_check(struct api_ctx *c);
int api_session_diff(struct api_ctx *c);
int api_session_artifacts(struct api_ctx *c);
int api_session_artifact(struct api_ctx *c);
int api_repos_list(struct api_ctx *c);
int api_repos_add(struct api_ctx *c);
int api_repo_refresh(struct api_ctx *c);
int api_repo_builds(struct api_ctx *c);
int api_repo_build_log(struct api_ctx *c);
int api_repo_build_cancel(struct api_ctx *c);
bool api_build_id_valid(const char *s);
int api_repo_get(struct api_ctx *c);
int api_repo_update(struct api_ctx *c);
int api_repo_remove(struct api_ctx *c);
int api_snapshots_list(struct api_ctx *c);
int api_tokens_create(struct api_ctx *c);
int api_tokens_list(struct api_ctx *c);
int api_token_revoke_route(struct api_ctx *c);
int api_secret_put(struct api_ctx *c);
int api_secrets_list(struct api_ctx *c);
int api_secret_delete(struct api_ctx *c);
/* secrets.c: any name segment is looked at by the PUT handler itself */
bool api_secret_segment(const char *name);
/* evals.c (docs/api.md "Evals") */
int api_evals_list(struct api_ctx *c);
int api_eval_get(struct api_ctx *c);
int api_eval_run_put(struct api_ctx *c);
int api_eval_attempt_put(struct api_ctx *c);
int api_eval_batches_list(struct api_ctx *c);
int api_eval_batch_create(struct api_ctx *c);
int api_eval_batch_get(struct api_ctx *c);
int api_eval_item_get(struct api_ctx *c);
int api_eval_item_diff(struct api_ctx *c);
int api_eval_item_decide(struct api_ctx *c);
/* An eval run's id as `warren eval run` makes it: "e-" and 1..62 of
 * [a-z0-9-]. */
bool api_eval_run_id_valid(const char *s);
/* An attempt's name, "TASK.K": 1..STORE_EVAL_NAME_MAX of [A-Za-z0-9._-],
 * without "..". */
bool api_eval_attempt_name_valid(const char *s);
/* A review item's id: "i-" + [0-9a-z]. */
bool api_eval_item_id_valid(const char *s);
int api_healthz(struct api_ctx *c);
int api_whoami(struct api_ctx *c);
int api_events_stream(struct api_ctx *c);
int api_metrics(struct api_ctx *c);
int api_stats(struct api_ctx *c);

/* artifacts.c: opens rel, a path below dirfd, for reading without
 * following a symlink anywhere on the way; the descriptor or -errno.
 * O_NONBLOCK: a FIFO planted there must not hang the request (the caller
 * refuses anything fstat does not call a regular file). */
int api_open_beneath(int dirfd, const char *rel);

/* Outside /api/: the paths without a bearer token. */
/* web.c: GET/HEAD of the web UI's static files. */
int api_web_serve(struct api *a, const struct api_request *req,
		  struct api_response *out);
/* slack.c: POST /slack/commands and /slack/events, authenticated by
 * Slack's request signature (not a bearer token). */
int api_slack_command(struct api *a, const struct api_request *req,
		      struct api_response *out);
int api_slack_event(struct api *a, const struct api_request *req,
		    struct api_response *out);

#endif

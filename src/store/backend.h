/* backend.h - what the store's backends share (store.c), so that each
 * backend keeps only its SQL and its driver's calls.
 *
 *   - the columns each record is read from, in one order for every
 *     backend (STORE_*_COLUMNS), and the record read from a row of them
 *     whatever the driver (struct store_row, struct store_record_type);
 *   - the growing arrays of the *_list calls (struct store_vec);
 *   - the checks of what a call is given, with their messages;
 *   - the event data a transition and a message write.
 *
 * Nothing here leaves the store's backends (and the backends of Slack's
 * outbox, notify/outbox.c). */
#ifndef WR_STORE_BACKEND_H
#define WR_STORE_BACKEND_H

#include "store/store.h"

#include <jansson.h>

/* Caps on what a call may be given. */
#define STORE_USER_MAX 256
#define STORE_ROLE_MAX 64
#define STORE_TOKEN_HASH_MAX 128 /* hex of a SHA-512 at most */
#define STORE_REPO_NAME_MAX 100
#define STORE_TEXT_MAX                                        \
	(64 * 1024) /* urls, refs, roles, a repository's JSON \
		     */
#define STORE_ARTIFACT_NAME_MAX 1024
/* session_list's page: a limit <= 0 is the default, more is the most */
#define STORE_LIST_DEFAULT 50
#define STORE_LIST_MAX 500

#define STORE_STRINGIFY_(x) #x
#define STORE_STRINGIFY(x) STORE_STRINGIFY_(x)

/* The columns of each record, in the order its from_row reads them (the
 * SQL is the same in every backend). A token's row never holds its hash,
 * only its first digits (the token's id in listings). */
#define STORE_TOKEN_COLUMNS                                           \
	"user_name, role, created_ms, expires_ms, name, revoked_ms, " \
	"last_used_ms, substr(hash, 1, " STORE_STRINGIFY(             \
	    STORE_TOKEN_ID_LEN) ")"
#define STORE_REPO_COLUMNS                                                 \
	"id, name, url, default_ref, agent_json, refresh_ms, created_ms, " \
	"last_refresh_ms"
#define STORE_SNAPSHOT_COLUMNS \
	"id, repo_id, commit_id, created_ms, timings_json"
#define STORE_SESSION_COLUMNS                                            \
	"id, repo_id, user_name, prompt, ref, agent_json, limits_json, " \
	"state, reason, snapshot_id, sandbox, outcome_json, attempts, "  \
	"turns, exit_code, queue_seq, created_ms, updated_ms, "          \
	"started_ms, finished_ms, worker_id, lease_epoch, "              \
	"lease_expires_ms"
#define STORE_EVENT_COLUMNS "seq, time_ms, kind, data"
#define STORE_WORKER_COLUMNS \
	"id, host, started_ms, heartbeat_ms, max_sandboxes, stopped_ms"
/* a lease call's session (struct store_claim) */
#define STORE_CLAIM_COLUMNS "id, worker_id, lease_epoch, state"
#define STORE_MESSAGE_COLUMNS "id, user_name, text, turn, created_ms"
#define STORE_ARTIFACT_COLUMNS "name, path, media_type, size, created_ms"
#define STORE_SLACK_POST_COLUMNS                                          \
	"id, session_id, kind, channel, thread_ts, response_url, "        \
	"slack_user, text, posted_state, attempts, created_ms, next_ms, " \
	"done_ms, last_error"
#define STORE_EVAL_RUN_COLUMNS "id, user_name, run_json, created_ms, updated_ms"
#define STORE_EVAL_ATTEMPT_COLUMNS "name, attempt_json, updated_ms"
#define STORE_EVAL_BATCH_COLUMNS "id, user_name, runs_json, created_ms"
#define STORE_EVAL_ITEM_COLUMNS                                          \
	"batch_id, item, pos, run_id, attempt, session_id, prompt, "    \
	"verdict, reviewer, review_ms, shown_ms, decided_ms"
/* The states nothing more happens in, as SQL (session_state_terminal),
 * and those a session rests in: review and the terminal ones. */
#define STORE_TERMINAL_STATES \
	"('failed', 'cancelled', 'expired', 'rejected', 'pushed')"
#define STORE_RESTING_STATES                          \
	"('review', 'pushed', 'rejected', 'failed', " \
	"'cancelled', 'expired')"

/* One row of a result, as a backend's driver reads it. */
struct store_row {
	/* Column col's text, *out NULL for SQL NULL; -ENOMEM when the
	 * driver could not produce it. */
	int (*text)(const struct store_row *row, int col, const char **out);
	int64_t (*int64)(const struct store_row *row, int col);
	void *res; /* the driver's statement or result */
	int index; /* the row's number in res, for drivers that need it */
};

/* A kind of record: its size, how one is read from a row of its
 * STORE_*_COLUMNS (-ENOMEM, or -EIO for a value this build does not know,
 * leaving nothing allocated in out) and its destructor. */
struct store_record_type {
	size_t size;
	int (*from_row)(const struct store_row *row, void *out);
	void (*clear)(void *rec);
};
extern const struct store_record_type store_token_record, store_repo_record,
    store_snapshot_record, store_session_record, store_event_record,
    store_message_record, store_artifact_record, store_worker_record,
    store_claim_record, store_eval_run_record, store_eval_attempt_record,
    store_eval_batch_record, store_eval_item_record;
/* Slack's outbox's posts (notify/outbox.c): STORE_SLACK_POST_COLUMNS. */
extern const struct store_record_type slack_post_record;

/* A copy of column col's text (NULL for SQL NULL); a bounded copy into a
 * buffer ("" for SQL NULL). */
int store_row_strdup(const struct store_row *row, int col, char **out);
int store_row_copy(const struct store_row *row, int col, char *buf,
		   size_t size);

/* The records of a *_list call, growing. */
struct store_vec {
	const struct store_record_type *type;
	void *v;
	size_t n, cap;
};
/* Reads one more record from row: 0, -ENOMEM or the type's error. */
int store_vec_add_row(struct store_vec *vec, const struct store_row *row);
/* Hands the array over (NULL when empty). */
void store_vec_take(struct store_vec *vec, void **out, size_t *n_out);
void store_vec_free(struct store_vec *vec);

/* The password in url as it is written there (after "user:" in its
 * authority, or a password= parameter), or NULL: what a message about the
 * URL must not show. Caller frees. */
char *store_url_password(const char *url);

/* ---- checks: 0, or -errno with *err ------------------------------------ */

/* A secret's row as secret_put takes it (-EINVAL with *err). */
int store_secret_check(const struct store_secret *s, struct wr_error **err);
/* Its file as the column's base64 text (NULL: -ENOMEM), and back into
 * out->file (text empty or NULL: none, a tombstone's); -EIO for text that
 * is not such a file. */
char *store_secret_file_encode(const unsigned char *file, size_t len);
int store_secret_file_decode(const char *text, struct store_secret *out);
/* Does id fit a STORE_ID_MAX buffer (non-empty, printable ASCII)? */
bool store_id_ok(const char *id);
/* Non-empty, at most max bytes. */
bool store_text_ok(const char *s, size_t max);
/* "no session ID": -ENOENT. */
int store_no_session(const char *id, struct wr_error **err);
int store_token_check(const char *hash_hex, const struct store_token *t,
		      struct wr_error **err);
bool store_token_hash_ok(const char *hash_hex);
int store_repo_check(const struct store_repo *r, struct wr_error **err);
/* A repository's id or name as repo_get takes it. */
bool store_repo_key_ok(const char *id_or_name);
/* -EBUSY: repo_remove of a repository with active sessions not finished. */
int store_repo_busy(const char *id, int64_t active, struct wr_error **err);
int store_snapshot_check(const struct store_snapshot *s, struct wr_error **err);
int store_session_check(const struct store_session *s, struct wr_error **err);
/* The filter's page size (its limit brought into 1..STORE_LIST_MAX). */
int store_filter_check(const struct store_session_filter *f, int *limit,
		       struct wr_error **err);
int store_artifact_check(const char *session_id, const struct store_artifact *a,
			 struct wr_error **err);
/* event_append's arguments; *data_json becomes "{}" when NULL. */
int store_event_check(const char *session_id, enum event_kind kind,
		      const char **data_json, struct wr_error **err);
int store_consume_check(int64_t message_id, int turn, struct wr_error **err);
/* "message N was consumed already" (-ESTALE) or "no message N". */
int store_consume_refused(int64_t message_id, bool exists,
			  struct wr_error **err);

/* Evals (store_eval.c): the arguments of each call. */
int store_eval_run_check(const struct store_eval_run *r, struct wr_error **err);
int store_eval_attempt_check(const char *run_id,
			     const struct store_eval_attempt *a,
			     struct wr_error **err);
int store_eval_batch_check(const struct store_eval_batch *b,
			   const struct store_eval_item *items, size_t n,
			   struct wr_error **err);
int store_eval_item_key_check(const char *batch_id, const char *item,
			      struct wr_error **err);

/* ---- the data of the events a call writes ------------------------------ */

/* session_transition's checks, and its event's data but for "from":
 * {"state":to,"from":null,"reason":...} with extra_json's other keys. */
int store_transition_data(const char *id, int from, enum session_state to,
			  const struct store_session_update *upd,
			  const char *extra_json, json_t **out,
			  struct wr_error **err);
/* session_transition's refusals, once the state read is cur: -ESTALE when
 * it is not from (from >= 0), -EPERM when cur -> to is not allowed. */
int store_transition_allowed(const char *id, int cur, int from,
			     enum session_state to, struct wr_error **err);
/* The event's text, "from" filled in. */
int store_transition_text(const char *id, json_t *data, enum session_state from,
			  char **out, struct wr_error **err);
/* ---- leases ------------------------------------------------------------ */

/* An audit record to insert as want_seq of session_id: its seq, a hash of
 * STORE_AUDIT_HASH_LEN, a text of at most STORE_AUDIT_RECORD_MAX. */
int store_audit_record_check(const char *session_id, int64_t want_seq,
			     const struct store_audit_record *r,
			     struct wr_error **err);
/* A write carrying epoch (0: none) about session id, whose lease epoch is
 * cur: 0, or -ESTALE "session ID: lease epoch E is stale (now C)". */
int store_epoch_check(const char *id, int64_t epoch, int64_t cur,
		      struct wr_error **err);
/* A write carrying a negative epoch (a writer that knows it lost the lease:
 * no session has one) is refused before it reaches the server: -ESTALE,
 * else 0. A store out of reach (a link cut) must not hold up what the lost
 * session's runner does next: stop its sandbox. */
int store_epoch_lost(const char *id, int64_t epoch, struct wr_error **err);
int store_worker_check(const struct store_worker *w, struct wr_error **err);
/* session_claim's arguments; *limit brought into 1..STORE_LIST_MAX. */
int store_claim_check(const char *worker_id, const char *session_id,
		      int64_t lease_ms, int *limit, struct wr_error **err);
/* The worker's row as a lease call finds it: -ENOENT when it has none
 * (found false), -ESTALE when it stopped (stopped_ms != 0). */
int store_worker_usable(const char *id, bool found, int64_t stopped_ms,
			const char *what, struct wr_error **err);
/* A claim of one session (session_claim with an id) as its row stands:
 * 0 when worker_id may take it, else -EPERM (terminal) or -EBUSY (another
 * worker's live lease). *keep: worker_id holds it already (no new epoch). */
int store_claim_one_check(const char *id, const char *worker_id,
			  enum session_state state, const char *holder,
			  int64_t expires_ms, int64_t now_ms, bool *keep,
			  struct wr_error **err);
/* What a backend lends lease_reap inside its transaction (conn, its
 * connection): a lease's end (the epoch after; advanced if advance), and
 * session_transition's write of a transition with its event (the event's
 * seq; data from store_transition_data). */
struct store_reap_ops {
	int64_t (*lease_end)(void *conn, const char *id, bool advance,
			     struct wr_error **err);
	int64_t (*transition)(void *conn, const char *id, int from,
			      enum session_state to,
			      const struct store_session_update *upd,
			      json_t *data, int64_t now, struct wr_error **err);
};
/* Defines name, the store_reap_ops of a backend whose connection is a
 * conn_type, over its lease_end and transition functions (which take a
 * conn_type *). */
#define STORE_DEFINE_REAP_OPS(name, conn_type, lease_end_fn, transition_fn)    \
	static int64_t name##_lease_end(void *conn, const char *id,            \
					bool advance, struct wr_error **err)   \
	{                                                                      \
		return lease_end_fn((conn_type *)conn, id, advance, err);      \
	}                                                                      \
	static int64_t name##_transition(                                      \
	    void *conn, const char *id, int from, enum session_state to,       \
	    const struct store_session_update *upd, json_t *data, int64_t now, \
	    struct wr_error **err)                                             \
	{                                                                      \
		return transition_fn((conn_type *)conn, id, from, to, upd,     \
				     data, now, err);                          \
	}                                                                      \
	static const struct store_reap_ops name = {name##_lease_end,           \
						   name##_transition}
/* Reaps the expired lease c (a row of STORE_CLAIM_COLUMNS) in the
 * caller's transaction: its lease ends, its epoch advancing; if its state
 * may go to interrupted, it does, with reason ("worker W lost its lease"
 * when NULL) and the keys {"worker":W,"epoch":E}. c's epoch and state
 * become the session's. */
int store_reap_one(const struct store_reap_ops *ops, void *conn,
		   struct store_claim *c, const char *reason, int64_t now_ms,
		   struct wr_error **err);
/* The end of a lease call that gives claims: on success (r >= 0) v and n
 * handed over into *out and *n_out, and n returned; else v freed and r
 * returned. */
int store_claims_out(int r, struct store_claim *v, size_t n,
		     struct store_claim **out, size_t *n_out);

/* message_add's checks, and its event's data but for "id". */
int store_message_data(const char *session_id, const char *user,
		       const char *text, json_t **out, struct wr_error **err);
/* The event's text, "id" filled in. */
int store_message_text(const char *session_id, json_t *data, int64_t id,
		       char **out, struct wr_error **err);

#endif

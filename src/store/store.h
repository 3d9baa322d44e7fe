/* store.h - the control plane's durable state, behind one interface.
 *
 * Owns repositories, snapshots (as the control plane knows them), sessions,
 * messages (prompts and follow-ups), events (each session's log), each
 * session's audit chain (its records as security/audit.h makes them),
 * artifacts and API tokens. Two backends behind one struct of function pointers:
 * SQLite (the embedded default, WAL: store_open_sqlite) and PostgreSQL
 * (libpq: store_open_pg); store_open picks one by URL. What they share
 * (checks, records read from rows, event data) is store.c's (backend.h).
 * Slack's outbox is an interface of its own (notify/outbox.h), which a
 * backend may implement beside this one (both do, in the same database).
 *
 * Rules every backend keeps:
 *   - every call is one transaction; a state transition and its event are
 *     written together or not at all;
 *   - event sequence numbers are per session, start at 1 and have no gaps;
 *   - records returned are owned by the caller (free with the *_clear or
 *     *_free functions below); out-parameters are written only on success;
 *   - functions return 0 (or a count) on success, -errno on failure:
 *     -ENOENT unknown id, -EEXIST duplicate, -ESTALE a transition whose
 *     expected state no longer holds (or a write whose lease epoch is
 *     stale, below), -EIO for a database error (with *err).
 * The store is safe to call from several threads.
 *
 * Leases (workers on many hosts sharing the sessions): a worker registers
 * (worker_register), claims sessions (session_claim), renews its leases
 * (lease_renew) and stops (worker_stop); anyone reaps the leases that ran
 * out (lease_reap). A claim gives the session to the worker with a new
 * lease epoch, the fencing token: every write a worker makes about a
 * session may carry the epoch it holds (store_session_update.epoch,
 * event_append_fenced), and is refused with -ESTALE, writing nothing, when
 * the session's epoch is another one (a reap, or another worker's claim,
 * moved it on). Epoch 0 is no check: what does not run on a worker. The
 * store takes every time as an argument (now_ms) where a lease is judged,
 * so that the callers' clock is the only one. */
#ifndef WR_STORE_STORE_H
#define WR_STORE_STORE_H

#include "store/event_kind.h"
#include "util/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum session_state {
	SESSION_QUEUED,
	SESSION_PROVISIONING,
	SESSION_RUNNING,
	SESSION_VERIFYING,
	SESSION_REVIEW,
	SESSION_APPROVED,
	SESSION_PUSHED,
	SESSION_REJECTED,
	SESSION_FAILED,
	SESSION_CANCELLED,
	SESSION_EXPIRED,
	SESSION_INTERRUPTED,
	SESSION_STATE_MAX
};

/* "queued", "provisioning", ... ; NULL for an out-of-range value. */
const char *session_state_name(enum session_state s);
/* The state named text, or -EINVAL. */
int session_state_parse(const char *text);
/* failed, cancelled, expired, rejected, pushed: nothing more will happen. */
bool session_state_terminal(enum session_state s);
/* Does the lifecycle allow from -> to (ARCHITECTURE.md, Session
 * lifecycle)? Besides the diagram: review -> queued and review -> running
 * start a follow-up turn (queued when the session has no sandbox left,
 * running when its resting sandbox takes the turn); interrupted -> queued
 * waits for a slot again; running -> running is not a transition. Also
 * running -> review (nothing to verify), review -> cancelled | expired,
 * approved -> failed (the push failed), interrupted -> failed | cancelled
 * | expired (store.c has the whole table). */
bool session_transition_allowed(enum session_state from,
				enum session_state to);

#define STORE_ID_MAX 72 /* ids are short printable tokens (snapshot ids: 64 hex) */

struct store_repo {
	char id[STORE_ID_MAX];
	char *name;	   /* unique, [A-Za-z0-9._-] */
	char *url;	   /* local path or git URL */
	char *default_ref; /* NULL: the remote's HEAD */
	char *agent_json;  /* default agent argv as a JSON array, or NULL */
	int64_t refresh_ms; /* snapshot refresh interval, 0: spec/default */
	int64_t created_ms;
	int64_t last_refresh_ms; /* last refresh attempt, 0: never */
};

struct store_snapshot {
	char id[STORE_ID_MAX]; /* the snapshot store's id (manifest name) */
	char repo_id[STORE_ID_MAX];
	char commit[41];
	int64_t created_ms;
	char *timings_json; /* build phase timings, JSON object */
};

struct store_session {
	char id[STORE_ID_MAX];
	char repo_id[STORE_ID_MAX];
	char *user;	   /* who asked (token's user) */
	char *prompt;	   /* the first prompt */
	char *ref;	   /* requested ref, or NULL */
	char *agent_json;  /* agent argv as a JSON array, or NULL */
	char *limits_json; /* requested limits, JSON object, or NULL */
	enum session_state state;
	char *reason; /* why it is in this state (error, signal...), or NULL */
	char *snapshot_id;  /* the snapshot it was restored from, or NULL */
	char *sandbox;	    /* name of its sandbox while it has one, or NULL */
	char *outcome_json; /* start breakdown, sync outcome, exit: JSON */
	int attempts;	    /* provisioning attempts (retries after death) */
	int turns;	    /* turns started */
	int exit_code;	    /* last turn's exit status, -1 none yet */
	int64_t queue_seq;  /* FIFO position, set whenever it is (re)queued */
	int64_t created_ms, updated_ms;
	int64_t started_ms;  /* first agent start, 0 before */
	int64_t finished_ms; /* reached a terminal state or review, 0 before */
	/* the lease: the worker holding the session (NULL: none), the
	 * fencing token (0 before its first claim; each claim and each reap
	 * advances it) and when the lease ends (0 when not held) */
	char *worker_id;
	int64_t lease_epoch;
	int64_t lease_expires_ms;
};

/* Fields a transition may change besides the state; NULL/negative means
 * "leave as is". */
struct store_session_update {
	const char *reason;	  /* "" clears */
	const char *snapshot_id;  /* "" clears */
	const char *sandbox;	  /* "" clears */
	const char *outcome_json; /* replaces */
	int attempts;		  /* -1: keep */
	int turns;		  /* -1: keep */
	int exit_code;		  /* INT32_MIN: keep */
	bool requeue;		  /* give it a new queue_seq (end of FIFO) */
	int64_t started_ms;	  /* 0: keep */
	int64_t finished_ms;	  /* 0: keep, -1: clear */
	/* the lease epoch the writer holds: 0 writes whatever the lease
	 * (today's callers), another value is refused with -ESTALE unless it
	 * is the session's lease_epoch, checked in the write's transaction */
	int64_t epoch;
};
#define STORE_SESSION_UPDATE_INIT                                              \
	{                                                                      \
		.attempts = -1, .turns = -1, .exit_code = INT32_MIN            \
	}

/* Most bytes of an event's data_json (event_append: -E2BIG beyond). */
#define STORE_EVENT_DATA_MAX (1024 * 1024)
/* Most events one event_list call returns (a limit <= 0 means this). */
#define STORE_EVENT_LIST_MAX 10000

struct store_event {
	int64_t seq; /* 1, 2, ... within the session */
	int64_t time_ms;
	/* the kind's name as stored (event_kind.h): "state", "output", ...;
	 * parse it (event_kind_parse) to dispatch on it */
	char *kind;
	char *data_json; /* JSON object */
};

/* One record of a session's audit chain, as security/audit.h serializes
 * it: the store keeps its text as given, in the chain's order (seq), and
 * knows nothing of its format but seq and hash. */
#define STORE_AUDIT_HASH_LEN 64
/* Most bytes of one record's text (audit_append: -E2BIG beyond). */
#define STORE_AUDIT_RECORD_MAX (64 * 1024)
/* Most records one audit_list call returns (a limit <= 0 means this). */
#define STORE_AUDIT_LIST_MAX 10000

struct store_audit_record {
	int64_t seq; /* 1, 2, ... within the session */
	char hash[STORE_AUDIT_HASH_LEN + 1];
	char *record; /* the record's canonical text, no newline */
};

/* Builds the record that follows the chain's head (prev_seq 0 and
 * prev_hash "" for an empty chain) into *out: its seq must be
 * prev_seq + 1, record allocated (the store frees it). Called inside the
 * append's transaction, with the session's chain locked: keep it short,
 * and out of the store. A negative return refuses the append. */
typedef int (*store_audit_build_fn)(void *ctx, int64_t prev_seq,
				    const char *prev_hash,
				    struct store_audit_record *out,
				    struct wr_error **err);

struct store_message {
	int64_t id;
	char *user;
	char *text;
	int turn; /* the turn that consumed it, 0 while pending */
	int64_t created_ms;
};

struct store_artifact {
	char *name; /* relative name, no "..", no leading "/" */
	char *path; /* where it is on disk */
	char *media_type;
	int64_t size;
	int64_t created_ms;
};

/* A token's name: 1..STORE_TOKEN_NAME_MAX of [A-Za-z0-9._-], starting
 * with a letter or digit (so never "." or ".."), unique. */
#define STORE_TOKEN_NAME_MAX 64
/* The hex digits of a token's hash a listing shows as its id. The hash is
 * a SHA-256 of 32 random bytes: a prefix of it tells nothing about the
 * token. */
#define STORE_TOKEN_ID_LEN 8

struct store_token {
	char *user;
	char *role; /* "admin", "reviewer", "submitter" */
	int64_t created_ms;
	int64_t expires_ms;   /* 0: does not expire */
	char *name;	      /* see STORE_TOKEN_NAME_MAX */
	int64_t revoked_ms;   /* 0: active */
	int64_t last_used_ms; /* 0: never; updated at most once a minute */
	char id[STORE_TOKEN_ID_LEN + 1]; /* listings: the hash's first digits */
};

/* A worker (a host's warren serve --role worker). */
struct store_worker {
	char id[STORE_ID_MAX];
	char *host;	      /* what it says it runs on, or NULL */
	int64_t started_ms;   /* worker_register: 0 means now */
	int64_t heartbeat_ms; /* its last lease_renew (started_ms before) */
	int max_sandboxes;    /* its own cap, 0: none given */
	int64_t stopped_ms;   /* 0 while it runs */
};

/* A session a lease call took, holds or reaped. */
struct store_claim {
	char id[STORE_ID_MAX];
	/* the worker holding it (lease_reap: the one that lost it) */
	char worker_id[STORE_ID_MAX];
	int64_t epoch;		  /* the session's lease epoch after the call */
	enum session_state state; /* its state after the call */
};

struct store_session_filter {
	int state;	    /* -1: any */
	const char *user;   /* NULL: any */
	const char *repo_id; /* NULL: any */
	const char *before_id; /* page: sessions created before this one */
	int limit;	    /* 1..500 */
};


/* Evals (docs/eval.md): a run as `warren eval run` publishes it, its
 * attempts, and blind review batches over the resolved ones. The run's
 * and the attempt's objects are the client's JSON, kept as text. */
#define STORE_EVAL_JSON_MAX (256 * 1024) /* a run's or an attempt's JSON */
#define STORE_EVAL_ITEMS_MAX 2000	 /* items of one review batch */
#define STORE_EVAL_NAME_MAX 128	 /* an attempt's name, "TASK.K" */
struct store_eval_run {
	char id[STORE_ID_MAX];
	char *user;	 /* who published it first */
	char *run_json;	 /* the run object */
	int64_t created_ms; /* its first publication */
	int64_t updated_ms;
};

struct store_eval_attempt {
	char *name;	    /* "TASK.K" */
	char *attempt_json; /* the attempt object */
	int64_t updated_ms;
};

struct store_eval_batch {
	char id[STORE_ID_MAX];
	char *user;	  /* who made it */
	char *runs_json;  /* the runs it covers, a JSON array of ids */
	int64_t created_ms;
};

/* One change put up for blind review: the attempt it came from is the
 * server's to know, never the reviewer's (the API shows item and prompt). */
struct store_eval_item {
	char batch_id[STORE_ID_MAX];
	char item[STORE_ID_MAX]; /* opaque, random */
	int pos;		 /* the shuffled order, from 0 */
	char run_id[STORE_ID_MAX];
	char *attempt;	  /* "TASK.K" */
	char *session_id; /* whose diff is reviewed */
	char *prompt;	  /* the task's prompt */
	char *verdict;	  /* "merge", "changes", "reject"; NULL: none yet */
	char *reviewer;	  /* who gave it */
	int64_t review_ms;  /* the review time recorded */
	int64_t shown_ms;   /* first shown to a reviewer, 0: never */
	int64_t decided_ms; /* 0: not decided */
};

/* A secret as the store keeps it (security/secrets_store.c): the exact
 * bytes of the file DATA/secrets/NAME.enc (ciphertext under a key the
 * store never sees) and the text of NAME.repos, so that every server's
 * data directory can hold the same files. A deleted secret stays as a
 * tombstone (deleted_ms, no file) until it is set again, so that every
 * host's copy goes too. */
#define STORE_SECRET_NAME_MAX 64
#define STORE_SECRET_FILE_MAX (80 * 1024)  /* a 64 KiB value's file fits */
#define STORE_SECRET_REPOS_MAX (64 * 1024) /* NAME.repos' text */
#define STORE_SECRETS_MAX 4096		   /* rows, tombstones included */
struct store_secret {
	char name[STORE_SECRET_NAME_MAX + 1]; /* [A-Z_][A-Z0-9_]* */
	unsigned char *file; /* NULL (file_len 0) for a deleted one */
	size_t file_len;
	char *repos;	    /* NULL: no list (any repository) */
	int64_t updated_ms; /* of the last put or the delete */
	int64_t deleted_ms; /* 0: live */
};

struct store;

enum store_backend {
	STORE_BACKEND_SQLITE,
	STORE_BACKEND_POSTGRES,
	STORE_BACKEND_MAX
};

/* What a process wrote: an event of kind (its name) of session_id, or,
 * after the watch was cut off and came back, anything (both NULL). */
typedef void (*store_changed_fn)(void *ctx, const char *session_id,
				 const char *kind);

struct store_ops {
	enum store_backend backend;
	void (*close)(struct store *st);
	/* Calls changed (from a thread of the store's) for every event any
	 * process appends, this one's included, until the store is closed
	 * (PostgreSQL: LISTEN/NOTIFY). NULL for a store only one process
	 * uses (SQLite). At most one watch per store; -EBUSY for a second.
	 * changed NULL ends the watch (its thread is joined: no call after
	 * the return). */
	int (*watch)(struct store *st, store_changed_fn changed, void *ctx,
		     struct wr_error **err);
	/* The schema version the database is at after open. */
	int (*schema_version)(struct store *st);

	/* The snapshot builds waiting for a refresh worker (one per
	 * repository, oldest first). enqueue: *added false when it is
	 * queued already; dequeue: takes the oldest (-ENOENT when none;
	 * concurrent callers take different ones), *repo_id the caller's;
	 * unqueue: *removed false when it was not queued; list: the ids in
	 * order (free with store_strv_free). */
	int (*build_enqueue)(struct store *st, const char *repo_id,
			     int64_t now_ms, bool *added, struct wr_error **err);
	int (*build_dequeue)(struct store *st, char **repo_id,
			     struct wr_error **err);
	int (*build_unqueue)(struct store *st, const char *repo_id,
			     bool *removed, struct wr_error **err);
	int (*build_queue_list)(struct store *st, char ***ids, size_t *n,
				struct wr_error **err);
	/* Who builds a repository's snapshot now, among workers sharing
	 * the store (migration 10): one claim per repository, held by a
	 * worker until now_ms + lease_ms. build_claim takes it when it is
	 * free, ran out (expires_ms < now_ms) or is worker's already (its
	 * end then moves to now_ms + lease_ms): *got true. Else *got false
	 * and *holder (when not NULL) the holding worker's id, the caller's
	 * to free (NULL if the claim went meanwhile). One transaction; two
	 * claimers at once never both get it. build_release ends worker's
	 * claim of repo_id (nothing when it holds none). lease_renew
	 * extends, with the worker's session leases, every build claim of
	 * it that has not run out; worker_stop ends them. -EINVAL for a bad
	 * id or lease. */
	int (*build_claim)(struct store *st, const char *repo_id,
			   const char *worker, int64_t now_ms, int64_t lease_ms,
			   bool *got, char **holder, struct wr_error **err);
	int (*build_release)(struct store *st, const char *repo_id,
			     const char *worker, struct wr_error **err);

	/* Stores the token whose hash is hash_hex: t->user, t->role and
	 * t->name are required (-EINVAL), created_ms 0 means now; it starts
	 * active (revoked_ms, last_used_ms and id are not read). -EEXIST if
	 * the name (or the hash) is taken. */
	int (*token_add)(struct store *st, const char *hash_hex,
			 const struct store_token *t, struct wr_error **err);
	/* -ENOENT if unknown, revoked or expired (at expires_ms exactly). */
	int (*token_lookup)(struct store *st, const char *hash_hex,
			    int64_t now_ms, struct store_token *out,
			    struct wr_error **err);
	/* All tokens, revoked and expired ones included. */
	int (*token_count)(struct store *st, struct wr_error **err);
	/* Every token, oldest first, with its id; never a hash. */
	int (*token_list)(struct store *st, struct store_token **out,
			  size_t *n_out, struct wr_error **err);
	/* Revokes the token called name at now_ms; a revoked token stays
	 * revoked at its first time, which *revoked_ms_out gets (if not
	 * NULL). -ENOENT if there is no such name. */
	int (*token_revoke)(struct store *st, const char *name, int64_t now_ms,
			    int64_t *revoked_ms_out, struct wr_error **err);
	/* Records a use of the token (last_used_ms = now_ms); -ENOENT if
	 * unknown. */
	int (*token_touch)(struct store *st, const char *hash_hex,
			   int64_t now_ms, struct wr_error **err);

	int (*repo_add)(struct store *st, const struct store_repo *r,
			struct wr_error **err);
	/* By id or by name. */
	int (*repo_get)(struct store *st, const char *id_or_name,
			struct store_repo *out, struct wr_error **err);
	int (*repo_list)(struct store *st, struct store_repo **out,
			 size_t *n_out, struct wr_error **err);
	int (*repo_set_refreshed)(struct store *st, const char *id,
				  int64_t when_ms, struct wr_error **err);
	/* r->id's url, default_ref, agent_json and refresh_ms become r's;
	 * -ENOENT if there is no such (unremoved) repository. */
	int (*repo_update)(struct store *st, const struct store_repo *r,
			   struct wr_error **err);
	/* Removes the repository from the list and frees its name; its row
	 * stays, found by id, for its sessions' history. -EBUSY while one
	 * of its sessions is not finished (failed, cancelled, expired,
	 * rejected, pushed); -ENOENT if there is no such repository. */
	int (*repo_remove)(struct store *st, const char *id, int64_t now_ms,
			   struct wr_error **err);

	int (*snapshot_add)(struct store *st, const struct store_snapshot *s,
			    struct wr_error **err);
	/* The newest snapshot of repo_id; -ENOENT if none. */
	int (*snapshot_latest)(struct store *st, const char *repo_id,
			       struct store_snapshot *out,
			       struct wr_error **err);
	/* repo_id NULL: all, newest first. */
	int (*snapshot_list)(struct store *st, const char *repo_id,
			     struct store_snapshot **out, size_t *n_out,
			     struct wr_error **err);

	/* Inserts s (state queued, a new queue_seq), the first message
	 * (s->prompt by s->user) and event 1 ("state", {"state":"queued"}). */
	int (*session_create)(struct store *st, const struct store_session *s,
			      struct wr_error **err);
	int (*session_get)(struct store *st, const char *id,
			   struct store_session *out, struct wr_error **err);
	/* Newest first. */
	int (*session_list)(struct store *st,
			    const struct store_session_filter *f,
			    struct store_session **out, size_t *n_out,
			    struct wr_error **err);
	/* Sessions in state, oldest queue_seq first (the queue for
	 * SESSION_QUEUED). */
	int (*session_list_state)(struct store *st, enum session_state state,
				  struct store_session **out, size_t *n_out,
				  struct wr_error **err);
	/* How many session records (any session's) were created, moved or
	 * updated through this store so far, counted once each write is
	 * committed. A cache of session records read when the count was N
	 * holds as long as the count is still N. Writes from outside this
	 * process are not counted (an operator's sqlite3 or psql shell;
	 * with PostgreSQL, another process on the same database): such a
	 * cache (the egress allowlists, perimeter/egress.c) sees them at
	 * the next write of this process, which is why one server per
	 * database is the rule. */
	uint64_t (*session_writes)(struct store *st);
	/* Counts per state (counts[SESSION_STATE_MAX]). */
	int (*session_count)(struct store *st, int64_t *counts,
			     struct wr_error **err);
	/* One transaction: if the session is in `from` (any state when
	 * from < 0) and from -> to is allowed, set state to, apply upd,
	 * append event ("state", {"state":to,"from":..., "reason":...}
	 * merged with extra_json if given). -ESTALE if the state was not
	 * `from`, -EPERM if the transition is not allowed, -ESTALE if
	 * upd->epoch is stale (checked first). A transition to a terminal
	 * state ends the session's lease (worker_id and lease_expires_ms
	 * cleared, the epoch kept). Returns the event's seq. */
	int64_t (*session_transition)(struct store *st, const char *id,
				      int from, enum session_state to,
				      const struct store_session_update *upd,
				      const char *extra_json,
				      struct wr_error **err);
	/* Update fields without a state change (no event); -ESTALE if
	 * upd->epoch is stale. */
	int (*session_update)(struct store *st, const char *id,
			      const struct store_session_update *upd,
			      struct wr_error **err);

	/* Appends one event, stored with its kind's name; returns its seq.
	 * -EINVAL for a kind out of range. */
	int64_t (*event_append)(struct store *st, const char *session_id,
				enum event_kind kind, const char *data_json,
				struct wr_error **err);
	/* Events with seq > after_seq, at most limit, in order. */
	int (*event_list)(struct store *st, const char *session_id,
			  int64_t after_seq, int limit, struct store_event **out,
			  size_t *n_out, struct wr_error **err);

	/* Adds a follow-up; returns its id. Appends a "message" event. */
	int64_t (*message_add)(struct store *st, const char *session_id,
			       const char *user, const char *text,
			       struct wr_error **err);
	/* Messages not yet consumed by a turn, oldest first. */
	int (*message_pending)(struct store *st, const char *session_id,
			       struct store_message **out, size_t *n_out,
			       struct wr_error **err);
	int (*message_consume)(struct store *st, int64_t message_id, int turn,
			       struct wr_error **err);

	int (*artifact_add)(struct store *st, const char *session_id,
			    const struct store_artifact *a,
			    struct wr_error **err);
	int (*artifact_list)(struct store *st, const char *session_id,
			     struct store_artifact **out, size_t *n_out,
			     struct wr_error **err);

	/* ---- the audit chain (security/audit.h owns the format) ---- */

	/* Appends the record build makes after the session's chain head, in
	 * one transaction that reads the head and inserts its successor
	 * under the session's write lock (SQLite: BEGIN IMMEDIATE;
	 * PostgreSQL: the session's row FOR UPDATE), so that appenders in
	 * any number of threads or processes extend one chain, never fork
	 * it. Refused with -ESTALE (nothing written) unless epoch is 0 or the
	 * session's lease_epoch; -ENOENT for an unknown session. Returns the
	 * record's seq. */
	int64_t (*audit_append)(struct store *st, const char *session_id,
				int64_t epoch, store_audit_build_fn build,
				void *ctx, struct wr_error **err);
	/* Records with seq > after_seq, at most limit, by seq; -ENOENT for
	 * an unknown session (none yet: 0 records). */
	int (*audit_list)(struct store *st, const char *session_id,
			  int64_t after_seq, int limit,
			  struct store_audit_record **out, size_t *n_out,
			  struct wr_error **err);
	/* Writes a chain read from elsewhere (a log file of an older
	 * server) as the session's, records as given (seq 1, 2, ... in
	 * order), in one transaction; -EEXIST if the session has records
	 * already. */
	int (*audit_import)(struct store *st, const char *session_id,
			    const struct store_audit_record *v, size_t n,
			    struct wr_error **err);

	/* ---- secrets' files (security/secrets_store.c); never a value ---- */

	/* Stores s (name, file and repos; updated_ms 0 means now) as the
	 * live secret of its name, over a previous row or a tombstone.
	 * -EINVAL for a bad name, an empty or too long file, too long a
	 * list; -ENOSPC past STORE_SECRETS_MAX rows. */
	int (*secret_put)(struct store *st, const struct store_secret *s,
			  struct wr_error **err);
	/* Makes name's row a tombstone at now_ms; *deleted (if not NULL)
	 * false when there was no live row (nothing changed). */
	int (*secret_delete)(struct store *st, const char *name, int64_t now_ms,
			     bool *deleted, struct wr_error **err);
	/* Every row, tombstones included, by name (free with
	 * store_secrets_free). */
	int (*secret_list)(struct store *st, struct store_secret **out,
			   size_t *n_out, struct wr_error **err);

	/* ---- leases (see the top of this file) ---- */

	/* event_append, refused with -ESTALE (nothing written) unless epoch
	 * is 0 or the session's lease_epoch. */
	int64_t (*event_append_fenced)(struct store *st, const char *session_id,
				       int64_t epoch, enum event_kind kind,
				       const char *data_json,
				       struct wr_error **err);
	/* Records worker w->id as running (host, max_sandboxes, started_ms
	 * 0: now; heartbeat_ms = started_ms; stopped_ms cleared): a worker
	 * that starts again under its id is registered again. */
	int (*worker_register)(struct store *st, const struct store_worker *w,
			       struct wr_error **err);
	/* Marks the worker stopped at now_ms (its first stop's time stays)
	 * and ends its leases there (its build claims too): the next
	 * lease_reap takes what it held. -ENOENT if unknown. */
	int (*worker_stop)(struct store *st, const char *id, int64_t now_ms,
			   struct wr_error **err);
	/* Every worker, stopped ones included, by started_ms then id. */
	int (*worker_list)(struct store *st, struct store_worker **out,
			   size_t *n_out, struct wr_error **err);
	/* Gives sessions to worker_id with a lease until now_ms + lease_ms,
	 * each one's lease_epoch advanced, in one transaction.
	 *   session_id NULL: up to limit (1..STORE_LIST_MAX; more is the
	 *     most) sessions in state queued that no live lease holds
	 *     (worker_id NULL, or lease_expires_ms < now_ms), oldest first
	 *     (created_ms, then id). On PostgreSQL the rows are taken with
	 *     FOR UPDATE SKIP LOCKED: concurrent claimers never take the same
	 *     session and never wait on each other; on SQLite the write
	 *     transaction (BEGIN IMMEDIATE) serialises them.
	 *   session_id given (a follow-up routed to this worker): that one
	 *     session, in any state not terminal (-EPERM if terminal), unless
	 *     another worker's live lease holds it (-EBUSY); limit is not
	 *     read. If worker_id holds it already, its lease is extended and
	 *     its epoch kept. The state does not change (lease_reap is what
	 *     interrupts a session whose worker was lost).
	 * *out gets the claims (NULL when none), *n_out their number; the
	 * count is returned. -ENOENT for an unknown worker (or session),
	 * -ESTALE for a stopped one. */
	int (*session_claim)(struct store *st, const char *worker_id,
			     const char *session_id, int64_t now_ms,
			     int64_t lease_ms, int limit,
			     struct store_claim **out, size_t *n_out,
			     struct wr_error **err);
	/* Heartbeats worker_id (heartbeat_ms = now_ms) and extends to
	 * now_ms + lease_ms every lease of it that has not run out
	 * (lease_expires_ms >= now_ms); one that ran out is not renewed (it
	 * waits for lease_reap). *held gets what the worker holds now, by
	 * id (NULL when nothing), *n_held their number: the caller compares
	 * it with what it runs, and stops the sandboxes of the sessions
	 * missing or held at another epoch. Returns the count. -ENOENT for
	 * an unknown worker, -ESTALE for a stopped one. Renewals are not
	 * counted by session_writes (they change lease_expires_ms only).
	 * The worker's build claims (build_claim) are renewed alike, in the
	 * same transaction. */
	int (*lease_renew)(struct store *st, const char *worker_id,
			   int64_t now_ms, int64_t lease_ms,
			   struct store_claim **held, size_t *n_held,
			   struct wr_error **err);
	/* Takes back every lease that ran out (lease_expires_ms < now_ms, a
	 * worker set, the state not terminal), at most STORE_LIST_MAX a call
	 * (call again while it returns that many): the session's epoch
	 * advances, worker_id and lease_expires_ms are cleared, and a
	 * session in provisioning, running or verifying becomes interrupted
	 * through session_transition's path (a "state" event with reason,
	 * or "worker W lost its lease" when reason is NULL, and the keys
	 * "worker" and "epoch"); one in another state (queued, review,
	 * approved, interrupted: none of which may go to interrupted) keeps
	 * its state and writes no event. One transaction; on PostgreSQL
	 * two reapers at once skip each other's rows. *out gets
	 * what was reaped (NULL when nothing; worker_id: the worker that
	 * lost it), *n_out its number; returns the count. */
	int (*lease_reap)(struct store *st, int64_t now_ms, const char *reason,
			  struct store_claim **out, size_t *n_out,
			  struct wr_error **err);

	/* ---- evals (store_eval.c's checks; docs/eval.md) ---- */

	/* Inserts or replaces run r->id's JSON (user and created_ms kept
	 * from the first put; r->created_ms is now, 0 meaning the clock). */
	int (*eval_run_put)(struct store *st, const struct store_eval_run *r,
			    struct wr_error **err);
	int (*eval_run_get)(struct store *st, const char *id,
			    struct store_eval_run *out, struct wr_error **err);
	/* Newest first, at most STORE_LIST_MAX. */
	int (*eval_run_list)(struct store *st, struct store_eval_run **out,
			     size_t *n_out, struct wr_error **err);
	/* Inserts or replaces an attempt of run_id; -ENOENT for an unknown
	 * run. */
	int (*eval_attempt_put)(struct store *st, const char *run_id,
				const struct store_eval_attempt *a,
				struct wr_error **err);
	/* By name. */
	int (*eval_attempt_list)(struct store *st, const char *run_id,
				 struct store_eval_attempt **out,
				 size_t *n_out, struct wr_error **err);
	/* The batch and its items, in one transaction; -EEXIST for a taken
	 * id. */
	int (*eval_batch_add)(struct store *st, const struct store_eval_batch *b,
			      const struct store_eval_item *items, size_t n,
			      struct wr_error **err);
	int (*eval_batch_get)(struct store *st, const char *id,
			      struct store_eval_batch *out,
			      struct wr_error **err);
	/* Newest first, at most STORE_LIST_MAX. */
	int (*eval_batch_list)(struct store *st, struct store_eval_batch **out,
			       size_t *n_out, struct wr_error **err);
	/* The items of batch_id (by pos), or, batch_id NULL, of run_id (by
	 * batch, then pos). */
	int (*eval_item_list)(struct store *st, const char *batch_id,
			      const char *run_id, struct store_eval_item **out,
			      size_t *n_out, struct wr_error **err);
	int (*eval_item_get)(struct store *st, const char *batch_id,
			     const char *item, struct store_eval_item *out,
			     struct wr_error **err);
	/* Records that the item was shown at now_ms, unless it was before
	 * (the first time stays). -ENOENT for an unknown item. */
	int (*eval_item_show)(struct store *st, const char *batch_id,
			      const char *item, int64_t now_ms,
			      struct wr_error **err);
	/* The verdict, once: -EALREADY when the item has one, -ENOENT for an
	 * unknown item, -EINVAL for a verdict not merge|changes|reject. */
	int (*eval_item_decide)(struct store *st, const char *batch_id,
				const char *item, const char *verdict,
				const char *reviewer, int64_t review_ms,
				int64_t now_ms, struct wr_error **err);
};

struct store {
	const struct store_ops *ops;
};

/* Opens (creating if needed) the SQLite database at path, WAL mode, and
 * applies pending migrations. */
struct store *store_open_sqlite(const char *path, struct wr_error **err);
/* Opens the PostgreSQL database a libpq connection URI names
 * ("postgres://USER@HOST:PORT/DB?sslmode=require", "postgresql:///DB?
 * host=/run/postgresql"), checks it (UTF8, version 10 or newer) and
 * applies pending migrations under an advisory lock. Errors name the URL
 * without its password. */
struct store *store_open_pg(const char *url, struct wr_error **err);
/* Opens the store url names: "postgres://..." or "postgresql://..."
 * (store_open_pg), "sqlite:PATH" or a plain PATH (store_open_sqlite). Any
 * other "SCHEME://" is refused (-EINVAL, bad input). */
struct store *store_open(const char *url, struct wr_error **err);
/* Is url one of PostgreSQL's (postgres:// or postgresql://)? */
bool store_url_is_pg(const char *url);
/* url as it may be shown: its password (after "user:" or as a password=
 * parameter) replaced by "***". NULL when out of memory. Caller frees. */
char *store_url_redact(const char *url);
/* The schema version the database is at after open (for tests/ops). */
int store_schema_version(struct store *st);
/* "sqlite", "postgres". */
const char *store_backend_name(const struct store *st);

static inline void store_close(struct store *st)
{
	if (st)
		st->ops->close(st);
}

/* A fresh random id: prefix + 16 lowercase hex digits ("s-1f3a..."). */
void store_new_id(const char *prefix, char out[STORE_ID_MAX]);
int64_t store_now_ms(void);

void store_repo_clear(struct store_repo *r);
void store_snapshot_clear(struct store_snapshot *s);
void store_session_clear(struct store_session *s);
void store_event_clear(struct store_event *e);
void store_message_clear(struct store_message *m);
void store_artifact_clear(struct store_artifact *a);
void store_token_clear(struct store_token *t);
void store_worker_clear(struct store_worker *w);
/* Is name a valid token name (STORE_TOKEN_NAME_MAX)? */
bool store_token_name_valid(const char *name);
/* Free an array returned by a *_list call (clears every element). */
void store_repos_free(struct store_repo *v, size_t n);
void store_strv_free(char **v, size_t n);
void store_snapshots_free(struct store_snapshot *v, size_t n);
void store_sessions_free(struct store_session *v, size_t n);
void store_events_free(struct store_event *v, size_t n);
void store_messages_free(struct store_message *v, size_t n);
void store_artifacts_free(struct store_artifact *v, size_t n);
void store_tokens_free(struct store_token *v, size_t n);
void store_workers_free(struct store_worker *v, size_t n);
void store_eval_run_clear(struct store_eval_run *r);
void store_eval_attempt_clear(struct store_eval_attempt *a);
void store_eval_batch_clear(struct store_eval_batch *b);
void store_eval_item_clear(struct store_eval_item *i);
void store_eval_runs_free(struct store_eval_run *v, size_t n);
void store_eval_attempts_free(struct store_eval_attempt *v, size_t n);
void store_eval_batches_free(struct store_eval_batch *v, size_t n);
void store_eval_items_free(struct store_eval_item *v, size_t n);
/* Is verdict one of "merge", "changes", "reject"? */
bool store_eval_verdict_ok(const char *verdict);
void store_audit_record_clear(struct store_audit_record *r);
void store_audit_records_free(struct store_audit_record *v, size_t n);
/* Is name a secret's name as the store takes it? */
bool store_secret_name_ok(const char *name);
void store_secret_clear(struct store_secret *s);
void store_secrets_free(struct store_secret *v, size_t n);
/* Claims hold nothing of their own: free(v) would do. */
void store_claims_free(struct store_claim *v, size_t n);

#endif

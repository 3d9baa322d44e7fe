/* sqlite_internal.h - the SQLite store backend's shared parts.
 *
 * sqlite.c owns the connections (one writer, a pool of readers), the
 * prepared-statement cache, transactions, error mapping and the schema
 * migrations; sqlite_schema.c holds every SQL text (the schema and the
 * statements, in one place for the PostgreSQL port); sqlite_catalog.c
 * implements tokens, repositories and snapshots; sqlite_session.c sessions,
 * events, messages and artifacts; sqlite_slack.c Slack's outbox
 * (notify/outbox.h: a second interface, over the same connections). Nothing
 * here leaves the backend. */
#ifndef WR_STORE_SQLITE_INTERNAL_H
#define WR_STORE_SQLITE_INTERNAL_H

#include "store/backend.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>

/* Every statement the backend runs, prepared once per connection. */
enum sq_stmt {
	SQ_BEGIN,
	SQ_BEGIN_IMMEDIATE,
	SQ_COMMIT,
	SQ_ROLLBACK,
	SQ_TOKEN_ADD,
	SQ_TOKEN_LOOKUP,
	SQ_TOKEN_COUNT,
	SQ_TOKEN_LIST,
	SQ_TOKEN_REVOKE,
	SQ_TOKEN_TOUCH,
	SQ_REPO_ADD,
	SQ_REPO_GET,
	SQ_REPO_LIST,
	SQ_REPO_SET_REFRESHED,
	SQ_REPO_UPDATE,
	SQ_REPO_REMOVE,
	SQ_REPO_ACTIVE,
	SQ_BUILD_ENQUEUE,
	SQ_BUILD_DEQUEUE,
	SQ_BUILD_UNQUEUE,
	SQ_BUILD_QUEUE_LIST,
	SQ_BUILD_CLAIM,
	SQ_BUILD_CLAIM_HOLDER,
	SQ_BUILD_RELEASE,
	SQ_BUILD_CLAIM_RENEW,
	SQ_BUILD_CLAIM_EXPIRE,
	SQ_EVAL_RUN_PUT,
	SQ_EVAL_RUN_GET,
	SQ_EVAL_RUN_LIST,
	SQ_EVAL_ATTEMPT_PUT,
	SQ_EVAL_ATTEMPT_LIST,
	SQ_EVAL_BATCH_ADD,
	SQ_EVAL_ITEM_ADD,
	SQ_EVAL_BATCH_GET,
	SQ_EVAL_BATCH_LIST,
	SQ_EVAL_ITEMS_BATCH,
	SQ_EVAL_ITEMS_RUN,
	SQ_EVAL_ITEM_GET,
	SQ_EVAL_ITEM_SHOW,
	SQ_EVAL_ITEM_DECIDE,
	SQ_SNAPSHOT_ADD,
	SQ_SNAPSHOT_LATEST,
	SQ_SNAPSHOT_LIST_REPO,
	SQ_SNAPSHOT_LIST_ALL,
	SQ_QUEUE_SEQ_NEXT,
	SQ_SESSION_INSERT,
	SQ_SESSION_GET,
	SQ_SESSION_STATE,
	SQ_SESSION_EXISTS,
	SQ_SESSION_CREATED,
	SQ_SESSION_LIST_STATE,
	SQ_SESSION_COUNT,
	SQ_SESSION_APPLY,
	SQ_EVENT_NEXT_SEQ,
	SQ_EVENT_INSERT,
	SQ_EVENT_LIST,
	SQ_AUDIT_HEAD,
	SQ_AUDIT_INSERT,
	SQ_AUDIT_LIST,
	SQ_MESSAGE_INSERT,
	SQ_MESSAGE_PENDING,
	SQ_MESSAGE_CONSUME,
	SQ_MESSAGE_EXISTS,
	SQ_ARTIFACT_ADD,
	SQ_ARTIFACT_LIST,
	SQ_WORKER_REGISTER,
	SQ_WORKER_STOP,
	SQ_WORKER_EXPIRE,
	SQ_WORKER_LIST,
	SQ_WORKER_GET,
	SQ_WORKER_HEARTBEAT,
	SQ_CLAIM_QUEUED,
	SQ_CLAIM_ONE,
	SQ_LEASE_TAKE,
	SQ_LEASE_RENEW,
	SQ_LEASE_HELD,
	SQ_LEASE_EXPIRED,
	SQ_LEASE_END,
	SQ_SLACK_POST_INSERT,
	SQ_SLACK_POST_DUE,
	SQ_SLACK_POST_UPDATE,
	SQ_SLACK_POST_LIST,
	SQ_SLACK_EVENT_PRUNE,
	SQ_SLACK_EVENT_INSERT,
	SQ_SLACK_EVENT_DELETE,
	SQ_SECRET_PUT,
	SQ_SECRET_DELETE,
	SQ_SECRET_LIST,
	/* session_list: one variant per combination of filters, the
	 * SQ_LIST_* bits added to SQ_SESSION_LIST */
	SQ_SESSION_LIST,
	SQ_STMT_MAX = SQ_SESSION_LIST + 16
};

#define SQ_LIST_STATE 1u
#define SQ_LIST_USER 2u
#define SQ_LIST_REPO 4u
#define SQ_LIST_BEFORE 8u

/* The SQL of statement id (session_list variants are built into buf). */
const char *sq_stmt_sql(enum sq_stmt id, char *buf, size_t len);

struct sq_migration {
	int version;
	const char *sql;
};
extern const struct sq_migration sq_migrations[];
extern const size_t sq_n_migrations;

/* One connection and its statements; lock held while it is in use (the
 * connections are opened SQLITE_OPEN_NOMUTEX). */
struct sq_conn {
	pthread_mutex_t lock;
	bool lock_init;
	sqlite3 *db;
	sqlite3_stmt *stmts[SQ_STMT_MAX];
};

#define SQ_READERS 4

struct sq_store {
	struct store base;
	char *path;
	int schema_version;
	struct sq_conn writer;
	struct sq_conn readers[SQ_READERS];
	size_t n_readers; /* 0 for ":memory:": reads use the writer */
	atomic_uint next_reader;
	/* session records written (created, moved, updated) through this
	 * store, counted after each commit: sq_session_writes */
	atomic_uint_fast64_t session_writes;
};

static inline struct sq_store *sq_of(struct store *st)
{
	return (struct sq_store *)st;
}
/* st as the SQLite backend's, or NULL if it is another backend's (or
 * NULL): for what reaches it by another interface (Slack's outbox). */
struct sq_store *sq_store_of(struct store *st);

/* A connection, locked: the writer, or a reader from the pool. */
struct sq_conn *sq_writer(struct sq_store *s);
struct sq_conn *sq_reader(struct sq_store *s);
void sq_release(struct sq_conn *c);
static inline void sq_releasep(struct sq_conn **c)
{
	if (*c)
		sq_release(*c);
}

/* The cached statement id of c, reset and unbound (see sq_resetp). */
int sq_prepare(struct sq_conn *c, enum sq_stmt id, sqlite3_stmt **out,
	       struct wr_error **err);
/* Cleanup for a statement from sq_prepare: resets it for the next use. */
static inline void sq_resetp(sqlite3_stmt **q)
{
	if (*q) {
		sqlite3_reset(*q);
		sqlite3_clear_bindings(*q);
	}
}

/* -errno for an SQLite result code (constraint: -EEXIST, foreign key:
 * -ENOENT, out of memory: -ENOMEM, anything else -EIO). */
int sq_errno(int rc);
/* Sets *err to "what: <sqlite3_errmsg>" with sq_errno(rc). */
int sq_error(struct sq_conn *c, int rc, struct wr_error **err, const char *fmt,
	     ...) __attribute__((format(printf, 4, 5)));

/* Transactions on the writer (immediate: takes the write lock at once) or
 * a reader. A started transaction is rolled back at scope exit unless
 * committed:
 *     _cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
 *     r = sq_begin(c, true, &tx, err); ... r = sq_commit(&tx, err); */
int sq_begin(struct sq_conn *c, bool immediate, struct sq_conn **tx,
	     struct wr_error **err);
int sq_commit(struct sq_conn **tx, struct wr_error **err);
void sq_rollbackp(struct sq_conn **tx);

/* Bind helpers: NULL text binds SQL NULL; the text must outlive the step
 * (SQLITE_STATIC). */
static inline int sq_bind_text(sqlite3_stmt *q, int i, const char *text)
{
	return text ? sqlite3_bind_text(q, i, text, -1, SQLITE_STATIC)
		    : sqlite3_bind_null(q, i);
}

/* A copy of a column's text (NULL for SQL NULL); -ENOMEM. */
int sq_column_strdup(sqlite3_stmt *q, int col, char **out);

/* The current row of q, for backend.h's readers. */
struct store_row sq_row(sqlite3_stmt *q);
/* Steps q once: its row read into out as a record of type (1), no row
 * (0), or -errno with *err. */
int sq_get_one(struct sq_conn *c, sqlite3_stmt *q,
	       const struct store_record_type *type, void *out,
	       const char *what, struct wr_error **err);
/* Steps q to the end, one record of type per row, into a new array (*out
 * NULL when there are no rows). what names the call for errors. */
int sq_collect(struct sq_conn *c, sqlite3_stmt *q,
	       const struct store_record_type *type, void **out, size_t *n_out,
	       const char *what, struct wr_error **err);

/* The ops (sqlite_catalog.c, sqlite_session.c). */
int sq_token_add(struct store *st, const char *hash_hex,
		 const struct store_token *t, struct wr_error **err);
int sq_token_lookup(struct store *st, const char *hash_hex, int64_t now_ms,
		    struct store_token *out, struct wr_error **err);
int sq_token_count(struct store *st, struct wr_error **err);
int sq_token_list(struct store *st, struct store_token **out, size_t *n_out,
		  struct wr_error **err);
int sq_token_revoke(struct store *st, const char *name, int64_t now_ms,
		    int64_t *revoked_ms_out, struct wr_error **err);
int sq_token_touch(struct store *st, const char *hash_hex, int64_t now_ms,
		   struct wr_error **err);
int sq_repo_add(struct store *st, const struct store_repo *r,
		struct wr_error **err);
int sq_repo_get(struct store *st, const char *id_or_name,
		struct store_repo *out, struct wr_error **err);
int sq_repo_list(struct store *st, struct store_repo **out, size_t *n_out,
		 struct wr_error **err);
int sq_repo_update(struct store *st, const struct store_repo *r,
		   struct wr_error **err);
int sq_repo_remove(struct store *st, const char *id, int64_t now_ms,
		   struct wr_error **err);
/* sqlite_secrets.c */
int sq_secret_put(struct store *st, const struct store_secret *s,
		  struct wr_error **err);
int sq_secret_delete(struct store *st, const char *name, int64_t now_ms,
		     bool *deleted, struct wr_error **err);
int sq_secret_list(struct store *st, struct store_secret **out, size_t *n,
		   struct wr_error **err);

/* sqlite_builds.c */
int sq_build_enqueue(struct store *st, const char *repo_id, int64_t now_ms,
		     bool *added, struct wr_error **err);
int sq_build_dequeue(struct store *st, char **repo_id, struct wr_error **err);
int sq_build_unqueue(struct store *st, const char *repo_id, bool *removed,
		     struct wr_error **err);
int sq_build_queue_list(struct store *st, char ***ids, size_t *n,
			struct wr_error **err);
int sq_build_claim(struct store *st, const char *repo_id, const char *worker,
		   int64_t now_ms, int64_t lease_ms, bool *got, char **holder,
		   struct wr_error **err);
int sq_build_release(struct store *st, const char *repo_id, const char *worker,
		     struct wr_error **err);
int sq_repo_set_refreshed(struct store *st, const char *id, int64_t when_ms,
			  struct wr_error **err);
int sq_snapshot_add(struct store *st, const struct store_snapshot *s,
		    struct wr_error **err);
int sq_snapshot_latest(struct store *st, const char *repo_id,
		       struct store_snapshot *out, struct wr_error **err);
int sq_snapshot_list(struct store *st, const char *repo_id,
		     struct store_snapshot **out, size_t *n_out,
		     struct wr_error **err);

int sq_session_create(struct store *st, const struct store_session *s,
		      struct wr_error **err);
int sq_session_get(struct store *st, const char *id, struct store_session *out,
		   struct wr_error **err);
int sq_session_list(struct store *st, const struct store_session_filter *f,
		    struct store_session **out, size_t *n_out,
		    struct wr_error **err);
int sq_session_list_state(struct store *st, enum session_state state,
			  struct store_session **out, size_t *n_out,
			  struct wr_error **err);
uint64_t sq_session_writes(struct store *st);
int sq_session_count(struct store *st, int64_t *counts, struct wr_error **err);
int64_t sq_session_transition(struct store *st, const char *id, int from,
			      enum session_state to,
			      const struct store_session_update *upd,
			      const char *extra_json, struct wr_error **err);
int sq_session_update(struct store *st, const char *id,
		      const struct store_session_update *upd,
		      struct wr_error **err);
int64_t sq_event_append(struct store *st, const char *session_id,
			enum event_kind kind, const char *data_json,
			struct wr_error **err);
int sq_event_list(struct store *st, const char *session_id, int64_t after_seq,
		  int limit, struct store_event **out, size_t *n_out,
		  struct wr_error **err);
int64_t sq_message_add(struct store *st, const char *session_id,
		       const char *user, const char *text,
		       struct wr_error **err);
int sq_message_pending(struct store *st, const char *session_id,
		       struct store_message **out, size_t *n_out,
		       struct wr_error **err);
int sq_message_consume(struct store *st, int64_t message_id, int turn,
		       struct wr_error **err);
int sq_artifact_add(struct store *st, const char *session_id,
		    const struct store_artifact *a, struct wr_error **err);
int sq_artifact_list(struct store *st, const char *session_id,
		     struct store_artifact **out, size_t *n_out,
		     struct wr_error **err);

/* sqlite_eval.c */
int sq_eval_run_put(struct store *st, const struct store_eval_run *r,
		    struct wr_error **err);
int sq_eval_run_get(struct store *st, const char *id,
		    struct store_eval_run *out, struct wr_error **err);
int sq_eval_run_list(struct store *st, struct store_eval_run **out,
		     size_t *n_out, struct wr_error **err);
int sq_eval_attempt_put(struct store *st, const char *run_id,
			const struct store_eval_attempt *a,
			struct wr_error **err);
int sq_eval_attempt_list(struct store *st, const char *run_id,
			 struct store_eval_attempt **out, size_t *n_out,
			 struct wr_error **err);
int sq_eval_batch_add(struct store *st, const struct store_eval_batch *b,
		      const struct store_eval_item *items, size_t n,
		      struct wr_error **err);
int sq_eval_batch_get(struct store *st, const char *id,
		      struct store_eval_batch *out, struct wr_error **err);
int sq_eval_batch_list(struct store *st, struct store_eval_batch **out,
		       size_t *n_out, struct wr_error **err);
int sq_eval_item_list(struct store *st, const char *batch_id,
		      const char *run_id, struct store_eval_item **out,
		      size_t *n_out, struct wr_error **err);
int sq_eval_item_get(struct store *st, const char *batch_id, const char *item,
		     struct store_eval_item *out, struct wr_error **err);
int sq_eval_item_show(struct store *st, const char *batch_id,
		      const char *item, int64_t now_ms, struct wr_error **err);
int sq_eval_item_decide(struct store *st, const char *batch_id,
			const char *item, const char *verdict,
			const char *reviewer, int64_t review_ms,
			int64_t now_ms, struct wr_error **err);

/* sqlite_lease.c (event_append_fenced: sqlite_session.c) */
int64_t sq_audit_append(struct store *st, const char *session_id, int64_t epoch,
			store_audit_build_fn build, void *ctx,
			struct wr_error **err);
int sq_audit_list(struct store *st, const char *session_id, int64_t after_seq,
		  int limit, struct store_audit_record **out, size_t *n_out,
		  struct wr_error **err);
int sq_audit_import(struct store *st, const char *session_id,
		    const struct store_audit_record *v, size_t n,
		    struct wr_error **err);
int64_t sq_event_append_fenced(struct store *st, const char *session_id,
			       int64_t epoch, enum event_kind kind,
			       const char *data_json, struct wr_error **err);
int sq_worker_register(struct store *st, const struct store_worker *w,
		       struct wr_error **err);
int sq_worker_stop(struct store *st, const char *id, int64_t now_ms,
		   struct wr_error **err);
int sq_worker_list(struct store *st, struct store_worker **out, size_t *n_out,
		   struct wr_error **err);
int sq_session_claim(struct store *st, const char *worker_id,
		     const char *session_id, int64_t now_ms, int64_t lease_ms,
		     int limit, struct store_claim **out, size_t *n_out,
		     struct wr_error **err);
int sq_lease_renew(struct store *st, const char *worker_id, int64_t now_ms,
		   int64_t lease_ms, struct store_claim **held, size_t *n_held,
		   struct wr_error **err);
int sq_lease_reap(struct store *st, int64_t now_ms, const char *reason,
		  struct store_claim **out, size_t *n_out,
		  struct wr_error **err);

/* What sqlite_session.c lends sqlite_lease.c, inside the caller's write
 * transaction: an event (its seq), a transition with its event (the
 * event's seq; data from store_transition_data), and the count of session
 * writes bumped after a commit. */
int64_t sq_append_event(struct sq_conn *c, const char *sid,
			enum event_kind kind, const char *data, int64_t now,
			struct wr_error **err);
int64_t sq_transition_in(struct sq_conn *c, const char *id, int from,
			 enum session_state to,
			 const struct store_session_update *upd, json_t *data,
			 int64_t now, struct wr_error **err);
/* Ends session id's lease (worker and expiry cleared), its epoch advanced
 * if advance; the epoch after, or -errno. */
int64_t sq_lease_end(struct sq_conn *c, const char *id, bool advance,
		     struct wr_error **err);
void sq_written(struct store *st);

#endif

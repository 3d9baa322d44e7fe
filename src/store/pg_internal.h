/* pg_internal.h - the PostgreSQL store backend's shared parts.
 *
 * pg.c owns the connections (a small pool), queries, transactions, error
 * mapping and the schema migrations; pg_schema.c holds every SQL text (the
 * migrations and the statements); pg_catalog.c implements tokens,
 * repositories and snapshots; pg_session.c sessions, events, messages and
 * artifacts; pg_slack.c Slack's outbox (notify/outbox.h: a second
 * interface, over the same connections). What both backends share (checks,
 * rows into records, event data) is store.c's (backend.h). Nothing here
 * leaves the backend. */
#ifndef WR_STORE_PG_INTERNAL_H
#define WR_STORE_PG_INTERNAL_H

#include "store/backend.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>

/* Every statement the backend runs with parameters (PQexecParams). */
enum pg_stmt {
	PG_BEGIN,
	PG_COMMIT,
	PG_ROLLBACK,
	PG_MIGRATION_LOCK,
	PG_MIGRATION_TABLE,
	PG_MIGRATION_VERSION,
	PG_MIGRATION_RECORD,
	PG_TOKEN_ADD,
	PG_TOKEN_LOOKUP,
	PG_TOKEN_COUNT,
	PG_TOKEN_LIST,
	PG_TOKEN_REVOKE,
	PG_TOKEN_TOUCH,
	PG_REPO_ADD,
	PG_REPO_GET,
	PG_REPO_LIST,
	PG_REPO_SET_REFRESHED,
	PG_BUILD_ENQUEUE,
	PG_BUILD_DEQUEUE,
	PG_BUILD_UNQUEUE,
	PG_BUILD_QUEUE_LIST,
	PG_BUILD_CLAIM,
	PG_BUILD_CLAIM_HOLDER,
	PG_BUILD_RELEASE,
	PG_BUILD_CLAIM_RENEW,
	PG_BUILD_CLAIM_EXPIRE,
	PG_EVAL_RUN_PUT,
	PG_EVAL_RUN_GET,
	PG_EVAL_RUN_LIST,
	PG_EVAL_ATTEMPT_PUT,
	PG_EVAL_ATTEMPT_LIST,
	PG_EVAL_BATCH_ADD,
	PG_EVAL_ITEM_ADD,
	PG_EVAL_BATCH_GET,
	PG_EVAL_BATCH_LIST,
	PG_EVAL_ITEMS_BATCH,
	PG_EVAL_ITEMS_RUN,
	PG_EVAL_ITEM_GET,
	PG_EVAL_ITEM_SHOW,
	PG_EVAL_ITEM_DECIDE,
	PG_REPO_UPDATE,
	PG_REPO_REMOVE,
	PG_REPO_ACTIVE,
	PG_SNAPSHOT_ADD,
	PG_SNAPSHOT_LATEST,
	PG_SNAPSHOT_LIST_REPO,
	PG_SNAPSHOT_LIST_ALL,
	PG_QUEUE_SEQ_NEXT,
	PG_SESSION_INSERT,
	PG_SESSION_GET,
	PG_SESSION_LOCK,
	PG_SESSION_EXISTS,
	PG_SESSION_LIST,
	PG_SESSION_LIST_STATE,
	PG_SESSION_COUNT,
	PG_SESSION_APPLY,
	PG_EVENT_APPEND,
	PG_EVENT_LIST,
	PG_AUDIT_HEAD,
	PG_AUDIT_INSERT,
	PG_AUDIT_LIST,
	PG_MESSAGE_INSERT,
	PG_MESSAGE_PENDING,
	PG_MESSAGE_CONSUME,
	PG_MESSAGE_EXISTS,
	PG_ARTIFACT_ADD,
	PG_ARTIFACT_LIST,
	PG_WORKER_REGISTER,
	PG_WORKER_STOP,
	PG_WORKER_EXPIRE,
	PG_WORKER_LIST,
	PG_WORKER_GET,
	PG_WORKER_HEARTBEAT,
	PG_CLAIM_QUEUED,
	PG_CLAIM_ONE,
	PG_LEASE_TAKE,
	PG_LEASE_RENEW,
	PG_LEASE_EXPIRED,
	PG_LEASE_END,
	PG_SLACK_POST_INSERT,
	PG_SLACK_POST_DUE,
	PG_SLACK_POST_UPDATE,
	PG_SLACK_POST_LIST,
	PG_SLACK_EVENT_PRUNE,
	PG_SLACK_EVENT_INSERT,
	PG_SLACK_EVENT_DELETE,
	PG_SECRET_PUT,
	PG_SECRET_DELETE,
	PG_SECRET_LIST,
	PG_STMT_MAX
};

/* The SQL of statement id, NULL for an unknown id. */
const char *pg_stmt_sql(enum pg_stmt id);

struct pg_migration {
	int version;
	const char *sql; /* several statements, no parameters */
};
extern const struct pg_migration pg_migrations[];
extern const size_t pg_n_migrations;
/* The key of the advisory lock the migrations are applied under. */
#define PG_MIGRATION_LOCK_KEY 0x77617272656e31LL /* "warren1" */

/* Connections a store opens at most; each is used by one call at a time
 * (libpq's rule: a PGconn is not shared between threads at once). */
#define PG_POOL 8

struct pg_store;

struct pg_conn {
	PGconn *db; /* NULL until first used, or after it broke */
	struct pg_store *store;
	bool busy;
	bool doomed; /* the server said it ends the connection (pg.c) */
};

/* The NOTIFY channel of appended events (payload: "SESSION KIND"). */
#define PG_WATCH_CHANNEL "warren_events"

struct pg_watch; /* pg_watch.c */

struct pg_store {
	struct store base;
	char *conninfo; /* the URL as given, password included (libpq's) */
	char *shown;	/* the URL without its password, for messages */
	int schema_version;
	bool opened; /* past store_open_pg: errors say "store", not "open" */
	pthread_mutex_t mu; /* busy flags of conns */
	pthread_cond_t freed;
	bool sync_init;
	struct pg_conn conns[PG_POOL];
	/* session records written through this store, counted after each
	 * commit: pg_session_writes (this process's writes only) */
	atomic_uint_fast64_t session_writes;
	struct pg_watch *watch; /* NULL until pg_watch */
};

/* pg_secrets.c */
int pg_secret_put(struct store *st, const struct store_secret *s,
		  struct wr_error **err);
int pg_secret_delete(struct store *st, const char *name, int64_t now_ms,
		     bool *deleted, struct wr_error **err);
int pg_secret_list(struct store *st, struct store_secret **out, size_t *n,
		   struct wr_error **err);

/* pg_builds.c */
int pg_build_enqueue(struct store *st, const char *repo_id, int64_t now_ms,
		     bool *added, struct wr_error **err);
int pg_build_dequeue(struct store *st, char **repo_id, struct wr_error **err);
int pg_build_unqueue(struct store *st, const char *repo_id, bool *removed,
		     struct wr_error **err);
int pg_build_queue_list(struct store *st, char ***ids, size_t *n,
			struct wr_error **err);
int pg_build_claim(struct store *st, const char *repo_id, const char *worker,
		   int64_t now_ms, int64_t lease_ms, bool *got, char **holder,
		   struct wr_error **err);
int pg_build_release(struct store *st, const char *repo_id, const char *worker,
		     struct wr_error **err);

/* pg_eval.c */
int pg_eval_run_put(struct store *st, const struct store_eval_run *r,
		    struct wr_error **err);
int pg_eval_run_get(struct store *st, const char *id,
		    struct store_eval_run *out, struct wr_error **err);
int pg_eval_run_list(struct store *st, struct store_eval_run **out,
		     size_t *n_out, struct wr_error **err);
int pg_eval_attempt_put(struct store *st, const char *run_id,
			const struct store_eval_attempt *a,
			struct wr_error **err);
int pg_eval_attempt_list(struct store *st, const char *run_id,
			 struct store_eval_attempt **out, size_t *n_out,
			 struct wr_error **err);
int pg_eval_batch_add(struct store *st, const struct store_eval_batch *b,
		      const struct store_eval_item *items, size_t n,
		      struct wr_error **err);
int pg_eval_batch_get(struct store *st, const char *id,
		      struct store_eval_batch *out, struct wr_error **err);
int pg_eval_batch_list(struct store *st, struct store_eval_batch **out,
		       size_t *n_out, struct wr_error **err);
int pg_eval_item_list(struct store *st, const char *batch_id,
		      const char *run_id, struct store_eval_item **out,
		      size_t *n_out, struct wr_error **err);
int pg_eval_item_get(struct store *st, const char *batch_id, const char *item,
		     struct store_eval_item *out, struct wr_error **err);
int pg_eval_item_show(struct store *st, const char *batch_id,
		      const char *item, int64_t now_ms, struct wr_error **err);
int pg_eval_item_decide(struct store *st, const char *batch_id,
			const char *item, const char *verdict,
			const char *reviewer, int64_t review_ms,
			int64_t now_ms, struct wr_error **err);

/* pg_watch.c */
int pg_watch(struct store *st, store_changed_fn changed, void *ctx,
	     struct wr_error **err);
/* Stops the watch's thread and closes its connection (from pg_close). */
void pg_watch_stop(struct pg_store *s);
/* The connection parameters every connection of the store uses. */
PGconn *pg_connect(struct pg_store *s);

static inline struct pg_store *pg_of(struct store *st)
{
	return (struct pg_store *)st;
}
/* st as the PostgreSQL backend's, or NULL if it is another backend's. */
struct pg_store *pg_store_of(struct store *st);

/* A connection of the pool for one call, connected (or reconnected after
 * a failure); waits while every connection is busy. */
int pg_acquire(struct pg_store *s, struct pg_conn **out, struct wr_error **err);
void pg_release(struct pg_conn *c);
static inline void pg_releasep(struct pg_conn **c)
{
	if (*c)
		pg_release(*c);
}

/* The parameters of one statement, as text (NULL: SQL NULL). */
#define PG_PARAMS_MAX 16
struct pg_params {
	int n;
	const char *v[PG_PARAMS_MAX];
	char num[PG_PARAMS_MAX][24];
};
void pg_text(struct pg_params *p, const char *text);
void pg_int(struct pg_params *p, int64_t v);
/* v, or SQL NULL when !set ("keep the column"). */
void pg_opt_int(struct pg_params *p, bool set, int64_t v);

/* Runs statement id with p. *out gets the result whatever happened (NULL
 * if libpq had none), to free with PQclear (pg_clearp). Returns 0, or the
 * -errno of the failure (pg_errno) without setting an error: for callers
 * that turn some failures into their own message. */
int pg_run(struct pg_conn *c, enum pg_stmt id, const struct pg_params *p,
	   PGresult **out);
/* Sets *err to "what: <PostgreSQL's message>" for a failed result (or the
 * connection's message when res is NULL); returns r. */
int pg_fail(struct pg_conn *c, const PGresult *res, int r,
	    struct wr_error **err, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* pg_run, then pg_fail on failure. */
int pg_exec(struct pg_conn *c, enum pg_stmt id, const struct pg_params *p,
	    PGresult **out, struct wr_error **err, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* A call of one statement: a connection (*c, to release) and pg_exec. */
int pg_call(struct pg_store *s, struct pg_conn **c, enum pg_stmt id,
	    const struct pg_params *p, PGresult **out, struct wr_error **err,
	    const char *fmt, ...) __attribute__((format(printf, 7, 8)));
static inline void pg_clearp(PGresult **res)
{
	if (*res)
		PQclear(*res);
}

/* -errno for a failed result, by its SQLSTATE: unique violation -EEXIST,
 * foreign key violation -ENOENT, another constraint or a data exception
 * (text that is not UTF-8) -EINVAL, out of memory -ENOMEM, anything else
 * (a lost connection included) -EIO. */
int pg_errno(const PGresult *res);

/* Transactions, rolled back at scope exit unless committed:
 *     _cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;
 *     r = pg_begin(c, &tx, err); ... r = pg_commit(&tx, err); */
int pg_begin(struct pg_conn *c, struct pg_conn **tx, struct wr_error **err);
int pg_commit(struct pg_conn **tx, struct wr_error **err);
void pg_rollbackp(struct pg_conn **tx);

/* Rows (text format). */
struct store_row pg_row(PGresult *res, int index);
int64_t pg_get_int64(const PGresult *res, int row, int col);
/* Rows an INSERT, UPDATE or DELETE touched. */
int64_t pg_changes(const PGresult *res);
/* The first row of res read into out as a record of type (1), no row (0)
 * or -errno with *err. */
int pg_get_one(PGresult *res, const struct store_record_type *type, void *out,
	       const char *what, struct wr_error **err);
/* Every row of res, one record of type each, into a new array (*out NULL
 * when there are none). */
int pg_collect(PGresult *res, const struct store_record_type *type, void **out,
	       size_t *n_out, const char *what, struct wr_error **err);

/* pg_collect into a typed array: *out and *n_out written on success. */
#define PG_COLLECT(res, type, out, n_out, what, err)                         \
	({                                                                   \
		void *v_ = NULL;                                             \
		size_t n_ = 0;                                               \
		int r_ = pg_collect((res), (type), &v_, &n_, (what), (err)); \
		if (r_ == 0) {                                               \
			*(out) = v_;                                         \
			*(n_out) = n_;                                       \
		}                                                            \
		r_;                                                          \
	})

/* The ops (pg_catalog.c, pg_session.c). */
int pg_token_add(struct store *st, const char *hash_hex,
		 const struct store_token *t, struct wr_error **err);
int pg_token_lookup(struct store *st, const char *hash_hex, int64_t now_ms,
		    struct store_token *out, struct wr_error **err);
int pg_token_count(struct store *st, struct wr_error **err);
int pg_token_list(struct store *st, struct store_token **out, size_t *n_out,
		  struct wr_error **err);
int pg_token_revoke(struct store *st, const char *name, int64_t now_ms,
		    int64_t *revoked_ms_out, struct wr_error **err);
int pg_token_touch(struct store *st, const char *hash_hex, int64_t now_ms,
		   struct wr_error **err);
int pg_repo_add(struct store *st, const struct store_repo *r,
		struct wr_error **err);
int pg_repo_get(struct store *st, const char *id_or_name,
		struct store_repo *out, struct wr_error **err);
int pg_repo_list(struct store *st, struct store_repo **out, size_t *n_out,
		 struct wr_error **err);
int pg_repo_update(struct store *st, const struct store_repo *r,
		   struct wr_error **err);
int pg_repo_remove(struct store *st, const char *id, int64_t now_ms,
		   struct wr_error **err);
int pg_repo_set_refreshed(struct store *st, const char *id, int64_t when_ms,
			  struct wr_error **err);
int pg_snapshot_add(struct store *st, const struct store_snapshot *s,
		    struct wr_error **err);
int pg_snapshot_latest(struct store *st, const char *repo_id,
		       struct store_snapshot *out, struct wr_error **err);
int pg_snapshot_list(struct store *st, const char *repo_id,
		     struct store_snapshot **out, size_t *n_out,
		     struct wr_error **err);

int pg_session_create(struct store *st, const struct store_session *s,
		      struct wr_error **err);
int pg_session_get(struct store *st, const char *id, struct store_session *out,
		   struct wr_error **err);
int pg_session_list(struct store *st, const struct store_session_filter *f,
		    struct store_session **out, size_t *n_out,
		    struct wr_error **err);
int pg_session_list_state(struct store *st, enum session_state state,
			  struct store_session **out, size_t *n_out,
			  struct wr_error **err);
uint64_t pg_session_writes(struct store *st);
int pg_session_count(struct store *st, int64_t *counts, struct wr_error **err);
int64_t pg_session_transition(struct store *st, const char *id, int from,
			      enum session_state to,
			      const struct store_session_update *upd,
			      const char *extra_json, struct wr_error **err);
int pg_session_update(struct store *st, const char *id,
		      const struct store_session_update *upd,
		      struct wr_error **err);
int64_t pg_event_append(struct store *st, const char *session_id,
			enum event_kind kind, const char *data_json,
			struct wr_error **err);
int pg_event_list(struct store *st, const char *session_id, int64_t after_seq,
		  int limit, struct store_event **out, size_t *n_out,
		  struct wr_error **err);
int64_t pg_message_add(struct store *st, const char *session_id,
		       const char *user, const char *text,
		       struct wr_error **err);
int pg_message_pending(struct store *st, const char *session_id,
		       struct store_message **out, size_t *n_out,
		       struct wr_error **err);
int pg_message_consume(struct store *st, int64_t message_id, int turn,
		       struct wr_error **err);
int pg_artifact_add(struct store *st, const char *session_id,
		    const struct store_artifact *a, struct wr_error **err);
int pg_artifact_list(struct store *st, const char *session_id,
		     struct store_artifact **out, size_t *n_out,
		     struct wr_error **err);

int64_t pg_audit_append(struct store *st, const char *session_id, int64_t epoch,
			store_audit_build_fn build, void *ctx,
			struct wr_error **err);
int pg_audit_list(struct store *st, const char *session_id, int64_t after_seq,
		  int limit, struct store_audit_record **out, size_t *n_out,
		  struct wr_error **err);
int pg_audit_import(struct store *st, const char *session_id,
		    const struct store_audit_record *v, size_t n,
		    struct wr_error **err);

/* pg_lease.c (event_append_fenced: pg_session.c) */
int64_t pg_event_append_fenced(struct store *st, const char *session_id,
			       int64_t epoch, enum event_kind kind,
			       const char *data_json, struct wr_error **err);
int pg_worker_register(struct store *st, const struct store_worker *w,
		       struct wr_error **err);
int pg_worker_stop(struct store *st, const char *id, int64_t now_ms,
		   struct wr_error **err);
int pg_worker_list(struct store *st, struct store_worker **out, size_t *n_out,
		   struct wr_error **err);
int pg_session_claim(struct store *st, const char *worker_id,
		     const char *session_id, int64_t now_ms, int64_t lease_ms,
		     int limit, struct store_claim **out, size_t *n_out,
		     struct wr_error **err);
int pg_lease_renew(struct store *st, const char *worker_id, int64_t now_ms,
		   int64_t lease_ms, struct store_claim **held, size_t *n_held,
		   struct wr_error **err);
int pg_lease_reap(struct store *st, int64_t now_ms, const char *reason,
		  struct store_claim **out, size_t *n_out,
		  struct wr_error **err);

/* What pg_session.c lends pg_lease.c, inside the caller's transaction: a
 * transition with its event (the event's seq; data from
 * store_transition_data), a lease's end (the epoch after; advanced if
 * advance), and the count of session writes bumped after a commit. */
int64_t pg_transition_in(struct pg_conn *c, const char *id, int from,
			 enum session_state to,
			 const struct store_session_update *upd, json_t *data,
			 int64_t now, struct wr_error **err);
int64_t pg_lease_end(struct pg_conn *c, const char *id, bool advance,
		     struct wr_error **err);
void pg_written(struct store *st);

#endif

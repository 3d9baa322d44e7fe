/* sqlite.c - the SQLite store backend: connections, statements,
 * transactions, errors and migrations (the ops live in sqlite_catalog.c,
 * sqlite_session.c and sqlite_lease.c, Slack's outbox in sqlite_slack.c,
 * the SQL in sqlite_schema.c).
 *
 * Connections. SQLite allows one writer at a time per database anyway, so
 * the store has exactly one read-write connection, behind a mutex, and
 * every write call takes it for one transaction. Reads (the API's GET
 * /sessions/{id} at tens of thousands per second) go to a pool of
 * SQ_READERS read-only connections, each behind its own mutex: a reader is
 * picked round-robin with trylock, falling back to waiting on the one the
 * round-robin named. In WAL mode readers never block the writer or each
 * other, and a reader sees everything committed before its statement
 * began. Connections are opened SQLITE_OPEN_NOMUTEX (SQLite's multi-thread
 * mode): our mutex already serialises each connection, so SQLite's own
 * per-call locking would only cost time.
 *
 * Statements are prepared once per connection (SQLITE_PREPARE_PERSISTENT)
 * on first use and kept until close; after each use they are reset and
 * unbound (sq_resetp), which also ends a reader's implicit transaction so
 * that it does not pin the WAL.
 *
 * Settings: journal_mode=WAL (survives in the file), synchronous=NORMAL (a
 * commit is durable at the next checkpoint; a power cut can lose the last
 * transactions but never corrupts), foreign_keys=ON, busy_timeout 5 s (for
 * other processes, e.g. an operator's sqlite3 shell).
 *
 * Migrations (sqlite_schema.c) are applied at open, each pending one in
 * its own BEGIN IMMEDIATE transaction that also records its version in
 * schema_version, so two processes opening at once apply each exactly once.
 * A database whose version is newer than the newest migration this build
 * knows is refused (-ENOTSUP). */
#include "store/sqlite_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUSY_TIMEOUT_MS 5000
#define SQL_BUF_MAX 2048

/* ---- errors ------------------------------------------------------------- */

int sq_errno(int rc)
{
	switch (rc) {
	case SQLITE_CONSTRAINT_PRIMARYKEY:
	case SQLITE_CONSTRAINT_UNIQUE: return -EEXIST;
	case SQLITE_CONSTRAINT_FOREIGNKEY: return -ENOENT;
	case SQLITE_NOMEM: return -ENOMEM;
	default: break;
	}
	switch (rc & 0xff) {
	case SQLITE_CONSTRAINT: return -EINVAL;
	case SQLITE_NOMEM: return -ENOMEM;
	default: return -EIO;
	}
}

int sq_error(struct sq_conn *c, int rc, struct wr_error **err, const char *fmt,
	     ...)
{
	int r = sq_errno(rc);
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *what = wr_vasprintf(fmt, ap);
	va_end(ap);
	const char *msg =
	    c && c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc);
	wr_error_set(err, -r, "%s: %s", what ? what : "database", msg);
	return r;
}

/* ---- connections -------------------------------------------------------- */

struct sq_conn *sq_writer(struct sq_store *s)
{
	pthread_mutex_lock(&s->writer.lock);
	return &s->writer;
}

struct sq_conn *sq_reader(struct sq_store *s)
{
	if (!s->n_readers)
		return sq_writer(s);
	unsigned start =
	    atomic_fetch_add_explicit(&s->next_reader, 1, memory_order_relaxed);
	for (size_t i = 0; i < s->n_readers; i++) {
		struct sq_conn *c = &s->readers[(start + i) % s->n_readers];
		if (pthread_mutex_trylock(&c->lock) == 0)
			return c;
	}
	struct sq_conn *c = &s->readers[start % s->n_readers];
	pthread_mutex_lock(&c->lock);
	return c;
}

void sq_release(struct sq_conn *c)
{
	pthread_mutex_unlock(&c->lock);
}

int sq_prepare(struct sq_conn *c, enum sq_stmt id, sqlite3_stmt **out,
	       struct wr_error **err)
{
	if (!c->stmts[id]) {
		char buf[SQL_BUF_MAX];
		const char *sql = sq_stmt_sql(id, buf, sizeof(buf));
		if (!sql)
			return wr_error_set(err, EINVAL, "no statement %d",
					    (int)id);
		int rc = sqlite3_prepare_v3(c->db, sql, -1,
					    SQLITE_PREPARE_PERSISTENT,
					    &c->stmts[id], NULL);
		if (rc != SQLITE_OK) {
			sqlite3_finalize(c->stmts[id]);
			c->stmts[id] = NULL;
			return sq_error(c, rc, err, "prepare statement %d",
					(int)id);
		}
	}
	*out = c->stmts[id];
	return 0;
}

/* Runs a statement without parameters or rows (BEGIN, COMMIT...). */
static int run_simple(struct sq_conn *c, enum sq_stmt id, const char *what,
		      struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, id, &q, err);
	if (r < 0)
		return r;
	int rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "%s", what);
	return 0;
}

int sq_begin(struct sq_conn *c, bool immediate, struct sq_conn **tx,
	     struct wr_error **err)
{
	int r = run_simple(c, immediate ? SQ_BEGIN_IMMEDIATE : SQ_BEGIN,
			   "begin transaction", err);
	if (r < 0)
		return r;
	*tx = c;
	return 0;
}

int sq_commit(struct sq_conn **tx, struct wr_error **err)
{
	int r = run_simple(*tx, SQ_COMMIT, "commit", err);
	if (r < 0)
		return r; /* still open: the caller's cleanup rolls back */
	*tx = NULL;
	return 0;
}

void sq_rollbackp(struct sq_conn **tx)
{
	struct sq_conn *c = *tx;
	if (!c)
		return;
	*tx = NULL;
	/* SQLite rolls back by itself after some errors (SQLITE_FULL,
	 * SQLITE_NOMEM...); a second ROLLBACK would only fail */
	if (sqlite3_get_autocommit(c->db))
		return;
	sqlite3_stmt *q = NULL;
	if (sq_prepare(c, SQ_ROLLBACK, &q, NULL) == 0) {
		sqlite3_step(q);
		sqlite3_reset(q);
	} else {
		sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
	}
}

/* ---- columns, rows ----------------------------------------------------- */

int sq_column_strdup(sqlite3_stmt *q, int col, char **out)
{
	if (sqlite3_column_type(q, col) == SQLITE_NULL) {
		*out = NULL;
		return 0;
	}
	const unsigned char *text = sqlite3_column_text(q, col);
	if (!text)
		return -ENOMEM; /* SQLite could not convert it */
	size_t len = (size_t)sqlite3_column_bytes(q, col);
	char *copy = wr_malloc(len + 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, text, len);
	copy[len] = '\0';
	*out = copy;
	return 0;
}

static int row_text(const struct store_row *row, int col, const char **out)
{
	sqlite3_stmt *q = row->res;
	if (sqlite3_column_type(q, col) == SQLITE_NULL) {
		*out = NULL;
		return 0;
	}
	const unsigned char *text = sqlite3_column_text(q, col);
	if (!text)
		return -ENOMEM; /* SQLite could not convert it */
	*out = (const char *)text;
	return 0;
}

static int64_t row_int64(const struct store_row *row, int col)
{
	return sqlite3_column_int64(row->res, col);
}

struct store_row sq_row(sqlite3_stmt *q)
{
	return (struct store_row){
	    .text = row_text, .int64 = row_int64, .res = q};
}

int sq_get_one(struct sq_conn *c, sqlite3_stmt *q,
	       const struct store_record_type *type, void *out,
	       const char *what, struct wr_error **err)
{
	int rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "%s", what);
	struct store_row row = sq_row(q);
	int r = type->from_row(&row, out);
	if (r < 0)
		return wr_error_set(err, -r, "%s", what);
	return 1;
}

int sq_collect(struct sq_conn *c, sqlite3_stmt *q,
	       const struct store_record_type *type, void **out, size_t *n_out,
	       const char *what, struct wr_error **err)
{
	struct store_vec vec = {.type = type};
	struct store_row row = sq_row(q);
	int rc, r = 0;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		r = store_vec_add_row(&vec, &row);
		if (r < 0) {
			r = wr_error_set(err, -r, "%s", what);
			break;
		}
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = sq_error(c, rc, err, "%s", what);
	if (r < 0) {
		store_vec_free(&vec);
		return r;
	}
	store_vec_take(&vec, out, n_out);
	return 0;
}

/* ---- open, migrate, close ----------------------------------------------- */

static void conn_close(struct sq_conn *c)
{
	for (size_t i = 0; i < SQ_STMT_MAX; i++) {
		sqlite3_finalize(c->stmts[i]);
		c->stmts[i] = NULL;
	}
	if (c->db)
		sqlite3_close_v2(c->db);
	c->db = NULL;
	if (c->lock_init)
		pthread_mutex_destroy(&c->lock);
	c->lock_init = false;
}

static int open_error(struct sq_conn *c, int rc, const char *path,
		      struct wr_error **err)
{
	/* a file we cannot open says why in errno terms (ENOENT for a
	 * missing directory, EACCES...) */
	int sys = c->db ? sqlite3_system_errno(c->db) : 0;
	if ((rc & 0xff) == SQLITE_CANTOPEN && sys > 0)
		return wr_error_set(err, sys, "open store %s: %s", path,
				    c->db ? sqlite3_errmsg(c->db)
					  : sqlite3_errstr(rc));
	return sq_error(c, rc, err, "open store %s", path);
}

static int conn_open(struct sq_conn *c, const char *path, bool writer,
		     struct wr_error **err)
{
	if (pthread_mutex_init(&c->lock, NULL) != 0)
		return wr_error_set(err, ENOMEM, "open store %s", path);
	c->lock_init = true;
	int flags = SQLITE_OPEN_NOMUTEX |
		    (writer ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
			    : SQLITE_OPEN_READONLY);
	int rc = sqlite3_open_v2(path, &c->db, flags, NULL);
	if (rc != SQLITE_OK)
		return open_error(c, rc, path, err);
	sqlite3_extended_result_codes(c->db, 1);
	sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
	return 0;
}

/* The single integer a query returns. */
static int query_int(struct sq_conn *c, const char *sql, int64_t *out,
		     struct wr_error **err)
{
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(c->db, sql, -1, &q, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(q);
		if (rc == SQLITE_ROW) {
			*out = sqlite3_column_int64(q, 0);
			rc = SQLITE_OK;
		}
	}
	int r = rc == SQLITE_OK ? 0 : sq_error(c, rc, err, "%s", sql);
	sqlite3_finalize(q);
	return r;
}

static int exec_sql(struct sq_conn *c, const char *sql, const char *what,
		    struct wr_error **err)
{
	int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "%s", what);
	return 0;
}

static int writer_setup(struct sq_store *s, bool memory, struct wr_error **err)
{
	struct sq_conn *c = &s->writer;
	/* the first statement to read the file: a file that is not a
	 * database fails here ("file is not a database") */
	_cleanup_free_ char *mode = NULL;
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode = WAL", -1, &q,
				    NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		rc = SQLITE_OK;
		if (sq_column_strdup(q, 0, &mode) < 0)
			rc = SQLITE_NOMEM;
	}
	sqlite3_finalize(q);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "open store %s", s->path);
	if (!memory && (!mode || strcmp(mode, "wal") != 0))
		return wr_error_set(err, EIO,
				    "open store %s: cannot use WAL mode "
				    "(journal mode is %s)",
				    s->path, mode ? mode : "unknown");
	return exec_sql(c,
			"PRAGMA synchronous = NORMAL;"
			"PRAGMA foreign_keys = ON;",
			"open store: settings", err);
}

static int migrate(struct sq_store *s, struct wr_error **err)
{
	struct sq_conn *c = &s->writer;
	int latest = sq_migrations[sq_n_migrations - 1].version;
	int r = exec_sql(c,
			 "CREATE TABLE IF NOT EXISTS schema_version ("
			 "  version INTEGER PRIMARY KEY,"
			 "  applied_ms BIGINT NOT NULL)",
			 "create schema_version", err);
	if (r < 0)
		return r;
	for (;;) {
		_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
		r = sq_begin(c, true, &tx, err);
		if (r < 0)
			return r;
		int64_t cur = 0;
		r = query_int(c,
			      "SELECT COALESCE(MAX(version), 0) "
			      "FROM schema_version",
			      &cur, err);
		if (r < 0)
			return r;
		if (cur > latest)
			return wr_error_set(err, ENOTSUP,
					    "open store %s: schema version "
					    "%lld is newer than this build "
					    "knows (%d)",
					    s->path, (long long)cur, latest);
		const struct sq_migration *m = NULL;
		for (size_t i = 0; i < sq_n_migrations && !m; i++)
			if (sq_migrations[i].version > cur)
				m = &sq_migrations[i];
		if (!m) {
			s->schema_version = (int)cur;
			return sq_commit(&tx, err);
		}
		r = exec_sql(c, m->sql, "migration", err);
		if (r < 0)
			return wr_error_wrap(err, "open store %s: version %d",
					     s->path, m->version);
		char sql[128];
		snprintf(sql, sizeof(sql),
			 "INSERT INTO schema_version (version, applied_ms) "
			 "VALUES (%d, %lld)",
			 m->version, (long long)store_now_ms());
		r = exec_sql(c, sql, "record migration", err);
		if (r < 0)
			return r;
		r = sq_commit(&tx, err);
		if (r < 0)
			return r;
	}
}

static void sq_close(struct store *st)
{
	struct sq_store *s = sq_of(st);
	if (!s)
		return;
	for (size_t i = 0; i < SQ_READERS; i++)
		conn_close(&s->readers[i]);
	if (s->writer.db && s->schema_version > 0)
		sqlite3_exec(s->writer.db, "PRAGMA optimize", NULL, NULL, NULL);
	/* the writer last: closing the last connection checkpoints the WAL
	 * into the database and removes it */
	conn_close(&s->writer);
	free(s->path);
	free(s);
}

static void sq_closep(struct sq_store **s)
{
	if (*s)
		sq_close(&(*s)->base);
}

static int sq_schema_version(struct store *st)
{
	return sq_of(st)->schema_version;
}

static const struct store_ops sqlite_ops = {
    .backend = STORE_BACKEND_SQLITE,
    .close = sq_close,
    .schema_version = sq_schema_version,
    .token_add = sq_token_add,
    .token_lookup = sq_token_lookup,
    .token_count = sq_token_count,
    .token_list = sq_token_list,
    .token_revoke = sq_token_revoke,
    .token_touch = sq_token_touch,
    .repo_add = sq_repo_add,
    .repo_get = sq_repo_get,
    .repo_list = sq_repo_list,
    .repo_set_refreshed = sq_repo_set_refreshed,
    .secret_put = sq_secret_put,
    .secret_delete = sq_secret_delete,
    .secret_list = sq_secret_list,
    .build_enqueue = sq_build_enqueue,
    .build_dequeue = sq_build_dequeue,
    .build_unqueue = sq_build_unqueue,
    .build_queue_list = sq_build_queue_list,
    .build_claim = sq_build_claim,
    .build_release = sq_build_release,
    .eval_run_put = sq_eval_run_put,
    .eval_run_get = sq_eval_run_get,
    .eval_run_list = sq_eval_run_list,
    .eval_attempt_put = sq_eval_attempt_put,
    .eval_attempt_list = sq_eval_attempt_list,
    .eval_batch_add = sq_eval_batch_add,
    .eval_batch_get = sq_eval_batch_get,
    .eval_batch_list = sq_eval_batch_list,
    .eval_item_list = sq_eval_item_list,
    .eval_item_get = sq_eval_item_get,
    .eval_item_show = sq_eval_item_show,
    .eval_item_decide = sq_eval_item_decide,
    .repo_update = sq_repo_update,
    .repo_remove = sq_repo_remove,
    .snapshot_add = sq_snapshot_add,
    .snapshot_latest = sq_snapshot_latest,
    .snapshot_list = sq_snapshot_list,
    .session_create = sq_session_create,
    .session_get = sq_session_get,
    .session_list = sq_session_list,
    .session_list_state = sq_session_list_state,
    .session_writes = sq_session_writes,
    .session_count = sq_session_count,
    .session_transition = sq_session_transition,
    .session_update = sq_session_update,
    .event_append = sq_event_append,
    .event_list = sq_event_list,
    .message_add = sq_message_add,
    .message_pending = sq_message_pending,
    .message_consume = sq_message_consume,
    .artifact_add = sq_artifact_add,
    .artifact_list = sq_artifact_list,
    .event_append_fenced = sq_event_append_fenced,
    .audit_append = sq_audit_append,
    .audit_list = sq_audit_list,
    .audit_import = sq_audit_import,
    .worker_register = sq_worker_register,
    .worker_stop = sq_worker_stop,
    .worker_list = sq_worker_list,
    .session_claim = sq_session_claim,
    .lease_renew = sq_lease_renew,
    .lease_reap = sq_lease_reap,
};

struct sq_store *sq_store_of(struct store *st)
{
	return st && st->ops == &sqlite_ops ? sq_of(st) : NULL;
}

struct store *store_open_sqlite(const char *path, struct wr_error **err)
{
	if (!path || !*path) {
		wr_error_input(err, EINVAL, "open store: no database path");
		return NULL;
	}
	if (!sqlite3_threadsafe()) {
		wr_error_set(err, ENOTSUP,
			     "open store %s: SQLite was built without thread "
			     "support",
			     path);
		return NULL;
	}
	_cleanup_(sq_closep) struct sq_store *s = wr_calloc(1, sizeof(*s));
	if (!s) {
		wr_error_set(err, ENOMEM, "open store %s", path);
		return NULL;
	}
	s->base.ops = &sqlite_ops;
	atomic_init(&s->next_reader, 0);
	s->path = wr_strdup(path);
	if (!s->path) {
		wr_error_set(err, ENOMEM, "open store %s", path);
		return NULL;
	}
	/* a private in-memory database exists only in its one connection */
	bool memory = !strcmp(path, ":memory:");
	if (conn_open(&s->writer, path, true, err) < 0 ||
	    writer_setup(s, memory, err) < 0 || migrate(s, err) < 0)
		return NULL;
	s->n_readers = memory ? 0 : SQ_READERS;
	for (size_t i = 0; i < s->n_readers; i++)
		if (conn_open(&s->readers[i], path, false, err) < 0)
			return NULL;
	return &TAKE_PTR(s)->base;
}

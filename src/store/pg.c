/* pg.c - the PostgreSQL store backend: connections, queries,
 * transactions, errors and migrations (the ops live in pg_catalog.c,
 * pg_session.c and pg_lease.c, Slack's outbox in pg_slack.c, the SQL in
 * pg_schema.c).
 *
 * Connections. The store is called from many threads (the API's, the
 * runners', the scheduler's) and a PGconn may serve one of them at a time,
 * so a store holds a pool of at most PG_POOL connections, each lent to
 * one call (pg_acquire) and given back at its end (pg_release); a call
 * finding them all lent waits for one. They are opened when first needed
 * (the first one at open, for the migrations): a server that reads little
 * holds few. A connection that broke (the server restarted, the network
 * went) is opened again by the next call that takes it; the call that saw
 * it break fails with -EIO.
 *
 * Transactions. A call of one statement runs in its own implicit
 * transaction; a call of several runs them between BEGIN and COMMIT
 * (READ COMMITTED), on one connection. Where a call reads then writes a
 * session (a transition checks its state first) it locks the session's
 * row first (SELECT ... FOR UPDATE); every such transaction takes the
 * session's row before the queue counter's, so none waits on another in
 * a cycle. An event's seq is sessions.last_event_seq + 1, taken by the
 * UPDATE that also inserts the event (pg_schema.c, PG_EVENT_APPEND): the
 * row lock orders concurrent appends of one session, from any number of
 * connections or servers, and a rolled back transaction gives its seq
 * back, so seqs start at 1 and have no gaps.
 *
 * Parameters are always passed apart from the SQL (PQexecParams, as
 * text); the only texts run as they are (PQexec) are the migrations,
 * which are constants.
 *
 * Migrations (pg_schema.c) are applied at open, each pending one in its
 * own transaction that first takes a transaction-scoped advisory lock
 * (PG_MIGRATION_LOCK_KEY), then creates schema_version if needed, reads
 * the version, applies the next migration and records it: two servers
 * opening one database at once apply each exactly once, and a failed
 * migration leaves nothing behind. A database whose version is newer than
 * the newest migration this build knows is refused (-ENOTSUP).
 *
 * The database must be UTF8 (the store holds JSON and prompts as UTF-8
 * text), and the role must be able to create tables in its schema the
 * first time (PostgreSQL 15 lets only the database's owner create in
 * public: `createdb -O ROLE`). */
#include "store/pg_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Unless the URL says otherwise: a server that does not answer fails the
 * open (or the call) in this many seconds rather than in TCP's minutes. */
#define CONNECT_TIMEOUT "10"
#define SERVER_VERSION_MIN 100000 /* 10: identity columns */

/* ---- errors ------------------------------------------------------------- */

int pg_errno(const PGresult *res)
{
	const char *state =
	    res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	if (!state)
		return -EIO;
	if (!strcmp(state, "23505"))
		return -EEXIST;
	if (!strcmp(state, "23503"))
		return -ENOENT;
	if (!strncmp(state, "23", 2) || !strncmp(state, "22", 2))
		return -EINVAL;
	if (!strcmp(state, "53200"))
		return -ENOMEM;
	return -EIO;
}

/* PostgreSQL's message, without its "ERROR:  " and newline. */
static void server_message(struct pg_conn *c, const PGresult *res, char *buf,
			   size_t size)
{
	const char *msg =
	    res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	if (!msg && res && *PQresultErrorMessage(res))
		msg = PQresultErrorMessage(res);
	if (!msg && c && c->db)
		msg = PQerrorMessage(c->db);
	if (!msg || !*msg)
		msg = "no answer from the server";
	if (!strncmp(msg, "ERROR:  ", 8))
		msg += 8;
	/* one line: libpq's hints come on lines of their own, indented */
	size_t n = 0;
	for (const char *p = msg; *p && n + 3 < size; p++) {
		if (*p != '\n') {
			buf[n++] = *p == '\t' ? ' ' : *p;
			continue;
		}
		while (p[1] == '\t' || p[1] == ' ')
			p++;
		if (p[1]) {
			buf[n++] = ';';
			buf[n++] = ' ';
		}
	}
	buf[n] = '\0';
	while (n && buf[n - 1] == ' ')
		buf[--n] = '\0';
}

static int vfail(struct pg_conn *c, const PGresult *res, int r,
		 struct wr_error **err, const char *fmt, va_list ap)
{
	char msg[1024];
	server_message(c, res, msg, sizeof(msg));
	_cleanup_free_ char *what = wr_vasprintf(fmt, ap);
	wr_error_set(err, -r, "%s: %s", what ? what : "database", msg);
	return r;
}

int pg_fail(struct pg_conn *c, const PGresult *res, int r,
	    struct wr_error **err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(c, res, r, err, fmt, ap);
	va_end(ap);
	return r;
}

/* ---- parameters and queries --------------------------------------------- */

static const char **next_param(struct pg_params *p)
{
	/* the statements have at most PG_PARAMS_MAX parameters: a call
	 * passing more is a bug caught by the tests (the statement fails) */
	if (p->n >= PG_PARAMS_MAX)
		return NULL;
	return &p->v[p->n++];
}

void pg_text(struct pg_params *p, const char *text)
{
	const char **slot = next_param(p);
	if (slot)
		*slot = text;
}

void pg_int(struct pg_params *p, int64_t v)
{
	int i = p->n;
	const char **slot = next_param(p);
	if (!slot)
		return;
	snprintf(p->num[i], sizeof(p->num[i]), "%" PRId64, v);
	*slot = p->num[i];
}

void pg_opt_int(struct pg_params *p, bool set, int64_t v)
{
	if (set)
		pg_int(p, v);
	else
		pg_text(p, NULL);
}

int pg_run(struct pg_conn *c, enum pg_stmt id, const struct pg_params *p,
	   PGresult **out)
{
	static const struct pg_params none;
	if (!p)
		p = &none;
	const char *sql = pg_stmt_sql(id);
	*out = NULL;
	if (!sql)
		return -EINVAL;
	PGresult *res =
	    PQexecParams(c->db, sql, p->n, NULL, p->v, NULL, NULL, 0);
	*out = res;
	switch (res ? PQresultStatus(res) : PGRES_FATAL_ERROR) {
	case PGRES_COMMAND_OK:
	case PGRES_TUPLES_OK: return 0;
	default: return pg_errno(res);
	}
}

/* pg_run, and on failure the error, formatted only then. */
static int vexec(struct pg_conn *c, enum pg_stmt id, const struct pg_params *p,
		 PGresult **out, struct wr_error **err, const char *fmt,
		 va_list ap)
{
	int r = pg_run(c, id, p, out);
	if (r < 0)
		vfail(c, *out, r, err, fmt, ap);
	return r;
}

int pg_exec(struct pg_conn *c, enum pg_stmt id, const struct pg_params *p,
	    PGresult **out, struct wr_error **err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vexec(c, id, p, out, err, fmt, ap);
	va_end(ap);
	return r;
}

int pg_call(struct pg_store *s, struct pg_conn **c, enum pg_stmt id,
	    const struct pg_params *p, PGresult **out, struct wr_error **err,
	    const char *fmt, ...)
{
	int r = pg_acquire(s, c, err);
	if (r < 0)
		return r;
	va_list ap;
	va_start(ap, fmt);
	r = vexec(*c, id, p, out, err, fmt, ap);
	va_end(ap);
	return r;
}

/* Runs a statement without parameters or rows (BEGIN, COMMIT...). */
static int run_simple(struct pg_conn *c, enum pg_stmt id, const char *what,
		      struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	return pg_exec(c, id, NULL, &res, err, "%s", what);
}

int pg_begin(struct pg_conn *c, struct pg_conn **tx, struct wr_error **err)
{
	int r = run_simple(c, PG_BEGIN, "begin transaction", err);
	if (r < 0)
		return r;
	*tx = c;
	return 0;
}

int pg_commit(struct pg_conn **tx, struct wr_error **err)
{
	int r = run_simple(*tx, PG_COMMIT, "commit", err);
	if (r < 0)
		return r; /* the caller's cleanup rolls back what is left */
	*tx = NULL;
	return 0;
}

void pg_rollbackp(struct pg_conn **tx)
{
	struct pg_conn *c = *tx;
	if (!c)
		return;
	*tx = NULL;
	if (PQstatus(c->db) != CONNECTION_OK ||
	    PQtransactionStatus(c->db) == PQTRANS_IDLE)
		return;
	PGresult *res = NULL;
	pg_run(c, PG_ROLLBACK, NULL, &res);
	PQclear(res);
}

/* ---- rows --------------------------------------------------------------- */

static int row_text(const struct store_row *row, int col, const char **out)
{
	PGresult *res = row->res;
	*out = PQgetisnull(res, row->index, col)
		   ? NULL
		   : PQgetvalue(res, row->index, col);
	return 0;
}

int64_t pg_get_int64(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return 0;
	return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

static int64_t row_int64(const struct store_row *row, int col)
{
	return pg_get_int64(row->res, row->index, col);
}

struct store_row pg_row(PGresult *res, int index)
{
	return (struct store_row){
	    .text = row_text, .int64 = row_int64, .res = res, .index = index};
}

int64_t pg_changes(const PGresult *res)
{
	const char *n = PQcmdTuples((PGresult *)res);
	return n && *n ? strtoll(n, NULL, 10) : 0;
}

int pg_get_one(PGresult *res, const struct store_record_type *type, void *out,
	       const char *what, struct wr_error **err)
{
	if (PQntuples(res) < 1)
		return 0;
	struct store_row row = pg_row(res, 0);
	int r = type->from_row(&row, out);
	if (r < 0)
		return wr_error_set(err, -r, "%s", what);
	return 1;
}

int pg_collect(PGresult *res, const struct store_record_type *type, void **out,
	       size_t *n_out, const char *what, struct wr_error **err)
{
	struct store_vec vec = {.type = type};
	int n = PQntuples(res);
	for (int i = 0; i < n; i++) {
		struct store_row row = pg_row(res, i);
		int r = store_vec_add_row(&vec, &row);
		if (r < 0) {
			store_vec_free(&vec);
			return wr_error_set(err, -r, "%s", what);
		}
	}
	store_vec_take(&vec, out, n_out);
	return 0;
}

/* ---- connections -------------------------------------------------------- */

/* PostgreSQL's notices ("relation schema_version already exists,
 * skipping") are not the server log's business; but a FATAL one, which
 * libpq reports so when it comes on an idle connection, is the server
 * ending the connection (a restart, pg_terminate_backend). */
static void on_notice(void *arg, const PGresult *res)
{
	struct pg_conn *c = arg;
	const char *severity =
	    PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	if (severity &&
	    (!strcmp(severity, "FATAL") || !strcmp(severity, "PANIC")))
		c->doomed = true;
}

/* The connection's failure as an error naming the store (never with its
 * password: s->shown). */
static int connect_error(struct pg_store *s, PGconn *db, struct wr_error **err)
{
	char msg[1024];
	struct pg_conn tmp = {.db = db};
	server_message(&tmp, NULL, msg, sizeof(msg));
	return wr_error_set(err, EIO, "%s %s: %s",
			    s->opened ? "store" : "open store", s->shown, msg);
}

/* Is the server one the store can use? */
static int server_check(struct pg_store *s, PGconn *db, struct wr_error **err)
{
	if (PQserverVersion(db) < SERVER_VERSION_MIN)
		return wr_error_input(err, ENOTSUP,
				      "open store %s: PostgreSQL %d is too "
				      "old (10 or newer)",
				      s->shown, PQserverVersion(db) / 10000);
	const char *enc = PQparameterStatus(db, "server_encoding");
	if (!enc || strcmp(enc, "UTF8"))
		return wr_error_input(err, ENOTSUP,
				      "open store %s: the database's encoding "
				      "is %s, not UTF8 (createdb -E UTF8)",
				      s->shown, enc ? enc : "unknown");
	return 0;
}

#define PG_TCP_USER_TIMEOUT_MS "10000"

PGconn *pg_connect(struct pg_store *s)
{
	/* the URL's own settings win over those before it (its dbname is
	 * expanded in its place); the encoding is the store's. Over TCP, a
	 * link cut under a call fails it within about ten seconds (keepalives
	 * and tcp_user_timeout) instead of at the kernel's minutes: a worker
	 * cut off from its store must get its calls back */
	const char *const keys[] = {
	    "connect_timeout",	   "application_name", "keepalives",
	    "keepalives_idle",	   "keepalives_interval", "keepalives_count",
	    "tcp_user_timeout",	   "dbname",	       "client_encoding",
	    NULL};
	const char *const values[] = {CONNECT_TIMEOUT, "warren", "1", "5", "2",
				      "3", PG_TCP_USER_TIMEOUT_MS, s->conninfo,
				      "UTF8", NULL};
	return PQconnectdbParams(keys, values, 1);
}

static int conn_open(struct pg_store *s, struct pg_conn *c,
		     struct wr_error **err)
{
	PGconn *db = pg_connect(s);
	if (!db)
		return wr_error_set(err, ENOMEM, "store %s", s->shown);
	int r = 0;
	if (PQstatus(db) != CONNECTION_OK)
		r = connect_error(s, db, err);
	else
		r = server_check(s, db, err);
	if (r < 0) {
		PQfinish(db);
		return r;
	}
	PQsetNoticeReceiver(db, on_notice, c);
	c->doomed = false;
	c->db = db;
	return 0;
}

/* Is the idle connection still there? One the server closed while it
 * was idle has said so on its socket (a FATAL message, then the end of
 * the stream), and an idle connection has nothing else to read: read it.
 * A call then never gets a connection known to be dead. */
static bool conn_alive(struct pg_conn *c)
{
	for (int i = 0; i < 8 && !c->doomed && PQstatus(c->db) == CONNECTION_OK;
	     i++) {
		struct pollfd pfd = {.fd = PQsocket(c->db), .events = POLLIN};
		if (pfd.fd < 0 || poll(&pfd, 1, 0) <= 0)
			break;
		if (!PQconsumeInput(c->db))
			return false;
		PQisBusy(c->db); /* parses it: a notice, or the end */
	}
	return !c->doomed && PQstatus(c->db) == CONNECTION_OK;
}

/* The connection lent to a call, ready: opened if it is not yet (or any
 * more), reset if it broke. */
static int conn_ready(struct pg_store *s, struct pg_conn *c,
		      struct wr_error **err)
{
	if (c->db && !conn_alive(c)) {
		c->doomed = false;
		PQreset(c->db);
		if (PQstatus(c->db) == CONNECTION_OK)
			return 0;
		int r = connect_error(s, c->db, err);
		PQfinish(c->db);
		c->db = NULL;
		return r;
	}
	return c->db ? 0 : conn_open(s, c, err);
}

/* A connection nobody uses, an open one first; NULL if all are lent. */
static struct pg_conn *idle_conn(struct pg_store *s)
{
	struct pg_conn *closed = NULL;
	for (size_t i = 0; i < PG_POOL; i++) {
		struct pg_conn *c = &s->conns[i];
		if (c->busy)
			continue;
		if (c->db)
			return c;
		if (!closed)
			closed = c;
	}
	return closed;
}

int pg_acquire(struct pg_store *s, struct pg_conn **out, struct wr_error **err)
{
	pthread_mutex_lock(&s->mu);
	struct pg_conn *c;
	while (!(c = idle_conn(s)))
		pthread_cond_wait(&s->freed, &s->mu);
	c->busy = true;
	pthread_mutex_unlock(&s->mu);
	/* connecting takes time: not under the pool's lock */
	int r = conn_ready(s, c, err);
	if (r < 0) {
		pg_release(c);
		return r;
	}
	*out = c;
	return 0;
}

void pg_release(struct pg_conn *c)
{
	struct pg_store *s = c->store;
	/* a call always ends its transaction (pg_rollbackp); this only
	 * guards the next call against one that did not */
	if (c->db && PQstatus(c->db) == CONNECTION_OK &&
	    PQtransactionStatus(c->db) != PQTRANS_IDLE) {
		PGresult *res = NULL;
		pg_run(c, PG_ROLLBACK, NULL, &res);
		PQclear(res);
	}
	pthread_mutex_lock(&s->mu);
	c->busy = false;
	pthread_cond_signal(&s->freed);
	pthread_mutex_unlock(&s->mu);
}

/* ---- open, migrate, close ----------------------------------------------- */

/* One step of the migrations, in its own transaction: applies the next
 * pending migration (1), or finds none (0, *version set). */
static int migrate_step(struct pg_store *s, struct pg_conn *c, int *version,
			struct wr_error **err)
{
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;
	_cleanup_(pg_clearp) PGresult *lock = NULL;
	_cleanup_(pg_clearp) PGresult *table = NULL;
	_cleanup_(pg_clearp) PGresult *cur = NULL;
	_cleanup_(pg_clearp) PGresult *applied = NULL;
	_cleanup_(pg_clearp) PGresult *record = NULL;
	int latest = pg_migrations[pg_n_migrations - 1].version;

	int r = pg_begin(c, &tx, err);
	if (r < 0)
		return r;
	struct pg_params p = {0};
	pg_int(&p, PG_MIGRATION_LOCK_KEY);
	r = pg_exec(c, PG_MIGRATION_LOCK, &p, &lock, err, "open store %s",
		    s->shown);
	if (r == 0)
		r = pg_exec(c, PG_MIGRATION_TABLE, NULL, &table, err,
			    "open store %s: create schema_version", s->shown);
	if (r == 0)
		r = pg_exec(c, PG_MIGRATION_VERSION, NULL, &cur, err,
			    "open store %s: schema version", s->shown);
	if (r < 0)
		return r;
	int64_t have = pg_get_int64(cur, 0, 0);
	if (have > latest)
		return wr_error_set(err, ENOTSUP,
				    "open store %s: schema version %lld is "
				    "newer than this build knows (%d)",
				    s->shown, (long long)have, latest);
	const struct pg_migration *m = NULL;
	for (size_t i = 0; i < pg_n_migrations && !m; i++)
		if (pg_migrations[i].version > have)
			m = &pg_migrations[i];
	if (!m) {
		r = pg_commit(&tx, err);
		if (r == 0)
			*version = (int)have;
		return r;
	}
	/* a constant of pg_schema.c, several statements: PQexec */
	applied = PQexec(c->db, m->sql);
	if (!applied || PQresultStatus(applied) != PGRES_COMMAND_OK)
		return pg_fail(c, applied, -EIO, err,
			       "open store %s: migration %d", s->shown,
			       m->version);
	p = (struct pg_params){0};
	pg_int(&p, m->version);
	pg_int(&p, store_now_ms());
	r = pg_exec(c, PG_MIGRATION_RECORD, &p, &record, err,
		    "open store %s: record migration %d", s->shown, m->version);
	if (r == 0)
		r = pg_commit(&tx, err);
	return r < 0 ? r : 1;
}

static int migrate(struct pg_store *s, struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	int r = pg_acquire(s, &c, err);
	if (r < 0)
		return r;
	int version = 0;
	while ((r = migrate_step(s, c, &version, err)) > 0)
		;
	if (r == 0)
		s->schema_version = version;
	return r;
}

static void pg_close(struct store *st)
{
	struct pg_store *s = pg_of(st);
	if (!s)
		return;
	pg_watch_stop(s);
	for (size_t i = 0; i < PG_POOL; i++)
		if (s->conns[i].db)
			PQfinish(s->conns[i].db);
	if (s->sync_init) {
		pthread_cond_destroy(&s->freed);
		pthread_mutex_destroy(&s->mu);
	}
	if (s->conninfo)
		explicit_bzero(s->conninfo, strlen(s->conninfo));
	free(s->conninfo);
	free(s->shown);
	free(s);
}

static void pg_closep(struct pg_store **s)
{
	if (*s)
		pg_close(&(*s)->base);
}

static int pg_schema_version(struct store *st)
{
	return pg_of(st)->schema_version;
}

uint64_t pg_session_writes(struct store *st)
{
	return atomic_load(&pg_of(st)->session_writes);
}

static const struct store_ops pg_ops = {
    .backend = STORE_BACKEND_POSTGRES,
    .close = pg_close,
    .watch = pg_watch,
    .schema_version = pg_schema_version,
    .token_add = pg_token_add,
    .token_lookup = pg_token_lookup,
    .token_count = pg_token_count,
    .token_list = pg_token_list,
    .token_revoke = pg_token_revoke,
    .token_touch = pg_token_touch,
    .repo_add = pg_repo_add,
    .repo_get = pg_repo_get,
    .repo_list = pg_repo_list,
    .repo_set_refreshed = pg_repo_set_refreshed,
    .secret_put = pg_secret_put,
    .secret_delete = pg_secret_delete,
    .secret_list = pg_secret_list,
    .build_enqueue = pg_build_enqueue,
    .build_dequeue = pg_build_dequeue,
    .build_unqueue = pg_build_unqueue,
    .build_queue_list = pg_build_queue_list,
    .build_claim = pg_build_claim,
    .build_release = pg_build_release,
    .eval_run_put = pg_eval_run_put,
    .eval_run_get = pg_eval_run_get,
    .eval_run_list = pg_eval_run_list,
    .eval_attempt_put = pg_eval_attempt_put,
    .eval_attempt_list = pg_eval_attempt_list,
    .eval_batch_add = pg_eval_batch_add,
    .eval_batch_get = pg_eval_batch_get,
    .eval_batch_list = pg_eval_batch_list,
    .eval_item_list = pg_eval_item_list,
    .eval_item_get = pg_eval_item_get,
    .eval_item_show = pg_eval_item_show,
    .eval_item_decide = pg_eval_item_decide,
    .repo_update = pg_repo_update,
    .repo_remove = pg_repo_remove,
    .snapshot_add = pg_snapshot_add,
    .snapshot_latest = pg_snapshot_latest,
    .snapshot_list = pg_snapshot_list,
    .session_create = pg_session_create,
    .session_get = pg_session_get,
    .session_list = pg_session_list,
    .session_list_state = pg_session_list_state,
    .session_writes = pg_session_writes,
    .session_count = pg_session_count,
    .session_transition = pg_session_transition,
    .session_update = pg_session_update,
    .event_append = pg_event_append,
    .event_list = pg_event_list,
    .message_add = pg_message_add,
    .message_pending = pg_message_pending,
    .message_consume = pg_message_consume,
    .artifact_add = pg_artifact_add,
    .artifact_list = pg_artifact_list,
    .event_append_fenced = pg_event_append_fenced,
    .audit_append = pg_audit_append,
    .audit_list = pg_audit_list,
    .audit_import = pg_audit_import,
    .worker_register = pg_worker_register,
    .worker_stop = pg_worker_stop,
    .worker_list = pg_worker_list,
    .session_claim = pg_session_claim,
    .lease_renew = pg_lease_renew,
    .lease_reap = pg_lease_reap,
};

struct pg_store *pg_store_of(struct store *st)
{
	return st && st->ops == &pg_ops ? pg_of(st) : NULL;
}

/* A URL libpq can read; its own message when not, unless that message
 * would show the password (it quotes a bad percent-encoding). */
static int url_check(const char *url, const char *shown, struct wr_error **err)
{
	char *msg = NULL;
	PQconninfoOption *opts = PQconninfoParse(url, &msg);
	if (opts) {
		PQconninfoFree(opts);
		return 0;
	}
	if (!msg)
		return wr_error_set(err, ENOMEM, "open store %s", shown);
	_cleanup_free_ char *secret = store_url_password(url);
	size_t len = strlen(msg);
	while (len && msg[len - 1] == '\n')
		msg[--len] = '\0';
	int r = wr_error_input(err, EINVAL, "open store %s: %s", shown,
			       secret && *secret && strstr(msg, secret)
				   ? "not a valid connection URI"
				   : msg);
	if (secret)
		explicit_bzero(secret, strlen(secret));
	PQfreemem(msg);
	return r;
}

struct store *store_open_pg(const char *url, struct wr_error **err)
{
	if (!url || !*url) {
		wr_error_input(err, EINVAL, "open store: no URL");
		return NULL;
	}
	if (!PQisthreadsafe()) {
		wr_error_set(err, ENOTSUP,
			     "open store: libpq was built without thread "
			     "support");
		return NULL;
	}
	_cleanup_(pg_closep) struct pg_store *s = wr_calloc(1, sizeof(*s));
	if (!s) {
		wr_error_set(err, ENOMEM, "open store");
		return NULL;
	}
	s->base.ops = &pg_ops;
	atomic_init(&s->session_writes, 0);
	s->conninfo = wr_strdup(url);
	s->shown = store_url_redact(url);
	if (!s->conninfo || !s->shown) {
		wr_error_set(err, ENOMEM, "open store");
		return NULL;
	}
	if (pthread_mutex_init(&s->mu, NULL) != 0) {
		wr_error_set(err, ENOMEM, "open store %s", s->shown);
		return NULL;
	}
	if (pthread_cond_init(&s->freed, NULL) != 0) {
		pthread_mutex_destroy(&s->mu);
		wr_error_set(err, ENOMEM, "open store %s", s->shown);
		return NULL;
	}
	s->sync_init = true;
	for (size_t i = 0; i < PG_POOL; i++)
		s->conns[i].store = s;
	if (url_check(url, s->shown, err) < 0 || migrate(s, err) < 0)
		return NULL;
	s->opened = true;
	return &TAKE_PTR(s)->base;
}

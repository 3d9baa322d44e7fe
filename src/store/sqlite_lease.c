/* sqlite_lease.c - the SQLite backend's workers and leases (store.h,
 * "Leases").
 *
 * Every call is one BEGIN IMMEDIATE transaction on the writer connection:
 * SQLite's write lock serialises claims, renewals and reaps across the
 * store's threads and any other process on the file, so two claimers never
 * take one session, and what a call read (a lease still live, an epoch)
 * holds when it writes. A reap's transition is session_transition's own
 * (sq_transition_in), in the reap's transaction. */
#include "store/sqlite_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <string.h>

/* Steps a statement with no rows to its end. */
static int step_done(struct sq_conn *c, sqlite3_stmt *q, int rc,
		     const char *what, const char *id, struct wr_error **err)
{
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "%s %s", what, id);
	return 0;
}

/* The worker's build claims that have not run out at now_ms: ended
 * (SQ_BUILD_CLAIM_EXPIRE) or extended to until (SQ_BUILD_CLAIM_RENEW). */
static int builds_until(struct sq_conn *c, enum sq_stmt stmt, const char *id,
			int64_t now_ms, int64_t until, const char *what,
			struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, stmt, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 2, now_ms);
	if (rc == SQLITE_OK && stmt == SQ_BUILD_CLAIM_RENEW)
		rc = sqlite3_bind_int64(q, 3, until);
	return step_done(c, q, rc, what, id, err);
}

int sq_worker_register(struct store *st, const struct store_worker *w,
		       struct wr_error **err)
{
	int r = store_worker_check(w, err);
	if (r < 0)
		return r;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	r = sq_prepare(c, SQ_WORKER_REGISTER, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, w->id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, w->host);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(
		    q, 3, w->started_ms ? w->started_ms : store_now_ms());
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(q, 4, w->max_sandboxes);
	return step_done(c, q, rc, "register worker", w->id, err);
}

int sq_worker_stop(struct store *st, const char *id, int64_t now_ms,
		   struct wr_error **err)
{
	if (!store_id_ok(id))
		return wr_error_absent(err, true, "stop worker: no worker %s",
				       id ? id : "");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *stop = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *expire = NULL;
	int r = sq_begin(c, true, &tx, err);
	if (r == 0)
		r = sq_prepare(c, SQ_WORKER_STOP, &stop, err);
	if (r == 0)
		r = sq_prepare(c, SQ_WORKER_EXPIRE, &expire, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(stop, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(stop, 2, now_ms);
	r = step_done(c, stop, rc, "stop worker", id, err);
	if (r < 0)
		return r;
	if (sqlite3_changes(c->db) == 0)
		return store_worker_usable(id, false, 0, "stop worker", err);
	rc = sq_bind_text(expire, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(expire, 2, now_ms);
	r = step_done(c, expire, rc, "stop worker", id, err);
	if (r == 0)
		r = builds_until(c, SQ_BUILD_CLAIM_EXPIRE, id, now_ms, 0,
				 "stop worker", err);
	if (r == 0)
		r = sq_commit(&tx, err);
	if (r == 0)
		sq_written(st);
	return r;
}

int sq_worker_list(struct store *st, struct store_worker **out, size_t *n_out,
		   struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_WORKER_LIST, &q, err);
	if (r < 0)
		return r;
	void *v = NULL;
	size_t n = 0;
	r = sq_collect(c, q, &store_worker_record, &v, &n, "list workers", err);
	if (r == 0) {
		*out = v;
		*n_out = n;
	}
	return r;
}

/* The worker may hold leases: registered, not stopped. stmt is
 * SQ_WORKER_GET (a read) or SQ_WORKER_HEARTBEAT (which also records now). */
static int worker_usable(struct sq_conn *c, enum sq_stmt stmt, const char *id,
			 int64_t now_ms, const char *what,
			 struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, stmt, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK && stmt == SQ_WORKER_HEARTBEAT)
		rc = sqlite3_bind_int64(q, 2, now_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return sq_error(c, rc, err, "%s", what);
	int64_t stopped = rc == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
	return store_worker_usable(id, rc == SQLITE_ROW, stopped, what, err);
}

/* Gives session id to worker_id until expires (a new epoch if advance),
 * appending the claim to vec. */
static int take(struct sq_conn *c, struct store_vec *vec, const char *id,
		const char *worker_id, int64_t expires, bool advance,
		struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_LEASE_TAKE, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, worker_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 3, expires);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(q, 4, advance);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return store_no_session(id, err);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "claim session %s", id);
	struct store_row row = sq_row(q);
	r = store_vec_add_row(vec, &row);
	if (r < 0)
		return wr_error_set(err, -r, "claim session %s", id);
	/* to its end: no statement may be active at COMMIT */
	rc = sqlite3_step(q);
	return rc == SQLITE_DONE ? 0
				 : sq_error(c, rc, err, "claim session %s", id);
}

/* The claims of session_claim with an id: that session, if it may. */
static int claim_one(struct sq_conn *c, struct store_vec *vec,
		     const char *worker_id, const char *id, int64_t now_ms,
		     int64_t expires, struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	_cleanup_free_ char *holder = NULL;
	int r = sq_prepare(c, SQ_CLAIM_ONE, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return store_no_session(id, err);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "claim session %s", id);
	int state =
	    session_state_parse((const char *)sqlite3_column_text(q, 0));
	if (state < 0)
		return wr_error_set(err, EIO, "session %s: unknown state", id);
	if (sq_column_strdup(q, 1, &holder) < 0)
		return wr_error_set(err, ENOMEM, "claim session %s", id);
	int64_t held_until = sqlite3_column_int64(q, 2);
	sqlite3_reset(q);
	bool keep = false;
	r = store_claim_one_check(id, worker_id, state, holder, held_until,
				  now_ms, &keep, err);
	return r < 0 ? r : take(c, vec, id, worker_id, expires, !keep, err);
}

/* The sessions statement stmt lists (SQ_CLAIM_QUEUED, SQ_LEASE_EXPIRED:
 * ?1 the time, ?2 the limit), as claims. */
static int list_claims(struct sq_conn *c, enum sq_stmt stmt, int64_t now_ms,
		       int limit, struct store_claim **out, size_t *n_out,
		       const char *what, struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, stmt, &q, err);
	if (r < 0)
		return r;
	int rc = sqlite3_bind_int64(q, 1, now_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(q, 2, limit);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "%s", what);
	return sq_collect(c, q, &store_claim_record, (void **)out, n_out, what,
			  err);
}

/* The claims of session_claim without an id: the queue's oldest. */
static int claim_queued(struct sq_conn *c, struct store_vec *vec,
			const char *worker_id, int64_t now_ms, int64_t expires,
			int limit, struct wr_error **err)
{
	struct store_claim *picked = NULL;
	size_t n = 0;
	int r = list_claims(c, SQ_CLAIM_QUEUED, now_ms, limit, &picked, &n,
			    "claim sessions", err);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = take(c, vec, picked[i].id, worker_id, expires, true, err);
	store_claims_free(picked, n);
	return r;
}

int sq_session_claim(struct store *st, const char *worker_id,
		     const char *session_id, int64_t now_ms, int64_t lease_ms,
		     int limit, struct store_claim **out, size_t *n_out,
		     struct wr_error **err)
{
	int r = store_claim_check(worker_id, session_id, lease_ms, &limit, err);
	if (r < 0)
		return r;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	struct store_vec vec = {.type = &store_claim_record};
	r = sq_begin(c, true, &tx, err);
	if (r == 0)
		r = worker_usable(c, SQ_WORKER_GET, worker_id, now_ms,
				  "claim sessions", err);
	if (r == 0 && session_id)
		r = claim_one(c, &vec, worker_id, session_id, now_ms,
			      now_ms + lease_ms, err);
	else if (r == 0)
		r = claim_queued(c, &vec, worker_id, now_ms, now_ms + lease_ms,
				 limit, err);
	if (r == 0)
		r = sq_commit(&tx, err);
	if (r == 0 && vec.n)
		sq_written(st);
	size_t n = vec.n;
	return store_claims_out(r, TAKE_PTR(vec.v), n, out, n_out);
}

int sq_lease_renew(struct store *st, const char *worker_id, int64_t now_ms,
		   int64_t lease_ms, struct store_claim **held, size_t *n_held,
		   struct wr_error **err)
{
	if (!store_id_ok(worker_id) || lease_ms <= 0)
		return wr_error_input(err, EINVAL,
				      "renew leases: bad worker id or lease");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *renew = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *list = NULL;
	int r = sq_begin(c, true, &tx, err);
	if (r == 0)
		r = worker_usable(c, SQ_WORKER_HEARTBEAT, worker_id, now_ms,
				  "renew leases", err);
	if (r == 0)
		r = sq_prepare(c, SQ_LEASE_RENEW, &renew, err);
	if (r == 0)
		r = sq_prepare(c, SQ_LEASE_HELD, &list, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(renew, 1, worker_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(renew, 2, now_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(renew, 3, now_ms + lease_ms);
	r = step_done(c, renew, rc, "renew the leases of", worker_id, err);
	if (r == 0)
		r = builds_until(c, SQ_BUILD_CLAIM_RENEW, worker_id, now_ms,
				 now_ms + lease_ms, "renew the build claims of",
				 err);
	if (r < 0)
		return r;
	rc = sq_bind_text(list, 1, worker_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(list, 2, now_ms);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "renew leases");
	struct store_claim *v = NULL;
	size_t n = 0;
	r = sq_collect(c, list, &store_claim_record, (void **)&v, &n,
		       "renew leases", err);
	if (r == 0)
		r = sq_commit(&tx, err);
	return store_claims_out(r, v, n, held, n_held);
}

STORE_DEFINE_REAP_OPS(reap_ops, struct sq_conn, sq_lease_end, sq_transition_in);

int sq_lease_reap(struct store *st, int64_t now_ms, const char *reason,
		  struct store_claim **out, size_t *n_out,
		  struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	struct store_claim *v = NULL;
	size_t n = 0;
	/* one transaction for them all: SQLite's write lock is taken once,
	 * and a failure leaves every lease as it was */
	int r = sq_begin(c, true, &tx, err);
	if (r == 0)
		r = list_claims(c, SQ_LEASE_EXPIRED, now_ms, STORE_LIST_MAX, &v,
				&n, "reap leases", err);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = store_reap_one(&reap_ops, c, &v[i], reason, now_ms, err);
	if (r == 0)
		r = sq_commit(&tx, err);
	if (r == 0 && n)
		sq_written(st);
	return store_claims_out(r, v, n, out, n_out);
}

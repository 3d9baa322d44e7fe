/* pg_lease.c - the PostgreSQL backend's workers and leases (store.h,
 * "Leases").
 *
 * Each call is one transaction on one connection of the pool. Claims take
 * the queue's rows with FOR UPDATE SKIP LOCKED (pg_schema.c,
 * PG_CLAIM_QUEUED): workers claiming at once, from any number of servers,
 * get disjoint sets and none waits for another; a claim of one session by
 * id waits for that row's lock. The order of locks is the worker's row
 * first (a claim reads it FOR SHARE; a renewal and a stop update it), then
 * sessions' rows, then (a transition that requeues) the queue counter, so
 * that no two transactions wait on each other in a cycle (a renewal and a
 * stop then take the worker's build claims, which a build_claim takes
 * alone). A reap locks
 * the expired rows with SKIP LOCKED too, so two reapers share the work,
 * and interrupts each through session_transition's path
 * (pg_transition_in) in its transaction. */
#include "store/pg_internal.h"

#include "util/cleanup.h"

#include <errno.h>
#include <string.h>

int pg_worker_register(struct store *st, const struct store_worker *w,
		       struct wr_error **err)
{
	int r = store_worker_check(w, err);
	if (r < 0)
		return r;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, w->id);
	pg_text(&p, w->host);
	pg_int(&p, w->started_ms ? w->started_ms : store_now_ms());
	pg_int(&p, w->max_sandboxes);
	return pg_call(pg_of(st), &c, PG_WORKER_REGISTER, &p, &res, err,
		       "register worker %s", w->id);
}

int pg_worker_stop(struct store *st, const char *id, int64_t now_ms,
		   struct wr_error **err)
{
	if (!store_id_ok(id))
		return store_worker_usable(id ? id : "", false, 0,
					   "stop worker", err);
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;
	_cleanup_(pg_clearp) PGresult *stop = NULL;
	_cleanup_(pg_clearp) PGresult *expire = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	pg_int(&p, now_ms);
	int r = pg_acquire(pg_of(st), &c, err);
	if (r == 0)
		r = pg_begin(c, &tx, err);
	if (r == 0)
		r = pg_exec(c, PG_WORKER_STOP, &p, &stop, err, "stop worker %s",
			    id);
	if (r < 0)
		return r;
	if (pg_changes(stop) == 0)
		return store_worker_usable(id, false, 0, "stop worker", err);
	r = pg_exec(c, PG_WORKER_EXPIRE, &p, &expire, err, "stop worker %s",
		    id);
	if (r == 0) {
		_cleanup_(pg_clearp) PGresult *builds = NULL;
		r = pg_exec(c, PG_BUILD_CLAIM_EXPIRE, &p, &builds, err,
			    "stop worker %s", id);
	}
	if (r == 0)
		r = pg_commit(&tx, err);
	if (r == 0)
		pg_written(st);
	return r;
}

int pg_worker_list(struct store *st, struct store_worker **out, size_t *n_out,
		   struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	int r = pg_call(pg_of(st), &c, PG_WORKER_LIST, NULL, &res, err,
			"list workers");
	if (r < 0)
		return r;
	return PG_COLLECT(res, &store_worker_record, out, n_out, "list workers",
			  err);
}

/* The worker may hold leases: registered, not stopped. stmt is
 * PG_WORKER_GET (a read, its row shared) or PG_WORKER_HEARTBEAT (which
 * also records now). */
static int worker_usable(struct pg_conn *c, enum pg_stmt stmt, const char *id,
			 int64_t now_ms, const char *what,
			 struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	if (stmt == PG_WORKER_HEARTBEAT)
		pg_int(&p, now_ms);
	int r = pg_exec(c, stmt, &p, &res, err, "%s", what);
	if (r < 0)
		return r;
	bool found = PQntuples(res) > 0;
	return store_worker_usable(
	    id, found, found ? pg_get_int64(res, 0, 0) : 0, what, err);
}

/* The claims of session_claim with an id: that session, if it may. */
static int claim_one(struct pg_conn *c, const char *worker_id, const char *id,
		     int64_t now_ms, int64_t expires, PGresult **out,
		     struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	int r = pg_exec(c, PG_CLAIM_ONE, &p, &res, err, "claim session %s", id);
	if (r < 0)
		return r;
	if (PQntuples(res) < 1)
		return store_no_session(id, err);
	int state = session_state_parse(PQgetvalue(res, 0, 0));
	if (state < 0)
		return wr_error_set(err, EIO, "session %s: unknown state", id);
	const char *holder =
	    PQgetisnull(res, 0, 1) ? NULL : PQgetvalue(res, 0, 1);
	bool keep = false;
	r = store_claim_one_check(id, worker_id, state, holder,
				  pg_get_int64(res, 0, 2), now_ms, &keep, err);
	if (r < 0)
		return r;
	p = (struct pg_params){0};
	pg_text(&p, id);
	pg_text(&p, worker_id);
	pg_int(&p, expires);
	pg_int(&p, !keep);
	return pg_exec(c, PG_LEASE_TAKE, &p, out, err, "claim session %s", id);
}

int pg_session_claim(struct store *st, const char *worker_id,
		     const char *session_id, int64_t now_ms, int64_t lease_ms,
		     int limit, struct store_claim **out, size_t *n_out,
		     struct wr_error **err)
{
	int r = store_claim_check(worker_id, session_id, lease_ms, &limit, err);
	if (r < 0)
		return r;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	r = pg_acquire(pg_of(st), &c, err);
	if (r == 0)
		r = pg_begin(c, &tx, err);
	if (r == 0)
		r = worker_usable(c, PG_WORKER_GET, worker_id, now_ms,
				  "claim sessions", err);
	if (r == 0 && session_id) {
		r = claim_one(c, worker_id, session_id, now_ms,
			      now_ms + lease_ms, &res, err);
	} else if (r == 0) {
		struct pg_params p = {0};
		pg_text(&p, worker_id);
		pg_int(&p, now_ms);
		pg_int(&p, now_ms + lease_ms);
		pg_int(&p, limit);
		r = pg_exec(c, PG_CLAIM_QUEUED, &p, &res, err,
			    "worker %s: claim sessions", worker_id);
	}
	if (r < 0)
		return r;
	struct store_claim *v = NULL;
	size_t n = 0;
	r = PG_COLLECT(res, &store_claim_record, &v, &n, "claim sessions", err);
	if (r == 0)
		r = pg_commit(&tx, err);
	if (r == 0 && n)
		pg_written(st);
	return store_claims_out(r, v, n, out, n_out);
}

int pg_lease_renew(struct store *st, const char *worker_id, int64_t now_ms,
		   int64_t lease_ms, struct store_claim **held, size_t *n_held,
		   struct wr_error **err)
{
	if (!store_id_ok(worker_id) || lease_ms <= 0)
		return wr_error_input(err, EINVAL,
				      "renew leases: bad worker id or lease");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	int r = pg_acquire(pg_of(st), &c, err);
	if (r == 0)
		r = pg_begin(c, &tx, err);
	if (r == 0)
		r = worker_usable(c, PG_WORKER_HEARTBEAT, worker_id, now_ms,
				  "renew leases", err);
	if (r < 0)
		return r;
	struct pg_params p = {0};
	pg_text(&p, worker_id);
	pg_int(&p, now_ms);
	pg_int(&p, now_ms + lease_ms);
	r = pg_exec(c, PG_LEASE_RENEW, &p, &res, err, "renew the leases of %s",
		    worker_id);
	if (r == 0) {
		_cleanup_(pg_clearp) PGresult *builds = NULL;
		r = pg_exec(c, PG_BUILD_CLAIM_RENEW, &p, &builds, err,
			    "renew the build claims of %s", worker_id);
	}
	if (r < 0)
		return r;
	struct store_claim *v = NULL;
	size_t n = 0;
	r = PG_COLLECT(res, &store_claim_record, &v, &n, "renew leases", err);
	if (r == 0)
		r = pg_commit(&tx, err);
	return store_claims_out(r, v, n, held, n_held);
}

STORE_DEFINE_REAP_OPS(reap_ops, struct pg_conn, pg_lease_end, pg_transition_in);

int pg_lease_reap(struct store *st, int64_t now_ms, const char *reason,
		  struct store_claim **out, size_t *n_out,
		  struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_int(&p, now_ms);
	pg_int(&p, STORE_LIST_MAX);
	int r = pg_acquire(pg_of(st), &c, err);
	if (r == 0)
		r = pg_begin(c, &tx, err);
	if (r == 0)
		r = pg_exec(c, PG_LEASE_EXPIRED, &p, &res, err, "reap leases");
	if (r < 0)
		return r;
	struct store_claim *v = NULL;
	size_t n = 0;
	r = PG_COLLECT(res, &store_claim_record, &v, &n, "reap leases", err);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = store_reap_one(&reap_ops, c, &v[i], reason, now_ms, err);
	if (r == 0)
		r = pg_commit(&tx, err);
	if (r == 0 && n)
		pg_written(st);
	return store_claims_out(r, v, n, out, n_out);
}

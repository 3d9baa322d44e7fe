/* test_lease.c - the store's workers and leases (src/store/store.h,
 * "Leases"), on SQLite, and on PostgreSQL when WARREN_TEST_STORE names a
 * server (tests/run.sh's second pass, tests/pg_server.sh): workers
 * registered, stopped and listed; claims in queue order up to their limit,
 * never of a session a live lease holds, and of one session by id; two
 * claimers at once on two handles getting disjoint sets, and (PostgreSQL)
 * a claim skipping a row another transaction holds instead of waiting for
 * it; renewals; reaps after expiry interrupting what may be interrupted
 * and releasing the rest; and fencing: a write with a stale epoch refused
 * with -ESTALE and writing nothing, the current epoch and epoch 0 passing;
 * build claims: one worker's at a time per repository, taken again by its
 * holder, after its end, or after a release or a stop, renewed with the
 * worker's leases, and two claimers at once never both getting one.
 *
 * Every time is passed (now_ms): nothing sleeps. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "store/store.h"
#include "teststore.h"

#include "testdb.h"

#define LEASE_MS 100

static void add_worker(struct store *st, const char *id)
{
	struct store_worker w = {.id = "",
				 .host = (char *)"host-1",
				 .started_ms = 500,
				 .max_sandboxes = 4};
	snprintf(w.id, sizeof(w.id), "%s", id);
	OK(st->ops->worker_register(st, &w, &err_));
}

/* Claims for worker at now (a queue claim when sid is NULL); the count. */
static size_t claim(struct store *st, const char *worker, const char *sid,
		    int64_t now, int limit, struct store_claim **out)
{
	size_t n = 0;
	struct store_claim *v = NULL;
	long long r = OK(st->ops->session_claim(st, worker, sid, now, LEASE_MS,
						limit, &v, &n, &err_));
	assert_int_equal(r, (long long)n);
	if (out)
		*out = v;
	else
		store_claims_free(v, n);
	return n;
}

static struct store_session get(struct store *st, const char *id)
{
	struct store_session s;
	OK(st->ops->session_get(st, id, &s, &err_));
	return s;
}

/* n queued sessions (created at 100, 101...: the claims' order) of a new
 * repository, and worker w-a to claim them. */
static void queue_of(struct store *st, int n, char (*sid)[STORE_ID_MAX])
{
	char repo[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	for (int i = 0; i < n; i++)
		add_session_at(st, repo, "alice", 100 + i, sid[i]);
	add_worker(st, "w-a");
}

/* Moves sid on to state through `from`, fenced with epoch. */
static void move(struct store *st, const char *sid, enum session_state from,
		 enum session_state to, int64_t epoch)
{
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	upd.epoch = epoch;
	OK(st->ops->session_transition(st, sid, from, to, &upd, NULL, &err_));
}

/* ---- workers --------------------------------------------------------------
 */

static void test_workers(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	add_worker(st, "w-b");
	struct store_worker a = {.id = "w-a", .started_ms = 100};
	OK(st->ops->worker_register(st, &a, &err_));

	struct store_worker *v = NULL;
	size_t n = 0;
	OK(st->ops->worker_list(st, &v, &n, &err_));
	assert_int_equal(n, 2);
	/* by start time */
	assert_string_equal(v[0].id, "w-a");
	assert_null(v[0].host);
	assert_int_equal(v[0].heartbeat_ms, 100);
	assert_string_equal(v[1].id, "w-b");
	assert_string_equal(v[1].host, "host-1");
	assert_int_equal(v[1].max_sandboxes, 4);
	assert_int_equal(v[1].stopped_ms, 0);
	store_workers_free(v, n);

	/* stopped: its first stop's time stays; registered again, it runs */
	OK(st->ops->worker_stop(st, "w-b", 900, &err_));
	OK(st->ops->worker_stop(st, "w-b", 950, &err_));
	OK(st->ops->worker_list(st, &v, &n, &err_));
	assert_int_equal(v[1].stopped_ms, 900);
	store_workers_free(v, n);
	struct store_claim *held = NULL;
	FAILS(ESTALE, st->ops->lease_renew(st, "w-b", 1000, LEASE_MS, &held, &n,
					   &err_));
	add_worker(st, "w-b");
	OK(st->ops->worker_list(st, &v, &n, &err_));
	assert_int_equal(n, 2);
	assert_int_equal(v[1].stopped_ms, 0);
	store_workers_free(v, n);

	FAILS(ENOENT, st->ops->worker_stop(st, "w-none", 1000, &err_));
	struct store_worker bad = {.id = "", .max_sandboxes = 1};
	FAILS(EINVAL, st->ops->worker_register(st, &bad, &err_));
	struct store_worker neg = {.id = "w-neg", .max_sandboxes = -1};
	FAILS(EINVAL, st->ops->worker_register(st, &neg, &err_));
	store_close(st);
}

/* ---- claims ------------------------------------------------------------- */

static void test_claim_order_and_limit(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], sid[5][STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	/* created out of order: the claim goes by created_ms */
	const int64_t created[5] = {3000, 1000, 5000, 2000, 4000};
	for (int i = 0; i < 5; i++)
		add_session_at(st, repo, "alice", created[i], sid[i]);
	add_worker(st, "w-a");
	add_worker(st, "w-b");

	struct store_claim *cl = NULL;
	assert_int_equal(claim(st, "w-a", NULL, 10000, 2, &cl), 2);
	assert_string_equal(cl[0].id, sid[1]); /* 1000 */
	assert_string_equal(cl[1].id, sid[3]); /* 2000 */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(cl[i].epoch, 1);
		assert_int_equal(cl[i].state, SESSION_QUEUED);
		assert_string_equal(cl[i].worker_id, "w-a");
	}
	store_claims_free(cl, 2);
	struct store_session s = get(st, sid[1]);
	assert_string_equal(s.worker_id, "w-a");
	assert_int_equal(s.lease_epoch, 1);
	assert_int_equal(s.lease_expires_ms, 10000 + LEASE_MS);
	assert_int_equal(s.state, SESSION_QUEUED);
	store_session_clear(&s);
	s = get(st, sid[0]);
	assert_null(s.worker_id);
	assert_int_equal(s.lease_epoch, 0);
	assert_int_equal(s.lease_expires_ms, 0);
	store_session_clear(&s);

	/* the rest, to another worker, in order; then nothing is left */
	assert_int_equal(claim(st, "w-b", NULL, 10001, 10, &cl), 3);
	assert_string_equal(cl[0].id, sid[0]);
	assert_string_equal(cl[1].id, sid[4]);
	assert_string_equal(cl[2].id, sid[2]);
	store_claims_free(cl, 3);
	assert_int_equal(claim(st, "w-a", NULL, 10002, 10, &cl), 0);
	assert_null(cl);

	/* a session not queued is not the queue's */
	char other[STORE_ID_MAX];
	add_session_at(st, repo, "alice", 500, other);
	move(st, other, SESSION_QUEUED, SESSION_CANCELLED, 0);
	assert_int_equal(claim(st, "w-a", NULL, 10003, 10, NULL), 0);

	size_t n = 0;
	FAILS(EINVAL, st->ops->session_claim(st, "w-a", NULL, 10000, LEASE_MS,
					     0, &cl, &n, &err_));
	FAILS(EINVAL, st->ops->session_claim(st, "w-a", NULL, 10000, 0, 1, &cl,
					     &n, &err_));
	FAILS(ENOENT, st->ops->session_claim(st, "w-none", NULL, 10000,
					     LEASE_MS, 1, &cl, &n, &err_));
	OK(st->ops->worker_stop(st, "w-b", 10004, &err_));
	FAILS(ESTALE, st->ops->session_claim(st, "w-b", NULL, 10005, LEASE_MS,
					     1, &cl, &n, &err_));
	store_close(st);
}

static void test_claim_respects_live_lease(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_session(st, repo, sid);
	add_worker(st, "w-a");
	add_worker(st, "w-b");

	assert_int_equal(claim(st, "w-a", NULL, 1000, 1, NULL), 1);
	/* while A's lease lives (to 1100 included), B gets nothing */
	assert_int_equal(claim(st, "w-b", NULL, 1050, 1, NULL), 0);
	assert_int_equal(claim(st, "w-b", NULL, 1100, 1, NULL), 0);
	/* once it ran out, the session (still queued) is B's, a new epoch */
	struct store_claim *cl = NULL;
	assert_int_equal(claim(st, "w-b", NULL, 1101, 1, &cl), 1);
	assert_string_equal(cl[0].id, sid);
	assert_int_equal(cl[0].epoch, 2);
	store_claims_free(cl, 1);

	/* by id: not while B's lease lives; B's own claim keeps its epoch */
	size_t n = 0;
	FAILS(EBUSY, st->ops->session_claim(st, "w-a", sid, 1150, LEASE_MS, 0,
					    &cl, &n, &err_));
	assert_int_equal(claim(st, "w-b", sid, 1150, 0, &cl), 1);
	assert_int_equal(cl[0].epoch, 2);
	store_claims_free(cl, 1);
	struct store_session s = get(st, sid);
	assert_int_equal(s.lease_expires_ms, 1150 + LEASE_MS);
	store_session_clear(&s);
	/* in review, B's lease run out: A takes it by id, state kept */
	move(st, sid, SESSION_QUEUED, SESSION_PROVISIONING, 2);
	move(st, sid, SESSION_PROVISIONING, SESSION_RUNNING, 2);
	move(st, sid, SESSION_RUNNING, SESSION_REVIEW, 2);
	assert_int_equal(claim(st, "w-a", sid, 1300, 0, &cl), 1);
	assert_int_equal(cl[0].epoch, 3);
	assert_int_equal(cl[0].state, SESSION_REVIEW);
	assert_string_equal(cl[0].worker_id, "w-a");
	store_claims_free(cl, 1);

	/* a terminal session is no one's; an unknown one is not there */
	move(st, sid, SESSION_REVIEW, SESSION_CANCELLED, 3);
	s = get(st, sid);
	assert_null(s.worker_id); /* the terminal state ended the lease */
	assert_int_equal(s.lease_expires_ms, 0);
	assert_int_equal(s.lease_epoch, 3);
	store_session_clear(&s);
	FAILS(EPERM, st->ops->session_claim(st, "w-a", sid, 1400, LEASE_MS, 0,
					    &cl, &n, &err_));
	FAILS(ENOENT, st->ops->session_claim(st, "w-a", "s-none", 1400,
					     LEASE_MS, 0, &cl, &n, &err_));
	store_close(st);
}

/* ---- two claimers at once ------------------------------------------------ */

#define CLAIM_SESSIONS 24
#define CLAIM_ROUNDS 200

struct claimer {
	struct store *st;
	const char *worker;
	char ids[CLAIM_SESSIONS][STORE_ID_MAX];
	size_t n;
	int failures;
	char error[256];
};

static void *claim_loop(void *arg)
{
	struct claimer *c = arg;
	/* bounded: CLAIM_ROUNDS calls at most, stopping at the first empty
	 * one (nothing left that another claimer does not hold) */
	for (int round = 0; round < CLAIM_ROUNDS; round++) {
		struct wr_error *err = NULL;
		struct store_claim *v = NULL;
		size_t n = 0;
		int r = c->st->ops->session_claim(c->st, c->worker, NULL, 1000,
						  LEASE_MS, 2, &v, &n, &err);
		if (r < 0) {
			c->failures++;
			snprintf(c->error, sizeof(c->error), "%s",
				 err ? err->msg : "?");
			wr_error_free(err);
			return NULL;
		}
		for (size_t i = 0; i < n && c->n < CLAIM_SESSIONS; i++)
			memcpy(c->ids[c->n++], v[i].id, STORE_ID_MAX);
		store_claims_free(v, n);
		if (n == 0)
			break;
	}
	return NULL;
}

/* Two workers claiming at once, each on a handle of its own (as two
 * hosts): every session is claimed once, by one of them. */
static void test_concurrent_claims_are_disjoint(void **state)
{
	(void)state;
	struct store *st1 = open_db("w.db");
	struct store *st2 = open_db("w.db");
	char sid[CLAIM_SESSIONS][STORE_ID_MAX];
	queue_of(st1, CLAIM_SESSIONS, sid);
	add_worker(st1, "w-b");

	static struct claimer c[2];
	c[0] = (struct claimer){.st = st1, .worker = "w-a"};
	c[1] = (struct claimer){.st = st2, .worker = "w-b"};
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&t[i], NULL, claim_loop, &c[i]),
				 0);
	/* time-bounded: neither may wait on the other for long */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 30;
	for (int i = 0; i < 2; i++) {
		int joined = pthread_timedjoin_np(t[i], NULL, &until);
		if (joined != 0)
			fail_msg("claimer %d did not finish in 30 s: %s", i,
				 strerror(joined));
		if (c[i].failures)
			fail_msg("claimer %d: %s", i, c[i].error);
	}
	assert_int_equal(c[0].n + c[1].n, CLAIM_SESSIONS);
	for (int i = 0; i < CLAIM_SESSIONS; i++) {
		int seen = 0;
		for (int w = 0; w < 2; w++)
			for (size_t j = 0; j < c[w].n; j++)
				seen += !strcmp(c[w].ids[j], sid[i]);
		if (seen != 1)
			fail_msg("session %d claimed %d times", i, seen);
		struct store_session s = get(st1, sid[i]);
		assert_int_equal(s.lease_epoch, 1);
		store_session_clear(&s);
	}
	store_close(st2);
	store_close(st1);
}

struct blocked_claim {
	struct store *st;
	struct store_claim *v;
	size_t n;
	int r;
};

static void *claim_once(void *arg)
{
	struct blocked_claim *b = arg;
	struct wr_error *err = NULL;
	b->r = b->st->ops->session_claim(b->st, "w-a", NULL, 1000, LEASE_MS, 10,
					 &b->v, &b->n, &err);
	wr_error_free(err);
	return NULL;
}

/* PostgreSQL: a queued row another transaction holds locked is skipped,
 * not waited for (FOR UPDATE SKIP LOCKED); the claim returns within
 * seconds with the others. */
static void test_claim_skips_locked_rows(void **state)
{
	(void)state;
	if (!teststore_pg()) {
		skip();
		return;
	}
	struct store *st = open_db("w.db");
	char sid[3][STORE_ID_MAX];
	queue_of(st, 3, sid);

	/* another transaction (a second host's claim) holds the oldest */
	PGconn *db = PQconnectdb(U("w.db"));
	assert_int_equal(PQstatus(db), CONNECTION_OK);
	PGresult *res = PQexec(db, "BEGIN");
	assert_int_equal(PQresultStatus(res), PGRES_COMMAND_OK);
	PQclear(res);
	const char *params[1] = {sid[0]};
	res =
	    PQexecParams(db, "SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE",
			 1, NULL, params, NULL, NULL, 0);
	assert_int_equal(PQresultStatus(res), PGRES_TUPLES_OK);
	assert_int_equal(PQntuples(res), 1);
	PQclear(res);

	static struct blocked_claim b;
	b = (struct blocked_claim){.st = st};
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, claim_once, &b), 0);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	int joined = pthread_timedjoin_np(t, NULL, &until);
	/* let it go whatever happened, so that the thread ends */
	res = PQexec(db, "COMMIT");
	PQclear(res);
	PQfinish(db);
	if (joined != 0) {
		pthread_join(t, NULL);
		fail_msg("the claim waited for the locked row: %s",
			 strerror(joined));
	}
	assert_int_equal(b.r, 2);
	assert_string_equal(b.v[0].id, sid[1]);
	assert_string_equal(b.v[1].id, sid[2]);
	store_claims_free(b.v, b.n);
	/* unlocked, it is the next claim's */
	struct store_claim *cl = NULL;
	assert_int_equal(claim(st, "w-a", NULL, 1001, 10, &cl), 1);
	assert_string_equal(cl[0].id, sid[0]);
	store_claims_free(cl, 1);
	store_close(st);
}

/* ---- renewals ------------------------------------------------------------ */

static void test_renew(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char sid[3][STORE_ID_MAX];
	queue_of(st, 3, sid);
	add_worker(st, "w-b");
	assert_int_equal(claim(st, "w-a", NULL, 1000, 2, NULL), 2);
	assert_int_equal(claim(st, "w-b", NULL, 1000, 1, NULL), 1);

	struct store_claim *held = NULL;
	size_t n = 0;
	assert_int_equal(OK(st->ops->lease_renew(st, "w-a", 1050, LEASE_MS,
						 &held, &n, &err_)),
			 2);
	assert_int_equal(n, 2);
	/* by id */
	bool ordered = strcmp(sid[0], sid[1]) < 0;
	assert_string_equal(held[0].id, ordered ? sid[0] : sid[1]);
	assert_string_equal(held[1].id, ordered ? sid[1] : sid[0]);
	assert_int_equal(held[0].epoch, 1);
	store_claims_free(held, n);
	struct store_session s = get(st, sid[0]);
	assert_int_equal(s.lease_expires_ms, 1050 + LEASE_MS);
	store_session_clear(&s);
	/* B's lease is B's: not extended by A's renewal */
	s = get(st, sid[2]);
	assert_int_equal(s.lease_expires_ms, 1000 + LEASE_MS);
	store_session_clear(&s);
	struct store_worker *w = NULL;
	size_t nw = 0;
	OK(st->ops->worker_list(st, &w, &nw, &err_));
	assert_string_equal(w[0].id, "w-a");
	assert_int_equal(w[0].heartbeat_ms, 1050);
	store_workers_free(w, nw);

	/* past the lease, nothing is renewed: it waits for the reaper */
	assert_int_equal(OK(st->ops->lease_renew(st, "w-b", 1101, LEASE_MS,
						 &held, &n, &err_)),
			 0);
	assert_null(held);
	s = get(st, sid[2]);
	assert_int_equal(s.lease_expires_ms, 1000 + LEASE_MS);
	assert_string_equal(s.worker_id, "w-b");
	store_session_clear(&s);

	/* a stop ends the worker's leases at once */
	OK(st->ops->worker_stop(st, "w-a", 1100, &err_));
	s = get(st, sid[0]);
	assert_true(s.lease_expires_ms < 1100);
	store_session_clear(&s);
	FAILS(ESTALE, st->ops->lease_renew(st, "w-a", 1101, LEASE_MS, &held, &n,
					   &err_));
	FAILS(ENOENT, st->ops->lease_renew(st, "w-none", 1101, LEASE_MS, &held,
					   &n, &err_));
	FAILS(EINVAL,
	      st->ops->lease_renew(st, "w-b", 1101, 0, &held, &n, &err_));
	store_close(st);
}

/* ---- reaps and fencing --------------------------------------------------- */

/* A session in running (through provisioning, with its epoch) and one
 * still queued, both claimed by w-a at 1000; and one nobody claimed. */
static void leased_sessions(struct store *st, char running[STORE_ID_MAX],
			    char queued[STORE_ID_MAX], char free_[STORE_ID_MAX])
{
	char sid[3][STORE_ID_MAX];
	queue_of(st, 3, sid);
	memcpy(running, sid[0], STORE_ID_MAX);
	memcpy(queued, sid[1], STORE_ID_MAX);
	memcpy(free_, sid[2], STORE_ID_MAX);
	assert_int_equal(claim(st, "w-a", NULL, 1000, 2, NULL), 2);
	move(st, running, SESSION_QUEUED, SESSION_PROVISIONING, 1);
	move(st, running, SESSION_PROVISIONING, SESSION_RUNNING, 1);
}

static void test_reap(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char running[STORE_ID_MAX], queued[STORE_ID_MAX], free_[STORE_ID_MAX];
	leased_sessions(st, running, queued, free_);
	size_t events = count_events(st, running);
	size_t queued_events = count_events(st, queued);

	/* while the leases live, nothing is reaped */
	struct store_claim *v = NULL;
	size_t n = 0;
	assert_int_equal(OK(st->ops->lease_reap(st, 1100, NULL, &v, &n, &err_)),
			 0);
	assert_null(v);

	assert_int_equal(OK(st->ops->lease_reap(st, 1101, NULL, &v, &n, &err_)),
			 2);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(v[i].worker_id, "w-a");
		assert_int_equal(v[i].epoch, 2);
		bool is_running = !strcmp(v[i].id, running);
		assert_true(is_running || !strcmp(v[i].id, queued));
		assert_int_equal(v[i].state, is_running ? SESSION_INTERRUPTED
							: SESSION_QUEUED);
	}
	store_claims_free(v, n);

	/* the running one is interrupted, by a state event saying why */
	struct store_session s = get(st, running);
	assert_int_equal(s.state, SESSION_INTERRUPTED);
	assert_string_equal(s.reason, "worker w-a lost its lease");
	assert_null(s.worker_id);
	assert_int_equal(s.lease_epoch, 2);
	assert_int_equal(s.lease_expires_ms, 0);
	store_session_clear(&s);
	assert_int_equal(count_events(st, running), events + 1);
	json_t *j = event_data(st, running, (int64_t)events + 1, "state");
	assert_string_equal(json_string_value(json_object_get(j, "state")),
			    "interrupted");
	assert_string_equal(json_string_value(json_object_get(j, "from")),
			    "running");
	assert_string_equal(json_string_value(json_object_get(j, "reason")),
			    "worker w-a lost its lease");
	assert_string_equal(json_string_value(json_object_get(j, "worker")),
			    "w-a");
	assert_int_equal(json_integer_value(json_object_get(j, "epoch")), 2);
	json_decref(j);
	/* the queued one (queued may not be interrupted) is let go as it
	 * is, without an event; the unclaimed one is untouched */
	s = get(st, queued);
	assert_int_equal(s.state, SESSION_QUEUED);
	assert_null(s.worker_id);
	assert_int_equal(s.lease_epoch, 2);
	store_session_clear(&s);
	assert_int_equal(count_events(st, queued), queued_events);
	s = get(st, free_);
	assert_int_equal(s.lease_epoch, 0);
	store_session_clear(&s);

	/* reaped once only; then another worker claims both again */
	assert_int_equal(OK(st->ops->lease_reap(st, 5000, NULL, &v, &n, &err_)),
			 0);
	move(st, running, SESSION_INTERRUPTED, SESSION_QUEUED, 0);
	add_worker(st, "w-b");
	assert_int_equal(claim(st, "w-b", NULL, 5000, 10, &v), 3);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(v[i].epoch, strcmp(v[i].id, free_) ? 3 : 1);
	store_claims_free(v, 3);

	/* a reason given is the reason */
	move(st, free_, SESSION_QUEUED, SESSION_PROVISIONING, 1);
	assert_int_equal(OK(st->ops->lease_reap(st, 6000, "host h-2 is gone",
						&v, &n, &err_)),
			 3);
	store_claims_free(v, n);
	s = get(st, free_);
	assert_int_equal(s.state, SESSION_INTERRUPTED);
	assert_string_equal(s.reason, "host h-2 is gone");
	store_session_clear(&s);
	store_close(st);
}

static void test_fencing(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char running[STORE_ID_MAX], queued[STORE_ID_MAX], free_[STORE_ID_MAX];
	leased_sessions(st, running, queued, free_);
	struct store_claim *v = NULL;
	size_t n = 0;
	OK(st->ops->lease_reap(st, 2000, NULL, &v, &n, &err_));
	store_claims_free(v, n);
	size_t events = count_events(st, running);

	/* w-a wakes up with epoch 1: every write of it is refused, naming
	 * the session and both epochs, and changes nothing */
	struct wr_error *err = NULL;
	assert_int_equal(
	    st->ops->event_append_fenced(st, running, 1, EVENT_OUTPUT,
					 "{\"line\":\"late\"}", &err),
	    -ESTALE);
	assert_non_null(err);
	assert_non_null(strstr(err->msg, running));
	assert_non_null(strstr(err->msg, "epoch 1 "));
	assert_non_null(strstr(err->msg, "is 2"));
	wr_error_free(err);
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	upd.epoch = 1;
	upd.exit_code = 0;
	upd.outcome_json = "{\"late\":true}";
	/* interrupted -> failed is allowed: only the epoch refuses it */
	FAILS(ESTALE, st->ops->session_transition(
			  st, running, -1, SESSION_FAILED, &upd, NULL, &err_));
	FAILS(ESTALE, st->ops->session_update(st, running, &upd, &err_));
	upd.requeue = true;
	FAILS(ESTALE, st->ops->session_update(st, running, &upd, &err_));
	struct store_session s = get(st, running);
	assert_int_equal(s.state, SESSION_INTERRUPTED);
	assert_int_equal(s.exit_code, -1);
	assert_null(s.outcome_json);
	int64_t queue_seq = s.queue_seq;
	store_session_clear(&s);
	assert_int_equal(count_events(st, running), events);

	/* the current epoch passes, and so does 0 (no check) */
	assert_int_equal(OK(st->ops->event_append_fenced(
			     st, running, 2, EVENT_OUTPUT, "{}", &err_)),
			 (long long)events + 1);
	assert_int_equal(
	    OK(st->ops->event_append(st, running, EVENT_OUTPUT, "{}", &err_)),
	    (long long)events + 2);
	upd.epoch = 2;
	upd.requeue = false;
	OK(st->ops->session_update(st, running, &upd, &err_));
	s = get(st, running);
	assert_int_equal(s.exit_code, 0);
	assert_int_equal(s.queue_seq, queue_seq);
	store_session_clear(&s);
	upd = (struct store_session_update)STORE_SESSION_UPDATE_INIT;
	OK(st->ops->session_transition(st, running, SESSION_INTERRUPTED,
				       SESSION_QUEUED, &upd, NULL, &err_));

	/* a new claim's epoch fences the reaped epoch out too */
	add_worker(st, "w-b");
	assert_int_equal(claim(st, "w-b", running, 2100, 0, NULL), 1);
	upd.epoch = 2;
	FAILS(ESTALE, st->ops->session_transition(st, running, SESSION_QUEUED,
						  SESSION_PROVISIONING, &upd,
						  NULL, &err_));
	upd.epoch = 3;
	OK(st->ops->session_transition(st, running, SESSION_QUEUED,
				       SESSION_PROVISIONING, &upd, NULL,
				       &err_));
	/* an unknown session is unknown, whatever the epoch */
	FAILS(ENOENT, st->ops->event_append_fenced(st, "s-none", 3,
						   EVENT_OUTPUT, "{}", &err_));
	FAILS(ENOENT, st->ops->session_update(st, "s-none", &upd, &err_));
	store_close(st);
}

/* ---- build claims ------------------------------------------------------ */

/* Claims repo's build for worker at now: whether it got it; *holder (when
 * not NULL) who holds it otherwise. */
static bool build_claim(struct store *st, const char *repo, const char *worker,
			int64_t now, char **holder)
{
	bool got = false;
	char *who = NULL;
	OK(st->ops->build_claim(st, repo, worker, now, LEASE_MS, &got, &who,
				&err_));
	if (got)
		assert_null(who);
	if (holder)
		*holder = who;
	else
		free(who);
	return got;
}

static void assert_held_by(struct store *st, const char *repo,
			   const char *worker, int64_t now, const char *holder)
{
	char *who = NULL;
	assert_false(build_claim(st, repo, worker, now, &who));
	assert_non_null(who);
	assert_string_equal(who, holder);
	free(who);
}

static void test_build_claims(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], other[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_repo(st, "c-other", other);
	add_worker(st, "w-a");
	add_worker(st, "w-b");

	/* free: taken; another worker's live claim: not, saying whose */
	assert_true(build_claim(st, repo, "w-a", 1000, NULL));
	assert_held_by(st, repo, "w-b", 1050, "w-a");
	/* one claim per repository: another repository's is free */
	assert_true(build_claim(st, other, "w-b", 1050, NULL));
	/* the holder's own claim again: kept, its end moved on (1160) */
	assert_true(build_claim(st, repo, "w-a", 1060, NULL));
	assert_held_by(st, repo, "w-b", 1150, "w-a");

	/* renewed with the worker's leases (1150 + 100), so still A's at
	 * 1200; B's claim of the other repository (1050 + 100) was not
	 * renewed by A's renewal, and A takes it (until 1300) */
	struct store_claim *held = NULL;
	size_t n = 0;
	OK(st->ops->lease_renew(st, "w-a", 1150, LEASE_MS, &held, &n, &err_));
	store_claims_free(held, n);
	assert_held_by(st, repo, "w-b", 1200, "w-a");
	assert_true(build_claim(st, other, "w-a", 1200, NULL));

	/* run out (A died): the next claimer takes it */
	assert_true(build_claim(st, repo, "w-b", 1271, NULL));
	assert_held_by(st, repo, "w-a", 1280, "w-b");
	/* a renewal renews only what has not run out: the claim is B's
	 * until 1351, and A's of the other repository goes on to 1400 */
	OK(st->ops->lease_renew(st, "w-a", 1300, LEASE_MS, &held, &n, &err_));
	store_claims_free(held, n);
	assert_held_by(st, repo, "w-a", 1300, "w-b");
	assert_held_by(st, other, "w-b", 1390, "w-a");

	/* a release ends only the releaser's own claim */
	OK(st->ops->build_release(st, repo, "w-a", &err_));
	assert_held_by(st, repo, "w-a", 1310, "w-b");
	OK(st->ops->build_release(st, repo, "w-b", &err_));
	assert_true(build_claim(st, repo, "w-a", 1320, NULL));
	/* releasing what nobody holds is no error */
	OK(st->ops->build_release(st, repo, "w-a", &err_));
	OK(st->ops->build_release(st, repo, "w-a", &err_));

	/* a worker's stop ends its claims at once */
	assert_true(build_claim(st, repo, "w-a", 1330, NULL));
	assert_held_by(st, repo, "w-b", 1340, "w-a");
	OK(st->ops->worker_stop(st, "w-a", 1350, &err_));
	assert_true(build_claim(st, repo, "w-b", 1350, NULL));
	assert_true(build_claim(st, other, "w-b", 1350, NULL));

	bool got = false;
	char *who = NULL;
	FAILS(EINVAL, st->ops->build_claim(st, "", "w-b", 1400, LEASE_MS, &got,
					   &who, &err_));
	FAILS(EINVAL, st->ops->build_claim(st, repo, "", 1400, LEASE_MS, &got,
					   &who, &err_));
	FAILS(EINVAL, st->ops->build_claim(st, repo, "w-b", 1400, 0, &got, &who,
					   &err_));
	FAILS(EINVAL, st->ops->build_release(st, repo, NULL, &err_));
	/* holder NULL: not asked */
	OK(st->ops->build_claim(st, repo, "w-a", 1400, LEASE_MS, &got, NULL,
				&err_));
	assert_false(got);
	store_close(st);
}

#define BUILD_CLAIM_ROUNDS 40

struct build_claimer {
	struct store *st;
	const char *worker;
	char (*repos)[STORE_ID_MAX];
	int got;
	int failures;
	char error[256];
};

static void *build_claim_loop(void *arg)
{
	struct build_claimer *b = arg;
	for (int i = 0; i < BUILD_CLAIM_ROUNDS; i++) {
		struct wr_error *err = NULL;
		bool got = false;
		int r =
		    b->st->ops->build_claim(b->st, b->repos[i], b->worker, 1000,
					    LEASE_MS, &got, NULL, &err);
		if (r < 0 && !b->failures++)
			snprintf(b->error, sizeof(b->error), "%s",
				 err && err->msg ? err->msg : "failed");
		wr_error_free(err);
		b->got += got;
	}
	return NULL;
}

/* Two workers claiming the same builds at once, each on a handle of its
 * own (as two hosts): each build is claimed by one of them. */
static void test_concurrent_build_claims(void **state)
{
	(void)state;
	struct store *st1 = open_db("w.db");
	struct store *st2 = open_db("w.db");
	static char repos[BUILD_CLAIM_ROUNDS][STORE_ID_MAX];
	for (int i = 0; i < BUILD_CLAIM_ROUNDS; i++) {
		char name[32];
		snprintf(name, sizeof(name), "c-r%d", i);
		add_repo(st1, name, repos[i]);
	}
	static struct build_claimer b[2];
	b[0] =
	    (struct build_claimer){.st = st1, .worker = "w-a", .repos = repos};
	b[1] =
	    (struct build_claimer){.st = st2, .worker = "w-b", .repos = repos};
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(
		    pthread_create(&t[i], NULL, build_claim_loop, &b[i]), 0);
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		if (b[i].failures)
			fail_msg("claimer %d: %s", i, b[i].error);
	}
	assert_int_equal(b[0].got + b[1].got, BUILD_CLAIM_ROUNDS);
	store_close(st2);
	store_close(st1);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_workers),
	    T(test_claim_order_and_limit),
	    T(test_claim_respects_live_lease),
	    T(test_concurrent_claims_are_disjoint),
	    T(test_claim_skips_locked_rows),
	    T(test_renew),
	    T(test_reap),
	    T(test_fencing),
	    T(test_build_claims),
	    T(test_concurrent_build_claims),
	};
#undef T
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

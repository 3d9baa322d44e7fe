/* sqlite_session.c - the SQLite backend's sessions, events, messages and
 * artifacts.
 *
 * Writes that touch more than one row run in one BEGIN IMMEDIATE
 * transaction on the writer connection: a state change and its event, a
 * message and its event, a session with its first message and event 1.
 * An event's seq is sessions.last_event_seq + 1, taken by an UPDATE ...
 * RETURNING in the same transaction that inserts the event, so seqs are
 * gapless and unique per session however many threads (or processes)
 * append at once: the write lock serialises them, and a failed
 * transaction rolls the counter back with the event. */
#include "store/sqlite_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

/* ---- helpers inside a call ---------------------------------------------- */

/* 1 if session id exists, 0 if not, or -errno. */
static int session_exists(struct sq_conn *c, const char *id,
			  struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SESSION_EXISTS, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return sq_error(c, rc, err, "look up session %s", id);
}

/* An empty list of a session's records: is it the session that is
 * missing? 0 or -ENOENT (or -errno). */
static int empty_or_unknown(struct sq_conn *c, const char *id, size_t n,
			    struct wr_error **err)
{
	if (n > 0)
		return 0;
	int r = session_exists(c, id, err);
	if (r < 0)
		return r;
	return r ? 0 : store_no_session(id, err);
}

/* Steps a statement that returns one integer (RETURNING, SELECT) and
 * resets it at once, so that no statement is active at COMMIT. Returns the
 * step's result code. */
static int step_int(sqlite3_stmt *q, int64_t *val)
{
	int rc = sqlite3_step(q);
	if (rc == SQLITE_ROW)
		*val = sqlite3_column_int64(q, 0);
	sqlite3_reset(q);
	return rc;
}

static int next_queue_seq(struct sq_conn *c, int64_t *out,
			  struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_QUEUE_SEQ_NEXT, &q, err);
	if (r < 0)
		return r;
	int64_t v = 0;
	int rc = step_int(q, &v);
	if (rc == SQLITE_DONE)
		return wr_error_set(err, EIO,
				    "next queue position: the "
				    "queue_seq counter is missing");
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "next queue position");
	*out = v;
	return 0;
}

/* Appends an event inside the caller's write transaction; its seq or
 * -errno (-ENOENT: no such session). */
int64_t sq_append_event(struct sq_conn *c, const char *sid,
			enum event_kind kind, const char *data, int64_t now,
			struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *next = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *ins = NULL;
	int r = sq_prepare(c, SQ_EVENT_NEXT_SEQ, &next, err);
	if (r < 0)
		return r;
	r = sq_prepare(c, SQ_EVENT_INSERT, &ins, err);
	if (r < 0)
		return r;
	int64_t seq = 0;
	int rc = sq_bind_text(next, 1, sid);
	if (rc == SQLITE_OK)
		rc = step_int(next, &seq);
	if (rc == SQLITE_DONE)
		return store_no_session(sid, err);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "append event to session %s", sid);
	rc = sq_bind_text(ins, 1, sid);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(ins, 2, seq);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(ins, 3, now);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(ins, 4, event_kind_name(kind));
	if (rc == SQLITE_OK)
		rc = sq_bind_text(ins, 5, data);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(ins);
	if (rc != SQLITE_DONE) {
		/* a duplicate seq would mean last_event_seq fell behind the
		 * events table: a database error, not the caller's */
		int e = sq_errno(rc) == -ENOMEM ? ENOMEM : EIO;
		return wr_error_set(err, e,
				    "append event %lld to session %s: %s",
				    (long long)seq, sid, sqlite3_errmsg(c->db));
	}
	return seq;
}

static int bind_opt_int64(sqlite3_stmt *q, int i, bool set, int64_t v)
{
	return set ? sqlite3_bind_int64(q, i, v) : sqlite3_bind_null(q, i);
}

/* Applies upd (and the state, if state is not NULL; the queue position if
 * queue_seq > 0) to session id. */
static int apply_update(struct sq_conn *c, const char *id, const char *state,
			const struct store_session_update *upd,
			int64_t queue_seq, int64_t now, struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SESSION_APPLY, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, state);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 3, upd->reason);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 4, upd->snapshot_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 5, upd->sandbox);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 6, upd->outcome_json);
	if (rc == SQLITE_OK)
		rc = bind_opt_int64(q, 7, upd->attempts >= 0, upd->attempts);
	if (rc == SQLITE_OK)
		rc = bind_opt_int64(q, 8, upd->turns >= 0, upd->turns);
	if (rc == SQLITE_OK)
		rc = bind_opt_int64(q, 9, upd->exit_code != INT32_MIN,
				    upd->exit_code);
	if (rc == SQLITE_OK)
		rc = bind_opt_int64(q, 10, queue_seq > 0, queue_seq);
	if (rc == SQLITE_OK)
		rc = bind_opt_int64(q, 11, upd->started_ms != 0,
				    upd->started_ms);
	if (rc == SQLITE_OK)
		rc =
		    bind_opt_int64(q, 12, upd->finished_ms != 0,
				   upd->finished_ms < 0 ? 0 : upd->finished_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 13, now);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "update session %s", id);
	if (sqlite3_changes(c->db) == 0)
		return store_no_session(id, err);
	return 0;
}

/* ---- sessions ----------------------------------------------------------- */

/* After a commit that wrote a session's record: caches of session
 * records (store_ops.session_writes) know theirs may be stale. */
void sq_written(struct store *st)
{
	atomic_fetch_add(&sq_of(st)->session_writes, 1);
}

int sq_session_create(struct store *st, const struct store_session *s,
		      struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = NULL;
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *ins = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *msg = NULL;

	int r = store_session_check(s, err);
	if (r < 0)
		return r;
	int64_t created = s->created_ms ? s->created_ms : store_now_ms();
	c = sq_writer(sq_of(st));
	r = sq_begin(c, true, &tx, err);
	if (r < 0)
		return r;
	int64_t queue_seq = 0;
	r = next_queue_seq(c, &queue_seq, err);
	if (r < 0)
		return r;
	r = sq_prepare(c, SQ_SESSION_INSERT, &ins, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(ins, 1, s->id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(ins, 2, s->repo_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(ins, 3, s->user);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(ins, 4, s->prompt);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(ins, 5, s->ref);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(ins, 6, s->agent_json);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(ins, 7, s->limits_json);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(ins, 8, session_state_name(SESSION_QUEUED));
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(ins, 9, queue_seq);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(ins, 10, created);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(ins);
	if (rc != SQLITE_DONE) {
		if (sq_errno(rc) == -EEXIST)
			return wr_error_input(err, EEXIST, "session %s exists",
					      s->id);
		if (sq_errno(rc) == -ENOENT)
			return wr_error_input(err, ENOENT,
					      "create session %s: no "
					      "repository %s",
					      s->id, s->repo_id);
		return sq_error(c, rc, err, "create session %s", s->id);
	}
	/* the first prompt is a pending message: turn 1 consumes it */
	r = sq_prepare(c, SQ_MESSAGE_INSERT, &msg, err);
	if (r < 0)
		return r;
	int64_t message_id = 0;
	rc = sq_bind_text(msg, 1, s->id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(msg, 2, s->user);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(msg, 3, s->prompt);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(msg, 4, created);
	if (rc == SQLITE_OK)
		rc = step_int(msg, &message_id);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "create session %s: first message",
				s->id);
	int64_t seq = sq_append_event(c, s->id, EVENT_STATE,
				      "{\"state\":\"queued\"}", created, err);
	if (seq < 0)
		return (int)seq;
	r = sq_commit(&tx, err);
	if (r == 0)
		sq_written(st);
	return r;
}

int sq_session_get(struct store *st, const char *id, struct store_session *out,
		   struct wr_error **err)
{
	if (!store_id_ok(id))
		return store_no_session(id, err);
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SESSION_GET, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "get session %s", id);
	r = sq_get_one(c, q, &store_session_record, out, "get session", err);
	if (r == 0)
		return store_no_session(id, err);
	return r < 0 ? r : 0;
}

int sq_session_list(struct store *st, const struct store_session_filter *f,
		    struct store_session **out, size_t *n_out,
		    struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = NULL;
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *before = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;

	int limit = 0;
	int r = store_filter_check(f, &limit, err);
	if (r < 0)
		return r;
	unsigned mask = (f->state >= 0 ? SQ_LIST_STATE : 0) |
			(f->user ? SQ_LIST_USER : 0) |
			(f->repo_id ? SQ_LIST_REPO : 0) |
			(f->before_id ? SQ_LIST_BEFORE : 0);
	c = sq_reader(sq_of(st));
	r = sq_prepare(c, (enum sq_stmt)(SQ_SESSION_LIST + mask), &q, err);
	if (r < 0)
		return r;
	int rc = SQLITE_OK;
	if (f->before_id) {
		/* the page boundary and the page in one read transaction */
		r = sq_begin(c, false, &tx, err);
		if (r < 0)
			return r;
		r = sq_prepare(c, SQ_SESSION_CREATED, &before, err);
		if (r < 0)
			return r;
		int64_t created = 0;
		rc = sq_bind_text(before, 1, f->before_id);
		if (rc == SQLITE_OK)
			rc = step_int(before, &created);
		if (rc == SQLITE_DONE)
			return store_no_session(f->before_id, err);
		if (rc != SQLITE_ROW)
			return sq_error(c, rc, err, "list sessions");
		rc = sqlite3_bind_int64(q, 4, created);
		if (rc == SQLITE_OK)
			rc = sq_bind_text(q, 5, f->before_id);
	}
	if (rc == SQLITE_OK && f->state >= 0)
		rc = sq_bind_text(q, 1, session_state_name(f->state));
	if (rc == SQLITE_OK && f->user)
		rc = sq_bind_text(q, 2, f->user);
	if (rc == SQLITE_OK && f->repo_id)
		rc = sq_bind_text(q, 3, f->repo_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(q, 6, limit);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "list sessions");
	void *v = NULL;
	size_t n = 0;
	r = sq_collect(c, q, &store_session_record, &v, &n, "list sessions",
		       err);
	if (r < 0)
		return r;
	if (tx) {
		r = sq_commit(&tx, err);
		if (r < 0) {
			store_sessions_free(v, n);
			return r;
		}
	}
	*out = v;
	*n_out = n;
	return 0;
}

int sq_session_list_state(struct store *st, enum session_state state,
			  struct store_session **out, size_t *n_out,
			  struct wr_error **err)
{
	const char *name = session_state_name(state);
	if (!name)
		return wr_error_input(err, EINVAL, "list sessions: bad state");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SESSION_LIST_STATE, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, name);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "list %s sessions", name);
	void *v = NULL;
	size_t n = 0;
	r = sq_collect(c, q, &store_session_record, &v, &n,
		       "list sessions by state", err);
	if (r == 0) {
		*out = v;
		*n_out = n;
	}
	return r;
}

int sq_session_count(struct store *st, int64_t *counts, struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SESSION_COUNT, &q, err);
	if (r < 0)
		return r;
	int64_t n[SESSION_STATE_MAX] = {0};
	int rc;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(q, 0);
		int state = session_state_parse(name);
		if (state < 0)
			return wr_error_set(err, EIO,
					    "count sessions: unknown state "
					    "'%s'",
					    name ? name : "");
		n[state] = sqlite3_column_int64(q, 1);
	}
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "count sessions");
	memcpy(counts, n, sizeof(n));
	return 0;
}

/* The state and lease epoch of session id (-ENOENT if there is none). */
static int read_state(struct sq_conn *c, const char *id, int *state,
		      int64_t *epoch, struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SESSION_STATE, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return store_no_session(id, err);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "session %s: read state", id);
	*state = session_state_parse((const char *)sqlite3_column_text(q, 0));
	*epoch = sqlite3_column_int64(q, 1);
	return 0;
}

/* Refuses a write carrying a stale epoch (0: no check) to session id. */
static int fence(struct sq_conn *c, const char *id, int64_t epoch,
		 struct wr_error **err)
{
	if (epoch == 0)
		return 0;
	int state = -1;
	int64_t cur = 0;
	int r = read_state(c, id, &state, &cur, err);
	return r < 0 ? r : store_epoch_check(id, epoch, cur, err);
}

int64_t sq_lease_end(struct sq_conn *c, const char *id, bool advance,
		     struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_LEASE_END, &q, err);
	if (r < 0)
		return r;
	int64_t epoch = 0;
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(q, 2, advance);
	if (rc == SQLITE_OK)
		rc = step_int(q, &epoch);
	if (rc == SQLITE_DONE)
		return store_no_session(id, err);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "session %s: end its lease", id);
	return epoch;
}

int64_t sq_transition_in(struct sq_conn *c, const char *id, int from,
			 enum session_state to,
			 const struct store_session_update *upd, json_t *data,
			 int64_t now, struct wr_error **err)
{
	_cleanup_free_ char *text = NULL;
	int cur = -1;
	int64_t epoch = 0;
	int r = read_state(c, id, &cur, &epoch, err);
	if (r == 0)
		r = store_epoch_check(id, upd->epoch, epoch, err);
	if (r == 0)
		r = store_transition_allowed(id, cur, from, to, err);
	if (r < 0)
		return r;
	int64_t queue_seq = 0;
	if (upd->requeue) {
		r = next_queue_seq(c, &queue_seq, err);
		if (r < 0)
			return r;
	}
	r = apply_update(c, id, session_state_name(to), upd, queue_seq, now,
			 err);
	/* nothing more happens to it: no worker holds it any more */
	if (r == 0 && session_state_terminal(to)) {
		int64_t e = sq_lease_end(c, id, false, err);
		r = e < 0 ? (int)e : 0;
	}
	if (r == 0)
		r = store_transition_text(id, data, cur, &text, err);
	if (r < 0)
		return r;
	return sq_append_event(c, id, EVENT_STATE, text, now, err);
}

int64_t sq_session_transition(struct store *st, const char *id, int from,
			      enum session_state to,
			      const struct store_session_update *upd,
			      const char *extra_json, struct wr_error **err)
{
	static const struct store_session_update keep =
	    STORE_SESSION_UPDATE_INIT;
	_cleanup_(json_decrefp) json_t *data = NULL;
	_cleanup_(sq_releasep) struct sq_conn *c = NULL;
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;

	if (!upd)
		upd = &keep;
	int r =
	    store_transition_data(id, from, to, upd, extra_json, &data, err);
	if (r < 0)
		return r;
	int64_t now = store_now_ms();
	c = sq_writer(sq_of(st));
	r = sq_begin(c, true, &tx, err);
	if (r < 0)
		return r;
	int64_t seq = sq_transition_in(c, id, from, to, upd, data, now, err);
	if (seq < 0)
		return seq;
	r = sq_commit(&tx, err);
	if (r == 0)
		sq_written(st);
	return r < 0 ? r : seq;
}

int sq_session_update(struct store *st, const char *id,
		      const struct store_session_update *upd,
		      struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = NULL;
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;

	if (!upd)
		return wr_error_input(err, EINVAL, "update session: no update");
	if (!store_id_ok(id))
		return store_no_session(id, err);
	int64_t now = store_now_ms();
	c = sq_writer(sq_of(st));
	int r = sq_begin(c, true, &tx, err);
	if (r == 0)
		r = fence(c, id, upd->epoch, err);
	if (r < 0)
		return r;
	int64_t queue_seq = 0;
	if (upd->requeue) {
		r = next_queue_seq(c, &queue_seq, err);
		if (r < 0)
			return r;
	}
	r = apply_update(c, id, NULL, upd, queue_seq, now, err);
	if (r < 0)
		return r;
	r = sq_commit(&tx, err);
	if (r == 0)
		sq_written(st);
	return r;
}

uint64_t sq_session_writes(struct store *st)
{
	return atomic_load(&sq_of(st)->session_writes);
}

/* ---- events ------------------------------------------------------------- */

int64_t sq_event_append(struct store *st, const char *session_id,
			enum event_kind kind, const char *data_json,
			struct wr_error **err)
{
	return sq_event_append_fenced(st, session_id, 0, kind, data_json, err);
}

int64_t sq_event_append_fenced(struct store *st, const char *session_id,
			       int64_t epoch, enum event_kind kind,
			       const char *data_json, struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = NULL;
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;

	int r = store_event_check(session_id, kind, &data_json, err);
	if (r < 0)
		return r;
	int64_t now = store_now_ms();
	c = sq_writer(sq_of(st));
	r = sq_begin(c, true, &tx, err);
	if (r == 0)
		r = fence(c, session_id, epoch, err);
	if (r < 0)
		return r;
	int64_t seq = sq_append_event(c, session_id, kind, data_json, now, err);
	if (seq < 0)
		return seq;
	r = sq_commit(&tx, err);
	return r < 0 ? r : seq;
}

int sq_event_list(struct store *st, const char *session_id, int64_t after_seq,
		  int limit, struct store_event **out, size_t *n_out,
		  struct wr_error **err)
{
	if (!store_id_ok(session_id))
		return store_no_session(session_id, err);
	if (limit <= 0 || limit > STORE_EVENT_LIST_MAX)
		limit = STORE_EVENT_LIST_MAX;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_EVENT_LIST, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, session_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 2, after_seq);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(q, 3, limit);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "list events of %s", session_id);
	void *v = NULL;
	size_t n = 0;
	r = sq_collect(c, q, &store_event_record, &v, &n, "list events", err);
	if (r < 0)
		return r;
	r = empty_or_unknown(c, session_id, n, err);
	if (r < 0)
		return r;
	*out = v;
	*n_out = n;
	return 0;
}

/* ---- messages ----------------------------------------------------------- */

int64_t sq_message_add(struct store *st, const char *session_id,
		       const char *user, const char *text,
		       struct wr_error **err)
{
	_cleanup_(json_decrefp) json_t *data = NULL;
	_cleanup_free_ char *data_text = NULL;
	_cleanup_(sq_releasep) struct sq_conn *c = NULL;
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;

	int r = store_message_data(session_id, user, text, &data, err);
	if (r < 0)
		return r;
	int64_t now = store_now_ms();
	c = sq_writer(sq_of(st));
	r = sq_begin(c, true, &tx, err);
	if (r < 0)
		return r;
	r = sq_prepare(c, SQ_MESSAGE_INSERT, &q, err);
	if (r < 0)
		return r;
	int64_t id = 0;
	int rc = sq_bind_text(q, 1, session_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, user);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 3, text);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 4, now);
	if (rc == SQLITE_OK)
		rc = step_int(q, &id);
	if (sq_errno(rc) == -ENOENT)
		return store_no_session(session_id, err);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "add message to %s", session_id);
	r = store_message_text(session_id, data, id, &data_text, err);
	if (r < 0)
		return r;
	int64_t seq =
	    sq_append_event(c, session_id, EVENT_MESSAGE, data_text, now, err);
	if (seq < 0)
		return seq;
	r = sq_commit(&tx, err);
	return r < 0 ? r : id;
}

int sq_message_pending(struct store *st, const char *session_id,
		       struct store_message **out, size_t *n_out,
		       struct wr_error **err)
{
	if (!store_id_ok(session_id))
		return store_no_session(session_id, err);
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_MESSAGE_PENDING, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, session_id);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "pending messages of %s",
				session_id);
	void *v = NULL;
	size_t n = 0;
	r = sq_collect(c, q, &store_message_record, &v, &n, "pending messages",
		       err);
	if (r < 0)
		return r;
	r = empty_or_unknown(c, session_id, n, err);
	if (r < 0)
		return r;
	*out = v;
	*n_out = n;
	return 0;
}

int sq_message_consume(struct store *st, int64_t message_id, int turn,
		       struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = NULL;
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *exists = NULL;

	int r = store_consume_check(message_id, turn, err);
	if (r < 0)
		return r;
	c = sq_writer(sq_of(st));
	r = sq_begin(c, true, &tx, err);
	if (r < 0)
		return r;
	r = sq_prepare(c, SQ_MESSAGE_CONSUME, &q, err);
	if (r < 0)
		return r;
	int rc = sqlite3_bind_int64(q, 1, message_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(q, 2, turn);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "consume message %lld",
				(long long)message_id);
	if (sqlite3_changes(c->db) == 0) {
		/* unknown, or a turn took it already */
		r = sq_prepare(c, SQ_MESSAGE_EXISTS, &exists, err);
		if (r < 0)
			return r;
		int64_t one = 0;
		rc = sqlite3_bind_int64(exists, 1, message_id);
		if (rc == SQLITE_OK)
			rc = step_int(exists, &one);
		if (rc == SQLITE_ROW || rc == SQLITE_DONE)
			return store_consume_refused(message_id,
						     rc == SQLITE_ROW, err);
		return sq_error(c, rc, err, "consume message %lld",
				(long long)message_id);
	}
	return sq_commit(&tx, err);
}

/* ---- artifacts ---------------------------------------------------------- */

int sq_artifact_add(struct store *st, const char *session_id,
		    const struct store_artifact *a, struct wr_error **err)
{
	int r = store_artifact_check(session_id, a, err);
	if (r < 0)
		return r;
	int64_t created = a->created_ms ? a->created_ms : store_now_ms();
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	r = sq_prepare(c, SQ_ARTIFACT_ADD, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, session_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, a->name);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 3, a->path);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 4, a->media_type);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 5, a->size);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 6, created);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return 0;
	if (sq_errno(rc) == -EEXIST)
		return wr_error_input(err, EEXIST,
				      "session %s has an artifact %s",
				      session_id, a->name);
	if (sq_errno(rc) == -ENOENT)
		return store_no_session(session_id, err);
	return sq_error(c, rc, err, "add artifact %s to %s", a->name,
			session_id);
}

int sq_artifact_list(struct store *st, const char *session_id,
		     struct store_artifact **out, size_t *n_out,
		     struct wr_error **err)
{
	if (!store_id_ok(session_id))
		return store_no_session(session_id, err);
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_ARTIFACT_LIST, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, session_id);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "list artifacts of %s", session_id);
	void *v = NULL;
	size_t n = 0;
	r = sq_collect(c, q, &store_artifact_record, &v, &n, "list artifacts",
		       err);
	if (r < 0)
		return r;
	r = empty_or_unknown(c, session_id, n, err);
	if (r < 0)
		return r;
	*out = v;
	*n_out = n;
	return 0;
}

/* ---- the audit chain ---------------------------------------------------- */

/* The last record's seq and hash (0 and "" for an empty chain). */
static int audit_head(struct sq_conn *c, const char *id, int64_t *seq,
		      char hash[STORE_AUDIT_HASH_LEN + 1],
		      struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_AUDIT_HEAD, &q, err);
	if (r < 0)
		return r;
	*seq = 0;
	hash[0] = '\0';
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "audit chain of %s: its head", id);
	*seq = sqlite3_column_int64(q, 0);
	const char *h = (const char *)sqlite3_column_text(q, 1);
	snprintf(hash, STORE_AUDIT_HASH_LEN + 1, "%s", h ? h : "");
	return 0;
}

static int audit_insert(struct sq_conn *c, const char *id,
			const struct store_audit_record *rec,
			struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_AUDIT_INSERT, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 2, rec->seq);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 3, rec->hash);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 4, rec->record);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "audit record %lld of %s",
				(long long)rec->seq, id);
	return 0;
}

/* Opens the write transaction an audit write runs in: the session known,
 * its epoch checked. BEGIN IMMEDIATE takes the database's write lock
 * before the head is read, so that no other connection (another
 * process's) reads the same head and appends after it too. */
static int audit_begin(struct sq_conn *c, const char *id, int64_t epoch,
		       struct sq_conn **tx, struct wr_error **err)
{
	if (!store_id_ok(id))
		return store_no_session(id, err);
	int state = -1;
	int64_t cur = 0;
	int r = sq_begin(c, true, tx, err);
	if (r == 0)
		r = read_state(c, id, &state, &cur, err);
	if (r == 0)
		r = store_epoch_check(id, epoch, cur, err);
	return r;
}

int64_t sq_audit_append(struct store *st, const char *session_id, int64_t epoch,
			store_audit_build_fn build, void *ctx,
			struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	_cleanup_(store_audit_record_clear) struct store_audit_record rec = {0};

	int r = audit_begin(c, session_id, epoch, &tx, err);
	int64_t prev_seq = 0;
	char prev_hash[STORE_AUDIT_HASH_LEN + 1];
	if (r == 0)
		r = audit_head(c, session_id, &prev_seq, prev_hash, err);
	if (r == 0)
		r = build(ctx, prev_seq, prev_hash, &rec, err);
	if (r == 0)
		r = store_audit_record_check(session_id, prev_seq + 1, &rec,
					     err);
	if (r == 0)
		r = audit_insert(c, session_id, &rec, err);
	if (r == 0)
		r = sq_commit(&tx, err);
	return r < 0 ? r : rec.seq;
}

int sq_audit_import(struct store *st, const char *session_id,
		    const struct store_audit_record *v, size_t n,
		    struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;

	int r = audit_begin(c, session_id, 0, &tx, err);
	int64_t head = 0;
	char hash[STORE_AUDIT_HASH_LEN + 1];
	if (r == 0)
		r = audit_head(c, session_id, &head, hash, err);
	if (r == 0 && head > 0)
		r = wr_error_set(err, EEXIST,
				 "audit chain of %s: the store has %lld "
				 "record(s) already",
				 session_id, (long long)head);
	for (size_t i = 0; r == 0 && i < n; i++) {
		r = store_audit_record_check(session_id, (int64_t)i + 1, &v[i],
					     err);
		if (r == 0)
			r = audit_insert(c, session_id, &v[i], err);
	}
	if (r == 0)
		r = sq_commit(&tx, err);
	return r;
}

int sq_audit_list(struct store *st, const char *session_id, int64_t after_seq,
		  int limit, struct store_audit_record **out, size_t *n_out,
		  struct wr_error **err)
{
	if (!store_id_ok(session_id))
		return store_no_session(session_id, err);
	if (limit <= 0 || limit > STORE_AUDIT_LIST_MAX)
		limit = STORE_AUDIT_LIST_MAX;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_AUDIT_LIST, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, session_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 2, after_seq);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(q, 3, limit);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "audit chain of %s", session_id);
	struct store_audit_record *v = NULL;
	size_t n = 0;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		struct store_audit_record *grown =
		    wr_realloc(v, (n + 1) * sizeof(*v));
		if (!grown) {
			store_audit_records_free(v, n);
			return wr_error_set(err, ENOMEM, "audit chain of %s",
					    session_id);
		}
		v = grown;
		memset(&v[n], 0, sizeof(v[n]));
		v[n].seq = sqlite3_column_int64(q, 0);
		const char *h = (const char *)sqlite3_column_text(q, 1);
		snprintf(v[n].hash, sizeof(v[n].hash), "%s", h ? h : "");
		/* a NULL record (an edit) reads as empty: verify names it */
		if (sq_column_strdup(q, 2, &v[n].record) < 0 ||
		    (!v[n].record && !(v[n].record = wr_strdup("")))) {
			store_audit_records_free(v, n);
			return wr_error_set(err, ENOMEM, "audit chain of %s",
					    session_id);
		}
		n++;
	}
	if (rc != SQLITE_DONE) {
		store_audit_records_free(v, n);
		return sq_error(c, rc, err, "audit chain of %s", session_id);
	}
	r = empty_or_unknown(c, session_id, n, err);
	if (r < 0)
		return r;
	*out = v;
	*n_out = n;
	return 0;
}

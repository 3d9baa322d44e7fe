/* pg_session.c - the PostgreSQL backend's sessions, events, messages and
 * artifacts.
 *
 * Writes that touch more than one row run between BEGIN and COMMIT on one
 * connection: a session with its first message and event 1, a state
 * change and its event, a message and its event. Each such transaction
 * that changes an existing session first locks its row (PG_SESSION_LOCK),
 * so that what it read (the state a transition checks) still holds when
 * it commits, and takes the queue counter only after it. An event alone is
 * one statement (PG_EVENT_APPEND): its seq comes from the session's row,
 * under the row's lock, in the statement that inserts it (pg.c). */
#include "store/pg_internal.h"

#include "util/alloc.h"

#include "util/cleanup.h"

#include <errno.h>
#include <jansson.h>
#include <string.h>

/* ---- helpers inside a call ---------------------------------------------- */

/* 1 if session id exists, 0 if not, or -errno. */
static int session_exists(struct pg_conn *c, const char *id,
			  struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	int r = pg_exec(c, PG_SESSION_EXISTS, &p, &res, err,
			"look up session %s", id);
	return r < 0 ? r : PQntuples(res) > 0;
}

/* An empty list of a session's records: is it the session that is
 * missing? 0 or -ENOENT (or -errno). */
static int empty_or_unknown(struct pg_conn *c, const char *id, size_t n,
			    struct wr_error **err)
{
	if (n > 0)
		return 0;
	int r = session_exists(c, id, err);
	if (r < 0)
		return r;
	return r ? 0 : store_no_session(id, err);
}

/* Locks session id's row to the end of the transaction, and reads its
 * state (*state < 0 for one this build does not know) and lease epoch;
 * -ENOENT if there is no such session. Then refuses a write carrying a
 * stale epoch (0: no check) with -ESTALE. */
static int lock_session(struct pg_conn *c, const char *id, int64_t epoch,
			int *state, struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	int r = pg_exec(c, PG_SESSION_LOCK, &p, &res, err, "session %s", id);
	if (r < 0)
		return r;
	if (PQntuples(res) < 1)
		return store_no_session(id, err);
	*state = session_state_parse(PQgetvalue(res, 0, 0));
	return store_epoch_check(id, epoch, pg_get_int64(res, 0, 1), err);
}

static int next_queue_seq(struct pg_conn *c, int64_t *out,
			  struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	int r = pg_exec(c, PG_QUEUE_SEQ_NEXT, NULL, &res, err,
			"next queue position");
	if (r < 0)
		return r;
	if (PQntuples(res) < 1)
		return wr_error_set(err, EIO,
				    "next queue position: the "
				    "queue_seq counter is missing");
	*out = pg_get_int64(res, 0, 0);
	return 0;
}

/* Appends an event (in the caller's transaction, or its own); its seq or
 * -errno (-ENOENT: no such session). */
static int64_t append_event(struct pg_conn *c, const char *sid,
			    enum event_kind kind, const char *data, int64_t now,
			    struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, sid);
	pg_int(&p, now);
	pg_text(&p, event_kind_name(kind));
	pg_text(&p, data);
	int r = pg_run(c, PG_EVENT_APPEND, &p, &res);
	if (r < 0) {
		/* a duplicate seq would mean last_event_seq fell behind the
		 * events table: a database error, not the caller's */
		return pg_fail(c, res, r == -ENOMEM ? r : -EIO, err,
			       "append event to session %s", sid);
	}
	if (PQntuples(res) < 1)
		return store_no_session(sid, err);
	return pg_get_int64(res, 0, 0);
}

/* Applies upd (and the state, if state is not NULL; the queue position if
 * queue_seq > 0) to session id. */
static int apply_update(struct pg_conn *c, const char *id, const char *state,
			const struct store_session_update *upd,
			int64_t queue_seq, int64_t now, struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	pg_text(&p, state);
	pg_text(&p, upd->reason);
	pg_text(&p, upd->snapshot_id);
	pg_text(&p, upd->sandbox);
	pg_text(&p, upd->outcome_json);
	pg_opt_int(&p, upd->attempts >= 0, upd->attempts);
	pg_opt_int(&p, upd->turns >= 0, upd->turns);
	pg_opt_int(&p, upd->exit_code != INT32_MIN, upd->exit_code);
	pg_opt_int(&p, queue_seq > 0, queue_seq);
	pg_opt_int(&p, upd->started_ms != 0, upd->started_ms);
	pg_opt_int(&p, upd->finished_ms != 0,
		   upd->finished_ms < 0 ? 0 : upd->finished_ms);
	pg_int(&p, now);
	int r = pg_exec(c, PG_SESSION_APPLY, &p, &res, err, "update session %s",
			id);
	if (r < 0)
		return r;
	if (pg_changes(res) == 0)
		return store_no_session(id, err);
	return 0;
}

/* After a commit that wrote a session's record: caches of session
 * records (store_ops.session_writes) know theirs may be stale. Only this
 * process's writes are counted (see store.h). */
void pg_written(struct store *st)
{
	atomic_fetch_add(&pg_of(st)->session_writes, 1);
}

/* ---- sessions ----------------------------------------------------------- */

static int insert_session(struct pg_conn *c, const struct store_session *s,
			  int64_t queue_seq, int64_t created,
			  struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, s->id);
	pg_text(&p, s->repo_id);
	pg_text(&p, s->user);
	pg_text(&p, s->prompt);
	pg_text(&p, s->ref);
	pg_text(&p, s->agent_json);
	pg_text(&p, s->limits_json);
	pg_text(&p, session_state_name(SESSION_QUEUED));
	pg_int(&p, queue_seq);
	pg_int(&p, created);
	int r = pg_run(c, PG_SESSION_INSERT, &p, &res);
	if (r == -EEXIST)
		return wr_error_input(err, EEXIST, "session %s exists", s->id);
	if (r == -ENOENT)
		return wr_error_input(err, ENOENT,
				      "create session %s: no repository %s",
				      s->id, s->repo_id);
	if (r < 0)
		return pg_fail(c, res, r, err, "create session %s", s->id);
	return 0;
}

/* A pending message; its id. */
static int insert_message(struct pg_conn *c, const char *sid, const char *user,
			  const char *text, int64_t now, int64_t *id,
			  struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, sid);
	pg_text(&p, user);
	pg_text(&p, text);
	pg_int(&p, now);
	int r = pg_run(c, PG_MESSAGE_INSERT, &p, &res);
	if (r == -ENOENT)
		return store_no_session(sid, err);
	if (r < 0)
		return pg_fail(c, res, r, err, "add message to %s", sid);
	*id = pg_get_int64(res, 0, 0);
	return 0;
}

int pg_session_create(struct store *st, const struct store_session *s,
		      struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;

	int r = store_session_check(s, err);
	if (r < 0)
		return r;
	int64_t created = s->created_ms ? s->created_ms : store_now_ms();
	r = pg_acquire(pg_of(st), &c, err);
	if (r < 0)
		return r;
	r = pg_begin(c, &tx, err);
	if (r < 0)
		return r;
	int64_t queue_seq = 0, message_id = 0;
	r = next_queue_seq(c, &queue_seq, err);
	if (r == 0)
		r = insert_session(c, s, queue_seq, created, err);
	/* the first prompt is a pending message: turn 1 consumes it */
	if (r == 0)
		r = insert_message(c, s->id, s->user, s->prompt, created,
				   &message_id, err);
	if (r < 0)
		return r;
	int64_t seq = append_event(c, s->id, EVENT_STATE,
				   "{\"state\":\"queued\"}", created, err);
	if (seq < 0)
		return (int)seq;
	r = pg_commit(&tx, err);
	if (r == 0)
		pg_written(st);
	return r;
}

int pg_session_get(struct store *st, const char *id, struct store_session *out,
		   struct wr_error **err)
{
	if (!store_id_ok(id))
		return store_no_session(id, err);
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	int r = pg_call(pg_of(st), &c, PG_SESSION_GET, &p, &res, err,
			"get session %s", id);
	if (r < 0)
		return r;
	r = pg_get_one(res, &store_session_record, out, "get session", err);
	if (r == 0)
		return store_no_session(id, err);
	return r < 0 ? r : 0;
}

int pg_session_list(struct store *st, const struct store_session_filter *f,
		    struct store_session **out, size_t *n_out,
		    struct wr_error **err)
{
	int limit = 0;
	int r = store_filter_check(f, &limit, err);
	if (r < 0)
		return r;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, f->state >= 0 ? session_state_name(f->state) : NULL);
	pg_text(&p, f->user);
	pg_text(&p, f->repo_id);
	pg_text(&p, f->before_id);
	pg_int(&p, limit);
	r = pg_call(pg_of(st), &c, PG_SESSION_LIST, &p, &res, err,
		    "list sessions");
	if (r < 0)
		return r;
	struct store_session *v = NULL;
	size_t n = 0;
	r = PG_COLLECT(res, &store_session_record, &v, &n, "list sessions",
		       err);
	/* no page after an unknown session: it is the boundary that is
	 * wrong */
	if (r == 0 && f->before_id)
		r = empty_or_unknown(c, f->before_id, n, err);
	if (r < 0) {
		store_sessions_free(v, n);
		return r;
	}
	*out = v;
	*n_out = n;
	return 0;
}

int pg_session_list_state(struct store *st, enum session_state state,
			  struct store_session **out, size_t *n_out,
			  struct wr_error **err)
{
	const char *name = session_state_name(state);
	if (!name)
		return wr_error_input(err, EINVAL, "list sessions: bad state");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, name);
	int r = pg_call(pg_of(st), &c, PG_SESSION_LIST_STATE, &p, &res, err,
			"list %s sessions", name);
	if (r < 0)
		return r;
	return PG_COLLECT(res, &store_session_record, out, n_out,
			  "list sessions by state", err);
}

int pg_session_count(struct store *st, int64_t *counts, struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	int r = pg_call(pg_of(st), &c, PG_SESSION_COUNT, NULL, &res, err,
			"count sessions");
	if (r < 0)
		return r;
	int64_t n[SESSION_STATE_MAX] = {0};
	for (int i = 0; i < PQntuples(res); i++) {
		const char *name = PQgetvalue(res, i, 0);
		int state = session_state_parse(name);
		if (state < 0)
			return wr_error_set(err, EIO,
					    "count sessions: unknown state "
					    "'%s'",
					    name);
		n[state] = pg_get_int64(res, i, 1);
	}
	memcpy(counts, n, sizeof(n));
	return 0;
}

int64_t pg_lease_end(struct pg_conn *c, const char *id, bool advance,
		     struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	pg_int(&p, advance);
	int r = pg_exec(c, PG_LEASE_END, &p, &res, err,
			"session %s: end its lease", id);
	if (r < 0)
		return r;
	if (PQntuples(res) < 1)
		return store_no_session(id, err);
	return pg_get_int64(res, 0, 0);
}

int64_t pg_transition_in(struct pg_conn *c, const char *id, int from,
			 enum session_state to,
			 const struct store_session_update *upd, json_t *data,
			 int64_t now, struct wr_error **err)
{
	_cleanup_free_ char *text = NULL;
	int cur = -1;
	int r = lock_session(c, id, upd->epoch, &cur, err);
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
		int64_t e = pg_lease_end(c, id, false, err);
		r = e < 0 ? (int)e : 0;
	}
	if (r == 0)
		r = store_transition_text(id, data, cur, &text, err);
	if (r < 0)
		return r;
	return append_event(c, id, EVENT_STATE, text, now, err);
}

int64_t pg_session_transition(struct store *st, const char *id, int from,
			      enum session_state to,
			      const struct store_session_update *upd,
			      const char *extra_json, struct wr_error **err)
{
	static const struct store_session_update keep =
	    STORE_SESSION_UPDATE_INIT;
	_cleanup_(json_decrefp) json_t *data = NULL;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;

	if (!upd)
		upd = &keep;
	int r = store_epoch_lost(id, upd->epoch, err);
	if (r < 0)
		return r;
	r = store_transition_data(id, from, to, upd, extra_json, &data, err);
	if (r < 0)
		return r;
	int64_t now = store_now_ms();
	r = pg_acquire(pg_of(st), &c, err);
	if (r == 0)
		r = pg_begin(c, &tx, err);
	if (r < 0)
		return r;
	int64_t seq = pg_transition_in(c, id, from, to, upd, data, now, err);
	if (seq < 0)
		return seq;
	r = pg_commit(&tx, err);
	if (r == 0)
		pg_written(st);
	return r < 0 ? r : seq;
}

int pg_session_update(struct store *st, const char *id,
		      const struct store_session_update *upd,
		      struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;

	if (!upd)
		return wr_error_input(err, EINVAL, "update session: no update");
	if (!store_id_ok(id))
		return store_no_session(id, err);
	int64_t now = store_now_ms();
	int r = store_epoch_lost(id, upd->epoch, err);
	if (r < 0)
		return r;
	r = pg_acquire(pg_of(st), &c, err);
	if (r < 0)
		return r;
	r = pg_begin(c, &tx, err);
	if (r < 0)
		return r;
	int64_t queue_seq = 0;
	if (upd->requeue || upd->epoch) {
		/* the session's row before the counter (pg.c); the fence
		 * checked under its lock */
		int cur = -1;
		r = lock_session(c, id, upd->epoch, &cur, err);
		if (r == 0 && upd->requeue)
			r = next_queue_seq(c, &queue_seq, err);
		if (r < 0)
			return r;
	}
	r = apply_update(c, id, NULL, upd, queue_seq, now, err);
	if (r < 0)
		return r;
	r = pg_commit(&tx, err);
	if (r == 0)
		pg_written(st);
	return r;
}

/* ---- events ------------------------------------------------------------- */

int64_t pg_event_append(struct store *st, const char *session_id,
			enum event_kind kind, const char *data_json,
			struct wr_error **err)
{
	return pg_event_append_fenced(st, session_id, 0, kind, data_json, err);
}

int64_t pg_event_append_fenced(struct store *st, const char *session_id,
			       int64_t epoch, enum event_kind kind,
			       const char *data_json, struct wr_error **err)
{
	int r = store_event_check(session_id, kind, &data_json, err);
	if (r == 0)
		r = store_epoch_lost(session_id, epoch, err);
	if (r < 0)
		return r;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;
	r = pg_acquire(pg_of(st), &c, err);
	if (r < 0)
		return r;
	/* unfenced, one statement: its own transaction */
	if (epoch == 0)
		return append_event(c, session_id, kind, data_json,
				    store_now_ms(), err);
	/* fenced: the check under the row's lock, then the event */
	int cur = -1;
	r = pg_begin(c, &tx, err);
	if (r == 0)
		r = lock_session(c, session_id, epoch, &cur, err);
	if (r < 0)
		return r;
	int64_t seq =
	    append_event(c, session_id, kind, data_json, store_now_ms(), err);
	if (seq < 0)
		return seq;
	r = pg_commit(&tx, err);
	return r < 0 ? r : seq;
}

int pg_event_list(struct store *st, const char *session_id, int64_t after_seq,
		  int limit, struct store_event **out, size_t *n_out,
		  struct wr_error **err)
{
	if (!store_id_ok(session_id))
		return store_no_session(session_id, err);
	if (limit <= 0 || limit > STORE_EVENT_LIST_MAX)
		limit = STORE_EVENT_LIST_MAX;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, session_id);
	pg_int(&p, after_seq);
	pg_int(&p, limit);
	int r = pg_call(pg_of(st), &c, PG_EVENT_LIST, &p, &res, err,
			"list events of %s", session_id);
	if (r < 0)
		return r;
	struct store_event *v = NULL;
	size_t n = 0;
	r = PG_COLLECT(res, &store_event_record, &v, &n, "list events", err);
	if (r == 0)
		r = empty_or_unknown(c, session_id, n, err);
	if (r < 0) {
		store_events_free(v, n);
		return r;
	}
	*out = v;
	*n_out = n;
	return 0;
}

/* ---- messages ----------------------------------------------------------- */

int64_t pg_message_add(struct store *st, const char *session_id,
		       const char *user, const char *text,
		       struct wr_error **err)
{
	_cleanup_(json_decrefp) json_t *data = NULL;
	_cleanup_free_ char *data_text = NULL;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;

	int r = store_message_data(session_id, user, text, &data, err);
	if (r < 0)
		return r;
	int64_t now = store_now_ms();
	r = pg_acquire(pg_of(st), &c, err);
	if (r < 0)
		return r;
	r = pg_begin(c, &tx, err);
	if (r < 0)
		return r;
	int64_t id = 0;
	int cur = -1;
	r = lock_session(c, session_id, 0, &cur, err);
	if (r == 0)
		r = insert_message(c, session_id, user, text, now, &id, err);
	if (r == 0)
		r = store_message_text(session_id, data, id, &data_text, err);
	if (r < 0)
		return r;
	int64_t seq =
	    append_event(c, session_id, EVENT_MESSAGE, data_text, now, err);
	if (seq < 0)
		return seq;
	r = pg_commit(&tx, err);
	return r < 0 ? r : id;
}

int pg_message_pending(struct store *st, const char *session_id,
		       struct store_message **out, size_t *n_out,
		       struct wr_error **err)
{
	if (!store_id_ok(session_id))
		return store_no_session(session_id, err);
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, session_id);
	int r = pg_call(pg_of(st), &c, PG_MESSAGE_PENDING, &p, &res, err,
			"pending messages of %s", session_id);
	if (r < 0)
		return r;
	struct store_message *v = NULL;
	size_t n = 0;
	r = PG_COLLECT(res, &store_message_record, &v, &n, "pending messages",
		       err);
	if (r == 0)
		r = empty_or_unknown(c, session_id, n, err);
	if (r < 0) {
		store_messages_free(v, n);
		return r;
	}
	*out = v;
	*n_out = n;
	return 0;
}

int pg_message_consume(struct store *st, int64_t message_id, int turn,
		       struct wr_error **err)
{
	int r = store_consume_check(message_id, turn, err);
	if (r < 0)
		return r;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	_cleanup_(pg_clearp) PGresult *exists = NULL;
	struct pg_params p = {0};
	pg_int(&p, message_id);
	pg_int(&p, turn);
	r = pg_call(pg_of(st), &c, PG_MESSAGE_CONSUME, &p, &res, err,
		    "consume message %lld", (long long)message_id);
	if (r < 0 || pg_changes(res) > 0)
		return r;
	/* nothing written: unknown, or a turn took it already (a read
	 * after the write, for the error's words only) */
	p = (struct pg_params){0};
	pg_int(&p, message_id);
	r = pg_exec(c, PG_MESSAGE_EXISTS, &p, &exists, err,
		    "consume message %lld", (long long)message_id);
	if (r < 0)
		return r;
	return store_consume_refused(message_id, PQntuples(exists) > 0, err);
}

/* ---- artifacts ---------------------------------------------------------- */

int pg_artifact_add(struct store *st, const char *session_id,
		    const struct store_artifact *a, struct wr_error **err)
{
	int r = store_artifact_check(session_id, a, err);
	if (r < 0)
		return r;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	r = pg_acquire(pg_of(st), &c, err);
	if (r < 0)
		return r;
	struct pg_params p = {0};
	pg_text(&p, session_id);
	pg_text(&p, a->name);
	pg_text(&p, a->path);
	pg_text(&p, a->media_type);
	pg_int(&p, a->size);
	pg_int(&p, a->created_ms ? a->created_ms : store_now_ms());
	r = pg_run(c, PG_ARTIFACT_ADD, &p, &res);
	if (r == -EEXIST)
		return wr_error_input(err, EEXIST,
				      "session %s has an artifact %s",
				      session_id, a->name);
	if (r == -ENOENT)
		return store_no_session(session_id, err);
	if (r < 0)
		return pg_fail(c, res, r, err, "add artifact %s to %s", a->name,
			       session_id);
	return 0;
}

int pg_artifact_list(struct store *st, const char *session_id,
		     struct store_artifact **out, size_t *n_out,
		     struct wr_error **err)
{
	if (!store_id_ok(session_id))
		return store_no_session(session_id, err);
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, session_id);
	int r = pg_call(pg_of(st), &c, PG_ARTIFACT_LIST, &p, &res, err,
			"list artifacts of %s", session_id);
	if (r < 0)
		return r;
	struct store_artifact *v = NULL;
	size_t n = 0;
	r = PG_COLLECT(res, &store_artifact_record, &v, &n, "list artifacts",
		       err);
	if (r == 0)
		r = empty_or_unknown(c, session_id, n, err);
	if (r < 0) {
		store_artifacts_free(v, n);
		return r;
	}
	*out = v;
	*n_out = n;
	return 0;
}

/* ---- the audit chain ---------------------------------------------------- */

/* The last record's seq and hash (0 and "" for an empty chain). */
static int audit_head(struct pg_conn *c, const char *id, int64_t *seq,
		      char hash[STORE_AUDIT_HASH_LEN + 1],
		      struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	int r = pg_exec(c, PG_AUDIT_HEAD, &p, &res, err,
			"audit chain of %s: its head", id);
	if (r < 0)
		return r;
	*seq = 0;
	hash[0] = '\0';
	if (PQntuples(res) < 1)
		return 0;
	*seq = pg_get_int64(res, 0, 0);
	snprintf(hash, STORE_AUDIT_HASH_LEN + 1, "%s", PQgetvalue(res, 0, 1));
	return 0;
}

static int audit_insert(struct pg_conn *c, const char *id,
			const struct store_audit_record *rec,
			struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	pg_int(&p, rec->seq);
	pg_text(&p, rec->hash);
	pg_text(&p, rec->record);
	return pg_exec(c, PG_AUDIT_INSERT, &p, &res, err,
		       "audit record %lld of %s", (long long)rec->seq, id);
}

/* Opens the transaction an audit write runs in: the session's row locked
 * (FOR UPDATE) before the chain's head is read, so that appenders on any
 * number of hosts take turns on one chain; its epoch checked. */
static int audit_begin(struct pg_conn *c, const char *id, int64_t epoch,
		       struct pg_conn **tx, struct wr_error **err)
{
	if (!store_id_ok(id))
		return store_no_session(id, err);
	int state = -1;
	int r = pg_begin(c, tx, err);
	if (r == 0)
		r = lock_session(c, id, epoch, &state, err);
	return r;
}

int64_t pg_audit_append(struct store *st, const char *session_id, int64_t epoch,
			store_audit_build_fn build, void *ctx,
			struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;
	_cleanup_(store_audit_record_clear) struct store_audit_record rec = {0};

	int r = store_epoch_lost(session_id, epoch, err);
	if (r == 0)
		r = pg_acquire(pg_of(st), &c, err);
	if (r == 0)
		r = audit_begin(c, session_id, epoch, &tx, err);
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
		r = pg_commit(&tx, err);
	return r < 0 ? r : rec.seq;
}

int pg_audit_import(struct store *st, const char *session_id,
		    const struct store_audit_record *v, size_t n,
		    struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;

	int r = pg_acquire(pg_of(st), &c, err);
	if (r == 0)
		r = audit_begin(c, session_id, 0, &tx, err);
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
		r = pg_commit(&tx, err);
	return r;
}

int pg_audit_list(struct store *st, const char *session_id, int64_t after_seq,
		  int limit, struct store_audit_record **out, size_t *n_out,
		  struct wr_error **err)
{
	if (!store_id_ok(session_id))
		return store_no_session(session_id, err);
	if (limit <= 0 || limit > STORE_AUDIT_LIST_MAX)
		limit = STORE_AUDIT_LIST_MAX;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, session_id);
	pg_int(&p, after_seq);
	pg_int(&p, limit);
	int r = pg_call(pg_of(st), &c, PG_AUDIT_LIST, &p, &res, err,
			"audit chain of %s", session_id);
	if (r < 0)
		return r;
	size_t n = (size_t)PQntuples(res);
	struct store_audit_record *v = wr_calloc(n + 1, sizeof(*v));
	if (!v)
		return wr_error_set(err, ENOMEM, "audit chain of %s",
				    session_id);
	for (size_t i = 0; i < n; i++) {
		v[i].seq = pg_get_int64(res, (int)i, 0);
		snprintf(v[i].hash, sizeof(v[i].hash), "%s",
			 PQgetvalue(res, (int)i, 1));
		v[i].record = wr_strdup(PQgetvalue(res, (int)i, 2));
		if (!v[i].record) {
			store_audit_records_free(v, i);
			return wr_error_set(err, ENOMEM, "audit chain of %s",
					    session_id);
		}
	}
	r = empty_or_unknown(c, session_id, n, err);
	if (r < 0) {
		store_audit_records_free(v, n);
		return r;
	}
	*out = v;
	*n_out = n;
	return 0;
}

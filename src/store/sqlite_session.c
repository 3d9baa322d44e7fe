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

#define LIST_DEFAULT 50 /* session_list with limit <= 0 */
#define LIST_MAX 500
#define USER_MAX 256
#define ARTIFACT_NAME_MAX 1024

/* ---- rows --------------------------------------------------------------- */

static int session_from_row(sqlite3_stmt *q, void *out)
{
	int state =
	    session_state_parse((const char *)sqlite3_column_text(q, 7));
	if (state < 0)
		return -EIO; /* not a state this build knows */
	struct store_session s = {
	    .state = state,
	    .attempts = sqlite3_column_int(q, 12),
	    .turns = sqlite3_column_int(q, 13),
	    .exit_code = sqlite3_column_int(q, 14),
	    .queue_seq = sqlite3_column_int64(q, 15),
	    .created_ms = sqlite3_column_int64(q, 16),
	    .updated_ms = sqlite3_column_int64(q, 17),
	    .started_ms = sqlite3_column_int64(q, 18),
	    .finished_ms = sqlite3_column_int64(q, 19),
	};
	sq_column_copy(q, 0, s.id, sizeof(s.id));
	sq_column_copy(q, 1, s.repo_id, sizeof(s.repo_id));
	if (sq_column_strdup(q, 2, &s.user) < 0 ||
	    sq_column_strdup(q, 3, &s.prompt) < 0 ||
	    sq_column_strdup(q, 4, &s.ref) < 0 ||
	    sq_column_strdup(q, 5, &s.agent_json) < 0 ||
	    sq_column_strdup(q, 6, &s.limits_json) < 0 ||
	    sq_column_strdup(q, 8, &s.reason) < 0 ||
	    sq_column_strdup(q, 9, &s.snapshot_id) < 0 ||
	    sq_column_strdup(q, 10, &s.sandbox) < 0 ||
	    sq_column_strdup(q, 11, &s.outcome_json) < 0) {
		store_session_clear(&s);
		return -ENOMEM;
	}
	*(struct store_session *)out = s;
	return 0;
}

static void session_clear(void *s)
{
	store_session_clear(s);
}

static int event_from_row(sqlite3_stmt *q, void *out)
{
	struct store_event e = {
	    .seq = sqlite3_column_int64(q, 0),
	    .time_ms = sqlite3_column_int64(q, 1),
	};
	if (sq_column_strdup(q, 2, &e.kind) < 0 ||
	    sq_column_strdup(q, 3, &e.data_json) < 0) {
		store_event_clear(&e);
		return -ENOMEM;
	}
	*(struct store_event *)out = e;
	return 0;
}

static void event_clear(void *e)
{
	store_event_clear(e);
}

static int message_from_row(sqlite3_stmt *q, void *out)
{
	struct store_message m = {
	    .id = sqlite3_column_int64(q, 0),
	    .turn = sqlite3_column_int(q, 3),
	    .created_ms = sqlite3_column_int64(q, 4),
	};
	if (sq_column_strdup(q, 1, &m.user) < 0 ||
	    sq_column_strdup(q, 2, &m.text) < 0) {
		store_message_clear(&m);
		return -ENOMEM;
	}
	*(struct store_message *)out = m;
	return 0;
}

static void message_clear(void *m)
{
	store_message_clear(m);
}

static int artifact_from_row(sqlite3_stmt *q, void *out)
{
	struct store_artifact a = {
	    .size = sqlite3_column_int64(q, 3),
	    .created_ms = sqlite3_column_int64(q, 4),
	};
	if (sq_column_strdup(q, 0, &a.name) < 0 ||
	    sq_column_strdup(q, 1, &a.path) < 0 ||
	    sq_column_strdup(q, 2, &a.media_type) < 0) {
		store_artifact_clear(&a);
		return -ENOMEM;
	}
	*(struct store_artifact *)out = a;
	return 0;
}

static void artifact_clear(void *a)
{
	store_artifact_clear(a);
}

/* ---- helpers inside a call ---------------------------------------------- */

static int no_session(const char *id, struct wr_error **err)
{
	return wr_error_absent(err, true, "no session %s", id ? id : "");
}

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
	return r ? 0 : no_session(id, err);
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
static int64_t append_event(struct sq_conn *c, const char *sid,
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
		return no_session(sid, err);
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
		return no_session(id, err);
	return 0;
}

/* Parses text, which must be a JSON object of at most
 * STORE_EVENT_DATA_MAX bytes, into *out (if out is not NULL). */
static int parse_json_object(const char *text, const char *what, json_t **out,
			     struct wr_error **err)
{
	if (strnlen(text, STORE_EVENT_DATA_MAX + 1) > STORE_EVENT_DATA_MAX)
		return wr_error_input(err, E2BIG, "%s: more than %d bytes",
				      what, STORE_EVENT_DATA_MAX);
	json_error_t je;
	_cleanup_(json_decrefp) json_t *j = json_loads(text, 0, &je);
	if (!j)
		return wr_error_input(err, EINVAL, "%s: %s", what, je.text);
	if (!json_is_object(j))
		return wr_error_input(err, EINVAL, "%s: not a JSON object",
				      what);
	if (out)
		*out = TAKE_PTR(j);
	return 0;
}

/* ---- sessions ----------------------------------------------------------- */

/* After a commit that wrote a session's record: caches of session
 * records (store_ops.session_writes) know theirs may be stale. */
static void written(struct store *st)
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

	if (!s || !sq_id_ok(s->id))
		return wr_error_input(err, EINVAL, "create session: bad id");
	if (!sq_id_ok(s->repo_id))
		return wr_error_input(
		    err, EINVAL, "create session %s: bad repository id", s->id);
	if (!s->user || !*s->user || strlen(s->user) > USER_MAX || !s->prompt)
		return wr_error_input(err, EINVAL,
				      "create session %s: a user and a prompt "
				      "are required",
				      s->id);
	int64_t created = s->created_ms ? s->created_ms : store_now_ms();
	c = sq_writer(sq_of(st));
	int r = sq_begin(c, true, &tx, err);
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
	int64_t seq = append_event(c, s->id, EVENT_STATE,
				   "{\"state\":\"queued\"}", created, err);
	if (seq < 0)
		return (int)seq;
	r = sq_commit(&tx, err);
	if (r == 0)
		written(st);
	return r;
}

int sq_session_get(struct store *st, const char *id, struct store_session *out,
		   struct wr_error **err)
{
	if (!sq_id_ok(id))
		return no_session(id, err);
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SESSION_GET, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return no_session(id, err);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "get session %s", id);
	struct store_session s;
	r = session_from_row(q, &s);
	if (r < 0)
		return wr_error_set(err, -r, "get session %s", id);
	*out = s;
	return 0;
}

int sq_session_list(struct store *st, const struct store_session_filter *f,
		    struct store_session **out, size_t *n_out,
		    struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = NULL;
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *before = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;

	if (!f || f->state < -1 || f->state >= SESSION_STATE_MAX)
		return wr_error_input(err, EINVAL, "list sessions: bad state");
	if (f->before_id && !sq_id_ok(f->before_id))
		return no_session(f->before_id, err);
	int limit = f->limit <= 0	  ? LIST_DEFAULT
		    : f->limit > LIST_MAX ? LIST_MAX
					  : f->limit;
	unsigned mask = (f->state >= 0 ? SQ_LIST_STATE : 0) |
			(f->user ? SQ_LIST_USER : 0) |
			(f->repo_id ? SQ_LIST_REPO : 0) |
			(f->before_id ? SQ_LIST_BEFORE : 0);
	c = sq_reader(sq_of(st));
	int r = sq_prepare(c, (enum sq_stmt)(SQ_SESSION_LIST + mask), &q, err);
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
			return no_session(f->before_id, err);
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
	r = sq_collect(c, q, sizeof(**out), session_from_row, session_clear, &v,
		       &n, "list sessions", err);
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
	r = sq_collect(c, q, sizeof(**out), session_from_row, session_clear, &v,
		       &n, "list sessions by state", err);
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

int64_t sq_session_transition(struct store *st, const char *id, int from,
			      enum session_state to,
			      const struct store_session_update *upd,
			      const char *extra_json, struct wr_error **err)
{
	static const struct store_session_update keep =
	    STORE_SESSION_UPDATE_INIT;
	_cleanup_(json_decrefp) json_t *data = NULL;
	_cleanup_(json_decrefp) json_t *extra = NULL;
	_cleanup_free_ char *text = NULL;
	_cleanup_(sq_releasep) struct sq_conn *c = NULL;
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;

	const char *to_name = session_state_name(to);
	if (!to_name || from < -1 || from >= SESSION_STATE_MAX)
		return wr_error_input(err, EINVAL,
				      "session %s: bad transition %d -> %d",
				      id ? id : "", from, (int)to);
	if (!sq_id_ok(id))
		return no_session(id, err);
	if (!upd)
		upd = &keep;
	if (extra_json) {
		int r = parse_json_object(extra_json, "transition event data",
					  &extra, err);
		if (r < 0)
			return r;
	}
	/* {"state":to,"from":(filled in below),"reason":...} */
	const char *reason = upd->reason && *upd->reason ? upd->reason : NULL;
	data = json_object();
	if (!data || json_object_set_new(data, "state", json_string(to_name)) ||
	    json_object_set_new(data, "from", json_null()) ||
	    json_object_set_new(data, "reason",
				reason ? json_string(reason) : json_null()))
		return wr_error_input(err, EINVAL,
				      "session %s: the reason is not UTF-8 "
				      "text",
				      id);
	if (extra && json_object_update_missing(data, extra))
		return wr_error_set(err, ENOMEM, "session %s", id);

	int64_t now = store_now_ms();
	c = sq_writer(sq_of(st));
	int r = sq_begin(c, true, &tx, err);
	if (r < 0)
		return r;
	r = sq_prepare(c, SQ_SESSION_STATE, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return no_session(id, err);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "session %s: read state", id);
	int cur = session_state_parse((const char *)sqlite3_column_text(q, 0));
	sqlite3_reset(q);
	if (cur < 0)
		return wr_error_set(err, EIO, "session %s: unknown state", id);
	if (from >= 0 && cur != from)
		return wr_error_set(err, ESTALE, "session %s is %s, not %s", id,
				    session_state_name(cur),
				    session_state_name(from));
	if (!session_transition_allowed(cur, to))
		return wr_error_input(err, EPERM,
				      "session %s: %s -> %s is not allowed", id,
				      session_state_name(cur), to_name);
	int64_t queue_seq = 0;
	if (upd->requeue) {
		r = next_queue_seq(c, &queue_seq, err);
		if (r < 0)
			return r;
	}
	r = apply_update(c, id, to_name, upd, queue_seq, now, err);
	if (r < 0)
		return r;
	if (json_object_set_new(data, "from",
				json_string(session_state_name(cur))))
		return wr_error_set(err, ENOMEM, "session %s", id);
	text = json_dumps(data, JSON_COMPACT);
	if (!text)
		return wr_error_set(err, ENOMEM, "session %s", id);
	int64_t seq = append_event(c, id, EVENT_STATE, text, now, err);
	if (seq < 0)
		return seq;
	r = sq_commit(&tx, err);
	if (r == 0)
		written(st);
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
	if (!sq_id_ok(id))
		return no_session(id, err);
	int64_t now = store_now_ms();
	c = sq_writer(sq_of(st));
	int r = sq_begin(c, true, &tx, err);
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
		written(st);
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
	_cleanup_(sq_releasep) struct sq_conn *c = NULL;
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;

	if (!event_kind_name(kind))
		return wr_error_input(err, EINVAL, "append event: bad kind %d",
				      (int)kind);
	if (!sq_id_ok(session_id))
		return no_session(session_id, err);
	if (!data_json)
		data_json = "{}";
	int r = parse_json_object(data_json, "append event", NULL, err);
	if (r < 0)
		return r;
	int64_t now = store_now_ms();
	c = sq_writer(sq_of(st));
	r = sq_begin(c, true, &tx, err);
	if (r < 0)
		return r;
	int64_t seq = append_event(c, session_id, kind, data_json, now, err);
	if (seq < 0)
		return seq;
	r = sq_commit(&tx, err);
	return r < 0 ? r : seq;
}

int sq_event_list(struct store *st, const char *session_id, int64_t after_seq,
		  int limit, struct store_event **out, size_t *n_out,
		  struct wr_error **err)
{
	if (!sq_id_ok(session_id))
		return no_session(session_id, err);
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
	r = sq_collect(c, q, sizeof(**out), event_from_row, event_clear, &v, &n,
		       "list events", err);
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

	if (!sq_id_ok(session_id))
		return no_session(session_id, err);
	if (!user || !*user || strlen(user) > USER_MAX || !text)
		return wr_error_input(err, EINVAL,
				      "add message to %s: a user and a text "
				      "are required",
				      session_id);
	/* {"id":(filled in below),"user":...,"text":...} */
	data = json_object();
	if (!data || json_object_set_new(data, "id", json_integer(0)) ||
	    json_object_set_new(data, "user", json_string(user)) ||
	    json_object_set_new(data, "text", json_string(text)))
		return wr_error_input(err, EINVAL,
				      "add message to %s: not UTF-8 text",
				      session_id);
	int64_t now = store_now_ms();
	c = sq_writer(sq_of(st));
	int r = sq_begin(c, true, &tx, err);
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
		return no_session(session_id, err);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "add message to %s", session_id);
	if (json_object_set_new(data, "id", json_integer(id)))
		return wr_error_set(err, ENOMEM, "add message to %s",
				    session_id);
	data_text = json_dumps(data, JSON_COMPACT);
	if (!data_text)
		return wr_error_set(err, ENOMEM, "add message to %s",
				    session_id);
	int64_t seq =
	    append_event(c, session_id, EVENT_MESSAGE, data_text, now, err);
	if (seq < 0)
		return seq;
	r = sq_commit(&tx, err);
	return r < 0 ? r : id;
}

int sq_message_pending(struct store *st, const char *session_id,
		       struct store_message **out, size_t *n_out,
		       struct wr_error **err)
{
	if (!sq_id_ok(session_id))
		return no_session(session_id, err);
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
	r = sq_collect(c, q, sizeof(**out), message_from_row, message_clear, &v,
		       &n, "pending messages", err);
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

	if (turn < 1)
		return wr_error_input(err, EINVAL,
				      "consume message %lld: bad turn %d",
				      (long long)message_id, turn);
	c = sq_writer(sq_of(st));
	int r = sq_begin(c, true, &tx, err);
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
		if (rc == SQLITE_ROW)
			return wr_error_set(err, ESTALE,
					    "message %lld was consumed already",
					    (long long)message_id);
		if (rc == SQLITE_DONE)
			return wr_error_absent(err, true, "no message %lld",
					      (long long)message_id);
		return sq_error(c, rc, err, "consume message %lld",
				(long long)message_id);
	}
	return sq_commit(&tx, err);
}

/* ---- artifacts ---------------------------------------------------------- */

/* Relative, no "..", no empty components. */
static bool artifact_name_ok(const char *name)
{
	if (!name || !*name || name[0] == '/' ||
	    strlen(name) > ARTIFACT_NAME_MAX)
		return false;
	for (const char *p = name; *p;) {
		size_t len = strcspn(p, "/");
		if (len == 0 || (len == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += len;
		if (*p == '/')
			p++;
	}
	return name[strlen(name) - 1] != '/';
}

int sq_artifact_add(struct store *st, const char *session_id,
		    const struct store_artifact *a, struct wr_error **err)
{
	if (!sq_id_ok(session_id))
		return no_session(session_id, err);
	if (!a || !artifact_name_ok(a->name))
		return wr_error_input(err, EINVAL,
				      "add artifact to %s: bad name '%s'",
				      session_id, a && a->name ? a->name : "");
	if (!a->path || !*a->path || a->size < 0)
		return wr_error_input(err, EINVAL,
				      "add artifact %s to %s: a path and a "
				      "size are required",
				      a->name, session_id);
	int64_t created = a->created_ms ? a->created_ms : store_now_ms();
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_ARTIFACT_ADD, &q, err);
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
		return no_session(session_id, err);
	return sq_error(c, rc, err, "add artifact %s to %s", a->name,
			session_id);
}

int sq_artifact_list(struct store *st, const char *session_id,
		     struct store_artifact **out, size_t *n_out,
		     struct wr_error **err)
{
	if (!sq_id_ok(session_id))
		return no_session(session_id, err);
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
	r = sq_collect(c, q, sizeof(**out), artifact_from_row, artifact_clear,
		       &v, &n, "list artifacts", err);
	if (r < 0)
		return r;
	r = empty_or_unknown(c, session_id, n, err);
	if (r < 0)
		return r;
	*out = v;
	*n_out = n;
	return 0;
}

/* sqlite_slack.c - Slack's outbox (notify/outbox.h) in the SQLite store:
 * the posts (slack_posts) and the event ids of the Events API deliveries
 * handled (slack_events). It is an interface of its own beside struct
 * store, over the store's connections (a handle that borrows them).
 *
 * A post is one row from the moment the API accepts what asks for it (a
 * slash command, a mention) until nothing more is to be posted for it
 * (done_ms). The notifier reads the due ones and records each attempt's
 * outcome; which outcome rows are due is decided in SQL, against the
 * session's state, so that a resting session is found without reading
 * every session. Single statements run in their own implicit
 * transaction; the claim of an event id (forget the old ones, insert the
 * new one) is one BEGIN IMMEDIATE transaction. */
#include "store/sqlite_internal.h"

#include "notify/outbox.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DUE_LIMIT_MAX 100

struct sq_outbox {
	struct slack_outbox base;
	struct sq_store *store; /* borrowed: it outlives the outbox */
};

static struct sq_store *outbox_store(struct slack_outbox *ob)
{
	return ((struct sq_outbox *)ob)->store;
}

static int64_t post_add(struct slack_outbox *ob, const struct slack_post *p,
			struct wr_error **err)
{
	int r = slack_post_check(p, err);
	if (r < 0)
		return r;
	int64_t created = p->created_ms ? p->created_ms : store_now_ms();
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(outbox_store(ob));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	r = sq_prepare(c, SQ_SLACK_POST_INSERT, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, p->session_id[0] ? p->session_id : NULL);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, slack_post_kind_name(p->kind));
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 3, p->channel);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 4, p->thread_ts);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 5, p->response_url);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 6, p->slack_user);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 7, p->text);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 8, created);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(q, 0) : 0;
	/* to the end: the implicit transaction commits there, and a
	 * failing commit is this call's failure */
	if (rc == SQLITE_ROW)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE && id > 0)
		return id;
	if (sq_errno(rc) == -ENOENT)
		return wr_error_absent(err, true, "no session %s",
				       p->session_id);
	return sq_error(c, rc, err, "add Slack post");
}

static int post_due(struct slack_outbox *ob, int64_t now_ms, int limit,
		    struct slack_post **out, size_t *n_out,
		    struct wr_error **err)
{
	if (limit < 1 || limit > DUE_LIMIT_MAX)
		return wr_error_input(err, EINVAL,
				      "due Slack posts: limit %d not in "
				      "1..%d",
				      limit, DUE_LIMIT_MAX);
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(outbox_store(ob));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SLACK_POST_DUE, &q, err);
	if (r < 0)
		return r;
	int rc = sqlite3_bind_int64(q, 1, now_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int(q, 2, limit);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "due Slack posts");
	void *v = NULL;
	size_t n = 0;
	r = sq_collect(c, q, &slack_post_record, &v, &n, "due Slack posts",
		       err);
	if (r == 0) {
		*out = v;
		*n_out = n;
	}
	return r;
}

static int bind_keep_int64(sqlite3_stmt *q, int i, int64_t v)
{
	return v < 0 ? sqlite3_bind_null(q, i) : sqlite3_bind_int64(q, i, v);
}

static int post_update(struct slack_outbox *ob, int64_t id,
		       const struct slack_post_update *u, struct wr_error **err)
{
	char error[SLACK_POST_ERROR_MAX + 1];
	const char *last_error = NULL;
	int r = slack_post_update_check(id, u, error, &last_error, err);
	if (r < 0)
		return r;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(outbox_store(ob));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	r = sq_prepare(c, SQ_SLACK_POST_UPDATE, &q, err);
	if (r < 0)
		return r;
	int rc = sqlite3_bind_int64(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, u->posted_state);
	if (rc == SQLITE_OK)
		rc = bind_keep_int64(q, 3, u->attempts);
	if (rc == SQLITE_OK)
		rc = bind_keep_int64(q, 4, u->next_ms);
	if (rc == SQLITE_OK)
		rc = bind_keep_int64(q, 5, u->done_ms);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 6, last_error);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "update Slack post %lld",
				(long long)id);
	if (sqlite3_changes(c->db) == 0)
		return wr_error_absent(err, true, "no Slack post %lld",
				       (long long)id);
	return 0;
}

static int post_list(struct slack_outbox *ob, const char *session_id,
		     struct slack_post **out, size_t *n_out,
		     struct wr_error **err)
{
	if (!store_id_ok(session_id))
		return store_no_session(session_id, err);
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(outbox_store(ob));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SLACK_POST_LIST, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, session_id);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "Slack posts of %s", session_id);
	void *v = NULL;
	size_t n = 0;
	r = sq_collect(c, q, &slack_post_record, &v, &n, "Slack posts", err);
	if (r == 0) {
		*out = v;
		*n_out = n;
	}
	return r;
}

static int event_claim(struct slack_outbox *ob, const char *event_id,
		       int64_t now_ms, int64_t keep_ms, struct wr_error **err)
{
	if (!slack_event_id_ok(event_id))
		return wr_error_input(err, EINVAL, "Slack event: bad event id");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(outbox_store(ob));
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *prune = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *ins = NULL;
	int r = sq_begin(c, true, &tx, err);
	if (r < 0)
		return r;
	r = sq_prepare(c, SQ_SLACK_EVENT_PRUNE, &prune, err);
	if (r < 0)
		return r;
	r = sq_prepare(c, SQ_SLACK_EVENT_INSERT, &ins, err);
	if (r < 0)
		return r;
	/* the ids Slack can no longer retry are forgotten: the table stays
	 * as small as a day of mentions */
	int rc = sqlite3_bind_int64(prune, 1,
				    keep_ms > 0 ? now_ms - keep_ms : INT64_MIN);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(prune);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "forget old Slack events");
	sqlite3_reset(prune);
	rc = sq_bind_text(ins, 1, event_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(ins, 2, now_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(ins);
	if (sq_errno(rc) == -EEXIST)
		return wr_error_input(err, EEXIST,
				      "Slack event %s was handled already",
				      event_id);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "record Slack event %s", event_id);
	sqlite3_reset(ins);
	return sq_commit(&tx, err);
}

static int event_release(struct slack_outbox *ob, const char *event_id,
			 struct wr_error **err)
{
	if (!slack_event_id_ok(event_id))
		return 0;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(outbox_store(ob));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SLACK_EVENT_DELETE, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, event_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "forget Slack event %s", event_id);
	return 0;
}

static void outbox_close(struct slack_outbox *ob)
{
	free(ob);
}

static const struct slack_outbox_ops sqlite_outbox_ops = {
    .close = outbox_close,
    .post_add = post_add,
    .post_due = post_due,
    .post_update = post_update,
    .post_list = post_list,
    .event_claim = event_claim,
    .event_release = event_release,
};

int slack_outbox_open_sqlite(struct store *st, struct slack_outbox **out,
			     struct wr_error **err)
{
	struct sq_store *s = sq_store_of(st);
	if (!s)
		return wr_error_set(err, EINVAL,
				    "Slack outbox: not a SQLite store");
	struct sq_outbox *ob = wr_calloc(1, sizeof(*ob));
	if (!ob)
		return wr_error_set(err, ENOMEM, "Slack outbox");
	ob->base.ops = &sqlite_outbox_ops;
	ob->store = s;
	*out = &ob->base;
	return 0;
}

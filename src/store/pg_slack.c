/* pg_slack.c - Slack's outbox (notify/outbox.h) in the PostgreSQL store:
 * slack_posts and slack_events (migration 3), over the store's pool of
 * connections (a handle that borrows them), as sqlite_slack.c does in
 * SQLite. Single statements run in their own implicit transaction; the
 * claim of an event id (forget the old ones, insert the new one) is one
 * transaction. Which outcome posts are due is decided in SQL, against the
 * session's state (pg_schema.c). */
#include "store/pg_internal.h"

#include "notify/outbox.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>

#define DUE_LIMIT_MAX 100

struct pg_outbox {
	struct slack_outbox base;
	struct pg_store *store; /* borrowed: it outlives the outbox */
};

static struct pg_store *outbox_store(struct slack_outbox *ob)
{
	return ((struct pg_outbox *)ob)->store;
}

static int64_t post_add(struct slack_outbox *ob, const struct slack_post *p,
			struct wr_error **err)
{
	int r = slack_post_check(p, err);
	if (r < 0)
		return r;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	r = pg_acquire(outbox_store(ob), &c, err);
	if (r < 0)
		return r;
	struct pg_params q = {0};
	pg_text(&q, p->session_id[0] ? p->session_id : NULL);
	pg_text(&q, slack_post_kind_name(p->kind));
	pg_text(&q, p->channel);
	pg_text(&q, p->thread_ts);
	pg_text(&q, p->response_url);
	pg_text(&q, p->slack_user);
	pg_text(&q, p->text);
	pg_int(&q, p->created_ms ? p->created_ms : store_now_ms());
	r = pg_run(c, PG_SLACK_POST_INSERT, &q, &res);
	if (r == -ENOENT)
		return store_no_session(p->session_id, err);
	if (r < 0)
		return pg_fail(c, res, r, err, "add Slack post");
	return pg_get_int64(res, 0, 0);
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
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params q = {0};
	pg_int(&q, now_ms);
	pg_int(&q, limit);
	int r = pg_call(outbox_store(ob), &c, PG_SLACK_POST_DUE, &q, &res, err,
			"due Slack posts");
	if (r < 0)
		return r;
	return PG_COLLECT(res, &slack_post_record, out, n_out,
			  "due Slack posts", err);
}

static int post_update(struct slack_outbox *ob, int64_t id,
		       const struct slack_post_update *u, struct wr_error **err)
{
	char error[SLACK_POST_ERROR_MAX + 1];
	const char *last_error = NULL;
	int r = slack_post_update_check(id, u, error, &last_error, err);
	if (r < 0)
		return r;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params q = {0};
	pg_int(&q, id);
	pg_text(&q, u->posted_state);
	pg_opt_int(&q, u->attempts >= 0, u->attempts);
	pg_opt_int(&q, u->next_ms >= 0, u->next_ms);
	pg_opt_int(&q, u->done_ms >= 0, u->done_ms);
	pg_text(&q, last_error);
	r = pg_call(outbox_store(ob), &c, PG_SLACK_POST_UPDATE, &q, &res, err,
		    "update Slack post %lld", (long long)id);
	if (r < 0)
		return r;
	if (pg_changes(res) == 0)
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
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params q = {0};
	pg_text(&q, session_id);
	int r = pg_call(outbox_store(ob), &c, PG_SLACK_POST_LIST, &q, &res, err,
			"Slack posts of %s", session_id);
	if (r < 0)
		return r;
	return PG_COLLECT(res, &slack_post_record, out, n_out, "Slack posts",
			  err);
}

static int event_claim(struct slack_outbox *ob, const char *event_id,
		       int64_t now_ms, int64_t keep_ms, struct wr_error **err)
{
	if (!slack_event_id_ok(event_id))
		return wr_error_input(err, EINVAL, "Slack event: bad event id");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;
	_cleanup_(pg_clearp) PGresult *prune = NULL;
	_cleanup_(pg_clearp) PGresult *ins = NULL;
	int r = pg_acquire(outbox_store(ob), &c, err);
	if (r == 0)
		r = pg_begin(c, &tx, err);
	if (r < 0)
		return r;
	/* the ids Slack can no longer retry are forgotten: the table stays
	 * as small as a day of mentions */
	struct pg_params q = {0};
	pg_int(&q, keep_ms > 0 ? now_ms - keep_ms : INT64_MIN);
	r = pg_exec(c, PG_SLACK_EVENT_PRUNE, &q, &prune, err,
		    "forget old Slack events");
	if (r < 0)
		return r;
	q = (struct pg_params){0};
	pg_text(&q, event_id);
	pg_int(&q, now_ms);
	r = pg_run(c, PG_SLACK_EVENT_INSERT, &q, &ins);
	if (r == -EEXIST)
		return wr_error_input(err, EEXIST,
				      "Slack event %s was handled already",
				      event_id);
	if (r < 0)
		return pg_fail(c, ins, r, err, "record Slack event %s",
			       event_id);
	return pg_commit(&tx, err);
}

static int event_release(struct slack_outbox *ob, const char *event_id,
			 struct wr_error **err)
{
	if (!slack_event_id_ok(event_id))
		return 0;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params q = {0};
	pg_text(&q, event_id);
	return pg_call(outbox_store(ob), &c, PG_SLACK_EVENT_DELETE, &q, &res,
		       err, "forget Slack event %s", event_id);
}

static void outbox_close(struct slack_outbox *ob)
{
	free(ob);
}

static const struct slack_outbox_ops pg_outbox_ops = {
    .close = outbox_close,
    .post_add = post_add,
    .post_due = post_due,
    .post_update = post_update,
    .post_list = post_list,
    .event_claim = event_claim,
    .event_release = event_release,
};

int slack_outbox_open_pg(struct store *st, struct slack_outbox **out,
			 struct wr_error **err)
{
	struct pg_store *s = pg_store_of(st);
	if (!s)
		return wr_error_set(err, EINVAL,
				    "Slack outbox: not a PostgreSQL store");
	struct pg_outbox *ob = wr_calloc(1, sizeof(*ob));
	if (!ob)
		return wr_error_set(err, ENOMEM, "Slack outbox");
	ob->base.ops = &pg_outbox_ops;
	ob->store = s;
	*out = &ob->base;
	return 0;
}

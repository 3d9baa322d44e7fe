/* sqlite_eval.c - evals on SQLite (store.h, "evals"): runs, attempts,
 * blind review batches and their items; one statement each, a batch and
 * its items in one transaction, on the writer connection for writes. */
#include "store/sqlite_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Steps a write q to its end. */
static int step_done(struct sq_conn *c, sqlite3_stmt *q, int rc,
		     struct wr_error **err, const char *what, const char *id)
{
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "%s %s", what, id);
	return 0;
}

int sq_eval_run_put(struct store *st, const struct store_eval_run *r,
		    struct wr_error **err)
{
	int e = store_eval_run_check(r, err);
	if (e < 0)
		return e;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	e = sq_prepare(c, SQ_EVAL_RUN_PUT, &q, err);
	if (e < 0)
		return e;
	int64_t now = r->created_ms ? r->created_ms : store_now_ms();
	int rc = sq_bind_text(q, 1, r->id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, r->user);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 3, r->run_json);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 4, now);
	return step_done(c, q, rc, err, "publish eval run", r->id);
}

int sq_eval_run_get(struct store *st, const char *id,
		    struct store_eval_run *out, struct wr_error **err)
{
	if (!store_id_ok(id))
		return wr_error_absent(err, true, "no eval run %s",
				       id ? id : "");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_EVAL_RUN_GET, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "get eval run %s", id);
	r = sq_get_one(c, q, &store_eval_run_record, out, "get eval run", err);
	if (r == 0)
		return wr_error_absent(err, true, "no eval run %s", id);
	return r < 0 ? r : 0;
}

/* The rows of statement id (one text parameter, or none) as records. */
static int list_rows(struct store *st, enum sq_stmt id, const char *param,
		     const struct store_record_type *type, void **out,
		     size_t *n_out, const char *what, struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, id, &q, err);
	if (r < 0)
		return r;
	if (param) {
		int rc = sq_bind_text(q, 1, param);
		if (rc != SQLITE_OK)
			return sq_error(c, rc, err, "%s", what);
	}
	void *v = NULL;
	size_t n = 0;
	r = sq_collect(c, q, type, &v, &n, what, err);
	if (r < 0)
		return r;
	*out = v;
	*n_out = n;
	return 0;
}

int sq_eval_run_list(struct store *st, struct store_eval_run **out,
		     size_t *n_out, struct wr_error **err)
{
	return list_rows(st, SQ_EVAL_RUN_LIST, NULL, &store_eval_run_record,
			 (void **)out, n_out, "list eval runs", err);
}

int sq_eval_attempt_put(struct store *st, const char *run_id,
			const struct store_eval_attempt *a,
			struct wr_error **err)
{
	int e = store_eval_attempt_check(run_id, a, err);
	if (e < 0)
		return e;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	e = sq_prepare(c, SQ_EVAL_ATTEMPT_PUT, &q, err);
	if (e < 0)
		return e;
	int rc = sq_bind_text(q, 1, run_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, a->name);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 3, a->attempt_json);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(
		    q, 4, a->updated_ms ? a->updated_ms : store_now_ms());
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE) {
		if (sq_errno(rc) == -ENOENT) /* the foreign key: no such run */
			return wr_error_absent(err, true, "no eval run %s",
					       run_id);
		return sq_error(c, rc, err, "publish attempt %s of %s", a->name,
				run_id);
	}
	return 0;
}

int sq_eval_attempt_list(struct store *st, const char *run_id,
			 struct store_eval_attempt **out, size_t *n_out,
			 struct wr_error **err)
{
	if (!store_id_ok(run_id))
		return wr_error_absent(err, true, "no eval run %s",
				       run_id ? run_id : "");
	return list_rows(st, SQ_EVAL_ATTEMPT_LIST, run_id,
			 &store_eval_attempt_record, (void **)out, n_out,
			 "list eval attempts", err);
}

static int item_insert(struct sq_conn *c, const char *batch_id,
		       const struct store_eval_item *it, struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int e = sq_prepare(c, SQ_EVAL_ITEM_ADD, &q, err);
	if (e < 0)
		return e;
	int rc = sq_bind_text(q, 1, batch_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, it->item);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 3, it->pos);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 4, it->run_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 5, it->attempt);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 6, it->session_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 7, it->prompt);
	return step_done(c, q, rc, err, "add review item", it->item);
}

int sq_eval_batch_add(struct store *st, const struct store_eval_batch *b,
		      const struct store_eval_item *items, size_t n,
		      struct wr_error **err)
{
	int e = store_eval_batch_check(b, items, n, err);
	if (e < 0)
		return e;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	e = sq_begin(c, true, &tx, err);
	if (e < 0)
		return e;
	{
		_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
		e = sq_prepare(c, SQ_EVAL_BATCH_ADD, &q, err);
		if (e < 0)
			return e;
		int rc = sq_bind_text(q, 1, b->id);
		if (rc == SQLITE_OK)
			rc = sq_bind_text(q, 2, b->user);
		if (rc == SQLITE_OK)
			rc = sq_bind_text(q, 3, b->runs_json);
		if (rc == SQLITE_OK)
			rc = sqlite3_bind_int64(q, 4,
						b->created_ms ? b->created_ms
							      : store_now_ms());
		e = step_done(c, q, rc, err, "add review batch", b->id);
		if (e < 0)
			return e;
	}
	for (size_t i = 0; i < n; i++) {
		e = item_insert(c, b->id, &items[i], err);
		if (e < 0)
			return e;
	}
	return sq_commit(&tx, err);
}

int sq_eval_batch_get(struct store *st, const char *id,
		      struct store_eval_batch *out, struct wr_error **err)
{
	if (!store_id_ok(id))
		return wr_error_absent(err, true, "no review batch %s",
				       id ? id : "");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_EVAL_BATCH_GET, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "get review batch %s", id);
	r = sq_get_one(c, q, &store_eval_batch_record, out, "get review batch",
		       err);
	if (r == 0)
		return wr_error_absent(err, true, "no review batch %s", id);
	return r < 0 ? r : 0;
}

int sq_eval_batch_list(struct store *st, struct store_eval_batch **out,
		       size_t *n_out, struct wr_error **err)
{
	return list_rows(st, SQ_EVAL_BATCH_LIST, NULL, &store_eval_batch_record,
			 (void **)out, n_out, "list review batches", err);
}

int sq_eval_item_list(struct store *st, const char *batch_id,
		      const char *run_id, struct store_eval_item **out,
		      size_t *n_out, struct wr_error **err)
{
	const char *key = batch_id ? batch_id : run_id;
	if (!store_id_ok(key))
		return wr_error_absent(err, true, "no %s %s",
				       batch_id ? "review batch" : "eval run",
				       key ? key : "");
	return list_rows(st, batch_id ? SQ_EVAL_ITEMS_BATCH : SQ_EVAL_ITEMS_RUN,
			 key, &store_eval_item_record, (void **)out, n_out,
			 "list review items", err);
}

/* The item's row on c: 1 and *out, 0 when there is none, or -errno. */
static int item_read(struct sq_conn *c, const char *batch_id, const char *item,
		     struct store_eval_item *out, struct wr_error **err)
{
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_EVAL_ITEM_GET, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, batch_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, item);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "get review item %s", item);
	return sq_get_one(c, q, &store_eval_item_record, out, "get review item",
			  err);
}

int sq_eval_item_get(struct store *st, const char *batch_id, const char *item,
		     struct store_eval_item *out, struct wr_error **err)
{
	int r = store_eval_item_key_check(batch_id, item, err);
	if (r < 0)
		return r;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	r = item_read(c, batch_id, item, out, err);
	if (r == 0)
		return wr_error_absent(err, true, "no review item %s/%s",
				       batch_id, item);
	return r < 0 ? r : 0;
}

int sq_eval_item_show(struct store *st, const char *batch_id, const char *item,
		      int64_t now_ms, struct wr_error **err)
{
	int r = store_eval_item_key_check(batch_id, item, err);
	if (r < 0)
		return r;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	r = sq_prepare(c, SQ_EVAL_ITEM_SHOW, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, batch_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, item);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 3, now_ms);
	r = step_done(c, q, rc, err, "show review item", item);
	if (r < 0)
		return r;
	if (sqlite3_changes(c->db) == 0)
		return wr_error_absent(err, true, "no review item %s/%s",
				       batch_id, item);
	return 0;
}

int sq_eval_item_decide(struct store *st, const char *batch_id,
			const char *item, const char *verdict,
			const char *reviewer, int64_t review_ms, int64_t now_ms,
			struct wr_error **err)
{
	int r = store_eval_item_key_check(batch_id, item, err);
	if (r < 0)
		return r;
	if (!store_eval_verdict_ok(verdict))
		return wr_error_input(err, EINVAL,
				      "verdict: merge, changes or reject");
	if (!store_text_ok(reviewer, STORE_USER_MAX) || review_ms < 0)
		return wr_error_input(err, EINVAL,
				      "review item %s: no reviewer or a "
				      "negative time",
				      item);
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	r = sq_begin(c, true, &tx, err);
	if (r < 0)
		return r;
	{
		_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
		r = sq_prepare(c, SQ_EVAL_ITEM_DECIDE, &q, err);
		if (r < 0)
			return r;
		int rc = sq_bind_text(q, 1, batch_id);
		if (rc == SQLITE_OK)
			rc = sq_bind_text(q, 2, item);
		if (rc == SQLITE_OK)
			rc = sq_bind_text(q, 3, verdict);
		if (rc == SQLITE_OK)
			rc = sq_bind_text(q, 4, reviewer);
		if (rc == SQLITE_OK)
			rc = sqlite3_bind_int64(q, 5, review_ms);
		if (rc == SQLITE_OK)
			rc = sqlite3_bind_int64(q, 6, now_ms);
		r = step_done(c, q, rc, err, "decide review item", item);
		if (r < 0)
			return r;
	}
	if (sqlite3_changes(c->db) == 0) {
		struct store_eval_item it = {0};
		r = item_read(c, batch_id, item, &it, err);
		store_eval_item_clear(&it);
		if (r < 0)
			return r;
		if (r == 0)
			return wr_error_absent(
			    err, true, "no review item %s/%s", batch_id, item);
		return wr_error_set(err, EALREADY,
				    "review item %s has a verdict already",
				    item);
	}
	return sq_commit(&tx, err);
}

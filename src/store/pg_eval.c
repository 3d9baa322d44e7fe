/* pg_eval.c - evals on PostgreSQL (store.h, "evals"): runs, attempts,
 * blind review batches and their items; one statement each, a batch and
 * its items in one transaction. */
#include "store/pg_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pg_eval_run_put(struct store *st, const struct store_eval_run *r,
		    struct wr_error **err)
{
	int e = store_eval_run_check(r, err);
	if (e < 0)
		return e;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, r->id);
	pg_text(&p, r->user);
	pg_text(&p, r->run_json);
	pg_int(&p, r->created_ms ? r->created_ms : store_now_ms());
	return pg_call(pg_of(st), &c, PG_EVAL_RUN_PUT, &p, &res, err,
		       "publish eval run %s", r->id);
}

int pg_eval_run_get(struct store *st, const char *id,
		    struct store_eval_run *out, struct wr_error **err)
{
	if (!store_id_ok(id))
		return wr_error_absent(err, true, "no eval run %s",
				       id ? id : "");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	int r = pg_call(pg_of(st), &c, PG_EVAL_RUN_GET, &p, &res, err,
			"get eval run %s", id);
	if (r < 0)
		return r;
	r = pg_get_one(res, &store_eval_run_record, out, "get eval run", err);
	if (r == 0)
		return wr_error_absent(err, true, "no eval run %s", id);
	return r < 0 ? r : 0;
}

/* The rows of statement id (one text parameter, or none) as records. */
static int list_rows(struct store *st, enum pg_stmt id, const char *param,
		     const struct store_record_type *type, void **out,
		     size_t *n_out, const char *what, struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	if (param)
		pg_text(&p, param);
	int r = pg_call(pg_of(st), &c, id, &p, &res, err, "%s", what);
	if (r < 0)
		return r;
	return PG_COLLECT(res, type, out, n_out, what, err);
}

int pg_eval_run_list(struct store *st, struct store_eval_run **out,
		     size_t *n_out, struct wr_error **err)
{
	return list_rows(st, PG_EVAL_RUN_LIST, NULL, &store_eval_run_record,
			 (void **)out, n_out, "list eval runs", err);
}

int pg_eval_attempt_put(struct store *st, const char *run_id,
			const struct store_eval_attempt *a,
			struct wr_error **err)
{
	int e = store_eval_attempt_check(run_id, a, err);
	if (e < 0)
		return e;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, run_id);
	pg_text(&p, a->name);
	pg_text(&p, a->attempt_json);
	pg_int(&p, a->updated_ms ? a->updated_ms : store_now_ms());
	e = pg_acquire(pg_of(st), &c, err);
	if (e < 0)
		return e;
	e = pg_run(c, PG_EVAL_ATTEMPT_PUT, &p, &res);
	if (e == -ENOENT) /* the foreign key: no such run */
		return wr_error_absent(err, true, "no eval run %s", run_id);
	if (e < 0)
		return pg_fail(c, res, e, err, "publish attempt %s of %s",
			       a->name, run_id);
	return 0;
}

int pg_eval_attempt_list(struct store *st, const char *run_id,
			 struct store_eval_attempt **out, size_t *n_out,
			 struct wr_error **err)
{
	if (!store_id_ok(run_id))
		return wr_error_absent(err, true, "no eval run %s",
				       run_id ? run_id : "");
	return list_rows(st, PG_EVAL_ATTEMPT_LIST, run_id,
			 &store_eval_attempt_record, (void **)out, n_out,
			 "list eval attempts", err);
}

int pg_eval_batch_add(struct store *st, const struct store_eval_batch *b,
		      const struct store_eval_item *items, size_t n,
		      struct wr_error **err)
{
	int e = store_eval_batch_check(b, items, n, err);
	if (e < 0)
		return e;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;
	e = pg_acquire(pg_of(st), &c, err);
	if (e < 0)
		return e;
	e = pg_begin(c, &tx, err);
	if (e < 0)
		return e;
	{
		_cleanup_(pg_clearp) PGresult *res = NULL;
		struct pg_params p = {0};
		pg_text(&p, b->id);
		pg_text(&p, b->user);
		pg_text(&p, b->runs_json);
		pg_int(&p, b->created_ms ? b->created_ms : store_now_ms());
		e = pg_exec(c, PG_EVAL_BATCH_ADD, &p, &res, err,
			    "add review batch %s", b->id);
		if (e < 0)
			return e;
	}
	for (size_t i = 0; i < n; i++) {
		const struct store_eval_item *it = &items[i];
		_cleanup_(pg_clearp) PGresult *res = NULL;
		struct pg_params p = {0};
		pg_text(&p, b->id);
		pg_text(&p, it->item);
		pg_int(&p, it->pos);
		pg_text(&p, it->run_id);
		pg_text(&p, it->attempt);
		pg_text(&p, it->session_id);
		pg_text(&p, it->prompt);
		e = pg_exec(c, PG_EVAL_ITEM_ADD, &p, &res, err,
			    "add review item %s", it->item);
		if (e < 0)
			return e;
	}
	return pg_commit(&tx, err);
}

int pg_eval_batch_get(struct store *st, const char *id,
		      struct store_eval_batch *out, struct wr_error **err)
{
	if (!store_id_ok(id))
		return wr_error_absent(err, true, "no review batch %s",
				       id ? id : "");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	int r = pg_call(pg_of(st), &c, PG_EVAL_BATCH_GET, &p, &res, err,
			"get review batch %s", id);
	if (r < 0)
		return r;
	r = pg_get_one(res, &store_eval_batch_record, out, "get review batch",
		       err);
	if (r == 0)
		return wr_error_absent(err, true, "no review batch %s", id);
	return r < 0 ? r : 0;
}

int pg_eval_batch_list(struct store *st, struct store_eval_batch **out,
		       size_t *n_out, struct wr_error **err)
{
	return list_rows(st, PG_EVAL_BATCH_LIST, NULL, &store_eval_batch_record,
			 (void **)out, n_out, "list review batches", err);
}

int pg_eval_item_list(struct store *st, const char *batch_id,
		      const char *run_id, struct store_eval_item **out,
		      size_t *n_out, struct wr_error **err)
{
	const char *key = batch_id ? batch_id : run_id;
	if (!store_id_ok(key))
		return wr_error_absent(err, true, "no %s %s",
				       batch_id ? "review batch" : "eval run",
				       key ? key : "");
	return list_rows(st, batch_id ? PG_EVAL_ITEMS_BATCH : PG_EVAL_ITEMS_RUN,
			 key, &store_eval_item_record, (void **)out, n_out,
			 "list review items", err);
}

/* The item's row on c: 1 and *out, 0 when there is none, or -errno. */
static int item_read(struct pg_conn *c, const char *batch_id, const char *item,
		     struct store_eval_item *out, struct wr_error **err)
{
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, batch_id);
	pg_text(&p, item);
	int r = pg_exec(c, PG_EVAL_ITEM_GET, &p, &res, err,
			"get review item %s", item);
	if (r < 0)
		return r;
	return pg_get_one(res, &store_eval_item_record, out, "get review item",
			  err);
}

int pg_eval_item_get(struct store *st, const char *batch_id, const char *item,
		     struct store_eval_item *out, struct wr_error **err)
{
	int r = store_eval_item_key_check(batch_id, item, err);
	if (r < 0)
		return r;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	r = pg_acquire(pg_of(st), &c, err);
	if (r < 0)
		return r;
	r = item_read(c, batch_id, item, out, err);
	if (r == 0)
		return wr_error_absent(err, true, "no review item %s/%s",
				       batch_id, item);
	return r < 0 ? r : 0;
}

int pg_eval_item_show(struct store *st, const char *batch_id, const char *item,
		      int64_t now_ms, struct wr_error **err)
{
	int r = store_eval_item_key_check(batch_id, item, err);
	if (r < 0)
		return r;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, batch_id);
	pg_text(&p, item);
	pg_int(&p, now_ms);
	r = pg_call(pg_of(st), &c, PG_EVAL_ITEM_SHOW, &p, &res, err,
		    "show review item %s", item);
	if (r < 0)
		return r;
	if (pg_changes(res) == 0)
		return wr_error_absent(err, true, "no review item %s/%s",
				       batch_id, item);
	return 0;
}

int pg_eval_item_decide(struct store *st, const char *batch_id,
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
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, batch_id);
	pg_text(&p, item);
	pg_text(&p, verdict);
	pg_text(&p, reviewer);
	pg_int(&p, review_ms);
	pg_int(&p, now_ms);
	r = pg_call(pg_of(st), &c, PG_EVAL_ITEM_DECIDE, &p, &res, err,
		    "decide review item %s", item);
	if (r < 0)
		return r;
	if (pg_changes(res) > 0)
		return 0;
	/* none changed: no such item, or one decided already (a verdict is
	 * never taken back, so the answer holds after the statement) */
	struct store_eval_item it = {0};
	r = item_read(c, batch_id, item, &it, err);
	store_eval_item_clear(&it);
	if (r < 0)
		return r;
	if (r == 0)
		return wr_error_absent(err, true, "no review item %s/%s",
				       batch_id, item);
	return wr_error_set(err, EALREADY,
			    "review item %s has a verdict already", item);
}

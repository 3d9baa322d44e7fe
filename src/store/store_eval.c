/* store_eval.c - what both backends share about evals (store.h, "evals"):
 * the records read from rows of STORE_EVAL_*_COLUMNS, their destructors,
 * and the checks of what each call is given. */
#include "store/backend.h"

#include "util/alloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void store_eval_run_clear(struct store_eval_run *r)
{
	if (!r)
		return;
	free(r->user);
	free(r->run_json);
	memset(r, 0, sizeof(*r));
}

void store_eval_attempt_clear(struct store_eval_attempt *a)
{
	if (!a)
		return;
	free(a->name);
	free(a->attempt_json);
	memset(a, 0, sizeof(*a));
}

void store_eval_batch_clear(struct store_eval_batch *b)
{
	if (!b)
		return;
	free(b->user);
	free(b->runs_json);
	memset(b, 0, sizeof(*b));
}

void store_eval_item_clear(struct store_eval_item *i)
{
	if (!i)
		return;
	free(i->attempt);
	free(i->session_id);
	free(i->prompt);
	free(i->verdict);
	free(i->reviewer);
	memset(i, 0, sizeof(*i));
}

#define DEFINE_ARRAY_FREE(fn, type, clear)     \
	void fn(type *v, size_t n)             \
	{                                      \
		if (!v)                        \
			return;                \
		for (size_t i = 0; i < n; i++) \
			clear(&v[i]);          \
		free(v);                       \
	}
DEFINE_ARRAY_FREE(store_eval_runs_free, struct store_eval_run,
		  store_eval_run_clear)
DEFINE_ARRAY_FREE(store_eval_attempts_free, struct store_eval_attempt,
		  store_eval_attempt_clear)
DEFINE_ARRAY_FREE(store_eval_batches_free, struct store_eval_batch,
		  store_eval_batch_clear)
DEFINE_ARRAY_FREE(store_eval_items_free, struct store_eval_item,
		  store_eval_item_clear)

bool store_eval_verdict_ok(const char *verdict)
{
	return verdict &&
	       (!strcmp(verdict, "merge") || !strcmp(verdict, "changes") ||
		!strcmp(verdict, "reject"));
}

/* ---- records from rows ----------------------------------------------------
 */

static int run_from_row(const struct store_row *row, void *out)
{
	struct store_eval_run r = {.created_ms = row->int64(row, 3),
				   .updated_ms = row->int64(row, 4)};
	int e = store_row_copy(row, 0, r.id, sizeof(r.id));
	if (e == 0)
		e = store_row_strdup(row, 1, &r.user);
	if (e == 0)
		e = store_row_strdup(row, 2, &r.run_json);
	if (e < 0) {
		store_eval_run_clear(&r);
		return e;
	}
	*(struct store_eval_run *)out = r;
	return 0;
}

static int attempt_from_row(const struct store_row *row, void *out)
{
	struct store_eval_attempt a = {.updated_ms = row->int64(row, 2)};
	int e = store_row_strdup(row, 0, &a.name);
	if (e == 0)
		e = store_row_strdup(row, 1, &a.attempt_json);
	if (e < 0) {
		store_eval_attempt_clear(&a);
		return e;
	}
	*(struct store_eval_attempt *)out = a;
	return 0;
}

static int batch_from_row(const struct store_row *row, void *out)
{
	struct store_eval_batch b = {.created_ms = row->int64(row, 3)};
	int e = store_row_copy(row, 0, b.id, sizeof(b.id));
	if (e == 0)
		e = store_row_strdup(row, 1, &b.user);
	if (e == 0)
		e = store_row_strdup(row, 2, &b.runs_json);
	if (e < 0) {
		store_eval_batch_clear(&b);
		return e;
	}
	*(struct store_eval_batch *)out = b;
	return 0;
}

static int item_from_row(const struct store_row *row, void *out)
{
	struct store_eval_item i = {
	    .pos = (int)row->int64(row, 2),
	    .review_ms = row->int64(row, 9),
	    .shown_ms = row->int64(row, 10),
	    .decided_ms = row->int64(row, 11),
	};
	int e = store_row_copy(row, 0, i.batch_id, sizeof(i.batch_id));
	if (e == 0)
		e = store_row_copy(row, 1, i.item, sizeof(i.item));
	if (e == 0)
		e = store_row_copy(row, 3, i.run_id, sizeof(i.run_id));
	if (e == 0)
		e = store_row_strdup(row, 4, &i.attempt);
	if (e == 0)
		e = store_row_strdup(row, 5, &i.session_id);
	if (e == 0)
		e = store_row_strdup(row, 6, &i.prompt);
	if (e == 0)
		e = store_row_strdup(row, 7, &i.verdict);
	if (e == 0)
		e = store_row_strdup(row, 8, &i.reviewer);
	if (e < 0) {
		store_eval_item_clear(&i);
		return e;
	}
	*(struct store_eval_item *)out = i;
	return 0;
}

#define DEFINE_RECORD(var, type, from_row, clear_fn)                  \
	static void clear_fn##_any(void *rec)                         \
	{                                                             \
		clear_fn(rec);                                        \
	}                                                             \
	const struct store_record_type var = {sizeof(type), from_row, \
					      clear_fn##_any}
DEFINE_RECORD(store_eval_run_record, struct store_eval_run, run_from_row,
	      store_eval_run_clear);
DEFINE_RECORD(store_eval_attempt_record, struct store_eval_attempt,
	      attempt_from_row, store_eval_attempt_clear);
DEFINE_RECORD(store_eval_batch_record, struct store_eval_batch, batch_from_row,
	      store_eval_batch_clear);
DEFINE_RECORD(store_eval_item_record, struct store_eval_item, item_from_row,
	      store_eval_item_clear);

/* ---- checks
 * ------------------------------------------------------------------ */

int store_eval_run_check(const struct store_eval_run *r, struct wr_error **err)
{
	if (!r || !store_id_ok(r->id))
		return wr_error_input(err, EINVAL, "eval run: no id");
	if (!store_text_ok(r->user, STORE_USER_MAX))
		return wr_error_input(err, EINVAL, "eval run %s: no user",
				      r->id);
	if (!store_text_ok(r->run_json, STORE_EVAL_JSON_MAX))
		return wr_error_input(err, EINVAL,
				      "eval run %s: its JSON, 1 to %d bytes",
				      r->id, STORE_EVAL_JSON_MAX);
	return 0;
}

int store_eval_attempt_check(const char *run_id,
			     const struct store_eval_attempt *a,
			     struct wr_error **err)
{
	if (!store_id_ok(run_id))
		return wr_error_absent(err, true, "no eval run %s",
				       run_id ? run_id : "");
	if (!a || !store_text_ok(a->name, STORE_EVAL_NAME_MAX))
		return wr_error_input(err, EINVAL,
				      "eval run %s: an attempt "
				      "without a name",
				      run_id);
	if (!store_text_ok(a->attempt_json, STORE_EVAL_JSON_MAX))
		return wr_error_input(err, EINVAL,
				      "eval run %s: attempt %s: its JSON, 1 "
				      "to %d bytes",
				      run_id, a->name, STORE_EVAL_JSON_MAX);
	return 0;
}

int store_eval_batch_check(const struct store_eval_batch *b,
			   const struct store_eval_item *items, size_t n,
			   struct wr_error **err)
{
	if (!b || !store_id_ok(b->id))
		return wr_error_input(err, EINVAL, "review batch: no id");
	if (!store_text_ok(b->user, STORE_USER_MAX) ||
	    !store_text_ok(b->runs_json, STORE_TEXT_MAX))
		return wr_error_input(
		    err, EINVAL, "review batch %s: no user or runs", b->id);
	if (n > STORE_EVAL_ITEMS_MAX || (n && !items))
		return wr_error_input(err, E2BIG,
				      "review batch %s: at most %d items",
				      b->id, STORE_EVAL_ITEMS_MAX);
	for (size_t i = 0; i < n; i++) {
		const struct store_eval_item *it = &items[i];
		if (!store_id_ok(it->item) || !store_id_ok(it->run_id) ||
		    !store_text_ok(it->attempt, STORE_EVAL_NAME_MAX) ||
		    !store_id_ok(it->session_id) ||
		    !store_text_ok(it->prompt, STORE_EVAL_JSON_MAX))
			return wr_error_input(err, EINVAL,
					      "review batch %s: item %zu is "
					      "incomplete",
					      b->id, i);
	}
	return 0;
}

int store_eval_item_key_check(const char *batch_id, const char *item,
			      struct wr_error **err)
{
	if (!store_id_ok(batch_id) || !store_id_ok(item))
		return wr_error_absent(err, true, "no review item %s/%s",
				       batch_id ? batch_id : "",
				       item ? item : "");
	return 0;
}

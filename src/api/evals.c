/* evals.c - the eval routes (docs/api.md "Evals", docs/eval.md): the runs
 * `warren eval run` publishes as it goes (the run object, then each
 * attempt), listed and read back with their review figures; and blind
 * review: a batch over the resolved changes of one or more runs, shuffled,
 * whose items show the task's prompt and the change's diff and nothing of
 * the configuration that made it (no run, agent, session or cost), and a
 * verdict per item with its review time.
 *
 * The review time is the page's (from when it showed the item until the
 * verdict), clipped by the server's own: the first GET of an item records
 * when it was shown, and a verdict's time is at most the time since then,
 * so a client cannot claim more review than the server saw. Reviewers and
 * admins only, as for the hidden tests' check: an eval is the judge's. */
#include "api/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define EVAL_BATCH_RUNS_MAX 8 /* runs one review batch covers */

bool api_eval_run_id_valid(const char *s)
{
	if (!s || s[0] != 'e' || s[1] != '-')
		return false;
	size_t n = 0;
	for (const char *p = s + 2; *p; p++, n++)
		if (n == 62 || !((*p >= 'a' && *p <= 'z') ||
				 (*p >= '0' && *p <= '9') || *p == '-'))
			return false;
	return n > 0;
}

bool api_eval_attempt_name_valid(const char *s)
{
	if (!s || !*s || strstr(s, ".."))
		return false;
	size_t n = 0;
	for (const char *p = s; *p; p++, n++)
		if (n == STORE_EVAL_NAME_MAX ||
		    !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
		      *p == '-'))
			return false;
	return true;
}

bool api_eval_item_id_valid(const char *s)
{
	return api_id_valid(s, 'i');
}

/* The body as JSON text of at most STORE_EVAL_JSON_MAX bytes, its "id"
 * (if any) the path's. NULL after a 400. */
static char *body_text(struct api_ctx *c, const char *id_key, const char *id)
{
	json_t *v = id_key ? json_object_get(c->body, id_key) : NULL;
	if (v && !(json_is_string(v) && !strcmp(json_string_value(v), id))) {
		char q[80];
		api_reject(c->out, 400, "%s: \"%s\", the path's, or absent",
			   id_key, api_quote(id, q));
		return NULL;
	}
	char *text = json_dumps(c->body, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text) {
		api_reply_internal(c, "read the body");
		return NULL;
	}
	if (strlen(text) > STORE_EVAL_JSON_MAX) {
		free(text);
		api_reject(c->out, 400, "the object exceeds %d bytes",
			   STORE_EVAL_JSON_MAX);
		return NULL;
	}
	return text;
}

/* PUT /evals/{id}: the run object, as `warren eval run` keeps it. */
int api_eval_run_put(struct api_ctx *c)
{
	_cleanup_free_ char *text = body_text(c, "id", c->id);
	if (!text)
		return 0;
	json_t *tasks = json_object_get(c->body, "tasks");
	if (tasks && !json_is_array(tasks))
		return api_reply_error(c->out, 400,
				       "tasks: an array of task names");
	json_t *repeat = json_object_get(c->body, "repeat");
	if (repeat &&
	    (!json_is_integer(repeat) || json_integer_value(repeat) < 1 ||
	     json_integer_value(repeat) > 100))
		return api_reply_error(c->out, 400,
				       "repeat: an integer from 1 to 100");
	struct store_eval_run r = {.user = c->who.user, .run_json = text};
	snprintf(r.id, sizeof(r.id), "%s", c->id);
	struct wr_error *err = NULL;
	int e = c->a->st->ops->eval_run_put(c->a->st, &r, &err);
	if (e < 0)
		api_reply_failure(c, e, err, "publish the eval run");
	else
		api_reply_render(c, 200, json_pack("{s:s}", "id", c->id),
				 "render the eval run");
	wr_error_free(err);
	return 0;
}

/* PUT /evals/{id}/attempts/{TASK.K}: one attempt object. */
int api_eval_attempt_put(struct api_ctx *c)
{
	_cleanup_free_ char *text = body_text(c, NULL, NULL);
	if (!text)
		return 0;
	json_t *task = json_object_get(c->body, "task");
	json_t *rep = json_object_get(c->body, "repeat");
	if (!json_is_string(task) || !json_is_integer(rep))
		return api_reply_error(c->out, 400,
				       "an attempt has \"task\" (a string) and "
				       "\"repeat\" (an integer)");
	char name[STORE_EVAL_NAME_MAX + 32];
	snprintf(name, sizeof(name), "%s.%lld", json_string_value(task),
		 (long long)json_integer_value(rep));
	if (strcmp(name, c->name))
		return api_reply_error(c->out, 400,
				       "the path names attempt TASK.REPEAT of "
				       "the body's task and repeat");
	json_t *session = json_object_get(c->body, "session");
	if (session && !json_is_null(session) &&
	    !(json_is_string(session) &&
	      api_id_valid(json_string_value(session), 's')))
		return api_reply_error(c->out, 400, "session: a session id");
	json_t *resolved = json_object_get(c->body, "resolved");
	if (resolved && !json_is_boolean(resolved) && !json_is_null(resolved))
		return api_reply_error(c->out, 400, "resolved: true or false");
	json_t *prompt = json_object_get(c->body, "prompt");
	if (prompt && !json_is_string(prompt))
		return api_reply_error(c->out, 400,
				       "prompt: the task's prompt, a string");
	struct store_eval_attempt a = {.name = (char *)c->name,
				       .attempt_json = text};
	struct wr_error *err = NULL;
	int e = c->a->st->ops->eval_attempt_put(c->a->st, c->id, &a, &err);
	if (e < 0)
		api_reply_failure(c, e, err, "publish the attempt");
	else
		api_reply_render(
		    c, 200,
		    json_pack("{s:s, s:s}", "id", c->id, "attempt", c->name),
		    "render the attempt");
	wr_error_free(err);
	return 0;
}

/* The verdicts on run_id's changes: {"reviewed", "accepted" (merge),
 * "changes", "rejected", "review_ms"}. NULL after an answer. */
static json_t *review_tally(struct api_ctx *c, const char *run_id)
{
	struct store_eval_item *v = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	int e =
	    c->a->st->ops->eval_item_list(c->a->st, NULL, run_id, &v, &n, &err);
	if (e < 0) {
		api_reply_failure(c, e, err, "list the verdicts");
		wr_error_free(err);
		return NULL;
	}
	int64_t reviewed = 0, merge = 0, changes = 0, reject = 0, ms = 0;
	for (size_t i = 0; i < n; i++) {
		if (!v[i].verdict)
			continue;
		reviewed++;
		ms += v[i].review_ms;
		merge += !strcmp(v[i].verdict, "merge");
		changes += !strcmp(v[i].verdict, "changes");
		reject += !strcmp(v[i].verdict, "reject");
	}
	store_eval_items_free(v, n);
	json_t *t = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "items",
			      (json_int_t)n, "reviewed", (json_int_t)reviewed,
			      "accepted", (json_int_t)merge, "changes",
			      (json_int_t)changes, "rejected",
			      (json_int_t)reject, "review_ms", (json_int_t)ms);
	if (!t)
		api_reply_internal(c, "render the verdicts");
	return t;
}

static json_t *run_json(const struct store_eval_run *r)
{
	return json_pack("{s:s, s:o, s:I, s:I, s:o}", "id", r->id, "user",
			 api_json_string(r->user), "created_ms",
			 (json_int_t)r->created_ms, "updated_ms",
			 (json_int_t)r->updated_ms, "run",
			 api_json_embed(r->run_json));
}

/* GET /evals: the runs published, newest first. */
int api_evals_list(struct api_ctx *c)
{
	struct store_eval_run *v = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	int e = c->a->st->ops->eval_run_list(c->a->st, &v, &n, &err);
	if (e < 0) {
		api_reply_failure(c, e, err, "list eval runs");
		wr_error_free(err);
		return 0;
	}
	json_t *list = json_array();
	bool bad = !list;
	for (size_t i = 0; i < n && !bad; i++) {
		json_t *o = run_json(&v[i]);
		json_t *t = o ? review_tally(c, v[i].id) : NULL;
		if (o && !t) {
			json_decref(o);
			json_decref(list);
			store_eval_runs_free(v, n);
			return 0; /* answered */
		}
		bad = !o || json_object_set_new(o, "review", t) < 0 ||
		      json_array_append_new(list, o) < 0;
	}
	store_eval_runs_free(v, n);
	return api_reply_render(c, 200,
				bad ? (json_decref(list), NULL)
				    : json_pack("{s:o}", "evals", list),
				"render the eval runs");
}

/* GET /evals/{id}: the run, its attempts and the verdicts on them. */
int api_eval_get(struct api_ctx *c)
{
	struct store_eval_run r = {0};
	struct wr_error *err = NULL;
	int e = c->a->st->ops->eval_run_get(c->a->st, c->id, &r, &err);
	if (e < 0) {
		api_reply_failure(c, e, err, "get the eval run");
		wr_error_free(err);
		return 0;
	}
	struct store_eval_attempt *v = NULL;
	size_t n = 0;
	e = c->a->st->ops->eval_attempt_list(c->a->st, c->id, &v, &n, &err);
	if (e < 0) {
		store_eval_run_clear(&r);
		api_reply_failure(c, e, err, "list the attempts");
		wr_error_free(err);
		return 0;
	}
	json_t *o = run_json(&r);
	json_t *list = json_array();
	bool bad = !o || !list;
	for (size_t i = 0; i < n && !bad; i++)
		bad = json_array_append_new(
			  list, api_json_embed(v[i].attempt_json)) < 0;
	store_eval_attempts_free(v, n);
	store_eval_run_clear(&r);
	json_t *t = bad ? NULL : review_tally(c, c->id);
	if (!bad && !t) {
		json_decref(o);
		json_decref(list);
		return 0; /* answered */
	}
	if (bad || json_object_set_new(o, "attempts", list) < 0 ||
	    json_object_set_new(o, "review", t) < 0) {
		json_decref(o);
		return api_reply_internal(c, "render the eval run");
	}
	return api_reply_render(c, 200, o, "render the eval run");
}

/* ---- blind review ----------------------------------------------------------
 */

/* The resolved changes of run_id appended to *items (grown). */
static int batch_collect(struct api_ctx *c, const char *run_id,
			 struct store_eval_item **items, size_t *n)
{
	struct store_eval_attempt *v = NULL;
	size_t k = 0;
	struct wr_error *err = NULL;
	int e =
	    c->a->st->ops->eval_attempt_list(c->a->st, run_id, &v, &k, &err);
	if (e < 0) {
		api_reply_failure(c, e, err, "list the attempts");
		wr_error_free(err);
		return -1;
	}
	int r = 0;
	for (size_t i = 0; i < k && r == 0; i++) {
		json_t *a = json_loads(v[i].attempt_json, 0, NULL);
		const char *sid =
		    json_string_value(json_object_get(a, "session"));
		const char *prompt =
		    json_string_value(json_object_get(a, "prompt"));
		if (json_is_true(json_object_get(a, "resolved")) && sid &&
		    api_id_valid(sid, 's')) {
			if (*n == STORE_EVAL_ITEMS_MAX) {
				r = api_reject(c->out, 400,
					       "at most %d changes in a batch",
					       STORE_EVAL_ITEMS_MAX);
				json_decref(a);
				break;
			}
			struct store_eval_item *grown =
			    wr_realloc(*items, (*n + 1) * sizeof(**items));
			if (!grown) {
				json_decref(a);
				r = -1;
				api_reply_internal(c, "make the batch");
				break;
			}
			*items = grown;
			struct store_eval_item *it = &grown[(*n)++];
			memset(it, 0, sizeof(*it));
			snprintf(it->run_id, sizeof(it->run_id), "%s", run_id);
			store_new_id("i-", it->item);
			it->attempt = wr_strdup(v[i].name);
			it->session_id = wr_strdup(sid);
			it->prompt =
			    prompt && *prompt ? wr_strdup(prompt) : NULL;
			if (!it->prompt) {
				/* an attempt published without its prompt:
				 * the session's first prompt */
				struct store_session s = {0};
				struct wr_error *e2 = NULL;
				if (c->a->st->ops->session_get(c->a->st, sid,
							       &s, &e2) == 0 &&
				    s.prompt && *s.prompt)
					it->prompt = wr_strdup(s.prompt);
				else
					it->prompt =
					    wr_strdup("(no prompt recorded)");
				store_session_clear(&s);
				wr_error_free(e2);
			}
			if (!it->attempt || !it->session_id || !it->prompt) {
				json_decref(a);
				r = -1;
				api_reply_internal(c, "make the batch");
				break;
			}
		}
		json_decref(a);
	}
	store_eval_attempts_free(v, k);
	return r;
}

/* POST /evals/reviews {"runs": [ID, ...]}: a blind review batch over the
 * runs' resolved changes, in a random order. */
int api_eval_batch_create(struct api_ctx *c)
{
	static const char *const keys[] = {"runs", NULL};
	if (api_body_check_keys(c, keys) < 0)
		return 0;
	json_t *runs = json_object_get(c->body, "runs");
	if (!json_is_array(runs) || json_array_size(runs) == 0 ||
	    json_array_size(runs) > EVAL_BATCH_RUNS_MAX)
		return api_reply_error(c->out, 400,
				       "runs: an array of 1 to %d eval run ids",
				       EVAL_BATCH_RUNS_MAX);
	size_t i;
	json_t *v;
	json_array_foreach(runs, i, v)
	{
		const char *id = json_string_value(v);
		if (!api_eval_run_id_valid(id))
			return api_reply_error(c->out, 400,
					       "runs[%zu]: an eval run id "
					       "(e-...)",
					       i);
		for (size_t k = 0; k < i; k++)
			if (!strcmp(id,
				    json_string_value(json_array_get(runs, k))))
				return api_reply_error(
				    c->out, 400, "runs[%zu]: named twice", i);
	}
	struct store_eval_item *items = NULL;
	size_t n = 0;
	int r = 0;
	json_array_foreach(runs, i, v)
	{
		struct store_eval_run run = {0};
		struct wr_error *err = NULL;
		int e = c->a->st->ops->eval_run_get(
		    c->a->st, json_string_value(v), &run, &err);
		store_eval_run_clear(&run);
		if (e < 0) {
			api_reply_failure(c, e, err, "get the eval run");
			wr_error_free(err);
			r = -1;
			break;
		}
		r = batch_collect(c, json_string_value(v), &items, &n);
		if (r < 0)
			break;
	}
	if (r == 0 && n == 0) {
		api_reply_error(c->out, 400,
				"no resolved change to review in these runs");
		r = -1;
	}
	if (r == 0) {
		/* Fisher-Yates with the system's randomness: the order says
		 * nothing about which run a change came from */
		if (sodium_init() < 0) {
			api_reply_internal(c, "shuffle");
			r = -1;
		}
		for (size_t k = n; r == 0 && k > 1; k--) {
			size_t j = randombytes_uniform((uint32_t)k);
			struct store_eval_item t = items[k - 1];
			items[k - 1] = items[j];
			items[j] = t;
		}
		for (size_t k = 0; k < n; k++)
			items[k].pos = (int)k;
	}
	if (r == 0) {
		struct store_eval_batch b = {.user = c->who.user};
		store_new_id("b-", b.id);
		_cleanup_free_ char *runs_text = json_dumps(runs, JSON_COMPACT);
		b.runs_json = runs_text;
		struct wr_error *err = NULL;
		int e = runs_text ? c->a->st->ops->eval_batch_add(
					c->a->st, &b, items, n, &err)
				  : -ENOMEM;
		if (e < 0)
			api_reply_failure(c, e, err, "make the review batch");
		else
			api_reply_render(c, 201,
					 json_pack("{s:s, s:I, s:s+}", "id",
						   b.id, "items", (json_int_t)n,
						   "page", "#/reviews/", b.id),
					 "render the review batch");
		wr_error_free(err);
	}
	store_eval_items_free(items, n);
	return 0;
}

/* GET /evals/reviews: the batches, newest first, with their progress. */
int api_eval_batches_list(struct api_ctx *c)
{
	struct store_eval_batch *v = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	int e = c->a->st->ops->eval_batch_list(c->a->st, &v, &n, &err);
	if (e < 0) {
		api_reply_failure(c, e, err, "list review batches");
		wr_error_free(err);
		return 0;
	}
	json_t *list = json_array();
	bool bad = !list;
	for (size_t i = 0; i < n && !bad; i++) {
		struct store_eval_item *it = NULL;
		size_t k = 0;
		e = c->a->st->ops->eval_item_list(c->a->st, v[i].id, NULL, &it,
						  &k, &err);
		if (e < 0) {
			json_decref(list);
			store_eval_batches_free(v, n);
			api_reply_failure(c, e, err, "list review items");
			wr_error_free(err);
			return 0;
		}
		size_t decided = 0;
		for (size_t j = 0; j < k; j++)
			decided += it[j].verdict != NULL;
		store_eval_items_free(it, k);
		bad = json_array_append_new(
			  list,
			  json_pack("{s:s, s:o, s:I, s:o, s:I, s:I}", "id",
				    v[i].id, "user", api_json_string(v[i].user),
				    "created_ms", (json_int_t)v[i].created_ms,
				    "runs", api_json_embed(v[i].runs_json),
				    "items", (json_int_t)k, "decided",
				    (json_int_t)decided)) < 0;
	}
	store_eval_batches_free(v, n);
	return api_reply_render(c, 200,
				bad ? (json_decref(list), NULL)
				    : json_pack("{s:o}", "reviews", list),
				"render the review batches");
}

/* What a reviewer may see of an item: never its run, attempt or session. */
static json_t *item_json(const struct store_eval_item *it, bool with_prompt)
{
	json_t *o =
	    json_pack("{s:s, s:i, s:o}", "item", it->item, "position",
		      it->pos + 1, "verdict", api_json_string(it->verdict));
	if (o && with_prompt)
		json_object_set_new(o, "prompt", api_json_string(it->prompt));
	return o;
}

/* GET /evals/reviews/{batch}: its items in order, and how far it is. */
int api_eval_batch_get(struct api_ctx *c)
{
	struct store_eval_batch b = {0};
	struct wr_error *err = NULL;
	int e = c->a->st->ops->eval_batch_get(c->a->st, c->id, &b, &err);
	store_eval_batch_clear(&b);
	struct store_eval_item *v = NULL;
	size_t n = 0;
	if (e == 0)
		e = c->a->st->ops->eval_item_list(c->a->st, c->id, NULL, &v, &n,
						  &err);
	if (e < 0) {
		api_reply_failure(c, e, err, "get the review batch");
		wr_error_free(err);
		return 0;
	}
	json_t *list = json_array();
	size_t decided = 0;
	bool bad = !list;
	for (size_t i = 0; i < n && !bad; i++) {
		decided += v[i].verdict != NULL;
		bad = json_array_append_new(list, item_json(&v[i], false)) < 0;
	}
	store_eval_items_free(v, n);
	return api_reply_render(c, 200,
				bad ? (json_decref(list), NULL)
				    : json_pack("{s:s, s:I, s:I, s:o}", "id",
						c->id, "total", (json_int_t)n,
						"decided", (json_int_t)decided,
						"items", list),
				"render the review batch");
}

/* The item of the path; -1 after an answer. */
static int item_load(struct api_ctx *c, struct store_eval_item *it)
{
	struct wr_error *err = NULL;
	int e =
	    c->a->st->ops->eval_item_get(c->a->st, c->id, c->name, it, &err);
	if (e < 0) {
		api_reply_failure(c, e, err, "get the review item");
		wr_error_free(err);
		return -1;
	}
	return 0;
}

/* GET /evals/reviews/{batch}/items/{item}: the prompt; its first GET is
 * when the item was shown. */
int api_eval_item_get(struct api_ctx *c)
{
	struct store_eval_item it = {0};
	if (item_load(c, &it) < 0)
		return 0;
	struct wr_error *err = NULL;
	int e = c->head ? 0
			: c->a->st->ops->eval_item_show(
			      c->a->st, c->id, c->name, store_now_ms(), &err);
	if (e < 0)
		api_reply_failure(c, e, err, "show the review item");
	else
		api_reply_render(c, 200, item_json(&it, true),
				 "render the review item");
	wr_error_free(err);
	store_eval_item_clear(&it);
	return 0;
}

/* GET /evals/reviews/{batch}/items/{item}/diff: the change, as the
 * session's diff route serves it, without naming the session. */
int api_eval_item_diff(struct api_ctx *c)
{
	struct store_eval_item it = {0};
	if (item_load(c, &it) < 0)
		return 0;
	char sid[STORE_ID_MAX];
	snprintf(sid, sizeof(sid), "%s", it.session_id);
	store_eval_item_clear(&it);
	const char *batch = c->id;
	c->id = sid;
	api_session_diff(c);
	c->id = batch;
	/* the session's answers name it: a blind reviewer gets its own */
	if (c->out->status == 404)
		api_reply_error(c->out, 404, "this change has no diff");
	else if (c->out->status >= 400 && c->out->status != 503)
		api_reply_error(c->out, c->out->status,
				"the change cannot be read");
	return 0;
}

/* POST /evals/reviews/{batch}/items/{item} {"verdict", "review_ms"}. */
int api_eval_item_decide(struct api_ctx *c)
{
	static const char *const keys[] = {"verdict", "review_ms", NULL};
	if (api_body_check_keys(c, keys) < 0)
		return 0;
	const char *verdict =
	    json_string_value(json_object_get(c->body, "verdict"));
	if (!store_eval_verdict_ok(verdict))
		return api_reply_error(c->out, 400,
				       "verdict: \"merge\", \"changes\" or "
				       "\"reject\"");
	json_t *ms = json_object_get(c->body, "review_ms");
	if (ms && !json_is_null(ms) &&
	    (!json_is_integer(ms) || json_integer_value(ms) < 0))
		return api_reply_error(c->out, 400,
				       "review_ms: the milliseconds the "
				       "review took, an integer >= 0");
	struct store_eval_item it = {0};
	if (item_load(c, &it) < 0)
		return 0;
	int64_t shown = it.shown_ms;
	bool decided = it.verdict != NULL;
	store_eval_item_clear(&it);
	if (decided)
		return api_reply_error(c->out, 409,
				       "this item has a verdict already");
	if (!shown)
		return api_reply_error(c->out, 409,
				       "this item was not shown yet: GET it "
				       "first");
	int64_t now = store_now_ms();
	int64_t seen = now > shown ? now - shown : 0;
	int64_t review =
	    ms && json_is_integer(ms) ? (int64_t)json_integer_value(ms) : seen;
	if (review > seen)
		review = seen; /* no more than the server saw */
	struct wr_error *err = NULL;
	int e = c->a->st->ops->eval_item_decide(
	    c->a->st, c->id, c->name, verdict, c->who.user, review, now, &err);
	if (e < 0)
		api_reply_failure(c, e, err, "record the verdict");
	else
		api_reply_render(c, 200,
				 json_pack("{s:s, s:s, s:I}", "item", c->name,
					   "verdict", verdict, "review_ms",
					   (json_int_t)review),
				 "render the verdict");
	wr_error_free(err);
	return 0;
}

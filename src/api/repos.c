/* repos.c - the routes around sessions: repositories, snapshots, health,
 * metrics and the pilot's numbers (stats). Tokens are in tokens.c. */
#include "api/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the repository's record leaves to the server: its last build
 * ({"state", …, "error"}; null: none yet), so a failed build is seen where
 * the repository is, with its cause; and the refresh interval in effect
 * with where it comes from. */
static void repo_add_state(struct api_ctx *c, json_t *obj,
			   const struct store_repo *repo)
{
	if (!obj)
		return;
	json_t *b = control_build_state(c->a->ctl, repo->id);
	json_object_set_new(obj, "build", b ? b : json_null());
	const char *source = NULL;
	uint64_t every = control_repo_refresh_every(c->a->ctl, repo, &source);
	json_object_set_new(obj, "refresh_every_ms",
			    json_integer((json_int_t)every));
	json_object_set_new(obj, "refresh_source", json_string(source));
}

int api_repos_list(struct api_ctx *c)
{
	struct store *st = c->a->st;
	struct store_repo *v = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	int r = st->ops->repo_list(st, &v, &n, &err);
	if (r < 0) {
		api_reply_failure(c, r, err, "list repositories");
		wr_error_free(err);
		return 0;
	}
	json_t *list = json_array();
	int bad = !list;
	for (size_t i = 0; i < n && !bad; i++) {
		json_t *o = api_repo_json(&v[i]);
		repo_add_state(c, o, &v[i]);
		bad = json_array_append_new(list, o);
	}
	store_repos_free(v, n);
	json_t *obj = bad ? NULL : json_pack("{s:o}", "repositories", list);
	if (bad)
		json_decref(list);
	return api_reply_render(c, 200, obj, "render the repositories");
}

int api_repos_add(struct api_ctx *c)
{
	static const char *const keys[] = {"url",     "name",  "ref",
					   "refresh", "agent", NULL};
	const char *url, *name, *ref;
	bool has_refresh;
	uint64_t refresh_ms = 0;
	_cleanup_free_ char *agent = NULL;
	struct store_repo repo = {0};
	struct wr_error *err = NULL;

	if (api_body_check_keys(c, keys) < 0 ||
	    api_body_string(c, "url", true, API_URL_MAX,
			    API_STR_NOT_BLANK | API_STR_NO_CONTROL, &url) < 0 ||
	    api_body_string(c, "name", false, 63, API_STR_NO_CONTROL, &name) <
		0 ||
	    api_body_string(c, "ref", false, API_REF_MAX,
			    API_STR_NOT_BLANK | API_STR_NO_CONTROL, &ref) < 0 ||
	    api_body_duration(c, "refresh", &has_refresh, &refresh_ms) < 0 ||
	    api_body_agent(c, "agent", &agent) < 0)
		return 0;
	if (name && wr_validate_name(name) < 0)
		return api_reply_error(c->out, 400,
				       "key 'name': expected 1 to 63 of "
				       "[A-Za-z0-9_.-], starting with a "
				       "letter or digit");
	/* repositories are looked up by id or name: a name shaped like an
	 * id would be ambiguous */
	if (name && api_id_valid(name, 'r'))
		return api_reply_error(c->out, 400,
				       "key 'name': must not look like a "
				       "repository id");
	int r = control_repo_add(c->a->ctl, name, url, ref, refresh_ms, agent,
				 &repo, &err);
	if (r < 0) {
		api_reply_failure(c, r, err, "add the repository");
		wr_error_free(err);
		return 0;
	}
	json_t *obj = api_repo_json(&repo);
	repo_add_state(c, obj, &repo);
	store_repo_clear(&repo);
	return api_reply_render(c, 201, obj, "render the repository");
}

/* PATCH /repositories/{id}: {url, ref (null: the remote's HEAD), refresh,
 * agent (null: none)}; what is not given stays. */
int api_repo_update(struct api_ctx *c)
{
	static const char *const keys[] = {"url", "ref", "refresh", "agent",
					   NULL};
	const char *url = NULL, *ref = NULL;
	bool has_refresh = false;
	uint64_t refresh_ms = 0;
	_cleanup_free_ char *agent = NULL;
	struct wr_error *err = NULL;
	if (api_body_check_keys(c, keys) < 0 ||
	    api_body_string(c, "url", false, API_URL_MAX,
			    API_STR_NOT_BLANK | API_STR_NO_CONTROL, &url) < 0 ||
	    api_body_string(c, "ref", false, API_REF_MAX,
			    API_STR_NOT_BLANK | API_STR_NO_CONTROL, &ref) < 0 ||
	    api_body_duration(c, "refresh", &has_refresh, &refresh_ms) < 0 ||
	    api_body_agent(c, "agent", &agent) < 0)
		return 0;
	if (json_object_size(c->body) == 0)
		return api_reply_error(c->out, 400,
				       "nothing to change: give url, ref, "
				       "refresh or agent");
	struct control_repo_change ch = {
	    .url = url,
	    .set_ref = json_object_get(c->body, "ref") != NULL,
	    .ref = ref,
	    .set_refresh = has_refresh,
	    .refresh_ms = refresh_ms,
	    .set_agent = json_object_get(c->body, "agent") != NULL,
	    .agent_json = agent,
	};
	struct store_repo repo = {0};
	int r = control_repo_update(c->a->ctl, c->id, &ch, &repo, &err);
	if (r == -ENOENT) {
		wr_error_free(err);
		return api_reply_error(c->out, 404, "repository %s not found",
				       c->id);
	}
	if (r < 0) {
		api_reply_failure(c, r, err, "change the repository");
		wr_error_free(err);
		return 0;
	}
	json_t *obj = api_repo_json(&repo);
	repo_add_state(c, obj, &repo);
	store_repo_clear(&repo);
	return api_reply_render(c, 200, obj, "render the repository");
}

/* DELETE /repositories/{id}: 409 while one of its sessions is not
 * finished. */
int api_repo_remove(struct api_ctx *c)
{
	struct wr_error *err = NULL;
	int r = control_repo_remove(c->a->ctl, c->id, &err);
	if (r == -ENOENT) {
		wr_error_free(err);
		return api_reply_error(c->out, 404, "repository %s not found",
				       c->id);
	}
	if (r == -EBUSY) {
		int ret = api_reply_error(c->out, 409, "%s",
					  err && err->msg ? err->msg
							  : "in use");
		wr_error_free(err);
		return ret;
	}
	if (r < 0) {
		api_reply_failure(c, r, err, "remove the repository");
		wr_error_free(err);
		return 0;
	}
	return api_reply_render(c, 200,
				json_pack("{s:s, s:s}", "id", c->id, "status",
					  "removed"),
				"render the answer");
}

int api_repo_refresh(struct api_ctx *c)
{
	static const char *const keys[] = {NULL};
	struct wr_error *err = NULL;
	if (api_body_check_keys(c, keys) < 0)
		return 0;
	int r = control_repo_refresh(c->a->ctl, c->id, &err);
	if (r == -ENOENT) {
		wr_error_free(err);
		return api_reply_error(c->out, 404, "repository %s not found",
				       c->id);
	}
	if (r < 0) {
		api_reply_failure(c, r, err, "refresh the repository");
		wr_error_free(err);
		return 0;
	}
	return api_reply_render(c, 202, json_pack("{s:s}", "status", "queued"),
				"render the answer");
}

bool api_build_id_valid(const char *s)
{
	return control_build_id_valid(s);
}

/* The repository (404 when there is none), its id into id. */
static int repo_known(struct api_ctx *c, char id[STORE_ID_MAX])
{
	struct store_repo repo;
	struct wr_error *err = NULL;
	int r = c->a->st->ops->repo_get(c->a->st, c->id, &repo, &err);
	if (r == -ENOENT) {
		wr_error_free(err);
		api_reply_error(c->out, 404, "repository %s not found", c->id);
		return -1;
	}
	if (r < 0) {
		api_reply_failure(c, r, err, "look up the repository");
		wr_error_free(err);
		return -1;
	}
	snprintf(id, STORE_ID_MAX, "%s", repo.id);
	store_repo_clear(&repo);
	return 0;
}

/* GET /repositories/{id}: one repository (by id or name), as listed. */
int api_repo_get(struct api_ctx *c)
{
	struct store_repo repo;
	struct wr_error *err = NULL;
	int r = c->a->st->ops->repo_get(c->a->st, c->id, &repo, &err);
	if (r == -ENOENT) {
		wr_error_free(err);
		return api_reply_error(c->out, 404, "repository %s not found",
				       c->id);
	}
	if (r < 0) {
		api_reply_failure(c, r, err, "look up the repository");
		wr_error_free(err);
		return 0;
	}
	json_t *o = api_repo_json(&repo);
	repo_add_state(c, o, &repo);
	store_repo_clear(&repo);
	return api_reply_render(c, 200, o, "render the repository");
}

/* GET /repositories/{id}/builds: the last builds, newest first. */
int api_repo_builds(struct api_ctx *c)
{
	char id[STORE_ID_MAX];
	if (repo_known(c, id) < 0)
		return 0;
	json_t *list = control_builds_list(c->a->ctl, id);
	json_t *obj = list ? json_pack("{s:o}", "builds", list) : NULL;
	return api_reply_render(c, 200, obj, "render the builds");
}

/* GET /repositories/{id}/builds/{build}/log: text (reviewers, admins). */
int api_repo_build_log(struct api_ctx *c)
{
	char id[STORE_ID_MAX];
	if (repo_known(c, id) < 0)
		return 0;
	char *text = NULL;
	size_t len = 0;
	int r = control_build_log(c->a->ctl, id, c->name, &text, &len);
	if (r == -ENOENT)
		return api_reply_error(c->out, 404, "build %s not found",
				       c->name);
	if (r < 0)
		return api_reply_internal(c, "read the build's log");
	api_response_clear(c->out);
	c->out->status = 200;
	c->out->content_type = "text/plain; charset=utf-8";
	c->out->body = text;
	c->out->body_len = len;
	return 0;
}

/* POST /repositories/{id}/builds/cancel: stops the running or queued
 * build (409: none). */
int api_repo_build_cancel(struct api_ctx *c)
{
	static const char *const keys[] = {NULL};
	struct wr_error *err = NULL;
	json_t *build = NULL;
	if (api_body_check_keys(c, keys) < 0)
		return 0;
	int r = control_build_cancel(c->a->ctl, c->id, c->who.user, &build,
				     &err);
	if (r == -ENOENT) {
		wr_error_free(err);
		return api_reply_error(c->out, 404, "repository %s not found",
				       c->id);
	}
	if (r == -EALREADY) {
		int ret = api_reply_error(c->out, 409, "%s",
					  err && err->msg ? err->msg
							  : "no build running");
		wr_error_free(err);
		return ret;
	}
	if (r < 0) {
		api_reply_failure(c, r, err, "cancel the build");
		wr_error_free(err);
		return 0;
	}
	return api_reply_render(c, 200, build ? build : json_null(),
				"render the build");
}

int api_snapshots_list(struct api_ctx *c)
{
	struct store *st = c->a->st;
	char repo_id[STORE_ID_MAX];
	const char *repo = api_query_get(c, "repo");
	struct store_snapshot *v = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	if (repo && api_resolve_repo(c, "repo", repo, repo_id) < 0)
		return 0;
	int r = st->ops->snapshot_list(st, repo ? repo_id : NULL, &v, &n, &err);
	if (r < 0) {
		api_reply_failure(c, r, err, "list snapshots");
		wr_error_free(err);
		return 0;
	}
	json_t *list = json_array();
	int bad = !list;
	for (size_t i = 0; i < n && !bad; i++)
		bad = json_array_append_new(list, api_snapshot_json(&v[i]));
	store_snapshots_free(v, n);
	json_t *obj = bad ? NULL : json_pack("{s:o}", "snapshots", list);
	if (bad)
		json_decref(list);
	return api_reply_render(c, 200, obj, "render the snapshots");
}

int api_healthz(struct api_ctx *c)
{
	int64_t counts[SESSION_STATE_MAX] = {0};
	struct wr_error *err = NULL;
	int r = c->a->st->ops->session_count(c->a->st, counts, &err);
	if (r < 0) {
		char path[80];
		api_log(WR_LOG_ERROR, "%s %s: the store does not answer: %s",
			c->req->method, api_quote(c->req->path, path),
			err && err->msg ? err->msg : strerror(-r));
		wr_error_free(err);
		return api_reply_error(c->out, 503,
				       "the store does not answer");
	}
	json_t *sessions = json_object();
	int bad = !sessions;
	for (int i = 0; i < SESSION_STATE_MAX && !bad; i++)
		bad = json_object_set_new(
		    sessions, session_state_name((enum session_state)i),
		    json_integer(counts[i]));
	json_t *obj =
	    bad ? NULL
		: json_pack("{s:s,s:I,s:o}", "status", "ok", "time_ms",
			    (json_int_t)store_now_ms(), "sessions", sessions);
	if (bad)
		json_decref(sessions);
	return api_reply_render(c, 200, obj, "render the health");
}

int api_metrics(struct api_ctx *c)
{
	char *text = control_metrics(c->a->ctl);
	if (!text)
		return api_reply_internal(c, "render the metrics");
	api_response_clear(c->out);
	c->out->status = 200;
	c->out->content_type = "text/plain; version=0.0.4; charset=utf-8";
	c->out->body = text;
	c->out->body_len = strlen(text);
	return 0;
}

int api_stats(struct api_ctx *c)
{
	/* the session manager's numbers, as it computes them */
	return api_reply_render(c, 200, control_stats(c->a->ctl),
				"compute the stats");
}

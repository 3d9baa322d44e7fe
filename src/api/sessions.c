/* sessions.c - the /api/v1/sessions routes: submit, list, show, events,
 * follow-up messages, cancel, and the reviewer's approve and reject.
 *
 * A submitter sees and acts on its own sessions only: its list is its
 * own, and another user's session is "not found" (404), exactly as an id
 * that does not exist, so that ids of others cannot be probed. A reviewer
 * reads every session and decides on any (approve and reject are the
 * reviewers' and admins' alone, router.c), but messages and cancels only
 * its own: another user's is 403 (it can see that one exists). An admin
 * does everything. */
#include "api/internal.h"

#include "security/broker.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool owns(const struct api_ctx *c, const struct store_session *s)
{
	return s->user && strcmp(s->user, c->who.user) == 0;
}

int api_session_load_as(struct api_ctx *c, struct store_session *s,
			enum api_access access)
{
	struct wr_error *err = NULL;
	int r = c->a->st->ops->session_get(c->a->st, c->id, s, &err);
	if (r == 0 && c->who.role == API_ROLE_SUBMITTER && !owns(c, s)) {
		store_session_clear(s);
		r = -ENOENT;
	}
	if (r == 0 && access == API_ACCESS_OWNER &&
	    c->who.role == API_ROLE_REVIEWER && !owns(c, s)) {
		store_session_clear(s);
		return api_reject(c->out, 403,
				  "a reviewer messages and cancels only its "
				  "own sessions");
	}
	if (r == -ENOENT) {
		wr_error_free(err);
		return api_reject(c->out, 404, "session %s not found", c->id);
	}
	if (r < 0) {
		api_reply_failure(c, r, err, "load the session");
		wr_error_free(err);
		return -1;
	}
	return 0;
}

int api_session_load(struct api_ctx *c, struct store_session *s)
{
	return api_session_load_as(c, s, API_ACCESS_READ);
}

/* Answers status with the session c->id as it is now. */
static int reply_session(struct api_ctx *c, unsigned status)
{
	struct store_session s = {0};
	if (api_session_load(c, &s) < 0)
		return 0;
	json_t *obj = api_session_json(c->a, &s, false);
	store_session_clear(&s);
	return api_reply_render(c, status, obj, "render the session");
}

/* A ref a session may ask for: a branch, tag or commit name that git
 * would take as refs/heads/<ref> (git check-ref-format's rules) and
 * that no git command would read as an option. */
static bool ref_valid(const char *ref)
{
	if (ref[0] == '-')
		return false;
	char full[API_REF_MAX + 16];
	snprintf(full, sizeof(full), "refs/heads/%s", ref);
	return broker_refname_valid(full);
}

int api_sessions_create(struct api_ctx *c)
{
	static const char *const keys[] = {"repo",   "prompt", "ref", "agent",
					   "limits", "egress", NULL};
	const char *repo, *prompt, *ref;
	json_t *limits_obj;
	_cleanup_free_ char *agent = NULL;
	struct control_limits limits = {0};
	struct wr_error *err = NULL;
	struct store_session s = {0};

	if (api_body_check_keys(c, keys) < 0 ||
	    api_body_string(c, "repo", true, API_URL_MAX,
			    API_STR_NOT_BLANK | API_STR_NO_CONTROL,
			    &repo) < 0 ||
	    api_body_string(c, "prompt", true, API_PROMPT_MAX,
			    API_STR_NOT_BLANK, &prompt) < 0 ||
	    api_body_string(c, "ref", false, API_REF_MAX,
			    API_STR_NOT_BLANK | API_STR_NO_CONTROL, &ref) < 0 ||
	    api_body_agent(c, "agent", &agent) < 0 ||
	    api_body_object(c, "limits", &limits_obj) < 0)
		return 0;
	if (ref && !ref_valid(ref)) {
		char shown[80];
		return api_reply_error(c->out, 400,
				       "key 'ref': '%s' is not a branch, tag "
				       "or commit name git would take",
				       api_quote(ref, shown));
	}
	if (limits_obj) {
		int r = control_limits_from_json("limits", limits_obj, &limits,
						 &err);
		if (r < 0) {
			/* whatever the errno, a limits object we cannot take
			 * is the client's mistake */
			if (r != -EINVAL && r != -ERANGE && err &&
			    err->bad_input)
				r = -EINVAL;
			api_reply_failure(c, r, err, "limits");
			wr_error_free(err);
			return 0;
		}
	}
	struct control_submit req = {
	    .user = c->who.user,
	    .repo = repo,
	    .prompt = prompt,
	    .ref = ref,
	    .agent_json = agent,
	    .limits = limits_obj ? &limits : NULL,
	    .egress = c->body ? json_object_get(c->body, "egress") : NULL,
	    .may_register = c->who.role == API_ROLE_ADMIN,
	};
	int r = control_submit(c->a->ctl, &req, &s, &err);
	if (r < 0) {
		api_reply_failure(c, r, err, "submit the session");
		wr_error_free(err);
		return 0;
	}
	json_t *obj = api_session_json(c->a, &s, false);
	store_session_clear(&s);
	return api_reply_render(c, 201, obj, "render the session");
}

static int parse_list_filter(struct api_ctx *c, struct store_session_filter *f,
			     char repo_id[STORE_ID_MAX])
{
	const char *v;
	char shown[80];
	uint64_t n;
	if ((v = api_query_get(c, "state"))) {
		f->state = session_state_parse(v);
		if (f->state < 0)
			return api_reject(c->out, 400,
					  "query parameter 'state': "
					  "unknown state '%s'",
					  api_quote(v, shown));
	}
	if ((v = api_query_get(c, "user"))) {
		if (api_validate_user(v) < 0)
			return api_reject(c->out, 400,
					  "query parameter 'user': "
					  "expected a user name");
		if (c->who.role == API_ROLE_SUBMITTER &&
		    strcmp(v, c->who.user) != 0)
			return api_reject(c->out, 403,
					  "a submitter sees only its own "
					  "sessions");
		f->user = v;
	}
	if (c->who.role == API_ROLE_SUBMITTER)
		f->user = c->who.user;
	if ((v = api_query_get(c, "repo"))) {
		if (api_resolve_repo(c, "repo", v, repo_id) < 0)
			return -1;
		f->repo_id = repo_id;
	}
	if ((v = api_query_get(c, "limit"))) {
		if (wr_parse_uint(v, 1, API_LIST_LIMIT_MAX, &n) < 0)
			return api_reject(c->out, 400,
					  "query parameter 'limit': "
					  "expected an integer from 1 to "
					  "%d",
					  API_LIST_LIMIT_MAX);
		f->limit = (int)n;
	}
	if ((v = api_query_get(c, "before"))) {
		if (!api_id_valid(v, 's'))
			return api_reject(c->out, 400,
					  "query parameter 'before': "
					  "expected a session id");
		f->before_id = v;
	}
	return 0;
}

int api_sessions_list(struct api_ctx *c)
{
	struct store_session_filter f = {.state = -1,
					 .limit = API_LIST_LIMIT_DEFAULT};
	char repo_id[STORE_ID_MAX];
	struct store *st = c->a->st;
	struct store_session *v = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;

	if (parse_list_filter(c, &f, repo_id) < 0)
		return 0;
	int r = st->ops->session_list(st, &f, &v, &n, &err);
	if (r == -ENOENT && f.before_id) {
		wr_error_free(err);
		return api_reply_error(c->out, 400,
				       "query parameter 'before': no session "
				       "%s",
				       f.before_id);
	}
	if (r < 0) {
		api_reply_failure(c, r, err, "list sessions");
		wr_error_free(err);
		return 0;
	}
	/* A full page may be the last: look one further so that "next" is
	 * null exactly when nothing follows. */
	json_t *next = json_null();
	if (n > 0 && n == (size_t)f.limit) {
		struct store_session_filter more = f;
		struct store_session *w = NULL;
		size_t m = 0;
		more.before_id = v[n - 1].id;
		more.limit = 1;
		r = st->ops->session_list(st, &more, &w, &m, &err);
		if (r < 0) {
			store_sessions_free(v, n);
			api_reply_failure(c, r, err, "list sessions");
			wr_error_free(err);
			return 0;
		}
		if (m > 0) {
			json_decref(next);
			next = api_json_string(v[n - 1].id);
		}
		store_sessions_free(w, m);
	}
	json_t *list = json_array();
	int bad = !list || !next;
	for (size_t i = 0; i < n && !bad; i++)
		bad = json_array_append_new(
		    list, api_session_json(c->a, &v[i], true));
	store_sessions_free(v, n);
	json_t *obj =
	    bad ? NULL : json_pack("{s:o,s:o}", "sessions", list, "next", next);
	if (bad) {
		json_decref(list);
		json_decref(next);
	}
	return api_reply_render(c, 200, obj, "render the sessions");
}

int api_session_get(struct api_ctx *c)
{
	return reply_session(c, 200);
}

/* The first seq to skip: Last-Event-ID (what an EventSource sends when it
 * reconnects, to the URL it started with) wins over ?after=. */
static int events_after(struct api_ctx *c, int64_t *after)
{
	uint64_t n = 0;
	const char *header = c->req->last_event_id;
	const char *param = api_query_get(c, "after");
	*after = 0;
	if (header && *header) {
		if (wr_parse_uint(header, 0, INT64_MAX, &n) < 0)
			return api_reject(c->out, 400,
					  "header Last-Event-ID: expected "
					  "an event number");
	} else if (param) {
		if (wr_parse_uint(param, 0, INT64_MAX, &n) < 0)
			return api_reject(c->out, 400,
					  "query parameter 'after': "
					  "expected an event number");
	}
	*after = (int64_t)n;
	return 0;
}

static int events_json(struct api_ctx *c, int64_t after)
{
	struct store *st = c->a->st;
	struct store_event *ev = NULL, *more = NULL;
	size_t n = 0, m = 0;
	struct wr_error *err = NULL;
	int r = st->ops->event_list(st, c->id, after, API_EVENTS_JSON_MAX, &ev,
				    &n, &err);
	/* a full answer may be the last: look one further so that
	 * "next_after" is null exactly when nothing follows */
	if (r >= 0 && n == API_EVENTS_JSON_MAX) {
		r = st->ops->event_list(st, c->id, ev[n - 1].seq, 1, &more, &m,
					&err);
		store_events_free(more, m);
	}
	if (r < 0) {
		store_events_free(ev, n);
		api_reply_failure(c, r, err, "list events");
		wr_error_free(err);
		return 0;
	}
	json_t *next = m > 0 ? json_integer(ev[n - 1].seq) : json_null();
	json_t *list = json_array();
	int bad = !list || !next;
	for (size_t i = 0; i < n && !bad; i++)
		bad = json_array_append_new(list, api_event_json(&ev[i]));
	store_events_free(ev, n);
	json_t *obj =
	    bad ? NULL
		: json_pack("{s:o,s:o}", "events", list, "next_after", next);
	if (bad) {
		json_decref(list);
		json_decref(next);
	}
	return api_reply_render(c, 200, obj, "render the events");
}

_Static_assert(API_EVENTS_JSON_MAX <= STORE_EVENT_LIST_MAX,
	       "one event_list call must fill a ?format=json answer");

int api_session_events(struct api_ctx *c)
{
	struct store_session s = {0};
	int64_t after;
	const char *format = api_query_get(c, "format");
	char shown[80];
	if (format && strcmp(format, "json") != 0 && strcmp(format, "sse") != 0)
		return api_reply_error(c->out, 400,
				       "query parameter 'format': expected "
				       "json or sse, not '%s'",
				       api_quote(format, shown));
	if (events_after(c, &after) < 0)
		return 0;
	if (api_session_load(c, &s) < 0)
		return 0;
	store_session_clear(&s);
	if (format && strcmp(format, "json") == 0)
		return events_json(c, after);

	c->out->status = 200;
	c->out->content_type = "text/event-stream";
	/* HEAD: the headers alone, nothing to stream */
	if (c->head)
		return 0;
	c->out->stream = true;
	snprintf(c->out->stream_session, sizeof(c->out->stream_session), "%s",
		 c->id);
	c->out->stream_after = after;
	return 0;
}

/* GET /api/v1/events: the sessions' states as they change, for lists
 * that stay current (the web UI). A submitter's stream carries its own
 * sessions only. */
int api_events_stream(struct api_ctx *c)
{
	c->out->status = 200;
	c->out->content_type = "text/event-stream";
	if (c->head)
		return 0;
	c->out->stream = true;
	c->out->stream_sessions = true;
	if (c->who.role == API_ROLE_SUBMITTER)
		snprintf(c->out->stream_user, sizeof(c->out->stream_user),
			 "%s", c->who.user);
	return 0;
}

int api_session_message(struct api_ctx *c)
{
	static const char *const keys[] = {"text", NULL};
	const char *text;
	struct store_session s = {0};
	struct wr_error *err = NULL;
	if (api_body_check_keys(c, keys) < 0 ||
	    api_body_string(c, "text", true, API_TEXT_MAX, API_STR_NOT_BLANK,
			    &text) < 0)
		return 0;
	if (api_session_load_as(c, &s, API_ACCESS_OWNER) < 0)
		return 0;
	store_session_clear(&s);
	int64_t id = control_message(c->a->ctl, c->id, c->who.user, text, &err);
	if (id < 0) {
		api_reply_failure(c, (int)id, err, "send the message");
		wr_error_free(err);
		return 0;
	}
	if (api_session_load(c, &s) < 0)
		return 0;
	json_t *session = api_session_json(c->a, &s, false);
	store_session_clear(&s);
	json_t *obj = session ? json_pack("{s:I,s:o}", "id", (json_int_t)id,
					  "session", session)
			      : NULL;
	return api_reply_render(c, 202, obj, "render the message");
}

int api_session_cancel(struct api_ctx *c)
{
	static const char *const keys[] = {NULL};
	struct store_session s = {0};
	struct wr_error *err = NULL;
	if (api_body_check_keys(c, keys) < 0)
		return 0;
	if (api_session_load_as(c, &s, API_ACCESS_OWNER) < 0)
		return 0;
	store_session_clear(&s);
	int r = control_cancel(c->a->ctl, c->id, c->who.user, &err);
	if (r < 0) {
		api_reply_failure(c, r, err, "cancel the session");
		wr_error_free(err);
		return 0;
	}
	return reply_session(c, 200);
}

/* The answer to control_approve/control_reject's failure r: -EPERM is a
 * session that is not in review (or has nothing to approve), 409 with
 * control's message, which says which. */
static int decision_failure(struct api_ctx *c, int r, struct wr_error *err,
			    const char *what)
{
	if (r == -EPERM && !(err && err->msg))
		api_reply_error(c->out, 409, "session %s is not in review",
				c->id);
	else
		api_reply_failure(c, r, err, what);
	wr_error_free(err);
	return 0;
}

int api_session_approve(struct api_ctx *c)
{
	static const char *const keys[] = {NULL};
	struct store_session s = {0};
	struct wr_error *err = NULL;
	/* a submitter never gets here (router.c): it may not decide on a
	 * change, not even its own */
	if (api_body_check_keys(c, keys) < 0)
		return 0;
	if (api_session_load(c, &s) < 0)
		return 0;
	store_session_clear(&s);
	int r = control_approve(c->a->ctl, c->id, c->who.user, &err);
	if (r < 0)
		return decision_failure(c, r, err, "approve the session");
	return reply_session(c, 200);
}

int api_session_reject(struct api_ctx *c)
{
	static const char *const keys[] = {"reason", NULL};
	const char *reason;
	struct store_session s = {0};
	struct wr_error *err = NULL;
	if (api_body_check_keys(c, keys) < 0 ||
	    api_body_string(c, "reason", false, API_REASON_MAX,
			    API_STR_NOT_BLANK, &reason) < 0)
		return 0;
	if (api_session_load(c, &s) < 0)
		return 0;
	store_session_clear(&s);
	int r = control_reject(c->a->ctl, c->id, c->who.user, reason, &err);
	if (r < 0)
		return decision_failure(c, r, err, "reject the session");
	return reply_session(c, 200);
}

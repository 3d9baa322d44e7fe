/* router.c - api_handle: authentication, routing, the checks every route
 * shares (ids, query parameters, bodies), and the error answers.
 *
 * The order matters and is the same for every request: size cap (413),
 * token (401, so that an unauthenticated client learns nothing about
 * routes), path (404, or 400 for a malformed escape), method (405), role
 * (403, before anything about the request's content is looked at), id or
 * name (404, without touching the store), query (400), body (400/415),
 * then the handler. Nothing before the handler writes anything.
 *
 * Roles: every route names the roles that may call it (the table below,
 * docs/api.md "Roles"). What depends on the session (a submitter's own
 * ones only; a reviewer acting on another user's) is the handler's, in
 * api_session_load. */
#include "api/internal.h"

#include "security/secrets.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static const char *status_code_name(unsigned status)
{
	switch (status) {
	case 400: return "bad_request";
	case 401: return "unauthorized";
	case 403: return "forbidden";
	case 404: return "not_found";
	case 405: return "method_not_allowed";
	case 409: return "conflict";
	case 413: return "payload_too_large";
	case 415: return "unsupported_media_type";
	case 503: return "unavailable";
	default: return "internal";
	}
}

void api_response_clear(struct api_response *r)
{
	if (!r)
		return;
	free(r->body);
	r->body = NULL;
	r->body_len = 0;
	if (r->file) {
		close(r->file_fd);
		r->file = false;
		r->file_fd = -1;
		r->file_size = 0;
	}
}

int api_reply_json(struct api_response *out, unsigned status, json_t *obj)
{
	char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	api_response_clear(out);
	if (!text) {
		out->status = 500;
		out->content_type = NULL;
		return -ENOMEM;
	}
	out->status = status;
	out->content_type = "application/json";
	out->body = text;
	out->body_len = strlen(text);
	return 0;
}

int api_reply_error(struct api_response *out, unsigned status, const char *fmt,
		    ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_t *obj = json_pack("{s:{s:s,s:o}}", "error", "code",
				status_code_name(status), "message",
				api_json_string(msg));
	return api_reply_json(out, status, obj);
}

int api_reject(struct api_response *out, unsigned status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	api_reply_error(out, status, "%s", msg);
	return -1;
}

/* The message of err for a client: without the ": <strerror>" tail that
 * wr_error adds, which says nothing to someone who sent a bad field. */
static void client_message(const struct wr_error *err, char *buf, size_t size)
{
	snprintf(buf, size, "%s", err->msg ? err->msg : "");
	if (err->errnum > 0) {
		char tail[128];
		snprintf(tail, sizeof(tail), ": %s", strerror(err->errnum));
		size_t len = strlen(buf), tlen = strlen(tail);
		if (len > tlen && strcmp(buf + len - tlen, tail) == 0)
			buf[len - tlen] = '\0';
	}
}

int api_reply_internal(struct api_ctx *c, const char *what)
{
	char path[80];
	api_log(WR_LOG_ERROR, "%s %s: %s failed", c->req->method,
		api_quote(c->req->path, path), what);
	return api_reply_error(c->out, 500, "internal error");
}

int api_reply_render(struct api_ctx *c, unsigned status, json_t *obj,
		     const char *what)
{
	if (!obj)
		return api_reply_internal(c, what);
	if (api_reply_json(c->out, status, obj) < 0)
		return api_reply_internal(c, what);
	return 0;
}

int api_reply_failure(struct api_ctx *c, int r, const struct wr_error *err,
		      const char *what)
{
	unsigned status;
	switch (r) {
	case -ENOENT: status = 404; break;
	case -EACCES: status = 403; break;
	case -EINVAL:
	case -E2BIG:
	case -ERANGE:
	case -ENAMETOOLONG: status = 400; break;
	case -EPERM:
	case -ESTALE:
	case -EEXIST:
	case -EALREADY: status = 409; break;
	case -EAGAIN:
	case -EBUSY:
	case -ECANCELED:
	case -ESHUTDOWN: status = 503; break;
	default: status = err && err->bad_input ? 400 : 500; break;
	}
	char msg[512];
	if (err && err->msg)
		client_message(err, msg, sizeof(msg));
	else
		snprintf(msg, sizeof(msg), "%s: %s", what, strerror(-r));
	if (status >= 500) {
		/* 503: busy or stopping, which a retry gets past */
		char path[80];
		api_log(status == 500 ? WR_LOG_ERROR : WR_LOG_WARN,
			"%s %s: %s: %s", c->req->method,
			api_quote(c->req->path, path), what,
			err && err->msg ? err->msg : strerror(-r));
	}
	if (status == 500)
		return api_reply_error(c->out, 500, "internal error");
	return api_reply_error(c->out, status, "%s", msg);
}

/* ---- paths ---- */

#define API_PREFIX "/api/v1/"
#define API_SEGS_MAX 6 /* evals/reviews/{batch}/items/{item}/diff */

struct api_path {
	char buf[API_PATH_MAX + 1];
	const char *seg[API_SEGS_MAX];
	size_t n;
};

static int hex_value(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Splits the part after /api/v1/ into segments on the raw '/' (so that an
 * encoded %2F never separates) and percent-decodes each. -ENOENT: cannot
 * be a route (404); -EINVAL: malformed or NUL escape (400). Empty segments
 * ("//", a trailing '/') and "." or ".." match no route, and are not
 * resolved: no route is reached by a path that names another. */
static int path_split(const char *raw, struct api_path *p)
{
	size_t plen = strlen(API_PREFIX);
	if (strncmp(raw, API_PREFIX, plen) != 0)
		return -ENOENT;
	const char *s = raw + plen;
	if (strlen(raw) > API_PATH_MAX)
		return -ENOENT;
	char *w = p->buf;
	p->n = 0;
	for (;;) {
		if (p->n == API_SEGS_MAX)
			return -ENOENT;
		p->seg[p->n++] = w;
		const char *start = s;
		while (*s && *s != '/') {
			if (*s == '%') {
				int hi = hex_value(s[1]);
				int lo = hi < 0 ? -1 : hex_value(s[2]);
				if (lo < 0 || (hi == 0 && lo == 0))
					return -EINVAL;
				*w++ = (char)(hi * 16 + lo);
				s += 3;
			} else {
				*w++ = *s++;
			}
		}
		*w++ = '\0';
		if (s == start)
			return -ENOENT; /* empty segment */
		if (!*s)
			return 0;
		s++; /* the '/' */
	}
}

/* ---- routes ---- */

enum body_policy {
	BODY_NONE,     /* no body */
	BODY_OPTIONAL, /* none or a JSON object */
	BODY_REQUIRED, /* a JSON object */
};

#define ROLE_BIT(r) (1u << (r))
#define ANY_ROLE                                                  \
	(ROLE_BIT(API_ROLE_ADMIN) | ROLE_BIT(API_ROLE_REVIEWER) | \
	 ROLE_BIT(API_ROLE_SUBMITTER))
#define REVIEWERS (ROLE_BIT(API_ROLE_ADMIN) | ROLE_BIT(API_ROLE_REVIEWER))
#define ADMINS ROLE_BIT(API_ROLE_ADMIN)

struct route {
	/* segments after /api/v1/: '*' is the id, '+' a name (of an
	 * artifact, of a token) */
	const char *pattern;
	const char *method;
	/* 's', 'r', 'b': the prefix '*' must carry; 'e': an eval run's id
	 * (api_eval_run_id_valid) */
	char id_kind;
	enum body_policy body;
	const char *const *query; /* allowed parameters, NULL: none */
	int (*handler)(struct api_ctx *c);
	unsigned roles;	    /* ROLE_BIT()s of the roles that may call it */
	const char *action; /* for the 403: "approving a session" */
	bool (*name_valid)(const char *name); /* of the '+' segment */
};

static const char *const query_sessions[] = {"state", "user",	"repo",
					     "limit", "before", NULL};
static const char *const query_events[] = {"after", "format", NULL};
static const char *const query_snapshots[] = {"repo", NULL};

static const struct route routes[] = {
    {"sessions", "GET", 0, BODY_NONE, query_sessions, api_sessions_list,
     ANY_ROLE, NULL, NULL},
    {"sessions", "POST", 0, BODY_REQUIRED, NULL, api_sessions_create, ANY_ROLE,
     NULL, NULL},
    {"sessions/*", "GET", 's', BODY_NONE, NULL, api_session_get, ANY_ROLE, NULL,
     NULL},
    {"sessions/*/events", "GET", 's', BODY_NONE, query_events,
     api_session_events, ANY_ROLE, NULL, NULL},
    {"sessions/*/messages", "POST", 's', BODY_REQUIRED, NULL,
     api_session_message, ANY_ROLE, NULL, NULL},
    {"sessions/*/cancel", "POST", 's', BODY_OPTIONAL, NULL, api_session_cancel,
     ANY_ROLE, NULL, NULL},
    {"sessions/*/approve", "POST", 's', BODY_OPTIONAL, NULL,
     api_session_approve, REVIEWERS, "approving a session", NULL},
    {"sessions/*/reject", "POST", 's', BODY_OPTIONAL, NULL, api_session_reject,
     REVIEWERS, "rejecting a session", NULL},
    {"sessions/*/check", "POST", 's', BODY_REQUIRED, NULL, api_session_check,
     REVIEWERS, "checking a session", NULL},
    {"sessions/*/diff", "GET", 's', BODY_NONE, NULL, api_session_diff, ANY_ROLE,
     NULL, NULL},
    {"sessions/*/artifacts", "GET", 's', BODY_NONE, NULL, api_session_artifacts,
     ANY_ROLE, NULL, NULL},
    {"sessions/*/artifacts/+", "GET", 's', BODY_NONE, NULL,
     api_session_artifact, ANY_ROLE, NULL, api_artifact_name_valid},
    {"repositories", "GET", 0, BODY_NONE, NULL, api_repos_list, ANY_ROLE, NULL,
     NULL},
    {"repositories", "POST", 0, BODY_REQUIRED, NULL, api_repos_add, ADMINS,
     "adding a repository", NULL},
    {"repositories/*/refresh", "POST", 'r', BODY_OPTIONAL, NULL,
     api_repo_refresh, ADMINS, "refreshing a repository", NULL},
    {"repositories/*/builds", "GET", 'r', BODY_NONE, NULL, api_repo_builds,
     ANY_ROLE, NULL, NULL},
    {"repositories/*/builds/cancel", "POST", 'r', BODY_OPTIONAL, NULL,
     api_repo_build_cancel, ADMINS, "cancelling a build", NULL},
    {"repositories/*/builds/+/log", "GET", 'r', BODY_NONE, NULL,
     api_repo_build_log, REVIEWERS, "reading a build's log",
     api_build_id_valid},
    {"repositories/*", "GET", 'r', BODY_NONE, NULL, api_repo_get, ANY_ROLE,
     NULL, NULL},
    {"repositories/*", "PATCH", 'r', BODY_REQUIRED, NULL, api_repo_update,
     ADMINS, "changing a repository", NULL},
    {"repositories/*", "DELETE", 'r', BODY_NONE, NULL, api_repo_remove,
     ADMINS, "removing a repository", NULL},
    {"snapshots", "GET", 0, BODY_NONE, query_snapshots, api_snapshots_list,
     ANY_ROLE, NULL, NULL},
    {"tokens", "GET", 0, BODY_NONE, NULL, api_tokens_list, ADMINS,
     "listing tokens", NULL},
    {"tokens", "POST", 0, BODY_REQUIRED, NULL, api_tokens_create, ADMINS,
     "creating tokens", NULL},
    {"tokens/+", "DELETE", 0, BODY_NONE, NULL, api_token_revoke_route, ADMINS,
     "revoking tokens", store_token_name_valid},
    {"secrets", "GET", 0, BODY_NONE, NULL, api_secrets_list, ADMINS,
     "listing secrets", NULL},
    {"secrets/+", "PUT", 0, BODY_REQUIRED, NULL, api_secret_put, ADMINS,
     "setting secrets", api_secret_segment},
    {"secrets/+", "DELETE", 0, BODY_NONE, NULL, api_secret_delete, ADMINS,
     "deleting secrets", secrets_name_valid},
    {"evals", "GET", 0, BODY_NONE, NULL, api_evals_list, REVIEWERS,
     "reading evals", NULL},
    {"evals/reviews", "GET", 0, BODY_NONE, NULL, api_eval_batches_list,
     REVIEWERS, "reading evals", NULL},
    {"evals/reviews", "POST", 0, BODY_REQUIRED, NULL, api_eval_batch_create,
     REVIEWERS, "making a review batch", NULL},
    {"evals/reviews/*", "GET", 'b', BODY_NONE, NULL, api_eval_batch_get,
     REVIEWERS, "reviewing", NULL},
    {"evals/reviews/*/items/+", "GET", 'b', BODY_NONE, NULL,
     api_eval_item_get, REVIEWERS, "reviewing", api_eval_item_id_valid},
    {"evals/reviews/*/items/+", "POST", 'b', BODY_REQUIRED, NULL,
     api_eval_item_decide, REVIEWERS, "reviewing", api_eval_item_id_valid},
    {"evals/reviews/*/items/+/diff", "GET", 'b', BODY_NONE, NULL,
     api_eval_item_diff, REVIEWERS, "reviewing", api_eval_item_id_valid},
    {"evals/*", "GET", 'e', BODY_NONE, NULL, api_eval_get, REVIEWERS,
     "reading evals", NULL},
    {"evals/*", "PUT", 'e', BODY_REQUIRED, NULL, api_eval_run_put, REVIEWERS,
     "publishing an eval run", NULL},
    {"evals/*/attempts/+", "PUT", 'e', BODY_REQUIRED, NULL,
     api_eval_attempt_put, REVIEWERS, "publishing an eval run",
     api_eval_attempt_name_valid},
    {"healthz", "GET", 0, BODY_NONE, NULL, api_healthz, ANY_ROLE, NULL, NULL},
    {"whoami", "GET", 0, BODY_NONE, NULL, api_whoami, ANY_ROLE, NULL, NULL},
    {"events", "GET", 0, BODY_NONE, NULL, api_events_stream, ANY_ROLE, NULL,
     NULL},
    {"metrics", "GET", 0, BODY_NONE, NULL, api_metrics, ANY_ROLE, NULL, NULL},
    {"stats", "GET", 0, BODY_NONE, NULL, api_stats, ANY_ROLE, NULL, NULL},
};

/* Does the path have the route's shape? Sets *id to the '*' segment and
 * *name to the '+' one. */
static bool route_shape(const struct route *rt, const struct api_path *p,
			const char **id, const char **name)
{
	const char *pat = rt->pattern;
	size_t i = 0;
	*id = NULL;
	*name = NULL;
	while (*pat) {
		const char *end = strchrnul(pat, '/');
		size_t len = (size_t)(end - pat);
		if (i == p->n)
			return false;
		if (len == 1 && *pat == '*')
			*id = p->seg[i];
		else if (len == 1 && *pat == '+')
			*name = p->seg[i];
		else if (strlen(p->seg[i]) != len ||
			 memcmp(p->seg[i], pat, len) != 0)
			return false;
		i++;
		pat = *end ? end + 1 : end;
	}
	return i == p->n;
}

static bool is_dots(const char *seg)
{
	return seg && (!strcmp(seg, ".") || !strcmp(seg, ".."));
}

static bool is_json_type(const char *ct)
{
	if (!ct)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	size_t n = strlen("application/json");
	if (strncasecmp(ct, "application/json", n) != 0)
		return false;
	ct += n;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return *ct == '\0' || *ct == ';';
}

static int parse_body(struct api_ctx *c, enum body_policy policy)
{
	const struct api_request *req = c->req;
	if (req->body_len == 0) {
		if (policy == BODY_REQUIRED)
			return api_reject(c->out, 400,
					  "a JSON object body is required");
		return 0;
	}
	if (policy == BODY_NONE)
		return api_reject(c->out, 400, "this request takes no body");
	if (!is_json_type(req->content_type))
		return api_reject(c->out, 415,
				  "the body must be application/json");
	json_error_t jerr;
	/* no NUL in strings (jansson's default), no duplicate keys; any
	 * value, so that "[1]" is told it is not an object */
	c->body = json_loadb(req->body, req->body_len,
			     JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!c->body) {
		char text[80];
		return api_reject(c->out, 400,
				  "malformed JSON (line %d, column %d): "
				  "%s",
				  jerr.line, jerr.column,
				  api_quote(jerr.text, text));
	}
	if (!json_is_object(c->body))
		return api_reject(c->out, 400,
				  "the body must be a JSON object");
	return 0;
}

static int dispatch(struct api_ctx *c)
{
	const struct api_request *req = c->req;
	struct api_path path;
	int r = path_split(req->path, &path);
	if (r == -EINVAL)
		return api_reply_error(
		    c->out, 400, "malformed percent-encoding in the path");
	if (r < 0)
		return api_reply_error(c->out, 404, "no such route");

	const char *method = req->method;
	if (strcmp(method, "HEAD") == 0) {
		c->head = true;
		method = "GET";
	}
	const struct route *match = NULL;
	const char *id = NULL, *name = NULL;
	char allow[sizeof(c->out->allow)] = "";
	bool shaped = false;
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
		const char *seg_id, *seg_name;
		if (!route_shape(&routes[i], &path, &seg_id, &seg_name))
			continue;
		bool same_method = strcmp(routes[i].method, method) == 0;
		/* "." and ".." name nothing: a path with one is no route's
		 * (404), whatever the method; with the route's method it is
		 * refused below, as any name that cannot be one */
		if (!same_method && (is_dots(seg_id) || is_dots(seg_name)))
			continue;
		shaped = true;
		if (same_method) {
			match = &routes[i];
			id = seg_id;
			name = seg_name;
			break;
		}
		size_t used = strlen(allow);
		snprintf(allow + used, sizeof(allow) - used, "%s%s",
			 used ? ", " : "", routes[i].method);
	}
	if (!match && !shaped)
		return api_reply_error(c->out, 404, "no such route");
	if (!match) {
		char m[80];
		api_reply_error(c->out, 405, "method %s not allowed; use %s",
				api_quote(req->method, m), allow);
		memcpy(c->out->allow, allow, sizeof(allow));
		return 0;
	}
	if (!(match->roles & ROLE_BIT(c->who.role)))
		return api_reply_error(
		    c->out, 403, "%s needs the %s role",
		    match->action ? match->action : "this request",
		    match->roles == ADMINS ? "admin" : "reviewer or admin");
	if (match->id_kind) {
		bool ok = match->id_kind == 'e'
			      ? api_eval_run_id_valid(id)
			      : api_id_valid(id, match->id_kind);
		if (!ok)
			return api_reply_error(
			    c->out, 404, "no such %s",
			    match->id_kind == 's'   ? "session"
			    : match->id_kind == 'r' ? "repository"
			    : match->id_kind == 'e' ? "eval run"
						    : "review batch");
		c->id = id;
	}
	if (name) {
		/* like an id: a name that cannot be one is not looked for */
		if (!match->name_valid(name))
			return api_reply_error(
			    c->out, 404, "no such %s",
			    match->name_valid == api_build_id_valid ? "build"
			    : match->name_valid == api_eval_item_id_valid
				? "review item"
			    : match->name_valid == api_eval_attempt_name_valid
				? "attempt"
			    : match->id_kind ? "artifact"
			    : !strncmp(match->pattern, "secrets/", 8)
				? "secret"
				: "token");
		c->name = name;
	}
	if (api_query_parse(req->query, &c->query, match->query, c->out) < 0)
		return 0;
	if (parse_body(c, match->body) < 0)
		return 0;
	return match->handler(c);
}

int api_handle(struct api *a, const struct api_request *req,
	       struct api_response *out)
{
	memset(out, 0, sizeof(*out));
	if (!req->method || !req->path || (req->body_len && !req->body))
		return api_reply_error(out, 400, "malformed request");
	if (req->body_len > a->max_body)
		return api_reply_error(out, 413, "the body exceeds %zu bytes",
				       a->max_body);

	/* Outside the API: Slack's routes, signed by Slack rather than
	 * carrying a token, and the web UI's static files, which hold no
	 * data (the page asks the API for it with the user's token). */
	if (strncmp(req->path, "/api/", 5) != 0) {
		if (strcmp(req->path, "/slack/commands") == 0)
			return api_slack_command(a, req, out);
		if (strcmp(req->path, "/slack/events") == 0)
			return api_slack_event(a, req, out);
		return api_web_serve(a, req, out);
	}

	/* a context per request: big (the query buffer) but on the stack */
	struct api_ctx c = {.a = a, .req = req, .out = out};
	struct wr_error *err = NULL;
	int r = api_authenticate(a, req->authorization, &c.who, &err);
	if (r == -EACCES) {
		api_reply_error(out, 401, "a valid bearer token is required");
	} else if (r < 0) {
		api_reply_failure(&c, r, err, "token lookup");
		/* a token the store cannot look up is not a valid one */
		if (out->status < 500)
			api_reply_error(out, 401,
					"a valid bearer token is required");
	} else {
		dispatch(&c);
	}
	wr_error_free(err);
	json_decref(c.body);
	return out->status == 500 && !out->body ? -ENOMEM : 0;
}

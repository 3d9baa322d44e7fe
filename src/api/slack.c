/* slack.c - POST /slack/commands (the slash command `/warren REPO PROMPT`)
 * and POST /slack/events (the Events API: the Request URL's check, and
 * app mentions `@Warren REPO PROMPT`); docs/slack.md.
 *
 * Outside /api/v1 and without a bearer token: a request is Slack's when
 * its v0 signature (X-Slack-Signature over X-Slack-Request-Timestamp and
 * the raw body, with the app's signing secret) matches and its timestamp
 * is within five minutes of the server's clock; anything else is 401, and
 * nothing is looked at or changed. The checks run in this order: Slack
 * configured (404), body size (413), signature (401), method (405),
 * media type (415), body (400), then the Slack user.
 *
 * The Slack user who wrote the command acts as the Warren user and role
 * the configuration maps it to (slack.users), with the API's rules
 * (docs/api.md, "Roles"): anyone mapped starts sessions, a submitter sees
 * only its own, approve and reject are for reviewers and admins. An
 * unmapped user gets an answer that only they see, and nothing else
 * happens.
 *
 * A slash command is answered in the response (within Slack's three
 * seconds): the started session's link, in the channel; anything else
 * only to the user. A mention is answered in its thread through the
 * notifier (the Web API), since Slack shows nothing of an Events API
 * response; its event id is recorded first, so that Slack's retries of a
 * delivery start nothing twice. When a session was started, an outcome
 * post is put in Slack's outbox (notify/outbox.h): the notifier posts it
 * when the session reaches review (or fails, or is cancelled), and the
 * decision after review. */
#include "api/internal.h"

#include "notify/slack.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define REPOS_SHOWN 20
#define MENTION_PREFIX "@Warren"
#define COMMAND_PREFIX "/warren"

/* ---- answers --------------------------------------------------------------
 */

/* A slash command's answer: {"response_type", "text"}. */
static int reply_command(struct api_response *out, bool in_channel,
			 const char *text)
{
	json_t *o = json_pack("{s:s, s:o}", "response_type",
			      in_channel ? "in_channel" : "ephemeral", "text",
			      api_json_string(text));
	return api_reply_json(out, 200, o);
}

static int reply_ok(struct api_response *out)
{
	return api_reply_json(out, 200, json_pack("{s:b}", "ok", 1));
}

static bool media_type_is(const char *ct, const char *want)
{
	if (!ct)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	size_t n = strlen(want);
	if (strncasecmp(ct, want, n) != 0)
		return false;
	ct += n;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return *ct == '\0' || *ct == ';';
}

/* What every Slack request goes through before its body is read: 0, or
 * -1 with the answer written. */
static int check_request(struct api *a, const struct api_request *req,
			 struct api_response *out, const char *media_type)
{
	if (!a->slack)
		return api_reject(out, 404, "Slack is not configured");
	if (req->body_len > SLACK_BODY_MAX)
		return api_reject(out, 413, "the body exceeds %d bytes",
				  SLACK_BODY_MAX);
	int r = slack_verify(a->slack->signing_secret, req->slack_timestamp,
			     req->slack_signature, req->body, req->body_len,
			     (int64_t)time(NULL));
	if (r == -ESTALE)
		return api_reject(out, 401,
				  "X-Slack-Request-Timestamp is more than five "
				  "minutes away from the server's clock");
	if (r == -EACCES)
		return api_reject(out, 401,
				  "X-Slack-Signature does not match the "
				  "request");
	if (r < 0)
		return api_reject(out, 401,
				  "a request signed by Slack is required "
				  "(X-Slack-Signature, "
				  "X-Slack-Request-Timestamp)");
	if (strcmp(req->method, "POST") != 0) {
		char m[80];
		api_reply_error(out, 405, "method %s not allowed; use POST",
				api_quote(req->method, m));
		snprintf(out->allow, sizeof(out->allow), "POST");
		return -1;
	}
	if (!media_type_is(req->content_type, media_type))
		return api_reject(out, 415, "the body must be %s", media_type);
	return 0;
}

/* ---- what a command does ----------------------------------------------------
 */

/* The answer to a command: its text (mrkdwn, owned) and who sees it. */
struct slack_reply {
	char *text;
	bool public; /* the channel (thread), else the asker alone */
};

/* The mapped user, as the API's principal. */
struct slack_actor {
	const struct slack_user *u;
	enum api_role role;
};

static int set_reply(struct slack_reply *reply, bool public, char *text)
{
	free(reply->text);
	reply->text = text;
	reply->public = public;
	return text ? 0 : -ENOMEM;
}

/* err's message without wr_error's ": <strerror>" tail, which says
 * nothing to someone who sent a bad field. */
static void plain_message(const struct wr_error *err, const char *fallback,
			  char *msg, size_t size)
{
	snprintf(msg, size, "%s", err && err->msg ? err->msg : fallback);
	if (err && err->errnum > 0) {
		char tail[128];
		snprintf(tail, sizeof(tail), ": %s", strerror(err->errnum));
		size_t len = strlen(msg), tlen = strlen(tail);
		if (len > tlen && !strcmp(msg + len - tlen, tail))
			msg[len - tlen] = '\0';
	}
}

/* The same, escaped for mrkdwn. */
static char *user_message(const struct wr_error *err, const char *fallback)
{
	char msg[512];
	plain_message(err, fallback, msg, sizeof(msg));
	return slack_escape(msg, sizeof(msg));
}

/* An error the user should read: "<what>: <why>", to them alone. */
static int reply_error(struct slack_reply *reply, const char *what,
		       const struct wr_error *err, const char *fallback)
{
	_cleanup_free_ char *why = user_message(err, fallback);
	return set_reply(reply, false,
			 why ? wr_asprintf("%s: %s", what, why) : NULL);
}

/* Is r (with err) a failure of Warren's own (logged, "internal error")
 * rather than one of the request? */
static bool internal_failure(int r, const struct wr_error *err)
{
	switch (r) {
	case -ENOENT:
	case -EINVAL:
	case -E2BIG:
	case -ERANGE:
	case -EPERM:
	case -ESTALE:
	case -EEXIST:
	case -EALREADY:
	case -EAGAIN:
	case -EBUSY:
	case -ESHUTDOWN:
	case -ECANCELED: return false;
	default: return !(err && err->bad_input);
	}
}

/* A failure of Warren's while doing what: logged once, and the user is
 * told no more than that. -EIO. */
static int internal(struct slack_reply *reply, const char *what,
		    const struct wr_error *err)
{
	api_log(WR_LOG_ERROR, "slack: %s: %s", what,
		err && err->msg ? err->msg : "failed");
	_cleanup_free_ char *text = wr_asprintf(
	    "Warren could not %s (internal error; the server logged it).",
	    what);
	set_reply(reply, false, TAKE_PTR(text));
	return -EIO;
}

/* The session id, if the actor may see it (a submitter: its own). 0, 1
 * when it may not or does not exist (the reply says so), or -EIO. */
static int load_session(struct api *a, const struct slack_actor *who,
			const char *id, struct store_session *s,
			struct slack_reply *reply)
{
	struct wr_error *err = NULL;
	int r = a->st->ops->session_get(a->st, id, s, &err);
	if (r == 0 && who->role == API_ROLE_SUBMITTER &&
	    (!s->user || strcmp(s->user, who->u->user))) {
		store_session_clear(s);
		r = -ENOENT; /* as the API: not found, not forbidden */
	}
	if (r == -ENOENT) {
		wr_error_free(err);
		return set_reply(reply, false,
				 wr_asprintf("No session %s.", id)) < 0
			   ? -EIO
			   : 1;
	}
	if (r < 0) {
		internal(reply, "read the session", err);
		wr_error_free(err);
		return -EIO;
	}
	return 0;
}

static char *repo_name_of(struct api *a, const char *repo_id)
{
	struct store_repo repo = {0};
	if (a->st->ops->repo_get(a->st, repo_id, &repo, NULL) < 0)
		return NULL;
	char *name = TAKE_PTR(repo.name);
	store_repo_clear(&repo);
	return name;
}

static int do_status(struct api *a, const struct slack_actor *who,
		     const struct slack_command *cmd, struct slack_reply *reply)
{
	struct store_session s = {0};
	int r = load_session(a, who, cmd->session_id, &s, reply);
	if (r != 0)
		return r < 0 ? r : 0;
	_cleanup_free_ char *repo = repo_name_of(a, s.repo_id);
	r = set_reply(reply, false, slack_status_text(a->slack, &s, repo));
	store_session_clear(&s);
	return r;
}

static int do_decide(struct api *a, const struct slack_actor *who,
		     const struct slack_command *cmd, struct slack_reply *reply)
{
	bool approve = cmd->verb == SLACK_VERB_APPROVE;
	if (who->role == API_ROLE_SUBMITTER)
		return set_reply(
		    reply, false,
		    wr_asprintf("%s a session needs the reviewer or admin "
				"role; you act as %s, a submitter.",
				approve ? "Approving" : "Rejecting",
				who->u->user));
	struct store_session s = {0};
	int r = load_session(a, who, cmd->session_id, &s, reply);
	if (r != 0)
		return r < 0 ? r : 0;
	store_session_clear(&s);
	struct wr_error *err = NULL;
	r = approve
		? control_approve(a->ctl, cmd->session_id, who->u->user, &err)
		: control_reject(a->ctl, cmd->session_id, who->u->user,
				 cmd->reason, &err);
	if (r < 0) {
		_cleanup_free_ char *what = wr_asprintf(
		    "Could not %s %s", approve ? "approve" : "reject",
		    cmd->session_id);
		if (internal_failure(r, err))
			r = internal(reply,
				     approve ? "approve the session"
					     : "reject the session",
				     err);
		else
			r = reply_error(reply, what ? what : "Could not decide",
					err,
					r == -EPERM ? "the session is not in "
						      "review"
						    : strerror(-r));
		wr_error_free(err);
		return r < 0 && r != -ENOMEM ? r : 0;
	}
	/* what it led to: pushed (or failed with the push's error),
	 * rejected */
	r = load_session(a, who, cmd->session_id, &s, reply);
	if (r != 0)
		return r < 0 ? r : 0;
	_cleanup_free_ char *repo = repo_name_of(a, s.repo_id);
	r = set_reply(reply, true, slack_status_text(a->slack, &s, repo));
	store_session_clear(&s);
	return r;
}

/* "No repository named X. Registered: a, b, c." */
static int unknown_repo(struct api *a, const char *name,
			struct slack_reply *reply)
{
	struct store_repo *repos = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	int r = a->st->ops->repo_list(a->st, &repos, &n, &err);
	if (r < 0) {
		internal(reply, "list the repositories", err);
		wr_error_free(err);
		return -EIO;
	}
	_cleanup_free_ char *shown = slack_escape(name, 100);
	char list[1024] = "";
	size_t used = 0;
	for (size_t i = 0; i < n && i < REPOS_SHOWN; i++) {
		int w = snprintf(list + used, sizeof(list) - used, "%s`%s`",
				 i ? ", " : "", repos[i].name);
		if (w < 0 || (size_t)w >= sizeof(list) - used)
			break;
		used += (size_t)w;
	}
	r = set_reply(
	    reply, false,
	    wr_asprintf("No repository named `%s`. %s%s%s", shown ? shown : "?",
			n ? "Registered: " : "No repository is registered yet.",
			list,
			n > REPOS_SHOWN ? ", …"
			: n		? "."
					: ""));
	store_repos_free(repos, n);
	return r;
}

/* Starts the session; *started gets it. 0 (with a reply either way), or
 * -EIO when nothing was started because Warren failed. */
static int do_run(struct api *a, const struct slack_actor *who,
		  const struct slack_command *cmd, struct slack_reply *reply,
		  struct store_session *started)
{
	/* a registered repository only: a URL or a path from a chat is not
	 * something to clone on the server */
	struct store_repo repo = {0};
	struct wr_error *err = NULL;
	int r = a->st->ops->repo_get(a->st, cmd->repo, &repo, &err);
	if (r == -ENOENT) {
		wr_error_free(err);
		return unknown_repo(a, cmd->repo, reply);
	}
	if (r < 0) {
		internal(reply, "look up the repository", err);
		wr_error_free(err);
		return -EIO;
	}
	struct control_submit req = {
	    .user = who->u->user,
	    .repo = repo.id,
	    .prompt = cmd->prompt,
	    .ref = cmd->ref,
	};
	r = control_submit(a->ctl, &req, started, &err);
	if (r < 0) {
		if (internal_failure(r, err))
			r = internal(reply, "start the session", err);
		else
			r = reply_error(reply, "Could not start the session",
					err, strerror(-r));
		wr_error_free(err);
		store_repo_clear(&repo);
		return r < 0 && r != -ENOMEM ? r : 0;
	}
	r = set_reply(reply, true,
		      slack_started_text(a->slack, started, repo.name));
	store_repo_clear(&repo);
	return r < 0 ? 0 : 1; /* started, whatever the text */
}

/* Runs cmd for who. 1 when a session was started (*started), 0 for any
 * other answer, -EIO when Warren failed before it changed anything. The
 * reply is set in every case (NULL text only when out of memory). */
static int run_command(struct api *a, const struct slack_actor *who,
		       const struct slack_command *cmd, const char *prefix,
		       struct slack_reply *reply, struct store_session *started)
{
	switch (cmd->verb) {
	case SLACK_VERB_RUN: return do_run(a, who, cmd, reply, started);
	case SLACK_VERB_STATUS: return do_status(a, who, cmd, reply);
	case SLACK_VERB_APPROVE:
	case SLACK_VERB_REJECT: return do_decide(a, who, cmd, reply);
	default: set_reply(reply, false, slack_help_text(prefix)); return 0;
	}
}

/* The actor a Slack user id maps to, or NULL. */
static bool actor_of(const struct slack_config *cfg, const char *slack_id,
		     struct slack_actor *who)
{
	const struct slack_user *u = slack_user_find(cfg, slack_id);
	int role = u ? api_role_parse(u->role) : -1;
	if (role < 0)
		return false;
	who->u = u;
	who->role = role;
	return true;
}

static char *not_linked_text(const char *slack_id)
{
	return wr_asprintf(
	    "Your Slack account (%s) is not linked to a Warren user, so "
	    "Warren did nothing. Ask a Warren admin to add it under "
	    "`slack.users` in the server's configuration.",
	    slack_id);
}

/* The command's text parsed, or an answer saying what is wrong with it
 * followed by the usage. 0, or 1 with the reply set. */
static int parse_command(const char *text, const char *prefix,
			 struct slack_command *cmd, struct slack_reply *reply)
{
	struct wr_error *err = NULL;
	if (slack_command_parse(text, cmd, &err) == 0)
		return 0;
	_cleanup_free_ char *why = user_message(err, "cannot read the command");
	_cleanup_free_ char *help = slack_help_text(prefix);
	wr_error_free(err);
	set_reply(reply, false,
		  why && help ? wr_asprintf("%s\n\n%s", why, help) : NULL);
	return 1;
}

/* ---- POST /slack/commands
 * ------------------------------------------------------ */

/* A Slack id from a form (user_id, channel_id): [A-Za-z0-9._-], as the
 * ids of the Events API (they end up in messages and the store). */
static bool form_id_ok(const char *s)
{
	size_t n = 0;
	for (; s && s[n]; n++) {
		char c = s[n];
		if (n == SLACK_ID_MAX ||
		    !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return false;
	}
	return n > 0;
}

/* The command's name as the user typed it ("/warren"), for the usage. */
static const char *command_prefix(const char *command)
{
	if (!command || command[0] != '/' || strlen(command) > 32)
		return COMMAND_PREFIX;
	for (const char *p = command + 1; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '_' || *p == '-'))
			return COMMAND_PREFIX;
	return command;
}

/* The outcome post of a session started by a slash command: to its
 * response_url, later to its channel. Failing to add it loses only the
 * post, which the answer then says. */
static void add_outcome(struct api *a, const struct store_session *s,
			const char *channel, const char *thread_ts,
			const char *response_url, const char *slack_user,
			struct slack_reply *reply)
{
	struct slack_post p = {
	    .kind = SLACK_POST_OUTCOME,
	    .channel = (char *)channel,
	    .thread_ts = (char *)thread_ts,
	    .response_url = (char *)response_url,
	    .slack_user = (char *)slack_user,
	};
	memcpy(p.session_id, s->id, sizeof(p.session_id));
	struct wr_error *err = NULL;
	if (a->outbox->ops->post_add(a->outbox, &p, &err) < 0) {
		api_log(WR_LOG_ERROR,
			"slack: session %s: keep its Slack target: %s", s->id,
			err && err->msg ? err->msg : "failed");
		if (reply && reply->text) {
			char *more = wr_asprintf(
			    "%s\n(Warren cannot post the outcome here: follow "
			    "the link.)",
			    reply->text);
			if (more)
				set_reply(reply, reply->public, more);
		}
	}
	wr_error_free(err);
}

/* A slash command's answer that came too late for Slack's three seconds,
 * through the outbox to its response_url. */
static void late_answer(struct api *a, const char *response_url,
			const char *slack_user, const struct slack_reply *reply)
{
	struct slack_post p = {
	    .kind = reply->public ? SLACK_POST_REPLY : SLACK_POST_EPHEMERAL,
	    .response_url = (char *)response_url,
	    .slack_user = (char *)slack_user,
	    .text = reply->text,
	};
	struct wr_error *err = NULL;
	if (a->outbox->ops->post_add(a->outbox, &p, &err) < 0)
		api_log(WR_LOG_ERROR, "slack: keep a late answer: %s",
			err && err->msg ? err->msg : "failed");
	wr_error_free(err);
}

int api_slack_command(struct api *a, const struct api_request *req,
		      struct api_response *out)
{
	if (check_request(a, req, out, "application/x-www-form-urlencoded") < 0)
		return 0;
	struct slack_form form = {0};
	struct wr_error *err = NULL;
	if (slack_form_parse(req->body, req->body_len, &form, &err) < 0) {
		char msg[160];
		plain_message(err, "malformed form", msg, sizeof(msg));
		wr_error_free(err);
		return api_reply_error(out, 400, "%s", msg);
	}
	const char *user_id = slack_form_get(&form, "user_id");
	const char *channel = slack_form_get(&form, "channel_id");
	const char *response_url = slack_form_get(&form, "response_url");
	const char *text = slack_form_get(&form, "text");
	const char *prefix = command_prefix(slack_form_get(&form, "command"));
	struct slack_reply reply = {0};
	struct slack_command cmd = {0};
	struct store_session started = {0};
	struct slack_actor who;
	int r = 0;
	if (!form_id_ok(user_id) || (channel && !form_id_ok(channel))) {
		r = api_reply_error(out, 400,
				    "form fields 'user_id' and 'channel_id': "
				    "expected Slack ids");
		goto out;
	}
	if (response_url && !slack_response_url_ok(a->slack, response_url)) {
		r = api_reply_error(out, 400,
				    "form field 'response_url': not a Slack "
				    "URL");
		goto out;
	}
	int64_t t0 = store_now_ms();
	if (!actor_of(a->slack, user_id, &who))
		set_reply(&reply, false, not_linked_text(user_id));
	else if (parse_command(text, prefix, &cmd, &reply) == 0 &&
		 run_command(a, &who, &cmd, prefix, &reply, &started) == 1 &&
		 (response_url || channel))
		add_outcome(a, &started, channel, NULL, response_url, user_id,
			    &reply);
	/* Slack has given up on an answer this late: it goes through the
	 * response_url too (the one in the response is then dropped) */
	if (reply.text && response_url &&
	    (uint64_t)(store_now_ms() - t0) > a->slack->answer_within_ms)
		late_answer(a, response_url, user_id, &reply);
	if (!reply.text)
		r = api_reply_error(out, 500, "internal error");
	else
		r = reply_command(out, reply.public, reply.text);
out:
	free(reply.text);
	slack_command_clear(&cmd);
	store_session_clear(&started);
	slack_form_clear(&form);
	return r;
}

/* ---- POST /slack/events
 * ----------------------------------------------------------- */

/* Puts an answer to a mention in the outbox: in its thread, for all or
 * for the asker alone; about session_id (the one it started) or none. */
static int post_reply(struct api *a, const struct slack_event *ev,
		      const char *thread, const struct slack_reply *reply,
		      const char *session_id)
{
	if (!reply->text)
		return -ENOMEM;
	struct slack_post p = {
	    .kind = reply->public ? SLACK_POST_REPLY : SLACK_POST_EPHEMERAL,
	    .channel = ev->channel,
	    .thread_ts = (char *)thread,
	    .slack_user = ev->user,
	    .text = reply->text,
	};
	if (session_id)
		snprintf(p.session_id, sizeof(p.session_id), "%s", session_id);
	struct wr_error *err = NULL;
	int64_t id = a->outbox->ops->post_add(a->outbox, &p, &err);
	if (id < 0)
		api_log(WR_LOG_ERROR, "slack: event %s: keep the reply: %s",
			ev->event_id, err && err->msg ? err->msg : "failed");
	wr_error_free(err);
	return id < 0 ? (int)id : 0;
}

/* 0 once the mention is handled (whatever the answer), -errno when
 * Warren failed before anything changed (Slack may retry it). */
static int handle_mention(struct api *a, const struct slack_event *ev)
{
	/* a mention in a thread is answered there; one in a channel starts
	 * a thread under it */
	const char *thread = ev->thread_ts ? ev->thread_ts : ev->ts;
	struct slack_reply reply = {0};
	struct slack_command cmd = {0};
	struct store_session started = {0};
	struct slack_actor who;
	int r;
	if (!actor_of(a->slack, ev->user, &who)) {
		set_reply(&reply, false, not_linked_text(ev->user));
		r = post_reply(a, ev, thread, &reply, NULL);
	} else if (parse_command(ev->text, MENTION_PREFIX, &cmd, &reply)) {
		r = post_reply(a, ev, thread, &reply, NULL);
	} else {
		r = run_command(a, &who, &cmd, MENTION_PREFIX, &reply,
				&started);
		if (r == 1) {
			/* started: from here on nothing is to be retried,
			 * or the session would be started twice. The
			 * answer first: its outcome waits for it. */
			post_reply(a, ev, thread, &reply, started.id);
			add_outcome(a, &started, ev->channel, thread, NULL,
				    ev->user, NULL);
			r = 0;
		} else if (r == 0) {
			r = post_reply(a, ev, thread, &reply, NULL);
		}
	}
	free(reply.text);
	slack_command_clear(&cmd);
	store_session_clear(&started);
	return r;
}

int api_slack_event(struct api *a, const struct api_request *req,
		    struct api_response *out)
{
	if (check_request(a, req, out, "application/json") < 0)
		return 0;
	struct slack_event ev = {0};
	struct wr_error *err = NULL;
	if (slack_event_parse(req->body, req->body_len, &ev, &err) < 0) {
		char msg[160];
		plain_message(err, "malformed event", msg, sizeof(msg));
		wr_error_free(err);
		return api_reply_error(out, 400, "%s", msg);
	}
	int r;
	if (ev.kind == SLACK_EVENT_URL_VERIFICATION) {
		r = api_reply_json(
		    out, 200, json_pack("{s:s}", "challenge", ev.challenge));
		goto out;
	}
	/* other events, and the messages of bots (Warren's own among
	 * them): acknowledged, nothing else */
	if (ev.kind != SLACK_EVENT_MENTION || ev.from_bot || !ev.user) {
		r = reply_ok(out);
		goto out;
	}
	r = a->outbox->ops->event_claim(a->outbox, ev.event_id, store_now_ms(),
					SLACK_EVENT_KEEP_MS, &err);
	if (r == -EEXIST) {
		/* a retry of a delivery handled (or being handled) */
		r = reply_ok(out);
		goto out;
	}
	if (r < 0) {
		api_log(WR_LOG_ERROR, "slack: event %s: record it: %s",
			ev.event_id, err && err->msg ? err->msg : "failed");
		r = api_reply_error(out, 500, "internal error");
		goto out;
	}
	if (handle_mention(a, &ev) < 0) {
		/* nothing was started: let Slack's retry have another go */
		struct wr_error *rerr = NULL;
		if (a->outbox->ops->event_release(a->outbox, ev.event_id,
						  &rerr) < 0)
			api_log(WR_LOG_ERROR, "slack: event %s: forget it: %s",
				ev.event_id,
				rerr && rerr->msg ? rerr->msg : "failed");
		wr_error_free(rerr);
		r = api_reply_error(out, 500, "internal error");
		goto out;
	}
	r = reply_ok(out);
out:
	wr_error_free(err);
	slack_event_clear(&ev);
	return r;
}

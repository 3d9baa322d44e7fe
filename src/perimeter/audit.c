/* audit.c - what goes into a session's audit log (security/audit.h).
 *
 * The control plane hands every session event and state change here, its
 * decision code its decisions and pushes, the runner each exec of a
 * command agent. Recorded: state changes with who caused them (the system,
 * or user:<name> for a submission, a follow-up, a cancel, a decision); the
 * agent's execs (argv, exit status, output lines counted) and tool calls
 * (tool and arguments) with their results (status, size and SHA-256 of the
 * content); the model's replies (size and hash); verification, the result,
 * checkpoints, retries, sandbox clean-ups; use of the model's API key;
 * approvals, rejections and pushes. Not recorded: each output line (the
 * exec record counts them), content itself (its hash ties the audit record
 * to the transcript in the store).
 *
 * The audit never fails a session: a failing write is logged once (and
 * again only after a write succeeded in between). */
#include "perimeter/internal.h"

#include "agents/preset.h"

#include "security/audit.h"
#include "util/alloc.h"
#include "util/log.h"
#include "util/cleanup.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A tool argument longer than this is recorded as its size and hash. */
#define ARG_INLINE_MAX 4096
/* A tool call's arguments, serialized, at most (else size and hash). */
#define ARGS_RECORD_MAX (16 * 1024)

static atomic_bool audit_failing;

void perimeter_audit(struct perimeter *p, const char *session_id, const char *actor,
		   const char *kind, json_t *details)
{
	struct wr_error *err = NULL;
	/* details NULL: building them ran out of memory; what happened is
	 * still worth a record */
	/* a worker's record is fenced by the session's lease, as its events
	 * are (store.h, "Leases") */
	int64_t epoch =
	    p->host.epoch ? p->host.epoch(p->host.ctx, session_id) : 0;
	int r = audit_store_append(p->cfg.st, session_id, epoch, actor, kind,
				   details, &err);
	json_decref(details);
	if (r < 0 && !atomic_exchange(&audit_failing, true))
		wr_log(WR_LOG_ERROR, "audit",
		       "audit log of session %s: %s: %s (audit failures are "
		       "not logged again until a write succeeds)",
		       session_id, kind, err && err->msg ? err->msg : "failed");
	else if (r == 0 && atomic_exchange(&audit_failing, false))
		wr_log(WR_LOG_INFO, "audit", "audit log writes succeed again");
	wr_error_free(err);
}

/* "user:<name>" (NULL user: "system"), within the actor's size, cut on a
 * character boundary, without control characters. */
static void actor_of(const char *user, char *out, size_t size)
{
	if (!user) {
		snprintf(out, size, "system");
		return;
	}
	snprintf(out, size, "user:%s", *user ? user : "unknown");
	size_t n = strlen(out);
	if (strlen(user) + 5 > n) /* cut: drop a partial UTF-8 sequence */
		while (n > 6 && ((unsigned char)out[n - 1] & 0x80))
			out[--n] = '\0';
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

void perimeter_audit_user(struct perimeter *p, const char *session_id,
			const char *user, const char *kind, json_t *details)
{
	char actor[AUDIT_ACTOR_MAX + 1];
	actor_of(user, actor, sizeof(actor));
	perimeter_audit(p, session_id, actor, kind, details);
}

/* {"bytes": N, "sha256": HEX}: content named, not carried. */
static json_t *digest_of(const char *data, size_t len)
{
	char hex[AUDIT_HASH_HEX + 1];
	audit_sha256_hex(data, len, hex);
	return json_pack("{s:I, s:s}", "bytes", (json_int_t)len, "sha256", hex);
}

/* A remote URL without its user information (a token may sit there). */
static json_t *url_redacted(const char *url)
{
	if (!url)
		return json_null();
	const char *scheme = strstr(url, "://");
	const char *host = scheme ? scheme + 3 : url;
	const char *at = strchr(host, '@');
	const char *slash = strchr(host, '/');
	if (!scheme || !at || (slash && slash < at))
		return json_string(url);
	return json_sprintf("%.*s***%s", (int)(host - url), url, at);
}

static const char *str_or_empty(const json_t *v)
{
	const char *s = json_string_value(v);
	return s ? s : "";
}

/* ---- submissions, follow-ups, execs ------------------------------------ */

void perimeter_audit_submit(struct perimeter *p, const struct store_session *s,
			  const char *repo_name)
{
	json_t *agent = NULL;
	if (agents_is_builtin(s->agent_json))
		agent = json_string("builtin");
	else if (s->agent_json)
		agent = json_loads(s->agent_json, 0, NULL);
	json_t *limits =
	    s->limits_json ? json_loads(s->limits_json, 0, NULL) : NULL;
	const char *prompt = s->prompt ? s->prompt : "";
	json_t *d =
	    json_pack("{s:s, s:s, s:s?, s:s?, s:o?, s:o?, s:o}", "state",
		      "queued", "repo", s->repo_id, "repo_name", repo_name,
		      "ref", s->ref, "agent", agent, "limits", limits, "prompt",
		      digest_of(prompt, strlen(prompt)));
	perimeter_audit_user(p, s->id, s->user, "submit", d);
}

void perimeter_audit_message(struct perimeter *p, const char *session_id,
			   const char *user, int64_t message_id,
			   const char *text)
{
	perimeter_audit_user(p, session_id, user, "message",
			   json_pack("{s:I, s:o}", "message_id",
				     (json_int_t)message_id, "text",
				     digest_of(text, strlen(text))));
}

void perimeter_audit_exec(struct perimeter *p, const struct store_session *s,
			const char *sandbox, int turn, int status, long lines,
			bool truncated)
{
	json_t *argv =
	    json_loads(s->agent_json ? s->agent_json : "[]", 0, NULL);
	json_t *d = json_pack("{s:i, s:o, s:s, s:s, s:I, s:b}", "turn", turn,
			      "argv", argv ? argv : json_array(), "sandbox",
			      sandbox, "cwd", "/workspace", "output_lines",
			      (json_int_t)lines, "output_truncated", truncated);
	if (d && status >= 0) {
		json_object_set_new(d, "exit_code", json_integer(status));
		if (status > 128 && status < 128 + 65)
			json_object_set_new(d, "signal",
					    json_integer(status - 128));
	} else if (d) {
		json_object_set_new(d, "exit_code", json_null());
		json_object_set_new(d, "error", json_string("not started"));
	}
	perimeter_audit(p, s->id, "agent", "exec", d);
}

/* ---- state changes ------------------------------------------------------- */

void perimeter_audit_transition(struct perimeter *p, const char *user,
			      const char *id, int from, enum session_state to,
			      const struct store_session_update *upd,
			      const json_t *extra, int64_t seq)
{
	/* the store's own record of it: from (also when the caller let any
	 * state do), to, reason and the caller's extra fields */
	json_t *d = NULL;
	struct store_event *ev = NULL;
	size_t n = 0;
	if (seq > 0 &&
	    p->cfg.st->ops->event_list(p->cfg.st, id, seq - 1, 1, &ev, &n, NULL) == 0 &&
	    n == 1 && ev[0].seq == seq &&
	    event_kind_parse(ev[0].kind) == EVENT_STATE)
		d = json_loads(ev[0].data_json, 0, NULL);
	store_events_free(ev, n);
	if (!json_is_object(d)) {
		json_decref(d);
		d = extra ? json_deep_copy(extra) : json_object();
		json_object_set_new(d, "state",
				    json_string(session_state_name(to)));
		if (from >= 0)
			json_object_set_new(d, "from",
					    json_string(session_state_name(
						(enum session_state)from)));
		if (upd && upd->reason && *upd->reason)
			json_object_set_new(d, "reason",
					    json_string(upd->reason));
	}
	if (upd && upd->sandbox && *upd->sandbox)
		json_object_set_new(d, "sandbox", json_string(upd->sandbox));
	if (upd && upd->snapshot_id && *upd->snapshot_id)
		json_object_set_new(d, "snapshot",
				    json_string(upd->snapshot_id));
	if (upd && upd->exit_code != INT32_MIN)
		json_object_set_new(d, "exit_code",
				    json_integer(upd->exit_code));
	if (upd && upd->attempts >= 0)
		json_object_set_new(d, "attempts", json_integer(upd->attempts));
	json_object_set_new(d, "event_seq", json_integer(seq));
	perimeter_audit_user(p, id, user, "state", d);
}

/* ---- events ------------------------------------------------------------ */

/* A tool call's arguments: the object the model sent, its long strings
 * (a file's new content) as size and hash; anything else, or too much,
 * as size and hash of the whole. */
static json_t *tool_arguments(const char *args)
{
	if (!args)
		return json_null();
	size_t len = strlen(args);
	json_t *a = json_loads(args, 0, NULL);
	if (json_is_object(a)) {
		const char *key;
		json_t *v;
		void *tmp;
		json_object_foreach_safe(a, tmp, key, v)
		{
			if (json_is_string(v) &&
			    json_string_length(v) > ARG_INLINE_MAX)
				json_object_set_new(
				    a, key,
				    digest_of(json_string_value(v),
					      json_string_length(v)));
		}
		_cleanup_free_ char *text = json_dumps(a, JSON_COMPACT);
		if (text && strlen(text) <= ARGS_RECORD_MAX)
			return a;
	} else if (len <= ARG_INLINE_MAX) {
		json_decref(a);
		json_t *s = json_string(args);
		if (s)
			return s;
		return digest_of(args, len);
	}
	json_decref(a);
	return digest_of(args, len);
}

static void audit_transcript(struct perimeter *p, const char *id,
			     const json_t *data, int64_t seq)
{
	json_t *m = json_object_get(data, "message");
	const char *role = json_string_value(json_object_get(m, "role"));
	json_int_t turn = json_integer_value(json_object_get(data, "turn"));
	const char *content = json_string_value(json_object_get(m, "content"));
	if (!role)
		return;
	if (!strcmp(role, "assistant")) {
		json_t *calls = json_object_get(m, "tool_calls");
		if (content && *content)
			perimeter_audit(
			    p, id, "agent", "model_reply",
			    json_pack("{s:I, s:o, s:I, s:I}", "turn", turn,
				      "content",
				      digest_of(content, strlen(content)),
				      "tool_calls",
				      (json_int_t)json_array_size(calls),
				      "event_seq", (json_int_t)seq));
		size_t i;
		json_t *call;
		json_array_foreach(calls, i, call)
		{
			json_t *fn = json_object_get(call, "function");
			perimeter_audit(
			    p, id, "agent", "tool_call",
			    json_pack("{s:I, s:s, s:s, s:o, s:I}", "turn", turn,
				      "tool_call_id",
				      str_or_empty(json_object_get(call, "id")),
				      "tool",
				      str_or_empty(json_object_get(fn, "name")),
				      "arguments",
				      tool_arguments(json_string_value(
					  json_object_get(fn, "arguments"))),
				      "event_seq", (json_int_t)seq));
		}
	} else if (!strcmp(role, "tool")) {
		const char *text = content ? content : "";
		json_t *d = json_pack(
		    "{s:I, s:s, s:o, s:I}", "turn", turn, "tool_call_id",
		    str_or_empty(json_object_get(m, "tool_call_id")), "content",
		    digest_of(text, strlen(text)), "event_seq",
		    (json_int_t)seq);
		/* the run tools begin their result with the exit status */
		int status;
		if (d && sscanf(text, "exit status: %d", &status) == 1)
			json_object_set_new(d, "exit_code",
					    json_integer(status));
		perimeter_audit(p, id, "agent", "tool_result", d);
	}
	/* system and user messages: Warren's own text, and the prompts
	 * recorded when they were given (submit, message) */
}

static void audit_verify_event(struct perimeter *p, const char *id,
			       const json_t *data, int64_t seq)
{
	json_t *v = json_object_get(data, "verify");
	json_t *commands = json_array();
	size_t i;
	json_t *r;
	json_array_foreach(json_object_get(v, "results"), i, r)
	    json_array_append_new(
		commands,
		json_pack("{s:O?, s:O?, s:o}", "command",
			  json_object_get(r, "command"), "exit_code",
			  json_object_get(r, "status"), "output",
			  digest_of(str_or_empty(json_object_get(r, "output")),
				    json_string_length(
					json_object_get(r, "output")))));
	perimeter_audit(p, id, "system", "verify",
		      json_pack("{s:O?, s:O?, s:O?, s:o, s:I}", "turn",
				json_object_get(data, "turn"), "attempt",
				json_object_get(data, "attempt"), "passed",
				json_object_get(v, "passed"), "commands",
				commands, "event_seq", (json_int_t)seq));
}

static void audit_result(struct perimeter *p, const char *id, const json_t *data,
			 int64_t seq)
{
	static const char *const keep[] = {
	    "turn",    "branch",    "commit",	 "base",
	    "changed", "additions", "deletions", "diff_truncated",
	};
	json_t *d = json_object();
	for (size_t i = 0; d && i < ARRAY_SIZE(keep); i++) {
		json_t *v = json_object_get(data, keep[i]);
		if (v)
			json_object_set(d, keep[i], v);
	}
	json_object_set_new(d, "files",
			    json_integer((json_int_t)json_array_size(
				json_object_get(data, "files"))));
	json_object_set_new(d, "event_seq", json_integer(seq));
	perimeter_audit(p, id, "system", "result", d);
}

/* The model's API key was used for the session (by the host: the key
 * never enters the sandbox). */
static void audit_model_credential(struct perimeter *p, const char *id,
				   const json_t *data, int64_t seq)
{
	const struct provider_config *m = p->cfg.model;
	json_int_t calls =
	    json_integer_value(json_object_get(data, "model_calls"));
	if (!m || !m->api_key || !*m->api_key || calls <= 0)
		return;
	perimeter_audit(p, id, "system", "credential",
		      json_pack("{s:s, s:s, s:s?, s:o, s:s?, s:O?, s:I, s:I}",
				"credential", "model.api_key", "use",
				"model calls, from the host", "provider",
				m->kind, "base_url", url_redacted(m->base_url),
				"model", m->model, "turn",
				json_object_get(data, "turn"), "model_calls",
				calls, "event_seq", (json_int_t)seq));
}

void perimeter_audit_event(struct perimeter *p, const char *session_id,
			 enum event_kind kind, const json_t *data, int64_t seq)
{
	if (!data)
		return;
	/* a record that copies an event is of the event's kind */
	const char *name = event_kind_name(kind);
	json_t *d = NULL;
	switch (kind) {
	case EVENT_TRANSCRIPT:
		audit_transcript(p, session_id, data, seq);
		break;
	case EVENT_VERIFY: audit_verify_event(p, session_id, data, seq); break;
	case EVENT_RESULT: audit_result(p, session_id, data, seq); break;
	case EVENT_USAGE:
		audit_model_credential(p, session_id, data, seq);
		break;
	case EVENT_EGRESS:
	case EVENT_MODEL_CALL:
		/* the proxy's decisions: what the agent tried to reach; the
		 * gateway's calls: what it asked the model, and paid */
		d = json_deep_copy(data);
		if (json_is_object(d))
			json_object_set_new(d, "event_seq", json_integer(seq));
		perimeter_audit(p, session_id, "agent", name, d);
		break;
	case EVENT_TURN:
	case EVENT_CHECKPOINT:
	case EVENT_SANDBOX:
	case EVENT_RETRY:
	case EVENT_BUDGET:
		/* small records of Warren's own: as they are */
		d = json_deep_copy(data);
		if (json_is_object(d))
			json_object_set_new(d, "event_seq", json_integer(seq));
		perimeter_audit(p, session_id, "system", name, d);
		break;
	case EVENT_STATE:    /* perimeter_audit_transition has it */
	case EVENT_MESSAGE:  /* perimeter_audit_message has it */
	case EVENT_BROKER:   /* the broker hook writes its own record */
	case EVENT_OUTPUT:   /* lines are counted in the exec record */
	case EVENT_PHASE:    /* timings are not security events */
	case EVENT_SNAPSHOT: /* nor is the snapshot a session waits for */
	case EVENT_KIND_MAX: break;
	}
}

/* ---- decisions ----------------------------------------------------------- */

void perimeter_audit_decision(struct perimeter *p, const char *session_id,
			    const char *user, const char *decision,
			    const char *reason)
{
	perimeter_audit_user(
	    p, session_id, user, "decision",
	    json_pack("{s:s, s:s?}", "decision", decision, "reason", reason));
}

void perimeter_audit_push(struct perimeter *p, const char *session_id,
			const char *user, const json_t *push, const char *error)
{
	json_t *d = json_pack("{s:s}", "approved_by", user ? user : "");
	if (error) {
		json_object_set_new(d, "error", json_string(error));
	} else if (json_object_get(push, "skipped")) {
		json_object_set(d, "skipped", json_object_get(push, "skipped"));
	} else {
		json_object_set_new(d, "remote",
				    url_redacted(json_string_value(
					json_object_get(push, "remote"))));
		json_object_set(d, "ref", json_object_get(push, "ref"));
		json_object_set(d, "commit", json_object_get(push, "commit"));
	}
	perimeter_audit(p, session_id, "system", "push", d);
}

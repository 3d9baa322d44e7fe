/* render.c - the JSON shape of sessions, events, repositories and
 * snapshots (docs/api.md, "Objects").
 *
 * The store keeps some fields as JSON text (agent argv, limits, outcome,
 * timings, event data); they are embedded as JSON values, not as strings.
 * Unset fields are null. Text that is not valid UTF-8 (which jansson
 * refuses) is rendered with '?' for the bad bytes instead of failing the
 * whole answer. */
#include "api/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <string.h>

/* s with every byte that is not part of a valid UTF-8 sequence replaced
 * by '?' (caller frees), for jansson, which accepts valid UTF-8 only. */
static char *utf8_scrub(const char *s)
{
	size_t len = strlen(s);
	char *out = wr_malloc(len + 1);
	if (!out)
		return NULL;
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	while (i < len) {
		unsigned char b = p[i];
		size_t need = 4; /* continuation bytes; 4: not a lead byte */
		if (b < 0x80)
			need = 0;
		else if ((b & 0xe0) == 0xc0)
			need = 1;
		else if ((b & 0xf0) == 0xe0)
			need = 2;
		else if ((b & 0xf8) == 0xf0)
			need = 3;
		/* p[len] is the NUL, which is no continuation byte */
		bool ok = need < 4;
		for (size_t k = 1; ok && k <= need; k++)
			ok = (p[i + k] & 0xc0) == 0x80;
		if (ok) {
			memcpy(out + i, s + i, need + 1);
			i += need + 1;
		} else {
			out[i++] = '?';
		}
	}
	out[len] = '\0';
	return out;
}

json_t *api_json_string(const char *s)
{
	if (!s)
		return json_null();
	json_t *v = json_string(s);
	if (v)
		return v;
	/* invalid UTF-8 (or no memory): scrub, and use the result only if
	 * jansson takes it (overlong forms and surrogates still fail) */
	_cleanup_free_ char *clean = utf8_scrub(s);
	if (!clean)
		return NULL;
	v = json_string(clean);
	if (v)
		return v;
	for (char *p = clean; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	return json_string(clean);
}

json_t *api_json_embed(const char *json_text)
{
	if (!json_text || !*json_text)
		return json_null();
	json_t *v = json_loads(json_text, JSON_DECODE_ANY, NULL);
	/* a stored value that does not parse is shown as unset rather than
	 * failing every answer that includes it */
	return v ? v : json_null();
}

static json_t *ms_or_null(int64_t ms)
{
	return ms > 0 ? json_integer(ms) : json_null();
}

/* Sets key to value (stolen); counts failures (a NULL value is one). */
static void set(json_t *obj, const char *key, json_t *value, int *bad)
{
	if (json_object_set_new(obj, key, value) < 0)
		(*bad)++;
}

static json_t *finish(json_t *obj, int bad)
{
	if (bad) {
		json_decref(obj);
		return NULL;
	}
	return obj;
}

/* The prompt, cut at a character boundary to API_LIST_PROMPT_MAX bytes
 * in lists (a list of 500 sessions must not carry 128 MiB of prompts). */
static json_t *prompt_json(const char *prompt, bool in_list, bool *cut)
{
	*cut = false;
	if (!prompt || !in_list || strlen(prompt) <= API_LIST_PROMPT_MAX)
		return api_json_string(prompt);
	size_t n = API_LIST_PROMPT_MAX;
	while (n > 0 && ((unsigned char)prompt[n] & 0xc0) == 0x80)
		n--;
	_cleanup_free_ char *head = wr_strndup(prompt, n);
	*cut = true;
	return head ? api_json_string(head) : NULL;
}

json_t *api_session_json(struct api *a, const struct store_session *s,
			 bool in_list)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	int bad = 0;
	bool cut;
	set(o, "id", api_json_string(s->id), &bad);
	set(o, "state", api_json_string(session_state_name(s->state)), &bad);
	set(o, "repo_id", api_json_string(s->repo_id), &bad);
	set(o, "repo", api_repo_name_json(a, s->repo_id), &bad);
	set(o, "user", api_json_string(s->user), &bad);
	set(o, "prompt", prompt_json(s->prompt, in_list, &cut), &bad);
	if (cut)
		set(o, "prompt_truncated", json_true(), &bad);
	set(o, "ref", api_json_string(s->ref), &bad);
	set(o, "agent", api_json_embed(s->agent_json), &bad);
	set(o, "limits", api_json_embed(s->limits_json), &bad);
	set(o, "reason", api_json_string(s->reason), &bad);
	set(o, "snapshot_id", api_json_string(s->snapshot_id), &bad);
	set(o, "sandbox", api_json_string(s->sandbox), &bad);
	set(o, "attempts", json_integer(s->attempts), &bad);
	set(o, "turns", json_integer(s->turns), &bad);
	set(o, "exit_code",
	    s->exit_code >= 0 ? json_integer(s->exit_code) : json_null(), &bad);
	set(o, "created_ms", json_integer(s->created_ms), &bad);
	set(o, "updated_ms", json_integer(s->updated_ms), &bad);
	set(o, "started_ms", ms_or_null(s->started_ms), &bad);
	set(o, "finished_ms", ms_or_null(s->finished_ms), &bad);
	/* the lease (store.h, "Leases"): the worker holding it, if any */
	set(o, "worker", api_json_string(s->worker_id), &bad);
	set(o, "lease_epoch", json_integer(s->lease_epoch), &bad);
	json_t *outcome = api_json_embed(s->outcome_json);
	/* where its sandboxes run: recorded once the snapshot is known */
	json_t *backend = json_object_get(outcome, "backend");
	set(o, "backend",
	    json_is_string(backend) ? json_incref(backend) : json_null(), &bad);
	set(o, "outcome", outcome, &bad);
	return finish(o, bad);
}

json_t *api_event_json(const struct store_event *e)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	int bad = 0;
	set(o, "seq", json_integer(e->seq), &bad);
	set(o, "time_ms", json_integer(e->time_ms), &bad);
	set(o, "kind", api_json_string(e->kind), &bad);
	set(o, "data", api_json_embed(e->data_json), &bad);
	return finish(o, bad);
}

json_t *api_repo_json(const struct store_repo *r)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	int bad = 0;
	set(o, "id", api_json_string(r->id), &bad);
	set(o, "name", api_json_string(r->name), &bad);
	set(o, "url", api_json_string(r->url), &bad);
	set(o, "default_ref", api_json_string(r->default_ref), &bad);
	set(o, "agent", api_json_embed(r->agent_json), &bad);
	set(o, "refresh_ms", json_integer(r->refresh_ms), &bad);
	set(o, "created_ms", json_integer(r->created_ms), &bad);
	set(o, "last_refresh_ms", ms_or_null(r->last_refresh_ms), &bad);
	return finish(o, bad);
}

json_t *api_snapshot_json(const struct store_snapshot *s)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	int bad = 0;
	set(o, "id", api_json_string(s->id), &bad);
	set(o, "repo_id", api_json_string(s->repo_id), &bad);
	set(o, "commit", api_json_string(s->commit), &bad);
	set(o, "created_ms", json_integer(s->created_ms), &bad);
	set(o, "timings", api_json_embed(s->timings_json), &bad);
	return finish(o, bad);
}

json_t *api_token_json(const struct store_token *t, int64_t now_ms)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	int bad = 0;
	bool active = t->revoked_ms == 0 &&
		      (t->expires_ms == 0 || now_ms < t->expires_ms);
	set(o, "name", api_json_string(t->name), &bad);
	set(o, "id", api_json_string(t->id), &bad);
	set(o, "user", api_json_string(t->user), &bad);
	set(o, "role", api_json_string(t->role), &bad);
	set(o, "created_ms", json_integer(t->created_ms), &bad);
	set(o, "expires_ms", ms_or_null(t->expires_ms), &bad);
	set(o, "revoked_ms", ms_or_null(t->revoked_ms), &bad);
	set(o, "last_used_ms", ms_or_null(t->last_used_ms), &bad);
	set(o, "active", json_boolean(active), &bad);
	return finish(o, bad);
}

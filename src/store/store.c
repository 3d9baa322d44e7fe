/* store.c - what every store backend shares: the session lifecycle (state
 * names and the allowed transitions), ids, the clock, and the destructors
 * of the records the store hands out. */
#include "store/store.h"

#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const state_names[SESSION_STATE_MAX] = {
    [SESSION_QUEUED] = "queued",   [SESSION_PROVISIONING] = "provisioning",
    [SESSION_RUNNING] = "running", [SESSION_VERIFYING] = "verifying",
    [SESSION_REVIEW] = "review",   [SESSION_APPROVED] = "approved",
    [SESSION_PUSHED] = "pushed",   [SESSION_REJECTED] = "rejected",
    [SESSION_FAILED] = "failed",   [SESSION_CANCELLED] = "cancelled",
    [SESSION_EXPIRED] = "expired", [SESSION_INTERRUPTED] = "interrupted",
};

const char *session_state_name(enum session_state s)
{
	if ((int)s < 0 || s >= SESSION_STATE_MAX)
		return NULL;
	return state_names[s];
}

int session_state_parse(const char *text)
{
	if (!text)
		return -EINVAL;
	for (int i = 0; i < SESSION_STATE_MAX; i++)
		if (!strcmp(text, state_names[i]))
			return i;
	return -EINVAL;
}

bool session_state_terminal(enum session_state s)
{
	switch (s) {
	case SESSION_PUSHED:
	case SESSION_REJECTED:
	case SESSION_FAILED:
	case SESSION_CANCELLED:
	case SESSION_EXPIRED: return true;
	default: return false;
	}
}

#define BIT(s) (1u << (s))
/* Where the session can end up early: an error, the user, a time limit. */
#define ENDINGS \
	(BIT(SESSION_FAILED) | BIT(SESSION_CANCELLED) | BIT(SESSION_EXPIRED))

/* The lifecycle of ARCHITECTURE.md:
 *
 *   queued -> provisioning -> running -> verifying -> review -> approved
 *     -> pushed; review -> rejected; queued, provisioning, running and
 *   verifying -> failed | cancelled | expired; provisioning, running and
 *   verifying -> interrupted (the sandbox died) -> provisioning (retry).
 *
 * Besides the diagram: running -> review when a turn has nothing to
 * verify; review -> queued | running for a follow-up turn (queued when no
 * sandbox is left, running when the resting one takes it); review ->
 * cancelled | expired (the user drops it, or its lifetime runs out while
 * it rests); approved -> failed (the push failed); interrupted -> queued
 * (wait for a slot again) and -> failed | cancelled | expired (retries
 * exhausted, the user gave up, time ran out). */
static const unsigned allowed_to[SESSION_STATE_MAX] = {
    [SESSION_QUEUED] = BIT(SESSION_PROVISIONING) | ENDINGS,
    [SESSION_PROVISIONING] =
	BIT(SESSION_RUNNING) | BIT(SESSION_INTERRUPTED) | ENDINGS,
    [SESSION_RUNNING] = BIT(SESSION_VERIFYING) | BIT(SESSION_REVIEW) |
			BIT(SESSION_INTERRUPTED) | ENDINGS,
    [SESSION_VERIFYING] =
	BIT(SESSION_REVIEW) | BIT(SESSION_INTERRUPTED) | ENDINGS,
    [SESSION_REVIEW] = BIT(SESSION_APPROVED) | BIT(SESSION_REJECTED) |
		       BIT(SESSION_QUEUED) | BIT(SESSION_RUNNING) |
		       BIT(SESSION_CANCELLED) | BIT(SESSION_EXPIRED),
    [SESSION_APPROVED] = BIT(SESSION_PUSHED) | BIT(SESSION_FAILED),
    [SESSION_INTERRUPTED] =
	BIT(SESSION_PROVISIONING) | BIT(SESSION_QUEUED) | ENDINGS,
    /* pushed, rejected, failed, cancelled, expired: none */
};

bool session_transition_allowed(enum session_state from, enum session_state to)
{
	if ((int)from < 0 || from >= SESSION_STATE_MAX || (int)to < 0 ||
	    to >= SESSION_STATE_MAX)
		return false;
	return (allowed_to[from] & BIT(to)) != 0;
}

static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;

static void sodium_setup(void)
{
	/* Fails only when no entropy source can be opened; randombytes_buf
	 * then aborts, which is all it could do anyway. */
	if (sodium_init() < 0)
		return;
}

void store_new_id(const char *prefix, char out[STORE_ID_MAX])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char rnd[8];

	pthread_once(&sodium_once, sodium_setup);
	randombytes_buf(rnd, sizeof(rnd));
	size_t plen = prefix ? strlen(prefix) : 0;
	/* keep room for the 16 digits and the NUL */
	if (plen > STORE_ID_MAX - 2 * sizeof(rnd) - 1)
		plen = STORE_ID_MAX - 2 * sizeof(rnd) - 1;
	if (plen)
		memcpy(out, prefix, plen);
	for (size_t i = 0; i < sizeof(rnd); i++) {
		out[plen + 2 * i] = hex[rnd[i] >> 4];
		out[plen + 2 * i + 1] = hex[rnd[i] & 0xf];
	}
	out[plen + 2 * sizeof(rnd)] = '\0';
}

int64_t store_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- destructors -------------------------------------------------------- */

void store_repo_clear(struct store_repo *r)
{
	if (!r)
		return;
	free(r->name);
	free(r->url);
	free(r->default_ref);
	free(r->agent_json);
	memset(r, 0, sizeof(*r));
}

void store_snapshot_clear(struct store_snapshot *s)
{
	if (!s)
		return;
	free(s->timings_json);
	memset(s, 0, sizeof(*s));
}

void store_session_clear(struct store_session *s)
{
	if (!s)
		return;
	free(s->user);
	free(s->prompt);
	free(s->ref);
	free(s->agent_json);
	free(s->limits_json);
	free(s->reason);
	free(s->snapshot_id);
	free(s->sandbox);
	free(s->outcome_json);
	memset(s, 0, sizeof(*s));
}

void store_event_clear(struct store_event *e)
{
	if (!e)
		return;
	free(e->kind);
	free(e->data_json);
	memset(e, 0, sizeof(*e));
}

void store_message_clear(struct store_message *m)
{
	if (!m)
		return;
	free(m->user);
	free(m->text);
	memset(m, 0, sizeof(*m));
}

void store_artifact_clear(struct store_artifact *a)
{
	if (!a)
		return;
	free(a->name);
	free(a->path);
	free(a->media_type);
	memset(a, 0, sizeof(*a));
}

void store_token_clear(struct store_token *t)
{
	if (!t)
		return;
	free(t->user);
	free(t->role);
	free(t->name);
	memset(t, 0, sizeof(*t));
}

static bool ascii_alnum(char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
	       (ch >= 'A' && ch <= 'Z');
}

bool store_token_name_valid(const char *name)
{
	if (!name || !ascii_alnum(name[0]))
		return false;
	size_t n = 0;
	for (const char *p = name; *p; p++, n++)
		if (n == STORE_TOKEN_NAME_MAX ||
		    (!ascii_alnum(*p) && !strchr("._-", *p)))
			return false;
	return true;
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

DEFINE_ARRAY_FREE(store_repos_free, struct store_repo, store_repo_clear)
DEFINE_ARRAY_FREE(store_snapshots_free, struct store_snapshot,
		  store_snapshot_clear)
DEFINE_ARRAY_FREE(store_sessions_free, struct store_session,
		  store_session_clear)
DEFINE_ARRAY_FREE(store_events_free, struct store_event, store_event_clear)
DEFINE_ARRAY_FREE(store_messages_free, struct store_message,
		  store_message_clear)
DEFINE_ARRAY_FREE(store_artifacts_free, struct store_artifact,
		  store_artifact_clear)
DEFINE_ARRAY_FREE(store_tokens_free, struct store_token, store_token_clear)

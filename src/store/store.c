/* store.c - what every store backend shares: the session lifecycle (state
 * names and the allowed transitions), ids, the clock, the destructors of
 * the records the store hands out, opening a store by its URL; and for the
 * backends (backend.h) the records read from rows, the checks of what a
 * call is given and the data of the events the calls write. */
#include "store/backend.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
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

/* ---- opening by URL ------------------------------------------------------ */

bool store_url_is_pg(const char *url)
{
	return url && (!strncmp(url, "postgres://", 11) ||
		       !strncmp(url, "postgresql://", 13));
}

/* Where the URL's parts are: the authority's user information (before
 * its last '@'), its password within it, and the query (after '?'). */
struct url_parts {
	size_t pass, pass_end; /* pass == pass_end: none */
	size_t query, end;     /* query == end: none */
};

static void url_split(const char *url, struct url_parts *u)
{
	size_t len = strlen(url);
	*u = (struct url_parts){.end = len};
	const char *sep = strstr(url, "://");
	size_t auth = sep ? (size_t)(sep - url) + 3 : len;
	size_t auth_end = auth + strcspn(url + auth, "/?#");
	for (size_t i = auth_end; i > auth; i--)
		if (url[i - 1] == '@') {
			const char *colon =
			    memchr(url + auth, ':', i - 1 - auth);
			if (colon) {
				u->pass = (size_t)(colon - url) + 1;
				u->pass_end = i - 1;
			}
			break;
		}
	const char *q = sep ? strchr(url + auth_end, '?') : NULL;
	u->query = u->end = q ? (size_t)(q - url) + 1 : len;
	if (q)
		u->end = u->query + strcspn(url + u->query, "#");
}

/* Calls fn for each "password=" parameter's value in the query. */
static void each_query_password(const char *url, const struct url_parts *u,
				void (*fn)(void *ctx, size_t at, size_t end),
				void *ctx)
{
	for (size_t at = u->query; at < u->end;) {
		size_t len = strcspn(url + at, "&#");
		if (at + len > u->end)
			len = u->end - at;
		if (len >= 9 && !strncmp(url + at, "password=", 9))
			fn(ctx, at + 9, at + len);
		at += len + 1;
	}
}

struct redact {
	const char *url;
	char *out;
	size_t n, from; /* written to out; copied from url up to */
};

static void redact_span(void *ctx, size_t at, size_t end)
{
	struct redact *r = ctx;
	memcpy(r->out + r->n, r->url + r->from, at - r->from);
	r->n += at - r->from;
	memcpy(r->out + r->n, "***", 3);
	r->n += 3;
	r->from = end;
}

char *store_url_redact(const char *url)
{
	if (!url)
		return NULL;
	struct url_parts u;
	url_split(url, &u);
	/* each redaction adds at most 3 bytes; there are at most one per
	 * '&' of the query, plus the user's and the query's first */
	size_t amps = 0, len = strlen(url);
	for (const char *p = url; *p; p++)
		amps += *p == '&';
	struct redact r = {.url = url,
			   .out = wr_malloc(len + 3 * (amps + 2) + 1)};
	if (!r.out)
		return NULL;
	if (u.pass_end > u.pass)
		redact_span(&r, u.pass, u.pass_end);
	each_query_password(url, &u, redact_span, &r);
	memcpy(r.out + r.n, url + r.from, len - r.from);
	r.out[r.n + len - r.from] = '\0';
	return r.out;
}

struct first_span {
	size_t at, end;
	bool found;
};

static void first_span(void *ctx, size_t at, size_t end)
{
	struct first_span *f = ctx;
	if (!f->found)
		*f = (struct first_span){at, end, true};
}

char *store_url_password(const char *url)
{
	if (!url)
		return NULL;
	struct url_parts u;
	url_split(url, &u);
	struct first_span f = {0};
	if (u.pass_end > u.pass)
		f = (struct first_span){u.pass, u.pass_end, true};
	else
		each_query_password(url, &u, first_span, &f);
	return f.found ? wr_strndup(url + f.at, f.end - f.at) : NULL;
}

struct store *store_open(const char *url, struct wr_error **err)
{
	if (!url || !*url) {
		wr_error_input(err, EINVAL, "open store: no path or URL");
		return NULL;
	}
	if (store_url_is_pg(url))
		return store_open_pg(url, err);
	if (!strncmp(url, "sqlite:", 7))
		return store_open_sqlite(url + 7, err);
	const char *sep = strstr(url, "://");
	size_t scheme = sep ? strspn(url, "abcdefghijklmnopqrstuvwxyz"
					  "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
					  "0123456789+.-")
			    : 0;
	if (sep && scheme == (size_t)(sep - url) && scheme > 0) {
		_cleanup_free_ char *shown = store_url_redact(url);
		wr_error_input(
		    err, EINVAL,
		    "open store %s: unknown kind of store '%.*s' (want "
		    "postgres://, postgresql://, sqlite:PATH or a "
		    "path)",
		    shown ? shown : "URL", (int)scheme, url);
		return NULL;
	}
	return store_open_sqlite(url, err);
}

int store_schema_version(struct store *st)
{
	return st ? st->ops->schema_version(st) : -EINVAL;
}

const char *store_backend_name(const struct store *st)
{
	static const char *const names[STORE_BACKEND_MAX] = {
	    [STORE_BACKEND_SQLITE] = "sqlite",
	    [STORE_BACKEND_POSTGRES] = "postgres",
	};
	if (!st || (int)st->ops->backend < 0 ||
	    st->ops->backend >= STORE_BACKEND_MAX)
		return NULL;
	return names[st->ops->backend];
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
	free(s->worker_id);
	memset(s, 0, sizeof(*s));
}

void store_audit_record_clear(struct store_audit_record *r)
{
	if (!r)
		return;
	free(r->record);
	memset(r, 0, sizeof(*r));
}

void store_worker_clear(struct store_worker *w)
{
	if (!w)
		return;
	free(w->host);
	memset(w, 0, sizeof(*w));
}

static void store_claim_clear(struct store_claim *c)
{
	if (c)
		memset(c, 0, sizeof(*c));
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
DEFINE_ARRAY_FREE(store_workers_free, struct store_worker, store_worker_clear)
DEFINE_ARRAY_FREE(store_claims_free, struct store_claim, store_claim_clear)
DEFINE_ARRAY_FREE(store_audit_records_free, struct store_audit_record,
		  store_audit_record_clear)

/* ---- secrets' files (store.h, backend.h) -------------------------------- */

void store_secret_clear(struct store_secret *s)
{
	if (!s)
		return;
	free(s->file);
	free(s->repos);
	memset(s, 0, sizeof(*s));
}

DEFINE_ARRAY_FREE(store_secrets_free, struct store_secret, store_secret_clear)

bool store_secret_name_ok(const char *name)
{
	size_t len = name ? strlen(name) : 0;
	if (len == 0 || len > STORE_SECRET_NAME_MAX ||
	    (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((name[i] >= 'A' && name[i] <= 'Z') ||
		      (name[i] >= '0' && name[i] <= '9') || name[i] == '_'))
			return false;
	return true;
}

int store_secret_check(const struct store_secret *s, struct wr_error **err)
{
	if (!store_secret_name_ok(s->name))
		return wr_error_input(err, 0, "'%.80s' is not a secret name",
				      s->name);
	if (!s->file || s->file_len == 0 || s->file_len > STORE_SECRET_FILE_MAX)
		return wr_error_input(err, 0,
				      "secret %s: a file of %zu bytes (1 to "
				      "%d)",
				      s->name, s->file_len,
				      STORE_SECRET_FILE_MAX);
	if (s->repos && strlen(s->repos) > STORE_SECRET_REPOS_MAX)
		return wr_error_input(err, 0,
				      "secret %s: a list of repositories "
				      "longer than %d bytes",
				      s->name, STORE_SECRET_REPOS_MAX);
	return 0;
}

/* The file as the column holds it: base64 (the tables keep text only,
 * on both backends). */
char *store_secret_file_encode(const unsigned char *file, size_t len)
{
	size_t size =
	    sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
	char *text = wr_malloc(size);
	if (text)
		sodium_bin2base64(text, size, file, len,
				  sodium_base64_VARIANT_ORIGINAL);
	return text;
}

int store_secret_file_decode(const char *text, struct store_secret *out)
{
	size_t tlen = text ? strlen(text) : 0;
	out->file = NULL;
	out->file_len = 0;
	if (tlen == 0)
		return 0; /* a tombstone's */
	size_t cap = tlen / 4 * 3 + 3;
	if (cap > STORE_SECRET_FILE_MAX + 3)
		return -EIO;
	unsigned char *bin = wr_malloc(cap);
	if (!bin)
		return -ENOMEM;
	size_t len = 0;
	if (sodium_base642bin(bin, cap, text, tlen, NULL, &len, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    len == 0) {
		free(bin);
		return -EIO;
	}
	out->file = bin;
	out->file_len = len;
	return 0;
}

/* ---- records from rows (backend.h) --------------------------------------- */

int store_row_strdup(const struct store_row *row, int col, char **out)
{
	const char *text = NULL;
	int r = row->text(row, col, &text);
	if (r < 0)
		return r;
	if (!text) {
		*out = NULL;
		return 0;
	}
	char *copy = wr_strdup(text);
	if (!copy)
		return -ENOMEM;
	*out = copy;
	return 0;
}

int store_row_copy(const struct store_row *row, int col, char *buf, size_t size)
{
	const char *text = NULL;
	int r = row->text(row, col, &text);
	if (r < 0)
		return r;
	snprintf(buf, size, "%s", text ? text : "");
	return 0;
}

/* The text columns of a record: for each, its column and where it goes. */
struct text_col {
	int col;
	char **dst;
};

/* Reads every column of cols, or none (frees what it read on failure). */
static int row_strdups(const struct store_row *row, const struct text_col *cols,
		       size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = store_row_strdup(row, cols[i].col, cols[i].dst);
		if (r < 0) {
			for (size_t j = 0; j < i; j++) {
				free(*cols[j].dst);
				*cols[j].dst = NULL;
			}
			return r;
		}
	}
	return 0;
}

static int token_from_row(const struct store_row *row, void *out)
{
	struct store_token t = {
	    .created_ms = row->int64(row, 2),
	    .expires_ms = row->int64(row, 3),
	    .revoked_ms = row->int64(row, 5),
	    .last_used_ms = row->int64(row, 6),
	};
	const struct text_col cols[] = {
	    {0, &t.user}, {1, &t.role}, {4, &t.name}};
	int r = store_row_copy(row, 7, t.id, sizeof(t.id));
	if (r == 0)
		r = row_strdups(row, cols, ARRAY_SIZE(cols));
	if (r < 0)
		return r;
	*(struct store_token *)out = t;
	return 0;
}

static int repo_from_row(const struct store_row *row, void *out)
{
	struct store_repo rec = {
	    .refresh_ms = row->int64(row, 5),
	    .created_ms = row->int64(row, 6),
	    .last_refresh_ms = row->int64(row, 7),
	};
	const struct text_col cols[] = {{1, &rec.name},
					{2, &rec.url},
					{3, &rec.default_ref},
					{4, &rec.agent_json}};
	int r = store_row_copy(row, 0, rec.id, sizeof(rec.id));
	if (r == 0)
		r = row_strdups(row, cols, ARRAY_SIZE(cols));
	if (r < 0)
		return r;
	*(struct store_repo *)out = rec;
	return 0;
}

static int snapshot_from_row(const struct store_row *row, void *out)
{
	struct store_snapshot s = {.created_ms = row->int64(row, 3)};
	const struct text_col cols[] = {{4, &s.timings_json}};
	int r = store_row_copy(row, 0, s.id, sizeof(s.id));
	if (r == 0)
		r = store_row_copy(row, 1, s.repo_id, sizeof(s.repo_id));
	if (r == 0)
		r = store_row_copy(row, 2, s.commit, sizeof(s.commit));
	if (r == 0)
		r = row_strdups(row, cols, ARRAY_SIZE(cols));
	if (r < 0)
		return r;
	*(struct store_snapshot *)out = s;
	return 0;
}

static int session_from_row(const struct store_row *row, void *out)
{
	const char *state_name = NULL;
	int r = row->text(row, 7, &state_name);
	if (r < 0)
		return r;
	int state = session_state_parse(state_name);
	if (state < 0)
		return -EIO; /* not a state this build knows */
	struct store_session s = {
	    .state = state,
	    .attempts = (int)row->int64(row, 12),
	    .turns = (int)row->int64(row, 13),
	    .exit_code = (int)row->int64(row, 14),
	    .queue_seq = row->int64(row, 15),
	    .created_ms = row->int64(row, 16),
	    .updated_ms = row->int64(row, 17),
	    .started_ms = row->int64(row, 18),
	    .finished_ms = row->int64(row, 19),
	    .lease_epoch = row->int64(row, 21),
	    .lease_expires_ms = row->int64(row, 22),
	};
	const struct text_col cols[] = {
	    {2, &s.user},	 {3, &s.prompt},      {4, &s.ref},
	    {5, &s.agent_json},	 {6, &s.limits_json}, {8, &s.reason},
	    {9, &s.snapshot_id}, {10, &s.sandbox},    {11, &s.outcome_json},
	    {20, &s.worker_id}};
	r = store_row_copy(row, 0, s.id, sizeof(s.id));
	if (r == 0)
		r = store_row_copy(row, 1, s.repo_id, sizeof(s.repo_id));
	if (r == 0)
		r = row_strdups(row, cols, ARRAY_SIZE(cols));
	if (r < 0)
		return r;
	*(struct store_session *)out = s;
	return 0;
}

static int event_from_row(const struct store_row *row, void *out)
{
	struct store_event e = {
	    .seq = row->int64(row, 0),
	    .time_ms = row->int64(row, 1),
	};
	const struct text_col cols[] = {{2, &e.kind}, {3, &e.data_json}};
	int r = row_strdups(row, cols, ARRAY_SIZE(cols));
	if (r < 0)
		return r;
	*(struct store_event *)out = e;
	return 0;
}

static int message_from_row(const struct store_row *row, void *out)
{
	struct store_message m = {
	    .id = row->int64(row, 0),
	    .turn = (int)row->int64(row, 3),
	    .created_ms = row->int64(row, 4),
	};
	const struct text_col cols[] = {{1, &m.user}, {2, &m.text}};
	int r = row_strdups(row, cols, ARRAY_SIZE(cols));
	if (r < 0)
		return r;
	*(struct store_message *)out = m;
	return 0;
}

static int artifact_from_row(const struct store_row *row, void *out)
{
	struct store_artifact a = {
	    .size = row->int64(row, 3),
	    .created_ms = row->int64(row, 4),
	};
	const struct text_col cols[] = {
	    {0, &a.name}, {1, &a.path}, {2, &a.media_type}};
	int r = row_strdups(row, cols, ARRAY_SIZE(cols));
	if (r < 0)
		return r;
	*(struct store_artifact *)out = a;
	return 0;
}

static int worker_from_row(const struct store_row *row, void *out)
{
	struct store_worker w = {
	    .started_ms = row->int64(row, 2),
	    .heartbeat_ms = row->int64(row, 3),
	    .max_sandboxes = (int)row->int64(row, 4),
	    .stopped_ms = row->int64(row, 5),
	};
	const struct text_col cols[] = {{1, &w.host}};
	int r = store_row_copy(row, 0, w.id, sizeof(w.id));
	if (r == 0)
		r = row_strdups(row, cols, ARRAY_SIZE(cols));
	if (r < 0)
		return r;
	*(struct store_worker *)out = w;
	return 0;
}

static int claim_from_row(const struct store_row *row, void *out)
{
	const char *state_name = NULL;
	int r = row->text(row, 3, &state_name);
	if (r < 0)
		return r;
	int state = session_state_parse(state_name);
	if (state < 0)
		return -EIO;
	struct store_claim c = {.epoch = row->int64(row, 2), .state = state};
	r = store_row_copy(row, 0, c.id, sizeof(c.id));
	if (r == 0)
		r = store_row_copy(row, 1, c.worker_id, sizeof(c.worker_id));
	if (r < 0)
		return r;
	*(struct store_claim *)out = c;
	return 0;
}

#define DEFINE_RECORD(var, type, from_row, clear_fn)                  \
	static void clear_fn##_any(void *rec)                         \
	{                                                             \
		clear_fn(rec);                                        \
	}                                                             \
	const struct store_record_type var = {sizeof(type), from_row, \
					      clear_fn##_any}

DEFINE_RECORD(store_token_record, struct store_token, token_from_row,
	      store_token_clear);
DEFINE_RECORD(store_repo_record, struct store_repo, repo_from_row,
	      store_repo_clear);
DEFINE_RECORD(store_snapshot_record, struct store_snapshot, snapshot_from_row,
	      store_snapshot_clear);
DEFINE_RECORD(store_session_record, struct store_session, session_from_row,
	      store_session_clear);
DEFINE_RECORD(store_event_record, struct store_event, event_from_row,
	      store_event_clear);
DEFINE_RECORD(store_message_record, struct store_message, message_from_row,
	      store_message_clear);
DEFINE_RECORD(store_artifact_record, struct store_artifact, artifact_from_row,
	      store_artifact_clear);
DEFINE_RECORD(store_worker_record, struct store_worker, worker_from_row,
	      store_worker_clear);
DEFINE_RECORD(store_claim_record, struct store_claim, claim_from_row,
	      store_claim_clear);

/* ---- arrays ------------------------------------------------------------ */

int store_vec_add_row(struct store_vec *vec, const struct store_row *row)
{
	size_t elem = vec->type->size;
	if (vec->n == vec->cap) {
		size_t cap = vec->cap ? vec->cap * 2 : 8;
		if (cap > SIZE_MAX / elem)
			return -ENOMEM;
		void *v = wr_realloc(vec->v, cap * elem);
		if (!v)
			return -ENOMEM;
		vec->v = v;
		vec->cap = cap;
	}
	char *slot = (char *)vec->v + vec->n * elem;
	memset(slot, 0, elem);
	int r = vec->type->from_row(row, slot);
	if (r < 0)
		return r;
	vec->n++;
	return 0;
}

void store_vec_take(struct store_vec *vec, void **out, size_t *n_out)
{
	if (!vec->n) {
		free(vec->v);
		vec->v = NULL;
	}
	*out = TAKE_PTR(vec->v);
	*n_out = vec->n;
	vec->n = vec->cap = 0;
}

void store_vec_free(struct store_vec *vec)
{
	for (size_t i = 0; i < vec->n; i++)
		vec->type->clear((char *)vec->v + i * vec->type->size);
	free(vec->v);
	vec->v = NULL;
	vec->n = vec->cap = 0;
}

/* ---- checks ------------------------------------------------------------ */

bool store_id_ok(const char *id)
{
	if (!id || !*id)
		return false;
	size_t i;
	for (i = 0; id[i] && i < STORE_ID_MAX; i++)
		if (id[i] <= ' ' || id[i] > '~')
			return false;
	return i < STORE_ID_MAX;
}

bool store_text_ok(const char *s, size_t max)
{
	return s && *s && strnlen(s, max + 1) <= max;
}

int store_no_session(const char *id, struct wr_error **err)
{
	return wr_error_absent(err, true, "no session %s", id ? id : "");
}

bool store_token_hash_ok(const char *hash_hex)
{
	return store_text_ok(hash_hex, STORE_TOKEN_HASH_MAX);
}

int store_token_check(const char *hash_hex, const struct store_token *t,
		      struct wr_error **err)
{
	if (!store_token_hash_ok(hash_hex) || !t ||
	    !store_text_ok(t->user, STORE_USER_MAX) ||
	    !store_text_ok(t->role, STORE_ROLE_MAX))
		return wr_error_input(err, EINVAL,
				      "add token: hash, user and role are "
				      "required");
	if (!store_token_name_valid(t->name))
		return wr_error_input(err, EINVAL,
				      "add token: bad name (want 1 to %d of "
				      "[A-Za-z0-9._-], starting with a "
				      "letter or digit)",
				      STORE_TOKEN_NAME_MAX);
	return 0;
}

static bool repo_name_ok(const char *name)
{
	if (!store_text_ok(name, STORE_REPO_NAME_MAX))
		return false;
	for (const char *p = name; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
			    *p))
			return false;
	return strcmp(name, ".") && strcmp(name, "..");
}

int store_repo_check(const struct store_repo *r, struct wr_error **err)
{
	if (!r || !store_id_ok(r->id))
		return wr_error_input(err, EINVAL, "add repository: bad id");
	if (!repo_name_ok(r->name))
		return wr_error_input(err, EINVAL,
				      "add repository: bad name '%s' (want "
				      "1 to %d of [A-Za-z0-9._-])",
				      r->name ? r->name : "",
				      STORE_REPO_NAME_MAX);
	if (!store_text_ok(r->url, STORE_TEXT_MAX))
		return wr_error_input(err, EINVAL, "add repository %s: no url",
				      r->name);
	return 0;
}

bool store_repo_key_ok(const char *id_or_name)
{
	return store_text_ok(id_or_name, STORE_REPO_NAME_MAX);
}

int store_repo_busy(const char *id, int64_t active, struct wr_error **err)
{
	return wr_error_input(err, EBUSY,
			      "repository %s has %lld session%s not "
			      "finished: cancel or decide them first",
			      id, (long long)active, active == 1 ? "" : "s");
}

int store_snapshot_check(const struct store_snapshot *s, struct wr_error **err)
{
	if (!s || !store_id_ok(s->id) || !store_id_ok(s->repo_id))
		return wr_error_input(err, EINVAL, "add snapshot: bad id");
	if (!store_text_ok(s->commit, sizeof(s->commit) - 1))
		return wr_error_input(err, EINVAL, "add snapshot %s: no commit",
				      s->id);
	return 0;
}

int store_session_check(const struct store_session *s, struct wr_error **err)
{
	if (!s || !store_id_ok(s->id))
		return wr_error_input(err, EINVAL, "create session: bad id");
	if (!store_id_ok(s->repo_id))
		return wr_error_input(
		    err, EINVAL, "create session %s: bad repository id", s->id);
	if (!store_text_ok(s->user, STORE_USER_MAX) || !s->prompt)
		return wr_error_input(err, EINVAL,
				      "create session %s: a user and a prompt "
				      "are required",
				      s->id);
	return 0;
}

int store_filter_check(const struct store_session_filter *f, int *limit,
		       struct wr_error **err)
{
	if (!f || f->state < -1 || f->state >= SESSION_STATE_MAX)
		return wr_error_input(err, EINVAL, "list sessions: bad state");
	if (f->before_id && !store_id_ok(f->before_id))
		return store_no_session(f->before_id, err);
	*limit = f->limit <= 0		     ? STORE_LIST_DEFAULT
		 : f->limit > STORE_LIST_MAX ? STORE_LIST_MAX
					     : f->limit;
	return 0;
}

/* Relative, no "..", no empty components. */
static bool artifact_name_ok(const char *name)
{
	if (!name || !*name || name[0] == '/' ||
	    strlen(name) > STORE_ARTIFACT_NAME_MAX)
		return false;
	for (const char *p = name; *p;) {
		size_t len = strcspn(p, "/");
		if (len == 0 || (len == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += len;
		if (*p == '/')
			p++;
	}
	return name[strlen(name) - 1] != '/';
}

int store_artifact_check(const char *session_id, const struct store_artifact *a,
			 struct wr_error **err)
{
	if (!store_id_ok(session_id))
		return store_no_session(session_id, err);
	if (!a || !artifact_name_ok(a->name))
		return wr_error_input(err, EINVAL,
				      "add artifact to %s: bad name '%s'",
				      session_id, a && a->name ? a->name : "");
	if (!a->path || !*a->path || a->size < 0)
		return wr_error_input(err, EINVAL,
				      "add artifact %s to %s: a path and a "
				      "size are required",
				      a->name, session_id);
	return 0;
}

/* Parses text, which must be a JSON object of at most
 * STORE_EVENT_DATA_MAX bytes, into *out (if out is not NULL). */
static int parse_json_object(const char *text, const char *what, json_t **out,
			     struct wr_error **err)
{
	if (strnlen(text, STORE_EVENT_DATA_MAX + 1) > STORE_EVENT_DATA_MAX)
		return wr_error_input(err, E2BIG, "%s: more than %d bytes",
				      what, STORE_EVENT_DATA_MAX);
	json_error_t je;
	_cleanup_(json_decrefp) json_t *j = json_loads(text, 0, &je);
	if (!j)
		return wr_error_input(err, EINVAL, "%s: %s", what, je.text);
	if (!json_is_object(j))
		return wr_error_input(err, EINVAL, "%s: not a JSON object",
				      what);
	if (out)
		*out = TAKE_PTR(j);
	return 0;
}

int store_event_check(const char *session_id, enum event_kind kind,
		      const char **data_json, struct wr_error **err)
{
	if (!event_kind_name(kind))
		return wr_error_input(err, EINVAL, "append event: bad kind %d",
				      (int)kind);
	if (!store_id_ok(session_id))
		return store_no_session(session_id, err);
	if (!*data_json)
		*data_json = "{}";
	return parse_json_object(*data_json, "append event", NULL, err);
}

/* ---- the audit chain --------------------------------------------------- */

int store_audit_record_check(const char *session_id, int64_t want_seq,
			     const struct store_audit_record *r,
			     struct wr_error **err)
{
	if (r->seq != want_seq)
		return wr_error_input(err, EINVAL,
				      "audit record of %s: seq %lld, but the "
				      "chain's next is %lld",
				      session_id, (long long)r->seq,
				      (long long)want_seq);
	if (strlen(r->hash) != STORE_AUDIT_HASH_LEN)
		return wr_error_input(err, EINVAL,
				      "audit record %lld of %s: bad hash",
				      (long long)r->seq, session_id);
	if (!r->record || !*r->record)
		return wr_error_input(err, EINVAL,
				      "audit record %lld of %s: empty",
				      (long long)r->seq, session_id);
	if (strlen(r->record) > STORE_AUDIT_RECORD_MAX)
		return wr_error_set(err, E2BIG,
				    "audit record %lld of %s: longer than %d "
				    "bytes",
				    (long long)r->seq, session_id,
				    STORE_AUDIT_RECORD_MAX);
	return 0;
}

int store_consume_check(int64_t message_id, int turn, struct wr_error **err)
{
	if (turn < 1)
		return wr_error_input(err, EINVAL,
				      "consume message %lld: bad turn %d",
				      (long long)message_id, turn);
	return 0;
}

int store_consume_refused(int64_t message_id, bool exists,
			  struct wr_error **err)
{
	if (exists)
		return wr_error_set(err, ESTALE,
				    "message %lld was consumed already",
				    (long long)message_id);
	return wr_error_absent(err, true, "no message %lld",
			       (long long)message_id);
}

/* ---- event data -------------------------------------------------------- */

int store_transition_data(const char *id, int from, enum session_state to,
			  const struct store_session_update *upd,
			  const char *extra_json, json_t **out,
			  struct wr_error **err)
{
	const char *to_name = session_state_name(to);
	if (!to_name || from < -1 || from >= SESSION_STATE_MAX)
		return wr_error_input(err, EINVAL,
				      "session %s: bad transition %d -> %d",
				      id ? id : "", from, (int)to);
	if (!store_id_ok(id))
		return store_no_session(id, err);
	_cleanup_(json_decrefp) json_t *extra = NULL;
	if (extra_json) {
		int r = parse_json_object(extra_json, "transition event data",
					  &extra, err);
		if (r < 0)
			return r;
	}
	/* {"state":to,"from":(filled in later),"reason":...} */
	const char *reason =
	    upd && upd->reason && *upd->reason ? upd->reason : NULL;
	_cleanup_(json_decrefp) json_t *data = json_object();
	if (!data || json_object_set_new(data, "state", json_string(to_name)) ||
	    json_object_set_new(data, "from", json_null()) ||
	    json_object_set_new(data, "reason",
				reason ? json_string(reason) : json_null()))
		return wr_error_input(err, EINVAL,
				      "session %s: the reason is not UTF-8 "
				      "text",
				      id);
	/* the event's own keys win over extra's */
	if (extra && json_object_update_missing(data, extra))
		return wr_error_set(err, ENOMEM, "session %s", id);
	*out = TAKE_PTR(data);
	return 0;
}

int store_transition_allowed(const char *id, int cur, int from,
			     enum session_state to, struct wr_error **err)
{
	if (cur < 0)
		return wr_error_set(err, EIO, "session %s: unknown state", id);
	if (from >= 0 && cur != from)
		return wr_error_set(err, ESTALE, "session %s is %s, not %s", id,
				    session_state_name(cur),
				    session_state_name(from));
	if (!session_transition_allowed(cur, to))
		return wr_error_input(
		    err, EPERM, "session %s: %s -> %s is not allowed", id,
		    session_state_name(cur), session_state_name(to));
	return 0;
}

int store_transition_text(const char *id, json_t *data, enum session_state from,
			  char **out, struct wr_error **err)
{
	char *text = NULL;
	if (json_object_set_new(data, "from",
				json_string(session_state_name(from))) ||
	    !(text = json_dumps(data, JSON_COMPACT)))
		return wr_error_set(err, ENOMEM, "session %s", id);
	*out = text;
	return 0;
}

int store_message_data(const char *session_id, const char *user,
		       const char *text, json_t **out, struct wr_error **err)
{
	if (!store_id_ok(session_id))
		return store_no_session(session_id, err);
	if (!store_text_ok(user, STORE_USER_MAX) || !text)
		return wr_error_input(err, EINVAL,
				      "add message to %s: a user and a text "
				      "are required",
				      session_id);
	/* {"id":(filled in later),"user":...,"text":...} */
	_cleanup_(json_decrefp) json_t *data = json_object();
	if (!data || json_object_set_new(data, "id", json_integer(0)) ||
	    json_object_set_new(data, "user", json_string(user)) ||
	    json_object_set_new(data, "text", json_string(text)))
		return wr_error_input(err, EINVAL,
				      "add message to %s: not UTF-8 text",
				      session_id);
	*out = TAKE_PTR(data);
	return 0;
}

int store_message_text(const char *session_id, json_t *data, int64_t id,
		       char **out, struct wr_error **err)
{
	char *text = NULL;
	if (json_object_set_new(data, "id", json_integer(id)) ||
	    !(text = json_dumps(data, JSON_COMPACT)))
		return wr_error_set(err, ENOMEM, "add message to %s",
				    session_id);
	*out = text;
	return 0;
}

/* ---- leases ------------------------------------------------------------- */

int store_epoch_check(const char *id, int64_t epoch, int64_t cur,
		      struct wr_error **err)
{
	if (epoch == 0 || epoch == cur)
		return 0;
	return wr_error_set(err, ESTALE,
			    "session %s: lease epoch %lld is stale (the "
			    "session's is %lld): its lease was lost or "
			    "another worker holds it",
			    id, (long long)epoch, (long long)cur);
}

int store_epoch_lost(const char *id, int64_t epoch, struct wr_error **err)
{
	if (epoch >= 0)
		return 0;
	return wr_error_set(err, ESTALE,
			    "session %s: lease epoch %lld is stale (refused "
			    "here): its lease was lost or another worker "
			    "holds it",
			    id, (long long)epoch);
}

int store_worker_check(const struct store_worker *w, struct wr_error **err)
{
	if (!w || !store_id_ok(w->id))
		return wr_error_input(err, EINVAL, "register worker: bad id");
	if ((w->host &&
	     strnlen(w->host, STORE_TEXT_MAX + 1) > STORE_TEXT_MAX) ||
	    w->max_sandboxes < 0 || w->started_ms < 0)
		return wr_error_input(err, EINVAL,
				      "register worker %s: bad host, "
				      "max_sandboxes or start time",
				      w->id);
	return 0;
}

int store_claim_check(const char *worker_id, const char *session_id,
		      int64_t lease_ms, int *limit, struct wr_error **err)
{
	if (!store_id_ok(worker_id))
		return wr_error_input(err, EINVAL,
				      "claim sessions: bad worker "
				      "id");
	if (session_id && !store_id_ok(session_id))
		return store_no_session(session_id, err);
	if (lease_ms <= 0 || (!session_id && *limit < 1))
		return wr_error_input(err, EINVAL,
				      "worker %s: claim with a lease of %lld "
				      "ms and a limit of %d (both must be "
				      "positive)",
				      worker_id, (long long)lease_ms, *limit);
	if (session_id || *limit > STORE_LIST_MAX)
		*limit = session_id ? 1 : STORE_LIST_MAX;
	return 0;
}

int store_worker_usable(const char *id, bool found, int64_t stopped_ms,
			const char *what, struct wr_error **err)
{
	if (!found)
		return wr_error_absent(err, true, "%s: no worker %s", what, id);
	if (stopped_ms)
		return wr_error_set(err, ESTALE,
				    "%s: worker %s stopped at %lld ms", what,
				    id, (long long)stopped_ms);
	return 0;
}

int store_claim_one_check(const char *id, const char *worker_id,
			  enum session_state state, const char *holder,
			  int64_t expires_ms, int64_t now_ms, bool *keep,
			  struct wr_error **err)
{
	if (session_state_terminal(state))
		return wr_error_input(err, EPERM,
				      "worker %s: session %s is %s: nothing "
				      "more happens to it",
				      worker_id, id, session_state_name(state));
	bool live = holder && expires_ms >= now_ms;
	*keep = live && !strcmp(holder, worker_id);
	if (live && !*keep)
		return wr_error_set(err, EBUSY,
				    "worker %s: session %s is held by worker "
				    "%s until %lld ms",
				    worker_id, id, holder,
				    (long long)expires_ms);
	return 0;
}

/* lease_reap's reason and its event's extra keys, for claim c. */
static int reap_data(const struct store_claim *c, const char *reason,
		     char **reason_out, char **extra_out, struct wr_error **err)
{
	_cleanup_free_ char *why =
	    reason ? wr_strdup(reason)
		   : wr_asprintf("worker %s lost its lease", c->worker_id);
	_cleanup_(json_decrefp) json_t *extra =
	    json_pack("{s:s, s:I}", "worker", c->worker_id, "epoch",
		      (json_int_t)c->epoch);
	char *text = extra ? json_dumps(extra, JSON_COMPACT) : NULL;
	if (!why || !text) {
		free(text);
		return wr_error_set(err, ENOMEM, "reap session %s", c->id);
	}
	*reason_out = TAKE_PTR(why);
	*extra_out = text;
	return 0;
}

int store_reap_one(const struct store_reap_ops *ops, void *conn,
		   struct store_claim *c, const char *reason, int64_t now_ms,
		   struct wr_error **err)
{
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	_cleanup_free_ char *why = NULL;
	_cleanup_free_ char *extra = NULL;
	_cleanup_(json_decrefp) json_t *data = NULL;
	int64_t epoch = ops->lease_end(conn, c->id, true, err);
	if (epoch < 0)
		return (int)epoch;
	c->epoch = epoch;
	if (!session_transition_allowed(c->state, SESSION_INTERRUPTED))
		return 0; /* queued, review...: let go as it is */
	int r = reap_data(c, reason, &why, &extra, err);
	upd.reason = why;
	if (r == 0)
		r = store_transition_data(c->id, c->state, SESSION_INTERRUPTED,
					  &upd, extra, &data, err);
	if (r < 0)
		return r;
	int64_t seq =
	    ops->transition(conn, c->id, c->state, SESSION_INTERRUPTED, &upd,
			    data, now_ms, err);
	if (seq < 0)
		return (int)seq;
	c->state = SESSION_INTERRUPTED;
	return 0;
}

int store_claims_out(int r, struct store_claim *v, size_t n,
		     struct store_claim **out, size_t *n_out)
{
	if (r < 0) {
		store_claims_free(v, n);
		return r;
	}
	*out = v;
	*n_out = n;
	return (int)n;
}

void store_strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

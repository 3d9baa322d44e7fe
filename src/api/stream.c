/* stream.c - the body of GET /api/v1/sessions/{id}/events: Server-Sent
 * Events read from the store, in seq order, until the session rests; and
 * that of GET /api/v1/events: the newest sessions, each again whenever it
 * changed.
 *
 * It runs in the connection's own thread (libmicrohttpd, one thread per
 * connection), so it blocks: on control_wait_events, which returns when any
 * session gets an event, in slices of at most a second so that api_stop is
 * noticed. The store is the only source of events; a wake-up only says
 * "look again". */
#include "api/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STREAM_BATCH 256
#define STREAM_SLICE_MS 1000
#define STREAM_KEEPALIVE ": keepalive\n\n"
/* GET /api/v1/events follows this many of the newest sessions, and looks
 * at most this often (a wake-up comes with every event of every session,
 * output lines included). */
#define STREAM_SESSIONS 200
#define STREAM_SESSIONS_EVERY_MS 250

struct seen_session {
	char id[STORE_ID_MAX];
	int64_t updated_ms;
	int state;
	int turns;
};

struct api_stream {
	struct api *a;
	char session_id[STORE_ID_MAX];
	int64_t last_seq; /* the last event formatted */
	char *pending;	  /* formatted, not yet handed out */
	size_t pending_len, pending_off, pending_cap;
	bool done;
	int64_t last_send_ms; /* 0: nothing sent yet */
	/* GET /api/v1/events */
	bool sessions_mode;
	char user[API_TOKEN_USER_MAX + 1]; /* "": every user's */
	struct seen_session *seen;	   /* as last sent */
	size_t n_seen;
	bool ready_sent;
	int64_t last_look_ms;
};

struct api_stream *api_stream_new(struct api *a, const char *session_id,
				  int64_t after_seq)
{
	struct api_stream *s = wr_calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->a = a;
	snprintf(s->session_id, sizeof(s->session_id), "%s", session_id);
	s->last_seq = after_seq;
	return s;
}

struct api_stream *api_stream_new_sessions(struct api *a, const char *user)
{
	struct api_stream *s = wr_calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->a = a;
	s->sessions_mode = true;
	snprintf(s->user, sizeof(s->user), "%s", user ? user : "");
	return s;
}

void api_stream_free(struct api_stream *s)
{
	if (!s)
		return;
	free(s->seen);
	free(s->pending);
	free(s);
}

static int append(struct api_stream *s, const char *data, size_t len)
{
	if (s->pending_len + len > s->pending_cap) {
		size_t cap = s->pending_cap ? s->pending_cap : 4096;
		while (cap < s->pending_len + len)
			cap *= 2;
		char *bigger = wr_realloc(s->pending, cap);
		if (!bigger)
			return -ENOMEM;
		s->pending = bigger;
		s->pending_cap = cap;
	}
	memcpy(s->pending + s->pending_len, data, len);
	s->pending_len += len;
	return 0;
}

/* "id: 7\nevent: output\ndata: {...}\n\n". The data is compact JSON, which
 * has no newline; the kind is ours, but a newline in it would end the
 * field, so anything outside [a-z0-9_] becomes '_'. */
static int format_event(struct api_stream *s, const struct store_event *e)
{
	char kind[64];
	size_t i = 0;
	for (const char *k = e->kind ? e->kind : ""; *k && i < 63; k++, i++)
		kind[i] = (*k >= 'a' && *k <= 'z') ||
				  (*k >= '0' && *k <= '9') || *k == '_'
			      ? *k
			      : '_';
	kind[i] = '\0';
	json_t *obj = api_event_json(e);
	_cleanup_free_ char *data = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	if (!data)
		return -ENOMEM;
	_cleanup_free_ char *text = wr_asprintf(
	    "id: %" PRId64 "\nevent: %s\ndata: %s\n\n", e->seq, kind, data);
	if (!text)
		return -ENOMEM;
	return append(s, text, strlen(text));
}

/* Formats the next batch of events; returns how many, or -errno. */
static int fetch(struct api_stream *s)
{
	struct store *st = s->a->st;
	struct store_event *ev = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	int r = st->ops->event_list(st, s->session_id, s->last_seq,
				    STREAM_BATCH, &ev, &n, &err);
	if (r < 0) {
		if (r != -ENOENT) /* gone: the stream just ends */
			api_log(WR_LOG_ERROR,
				"event stream of %s: list events: %s",
				s->session_id,
				err && err->msg ? err->msg : strerror(-r));
		wr_error_free(err);
		return r;
	}
	for (size_t i = 0; i < n && r >= 0; i++) {
		r = format_event(s, &ev[i]);
		if (r == 0)
			s->last_seq = ev[i].seq;
	}
	store_events_free(ev, n);
	if (r < 0) {
		api_log(WR_LOG_ERROR, "event stream of %s: out of memory",
			s->session_id);
		return r;
	}
	return (int)n;
}

/* 1 if the session rests (review or terminal), 0 if not, -ENOENT if it is
 * gone, another -errno on a store failure. */
static int session_rests(struct api_stream *s)
{
	struct store *st = s->a->st;
	struct store_session sess = {0};
	struct wr_error *err = NULL;
	int r = st->ops->session_get(st, s->session_id, &sess, &err);
	if (r < 0) {
		if (r != -ENOENT)
			api_log(WR_LOG_ERROR,
				"event stream of %s: load the session: %s",
				s->session_id,
				err && err->msg ? err->msg : strerror(-r));
		wr_error_free(err);
		return r;
	}
	bool rests =
	    sess.state == SESSION_REVIEW || session_state_terminal(sess.state);
	store_session_clear(&sess);
	return rests;
}

static const struct seen_session *seen_find(const struct api_stream *s,
					    const char *id)
{
	for (size_t i = 0; i < s->n_seen; i++)
		if (strcmp(s->seen[i].id, id) == 0)
			return &s->seen[i];
	return NULL;
}

static int format_session(struct api_stream *s, const struct store_session *v)
{
	json_t *obj = api_session_json(s->a, v, true);
	_cleanup_free_ char *data = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	if (!data)
		return -ENOMEM;
	_cleanup_free_ char *text =
	    wr_asprintf("event: session\ndata: %s\n\n", data);
	if (!text)
		return -ENOMEM;
	return append(s, text, strlen(text));
}

/* Lists the newest sessions and formats those that are new or changed
 * since the last look; returns how many, or -errno. */
static int fetch_sessions(struct api_stream *s)
{
	struct store *st = s->a->st;
	struct store_session_filter f = {
	    .state = -1,
	    .user = s->user[0] ? s->user : NULL,
	    .limit = STREAM_SESSIONS,
	};
	struct store_session *v = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	s->last_look_ms = store_now_ms();
	int r = st->ops->session_list(st, &f, &v, &n, &err);
	if (r < 0) {
		api_log(WR_LOG_ERROR, "sessions stream: list sessions: %s",
			err && err->msg ? err->msg : strerror(-r));
		wr_error_free(err);
		return r;
	}
	struct seen_session *now = n ? wr_calloc(n, sizeof(*now)) : NULL;
	if (n && !now) {
		store_sessions_free(v, n);
		return -ENOMEM;
	}
	int sent = 0;
	/* oldest first, so that a client that appends rows keeps the order */
	for (size_t k = n; k-- > 0 && r >= 0;) {
		const struct store_session *x = &v[k];
		const struct seen_session *old = seen_find(s, x->id);
		if (!old || old->updated_ms != x->updated_ms ||
		    old->state != (int)x->state || old->turns != x->turns) {
			r = format_session(s, x);
			sent++;
		}
		snprintf(now[k].id, sizeof(now[k].id), "%s", x->id);
		now[k].updated_ms = x->updated_ms;
		now[k].state = (int)x->state;
		now[k].turns = x->turns;
	}
	store_sessions_free(v, n);
	if (r < 0) {
		free(now);
		api_log(WR_LOG_ERROR, "sessions stream: out of memory");
		return r;
	}
	free(s->seen);
	s->seen = now;
	s->n_seen = n;
	if (!s->ready_sent) {
		s->ready_sent = true;
		const char *ready = "event: ready\ndata: {}\n\n";
		if (append(s, ready, strlen(ready)) < 0)
			return -ENOMEM;
		sent++;
	}
	return sent;
}

static ssize_t hand_out(struct api_stream *s, char *buf, size_t max)
{
	size_t n = s->pending_len - s->pending_off;
	if (n > max)
		n = max;
	memcpy(buf, s->pending + s->pending_off, n);
	s->pending_off += n;
	if (s->pending_off == s->pending_len)
		s->pending_off = s->pending_len = 0;
	s->last_send_ms = store_now_ms();
	return (ssize_t)n;
}

/* Nothing new: a keepalive comment when nothing was sent for keepalive_ms
 * (or nothing at all yet, so that the headers go out), else a wait for
 * the next event (generation gen) of at most a slice, so that api_stop is
 * noticed. -ENOMEM if the comment could not be queued. */
static int keepalive_or_wait(struct api_stream *s, uint64_t gen)
{
	struct api *a = s->a;
	int64_t idle = store_now_ms() - s->last_send_ms;
	if (s->last_send_ms == 0 || idle >= a->keepalive_ms)
		return append(s, STREAM_KEEPALIVE, strlen(STREAM_KEEPALIVE));
	int64_t wait = a->keepalive_ms - idle;
	control_wait_events(a->ctl, gen,
			    (int)(wait < STREAM_SLICE_MS ? wait
							 : STREAM_SLICE_MS));
	return 0;
}

static ssize_t sessions_read(struct api_stream *s, char *buf, size_t max)
{
	struct api *a = s->a;
	for (;;) {
		if (s->pending_off < s->pending_len)
			return hand_out(s, buf, max);
		if (atomic_load(&a->stopping))
			return API_STREAM_END;
		uint64_t gen = control_event_generation(a->ctl);
		int64_t since = store_now_ms() - s->last_look_ms;
		if (since < STREAM_SESSIONS_EVERY_MS) {
			/* a burst of output lines is one look, not hundreds */
			struct timespec ts = {
			    0, (long)(STREAM_SESSIONS_EVERY_MS - since) *
				   1000000L};
			nanosleep(&ts, NULL);
		}
		int r = fetch_sessions(s);
		if (r < 0)
			return API_STREAM_ERROR;
		if (r > 0)
			continue;
		if (keepalive_or_wait(s, gen) < 0)
			return API_STREAM_ERROR;
	}
}

ssize_t api_stream_read(struct api_stream *s, char *buf, size_t max)
{
	struct api *a = s->a;
	if (max == 0)
		return API_STREAM_ERROR;
	if (s->sessions_mode)
		return sessions_read(s, buf, max);
	for (;;) {
		if (s->pending_off < s->pending_len)
			return hand_out(s, buf, max);
		if (s->done || atomic_load(&a->stopping))
			return API_STREAM_END;

		/* The generation is read before the store: an event that
		 * lands after the look changes it, so the wait below cannot
		 * miss it. */
		uint64_t gen = control_event_generation(a->ctl);
		int r = fetch(s);
		if (r == -ENOENT)
			return API_STREAM_END;
		if (r < 0)
			return API_STREAM_ERROR;
		if (r > 0)
			continue;
		/* Nothing new. If the session rests, its last event (the
		 * transition) was written with the state, so one more look
		 * after reading the state sees everything there will be. */
		r = session_rests(s);
		if (r == -ENOENT)
			return API_STREAM_END;
		if (r < 0)
			return API_STREAM_ERROR;
		if (r == 1) {
			r = fetch(s);
			if (r == -ENOENT)
				return API_STREAM_END;
			if (r < 0)
				return API_STREAM_ERROR;
			if (r == 0)
				s->done = true;
			continue;
		}
		if (keepalive_or_wait(s, gen) < 0)
			return API_STREAM_ERROR;
	}
}

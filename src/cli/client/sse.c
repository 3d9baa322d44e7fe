/* sse.c - reading a session's event stream (Server-Sent Events) and
 * following it across dropped connections.
 *
 * The parser follows the WHATWG "event stream interpretation": lines end in
 * LF, CRLF or CR (even split across reads), "field: value" with one
 * optional space, comments start with ':', several data: lines join with
 * LF, a blank line dispatches, and an event cut off by the end of the
 * stream is dropped. Every line and every event is capped. */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Reconnections in a row without a new event before giving up, and the
 * first pause (doubled each time: 0.5 + 1 + 2 + 4 + 8 s). */
#define FOLLOW_RETRIES 5
#define FOLLOW_BACKOFF_MS 500

void sse_parser_init(struct sse_parser *p, sse_event_fn on_event, void *ctx)
{
	memset(p, 0, sizeof(*p));
	p->on_event = on_event;
	p->ctx = ctx;
}

void sse_parser_clear(struct sse_parser *p)
{
	free(p->line);
	free(p->data);
	p->line = p->data = NULL;
	p->line_len = p->line_cap = p->data_len = p->data_cap = 0;
}

/* A new connection: forget the half-read event, keep the last id. */
static void sse_parser_restart(struct sse_parser *p)
{
	memcpy(p->id_buf, p->last_id, sizeof(p->id_buf));
	p->line_len = 0;
	p->data_len = 0;
	p->after_cr = false;
	p->started = false;
	p->event[0] = '\0';
}

static int grow_append(char **buf, size_t *len, size_t *cap, const char *src,
		       size_t n)
{
	if (n > SSE_LINE_MAX - *len)
		return -E2BIG;
	if (*len + n + 1 > *cap) {
		size_t want = *cap ? *cap : 256;
		while (want < *len + n + 1)
			want *= 2;
		char *grown = wr_realloc(*buf, want);
		if (!grown)
			return -ENOMEM;
		*buf = grown;
		*cap = want;
	}
	memcpy(*buf + *len, src, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

static int dispatch(struct sse_parser *p)
{
	/* An id: line counts once its event is complete: an event cut off
	 * by a dropped connection must not move where we resume. */
	memcpy(p->last_id, p->id_buf, sizeof(p->last_id));
	if (p->data_len == 0) { /* no data: lines, nothing to dispatch */
		p->event[0] = '\0';
		return 0;
	}
	p->data_len--; /* every data: line added a LF; drop the last one */
	p->data[p->data_len] = '\0';
	int r =
	    p->on_event(p->ctx, p->last_id, p->event[0] ? p->event : "message",
			p->data, p->data_len);
	p->data_len = 0;
	p->event[0] = '\0';
	return r;
}

static bool field_is(const char *name, size_t len, const char *want)
{
	return len == strlen(want) && !memcmp(name, want, len);
}

static int process_line(struct sse_parser *p)
{
	const char *line = p->line ? p->line : "";
	size_t len = p->line_len;
	if (!p->started) {
		p->started = true;
		if (len >= 3 && !memcmp(line, "\xEF\xBB\xBF", 3)) {
			line += 3;
			len -= 3;
		}
	}
	if (len == 0)
		return dispatch(p);
	if (line[0] == ':')
		return 0; /* a comment: the server's keepalive */
	const char *colon = memchr(line, ':', len);
	size_t name_len = colon ? (size_t)(colon - line) : len;
	const char *value = colon ? colon + 1 : line + len;
	size_t value_len = len - (size_t)(value - line);
	if (value_len && *value == ' ') {
		value++;
		value_len--;
	}
	if (field_is(line, name_len, "data")) {
		int r = grow_append(&p->data, &p->data_len, &p->data_cap, value,
				    value_len);
		if (r == 0)
			r = grow_append(&p->data, &p->data_len, &p->data_cap,
					"\n", 1);
		return r;
	}
	if (field_is(line, name_len, "event")) {
		if (value_len >= sizeof(p->event))
			value_len = sizeof(p->event) - 1;
		memcpy(p->event, value, value_len);
		p->event[value_len] = '\0';
	} else if (field_is(line, name_len, "id")) {
		/* the spec ignores an id with a NUL; we also ignore one too
		 * long to send back as Last-Event-ID */
		if (!memchr(value, '\0', value_len) &&
		    value_len < sizeof(p->id_buf)) {
			memcpy(p->id_buf, value, value_len);
			p->id_buf[value_len] = '\0';
		}
	}
	/* retry: and unknown fields are ignored */
	return 0;
}

int sse_parser_feed(struct sse_parser *p, const char *buf, size_t len)
{
	size_t i = 0;
	while (i < len) {
		if (p->after_cr) { /* CRLF split across two reads */
			p->after_cr = false;
			if (buf[i] == '\n') {
				i++;
				continue;
			}
		}
		size_t end = i;
		while (end < len && buf[end] != '\n' && buf[end] != '\r')
			end++;
		int r = grow_append(&p->line, &p->line_len, &p->line_cap,
				    buf + i, end - i);
		if (r < 0)
			return r;
		if (end == len)
			break; /* the line goes on in the next read */
		p->after_cr = buf[end] == '\r';
		r = process_line(p);
		p->line_len = 0;
		if (r != 0)
			return r;
		i = end + 1;
	}
	return 0;
}

/* --- following a session ---------------------------------------------- */

struct follow_state {
	struct client_follow *f;
	struct sse_parser parser;
	struct wr_error **err; /* this connection's error */
	unsigned new_events;   /* in this connection */
};

static int on_sse_event(void *ctx, const char *id, const char *event,
			const char *data, size_t len)
{
	struct follow_state *st = ctx;
	struct client_follow *f = st->f;
	(void)id;    /* kept by the parser for Last-Event-ID */
	(void)event; /* the kind is in the JSON too */
	json_error_t jerr;
	json_t *ev = json_loadb(data, len, 0, &jerr);
	if (!json_is_object(ev)) {
		json_decref(ev);
		wr_error_set(st->err, 0, "bad event from the server: %s",
			     ev ? "not an object" : jerr.text);
		return -EPROTO;
	}
	/* After a reconnection the server starts after Last-Event-ID; should
	 * it repeat itself anyway, show nothing twice. */
	int64_t seq = client_json_int(ev, "seq", -1);
	if (seq >= 0 && seq <= f->last_seq) {
		json_decref(ev);
		return 0;
	}
	if (seq > 0)
		f->last_seq = seq;
	const char *kind = client_json_str(ev, "kind");
	if (kind && !strcmp(kind, "state")) {
		const char *state =
		    client_json_str(json_object_get(ev, "data"), "state");
		if (state)
			snprintf(f->last_state, sizeof(f->last_state), "%s",
				 state);
	}
	st->new_events++;
	int r = f->on_event(f->ctx, ev);
	json_decref(ev);
	if (r < 0) {
		if (r != -EPIPE)
			wr_error_set(st->err, -r, "writing output");
		return r;
	}
	return 0;
}

static int on_stream_data(void *ctx, const char *buf, size_t len)
{
	struct follow_state *st = ctx;
	int r = sse_parser_feed(&st->parser, buf, len);
	if (r == -E2BIG)
		wr_error_set(st->err, 0,
			     "an event from the server is larger than %u MiB",
			     SSE_LINE_MAX >> 20);
	else if (r == -ENOMEM)
		wr_error_set(st->err, ENOMEM, "reading events");
	return r;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int client_follow(struct client *c, struct client_follow *f,
		  struct wr_error **err)
{
	_cleanup_free_ char *id = client_escape(f->session_id);
	_cleanup_free_ char *base =
	    id ? wr_asprintf("/sessions/%s/events", id) : NULL;
	if (!base)
		return wr_error_set(err, ENOMEM, "follow %s", f->session_id);
	struct follow_state st = {.f = f};
	sse_parser_init(&st.parser, on_sse_event, &st);
	unsigned failures = 0;
	bool connected = false;
	int r;
	for (;;) {
		struct wr_error *conn_err = NULL;
		_cleanup_free_ char *path = NULL;
		/* The server resumes after Last-Event-ID; without ids from
		 * it, ?after= the last sequence number does the same. */
		if (!st.parser.last_id[0] && f->last_seq > 0)
			path = wr_asprintf("%s?after=%lld", base,
					   (long long)f->last_seq);
		else
			path = wr_strdup(base);
		if (!path) {
			r = wr_error_set(err, ENOMEM, "follow");
			break;
		}
		st.err = &conn_err;
		st.new_events = 0;
		sse_parser_restart(&st.parser);
		r = client_stream(c, path, st.parser.last_id, on_stream_data,
				  &st, &conn_err);
		bool lost =
		    r == -ECONNRESET || (r == -EHOSTUNREACH && connected);
		if (r != -EHOSTUNREACH)
			connected = true;
		if (r < 0 && !lost) { /* API error, our output, bad event */
			*err = conn_err;
			break;
		}
		/* It ended (or broke) once the session came to rest:
		 * nothing more will come. A stream that ends before that
		 * (a server shutting down) counts as a lost connection. */
		if (client_state_rests(f->last_state)) {
			wr_error_free(conn_err);
			r = 0;
			break;
		}
		if (st.new_events)
			failures = 0;
		if (++failures > FOLLOW_RETRIES) {
			if (!conn_err)
				wr_error_set(&conn_err, 0,
					     "the event stream keeps ending "
					     "before the session rests");
			wr_error_wrap(&conn_err, "following %s", f->session_id);
			*err = conn_err;
			if (r == 0)
				r = -ECONNRESET;
			break;
		}
		unsigned delay = FOLLOW_BACKOFF_MS << (failures - 1);
		if (!f->quiet)
			fprintf(
			    stderr,
			    "warren %s: %s; reconnecting in %.1fs (%u/%d)\n",
			    c->verb,
			    r == -EHOSTUNREACH ? "the server does not answer"
			    : conn_err	       ? conn_err->msg
					       : "the event stream ended early",
			    delay / 1000.0, failures, FOLLOW_RETRIES);
		wr_error_free(conn_err);
		sleep_ms(delay);
	}
	sse_parser_clear(&st.parser);
	return r;
}

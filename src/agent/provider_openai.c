/* provider_openai.c - the "openai" backend: any OpenAI-compatible
 * chat-completions endpoint, over libcurl.
 *
 * A call POSTs {model, messages, tools, tool_choice, stream,
 * stream_options} to {base_url}/chat/completions. The response is read
 * into memory, at most max_response bytes of it: a chat.completion object,
 * or, streamed, Server-Sent Events parsed as they arrive (lines may be cut
 * anywhere between two reads), each "data:" a chat.completion.chunk whose
 * delta pieces - content, and tool calls by index with their arguments in
 * fragments - are put together into one message. Either way the message
 * goes through provider_message_normalize, so that it can be sent back
 * as is.
 *
 * 429, 408, 5xx and transport failures are retried up to max_retries
 * times, waiting the server's Retry-After (or retry-after-ms) or else a
 * back-off that doubles, each wait capped at retry_wait_max_ms; any other
 * 4xx fails at once with bad_input and the server's error message.
 *
 * One easy handle per provider, reused from call to call so that the
 * connection to the API stays open between turns; a provider is used from
 * one thread at a time. CURLOPT_NOSIGNAL: no SIGALRM for DNS timeouts in a
 * threaded server. */
#include "agent/provider.h"
#include "meter/meter.h"

#include "util/alloc.h"
#include "util/capbuf.h"
#include "util/cleanup.h"

#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define BASE_URL_MAX 2048
#define MODEL_MAX 256
#define API_KEY_MAX 4096
#define RETRIES_MAX 100
#define CONNECT_TIMEOUT_MS 30000ull
/* how much of the server's error message goes into ours */
#define ERROR_TEXT_MAX 1000

struct openai_provider {
	struct provider base;
	CURL *curl;
	struct curl_slist *headers; /* holds the API key: wiped when freed */
	char *base_url;		    /* without a trailing '/' */
	char *url;		    /* base_url + "/chat/completions" */
	char *model_json;	    /* the model name as a JSON string */
	char *no_proxy;
	bool stream;
	unsigned max_retries;
	uint64_t backoff_ms, timeout_ms, wait_max_ms;
	size_t max_response;
};

/* ---- one transfer: the response as it arrives ---- */

/* A tool call being streamed: the first delta with its index brings id and
 * name, later ones bring pieces of the arguments. */
struct call_part {
	json_int_t index;
	char *id;
	char *name;
	struct capbuf args;
};

struct transfer {
	struct openai_provider *p;
	size_t received; /* bytes of body so far, against p->max_response */
	bool started;	 /* the first bytes came: sse decided */
	bool sse;	 /* reading an event stream */
	bool too_big;
	bool nomem;
	struct capbuf body; /* not an event stream: the whole body */

	/* the event stream */
	struct capbuf line;
	struct capbuf data; /* the event's data: lines, each ending in LF */
	bool after_cr;	 /* the last read ended in CR: skip a leading LF */
	bool done;	 /* data: [DONE] */

	/* the message put together from the chunks */
	struct capbuf content;
	bool has_content;
	struct call_part *calls;
	size_t n_calls;
	char *finish_reason;
	struct provider_usage usage;

	/* what went wrong in the body (set once) */
	struct wr_error *error;
	int error_code;
	bool error_retryable;
};

static void transfer_clear(struct transfer *t)
{
	capbuf_free(&t->body);
	capbuf_free(&t->line);
	capbuf_free(&t->data);
	capbuf_free(&t->content);
	for (size_t i = 0; i < t->n_calls; i++) {
		free(t->calls[i].id);
		free(t->calls[i].name);
		capbuf_free(&t->calls[i].args);
	}
	free(t->calls);
	free(t->finish_reason);
	wr_error_free(t->error);
	memset(t, 0, sizeof(*t));
}

static int transfer_fail(struct transfer *t, bool retryable, int code,
			 const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Record the first error in the body; returns code (negative). */
static int transfer_fail(struct transfer *t, bool retryable, int code,
			 const char *fmt, ...)
{
	if (t->error)
		return t->error_code;
	va_list ap;
	va_start(ap, fmt);
	char *text = wr_vasprintf(fmt, ap);
	va_end(ap);
	if (text)
		wr_error_set(&t->error, 0, "%s", text);
	else
		wr_error_set(&t->error, ENOMEM, "response");
	free(text);
	t->error_code = text ? code : -ENOMEM;
	t->error_retryable = retryable;
	return t->error_code;
}

/* Hand an error over to the caller's err (or drop it). */
static void error_move(struct wr_error **err, struct wr_error *e)
{
	if (err && !*err)
		*err = e;
	else
		wr_error_free(e);
}

/* The server's words, made safe to print: no control characters, cut at
 * ERROR_TEXT_MAX bytes on a character boundary. */
static char *clean_text(const char *text, size_t len)
{
	if (len > ERROR_TEXT_MAX) {
		len = ERROR_TEXT_MAX;
		while (len && ((unsigned char)text[len] & 0xc0) == 0x80)
			len--;
	}
	char *out = wr_strndup(text, len);
	if (!out)
		return NULL;
	for (char *c = out; *c; c++)
		if ((unsigned char)*c < ' ' || *c == 0x7f)
			*c = ' ';
	return out;
}

/* The message in an error body: {"error":{"message"}} (OpenAI),
 * {"error":"..."}, {"message"} or {"detail"} (other servers), else the
 * first line of the body. NULL when there is nothing to say. */
static char *error_text(const char *body, size_t len)
{
	if (!body || !len)
		return NULL;
	json_t *doc = json_loadb(body, len, 0, NULL);
	const json_t *e = json_object_get(doc, "error");
	const json_t *msg = json_is_string(e) ? e
			    : json_is_object(e)
				? json_object_get(e, "message")
				: json_object_get(doc, "message");
	if (!json_is_string(msg))
		msg = json_object_get(doc, "detail");
	char *text;
	if (json_is_string(msg))
		text =
		    clean_text(json_string_value(msg), json_string_length(msg));
	else
		text = clean_text(body, strcspn(body, "\r\n"));
	json_decref(doc);
	return text;
}

/* The usage object through the meter, the gateway's reader too. */
static void parse_usage(const json_t *u, struct provider_usage *out)
{
	struct meter_tokens t = {0};
	meter_usage_read(METER_WIRE_CHAT, u, &t);
	out->prompt_tokens = t.prompt;
	out->completion_tokens = t.completion;
	out->cached_tokens = t.cached;
}

static char *default_finish_reason(const json_t *message)
{
	return wr_strdup(json_array_size(json_object_get(message, "tool_calls"))
			     ? "tool_calls"
			     : "stop");
}

/* ---- the event stream ---- */

static struct call_part *call_slot(struct transfer *t, json_int_t index)
{
	for (size_t i = 0; i < t->n_calls; i++)
		if (t->calls[i].index == index)
			return &t->calls[i];
	if (t->n_calls >= PROVIDER_TOOL_CALLS_MAX) {
		transfer_fail(t, false, -EBADMSG,
			      "more than %d tool calls in one message",
			      PROVIDER_TOOL_CALLS_MAX);
		return NULL;
	}
	struct call_part *grown =
	    wr_realloc(t->calls, (t->n_calls + 1) * sizeof(*grown));
	if (!grown) {
		transfer_fail(t, false, -ENOMEM, "tool call");
		return NULL;
	}
	t->calls = grown;
	struct call_part *c = &t->calls[t->n_calls++];
	memset(c, 0, sizeof(*c));
	c->index = index;
	c->args = CAPBUF_INIT(t->p->max_response);
	return c;
}

/* {"index", "id"?, "type"?, "function": {"name"?, "arguments"?}}. The id
 * and the name come once (the first wins); the arguments in pieces. A
 * delta without an index (some servers) starts a new call when it has an
 * id and continues the last one otherwise. */
static int apply_tool_delta(struct transfer *t, const json_t *d)
{
	if (!json_is_object(d))
		return transfer_fail(t, false, -EBADMSG,
				     "a streamed tool call is not an object");
	const json_t *jindex = json_object_get(d, "index");
	const json_t *id = json_object_get(d, "id");
	json_int_t index;
	if (json_is_integer(jindex))
		index = json_integer_value(jindex);
	else if (jindex && !json_is_null(jindex))
		return transfer_fail(t, false, -EBADMSG,
				     "a streamed tool call's index is not a "
				     "number");
	else if (json_is_string(id) || t->n_calls == 0)
		index = (json_int_t)t->n_calls;
	else
		index = t->calls[t->n_calls - 1].index;
	if (index < 0)
		return transfer_fail(t, false, -EBADMSG,
				     "a streamed tool call has index %lld",
				     (long long)index);
	struct call_part *c = call_slot(t, index);
	if (!c)
		return t->error_code;

	if (json_is_string(id) && json_string_length(id) && !c->id) {
		c->id = wr_strdup(json_string_value(id));
		if (!c->id)
			return transfer_fail(t, false, -ENOMEM, "tool call");
	}
	const json_t *fn = json_object_get(d, "function");
	if (fn && !json_is_null(fn) && !json_is_object(fn))
		return transfer_fail(t, false, -EBADMSG,
				     "a streamed tool call's function is not "
				     "an object");
	const json_t *name = json_object_get(fn, "name");
	if (json_is_string(name) && json_string_length(name) && !c->name) {
		c->name = wr_strdup(json_string_value(name));
		if (!c->name)
			return transfer_fail(t, false, -ENOMEM, "tool call");
	}
	const json_t *args = json_object_get(fn, "arguments");
	if (json_is_string(args) &&
	    capbuf_append(&c->args, json_string_value(args),
			  json_string_length(args)) < 0)
		return transfer_fail(t, false, -ENOMEM, "tool call");
	return 0;
}

static int apply_choice(struct transfer *t, const json_t *choice)
{
	const json_t *delta = json_object_get(choice, "delta");
	if (delta && !json_is_null(delta) && !json_is_object(delta))
		return transfer_fail(t, false, -EBADMSG,
				     "a chunk's delta is not an object");
	const json_t *content = json_object_get(delta, "content");
	if (json_is_string(content)) {
		t->has_content = true;
		if (capbuf_append(&t->content, json_string_value(content),
				  json_string_length(content)) < 0)
			return transfer_fail(t, false, -ENOMEM, "content");
	} else if (content && !json_is_null(content)) {
		return transfer_fail(t, false, -EBADMSG,
				     "a chunk's content is not a string");
	}
	const json_t *calls = json_object_get(delta, "tool_calls");
	if (calls && !json_is_null(calls) && !json_is_array(calls))
		return transfer_fail(t, false, -EBADMSG,
				     "a chunk's tool_calls is not an array");
	size_t i;
	const json_t *call;
	json_array_foreach(calls, i, call)
	{
		int r = apply_tool_delta(t, call);
		if (r < 0)
			return r;
	}
	const json_t *finish = json_object_get(choice, "finish_reason");
	if (json_is_string(finish)) {
		char *copy = wr_strdup(json_string_value(finish));
		if (!copy)
			return transfer_fail(t, false, -ENOMEM, "response");
		free(t->finish_reason);
		t->finish_reason = copy;
	}
	return 0;
}

/* One chat.completion.chunk. We ask for one choice: only index 0 counts.
 * The last chunk (include_usage) has no choices and the usage. */
static int apply_chunk(struct transfer *t, const json_t *chunk)
{
	if (!json_is_object(chunk))
		return transfer_fail(t, false, -EBADMSG,
				     "an event in the stream is not an "
				     "object");
	const json_t *e = json_object_get(chunk, "error");
	if (e && !json_is_null(e)) {
		/* an error in the middle of a stream: the server's trouble */
		char *dump = json_dumps(chunk, JSON_COMPACT);
		char *text = dump ? error_text(dump, strlen(dump)) : NULL;
		free(dump);
		int r = transfer_fail(t, true, -EIO, "error in the stream: %s",
				      text ? text : "(no message)");
		free(text);
		return r;
	}
	const json_t *usage = json_object_get(chunk, "usage");
	if (json_is_object(usage))
		parse_usage(usage, &t->usage);
	const json_t *choices = json_object_get(chunk, "choices");
	if (choices && !json_is_null(choices) && !json_is_array(choices))
		return transfer_fail(t, false, -EBADMSG,
				     "a chunk's choices is not an array");
	size_t i;
	const json_t *choice;
	json_array_foreach(choices, i, choice)
	{
		const json_t *index = json_object_get(choice, "index");
		if (index && json_integer_value(index) != 0)
			continue;
		int r = apply_choice(t, choice);
		if (r < 0)
			return r;
	}
	return 0;
}

static int sse_event(struct transfer *t, const char *data, size_t len)
{
	if (len == 6 && !memcmp(data, "[DONE]", 6)) {
		t->done = true;
		return 0;
	}
	json_error_t jerr;
	json_t *chunk = json_loadb(data, len, 0, &jerr);
	if (!chunk)
		return transfer_fail(t, false, -EBADMSG,
				     "malformed event in the stream: %s",
				     jerr.text);
	int r = apply_chunk(t, chunk);
	json_decref(chunk);
	return r;
}

/* A blank line: the event's data: lines (joined with LF) are complete. */
static int sse_dispatch(struct transfer *t)
{
	if (t->data.len == 0)
		return 0;
	t->data.len--; /* every data: line added a LF; drop the last one */
	t->data.data[t->data.len] = '\0';
	int r = sse_event(t, t->data.data, t->data.len);
	t->data.len = 0;
	return r;
}

/* "field: value" with one optional space; ':' starts a comment (a
 * keep-alive); only data: matters here (event:, id:, retry: do not). */
static int sse_line(struct transfer *t)
{
	const char *line = t->line.data ? t->line.data : "";
	size_t len = t->line.len;
	if (len == 0)
		return sse_dispatch(t);
	if (line[0] == ':')
		return 0;
	const char *colon = memchr(line, ':', len);
	size_t name_len = colon ? (size_t)(colon - line) : len;
	if (name_len != 4 || memcmp(line, "data", 4))
		return 0;
	const char *value = colon ? colon + 1 : line + len;
	size_t value_len = len - (size_t)(value - line);
	if (value_len && *value == ' ') {
		value++;
		value_len--;
	}
	if (capbuf_append(&t->data, value, value_len) < 0 ||
	    capbuf_append(&t->data, "\n", 1) < 0)
		return transfer_fail(t, false, -ENOMEM, "response");
	return 0;
}

/* Bytes of the stream as they come: lines end in LF, CRLF or CR, and a
 * read may end anywhere, even between the CR and the LF. */
static int sse_feed(struct transfer *t, const char *p, size_t n)
{
	size_t i = 0;
	if (t->after_cr && n && p[0] == '\n')
		i = 1;
	t->after_cr = false;
	while (i < n && !t->done) {
		size_t k = i;
		while (k < n && p[k] != '\n' && p[k] != '\r')
			k++;
		if (capbuf_append(&t->line, p + i, k - i) < 0)
			return transfer_fail(t, false, -ENOMEM, "response");
		if (k == n)
			break; /* the line goes on in the next read */
		if (p[k] == '\r') {
			if (k + 1 == n)
				t->after_cr = true;
			else if (p[k + 1] == '\n')
				k++;
		}
		i = k + 1;
		int r = sse_line(t);
		if (r < 0)
			return r;
		t->line.len = 0;
	}
	return 0;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct transfer *t = ud;
	size_t n = size * nmemb;
	if (n > t->p->max_response - t->received) {
		t->too_big = true;
		return 0; /* stops the transfer: CURLE_WRITE_ERROR */
	}
	t->received += n;
	if (!t->started) {
		/* The status and the headers are in: an event stream is
		 * parsed as it comes, anything else kept whole. */
		long status = 0;
		char *type = NULL;
		t->started = true;
		curl_easy_getinfo(t->p->curl, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_getinfo(t->p->curl, CURLINFO_CONTENT_TYPE, &type);
		t->sse = status >= 200 && status <= 299 && type &&
			 !strncasecmp(type, "text/event-stream", 17);
	}
	if (t->sse)
		return sse_feed(t, ptr, n) < 0 ? 0 : n;
	if (capbuf_append(&t->body, ptr, n) < 0) {
		t->nomem = true;
		return 0;
	}
	return n;
}

/* The stream is over: put the message together. */
static int finish_stream(struct transfer *t, struct provider_reply *out)
{
	if (!t->done) {
		/* a last line or event without the blank line after it */
		if ((t->line.len && sse_line(t) < 0) || sse_dispatch(t) < 0)
			return t->error_code;
		if (!t->finish_reason)
			return transfer_fail(t, true, -ECONNRESET,
					     "the stream ended before the "
					     "reply was complete");
	}
	json_t *raw = json_object();
	json_t *calls = json_array();
	int r = -ENOMEM;
	if (!raw || !calls ||
	    json_object_set_new(raw, "role", json_string("assistant")))
		goto out;
	/* a stream that sent tool calls and an empty content: null */
	json_t *content =
	    t->has_content && (t->content.len || !t->n_calls)
		? json_stringn(t->content.data ? t->content.data : "",
			       t->content.len)
		: json_null();
	if (json_object_set_new(raw, "content", content))
		goto out;
	for (size_t i = 0; i < t->n_calls; i++) {
		struct call_part *c = &t->calls[i];
		json_t *one = json_pack(
		    "{s:s?, s:s, s:{s:s?, s:s#}}", "id", c->id, "type",
		    "function", "function", "name", c->name, "arguments",
		    c->args.data ? c->args.data : "", c->args.len);
		if (!one || json_array_append_new(calls, one))
			goto out;
	}
	if (t->n_calls && json_object_set(raw, "tool_calls", calls))
		goto out;
	json_t *message = NULL;
	r = provider_message_normalize(raw, &message, &t->error);
	if (r < 0) {
		wr_error_wrap(&t->error, "the streamed message");
		t->error_code = r == -ENOMEM ? r : -EBADMSG;
		t->error_retryable = false;
		r = t->error_code;
		goto out;
	}
	char *finish = t->finish_reason ? wr_strdup(t->finish_reason)
					: default_finish_reason(message);
	if (!finish) {
		json_decref(message);
		r = -ENOMEM;
		goto out;
	}
	out->message = message;
	out->finish_reason = finish;
	out->usage = t->usage;
	r = 0;
out:
	json_decref(raw);
	json_decref(calls);
	if (r == -ENOMEM && !t->error)
		transfer_fail(t, false, -ENOMEM, "response");
	return r;
}

/* A whole chat.completion object. */
static int finish_body(struct transfer *t, struct provider_reply *out)
{
	const char *body = t->body.data ? t->body.data : "";
	size_t skip = strspn(body, " \t\r\n");
	if (!strncmp(body + skip, "data:", 5) || body[skip] == ':') {
		/* an event stream under another Content-Type */
		t->sse = true;
		struct capbuf whole = t->body;
		t->body = CAPBUF_INIT(t->p->max_response);
		int r = sse_feed(t, whole.data, whole.len);
		capbuf_free(&whole);
		return r < 0 ? r : finish_stream(t, out);
	}
	if (skip == t->body.len)
		return transfer_fail(t, false, -EBADMSG, "empty response");
	json_error_t jerr;
	json_t *doc = json_loadb(body, t->body.len, 0, &jerr);
	if (!doc)
		return transfer_fail(t, false, -EBADMSG,
				     "the response is not JSON: %s (line %d, "
				     "column %d)",
				     jerr.text, jerr.line, jerr.column);
	int r;
	const json_t *e = json_object_get(doc, "error");
	if (e && !json_is_null(e)) {
		_cleanup_free_ char *text = error_text(body, t->body.len);
		r = transfer_fail(t, true, -EIO, "error in the response: %s",
				  text ? text : "(no message)");
		json_decref(doc);
		return r;
	}
	const json_t *choices = json_object_get(doc, "choices");
	const json_t *choice = json_array_get(choices, 0);
	for (size_t i = 0; i < json_array_size(choices); i++) {
		const json_t *c = json_array_get(choices, i);
		if (json_integer_value(json_object_get(c, "index")) == 0) {
			choice = c;
			break;
		}
	}
	const json_t *raw = json_object_get(choice, "message");
	if (!json_is_object(raw)) {
		json_decref(doc);
		return transfer_fail(t, false, -EBADMSG,
				     "the response has no choices[0].message");
	}
	json_t *message = NULL;
	r = provider_message_normalize(raw, &message, &t->error);
	if (r < 0) {
		json_decref(doc);
		wr_error_wrap(&t->error, "the response's message");
		t->error_code = r == -ENOMEM ? r : -EBADMSG;
		t->error_retryable = false;
		return t->error_code;
	}
	const char *finish =
	    json_string_value(json_object_get(choice, "finish_reason"));
	char *finish_copy =
	    finish ? wr_strdup(finish) : default_finish_reason(message);
	if (!finish_copy) {
		json_decref(message);
		json_decref(doc);
		return transfer_fail(t, false, -ENOMEM, "response");
	}
	out->message = message;
	out->finish_reason = finish_copy;
	memset(&out->usage, 0, sizeof(out->usage));
	parse_usage(json_object_get(doc, "usage"), &out->usage);
	json_decref(doc);
	return 0;
}

/* ---- errors ---- */

static int http_error(long status, const struct transfer *t, bool *retryable,
		      struct wr_error **err)
{
	_cleanup_free_ char *text = error_text(t->body.data, t->body.len);
	const char *sep = text && *text ? ": " : "";
	const char *said = text ? text : "";
	if (status == 429 || status == 408 || status >= 500) {
		*retryable = true;
		wr_error_set(err, 0, "HTTP %ld%s%s", status, sep, said);
		return status == 429   ? -EAGAIN
		       : status == 408 ? -ETIMEDOUT
				       : -EIO;
	}
	if (status >= 400) {
		wr_error_input(err, 0, "HTTP %ld%s%s%s", status,
			       status == 401 ? " (check the API key)" : "", sep,
			       said);
		return -EINVAL;
	}
	wr_error_set(err, 0, "unexpected HTTP %ld%s%s", status, sep, said);
	return -EBADMSG;
}

static int transport_error(const struct openai_provider *p, CURLcode code,
			   const char *errbuf, bool *retryable,
			   struct wr_error **err)
{
	const char *why = errbuf[0] ? errbuf : curl_easy_strerror(code);
	switch (code) {
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		wr_error_input(err, 0, "bad base_url: %s", why);
		return -EINVAL;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
	case CURLE_COULDNT_CONNECT:
		*retryable = true;
		wr_error_set(err, 0, "cannot connect: %s", why);
		return -EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT:
		*retryable = true;
		wr_error_set(err, 0, "no complete response within %llu ms: %s",
			     (unsigned long long)p->timeout_ms, why);
		return -ETIMEDOUT;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
		wr_error_set(err, 0, "TLS: %s", why);
		return -ECONNREFUSED;
	default:
		*retryable = true;
		wr_error_set(err, 0, "the connection failed: %s", why);
		return -ECONNRESET;
	}
}

/* How long the server asked us to wait (ms), UINT64_MAX if it did not:
 * retry-after-ms (OpenAI), else Retry-After in seconds (fractions
 * accepted) or as an HTTP date. */
static uint64_t retry_after_ms(CURL *curl)
{
	struct curl_header *h = NULL;
	double scale = 1;
	if (curl_easy_header(curl, "retry-after-ms", 0, CURLH_HEADER, -1, &h) !=
	    CURLHE_OK) {
		h = NULL;
		scale = 1000;
		if (curl_easy_header(curl, "Retry-After", 0, CURLH_HEADER, -1,
				     &h) != CURLHE_OK)
			return UINT64_MAX;
	}
	const char *value = h->value;
	char *end = NULL;
	double n = strtod(value, &end);
	if (end != value && end[strspn(end, " \t")] == '\0' && isfinite(n) &&
	    n >= 0)
		return n * scale > 1e12 ? (uint64_t)1e12
					: (uint64_t)(n * scale);
	if (scale == 1000) {
		time_t when = curl_getdate(value, NULL);
		time_t now = time(NULL);
		if (when > 0)
			return when > now ? (uint64_t)(when - now) * 1000 : 0;
	}
	return UINT64_MAX;
}

/* ---- one request ---- */

static int attempt_once(struct openai_provider *p, const char *payload,
			struct provider_reply *out, bool *retryable,
			uint64_t *wait_ms, struct wr_error **err)
{
	/* Every piece of the response is at most the whole of it: the
	 * buffers' caps are never what stops a transfer (on_write counts
	 * the bytes, streamed or not), but nothing grows without one. */
	const size_t cap = p->max_response;
	struct transfer t = {.p = p,
			     .body = CAPBUF_INIT(cap),
			     .line = CAPBUF_INIT(cap),
			     .data = CAPBUF_INIT(cap),
			     .content = CAPBUF_INIT(cap)};
	char errbuf[CURL_ERROR_SIZE] = "";
	CURL *curl = p->curl;
	int r = -EIO;

	curl_easy_reset(curl); /* keeps the open connection */
	if (curl_easy_setopt(curl, CURLOPT_URL, p->url) != CURLE_OK) {
		r = wr_error_set(err, ENOMEM, "request");
		goto out;
	}
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "warren-agent");
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, p->headers);
	curl_easy_setopt(curl, CURLOPT_NOPROXY, p->no_proxy);
	curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(p->timeout_ms < CONNECT_TIMEOUT_MS
				    ? p->timeout_ms
				    : CONNECT_TIMEOUT_MS));
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)p->timeout_ms);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)strlen(payload));
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);

	CURLcode code = curl_easy_perform(curl);
	long status = 0;
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	if (t.too_big) {
		if (p->max_response % (1u << 20) == 0)
			wr_error_set(err, 0,
				     "the response is larger than %zu MiB",
				     p->max_response >> 20);
		else
			wr_error_set(err, 0,
				     "the response is larger than %zu bytes",
				     p->max_response);
		r = -EFBIG;
		goto out;
	}
	if (t.nomem) {
		r = wr_error_set(err, ENOMEM, "response");
		goto out;
	}
	/* A stream that got to [DONE] is whole even if the connection
	 * then broke. */
	if (!t.error && code != CURLE_OK && !(t.sse && t.done)) {
		r = transport_error(p, code, errbuf, retryable, err);
		goto out;
	}
	if (!t.error && (status < 200 || status > 299)) {
		r = http_error(status, &t, retryable, err);
		if (*retryable)
			*wait_ms = retry_after_ms(curl);
		goto out;
	}
	if (!t.error)
		r = t.sse ? finish_stream(&t, out) : finish_body(&t, out);
	if (t.error) {
		r = t.error_code;
		*retryable = t.error_retryable;
		error_move(err, TAKE_PTR(t.error));
	}
out:
	/* the handle outlives this frame: no pointers into it */
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, NULL);
	transfer_clear(&t);
	return r;
}

/* The request body, written around the caller's messages and tools
 * (serialised, not copied: they are const and can be large). */
static char *request_body(const struct openai_provider *p,
			  const json_t *messages, const json_t *tools)
{
	bool with_tools = json_array_size(tools) > 0;
	_cleanup_free_ char *messages_text = json_dumps(messages, JSON_COMPACT);
	_cleanup_free_ char *tools_text =
	    with_tools ? json_dumps(tools, JSON_COMPACT) : NULL;
	if (!messages_text || (with_tools && !tools_text))
		return NULL;
	return wr_asprintf(
	    "{\"model\":%s,\"messages\":%s%s%s%s,\"stream\":%s%s}",
	    p->model_json, messages_text, with_tools ? ",\"tools\":" : "",
	    with_tools ? tools_text : "",
	    with_tools ? ",\"tool_choice\":\"auto\"" : "",
	    p->stream ? "true" : "false",
	    p->stream ? ",\"stream_options\":{\"include_usage\":true}" : "");
}

static uint64_t next_wait_ms(const struct openai_provider *p, unsigned attempt,
			     uint64_t asked_ms)
{
	uint64_t wait = p->backoff_ms;
	if (asked_ms != UINT64_MAX)
		wait = asked_ms;
	else
		for (unsigned i = 0; i < attempt && wait < p->wait_max_ms; i++)
			wait *= 2;
	return wait < p->wait_max_ms ? wait : p->wait_max_ms;
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
			      .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int openai_complete(struct provider *base, const json_t *messages,
			   const json_t *tools, struct provider_reply *out,
			   struct wr_error **err)
{
	struct openai_provider *p = (struct openai_provider *)base;
	if (!json_is_array(messages))
		return wr_error_input(err, 0,
				      "model request: messages is not an "
				      "array");
	if (tools && !json_is_null(tools) && !json_is_array(tools))
		return wr_error_input(err, 0,
				      "model request: tools is not an array");
	_cleanup_free_ char *payload = request_body(p, messages, tools);
	if (!payload)
		return wr_error_set(err, ENOMEM, "model request");

	for (unsigned attempt = 0;; attempt++) {
		struct provider_reply reply = {0};
		struct wr_error *e = NULL;
		bool retryable = false;
		uint64_t asked_ms = UINT64_MAX;
		int r =
		    attempt_once(p, payload, &reply, &retryable, &asked_ms, &e);
		if (r == 0) {
			reply.retries = attempt;
			*out = reply;
			return 0;
		}
		if (!retryable || attempt >= p->max_retries) {
			if (retryable && attempt > 0)
				wr_error_wrap(&e, "gave up after %u retr%s",
					      attempt,
					      attempt == 1 ? "y" : "ies");
			wr_error_wrap(&e, "model API at %s", p->base_url);
			error_move(err, e);
			return r;
		}
		wr_error_free(e);
		sleep_ms(next_wait_ms(p, attempt, asked_ms));
	}
}

/* ---- set-up ---- */

static void openai_free(struct provider *base)
{
	struct openai_provider *p = (struct openai_provider *)base;
	if (p->curl)
		curl_easy_cleanup(p->curl);
	for (struct curl_slist *h = p->headers; h; h = h->next)
		explicit_bzero(h->data, strlen(h->data)); /* the API key */
	curl_slist_free_all(p->headers);
	free(p->base_url);
	free(p->url);
	free(p->model_json);
	free(p->no_proxy);
	free(p);
}

static const struct provider_ops openai_ops = {
    .complete = openai_complete,
    .free = openai_free,
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_code;

static void curl_init(void)
{
	curl_init_code = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static bool has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < ' ' || *s == 0x7f)
			return true;
	return false;
}

static int check_config(const struct provider_config *cfg,
			struct wr_error **err)
{
	const char *url = cfg->base_url;
	if (!url || !*url)
		return wr_error_input(err, 0, "openai provider: no base_url");
	if (strlen(url) > BASE_URL_MAX || has_control(url) ||
	    strchr(url, ' ') ||
	    (strncasecmp(url, "http://", 7) && strncasecmp(url, "https://", 8)))
		return wr_error_input(err, 0,
				      "openai provider: base_url is not an "
				      "http:// or https:// URL");
	if (!cfg->model || !*cfg->model)
		return wr_error_input(err, 0, "openai provider: no model");
	if (strlen(cfg->model) > MODEL_MAX || has_control(cfg->model))
		return wr_error_input(err, 0,
				      "openai provider: bad model name");
	if (cfg->api_key &&
	    (strlen(cfg->api_key) > API_KEY_MAX || has_control(cfg->api_key)))
		return wr_error_input(err, 0,
				      "openai provider: the API key is longer "
				      "than %d bytes or holds control "
				      "characters",
				      API_KEY_MAX);
	if (cfg->max_retries > RETRIES_MAX)
		return wr_error_input(err, 0,
				      "openai provider: retries %u is more "
				      "than %d",
				      cfg->max_retries, RETRIES_MAX);
	if (cfg->timeout_ms > (uint64_t)24 * 3600 * 1000)
		return wr_error_input(err, 0,
				      "openai provider: timeout is more than a "
				      "day");
	return 0;
}

static int add_header(struct curl_slist **list, const char *line)
{
	struct curl_slist *l = curl_slist_append(*list, line);
	if (!l)
		return -ENOMEM;
	*list = l;
	return 0;
}

int provider_openai_new(const struct provider_config *cfg,
			struct provider **out, struct wr_error **err)
{
	int r = check_config(cfg, err);
	if (r < 0)
		return r;
	pthread_once(&curl_once, curl_init);
	if (curl_init_code != CURLE_OK)
		return wr_error_set(err, 0, "openai provider: libcurl: %s",
				    curl_easy_strerror(curl_init_code));

	struct openai_provider *p = wr_calloc(1, sizeof(*p));
	if (!p)
		return wr_error_set(err, ENOMEM, "openai provider");
	p->base.ops = &openai_ops;
	p->stream = cfg->stream;
	p->max_retries = cfg->max_retries;
	p->backoff_ms = cfg->retry_backoff_ms ? cfg->retry_backoff_ms
					      : PROVIDER_RETRY_BACKOFF_MS;
	p->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : PROVIDER_TIMEOUT_MS;
	p->wait_max_ms = cfg->retry_wait_max_ms ? cfg->retry_wait_max_ms
						: PROVIDER_RETRY_WAIT_MAX_MS;
	p->max_response =
	    cfg->max_response ? cfg->max_response : PROVIDER_RESPONSE_MAX;

	size_t url_len = strlen(cfg->base_url);
	while (url_len && cfg->base_url[url_len - 1] == '/')
		url_len--;
	p->base_url = wr_strndup(cfg->base_url, url_len);
	p->url = p->base_url ? wr_asprintf("%s/chat/completions", p->base_url)
			     : NULL;
	json_t *model = json_string(cfg->model);
	if (!model) {
		openai_free(&p->base);
		return wr_error_input(err, 0,
				      "openai provider: the model name is not "
				      "UTF-8");
	}
	p->model_json = json_dumps(model, JSON_ENCODE_ANY);
	json_decref(model);

	/* A proxy from the environment must not capture a local API. */
	const char *env_no_proxy = getenv("no_proxy");
	if (!env_no_proxy || !*env_no_proxy)
		env_no_proxy = getenv("NO_PROXY");
	p->no_proxy = wr_asprintf("localhost,127.0.0.1,::1%s%s",
				  env_no_proxy && *env_no_proxy ? "," : "",
				  env_no_proxy ? env_no_proxy : "");
	p->curl = curl_easy_init();
	if (!p->url || !p->model_json || !p->no_proxy || !p->curl) {
		openai_free(&p->base);
		return wr_error_set(err, ENOMEM, "openai provider");
	}

	/* "Expect:" off: no 100-continue round trip for a long
	 * conversation. */
	r = add_header(&p->headers, "Content-Type: application/json");
	if (r == 0)
		r = add_header(&p->headers, p->stream
						? "Accept: text/event-stream"
						: "Accept: application/json");
	if (r == 0)
		r = add_header(&p->headers, "Expect:");
	if (r == 0 && cfg->api_key && *cfg->api_key) {
		char *auth =
		    wr_asprintf("Authorization: Bearer %s", cfg->api_key);
		r = auth ? add_header(&p->headers, auth) : -ENOMEM;
		if (auth) {
			explicit_bzero(auth, strlen(auth));
			free(auth);
		}
	}
	if (r < 0) {
		openai_free(&p->base);
		return wr_error_set(err, ENOMEM, "openai provider");
	}
	*out = &p->base;
	return 0;
}

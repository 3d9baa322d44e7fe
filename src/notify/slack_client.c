/* slack_client.c - posting to Slack, over libcurl: the Web API's
 * chat.postMessage and chat.postEphemeral, and a slash command's
 * response_url.
 *
 * The Web API: POST {api_url}/chat.postMessage with "Authorization:
 * Bearer xoxb-…" and a JSON body {"channel", "text", "thread_ts"?}; Slack
 * answers 200 with {"ok": true, …} or {"ok": false, "error": "…"} (and
 * 429 with Retry-After when rate limited). A response_url takes a JSON
 * body {"text", "response_type"} without any token (the URL is the
 * credential) and answers 200 ("ok" or {"ok": true}), or 404 once it has
 * expired (30 minutes) or been used five times.
 *
 * What may pass later is reported as retryable: a transport failure, a
 * 5xx, a 408 or 429, and Slack's ratelimited, internal_error,
 * fatal_error, service_unavailable and request_timeout; the caller (the
 * notifier) decides when to try again. Anything else is final.
 *
 * The bot token is sent only to api_url (https, or http to a loopback
 * stand-in), only in the Authorization header, which is wiped after the
 * call; an error names Slack's error code (a word of [a-z0-9_]), never
 * anything else Slack sent. Redirects are not followed. One easy handle
 * per post: posts are rare, and each is on its own timer. */
#include "notify/slack.h"

#include "util/alloc.h"
#include "util/capbuf.h"
#include "util/cleanup.h"

#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define RESPONSE_MAX (64 * 1024)
#define CONNECT_TIMEOUT_MS 10000ull
#define RETRY_AFTER_MAX_MS (3600ull * 1000)
#define CODE_MAX 64

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_code;

static void curl_init(void)
{
	curl_init_code = curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct response {
	long status;
	struct capbuf body; /* capped at RESPONSE_MAX */
};

/* How long Slack asked us to wait (ms), UINT64_MAX if it did not. */
static uint64_t retry_after_ms(CURL *curl)
{
	struct curl_header *h = NULL;
	if (curl_easy_header(curl, "Retry-After", 0, CURLH_HEADER, -1, &h) !=
	    CURLHE_OK)
		return UINT64_MAX;
	char *end = NULL;
	double n = strtod(h->value, &end);
	if (end == h->value || end[strspn(end, " \t")] != '\0' ||
	    !isfinite(n) || n < 0)
		return UINT64_MAX;
	return n * 1000 > RETRY_AFTER_MAX_MS ? RETRY_AFTER_MAX_MS
					     : (uint64_t)(n * 1000);
}

/* The messages below carry no errno text: the -errno returned says it,
 * and the words are what a log line needs. */
static int transport_error(CURLcode code, const char *errbuf, bool *retryable,
			   struct wr_error **err)
{
	const char *why = errbuf[0] ? errbuf : curl_easy_strerror(code);
	switch (code) {
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		wr_error_set(err, 0, "bad URL: %s", why);
		return -EINVAL;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
		wr_error_set(err, 0, "TLS: %s", why);
		return -ECONNREFUSED;
	case CURLE_OPERATION_TIMEDOUT:
		*retryable = true;
		wr_error_set(err, 0, "no answer in time: %s", why);
		return -ETIMEDOUT;
	case CURLE_WRITE_ERROR:
		wr_error_set(err, 0,
			     "the answer is larger than %d bytes, or out of "
			     "memory",
			     RESPONSE_MAX);
		return -EFBIG;
	default:
		*retryable = true;
		wr_error_set(err, 0, "the connection failed: %s", why);
		return -ECONNRESET;
	}
}

static void headers_free(struct curl_slist *h)
{
	for (struct curl_slist *l = h; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data)); /* the token */
	curl_slist_free_all(h);
}

static int add_header(struct curl_slist **list, const char *line)
{
	struct curl_slist *l = curl_slist_append(*list, line);
	if (!l)
		return -ENOMEM;
	*list = l;
	return 0;
}

/* One POST of payload (JSON) to url, with the token when not NULL. 0 with
 * resp filled for any HTTP answer; -errno for a transport failure. */
static int post_json(const struct slack_config *cfg, const char *url,
		     const char *payload, const char *token,
		     struct response *resp, bool *retryable, uint64_t *wait_ms,
		     struct wr_error **err)
{
	struct curl_slist *headers = NULL;
	_cleanup_free_ char *no_proxy = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	CURL *curl = curl_easy_init();
	int r = 0;
	if (!curl) {
		r = wr_error_set(err, ENOMEM, "libcurl");
		goto out;
	}
	/* "Expect:" off: no 100-continue round trip */
	r = add_header(&headers, "Content-Type: application/json; "
				 "charset=utf-8");
	if (r == 0)
		r = add_header(&headers, "Accept: application/json");
	if (r == 0)
		r = add_header(&headers, "Expect:");
	if (r == 0 && token) {
		char *auth = wr_asprintf("Authorization: Bearer %s", token);
		r = auth ? add_header(&headers, auth) : -ENOMEM;
		if (auth) {
			explicit_bzero(auth, strlen(auth));
			free(auth);
		}
	}
	/* a proxy from the environment must not capture a local stand-in */
	const char *env = getenv("no_proxy");
	if (!env || !*env)
		env = getenv("NO_PROXY");
	no_proxy = wr_asprintf("localhost,127.0.0.1,::1%s%s",
			       env && *env ? "," : "", env ? env : "");
	if (r < 0 || !no_proxy) {
		r = wr_error_set(err, ENOMEM, "request");
		goto out;
	}
	uint64_t timeout =
	    cfg->timeout_ms ? cfg->timeout_ms : SLACK_TIMEOUT_MS_DEFAULT;
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "warren");
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(curl, CURLOPT_NOPROXY, no_proxy);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(timeout < CONNECT_TIMEOUT_MS
				    ? timeout
				    : CONNECT_TIMEOUT_MS));
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)timeout);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
			 (curl_off_t)strlen(payload));
	/* past the cap, or out of memory: CURLE_WRITE_ERROR */
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, capbuf_curl_write);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &resp->body);
	CURLcode code = curl_easy_perform(curl);
	if (code != CURLE_OK) {
		r = transport_error(code, errbuf, retryable, err);
		goto out;
	}
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &resp->status);
	*wait_ms = retry_after_ms(curl);
out:
	if (curl)
		curl_easy_cleanup(curl);
	headers_free(headers);
	return r;
}

/* Slack's error code from a body ({"ok": false, "error": CODE} or a bare
 * word such as "expired_url"), copied when it is a plain word. */
static void error_code(const struct capbuf *body, const json_t *doc,
		       char code[CODE_MAX + 1])
{
	const char *c = json_string_value(json_object_get(doc, "error"));
	size_t n = 0;
	if (!doc && body->data) {
		c = body->data;
		while (c[n] && c[n] != '\n' && c[n] != '\r')
			n++;
	} else if (c) {
		n = strlen(c);
	}
	bool word = c && n > 0 && n <= CODE_MAX;
	for (size_t i = 0; word && i < n; i++)
		word = (c[i] >= 'a' && c[i] <= 'z') ||
		       (c[i] >= '0' && c[i] <= '9') || c[i] == '_';
	snprintf(code, CODE_MAX + 1, "%.*s", word ? (int)n : 7,
		 word ? c : "unknown");
}

static bool code_retryable(const char *code)
{
	static const char *const codes[] = {
	    "ratelimited", "internal_error", "fatal_error",
	    "service_unavailable", "request_timeout"};
	for (size_t i = 0; i < ARRAY_SIZE(codes); i++)
		if (!strcmp(code, codes[i]))
			return true;
	return false;
}

/* The verdict on an HTTP answer: 0 when Slack took the message. */
static int judge(const struct response *resp, bool web_api, bool *retryable,
		 struct wr_error **err)
{
	json_t *doc = resp->body.data
			  ? json_loadb(resp->body.data, resp->body.len, 0, NULL)
			  : NULL;
	char code[CODE_MAX + 1];
	error_code(&resp->body, doc, code);
	const json_t *ok = json_object_get(doc, "ok");
	long status = resp->status;
	int r = 0;
	if (status == 429 || status == 408 || status >= 500) {
		*retryable = true;
		wr_error_set(err, 0, "HTTP %ld%s", status,
			     status == 429 ? " (rate limited)" : "");
		r = status == 429 ? -EAGAIN : -EIO;
	} else if (status < 200 || status > 299) {
		wr_error_set(err, 0, "HTTP %ld: %s%s", status, code,
			     !web_api && status == 404
				 ? " (the response_url expired or was used "
				   "up)"
				 : "");
		r = status == 404 ? -ENOENT : -EPERM;
	} else if (json_is_false(ok)) {
		*retryable = code_retryable(code);
		wr_error_set(err, 0, "Slack said %s", code);
		r = *retryable ? -EAGAIN : -EREMOTEIO;
	} else if (web_api && !json_is_true(ok)) {
		wr_error_set(err, 0, "the answer is not Slack's {\"ok\": …}");
		r = -EBADMSG;
	}
	json_decref(doc);
	return r;
}

int slack_send(const struct slack_config *cfg, const struct slack_message *m,
	       bool *retryable, uint64_t *retry_after_ms, struct wr_error **err)
{
	*retryable = false;
	*retry_after_ms = UINT64_MAX;
	if (!cfg || !m || !m->text || !*m->text)
		return wr_error_set(err, EINVAL, "Slack: nothing to post");
	bool web_api = !m->response_url;
	const char *what = !web_api	  ? "response_url"
			   : m->ephemeral ? "chat.postEphemeral"
					  : "chat.postMessage";
	json_t *doc = NULL;
	_cleanup_free_ char *url = NULL;
	if (!web_api) {
		if (!slack_response_url_ok(cfg, m->response_url)) {
			wr_error_set(err, 0,
				     "Slack response_url: not a Slack URL");
			return -EINVAL;
		}
		url = wr_strdup(m->response_url);
		doc = json_pack("{s:s, s:s, s:b}", "text", m->text,
				"response_type",
				m->ephemeral ? "ephemeral" : "in_channel",
				"replace_original", 0);
	} else {
		if (!m->channel || (m->ephemeral && !m->user)) {
			wr_error_set(err, 0, "Slack %s: no channel or user",
				     what);
			return -EINVAL;
		}
		url = wr_asprintf("%s/%s", cfg->api_url, what);
		doc = json_pack("{s:s, s:s, s:b, s:b}", "channel", m->channel,
				"text", m->text, "unfurl_links", 0,
				"unfurl_media", 0);
		if (doc && m->thread_ts)
			json_object_set_new(doc, "thread_ts",
					    json_string(m->thread_ts));
		if (doc && m->ephemeral)
			json_object_set_new(doc, "user", json_string(m->user));
	}
	/* json_pack fails on text that is not UTF-8 as well */
	_cleanup_free_ char *payload =
	    doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	if (!url || !payload) {
		wr_error_set(err, 0,
			     "Slack %s: the message is not UTF-8, or out of "
			     "memory",
			     what);
		return -EINVAL;
	}
	pthread_once(&curl_once, curl_init);
	if (curl_init_code != CURLE_OK)
		return wr_error_set(err, EIO, "Slack: libcurl: %s",
				    curl_easy_strerror(curl_init_code));
	struct response resp = {.body = CAPBUF_INIT(RESPONSE_MAX)};
	int r = post_json(cfg, url, payload, web_api ? cfg->bot_token : NULL,
			  &resp, retryable, retry_after_ms, err);
	if (r == 0)
		r = judge(&resp, web_api, retryable, err);
	capbuf_free(&resp.body);
	if (r < 0)
		wr_error_wrap(err, "Slack %s", what);
	return r;
}

/* forge.c - pull requests through a forge's REST API (GitHub's), over
 * libcurl.
 *
 * Opening one is POST {api_url}/repos/{owner}/{name}/pulls with
 * {"title", "head", "base", "body", "maintainer_can_modify": false}; 201
 * brings the pull request. GitHub answers 422 "Validation Failed" with
 * errors[].message "A pull request already exists for owner:branch." when
 * one is open from the same branch: then GET .../pulls?head=owner:branch&
 * state=open finds it, so that approving twice (or a POST retried after a
 * lost answer that had in fact gone through) gives the same pull request.
 *
 * 5xx, 408, 429 and transport failures are retried FORGE_RETRIES times,
 * waiting the server's Retry-After or else a back-off that doubles; any
 * other 4xx fails at once with bad_input and GitHub's message. Redirects
 * are not followed: a renamed repository answers 301, which is a
 * configuration to fix, not something to chase with the token.
 *
 * Everything that goes into a URL is checked first (owner and name:
 * [A-Za-z0-9._-]; branches: a conservative subset of git's ref names) and
 * the query is percent-encoded. The token is only ever in the
 * Authorization header, which is wiped when the call ends, and the
 * server's words are scrubbed of it before they go into an error. Plain
 * http:// only to a loopback host (tests): elsewhere the token would
 * travel in the clear.
 *
 * One easy handle per call (the POST and a lookup share its connection);
 * CURLOPT_NOSIGNAL: no SIGALRM for DNS timeouts in a threaded server. */
#include "review/forge.h"

#include "util/alloc.h"
#include "util/capbuf.h"
#include "util/cleanup.h"
#include "util/url.h"

#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define DEFAULT_API_URL "https://api.github.com"
#define DEFAULT_BASE "main"
#define API_URL_MAX 2048
#define NAME_PART_MAX 100
#define BRANCH_MAX 255
#define TOKEN_MAX 4096
#define CONNECT_TIMEOUT_MS 10000ull
#define TIMEOUT_MAX_MS (24ull * 3600 * 1000)
/* how much of the server's error message goes into ours */
#define ERROR_TEXT_MAX 1000
#define ALREADY_EXISTS "A pull request already exists"
#define REDACTED "[token]"

/* ---- what goes into URLs and requests ---- */

static bool has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < ' ' || *s == 0x7f)
			return true;
	return false;
}

/* A value the user gave, fit to quote in a message. */
static const char *shown(const char *s)
{
	if (!s)
		return "(none)";
	if (has_control(s) || strlen(s) > 200)
		return "(unprintable)";
	return s;
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/* One part of owner/name: [A-Za-z0-9._-]{1,100}, not "." or "..". */
static bool name_part_ok(const char *s, size_t len)
{
	if (len == 0 || len > NAME_PART_MAX)
		return false;
	if ((len == 1 && s[0] == '.') || (len == 2 && !memcmp(s, "..", 2)))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!name_char(s[i]))
			return false;
	return true;
}

static bool repo_ok(const char *repo)
{
	if (!repo)
		return false;
	const char *slash = strchr(repo, '/');
	if (!slash)
		return false;
	return name_part_ok(repo, (size_t)(slash - repo)) &&
	       name_part_ok(slash + 1, strlen(slash + 1));
}

/* A branch name that is safe in a URL path, a query and a JSON body, and
 * a valid git ref: [A-Za-z0-9._/-], components that neither start with
 * '.' or '-' nor end with ".lock", no "..", no empty component, no
 * trailing '.'. */
static bool branch_ok(const char *b)
{
	if (!b)
		return false;
	size_t len = strlen(b);
	if (len == 0 || len > BRANCH_MAX || b[len - 1] == '.')
		return false;
	if (strstr(b, ".."))
		return false;
	const char *part = b;
	for (;;) {
		size_t n = strcspn(part, "/");
		if (n == 0 || part[0] == '.' || part[0] == '-')
			return false;
		for (size_t i = 0; i < n; i++)
			if (!name_char(part[i]))
				return false;
		if (n >= 5 && !memcmp(part + n - 5, ".lock", 5))
			return false;
		if (!part[n])
			return true;
		part += n + 1;
	}
}

/* Characters, not bytes: GitHub's limits count characters. */
static size_t utf8_chars(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
	return n;
}

static int check_api_url(const char *url, struct wr_error **err)
{
	if (strncasecmp(url, "https://", 8) && strncasecmp(url, "http://", 7))
		return wr_error_input(err, 0,
				      "forge: api_url %s is not an http:// or "
				      "https:// URL",
				      shown(url));
	/* no credentials, query or fragment: the URL goes into messages
	 * and paths are appended to it */
	if (strlen(url) > API_URL_MAX || has_control(url) ||
	    strpbrk(url, " @?#\\\"<>"))
		return wr_error_input(err, 0,
				      "forge: api_url %s holds characters an "
				      "API root has no use for",
				      shown(url));
	struct wr_url_parts u;
	if (!wr_url_http_parts(url, &u))
		return wr_error_input(err, 0, "forge: api_url %s has no host",
				      shown(url));
	if (!u.https && !wr_url_host_loopback(u.host, u.host_len))
		return wr_error_input(err, 0,
				      "forge: api_url %s: the token would go "
				      "in the clear (http:// is for a "
				      "loopback host only; use https://)",
				      shown(url));
	return 0;
}

int forge_config_check(const struct forge_config *f, struct wr_error **err)
{
	if (!f)
		return wr_error_input(err, 0, "forge: no configuration");
	if (f->kind && *f->kind && strcmp(f->kind, "github"))
		return wr_error_input(err, 0,
				      "forge: unknown kind %s (known: github)",
				      shown(f->kind));
	int r = check_api_url(f->api_url ? f->api_url : DEFAULT_API_URL, err);
	if (r < 0)
		return r;
	if (!repo_ok(f->repo))
		return wr_error_input(err, 0,
				      "forge: repo %s is not owner/name "
				      "([A-Za-z0-9._-] parts)",
				      shown(f->repo));
	if (f->base_branch && *f->base_branch && !branch_ok(f->base_branch))
		return wr_error_input(err, 0,
				      "forge: base branch %s is not a branch "
				      "name",
				      shown(f->base_branch));
	if (!f->token || !*f->token)
		return wr_error_input(err, 0, "forge: no token");
	/* the token goes into a header line: no header injection */
	if (strlen(f->token) > TOKEN_MAX || has_control(f->token) ||
	    strchr(f->token, ' '))
		return wr_error_input(err, 0,
				      "forge: the token is longer than %d "
				      "bytes or holds spaces or control "
				      "characters",
				      TOKEN_MAX);
	if (f->timeout_ms > TIMEOUT_MAX_MS)
		return wr_error_input(err, 0,
				      "forge: timeout is more than a day");
	return 0;
}

static int check_pull(const char *head, const char *title, const char *body,
		      struct wr_error **err)
{
	if (!branch_ok(head))
		return wr_error_input(err, 0,
				      "pull request: head branch %s is not a "
				      "branch name",
				      shown(head));
	if (!title || !*title)
		return wr_error_input(err, 0, "pull request: no title");
	if (has_control(title))
		return wr_error_input(err, 0,
				      "pull request: the title holds control "
				      "characters (one line only)");
	/* json_string() checks UTF-8 */
	json_t *t = json_string(title);
	json_t *b = body ? json_string(body) : NULL;
	bool utf8 = t && (!body || b);
	json_decref(t);
	json_decref(b);
	if (!utf8)
		return wr_error_input(err, 0,
				      "pull request: the title or the body is "
				      "not UTF-8");
	if (utf8_chars(title) > FORGE_TITLE_MAX)
		return wr_error_input(err, 0,
				      "pull request: the title is longer than "
				      "%d characters",
				      FORGE_TITLE_MAX);
	if (body && utf8_chars(body) > FORGE_BODY_MAX)
		return wr_error_input(err, 0,
				      "pull request: the body is longer than "
				      "%d characters",
				      FORGE_BODY_MAX);
	return 0;
}

/* Spaces and control characters but the line's end. */
static bool blank(char c)
{
	return c == ' ' || c == 0x7f || ((unsigned char)c < ' ' && c != '\n');
}

char *forge_title(const char *prompt, const char *session_id)
{
	const char *line = prompt ? prompt : "";
	size_t len;
	/* the first line with text */
	for (;;) {
		len = strcspn(line, "\n");
		while (len && blank(*line)) {
			line++;
			len--;
		}
		while (len && blank(line[len - 1]))
			len--;
		if (len || !line[strcspn(line, "\n")])
			break;
		line += strcspn(line, "\n") + 1;
	}
	/* cut on a character boundary, room left for the ellipsis */
	size_t chars = 0, cut = len;
	for (size_t i = 0; i < len; i++) {
		if (((unsigned char)line[i] & 0xc0) == 0x80)
			continue;
		if (chars == FORGE_TITLE_CUT - 1 && cut == len)
			cut = i;
		chars++;
	}
	bool cut_short = chars > FORGE_TITLE_CUT;
	if (!cut_short)
		cut = len;
	while (cut_short && cut && blank(line[cut - 1]))
		cut--;
	json_t *check = json_stringn(line, cut); /* UTF-8? */
	bool utf8 = check != NULL;
	json_decref(check);
	if (!cut || !utf8)
		return wr_asprintf("Warren session %s",
				   session_id ? session_id : "");
	char *title = wr_malloc(cut + sizeof("\xe2\x80\xa6"));
	if (!title)
		return NULL;
	memcpy(title, line, cut);
	for (size_t i = 0; i < cut; i++)
		if ((unsigned char)title[i] < ' ' || title[i] == 0x7f)
			title[i] = ' ';
	strcpy(title + cut, cut_short ? "\xe2\x80\xa6" : "");
	return title;
}

/* Percent-encoding for a query value: all but RFC 3986's unreserved. */
static char *query_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = wr_malloc(strlen(s) * 3 + 1);
	if (!out)
		return NULL;
	char *o = out;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~') {
			*o++ = (char)c;
		} else {
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o = '\0';
	return out;
}

/* ---- one call ---- */

struct response {
	long status;
	struct capbuf body; /* capped at max_response */
};

static void response_reset(struct response *resp)
{
	capbuf_free(&resp->body);
	resp->status = 0;
}

struct forge_call {
	CURL *curl;
	struct curl_slist *headers; /* holds the token: wiped when freed */
	char *api_url;		    /* without a trailing '/' */
	char *owner;		    /* the repository's owner */
	char *no_proxy;
	const char *repo, *head, *base, *token;
	uint64_t timeout_ms, backoff_ms;
	size_t max_response;
};

static void call_clear(struct forge_call *c)
{
	if (c->curl)
		curl_easy_cleanup(c->curl);
	for (struct curl_slist *h = c->headers; h; h = h->next)
		explicit_bzero(h->data, strlen(h->data)); /* the token */
	curl_slist_free_all(c->headers);
	free(c->api_url);
	free(c->owner);
	free(c->no_proxy);
	memset(c, 0, sizeof(*c));
}

static int add_header(struct curl_slist **list, const char *line)
{
	struct curl_slist *l = curl_slist_append(*list, line);
	if (!l)
		return -ENOMEM;
	*list = l;
	return 0;
}

static int call_init(struct forge_call *c, const struct forge_config *f,
		     const char *head, struct wr_error **err)
{
	const char *api = f->api_url ? f->api_url : DEFAULT_API_URL;
	size_t api_len = strlen(api);
	while (api_len && api[api_len - 1] == '/')
		api_len--;
	c->api_url = wr_strndup(api, api_len);
	c->owner = wr_strndup(f->repo, strcspn(f->repo, "/"));
	c->repo = f->repo;
	c->head = head;
	c->base =
	    f->base_branch && *f->base_branch ? f->base_branch : DEFAULT_BASE;
	c->token = f->token;
	c->timeout_ms = f->timeout_ms ? f->timeout_ms : FORGE_TIMEOUT_MS;
	c->backoff_ms =
	    f->retry_backoff_ms ? f->retry_backoff_ms : FORGE_RETRY_BACKOFF_MS;
	c->max_response =
	    f->max_response ? f->max_response : (size_t)FORGE_RESPONSE_MAX;

	/* A proxy from the environment must not capture a local API. */
	const char *env_no_proxy = getenv("no_proxy");
	if (!env_no_proxy || !*env_no_proxy)
		env_no_proxy = getenv("NO_PROXY");
	c->no_proxy = wr_asprintf("localhost,127.0.0.1,::1%s%s",
				  env_no_proxy && *env_no_proxy ? "," : "",
				  env_no_proxy ? env_no_proxy : "");
	c->curl = curl_easy_init();
	if (!c->api_url || !c->owner || !c->no_proxy || !c->curl)
		return wr_error_set(err, ENOMEM, "forge request");

	/* "Expect:" off: no 100-continue round trip */
	int r = add_header(&c->headers, "Accept: application/vnd.github+json");
	if (r == 0)
		r = add_header(&c->headers, "X-GitHub-Api-Version: 2022-11-28");
	if (r == 0)
		r = add_header(&c->headers, "Content-Type: application/json");
	if (r == 0)
		r = add_header(&c->headers, "Expect:");
	if (r == 0) {
		char *auth = wr_asprintf("Authorization: Bearer %s", f->token);
		r = auth ? add_header(&c->headers, auth) : -ENOMEM;
		if (auth) {
			explicit_bzero(auth, strlen(auth));
			free(auth);
		}
	}
	if (r < 0)
		return wr_error_set(err, ENOMEM, "forge request");
	return 0;
}

/* Every occurrence of the token in text replaced (the server may echo
 * what it was sent). NULL on failure. */
static char *redact(const char *text, size_t len, const char *token)
{
	/* no cap of its own: the text is at most a response */
	struct capbuf b = CAPBUF_INIT(SIZE_MAX);
	size_t tlen = token ? strlen(token) : 0;
	size_t i = 0;
	while (i < len) {
		const char *hit =
		    tlen ? memmem(text + i, len - i, token, tlen) : NULL;
		size_t upto = hit ? (size_t)(hit - text) : len;
		if (capbuf_append(&b, text + i, upto - i) < 0 ||
		    (hit && capbuf_puts(&b, REDACTED) < 0))
			break; /* capbuf_take gives NULL */
		i = hit ? upto + tlen : len;
	}
	return capbuf_take(&b);
}

/* The server's words, made safe to print: without the token, no control
 * characters, cut at ERROR_TEXT_MAX bytes on a character boundary. */
static char *clean_text(const struct forge_call *c, const char *text,
			size_t len)
{
	char *out = redact(text, len, c->token);
	if (!out)
		return NULL;
	len = strlen(out);
	if (len > ERROR_TEXT_MAX) {
		len = ERROR_TEXT_MAX;
		while (len && ((unsigned char)out[len] & 0xc0) == 0x80)
			len--;
		out[len] = '\0';
	}
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < ' ' || *p == 0x7f)
			*p = ' ';
	return out;
}

/* One entry of GitHub's "errors": {"message"}, {"resource", "field",
 * "code"} or a string. */
static int error_detail(struct capbuf *b, const json_t *e)
{
	if (json_is_string(e))
		return capbuf_puts(b, json_string_value(e));
	const char *msg = json_string_value(json_object_get(e, "message"));
	if (msg)
		return capbuf_puts(b, msg);
	const char *field = json_string_value(json_object_get(e, "field"));
	const char *code = json_string_value(json_object_get(e, "code"));
	int r = 0;
	if (field)
		r = capbuf_puts(b, field);
	if (r == 0 && field && code)
		r = capbuf_puts(b, " ");
	if (r == 0 && code)
		r = capbuf_puts(b, code);
	if (r == 0 && !field && !code)
		r = capbuf_puts(b, "?");
	return r;
}

/* GitHub's words in an error body, {"message", "errors": [...]}, as
 * "message (detail; detail)", else the body's first line; NULL when there
 * is nothing to say. */
static char *error_text(const struct forge_call *c, const struct capbuf *body)
{
	if (!body->data || !body->len)
		return NULL;
	json_t *doc = json_loadb(body->data, body->len, 0, NULL);
	const char *msg = json_string_value(json_object_get(doc, "message"));
	const json_t *errors = json_object_get(doc, "errors");
	if (!json_is_object(doc) || (!msg && !json_array_size(errors))) {
		json_decref(doc);
		return clean_text(c, body->data, strcspn(body->data, "\r\n"));
	}
	struct capbuf b = CAPBUF_INIT(SIZE_MAX); /* parts of a response */
	int r = capbuf_puts(&b, msg ? msg : "");
	size_t i;
	const json_t *e;
	json_array_foreach(errors, i, e)
	{
		if (r == 0)
			r = capbuf_puts(&b, i ? "; " : msg ? " (" : "(");
		if (r == 0)
			r = error_detail(&b, e);
	}
	if (r == 0 && json_array_size(errors))
		r = capbuf_puts(&b, ")");
	json_decref(doc);
	char *text = r == 0 ? clean_text(c, b.data, b.len) : NULL;
	capbuf_free(&b);
	return text;
}

/* A 422 that says a pull request from the branch is open already. */
static bool already_exists(const struct capbuf *body)
{
	if (!body->data)
		return false;
	json_t *doc = json_loadb(body->data, body->len, 0, NULL);
	const char *msg = json_string_value(json_object_get(doc, "message"));
	bool found = msg && strstr(msg, ALREADY_EXISTS);
	size_t i;
	const json_t *e;
	json_array_foreach(json_object_get(doc, "errors"), i, e)
	{
		msg = json_is_string(e)
			  ? json_string_value(e)
			  : json_string_value(json_object_get(e, "message"));
		if (msg && strstr(msg, ALREADY_EXISTS))
			found = true;
	}
	json_decref(doc);
	return found;
}

static int http_error(const struct forge_call *c, long status,
		      const struct capbuf *body, bool *retryable,
		      struct wr_error **err)
{
	_cleanup_free_ char *text = error_text(c, body);
	const char *sep = text && *text ? ": " : "";
	const char *said = text ? text : "";
	if (status == 429 || status == 408 || status >= 500) {
		*retryable = true;
		wr_error_set(err, 0, "HTTP %ld%s%s", status, sep, said);
		return status == 429   ? -EAGAIN
		       : status == 408 ? -ETIMEDOUT
				       : -EIO;
	}
	if (status >= 300 && status < 400) {
		wr_error_input(err, 0,
			       "HTTP %ld (the repository moved: renamed or "
			       "transferred? redirects are not followed)%s%s",
			       status, sep, said);
		return -EINVAL;
	}
	if (status >= 400) {
		const char *hint =
		    status == 401   ? " (check the token)"
		    : status == 403 ? " (the token lacks a permission, or a "
				      "rate limit)"
		    : status == 404 ? " (no such repository, or the token "
				      "cannot see it)"
				    : "";
		wr_error_input(err, 0, "HTTP %ld%s%s%s", status, hint, sep,
			       said);
		return -EINVAL;
	}
	wr_error_set(err, 0, "unexpected HTTP %ld%s%s", status, sep, said);
	return -EBADMSG;
}

static int transport_error(const struct forge_call *c, CURLcode code,
			   const char *errbuf, bool *retryable,
			   struct wr_error **err)
{
	const char *why = errbuf[0] ? errbuf : curl_easy_strerror(code);
	switch (code) {
	case CURLE_URL_MALFORMAT:
	case CURLE_UNSUPPORTED_PROTOCOL:
		wr_error_input(err, 0, "bad api_url: %s", why);
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
			     (unsigned long long)c->timeout_ms, why);
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
 * Retry-After in seconds or as an HTTP date. */
static uint64_t retry_after_ms(CURL *curl)
{
	struct curl_header *h = NULL;
	if (curl_easy_header(curl, "Retry-After", 0, CURLH_HEADER, -1, &h) !=
	    CURLHE_OK)
		return UINT64_MAX;
	const char *value = h->value;
	char *end = NULL;
	double n = strtod(value, &end);
	if (end != value && end[strspn(end, " \t")] == '\0' && isfinite(n) &&
	    n >= 0)
		return n > 1e9 ? (uint64_t)1e12 : (uint64_t)(n * 1000);
	time_t when = curl_getdate(value, NULL);
	time_t now = time(NULL);
	if (when > 0)
		return when > now ? (uint64_t)(when - now) * 1000 : 0;
	return UINT64_MAX;
}

/* One request: POST payload to url, or GET url when payload is NULL.
 * 0 with resp filled for any status that is final; an error (retryable
 * or not) otherwise. */
static int attempt_once(struct forge_call *c, const char *url,
			const char *payload, struct response *resp,
			bool *retryable, uint64_t *wait_ms,
			struct wr_error **err)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	CURL *curl = c->curl;
	int r = 0;

	curl_easy_reset(curl); /* keeps the open connection */
	if (curl_easy_setopt(curl, CURLOPT_URL, url) != CURLE_OK) {
		r = wr_error_set(err, ENOMEM, "request");
		goto out;
	}
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "warren");
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(curl, CURLOPT_NOPROXY, c->no_proxy);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
			 (long)(c->timeout_ms < CONNECT_TIMEOUT_MS
				    ? c->timeout_ms
				    : CONNECT_TIMEOUT_MS));
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
	if (payload) {
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)strlen(payload));
	} else {
		curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
	}
	/* past the cap, the transfer stops (CURLE_WRITE_ERROR) */
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, capbuf_curl_write);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &resp->body);

	CURLcode code = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &resp->status);
	if (resp->body.overflow) {
		wr_error_set(err, 0, "the response is larger than %zu bytes",
			     resp->body.max);
		r = -EFBIG;
		goto out;
	}
	if (resp->body.nomem) {
		r = wr_error_set(err, ENOMEM, "response");
		goto out;
	}
	if (code != CURLE_OK) {
		r = transport_error(c, code, errbuf, retryable, err);
		goto out;
	}
	if (resp->status == 429 || resp->status == 408 || resp->status >= 500) {
		r = http_error(c, resp->status, &resp->body, retryable, err);
		*wait_ms = retry_after_ms(curl);
	}
out:
	/* no pointers into this frame left in the handle */
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, NULL);
	return r;
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
			      .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void error_move(struct wr_error **err, struct wr_error *e)
{
	if (err && !*err)
		*err = e;
	else
		wr_error_free(e);
}

/* attempt_once, retried. */
static int request(struct forge_call *c, const char *url, const char *payload,
		   struct response *resp, struct wr_error **err)
{
	for (unsigned attempt = 0;; attempt++) {
		struct wr_error *e = NULL;
		bool retryable = false;
		uint64_t asked_ms = UINT64_MAX;
		response_reset(resp);
		int r = attempt_once(c, url, payload, resp, &retryable,
				     &asked_ms, &e);
		if (r == 0)
			return 0;
		if (!retryable || attempt >= FORGE_RETRIES) {
			if (retryable && attempt > 0)
				wr_error_wrap(&e, "gave up after %u retr%s",
					      attempt,
					      attempt == 1 ? "y" : "ies");
			error_move(err, e);
			return r;
		}
		wr_error_free(e);
		uint64_t wait = c->backoff_ms;
		if (asked_ms != UINT64_MAX)
			wait = asked_ms;
		else
			for (unsigned i = 0;
			     i < attempt && wait < FORGE_RETRY_WAIT_MAX_MS; i++)
				wait *= 2;
		sleep_ms(wait < FORGE_RETRY_WAIT_MAX_MS
			     ? wait
			     : FORGE_RETRY_WAIT_MAX_MS);
	}
}

static json_t *parse_body(const struct response *resp, struct wr_error **err)
{
	json_error_t jerr;
	json_t *doc = resp->body.data ? json_loadb(resp->body.data,
						   resp->body.len, 0, &jerr)
				      : NULL;
	if (!doc) {
		if (!resp->body.len)
			wr_error_set(err, 0, "empty response");
		else
			wr_error_set(err, 0,
				     "the response is not JSON: %s (line %d, "
				     "column %d)",
				     jerr.text, jerr.line, jerr.column);
	}
	return doc;
}

static bool web_url_ok(const char *url)
{
	return url &&
	       (!strncasecmp(url, "https://", 8) ||
		!strncasecmp(url, "http://", 7)) &&
	       strlen(url) <= API_URL_MAX && !has_control(url) &&
	       !strpbrk(url, " \"<>");
}

/* A pull request object: {"html_url", "number", "url", ...}. */
static int pull_result(const json_t *pr, bool created, json_t **out,
		       struct wr_error **err)
{
	const char *html = json_string_value(json_object_get(pr, "html_url"));
	const char *api = json_string_value(json_object_get(pr, "url"));
	const json_t *number = json_object_get(pr, "number");
	if (!json_is_object(pr) || !web_url_ok(html) || !web_url_ok(api) ||
	    !json_is_integer(number) || json_integer_value(number) <= 0) {
		wr_error_set(err, 0,
			     "the response is not a pull request (html_url, "
			     "number, url)");
		return -EBADMSG;
	}
	json_t *result = json_pack("{s:s, s:I, s:s, s:b}", "url", html,
				   "number", json_integer_value(number),
				   "api_url", api, "created", created);
	if (!result)
		return wr_error_set(err, ENOMEM, "pull request");
	*out = result;
	return 0;
}

/* The open pull request from our branch, after GitHub said one exists. */
static int find_open(struct forge_call *c, json_t **out, struct wr_error **err)
{
	_cleanup_free_ char *head = wr_asprintf("%s:%s", c->owner, c->head);
	_cleanup_free_ char *query = head ? query_escape(head) : NULL;
	_cleanup_free_ char *url =
	    query ? wr_asprintf("%s/repos/%s/pulls?head=%s&state=open",
				c->api_url, c->repo, query)
		  : NULL;
	if (!url)
		return wr_error_set(err, ENOMEM, "pull request lookup");
	struct response resp = {.body = CAPBUF_INIT(c->max_response)};
	json_t *list = NULL;
	int r = request(c, url, NULL, &resp, err);
	if (r < 0)
		goto out;
	if (resp.status != 200) {
		bool retryable = false;
		r = http_error(c, resp.status, &resp.body, &retryable, err);
		goto out;
	}
	list = parse_body(&resp, err);
	if (!json_is_array(list)) {
		if (list)
			wr_error_set(err, 0, "the answer is not a list");
		r = -EBADMSG;
		goto out;
	}
	/* GitHub filtered by head already; a record that names another
	 * branch is skipped all the same */
	const json_t *found = NULL;
	size_t i;
	const json_t *pr;
	json_array_foreach(list, i, pr)
	{
		const char *ref = json_string_value(
		    json_object_get(json_object_get(pr, "head"), "ref"));
		if (!ref || !strcmp(ref, c->head)) {
			found = pr;
			break;
		}
	}
	if (found) {
		r = pull_result(found, false, out, err);
	} else {
		wr_error_set(err, 0, "none is open");
		r = -ENOENT;
	}
out:
	if (r < 0)
		wr_error_wrap(err, "one exists already; looking it up");
	json_decref(list);
	response_reset(&resp);
	return r;
}

static int open_pull(struct forge_call *c, const char *title, const char *body,
		     json_t **out, struct wr_error **err)
{
	json_t *doc = json_pack("{s:s, s:s, s:s, s:s, s:b}", "title", title,
				"head", c->head, "base", c->base, "body",
				body ? body : "", "maintainer_can_modify", 0);
	_cleanup_free_ char *payload =
	    doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	json_decref(doc);
	_cleanup_free_ char *url =
	    wr_asprintf("%s/repos/%s/pulls", c->api_url, c->repo);
	if (!payload || !url)
		return wr_error_set(err, ENOMEM, "pull request");

	struct response resp = {.body = CAPBUF_INIT(c->max_response)};
	int r = request(c, url, payload, &resp, err);
	if (r < 0)
		goto out;
	if (resp.status >= 200 && resp.status <= 299) {
		json_t *pr = parse_body(&resp, err);
		r = pr ? pull_result(pr, true, out, err) : -EBADMSG;
		json_decref(pr);
	} else if (resp.status == 422 && already_exists(&resp.body)) {
		r = find_open(c, out, err);
	} else {
		bool retryable = false;
		r = http_error(c, resp.status, &resp.body, &retryable, err);
	}
out:
	response_reset(&resp);
	return r;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_code;

static void curl_init(void)
{
	curl_init_code = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int forge_open_pull_request(const struct forge_config *f,
			    const char *head_branch, const char *title,
			    const char *body, json_t **out,
			    struct wr_error **err)
{
	int r = forge_config_check(f, err);
	if (r == 0)
		r = check_pull(head_branch, title, body, err);
	if (r < 0)
		return r;
	pthread_once(&curl_once, curl_init);
	if (curl_init_code != CURLE_OK)
		return wr_error_set(err, 0, "forge: libcurl: %s",
				    curl_easy_strerror(curl_init_code));

	struct forge_call c = {0};
	json_t *result = NULL;
	r = call_init(&c, f, head_branch, err);
	if (r == 0)
		r = open_pull(&c, title, body, &result, err);
	if (r < 0)
		wr_error_wrap(err, "GitHub API at %s: pull request %s %s -> %s",
			      c.api_url ? c.api_url : shown(f->api_url),
			      f->repo, head_branch, c.base ? c.base : "?");
	call_clear(&c);
	if (r == 0)
		*out = result;
	return r;
}

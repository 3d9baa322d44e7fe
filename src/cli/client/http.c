/* http.c - requests to the Warren server (libcurl easy API).
 *
 * Every request carries the bearer token, has a connect timeout and (except
 * event streams) an overall timeout, and reads at most CLIENT_RESPONSE_MAX
 * bytes. An API error body ({"error": {"code", "message"}}) becomes
 * "message (HTTP 404 not_found)"; a server that cannot be reached becomes
 * -EHOSTUNREACH with a hint, so the verb can exit 3. */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/capbuf.h"
#include "util/cleanup.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define CLIENT_RESPONSE_MAX (64u << 20) /* events?format=json can be big */
#define CLIENT_ERROR_BODY_MAX (64u << 10)
#define CLIENT_TOKEN_MAX 4096
#define CONNECT_TIMEOUT_MS 5000L
#define REQUEST_TIMEOUT_MS 60000L
/* The server sends ": keepalive" every 15 s: three missed ones mean the
 * stream is dead even if the TCP connection does not say so. */
#define STREAM_STALL_S 45L

char *client_escape(const char *text)
{
	char *escaped = curl_easy_escape(NULL, text, 0);
	if (!escaped)
		return NULL;
	char *copy = wr_strdup(escaped);
	curl_free(escaped);
	return copy;
}

int client_query_add(char **query, const char *key, const char *value)
{
	_cleanup_free_ char *escaped = client_escape(value);
	if (!escaped)
		return -ENOMEM;
	char *grown = wr_asprintf("%s%c%s=%s", *query ? *query : "",
				  *query ? '&' : '?', key, escaped);
	if (!grown)
		return -ENOMEM;
	free(*query);
	*query = grown;
	return 0;
}

/* --- configuration: which server, which token ------------------------ */

static int resolve_server(struct client *c, struct wr_error **err)
{
	const char *text = c->server_opt;
	const char *origin = "--server";
	if (!text) {
		text = getenv("WARREN_SERVER");
		origin = "$WARREN_SERVER";
	}
	if (!text || !*text) {
		text = CLIENT_DEFAULT_SERVER;
		origin = "default server";
	}
	for (const char *p = text; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return wr_error_input(err, 0, "%s '%s': not a URL",
					      origin, text);
	/* "127.0.0.1:7777", as `warren serve --listen` takes it */
	char *url = strstr(text, "://") ? wr_strdup(text)
					: wr_asprintf("http://%s", text);
	if (!url)
		return wr_error_set(err, ENOMEM, "server URL");
	if (strncasecmp(url, "http://", 7) && strncasecmp(url, "https://", 8)) {
		free(url);
		return wr_error_input(err, 0,
				      "%s '%s': not an http:// or https:// URL",
				      origin, text);
	}
	size_t len = strlen(url);
	while (len > 0 && url[len - 1] == '/')
		url[--len] = '\0';
	c->server = url;
	return 0;
}

/* Reads a token file: one line, surrounding whitespace dropped. -ENOENT
 * (without *err) if it does not exist. */
static int read_token_file(const char *path, char **out, struct wr_error **err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT)
			return -ENOENT;
		return wr_error_input(err, errno, "token file %s", path);
	}
	char buf[CLIENT_TOKEN_MAX + 1];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return wr_error_input(err, errno, "token file %s",
					      path);
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == sizeof(buf))
			return wr_error_input(err, 0,
					      "token file %s: longer than %d "
					      "bytes",
					      path, CLIENT_TOKEN_MAX);
	}
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
			   buf[len - 1] == ' ' || buf[len - 1] == '\t'))
		len--;
	size_t start = 0;
	while (start < len && (buf[start] == ' ' || buf[start] == '\t'))
		start++;
	char *token = wr_strndup(buf + start, len - start);
	explicit_bzero(buf, sizeof(buf));
	if (!token)
		return wr_error_set(err, ENOMEM, "token file %s", path);
	*out = token;
	return 0;
}

static int resolve_token(struct client *c, struct wr_error **err)
{
	const char *origin = "--token";
	const char *text = c->token_opt;
	if (!text) {
		text = getenv("WARREN_TOKEN");
		origin = "$WARREN_TOKEN";
	}
	if (text && *text) {
		c->token = wr_strdup(text);
		if (!c->token)
			return wr_error_set(err, ENOMEM, "token");
	} else {
		/* $WARREN_HOME/admin.token, else ./.warren/admin.token */
		const char *home = getenv("WARREN_HOME");
		const char *paths[2] = {NULL, ".warren/admin.token"};
		_cleanup_free_ char *home_path = NULL;
		if (home && *home) {
			home_path = wr_asprintf("%s/admin.token", home);
			if (!home_path)
				return wr_error_set(err, ENOMEM, "token");
			paths[0] = home_path;
		}
		for (size_t i = 0; i < ARRAY_SIZE(paths) && !c->token; i++) {
			if (!paths[i])
				continue;
			int r = read_token_file(paths[i], &c->token, err);
			if (r == -ENOENT)
				continue;
			if (r < 0)
				return r;
			c->token_file = wr_strdup(paths[i]);
			if (!c->token_file)
				return wr_error_set(err, ENOMEM, "token");
			origin = c->token_file;
		}
		if (!c->token)
			return 0; /* the server will say 401; we add a hint */
	}
	/* It goes into a header line: printable ASCII only. */
	if (!*c->token)
		return wr_error_input(err, 0, "the token from %s is empty",
				      origin);
	for (const char *p = c->token; *p; p++)
		if (*p <= ' ' || *p >= 0x7f)
			return wr_error_input(err, 0,
					      "the token from %s has "
					      "characters a token cannot have",
					      origin);
	return 0;
}

static int client_setup(struct client *c, struct wr_error **err)
{
	if (c->curl)
		return 0;
	int r = resolve_server(c, err);
	if (r < 0)
		return r;
	r = resolve_token(c, err);
	if (r < 0)
		return r;
	c->curl = curl_easy_init();
	if (!c->curl)
		return wr_error_set(err, ENOMEM, "cannot initialise libcurl");
	return 0;
}

/* --- requests ---------------------------------------------------------- */

struct request {
	struct curl_slist *headers;
	char *url;
	char *no_proxy;
	char errbuf[CURL_ERROR_SIZE];
};

static void request_clear(struct request *rq)
{
	curl_slist_free_all(rq->headers);
	free(rq->url);
	free(rq->no_proxy);
}

static int add_header(struct request *rq, const char *line)
{
	struct curl_slist *l = curl_slist_append(rq->headers, line);
	if (!l)
		return -ENOMEM;
	rq->headers = l;
	return 0;
}

/* Resets the handle and sets what every request has. */
static int request_prepare(struct client *c, struct request *rq,
			   const char *path, const char *accept,
			   struct wr_error **err)
{
	CURL *curl = c->curl;
	rq->url = wr_asprintf("%s%s%s", c->server, CLIENT_API_PREFIX, path);
	if (!rq->url)
		return wr_error_set(err, ENOMEM, "request");
	if (c->token) {
		char *auth = wr_asprintf("Authorization: Bearer %s", c->token);
		if (!auth)
			return wr_error_set(err, ENOMEM, "request");
		int r = add_header(rq, auth);
		explicit_bzero(auth, strlen(auth));
		free(auth);
		if (r < 0)
			return wr_error_set(err, ENOMEM, "request");
	}
	if (add_header(rq, accept) < 0)
		return wr_error_set(err, ENOMEM, "request");
	/* A proxy from the environment must not capture a local server. */
	const char *env_no_proxy = getenv("no_proxy");
	if (!env_no_proxy || !*env_no_proxy)
		env_no_proxy = getenv("NO_PROXY");
	rq->no_proxy = wr_asprintf("localhost,127.0.0.1,::1%s%s",
				   env_no_proxy && *env_no_proxy ? "," : "",
				   env_no_proxy ? env_no_proxy : "");
	if (!rq->no_proxy)
		return wr_error_set(err, ENOMEM, "request");

	curl_easy_reset(curl); /* keeps the connection cache */
	rq->errbuf[0] = '\0';
	if (curl_easy_setopt(curl, CURLOPT_URL, rq->url) != CURLE_OK)
		return wr_error_input(err, 0, "bad server URL '%s'", c->server);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, rq->errbuf);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, rq->headers);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "warren-client");
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(curl, CURLOPT_NOPROXY, rq->no_proxy);
	return 0;
}

static const char *curl_message(struct request *rq, CURLcode code)
{
	return rq->errbuf[0] ? rq->errbuf : curl_easy_strerror(code);
}

/* A transfer that failed below HTTP. */
static int transport_error(struct client *c, struct request *rq, CURLcode code,
			   struct wr_error **err)
{
	curl_off_t connect_us = 0;
	curl_easy_getinfo(c->curl, CURLINFO_CONNECT_TIME_T, &connect_us);
	switch (code) {
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
		return wr_error_input(err, 0, "bad server URL '%s': %s",
				      c->server, curl_message(rq, code));
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY: break;
	default:
		if (code == CURLE_OPERATION_TIMEDOUT && connect_us == 0)
			break; /* timed out connecting */
		wr_error_set(err, 0,
			     "lost the connection to the Warren server at "
			     "%s: %s",
			     c->server, curl_message(rq, code));
		return -ECONNRESET;
	}
	wr_error_set(err, 0,
		     "cannot reach the Warren server at %s: %s; is `warren "
		     "serve` running?",
		     c->server, curl_message(rq, code));
	return -EHOSTUNREACH;
}

/* A response other than the 2xx the route promises. */
static int api_error(struct client *c, long status, const char *body,
		     size_t len, struct wr_error **err)
{
	json_t *doc = body && len ? json_loadb(body, len, 0, NULL) : NULL;
	json_t *e = json_object_get(doc, "error");
	const char *code = client_json_str(e, "code");
	const char *message = client_json_str(e, "message");
	_cleanup_free_ char *clean = NULL;
	if (message) {
		clean = client_clean(message);
		/* Which token was refused, or that there was none. */
		_cleanup_free_ char *hint = NULL;
		if (status == 401 && !c->token)
			hint = wr_strdup("; no token found: use --token, "
					 "$WARREN_TOKEN or "
					 "$WARREN_HOME/admin.token "
					 "(WARREN_HOME defaults to ./.warren)");
		else if (status == 401)
			hint = wr_asprintf("; the token came from %s",
					   c->token_file  ? c->token_file
					   : c->token_opt ? "--token"
							  : "$WARREN_TOKEN");
		wr_error_set(err, 0, "%s (HTTP %ld %s)%s",
			     clean ? clean : message, status,
			     code ? code : "error", hint ? hint : "");
	} else {
		/* not the API's error format: a proxy, another program */
		char excerpt[201] = "";
		if (body && len) {
			size_t n = strcspn(body, "\r\n");
			if (n > 200)
				n = 200;
			memcpy(excerpt, body, n);
			excerpt[n] = '\0';
			clean = client_clean(excerpt);
		}
		wr_error_set(err, 0, "unexpected HTTP %ld response from %s%s%s",
			     status, c->server, clean && *clean ? ": " : "",
			     clean ? clean : "");
	}
	json_decref(doc);
	return -EPROTO;
}

/* One request with the Accept header line accept: 0 and the body of a
 * 2xx answer in *response (the caller clears it), or an error return. */
static int perform(struct client *c, const char *method, const char *path,
		   json_t *body, const char *accept, struct capbuf *response,
		   long *status_out, struct wr_error **err)
{
	int r = client_setup(c, err);
	if (r < 0)
		return r;
	struct request rq = {0};
	char *payload = NULL;

	r = request_prepare(c, &rq, path, accept, err);
	if (r < 0)
		goto out;
	/* PUT and PATCH: a body as POST's, under their own method */
	bool put = !strcmp(method, "PUT") || !strcmp(method, "PATCH");
	if (!strcmp(method, "POST") || put) {
		payload =
		    body ? json_dumps(body, JSON_COMPACT) : wr_strdup("{}");
		/* "Expect:" off: no 100-continue round trip for big prompts */
		if (!payload ||
		    add_header(&rq, "Content-Type: application/json") < 0 ||
		    add_header(&rq, "Expect:") < 0) {
			r = wr_error_set(err, ENOMEM, "request");
			goto out;
		}
		curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, rq.headers);
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, payload);
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)strlen(payload));
		if (put)
			curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
	} else if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
	}
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, capbuf_curl_write);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, response);

	CURLcode code = curl_easy_perform(c->curl);
	if (code != CURLE_OK) {
		if (response->overflow)
			r = wr_error_set(err, 0,
					 "the server's response is larger "
					 "than %u MiB",
					 CLIENT_RESPONSE_MAX >> 20);
		else
			r = transport_error(c, &rq, code, err);
		goto out;
	}
	long status = 0;
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (status < 200 || status > 299) {
		r = api_error(c, status, response->data, response->len, err);
		goto out;
	}
	*status_out = status;
	r = 0;
out:
	/* a body may carry a secret's value (warren secret set) */
	if (payload)
		explicit_bzero(payload, strlen(payload));
	free(payload);
	request_clear(&rq);
	return r;
}

static int request(struct client *c, const char *method, const char *path,
		   json_t *body, json_t **out, struct wr_error **err)
{
	struct capbuf response = CAPBUF_INIT(CLIENT_RESPONSE_MAX);
	json_t *doc = NULL;
	long status = 0;
	int r = perform(c, method, path, body, "Accept: application/json",
			&response, &status, err);
	if (r < 0)
		goto out;
	json_error_t jerr;
	doc = response.len ? json_loadb(response.data, response.len, 0, &jerr)
			   : NULL;
	if (!doc) {
		wr_error_set(err, 0,
			     "bad response from the server (HTTP %ld): %s",
			     status, response.len ? jerr.text : "empty body");
		r = -EPROTO;
		goto out;
	}
	if (out)
		*out = TAKE_PTR(doc);
	r = 0;
out:
	json_decref(doc);
	capbuf_free(&response);
	return r;
}

int client_get_bytes(struct client *c, const char *path, const char *accept,
		     char **out, size_t *len_out, struct wr_error **err)
{
	struct capbuf response = CAPBUF_INIT(CLIENT_RESPONSE_MAX);
	long status = 0;
	_cleanup_free_ char *header = wr_asprintf("Accept: %s", accept);
	if (!header)
		return wr_error_set(err, ENOMEM, "request");
	int r = perform(c, "GET", path, NULL, header, &response, &status, err);
	if (r < 0) {
		capbuf_free(&response);
		return r;
	}
	/* an empty body (an empty diff) is an empty string */
	size_t len = response.len;
	char *data = capbuf_take(&response);
	if (!data)
		return wr_error_set(err, ENOMEM, "request");
	*out = data;
	*len_out = len;
	return 0;
}

int client_get(struct client *c, const char *path, json_t **out,
	       struct wr_error **err)
{
	return request(c, "GET", path, NULL, out, err);
}

int client_post(struct client *c, const char *path, json_t *body, json_t **out,
		struct wr_error **err)
{
	return request(c, "POST", path, body, out, err);
}

int client_put(struct client *c, const char *path, json_t *body, json_t **out,
	       struct wr_error **err)
{
	return request(c, "PUT", path, body, out, err);
}

int client_patch(struct client *c, const char *path, json_t *body,
		 json_t **out, struct wr_error **err)
{
	return request(c, "PATCH", path, body, out, err);
}

int client_delete(struct client *c, const char *path, json_t **out,
		  struct wr_error **err)
{
	return request(c, "DELETE", path, NULL, out, err);
}

/* --- event streams ----------------------------------------------------- */

enum stream_mode { STREAM_UNKNOWN, STREAM_EVENTS, STREAM_OTHER };

struct stream {
	CURL *curl;
	enum stream_mode mode;
	struct capbuf other; /* the body of an error response */
	int (*on_data)(void *ctx, const char *buf, size_t len);
	void *ctx;
	int data_ret; /* what on_data returned when it stopped us */
};

static bool is_event_stream(CURL *curl)
{
	long status = 0;
	char *type = NULL;
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
	return status == 200 && type &&
	       !strncasecmp(type, "text/event-stream", 17);
}

static size_t stream_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct stream *s = ud;
	size_t n = size * nmemb;
	if (s->mode == STREAM_UNKNOWN)
		s->mode =
		    is_event_stream(s->curl) ? STREAM_EVENTS : STREAM_OTHER;
	if (s->mode == STREAM_OTHER) {
		/* keep the start of an error body; the rest is not needed */
		(void)capbuf_append(&s->other, ptr, n);
		return n;
	}
	int r = s->on_data(s->ctx, ptr, n);
	if (r != 0) {
		s->data_ret = r;
		return 0; /* stops the transfer: CURLE_WRITE_ERROR */
	}
	return n;
}

int client_stream(struct client *c, const char *path, const char *last_event_id,
		  int (*on_data)(void *ctx, const char *buf, size_t len),
		  void *ctx, struct wr_error **err)
{
	int r = client_setup(c, err);
	if (r < 0)
		return r;
	struct request rq = {0};
	struct stream s = {
	    .curl = c->curl,
	    .other = CAPBUF_INIT(CLIENT_ERROR_BODY_MAX),
	    .on_data = on_data,
	    .ctx = ctx,
	};
	r = request_prepare(c, &rq, path, "Accept: text/event-stream", err);
	if (r < 0)
		goto out;
	if (last_event_id && *last_event_id) {
		_cleanup_free_ char *h =
		    wr_asprintf("Last-Event-ID: %s", last_event_id);
		if (!h || add_header(&rq, h) < 0) {
			r = wr_error_set(err, ENOMEM, "request");
			goto out;
		}
		curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, rq.headers);
	}
	/* No overall timeout: a stream lasts as long as the session. */
	curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_TIME, STREAM_STALL_S);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, stream_write);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &s);

	CURLcode code = curl_easy_perform(c->curl);
	if (s.data_ret) {
		r = s.data_ret; /* on_data has set *err */
		goto out;
	}
	long status = 0;
	curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	if (code != CURLE_OK && (status == 0 || s.mode == STREAM_EVENTS)) {
		r = transport_error(c, &rq, code, err);
		goto out;
	}
	if (status != 200) {
		r = api_error(c, status, s.other.data, s.other.len, err);
		goto out;
	}
	if (s.mode == STREAM_OTHER || !is_event_stream(c->curl)) {
		char *type = NULL;
		curl_easy_getinfo(c->curl, CURLINFO_CONTENT_TYPE, &type);
		wr_error_set(err, 0,
			     "the server did not send an event stream "
			     "(Content-Type: %s)",
			     type ? type : "none");
		r = -EPROTO;
		goto out;
	}
	r = code == CURLE_OK ? 0 : transport_error(c, &rq, code, err);
out:
	capbuf_free(&s.other);
	request_clear(&rq);
	return r;
}

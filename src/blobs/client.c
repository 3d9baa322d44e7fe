/* client.c - the distribution API over libcurl (blobs.h).
 *
 * One easy handle per client, reset between requests, so connections to
 * the registry are reused. Each call is one request, or two when the
 * registry answers 401 with a Bearer challenge: a token is fetched from
 * the challenge's realm (with the basic credentials when configured),
 * cached for its scope, and the request is sent once more. Basic
 * credentials go with every request that has no token for its scope
 * (registries behind htpasswd want them; token registries ignore them).
 * The password is read from its file at each call.
 *
 * Bodies: a blob goes up from a descriptor as one chunked PATCH, its
 * sha256 taken as it is read, then a PUT with ?digest=; a blob comes down
 * into a descriptor, hashed and counted as it is written. What is read
 * into memory (a manifest, a tag list, a token, an error body) is capped.
 *
 * Upload locations the registry gives must stay on the registry's origin:
 * the credentials go with them. */
#include "blobs/internal.h"

#include "util/alloc.h"
#include "util/capbuf.h"
#include "util/cleanup.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_MS 15000L
#define REQUEST_TIMEOUT_MS (60L * 1000) /* a request without a blob */
#define LOW_SPEED_TIME_S 60L		/* a blob: below 1 KiB/s for it */
#define TOKEN_BODY_MAX (64u << 10)

struct blobs_client {
	struct blobs_config cfg;
	CURL *curl;
	struct blobs_token_cache tokens;
	char *no_proxy;
	char scope_pull[BLOBS_REPOSITORY_MAX + 32];
	char scope_push[BLOBS_REPOSITORY_MAX + 32];
	char scope_delete[BLOBS_REPOSITORY_MAX + 32];
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_code;

static void curl_init(void)
{
	curl_init_code = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- one request ------------------------------------------------------- */

enum scope_kind { SCOPE_PULL, SCOPE_PUSH, SCOPE_DELETE };

struct request {
	const char *method;
	const char *url;
	enum scope_kind scope;
	const char *what; /* "push blob", for messages */
	const char *accept;
	const char *content_type;
	/* an in-memory body, or one streamed from body_fd (-1: none) */
	const char *body;
	size_t body_len;
	int body_fd;
	off_t body_start; /* -1: not seekable, no second try */
	crypto_hash_sha256_state body_hash;
	uint64_t body_count;
	bool body_failed; /* a read error: errno in body_errno */
	int body_errno;
	/* the answer's body into out_fd when 2xx, else into resp.body */
	int out_fd;
	uint64_t out_max; /* 0: no cap */
	crypto_hash_sha256_state out_hash;
	uint64_t out_count;
	bool out_too_big;
	int out_errno;
	bool follow;	 /* redirects (a blob's GET, to where it is stored) */
	size_t body_max; /* the answer's in-memory cap */
};

struct response {
	long status;
	struct capbuf body;
	char *location;
	char *next;		       /* a Link header's rel="next" URL */
	char digest[BLOBS_DIGEST_MAX]; /* Docker-Content-Digest, if valid */
	curl_off_t length;	       /* -1: unknown */
	struct blobs_challenge challenge;
	bool has_challenge;
};

static void response_clear(struct response *resp)
{
	capbuf_free(&resp->body);
	free(resp->location);
	free(resp->next);
	memset(resp, 0, sizeof(*resp));
}

static size_t read_body(char *buf, size_t size, size_t nmemb, void *ud)
{
	struct request *rq = ud;
	size_t want = size * nmemb;
	if (rq->body_fd < 0) {
		size_t left = rq->body_len - rq->body_count;
		size_t n = left < want ? left : want;
		memcpy(buf, rq->body + rq->body_count, n);
		rq->body_count += n;
		return n;
	}
	for (;;) {
		ssize_t n = read(rq->body_fd, buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rq->body_failed = true;
			rq->body_errno = errno;
			return CURL_READFUNC_ABORT;
		}
		crypto_hash_sha256_update(&rq->body_hash, (unsigned char *)buf,
					  (size_t)n);
		rq->body_count += (size_t)n;
		return (size_t)n;
	}
}

struct sink {
	struct request *rq;
	struct response *resp;
	CURL *curl;
};

static size_t write_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
	struct sink *s = ud;
	struct request *rq = s->rq;
	size_t n = size * nmemb;
	long status = 0;
	curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
	if (rq->out_fd < 0 || status < 200 || status > 299)
		return capbuf_curl_write(ptr, size, nmemb, &s->resp->body);
	if (rq->out_max && rq->out_count + n > rq->out_max) {
		rq->out_too_big = true;
		return 0;
	}
	crypto_hash_sha256_update(&rq->out_hash, (unsigned char *)ptr, n);
	for (size_t off = 0; off < n;) {
		ssize_t w = write(rq->out_fd, ptr + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rq->out_errno = errno;
			return 0;
		}
		off += (size_t)w;
		rq->out_count += (size_t)w;
	}
	return n;
}

static int add_header(struct curl_slist **list, const char *fmt,
		      const char *value)
{
	char *line = wr_asprintf(fmt, value);
	if (!line)
		return -ENOMEM;
	struct curl_slist *l = curl_slist_append(*list, line);
	explicit_bzero(line, strlen(line)); /* maybe a token */
	free(line);
	if (!l)
		return -ENOMEM;
	*list = l;
	return 0;
}

static void headers_free(struct curl_slist *h)
{
	for (struct curl_slist *l = h; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(h);
}

static const char *header_value(CURL *curl, const char *name)
{
	struct curl_header *h = NULL;
	if (curl_easy_header(curl, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK)
		return NULL;
	return h->value;
}

/* The answer's challenge: its first Bearer one, else its first one. */
static void read_challenge(CURL *curl, struct response *resp)
{
	struct curl_header *h = NULL;
	for (size_t i = 0;; i++) {
		if (curl_easy_header(curl, "WWW-Authenticate", i, CURLH_HEADER,
				     -1, &h) != CURLHE_OK)
			break;
		struct blobs_challenge ch;
		if (blobs_challenge_parse(h->value, strlen(h->value), &ch) < 0)
			continue;
		if (!resp->has_challenge || ch.scheme == BLOBS_AUTH_BEARER)
			resp->challenge = ch;
		resp->has_challenge = true;
		if (ch.scheme == BLOBS_AUTH_BEARER)
			break;
		if (h->amount <= i + 1)
			break;
	}
}

/* The URL of a Link header's '<URL>; rel="next"' (RFC 8288; the
 * distribution API's pagination) into *next, or none. */
static int link_next(const char *link, char **next)
{
	const char *open = strchr(link, '<');
	const char *close = open ? strchr(open, '>') : NULL;
	if (!close || !strstr(close, "rel=\"next\""))
		return 0;
	*next = wr_strndup(open + 1, (size_t)(close - open - 1));
	return *next ? 0 : -ENOMEM;
}

/* The message of a transport failure; no errno text. */
static int transport_error(const struct blobs_client *c,
			   const struct request *rq, CURLcode code,
			   const char *errbuf, struct wr_error **err)
{
	const char *why = errbuf[0] ? errbuf : curl_easy_strerror(code);
	if (rq->body_failed) {
		wr_error_set(err, rq->body_errno, "registry %s: %s: read",
			     c->cfg.registry, rq->what);
		return -rq->body_errno;
	}
	if (rq->out_errno) {
		wr_error_set(err, rq->out_errno, "registry %s: %s: write",
			     c->cfg.registry, rq->what);
		return -rq->out_errno;
	}
	if (rq->out_too_big) {
		wr_error_set(err, 0, "registry %s: %s: larger than %llu bytes",
			     c->cfg.registry, rq->what,
			     (unsigned long long)rq->out_max);
		return -EFBIG;
	}
	int r = code == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
		: code == CURLE_WRITE_ERROR	 ? -EFBIG
		: code == CURLE_OUT_OF_MEMORY	 ? -ENOMEM
						 : -ECONNREFUSED;
	if (code == CURLE_WRITE_ERROR)
		wr_error_set(err, 0,
			     "registry %s: %s: the answer is larger than %zu "
			     "bytes",
			     c->cfg.registry, rq->what, rq->body_max);
	else
		wr_error_set(err, 0, "registry %s: %s: %s", c->cfg.registry,
			     rq->what, why);
	return r;
}

/* One attempt: 0 with resp filled for any HTTP answer. token: a bearer
 * token, else password: the basic credentials, else none. */
static int attempt(struct blobs_client *c, struct request *rq,
		   const char *token, const char *password,
		   struct response *resp, struct wr_error **err)
{
	CURL *curl = c->curl;
	struct curl_slist *headers = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	int r = 0;
	*resp =
	    (struct response){.body = CAPBUF_INIT(rq->body_max), .length = -1};
	crypto_hash_sha256_init(&rq->body_hash);
	crypto_hash_sha256_init(&rq->out_hash);
	rq->body_count = rq->out_count = 0;
	rq->out_too_big = rq->body_failed = false;
	rq->out_errno = 0;
	if (rq->accept)
		r = add_header(&headers, "Accept: %s", rq->accept);
	if (r == 0 && rq->content_type)
		r = add_header(&headers, "Content-Type: %s", rq->content_type);
	if (r == 0) /* no 100-continue round trip */
		r = add_header(&headers, "Expect:%s", "");
	if (r == 0 && token)
		r = add_header(&headers, "Authorization: Bearer %s", token);
	if (r < 0) {
		headers_free(headers);
		return wr_error_set(err, ENOMEM, "registry request");
	}
	curl_easy_reset(curl);
	curl_easy_setopt(curl, CURLOPT_URL, rq->url);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, rq->follow ? 1L : 0L);
	curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "warren");
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(curl, CURLOPT_NOPROXY, c->no_proxy);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	if (rq->body_fd >= 0 || rq->out_fd >= 0) {
		/* a blob takes as long as it takes while it moves */
		curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1024L);
		curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME,
				 LOW_SPEED_TIME_S);
	} else {
		curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS);
	}
	if (!token && password) {
		curl_easy_setopt(curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(curl, CURLOPT_USERNAME, c->cfg.username);
		curl_easy_setopt(curl, CURLOPT_PASSWORD, password);
	}
	if (!strcmp(rq->method, "HEAD")) {
		curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(rq->method, "GET")) {
		curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, rq->method);
		if (rq->body || rq->body_fd >= 0) {
			curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
			curl_easy_setopt(curl, CURLOPT_READFUNCTION, read_body);
			curl_easy_setopt(curl, CURLOPT_READDATA, rq);
			/* streamed: chunked; in memory: its length */
			if (rq->body_fd < 0)
				curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE,
						 (curl_off_t)rq->body_len);
		} else if (strcmp(rq->method, "DELETE")) {
			/* an empty body, said with Content-Length: 0 */
			curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
			curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
		}
	}
	struct sink sink = {.rq = rq, .resp = resp, .curl = curl};
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
	CURLcode code = curl_easy_perform(curl);
	headers_free(headers);
	if (code != CURLE_OK) {
		r = transport_error(c, rq, code, errbuf, err);
		curl_easy_setopt(curl, CURLOPT_PASSWORD, "");
		return r;
	}
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &resp->status);
	curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
			  &resp->length);
	const char *loc = header_value(curl, "Location");
	if (loc) {
		resp->location = wr_strdup(loc);
		if (!resp->location)
			r = wr_error_set(err, ENOMEM, "registry request");
	}
	const char *link = header_value(curl, "Link");
	if (link && r == 0 && link_next(link, &resp->next) < 0)
		r = wr_error_set(err, ENOMEM, "registry request");
	const char *dg = header_value(curl, "Docker-Content-Digest");
	if (dg && blobs_digest_valid(dg))
		strcpy(resp->digest, dg);
	if (resp->status == 401)
		read_challenge(curl, resp);
	/* the password does not stay in the handle between requests */
	curl_easy_setopt(curl, CURLOPT_PASSWORD, "");
	return r;
}

static const char *scope_of(const struct blobs_client *c, enum scope_kind k)
{
	return k == SCOPE_PULL	 ? c->scope_pull
	       : k == SCOPE_PUSH ? c->scope_push
				 : c->scope_delete;
}

/* "registry URL: WHAT: HTTP N[ (CODE: message)]" */
static int status_error(const struct blobs_client *c, const char *what,
			const struct response *resp, struct wr_error **err)
{
	_cleanup_free_ char *text =
	    blobs_error_body_text(resp->body.data, resp->body.len);
	int r = resp->status == 404   ? -ENOENT
		: resp->status == 401 ? -EACCES
		: resp->status == 403 ? -EPERM
		: resp->status == 405 ? -EOPNOTSUPP
		: resp->status >= 500 ? -EIO
				      : -EPROTO;
	wr_error_set(err, 0, "registry %s: %s: HTTP %ld%s%s%s", c->cfg.registry,
		     what, resp->status, text ? " (" : "", text ? text : "",
		     text ? ")" : "");
	return r;
}

/* A token for the challenge, from its realm; cached for its scope. */
static int fetch_token(struct blobs_client *c, const struct request *rq,
		       const struct blobs_challenge *ch, const char *password,
		       const char **token, struct wr_error **err)
{
	const char *scope = ch->scope[0] ? ch->scope : scope_of(c, rq->scope);
	if (strncasecmp(ch->realm, "https://", 8) &&
	    (strncasecmp(ch->realm, "http://", 7) ||
	     !strncasecmp(c->cfg.registry, "https://", 8))) {
		wr_error_set(err, 0,
			     "registry %s: %s: the token realm '%s' is not "
			     "http(s), or plain http for an https registry",
			     c->cfg.registry, rq->what, ch->realm);
		return -EPROTO;
	}
	CURLU *u = curl_url();
	char *url = NULL;
	_cleanup_free_ char *q_service = wr_asprintf("service=%s", ch->service);
	_cleanup_free_ char *q_scope = wr_asprintf("scope=%s", scope);
	_cleanup_free_ char *what =
	    wr_asprintf("%s: token from %s", rq->what, ch->realm);
	int r = 0;
	if (!u || curl_url_set(u, CURLUPART_URL, ch->realm, 0) != CURLUE_OK) {
		r = -EPROTO;
		wr_error_set(err, 0, "registry %s: %s: bad token realm '%s'",
			     c->cfg.registry, rq->what, ch->realm);
		goto out;
	}
	if (!what || !q_service || !q_scope ||
	    (ch->service[0] &&
	     curl_url_set(u, CURLUPART_QUERY, q_service,
			  CURLU_APPENDQUERY | CURLU_URLENCODE) != CURLUE_OK) ||
	    curl_url_set(u, CURLUPART_QUERY, q_scope,
			 CURLU_APPENDQUERY | CURLU_URLENCODE) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK) {
		r = wr_error_set(err, ENOMEM, "registry token request");
		goto out;
	}
	struct request tq = {.method = "GET",
			     .url = url,
			     .what = what,
			     .accept = "application/json",
			     .body_fd = -1,
			     .out_fd = -1,
			     .body_max = TOKEN_BODY_MAX};
	struct response resp;
	r = attempt(c, &tq, NULL, password, &resp, err);
	if (r == 0 && resp.status != 200)
		r = status_error(c, what, &resp, err);
	char *tok = NULL;
	int64_t expires_in = 0;
	if (r == 0 && blobs_token_parse(resp.body.data, resp.body.len, &tok,
					&expires_in) < 0) {
		wr_error_set(err, 0,
			     "registry %s: %s: the answer holds no token",
			     c->cfg.registry, what);
		r = -EPROTO;
	}
	if (resp.body.data)
		explicit_bzero(resp.body.data, resp.body.len);
	response_clear(&resp);
	if (r == 0) {
		/* kept under the key the next request looks up (its kind's
		 * scope), not the challenge's text: the registry lists a
		 * scope's actions in any order ("pull,push" or "push,pull") */
		*token = blobs_token_store(&c->tokens, scope_of(c, rq->scope),
					   tok, expires_in);
		if (!*token)
			r = wr_error_set(err, ENOMEM, "registry token");
	}
out:
	curl_free(url);
	curl_url_cleanup(u);
	return r;
}

/* The request, with the auth flow: one more try after a Bearer
 * challenge (when its body can be sent again). 0 with resp for any HTTP
 * answer but a 401 that a token did not cure. */
static int call(struct blobs_client *c, struct request *rq,
		struct response *resp, struct wr_error **err)
{
	_cleanup_free_ char *password = NULL;
	int r = 0;
	if (c->cfg.username &&
	    (r = blobs_config_password(&c->cfg, &password, err)) < 0)
		return wr_error_wrap(err, "registry %s: %s", c->cfg.registry,
				     rq->what);
	const char *token =
	    blobs_token_lookup(&c->tokens, scope_of(c, rq->scope));
	for (int tries = 0;; tries++) {
		r = attempt(c, rq, token, password, resp, err);
		if (r < 0)
			break;
		if (resp->status != 401 || tries == 1 || !resp->has_challenge ||
		    resp->challenge.scheme != BLOBS_AUTH_BEARER)
			break;
		if (rq->body_fd >= 0 &&
		    (rq->body_start < 0 ||
		     lseek(rq->body_fd, rq->body_start, SEEK_SET) < 0))
			break; /* the body cannot be sent again */
		struct blobs_challenge ch = resp->challenge;
		response_clear(resp);
		if ((r = fetch_token(c, rq, &ch, password, &token, err)) < 0)
			break;
	}
	if (password)
		explicit_bzero(password, strlen(password));
	if (r < 0) {
		response_clear(resp);
		return r;
	}
	if (resp->status == 401) {
		r = status_error(c, rq->what, resp, err);
		response_clear(resp);
	}
	return r;
}

/* ---- URLs -------------------------------------------------------------- */

/* the registry's URL + "/v2/" + the repository + "/" + rest */
static char *api_url(const struct blobs_client *c, const char *rest)
{
	return wr_asprintf("%s/v2/%s/%s", c->cfg.registry, c->cfg.repository,
			   rest);
}

/* A URL the registry gave (kind: an upload's Location, a tag list's next
 * page), maybe relative, made absolute; on the registry's origin (the
 * credentials go with it), with query (if not NULL) appended URL-encoded. */
static char *registry_url(const struct blobs_client *c, const char *kind,
			  const char *location, const char *query,
			  const char *what, struct wr_error **err)
{
	CURLU *base = curl_url(), *u = curl_url();
	char *bs = NULL, *bh = NULL, *bp = NULL, *us = NULL, *uh = NULL,
	     *up = NULL, *url = NULL, *out = NULL;
	if (!base || !u ||
	    curl_url_set(base, CURLUPART_URL, c->cfg.registry, 0) !=
		CURLUE_OK ||
	    curl_url_set(u, CURLUPART_URL, c->cfg.registry, 0) != CURLUE_OK ||
	    curl_url_set(u, CURLUPART_URL, location, 0) != CURLUE_OK ||
	    (query &&
	     curl_url_set(u, CURLUPART_QUERY, query,
			  CURLU_APPENDQUERY | CURLU_URLENCODE) != CURLUE_OK) ||
	    curl_url_get(base, CURLUPART_SCHEME, &bs, 0) != CURLUE_OK ||
	    curl_url_get(base, CURLUPART_HOST, &bh, 0) != CURLUE_OK ||
	    curl_url_get(base, CURLUPART_PORT, &bp, CURLU_DEFAULT_PORT) !=
		CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &us, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &uh, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &up, CURLU_DEFAULT_PORT) !=
		CURLUE_OK ||
	    curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK) {
		wr_error_set(err, 0, "registry %s: %s: bad %s '%s'",
			     c->cfg.registry, what, kind, location);
		goto out;
	}
	if (strcasecmp(bs, us) || strcasecmp(bh, uh) || strcmp(bp, up)) {
		wr_error_set(err, 0,
			     "registry %s: %s: the %s '%s' is not on the "
			     "registry",
			     c->cfg.registry, what, kind, location);
		goto out;
	}
	out = wr_strdup(url);
	if (!out)
		wr_error_set(err, ENOMEM, "registry");
out:
	curl_free(bs);
	curl_free(bh);
	curl_free(bp);
	curl_free(us);
	curl_free(uh);
	curl_free(up);
	curl_free(url);
	curl_url_cleanup(base);
	curl_url_cleanup(u);
	return out;
}

static void digest_format(const crypto_hash_sha256_state *st,
			  char out[BLOBS_DIGEST_MAX])
{
	crypto_hash_sha256_state copy = *st;
	unsigned char h[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_final(&copy, h);
	memcpy(out, "sha256:", 7);
	sodium_bin2hex(out + 7, BLOBS_DIGEST_MAX - 7, h, sizeof(h));
}

static void digest_of(const char *data, size_t len, char out[BLOBS_DIGEST_MAX])
{
	crypto_hash_sha256_state st;
	crypto_hash_sha256_init(&st);
	crypto_hash_sha256_update(&st, (const unsigned char *)data, len);
	digest_format(&st, out);
}

/* A request with no body, answered into memory (an error body's cap). */
static struct request request_of(const char *method, const char *url,
				 enum scope_kind scope, const char *what)
{
	return (struct request){.method = method,
				.url = url,
				.scope = scope,
				.what = what,
				.body_fd = -1,
				.body_start = -1,
				.out_fd = -1,
				.body_max = BLOBS_ERROR_BODY_MAX};
}

/* The call, answered with status want: 0 with resp, else the registry's
 * error (resp cleared). */
static int call_expect(struct blobs_client *c, struct request *rq, long want,
		       struct response *resp, struct wr_error **err)
{
	int r = call(c, rq, resp, err);
	if (r < 0 || resp->status == want)
		return r;
	r = status_error(c, rq->what, resp, err);
	response_clear(resp);
	return r;
}

/* A PUT answered 201, the Docker-Content-Digest (if given) the one we
 * computed. */
static int call_created(struct blobs_client *c, struct request *rq,
			const char *digest, struct wr_error **err)
{
	struct response resp;
	int r = call_expect(c, rq, 201, &resp, err);
	if (r < 0)
		return r;
	if (resp.digest[0] && strcmp(resp.digest, digest)) {
		wr_error_set(err, 0,
			     "registry %s: %s: the registry says its digest is "
			     "%s, not %s",
			     c->cfg.registry, rq->what, resp.digest, digest);
		r = -EBADMSG;
	}
	response_clear(&resp);
	return r;
}

/* /v2/NAME/KIND/REF and "OP REF" for messages: REF a digest for blobs,
 * a tag or a digest for manifests. */
static int ref_url(struct blobs_client *c, const char *op, const char *kind,
		   const char *ref, bool tag_ok, char **url, char **what,
		   struct wr_error **err)
{
	if (!blobs_digest_valid(ref) && !(tag_ok && blobs_tag_valid(ref))) {
		wr_error_input(err, 0, "registry %s: %s: '%s' is not %s",
			       c->cfg.registry, op, ref,
			       tag_ok ? "a tag or a sha256 digest"
				      : "sha256:HEX");
		return -EINVAL;
	}
	_cleanup_free_ char *rest = wr_asprintf("%s/%s", kind, ref);
	*url = rest ? api_url(c, rest) : NULL;
	*what = wr_asprintf("%s %s", op, ref);
	if (!*url || !*what) {
		free(*url);
		free(*what);
		return wr_error_set(err, ENOMEM, "registry");
	}
	return 0;
}

/* ---- the operations ---------------------------------------------------- */

int blobs_client_new(const struct blobs_config *cfg, struct blobs_client **out,
		     struct wr_error **err)
{
	pthread_once(&curl_once, curl_init);
	if (curl_init_code != CURLE_OK)
		return wr_error_set(err, ENOMEM, "libcurl: %s",
				    curl_easy_strerror(curl_init_code));
	if (sodium_init() < 0)
		return wr_error_set(err, EIO, "libsodium");
	struct blobs_client *c = wr_calloc(1, sizeof(*c));
	if (!c)
		return wr_error_set(err, ENOMEM, "registry client");
	c->cfg.registry = wr_strdup(cfg->registry);
	c->cfg.repository = wr_strdup(cfg->repository);
	c->cfg.username = cfg->username ? wr_strdup(cfg->username) : NULL;
	c->cfg.password_file =
	    cfg->password_file ? wr_strdup(cfg->password_file) : NULL;
	/* a proxy from the environment must not capture a local registry */
	const char *env = getenv("no_proxy");
	if (!env || !*env)
		env = getenv("NO_PROXY");
	c->no_proxy = wr_asprintf("localhost,127.0.0.1,::1%s%s",
				  env && *env ? "," : "", env ? env : "");
	c->curl = curl_easy_init();
	if (!c->cfg.registry || !c->cfg.repository ||
	    (cfg->username && !c->cfg.username) ||
	    (cfg->password_file && !c->cfg.password_file) || !c->no_proxy ||
	    !c->curl) {
		blobs_client_free(c);
		return wr_error_set(err, ENOMEM, "registry client");
	}
	snprintf(c->scope_pull, sizeof(c->scope_pull), "repository:%s:pull",
		 cfg->repository);
	snprintf(c->scope_push, sizeof(c->scope_push),
		 "repository:%s:pull,push", cfg->repository);
	snprintf(c->scope_delete, sizeof(c->scope_delete),
		 "repository:%s:delete", cfg->repository);
	*out = c;
	return 0;
}

void blobs_client_free(struct blobs_client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	blobs_token_cache_clear(&c->tokens);
	blobs_config_clear(&c->cfg);
	free(c->no_proxy);
	free(c);
}

int blobs_exists(struct blobs_client *c, const char *digest, uint64_t *size,
		 struct wr_error **err)
{
	_cleanup_free_ char *url = NULL, *what = NULL;
	int r =
	    ref_url(c, "blob exists", "blobs", digest, false, &url, &what, err);
	if (r < 0)
		return r;
	struct request rq = request_of("HEAD", url, SCOPE_PULL, what);
	struct response resp;
	if ((r = call(c, &rq, &resp, err)) < 0)
		return r;
	if (resp.status == 404)
		r = 0;
	else if (resp.status != 200)
		r = status_error(c, what, &resp, err);
	else if (resp.length < 0) {
		wr_error_set(err, 0, "registry %s: %s: no Content-Length",
			     c->cfg.registry, what);
		r = -EPROTO;
	} else {
		*size = (uint64_t)resp.length;
		r = 1;
	}
	response_clear(&resp);
	return r;
}

/* A step of an upload, answered 202 with a Location: the Location
 * (caller frees). */
static int upload_step(struct blobs_client *c, struct request *rq,
		       char **location, struct wr_error **err)
{
	struct response resp;
	int r = call_expect(c, rq, 202, &resp, err);
	if (r < 0)
		return r;
	if (!resp.location) {
		wr_error_set(err, 0, "registry %s: %s: no Location",
			     c->cfg.registry, rq->what);
		r = -EPROTO;
	}
	*location = TAKE_PTR(resp.location);
	response_clear(&resp);
	return r;
}

int blobs_push(struct blobs_client *c, int fd, char digest[BLOBS_DIGEST_MAX],
	       uint64_t *size, struct wr_error **err)
{
	_cleanup_free_ char *start_url = api_url(c, "blobs/uploads/");
	_cleanup_free_ char *location = NULL, *patch_url = NULL,
			    *put_url = NULL, *query = NULL, *what = NULL;
	if (!start_url)
		return wr_error_set(err, ENOMEM, "registry");
	struct request rq = request_of("POST", start_url, SCOPE_PUSH,
				       "push blob: start the upload");
	int r = upload_step(c, &rq, &location, err);
	if (r < 0)
		return r;
	if (!(patch_url = registry_url(c, "upload location", location, NULL,
				       rq.what, err)))
		return -EPROTO;

	/* the bytes, in one PATCH, hashed as they go; sent again after a
	 * token only if fd can seek back */
	rq = request_of("PATCH", patch_url, SCOPE_PUSH, "push blob: upload");
	rq.content_type = "application/octet-stream";
	rq.body_fd = fd;
	rq.body_start = lseek(fd, 0, SEEK_CUR);
	free(TAKE_PTR(location));
	if ((r = upload_step(c, &rq, &location, err)) < 0)
		return r;
	char dg[BLOBS_DIGEST_MAX];
	digest_format(&rq.body_hash, dg);
	uint64_t count = rq.body_count;
	query = wr_asprintf("digest=%s", dg);
	what = wr_asprintf("push blob %s: commit", dg);
	if (!query || !what)
		return wr_error_set(err, ENOMEM, "registry");
	if (!(put_url = registry_url(c, "upload location", location, query,
				     rq.what, err)))
		return -EPROTO;

	rq = request_of("PUT", put_url, SCOPE_PUSH, what);
	rq.content_type = "application/octet-stream";
	if ((r = call_created(c, &rq, dg, err)) < 0)
		return r;
	memcpy(digest, dg, BLOBS_DIGEST_MAX);
	*size = count;
	return 0;
}

int blobs_pull(struct blobs_client *c, const char *digest, int fd, uint64_t max,
	       uint64_t *written, struct wr_error **err)
{
	*written = 0;
	_cleanup_free_ char *url = NULL, *what = NULL;
	int r =
	    ref_url(c, "pull blob", "blobs", digest, false, &url, &what, err);
	if (r < 0)
		return r;
	struct request rq = request_of("GET", url, SCOPE_PULL, what);
	rq.out_fd = fd;
	rq.out_max = max;
	rq.follow = true; /* to where the registry stores it */
	struct response resp;
	r = call_expect(c, &rq, 200, &resp, err);
	*written = rq.out_count;
	if (r < 0)
		return r;
	response_clear(&resp);
	char got[BLOBS_DIGEST_MAX];
	digest_format(&rq.out_hash, got);
	if (strcmp(got, digest)) {
		wr_error_set(err, 0,
			     "registry %s: %s: the %llu bytes received have "
			     "digest %s",
			     c->cfg.registry, what,
			     (unsigned long long)rq.out_count, got);
		return -EBADMSG;
	}
	return 0;
}

int blobs_manifest_put(struct blobs_client *c, const char *ref,
		       const char *json, size_t len,
		       char digest[BLOBS_DIGEST_MAX], struct wr_error **err)
{
	_cleanup_free_ char *url = NULL, *what = NULL;
	int r = ref_url(c, "put manifest", "manifests", ref, true, &url, &what,
			err);
	if (r < 0)
		return r;
	char dg[BLOBS_DIGEST_MAX];
	digest_of(json, len, dg);
	if (blobs_digest_valid(ref) && strcmp(ref, dg)) {
		wr_error_input(err, 0,
			       "registry %s: %s: the manifest's digest is %s",
			       c->cfg.registry, what, dg);
		return -EINVAL;
	}
	if (len > BLOBS_MANIFEST_MAX) {
		wr_error_input(err, 0, "registry %s: %s: larger than %u bytes",
			       c->cfg.registry, what, BLOBS_MANIFEST_MAX);
		return -EFBIG;
	}
	struct request rq = request_of("PUT", url, SCOPE_PUSH, what);
	rq.content_type = BLOBS_MEDIA_MANIFEST;
	rq.body = json;
	rq.body_len = len;
	if ((r = call_created(c, &rq, dg, err)) == 0)
		memcpy(digest, dg, BLOBS_DIGEST_MAX);
	return r;
}

int blobs_manifest_get(struct blobs_client *c, const char *ref, char **json,
		       size_t *len, char digest[BLOBS_DIGEST_MAX],
		       struct wr_error **err)
{
	_cleanup_free_ char *url = NULL, *what = NULL;
	int r = ref_url(c, "get manifest", "manifests", ref, true, &url, &what,
			err);
	if (r < 0)
		return r;
	struct request rq = request_of("GET", url, SCOPE_PULL, what);
	rq.accept = BLOBS_MEDIA_MANIFEST;
	rq.body_max = BLOBS_MANIFEST_MAX;
	struct response resp;
	if ((r = call_expect(c, &rq, 200, &resp, err)) < 0)
		return r;
	char dg[BLOBS_DIGEST_MAX];
	digest_of(resp.body.data ? resp.body.data : "", resp.body.len, dg);
	const char *want = blobs_digest_valid(ref) ? ref : resp.digest;
	if (want[0] && strcmp(want, dg)) {
		wr_error_set(err, 0,
			     "registry %s: %s: the manifest received has "
			     "digest %s, not %s",
			     c->cfg.registry, what, dg, want);
		response_clear(&resp);
		return -EBADMSG;
	}
	size_t n = resp.body.len;
	char *text = capbuf_take(&resp.body);
	response_clear(&resp);
	if (!text)
		return wr_error_set(err, ENOMEM, "registry");
	*json = text;
	*len = n;
	memcpy(digest, dg, BLOBS_DIGEST_MAX);
	return 0;
}

void blobs_tags_free(char **tags, size_t n)
{
	for (size_t i = 0; tags && i < n; i++)
		free(tags[i]);
	free(tags);
}

/* One page of tags appended to *tags (*n of them, BLOBS_TAGS_MAX at
 * most), its next page's URL, if any, into *next. */
static int tags_page(struct blobs_client *c, const char *url, char ***tags,
		     size_t *n, char **next, struct wr_error **err)
{
	struct request rq = request_of("GET", url, SCOPE_PULL, "list tags");
	rq.accept = "application/json";
	rq.body_max = BLOBS_MANIFEST_MAX;
	struct response resp;
	int r = call_expect(c, &rq, 200, &resp, err);
	if (r < 0)
		return r;
	json_error_t jerr;
	json_t *doc = json_loadb(resp.body.data ? resp.body.data : "",
				 resp.body.len, 0, &jerr);
	json_t *list = json_object_get(doc, "tags");
	size_t count = json_array_size(list);
	/* a repository without tags: "tags": null, or none */
	if (!json_is_object(doc) ||
	    (list && !json_is_null(list) && !json_is_array(list)) ||
	    count > BLOBS_TAGS_MAX - *n) {
		wr_error_set(err, 0,
			     "registry %s: list tags: not a tag list, or more "
			     "than %d tags",
			     c->cfg.registry, BLOBS_TAGS_MAX);
		r = -EPROTO;
		goto out;
	}
	char **grown = wr_realloc(*tags, (*n + count + 1) * sizeof(*grown));
	if (!grown) {
		r = wr_error_set(err, ENOMEM, "registry");
		goto out;
	}
	*tags = grown;
	for (size_t i = 0; i < count; i++) {
		const char *t = json_string_value(json_array_get(list, i));
		if (!t || !blobs_tag_valid(t)) {
			wr_error_set(err, 0,
				     "registry %s: list tags: a tag that is "
				     "not one",
				     c->cfg.registry);
			r = -EPROTO;
			goto out;
		}
		if (!(grown[*n] = wr_strdup(t))) {
			r = wr_error_set(err, ENOMEM, "registry");
			goto out;
		}
		(*n)++;
	}
	if (resp.next && count &&
	    !(*next =
		  registry_url(c, "next page", resp.next, NULL, rq.what, err)))
		r = -EPROTO;
out:
	response_clear(&resp);
	json_decref(doc);
	return r;
}

int blobs_tags(struct blobs_client *c, char ***tags, size_t *n,
	       struct wr_error **err)
{
	char *url = api_url(c, "tags/list");
	if (!url)
		return wr_error_set(err, ENOMEM, "registry");
	char **out = NULL;
	size_t count = 0;
	int r = 0;
	/* pages as the registry gives them (Link: <...>; rel="next"), each
	 * with at least one tag, until BLOBS_TAGS_MAX */
	while (url && r == 0) {
		char *next = NULL;
		r = tags_page(c, url, &out, &count, &next, err);
		free(url);
		url = next;
	}
	free(url);
	if (r < 0) {
		blobs_tags_free(out, count);
		return r;
	}
	*tags = out;
	*n = count;
	return 0;
}

int blobs_manifest_delete(struct blobs_client *c, const char *digest,
			  struct wr_error **err)
{
	_cleanup_free_ char *url = NULL, *what = NULL;
	int r = ref_url(c, "delete manifest", "manifests", digest, false, &url,
			&what, err);
	if (r < 0)
		return r;
	struct request rq = request_of("DELETE", url, SCOPE_DELETE, what);
	struct response resp;
	if ((r = call_expect(c, &rq, 202, &resp, err)) == 0)
		response_clear(&resp);
	return r;
}

int blobs_blob_delete(struct blobs_client *c, const char *digest,
		      struct wr_error **err)
{
	_cleanup_free_ char *url = NULL, *what = NULL;
	int r = ref_url(c, "delete blob", "blobs", digest, false, &url, &what,
			err);
	if (r < 0)
		return r;
	struct request rq = request_of("DELETE", url, SCOPE_DELETE, what);
	struct response resp;
	if ((r = call_expect(c, &rq, 202, &resp, err)) == 0)
		response_clear(&resp);
	return r;
}

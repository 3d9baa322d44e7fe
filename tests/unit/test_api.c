/* test_api.c - the HTTP API (src/api): api_handle without a network for
 * authentication, every route's answers and errors, path tricks, paging and
 * event streams; then a few requests through the real server
 * (libmicrohttpd on a loopback port) for what only the glue does: the raw
 * request target, the body cap while reading, the SSE framing, bind
 * errors.
 *
 * Runs against the real store and the session manager with no_worker
 * (sessions are accepted and stored, never run), in a scratch directory
 * under /tmp removed at the end. The store is SQLite's, or a PostgreSQL
 * database when WARREN_TEST_STORE names a server (teststore.h; tests/
 * run.sh's second pass). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "api/api.h"
#include "teststore.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAX_BODY (64 * 1024)

static char root[] = "/tmp/warren-unit-api.XXXXXX";
static struct store *st;
static struct control *ctl;
static struct api *api;
static char *tok_admin, *tok_reviewer, *tok_sam, *tok_sue, *tok_pat;
static char repo_id[STORE_ID_MAX];

/* ---- helpers ---- */

struct call {
	const char *method;
	const char *target;	  /* path?query */
	const char *token;	  /* NULL: no Authorization header */
	const char *body;	  /* NULL: none */
	size_t body_len;	  /* 0: strlen(body) */
	const char *content_type; /* NULL: application/json with a body */
	const char *last_event_id;
};

static void handle(const struct call *c, struct api_response *out)
{
	_cleanup_free_ char *target = wr_strdup(c->target);
	assert_non_null(target);
	char *query = strchr(target, '?');
	if (query)
		*query++ = '\0';
	char auth[512];
	if (c->token)
		snprintf(auth, sizeof(auth), "Bearer %s", c->token);
	struct api_request req = {
	    .method = c->method,
	    .path = target,
	    .query = query,
	    .authorization = c->token ? auth : NULL,
	    .content_type = c->content_type ? c->content_type
			    : c->body	    ? "application/json"
					    : NULL,
	    .last_event_id = c->last_event_id,
	    .body = c->body,
	    .body_len = c->body_len ? c->body_len
			: c->body   ? strlen(c->body)
				    : 0,
	};
	assert_int_equal(api_handle(api, &req, out), 0);
}

/* The answer's JSON (new reference) after checking its status. */
static json_t *call_json(unsigned status, const struct call *c)
{
	struct api_response r;
	handle(c, &r);
	if (r.status != status)
		print_message("%s %s: %u %.*s\n", c->method, c->target,
			      r.status, (int)r.body_len, r.body ? r.body : "");
	assert_int_equal(r.status, status);
	assert_non_null(r.body);
	assert_string_equal(r.content_type, "application/json");
	json_error_t jerr;
	json_t *j = json_loadb(r.body, r.body_len, 0, &jerr);
	assert_non_null(j);
	api_response_clear(&r);
	return j;
}

#define CALL(status, ...) call_json(status, &(struct call){__VA_ARGS__})

/* An error answer: its status, code and a piece of its message. */
static void expect_error(unsigned status, const char *code,
			 const char *msg_part, const struct call *c)
{
	json_t *j = call_json(status, c);
	json_t *e = json_object_get(j, "error");
	assert_true(json_is_object(e));
	assert_string_equal(json_string_value(json_object_get(e, "code")),
			    code);
	const char *msg = json_string_value(json_object_get(e, "message"));
	assert_non_null(msg);
	if (msg_part && !strstr(msg, msg_part)) {
		print_message("message '%s' lacks '%s'\n", msg, msg_part);
		fail();
	}
	json_decref(j);
}

#define ERR(status, code, part, ...) \
	expect_error(status, code, part, &(struct call){__VA_ARGS__})

static const char *jstr(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

/* What the store holds, to check that a failed request changed nothing. */
struct census {
	int64_t sessions;
	int tokens;
	size_t repos;
	size_t messages; /* of the session given */
};

static struct census census(const char *session_id)
{
	struct census c = {0};
	int64_t counts[SESSION_STATE_MAX];
	assert_int_equal(st->ops->session_count(st, counts, NULL), 0);
	for (int i = 0; i < SESSION_STATE_MAX; i++)
		c.sessions += counts[i];
	c.tokens = st->ops->token_count(st, NULL);
	assert_true(c.tokens >= 0);
	struct store_repo *repos = NULL;
	assert_int_equal(st->ops->repo_list(st, &repos, &c.repos, NULL), 0);
	store_repos_free(repos, c.repos);
	if (session_id) {
		struct store_event *ev = NULL;
		size_t n = 0;
		assert_int_equal(
		    st->ops->event_list(st, session_id, 0, 0, &ev, &n, NULL),
		    0);
		store_events_free(ev, n);
		c.messages = n; /* every message is an event */
	}
	return c;
}

static void assert_census(struct census a, struct census b)
{
	assert_int_equal(a.sessions, b.sessions);
	assert_int_equal(a.tokens, b.tokens);
	assert_int_equal(a.repos, b.repos);
	assert_int_equal(a.messages, b.messages);
}

/* A new session of the token's user; its id in id_out. */
static void submit(const char *token, const char *prompt,
		   char id_out[STORE_ID_MAX])
{
	char body[512];
	snprintf(body, sizeof(body), "{\"repo\":\"c-hello\",\"prompt\":\"%s\"}",
		 prompt);
	json_t *s = CALL(201, .method = "POST", .target = "/api/v1/sessions",
			 .token = token, .body = body);
	snprintf(id_out, STORE_ID_MAX, "%s", jstr(s, "id"));
	json_decref(s);
}

static char *make_token(const char *user, const char *role)
{
	char *plain = NULL;
	struct wr_error *err = NULL;
	assert_int_equal(api_token_create(st, user, role, &plain, &err), 0);
	return plain;
}

static int remove_entry(const char *path, const struct stat *sb, int type,
			struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

static int group_setup(void **state)
{
	(void)state;
	if (!mkdtemp(root))
		return -1;
	struct wr_error *err = NULL;
	st = store_open(teststore_url(root, "warren.db"), &err);
	if (!st)
		return -1;
	struct control_config cc = {
	    .data_dir = root,
	    .no_worker = true,
	    /* the repositories here are made up: nothing to ask */
	    .no_remote_check = true,
	    .maximums = {.memory_bytes = 8ull << 30},
	};
	if (control_start(&cc, st, &ctl, &err) < 0)
		return -1;
	struct store_repo repo = {0};
	if (control_repo_add(ctl, "c-hello", "/srv/git/c-hello", NULL, 0,
			     "[\"sh\",\"-c\",\"make test\"]", &repo, &err) < 0)
		return -1;
	snprintf(repo_id, sizeof(repo_id), "%s", repo.id);
	store_repo_clear(&repo);
	struct api_config ac = {.st = st,
				.ctl = ctl,
				.max_body = MAX_BODY,
				.keepalive_ms = 100,
				.data_dir = root};
	if (api_new(&ac, &api, &err) < 0)
		return -1;
	tok_admin = make_token("admin", "admin");
	tok_reviewer = make_token("rita", "reviewer");
	tok_sam = make_token("sam", "submitter");
	tok_sue = make_token("sue", "submitter");
	tok_pat = make_token("pat", "submitter");
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	api_stop(api);
	control_stop(ctl);
	store_close(st);
	teststore_cleanup();
	free(tok_admin);
	free(tok_reviewer);
	free(tok_sam);
	free(tok_sue);
	free(tok_pat);
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

/* ---- authentication ---- */

static void test_auth(void **state)
{
	(void)state;
	ERR(401, "unauthorized", "bearer token", .method = "GET",
	    .target = "/api/v1/healthz");
	ERR(401, "unauthorized", NULL, .method = "GET",
	    .target = "/api/v1/healthz", .token = "wr_not-a-token");
	ERR(401, "unauthorized", NULL, .method = "GET",
	    .target = "/api/v1/healthz", .token = "");
	/* unauthenticated: even an unknown route says 401, not 404 */
	ERR(401, "unauthorized", NULL, .method = "GET",
	    .target = "/api/v1/nothing");

	struct api_response r;
	struct api_request req = {.method = "GET",
				  .path = "/api/v1/healthz",
				  .authorization = "Basic YWRtaW46YWRtaW4="};
	api_handle(api, &req, &r);
	assert_int_equal(r.status, 401);
	api_response_clear(&r);
	char auth[256];
	snprintf(auth, sizeof(auth), "  bearer\t%s  ", tok_admin);
	req.authorization = auth;
	api_handle(api, &req, &r);
	assert_int_equal(r.status, 200);
	api_response_clear(&r);
	snprintf(auth, sizeof(auth), "Bearer %s x", tok_admin);
	api_handle(api, &req, &r);
	assert_int_equal(r.status, 401);
	api_response_clear(&r);

	json_t *j = CALL(200, .method = "GET", .target = "/api/v1/healthz",
			 .token = tok_admin);
	assert_string_equal(jstr(j, "status"), "ok");
	assert_true(json_is_integer(
	    json_object_get(json_object_get(j, "sessions"), "queued")));
	json_decref(j);
	j = CALL(200, .method = "GET", .target = "/api/v1/healthz",
		 .token = tok_sam);
	json_decref(j);
}

static void test_token_hash_and_create(void **state)
{
	(void)state;
	char hex[65];
	assert_int_equal(api_token_hash("abc", hex), 0);
	assert_string_equal(hex,
			    "ba7816bf8f01cfea414140de5dae2223b00361a396177a"
			    "9cb410ff61f20015ad");
	assert_int_equal(api_token_hash(NULL, hex), -EINVAL);
	assert_int_equal(strlen(tok_admin), 3 + 43);
	assert_memory_equal(tok_admin, "wr_", 3);
	char *plain = NULL;
	struct wr_error *err = NULL;
	assert_int_equal(
	    api_token_create(st, "bad user", "admin", &plain, &err), -EINVAL);
	assert_true(err && err->bad_input);
	wr_error_free(err);
	err = NULL;
	assert_int_equal(api_token_create(st, "x", "root", &plain, &err),
			 -EINVAL);
	wr_error_free(err);
	assert_null(plain);
	assert_int_equal(api_validate_user("alice@example.com"), 0);
	assert_int_equal(api_validate_user("-alice"), -EINVAL);
	assert_int_equal(api_validate_user(""), -EINVAL);
}

static void test_tokens_route(void **state)
{
	(void)state;
	struct census before = census(NULL);
	const char *body = "{\"user\":\"tess\",\"role\":\"reviewer\"}";
	ERR(403, "forbidden", "admin", .method = "POST",
	    .target = "/api/v1/tokens", .token = tok_reviewer, .body = body);
	ERR(403, "forbidden", NULL, .method = "POST",
	    .target = "/api/v1/tokens", .token = tok_sam, .body = body);
	ERR(400, "bad_request", "key 'role'", .method = "POST",
	    .target = "/api/v1/tokens", .token = tok_admin,
	    .body = "{\"user\":\"tess\",\"role\":\"root\"}");
	ERR(400, "bad_request", "key 'user'", .method = "POST",
	    .target = "/api/v1/tokens", .token = tok_admin,
	    .body = "{\"user\":\"te ss\",\"role\":\"admin\"}");
	ERR(400, "bad_request", "key 'user': expected a string",
	    .method = "POST", .target = "/api/v1/tokens", .token = tok_admin,
	    .body = "{\"user\":7,\"role\":\"admin\"}");
	ERR(400, "bad_request", "unknown key 'scope'", .method = "POST",
	    .target = "/api/v1/tokens", .token = tok_admin,
	    .body = "{\"user\":\"tess\",\"role\":\"admin\",\"scope\":1}");
	const char *bad_names[] = {"-x", "a b", "al@ce", "..", "", "a/b"};
	for (size_t i = 0; i < ARRAY_SIZE(bad_names); i++) {
		char b[160];
		snprintf(b, sizeof(b),
			 "{\"user\":\"tess\",\"role\":\"admin\",\"name\":"
			 "\"%s\"}",
			 bad_names[i]);
		ERR(400, "bad_request", "key 'name'", .method = "POST",
		    .target = "/api/v1/tokens", .token = tok_admin, .body = b);
	}
	const char *bad_expires[] = {"0",    "\"0s\"", "\"soon\"",
				     "true", "-5",     "\"36600d\""};
	for (size_t i = 0; i < ARRAY_SIZE(bad_expires); i++) {
		char b[160];
		snprintf(b, sizeof(b),
			 "{\"user\":\"tess\",\"role\":\"admin\","
			 "\"expires\":%s}",
			 bad_expires[i]);
		ERR(400, "bad_request", "key 'expires'", .method = "POST",
		    .target = "/api/v1/tokens", .token = tok_admin, .body = b);
	}
	ERR(400, "bad_request", "key 'role' is required", .method = "POST",
	    .target = "/api/v1/tokens", .token = tok_admin,
	    .body = "{\"user\":\"tess\"}");
	assert_census(before, census(NULL));

	json_t *j = CALL(201, .method = "POST", .target = "/api/v1/tokens",
			 .token = tok_admin, .body = body);
	assert_string_equal(jstr(j, "user"), "tess");
	assert_string_equal(jstr(j, "role"), "reviewer");
	/* the default name: the user and 8 random hex digits */
	const char *name = jstr(j, "name");
	assert_non_null(name);
	assert_int_equal(strlen(name), strlen("tess-") + 8);
	assert_memory_equal(name, "tess-", 5);
	assert_int_equal(strspn(name + 5, "0123456789abcdef"), 8);
	assert_true(json_is_null(json_object_get(j, "expires_ms")));
	_cleanup_free_ char *tess = wr_strdup(jstr(j, "token"));
	json_decref(j);
	assert_int_equal(census(NULL).tokens, before.tokens + 1);
	/* the new token works, with its role */
	j = CALL(200, .method = "GET", .target = "/api/v1/healthz",
		 .token = tess);
	json_decref(j);
	ERR(403, "forbidden", NULL, .method = "POST",
	    .target = "/api/v1/tokens", .token = tess, .body = body);

	/* a name and an expiry; a name is unique; a user with characters a
	 * name cannot have */
	int64_t t0 = store_now_ms();
	j = CALL(201, .method = "POST", .target = "/api/v1/tokens",
		 .token = tok_admin,
		 .body = "{\"user\":\"ci\",\"role\":\"submitter\","
			 "\"name\":\"ci-bot.1\",\"expires\":\"30d\"}");
	assert_string_equal(jstr(j, "name"), "ci-bot.1");
	int64_t exp = json_integer_value(json_object_get(j, "expires_ms"));
	assert_true(exp >= t0 + 30LL * 86400 * 1000 &&
		    exp <= store_now_ms() + 30LL * 86400 * 1000);
	json_decref(j);
	before = census(NULL);
	ERR(409, "conflict", "ci-bot.1", .method = "POST",
	    .target = "/api/v1/tokens", .token = tok_admin,
	    .body = "{\"user\":\"x\",\"role\":\"admin\","
		    "\"name\":\"ci-bot.1\"}");
	assert_census(before, census(NULL));
	j = CALL(201, .method = "POST", .target = "/api/v1/tokens",
		 .token = tok_admin,
		 .body = "{\"user\":\"al+x@example.com\",\"role\":"
			 "\"submitter\",\"expires\":3600}");
	assert_memory_equal(jstr(j, "name"), "al_x_example.com-", 17);
	assert_true(json_integer_value(json_object_get(j, "expires_ms")) >=
		    t0 + 3600 * 1000);
	json_decref(j);
}

/* The plain text of token (or its hash) anywhere in text? */
static bool holds_secret(const char *text, const char *token)
{
	char hash[65];
	assert_int_equal(api_token_hash(token, hash), 0);
	return strstr(text, token) || strstr(text, hash);
}

static void test_tokens_list_and_revoke(void **state)
{
	(void)state;
	_cleanup_free_ char *bot = NULL, *self = NULL;
	json_t *j = CALL(201, .method = "POST", .target = "/api/v1/tokens",
			 .token = tok_admin,
			 .body = "{\"user\":\"bot\",\"role\":\"submitter\","
				 "\"name\":\"bot-1\"}");
	bot = wr_strdup(jstr(j, "token"));
	json_decref(j);
	j = CALL(201, .method = "POST", .target = "/api/v1/tokens",
		 .token = tok_admin,
		 .body = "{\"user\":\"root2\",\"role\":\"admin\","
			 "\"name\":\"self\"}");
	self = wr_strdup(jstr(j, "token"));
	json_decref(j);

	/* the list: names and ids, never a token or a hash */
	struct api_response r;
	handle(&(struct call){.method = "GET",
			      .target = "/api/v1/tokens",
			      .token = tok_admin},
	       &r);
	assert_int_equal(r.status, 200);
	const char *secrets[] = {tok_admin, tok_reviewer, tok_sam, bot, self};
	for (size_t i = 0; i < ARRAY_SIZE(secrets); i++)
		assert_false(holds_secret(r.body, secrets[i]));
	api_response_clear(&r);
	j = CALL(200, .method = "GET", .target = "/api/v1/tokens",
		 .token = tok_admin);
	json_t *list = json_object_get(j, "tokens");
	assert_true(json_array_size(list) >= 7);
	json_t *bot_entry = NULL;
	size_t i;
	json_t *e;
	json_array_foreach(list, i, e)
	{
		assert_null(json_object_get(e, "token"));
		assert_null(json_object_get(e, "hash"));
		assert_int_equal(strlen(jstr(e, "id")), 8);
		if (!strcmp(jstr(e, "name"), "bot-1"))
			bot_entry = e;
	}
	assert_non_null(bot_entry);
	assert_string_equal(jstr(bot_entry, "user"), "bot");
	assert_string_equal(jstr(bot_entry, "role"), "submitter");
	assert_true(json_is_true(json_object_get(bot_entry, "active")));
	assert_true(json_is_null(json_object_get(bot_entry, "revoked_ms")));
	assert_true(json_is_null(json_object_get(bot_entry, "expires_ms")));
	json_decref(j);

	/* revoke: the token worked a moment ago (and is in the cache); the
	 * next request with it is refused */
	j = CALL(200, .method = "GET", .target = "/api/v1/sessions",
		 .token = bot);
	json_decref(j);
	struct census before = census(NULL);
	j = CALL(200, .method = "DELETE", .target = "/api/v1/tokens/bot-1",
		 .token = tok_admin);
	assert_string_equal(jstr(j, "name"), "bot-1");
	int64_t revoked = json_integer_value(json_object_get(j, "revoked_ms"));
	assert_true(revoked > 0);
	json_decref(j);
	assert_census(before, census(NULL)); /* revoked, not removed */
	ERR(401, "unauthorized", NULL, .method = "GET",
	    .target = "/api/v1/sessions", .token = bot);
	/* again: the first time stays */
	j = CALL(200, .method = "DELETE", .target = "/api/v1/tokens/bot-1",
		 .token = tok_admin);
	assert_int_equal(json_integer_value(json_object_get(j, "revoked_ms")),
			 revoked);
	json_decref(j);
	j = CALL(200, .method = "GET", .target = "/api/v1/tokens",
		 .token = tok_admin);
	json_array_foreach(json_object_get(j, "tokens"), i, e)
	{
		if (strcmp(jstr(e, "name"), "bot-1"))
			continue;
		assert_int_equal(
		    json_integer_value(json_object_get(e, "revoked_ms")),
		    revoked);
		assert_true(json_is_false(json_object_get(e, "active")));
	}
	json_decref(j);

	/* unknown and malformed names, bodies, methods */
	ERR(404, "not_found", "no token named nope", .method = "DELETE",
	    .target = "/api/v1/tokens/nope", .token = tok_admin);
	ERR(404, "not_found", NULL, .method = "DELETE",
	    .target = "/api/v1/tokens/..", .token = tok_admin);
	ERR(404, "not_found", NULL, .method = "DELETE",
	    .target = "/api/v1/tokens/a%2Fb", .token = tok_admin);
	ERR(404, "not_found", NULL, .method = "DELETE",
	    .target = "/api/v1/tokens/-x", .token = tok_admin);
	ERR(400, "bad_request", "takes no body", .method = "DELETE",
	    .target = "/api/v1/tokens/self", .token = tok_admin, .body = "{}");
	ERR(405, "method_not_allowed", "DELETE", .method = "GET",
	    .target = "/api/v1/tokens/self", .token = tok_admin);
	ERR(405, "method_not_allowed", "GET, POST", .method = "DELETE",
	    .target = "/api/v1/tokens", .token = tok_admin);
	ERR(400, "bad_request", "unknown query parameter", .method = "GET",
	    .target = "/api/v1/tokens?user=bot", .token = tok_admin);

	/* an admin may revoke the very token it uses: this request is
	 * answered, the next one is not */
	j = CALL(200, .method = "GET", .target = "/api/v1/tokens",
		 .token = self);
	json_decref(j);
	j = CALL(200, .method = "DELETE", .target = "/api/v1/tokens/self",
		 .token = self);
	json_decref(j);
	ERR(401, "unauthorized", NULL, .method = "GET",
	    .target = "/api/v1/tokens", .token = self);
	/* the others are unaffected (their cache entries went too) */
	j = CALL(200, .method = "GET", .target = "/api/v1/tokens",
		 .token = tok_admin);
	json_decref(j);
}

static void test_token_expiry(void **state)
{
	(void)state;
	/* 1 s: used (and cached) at once, refused once past */
	json_t *j = CALL(201, .method = "POST", .target = "/api/v1/tokens",
			 .token = tok_admin,
			 .body = "{\"user\":\"brief\",\"role\":\"reviewer\","
				 "\"expires\":\"1s\"}");
	_cleanup_free_ char *brief = wr_strdup(jstr(j, "token"));
	int64_t exp = json_integer_value(json_object_get(j, "expires_ms"));
	json_decref(j);
	j = CALL(200, .method = "GET", .target = "/api/v1/healthz",
		 .token = brief);
	json_decref(j);
	while (store_now_ms() <= exp)
		usleep(20 * 1000);
	ERR(401, "unauthorized", NULL, .method = "GET",
	    .target = "/api/v1/healthz", .token = brief);

	/* the store refuses an expiry in the past */
	char *plain = NULL;
	struct wr_error *err = NULL;
	struct api_token_spec spec = {
	    .user = "late", .role = "admin", .expires_ms = 1000};
	assert_int_equal(api_token_issue(st, &spec, &plain, NULL, &err),
			 -EINVAL);
	assert_null(plain);
	wr_error_free(err);
}

/* ---- routing and path tricks ---- */

static void test_routing(void **state)
{
	(void)state;
	struct census before = census(NULL);
	const char *tok_body = "{\"user\":\"mallory\",\"role\":\"admin\"}";
	const char *tricks[] = {
	    "/api/v1/sessions/../tokens",
	    "/api/v1/sessions/%2e%2e/tokens",
	    "/api/v1/sessions/%2E%2E/tokens",
	    "/api/v1/./tokens",
	    "/api/v1//tokens",
	    "/api/v1/tokens/",
	    "/api/v1/tokens/.",
	    "//api/v1/tokens",
	    "/api/v1/sessions%2F..%2Ftokens",
	    "/api/v2/tokens",
	    "/api/v1/TOKENS",
	    "/api/v1/tokens;x",
	    "/api/v1",
	    "/",
	    "",
	};
	for (size_t i = 0; i < ARRAY_SIZE(tricks); i++)
		ERR(404, "not_found", NULL, .method = "POST",
		    .target = tricks[i], .token = tok_admin, .body = tok_body);
	ERR(400, "bad_request", "percent-encoding", .method = "POST",
	    .target = "/api/v1/tok%00ens", .token = tok_admin,
	    .body = tok_body);
	ERR(400, "bad_request", "percent-encoding", .method = "GET",
	    .target = "/api/v1/sessions/%zz", .token = tok_admin);
	ERR(400, "bad_request", "percent-encoding", .method = "GET",
	    .target = "/api/v1/sessions/%4", .token = tok_admin);

	/* a NUL byte in a raw path ends the string: what is left is checked
	 * as any path */
	struct api_response r;
	char nul_path[] = "/api/v1/healthz\0/../tokens";
	struct api_request req = {.method = "GET", .path = nul_path};
	char auth[128];
	snprintf(auth, sizeof(auth), "Bearer %s", tok_admin);
	req.authorization = auth;
	api_handle(api, &req, &r);
	assert_int_equal(r.status, 200);
	api_response_clear(&r);

	/* very long paths and ids */
	size_t n = 100000;
	_cleanup_free_ char *longp = wr_malloc(n + 1);
	assert_non_null(longp);
	memset(longp, 'a', n);
	memcpy(longp, "/api/v1/sessions/s-", 19);
	longp[n] = '\0';
	ERR(404, "not_found", NULL, .method = "GET", .target = longp,
	    .token = tok_admin);
	ERR(404, "not_found", "no such session", .method = "GET",
	    .target = "/api/v1/sessions/s-0123456789abcdef0123456789abcdef0",
	    .token = tok_admin);
	ERR(404, "not_found", "no such session", .method = "GET",
	    .target = "/api/v1/sessions/S-ABC", .token = tok_admin);
	ERR(404, "not_found", "no such session", .method = "GET",
	    .target = "/api/v1/sessions/r-abc", .token = tok_admin);
	ERR(404, "not_found", "no such session", .method = "GET",
	    .target = "/api/v1/sessions/s-", .token = tok_admin);
	ERR(404, "not_found", "not found", .method = "GET",
	    .target = "/api/v1/sessions/s-0000000000000000",
	    .token = tok_admin);
	/* an encoded unreserved character is the character (RFC 3986) */
	json_t *j = CALL(200, .method = "GET", .target = "/api/v1/%68ealthz",
			 .token = tok_admin);
	json_decref(j);

	/* methods */
	handle(&(struct call){.method = "DELETE",
			      .target = "/api/v1/sessions",
			      .token = tok_admin},
	       &r);
	assert_int_equal(r.status, 405);
	assert_string_equal(r.allow, "GET, POST");
	api_response_clear(&r);
	handle(&(struct call){.method = "PUT",
			      .target = "/api/v1/healthz",
			      .token = tok_admin},
	       &r);
	assert_int_equal(r.status, 405);
	assert_string_equal(r.allow, "GET");
	api_response_clear(&r);
	ERR(405, "method_not_allowed", "use GET, POST", .method = "PUT",
	    .target = "/api/v1/tokens", .token = tok_admin);
	ERR(405, "method_not_allowed", NULL, .method = "get",
	    .target = "/api/v1/healthz", .token = tok_admin);
	/* HEAD is GET without the body (the transport drops it) */
	handle(&(struct call){.method = "HEAD",
			      .target = "/api/v1/healthz",
			      .token = tok_admin},
	       &r);
	assert_int_equal(r.status, 200);
	api_response_clear(&r);

	/* query strings of routes that take none, bodies on GET */
	ERR(400, "bad_request", "unknown query parameter 'x'", .method = "GET",
	    .target = "/api/v1/healthz?x=1", .token = tok_admin);
	ERR(400, "bad_request", "takes no body", .method = "GET",
	    .target = "/api/v1/healthz", .token = tok_admin, .body = "{}");
	assert_census(before, census(NULL));
}

static void test_bodies(void **state)
{
	(void)state;
	struct census before = census(NULL);
	const char *t = "/api/v1/sessions";
	ERR(400, "bad_request", "malformed JSON", .method = "POST", .target = t,
	    .token = tok_admin, .body = "{\"repo\":");
	ERR(400, "bad_request", "malformed JSON", .method = "POST", .target = t,
	    .token = tok_admin,
	    .body = "{\"repo\":\"a\\u0000b\",\"prompt\":\"x\"}");
	ERR(400, "bad_request", "malformed JSON", .method = "POST", .target = t,
	    .token = tok_admin,
	    .body =
		"{\"repo\":\"c-hello\",\"repo\":\"c-hello\",\"prompt\":\"x\"}");
	ERR(400, "bad_request", "malformed JSON", .method = "POST", .target = t,
	    .token = tok_admin, .body = "{\"prompt\":\"\xff\xfe\"}");
	ERR(400, "bad_request", "JSON object", .method = "POST", .target = t,
	    .token = tok_admin, .body = "[1,2]");
	ERR(400, "bad_request", "JSON object", .method = "POST", .target = t,
	    .token = tok_admin, .body = "\"text\"");
	ERR(400, "bad_request", "body is required", .method = "POST",
	    .target = t, .token = tok_admin);
	ERR(415, "unsupported_media_type", NULL, .method = "POST", .target = t,
	    .token = tok_admin, .body = "{}", .content_type = "text/plain");
	ERR(415, "unsupported_media_type", NULL, .method = "POST", .target = t,
	    .token = tok_admin, .body = "{}",
	    .content_type = "application/jsonx");
	ERR(415, "unsupported_media_type", NULL, .method = "POST", .target = t,
	    .token = tok_admin, .body = "{}",
	    .content_type = "application/x-www-form-urlencoded");
	/* with parameters it is still JSON */
	ERR(400, "bad_request", "key 'repo' is required", .method = "POST",
	    .target = t, .token = tok_admin, .body = "{}",
	    .content_type = "Application/JSON; charset=utf-8");

	/* oversize: past the cap is 413 whatever it holds */
	size_t big = MAX_BODY + 1;
	_cleanup_free_ char *huge = wr_malloc(big);
	assert_non_null(huge);
	memset(huge, ' ', big);
	huge[0] = '{';
	huge[big - 1] = '}';
	ERR(413, "payload_too_large", NULL, .method = "POST", .target = t,
	    .token = tok_admin, .body = huge, .body_len = big);
	/* ... and even unauthenticated */
	ERR(413, "payload_too_large", NULL, .method = "POST", .target = t,
	    .body = huge, .body_len = big);
	assert_census(before, census(NULL));
}

/* ---- sessions ---- */

/* Only an admin registers a repository on the fly (by URL or path); the
 * others name registered ones, by name, id or their URL. */
static void test_session_unregistered_repo(void **state)
{
	(void)state;
	const char *t = "/api/v1/sessions";
	struct census before = census(NULL);
	const char *body =
	    "{\"repo\":\"/srv/git/somebody-elses\",\"prompt\":\"x\","
	    "\"agent\":\"true\"}";
	ERR(403, "forbidden", "only an admin registers one", .method = "POST",
	    .target = t, .token = tok_sam, .body = body);
	ERR(403, "forbidden", "not a registered repository", .method = "POST",
	    .target = t, .token = tok_reviewer,
	    .body = "{\"repo\":\"https://git.example.com/x.git\","
		    "\"prompt\":\"x\",\"agent\":\"true\"}");
	assert_census(before, census(NULL));
	json_t *j = CALL(200, .method = "GET", .target = "/api/v1/repositories",
			 .token = tok_admin);
	size_t repos = json_array_size(json_object_get(j, "repositories"));
	json_decref(j);
	/* a registered one by its URL is fine for anyone */
	json_decref(CALL(201, .method = "POST", .target = t, .token = tok_sam,
			 .body = "{\"repo\":\"/srv/git/c-hello\",\"prompt\":"
				 "\"x\",\"agent\":\"true\"}"));
	/* the admin's registers it */
	json_decref(CALL(201, .method = "POST", .target = t, .token = tok_admin,
			 .body = body));
	j = CALL(200, .method = "GET", .target = "/api/v1/repositories",
		 .token = tok_admin);
	assert_int_equal(json_array_size(json_object_get(j, "repositories")),
			 repos + 1);
	json_decref(j);
}

static void test_session_create(void **state)
{
	(void)state;
	const char *t = "/api/v1/sessions";
	json_t *s = CALL(
	    201, .method = "POST", .target = t, .token = tok_admin,
	    .body = "{\"repo\":\"c-hello\",\"prompt\":\"fix the failing test\","
		    "\"ref\":\"main\",\"agent\":\"make check\","
		    "\"limits\":{\"memory\":\"1G\",\"pids\":256}}");
	const char *id = jstr(s, "id");
	assert_non_null(id);
	assert_memory_equal(id, "s-", 2);
	assert_string_equal(jstr(s, "state"), "queued");
	assert_string_equal(jstr(s, "repo"), "c-hello");
	assert_string_equal(jstr(s, "repo_id"), repo_id);
	assert_string_equal(jstr(s, "user"), "admin");
	assert_string_equal(jstr(s, "prompt"), "fix the failing test");
	assert_string_equal(jstr(s, "ref"), "main");
	/* stored JSON is embedded as JSON, not as a string */
	json_t *agent = json_object_get(s, "agent");
	assert_true(json_is_array(agent));
	assert_string_equal(json_string_value(json_array_get(agent, 0)), "sh");
	assert_string_equal(json_string_value(json_array_get(agent, 2)),
			    "make check");
	assert_true(json_is_object(json_object_get(s, "limits")));
	assert_true(json_is_null(json_object_get(s, "exit_code")));
	assert_true(json_is_null(json_object_get(s, "finished_ms")));
	assert_true(json_is_null(json_object_get(s, "started_ms")));
	assert_true(json_is_null(json_object_get(s, "reason")));
	assert_true(json_is_integer(json_object_get(s, "created_ms")));
	assert_int_equal(json_integer_value(json_object_get(s, "attempts")), 0);

	/* GET gives the same object */
	char path[128];
	snprintf(path, sizeof(path), "/api/v1/sessions/%s", id);
	json_t *g =
	    CALL(200, .method = "GET", .target = path, .token = tok_reviewer);
	assert_true(json_equal(s, g));
	json_decref(g);
	/* no worker holds it yet; a claim shows its worker and epoch */
	assert_true(json_is_null(json_object_get(s, "worker")));
	assert_int_equal(json_integer_value(json_object_get(s, "lease_epoch")),
			 0);
	struct wr_error *err = NULL;
	struct store_worker w = {.id = "w-api"};
	assert_int_equal(st->ops->worker_register(st, &w, &err), 0);
	struct store_claim *cl = NULL;
	size_t n = 0;
	assert_int_equal(st->ops->session_claim(st, "w-api", id, 1000, 100, 0,
						&cl, &n, &err),
			 1);
	store_claims_free(cl, n);
	g = CALL(200, .method = "GET", .target = path, .token = tok_reviewer);
	assert_string_equal(jstr(g, "worker"), "w-api");
	assert_int_equal(json_integer_value(json_object_get(g, "lease_epoch")),
			 1);
	json_decref(g);
	json_decref(s);

	/* the repository's agent applies without one; argv arrays as is */
	s = CALL(201, .method = "POST", .target = t, .token = tok_admin,
		 .body = "{\"repo\":\""
			 "c-hello"
			 "\",\"prompt\":\"p\","
			 "\"agent\":[\"make\",\"\",\"test\"]}");
	assert_int_equal(json_array_size(json_object_get(s, "agent")), 3);
	json_decref(s);
	char body[128];
	snprintf(body, sizeof(body), "{\"repo\":\"%s\",\"prompt\":\"by id\"}",
		 repo_id);
	s = CALL(201, .method = "POST", .target = t, .token = tok_admin,
		 .body = body);
	assert_string_equal(
	    json_string_value(json_array_get(json_object_get(s, "agent"), 2)),
	    "make test");
	json_decref(s);
}

static void test_session_create_errors(void **state)
{
	(void)state;
	struct census before = census(NULL);
	const char *t = "/api/v1/sessions";
	struct {
		const char *body, *code, *part;
		unsigned status;
	} cases[] = {
	    {"{\"repo\":\"c-hello\"}", "bad_request",
	     "key 'prompt' is required", 400},
	    {"{\"prompt\":\"x\"}", "bad_request", "key 'repo' is required",
	     400},
	    {"{\"repo\":\"c-hello\",\"prompt\":5}", "bad_request",
	     "key 'prompt': expected a string", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":null}", "bad_request",
	     "key 'prompt' is required", 400},
	    {"{\"repo\":[\"c-hello\"],\"prompt\":\"x\"}", "bad_request",
	     "key 'repo': expected a string", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"\"}", "bad_request",
	     "key 'prompt': must not be empty", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\" \\n\\t \"}", "bad_request",
	     "key 'prompt': must not be empty", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"bogus\":1}",
	     "bad_request", "unknown key 'bogus'", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"ref\":7}", "bad_request",
	     "key 'ref': expected a string", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"ref\":\"a\\nb\"}",
	     "bad_request", "key 'ref': must not contain control", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"agent\":7}",
	     "bad_request",
	     "key 'agent': expected an array of strings, a string or "
	     "{\"builtin\": true}",
	     400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"agent\":[]}",
	     "bad_request", "key 'agent'", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"agent\":[\"sh\",1]}",
	     "bad_request", "key 'agent': element 1: expected a string", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"agent\":[\"\"]}",
	     "bad_request", "key 'agent'", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"limits\":\"1G\"}",
	     "bad_request", "key 'limits': expected an object", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"limits\":{\"gpu\":1}}",
	     "bad_request", "gpu", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"limits\":{\"memory\":"
	     "\"lots\"}}",
	     "bad_request", "memory", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"limits\":{\"memory\":"
	     "\"16G\"}}",
	     "bad_request", "more than the server allows", 400},
	    {"{\"repo\":\"no-such-repo\",\"prompt\":\"x\"}", "not_found",
	     "no-such-repo", 404},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"ref\":\"-rf\"}",
	     "bad_request", "ref", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"ref\":\"no such "
	     "ref!!\"}",
	     "bad_request", "key 'ref': 'no such ref!!' is not a branch", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"ref\":\"a..b\"}",
	     "bad_request", "key 'ref'", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"ref\":\"x.lock\"}",
	     "bad_request", "key 'ref'", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"ref\":\"main@{1}\"}",
	     "bad_request", "key 'ref'", 400},
	    {"{\"repo\":\"c-hello\",\"prompt\":\"x\",\"ref\":\"a:b\"}",
	     "bad_request", "key 'ref'", 400},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		ERR(cases[i].status, cases[i].code, cases[i].part,
		    .method = "POST", .target = t, .token = tok_admin,
		    .body = cases[i].body);
	/* the error message carries no strerror tail */
	json_t *j = CALL(400, .method = "POST", .target = t, .token = tok_admin,
			 .body = "{\"repo\":\"c-hello\",\"prompt\":\"x\","
				 "\"limits\":{\"gpu\":1}}");
	const char *msg = jstr(json_object_get(j, "error"), "message");
	assert_null(strstr(msg, "Invalid argument"));
	json_decref(j);

	/* prompt over 256 KiB */
	size_t n = 256 * 1024 + 1;
	_cleanup_free_ char *body = wr_malloc(n + 64);
	assert_non_null(body);
	int off = snprintf(body, 64, "{\"repo\":\"c-hello\",\"prompt\":\"");
	memset(body + off, 'x', n);
	strcpy(body + off + n, "\"}");
	api_stop(api);
	struct api_config ac = {
	    .st = st, .ctl = ctl, .keepalive_ms = 100, .data_dir = root};
	assert_int_equal(api_new(&ac, &api, NULL), 0); /* 1 MiB cap */
	ERR(400, "bad_request", "key 'prompt': longer than", .method = "POST",
	    .target = t, .token = tok_admin, .body = body);
	api_stop(api);
	ac.max_body = MAX_BODY;
	assert_int_equal(api_new(&ac, &api, NULL), 0);
	assert_census(before, census(NULL));
}

static void test_session_visibility(void **state)
{
	(void)state;
	char sam1[STORE_ID_MAX], sue1[STORE_ID_MAX], path[128];
	submit(tok_sam, "sam's", sam1);
	submit(tok_sue, "sue's", sue1);

	snprintf(path, sizeof(path), "/api/v1/sessions/%s", sam1);
	json_t *j =
	    CALL(200, .method = "GET", .target = path, .token = tok_sam);
	assert_string_equal(jstr(j, "user"), "sam");
	json_decref(j);
	/* another submitter's session does not exist for sue */
	ERR(404, "not_found", NULL, .method = "GET", .target = path,
	    .token = tok_sue);
	snprintf(path, sizeof(path), "/api/v1/sessions/%s/events?format=json",
		 sam1);
	ERR(404, "not_found", NULL, .method = "GET", .target = path,
	    .token = tok_sue);
	struct census before = census(sam1);
	snprintf(path, sizeof(path), "/api/v1/sessions/%s/messages", sam1);
	ERR(404, "not_found", NULL, .method = "POST", .target = path,
	    .token = tok_sue, .body = "{\"text\":\"hi\"}");
	snprintf(path, sizeof(path), "/api/v1/sessions/%s/cancel", sam1);
	ERR(404, "not_found", NULL, .method = "POST", .target = path,
	    .token = tok_sue);
	assert_census(before, census(sam1));

	/* lists: a submitter's own only; asking for another's is 403 */
	j = CALL(200, .method = "GET", .target = "/api/v1/sessions?limit=500",
		 .token = tok_sue);
	json_t *list = json_object_get(j, "sessions");
	assert_true(json_array_size(list) > 0);
	size_t i;
	json_t *s;
	json_array_foreach(list, i, s)
	    assert_string_equal(jstr(s, "user"), "sue");
	json_decref(j);
	ERR(403, "forbidden", NULL, .method = "GET",
	    .target = "/api/v1/sessions?user=sam", .token = tok_sue);
	j = CALL(200, .method = "GET", .target = "/api/v1/sessions?user=sue",
		 .token = tok_sue);
	json_decref(j);

	/* a reviewer sees anyone's but cancels only its own; an admin
	 * cancels anyone's */
	snprintf(path, sizeof(path), "/api/v1/sessions/%s", sue1);
	j = CALL(200, .method = "GET", .target = path, .token = tok_reviewer);
	json_decref(j);
	snprintf(path, sizeof(path), "/api/v1/sessions/%s/cancel", sue1);
	before = census(sue1);
	ERR(403, "forbidden", "own sessions", .method = "POST", .target = path,
	    .token = tok_reviewer);
	assert_census(before, census(sue1));
	j = CALL(200, .method = "POST", .target = path, .token = tok_admin);
	assert_string_equal(jstr(j, "state"), "cancelled");
	json_decref(j);
}

static void test_session_list(void **state)
{
	(void)state;
	char ids[6][STORE_ID_MAX];
	for (int i = 0; i < 6; i++)
		submit(tok_pat, "paged", ids[i]);

	/* 6 sessions, pages of 3: the second is full and the last. Newest
	 * first; sessions of the same millisecond in id order, so compare
	 * the pages as sets. */
	char target[256];
	const char *before = NULL;
	char next[STORE_ID_MAX] = "";
	bool seen[6] = {false};
	int64_t last_created = INT64_MAX;
	for (int page = 0; page < 2; page++) {
		snprintf(target, sizeof(target),
			 "/api/v1/sessions?user=pat&limit=3%s%s",
			 before ? "&before=" : "", before ? before : "");
		json_t *j = CALL(200, .method = "GET", .target = target,
				 .token = tok_admin);
		json_t *list = json_object_get(j, "sessions");
		assert_int_equal(json_array_size(list), 3);
		for (size_t i = 0; i < 3; i++) {
			json_t *s = json_array_get(list, i);
			int64_t created = json_integer_value(
			    json_object_get(s, "created_ms"));
			assert_true(created <= last_created);
			last_created = created;
			int k = 0;
			while (k < 6 && strcmp(ids[k], jstr(s, "id")) != 0)
				k++;
			assert_true(k < 6);
			assert_false(seen[k]);
			seen[k] = true;
		}
		json_t *nx = json_object_get(j, "next");
		if (page == 0) {
			assert_string_equal(
			    json_string_value(nx),
			    jstr(json_array_get(list, 2), "id"));
			snprintf(next, sizeof(next), "%s",
				 json_string_value(nx));
			before = next;
		} else {
			assert_true(json_is_null(nx));
		}
		json_decref(j);
	}
	/* filters */
	json_t *j = CALL(200, .method = "GET",
			 .target = "/api/v1/sessions?user=pat&state=queued&"
				   "repo=c-hello&limit=500",
			 .token = tok_admin);
	assert_int_equal(json_array_size(json_object_get(j, "sessions")), 6);
	json_decref(j);
	snprintf(target, sizeof(target),
		 "/api/v1/sessions?user=pat&repo=%s&state=cancelled", repo_id);
	j = CALL(200, .method = "GET", .target = target, .token = tok_admin);
	assert_int_equal(json_array_size(json_object_get(j, "sessions")), 0);
	assert_true(json_is_null(json_object_get(j, "next")));
	json_decref(j);
	j = CALL(200, .method = "GET",
		 .target = "/api/v1/sessions?state=", .token = tok_admin);
	json_decref(j);
	/* a submitter's list is its own without asking */
	j = CALL(200, .method = "GET", .target = "/api/v1/sessions",
		 .token = tok_pat);
	assert_int_equal(json_array_size(json_object_get(j, "sessions")), 6);
	json_decref(j);

	struct {
		const char *q, *part;
		unsigned status;
	} bad[] = {
	    {"state=sleeping", "query parameter 'state'", 400},
	    {"limit=0", "query parameter 'limit'", 400},
	    {"limit=501", "query parameter 'limit'", 400},
	    {"limit=-1", "query parameter 'limit'", 400},
	    {"limit=ten", "query parameter 'limit'", 400},
	    {"limit=1&limit=2", "given twice", 400},
	    {"before=..%2Fx", "query parameter 'before'", 400},
	    {"before=s-0000000000000000", "no session", 400},
	    {"user=a%20b", "query parameter 'user'", 400},
	    {"repo=..", "query parameter 'repo'", 400},
	    {"repo=nope", "repository 'nope' not found", 404},
	    {"sort=id", "unknown query parameter 'sort'", 400},
	    {"state=%zz", "percent-encoding", 400},
	    {"state=%00", "percent-encoding", 400},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		snprintf(target, sizeof(target), "/api/v1/sessions?%s",
			 bad[i].q);
		ERR(bad[i].status,
		    bad[i].status == 400 ? "bad_request" : "not_found",
		    bad[i].part, .method = "GET", .target = target,
		    .token = tok_admin);
	}
}

/* Lists carry a cut prompt; the session itself the whole one. */
static void test_list_prompt_cut(void **state)
{
	(void)state;
	_cleanup_free_ char *tok = make_token("long", "submitter");
	size_t n = 5000;
	_cleanup_free_ char *body = wr_malloc(n + 64);
	int off = snprintf(body, 64, "{\"repo\":\"c-hello\",\"prompt\":\"");
	/* 2-byte characters, so the cut must fall between two of them */
	for (size_t i = 0; i < n; i += 2)
		memcpy(body + off + i, "\xc3\xa9", 2);
	strcpy(body + off + n, "\"}");
	json_t *s = CALL(201, .method = "POST", .target = "/api/v1/sessions",
			 .token = tok, .body = body);
	assert_int_equal(strlen(jstr(s, "prompt")), n);
	assert_null(json_object_get(s, "prompt_truncated"));
	json_decref(s);
	json_t *j = CALL(200, .method = "GET", .target = "/api/v1/sessions",
			 .token = tok);
	json_t *first = json_array_get(json_object_get(j, "sessions"), 0);
	assert_int_equal(strlen(jstr(first, "prompt")), 4096);
	assert_true(json_is_true(json_object_get(first, "prompt_truncated")));
	json_decref(j);
}

static void test_events(void **state)
{
	(void)state;
	char id[STORE_ID_MAX], path[160];
	submit(tok_admin, "events", id);
	for (int i = 0; i < 3; i++)
		assert_true(
		    st->ops->event_append(
			st, id, EVENT_OUTPUT,
			"{\"stream\":\"stdout\",\"line\":\"hi\",\"turn\":"
			"1}",
			NULL) > 0);
	snprintf(path, sizeof(path), "/api/v1/sessions/%s/events?format=json",
		 id);
	json_t *j =
	    CALL(200, .method = "GET", .target = path, .token = tok_admin);
	json_t *ev = json_object_get(j, "events");
	assert_int_equal(json_array_size(ev), 4);
	json_t *e0 = json_array_get(ev, 0);
	assert_int_equal(json_integer_value(json_object_get(e0, "seq")), 1);
	assert_string_equal(jstr(e0, "kind"), "state");
	assert_string_equal(jstr(json_object_get(e0, "data"), "state"),
			    "queued");
	json_t *e3 = json_array_get(ev, 3);
	assert_string_equal(jstr(json_object_get(e3, "data"), "line"), "hi");
	assert_true(json_is_null(json_object_get(j, "next_after")));
	json_decref(j);

	snprintf(path, sizeof(path),
		 "/api/v1/sessions/%s/events?format=json&after=2", id);
	j = CALL(200, .method = "GET", .target = path, .token = tok_admin);
	assert_int_equal(json_array_size(json_object_get(j, "events")), 2);
	json_decref(j);
	/* Last-Event-ID wins over ?after= (an EventSource reconnecting) */
	j = CALL(200, .method = "GET", .target = path, .token = tok_admin,
		 .last_event_id = "3");
	assert_int_equal(json_array_size(json_object_get(j, "events")), 1);
	json_decref(j);

	/* the stream: metadata for the transport */
	struct api_response r;
	snprintf(path, sizeof(path), "/api/v1/sessions/%s/events?after=1", id);
	handle(
	    &(struct call){.method = "GET", .target = path, .token = tok_admin},
	    &r);
	assert_int_equal(r.status, 200);
	assert_true(r.stream);
	assert_null(r.body);
	assert_string_equal(r.content_type, "text/event-stream");
	assert_string_equal(r.stream_session, id);
	assert_int_equal(r.stream_after, 1);
	api_response_clear(&r);
	handle(&(struct call){.method = "GET",
			      .target = path,
			      .token = tok_admin,
			      .last_event_id = "4"},
	       &r);
	assert_true(r.stream);
	assert_int_equal(r.stream_after, 4);
	api_response_clear(&r);
	snprintf(path, sizeof(path), "/api/v1/sessions/%s/events?format=sse",
		 id);
	handle(&(struct call){.method = "HEAD",
			      .target = path,
			      .token = tok_admin},
	       &r);
	assert_int_equal(r.status, 200);
	assert_false(r.stream);
	api_response_clear(&r);

	struct {
		const char *q, *lei, *part;
	} bad[] = {
	    {"after=-1", NULL, "query parameter 'after'"},
	    {"after=x", NULL, "query parameter 'after'"},
	    {"after=99999999999999999999", NULL, "query parameter 'after'"},
	    {"format=xml", NULL, "query parameter 'format'"},
	    {"", "abc", "Last-Event-ID"},
	    {"limit=3", NULL, "unknown query parameter 'limit'"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		snprintf(path, sizeof(path), "/api/v1/sessions/%s/events?%s",
			 id, bad[i].q);
		ERR(400, "bad_request", bad[i].part, .method = "GET",
		    .target = path, .token = tok_admin,
		    .last_event_id = bad[i].lei);
	}
	ERR(404, "not_found", NULL, .method = "GET",
	    .target = "/api/v1/sessions/s-00000000000000ff/events",
	    .token = tok_admin);
}

/* Reads the stream until it ends (or max bytes), appending to buf. */
static ssize_t drain(struct api_stream *s, char *buf, size_t size)
{
	size_t len = 0;
	for (;;) {
		ssize_t n = api_stream_read(s, buf + len, size - 1 - len);
		if (n < 0) {
			buf[len] = '\0';
			return n;
		}
		len += (size_t)n;
		assert_true(len < size - 1);
	}
}

static void test_stream(void **state)
{
	(void)state;
	char id[STORE_ID_MAX];
	submit(tok_admin, "streamed", id);

	/* a queued session: nothing pending after seq 1, so a keepalive
	 * goes out first (the headers with it), then new events */
	struct api_stream *s = api_stream_new(api, id, 1);
	assert_non_null(s);
	char buf[8192];
	ssize_t n = api_stream_read(s, buf, sizeof(buf));
	assert_int_equal(n, (ssize_t)strlen(": keepalive\n\n"));
	assert_memory_equal(buf, ": keepalive\n\n", (size_t)n);
	assert_true(st->ops->event_append(st, id, EVENT_OUTPUT,
					  "{\"stream\":\"stderr\",\"line\":"
					  "\"boom\",\"turn\":1}",
					  NULL) == 2);
	n = api_stream_read(s, buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "id: 2\nevent: output\ndata: {\"seq\":2,"));
	assert_non_null(strstr(buf, "\"line\":\"boom\""));
	assert_string_equal(buf + n - 2, "\n\n");
	/* small reads split the event; nothing is lost */
	assert_true(st->ops->event_append(st, id, EVENT_PHASE,
					  "{\"phase\":\"restore\",\"ms\":3}",
					  NULL) == 3);
	char one[1];
	n = api_stream_read(s, one, 1);
	assert_int_equal(n, 1);
	assert_int_equal(one[0], 'i');
	n = api_stream_read(s, buf, sizeof(buf) - 1);
	buf[n] = '\0';
	assert_memory_equal(buf, "d: 3\nevent: phase\n", 18);

	/* idle: keepalives every keepalive_ms (100 in these tests) */
	n = api_stream_read(s, buf, sizeof(buf));
	assert_memory_equal(buf, ": keepalive\n\n", (size_t)n);

	/* once the session rests with everything sent, the stream ends */
	char cancel[128];
	snprintf(cancel, sizeof(cancel), "/api/v1/sessions/%s/cancel", id);
	json_decref(
	    CALL(200, .method = "POST", .target = cancel, .token = tok_admin));
	n = drain(s, buf, sizeof(buf));
	assert_int_equal(n, API_STREAM_END);
	assert_non_null(strstr(buf, "id: 4\nevent: state\n"));
	assert_non_null(strstr(buf, "\"state\":\"cancelled\""));
	api_stream_free(s);

	/* from the start, a rested session's stream is its whole log */
	s = api_stream_new(api, id, 0);
	n = drain(s, buf, sizeof(buf));
	assert_int_equal(n, API_STREAM_END);
	assert_true(strncmp(buf, "id: 1\nevent: state\n", 19) == 0);
	assert_non_null(strstr(buf, "id: 4\n"));
	assert_null(strstr(buf, "keepalive"));
	api_stream_free(s);

	/* a session that does not exist ends at once */
	s = api_stream_new(api, "s-00000000000000aa", 0);
	assert_int_equal(api_stream_read(s, buf, sizeof(buf)), API_STREAM_END);
	api_stream_free(s);
}

static void test_messages_and_cancel(void **state)
{
	(void)state;
	char id[STORE_ID_MAX], msg[160], cancel[160];
	submit(tok_sam, "talk", id);
	snprintf(msg, sizeof(msg), "/api/v1/sessions/%s/messages", id);
	snprintf(cancel, sizeof(cancel), "/api/v1/sessions/%s/cancel", id);

	json_t *j = CALL(202, .method = "POST", .target = msg, .token = tok_sam,
			 .body = "{\"text\":\"also fix the docs\"}");
	assert_true(json_integer_value(json_object_get(j, "id")) > 0);
	assert_string_equal(jstr(json_object_get(j, "session"), "id"), id);
	json_decref(j);

	struct census before = census(id);
	ERR(400, "bad_request", "key 'text' is required", .method = "POST",
	    .target = msg, .token = tok_sam, .body = "{}");
	ERR(400, "bad_request", "body is required", .method = "POST",
	    .target = msg, .token = tok_sam);
	ERR(400, "bad_request", "key 'text': expected a string",
	    .method = "POST", .target = msg, .token = tok_sam,
	    .body = "{\"text\":{\"a\":1}}");
	ERR(400, "bad_request", "unknown key 'user'", .method = "POST",
	    .target = msg, .token = tok_sam,
	    .body = "{\"text\":\"x\",\"user\":\"admin\"}");
	ERR(404, "not_found", NULL, .method = "POST",
	    .target = "/api/v1/sessions/s-00000000000000bb/messages",
	    .token = tok_sam, .body = "{\"text\":\"x\"}");
	ERR(400, "bad_request", "unknown key 'force'", .method = "POST",
	    .target = cancel, .token = tok_sam, .body = "{\"force\":true}");
	ERR(400, "bad_request", "JSON object", .method = "POST",
	    .target = cancel, .token = tok_sam, .body = "[]");
	ERR(405, "method_not_allowed", NULL, .method = "GET", .target = cancel,
	    .token = tok_sam);
	assert_census(before, census(id));

	j = CALL(200, .method = "POST", .target = cancel, .token = tok_sam,
		 .body = "{}");
	assert_string_equal(jstr(j, "state"), "cancelled");
	assert_string_equal(jstr(j, "reason"), "cancelled by user");
	assert_true(json_is_integer(json_object_get(j, "finished_ms")));
	json_decref(j);
	/* finished: no more messages, nothing to cancel */
	before = census(id);
	ERR(409, "conflict", "cancelled", .method = "POST", .target = msg,
	    .token = tok_sam, .body = "{\"text\":\"again\"}");
	ERR(409, "conflict", NULL, .method = "POST", .target = cancel,
	    .token = tok_sam);
	assert_census(before, census(id));
}

/* ---- repositories, snapshots, metrics ---- */

static void test_repositories(void **state)
{
	(void)state;
	const char *t = "/api/v1/repositories";
	json_t *r = CALL(201, .method = "POST", .target = t, .token = tok_admin,
			 .body = "{\"url\":\"https://example.com/pg-app.git\","
				 "\"ref\":\"main\",\"refresh\":\"6h\","
				 "\"agent\":[\"make\",\"test\"]}");
	assert_string_equal(jstr(r, "name"), "pg-app");
	assert_string_equal(jstr(r, "url"), "https://example.com/pg-app.git");
	assert_string_equal(jstr(r, "default_ref"), "main");
	assert_int_equal(json_integer_value(json_object_get(r, "refresh_ms")),
			 6 * 3600 * 1000);
	assert_true(json_is_array(json_object_get(r, "agent")));
	assert_true(json_is_null(json_object_get(r, "last_refresh_ms")));
	char id[STORE_ID_MAX], path[128];
	snprintf(id, sizeof(id), "%s", jstr(r, "id"));
	assert_memory_equal(id, "r-", 2);
	json_decref(r);
	r = CALL(201, .method = "POST", .target = t, .token = tok_admin,
		 .body = "{\"url\":\"/srv/git/other\",\"name\":\"other\","
			 "\"refresh\":60}");
	assert_int_equal(json_integer_value(json_object_get(r, "refresh_ms")),
			 60000);
	assert_true(json_is_null(json_object_get(r, "agent")));
	json_decref(r);

	struct census before = census(NULL);
	struct {
		const char *body, *part;
		unsigned status;
	} bad[] = {
	    {"{\"url\":\"/srv/git/x\",\"name\":\"pg-app\"}", "pg-app", 409},
	    {"{\"name\":\"x\"}", "key 'url' is required", 400},
	    {"{\"url\":\"relative/path\"}", "url", 400},
	    {"{\"url\":\"/srv/git/x\",\"name\":\"bad name\"}", "key 'name'",
	     400},
	    {"{\"url\":\"/srv/git/x\",\"name\":\"r-0123abcd\"}",
	     "look like a repository id", 400},
	    {"{\"url\":\"/srv/git/x\",\"refresh\":true}", "key 'refresh'", 400},
	    {"{\"url\":\"/srv/git/x\",\"refresh\":\"soon\"}", "key 'refresh'",
	     400},
	    {"{\"url\":\"/srv/git/x\",\"refresh\":-5}", "key 'refresh'", 400},
	    {"{\"url\":\"/srv/git/x\",\"agent\":{}}", "key 'agent'", 400},
	    {"{\"url\":\"/srv/git/x\",\"branch\":\"main\"}",
	     "unknown key 'branch'", 400},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ERR(bad[i].status,
		    bad[i].status == 409 ? "conflict" : "bad_request",
		    bad[i].part, .method = "POST", .target = t,
		    .token = tok_admin, .body = bad[i].body);
	assert_census(before, census(NULL));

	json_t *j = CALL(200, .method = "GET", .target = t, .token = tok_sue);
	json_t *list = json_object_get(j, "repositories");
	assert_true(json_array_size(list) >= 3);
	json_decref(j);

	snprintf(path, sizeof(path), "/api/v1/repositories/%s/refresh", id);
	j = CALL(202, .method = "POST", .target = path, .token = tok_admin);
	assert_string_equal(jstr(j, "status"), "queued");
	json_decref(j);
	ERR(404, "not_found", NULL, .method = "POST",
	    .target = "/api/v1/repositories/r-00000000000000cc/refresh",
	    .token = tok_admin);
	/* by name is not an id */
	ERR(404, "not_found", NULL, .method = "POST",
	    .target = "/api/v1/repositories/pg-app/refresh",
	    .token = tok_admin);
	ERR(400, "bad_request", "unknown key", .method = "POST", .target = path,
	    .token = tok_admin, .body = "{\"now\":1}");
}

static void test_snapshots(void **state)
{
	(void)state;
	struct store_snapshot snap = {.created_ms = 1000};
	snprintf(snap.id, sizeof(snap.id), "snap-test-1");
	snprintf(snap.repo_id, sizeof(snap.repo_id), "%s", repo_id);
	memset(snap.commit, 'a', 40);
	snap.timings_json = "{\"build_ms\":1200}";
	assert_int_equal(st->ops->snapshot_add(st, &snap, NULL), 0);

	json_t *j =
	    CALL(200, .method = "GET",
		 .target = "/api/v1/snapshots?repo=c-hello", .token = tok_sam);
	json_t *list = json_object_get(j, "snapshots");
	assert_int_equal(json_array_size(list), 1);
	json_t *s = json_array_get(list, 0);
	assert_string_equal(jstr(s, "id"), "snap-test-1");
	assert_string_equal(jstr(s, "repo_id"), repo_id);
	assert_int_equal(strlen(jstr(s, "commit")), 40);
	assert_int_equal(json_integer_value(json_object_get(
			     json_object_get(s, "timings"), "build_ms")),
			 1200);
	json_decref(j);
	char target[128];
	snprintf(target, sizeof(target), "/api/v1/snapshots?repo=%s", repo_id);
	j = CALL(200, .method = "GET", .target = target, .token = tok_admin);
	assert_int_equal(json_array_size(json_object_get(j, "snapshots")), 1);
	json_decref(j);
	j = CALL(200, .method = "GET", .target = "/api/v1/snapshots",
		 .token = tok_admin);
	assert_true(json_array_size(json_object_get(j, "snapshots")) >= 1);
	json_decref(j);
	ERR(404, "not_found", "nope", .method = "GET",
	    .target = "/api/v1/snapshots?repo=nope", .token = tok_admin);
	ERR(400, "bad_request", "query parameter 'repo'", .method = "GET",
	    .target = "/api/v1/snapshots?repo=%2Fetc%2Fpasswd",
	    .token = tok_admin);
}

static void test_metrics(void **state)
{
	(void)state;
	struct api_response r;
	handle(&(struct call){.method = "GET",
			      .target = "/api/v1/metrics",
			      .token = tok_reviewer},
	       &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.content_type, "text/plain"));
	assert_true(r.body_len > 0);
	assert_non_null(strstr(r.body, "warren_sessions"));
	api_response_clear(&r);
}

/* ---- review: approve, reject, diff, artifacts, stats ---- */

/* Moves session id to review as the runner would (queued, provisioning,
 * running, review). */
static void to_review(const char *id)
{
	const enum session_state path[] = {SESSION_PROVISIONING,
					   SESSION_RUNNING, SESSION_REVIEW};
	for (size_t i = 0; i < ARRAY_SIZE(path); i++) {
		struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
		assert_true(st->ops->session_transition(st, id, -1, path[i],
							&upd, NULL, NULL) > 0);
	}
}

static void test_approve_reject(void **state)
{
	(void)state;
	char id[STORE_ID_MAX], approve[128], reject[128];
	submit(tok_sam, "review me", id);
	snprintf(approve, sizeof(approve), "/api/v1/sessions/%s/approve", id);
	snprintf(reject, sizeof(reject), "/api/v1/sessions/%s/reject", id);
	struct census before = census(id);

	/* a submitter decides on nothing, not even its own change */
	ERR(403, "forbidden", "reviewer or admin role", .method = "POST",
	    .target = approve, .token = tok_sam);
	ERR(403, "forbidden", "reviewer or admin role", .method = "POST",
	    .target = reject, .token = tok_sam, .body = "{\"reason\":\"no\"}");
	ERR(403, "forbidden", NULL, .method = "POST", .target = approve,
	    .token = tok_sue, .body = "{}");
	/* queued is not in review */
	ERR(409, "conflict", "not in review", .method = "POST",
	    .target = approve, .token = tok_reviewer);
	ERR(409, "conflict", "not in review", .method = "POST",
	    .target = approve, .token = tok_admin, .body = "{}");
	ERR(409, "conflict", "not in review", .method = "POST",
	    .target = reject, .token = tok_reviewer,
	    .body = "{\"reason\":\"not like this\"}");
	ERR(409, "conflict", "not in review", .method = "POST",
	    .target = reject, .token = tok_admin);
	/* unknown sessions, bad bodies, methods */
	ERR(404, "not_found", NULL, .method = "POST",
	    .target = "/api/v1/sessions/s-00000000000000dd/approve",
	    .token = tok_reviewer);
	ERR(404, "not_found", NULL, .method = "POST",
	    .target = "/api/v1/sessions/s-00000000000000dd/reject",
	    .token = tok_admin, .body = "{\"reason\":\"x\"}");
	ERR(404, "not_found", NULL, .method = "POST",
	    .target = "/api/v1/sessions/nope/approve", .token = tok_reviewer);
	ERR(400, "bad_request", "unknown key 'force'", .method = "POST",
	    .target = approve, .token = tok_reviewer,
	    .body = "{\"force\":true}");
	ERR(400, "bad_request", "key 'reason': expected a string",
	    .method = "POST", .target = reject, .token = tok_reviewer,
	    .body = "{\"reason\":5}");
	ERR(400, "bad_request", "key 'reason': must not be empty",
	    .method = "POST", .target = reject, .token = tok_reviewer,
	    .body = "{\"reason\":\" \"}");
	ERR(400, "bad_request", "unknown key 'why'", .method = "POST",
	    .target = reject, .token = tok_reviewer, .body = "{\"why\":\"x\"}");
	char big[4096 + 64];
	int off = snprintf(big, sizeof(big), "{\"reason\":\"");
	memset(big + off, 'x', 4097);
	strcpy(big + off + 4097, "\"}");
	ERR(400, "bad_request", "key 'reason': longer than 4096",
	    .method = "POST", .target = reject, .token = tok_reviewer,
	    .body = big);
	ERR(405, "method_not_allowed", "use POST", .method = "GET",
	    .target = approve, .token = tok_reviewer);
	ERR(415, "unsupported_media_type", NULL, .method = "POST",
	    .target = reject, .token = tok_reviewer, .body = "{}",
	    .content_type = "text/plain");
	assert_census(before, census(id));

	/* in review, a reviewer rejects it with a reason of 4096 bytes */
	to_review(id);
	ERR(403, "forbidden", NULL, .method = "POST", .target = reject,
	    .token = tok_sam);
	big[off + 4096] = '"';
	big[off + 4097] = '}';
	big[off + 4098] = '\0';
	json_t *j = CALL(200, .method = "POST", .target = reject,
			 .token = tok_reviewer, .body = big);
	assert_string_equal(jstr(j, "id"), id);
	assert_string_equal(jstr(j, "state"), "rejected");
	assert_int_equal(strlen(jstr(j, "reason")), 4096);
	json_t *decision =
	    json_object_get(json_object_get(j, "outcome"), "decision");
	assert_string_equal(jstr(decision, "by"), "rita");
	assert_true(json_is_integer(json_object_get(decision, "at_ms")));
	json_decref(j);
	/* decided: nothing more to decide */
	ERR(409, "conflict", "not in review", .method = "POST",
	    .target = approve, .token = tok_admin);
	ERR(409, "conflict", "not in review", .method = "POST",
	    .target = reject, .token = tok_admin);

	/* approval: in review without a result there is nothing to approve;
	 * with one that changed nothing, there is nothing to push */
	submit(tok_sam, "nothing to do", id);
	snprintf(approve, sizeof(approve), "/api/v1/sessions/%s/approve", id);
	to_review(id);
	ERR(409, "conflict", NULL, .method = "POST", .target = approve,
	    .token = tok_reviewer);
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	upd.outcome_json = "{\"result\":{\"branch\":\"warren/x\","
			   "\"changed\":false,\"files\":[],"
			   "\"additions\":0,\"deletions\":0}}";
	assert_int_equal(st->ops->session_update(st, id, &upd, NULL), 0);
	j = CALL(200, .method = "POST", .target = approve,
		 .token = tok_reviewer);
	assert_string_equal(jstr(j, "state"), "approved");
	json_t *outcome = json_object_get(j, "outcome");
	assert_string_equal(jstr(json_object_get(outcome, "decision"), "by"),
			    "rita");
	assert_non_null(json_object_get(outcome, "push"));
	json_decref(j);
	ERR(409, "conflict", NULL, .method = "POST", .target = approve,
	    .token = tok_reviewer);
}

/* Writes len bytes of data to <root>/artifacts/<id>/<file> (creating the
 * directory); the path in path_out. */
static void write_artifact_file(const char *id, const char *file,
				const char *data, size_t len,
				char path_out[512])
{
	char dir[256];
	snprintf(dir, sizeof(dir), "%s/artifacts", root);
	assert_true(mkdir(dir, 0700) == 0 || errno == EEXIST);
	snprintf(dir, sizeof(dir), "%s/artifacts/%s", root, id);
	assert_true(mkdir(dir, 0700) == 0 || errno == EEXIST);
	snprintf(path_out, 512, "%s/%s", dir, file);
	FILE *f = fopen(path_out, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* Records artifact name of session id at path. */
static void record_artifact(const char *id, const char *name, const char *path,
			    const char *media_type, int64_t size)
{
	struct store_artifact a = {.name = (char *)name,
				   .path = (char *)path,
				   .media_type = (char *)media_type,
				   .size = size,
				   .created_ms = 1700000000000};
	struct wr_error *err = NULL;
	assert_int_equal(st->ops->artifact_add(st, id, &a, &err), 0);
}

/* A file answer (200): its content type checked, its bytes returned (a
 * new string, *len_out bytes). */
static char *call_file(const char *content_type, size_t *len_out,
		       const struct call *c)
{
	struct api_response r;
	handle(c, &r);
	if (r.status != 200)
		print_message("%s %s: %u %.*s\n", c->method, c->target,
			      r.status, (int)r.body_len, r.body ? r.body : "");
	assert_int_equal(r.status, 200);
	assert_true(r.file);
	assert_null(r.body);
	assert_string_equal(r.content_type, content_type);
	char *buf = wr_malloc(r.file_size + 1);
	assert_non_null(buf);
	ssize_t n = pread(r.file_fd, buf, r.file_size, 0);
	assert_int_equal(n, (ssize_t)r.file_size);
	buf[n] = '\0';
	*len_out = (size_t)n;
	api_response_clear(&r);
	assert_false(r.file);
	return buf;
}

#define FILE_CALL(type, len, ...) \
	call_file(type, len, &(struct call){__VA_ARGS__})

static const char diff_text[] =
    "diff --git a/hello.c b/hello.c\n"
    "--- a/hello.c\n+++ b/hello.c\n@@ -1 +1 @@\n"
    "-int main(void) { return 1; }\n+int main(void) { return 0; }\n";

static void test_diff_and_artifacts(void **state)
{
	(void)state;
	char id[STORE_ID_MAX], other[STORE_ID_MAX], t[256], path[512];
	size_t len;
	submit(tok_sam, "change hello", id);
	submit(tok_admin, "another", other);

	/* before review: no diff, no artifacts */
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/diff", id);
	ERR(404, "not_found", "has no diff", .method = "GET", .target = t,
	    .token = tok_sam);
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/artifacts", id);
	json_t *j = CALL(200, .method = "GET", .target = t, .token = tok_sam);
	assert_int_equal(json_array_size(json_object_get(j, "artifacts")), 0);
	json_decref(j);

	/* the diff, as text/x-diff, byte for byte */
	write_artifact_file(id, "diff.patch", diff_text, strlen(diff_text),
			    path);
	record_artifact(id, "diff.patch", path, "text/x-diff",
			(int64_t)strlen(diff_text));
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/diff", id);
	char *got = FILE_CALL("text/x-diff; charset=utf-8", &len,
			      .method = "GET", .target = t, .token = tok_sam);
	assert_int_equal(len, strlen(diff_text));
	assert_memory_equal(got, diff_text, len);
	free(got);
	got = FILE_CALL("text/x-diff; charset=utf-8", &len, .method = "HEAD",
			.target = t, .token = tok_reviewer);
	free(got);
	/* another submitter's session does not exist for sue */
	ERR(404, "not_found", "not found", .method = "GET", .target = t,
	    .token = tok_sue);
	ERR(400, "bad_request", "unknown query parameter", .method = "GET",
	    .target = "/api/v1/sessions/s-00000000000000dd/diff?x=1",
	    .token = tok_sam);
	ERR(400, "bad_request", "takes no body", .method = "GET", .target = t,
	    .token = tok_sam, .body = "{}");
	ERR(405, "method_not_allowed", NULL, .method = "POST", .target = t,
	    .token = tok_admin);
	ERR(404, "not_found", NULL, .method = "GET",
	    .target = "/api/v1/sessions/s-00000000000000dd/diff",
	    .token = tok_admin);

	/* artifacts with their media types (the default for none, and for
	 * one that is not a media type) */
	const char report[] = "{\"passed\":true}";
	write_artifact_file(id, "verify.json", report, strlen(report), path);
	record_artifact(id, "verify.json", path, "application/json",
			(int64_t)strlen(report));
	const char raw[] = {'\x00', '\x01', '\xff', 'x'};
	write_artifact_file(id, "blob.bin", raw, sizeof(raw), path);
	record_artifact(id, "blob.bin", path, NULL, (int64_t)sizeof(raw));
	write_artifact_file(id, "inject.txt", "hi", 2, path);
	record_artifact(id, "inject.txt", path, "text/plain\r\nX-Evil: 1", 2);

	snprintf(t, sizeof(t), "/api/v1/sessions/%s/artifacts/verify.json", id);
	got = FILE_CALL("application/json", &len, .method = "GET", .target = t,
			.token = tok_sam);
	assert_string_equal(got, report);
	free(got);
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/artifacts/blob.bin", id);
	got = FILE_CALL("application/octet-stream", &len, .method = "GET",
			.target = t, .token = tok_reviewer);
	assert_int_equal(len, sizeof(raw));
	assert_memory_equal(got, raw, sizeof(raw));
	free(got);
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/artifacts/inject.txt", id);
	got = FILE_CALL("application/octet-stream", &len, .method = "GET",
			.target = t, .token = tok_admin);
	free(got);
	ERR(404, "not_found", NULL, .method = "GET", .target = t,
	    .token = tok_sue);

	/* the list: names, types as served, sizes, times; never the path */
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/artifacts", id);
	j = CALL(200, .method = "GET", .target = t, .token = tok_sam);
	json_t *list = json_object_get(j, "artifacts");
	assert_int_equal(json_array_size(list), 4);
	size_t i;
	json_t *a;
	json_array_foreach(list, i, a)
	{
		assert_int_equal(json_object_size(a), 4);
		assert_null(json_object_get(a, "path"));
		assert_true(json_is_integer(json_object_get(a, "size")));
		assert_int_equal(
		    json_integer_value(json_object_get(a, "created_ms")),
		    1700000000000);
		const char *name = jstr(a, "name");
		const char *type = jstr(a, "media_type");
		assert_non_null(name);
		assert_non_null(type);
		if (!strcmp(name, "verify.json")) {
			assert_string_equal(type, "application/json");
			assert_int_equal(
			    json_integer_value(json_object_get(a, "size")),
			    strlen(report));
		} else if (!strcmp(name, "diff.patch")) {
			assert_string_equal(type, "text/x-diff");
		} else {
			assert_string_equal(type, "application/octet-stream");
		}
	}
	json_decref(j);
	ERR(404, "not_found", NULL, .method = "GET", .target = t,
	    .token = tok_sue);
	ERR(404, "not_found", NULL, .method = "GET",
	    .target = "/api/v1/sessions/s-00000000000000dd/artifacts",
	    .token = tok_admin);
	ERR(405, "method_not_allowed", NULL, .method = "POST", .target = t,
	    .token = tok_admin, .body = "{}");
}

/* Every session route, with a token of each role on a session of
 * another user: a submitter finds nothing (404) and decides nothing (403);
 * a reviewer reads and decides but neither messages nor cancels (403);
 * and the routes of admins refuse the other roles (403) before they look
 * at what the request holds. Nothing refused changes anything. */
static void test_roles(void **state)
{
	(void)state;
	char id[STORE_ID_MAX], t[256], path[512];
	size_t len;
	submit(tok_sam, "sam's change", id);
	write_artifact_file(id, "diff.patch", diff_text, strlen(diff_text),
			    path);
	record_artifact(id, "diff.patch", path, "text/x-diff",
			(int64_t)strlen(diff_text));
	to_review(id);

	struct {
		const char *method, *fmt, *body;
	} routes[] = {
	    {"GET", "/api/v1/sessions/%s", NULL},
	    {"HEAD", "/api/v1/sessions/%s", NULL},
	    {"GET", "/api/v1/sessions/%s/events?format=json", NULL},
	    {"GET", "/api/v1/sessions/%s/events", NULL},
	    {"POST", "/api/v1/sessions/%s/messages", "{\"text\":\"hi\"}"},
	    {"POST", "/api/v1/sessions/%s/cancel", NULL},
	    {"POST", "/api/v1/sessions/%s/approve", NULL},
	    {"POST", "/api/v1/sessions/%s/reject", "{\"reason\":\"no\"}"},
	    {"POST", "/api/v1/sessions/%s/check",
	     "{\"fail_to_pass\":[\"true\"]}"},
	    {"GET", "/api/v1/sessions/%s/diff", NULL},
	    {"GET", "/api/v1/sessions/%s/artifacts", NULL},
	    {"GET", "/api/v1/sessions/%s/artifacts/diff.patch", NULL},
	};
	struct census before = census(id);
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
		snprintf(t, sizeof(t), routes[i].fmt, id);
		bool decides = strstr(t, "/approve") || strstr(t, "/reject") ||
			       strstr(t, "/check");
		struct api_response r;
		handle(&(struct call){.method = routes[i].method,
				      .target = t,
				      .token = tok_sue,
				      .body = routes[i].body},
		       &r);
		if (r.status != (decides ? 403u : 404u))
			print_message("sue: %s %s: %u\n", routes[i].method, t,
				      r.status);
		assert_int_equal(r.status, decides ? 403 : 404);
		assert_false(r.stream);
		assert_false(r.file);
		api_response_clear(&r);
	}
	assert_census(before, census(id));
	/* the owner may not decide either */
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/approve", id);
	ERR(403, "forbidden", "reviewer or admin role", .method = "POST",
	    .target = t, .token = tok_sam);

	/* a reviewer reads all of it... */
	snprintf(t, sizeof(t), "/api/v1/sessions/%s", id);
	json_t *j =
	    CALL(200, .method = "GET", .target = t, .token = tok_reviewer);
	assert_string_equal(jstr(j, "user"), "sam");
	json_decref(j);
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/events?format=json", id);
	j = CALL(200, .method = "GET", .target = t, .token = tok_reviewer);
	json_decref(j);
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/diff", id);
	char *got =
	    FILE_CALL("text/x-diff; charset=utf-8", &len, .method = "GET",
		      .target = t, .token = tok_reviewer);
	free(got);
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/artifacts", id);
	j = CALL(200, .method = "GET", .target = t, .token = tok_reviewer);
	json_decref(j);
	snprintf(t, sizeof(t), "/api/v1/sessions?user=sam&limit=500");
	j = CALL(200, .method = "GET", .target = t, .token = tok_reviewer);
	assert_true(json_array_size(json_object_get(j, "sessions")) > 0);
	json_decref(j);
	/* ...but neither messages nor cancels another user's session */
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/messages", id);
	ERR(403, "forbidden", "own sessions", .method = "POST", .target = t,
	    .token = tok_reviewer, .body = "{\"text\":\"hi\"}");
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/cancel", id);
	ERR(403, "forbidden", "own sessions", .method = "POST", .target = t,
	    .token = tok_reviewer);
	/* a check's body is checked before anything runs */
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/check", id);
	ERR(400, "bad_request", "no command", .method = "POST", .target = t,
	    .token = tok_reviewer, .body = "{\"fail_to_pass\":[]}");
	ERR(400, "bad_request", "fail_to_pass[0]", .method = "POST",
	    .target = t, .token = tok_reviewer,
	    .body = "{\"fail_to_pass\":[\"\"]}");
	ERR(400, "bad_request", "not a relative path", .method = "POST",
	    .target = t, .token = tok_reviewer,
	    .body = "{\"pass_to_pass\":[\"true\"],"
		    "\"tests\":{\"a/../b\":\"x\"}}");
	ERR(400, "bad_request", "a file and a directory", .method = "POST",
	    .target = t, .token = tok_reviewer,
	    .body = "{\"pass_to_pass\":[\"true\"],"
		    "\"tests\":{\"a\":\"x\",\"a/b\":\"y\"}}");
	ERR(400, "bad_request", "the content", .method = "POST", .target = t,
	    .token = tok_reviewer,
	    .body = "{\"pass_to_pass\":[\"true\"],\"tests\":{\"a\":1}}");
	ERR(400, "bad_request", "extra", .method = "POST", .target = t,
	    .token = tok_reviewer, .body = "{\"extra\":1}");
	assert_census(before, census(id));
	/* it does decide */
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/reject", id);
	j = CALL(200, .method = "POST", .target = t, .token = tok_reviewer,
		 .body = "{\"reason\":\"not this way\"}");
	assert_string_equal(jstr(j, "state"), "rejected");
	json_decref(j);

	/* its own sessions it messages and cancels like anyone */
	char mine[STORE_ID_MAX];
	submit(tok_reviewer, "rita's own", mine);
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/messages", mine);
	j = CALL(202, .method = "POST", .target = t, .token = tok_reviewer,
		 .body = "{\"text\":\"also this\"}");
	json_decref(j);
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/cancel", mine);
	j = CALL(200, .method = "POST", .target = t, .token = tok_reviewer);
	assert_string_equal(jstr(j, "state"), "cancelled");
	json_decref(j);
	/* an admin messages and cancels anyone's */
	char other[STORE_ID_MAX];
	submit(tok_sue, "sue's", other);
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/messages", other);
	j = CALL(202, .method = "POST", .target = t, .token = tok_admin,
		 .body = "{\"text\":\"from the admin\"}");
	json_decref(j);
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/cancel", other);
	j = CALL(200, .method = "POST", .target = t, .token = tok_admin);
	json_decref(j);

	/* the admins' routes: 403 for the others, whatever the body */
	char refresh[128];
	snprintf(refresh, sizeof(refresh), "/api/v1/repositories/%s/refresh",
		 repo_id);
	struct {
		const char *method, *target, *body;
	} admin_routes[] = {
	    {"POST", "/api/v1/repositories",
	     "{\"url\":\"/srv/git/roles\",\"name\":\"roles\"}"},
	    {"POST", "/api/v1/repositories", "{\"nonsense\":"},
	    {"POST", refresh, NULL},
	    {"POST", "/api/v1/repositories/r-00000000000000ee/refresh", NULL},
	    {"GET", "/api/v1/tokens", NULL},
	    {"HEAD", "/api/v1/tokens", NULL},
	    {"POST", "/api/v1/tokens",
	     "{\"user\":\"evil\",\"role\":\"admin\"}"},
	    {"DELETE", "/api/v1/tokens/admin", NULL},
	    {"DELETE", "/api/v1/tokens/nope", NULL},
	};
	const char *others[] = {tok_reviewer, tok_sam};
	struct census before_admin = census(NULL);
	for (size_t k = 0; k < ARRAY_SIZE(others); k++)
		for (size_t i = 0; i < ARRAY_SIZE(admin_routes); i++) {
			struct api_response r;
			handle(&(struct call){.method = admin_routes[i].method,
					      .target = admin_routes[i].target,
					      .token = others[k],
					      .body = admin_routes[i].body},
			       &r);
			if (r.status != 403)
				print_message("%s %s: %u\n",
					      admin_routes[i].method,
					      admin_routes[i].target, r.status);
			assert_int_equal(r.status, 403);
			api_response_clear(&r);
		}
	assert_census(before_admin, census(NULL));
	/* every token still works: none was revoked */
	const char *all[] = {tok_admin, tok_reviewer, tok_sam, tok_sue};
	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		j = CALL(200, .method = "GET", .target = "/api/v1/healthz",
			 .token = all[i]);
		json_decref(j);
	}
	/* what any role may do */
	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		j = CALL(200, .method = "GET", .target = "/api/v1/repositories",
			 .token = all[i]);
		json_decref(j);
		j = CALL(200, .method = "GET", .target = "/api/v1/snapshots",
			 .token = all[i]);
		json_decref(j);
	}
	/* and an admin does the admins' things */
	j = CALL(202, .method = "POST", .target = refresh, .token = tok_admin);
	json_decref(j);
}

static void test_artifacts_refused(void **state)
{
	(void)state;
	char id[STORE_ID_MAX], other[STORE_ID_MAX], t[256], path[512];
	char target[512];
	submit(tok_admin, "tampered", id);
	submit(tok_admin, "neighbour", other);
	write_artifact_file(id, "ok.txt", "fine", 4, path);
	record_artifact(id, "ok.txt", path, "text/plain", 4);

	/* records pointing outside the session's artifact directory */
	char secret[512];
	snprintf(secret, sizeof(secret), "%s/warren.db", root);
	record_artifact(id, "db", secret, "application/octet-stream", 1);
	record_artifact(id, "passwd", "/etc/passwd", "text/plain", 1);
	write_artifact_file(other, "theirs.txt", "theirs", 6, path);
	snprintf(target, sizeof(target), "%s/artifacts/%s/../%s/theirs.txt",
		 root, id, other);
	record_artifact(id, "dotdot", target, "text/plain", 6);
	record_artifact(id, "relative", "artifacts/x/theirs.txt", NULL, 6);
	/* a symlink inside that leads out */
	snprintf(target, sizeof(target), "%s/artifacts/%s/link", root, id);
	assert_int_equal(symlink("/etc/passwd", target), 0);
	record_artifact(id, "link", target, "text/plain", 1);
	/* the directory itself, a FIFO (must not hang), a missing file */
	snprintf(target, sizeof(target), "%s/artifacts/%s", root, id);
	record_artifact(id, "dir", target, NULL, 0);
	snprintf(target, sizeof(target), "%s/artifacts/%s/fifo", root, id);
	assert_int_equal(mkfifo(target, 0600), 0);
	record_artifact(id, "fifo", target, NULL, 0);
	snprintf(target, sizeof(target), "%s/artifacts/%s/gone", root, id);
	record_artifact(id, "gone", target, NULL, 0);
	/* a diff.patch record outside: the diff is refused too */
	record_artifact(id, "diff.patch", "/etc/passwd", "text/x-diff", 1);

	const char *refused[] = {"db",	 "passwd", "dotdot", "relative",
				 "link", "dir",	   "fifo",   "gone"};
	for (size_t i = 0; i < ARRAY_SIZE(refused); i++) {
		snprintf(t, sizeof(t), "/api/v1/sessions/%s/artifacts/%s", id,
			 refused[i]);
		ERR(404, "not_found", "not found", .method = "GET", .target = t,
		    .token = tok_admin);
	}
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/diff", id);
	ERR(404, "not_found", NULL, .method = "GET", .target = t,
	    .token = tok_admin);

	/* names that cannot be an artifact's are not looked for */
	const char *bad_names[] = {
	    "..",
	    ".hidden",
	    "a..b",
	    "%2e%2e",
	    "a%2Fb",
	    "-x",
	    "a%20b",
	    "..%2F..%2Fwarren.db",
	    "x%0a",
	    "\xc3\xa4.txt",
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "a"};
	for (size_t i = 0; i < ARRAY_SIZE(bad_names); i++) {
		snprintf(t, sizeof(t), "/api/v1/sessions/%s/artifacts/%s", id,
			 bad_names[i]);
		ERR(404, "not_found", "no such artifact", .method = "GET",
		    .target = t, .token = tok_admin);
	}
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/artifacts/nothing.txt", id);
	ERR(404, "not_found", "has no artifact nothing.txt", .method = "GET",
	    .target = t, .token = tok_admin);
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/artifacts/ok.txt/x", id);
	ERR(404, "not_found", "no such route", .method = "GET", .target = t,
	    .token = tok_admin);
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/artifacts/", id);
	ERR(404, "not_found", "no such route", .method = "GET", .target = t,
	    .token = tok_admin);

	/* past the cap: refused, not streamed (a sparse file) */
	write_artifact_file(id, "huge.log", "", 0, path);
	assert_int_equal(truncate(path, 64ll * 1024 * 1024 + 1), 0);
	record_artifact(id, "huge.log", path, "text/plain",
			64ll * 1024 * 1024 + 1);
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/artifacts/huge.log", id);
	ERR(409, "conflict", "too large to serve", .method = "GET", .target = t,
	    .token = tok_admin);
	assert_int_equal(truncate(path, 64ll * 1024 * 1024), 0);
	struct api_response r;
	handle(&(struct call){.method = "GET", .target = t, .token = tok_admin},
	       &r);
	assert_int_equal(r.status, 200);
	assert_true(r.file);
	assert_int_equal(r.file_size, 64ll * 1024 * 1024);
	api_response_clear(&r);

	/* the good one still comes through */
	snprintf(t, sizeof(t), "/api/v1/sessions/%s/artifacts/ok.txt", id);
	size_t len;
	char *got = FILE_CALL("text/plain", &len, .method = "GET", .target = t,
			      .token = tok_admin);
	assert_string_equal(got, "fine");
	free(got);

	/* an API without a data directory serves none */
	struct api *bare = NULL;
	struct api_config ac = {.st = st, .ctl = ctl};
	assert_int_equal(api_new(&ac, &bare, NULL), 0);
	struct api *saved = api;
	api = bare;
	ERR(404, "not_found", "not found", .method = "GET", .target = t,
	    .token = tok_admin);
	api = saved;
	api_stop(bare);
}

static void test_stats(void **state)
{
	(void)state;
	json_t *j = CALL(200, .method = "GET", .target = "/api/v1/stats",
			 .token = tok_admin);
	assert_true(json_is_object(j));
	json_decref(j);
	j = CALL(200, .method = "GET", .target = "/api/v1/stats",
		 .token = tok_sam);
	json_decref(j);
	ERR(400, "bad_request", "unknown query parameter", .method = "GET",
	    .target = "/api/v1/stats?since=1", .token = tok_admin);
	ERR(405, "method_not_allowed", NULL, .method = "POST",
	    .target = "/api/v1/stats", .token = tok_admin, .body = "{}");
	ERR(401, "unauthorized", NULL, .method = "GET",
	    .target = "/api/v1/stats");
}

/* ---- through the real server ---- */

/* Sends raw (len bytes) to 127.0.0.1:port and reads until the server
 * closes; the answer in a new string. */
static char *http_raw(uint16_t port, const char *raw, size_t len)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct timeval tv = {.tv_sec = 10};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	size_t off = 0;
	while (off < len) {
		ssize_t n = send(fd, raw + off, len - off, MSG_NOSIGNAL);
		if (n <= 0)
			break; /* the server may stop reading (413) */
		off += (size_t)n;
	}
	size_t cap = 65536, got = 0;
	char *buf = wr_malloc(cap);
	assert_non_null(buf);
	for (;;) {
		if (got + 1 == cap) {
			cap *= 2;
			buf = wr_realloc(buf, cap);
			assert_non_null(buf);
		}
		ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	close(fd);
	return buf;
}

static char *http(uint16_t port, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static char *http(uint16_t port, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *raw = wr_vasprintf(fmt, ap);
	va_end(ap);
	assert_non_null(raw);
	return http_raw(port, raw, strlen(raw));
}

struct stream_client {
	uint16_t port;
	char id[STORE_ID_MAX];
	char *answer;
};

static void *stream_client_main(void *arg)
{
	struct stream_client *sc = arg;
	sc->answer = http(sc->port,
			  "GET /api/v1/sessions/%s/events HTTP/1.1\r\n"
			  "Host: x\r\nAuthorization: Bearer %s\r\n\r\n",
			  sc->id, tok_admin);
	return NULL;
}

/* A POST of body to target through the server; the answer. */
static char *http_post(uint16_t port, const char *target, const char *body)
{
	return http(port,
		    "POST %s HTTP/1.1\r\nHost: x\r\n"
		    "Authorization: Bearer %s\r\n"
		    "Content-Type: application/json\r\n"
		    "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
		    target, tok_admin, strlen(body), body);
}

static void test_server(void **state)
{
	(void)state;
	struct api_config ac = {.st = st,
				.ctl = ctl,
				.port = 0,
				.max_body = 1024,
				.keepalive_ms = 100,
				.data_dir = root};
	struct api *srv = NULL;
	struct wr_error *err = NULL;
	assert_int_equal(api_start(&ac, &srv, &err), 0);
	uint16_t port = api_port(srv);
	assert_true(port > 0);

	char *res =
	    http(port,
		 "GET /api/v1/healthz HTTP/1.1\r\nHost: x\r\n"
		 "Authorization: Bearer %s\r\nConnection: close\r\n\r\n",
		 tok_admin);
	assert_true(strncmp(res, "HTTP/1.1 200", 12) == 0);
	assert_non_null(strstr(res, "\"status\":\"ok\""));
	free(res);
	res = http(port, "GET /api/v1/healthz HTTP/1.1\r\nHost: x\r\n"
			 "Connection: close\r\n\r\n");
	assert_true(strncmp(res, "HTTP/1.1 401", 12) == 0);
	assert_non_null(strstr(res, "WWW-Authenticate: Bearer"));
	free(res);

	/* the raw target reaches the router: no ".." resolution, no early
	 * decoding */
	struct census before = census(NULL);
	const char *eve = "{\"user\":\"eve\",\"role\":\"admin\"}";
	res = http_post(port, "/api/v1/sessions/%2e%2e/tokens", eve);
	assert_true(strncmp(res, "HTTP/1.1 404", 12) == 0);
	free(res);
	res = http_post(port, "/api/v1/sessions/../tokens", eve);
	assert_true(strncmp(res, "HTTP/1.1 404", 12) == 0);
	free(res);
	res = http_post(port, "/api/v1/./tokens", eve);
	assert_true(strncmp(res, "HTTP/1.1 404", 12) == 0);
	free(res);
	res = http(port,
		   "GET /api/v1/sessions?state=%%71ueued&limit=1 HTTP/1.1\r\n"
		   "Host: x\r\nAuthorization: Bearer %s\r\n"
		   "Connection: close\r\n\r\n",
		   tok_admin);
	assert_true(strncmp(res, "HTTP/1.1 200", 12) == 0);
	free(res);

	/* the body cap: a declared length is refused before reading, a
	 * chunked body once it passes the cap */
	res = http(port,
		   "POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\n"
		   "Authorization: Bearer %s\r\n"
		   "Content-Type: application/json\r\n"
		   "Content-Length: 5000000\r\n\r\n{",
		   tok_admin);
	assert_true(strncmp(res, "HTTP/1.1 413", 12) == 0);
	assert_non_null(strstr(res, "payload_too_large"));
	free(res);
	char chunked[8192];
	int off = snprintf(chunked, sizeof(chunked),
			   "POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\n"
			   "Authorization: Bearer %s\r\n"
			   "Content-Type: application/json\r\n"
			   "Transfer-Encoding: chunked\r\n"
			   "Connection: close\r\n\r\n",
			   tok_admin);
	for (int i = 0; i < 3; i++) {
		off += snprintf(chunked + off, sizeof(chunked) - (size_t)off,
				"400\r\n");
		memset(chunked + off, ' ', 1024);
		off += 1024;
		off += snprintf(chunked + off, sizeof(chunked) - (size_t)off,
				"\r\n");
	}
	off +=
	    snprintf(chunked + off, sizeof(chunked) - (size_t)off, "0\r\n\r\n");
	res = http_raw(port, chunked, (size_t)off);
	assert_true(strncmp(res, "HTTP/1.1 413", 12) == 0);
	free(res);
	assert_census(before, census(NULL));

	/* an event stream over HTTP: chunked, ends when the session rests */
	char id[STORE_ID_MAX];
	submit(tok_admin, "over http", id);
	struct api_response r;
	char cancel[128];
	snprintf(cancel, sizeof(cancel), "/api/v1/sessions/%s/cancel", id);
	handle(&(struct call){.method = "POST",
			      .target = cancel,
			      .token = tok_admin},
	       &r);
	assert_int_equal(r.status, 200);
	api_response_clear(&r);
	res = http(port,
		   "GET /api/v1/sessions/%s/events HTTP/1.1\r\nHost: x\r\n"
		   "Authorization: Bearer %s\r\nConnection: close\r\n\r\n",
		   id, tok_admin);
	assert_true(strncmp(res, "HTTP/1.1 200", 12) == 0);
	assert_non_null(strstr(res, "Content-Type: text/event-stream"));
	assert_non_null(strstr(res, "Cache-Control: no-cache"));
	assert_non_null(strstr(res, "id: 1\nevent: state\n"));
	assert_non_null(strstr(res, "id: 2\nevent: state\n"));
	assert_non_null(strstr(res, "\r\n0\r\n\r\n")); /* last chunk */
	free(res);
	res = http(port,
		   "GET /api/v1/sessions/%s/events HTTP/1.1\r\nHost: x\r\n"
		   "Authorization: Bearer %s\r\nLast-Event-ID: 1\r\n"
		   "Connection: close\r\n\r\n",
		   id, tok_admin);
	assert_null(strstr(res, "id: 1\n"));
	assert_non_null(strstr(res, "id: 2\n"));
	free(res);

	/* a file answer: the artifact's bytes, its type, no sniffing */
	char fid[STORE_ID_MAX], fpath[512], clen[64];
	submit(tok_admin, "diff over http", fid);
	write_artifact_file(fid, "diff.patch", diff_text, strlen(diff_text),
			    fpath);
	record_artifact(fid, "diff.patch", fpath, "text/x-diff",
			(int64_t)strlen(diff_text));
	snprintf(clen, sizeof(clen), "Content-Length: %zu\r\n",
		 strlen(diff_text));
	res = http(port,
		   "GET /api/v1/sessions/%s/diff HTTP/1.1\r\nHost: x\r\n"
		   "Authorization: Bearer %s\r\nConnection: close\r\n\r\n",
		   fid, tok_admin);
	assert_true(strncmp(res, "HTTP/1.1 200", 12) == 0);
	assert_non_null(
	    strstr(res, "Content-Type: text/x-diff; charset=utf-8\r\n"));
	assert_non_null(strstr(res, "X-Content-Type-Options: nosniff\r\n"));
	assert_non_null(strstr(res, clen));
	const char *payload = strstr(res, "\r\n\r\n");
	assert_non_null(payload);
	assert_string_equal(payload + 4, diff_text);
	free(res);
	res = http(port,
		   "HEAD /api/v1/sessions/%s/diff HTTP/1.1\r\nHost: x\r\n"
		   "Authorization: Bearer %s\r\nConnection: close\r\n\r\n",
		   fid, tok_admin);
	assert_true(strncmp(res, "HTTP/1.1 200", 12) == 0);
	assert_non_null(strstr(res, clen));
	payload = strstr(res, "\r\n\r\n");
	assert_non_null(payload);
	assert_string_equal(payload + 4, "");
	free(res);
	res = http(port,
		   "GET /api/v1/sessions/%s/artifacts/nope HTTP/1.1\r\n"
		   "Host: x\r\nAuthorization: Bearer %s\r\n"
		   "Connection: close\r\n\r\n",
		   fid, tok_admin);
	assert_true(strncmp(res, "HTTP/1.1 404", 12) == 0);
	free(res);

	/* the port is taken: a clear error */
	struct api *other = NULL;
	ac.port = port;
	assert_true(api_start(&ac, &other, &err) == -EADDRINUSE);
	assert_non_null(err);
	char want[64];
	snprintf(want, sizeof(want), "127.0.0.1:%u", port);
	assert_non_null(strstr(err->msg, want));
	assert_non_null(strstr(err->msg, "Address already in use"));
	wr_error_free(err);
	err = NULL;
	ac.listen_addr = "localhost";
	assert_int_equal(api_start(&ac, &other, &err), -EINVAL);
	assert_true(err && err->bad_input);
	wr_error_free(err);

	/* a stream open while the server stops ends within a second or so */
	struct stream_client sc = {.port = port};
	submit(tok_admin, "live", sc.id);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, stream_client_main, &sc), 0);
	usleep(300 * 1000);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	api_stop(srv);
	pthread_join(th, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec < 3);
	assert_non_null(sc.answer);
	assert_true(strncmp(sc.answer, "HTTP/1.1 200", 12) == 0);
	assert_non_null(strstr(sc.answer, ": keepalive\n\n"));
	free(sc.answer);
}

/* The web UI's files: served from the web directory without a token, with
 * the security headers' flag; nothing outside it, no hidden file, no
 * unknown type, no symlink; other methods 405 on a page, 404 elsewhere. */
static void test_web(void **state)
{
	(void)state;
	char web[256], path[512];
	snprintf(web, sizeof(web), "%s/web", root);
	assert_int_equal(mkdir(web, 0755), 0);
	snprintf(path, sizeof(path), "%s/js", web);
	assert_int_equal(mkdir(path, 0755), 0);
	const char *files[][2] = {
	    {"index.html", "<!doctype html><p>hi</p>"},
	    {"js/app.js", "export const x = 1;"},
	    {".hidden.js", "secret"},
	    {"notes.exe", "MZ"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		snprintf(path, sizeof(path), "%s/%s", web, files[i][0]);
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fputs(files[i][1], f);
		fclose(f);
	}
	char outside[512], link[512];
	snprintf(outside, sizeof(outside), "%s/warren.db", root);
	snprintf(link, sizeof(link), "%s/db.js", web);
	assert_int_equal(symlink(outside, link), 0);

	struct api_config ac = {.st = st, .ctl = ctl, .web_dir = web};
	struct api *w = NULL;
	assert_int_equal(api_new(&ac, &w, NULL), 0);
	struct {
		const char *method, *path;
		unsigned status;
		const char *type;
	} cases[] = {
	    {"GET", "/", 200, "text/html; charset=utf-8"},
	    {"GET", "/index.html", 200, "text/html; charset=utf-8"},
	    {"HEAD", "/js/app.js", 200, "text/javascript; charset=utf-8"},
	    {"POST", "/index.html", 405, NULL},
	    {"DELETE", "/nothing.html", 404, NULL},
	    {"GET", "/.hidden.js", 404, NULL},
	    {"GET", "/notes.exe", 404, NULL},
	    {"GET", "/db.js", 404, NULL},
	    {"GET", "/../warren.db", 404, NULL},
	    {"GET", "/js/../index.html", 404, NULL},
	    {"GET", "/js//app.js", 404, NULL},
	    {"GET", "/js/", 404, NULL},
	    {"GET", "/%2e%2e/warren.db", 404, NULL},
	    {"GET", "/missing.js", 404, NULL},
	    {"GET", "", 404, NULL},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct api_request req = {.method = cases[i].method,
					  .path = cases[i].path};
		struct api_response r;
		assert_int_equal(api_handle(w, &req, &r), 0);
		if (r.status != cases[i].status)
			print_message("%s %s: %u\n", cases[i].method,
				      cases[i].path, r.status);
		assert_int_equal(r.status, cases[i].status);
		if (cases[i].type) {
			assert_string_equal(r.content_type, cases[i].type);
			assert_true(r.web);
			/* HEAD as well: its Content-Length is the file's */
			assert_true(r.file);
		} else {
			assert_false(r.web);
			assert_false(r.file);
		}
		if (r.status == 405)
			assert_string_equal(r.allow, "GET, HEAD");
		api_response_clear(&r);
	}
	/* the file served is the file */
	struct api_request req = {.method = "GET", .path = "/js/app.js"};
	struct api_response r;
	assert_int_equal(api_handle(w, &req, &r), 0);
	assert_true(r.file);
	char buf[64] = {0};
	assert_int_equal(pread(r.file_fd, buf, sizeof(buf) - 1, 0),
			 (ssize_t)strlen(files[1][1]));
	assert_string_equal(buf, files[1][1]);
	assert_int_equal(r.file_size, strlen(files[1][1]));
	api_response_clear(&r);
	/* the API keeps its tokens: the web directory opens nothing */
	ERR(401, "unauthorized", NULL, .method = "GET",
	    .target = "/api/v1/whoami");
	api_stop(w);

	/* a web directory that does not exist is an error at start */
	struct wr_error *err = NULL;
	ac.web_dir = "/nonexistent/warren/web";
	assert_int_equal(api_new(&ac, &w, &err), -ENOENT);
	assert_non_null(strstr(err->msg, "/nonexistent/warren/web"));
	wr_error_free(err);
	/* without one, every page is a 404 */
	req.path = "/";
	assert_int_equal(api_handle(api, &req, &r), 0);
	assert_int_equal(r.status, 404);
	api_response_clear(&r);
}

/* Reads s into buf (from its start) until needle is in it; except must
 * not show up on the way (NULL: no check). */
static void read_until(struct api_stream *s, char *buf, size_t size,
		       const char *needle, const char *except)
{
	size_t len = 0;
	buf[0] = '\0';
	while (!strstr(buf, needle)) {
		ssize_t n = api_stream_read(s, buf + len, size - 1 - len);
		assert_true(n > 0);
		len += (size_t)n;
		buf[len] = '\0';
		if (except)
			assert_null(strstr(buf, except));
	}
}

static void test_whoami_and_sessions_stream(void **state)
{
	(void)state;
	json_t *j = CALL(200, .method = "GET", .target = "/api/v1/whoami",
			 .token = tok_sam);
	assert_string_equal(jstr(j, "user"), "sam");
	assert_string_equal(jstr(j, "role"), "submitter");
	json_decref(j);
	j = CALL(200, .method = "GET", .target = "/api/v1/whoami",
		 .token = tok_reviewer);
	assert_string_equal(jstr(j, "role"), "reviewer");
	json_decref(j);
	ERR(400, "bad_request", NULL, .method = "GET",
	    .target = "/api/v1/whoami?x=1", .token = tok_sam);

	/* the route: a stream of every session, a submitter's of its own */
	struct api_response r;
	handle(&(struct call){.method = "GET", .target = "/api/v1/events",
			      .token = tok_sam},
	       &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.content_type, "text/event-stream");
	assert_true(r.stream && r.stream_sessions);
	assert_string_equal(r.stream_user, "sam");
	api_response_clear(&r);
	handle(&(struct call){.method = "GET", .target = "/api/v1/events",
			      .token = tok_reviewer},
	       &r);
	assert_true(r.stream && r.stream_sessions);
	assert_string_equal(r.stream_user, "");
	api_response_clear(&r);

	char mine[STORE_ID_MAX], theirs[STORE_ID_MAX];
	submit(tok_sam, "sam's, streamed", mine);
	submit(tok_sue, "sue's, not for sam", theirs);
	struct api_stream *s = api_stream_new_sessions(api, "sam");
	assert_non_null(s);
	char buf[65536];
	/* the first round, then ready */
	read_until(s, buf, sizeof(buf), "event: ready\n", NULL);
	assert_non_null(strstr(buf, mine));
	assert_null(strstr(buf, theirs));
	assert_null(strstr(buf, "\"user\":\"sue\""));
	assert_true(strncmp(buf, "event: session\ndata: {", 22) == 0);
	/* a change is sent again: the cancelled state */
	char cancel[128];
	snprintf(cancel, sizeof(cancel), "/api/v1/sessions/%s/cancel", mine);
	json_decref(
	    CALL(200, .method = "POST", .target = cancel, .token = tok_sam));
	/* keepalives may come between; never another user's session */
	read_until(s, buf, sizeof(buf), "\"state\":\"cancelled\"", theirs);
	assert_non_null(strstr(buf, mine));
	api_stream_free(s);

	/* a reviewer's stream has both */
	s = api_stream_new_sessions(api, "");
	read_until(s, buf, sizeof(buf), "event: ready\n", NULL);
	assert_non_null(strstr(buf, mine));
	assert_non_null(strstr(buf, theirs));
	api_stream_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_auth),
	    cmocka_unit_test(test_token_hash_and_create),
	    cmocka_unit_test(test_tokens_route),
	    cmocka_unit_test(test_tokens_list_and_revoke),
	    cmocka_unit_test(test_token_expiry),
	    cmocka_unit_test(test_routing),
	    cmocka_unit_test(test_bodies),
	    cmocka_unit_test(test_session_create),
	    cmocka_unit_test(test_session_create_errors),
	    cmocka_unit_test(test_session_unregistered_repo),
	    cmocka_unit_test(test_session_visibility),
	    cmocka_unit_test(test_session_list),
	    cmocka_unit_test(test_list_prompt_cut),
	    cmocka_unit_test(test_events),
	    cmocka_unit_test(test_stream),
	    cmocka_unit_test(test_messages_and_cancel),
	    cmocka_unit_test(test_repositories),
	    cmocka_unit_test(test_snapshots),
	    cmocka_unit_test(test_metrics),
	    cmocka_unit_test(test_approve_reject),
	    cmocka_unit_test(test_diff_and_artifacts),
	    cmocka_unit_test(test_roles),
	    cmocka_unit_test(test_artifacts_refused),
	    cmocka_unit_test(test_stats),
	    cmocka_unit_test(test_web),
	    cmocka_unit_test(test_whoami_and_sessions_stream),
	    cmocka_unit_test(test_server),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

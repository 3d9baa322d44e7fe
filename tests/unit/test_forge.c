/* test_forge.c - pull requests through a forge (src/review/forge.c).
 *
 * The client talks to tests/tools/forge_server.py, a local stand-in for
 * GitHub's REST API that serves a recording this test writes and logs
 * every request it gets: the request the client sent (method, path,
 * headers, the JSON fields), a 201 parsed, a 422 "already exists" looked
 * up and the same pull request returned (approving twice), 5xx and a
 * dropped connection retried, Retry-After honoured, retries exhausted, a
 * 403, a 401 and other 4xx refused at once with GitHub's message and
 * bad_input, a redirect not followed, bad repository, branch and URL
 * names refused before any request, malformed and oversized responses, a
 * server that is down, the token in no error message (even when the
 * server echoes it), and every allocation failing in turn.
 *
 * Run from the top of the tree (the script is tests/tools/forge_server.py;
 * $WARREN_FORGE_SERVER overrides); scratch files in /tmp, removed at the
 * end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "standin.h"

#include "review/forge.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOKEN "ghp_TestSecret0123456789abcdef"
#define REPO "octo/hello-world"
#define HEAD "warren/01j9zq3k4m"

static char root[] = "/tmp/warren-unit-forge.XXXXXX";
static char recording_path[256], log_path[256];
static const char *script = "tests/tools/forge_server.py";
static pid_t server_pid = -1;
static char api_url[128];

/* ---- helpers ---- */

/* The recording: {'routes': {ROUTES}}, ROUTES written with '. */
static void write_recording(const char *routes)
{
	_cleanup_free_ char *text = wr_asprintf("{'routes': {%s}}", routes);
	assert_non_null(text);
	_cleanup_free_ char *s = standin_dq(text);
	json_error_t jerr;
	json_t *check = json_loads(s, 0, &jerr);
	if (!check)
		fail_msg("bad JSON in the test: %s: %s", jerr.text, s);
	json_decref(check);
	standin_write_text(recording_path, s);
}

static void stop_server(void)
{
	standin_stop(&server_pid);
}

static int teardown(void **state)
{
	(void)state;
	stop_server();
	return 0;
}

/* Start forge_server.py on a free port with the recording written last;
 * the request log starts empty. */
static void start_server(const char *require_token)
{
	int port = standin_start(script, recording_path, log_path, "--require-token",
				 require_token, &server_pid);
	snprintf(api_url, sizeof(api_url), "http://127.0.0.1:%d", port);
}

static struct forge_config github(void)
{
	return (struct forge_config){
	    .kind = "github",
	    .api_url = api_url,
	    .repo = REPO,
	    .token = TOKEN,
	    .timeout_ms = 10000,
	    .retry_backoff_ms = 1,
	};
}

/* The requests forge_server.py received, one JSON object each. */
static json_t *server_log(void)
{
	json_t *list = json_array();
	FILE *f = fopen(log_path, "re");
	if (!f)
		return list;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		json_t *one = json_loads(line, 0, NULL);
		assert_non_null(one);
		json_array_append_new(list, one);
	}
	free(line);
	fclose(f);
	return list;
}

static const char *str_at(const json_t *doc, const char *key)
{
	return json_string_value(json_object_get(doc, key));
}

static const char *header(const json_t *request, const char *name)
{
	const json_t *headers = json_object_get(request, "headers");
	const char *key;
	const json_t *value;
	json_object_foreach((json_t *)headers, key, value)
	{
		if (!strcasecmp(key, name))
			return json_string_value(value);
	}
	return NULL;
}

/* One call that must succeed; returns *out (the caller frees it). */
static json_t *open_ok(const struct forge_config *f, const char *head,
		       const char *title, const char *body)
{
	json_t *out = NULL;
	struct wr_error *err = NULL;
	int r = forge_open_pull_request(f, head, title, body, &out, &err);
	if (r < 0)
		fail_msg("forge_open_pull_request: %d %s", r,
			 err ? err->msg : "?");
	assert_int_equal(r, 0);
	assert_null(err);
	assert_non_null(out);
	return out;
}

/* Never the token, in any error. */
static void assert_no_token(const struct wr_error *err)
{
	assert_non_null(err);
	if (strstr(err->msg, TOKEN) || strstr(err->msg, "TestSecret"))
		fail_msg("the token is in the error: %s", err->msg);
}

static void assert_says(const struct wr_error *err, const char *says)
{
	assert_non_null(err);
	if (!strstr(err->msg, says))
		fail_msg("error '%s' does not say '%s'", err->msg, says);
}

/* One call that must fail with want (0: any) saying says; returns the
 * error (the caller frees it). */
static struct wr_error *open_fails(const struct forge_config *f,
				   const char *head, int want, const char *says)
{
	json_t *out = NULL;
	struct wr_error *err = NULL;
	int r = forge_open_pull_request(f, head, "Fix the parser", "Body.",
					&out, &err);
	assert_null(out); /* written only on success */
	if (r >= 0)
		fail_msg("forge_open_pull_request succeeded, expected '%s'",
			 says);
	assert_non_null(err);
	if (want && r != want)
		fail_msg("returned %d, expected %d (%s)", r, want, err->msg);
	assert_says(err, says);
	assert_no_token(err);
	return err;
}

static void assert_pull(const json_t *out, json_int_t number, bool created)
{
	char html[128], api[128];
	snprintf(html, sizeof(html), "https://github.com/" REPO "/pull/%lld",
		 (long long)number);
	snprintf(api, sizeof(api),
		 "https://api.github.com/repos/" REPO "/pulls/%lld",
		 (long long)number);
	assert_string_equal(str_at(out, "url"), html);
	assert_string_equal(str_at(out, "api_url"), api);
	assert_int_equal(json_integer_value(json_object_get(out, "number")),
			 number);
	assert_true(json_is_boolean(json_object_get(out, "created")));
	assert_int_equal(json_is_true(json_object_get(out, "created")),
			 created);
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static int remove_entry(const char *path, const struct stat *st, int flag,
			struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	const char *env = getenv("WARREN_FORGE_SERVER");
	if (env && *env)
		script = env;
	if (access(script, R_OK) < 0) {
		fprintf(stderr,
			"%s: not found (run from the top of the tree)\n",
			script);
		return -1;
	}
	if (!mkdtemp(root))
		return -1;
	snprintf(recording_path, sizeof(recording_path), "%s/recording.json",
		 root);
	snprintf(log_path, sizeof(log_path), "%s/requests.jsonl", root);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	stop_server();
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

/* ---- recorded answers, as GitHub gives them ---- */

#define POST_PULLS "'POST /repos/" REPO "/pulls'"
#define GET_PULLS "'GET /repos/" REPO "/pulls'"

/* A pull request object, trimmed to what matters and a little more. */
#define PULL(n)                                                         \
	"{'id': 1" #n "00, 'number': " #n ", 'state': 'open', "         \
	"'url': 'https://api.github.com/repos/" REPO "/pulls/" #n "', " \
	"'html_url': 'https://github.com/" REPO "/pull/" #n "', "       \
	"'title': 'Fix the parser', 'draft': false, "                   \
	"'head': {'ref': '" HEAD "', 'label': 'octo:" HEAD "'}, "       \
	"'base': {'ref': 'main', 'label': 'octo:main'}}"

#define CREATED(n) "{'status': 201, 'body': " PULL(n) "}"

#define EXISTS                                                              \
	"{'status': 422, 'body': {'message': 'Validation Failed', "         \
	"'errors': [{'resource': 'PullRequest', 'code': 'custom', "         \
	"'message': 'A pull request already exists for octo:" HEAD ".'}], " \
	"'documentation_url': 'https://docs.github.com/rest/pulls/"         \
	"pulls#create-a-pull-request', 'status': '422'}}"

/* ---- creating ---- */

static void test_created(void **state)
{
	(void)state;
	write_recording(POST_PULLS ": [" CREATED(7) "]");
	start_server(TOKEN);
	struct forge_config f = github();
	json_t *out = open_ok(&f, HEAD, "Fix the parser \xe2\x9c\x93",
			      "Session 01j9zq3k4m.\n\n- verify: passed\n");
	assert_pull(out, 7, true);
	json_decref(out);

	/* what the client sent */
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 1);
	const json_t *rq = json_array_get(log, 0);
	assert_string_equal(str_at(rq, "method"), "POST");
	assert_string_equal(str_at(rq, "path"), "/repos/" REPO "/pulls");
	assert_int_equal(json_object_size(json_object_get(rq, "query")), 0);
	assert_string_equal(str_at(rq, "authorization"), "Bearer " TOKEN);
	assert_string_equal(header(rq, "Accept"),
			    "application/vnd.github+json");
	assert_string_equal(header(rq, "X-GitHub-Api-Version"), "2022-11-28");
	assert_string_equal(header(rq, "User-Agent"), "warren");
	assert_string_equal(header(rq, "Content-Type"), "application/json");
	const json_t *body = json_object_get(rq, "body");
	assert_int_equal(json_object_size(body), 5);
	assert_string_equal(str_at(body, "title"),
			    "Fix the parser \xe2\x9c\x93");
	assert_string_equal(str_at(body, "head"), HEAD);
	assert_string_equal(str_at(body, "base"), "main"); /* the default */
	assert_string_equal(str_at(body, "body"),
			    "Session 01j9zq3k4m.\n\n- verify: passed\n");
	assert_true(
	    json_is_false(json_object_get(body, "maintainer_can_modify")));
}

static void test_created_other_base(void **state)
{
	(void)state;
	write_recording(POST_PULLS ": [" CREATED(12) "]");
	start_server(NULL);
	/* a trailing '/' on the API root is dropped */
	_cleanup_free_ char *slashed = wr_asprintf("%s/", api_url);
	struct forge_config f = github();
	f.api_url = slashed;
	f.base_branch = "release/2.x";
	f.kind = NULL; /* github by default */
	json_t *out = open_ok(&f, HEAD, "Fix the parser", NULL);
	assert_pull(out, 12, true);
	json_decref(out);
	json_auto_t *log = server_log();
	const json_t *rq = json_array_get(log, 0);
	assert_string_equal(str_at(rq, "path"), "/repos/" REPO "/pulls");
	const json_t *body = json_object_get(rq, "body");
	assert_string_equal(str_at(body, "base"), "release/2.x");
	assert_string_equal(str_at(body, "body"), "");
}

/* ---- idempotence ---- */

static void test_already_exists(void **state)
{
	(void)state;
	write_recording(POST_PULLS
			": [" EXISTS "], " GET_PULLS
			": [{'status': 200, 'body': [" PULL(7) "]}]");
	start_server(TOKEN);
	struct forge_config f = github();
	json_t *out = open_ok(&f, HEAD, "Fix the parser", "Body.");
	assert_pull(out, 7, false);
	json_decref(out);

	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 2);
	const json_t *get = json_array_get(log, 1);
	assert_string_equal(str_at(get, "method"), "GET");
	assert_string_equal(str_at(get, "path"), "/repos/" REPO "/pulls");
	assert_string_equal(str_at(get, "authorization"), "Bearer " TOKEN);
	const json_t *query = json_object_get(get, "query");
	assert_string_equal(str_at(query, "head"), "octo:" HEAD);
	assert_string_equal(str_at(query, "state"), "open");
	/* the query is percent-encoded, ':' and '/' too */
	assert_non_null(strstr(str_at(get, "target"),
			       "head=octo%3Awarren%2F01j9zq3k4m&state=open"));
	assert_true(json_is_null(json_object_get(get, "body")));
	assert_null(header(get, "Content-Length"));
}

/* Approving twice gives the one pull request. */
static void test_approve_twice(void **state)
{
	(void)state;
	write_recording(POST_PULLS ": [" CREATED(
	    7) ", " EXISTS "], " GET_PULLS
	       ": [{'status': 200, 'body': [" PULL(7) "]}]");
	start_server(NULL);
	struct forge_config f = github();
	json_t *first = open_ok(&f, HEAD, "Fix the parser", "Body.");
	json_t *second = open_ok(&f, HEAD, "Fix the parser", "Body.");
	assert_pull(first, 7, true);
	assert_pull(second, 7, false);
	json_decref(first);
	json_decref(second);
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 3);
}

/* The lookup skips a record for another branch; with nothing left the
 * call fails. */
static void test_exists_none_open(void **state)
{
	(void)state;
	write_recording(POST_PULLS ": [" EXISTS ", " EXISTS "], " GET_PULLS
				   ": [{'status': 200, 'body': []}, "
				   "{'status': 200, 'body': [{'number': 3, "
				   "'html_url': 'https://github.com/x', "
				   "'url': 'https://api.github.com/x', "
				   "'head': {'ref': 'other'}}]}]");
	start_server(NULL);
	struct forge_config f = github();
	for (int i = 0; i < 2; i++) {
		struct wr_error *err =
		    open_fails(&f, HEAD, -ENOENT, "none is open");
		assert_says(err, "one exists already; looking it up");
		assert_false(err->bad_input);
		wr_error_free(err);
	}
}

/* ---- retries ---- */

static void test_retry_server_error(void **state)
{
	(void)state;
	write_recording(POST_PULLS ": [{'status': 500}, " CREATED(8) "]");
	start_server(TOKEN);
	struct forge_config f = github();
	json_t *out = open_ok(&f, HEAD, "Fix the parser", "Body.");
	assert_pull(out, 8, true);
	json_decref(out);
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 2);
	/* the same request both times */
	assert_true(
	    json_equal(json_object_get(json_array_get(log, 0), "body"),
		       json_object_get(json_array_get(log, 1), "body")));
}

static void test_retry_dropped(void **state)
{
	(void)state;
	write_recording(POST_PULLS
			": [{'status': 502, 'body': {'message': "
			"'Server Error'}}, {'hang_up': true}, " CREATED(9) "]");
	start_server(NULL);
	struct forge_config f = github();
	json_t *out = open_ok(&f, HEAD, "Fix the parser", "Body.");
	assert_pull(out, 9, true);
	json_decref(out);
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 3);
}

static void test_retry_after(void **state)
{
	(void)state;
	write_recording(POST_PULLS ": [{'status': 429, 'headers': "
				   "{'Retry-After': '1'}}, " CREATED(10) "]");
	start_server(NULL);
	struct forge_config f = github();
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	json_t *out = open_ok(&f, HEAD, "Fix the parser", "Body.");
	double took = seconds_since(&t0);
	assert_pull(out, 10, true);
	json_decref(out);
	if (took < 0.9)
		fail_msg("Retry-After: 1 not honoured (%.3f s)", took);
}

static void test_retries_exhausted(void **state)
{
	(void)state;
	write_recording(
	    POST_PULLS ": [{'status': 500}, {'status': 503}, {'status': 500, "
		       "'body': {'message': 'Server Error'}, 'repeat': true}]");
	start_server(NULL);
	struct forge_config f = github();
	struct wr_error *err = open_fails(&f, HEAD, -EIO, "HTTP 500");
	assert_says(err, "gave up after 2 retries");
	assert_says(err, "Server Error");
	assert_says(err, "GitHub API at ");
	assert_says(err, api_url);
	assert_says(err, REPO " " HEAD " -> main");
	assert_false(err->bad_input);
	wr_error_free(err);
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 1 + FORGE_RETRIES);
}

/* The lookup retries on its own. */
static void test_lookup_retried(void **state)
{
	(void)state;
	write_recording(POST_PULLS ": [" EXISTS "], " GET_PULLS
				   ": [{'status': 500}, {'status': 200, "
				   "'body': [" PULL(7) "]}]");
	start_server(NULL);
	struct forge_config f = github();
	json_t *out = open_ok(&f, HEAD, "Fix the parser", "Body.");
	assert_pull(out, 7, false);
	json_decref(out);
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 3);
}

/* ---- refused at once ---- */

static void test_forbidden(void **state)
{
	(void)state;
	write_recording(POST_PULLS
			": [{'status': 403, 'body': {'message': 'Resource not "
			"accessible by integration', 'documentation_url': "
			"'https://docs.github.com/rest/pulls/pulls#create-a-"
			"pull-request', 'status': '403'}}, " CREATED(1) "]");
	start_server(NULL);
	struct forge_config f = github();
	struct wr_error *err = open_fails(
	    &f, HEAD, -EINVAL, "HTTP 403 (the token lacks a permission");
	assert_says(err, "Resource not accessible by integration");
	assert_true(err->bad_input);
	wr_error_free(err);
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 1); /* no retry */
}

static void test_unauthorized(void **state)
{
	(void)state;
	write_recording(POST_PULLS ": [" CREATED(1) "]");
	start_server("ghp_the_right_one");
	struct forge_config f = github();
	struct wr_error *err =
	    open_fails(&f, HEAD, -EINVAL, "HTTP 401 (check the token)");
	assert_says(err, "Bad credentials");
	assert_true(err->bad_input);
	wr_error_free(err);
}

static void test_validation_failed(void **state)
{
	(void)state;
	write_recording(
	    POST_PULLS
	    ": [{'status': 422, 'body': {'message': 'Validation Failed', "
	    "'errors': [{'resource': 'PullRequest', 'code': 'custom', "
	    "'message': 'No commits between main and " HEAD "'}]}}, "
	    "{'status': 422, 'body': {'message': 'Validation Failed', "
	    "'errors': [{'resource': 'PullRequest', 'field': 'head', 'code': "
	    "'invalid'}]}}, {'status': 404, 'body': {'message': 'Not "
	    "Found'}}]");
	start_server(NULL);
	struct forge_config f = github();
	struct wr_error *err = open_fails(
	    &f, HEAD, -EINVAL,
	    "HTTP 422: Validation Failed (No commits between main and " HEAD
	    ")");
	assert_true(err->bad_input);
	wr_error_free(err);
	err = open_fails(&f, HEAD, -EINVAL,
			 "HTTP 422: Validation Failed (head invalid)");
	wr_error_free(err);
	err = open_fails(&f, HEAD, -EINVAL,
			 "HTTP 404 (no such repository, or the token cannot "
			 "see it): Not Found");
	wr_error_free(err);
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 3);
}

static void test_redirect_not_followed(void **state)
{
	(void)state;
	write_recording(POST_PULLS
			": [{'status': 301, 'headers': {'Location': "
			"'https://api.github.com/repositories/1/pulls'}, "
			"'body': {'message': 'Moved Permanently'}}]");
	start_server(NULL);
	struct forge_config f = github();
	struct wr_error *err =
	    open_fails(&f, HEAD, -EINVAL, "the repository moved");
	assert_says(err, "Moved Permanently");
	assert_true(err->bad_input);
	wr_error_free(err);
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 1);
}

/* ---- names checked before any request ---- */

static void refused(const struct forge_config *f, const char *head,
		    const char *title, const char *says)
{
	json_t *out = NULL;
	struct wr_error *err = NULL;
	int r = forge_open_pull_request(f, head, title, "Body.", &out, &err);
	if (r != -EINVAL)
		fail_msg("expected -EINVAL for '%s', got %d (%s)", says, r,
			 err ? err->msg : "no error");
	assert_null(out);
	assert_says(err, says);
	assert_true(err->bad_input);
	assert_no_token(err);
	wr_error_free(err);
}

static void test_bad_names(void **state)
{
	(void)state;
	write_recording(POST_PULLS ": [" CREATED(1) "]");
	start_server(NULL);
	static const char *const repos[] = {
	    "octo",	   "octo/",	      "/hello",	      "octo/hello/x",
	    "octo/..",	   "../hello",	      "octo/hel lo",  "octo/hello?x=1",
	    "octo/h%2F",   "octo/hello#frag", "octo/hel\nlo", "",
	    "oc:to/hello",
	};
	for (size_t i = 0; i < ARRAY_SIZE(repos); i++) {
		struct forge_config f = github();
		f.repo = repos[i];
		refused(&f, HEAD, "Fix", "is not owner/name");
	}
	struct forge_config f = github();
	f.repo = NULL;
	refused(&f, HEAD, "Fix", "is not owner/name");

	static const char *const branches[] = {
	    "",		 "-rf",
	    "a..b",	 "a b",
	    "warren/",	 "/warren",
	    "x.lock",	 "a//b",
	    "x\n",	 "x?y=1",
	    "x#y",	 "x%2F",
	    "a:b",	 "warren/.hidden",
	    "refs~1",	 "x@{1}",
	    "trailing.", "x\\y",
	};
	f = github();
	for (size_t i = 0; i < ARRAY_SIZE(branches); i++)
		refused(&f, branches[i], "Fix", "is not a branch name");
	refused(&f, NULL, "Fix", "is not a branch name");
	for (size_t i = 0; i < ARRAY_SIZE(branches); i++) {
		f.base_branch = branches[i];
		if (!*branches[i])
			continue; /* "" is the default */
		refused(&f, HEAD, "Fix", "base branch");
	}
	f = github();
	refused(&f, HEAD, "", "no title");
	refused(&f, HEAD, NULL, "no title");
	refused(&f, HEAD, "two\nlines", "control characters");
	refused(&f, HEAD, "bad \xff UTF-8", "not UTF-8");
	char long_title[FORGE_TITLE_MAX + 2];
	memset(long_title, 'x', sizeof(long_title) - 1);
	long_title[sizeof(long_title) - 1] = '\0';
	refused(&f, HEAD, long_title, "longer than 256 characters");

	/* not one request went out */
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 0);
}

static void test_bad_config(void **state)
{
	(void)state;
	write_recording(POST_PULLS ": [" CREATED(1) "]");
	start_server(NULL);
	struct {
		const char *api_url, *kind, *token, *says;
		uint64_t timeout_ms;
	} cases[] = {
	    {"ftp://127.0.0.1/", NULL, NULL, "not an http:// or https://", 0},
	    {"http://api.example.com", NULL, NULL, "in the clear", 0},
	    {"http://127.0.0.1.evil.example", NULL, NULL, "in the clear", 0},
	    {"https://user:pw@api.example.com", NULL, NULL, "characters", 0},
	    {"https://api.example.com/?x=1", NULL, NULL, "characters", 0},
	    {"https://api.exa mple.com", NULL, NULL, "characters", 0},
	    {"https://", NULL, NULL, "no host", 0},
	    {NULL, "gitlab", NULL, "unknown kind gitlab", 0},
	    {NULL, NULL, "", "no token", 0},
	    {NULL, NULL, TOKEN "\r\nX-Evil: 1", "control characters", 0},
	    {NULL, NULL, "two words", "spaces", 0},
	    {NULL, NULL, NULL, "more than a day", 25ull * 3600 * 1000},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct forge_config f = github();
		if (cases[i].api_url)
			f.api_url = cases[i].api_url;
		if (cases[i].kind)
			f.kind = cases[i].kind;
		if (cases[i].token)
			f.token = cases[i].token;
		if (cases[i].timeout_ms)
			f.timeout_ms = cases[i].timeout_ms;
		struct wr_error *err = NULL;
		assert_int_equal(forge_config_check(&f, &err), -EINVAL);
		assert_says(err, cases[i].says);
		assert_true(err->bad_input);
		assert_no_token(err);
		wr_error_free(err);
		refused(&f, HEAD, "Fix", cases[i].says);
	}
	struct forge_config f = github();
	f.token = NULL;
	refused(&f, HEAD, "Fix", "no token");

	/* good ones */
	const char *good[] = {
	    "https://api.github.com", "https://github.example.com/api/v3/",
	    "http://localhost:8080", "http://[::1]:9000", "http://127.0.0.1:1"};
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		f = github();
		f.api_url = good[i];
		struct wr_error *err = NULL;
		int r = forge_config_check(&f, &err);
		if (r < 0)
			fail_msg("%s refused: %s", good[i], err->msg);
	}
	f = github();
	f.api_url = NULL; /* https://api.github.com */
	f.repo = "Octo-Org_2/hello.world-3";
	f.base_branch = "release/v2.1_x";
	assert_int_equal(forge_config_check(&f, NULL), 0);
	assert_int_equal(forge_config_check(NULL, NULL), -EINVAL);

	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 0);
}

/* ---- malformed answers ---- */

static void test_malformed(void **state)
{
	(void)state;
	write_recording(
	    POST_PULLS
	    ": [{'status': 201, 'raw': 'not JSON at all'}, "
	    "{'status': 201, 'body': {'number': 4, 'url': "
	    "'https://api.github.com/x'}}, "
	    "{'status': 201, 'body': {'number': 4, 'url': "
	    "'https://api.github.com/x', 'html_url': 'javascript:alert(1)'}}, "
	    "{'status': 201, 'body': {'number': '4', 'url': "
	    "'https://api.github.com/x', 'html_url': 'https://github.com/x'}}, "
	    "{'status': 201}, " EXISTS "], " GET_PULLS
	    ": [{'status': 200, 'body': {'not': 'a list'}}]");
	start_server(NULL);
	struct forge_config f = github();
	struct wr_error *err =
	    open_fails(&f, HEAD, -EBADMSG, "the response is not JSON");
	assert_false(err->bad_input);
	wr_error_free(err);
	for (int i = 0; i < 3; i++) {
		err = open_fails(&f, HEAD, -EBADMSG,
				 "the response is not a pull request");
		wr_error_free(err);
	}
	err = open_fails(&f, HEAD, -EBADMSG, "empty response");
	wr_error_free(err);
	err = open_fails(&f, HEAD, -EBADMSG, "the answer is not a list");
	wr_error_free(err);
}

static void test_response_too_big(void **state)
{
	(void)state;
	char *big = wr_malloc(20001);
	assert_non_null(big);
	memset(big, 'a', 20000);
	big[20000] = '\0';
	_cleanup_free_ char *routes = wr_asprintf(
	    POST_PULLS ": [{'status': 201, 'body': {'number': 1, 'body': "
		       "'%s'}}]",
	    big);
	free(big);
	write_recording(routes);
	start_server(NULL);
	struct forge_config f = github();
	f.max_response = 4096;
	struct wr_error *err =
	    open_fails(&f, HEAD, -EFBIG, "larger than 4096 bytes");
	wr_error_free(err);
}

static void test_server_down(void **state)
{
	(void)state;
	/* a port nobody listens on: bound, then closed */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	socklen_t len = sizeof(sa);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	snprintf(api_url, sizeof(api_url), "http://127.0.0.1:%d",
		 ntohs(sa.sin_port));
	struct forge_config f = github();
	struct wr_error *err =
	    open_fails(&f, HEAD, -EHOSTUNREACH, "cannot connect");
	assert_says(err, "gave up after 2 retries");
	assert_false(err->bad_input);
	wr_error_free(err);
}

/* ---- the token ---- */

/* A server that echoes the token back gets it scrubbed. */
static void test_token_never_in_errors(void **state)
{
	(void)state;
	write_recording(POST_PULLS
			": [{'status': 403, 'body': {'message': 'token " TOKEN
			" may not create pull requests'}}, "
			"{'status': 400, 'raw': 'Bearer " TOKEN
			" refused\\nsecond line " TOKEN "'}, "
			"{'status': 500, 'body': {'message': 'oops', 'errors': "
			"['" TOKEN "'], 'what': '" TOKEN "'}, 'repeat': "
			"true}]");
	start_server(NULL);
	struct forge_config f = github();
	struct wr_error *err =
	    open_fails(&f, HEAD, -EINVAL, "token [token] may not create");
	wr_error_free(err);
	err = open_fails(&f, HEAD, -EINVAL, "HTTP 400: Bearer [token] refused");
	wr_error_free(err);
	err = open_fails(&f, HEAD, -EIO, "HTTP 500: oops ([token])");
	wr_error_free(err);
	/* and it did go out, in the header */
	json_auto_t *log = server_log();
	assert_string_equal(str_at(json_array_get(log, 0), "authorization"),
			    "Bearer " TOKEN);
}

/* ---- titles ---- */

static void title_is(const char *prompt, const char *want)
{
	_cleanup_free_ char *title = forge_title(prompt, "s_0123abcd");
	assert_non_null(title);
	assert_string_equal(title, want);
}

static void test_title(void **state)
{
	(void)state;
	title_is("Fix the parser", "Fix the parser");
	title_is("\n \t\n  Fix the\tparser  \r\nand then the lexer\n",
		 "Fix the parser");
	title_is("", "Warren session s_0123abcd");
	title_is(NULL, "Warren session s_0123abcd");
	title_is(" \n\t\n", "Warren session s_0123abcd");
	title_is("\x01\x02\n\x1b[1mBold\x1b[0m move", "[1mBold [0m move");
	title_is("bad \xff UTF-8", "Warren session s_0123abcd");
	/* 72 characters stay whole; 73 are cut to 71 and an ellipsis */
	char line[200];
	memset(line, 'a', 72);
	line[72] = '\0';
	title_is(line, line);
	line[72] = 'b';
	line[73] = '\0';
	char want[200];
	memset(want, 'a', 71);
	strcpy(want + 71, "\xe2\x80\xa6");
	title_is(line, want);
	/* on a character boundary: 100 two-byte characters */
	char wide[201] = "";
	for (int i = 0; i < 100; i++)
		strcat(wide, "\xc3\xa9");
	_cleanup_free_ char *title = forge_title(wide, "s_1");
	assert_int_equal(strlen(title), 71 * 2 + 3);
	assert_memory_equal(title, wide, 71 * 2);
	assert_string_equal(title + 71 * 2, "\xe2\x80\xa6");
	/* a cut falling after a space drops it */
	memset(line, 'a', 70);
	strcpy(line + 70, " bcdef");
	memset(want, 'a', 70);
	strcpy(want + 70, "\xe2\x80\xa6");
	title_is(line, want);
}

/* ---- allocation failures: an error, never a crash or a leak ---- */

static void test_allocation_failures(void **state)
{
	(void)state;
	/* every POST says "exists", every lookup finds #7 */
	_cleanup_free_ char *routes = wr_asprintf(
	    POST_PULLS ": [%s], " GET_PULLS
		       ": [{'status': 200, 'body': [%s], 'repeat': true}]",
	    "{'status': 422, 'body': {'message': 'Validation Failed', "
	    "'errors': [{'message': 'A pull request already exists for "
	    "octo:" HEAD ".'}]}, 'repeat': true}",
	    PULL(7));
	write_recording(routes);
	start_server(NULL);
	struct forge_config f = github();
	int failed = 0, passed = 0;
	for (unsigned long n = 1; n < 200 && passed < 3; n++) {
		json_t *out = NULL;
		struct wr_error *err = NULL;
		wr_alloc_fail_at(n);
		int r = forge_open_pull_request(&f, HEAD, "Fix", "Body.", &out,
						&err);
		wr_alloc_fail_at(0);
		if (r == 0) {
			assert_null(err);
			assert_pull(out, 7, false);
			passed++;
		} else {
			assert_null(out);
			assert_non_null(err);
			assert_no_token(err);
			failed++;
		}
		json_decref(out);
		wr_error_free(err);
	}
	assert_true(failed > 5);
	assert_true(passed > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_created, teardown),
	    cmocka_unit_test_teardown(test_created_other_base, teardown),
	    cmocka_unit_test_teardown(test_already_exists, teardown),
	    cmocka_unit_test_teardown(test_approve_twice, teardown),
	    cmocka_unit_test_teardown(test_exists_none_open, teardown),
	    cmocka_unit_test_teardown(test_retry_server_error, teardown),
	    cmocka_unit_test_teardown(test_retry_dropped, teardown),
	    cmocka_unit_test_teardown(test_retry_after, teardown),
	    cmocka_unit_test_teardown(test_retries_exhausted, teardown),
	    cmocka_unit_test_teardown(test_lookup_retried, teardown),
	    cmocka_unit_test_teardown(test_forbidden, teardown),
	    cmocka_unit_test_teardown(test_unauthorized, teardown),
	    cmocka_unit_test_teardown(test_validation_failed, teardown),
	    cmocka_unit_test_teardown(test_redirect_not_followed, teardown),
	    cmocka_unit_test_teardown(test_bad_names, teardown),
	    cmocka_unit_test_teardown(test_bad_config, teardown),
	    cmocka_unit_test_teardown(test_malformed, teardown),
	    cmocka_unit_test_teardown(test_response_too_big, teardown),
	    cmocka_unit_test_teardown(test_server_down, teardown),
	    cmocka_unit_test_teardown(test_token_never_in_errors, teardown),
	    cmocka_unit_test(test_title),
	    cmocka_unit_test_teardown(test_allocation_failures, teardown),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

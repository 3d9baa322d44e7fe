/* fuzz_api.c - libFuzzer target for src/api (api_handle: routing,
 * authentication, query and body validation, rendering).
 *
 * Set up once: a SQLite store in a scratch directory, the session manager
 * with no_worker (sessions are stored, never run), a repository "c-hello",
 * one queued session with two artifacts (diff.patch in its artifact
 * directory, outside.txt recorded at a path outside it), and tokens for
 * each role. The input is a small
 * HTTP-like text, so that seeds are readable:
 *
 *     METHOD TARGET\n
 *     Header: value\n      (any number: Content-Type, Last-Event-ID,
 *     \n                    X-Token: admin|reviewer|submitter|none|bad|raw
 *     body bytes            and X-Raw-Auth: the whole header)
 *
 * In TARGET, {S} becomes the known session's id and {R} the repository's,
 * so that the fuzzer reaches the handlers behind an id. Without X-Token the
 * admin token is used; with a body and no Content-Type, application/json.
 *
 * Properties checked on every answer (a violation abort()s):
 *   - the status is one the API documents, and never 500;
 *   - a JSON answer parses; an error answer is {"error": {"code",
 *     "message"}} with the code of its status; 405 names allowed methods;
 *   - a stream answer is a 200 for a well-formed session id, with no body;
 *   - a file answer is a 200 with a content type and an open descriptor
 *     of the session's diff.patch (outside.txt is never served);
 *   - without a valid token the answer is 401 (or 413 for the size cap);
 *   - a failed request changed nothing: the store's counts of sessions,
 *     tokens and repositories are the same before and after. */
#include "api/api.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <ftw.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_BODY 4096

static char root[] = "/tmp/warren-fuzz-api.XXXXXX";
static struct store *st;
static struct control *ctl;
static struct api *api;
static char *tokens[3]; /* admin, reviewer, submitter */
static char session_id[STORE_ID_MAX], repo_id[STORE_ID_MAX];

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_api: %s\n", what);
		abort();
	}
}

static int remove_entry(const char *path, const struct stat *sb, int type,
			struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

static void teardown(void)
{
	api_stop(api);
	control_stop(ctl);
	store_close(st);
	for (size_t i = 0; i < 3; i++)
		free(tokens[i]);
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

#define FUZZ_DIFF "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"

/* diff.patch where the runner writes it; outside.txt recorded at the
 * database's path, which the API must refuse to serve. */
static void add_artifacts(void)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/artifacts", root);
	check(mkdir(path, 0700) == 0, "setup: artifacts directory");
	snprintf(path, sizeof(path), "%s/artifacts/%s", root, session_id);
	check(mkdir(path, 0700) == 0, "setup: artifacts directory");
	snprintf(path, sizeof(path), "%s/artifacts/%s/diff.patch", root,
		 session_id);
	FILE *f = fopen(path, "w");
	check(f && fputs(FUZZ_DIFF, f) >= 0 && fclose(f) == 0,
	      "setup: diff.patch");
	struct store_artifact a = {.name = "diff.patch",
				   .path = path,
				   .media_type = "text/x-diff",
				   .size = (int64_t)strlen(FUZZ_DIFF)};
	check(st->ops->artifact_add(st, session_id, &a, NULL) == 0,
	      "setup: artifact");
	char db[512];
	snprintf(db, sizeof(db), "%s/warren.db", root);
	struct store_artifact outside = {
	    .name = "outside.txt", .path = db, .size = 1};
	check(st->ops->artifact_add(st, session_id, &outside, NULL) == 0,
	      "setup: artifact");
}

static void setup(void)
{
	struct wr_error *err = NULL;
	check(mkdtemp(root) != NULL, "setup: mkdtemp");
	char db[256];
	snprintf(db, sizeof(db), "%s/warren.db", root);
	st = store_open_sqlite(db, &err);
	check(st != NULL, "setup: store");
	struct control_config cc = {.data_dir = root,
				     .no_worker = true,
				     .no_remote_check = true};
	check(control_start(&cc, st, &ctl, &err) == 0, "setup: control");
	struct store_repo repo = {0};
	check(control_repo_add(ctl, "c-hello", "/srv/git/c-hello", NULL, 0,
			       "[\"sh\",\"-c\",\"make test\"]", &repo,
			       &err) == 0,
	      "setup: repository");
	snprintf(repo_id, sizeof(repo_id), "%s", repo.id);
	store_repo_clear(&repo);
	const char *roles[3] = {"admin", "reviewer", "submitter"};
	const char *users[3] = {"admin", "rita", "sam"};
	for (size_t i = 0; i < 3; i++)
		check(api_token_create(st, users[i], roles[i], &tokens[i],
				       &err) == 0,
		      "setup: token");
	struct control_submit sub = {
	    .user = "sam", .repo = "c-hello", .prompt = "fix the test"};
	struct store_session s = {0};
	check(control_submit(ctl, &sub, &s, &err) == 0, "setup: session");
	snprintf(session_id, sizeof(session_id), "%s", s.id);
	store_session_clear(&s);
	add_artifacts();
	struct api_config ac = {.st = st,
				.ctl = ctl,
				.max_body = FUZZ_MAX_BODY,
				.keepalive_ms = 1,
				.data_dir = root};
	check(api_new(&ac, &api, &err) == 0, "setup: api");
	atexit(teardown);
}

struct census {
	int64_t sessions;
	int tokens;
	size_t repos;
};

static struct census census(void)
{
	struct census c = {0};
	int64_t counts[SESSION_STATE_MAX];
	check(st->ops->session_count(st, counts, NULL) == 0, "census: count");
	for (int i = 0; i < SESSION_STATE_MAX; i++)
		c.sessions += counts[i];
	c.tokens = st->ops->token_count(st, NULL);
	struct store_repo *repos = NULL;
	check(st->ops->repo_list(st, &repos, &c.repos, NULL) == 0,
	      "census: repositories");
	store_repos_free(repos, c.repos);
	return c;
}

static bool is_mark(const char *p)
{
	return p[0] == '{' && (p[1] == 'S' || p[1] == 'R') && p[2] == '}';
}

/* target with {S} and {R} replaced (caller frees). */
static char *expand(const char *target)
{
	size_t marks = 0;
	for (const char *p = target; *p; p++)
		marks += is_mark(p);
	char *out = wr_malloc(strlen(target) + marks * STORE_ID_MAX + 1);
	check(out != NULL, "expand: out of memory");
	char *w = out;
	for (const char *p = target; *p;) {
		if (is_mark(p)) {
			const char *id = p[1] == 'S' ? session_id : repo_id;
			size_t n = strlen(id);
			memcpy(w, id, n);
			w += n;
			p += 3;
		} else {
			*w++ = *p++;
		}
	}
	*w = '\0';
	return out;
}

static const char *status_code(unsigned status)
{
	switch (status) {
	case 400: return "bad_request";
	case 401: return "unauthorized";
	case 403: return "forbidden";
	case 404: return "not_found";
	case 405: return "method_not_allowed";
	case 409: return "conflict";
	case 413: return "payload_too_large";
	case 415: return "unsupported_media_type";
	case 503: return "unavailable";
	default: return NULL;
	}
}

/* A line of the input (up to '\n' or the end) as a new string. */
static char *take_line(const uint8_t **p, const uint8_t *end)
{
	const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
	const uint8_t *stop = nl ? nl : end;
	size_t len = (size_t)(stop - *p);
	if (len && stop[-1] == '\r')
		len--;
	char *line = wr_strndup((const char *)*p, len);
	check(line != NULL, "input: out of memory");
	*p = nl ? nl + 1 : end;
	return line;
}

static void check_answer(const struct api_response *r, bool authorized,
			 struct census before)
{
	unsigned s = r->status;
	check(s == 200 || s == 201 || s == 202 || status_code(s),
	      "status not documented (or 500)");
	if (!authorized)
		check(s == 401 || s == 413, "no valid token but not 401");
	if (r->stream) {
		check(s == 200, "stream with a status other than 200");
		check(r->body == NULL, "stream with a body");
		check(strncmp(r->stream_session, "s-", 2) == 0,
		      "stream of a malformed session id");
		check(r->stream_after >= 0, "stream after a negative seq");
		check(strcmp(r->content_type, "text/event-stream") == 0,
		      "stream without its content type");
	} else if (r->file) {
		check(s == 200, "file with a status other than 200");
		check(r->body == NULL, "file with a body");
		check(r->content_type != NULL, "file without a content type");
		check(r->file_size == strlen(FUZZ_DIFF),
		      "a file other than the diff served");
		char buf[64] = "";
		check(pread(r->file_fd, buf, sizeof(buf) - 1, 0) ==
			  (ssize_t)r->file_size,
		      "file answer: cannot read the descriptor");
		check(strcmp(buf, FUZZ_DIFF) == 0,
		      "a file other than the diff served");
	} else if (r->content_type &&
		   strcmp(r->content_type, "application/json") == 0) {
		json_error_t jerr;
		check(r->body != NULL, "JSON answer without a body");
		json_t *j = json_loadb(r->body, r->body_len, 0, &jerr);
		check(j != NULL, "JSON answer does not parse");
		check(json_is_object(j), "JSON answer not an object");
		if (s >= 400) {
			json_t *e = json_object_get(j, "error");
			check(json_is_object(e), "error answer without error");
			const char *code =
			    json_string_value(json_object_get(e, "code"));
			check(code && strcmp(code, status_code(s)) == 0,
			      "error code does not match the status");
			check(json_is_string(json_object_get(e, "message")),
			      "error without a message");
		}
		json_decref(j);
	} else {
		check(s == 200, "non-JSON answer that is not a 200");
	}
	if (s == 405)
		check(r->allow[0] != '\0', "405 without Allow");
	if (s >= 400) {
		struct census after = census();
		check(after.sessions == before.sessions &&
			  after.tokens == before.tokens &&
			  after.repos == before.repos,
		      "a failed request changed the store");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!api)
		setup();
	const uint8_t *p = data, *end = data + size;
	_cleanup_free_ char *request_line = take_line(&p, end);
	char *sp = strchr(request_line, ' ');
	const char *method = request_line;
	const char *raw_target = "";
	if (sp) {
		*sp = '\0';
		raw_target = sp + 1;
	}
	_cleanup_free_ char *target = expand(raw_target);
	char *query = strchr(target, '?');
	if (query)
		*query++ = '\0';

	_cleanup_free_ char *content_type = NULL, *last_event_id = NULL,
			    *token_name = NULL, *raw_auth = NULL;
	while (p < end) {
		_cleanup_free_ char *line = take_line(&p, end);
		if (!*line)
			break;
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		const char *value = colon + 1;
		while (*value == ' ')
			value++;
		char **slot = !strcasecmp(line, "Content-Type") ? &content_type
			      : !strcasecmp(line, "Last-Event-ID")
				  ? &last_event_id
			      : !strcasecmp(line, "X-Token")	? &token_name
			      : !strcasecmp(line, "X-Raw-Auth") ? &raw_auth
								: NULL;
		if (slot && !*slot) {
			*slot = wr_strdup(value);
			check(*slot != NULL, "input: out of memory");
		}
	}

	const char *token = tokens[0];
	bool authorized = true;
	if (token_name) {
		if (!strcmp(token_name, "reviewer"))
			token = tokens[1];
		else if (!strcmp(token_name, "submitter"))
			token = tokens[2];
		else if (strcmp(token_name, "admin") != 0) {
			token = strcmp(token_name, "none") ? "wr_bad" : NULL;
			authorized = false;
		}
	}
	char auth[256];
	if (token)
		snprintf(auth, sizeof(auth), "Bearer %s", token);
	if (raw_auth)
		authorized = false; /* unless it happens to hold a token */

	size_t body_len = (size_t)(end - p);
	struct api_request req = {
	    .method = method,
	    .path = target,
	    .query = query,
	    .authorization = raw_auth ? raw_auth
			     : token  ? auth
				      : NULL,
	    .content_type = content_type ? content_type
			    : body_len	 ? "application/json"
					 : NULL,
	    .last_event_id = last_event_id,
	    .body = body_len ? (const char *)p : NULL,
	    .body_len = body_len,
	};
	struct census before = census();
	struct api_response res;
	check(api_handle(api, &req, &res) == 0, "api_handle failed");
	if (raw_auth && res.status != 401 && res.status != 413)
		authorized = true;
	check_answer(&res, authorized, before);
	api_response_clear(&res);
	return 0;
}

/* check.c - POST /api/v1/sessions/{id}/check: an eval's hidden tests on a
 * session's result (docs/api.md, docs/eval.md).
 *
 * The body names shell commands that must pass (fail_to_pass: the task's
 * change makes them pass; pass_to_pass: they passed before and still must)
 * and, optionally, the task's hidden test files as a map of relative path
 * to content. The control plane runs them in a fresh sandbox at the
 * result commit, the path of Warren's own verification (sched/work.c);
 * the files exist in that sandbox only, never in the agent's. Reviewers
 * and admins only, as for a decision: the hidden tests are the judge's. */
#include "api/internal.h"

#include "util/cleanup.h"

#include <errno.h>
#include <string.h>

#define CHECK_COMMANDS_MAX 64	      /* each of the two arrays */
#define CHECK_COMMAND_MAX 4096	      /* bytes of one command */
#define CHECK_TESTS_MAX 256	      /* files */
#define CHECK_TEST_PATH_MAX 256	      /* bytes of one relative path */
#define CHECK_TESTS_BYTES (768u << 10) /* their contents together */

/* A relative path of 1..CHECK_TEST_PATH_MAX bytes: parts of
 * [A-Za-z0-9._-], none empty, "." or "..". */
static bool test_path_valid(const char *p)
{
	size_t len = strlen(p);
	if (len == 0 || len > CHECK_TEST_PATH_MAX)
		return false;
	const char *part = p;
	for (const char *q = p;; q++) {
		if (*q == '/' || *q == '\0') {
			size_t n = (size_t)(q - part);
			if (n == 0 || (n == 1 && part[0] == '.') ||
			    (n == 2 && part[0] == '.' && part[1] == '.'))
				return false;
			if (*q == '\0')
				return true;
			part = q + 1;
			continue;
		}
		if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
		      (*q >= '0' && *q <= '9') || *q == '.' || *q == '-' ||
		      *q == '_'))
			return false;
	}
}

/* body[key], an array of commands, appended to list as {kind, command}. */
static int commands_take(struct api_ctx *c, const char *key, json_t *list)
{
	json_t *a = json_object_get(c->body, key);
	if (!a || json_is_null(a))
		return 0;
	if (!json_is_array(a))
		return api_reject(c->out, 400, "%s: an array of commands", key);
	if (json_array_size(a) > CHECK_COMMANDS_MAX)
		return api_reject(c->out, 400, "%s: at most %d commands", key,
				  CHECK_COMMANDS_MAX);
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v)
	{
		const char *cmd = json_string_value(v);
		size_t len = cmd ? json_string_length(v) : 0;
		if (!cmd || len == 0 || len > CHECK_COMMAND_MAX ||
		    strlen(cmd) != len)
			return api_reject(c->out, 400,
					  "%s[%zu]: a command of 1 to %d bytes",
					  key, i, CHECK_COMMAND_MAX);
		json_array_append_new(list, json_pack("{s:s, s:s}", "kind", key,
						      "command", cmd));
	}
	return 0;
}

static int tests_check(struct api_ctx *c, json_t **out)
{
	json_t *t = json_object_get(c->body, "tests");
	*out = NULL;
	if (!t || json_is_null(t))
		return 0;
	if (!json_is_object(t))
		return api_reject(c->out, 400,
				  "tests: an object of relative path to "
				  "content");
	if (json_object_size(t) > CHECK_TESTS_MAX)
		return api_reject(c->out, 400, "tests: at most %d files",
				  CHECK_TESTS_MAX);
	size_t total = 0;
	const char *path;
	json_t *v;
	json_object_foreach(t, path, v)
	{
		char q[80];
		if (!test_path_valid(path))
			return api_reject(c->out, 400,
					  "tests: \"%s\" is not a relative "
					  "path of [A-Za-z0-9._-] parts",
					  api_quote(path, q));
		if (!json_is_string(v))
			return api_reject(c->out, 400,
					  "tests: \"%s\": the content, a "
					  "string",
					  api_quote(path, q));
		total += json_string_length(v);
		if (total > CHECK_TESTS_BYTES)
			return api_reject(c->out, 400,
					  "tests: more than %u bytes",
					  CHECK_TESTS_BYTES);
	}
	/* a file and a directory of one name cannot both be */
	json_object_foreach(t, path, v)
	{
		size_t len = strlen(path);
		const char *other;
		json_t *w;
		json_object_foreach(t, other, w)
		{
			char q[80];
			if (!strncmp(other, path, len) && other[len] == '/')
				return api_reject(c->out, 400,
						  "tests: \"%s\" is a file and "
						  "a directory",
						  api_quote(path, q));
		}
	}
	*out = t;
	return 0;
}

int api_session_check(struct api_ctx *c)
{
	static const char *const keys[] = {"fail_to_pass", "pass_to_pass",
					   "tests", NULL};
	struct store_session s = {0};
	struct wr_error *err = NULL;
	json_t *tests = NULL;
	if (api_body_check_keys(c, keys) < 0)
		return 0;
	json_t *commands = json_array();
	if (!commands)
		return api_reply_internal(c, "check");
	if (commands_take(c, "fail_to_pass", commands) < 0 ||
	    commands_take(c, "pass_to_pass", commands) < 0 ||
	    tests_check(c, &tests) < 0)
		goto out;
	if (json_array_size(commands) == 0) {
		api_reply_error(c->out, 400,
				"fail_to_pass, pass_to_pass: no command to run");
		goto out;
	}
	if (api_session_load(c, &s) < 0)
		goto out;
	store_session_clear(&s);
	json_t *result = NULL;
	int r = control_check(c->a->ctl, c->id, commands, tests, &result, &err);
	if (r == -EPERM && err && err->msg)
		api_reply_error(c->out, 409, "%s", err->msg);
	else if (r < 0)
		api_reply_failure(c, r, err, "check the session");
	else
		api_reply_render(c, 200, result, "render the check");
	wr_error_free(err);
out:
	json_decref(commands);
	return 0;
}

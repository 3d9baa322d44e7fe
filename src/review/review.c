/* review.c - verification, the session's branch and diff, the push (see
 * review.h). */
#include "review/review.h"

#include "snapshot/git.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VERIFY_TIMEOUT_MS (30ull * 60 * 1000)
#define GIT_TIMEOUT_MS (5ull * 60 * 1000)
#define VERIFY_CAPTURE (4u << 20)

static double mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

/* A command for people to read: argv joined by spaces. */
static char *argv_text(char *const *argv)
{
	size_t len = 1;
	for (size_t i = 0; argv[i]; i++)
		len += strlen(argv[i]) + 1;
	char *t = wr_malloc(len);
	if (!t)
		return NULL;
	t[0] = '\0';
	for (size_t i = 0; argv[i]; i++) {
		if (i)
			strcat(t, " ");
		strcat(t, argv[i]);
	}
	return t;
}

/* The last max bytes of a and b together, valid UTF-8 or not (jansson
 * refuses invalid UTF-8: such bytes become '?'). */
static json_t *tail_text(const char *a, size_t alen, const char *b, size_t blen,
			 size_t max)
{
	size_t len = alen + blen;
	char *t = wr_malloc(len + 1);
	if (!t)
		return json_string("");
	memcpy(t, a, alen);
	memcpy(t + alen, b, blen);
	t[len] = '\0';
	size_t start = len > max ? len - max : 0;
	json_t *s = json_stringn(t + start, len - start);
	if (!s) {
		for (size_t i = start; i < len; i++)
			if ((unsigned char)t[i] >= 0x80 || !t[i])
				t[i] = '?';
		s = json_stringn(t + start, len - start);
	}
	free(t);
	return s ? s : json_string("");
}

int review_verify(const struct tools_exec *ex, char ***argvs, size_t n,
		  size_t max_output, json_t **out, struct wr_error **err)
{
	json_t *results = json_array();
	bool passed = true;
	for (size_t i = 0; i < n; i++) {
		struct tools_exec_result res = {0};
		double t0 = mono_ms();
		/* the exec keeps the head of each stream; the failure is
		 * usually at the end: take plenty, keep the tail */
		int r = ex->run(ex->ctx, argvs[i], NULL, 0, VERIFY_TIMEOUT_MS,
				VERIFY_CAPTURE, &res, err);
		double ms = mono_ms() - t0;
		if (r < 0) {
			json_decref(results);
			return wr_error_wrap(err, "verify");
		}
		_cleanup_free_ char *cmd = argv_text(argvs[i]);
		json_array_append_new(
		    results,
		    json_pack("{s:s, s:i, s:f, s:o}", "command", cmd ? cmd : "",
			      "status", res.status, "ms", ms, "output",
			      tail_text(res.out ? res.out : "", res.out_len,
					res.err ? res.err : "", res.err_len,
					max_output)));
		if (res.status != 0)
			passed = false;
		tools_exec_result_clear(&res);
	}
	*out = json_pack("{s:b, s:o}", "passed", passed, "results", results);
	return 0;
}

char *review_verify_feedback(const json_t *verify, int attempt, int attempts,
			     bool builtin)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	fprintf(f,
		"Warren ran the project's verification on your change and it "
		"failed (attempt %d of %d). Fix the cause, then %s.\n",
		attempt, attempts,
		builtin ? "call finish again"
			: "exit with status 0: Warren verifies again");
	size_t i;
	json_t *r;
	json_array_foreach(json_object_get(verify, "results"), i, r)
	{
		json_int_t status =
		    json_integer_value(json_object_get(r, "status"));
		if (status == 0)
			continue;
		fprintf(f, "\n$ %s\n(exit status %lld)\n%s\n",
			json_string_value(json_object_get(r, "command")),
			(long long)status,
			json_string_value(json_object_get(r, "output")));
	}
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

/* Runs git with envp (the locked environment, or the broker's built on
 * it); a non-zero exit is an error with git's last words. */
static int remote_git(const char *const argv[], char *const envp[], char **out,
		      struct wr_error **err)
{
	struct spawn_call c = {
	    .argv = argv,
	    .envp = envp ? (const char *const *)envp : git_locked_env(),
	    .in_fd = -1,
	    .out_fd = -1,
	    .out = out,
	    .out_max = 1 << 20,
	    .timeout_ms = GIT_TIMEOUT_MS,
	};
	int status = spawn_run(&c, err);
	if (status < 0)
		return wr_error_wrap(err, "git %s", argv[3]);
	if (status != 0) {
		if (out) {
			free(*out);
			*out = NULL;
		}
		return wr_error_set(err, EIO, "git %s: %s (exit %d)", argv[3],
				    c.err_tail[0] ? c.err_tail : "no message",
				    status);
	}
	return 0;
}

/* The commit the remote's ref names now ("" if none). */
static int remote_ref(const char *quarantine, const char *remote_url,
		      const char *ref, char *const remote_env[], char id[41],
		      struct wr_error **err)
{
	_cleanup_free_ char *listed = NULL;
	const char *argv[] = {"git",	 "-C", quarantine, "ls-remote",
			      "--refs",	 "--", remote_url, ref,
			      NULL};
	int r = remote_git(argv, remote_env, &listed, err);
	if (r < 0)
		return r;
	id[0] = '\0';
	if (listed && strlen(listed) >= 40)
		snprintf(id, 41, "%.40s", listed);
	return 0;
}

int review_push(const char *quarantine, const char *session_id,
		const char *commit, const char *remote_url,
		char *const remote_env[], json_t **out, struct wr_error **err)
{
	char ref[160];
	snprintf(ref, sizeof(ref), "refs/heads/warren/%s", session_id);
	/* what the branch holds before: nothing, unless the agent pushed
	 * it through the broker during the session (unreviewed) */
	char before[41];
	int r = remote_ref(quarantine, remote_url, ref, remote_env, before,
			   err);
	if (r < 0)
		return wr_error_wrap(err, "push: read the branch");
	/* exactly the reviewed commit id, to the session's branch only. Not
	 * forced; over what the agent pushed there itself, with a lease on
	 * exactly that value, so nothing else is ever overwritten */
	_cleanup_free_ char *push_spec = wr_asprintf("%s:%s", commit, ref);
	_cleanup_free_ char *lease =
	    wr_asprintf("--force-with-lease=%s:%s", ref, before);
	if (!push_spec || !lease)
		return wr_error_set(err, ENOMEM, "push");
	if (strcmp(before, commit)) {
		const char *plain[] = {"git",	      "-C", quarantine, "push",
				       "-q",	      "--", remote_url, push_spec,
				       NULL};
		const char *leased[] = {"git",	    "-C",	quarantine,
					"push",	    "-q",	lease,
					"--",	    remote_url, push_spec,
					NULL};
		r = remote_git(before[0] ? leased : plain, remote_env, NULL,
			       err);
		if (r < 0)
			return wr_error_wrap(err, "push");
	}
	/* what the remote now says the branch is: the push names it */
	char after[41];
	r = remote_ref(quarantine, remote_url, ref, remote_env, after, err);
	if (r < 0)
		return wr_error_wrap(err, "push: read the branch back");
	if (strcmp(after, commit))
		return wr_error_set(err, EIO,
				    "push: the remote's %s is '%s', not the "
				    "reviewed commit %s",
				    ref, after, commit);
	*out = json_pack("{s:s, s:s, s:s}", "remote", remote_url, "ref", ref,
			 "commit", after);
	if (*out && before[0] && strcmp(before, commit))
		json_object_set_new(*out, "replaced", json_string(before));
	return 0;
}

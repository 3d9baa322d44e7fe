/* review.c - verification, the session's branch and diff, the push (see
 * review.h). */
#include "review/review.h"

#include "sched/proc.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VERIFY_TIMEOUT_MS (30ull * 60 * 1000)
#define GIT_TIMEOUT_MS (5ull * 60 * 1000)
#define DIFF_MAX (32u << 20)
#define VERIFY_CAPTURE (4u << 20)
#define BUNDLE_MAX (512u << 20)

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

char *review_verify_feedback(const json_t *verify)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	fputs("Warren ran the project's verification and it failed. Fix the "
	      "cause, then call finish again.\n",
	      f);
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

/* sh -c SCRIPT with args in the sandbox. */
static int sandbox_sh(const struct tools_exec *ex, const char *script,
		      const char *const *args, const char *input,
		      size_t max_output, struct tools_exec_result *res,
		      struct wr_error **err)
{
	const char *argv[16] = {"/bin/sh", "-c", script, "warren-review"};
	size_t n = 4;
	for (size_t i = 0; args && args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	return ex->run(ex->ctx, (char *const *)argv, input,
		       input ? strlen(input) : 0, GIT_TIMEOUT_MS, max_output,
		       res, err);
}

static int write_artifact(const char *dir, const char *name, const void *data,
			  size_t len, struct wr_error **err)
{
	_cleanup_free_ char *path = wr_asprintf("%s/%s", dir, name);
	if (!path)
		return wr_error_set(err, ENOMEM, "artifact");
	int r = wr_write_file_atomic(path, data, len, 0600, true);
	if (r < 0)
		return wr_error_set(err, -r, "write %s", path);
	return 0;
}

/* The first line of stderr for an error message. */
static const char *first_line(const struct tools_exec_result *res, char *buf,
			      size_t size)
{
	const char *src = res->err && res->err_len ? res->err : res->out;
	snprintf(buf, size, "%s", src ? src : "");
	buf[strcspn(buf, "\n")] = '\0';
	return buf;
}

int review_commit(const struct tools_exec *ex, const char *session_id,
		  const char *base, const char *user, const char *message,
		  const char *artifact_dir, json_t **out, struct wr_error **err)
{
	/* the branch, then a commit of whatever the workspace holds (none
	 * when it is unchanged); prints the branch's commit */
	static const char commit_script[] =
	    "set -e\n"
	    "cd /workspace\n"
	    "git rev-parse --git-dir >/dev/null\n"
	    "git checkout -q -B \"warren/$1\"\n"
	    "git add -A\n"
	    "if ! git diff --cached --quiet; then\n"
	    "  git -c user.name=\"$2\" -c user.email=\"$3\" "
	    "-c commit.gpgsign=false commit -q --no-verify -F -\n"
	    "fi\n"
	    "git rev-parse HEAD\n";
	_cleanup_free_ char *email = wr_asprintf("%s@warren.invalid", user);
	if (!email)
		return wr_error_set(err, ENOMEM, "commit");
	const char *args[] = {session_id, user, email, NULL};
	struct tools_exec_result res = {0};
	int r = sandbox_sh(ex, commit_script, args, message, 4096, &res, err);
	if (r < 0)
		return wr_error_wrap(err, "commit");
	char why[512];
	if (res.status != 0) {
		r = wr_error_set(err, EIO, "commit on warren/%s: %s",
				 session_id,
				 first_line(&res, why, sizeof(why)));
		tools_exec_result_clear(&res);
		return r;
	}
	char commit[41] = "";
	snprintf(commit, sizeof(commit), "%.40s", res.out ? res.out : "");
	tools_exec_result_clear(&res);
	if (strlen(commit) != 40)
		return wr_error_set(err, EPROTO, "commit: no commit id");

	/* the diff against the base, and per-file stats */
	const char *dargs[] = {base, commit, NULL};
	r = sandbox_sh(ex,
		       "cd /workspace && git diff --binary --no-color \"$1\" "
		       "\"$2\"",
		       dargs, NULL, DIFF_MAX, &res, err);
	if (r < 0)
		return wr_error_wrap(err, "diff");
	if (res.status != 0) {
		r = wr_error_set(err, EIO, "diff %s..%s: %s", base, commit,
				 first_line(&res, why, sizeof(why)));
		tools_exec_result_clear(&res);
		return r;
	}
	bool truncated = res.truncated;
	wr_mkdir_p(artifact_dir, 0700);
	r = write_artifact(artifact_dir, "diff.patch", res.out ? res.out : "",
			   res.out_len, err);
	tools_exec_result_clear(&res);
	if (r < 0)
		return r;
	r = sandbox_sh(ex,
		       "cd /workspace && git diff --numstat -z \"$1\" \"$2\"",
		       dargs, NULL, 4u << 20, &res, err);
	if (r < 0)
		return wr_error_wrap(err, "diff --numstat");
	json_t *files = json_array();
	long long adds = 0, dels = 0;
	/* -z: "ADDED\tDELETED\tPATH\0" ("-" for binary files) */
	for (size_t off = 0; res.out && off < res.out_len;) {
		const char *rec = res.out + off;
		size_t rlen = strnlen(rec, res.out_len - off);
		off += rlen + 1;
		char *t1 = memchr(rec, '\t', rlen);
		char *t2 =
		    t1 ? memchr(t1 + 1, '\t', rlen - (size_t)(t1 + 1 - rec))
		       : NULL;
		if (!t2)
			continue;
		long long a = rec[0] == '-' ? 0 : atoll(rec);
		long long d = t1[1] == '-' ? 0 : atoll(t1 + 1);
		adds += a;
		dels += d;
		json_t *p = json_stringn(t2 + 1, rlen - (size_t)(t2 + 1 - rec));
		json_array_append_new(
		    files, json_pack("{s:o, s:I, s:I, s:b}", "path",
				     p ? p : json_string("?"), "additions",
				     (json_int_t)a, "deletions", (json_int_t)d,
				     "binary", rec[0] == '-'));
	}
	tools_exec_result_clear(&res);
	json_t *result = json_pack(
	    "{s:s+, s:s, s:s, s:O, s:I, s:I, s:b, s:b}", "branch", "warren/",
	    session_id, "commit", commit, "base", base, "files", files,
	    "additions", (json_int_t)adds, "deletions", (json_int_t)dels,
	    "changed", strcmp(commit, base) != 0, "diff_truncated", truncated);
	char *text = json_dumps(files, JSON_INDENT(2));
	json_decref(files);
	r = text ? write_artifact(artifact_dir, "files.json", text,
				  strlen(text), err)
		 : wr_error_set(err, ENOMEM, "files.json");
	free(text);
	if (r < 0) {
		json_decref(result);
		return r;
	}
	/* the branch's new commits as a bundle: how they leave the sandbox
	 * (no network, no credential in there) when a reviewer approves */
	_cleanup_free_ char *bundle =
	    wr_asprintf("%s/branch.bundle", artifact_dir);
	_cleanup_free_ char *range =
	    wr_asprintf("%s..warren/%s", base, session_id);
	if (!bundle || !range) {
		json_decref(result);
		return wr_error_set(err, ENOMEM, "bundle");
	}
	unlink(bundle);
	if (strcmp(commit, base) != 0) {
		char *const bargv[] = {"git",	 "-C", "/workspace", "bundle",
				       "create", "-",  range,	     NULL};
		r = ex->run(ex->ctx, bargv, NULL, 0, GIT_TIMEOUT_MS, BUNDLE_MAX,
			    &res, err);
		if (r == 0 && (res.status != 0 || res.truncated))
			r = wr_error_set(
			    err, EIO, "bundle of warren/%s: %s", session_id,
			    res.truncated ? "larger than 512 MiB"
					  : first_line(&res, why, sizeof(why)));
		if (r == 0)
			r = write_artifact(artifact_dir, "branch.bundle",
					   res.out, res.out_len, err);
		tools_exec_result_clear(&res);
		if (r < 0) {
			json_decref(result);
			return r;
		}
	}
	*out = result;
	return 0;
}

/* Runs host git; a non-zero exit is an error with git's last words. */
static int host_git_env(char *const argv[], char *const envp[], char **out,
			struct wr_error **err)
{
	_cleanup_free_ char *errors = NULL;
	char *output = NULL;
	int status = proc_run_env(argv, envp, 1 << 20, &output, &errors, err);
	if (status < 0)
		return status;
	if (status != 0) {
		char why[512];
		snprintf(why, sizeof(why), "%s", errors ? errors : "");
		size_t l = strlen(why);
		while (l && (why[l - 1] == '\n' || why[l - 1] == ' '))
			why[--l] = '\0';
		free(output);
		return wr_error_set(err, EIO, "git %s: %s (exit %d)", argv[3],
				    why, status);
	}
	if (out)
		*out = output;
	else
		free(output);
	return 0;
}

static int host_git(char *const argv[], char **out, struct wr_error **err)
{
	return host_git_env(argv, NULL, out, err);
}

int review_push(const char *bundle, const char *session_id, const char *mirror,
		const char *remote_url, char *const remote_env[], json_t **out,
		struct wr_error **err)
{
	char ref[160], staging[160];
	snprintf(ref, sizeof(ref), "refs/heads/warren/%s", session_id);
	snprintf(staging, sizeof(staging), "refs/warren-push/%s", session_id);
	/* into the mirror under a staging ref, then to the remote as the
	 * session's branch only: an explicit refspec, never forced */
	_cleanup_free_ char *fetch_spec = wr_asprintf("+%s:%s", ref, staging);
	_cleanup_free_ char *push_spec = wr_asprintf("%s:%s", staging, ref);
	if (!fetch_spec || !push_spec)
		return wr_error_set(err, ENOMEM, "push");
	char *const fargv[] = {"/usr/bin/git", "-C",	   (char *)mirror,
			       "fetch",	       "-q",	   "--no-tags",
			       (char *)bundle, fetch_spec, NULL};
	int r = host_git(fargv, NULL, err);
	if (r < 0)
		return wr_error_wrap(err, "push");
	char *const pargv[] = {"/usr/bin/git",
			       "-C",
			       (char *)mirror,
			       "push",
			       "-q",
			       "--",
			       (char *)remote_url,
			       push_spec,
			       NULL};
	r = host_git_env(pargv, remote_env, NULL, err);
	char *output = NULL;
	char *const rargv[] = {"/usr/bin/git", "-C",	(char *)mirror,
			       "rev-parse",    staging, NULL};
	int rr = r < 0 ? r : host_git(rargv, &output, NULL);
	char *const dargv[] = {
	    "/usr/bin/git", "-C", (char *)mirror, "update-ref", "-d",
	    staging,	    NULL};
	host_git(dargv, NULL, NULL);
	if (r < 0) {
		free(output);
		return wr_error_wrap(err, "push");
	}
	char commit[41] = "";
	if (rr == 0 && output)
		snprintf(commit, sizeof(commit), "%.40s", output);
	free(output);
	*out = json_pack("{s:s, s:s, s:s}", "remote", remote_url, "ref", ref,
			 "commit", commit);
	return 0;
}

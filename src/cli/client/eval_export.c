/* eval_export.c - `warren eval export SUITE --harbor OUT`: a suite in
 * Harbor's task layout (Terminal-Bench's successor), so that other
 * harnesses run the same frozen tasks (docs/eval.md "Export").
 *
 * Per task, OUT/<task>/:
 *   instruction.md          the prompt, as a person wrote it
 *   task.toml               version, metadata (suite, task, repository,
 *                           base), the agent's and verifier's timeouts
 *   environment/Dockerfile  the repository at its base commit in
 *                           /workspace: a local repository's tree as
 *                           environment/repo.tar (`git archive`), a
 *                           remote one cloned at build time; then
 *                           environment/setup.sh, the repository's own
 *                           set-up from its spec at base (onCreate-,
 *                           updateContent- and postCreateCommand, as a
 *                           Warren snapshot and session run them; a
 *                           local repository's only)
 *   tests/test.sh           fail_to_pass and pass_to_pass run from
 *                           /workspace, the hidden files at
 *                           $WARREN_TASK_TESTS (tests/hidden/); 1 or 0
 *                           into /logs/verifier/reward.txt
 *   tests/hidden/...        the task's hidden test files
 *   solution/solve.sh       applies solution/solution.patch (if any)
 *
 * A repository given by its registered name is looked up on the server
 * (GET /repositories) for its URL; `--repo NAME=URL` says it
 * instead. Nothing is written outside OUT, and OUT/<task> must not exist
 * yet (a half export is removed). */
#include "cli/client/eval.h"

#include "snapshot/spec.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/gitenv.h"
#include "util/parse.h"
#include "util/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT_AGENT_TIMEOUT_S 1800.0
#define EXPORT_VERIFIER_TIMEOUT_S 900.0

/* A TOML basic string: quotes, backslashes and control characters
 * escaped. Caller frees. */
static char *toml_string(const char *s)
{
	size_t n = strlen(s);
	char *out = wr_malloc(n * 6 + 3);
	if (!out)
		return NULL;
	char *o = out;
	*o++ = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			*o++ = '\\';
			*o++ = (char)*p;
		} else if (*p < 0x20 || *p == 0x7f) {
			o += sprintf(o, "\\u%04x", *p);
		} else {
			*o++ = (char)*p;
		}
	}
	*o++ = '"';
	*o = '\0';
	return out;
}

/* A POSIX shell word: single-quoted. Caller frees. */
static char *sh_quote(const char *s)
{
	size_t n = 2;
	for (const char *p = s; *p; p++)
		n += *p == '\'' ? 4 : 1;
	char *out = wr_malloc(n + 1);
	if (!out)
		return NULL;
	char *o = out;
	*o++ = '\'';
	for (const char *p = s; *p; p++) {
		if (*p == '\'') {
			memcpy(o, "'\\''", 4);
			o += 4;
		} else {
			*o++ = *p;
		}
	}
	*o++ = '\'';
	*o = '\0';
	return out;
}

static int write_text(const char *dir, const char *name, const char *text,
		      mode_t mode, struct wr_error **err)
{
	_cleanup_free_ char *path = wr_asprintf("%s/%s", dir, name);
	if (!path)
		return wr_error_set(err, ENOMEM, "export");
	int r = wr_write_file_atomic(path, text, strlen(text), mode, false);
	return r < 0 ? wr_error_set(err, -r, "write %s", path) : 0;
}

/* Where the task's repository comes from: a URL, or a local path (then
 * *local is true). The mapping given with --repo first, then a path or
 * URL as written, then the server's record of a registered name. */
static int repo_source(struct client *c, const struct eval_export_opts *o,
		       const char *repo, char **src, bool *local,
		       struct wr_error **err)
{
	const char *given = NULL;
	size_t len = strlen(repo);
	for (size_t i = 0; i < o->n_repos; i++)
		if (!strncmp(o->repos[i], repo, len) && o->repos[i][len] == '=')
			given = o->repos[i] + len + 1;
	_cleanup_free_ char *fetched = NULL;
	if (!given && (strstr(repo, "://") || repo[0] == '/' ||
		       !strncmp(repo, "./", 2) || !strncmp(repo, "../", 3)))
		given = repo;
	if (!given) {
		json_t *list = NULL;
		int e = client_get(c, "/repositories", &list, err);
		if (e < 0)
			return wr_error_wrap(err,
					     "repository %s (or say it with "
					     "--repo %s=URL)",
					     repo, repo);
		size_t i;
		json_t *r;
		json_array_foreach(json_object_get(list, "repositories"), i, r)
		{
			const char *name =
			    json_string_value(json_object_get(r, "name"));
			const char *url =
			    json_string_value(json_object_get(r, "url"));
			if (name && url && !strcmp(name, repo) && !fetched)
				fetched = wr_strdup(url);
		}
		json_decref(list);
		if (!fetched)
			return wr_error_input(err, ENOENT,
					      "repository %s: not registered on "
					      "the server (say where it is with "
					      "--repo %s=URL)",
					      repo, repo);
		given = fetched;
	}
	const char *path = given;
	if (!strncmp(path, "file://", 7))
		path += 7;
	*local = !strstr(path, "://");
	*src = wr_strdup(*local ? path : given);
	return *src ? 0 : wr_error_set(err, ENOMEM, "export");
}

/* "--git-dir=..." of a local repository: its work tree's .git, or the
 * bare repository itself. Caller frees. */
static char *git_dir_opt(const char *repo)
{
	_cleanup_free_ char *dot = wr_asprintf("%s/.git", repo);
	struct stat st;
	if (dot && stat(dot, &st) == 0)
		return wr_asprintf("--git-dir=%s", dot);
	return dot ? wr_asprintf("--git-dir=%s", repo) : NULL;
}

/* environment/repo.tar: the tree at base, from a local repository. */
static int archive_tree(const char *git_dir, const char *base, const char *env,
			struct wr_error **err)
{
	_cleanup_free_ char *tar = wr_asprintf("%s/repo.tar", env);
	if (!tar)
		return wr_error_set(err, ENOMEM, "export");
	const char *argv[] = {"git",	 git_dir,	"archive", "--format=tar",
			      "-o",	 tar,		"--",	   base,
			      NULL};
	struct spawn_call call = {
	    .argv = argv,
	    .envp = git_locked_env(),
	    .in_fd = -1,
	    .out_fd = -1,
	    .timeout_ms = 10 * 60 * 1000,
	};
	int status = spawn_run(&call, err);
	if (status < 0)
		return wr_error_wrap(err, "git archive");
	if (status != 0)
		return wr_error_set(err, EIO, "git archive at %s: %s", base,
				    call.err_tail[0] ? call.err_tail
						     : "failed");
	return 0;
}

/* The spec file at base (its text, NULL if the repository has none):
 * the first of the places Warren reads it from (snapshot/spec.c). */
static int spec_at(const char *git_dir_opt, const char *base, char **text,
		   struct wr_error **err)
{
	static const char *const candidates[] = {
	    ".devcontainer/devcontainer.json",
	    "warren.json",
	};
	*text = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(candidates); i++) {
		_cleanup_free_ char *obj =
		    wr_asprintf("%s:%s", base, candidates[i]);
		if (!obj)
			return wr_error_set(err, ENOMEM, "export");
		const char *argv[] = {"git", git_dir_opt, "show", obj, NULL};
		struct spawn_call call = {
		    .argv = argv,
		    .envp = git_locked_env(),
		    .in_fd = -1,
		    .out_fd = -1,
		    .out = text,
		    .timeout_ms = 60 * 1000,
		};
		int status = spawn_run(&call, err);
		if (status < 0)
			return wr_error_wrap(err, "git show %s", obj);
		if (status == 0)
			return 0;
		free(*text);
		*text = NULL;
	}
	return 0;
}

/* One hook's commands as shell lines: a string runs under sh -c, an
 * array is an argv, an object holds several of either (run one after
 * the other here; Warren runs them at once). */
static void hook_lines(FILE *f, const char *name, const json_t *v, bool *ok)
{
	if (json_is_string(v)) {
		_cleanup_free_ char *q = sh_quote(json_string_value(v));
		*ok = *ok && q;
		if (q)
			fprintf(f, "echo '== %s'; sh -c %s\n", name, q);
	} else if (json_is_array(v)) {
		fprintf(f, "echo '== %s';", name);
		size_t i;
		json_t *w;
		json_array_foreach(v, i, w)
		{
			_cleanup_free_ char *q = sh_quote(
			    json_is_string(w) ? json_string_value(w) : "");
			*ok = *ok && q;
			if (q)
				fprintf(f, " %s", q);
		}
		fputc('\n', f);
	} else if (json_is_object(v)) {
		const char *key;
		json_t *w;
		json_object_foreach((json_t *)v, key, w)
		{
			_cleanup_free_ char *sub = wr_asprintf("%s.%s", name, key);
			*ok = *ok && sub;
			if (sub && (json_is_string(w) || json_is_array(w)))
				hook_lines(f, sub, w, ok);
		}
	}
}

/* environment/setup.sh from the spec text (NULL: none to write). */
static int setup_script(const char *spec_text, char **out,
			struct wr_error **err)
{
	*out = NULL;
	if (!spec_text)
		return 0;
	_cleanup_free_ char *json = NULL;
	size_t json_len = 0;
	int r = spec_jsonc_to_json(spec_text, strlen(spec_text), &json,
				   &json_len, err);
	if (r < 0)
		return wr_error_wrap(err, "the repository's spec");
	json_error_t jerr;
	json_t *spec = json_loadb(json, json_len, 0, &jerr);
	if (!json_is_object(spec)) {
		json_decref(spec);
		return wr_error_input(err, EINVAL,
				      "the repository's spec: line %d: %s",
				      jerr.line, jerr.text);
	}
	static const char *const hooks[] = {
	    "onCreateCommand", "updateContentCommand", "postCreateCommand"};
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	bool ok = f != NULL, any = false;
	if (f)
		fputs("#!/bin/sh\n# exported by warren eval export: the "
		      "repository's own set-up, from its spec\nset -e\n"
		      "cd /workspace\n",
		      f);
	for (size_t i = 0; f && i < ARRAY_SIZE(hooks); i++) {
		const json_t *v = json_object_get(spec, hooks[i]);
		if (v) {
			any = true;
			hook_lines(f, hooks[i], v, &ok);
		}
	}
	json_decref(spec);
	if (!f || fclose(f) != 0 || !ok) {
		free(text);
		return wr_error_set(err, ENOMEM, "export");
	}
	if (!any) {
		free(text);
		return 0;
	}
	*out = text;
	return 0;
}

static char *dockerfile(const struct eval_export_opts *o, const char *src,
			bool local, bool setup, const char *base)
{
	_cleanup_free_ char *q_src = sh_quote(src);
	_cleanup_free_ char *q_base = sh_quote(base);
	if (!q_src || !q_base)
		return NULL;
	const char *image = o->base_image ? o->base_image : "debian:12";
	/* --apt's names: letters, digits, "+-.:" (checked), commas as
	 * spaces */
	_cleanup_free_ char *pkgs = wr_strdup(o->apt ? o->apt : "");
	if (!pkgs)
		return NULL;
	for (char *p = pkgs; *p; p++)
		if (*p == ',')
			*p = ' ';
	_cleanup_free_ char *git =
	    wr_asprintf("RUN apt-get update && apt-get install -y "
			"--no-install-recommends git ca-certificates %s && "
			"rm -rf /var/lib/apt/lists/*\n",
			pkgs);
	if (!git)
		return NULL;
	if (local)
		return wr_asprintf(
		    "# exported by warren eval export: the repository's tree "
		    "at %s\nFROM %s\n%sCOPY repo.tar /tmp/repo.tar\n"
		    "RUN mkdir -p /workspace && tar -xf /tmp/repo.tar -C "
		    "/workspace && rm /tmp/repo.tar && cd /workspace && "
		    "git init -q && git add -A && git -c user.name=warren -c "
		    "user.email=warren@localhost commit -qm base\n"
		    "%sWORKDIR /workspace\n",
		    base, image, git,
		    setup ? "COPY setup.sh /tmp/setup.sh\nRUN sh /tmp/setup.sh "
			    "&& rm /tmp/setup.sh\n"
			  : "");
	return wr_asprintf(
	    "# exported by warren eval export: the repository at %s\nFROM %s\n"
	    "%sRUN git clone %s /workspace && git -C /workspace checkout -q "
	    "%s\nWORKDIR /workspace\n",
	    base, image, git, q_src, q_base);
}

/* tests/test.sh: every command in a subshell of its own, from
 * /workspace; the reward is 1 only if all pass. */
static char *test_script(const struct eval_task *t)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	fprintf(f,
		"#!/bin/sh\n# exported by warren eval export (task %s): "
		"fail_to_pass must pass, pass_to_pass must still pass\n"
		"cd /workspace || exit 1\n"
		"WARREN_TASK_TESTS=\"$(cd \"$(dirname \"$0\")\" && "
		"pwd)/hidden\"\n"
		"export WARREN_TASK_TESTS\n"
		"mkdir -p /logs/verifier\n"
		"failed=0\n",
		t->name);
	const json_t *lists[] = {t->fail_to_pass, t->pass_to_pass};
	const char *names[] = {"fail_to_pass", "pass_to_pass"};
	bool ok = true;
	for (int k = 0; k < 2; k++) {
		size_t i;
		json_t *v;
		json_array_foreach(lists[k], i, v)
		{
			_cleanup_free_ char *cmd = sh_quote(json_string_value(v));
			ok = ok && cmd;
			if (cmd)
				fprintf(f,
					"if (sh -c %s); then echo \"PASS "
					"%s[%zu]\"; else echo \"FAIL %s[%zu]\"; "
					"failed=1; fi\n",
					cmd, names[k], i, names[k], i);
		}
	}
	fputs("if [ $failed = 0 ]; then echo 1; else echo 0; fi "
	      ">/logs/verifier/reward.txt\n",
	      f);
	if (fclose(f) != 0 || !ok) {
		free(text);
		return NULL;
	}
	return text;
}

static int write_hidden(const struct eval_task *t, const char *tests,
			struct wr_error **err)
{
	const char *rel;
	json_t *v;
	json_object_foreach(t->tests, rel, v)
	{
		/* eval_suite.c checked each path: relative, no "..", no
		 * hidden parts */
		_cleanup_free_ char *path =
		    wr_asprintf("%s/hidden/%s", tests, rel);
		if (!path)
			return wr_error_set(err, ENOMEM, "export");
		_cleanup_free_ char *dir = wr_strdup(path);
		char *slash = dir ? strrchr(dir, '/') : NULL;
		if (!slash)
			return wr_error_set(err, ENOMEM, "export");
		*slash = '\0';
		int r = wr_mkdir_p(dir, 0755);
		const char *text = json_string_value(v);
		if (r == 0)
			r = wr_write_file_atomic(path, text, strlen(text),
						 0755, false);
		if (r < 0)
			return wr_error_set(err, -r, "write %s", path);
	}
	return 0;
}

static int task_toml(const struct eval_suite *s, const struct eval_task *t,
		     const char *src, const char *dir, struct wr_error **err)
{
	double agent_s = EXPORT_AGENT_TIMEOUT_S;
	const char *lifetime =
	    json_string_value(json_object_get(t->budget, "lifetime"));
	uint64_t ms;
	if (lifetime && wr_parse_duration(lifetime, &ms) == 0 && ms)
		agent_s = (double)ms / 1000.0;
	_cleanup_free_ char *q_suite = toml_string(s->name);
	_cleanup_free_ char *q_task = toml_string(t->name);
	_cleanup_free_ char *q_repo = toml_string(src);
	_cleanup_free_ char *q_base = toml_string(t->base);
	_cleanup_free_ char *text =
	    q_suite && q_task && q_repo && q_base
		? wr_asprintf("version = \"1.0\"\n\n[metadata]\nsource = "
			      "\"warren eval export\"\nwarren_suite = %s\n"
			      "warren_task = %s\nrepository = %s\nbase = %s\n"
			      "\n[verifier]\ntimeout_sec = %.1f\n\n[agent]\n"
			      "timeout_sec = %.1f\n\n[environment]\n"
			      "build_timeout_sec = 600.0\n",
			      q_suite, q_task, q_repo, q_base,
			      EXPORT_VERIFIER_TIMEOUT_S, agent_s)
		: NULL;
	if (!text)
		return wr_error_set(err, ENOMEM, "export");
	return write_text(dir, "task.toml", text, 0644, err);
}

static int export_task(struct client *c, const struct eval_export_opts *o,
		       const struct eval_suite *s, const struct eval_task *t,
		       const char *dir, struct wr_error **err)
{
	_cleanup_free_ char *src = NULL;
	bool local = false;
	int r = repo_source(c, o, t->repo, &src, &local, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *env = wr_asprintf("%s/environment", dir);
	_cleanup_free_ char *tests = wr_asprintf("%s/tests", dir);
	_cleanup_free_ char *sol = wr_asprintf("%s/solution", dir);
	if (!env || !tests || !sol)
		return wr_error_set(err, ENOMEM, "export");
	if (mkdir(dir, 0755) < 0)
		return wr_error_set(err, errno, "create %s", dir);
	if (mkdir(env, 0755) < 0 || mkdir(tests, 0755) < 0 ||
	    mkdir(sol, 0755) < 0)
		return wr_error_set(err, errno, "create %s/*", dir);
	r = write_text(dir, "instruction.md", t->prompt, 0644, err);
	if (r == 0)
		r = task_toml(s, t, src, dir, err);
	_cleanup_free_ char *git_dir = local ? git_dir_opt(src) : NULL;
	_cleanup_free_ char *spec = NULL, *setup = NULL;
	if (r == 0 && local && !git_dir)
		r = wr_error_set(err, ENOMEM, "export");
	if (r == 0 && local)
		r = archive_tree(git_dir, t->base, env, err);
	if (r == 0 && local)
		r = spec_at(git_dir, t->base, &spec, err);
	if (r == 0)
		r = setup_script(spec, &setup, err);
	if (r == 0 && setup)
		r = write_text(env, "setup.sh", setup, 0755, err);
	_cleanup_free_ char *df =
	    r == 0 ? dockerfile(o, src, local, setup != NULL, t->base) : NULL;
	if (r == 0)
		r = df ? write_text(env, "Dockerfile", df, 0644, err)
		       : wr_error_set(err, ENOMEM, "export");
	_cleanup_free_ char *ts = r == 0 ? test_script(t) : NULL;
	if (r == 0)
		r = ts ? write_text(tests, "test.sh", ts, 0755, err)
		       : wr_error_set(err, ENOMEM, "export");
	if (r == 0 && t->tests)
		r = write_hidden(t, tests, err);
	if (r == 0 && t->solution)
		r = write_text(sol, "solution.patch", t->solution, 0644, err);
	if (r == 0)
		r = write_text(
		    sol, "solve.sh",
		    t->solution
			? "#!/bin/sh\n# exported by warren eval export: the "
			  "human's change\ncd /workspace && git apply "
			  "--whitespace=nowarn \"$(cd \"$(dirname \"$0\")\" && "
			  "pwd)/solution.patch\"\n"
			: "#!/bin/sh\necho 'no solution in the suite' >&2\n"
			  "exit 1\n",
		    0755, err);
	return r;
}

int eval_export(struct client *c, const struct eval_export_opts *o,
		const char *suite_dir, struct wr_error **err)
{
	struct eval_suite s = {0};
	int r = eval_suite_load(suite_dir, false, &s, err);
	if (r < 0)
		return r;
	r = wr_mkdir_p(o->out, 0755);
	if (r < 0) {
		eval_suite_clear(&s);
		return wr_error_set(err, -r, "create %s", o->out);
	}
	size_t done = 0;
	for (size_t i = 0; r == 0 && i < s.n_tasks; i++) {
		_cleanup_free_ char *dir =
		    wr_asprintf("%s/%s", o->out, s.tasks[i].name);
		struct stat st;
		if (!dir)
			r = wr_error_set(err, ENOMEM, "export");
		else if (lstat(dir, &st) == 0)
			r = wr_error_input(err, EEXIST,
					   "%s exists already: export into "
					   "an empty directory",
					   dir);
		else if ((r = export_task(c, o, &s, &s.tasks[i], dir, err)) <
			 0) {
			wr_rm_rf(dir); /* no half task */
			r = wr_error_wrap(err, "task %s", s.tasks[i].name);
		} else {
			done++;
		}
	}
	if (r == 0)
		printf("exported %zu tasks of suite %s to %s (Harbor's task "
		       "layout)\n",
		       done, s.name, o->out);
	eval_suite_clear(&s);
	return r;
}

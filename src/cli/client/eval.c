/* eval.c - `warren eval run|report`: a pilot over a suite of frozen tasks
 * (docs/eval.md). `eval run` submits each task as a session (the task's
 * repository at its base), waits for it to rest, runs the task's hidden
 * tests on the result through POST /sessions/{id}/check (a fresh sandbox
 * at the result commit), and records each attempt in its own file, so a
 * run stopped anywhere resumes (`--resume ID`). eval_suite.c reads the
 * suite, eval_report.c makes the report.
 *
 *   POST /sessions, GET /sessions/{id}, POST /sessions/{id}/check,
 *   POST /sessions/{id}/reject; PUT /evals/{id} and
 *   /evals/{id}/attempts/{TASK.K} (published as the run goes), GET
 *   /evals/{id} (the verdicts, for the report), POST /evals/reviews */
#include "cli/client/eval.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The oracle's agent: the solution (the session's prompt) applied to the
 * work tree; git is the snapshot's, the prompt file the runner's. After a
 * failed verification the agent is run again with Warren's feedback as
 * its prompt: that is no patch, and the change stands as it is. */
#define EVAL_ORACLE_AGENT                                                      \
	"grep -q '^diff --git ' \"$WARREN_PROMPT_FILE\" || exit 0; "            \
	"git apply --whitespace=nowarn \"$WARREN_PROMPT_FILE\""
#define EVAL_POLL_MS 500
/* run.json's "agent" of a run on the server's model (a label) */
#define EVAL_SERVER_AGENT "(the server's)"

static const char eval_usage[] =
    "usage: warren eval run SUITE [options]\n"
    "       warren eval run --resume RUN [--wait] [--json]\n"
    "       warren eval report RUN [--compare RUN2] [--json]\n"
    "       warren eval review RUN [RUN2...] [--json]\n"
    "       warren eval export SUITE --harbor OUT [--repo NAME=URL]...\n"
    "                          [--base-image IMAGE] [--apt PKGS]\n"
    "\n"
    "Runs a suite of frozen tasks (docs/eval.md): each task is submitted as\n"
    "a session on its repository at its base commit, and once the session\n"
    "rests its hidden tests run on the result in a fresh sandbox. Prints\n"
    "the run's id; the run goes on in the background (its log in the run's\n"
    "directory) unless --wait. Each run and attempt is published to the\n"
    "server (the web UI's Evals page); `eval review` puts the runs'\n"
    "resolved changes up for blind review there, and `eval report` adds\n"
    "the verdicts: accepted changes per reviewer minute, cost per\n"
    "accepted change.\n"
    "\n"
    "  --agent CMD         the agent, a shell command line (default: the\n"
    "                      repository's, then the server's model)\n"
    "  --agent-preset NAME[@VERSION]  an agent CLI Warren installs: opencode,\n"
    "                      codex, claude-code\n"
    "  --oracle            apply each task's solution.patch instead of an\n"
    "                      agent: every task must resolve\n"
    "  --repeat N          attempts per task (default 3)\n"
    "  --parallel K        sessions at once (default 2)\n"
    "  --keep-review       leave the sessions in review (default: rejected\n"
    "                      once checked, which frees their sandboxes)\n"
    "  --resume RUN        go on with a run that stopped\n"
    "  -w, --wait          drive the run in the foreground, then print its\n"
    "                      report\n"
    "  --dir DIR           where runs are kept (default $WARREN_EVAL_DIR,\n"
    "                      else $WARREN_HOME/eval, else ./.warren-eval)\n"
    "  --json              the run (--wait: the report) as JSON\n"
    "  --harbor OUT        export: one directory per task in Harbor's layout\n"
    "                      (instruction.md, task.toml, environment/, tests/,\n"
    "                      solution/) for other harnesses\n"
    "  --repo NAME=URL     export: where the task repository NAME comes\n"
    "                      from (default: a path or URL as written, else the\n"
    "                      server's record of the registered name)\n"
    "  --base-image IMAGE  export: the Dockerfiles' FROM (default debian:12)\n"
    "  --apt PKGS          export: Debian packages the environment installs\n"
    "                      besides git (\"make gcc cmake\")\n"
    "  --server URL        Warren server (default $WARREN_SERVER, else\n"
    "                      " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T           API token, a reviewer's or an admin's (default\n"
    "                      $WARREN_TOKEN, else $WARREN_HOME/admin.token)\n"
    "\n"
    "Exit status: 0 done (--wait: every attempt finished), 1 API error, 2\n"
    "usage error or a bad suite, 3 server unreachable (resume the run).\n";

enum {
	OPT_AGENT = 0x100,
	OPT_PRESET,
	OPT_ORACLE,
	OPT_REPEAT,
	OPT_PARALLEL,
	OPT_RESUME,
	OPT_DIR,
	OPT_KEEP,
	OPT_COMPARE,
	OPT_HARBOR,
	OPT_REPO,
	OPT_BASE_IMAGE,
	OPT_APT,
};

static const struct option eval_options[] = {
    {"agent", required_argument, NULL, OPT_AGENT},
    {"agent-preset", required_argument, NULL, OPT_PRESET},
    {"oracle", no_argument, NULL, OPT_ORACLE},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"parallel", required_argument, NULL, OPT_PARALLEL},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"dir", required_argument, NULL, OPT_DIR},
    {"keep-review", no_argument, NULL, OPT_KEEP},
    {"compare", required_argument, NULL, OPT_COMPARE},
    {"harbor", required_argument, NULL, OPT_HARBOR},
    {"repo", required_argument, NULL, OPT_REPO},
    {"base-image", required_argument, NULL, OPT_BASE_IMAGE},
    {"apt", required_argument, NULL, OPT_APT},
    {"wait", no_argument, NULL, 'w'},
    {NULL, 0, NULL, 0},
};

struct eval_opts {
	const char *agent, *preset, *resume, *dir, *compare;
	struct eval_export_opts export;
	bool oracle, wait, keep, repeat_set, parallel_set;
	uint64_t repeat, parallel;
};

static int on_option(struct client *c, void *ctx, int opt, const char *arg)
{
	struct eval_opts *o = ctx;
	switch (opt) {
	case OPT_AGENT:
		if (!*arg) {
			client_usage_error(c, "--agent: empty command");
			return -1;
		}
		o->agent = arg;
		return 0;
	case OPT_PRESET: o->preset = arg; return 0;
	case OPT_ORACLE: o->oracle = true; return 0;
	case OPT_REPEAT:
		if (wr_parse_uint(arg, 1, EVAL_REPEAT_MAX, &o->repeat) < 0) {
			client_usage_error(c, "--repeat '%s': 1 to %d", arg,
					   EVAL_REPEAT_MAX);
			return -1;
		}
		o->repeat_set = true;
		return 0;
	case OPT_PARALLEL:
		if (wr_parse_uint(arg, 1, 64, &o->parallel) < 0) {
			client_usage_error(c, "--parallel '%s': 1 to 64", arg);
			return -1;
		}
		o->parallel_set = true;
		return 0;
	case OPT_RESUME: o->resume = arg; return 0;
	case OPT_DIR: o->dir = arg; return 0;
	case OPT_KEEP: o->keep = true; return 0;
	case OPT_COMPARE: o->compare = arg; return 0;
	case OPT_HARBOR: o->export.out = arg; return 0;
	case OPT_BASE_IMAGE: o->export.base_image = arg; return 0;
	case OPT_APT:
		for (const char *q = arg; *q; q++)
			if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789+-.:, ",
				    *q)) {
				client_usage_error(c, "--apt '%s': Debian "
						      "package names",
						   arg);
				return -1;
			}
		o->export.apt = arg;
		return 0;
	case OPT_REPO:
		if (!strchr(arg, '=') || arg[0] == '=' ||
		    o->export.n_repos >= EVAL_EXPORT_REPOS_MAX) {
			client_usage_error(c, "--repo '%s': NAME=URL (at most "
					      "%d)",
					   arg, EVAL_EXPORT_REPOS_MAX);
			return -1;
		}
		o->export.repos[o->export.n_repos++] = arg;
		return 0;
	case 'w': o->wait = true; return 0;
	}
	return -1;
}

/* ---- files of a run ------------------------------------------------------ */

char *eval_runs_dir(const char *opt)
{
	if (opt)
		return wr_strdup(opt);
	const char *env = getenv("WARREN_EVAL_DIR");
	if (env && *env)
		return wr_strdup(env);
	const char *home = getenv("WARREN_HOME");
	if (home && *home)
		return wr_asprintf("%s/eval", home);
	return wr_strdup(".warren-eval");
}

static int mkdir_p(const char *path)
{
	_cleanup_free_ char *p = wr_strdup(path);
	if (!p)
		return -ENOMEM;
	for (char *q = p + 1; *q; q++)
		if (*q == '/') {
			*q = '\0';
			if (mkdir(p, 0700) < 0 && errno != EEXIST)
				return -errno;
			*q = '/';
		}
	return mkdir(p, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

/* dir/name = j, atomically (a crash leaves the old file or the new). */
static int write_json(const char *dir, const char *name, const json_t *j,
		      struct wr_error **err)
{
	_cleanup_free_ char *path = wr_asprintf("%s/%s", dir, name);
	_cleanup_free_ char *tmp = wr_asprintf("%s/%s.tmp", dir, name);
	if (!path || !tmp)
		return wr_error_set(err, ENOMEM, "%s", name);
	if (json_dump_file(j, tmp, JSON_INDENT(2) | JSON_SORT_KEYS) < 0 ||
	    rename(tmp, path) < 0) {
		int e = errno ? errno : EIO;
		unlink(tmp);
		return wr_error_set(err, e, "write %s: %s", path, strerror(e));
	}
	return 0;
}

static bool valid_run_id(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > 64)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '-'))
			return false;
	return true;
}

int eval_run_load(const char *runs_dir, const char *id, json_t **run,
		  json_t **attempts, struct wr_error **err)
{
	if (!valid_run_id(id))
		return wr_error_input(err, EINVAL,
				      "run '%.80s': an id as `eval run` "
				      "printed it",
				      id);
	_cleanup_free_ char *dir = wr_asprintf("%s/%s", runs_dir, id);
	if (!dir)
		return wr_error_set(err, ENOMEM, "run");
	json_t *r = eval_read_json(dir, "run.json", err);
	if (!r)
		return wr_error_wrap(err, "run %s", id);
	json_t *list = json_array();
	size_t i;
	json_t *name;
	json_array_foreach(json_object_get(r, "tasks"), i, name)
	{
		for (json_int_t k = 1;
		     k <= json_integer_value(json_object_get(r, "repeat"));
		     k++) {
			_cleanup_free_ char *file = wr_asprintf(
			    "attempts/%s.%lld.json", json_string_value(name),
			    (long long)k);
			_cleanup_free_ char *path =
			    file ? wr_asprintf("%s/%s", dir, file) : NULL;
			if (!path || access(path, F_OK) < 0)
				continue;
			struct wr_error *e = NULL;
			json_t *a = eval_read_json(dir, file, &e);
			wr_error_free(e);
			if (a)
				json_array_append_new(list, a);
		}
	}
	*run = r;
	*attempts = list;
	return 0;
}

/* ---- one attempt ----------------------------------------------------------- */

struct attempt {
	struct eval_task *task;
	int repeat;
	char file[EVAL_NAME_MAX + 32]; /* attempts/<task>.<k>.json */
	json_t *rec;		       /* NULL: not started */
	bool done;
};

struct eval_state {
	struct client *c;
	struct eval_opts *o;
	struct eval_suite suite;
	json_t *run;
	char *dir; /* the run's */
	struct attempt *at;
	size_t n_at;
	bool publish_off; /* the server has no eval routes: stop trying */
};

/* A line in the run's log, whatever the mode (the background's stderr is
 * the log already; a foreground run's is the terminal). */
static void log_note(struct eval_state *st, const char *what,
		     const struct wr_error *e)
{
	_cleanup_free_ char *path = wr_asprintf("%s/log", st->dir);
	_cleanup_free_ char *msg =
	    client_clean(e && e->msg ? e->msg : "failed");
	FILE *f = path ? fopen(path, "ae") : NULL;
	if (f) {
		fprintf(f, "[eval] %s: %s\n", what, msg ? msg : "failed");
		fclose(f);
	}
}

/* The run (or one attempt) to the server, for the web UI and blind
 * review (PUT /evals/{id}, PUT /evals/{id}/attempts/{TASK.K}). A failure
 * is a note in the log, never the run's: the files are the run's record. */
static void publish(struct eval_state *st, struct attempt *a)
{
	if (st->publish_off || !st->dir)
		return;
	const char *id = client_json_str(st->run, "id");
	_cleanup_free_ char *path = NULL;
	json_t *body = NULL;
	if (a) {
		path = wr_asprintf("/evals/%s/attempts/%s.%d", id,
				   a->task->name, a->repeat);
		/* the task's prompt, which a blind reviewer reads (an
		 * oracle's session was prompted with the patch) */
		body = json_deep_copy(a->rec);
		if (body)
			json_object_set_new(body, "prompt",
					    json_string(a->task->prompt));
	} else {
		path = wr_asprintf("/evals/%s", id);
		body = json_incref(st->run);
	}
	struct wr_error *e = NULL;
	int r = path && body ? client_put(st->c, path, body, NULL, &e)
			     : -ENOMEM;
	json_decref(body);
	if (r < 0) {
		char what[EVAL_NAME_MAX + 64];
		if (a)
			snprintf(what, sizeof(what), "publish attempt %s.%d",
				 a->task->name, a->repeat);
		else
			snprintf(what, sizeof(what), "publish the run");
		log_note(st, what, e);
		/* a server without the routes, or a token that may not:
		 * once is enough */
		if (e && e->msg &&
		    (strstr(e->msg, "(HTTP 404 ") ||
		     strstr(e->msg, "(HTTP 403 "))) {
			st->publish_off = true;
			log_note(st, "publishing stops", NULL);
		}
	}
	wr_error_free(e);
}

static int attempt_save(struct eval_state *st, struct attempt *a,
			struct wr_error **err)
{
	int r = write_json(st->dir, a->file, a->rec, err);
	if (r == 0)
		publish(st, a);
	return r;
}

static void note(struct eval_state *st, struct attempt *a, const char *fmt,
		 const char *text)
{
	if (st->c->json && st->o->wait)
		return;
	_cleanup_free_ char *clean = client_clean(text);
	fprintf(stderr, "[%s #%d] ", a->task->name, a->repeat);
	fprintf(stderr, fmt, clean ? clean : "");
	fputc('\n', stderr);
}

static int attempt_submit(struct eval_state *st, struct attempt *a,
			  struct wr_error **err)
{
	struct eval_task *t = a->task;
	bool oracle = json_is_true(json_object_get(st->run, "oracle"));
	const char *agent = json_string_value(json_object_get(st->run, "agent"));
	/* the label of a run on the server's model is no command: the
	 * session is submitted without an agent */
	if (agent && !strcmp(agent, EVAL_SERVER_AGENT))
		agent = NULL;
	json_t *body = json_object();
	if (!body)
		return wr_error_set(err, ENOMEM, "submit");
	int r = client_json_set_str(body, "repo", t->repo, err);
	if (r == 0)
		r = client_json_set_str(body, "prompt",
					oracle ? t->solution : t->prompt, err);
	if (r == 0)
		r = client_json_set_str(body, "ref", t->base, err);
	const char *preset =
	    json_string_value(json_object_get(st->run, "agent_preset"));
	if (r == 0 && !oracle && preset)
		r = client_json_set_preset(body, preset, err);
	else if (r == 0 && (oracle || agent))
		r = client_json_set_agent(body, oracle ? EVAL_ORACLE_AGENT : agent,
					  err);
	if (r == 0 && t->budget)
		json_object_set(body, "limits", t->budget);
	json_t *session = NULL;
	if (r == 0)
		r = client_post(st->c, "/sessions", body, &session, err);
	json_decref(body);
	a->rec = json_pack("{s:s, s:i, s:s, s:I}", "task", t->name, "repeat",
			   a->repeat, "state", "running", "submitted_ms",
			   (json_int_t)client_now_ms());
	if (!a->rec) {
		json_decref(session);
		return wr_error_set(err, ENOMEM, "submit");
	}
	if (r < 0) {
		/* the server refused the task: an attempt that failed (an
		 * unreachable server stops the run instead) */
		if (r == -EHOSTUNREACH || r == -ECONNRESET || r == -ENOMEM) {
			json_decref(a->rec);
			a->rec = NULL;
			return r;
		}
		json_object_set_new(a->rec, "state", json_string("done"));
		json_object_set_new(a->rec, "resolved", json_false());
		json_object_set_new(
		    a->rec, "error",
		    json_string(*err && (*err)->msg ? (*err)->msg : "submit"));
		note(st, a, "not submitted: %s",
		     *err && (*err)->msg ? (*err)->msg : "");
		wr_error_free(*err);
		*err = NULL;
		a->done = true;
		return attempt_save(st, a, err);
	}
	json_object_set(a->rec, "session", json_object_get(session, "id"));
	note(st, a, "session %s", client_json_str(session, "id"));
	json_decref(session);
	return attempt_save(st, a, err);
}

/* The numbers of a session that rests, into the attempt's record. */
static void attempt_measure(json_t *rec, const json_t *s)
{
	json_t *outcome = json_object_get(s, "outcome");
	json_t *usage = json_object_get(outcome, "usage");
	json_t *verify = json_object_get(outcome, "verify");
	json_t *result = json_object_get(outcome, "result");
	int64_t created = client_json_int(s, "created_ms", 0);
	int64_t started = client_json_int(s, "started_ms", 0);
	int64_t finished = client_json_int(s, "finished_ms", 0);
	json_object_set(rec, "session_state", json_object_get(s, "state"));
	json_object_set(rec, "reason", json_object_get(s, "reason"));
	int64_t pt = client_json_int(usage, "prompt_tokens", 0);
	int64_t ct = client_json_int(usage, "completion_tokens", 0);
	json_object_set_new(rec, "tokens",
			    json_pack("{s:I, s:I, s:I}", "prompt", (json_int_t)pt,
				      "completion", (json_int_t)ct, "total",
				      (json_int_t)(pt + ct)));
	json_t *cost = json_object_get(usage, "cost");
	json_object_set_new(rec, "cost",
			    json_real(json_is_number(cost)
					  ? json_number_value(cost)
					  : 0.0));
	json_object_set_new(rec, "wall_ms",
			    json_integer(finished > created ? finished - created
							    : 0));
	json_object_set_new(rec, "agent_ms",
			    json_integer(finished > started && started
					     ? finished - started
					     : 0));
	/* the session's sandboxes until it rested, as the server counted */
	const json_t *sbs = json_object_get(outcome, "sandbox_seconds");
	json_object_set_new(rec, "sandbox_seconds",
			    json_is_number(sbs)
				? json_real(json_number_value(sbs))
				: json_null());
	json_object_set_new(
	    rec, "verify",
	    verify ? json_pack("{s:O, s:I}", "passed",
			       json_object_get(verify, "passed"), "attempts",
			       (json_int_t)client_json_int(verify, "attempts",
							   1))
		   : json_null());
	json_object_set_new(
	    rec, "diff",
	    json_pack("{s:b, s:I, s:I, s:I, s:I}", "changed",
		      json_is_true(json_object_get(result, "changed")),
		      "files",
		      (json_int_t)client_json_int(
			  result, "files_total",
			  (int64_t)json_array_size(
			      json_object_get(result, "files"))),
		      "additions",
		      (json_int_t)client_json_int(result, "additions", 0),
		      "deletions",
		      (json_int_t)client_json_int(result, "deletions", 0),
		      "bytes",
		      (json_int_t)client_json_int(result, "diff_bytes", 0)));
	int64_t tries = client_json_int(s, "attempts", 1);
	json_object_set_new(
	    rec, "retries",
	    json_pack("{s:I, s:I}", "sandbox",
		      (json_int_t)(tries > 1 ? tries - 1 : 0), "verify",
		      (json_int_t)(verify ? client_json_int(verify, "attempts",
							    1) -
						1
					  : 0)));
}

/* The hidden tests on the result: resolved when every command passes. */
static int attempt_check(struct eval_state *st, struct attempt *a,
			 const char *eid, struct wr_error **err)
{
	struct eval_task *t = a->task;
	json_t *body = json_pack("{s:O, s:O}", "fail_to_pass", t->fail_to_pass,
				 "pass_to_pass", t->pass_to_pass);
	if (body && t->tests)
		json_object_set(body, "tests", t->tests);
	_cleanup_free_ char *path = wr_asprintf("/sessions/%s/check", eid);
	if (!body || !path) {
		json_decref(body);
		return wr_error_set(err, ENOMEM, "check");
	}
	json_t *check = NULL;
	int r = client_post(st->c, path, body, &check, err);
	json_decref(body);
	if (r < 0)
		return r;
	bool passed = json_is_true(json_object_get(check, "passed"));
	/* each command's status and the end of its output */
	json_t *results = json_array();
	size_t i;
	json_t *res;
	json_array_foreach(json_object_get(check, "results"), i, res)
	{
		const char *out = client_json_str(res, "output");
		size_t len = out ? strlen(out) : 0;
		json_array_append_new(
		    results,
		    json_pack("{s:O, s:O, s:O, s:s}", "kind",
			      json_object_get(res, "kind"), "command",
			      json_object_get(res, "command"), "status",
			      json_object_get(res, "status"), "output",
			      out ? out + (len > 2048 ? len - 2048 : 0) : ""));
	}
	json_object_set_new(a->rec, "check",
			    json_pack("{s:b, s:O, s:o}", "passed", passed,
				      "commit", json_object_get(check, "commit"),
				      "results", results));
	json_object_set_new(a->rec, "resolved", json_boolean(passed));
	json_decref(check);
	return 0;
}

/* Looks at a running attempt; finishes it once its session rests. */
static int attempt_poll(struct eval_state *st, struct attempt *a,
			struct wr_error **err)
{
	const char *id = client_json_str(a->rec, "session");
	_cleanup_free_ char *eid = client_escape(id ? id : "");
	_cleanup_free_ char *path = eid ? wr_asprintf("/sessions/%s", eid)
					: NULL;
	if (!path)
		return wr_error_set(err, ENOMEM, "poll");
	json_t *s = NULL;
	int r = client_get(st->c, path, &s, err);
	if (r < 0)
		return r;
	const char *state = client_json_str(s, "state");
	if (!state || !client_state_rests(state)) {
		json_decref(s);
		return 0;
	}
	attempt_measure(a->rec, s);
	json_t *result =
	    json_object_get(json_object_get(s, "outcome"), "result");
	bool review = !strcmp(state, "review");
	json_object_set_new(a->rec, "resolved", json_false());
	if (json_object_get(result, "commit")) {
		r = attempt_check(st, a, eid, err);
		if (r < 0 && r != -EHOSTUNREACH && r != -ECONNRESET) {
			json_object_set_new(
			    a->rec, "error",
			    json_string(*err && (*err)->msg ? (*err)->msg
							    : "check"));
			wr_error_free(*err);
			*err = NULL;
			r = 0;
		}
		if (r < 0) {
			json_decref(s);
			return r;
		}
	}
	if (review && !st->o->keep) {
		_cleanup_free_ char *rpath =
		    wr_asprintf("/sessions/%s/reject", eid);
		_cleanup_free_ char *why = wr_asprintf(
		    "eval run %s", client_json_str(st->run, "id"));
		json_t *body = why ? json_pack("{s:s}", "reason", why) : NULL;
		struct wr_error *e = NULL;
		if (rpath && body)
			client_post(st->c, rpath, body, NULL, &e);
		wr_error_free(e);
		json_decref(body);
	}
	json_decref(s);
	json_object_set_new(a->rec, "state", json_string("done"));
	json_object_set_new(a->rec, "finished_ms",
			    json_integer(client_now_ms()));
	a->done = true;
	bool resolved = json_is_true(json_object_get(a->rec, "resolved"));
	note(st, a, resolved ? "%s: resolved" : "%s: not resolved", state);
	return attempt_save(st, a, err);
}

/* ---- the run ----------------------------------------------------------------- */

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Every attempt to its end, at most parallel at once. */
static int run_drive(struct eval_state *st, struct wr_error **err)
{
	size_t parallel =
	    (size_t)json_integer_value(json_object_get(st->run, "parallel"));
	for (;;) {
		size_t active = 0, left = 0;
		int r = 0;
		for (size_t i = 0; i < st->n_at && r == 0; i++) {
			struct attempt *a = &st->at[i];
			if (a->rec && !a->done)
				r = attempt_poll(st, a, err);
			if (r == 0 && a->rec && !a->done)
				active++;
		}
		for (size_t i = 0; i < st->n_at && r == 0; i++) {
			struct attempt *a = &st->at[i];
			if (!a->rec && active < parallel) {
				r = attempt_submit(st, a, err);
				if (r == 0 && !a->done)
					active++;
			}
			if (!a->done)
				left++;
		}
		if (r < 0)
			return r;
		if (left == 0)
			return 0;
		sleep_ms(EVAL_POLL_MS);
	}
}

static int run_id_new(char *buf, size_t size)
{
	unsigned char rnd[3] = {0};
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, rnd, sizeof(rnd)) != (ssize_t)sizeof(rnd))
			rnd[0] = (unsigned char)getpid();
		close(fd);
	}
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	snprintf(buf, size, "e-%04d%02d%02d-%02d%02d%02d-%02x%02x%02x",
		 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		 tm.tm_min, tm.tm_sec, rnd[0], rnd[1], rnd[2]);
	return 0;
}

/* The run's attempts, by repeat then task; what is on disk loaded. */
static int attempts_plan(struct eval_state *st, struct wr_error **err)
{
	int repeat = (int)json_integer_value(json_object_get(st->run, "repeat"));
	st->n_at = st->suite.n_tasks * (size_t)repeat;
	st->at = wr_calloc(st->n_at, sizeof(*st->at));
	if (!st->at)
		return wr_error_set(err, ENOMEM, "run");
	size_t n = 0;
	for (int k = 1; k <= repeat; k++)
		for (size_t i = 0; i < st->suite.n_tasks; i++) {
			struct attempt *a = &st->at[n++];
			a->task = &st->suite.tasks[i];
			a->repeat = k;
			snprintf(a->file, sizeof(a->file),
				 "attempts/%s.%d.json", a->task->name, k);
			_cleanup_free_ char *path =
			    wr_asprintf("%s/%s", st->dir, a->file);
			if (!path)
				return wr_error_set(err, ENOMEM, "run");
			if (access(path, F_OK) < 0)
				continue;
			a->rec = eval_read_json(st->dir, a->file, err);
			if (!a->rec)
				return -EINVAL;
			const char *state = client_json_str(a->rec, "state");
			a->done = state && !strcmp(state, "done");
			/* submitted, its session never recorded: again */
			if (!a->done && !client_json_str(a->rec, "session")) {
				json_decref(a->rec);
				a->rec = NULL;
			}
		}
	return 0;
}

static int print_report(struct eval_state *st)
{
	json_t *run = NULL, *attempts = NULL;
	struct wr_error *err = NULL;
	_cleanup_free_ char *runs = eval_runs_dir(st->o->dir);
	int r = runs ? eval_run_load(runs, client_json_str(st->run, "id"), &run,
				     &attempts, &err)
		     : -ENOMEM;
	if (r < 0)
		return client_exit(st->c, r, err);
	json_t *rep = eval_report_build(run, attempts);
	r = !rep ? -ENOMEM
		 : st->c->json ? client_print_json(rep)
			       : eval_report_print(rep, NULL);
	json_decref(rep);
	json_decref(run);
	json_decref(attempts);
	return r < 0 ? client_exit(st->c, r, NULL) : CLIENT_EXIT_OK;
}

static int eval_run(struct client *c, struct eval_opts *o)
{
	struct eval_state st = {.c = c, .o = o};
	struct wr_error *err = NULL;
	int code = CLIENT_EXIT_USAGE;
	_cleanup_free_ char *runs = eval_runs_dir(o->dir);
	if (!runs)
		return client_exit(c, -ENOMEM, NULL);
	if (o->resume) {
		if (c->n_args || o->agent || o->oracle || o->repeat_set) {
			client_usage_error(c, "--resume takes the run's own "
					      "suite and options");
			return CLIENT_EXIT_USAGE;
		}
		json_t *attempts = NULL;
		int r = eval_run_load(runs, o->resume, &st.run, &attempts, &err);
		json_decref(attempts);
		if (r < 0)
			return client_exit(c, r, err);
		if (o->parallel_set)
			json_object_set_new(st.run, "parallel",
					    json_integer((json_int_t)o->parallel));
		if (json_is_true(json_object_get(st.run, "keep_review")))
			o->keep = true;
		r = eval_suite_load(client_or(client_json_str(st.run, "suite"),
					      ""),
				    json_is_true(json_object_get(st.run,
								 "oracle")),
				    &st.suite, &err);
		if (r < 0) {
			json_decref(st.run);
			return client_exit(c, r, err);
		}
	} else {
		code = client_check_args(c, 1, 1, "SUITE");
		if (code != CLIENT_CONTINUE)
			return code;
		if (o->oracle && o->agent) {
			client_usage_error(c, "--oracle and --agent exclude "
					      "each other");
			return CLIENT_EXIT_USAGE;
		}
		if ((o->oracle || o->agent) && o->preset) {
			client_usage_error(c, "--agent-preset excludes --agent "
					      "and --oracle");
			return CLIENT_EXIT_USAGE;
		}
		int r = eval_suite_load(c->args[0], o->oracle, &st.suite, &err);
		if (r < 0)
			return client_exit(c, r, err);
		char id[64];
		run_id_new(id, sizeof(id));
		json_t *names = json_array();
		for (size_t i = 0; i < st.suite.n_tasks; i++)
			json_array_append_new(
			    names, json_string(st.suite.tasks[i].name));
		st.run = json_pack(
		    "{s:s, s:s, s:s, s:s?, s:b, s:I, s:I, s:b, s:I, s:s, s:o}",
		    "id", id, "suite", st.suite.dir, "suite_name",
		    st.suite.name, "agent", o->agent, "oracle", o->oracle,
		    "repeat", (json_int_t)(o->repeat_set ? o->repeat : 3),
		    "parallel", (json_int_t)(o->parallel_set ? o->parallel : 2),
		    "keep_review", o->keep, "created_ms",
		    (json_int_t)client_now_ms(), "state", "running", "tasks",
		    names);
		if (!st.run) {
			eval_suite_clear(&st.suite);
			return client_exit(c, -ENOMEM, NULL);
		}
		if (o->preset) {
			char label[160];
			snprintf(label, sizeof(label), "preset %s", o->preset);
			json_object_set_new(st.run, "agent_preset",
					    json_string(o->preset));
			json_object_set_new(st.run, "agent", json_string(label));
		} else if (!o->agent && !o->oracle)
			json_object_set_new(st.run, "agent",
					    json_string(EVAL_SERVER_AGENT));
	}
	st.dir = wr_asprintf("%s/%s", runs, client_json_str(st.run, "id"));
	_cleanup_free_ char *att_dir =
	    st.dir ? wr_asprintf("%s/attempts", st.dir) : NULL;
	int r = att_dir ? mkdir_p(att_dir) : -ENOMEM;
	if (r < 0) {
		r = wr_error_set(&err, -r, "%s: %s", att_dir ? att_dir : "run",
				 strerror(-r));
		goto out;
	}
	r = write_json(st.dir, "run.json", st.run, &err);
	if (r == 0)
		r = attempts_plan(&st, &err);
	if (r == 0)
		publish(&st, NULL);
	/* resumed: what was written before (perhaps while the server could
	 * not take it) goes up again */
	for (size_t i = 0; r == 0 && o->resume && i < st.n_at; i++)
		if (st.at[i].rec)
			publish(&st, &st.at[i]);
	/* the server and the token, before going to the background */
	json_t *who = NULL;
	if (r == 0)
		r = client_get(c, "/whoami", &who, &err);
	json_decref(who);
	if (r < 0)
		goto out;
	if (!o->wait) {
		r = c->json ? client_print_json(st.run)
			    : (printf("%s\n", client_json_str(st.run, "id")),
			       0);
		fflush(stdout);
		_cleanup_free_ char *log = wr_asprintf("%s/log", st.dir);
		pid_t pid = log ? fork() : -1;
		if (pid < 0) {
			r = wr_error_set(&err, errno ? errno : ENOMEM, "fork");
			goto out;
		}
		if (pid > 0) {
			code = CLIENT_EXIT_OK;
			goto done;
		}
		/* the child drives the run; its notes go to the log */
		setsid();
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
			      0600);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fd >= 0 && null >= 0) {
			dup2(null, 0);
			dup2(fd, 1);
			dup2(fd, 2);
		}
	}
	r = run_drive(&st, &err);
	if (r == 0) {
		json_object_set_new(st.run, "state", json_string("finished"));
		json_object_set_new(st.run, "finished_ms",
				    json_integer(client_now_ms()));
		r = write_json(st.dir, "run.json", st.run, &err);
		if (r == 0)
			publish(&st, NULL);
	}
	if (r < 0)
		goto out;
	code = o->wait ? print_report(&st) : CLIENT_EXIT_OK;
	goto done;
out:
	if (r < 0 && o->wait && err && !c->json)
		fprintf(stderr, "warren eval: the run stopped; go on with "
				"`warren eval run --resume %s`\n",
			client_or(client_json_str(st.run, "id"), "?"));
	code = client_exit(c, r, err);
done:
	for (size_t i = 0; i < st.n_at; i++)
		json_decref(st.at[i].rec);
	free(st.at);
	free(st.dir);
	json_decref(st.run);
	eval_suite_clear(&st.suite);
	return code;
}

/* The verdicts the server has on the report's run, if it has any: a
 * server that cannot be asked (none, an older one, no token) leaves the
 * report as the files make it. */
static int report_review(struct client *c, json_t *rep)
{
	const char *id = client_json_str(rep, "id");
	_cleanup_free_ char *path = id ? wr_asprintf("/evals/%s", id) : NULL;
	json_t *got = NULL;
	struct wr_error *e = NULL;
	int r = path ? client_get(c, path, &got, &e) : -ENOMEM;
	wr_error_free(e);
	if (r < 0)
		return r == -ENOMEM ? r : 0;
	r = eval_report_add_review(rep, json_object_get(got, "review"));
	json_decref(got);
	return r;
}

/* `eval review RUN [RUN2...]`: a blind review batch over the runs'
 * resolved changes; prints the web UI's address of it. */
static int eval_review(struct client *c)
{
	int code = client_check_args(c, 1, 8, "RUN");
	if (code != CLIENT_CONTINUE)
		return code;
	json_t *runs = json_array();
	for (int i = 0; runs && i < c->n_args; i++)
		json_array_append_new(runs, json_string(c->args[i]));
	json_t *body = runs ? json_pack("{s:o}", "runs", runs) : NULL;
	json_t *got = NULL;
	struct wr_error *err = NULL;
	int r = body ? client_post(c, "/evals/reviews", body, &got, &err)
		     : -ENOMEM;
	json_decref(body);
	if (r < 0)
		return client_exit(c, r, err);
	_cleanup_free_ char *url =
	    wr_asprintf("%s/%s", c->server,
			client_or(client_json_str(got, "page"), ""));
	if (url)
		json_object_set_new(got, "url", json_string(url));
	if (c->json)
		r = client_print_json(got);
	else
		printf("review batch %s: %lld changes, blind, at %s\n",
		       client_or(client_json_str(got, "id"), "?"),
		       (long long)client_json_int(got, "items", 0),
		       url ? url : "?");
	json_decref(got);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

int client_cmd_eval(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "eval",
	    .usage = eval_usage,
	    .shortopts = "w",
	    .options = eval_options,
	    .on_option = on_option,
	};
	struct eval_opts o = {0};
	int code = client_parse(c, &verb, &o, argc, argv);
	if (code != CLIENT_CONTINUE)
		return code;
	if (c->n_args == 0) {
		client_usage_error(c, "missing sub-command: run, report, "
				      "review or export");
		return CLIENT_EXIT_USAGE;
	}
	const char *sub = c->args[0];
	c->args++;
	c->n_args--;
	bool exporting = o.export.out || o.export.n_repos ||
			 o.export.base_image || o.export.apt;
	if (exporting && strcmp(sub, "export")) {
		client_usage_error(c, "--harbor, --repo, --base-image and "
				      "--apt go with 'eval export'");
		return CLIENT_EXIT_USAGE;
	}
	if (!strcmp(sub, "export")) {
		c->verb = "eval export";
		if (o.agent || o.preset || o.oracle || o.resume ||
		    o.repeat_set || o.parallel_set || o.wait || o.keep ||
		    o.compare || o.dir) {
			client_usage_error(c, "'eval export' takes SUITE, "
					      "--harbor, --repo and "
					      "--base-image");
			return CLIENT_EXIT_USAGE;
		}
		if (!o.export.out) {
			client_usage_error(c, "eval export: --harbor OUT is "
					      "needed (the only format)");
			return CLIENT_EXIT_USAGE;
		}
		code = client_check_args(c, 1, 1, "SUITE");
		if (code != CLIENT_CONTINUE)
			return code;
		struct wr_error *err = NULL;
		int r = eval_export(c, &o.export, c->args[0], &err);
		if (r == -EINVAL || r == -EEXIST) {
			fprintf(stderr, "warren eval export: %s\n",
				err && err->msg ? err->msg : "bad input");
			wr_error_free(err);
			return CLIENT_EXIT_USAGE;
		}
		return r < 0 ? client_exit(c, r, err) : CLIENT_EXIT_OK;
	}
	if (!strcmp(sub, "run")) {
		c->verb = "eval run";
		if (o.compare) {
			client_usage_error(c, "--compare goes with 'eval "
					      "report'");
			return CLIENT_EXIT_USAGE;
		}
		return eval_run(c, &o);
	}
	if (!strcmp(sub, "report")) {
		c->verb = "eval report";
		if (o.agent || o.oracle || o.resume || o.repeat_set ||
		    o.parallel_set || o.wait || o.keep) {
			client_usage_error(c, "'eval report' takes RUN, "
					      "--compare, --dir and --json");
			return CLIENT_EXIT_USAGE;
		}
		code = client_check_args(c, 1, 1, "RUN");
		if (code != CLIENT_CONTINUE)
			return code;
		_cleanup_free_ char *runs = eval_runs_dir(o.dir);
		if (!runs)
			return client_exit(c, -ENOMEM, NULL);
		json_t *run = NULL, *att = NULL, *run2 = NULL, *att2 = NULL;
		struct wr_error *err = NULL;
		int r = eval_run_load(runs, c->args[0], &run, &att, &err);
		if (r == 0 && o.compare)
			r = eval_run_load(runs, o.compare, &run2, &att2, &err);
		json_t *a = r == 0 ? eval_report_build(run, att) : NULL;
		json_t *b = r == 0 && o.compare ? eval_report_build(run2, att2)
						: NULL;
		if (r == 0 && (!a || (o.compare && !b)))
			r = -ENOMEM;
		if (r == 0)
			r = report_review(c, a);
		if (r == 0 && b)
			r = report_review(c, b);
		if (r == 0 && c->json) {
			json_t *cmp = b ? eval_report_compare(a, b) : NULL;
			r = client_print_json(cmp ? cmp : a);
			json_decref(cmp);
		} else if (r == 0) {
			r = eval_report_print(a, b);
		}
		json_decref(a);
		json_decref(b);
		json_decref(run);
		json_decref(att);
		json_decref(run2);
		json_decref(att2);
		return r < 0 ? client_exit(c, r, err) : CLIENT_EXIT_OK;
	}
	if (!strcmp(sub, "review")) {
		c->verb = "eval review";
		if (o.agent || o.preset || o.oracle || o.resume ||
		    o.repeat_set || o.parallel_set || o.wait || o.keep ||
		    o.compare) {
			client_usage_error(c, "'eval review' takes RUN... and "
					      "--json");
			return CLIENT_EXIT_USAGE;
		}
		return eval_review(c);
	}
	client_usage_error(c,
			   "unknown sub-command '%s' (run, report, review, "
			   "export)",
			   sub);
	return CLIENT_EXIT_USAGE;
}

/* work.c - what a turn does besides running a command agent: the built-in
 * agent (its transcript kept as "transcript" events, so an interrupted
 * turn resumes where it was), Warren's own verification once the agent is
 * done, and the commit of the result on warren/<session> with its diff as
 * artifacts. The runner (runner.c) decides when; this file does it. */
#include "sched/internal.h"

#include "agent/agent.h"
#include "agent/exec_sandbox.h"
#include "review/evidence.h"
#include "review/review.h"
#include "snapshot/git.h"
#include "snapshot/build.h"
#include "snapshot/session.h"
#include "snapshot/spec.h"
#include "snapshot/store.h"
#include "util/alloc.h"
#include "util/log.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define TOOL_MAX_OUTPUT (16u << 10)

static double mono_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}
#define VERIFY_MAX_OUTPUT (16u << 10)
/* where the verification sandbox sees the result's bundle */
#define VERIFY_BUNDLE_DIR "/run/warren-result"
/* where a check's sandbox sees the hidden tests ($WARREN_TASK_TESTS) */
#define CHECK_TESTS_DIR "/run/warren-task-tests"

/* How tools and review reach the session's sandbox. */
struct work_env {
	struct exec_sandbox xs;
	struct tools_exec ex;
	struct tools_config tools;
	char artifact_dir[PATH_MAX];
};

static void argvs_free(char ***v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]); /* the strings belong to the JSON */
	free(v);
}

/* run->verify (argv arrays) as char ***; strings stay in the JSON. */
static char ***verify_argvs(const struct run *run, size_t *n_out)
{
	size_t n = json_array_size(run->verify);
	*n_out = 0;
	if (n == 0)
		return NULL;
	char ***v = wr_calloc(n, sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		json_t *a = json_array_get(run->verify, i);
		size_t na = json_array_size(a);
		v[i] = wr_calloc(na + 1, sizeof(char *));
		if (!v[i]) {
			argvs_free(v, i);
			return NULL;
		}
		for (size_t k = 0; k < na; k++)
			v[i][k] = (char *)json_string_value(json_array_get(a, k));
	}
	*n_out = n;
	return v;
}

static void env_init(struct run *run, struct work_env *w)
{
	struct control *c = run->ctl;
	memset(w, 0, sizeof(*w));
	w->xs.warren_bin = c->warren_bin;
	w->xs.sandbox = run->sandbox;
	w->ex.run = exec_sandbox_run;
	w->ex.ctx = &w->xs;
	snprintf(w->artifact_dir, sizeof(w->artifact_dir), "%s/artifacts/%s",
		 c->data_dir, run->id);
	w->tools.max_output = TOOL_MAX_OUTPUT;
	w->tools.artifact_dir = w->artifact_dir;
	w->tools.verify_argv = verify_argvs(run, &w->tools.n_verify);
}

static void env_clear(struct work_env *w)
{
	argvs_free(w->tools.verify_argv, w->tools.n_verify);
	w->tools.verify_argv = NULL;
}

/* Registers a file of the artifact directory with the store (again is
 * fine: the record names the path, the file was replaced). */
static void artifact_register(struct control *c, const char *session_id,
			      const char *path, const char *media_type)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return;
	const char *name = strrchr(path, '/');
	struct store_artifact a = {
	    .name = (char *)(name ? name + 1 : path),
	    .path = (char *)path,
	    .media_type = (char *)media_type,
	    .size = st.st_size,
	};
	struct wr_error *err = NULL;
	if (c->st->ops->artifact_add(c->st, session_id, &a, &err) < 0 &&
	    (!err || err->errnum != EEXIST))
		wr_log(WR_LOG_WARN, "session", "%s: artifact %s: %s",
		       session_id, a.name, err && err->msg ? err->msg : "");
	wr_error_free(err);
}

/* ---- the built-in agent --------------------------------------------------- */

struct agent_ctx {
	struct run *run;
	int turn;
	bool died;
};

static int record_message(void *ctx, const json_t *message,
			  const struct agent_usage *u)
{
	struct agent_ctx *a = ctx;
	json_t *data = json_pack(
	    "{s:i, s:O, s:{s:I, s:I, s:f}}", "turn", a->turn, "message",
	    message, "usage", "prompt_tokens", (json_int_t)u->prompt_tokens,
	    "completion_tokens", (json_int_t)u->completion_tokens, "cost",
	    u->cost);
	if (!data)
		return -ENOMEM;
	return control_event(a->run->ctl, a->run->id, EVENT_TRANSCRIPT,
			     data) < 0
		   ? -EIO
		   : 0;
}

static bool agent_should_stop(void *ctx)
{
	struct agent_ctx *a = ctx;
	if (run_stop_requested(a->run))
		return true;
	if (!run_sandbox_alive(a->run, 0)) {
		a->died = true;
		return true;
	}
	return false;
}

static void agent_artifact(void *ctx, const char *path)
{
	struct agent_ctx *a = ctx;
	artifact_register(a->run->ctl, a->run->id, path, "image/png");
}

/* The conversation so far from the session's transcript events; *in_turn
 * says whether this turn had started (a resume). */
static json_t *transcript_load(struct control *c, const char *session_id,
			       int turn, bool *in_turn, double usage_out[3])
{
	json_t *messages = json_array();
	*in_turn = false;
	int64_t after = 0;
	for (;;) {
		struct store_event *ev = NULL;
		size_t n = 0;
		if (c->st->ops->event_list(c->st, session_id, after, 10000, &ev,
					   &n, NULL) < 0 ||
		    n == 0)
			break;
		for (size_t i = 0; i < n; i++) {
			after = ev[i].seq;
			if (event_kind_parse(ev[i].kind) != EVENT_TRANSCRIPT)
				continue;
			json_t *d = json_loads(ev[i].data_json, 0, NULL);
			json_t *m = json_object_get(d, "message");
			if (m)
				json_array_append(messages, m);
			if (json_integer_value(json_object_get(d, "turn")) ==
			    turn)
				*in_turn = true;
			json_t *u = json_object_get(d, "usage");
			if (u) {
				usage_out[0] = (double)json_integer_value(
				    json_object_get(u, "prompt_tokens"));
				usage_out[1] = (double)json_integer_value(
				    json_object_get(u, "completion_tokens"));
				usage_out[2] =
				    json_real_value(json_object_get(u, "cost"));
			}
			json_decref(d);
		}
		store_events_free(ev, n);
	}
	return messages;
}

enum turn_end work_agent_turn(struct run *run, const struct store_session *s,
			      int number, const char *prompt, bool follow_on,
			      char **summary, char *why, size_t why_size)
{
	struct control *c = run->ctl;
	struct wr_error *err = NULL;
	struct agent_ctx actx = {.run = run, .turn = number};
	struct work_env w;
	env_init(run, &w);
	struct store_repo repo = {0};
	c->st->ops->repo_get(c->st, s->repo_id, &repo, NULL);
	bool in_turn;
	double u[3] = {0, 0, 0};
	json_t *messages = transcript_load(c, run->id, number, &in_turn, u);
	run->usage.prompt_tokens = (uint64_t)u[0];
	run->usage.completion_tokens = (uint64_t)u[1];
	run->usage.cost = u[2];
	/* one provider for the run: a replay goes on where it was (after
	 * the assistant messages the transcript already holds) */
	if (!run->provider) {
		struct provider_config pc = c->cfg.model;
		size_t i;
		json_t *m;
		json_array_foreach(messages, i, m)
		{
			const char *role =
			    json_string_value(json_object_get(m, "role"));
			if (role && !strcmp(role, "assistant"))
				pc.replay_start++;
		}
		if (provider_new(&pc, &run->provider, &err) < 0) {
			snprintf(why, why_size, "model provider: %s",
				 err && err->msg ? err->msg : "failed");
			wr_error_free(err);
			json_decref(messages);
			store_repo_clear(&repo);
			env_clear(&w);
			return TURN_FAILED;
		}
	}
	struct agent_loop loop = {
	    .provider = run->provider,
	    .tools = &w.tools,
	    .exec = &w.ex,
	    .budget = c->cfg.budget,
	    .prices = c->cfg.prices,
	    .usage = &run->usage,
	    .record = record_message,
	    .artifact = agent_artifact,
	    .should_stop = agent_should_stop,
	    .ctx = &actx,
	};
	struct agent_result res = {0};
	enum turn_end end = TURN_OK;
	double turn_t0 = mono_now_ms();
	double model_ms0 = run->usage.model_ms, tool_ms0 = run->usage.tool_ms;
	int r = 0;
	bool finished = false;
	if (json_array_size(messages) == 0) {
		json_t *sys = agent_system_message(
		    repo.name ? repo.name : "?", json_array_size(run->verify));
		r = record_message(&actx, sys, &run->usage);
		json_array_append_new(messages, sys);
	}
	if (r == 0 && (!in_turn || follow_on)) {
		json_t *user =
		    json_pack("{s:s, s:s}", "role", "user", "content", prompt);
		r = user ? record_message(&actx, user, &run->usage) : -ENOMEM;
		json_array_append_new(messages, user);
	} else if (r == 0) {
		/* resumed: tool calls the interruption cut short run first */
		r = agent_resume_pending(&loop, messages, &res, &finished,
					 &err);
	}
	if (r == 0 && !finished)
		r = agent_run(&loop, messages, &res, &err);
	/* a tool whose exec failed because the sandbox died under it */
	if (!actx.died && r < 0 && !run_sandbox_alive(run, 125))
		actx.died = true;
	if (actx.died) {
		snprintf(why, why_size, "sandbox died (its init is gone)");
		end = TURN_DIED;
	} else if (res.end == AGENT_STOPPED || run_stop_requested(run)) {
		end = TURN_STOPPED;
	} else if (r < 0) {
		snprintf(why, why_size, "%s",
			 err && err->msg ? err->msg : "agent failed");
		end = TURN_FAILED;
	} else {
		if (res.end == AGENT_BUDGET)
			control_event(c, run->id, EVENT_BUDGET,
				      json_pack("{s:s}", "reason",
						res.summary ? res.summary : ""));
		*summary = res.summary;
		res.summary = NULL;
	}
	pthread_mutex_lock(&c->metrics_mu);
	c->m.prompt_tokens += run->usage.prompt_tokens - (uint64_t)u[0];
	c->m.completion_tokens +=
	    run->usage.completion_tokens - (uint64_t)u[1];
	c->m.cost += run->usage.cost - u[2];
	pthread_mutex_unlock(&c->metrics_mu);
	/* the harness's own time this turn: all but the model and tools */
	double model_ms = run->usage.model_ms - model_ms0;
	double tool_ms = run->usage.tool_ms - tool_ms0;
	double harness_ms = mono_now_ms() - turn_t0 - model_ms - tool_ms;
	control_event(
	    c, run->id, EVENT_USAGE,
	    json_pack("{s:i, s:I, s:I, s:f, s:i, s:i, s:s, s:f, s:f, s:f}",
		      "turn", number, "prompt_tokens",
		      (json_int_t)run->usage.prompt_tokens, "completion_tokens",
		      (json_int_t)run->usage.completion_tokens, "cost",
		      run->usage.cost, "model_calls", run->usage.model_calls,
		      "tool_calls", run->usage.tool_calls, "end",
		      agent_end_name(res.end), "model_ms", model_ms, "tool_ms",
		      tool_ms, "harness_ms", harness_ms));
	agent_result_clear(&res);
	wr_error_free(err);
	json_decref(messages);
	store_repo_clear(&repo);
	env_clear(&w);
	return end;
}

/* ---- verification and the result ------------------------------------------ */

bool work_has_verify(const struct run *run)
{
	return json_array_size(run->verify) > 0;
}

/* Warren's verification sandbox of the session: a fresh one from the
 * session's snapshot, at the session's base, with exactly commit checked
 * out from the quarantine's bundle (bound read-only). Nothing the agent
 * left in its workspace exists there: only the snapshot's own build. */
static int verify_sandbox_create(struct run *run, const char *name,
				 const char *upper, const char *bundle_dir,
				 const char *commit, const char *tests_dir,
				 struct wr_error **err)
{
	struct control *c = run->ctl;
	struct sandbox_request req = {
	    .name = name,
	    .snapshot = run->snapshot_id,
	    .data_dir = c->data_dir,
	    .upper = upper,
	};
	/* a session that synced past its snapshot: the same base (the
	 * mirror has it; no fetch) */
	if (strcmp(run->base, run->snapshot_commit))
		req.ref = run->base;
	if (strcmp(commit, run->base))
		req.binds[req.n_binds++] =
		    (struct sandbox_bind){bundle_dir, VERIFY_BUNDLE_DIR, true};
	/* a check's hidden tests: only ever in this sandbox, read-only */
	if (tests_dir) {
		req.binds[req.n_binds++] =
		    (struct sandbox_bind){tests_dir, CHECK_TESTS_DIR, true};
		req.env[req.n_env++] = "WARREN_TASK_TESTS=" CHECK_TESTS_DIR;
	}
	run_sandbox_request(run, &req);
	struct sandbox_cmdline cl;
	int r = sandbox_cmdline_create(c->warren_bin, &req, &cl);
	if (r < 0)
		return wr_error_set(err, -r, "verification sandbox");
	_cleanup_free_ char *output = NULL;
	int status = run_sandbox_cmd(run, &cl, 1 << 16, &output,
				     "verification sandbox: create", err);
	sandbox_cmdline_clear(&cl);
	return status == 0 ? 0 : status < 0 ? status : -EIO;
}

static void verify_sandbox_remove(struct run *run, const char *name,
				  const char *upper)
{
	struct sandbox_cmdline cl;
	struct wr_error *err = NULL;
	_cleanup_free_ char *errors = NULL;
	int r = sandbox_cmdline_remove(run->ctl->warren_bin, name, &cl);
	if (r == 0) {
		r = proc_run(cl.argv, 4096, -1, NULL, &errors, &err);
		sandbox_cmdline_clear(&cl);
	} else {
		wr_error_set(&err, -r, "command line");
	}
	if (r < 0)
		wr_log(WR_LOG_WARN, "session", "%s: remove %s: %s", run->id,
		       name, err && err->msg ? err->msg : "failed");
	wr_error_free(err);
	wr_rm_rf(upper);
}

/* Does the result change one of the snapshot's lockfiles? (Its
 * dependencies then need installing again, as a session started at that
 * commit would: updateContentCommand re-runs.) */
static bool result_touches_lockfile(struct control *c, const char *snap_id,
				    const json_t *result)
{
	struct snap_store *store = NULL;
	struct snap_manifest *m = NULL;
	bool touched = false;
	if (snap_store_open(c->data_dir, &store, NULL) == 0 &&
	    snap_store_get(store, snap_id, &m, NULL) == 0) {
		size_t i;
		json_t *f;
		json_array_foreach(json_object_get(result, "files"), i, f)
		{
			const char *path =
			    json_string_value(json_object_get(f, "path"));
			for (size_t k = 0; path && k < m->n_lockfiles; k++)
				if (!strcmp(path, m->lockfiles[k].path))
					touched = true;
		}
		/* more files than the record keeps: assume one is */
		if (json_object_get(result, "files_total"))
			touched = m->n_lockfiles > 0;
	}
	snap_manifest_free(m);
	snap_store_close(store);
	return touched;
}

/* updateContentCommand of the spec at base, in the verification sandbox;
 * *out is a failed verification when the hook fails. */
static int verify_reinstall(struct run *run, const struct tools_exec *ex,
			    const char *mirror, json_t **out,
			    struct wr_error **err)
{
	struct spec *spec = NULL;
	int r = snap_load_spec(mirror, run->base, &spec, err);
	if (r < 0)
		return wr_error_wrap(err, "verify: the spec");
	_cleanup_free_ char *script = snap_update_content_script(spec);
	spec_free(spec);
	if (!script)
		return 0;
	char *const argv[] = {"/bin/sh", "-c", script, NULL};
	struct tools_exec_result res = {0};
	double t0 = mono_now_ms();
	r = ex->run(ex->ctx, argv, NULL, 0, 30ull * 60 * 1000, 4u << 20, &res,
		    err);
	if (r < 0)
		return wr_error_wrap(err, "verify: updateContentCommand");
	if (res.status != 0) {
		size_t ol = res.out_len + res.err_len;
		_cleanup_free_ char *text = wr_malloc(ol + 1);
		if (text) {
			memcpy(text, res.out ? res.out : "", res.out_len);
			memcpy(text + res.out_len, res.err ? res.err : "",
			       res.err_len);
			text[ol] = '\0';
		}
		const char *tail = text && ol > VERIFY_MAX_OUTPUT
				       ? text + ol - VERIFY_MAX_OUTPUT
				       : text;
		*out = json_pack(
		    "{s:b, s:[{s:s, s:i, s:f, s:s?}]}", "passed", 0, "results",
		    "command",
		    "updateContentCommand (the change modifies a lockfile)",
		    "status", res.status, "ms", mono_now_ms() - t0, "output",
		    tail);
	}
	tools_exec_result_clear(&res);
	return 0;
}

/* What a fresh sandbox at a result commit runs: Warren's verification
 * (the spec's commands, "wv-<id>") or a check (the hidden tests of an
 * eval's task, "wc-<id>", with tests_dir bound at CHECK_TESTS_DIR). */
struct fresh_job {
	const char *prefix; /* of the sandbox's name: "wv", "wc" */
	const char *upper;  /* under the session's evidence directory */
	char ***argvs;	    /* NULL: the spec's verify commands */
	size_t n;
	const char *tests_dir;
};

/* The commands of job on result's commit, in a fresh sandbox from the
 * session's snapshot; *out as review_verify's, naming the commit. */
static int verify_fresh(struct run *run, const json_t *result,
			const struct fresh_job *job, json_t **out,
			struct wr_error **err)
{
	struct control *c = run->ctl;
	const char *commit =
	    json_string_value(json_object_get(result, "commit"));
	if (!commit)
		return wr_error_set(err, EPROTO, "verify: no result commit");
	char name[64];
	snprintf(name, sizeof(name), "%s-%s", job->prefix, run->id);
	_cleanup_free_ char *upper =
	    wr_asprintf("%s/sessions/%s/evidence/%s", c->data_dir, run->id,
			job->upper);
	_cleanup_free_ char *bundle_dir =
	    evidence_bundle_dir(c->data_dir, run->id);
	if (!upper || !bundle_dir)
		return wr_error_set(err, ENOMEM, "verify");
	double t0 = mono_now_ms();
	/* one of an earlier life (a server killed mid-verification) */
	verify_sandbox_remove(run, name, upper);
	int r = verify_sandbox_create(run, name, upper, bundle_dir, commit,
				      job->tests_dir, err);
	if (r < 0) {
		verify_sandbox_remove(run, name, upper);
		return r;
	}
	struct work_env w;
	env_init(run, &w);
	w.xs.sandbox = name;
	/* the result commit, from the bundle (one index-pack), checked out
	 * by the snapshot's git, which the agent never touched; an unchanged
	 * result is the commit the sandbox starts at already */
	static const char checkout_script[] =
	    "set -e\n"
	    "cd /workspace\n"
	    "git bundle unbundle " VERIFY_BUNDLE_DIR "/" EVIDENCE_BUNDLE_NAME
	    " >/dev/null\n"
	    "git -c advice.detachedHead=false checkout -q --detach \"$1\" "
	    "2>/dev/null || git -c advice.detachedHead=false checkout -q -f "
	    "--detach \"$1\"\n";
	char *const cargv[] = {"/bin/sh", "-c", (char *)checkout_script,
			       "warren-verify", (char *)commit, NULL};
	struct tools_exec_result res = {0};
	if (strcmp(commit, run->base))
		r = w.ex.run(w.ex.ctx, cargv, NULL, 0, 5 * 60 * 1000, 4096,
			     &res, err);
	if (r == 0 && res.status != 0) {
		const char *text = res.err && res.err_len ? res.err : res.out;
		r = wr_error_set(err, EIO,
				 "verification sandbox: check out %s: %.300s",
				 commit, text ? text : "exit status non-zero");
	}
	tools_exec_result_clear(&res);
	/* dependencies again when the change modified a lockfile */
	bool reinstalled = false;
	json_t *failed = NULL;
	if (r == 0 && result_touches_lockfile(c, run->snapshot_id, result)) {
		struct store_session s = {0};
		struct store_repo repo = {0};
		_cleanup_free_ char *mirror = NULL;
		if (c->st->ops->session_get(c->st, run->id, &s, err) == 0 &&
		    c->st->ops->repo_get(c->st, s.repo_id, &repo, err) == 0)
			mirror = git_mirror_path(c->data_dir, repo.url, err);
		r = mirror ? verify_reinstall(run, &w.ex, mirror, &failed, err)
			   : -EIO;
		reinstalled = r == 0;
		store_repo_clear(&repo);
		store_session_clear(&s);
	}
	double setup_ms = mono_now_ms() - t0;
	if (r == 0 && failed)
		*out = failed;
	else if (r == 0)
		r = job->argvs ? review_verify(&w.ex, job->argvs, job->n,
					       VERIFY_MAX_OUTPUT, out, err)
			       : review_verify(&w.ex, w.tools.verify_argv,
					       w.tools.n_verify,
					       VERIFY_MAX_OUTPUT, out, err);
	env_clear(&w);
	double t1 = mono_now_ms();
	verify_sandbox_remove(run, name, upper);
	if (r < 0)
		return r;
	json_object_set_new(*out, "commit", json_string(commit));
	if (reinstalled)
		json_object_set_new(*out, "hooks_rerun", json_true());
	json_object_set_new(*out, "sandbox", json_string("fresh"));
	json_object_set_new(*out, "setup_ms", json_real(setup_ms));
	json_object_set_new(*out, "teardown_ms",
			    json_real(mono_now_ms() - t1));
	return 0;
}

int work_verify(struct run *run, const json_t *result, json_t **out,
		struct wr_error **err)
{
	const struct fresh_job job = {.prefix = "wv", .upper = "verify-upper"};
	return verify_fresh(run, result, &job, out, err);
}

/* The manifest's record of what the snapshot build produced. */
static json_t *snapshot_build_output(struct control *c, const char *snap_id)
{
	struct snap_store *store = NULL;
	struct snap_manifest *m = NULL;
	json_t *bo = NULL;
	if (snap_store_open(c->data_dir, &store, NULL) == 0 &&
	    snap_store_get(store, snap_id, &m, NULL) == 0 && m->extra)
		bo = json_incref(json_object_get(m->extra, "build_output"));
	snap_manifest_free(m);
	snap_store_close(store);
	return bo;
}

int work_commit(struct run *run, const struct store_session *s,
		const char *message, json_t **out, struct wr_error **err)
{
	struct control *c = run->ctl;
	struct work_env w;
	env_init(run, &w);
	struct store_repo repo = {0};
	int r = c->st->ops->repo_get(c->st, s->repo_id, &repo, err);
	_cleanup_free_ char *mirror =
	    r == 0 ? git_mirror_path(c->data_dir, repo.url, err) : NULL;
	json_t *build_output =
	    mirror ? snapshot_build_output(c, run->snapshot_id) : NULL;
	/* the change's objects, diff and bundle count against the
	 * session's disk limit: what is left of it caps them */
	struct evidence_limits lim = c->cfg.evidence;
	if (mirror && run->limits.disk_bytes) {
		uint64_t used = run_disk_used(run);
		if (used >= run->limits.disk_bytes) {
			r = wr_error_input(err, 0,
					   "the session's disk limit (%llu "
					   "bytes) is used up: no room for the "
					   "result's evidence",
					   (unsigned long long)
					       run->limits.disk_bytes);
			free(mirror);
			mirror = NULL;
		} else {
			uint64_t left = run->limits.disk_bytes - used;
			uint64_t obj = lim.max_object_bytes
					   ? lim.max_object_bytes
					   : EVIDENCE_MAX_OBJECT_BYTES;
			uint64_t diff = lim.max_diff_bytes
					    ? lim.max_diff_bytes
					    : EVIDENCE_MAX_DIFF_BYTES;
			/* the pack, then the bundle of the same objects */
			lim.max_object_bytes = obj < left / 2 ? obj : left / 2;
			lim.max_diff_bytes = diff < left / 2 ? diff : left / 2;
			if (!lim.max_object_bytes)
				lim.max_object_bytes = 1;
			if (!lim.max_diff_bytes)
				lim.max_diff_bytes = 1;
		}
	}
	if (mirror) {
		struct evidence_request q = {
		    .data_dir = c->data_dir,
		    .session_id = run->id,
		    .warren_bin = c->warren_bin,
		    .sandbox = run->sandbox,
		    .mirror = mirror,
		    .base = run->base,
		    .author = s->user ? s->user : "warren",
		    .message = message,
		    .artifact_dir = w.artifact_dir,
		    .build_output = build_output,
		    .limits = lim,
		};
		r = evidence_commit(&q, out, err);
	} else if (r == 0) {
		r = -EIO;
	}
	json_decref(build_output);
	store_repo_clear(&repo);
	if (r == 0) {
		char path[PATH_MAX + 32];
		snprintf(path, sizeof(path), "%s/diff.patch", w.artifact_dir);
		artifact_register(c, run->id, path, "text/x-diff");
		snprintf(path, sizeof(path), "%s/files.json", w.artifact_dir);
		artifact_register(c, run->id, path, "application/json");
	}
	env_clear(&w);
	return r;
}


/* A media type from a file name's extension. */
static const char *media_type_of(const char *name)
{
	static const struct {
		const char *ext, *type;
	} types[] = {
	    {".json", "application/json"}, {".xml", "application/xml"},
	    {".html", "text/html"},	   {".png", "image/png"},
	    {".txt", "text/plain"},	   {".log", "text/plain"},
	    {".md", "text/markdown"},	   {".svg", "image/svg+xml"},
	};
	const char *dot = strrchr(name, '.');
	for (size_t i = 0; dot && i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(dot, types[i].ext))
			return types[i].type;
	return "application/octet-stream";
}

json_t *work_collect_artifacts(struct run *run)
{
	json_t *names = json_array();
	if (json_array_size(run->artifacts) == 0)
		return names;
	struct control *c = run->ctl;
	struct work_env w;
	env_init(run, &w);
	wr_mkdir_p(w.artifact_dir, 0700);
	size_t i;
	json_t *p;
	json_array_foreach(run->artifacts, i, p)
	{
		const char *rel = json_string_value(p);
		_cleanup_free_ char *inside =
		    wr_asprintf("%s/%s", TOOLS_WORKSPACE, rel);
		if (!inside)
			continue;
		char *const argv[] = {"/bin/cat", "--", inside, NULL};
		struct tools_exec_result res = {0};
		struct wr_error *err = NULL;
		if (w.ex.run(w.ex.ctx, argv, NULL, 0, 60 * 1000, 16u << 20,
			     &res, &err) < 0 ||
		    res.status != 0 || res.truncated) {
			wr_error_free(err);
			tools_exec_result_clear(&res);
			continue; /* missing or too big: not evidence */
		}
		/* the path as one safe file name: "reports/junit.xml" ->
		 * "spec-reports_junit.xml" (prefixed: never one of Warren's
		 * own artifact names) */
		char name[160];
		size_t n = (size_t)snprintf(name, sizeof(name), "spec-");
		for (const char *q = rel; *q && n < sizeof(name) - 1; q++)
			name[n++] = (char)((*q >= 'a' && *q <= 'z') ||
						   (*q >= 'A' && *q <= 'Z') ||
						   (*q >= '0' && *q <= '9') ||
						   *q == '.' || *q == '-'
					       ? *q
					       : '_');
		name[n] = '\0';
		_cleanup_free_ char *path =
		    wr_asprintf("%s/%s", w.artifact_dir, name);
		if (path && wr_write_file_atomic(path, res.out ? res.out : "",
						 res.out_len, 0600, true) == 0) {
			artifact_register(c, run->id, path,
					  media_type_of(name));
			json_array_append_new(names, json_string(name));
		}
		tools_exec_result_clear(&res);
	}
	env_clear(&w);
	return names;
}

/* ---- a check: an eval's hidden tests on the result ------------------------ */

/* Sessions being checked now (one check per session at a time: the
 * sandbox is named after it), and how many in all: a check's sandbox
 * runs beside the scheduler's admission, so their number is capped. */
static pthread_mutex_t check_mu = PTHREAD_MUTEX_INITIALIZER;
static char checking[CONTROL_CHECKS_MAX][STORE_ID_MAX];

static int check_claim(const char *id, struct wr_error **err)
{
	int r = -EBUSY, slot = -1;
	pthread_mutex_lock(&check_mu);
	for (int i = 0; i < CONTROL_CHECKS_MAX; i++) {
		if (!strcmp(checking[i], id)) {
			slot = -2;
			break;
		}
		if (slot == -1 && !checking[i][0])
			slot = i;
	}
	if (slot >= 0) {
		snprintf(checking[slot], STORE_ID_MAX, "%s", id);
		r = 0;
	}
	pthread_mutex_unlock(&check_mu);
	if (r < 0 && slot == -2)
		wr_error_set(err, EBUSY, "session %s is being checked already",
			     id);
	else if (r < 0)
		wr_error_set(err, EBUSY,
			     "%d checks are running already; try again later",
			     CONTROL_CHECKS_MAX);
	return r;
}

static void check_release(const char *id)
{
	pthread_mutex_lock(&check_mu);
	for (int i = 0; i < CONTROL_CHECKS_MAX; i++)
		if (!strcmp(checking[i], id))
			checking[i][0] = '\0';
	pthread_mutex_unlock(&check_mu);
}

/* Writes tests ({"relative/path": "content"}, checked by the API) under
 * dir, directories 0755 and files 0644: the sandbox reads them as
 * another uid. */
static int check_write_tests(const char *dir, const json_t *tests,
			     struct wr_error **err)
{
	wr_rm_rf(dir);
	if (wr_mkdir_p(dir, 0755) < 0)
		return wr_error_set(err, errno, "check: %s", dir);
	const char *rel;
	json_t *v;
	json_object_foreach((json_t *)tests, rel, v)
	{
		/* the API's rules, again: relative, no "." or ".." part */
		if (!rel[0] || rel[0] == '/' || strstr(rel, "..") ||
		    !json_is_string(v))
			return wr_error_input(err, EINVAL,
					      "tests: bad path \"%.100s\"", rel);
		_cleanup_free_ char *path = wr_asprintf("%s/%s", dir, rel);
		if (!path)
			return wr_error_set(err, ENOMEM, "check");
		char *slash = strrchr(path, '/');
		*slash = '\0';
		if (wr_mkdir_p(path, 0755) < 0)
			return wr_error_set(err, errno, "check: %s", path);
		*slash = '/';
		if (wr_write_file_atomic(path, json_string_value(v),
					 json_string_length(v), 0644,
					 false) < 0)
			return wr_error_set(err, errno, "check: write %s",
					    rel);
	}
	return 0;
}

/* A run that is no runner's: what a fresh sandbox of the session needs
 * (its snapshot and base, its limits and backend), read from the store. */
static int check_run_init(struct control *c, const struct store_session *s,
			  const json_t *result, struct run *run,
			  struct wr_error **err)
{
	memset(run, 0, sizeof(*run));
	run->ctl = c;
	snprintf(run->id, sizeof(run->id), "%s", s->id);
	const char *base = json_string_value(json_object_get(result, "base"));
	if (!s->snapshot_id || !base || strlen(base) != 40)
		return wr_error_set(err, EPROTO,
				    "session %s: no snapshot or base recorded",
				    s->id);
	snprintf(run->base, sizeof(run->base), "%s", base);
	snprintf(run->snapshot_id, sizeof(run->snapshot_id), "%s",
		 s->snapshot_id);
	struct snap_store *store = NULL;
	struct snap_manifest *m = NULL;
	int r = snap_store_open(c->data_dir, &store, err);
	if (r == 0)
		r = snap_store_get(store, s->snapshot_id, &m, err);
	if (r == 0 && m->commit)
		snprintf(run->snapshot_commit, sizeof(run->snapshot_commit),
			 "%s", m->commit);
	snap_manifest_free(m);
	snap_store_close(store);
	if (r < 0)
		return wr_error_wrap(err, "session %s: snapshot %s", s->id,
				     s->snapshot_id);
	struct control_limits asked = {0}, from_spec;
	uint64_t refresh;
	if (s->limits_json) {
		json_t *lj = json_loads(s->limits_json, 0, NULL);
		json_object_del(lj, "egress"); /* not a limit */
		if (lj)
			control_limits_from_json("limits", lj, &asked, NULL);
		json_decref(lj);
	}
	control_spec_info(c, run->snapshot_id, &from_spec, &refresh, NULL,
			  NULL);
	control_limits_resolve(c, &asked, &from_spec, &run->limits);
	run->backend = control_spec_backend(c, run->snapshot_id);
	return 0;
}

int control_check(struct control *c, const char *session_id,
		  const json_t *commands, const json_t *tests, json_t **out,
		  struct wr_error **err)
{
	struct store_session s = {0};
	_cleanup_free_ char *tests_dir = wr_asprintf(
	    "%s/sessions/%s/evidence/check-tests", c->data_dir, session_id);
	if (!tests_dir)
		return wr_error_set(err, ENOMEM, "check");
	int r = c->st->ops->session_get(c->st, session_id, &s, err);
	if (r < 0)
		return r;
	json_t *outcome =
	    s.outcome_json ? json_loads(s.outcome_json, 0, NULL) : NULL;
	const json_t *result = json_object_get(outcome, "result");
	if (s.state < SESSION_REVIEW || s.state == SESSION_INTERRUPTED ||
	    !json_string_value(json_object_get(result, "commit"))) {
		r = wr_error_input(err, EPERM,
				   "session %s is %s%s: nothing to check",
				   session_id, session_state_name(s.state),
				   result ? "" : " without a result");
		goto out_session;
	}
	size_t n = json_array_size(commands);
	char ***argvs = wr_calloc(n ? n : 1, sizeof(*argvs));
	if (!argvs) {
		r = wr_error_set(err, ENOMEM, "check");
		goto out_session;
	}
	for (size_t i = 0; i < n && r == 0; i++) {
		argvs[i] = wr_calloc(4, sizeof(char *));
		if (!argvs[i]) {
			r = wr_error_set(err, ENOMEM, "check");
			break;
		}
		argvs[i][0] = "/bin/sh";
		argvs[i][1] = "-c";
		argvs[i][2] = (char *)json_string_value(
		    json_object_get(json_array_get(commands, i), "command"));
	}
	if (r < 0 || (r = check_claim(session_id, err)) < 0)
		goto out_argvs;
	struct run run;
	r = check_run_init(c, &s, result, &run, err);
	if (r == 0 && tests)
		r = check_write_tests(tests_dir, tests, err);
	if (r == 0) {
		const struct fresh_job job = {
		    .prefix = "wc",
		    .upper = "check-upper",
		    .argvs = argvs,
		    .n = n,
		    .tests_dir = tests ? tests_dir : NULL,
		};
		r = verify_fresh(&run, result, &job, out, err);
	}
	/* the hidden tests stay nowhere a later sandbox could see */
	wr_rm_rf(tests_dir);
	check_release(session_id);
	if (r == 0) {
		/* each result as the caller named it */
		size_t i;
		json_t *res;
		json_array_foreach(json_object_get(*out, "results"), i, res)
		{
			const json_t *cmd = json_array_get(commands, i);
			json_object_set(res, "kind",
					json_object_get(cmd, "kind"));
			json_object_set(res, "command",
					json_object_get(cmd, "command"));
		}
		json_object_set_new(*out, "session", json_string(session_id));
	}
out_argvs:
	for (size_t i = 0; i < n; i++)
		free(argvs[i]);
	free(argvs);
out_session:
	json_decref(outcome);
	store_session_clear(&s);
	return r;
}

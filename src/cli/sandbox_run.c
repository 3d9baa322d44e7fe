/* sandbox_run.c - `warren sandbox run [options] -- CMD [ARGS...]`:
 * create, run CMD, destroy; exit with CMD's status. */
#include "cli/cli.h"

#include "snapshot/session.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void print_json(const char *name, const struct sandbox_result *res)
{
	const struct sandbox_timings *t = &res->timings;
	json_t *o = json_pack(
	    "{s:s, s:i, s:b, s:b, s:{s:f, s:f, s:f, s:f, s:f, s:f, s:f}}",
	    "name", name, "exit_code", res->exit_code, "timed_out",
	    res->timed_out, "oom_killed", res->oom_killed, "timings_ms",
	    "cgroup", t->cgroup_us / 1000.0, "prepare", t->prepare_us / 1000.0,
	    "clone", t->clone_us / 1000.0, "setup", t->setup_us / 1000.0,
	    "start_total", t->total_us / 1000.0, "run", res->run_us / 1000.0,
	    "destroy", res->destroy_us / 1000.0);
	char *text =
	    o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
	if (text) {
		fflush(stdout);
		printf("%s\n", text);
	}
	free(text);
	json_decref(o);
}

/* A run from a snapshot whose session needs work (drift sync, hooks,
 * services): the sandbox is created long-lived but bound to this warren,
 * prepared through its exec socket, the command runs there, and the
 * sandbox is removed. */
static int run_session(struct cli_sandbox_opts *o, char **cmd)
{
	char name[64];
	snprintf(name, sizeof(name), "snap-%d-%lx", (int)getpid(),
		 (unsigned long)time(NULL));
	o->cfg.name = name;
	o->cfg.owner_bound = true;
	struct wr_error *err = NULL;
	struct sandbox *sb = NULL;
	int r = sandbox_create(&o->cfg, SANDBOX_MODE_SERVE, NULL, &sb, &err);
	if (r < 0) {
		cli_error("run", err);
		int code =
		    err && err->bad_input ? WR_EXIT_USAGE : WR_EXIT_FAILURE;
		wr_error_free(err);
		return code;
	}
	double start_ms = sandbox_get_timings(sb)->total_us / 1000.0;
	sandbox_detach(sb);
	struct snap_session sess;
	r = snap_session_start(o->data_dir, name, o->manifest, o->ref, &sess,
			       &err);
	int code;
	if (r < 0) {
		cli_error("run", err);
		code = err && err->bad_input ? WR_EXIT_USAGE : WR_EXIT_FAILURE;
		wr_error_free(err);
		sandbox_remove(name, NULL);
		return code;
	}
	struct sandbox_exec_request req = {
	    .argv = cmd,
	    .cwd = o->cfg.cwd,
	    .stdio = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO},
	};
	code = sandbox_exec(name, &req, &err);
	if (err) {
		cli_error("run", err);
		wr_error_free(err);
		err = NULL;
	}
	if (code < 0)
		code = WR_EXIT_FAILURE;
	if (sandbox_remove(name, &err) < 0) {
		cli_error("run", err);
		wr_error_free(err);
	}
	if (o->json) {
		json_t *j =
		    json_pack("{s:s, s:i, s:f, s:o}", "name", name, "exit_code",
			      code, "start_ms", start_ms, "session",
			      snap_session_to_json(&sess, o->manifest));
		char *text =
		    j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(6))
		      : NULL;
		if (text) {
			fflush(stdout);
			printf("%s\n", text);
		}
		free(text);
		json_decref(j);
	}
	return code;
}

int cmd_sandbox_run(int argc, char **argv)
{
	struct cli_sandbox_opts o;
	int first = cli_parse_sandbox_opts(argc, argv, &o, false);
	if (first < 0) {
		cli_sandbox_opts_clear(&o);
		return WR_EXIT_USAGE;
	}
	if (first >= argc) {
		cli_usage_error("run",
				"no command given (use -- CMD [ARGS...])");
		cli_sandbox_opts_clear(&o);
		return WR_EXIT_USAGE;
	}
	int code = cli_resolve_snapshot("run", &o);
	if (code) {
		cli_sandbox_opts_clear(&o);
		return code;
	}
	if (o.manifest && snap_session_needed(o.manifest, o.ref)) {
		code = run_session(&o, argv + first);
		cli_sandbox_opts_clear(&o);
		return code;
	}
	struct wr_error *err = NULL;
	struct sandbox *sb = NULL;
	int r =
	    sandbox_create(&o.cfg, SANDBOX_MODE_RUN, argv + first, &sb, &err);
	if (r < 0) {
		cli_error("run", err);
		/* bad input caught by validation is a usage error */
		code = err && err->bad_input ? WR_EXIT_USAGE : WR_EXIT_FAILURE;
		wr_error_free(err);
		cli_sandbox_opts_clear(&o);
		return code;
	}
	char name[128];
	snprintf(name, sizeof(name), "%s", sandbox_get_name(sb));
	struct sandbox_result res;
	r = sandbox_run_wait(sb, &res, &err);
	if (r < 0) {
		cli_error("run", err);
		wr_error_free(err);
	}
	if (res.timed_out)
		fprintf(stderr,
			"warren sandbox run: timed out, sandbox killed\n");
	if (res.oom_killed)
		fprintf(
		    stderr,
		    "warren sandbox run: a process was killed by the memory "
		    "limit\n");
	if (o.json)
		print_json(name, &res);
	cli_sandbox_opts_clear(&o);
	return r < 0 && res.exit_code == 0 ? WR_EXIT_FAILURE : res.exit_code;
}

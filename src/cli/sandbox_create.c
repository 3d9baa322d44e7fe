/* sandbox_create.c - `warren sandbox create --name NAME [options]`: start a
 * long-lived sandbox whose init waits for exec requests. */
#include "cli/cli.h"

#include "snapshot/session.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <stdio.h>

int cmd_sandbox_create(int argc, char **argv)
{
	struct cli_sandbox_opts o;
	int first = cli_parse_sandbox_opts(argc, argv, &o, true);
	int ret = 0;
	if (first < 0) {
		ret = WR_EXIT_USAGE;
		goto out;
	}
	if (first < argc) {
		cli_usage_error("create", "unexpected argument '%s'",
				argv[first]);
		ret = WR_EXIT_USAGE;
		goto out;
	}
	if (!o.cfg.name) {
		cli_usage_error("create", "--name NAME is required");
		ret = WR_EXIT_USAGE;
		goto out;
	}
	ret = cli_resolve_snapshot("create", &o);
	if (ret)
		goto out;
	struct wr_error *err = NULL;
	struct sandbox *sb = NULL;
	int r = sandbox_create(&o.cfg, SANDBOX_MODE_SERVE, NULL, &sb, &err);
	if (r < 0) {
		cli_error("create", err);
		ret = err && err->bad_input ? WR_EXIT_USAGE : WR_EXIT_FAILURE;
		wr_error_free(err);
		goto out;
	}
	const struct sandbox_timings *t = sandbox_get_timings(sb);
	double start_ms = t->total_us / 1000.0;
	pid_t init_pid = sandbox_get_init_pid(sb);
	sandbox_detach(sb);
	/* from a snapshot: drift sync, session hooks, services ready */
	struct snap_session sess;
	if (o.manifest) {
		r = snap_session_start(o.data_dir, o.cfg.name, o.manifest,
				       o.ref, &sess, &err);
		if (r < 0) {
			cli_error("create", err);
			ret = err && err->bad_input ? WR_EXIT_USAGE
						    : WR_EXIT_FAILURE;
			wr_error_free(err);
			sandbox_remove(o.cfg.name, NULL);
			goto out;
		}
	}
	if (o.json) {
		json_t *j =
		    json_pack("{s:s, s:i, s:f}", "name", o.cfg.name, "init_pid",
			      (int)init_pid, "start_ms", start_ms);
		if (j && o.manifest)
			json_object_set_new(
			    j, "session",
			    snap_session_to_json(&sess, o.manifest));
		char *text =
		    j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(6))
		      : NULL;
		if (text)
			printf("%s\n", text);
		free(text);
		json_decref(j);
	} else {
		printf("%s\n", o.cfg.name);
	}
out:
	cli_sandbox_opts_clear(&o);
	return ret;
}

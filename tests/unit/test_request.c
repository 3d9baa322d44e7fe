/* test_request.c - the typed sandbox requests (sandbox/request.c): what the
 * server's command lines say is what `warren sandbox`'s own parser
 * (cli/sandbox.c) reads back, option for option; limits that do not fit
 * are refused; create's answer is parsed or refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cli.h"
#include "sandbox/request.h"

static size_t count(char *const *argv)
{
	size_t n = 0;
	while (argv[n])
		n++;
	return n;
}

static void create_round_trips(void **state)
{
	(void)state;
	struct sandbox_request req = {
	    .name = "s-abc",
	    .backend = SANDBOX_BACKEND_GVISOR,
	    .snapshot = "snap1",
	    .data_dir = "/data",
	    .ref = "0123456789012345678901234567890123456789",
	    .upper = "/data/sessions/s-abc",
	    .layers = {"/l1", "/l2"},
	    .n_layers = 2,
	    .binds = {{"/host/a", "/run/a", true}, {"/host/b", "/b", false}},
	    .n_binds = 2,
	    .env = {"A=1", "B=two words"},
	    .n_env = 2,
	    .cwd = "/workspace/sub",
	    .memory_bytes = 512ULL << 20,
	    .millicpus = 1500,
	    .pids = 300,
	    .disk_bytes = 1ULL << 30,
	    .timeout_ms = 90500,
	};
	struct sandbox_cmdline cl;
	assert_int_equal(sandbox_cmdline_create("/bin/warren", &req, &cl), 0);
	assert_string_equal(cl.argv[0], "/bin/warren");
	assert_string_equal(cl.argv[1], "sandbox");
	assert_string_equal(cl.argv[2], "create");
	/* the parser sees argv from the verb on, as cmd_sandbox passes it */
	struct cli_sandbox_opts o;
	int argc = (int)count(cl.argv) - 2;
	int first = cli_parse_sandbox_opts(argc, cl.argv + 2, &o, true);
	assert_int_equal(first, argc); /* every argument was an option */
	assert_string_equal(o.cfg.name, "s-abc");
	assert_int_equal(o.cfg.backend, SANDBOX_BACKEND_GVISOR);
	assert_string_equal(o.snapshot, "snap1");
	assert_string_equal(o.data, "/data");
	assert_string_equal(o.ref, req.ref);
	assert_string_equal(o.cfg.upper, "/data/sessions/s-abc");
	assert_int_equal(o.cfg.n_layers, 2);
	assert_string_equal(o.cfg.layers[1], "/l2");
	assert_int_equal(o.cfg.n_binds, 2);
	assert_string_equal(o.cfg.binds[0].source, "/host/a");
	assert_string_equal(o.cfg.binds[0].dest, "/run/a");
	assert_true(o.cfg.binds[0].read_only);
	assert_false(o.cfg.binds[1].read_only);
	assert_int_equal(o.cfg.n_env, 2);
	assert_string_equal(o.cfg.env[1], "B=two words");
	assert_string_equal(o.cfg.cwd, "/workspace/sub");
	assert_int_equal(o.cfg.memory_bytes, 512ULL << 20);
	assert_int_equal(o.cfg.millicpus, 1500);
	assert_int_equal(o.cfg.pids, 300);
	assert_int_equal(o.cfg.disk_bytes, 1ULL << 30);
	assert_int_equal(o.cfg.timeout_ms, 90500);
	assert_true(o.json);
	cli_sandbox_opts_clear(&o);
	sandbox_cmdline_clear(&cl);
}

static void native_is_the_default(void **state)
{
	(void)state;
	struct sandbox_request req = {.name = "n1"};
	struct sandbox_cmdline cl;
	assert_int_equal(sandbox_cmdline_create("w", &req, &cl), 0);
	/* said explicitly, so that the environment cannot change it */
	bool said = false;
	for (size_t i = 0; cl.argv[i]; i++)
		said |= !strcmp(cl.argv[i], "--backend") &&
			!strcmp(cl.argv[i + 1], "native");
	assert_true(said);
	setenv("WARREN_SANDBOX_BACKEND", "gvisor", 1);
	struct cli_sandbox_opts o;
	int argc = (int)count(cl.argv) - 2;
	assert_int_equal(cli_parse_sandbox_opts(argc, cl.argv + 2, &o, true),
			 argc);
	assert_int_equal(o.cfg.backend, SANDBOX_BACKEND_NATIVE);
	cli_sandbox_opts_clear(&o);
	/* without --backend, the environment's default */
	char *bare[] = {"create", "--name", "n2", NULL};
	assert_int_equal(cli_parse_sandbox_opts(3, bare, &o, true), 3);
	assert_int_equal(o.cfg.backend, SANDBOX_BACKEND_GVISOR);
	cli_sandbox_opts_clear(&o);
	unsetenv("WARREN_SANDBOX_BACKEND");
	sandbox_cmdline_clear(&cl);
}

static void run_ends_with_the_command(void **state)
{
	(void)state;
	char *cmd[] = {"sh", "-c", "echo --name x", NULL};
	struct sandbox_request req = {.argv = cmd, .json = true,
				      .die_with_parent = true};
	struct sandbox_cmdline cl;
	assert_int_equal(sandbox_cmdline_run("w", &req, &cl), 0);
	size_t n = count(cl.argv);
	assert_string_equal(cl.argv[n - 4], "--");
	assert_string_equal(cl.argv[n - 1], "echo --name x");
	struct cli_sandbox_opts o;
	int argc = (int)n - 2;
	int first = cli_parse_sandbox_opts(argc, cl.argv + 2, &o, false);
	assert_true(first > 0);
	assert_string_equal(cl.argv[2 + first], "sh");
	assert_true(o.json);
	cli_sandbox_opts_clear(&o);
	sandbox_cmdline_clear(&cl);
	/* no command: refused */
	struct sandbox_request none = {0};
	assert_int_equal(sandbox_cmdline_run("w", &none, &cl), -EINVAL);
}

static void exec_and_remove(void **state)
{
	(void)state;
	char *cmd[] = {"/bin/true", NULL};
	struct sandbox_exec_cmd ex = {.name = "s1", .cwd = "/workspace",
				      .env = {"K=V"}, .n_env = 1, .argv = cmd};
	struct sandbox_cmdline cl;
	assert_int_equal(sandbox_cmdline_exec("w", &ex, &cl), 0);
	const char *want[] = {"w", "sandbox", "exec", "s1", "--cwd",
			      "/workspace", "--env", "K=V", "--", "/bin/true"};
	assert_int_equal(count(cl.argv), 10);
	for (size_t i = 0; i < 10; i++)
		assert_string_equal(cl.argv[i], want[i]);
	sandbox_cmdline_clear(&cl);
	assert_int_equal(sandbox_cmdline_remove("w", "s1", &cl), 0);
	assert_string_equal(cl.argv[2], "rm");
	assert_string_equal(cl.argv[3], "s1");
	assert_null(cl.argv[4]);
	sandbox_cmdline_clear(&cl);
	/* a create without a name is refused before anything runs */
	struct sandbox_request unnamed = {0};
	assert_int_equal(sandbox_cmdline_create("w", &unnamed, &cl), -EINVAL);
}

static void too_much_is_refused(void **state)
{
	(void)state;
	struct sandbox_request req = {.name = "x", .n_env = SBX_MAX_ENV + 1};
	struct sandbox_cmdline cl;
	assert_int_equal(sandbox_cmdline_create("w", &req, &cl), -E2BIG);
	/* a command longer than a command line holds */
	static char *big[SBX_CMDLINE_MAX + 2];
	for (size_t i = 0; i < SBX_CMDLINE_MAX + 1; i++)
		big[i] = "a";
	struct sandbox_exec_cmd ex = {.name = "x", .argv = big};
	assert_int_equal(sandbox_cmdline_exec("w", &ex, &cl), -E2BIG);
}

static void answers(void **state)
{
	(void)state;
	struct sandbox_create_answer a;
	struct wr_error *err = NULL;
	const char *good =
	    "{\"name\":\"s\",\"init_pid\":42,\"start_ms\":3.5,\"session\":"
	    "{\"sync_ms\":1.5,\"hooks_ms\":2,\"services_ms\":0.25,\"commit\":"
	    "\"0123456789012345678901234567890123456789\"}}";
	assert_int_equal(sandbox_create_answer_parse(good, &a, &err), 0);
	assert_int_equal(a.init_pid, 42);
	assert_true(a.sync_ms == 1.5 && a.hooks_ms == 2 &&
		    a.services_ms == 0.25);
	assert_string_equal(a.commit,
			    "0123456789012345678901234567890123456789");
	assert_non_null(a.session);
	sandbox_create_answer_clear(&a);
	const char *bad[] = {NULL, "", "[]", "{\"init_pid\":0}",
			     "{\"init_pid\":\"7\"}", "{\"init_pid\":7"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(sandbox_create_answer_parse(bad[i], &a, &err),
				 -EBADMSG);
		assert_non_null(err);
		wr_error_free(err);
		err = NULL;
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(create_round_trips),
	    cmocka_unit_test(native_is_the_default),
	    cmocka_unit_test(run_ends_with_the_command),
	    cmocka_unit_test(exec_and_remove),
	    cmocka_unit_test(too_much_is_refused),
	    cmocka_unit_test(answers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

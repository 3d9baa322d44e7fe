/* test_tools.c - the agent's tools (agent/tools.h) and their exec path
 * (agent/exec_sandbox.h), against a real sandbox: the group set-up creates
 * one with `warren sandbox create` (the binary from $WARREN, else
 * $BUILD/warren, else build/warren), writes a small project into its
 * /workspace through the tools, and the teardown removes it. Not as root,
 * only the tests without a sandbox run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/exec_sandbox.h"
#include "agent/tools.h"
#include "agent/tools_internal.h"
#include "sched/proc.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct fixture {
	char tmp[PATH_MAX];
	char warren[PATH_MAX];
	char name[64];
	char upper[PATH_MAX + 8];
	char artifacts[PATH_MAX + 16];
	struct exec_sandbox xs;
	struct tools_exec ex;
	struct tools_config cfg;
};
static struct fixture fx;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs a warren verb on the host; its exit status. */
static int warren(const char *verb, const char *a1, const char *a2,
		  const char *a3, const char *a4)
{
	char *argv[] = {fx.warren,  (char *)"sandbox", (char *)verb, (char *)a1,
			(char *)a2, (char *)a3,	       (char *)a4,   NULL};
	char *out = NULL, *err_text = NULL;
	struct wr_error *err = NULL;
	int r = proc_run(argv, 4096, -1, &out, &err_text, &err);
	if (r != 0)
		fprintf(stderr, "warren sandbox %s: %d %s %s\n", verb, r,
			err_text ? err_text : "", err ? err->msg : "");
	free(out);
	free(err_text);
	wr_error_free(err);
	return r;
}

/* One tool call that must not fail; its content is valid UTF-8. */
static struct tools_call_result call(const char *name, const char *args)
{
	struct tools_call_result res = {0};
	struct wr_error *err = NULL;
	int r = tools_call(&fx.cfg, &fx.ex, name, args, &res, &err);
	if (r < 0)
		fail_msg("%s %s: %s", name, args, err ? err->msg : "?");
	assert_non_null(res.content);
	json_t *s = json_string(res.content);
	assert_non_null(s); /* jansson refuses anything but UTF-8 */
	json_decref(s);
	return res;
}

/* call() with arguments from a json_pack format. */
static struct tools_call_result callf(const char *name, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	json_t *j = json_vpack_ex(NULL, 0, fmt, ap);
	va_end(ap);
	assert_non_null(j);
	char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(j);
	struct tools_call_result res = call(name, s);
	free(s);
	return res;
}

#define assert_contains(hay, needle)                                 \
	do {                                                         \
		const char *h_ = (hay), *n_ = (needle);              \
		if (!strstr(h_, n_))                                 \
			fail_msg("expected \"%s\" in:\n%s", n_, h_); \
	} while (0)

#define assert_not_contains(hay, needle)                                   \
	do {                                                               \
		const char *h_ = (hay), *n_ = (needle);                    \
		if (strstr(h_, n_))                                        \
			fail_msg("did not expect \"%s\" in:\n%s", n_, h_); \
	} while (0)

/* A command in the sandbox through the exec path; its stdout (owned). */
static char *sh(const char *cmd, int *status)
{
	char *argv[] = {(char *)"sh", (char *)"-c", (char *)cmd, NULL};
	struct tools_exec_result res = {0};
	struct wr_error *err = NULL;
	int r =
	    exec_sandbox_run(&fx.xs, argv, NULL, 0, 30000, 1 << 20, &res, &err);
	if (r < 0)
		fail_msg("exec %s: %s", cmd, err ? err->msg : "?");
	if (status)
		*status = res.status;
	free(res.err);
	return res.out;
}

static void sh_ok(const char *cmd)
{
	int status;
	free(sh(cmd, &status));
	assert_int_equal(status, 0);
}

static bool exists_inside(const char *path)
{
	char cmd[PATH_MAX + 32];
	snprintf(cmd, sizeof(cmd), "test -e '%s' || test -L '%s'", path, path);
	int status;
	free(sh(cmd, &status));
	return status == 0;
}

static void write_ok(const char *path, const char *content)
{
	struct tools_call_result r =
	    callf("write_file", "{s:s, s:s}", "path", path, "content", content);
	assert_contains(r.content, "Wrote ");
	tools_call_result_clear(&r);
}

/* The fixture's files, without asserts (a failed set-up must still
 * remove the sandbox). */
static int write_project(void)
{
	static const char *const files[][2] = {
	    {"src/main.c", "#include <stdio.h>\n"
			   "\n"
			   "int main(void)\n"
			   "{\n"
			   "\tprintf(\"hello\\n\");\n"
			   "\treturn 0;\n"
			   "}\n"},
	    {"src/util/strings.c", "int answer(void) { return 42; }\n"},
	    {"src/util/strings.h", "int answer(void);\n"},
	    {"README.md", "# hello\n"},
	    {"docs/guide.md", "a guide\n"},
	    {"Makefile", "all:\n\tcc -o hello src/main.c\n"},
	    {NULL, "mkdir -p .git && echo '[core]' > .git/config"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		json_t *j = files[i][0]
				? json_pack("{s:s, s:s}", "path", files[i][0],
					    "content", files[i][1])
				: json_pack("{s:s}", "command", files[i][1]);
		char *args = j ? json_dumps(j, JSON_COMPACT) : NULL;
		json_decref(j);
		struct tools_call_result res = {0};
		struct wr_error *err = NULL;
		int r = args ? tools_call(&fx.cfg, &fx.ex,
					  files[i][0] ? "write_file" : "bash",
					  args, &res, &err)
			     : -ENOMEM;
		bool ok = r == 0 && res.content &&
			  (files[i][0] ? !strncmp(res.content, "Wrote ", 6)
				       : res.status == 0);
		if (!ok)
			fprintf(stderr, "test_tools: set-up %s: %s\n",
				files[i][0] ? files[i][0] : files[i][1],
				err ? err->msg : res.content);
		free(args);
		wr_error_free(err);
		tools_call_result_clear(&res);
		if (!ok)
			return -1;
	}
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	const char *w = getenv("WARREN");
	const char *build = getenv("BUILD");
	char rel[PATH_MAX];
	if (w && *w)
		snprintf(rel, sizeof(rel), "%s", w);
	else
		snprintf(rel, sizeof(rel), "%s/warren",
			 build && *build ? build : "build");
	if (!realpath(rel, fx.warren)) {
		fprintf(stderr, "test_tools: %s: %s\n", rel, strerror(errno));
		return -1;
	}
	snprintf(fx.tmp, sizeof(fx.tmp), "/tmp/warren-test-tools.XXXXXX");
	if (!mkdtemp(fx.tmp))
		return -1;
	snprintf(fx.name, sizeof(fx.name), "tools-test-%d", (int)getpid());
	snprintf(fx.upper, sizeof(fx.upper), "%s/ws", fx.tmp);
	snprintf(fx.artifacts, sizeof(fx.artifacts), "%s/artifacts", fx.tmp);
	if (warren("create", "--name", fx.name, "--upper", fx.upper) != 0) {
		wr_rm_rf(fx.tmp);
		return -1;
	}
	fx.xs = (struct exec_sandbox){fx.warren, fx.name};
	fx.ex = (struct tools_exec){exec_sandbox_run, &fx.xs};
	fx.cfg = (struct tools_config){.artifact_dir = fx.artifacts};
	/* the small project, written through the tools themselves */
	if (write_project() < 0) {
		warren("rm", fx.name, NULL, NULL, NULL);
		wr_rm_rf(fx.tmp);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	warren("rm", fx.name, NULL, NULL, NULL);
	wr_rm_rf(fx.tmp);
	return 0;
}

/* Each test starts from the default configuration. */
static int reset_cfg(void **state)
{
	(void)state;
	fx.cfg = (struct tools_config){.artifact_dir = fx.artifacts};
	return 0;
}

/* ---- definitions --------------------------------------------------------- */

static void test_definitions(void **state)
{
	(void)state;
	json_t *defs = tools_definitions();
	assert_non_null(defs);
	const char *names[] = {"bash",	     "read_file",  "write_file",
			       "edit_file",  "list_files", "run_verify",
			       "screenshot", "finish"};
	assert_int_equal(json_array_size(defs), ARRAY_SIZE(names));
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		json_t *d = json_array_get(defs, i);
		assert_string_equal(
		    json_string_value(json_object_get(d, "type")), "function");
		json_t *fn = json_object_get(d, "function");
		assert_string_equal(
		    json_string_value(json_object_get(fn, "name")), names[i]);
		const char *desc =
		    json_string_value(json_object_get(fn, "description"));
		assert_non_null(desc);
		assert_true(strlen(desc) > 40);
		json_t *params = json_object_get(fn, "parameters");
		assert_string_equal(
		    json_string_value(json_object_get(params, "type")),
		    "object");
		assert_true(
		    json_is_object(json_object_get(params, "properties")));
		/* every required key is a property */
		size_t k;
		json_t *req;
		json_array_foreach(json_object_get(params, "required"), k, req)
		{
			assert_non_null(json_object_get(
			    json_object_get(params, "properties"),
			    json_string_value(req)));
		}
	}
	json_decref(defs);
}

static void test_glob(void **state)
{
	(void)state;
	assert_true(tools_glob_match("src/**.c", "src/a.c"));
	assert_true(tools_glob_match("src/**.c", "src/x/y/b.c"));
	assert_false(tools_glob_match("src/**.c", "src/a.h"));
	assert_false(tools_glob_match("src/**.c", "lib/a.c"));
	assert_true(tools_glob_match("**/*.c", "a.c"));
	assert_true(tools_glob_match("**/*.c", "a/b/c.c"));
	assert_true(tools_glob_match("src/**/x.h", "src/x.h"));
	assert_false(tools_glob_match("src/*.c", "src/sub/a.c"));
	assert_true(tools_glob_match("src/?.c", "src/a.c"));
	assert_false(tools_glob_match("src/?.c", "src/ab.c"));
	assert_true(tools_glob_match("test_[a-c]*.py", "test_b1.py"));
	assert_false(tools_glob_match("test_[!a-c]*.py", "test_b1.py"));
	assert_true(tools_glob_match("a\\*b", "a*b"));
	assert_false(tools_glob_match("a\\*b", "axb"));
	assert_true(tools_glob_match("[", "["));
	/* a pathological pattern ends (the step budget), without a match */
	assert_false(tools_glob_match("**a**a**a**a**a**a**a**a**b",
				      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
				      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaac"));
}

/* ---- bash ---------------------------------------------------------------- */

static void test_bash(void **state)
{
	(void)state;
	struct tools_call_result r =
	    callf("bash", "{s:s}", "command",
		  "pwd; echo to-stdout; echo to-stderr >&2; exit 3");
	assert_int_equal(r.status, 3);
	assert_false(r.finished);
	assert_true(!strncmp(r.content, "exit status: 3\n", 15));
	assert_contains(r.content, "/workspace\nto-stdout\nto-stderr\n");
	tools_call_result_clear(&r);

	/* bash itself, not sh */
	r = callf("bash", "{s:s}", "command", "echo ${BASH_VERSION:+is-bash}");
	assert_contains(r.content, "is-bash");
	tools_call_result_clear(&r);

	r = callf("bash", "{s:s}", "command", "true");
	assert_string_equal(r.content, "exit status: 0 (no output)\n");
	tools_call_result_clear(&r);
}

static void test_bash_truncation(void **state)
{
	(void)state;
	fx.cfg.max_output = 2048;
	struct tools_call_result r =
	    callf("bash", "{s:s}", "command", "seq 1 20000");
	assert_int_equal(r.status, 0);
	assert_true(!strncmp(r.content, "exit status: 0\n1\n2\n3\n", 21));
	assert_contains(r.content, " bytes cut ...]\n");
	/* the tail is kept, cut at a line end */
	size_t len = strlen(r.content);
	assert_true(len > 11);
	assert_string_equal(r.content + len - 12, "19999\n20000\n");
	assert_true(len < 2048 + 200);
	/* the marker says how much went */
	const char *m = strstr(r.content, "[... ");
	unsigned long cut = strtoul(m + 5, NULL, 10);
	assert_true(cut > 100000 && cut < 108894);
	tools_call_result_clear(&r);
}

/* No process whose command line holds pattern is left in the sandbox
 * (waits up to 3 s: the kill after a hang-up is asynchronous). */
static void assert_gone(const char *pattern)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd),
		 "for i in $(seq 30); do pgrep -f '%s' >/dev/null || exit 0; "
		 "sleep 0.1; done; exit 1",
		 pattern);
	int status;
	free(sh(cmd, &status));
	assert_int_equal(status, 0);
}

static void test_bash_timeout(void **state)
{
	(void)state;
	double t0 = now_s();
	struct tools_call_result r =
	    callf("bash", "{s:s, s:i}", "command", "echo started; sleep 37",
		  "timeout_s", 1);
	double dt = now_s() - t0;
	assert_int_equal(r.status, 124);
	assert_contains(r.content, "exit status: 124 (timed out after 1 s");
	assert_contains(r.content, "started");
	/* SIGTERM was enough: no wait for the SIGKILL grace */
	assert_true(dt >= 0.9 && dt < 1 + EXEC_SANDBOX_KILL_GRACE_MS / 1000.0);
	tools_call_result_clear(&r);
	assert_gone("sleep 3[7]");

	/* a command that ignores SIGTERM: SIGKILL after the grace */
	t0 = now_s();
	r = callf("bash", "{s:s, s:i}", "command", "trap '' TERM; sleep 38",
		  "timeout_s", 1);
	dt = now_s() - t0;
	assert_int_equal(r.status, 124);
	assert_true(dt >= 1 + EXEC_SANDBOX_KILL_GRACE_MS / 1000.0 - 0.1);
	assert_true(dt < 1 + EXEC_SANDBOX_KILL_GRACE_MS / 1000.0 + 2);
	tools_call_result_clear(&r);
	assert_gone("sleep 3[8]");

	/* the timeout given by the configuration */
	fx.cfg.bash_timeout_ms = 500;
	t0 = now_s();
	r = callf("bash", "{s:s}", "command", "sleep 39");
	assert_int_equal(r.status, 124);
	assert_contains(r.content, "(timed out after 0.5 s");
	assert_true(now_s() - t0 < 2);
	tools_call_result_clear(&r);
	assert_gone("sleep 3[9]");
}

/* Output that is not UTF-8 (and NULs) reaches the model replaced. */
static void test_bash_binary_output(void **state)
{
	(void)state;
	struct tools_call_result r =
	    callf("bash", "{s:s}", "command", "printf 'a\\377b\\000c\\n'");
	assert_contains(r.content, "a\xEF\xBF\xBD"
				   "b\xEF\xBF\xBD"
				   "c\n");
	tools_call_result_clear(&r);
}

/* ---- read_file ----------------------------------------------------------- */

static void test_read_file(void **state)
{
	(void)state;
	struct tools_call_result r =
	    callf("read_file", "{s:s}", "path", "src/main.c");
	assert_string_equal(r.content, "     1\t#include <stdio.h>\n"
				       "     2\t\n"
				       "     3\tint main(void)\n"
				       "     4\t{\n"
				       "     5\t\tprintf(\"hello\\n\");\n"
				       "     6\t\treturn 0;\n"
				       "     7\t}\n");
	tools_call_result_clear(&r);

	/* absolute paths, and reads outside the workspace are allowed */
	r = callf("read_file", "{s:s}", "path", "/workspace/README.md");
	assert_string_equal(r.content, "     1\t# hello\n");
	tools_call_result_clear(&r);
	r = callf("read_file", "{s:s, s:i, s:i}", "path", "/etc/hostname",
		  "start_line", 1, "end_line", 1);
	assert_contains(r.content, "     1\t");
	tools_call_result_clear(&r);

	/* a range */
	r = callf("read_file", "{s:s, s:i, s:i}", "path", "src/main.c",
		  "start_line", 3, "end_line", 4);
	assert_string_equal(r.content, "     3\tint main(void)\n"
				       "     4\t{\n"
				       "[lines 3-4 of 7]\n");
	tools_call_result_clear(&r);

	/* from a line to the end; an end past the end */
	r = callf("read_file", "{s:s, s:i}", "path", "src/main.c", "start_line",
		  6);
	assert_string_equal(r.content, "     6\t\treturn 0;\n"
				       "     7\t}\n"
				       "[lines 6-7 of 7]\n");
	tools_call_result_clear(&r);
	r = callf("read_file", "{s:s, s:i, s:i}", "path", "src/main.c",
		  "start_line", 7, "end_line", 100);
	assert_string_equal(r.content, "     7\t}\n[lines 7-7 of 7]\n");
	tools_call_result_clear(&r);

	/* past the end; a reversed range */
	r = callf("read_file", "{s:s, s:i}", "path", "src/main.c", "start_line",
		  8);
	assert_contains(r.content, "Error: read_file: start_line 8 is past "
				   "the end of \"src/main.c\" (7 lines)");
	tools_call_result_clear(&r);
	r = callf("read_file", "{s:s, s:i, s:i}", "path", "src/main.c",
		  "start_line", 5, "end_line", 2);
	assert_contains(r.content, "Error: read_file: end_line (2) is before "
				   "start_line (5)");
	tools_call_result_clear(&r);

	/* a missing file, with and without a range */
	r = callf("read_file", "{s:s}", "path", "no/such.txt");
	assert_true(!strncmp(r.content, "Error: read_file: ", 18));
	assert_contains(r.content, "no/such.txt");
	assert_contains(r.content, "No such file or directory");
	assert_int_not_equal(r.status, 0);
	tools_call_result_clear(&r);
	r = callf("read_file", "{s:s, s:i}", "path", "no/such.txt",
		  "start_line", 2);
	assert_contains(r.content, "No such file or directory");
	tools_call_result_clear(&r);

	/* empty and binary files */
	sh_ok(": > empty.txt; printf 'a\\000b' > bin.dat");
	r = callf("read_file", "{s:s}", "path", "empty.txt");
	assert_string_equal(r.content, "(empty file)\n");
	tools_call_result_clear(&r);
	r = callf("read_file", "{s:s}", "path", "bin.dat");
	assert_contains(r.content, "binary file");
	tools_call_result_clear(&r);
	sh_ok("rm empty.txt bin.dat");
}

static void test_read_file_limit(void **state)
{
	(void)state;
	sh_ok("seq 1 5000 > big.txt");
	fx.cfg.max_output = 1024;
	struct tools_call_result r =
	    callf("read_file", "{s:s}", "path", "big.txt");
	assert_true(strlen(r.content) <= 1024 + 200);
	assert_true(!strncmp(r.content, "     1\t1\n     2\t2\n", 18));
	assert_contains(r.content, "[... output limit reached: lines ");
	assert_contains(r.content,
			"-5000 not shown; continue with start_line=");
	tools_call_result_clear(&r);

	/* one line longer than the limit */
	sh_ok("head -c 5000 /dev/zero | tr '\\0' x > long.txt");
	r = callf("read_file", "{s:s}", "path", "long.txt");
	assert_contains(r.content, "     1\txxxx");
	assert_contains(r.content, "[... line 1 cut: ");
	tools_call_result_clear(&r);
	sh_ok("rm big.txt long.txt");
}

/* ---- write_file ---------------------------------------------------------- */

static void test_write_file(void **state)
{
	(void)state;
	struct tools_call_result r =
	    callf("write_file", "{s:s, s:s}", "path", "deep/er/dir/f.txt",
		  "content", "one\ntwo\n");
	assert_string_equal(r.content, "Wrote 8 bytes (2 lines) to "
				       "/workspace/deep/er/dir/f.txt.\n");
	tools_call_result_clear(&r);
	int status;
	char *out = sh("cat /workspace/deep/er/dir/f.txt", &status);
	assert_int_equal(status, 0);
	assert_string_equal(out, "one\ntwo\n");
	free(out);

	/* replacing keeps the mode */
	sh_ok("chmod 750 deep/er/dir/f.txt");
	write_ok("/workspace/deep/er/dir/f.txt", "three\n");
	out =
	    sh("stat -c %a deep/er/dir/f.txt; cat deep/er/dir/f.txt", &status);
	assert_string_equal(out, "750\nthree\n");
	free(out);

	/* a large content: through stdin, well past a pipe's buffer */
	size_t big = 3u << 20;
	char *content = malloc(big + 1);
	assert_non_null(content);
	for (size_t i = 0; i < big; i++)
		content[i] = (char)('a' + i % 26);
	content[big - 1] = '\n';
	content[big] = '\0';
	r = callf("write_file", "{s:s, s:s}", "path", "big.txt", "content",
		  content);
	assert_contains(r.content, "Wrote 3145728 bytes (1 line)");
	tools_call_result_clear(&r);
	free(content);
	out = sh("wc -c < big.txt; md5sum < big.txt | cut -c1-8", &status);
	assert_int_equal(status, 0);
	assert_true(!strncmp(out, "3145728\n", 8));
	free(out);
	sh_ok("rm -r deep big.txt");
}

/* ---- edit_file ----------------------------------------------------------- */

static char *cat_inside(const char *path)
{
	char cmd[PATH_MAX];
	snprintf(cmd, sizeof(cmd), "cat '%s'", path);
	int status;
	char *out = sh(cmd, &status);
	assert_int_equal(status, 0);
	return out;
}

static void test_edit_file(void **state)
{
	(void)state;
	write_ok("edit.txt", "alpha\nbeta\ngamma\n");
	sh_ok("chmod 755 edit.txt");
	struct tools_call_result r =
	    callf("edit_file", "{s:s, s:s, s:s}", "path", "edit.txt",
		  "old_text", "beta\n", "new_text", "BETA\nbeta2\n");
	assert_contains(r.content, "Edited /workspace/edit.txt: replaced 1 "
				   "line at line 2 with 2 lines. Now:\n");
	assert_contains(r.content, "     2\tBETA\n     3\tbeta2\n");
	tools_call_result_clear(&r);
	char *text = cat_inside("edit.txt");
	assert_string_equal(text, "alpha\nBETA\nbeta2\ngamma\n");
	free(text);
	text = sh("stat -c %a edit.txt", NULL);
	assert_string_equal(text, "755\n");
	free(text);

	/* absent: a clear message, nothing changed */
	r = callf("edit_file", "{s:s, s:s, s:s}", "path", "edit.txt",
		  "old_text", "delta", "new_text", "x");
	assert_contains(r.content, "Error: edit_file: old_text was not found "
				   "in \"edit.txt\"; nothing was changed.");
	tools_call_result_clear(&r);
	text = cat_inside("edit.txt");
	assert_string_equal(text, "alpha\nBETA\nbeta2\ngamma\n");
	free(text);

	/* ambiguous: the count, where, nothing changed */
	write_ok("twice.txt", "x = 1;\ny = 2;\nx = 1;\n");
	r = callf("edit_file", "{s:s, s:s, s:s}", "path", "twice.txt",
		  "old_text", "x = 1;", "new_text", "x = 3;");
	assert_contains(r.content, "Error: edit_file: old_text occurs 2 times "
				   "in \"twice.txt\" (at lines 1, 3); nothing "
				   "was changed.");
	tools_call_result_clear(&r);
	text = cat_inside("twice.txt");
	assert_string_equal(text, "x = 1;\ny = 2;\nx = 1;\n");
	free(text);

	/* made unique with context, it works */
	r = callf("edit_file", "{s:s, s:s, s:s}", "path", "twice.txt",
		  "old_text", "y = 2;\nx = 1;", "new_text", "y = 2;\nx = 3;");
	assert_contains(r.content, "Edited ");
	tools_call_result_clear(&r);
	text = cat_inside("twice.txt");
	assert_string_equal(text, "x = 1;\ny = 2;\nx = 3;\n");
	free(text);

	/* empty old_text; a missing file */
	r = callf("edit_file", "{s:s, s:s, s:s}", "path", "twice.txt",
		  "old_text", "", "new_text", "x");
	assert_contains(r.content, "Error: edit_file: old_text is empty");
	tools_call_result_clear(&r);
	r = callf("edit_file", "{s:s, s:s, s:s}", "path", "missing.txt",
		  "old_text", "a", "new_text", "b");
	assert_contains(r.content, "Error: edit_file: ");
	assert_contains(r.content, "No such file or directory");
	tools_call_result_clear(&r);
	assert_false(exists_inside("/workspace/missing.txt"));
	sh_ok("rm edit.txt twice.txt");
}

/* ---- confinement --------------------------------------------------------- */

static void assert_refused(struct tools_call_result *r)
{
	assert_contains(r->content, "refused: ");
	assert_contains(r->content, "is outside /workspace");
	assert_contains(r->content, "Nothing was written.");
	tools_call_result_clear(r);
}

static void test_confinement(void **state)
{
	(void)state;
	char *passwd = cat_inside("/etc/passwd");
	sh_ok("ln -s /etc /workspace/etclink && "
	      "ln -s /tmp/target.txt /workspace/filelink && "
	      "ln -s ../../tmp /workspace/src/up");

	struct tools_call_result r;
	const char *outside[] = {"../etc/x",	     "/etc/passwd",
				 "/tmp/outside.txt", "/workspace/../etc/y",
				 "etclink/evil",     "filelink",
				 "src/up/evil2",     "src/../../etc/z"};
	for (size_t i = 0; i < ARRAY_SIZE(outside); i++) {
		r = callf("write_file", "{s:s, s:s}", "path", outside[i],
			  "content", "owned\n");
		assert_refused(&r);
		r = callf("edit_file", "{s:s, s:s, s:s}", "path", outside[i],
			  "old_text", "root", "new_text", "owned");
		assert_refused(&r);
	}
	r = callf("write_file", "{s:s, s:s}", "path", "../etc/x", "content",
		  "x");
	assert_contains(r.content, "(it resolves to /etc/x)");
	tools_call_result_clear(&r);

	/* nothing was written anywhere */
	const char *never[] = {"/etc/x",    "/tmp/outside.txt", "/etc/y",
			       "/etc/evil", "/tmp/target.txt",	"/tmp/evil2",
			       "/etc/z"};
	for (size_t i = 0; i < ARRAY_SIZE(never); i++) {
		if (exists_inside(never[i]))
			fail_msg("%s was written", never[i]);
	}
	char *after = cat_inside("/etc/passwd");
	assert_string_equal(after, passwd);
	free(after);
	free(passwd);

	/* a NUL or a newline in the path */
	r = call("write_file",
		 "{\"path\": \"ok\\u0000/../../etc/x\", \"content\": \"x\"}");
	assert_contains(r.content,
			"Error: write_file: the path contains a NUL");
	tools_call_result_clear(&r);
	r = callf("write_file", "{s:s, s:s}", "path", "a\nb", "content", "x");
	assert_contains(r.content, "newline");
	tools_call_result_clear(&r);

	/* inside after resolution is fine: "..", and a symlink inside */
	sh_ok("ln -s src /workspace/srclink");
	write_ok("/workspace/src/../inside.txt", "in\n");
	write_ok("srclink/via-link.txt", "in\n");
	assert_true(exists_inside("/workspace/inside.txt"));
	assert_true(exists_inside("/workspace/src/via-link.txt"));
	sh_ok("rm etclink filelink srclink src/up inside.txt "
	      "src/via-link.txt");
}

/* ---- list_files ---------------------------------------------------------- */

static void test_list_files(void **state)
{
	(void)state;
	struct tools_call_result r =
	    callf("list_files", "{s:s}", "pattern", "src/**.c");
	assert_string_equal(r.content, "src/main.c\nsrc/util/strings.c\n"
				       "[2 files]\n");
	tools_call_result_clear(&r);

	/* by name at any depth */
	r = callf("list_files", "{s:s}", "pattern", "*.md");
	assert_string_equal(r.content, "README.md\ndocs/guide.md\n[2 files]\n");
	tools_call_result_clear(&r);

	/* everything: sorted, no directories, no .git */
	r = call("list_files", "{}");
	assert_string_equal(r.content, "Makefile\nREADME.md\ndocs/guide.md\n"
				       "src/main.c\nsrc/util/strings.c\n"
				       "src/util/strings.h\n[6 files]\n");
	tools_call_result_clear(&r);

	r = callf("list_files", "{s:s}", "pattern", "*.rs");
	assert_string_equal(r.content, "No files match \"*.rs\".\n");
	tools_call_result_clear(&r);

	/* the cap */
	sh_ok("mkdir many && cd many && for i in $(seq 10 39); do : > f$i; "
	      "done");
	fx.cfg.list_max = 10;
	r = callf("list_files", "{s:s}", "pattern", "many/*");
	assert_true(!strncmp(r.content, "many/f10\nmany/f11\n", 18));
	assert_contains(r.content, "many/f19\n[... 20 more not shown (30 "
				   "files match): narrow the pattern ...]\n");
	assert_not_contains(r.content, "many/f20");
	tools_call_result_clear(&r);
	sh_ok("rm -r many");
}

/* ---- run_verify ---------------------------------------------------------- */

static void test_run_verify(void **state)
{
	(void)state;
	char *pass[] = {(char *)"sh", (char *)"-c",
			(char *)"echo verify-ok; echo on-stderr >&2", NULL};
	char *fail[] = {(char *)"sh", (char *)"-c",
			(char *)"echo verify-bad; exit 4", NULL};
	char **both[] = {pass, fail};
	fx.cfg.verify_argv = both;
	fx.cfg.n_verify = 1;
	struct tools_call_result r = call("run_verify", "{}");
	assert_true(r.verify_passed);
	assert_int_equal(r.status, 0);
	assert_contains(r.content, "Verification passed: 1 command.\n");
	assert_contains(r.content, "[passed]\nexit status: 0\nverify-ok\n"
				   "on-stderr\n");
	tools_call_result_clear(&r);

	fx.cfg.n_verify = 2;
	r = call("run_verify", "");
	assert_false(r.verify_passed);
	assert_int_equal(r.status, 4);
	assert_contains(r.content, "Verification FAILED: 1 of 2 commands "
				   "failed.\n");
	assert_contains(r.content, "$ sh -c echo verify-bad; exit 4   "
				   "[FAILED]\nexit status: 4\nverify-bad\n");
	tools_call_result_clear(&r);

	fx.cfg.n_verify = 0;
	r = call("run_verify", "{}");
	assert_false(r.verify_passed);
	assert_contains(r.content, "no verify commands");
	tools_call_result_clear(&r);
}

/* ---- finish, bad calls --------------------------------------------------- */

static void test_finish(void **state)
{
	(void)state;
	struct tools_call_result r =
	    callf("finish", "{s:s}", "summary", "Fixed the greeting.");
	assert_true(r.finished);
	assert_string_equal(r.summary, "Fixed the greeting.");
	tools_call_result_clear(&r);

	r = call("finish", "{}");
	assert_false(r.finished);
	assert_null(r.summary);
	assert_contains(r.content, "Error: finish: \"summary\" is required");
	tools_call_result_clear(&r);
}

static void test_bad_calls(void **state)
{
	(void)state;
	struct tools_call_result r = call("rm_rf", "{}");
	assert_contains(r.content, "Error: there is no tool named \"rm_rf\". "
				   "The tools are: bash, read_file,");
	tools_call_result_clear(&r);

	r = call("read_file", "{\"path\": ");
	assert_contains(r.content, "Error: read_file: the arguments are not "
				   "valid JSON (");
	assert_contains(r.content, "for example {\"path\": \"src/main.c\"");
	tools_call_result_clear(&r);

	r = call("bash", "[\"ls\"]");
	assert_contains(r.content, "Error: bash: the arguments must be a JSON "
				   "object");
	tools_call_result_clear(&r);

	r = call("read_file", "{\"path\": 5}");
	assert_contains(r.content, "Error: read_file: \"path\" must be a "
				   "string");
	tools_call_result_clear(&r);

	r = call("write_file", "{\"path\": \"x.txt\"}");
	assert_contains(r.content, "Error: write_file: \"content\" is "
				   "required");
	tools_call_result_clear(&r);
	assert_false(exists_inside("/workspace/x.txt"));

	r = call("bash", "{\"command\": \"true\", \"timeout_s\": -1}");
	assert_contains(r.content, "\"timeout_s\" must be a whole number from "
				   "1 to 1800");
	tools_call_result_clear(&r);

	/* numbers as models send them */
	r = call("read_file",
		 "{\"path\": \"src/main.c\", \"start_line\": \"2\", "
		 "\"end_line\": 2.0}");
	assert_string_equal(r.content, "     2\t\n[lines 2-2 of 7]\n");
	tools_call_result_clear(&r);
}

/* ---- screenshot ---------------------------------------------------------- */

static void assert_png(const char *path)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	unsigned char magic[8];
	assert_int_equal(fread(magic, 1, 8, f), 8);
	fclose(f);
	assert_memory_equal(magic, "\x89PNG\r\n\x1a\n", 8);
}

static void test_screenshot(void **state)
{
	(void)state;
	if (access("/usr/bin/chromium", X_OK) != 0) {
		fprintf(stderr, "test_screenshot: SKIPPED: chromium is not "
				"installed on the host (apt-get install "
				"chromium)\n");
		skip();
	}
	write_ok("page/index.html",
		 "<!doctype html><html><body style=\"background:#c33\">"
		 "<h1>Hello from the sandbox</h1></body></html>\n");
	struct tools_call_result r =
	    callf("screenshot", "{s:s, s:s}", "url",
		  "file:///workspace/page/index.html", "name", "home");
	assert_int_equal(r.status, 0);
	assert_non_null(r.artifact);
	assert_contains(r.content, "saved as the artifact home.png (1280x800 "
				   "PNG, ");
	char want[PATH_MAX + 32];
	snprintf(want, sizeof(want), "%s/home.png", fx.artifacts);
	assert_string_equal(r.artifact, want);
	assert_png(r.artifact);
	tools_call_result_clear(&r);

	/* a workspace path; the name taken: another file */
	r = callf("screenshot", "{s:s, s:s}", "url", "page/index.html", "name",
		  "home.png");
	assert_non_null(r.artifact);
	snprintf(want, sizeof(want), "%s/home-2.png", fx.artifacts);
	assert_string_equal(r.artifact, want);
	assert_png(r.artifact);
	tools_call_result_clear(&r);

	/* a bad name: no artifact */
	r = callf("screenshot", "{s:s, s:s}", "url", "page/index.html", "name",
		  "../../etc/x");
	assert_null(r.artifact);
	assert_contains(r.content, "Error: screenshot: \"name\" may hold only");
	tools_call_result_clear(&r);
	sh_ok("rm -r page");
}

/* ---- the exec path itself ------------------------------------------------ */

static void test_exec_sandbox(void **state)
{
	(void)state;
	/* stdin past the pipe buffer; stdout capped, the rest drained */
	size_t big = 3u << 20;
	char *data = malloc(big);
	assert_non_null(data);
	for (size_t i = 0; i < big; i++)
		data[i] = (char)('0' + i % 10);
	char *cat[] = {(char *)"cat", NULL};
	struct tools_exec_result res = {0};
	struct wr_error *err = NULL;
	assert_int_equal(exec_sandbox_run(&fx.xs, cat, data, big, 30000,
					  1 << 20, &res, &err),
			 0);
	assert_int_equal(res.status, 0);
	assert_true(res.truncated);
	assert_int_equal(res.out_len, 1 << 20);
	assert_memory_equal(res.out, data, 1 << 20);
	assert_int_equal(res.out[res.out_len], '\0');
	tools_exec_result_clear(&res);

	/* a command that does not read its stdin: no SIGPIPE for us */
	char *tr[] = {(char *)"true", NULL};
	assert_int_equal(
	    exec_sandbox_run(&fx.xs, tr, data, big, 30000, 4096, &res, &err),
	    0);
	assert_int_equal(res.status, 0);
	assert_false(res.truncated);
	tools_exec_result_clear(&res);
	free(data);

	/* status and stderr apart */
	char *st[] = {(char *)"sh", (char *)"-c",
		      (char *)"echo out; echo err >&2; exit 7", NULL};
	assert_int_equal(
	    exec_sandbox_run(&fx.xs, st, NULL, 0, 30000, 4096, &res, &err), 0);
	assert_int_equal(res.status, 7);
	assert_string_equal(res.out, "out\n");
	assert_string_equal(res.err, "err\n");
	tools_exec_result_clear(&res);

	/* a command that does not exist ran (status 127), it is no error */
	char *nx[] = {(char *)"/no/such/command", NULL};
	assert_int_equal(
	    exec_sandbox_run(&fx.xs, nx, NULL, 0, 30000, 4096, &res, &err), 0);
	assert_int_equal(res.status, 127);
	tools_exec_result_clear(&res);

	/* a background job holding the pipes does not hold the call */
	double t0 = now_s();
	char *bg[] = {(char *)"sh", (char *)"-c",
		      (char *)"sleep 41 & echo started", NULL};
	assert_int_equal(
	    exec_sandbox_run(&fx.xs, bg, NULL, 0, 30000, 4096, &res, &err), 0);
	assert_true(now_s() - t0 < 2);
	assert_string_equal(res.out, "started\n");
	tools_exec_result_clear(&res);
	sh_ok("pkill -f 'sleep 4[1]'; true");

	/* no such sandbox, no warren: errors, not results */
	struct exec_sandbox gone = {fx.warren, "tools-test-no-such-sandbox"};
	assert_true(
	    exec_sandbox_run(&gone, tr, NULL, 0, 30000, 4096, &res, &err) < 0);
	assert_non_null(err);
	assert_contains(err->msg, "no running sandbox");
	wr_error_free(err);
	err = NULL;
	struct exec_sandbox nobin = {"/no/such/warren", fx.name};
	assert_int_equal(
	    exec_sandbox_run(&nobin, tr, NULL, 0, 30000, 4096, &res, &err),
	    -ENOENT);
	wr_error_free(err);
	err = NULL;

	/* through tools_call, the error comes with the tool's name */
	struct tools_exec ex = {exec_sandbox_run, &gone};
	struct tools_call_result r = {0};
	assert_true(tools_call(&fx.cfg, &ex, "bash", "{\"command\": \"true\"}",
			       &r, &err) < 0);
	assert_contains(err->msg, "tool bash: ");
	assert_null(r.content);
	wr_error_free(err);
}

int main(void)
{
	/* Only root can create the sandbox: as another user (make unit),
	 * the tests that need none run alone. */
	const struct CMUnitTest no_sandbox[] = {
	    cmocka_unit_test(test_definitions),
	    cmocka_unit_test(test_glob),
	};
	if (geteuid() != 0) {
		fprintf(stderr, "test_tools: not root: the tests in a sandbox "
				"are skipped\n");
		return cmocka_run_group_tests(no_sandbox, NULL, NULL);
	}
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_definitions),
	    cmocka_unit_test(test_glob),
	    cmocka_unit_test_setup(test_bash, reset_cfg),
	    cmocka_unit_test_setup(test_bash_truncation, reset_cfg),
	    cmocka_unit_test_setup(test_bash_timeout, reset_cfg),
	    cmocka_unit_test_setup(test_bash_binary_output, reset_cfg),
	    cmocka_unit_test_setup(test_read_file, reset_cfg),
	    cmocka_unit_test_setup(test_read_file_limit, reset_cfg),
	    cmocka_unit_test_setup(test_write_file, reset_cfg),
	    cmocka_unit_test_setup(test_edit_file, reset_cfg),
	    cmocka_unit_test_setup(test_confinement, reset_cfg),
	    cmocka_unit_test_setup(test_list_files, reset_cfg),
	    cmocka_unit_test_setup(test_run_verify, reset_cfg),
	    cmocka_unit_test_setup(test_finish, reset_cfg),
	    cmocka_unit_test_setup(test_bad_calls, reset_cfg),
	    cmocka_unit_test_setup(test_screenshot, reset_cfg),
	    cmocka_unit_test_setup(test_exec_sandbox, reset_cfg),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

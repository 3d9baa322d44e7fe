/* fuzz_eval.c - libFuzzer target for `warren eval`'s readers of user files
 * (src/cli/client/eval_suite.c) and its report over stored attempts
 * (eval_report.c), both of which read what a user may have written or
 * edited by hand.
 *
 * The input is one JSON document {"suite": …, "task": …, "run": …,
 * "attempts": …} (any of them missing or of any type). "suite" and
 * "task" are written as suite.json and t/task.json of a suite directory
 * and loaded; "run" and "attempts" go to the report, its comparison with
 * itself, and its printing (to /dev/null). Besides memory safety
 * (ASan/UBSan), a property that must hold for any input is checked; a
 * violation abort()s so the fuzzer keeps the input:
 *   - eval_suite_load either fails with an error message and leaves no
 *     tasks, or gives tasks whose names, repo, base and prompt are set
 *     and whose command lists are arrays of strings within their caps;
 *   - a report, when there is one, has resolved <= runs. */
#include "cli/client/eval.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char suite_dir[64];

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_eval: %s\n", what);
		abort();
	}
}

static void write_json(const char *path, json_t *v)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return;
	if (v)
		json_dumpf(v, f, JSON_ENCODE_ANY);
	fclose(f);
}

static void setup(void)
{
	if (suite_dir[0])
		return;
	snprintf(suite_dir, sizeof(suite_dir), "/tmp/fuzz-eval.%d", (int)getpid());
	mkdir(suite_dir, 0700);
	char t[128];
	snprintf(t, sizeof(t), "%s/t", suite_dir);
	mkdir(t, 0700);
	/* the report's printing goes nowhere */
	int fd = open("/dev/null", O_WRONLY);
	if (fd >= 0) {
		dup2(fd, STDOUT_FILENO);
		close(fd);
	}
}

static bool strings_within(const json_t *a)
{
	if (!json_is_array(a) || json_array_size(a) > EVAL_COMMANDS_MAX)
		return false;
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v) ||
		    strlen(json_string_value(v)) > EVAL_COMMAND_MAX)
			return false;
	}
	return true;
}

static void fuzz_suite(json_t *suite, json_t *task)
{
	char path[160];
	snprintf(path, sizeof(path), "%s/suite.json", suite_dir);
	write_json(path, suite);
	snprintf(path, sizeof(path), "%s/t/task.json", suite_dir);
	write_json(path, task);
	struct eval_suite s = {0};
	struct wr_error *err = NULL;
	int r = eval_suite_load(suite_dir, false, &s, &err);
	if (r < 0) {
		check(err && err->msg && *err->msg, "a failure without a message");
		check(s.n_tasks == 0, "tasks left after a failure");
	} else {
		for (size_t i = 0; i < s.n_tasks; i++) {
			const struct eval_task *t = &s.tasks[i];
			check(t->name && t->repo && t->base && t->prompt,
			      "a task without its name, repo, base or prompt");
			check(strings_within(t->fail_to_pass),
			      "fail_to_pass: not strings within the caps");
			check(!t->pass_to_pass || strings_within(t->pass_to_pass),
			      "pass_to_pass: not strings within the caps");
		}
	}
	eval_suite_clear(&s);
	wr_error_free(err);
}

static void fuzz_report(json_t *run, json_t *attempts)
{
	json_t *rep = eval_report_build(run, attempts);
	if (!rep)
		return;
	json_t *runs = json_object_get(rep, "runs");
	json_t *resolved = json_object_get(rep, "resolved");
	if (json_is_integer(runs) && json_is_integer(resolved))
		check(json_integer_value(resolved) <= json_integer_value(runs),
		      "more resolved than runs");
	json_t *cmp = eval_report_compare(rep, rep);
	eval_report_print(rep, NULL);
	if (cmp)
		eval_report_print(rep, rep);
	json_decref(cmp);
	json_decref(rep);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	setup();
	json_t *doc = json_loadb((const char *)data, size,
				 JSON_DISABLE_EOF_CHECK, NULL);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return 0;
	}
	fuzz_suite(json_object_get(doc, "suite"), json_object_get(doc, "task"));
	fuzz_report(json_object_get(doc, "run"), json_object_get(doc, "attempts"));
	json_decref(doc);
	return 0;
}

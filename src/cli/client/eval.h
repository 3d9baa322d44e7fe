/* eval.h - what `warren eval`'s files share (eval.c: the verb and `eval
 * run`; eval_suite.c: reading a suite; eval_report.c: `eval report`).
 *
 * A suite is a directory: suite.json ({"name", "description"}) and one
 * directory per task holding task.json ({"repo", "base", "prompt",
 * "fail_to_pass", "pass_to_pass", "budget"}), an optional tests/ (the
 * hidden test files) and an optional solution.patch (docs/eval.md). A
 * run is a directory of its own on this side: run.json and one JSON file
 * per attempt under attempts/, written as the run goes, so that a run
 * stopped anywhere is resumed (`eval run --resume ID`). eval_export.c:
 * `eval export`, a suite in Harbor's task layout. */
#ifndef WR_CLI_CLIENT_EVAL_H
#define WR_CLI_CLIENT_EVAL_H

#include "cli/client/client.h"

#define EVAL_TASKS_MAX 1000
#define EVAL_NAME_MAX 100	     /* a suite's or task's name */
#define EVAL_FILE_MAX (1u << 20)     /* suite.json, task.json */
#define EVAL_TESTS_MAX 256	     /* hidden files of one task */
#define EVAL_TESTS_BYTES (768u << 10) /* their contents together */
#define EVAL_PATCH_MAX (100u << 10)  /* solution.patch: a prompt's size */
#define EVAL_COMMANDS_MAX 64
#define EVAL_COMMAND_MAX 4096
#define EVAL_REPEAT_MAX 100

struct eval_task {
	char *name; /* its directory's name */
	char *dir;
	char *repo, *base, *prompt;
	json_t *fail_to_pass, *pass_to_pass; /* arrays of strings */
	json_t *budget;			     /* the session's limits, or NULL */
	json_t *tests;			     /* {"path": "content"}, or NULL */
	char *solution;			     /* solution.patch, or NULL */
};

struct eval_suite {
	char *dir; /* absolute */
	char *name, *description;
	struct eval_task *tasks; /* by name */
	size_t n_tasks;
};

/* Reads and checks the suite at dir (each error names the file and the
 * key); with need_solutions, every task must have solution.patch. 0, or
 * -EINVAL (bad input) / -ENOMEM with *err. */
int eval_suite_load(const char *dir, bool need_solutions,
		    struct eval_suite *out, struct wr_error **err);
void eval_suite_clear(struct eval_suite *s);

/* Where runs live: --dir, else $WARREN_EVAL_DIR, else
 * $WARREN_HOME/eval, else ./.warren-eval. Caller frees. */
char *eval_runs_dir(const char *opt);
/* dir/name, read as JSON (NULL with *err if it is not there or not
 * JSON). */
json_t *eval_read_json(const char *dir, const char *name,
		       struct wr_error **err);
/* A run's record and its attempts (an array, by task then repeat). */
int eval_run_load(const char *runs_dir, const char *id, json_t **run,
		  json_t **attempts, struct wr_error **err);

/* The report of a run (its attempts): {"id", "suite", "agent", "runs",
 * "resolved", "resolve_rate", "spread", "cost", ..., "tasks": [...]}. */
json_t *eval_report_build(const json_t *run, const json_t *attempts);
/* The review figures of a run whose total cost is cost, from the
 * server's tally of verdicts ({"reviewed", "accepted", "changes",
 * "rejected", "review_ms"}): those and "review_minutes",
 * "accepted_per_reviewer_minute" (accepted / minutes) and
 * "cost_per_accepted" (cost / accepted), null where a divisor is 0. */
json_t *eval_review_figures(double cost, const json_t *tally);
/* Adds "review" (eval_review_figures) to a report when tally has a
 * verdict; 0 or -ENOMEM. */
int eval_report_add_review(json_t *rep, const json_t *tally);
/* Prints a report (or two side by side) for people. */
int eval_report_print(const json_t *report, const json_t *other);
/* {"a": report, "b": report, "difference": {...}} */
json_t *eval_report_compare(const json_t *a, const json_t *b);

int client_eval_report(struct client *c, int argc, char **argv);

/* eval_export.c: `eval export SUITE --harbor OUT`. */
#define EVAL_EXPORT_REPOS_MAX 64
struct eval_export_opts {
	const char *out;	/* OUT: one directory per task in it */
	const char *base_image; /* the Dockerfiles' FROM (default debian:12) */
	const char *apt;	/* Debian packages the tasks' builds need */
	const char *repos[EVAL_EXPORT_REPOS_MAX]; /* "NAME=URL|PATH" */
	size_t n_repos;
};
int eval_export(struct client *c, const struct eval_export_opts *o,
		const char *suite_dir, struct wr_error **err);

#endif

/* cli.h - the `warren` command: one file per verb, each a thin layer over a
 * library call. Exit codes: 0 success, 2 usage error, 125 Warren itself failed
 * (set-up step, system error), otherwise the command's own status. */
#ifndef WR_CLI_H
#define WR_CLI_H

#include "sandbox/sandbox.h"
#include "snapshot/store.h"

#include <jansson.h>
#include <stdbool.h>

#define WR_EXIT_USAGE 2
#define WR_EXIT_FAILURE 125

struct cli_sandbox_opts {
	struct sandbox_config cfg;
	bool json;
	const char *snapshot; /* --snapshot ID */
	const char *data;     /* --data DIR */
	const char *ref;      /* --ref REF: drift sync after the restore */
	struct snap_manifest *manifest; /* the resolved snapshot */
	char *data_dir;	      /* resolved data directory */
	char **owned;	      /* strings cfg borrows from us (snapshot layers) */
	size_t n_owned;
};

/* The data directory of --data DIR (NULL: $WARREN_HOME, else ./.warren),
 * absolute and resolved where it exists. NULL only without memory. */
char *cli_data_dir(const char *data);
/* Resolves the data directory, and --snapshot into lower layers (below any --layer). Returns 0,
 * or an exit code after printing the error. */
int cli_resolve_snapshot(const char *verb, struct cli_sandbox_opts *o);
void cli_sandbox_opts_clear(struct cli_sandbox_opts *o);

/* Parses the sandbox options shared by `run` and `create`, stopping at "--"
 * or the first non-option. Returns the index of the first remaining
 * argument, or -1 after printing a usage error. */
int cli_parse_sandbox_opts(int argc, char **argv, struct cli_sandbox_opts *o,
			   bool allow_name);
void cli_error(const char *verb, struct wr_error *err);
void cli_usage_error(const char *verb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* output.c: prints j indented and releases it (NULL: nothing); prints
 * "warren snapshot VERB: MESSAGE", frees err and returns the exit code
 * (2 for bad input, else 125). */
void cli_print_json(json_t *j);
int cli_snapshot_fail(const char *verb, struct wr_error *err);

int cmd_sandbox(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_sandbox_run(int argc, char **argv);
int cmd_sandbox_create(int argc, char **argv);
int cmd_sandbox_exec(int argc, char **argv);
int cmd_sandbox_ls(int argc, char **argv);
int cmd_sandbox_rm(int argc, char **argv);

#endif

/* tools.h - the built-in agent's tools, run inside the session's sandbox.
 *
 * Every tool runs through the exec path (the caller supplies it: in the
 * server, `warren sandbox exec` into the session's sandbox). Tools:
 *   bash        {command, timeout_s?}: bash -c (sh -c without bash) in
 *               /workspace; stdout+stderr merged, exit status; output past
 *               the limit is cut in the middle with a marker
 *   read_file   {path, start_line?, end_line?}: text with line numbers cut
 *               to the range
 *   write_file  {path, content}: creates or replaces (parents created)
 *   edit_file   {path, old_text, new_text}: exact replace of one
 *               occurrence; fails clearly when old_text is absent or
 *               occurs more than once
 *   list_files  {pattern?}: files under /workspace matching a glob
 *               ('*' within a directory, '**' across; a pattern without
 *               '/' matches names at any depth; default everything, .git
 *               excluded), capped at list_max
 *   run_verify  {}: the spec's verify commands, their output and status
 *   screenshot  {url, name?}: headless Chromium inside the sandbox writes
 *               a PNG; the bytes come back as an artifact
 *   finish      {summary}: the agent is done
 * Writes (write_file, edit_file) are confined to /workspace: the path is
 * resolved inside the sandbox (symlinks included) and refused if it leaves
 * the workspace. Relative paths are relative to /workspace. Reads
 * (read_file, list_files, bash) are not confined: they may look anywhere
 * the sandbox's user can read, which is only the sandbox itself.
 * The model's content is always valid UTF-8 (other bytes are replaced). */
#ifndef WR_AGENT_TOOLS_H
#define WR_AGENT_TOOLS_H

#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TOOLS_WORKSPACE "/workspace"

struct tools_exec_result {
	int status; /* exit status, 128+N for signal N, 124 timed out */
	char *out;  /* stdout (NUL-terminated, may hold NULs before) */
	size_t out_len;
	char *err; /* stderr */
	size_t err_len;
	bool truncated; /* output past max_output was dropped */
};

/* How tools reach the sandbox. run: execute argv (argv[0] a path or a
 * name found in PATH inside the sandbox) with cwd /workspace, stdin_data
 * as its standard input (may be NULL), killing it after timeout_ms (0: no
 * limit); keep at most max_output bytes of each stream (the first ones;
 * the rest is read and dropped, and truncated set). Returns 0 (and *out)
 * when the command ran, whatever its status; -errno when it could not be
 * run. */
struct tools_exec {
	int (*run)(void *ctx, char *const argv[], const void *stdin_data,
		   size_t stdin_len, uint64_t timeout_ms, size_t max_output,
		   struct tools_exec_result *out, struct wr_error **err);
	void *ctx;
};

struct tools_config {
	size_t max_output;	  /* per tool result, bytes (default 16 KiB) */
	uint64_t bash_timeout_ms; /* default 120 s, max 30 min */
	char ***verify_argv;	  /* the spec's verify commands: n_verify
				   * NULL-terminated argv arrays */
	size_t n_verify;
	const char *artifact_dir; /* where screenshots are written (host) */
	size_t list_max;	  /* list_files: most paths (default 1000) */
};

/* The tool definitions for the model (chat-completions "tools" array). */
json_t *tools_definitions(void);

struct tools_call_result {
	char *content;	    /* the tool message's content for the model */
	bool finished;	    /* finish was called */
	char *summary;	    /* finish's summary */
	bool verify_passed; /* run_verify: all commands passed (false when
			     * there are none) */
	char *artifact;	    /* screenshot: the artifact file written */
	int status;	    /* the command's status where one ran, else 0 */
};

/* Runs one tool call (name, JSON arguments text as the model sent it).
 * A bad call (unknown tool, bad arguments, path outside the workspace,
 * edit text absent or ambiguous) is not an error: it returns 0 with the
 * explanation as content, so the model can correct itself. -errno only
 * when the sandbox could not be reached. */
int tools_call(const struct tools_config *cfg, const struct tools_exec *ex,
	       const char *name, const char *arguments,
	       struct tools_call_result *out, struct wr_error **err);
void tools_call_result_clear(struct tools_call_result *r);
void tools_exec_result_clear(struct tools_exec_result *r);

#endif

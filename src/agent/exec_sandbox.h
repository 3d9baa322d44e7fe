/* exec_sandbox.h - the tools' exec path into a named, long-lived sandbox.
 *
 * A struct tools_exec backend that runs each command as
 *   <warren_bin> sandbox exec NAME --cwd /workspace -- ARGV...
 * (the server never enters a sandbox itself: it runs the lean `warren`
 * for that, started by util/proc.h, dying with the server). stdin is a
 * pipe fed with the caller's data; stdout and stderr are captured up to
 * max_output bytes each, the rest read and dropped. On timeout the client
 * gets SIGTERM (it forwards it to the command's process group inside),
 * then SIGKILL after a short grace (its hang-up makes the sandbox's init
 * kill the group); the status is then 124.
 *
 * Usable from any thread; one command per call. */
#ifndef WR_AGENT_EXEC_SANDBOX_H
#define WR_AGENT_EXEC_SANDBOX_H

#include "agent/tools.h"

struct exec_sandbox {
	const char *warren_bin; /* path of the `warren` executable */
	const char *sandbox;	/* the sandbox's name */
};

/* Grace between SIGTERM and SIGKILL after a timeout. */
#define EXEC_SANDBOX_KILL_GRACE_MS 2000

/* struct tools_exec's run, ctx a struct exec_sandbox. Returns -errno
 * (err says why) when the command could not be run: the warren binary
 * missing, the sandbox gone or refusing the exec. */
int exec_sandbox_run(void *ctx, char *const argv[], const void *stdin_data,
		     size_t stdin_len, uint64_t timeout_ms, size_t max_output,
		     struct tools_exec_result *out, struct wr_error **err);

#endif

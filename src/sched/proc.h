/* proc.h - the control plane's child processes.
 *
 * The server never clones a sandbox itself (it is multi-threaded and links
 * heavy libraries); it runs the lean, static `warren` for that: `sandbox
 * create`, `sandbox exec`, `sandbox rm`, `snapshot refresh`. Children die
 * with the server (PR_SET_PDEATHSIG) so a killed server leaves no client
 * behind; the sandboxes themselves outlive it and are reconciled at the
 * next start. Also: the activity of a sandbox's process tree, for idle. */
#ifndef WR_SCHED_PROC_H
#define WR_SCHED_PROC_H

#include "util/error.h"
#include "util/proc.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The control plane's shorthands over util/proc.h and util/spawn.h: the
 * child stays in the server's process group and gets SIGKILL when the
 * thread that started it ends. struct proc, proc_wait and proc_close are
 * util/proc.h's. */

/* Starts argv with stdin from /dev/null; stdout and stderr piped, or
 * stderr to log_fd when log_fd >= 0. */
int proc_spawn(char *const argv[], int log_fd, struct proc *out,
	       struct wr_error **err);
/* proc_spawn with stdin from a pipe instead of /dev/null: *in_fd gets the
 * pipe's write end (O_CLOEXEC; close it to give the child end of file).
 * stdout and stderr are piped. Writing to in_fd after the child is gone
 * raises SIGPIPE: block it in the writing thread. */
int proc_spawn_stdin(char *const argv[], int *in_fd, struct proc *out,
		     struct wr_error **err);
/* Runs argv to completion, keeping at most max bytes of its stdout in
 * *out (NUL-terminated, the rest dropped); stderr goes to log_fd (or is
 * kept in *out_err, its last max bytes, when log_fd < 0 and out_err is
 * given). Returns the exit status. */
int proc_run(char *const argv[], size_t max, int log_fd, char **out,
	     char **out_err, struct wr_error **err);
/* proc_run with the child's environment set to envp (NULL: inherited). */
int proc_run_env(char *const argv[], char *const envp[], size_t max,
		 char **out, char **out_err, struct wr_error **err);
/* proc_run, publishing the child's pid in *track (under *mu) while it
 * runs so another thread may signal it. */
int proc_run_tracked(char *const argv[], size_t max, int log_fd, char **out,
		     char **out_err, pid_t *track, pthread_mutex_t *mu,
		     struct wr_error **err);

/* Processes in the tree under pid (pid excluded) and their CPU time in
 * clock ticks (pid included). */
struct proc_activity {
	unsigned processes;
	uint64_t cpu_ticks;
};
int proc_tree_activity(pid_t pid, struct proc_activity *out);

#endif

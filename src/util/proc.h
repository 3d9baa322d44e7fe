/* proc.h - starting a child process: the one way the host starts one.
 *
 * A child gets its standard descriptors as asked (/dev/null, a pipe whose
 * other end we keep, or a descriptor of ours), at most one more as its
 * descriptor 3, and nothing else: every other descriptor is closed in the
 * child whatever its O_CLOEXEC flag (the flag is the first wall, this the
 * second). It gets default signal dispositions and an empty signal mask
 * whatever the starting thread had, exactly the environment given, and as
 * asked a process group of its own and SIGKILL when the starting thread
 * ends (PR_SET_PDEATHSIG). We keep a pidfd, readable once it has exited.
 * A child that could not be executed (no such file, no permission) is the
 * start's error, not an exit status.
 *
 * util/spawn.h runs one child to completion on top of this; callers with a
 * loop of their own (a relay, a line reader) use this directly. */
#ifndef WR_UTIL_PROC_H
#define WR_UTIL_PROC_H

#include "util/error.h"

#include <stdbool.h>
#include <sys/types.h>

/* Where one of the child's descriptors comes from. */
enum proc_stdio_kind {
	PROC_NULL,   /* /dev/null; for descriptor 3: none */
	PROC_PIPE,   /* a pipe, our end in struct proc */
	PROC_FD,     /* a descriptor of ours (fd) */
	PROC_STDOUT, /* stderr only: the same as stdout */
	PROC_STDIO_MAX,
};

struct proc_stdio {
	enum proc_stdio_kind kind;
	int fd; /* with PROC_FD */
};

struct proc_spec {
	const char *const *argv; /* argv[0]: a path, or a name found on PATH */
	const char *const *envp; /* the child's whole environment; NULL: ours */
	struct proc_stdio in, out, err;
	struct proc_stdio fd3; /* PROC_FD: given as descriptor 3 */
	bool new_group;	       /* a process group of its own */
	bool die_with_parent;  /* SIGKILL when the starting thread ends */
	bool nonblock;	       /* our ends of the pipes O_NONBLOCK */
};

struct proc {
	pid_t pid;  /* 0 once reaped */
	int pidfd;  /* readable when the child exits */
	int in_fd;  /* our end of its stdin pipe, -1 if not piped */
	int out_fd; /* our end of its stdout pipe, -1 if not piped */
	int err_fd; /* our end of its stderr pipe, -1 if not piped */
	bool group; /* it leads a process group of its own */
};

/* Starts s->argv. Our ends of its pipes are O_CLOEXEC. Writing to in_fd
 * after the child is gone raises SIGPIPE: ignore or block it in the
 * writing thread. 0, or -errno with err saying which step failed. */
int proc_start(const struct proc_spec *s, struct proc *out,
	       struct wr_error **err);
/* Sends sig to the child, or to its whole group if it has one; -ESRCH
 * once it is reaped (its pid may name another process by then). */
int proc_kill(const struct proc *p, int sig);
/* Waits for the child: its exit status, 128+N for signal N, or -errno. */
int proc_wait(struct proc *p);
/* proc_wait for at most ms (negative: no limit); then SIGKILL (to the
 * group, if it has one) and the wait. */
int proc_reap(struct proc *p, int ms);
/* Closes our ends of the pipes and the pidfd (does not wait). */
void proc_close(struct proc *p);

#endif

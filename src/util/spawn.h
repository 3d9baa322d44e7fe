/* spawn.h - running one child process to completion, with its output
 * streamed or captured under a cap, and a deadline.
 *
 * The child is started by util/proc.h (nothing but its own descriptors,
 * default signal state) with exactly the environment given, stdin from a
 * descriptor (or /dev/null), stdout into a descriptor or a buffer (both
 * capped: a child that writes more is killed and the call fails with
 * -EFBIG, or with out_truncate the rest is read and dropped), the last
 * SPAWN_ERR_TAIL bytes of its stderr kept for the error message (or
 * stderr into a descriptor), and a process group of its own, killed
 * whole at the deadline. Its pid may be published for another thread to
 * signal. */
#ifndef WR_UTIL_SPAWN_H
#define WR_UTIL_SPAWN_H

#include "util/error.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SPAWN_ERR_TAIL 2048

struct spawn_call {
	const char *const *argv; /* argv[0]: a path, or a name found on PATH */
	const char *const *envp; /* the child's whole environment (NULL:
				    ours) */
	int in_fd;		 /* stdin; -1: /dev/null */
	int out_fd;		 /* stdout copied here; -1: see out */
	char **out;		 /* with out_fd -1: stdout captured, NUL-ended
				    (NULL: stdout to /dev/null) */
	size_t *out_len;	 /* bytes in *out or written to out_fd */
	uint64_t out_max;	 /* cap of stdout (0: 1 MiB) */
	bool out_truncate;	 /* past out_max: the rest dropped, not -EFBIG */
	int err_fd;		 /* above 0: stderr into it, no tail kept */
	char **err_out;		 /* without err_fd: the last err_max bytes of
				    stderr too, NUL-ended */
	size_t err_max;		 /* 0: 1 MiB */
	uint64_t timeout_ms;	 /* 0: none */
	bool keep_group;	 /* in our process group, not one of its own
				    (the deadline then kills the child only) */
	bool die_with_parent;	 /* SIGKILL when the calling thread ends */
	int fd3;		 /* above 2: given to the child as its fd 3
				    (e.g. a lock it keeps held until it
				    exits); 0: none */
	pid_t *track;		 /* the pid while it runs (0 after), under
				    *track_mu, for another thread to signal */
	pthread_mutex_t *track_mu;
	char err_tail[SPAWN_ERR_TAIL]; /* filled: the end of stderr */
};

/* Runs c->argv. Returns the exit status (128+N for signal N), or -errno:
 * -EFBIG when stdout passed out_max, -ETIMEDOUT at the deadline (the
 * group is killed in both cases), or a spawn failure (err says which). */
int spawn_run(struct spawn_call *c, struct wr_error **err);

#endif

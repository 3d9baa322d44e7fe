/* spawn.h - running one child process to completion, with its output
 * streamed or captured under a cap, and a deadline.
 *
 * The child gets exactly the environment given, stdin from a descriptor
 * (or /dev/null), stdout into a descriptor or a buffer (both capped: a
 * child that writes more is killed and the call fails with -EFBIG), the
 * last SPAWN_ERR_TAIL bytes of its stderr kept for the error message, and
 * a process group of its own, killed whole at the deadline. No other
 * descriptor of ours reaches it (ours are O_CLOEXEC). */
#ifndef WR_UTIL_SPAWN_H
#define WR_UTIL_SPAWN_H

#include "util/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SPAWN_ERR_TAIL 2048

struct spawn_call {
	const char *const *argv;  /* argv[0]: a path, or a name found on PATH */
	const char *const *envp;  /* the child's whole environment */
	int in_fd;		  /* stdin; -1: /dev/null */
	int out_fd;		  /* stdout copied here; -1: see out */
	char **out;		  /* with out_fd -1: stdout captured, NUL-ended
				     (NULL: stdout to /dev/null) */
	size_t *out_len;	  /* bytes in *out or written to out_fd */
	uint64_t out_max;	  /* cap of stdout (0: 1 MiB) */
	uint64_t timeout_ms;	  /* 0: none */
	char err_tail[SPAWN_ERR_TAIL]; /* filled: the end of stderr */
};

/* Runs c->argv. Returns the exit status (128+N for signal N), or -errno:
 * -EFBIG when stdout passed out_max, -ETIMEDOUT at the deadline (the
 * group is killed in both cases), or a spawn failure (err says which). */
int spawn_run(struct spawn_call *c, struct wr_error **err);

#endif

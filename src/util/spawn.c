/* spawn.c - one child process to completion (spawn.h). */
#include "util/spawn.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SPAWN_DEFAULT_MAX (1u << 20)

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Keeps the last SPAWN_ERR_TAIL - 1 bytes of what stderr said. */
static void tail_add(char *tail, size_t *len, const char *buf, size_t n)
{
	const size_t cap = SPAWN_ERR_TAIL - 1;
	if (n >= cap) {
		memcpy(tail, buf + n - cap, cap);
		*len = cap;
		return;
	}
	if (*len + n > cap) {
		size_t drop = *len + n - cap;
		memmove(tail, tail + drop, *len - drop);
		*len -= drop;
	}
	memcpy(tail + *len, buf, n);
	*len += n;
}

static int write_all(int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads stdout and stderr until both close, the cap or the deadline. */
static int drain(struct spawn_call *c, int op, int ep, char *buf,
		 uint64_t max, size_t *used, size_t *tail_len)
{
	uint64_t deadline = c->timeout_ms ? mono_ms() + c->timeout_ms : 0;
	bool out_open = op >= 0, err_open = true;
	while (out_open || err_open) {
		int wait = -1;
		if (deadline) {
			uint64_t now = mono_ms();
			if (now >= deadline)
				return -ETIMEDOUT;
			wait = (int)(deadline - now);
		}
		struct pollfd pfd[2] = {{out_open ? op : -1, POLLIN, 0},
					{err_open ? ep : -1, POLLIN, 0}};
		int pr = poll(pfd, 2, wait);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr < 0)
			return -errno;
		char chunk[65536];
		if (pfd[0].revents) {
			ssize_t n = read(op, chunk, sizeof(chunk));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				out_open = false;
			} else {
				if (*used + (uint64_t)n > max)
					return -EFBIG;
				if (buf) {
					memcpy(buf + *used, chunk, (size_t)n);
				} else if (c->out_fd >= 0) {
					int r = write_all(c->out_fd, chunk,
							  (size_t)n);
					if (r < 0)
						return r;
				}
				*used += (size_t)n;
			}
		}
		if (pfd[1].revents) {
			ssize_t n = read(ep, chunk, sizeof(chunk));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				err_open = false;
			else
				tail_add(c->err_tail, tail_len, chunk,
					 (size_t)n);
		}
	}
	return 0;
}

int spawn_run(struct spawn_call *c, struct wr_error **err)
{
	c->err_tail[0] = '\0';
	bool want_out = c->out_fd >= 0 || c->out;
	uint64_t max = c->out_max ? c->out_max : SPAWN_DEFAULT_MAX;
	int op[2] = {-1, -1}, ep[2] = {-1, -1};
	if (pipe2(ep, O_CLOEXEC) < 0)
		return wr_error_set(err, errno, "%s: pipe", c->argv[0]);
	if (want_out && pipe2(op, O_CLOEXEC) < 0) {
		int r = wr_error_set(err, errno, "%s: pipe", c->argv[0]);
		close(ep[0]);
		close(ep[1]);
		return r;
	}
	_cleanup_free_ char *buf = NULL;
	if (c->out_fd < 0 && c->out) {
		buf = wr_malloc(max + 1);
		if (!buf) {
			close(ep[0]);
			close(ep[1]);
			close(op[0]);
			close(op[1]);
			return wr_error_set(err, ENOMEM, "%s: output",
					    c->argv[0]);
		}
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	if (c->in_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, c->in_fd, 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY,
						 0);
	if (want_out)
		posix_spawn_file_actions_adddup2(&fa, op[1], 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY,
						 0);
	posix_spawn_file_actions_adddup2(&fa, ep[1], 2);
	/* a group of its own: the deadline kills all of it; default signal
	 * dispositions and an empty mask, whatever the calling thread had */
	posix_spawnattr_t at;
	posix_spawnattr_init(&at);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP |
					  POSIX_SPAWN_SETSIGMASK |
					  POSIX_SPAWN_SETSIGDEF);
	pid_t pid;
	int sr = posix_spawnp(&pid, c->argv[0], &fa, &at,
			      (char *const *)c->argv, (char *const *)c->envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(ep[1]);
	if (want_out)
		close(op[1]);
	if (sr != 0) {
		close(ep[0]);
		if (want_out)
			close(op[0]);
		return wr_error_set(err, sr, "run %s", c->argv[0]);
	}
	size_t used = 0, tail_len = 0;
	int dr = drain(c, want_out ? op[0] : -1, ep[0], buf, max, &used,
		       &tail_len);
	if (dr < 0)
		kill(-pid, SIGKILL);
	close(ep[0]);
	if (want_out)
		close(op[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	c->err_tail[tail_len] = '\0';
	while (tail_len && (c->err_tail[tail_len - 1] == '\n' ||
			    c->err_tail[tail_len - 1] == ' '))
		c->err_tail[--tail_len] = '\0';
	if (dr == -EFBIG)
		return wr_error_set(err, EFBIG,
				    "%s: output larger than %llu bytes",
				    c->argv[0], (unsigned long long)max);
	if (dr == -ETIMEDOUT)
		return wr_error_set(err, ETIMEDOUT,
				    "%s: no end after %llu ms", c->argv[0],
				    (unsigned long long)c->timeout_ms);
	if (dr < 0)
		return wr_error_set(err, -dr, "%s: output", c->argv[0]);
	if (c->out_len)
		*c->out_len = used;
	if (buf) {
		buf[used] = '\0';
		*c->out = TAKE_PTR(buf);
	}
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

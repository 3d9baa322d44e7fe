/* spawn.c - one child process to completion (spawn.h). */
#include "util/spawn.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SPAWN_DEFAULT_MAX (1u << 20)

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Keeps the last cap bytes of what a stream said in tail. */
static void tail_add(char *tail, size_t cap, size_t *len, const char *buf,
		     size_t n)
{
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

/* What the drain keeps of stderr: the short tail, and the caller's. */
struct err_keep {
	size_t tail_len;
	char *buf; /* err_out's, NULL if not asked */
	size_t len, max;
};

/* Reads stdout and stderr until both close, the cap or the deadline. */
static int drain(struct spawn_call *c, int op, int ep, char *buf,
		 uint64_t max, size_t *used, struct err_keep *ek)
{
	uint64_t deadline = c->timeout_ms ? mono_ms() + c->timeout_ms : 0;
	bool out_open = op >= 0, err_open = ep >= 0;
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
				size_t take = (size_t)n;
				if (*used + take > max) {
					if (!c->out_truncate)
						return -EFBIG;
					take = (size_t)(max - *used);
				}
				if (buf) {
					memcpy(buf + *used, chunk, take);
				} else if (c->out_fd >= 0) {
					int r = write_all(c->out_fd, chunk,
							  take);
					if (r < 0)
						return r;
				}
				*used += take;
			}
		}
		if (pfd[1].revents) {
			ssize_t n = read(ep, chunk, sizeof(chunk));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				err_open = false;
			} else {
				tail_add(c->err_tail, SPAWN_ERR_TAIL - 1,
					 &ek->tail_len, chunk, (size_t)n);
				if (ek->buf)
					tail_add(ek->buf, ek->max, &ek->len,
						 chunk, (size_t)n);
			}
		}
	}
	return 0;
}

static void track(struct spawn_call *c, pid_t pid)
{
	if (!c->track)
		return;
	pthread_mutex_lock(c->track_mu);
	*c->track = pid;
	pthread_mutex_unlock(c->track_mu);
}

int spawn_run(struct spawn_call *c, struct wr_error **err)
{
	c->err_tail[0] = '\0';
	bool capture = c->out_fd < 0 && c->out;
	bool err_to_fd = c->err_fd > 0;
	uint64_t max = c->out_max ? c->out_max : SPAWN_DEFAULT_MAX;
	struct err_keep ek = {
	    .max = c->err_max ? c->err_max : SPAWN_DEFAULT_MAX};
	_cleanup_free_ char *buf = capture ? wr_malloc(max + 1) : NULL;
	_cleanup_free_ char *ebuf =
	    c->err_out && !err_to_fd ? wr_malloc(ek.max + 1) : NULL;
	if ((capture && !buf) || (c->err_out && !err_to_fd && !ebuf))
		return wr_error_set(err, ENOMEM, "%s: output", c->argv[0]);
	ek.buf = ebuf;
	struct proc_spec s = {
	    .argv = c->argv,
	    .envp = c->envp,
	    .in = c->in_fd >= 0 ? (struct proc_stdio){PROC_FD, c->in_fd}
				: (struct proc_stdio){PROC_NULL, -1},
	    .out = {c->out_fd >= 0 || capture ? PROC_PIPE : PROC_NULL, -1},
	    .err = err_to_fd ? (struct proc_stdio){PROC_FD, c->err_fd}
			     : (struct proc_stdio){PROC_PIPE, -1},
	    /* a group of its own: the deadline kills all of it */
	    .new_group = !c->keep_group,
	    .die_with_parent = c->die_with_parent,
	};
	if (c->fd3 > 2)
		s.fd3 = (struct proc_stdio){PROC_FD, c->fd3};
	struct proc p;
	int r = proc_start(&s, &p, err);
	if (r < 0)
		return r;
	track(c, p.pid);
	size_t used = 0;
	int dr = drain(c, p.out_fd, p.err_fd, buf, max, &used, &ek);
	if (dr < 0)
		proc_kill(&p, SIGKILL);
	/* ours closed before the wait: a child still writing gets EPIPE
	 * rather than a full pipe nobody reads */
	proc_close(&p);
	/* before the reap: the pid must not be signalled once it may be
	 * reused */
	track(c, 0);
	int status = proc_wait(&p);
	size_t tail_len = ek.tail_len;
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
	if (status < 0)
		return wr_error_set(err, -status, "%s: wait", c->argv[0]);
	if (c->out_len)
		*c->out_len = used;
	if (buf) {
		buf[used] = '\0';
		*c->out = TAKE_PTR(buf);
	}
	if (ebuf) {
		ebuf[ek.len] = '\0';
		*c->err_out = TAKE_PTR(ebuf);
	}
	return status;
}

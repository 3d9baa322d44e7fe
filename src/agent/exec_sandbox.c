/* exec_sandbox.c - the tools' exec path: `warren sandbox exec` as a child
 * (see exec_sandbox.h). */
#include "agent/exec_sandbox.h"

#include "sandbox/request.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/proc.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* After the client exits, what is left in the pipes is read for at most
 * this long: a background job started by the command may hold them open
 * and keep writing. */
#define FINAL_DRAIN_MS 100

/* Reads per wake-up of one stream, so that a chatty stream cannot starve
 * the other, the stdin writer or the timeout. */
#define READS_PER_WAKEUP 16

/* The client's own messages start with this (cli_error); the command's
 * stderr never does unless it imitates it. */
#define CLIENT_PREFIX "warren sandbox exec: "

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* One captured stream: the first max bytes, the rest counted as dropped. */
struct capture {
	int fd; /* -1 once at end of file */
	char *buf;
	size_t len, cap, max;
	bool truncated;
};

static int capture_add(struct capture *c, const char *data, size_t n)
{
	size_t room = c->max - c->len;
	if (n > room) {
		c->truncated = true;
		n = room;
	}
	if (n == 0)
		return 0;
	if (c->len + n > c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 4096;
		if (cap < c->len + n)
			cap = c->len + n;
		if (cap > c->max)
			cap = c->max;
		char *b = wr_realloc(c->buf, cap + 1);
		if (!b)
			return -ENOMEM;
		c->buf = b;
		c->cap = cap;
	}
	memcpy(c->buf + c->len, data, n);
	c->len += n;
	return 0;
}

/* Reads what the stream has now. Returns 0 at end of file (fd closed),
 * 1 when more may come, -errno. */
static int capture_read(struct capture *c)
{
	char chunk[16384];
	for (int i = 0; i < READS_PER_WAKEUP; i++) {
		ssize_t n = read(c->fd, chunk, sizeof(chunk));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 1;
			return -errno;
		}
		if (n == 0) {
			close(c->fd);
			c->fd = -1;
			return 0;
		}
		int r = capture_add(c, chunk, (size_t)n);
		if (r < 0)
			return r;
	}
	return 1;
}

/* Hands the captured bytes over as a NUL-terminated string. */
static int capture_take(struct capture *c, char **out, size_t *out_len)
{
	if (!c->buf) {
		c->buf = wr_malloc(1);
		if (!c->buf)
			return -ENOMEM;
	}
	c->buf[c->len] = '\0';
	*out = TAKE_PTR(c->buf);
	*out_len = c->len;
	return 0;
}

/* The state of one run: the child, its three pipes, the clock. */
struct run {
	struct proc p;
	int in_fd;
	const char *in_data;
	size_t in_len, in_off;
	bool epipe; /* a write met a closed pipe (SIGPIPE is pending) */
	struct capture out, err;
	uint64_t deadline, kill_at; /* 0: none */
	bool term_sent, kill_sent, timed_out, exited;
};

/* Feeds stdin until the pipe is full; closes it when all is written or
 * the reader is gone. */
static void feed_stdin(struct run *r)
{
	while (r->in_off < r->in_len) {
		size_t n = r->in_len - r->in_off;
		if (n > 65536)
			n = 65536;
		ssize_t w = write(r->in_fd, r->in_data + r->in_off, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			if (errno == EPIPE)
				r->epipe = true;
			break; /* the command does not want the rest */
		}
		r->in_off += (size_t)w;
	}
	close(r->in_fd);
	r->in_fd = -1;
}

/* The timeout: SIGTERM to the client (forwarded inside), SIGKILL after
 * the grace. The child is not reaped yet, so its pid cannot be reused. */
static void check_timeout(struct run *r, uint64_t now)
{
	if (r->deadline && !r->term_sent && now >= r->deadline) {
		proc_kill(&r->p, SIGTERM);
		r->term_sent = r->timed_out = true;
		r->kill_at = now + EXEC_SANDBOX_KILL_GRACE_MS;
	}
	if (r->term_sent && !r->kill_sent && now >= r->kill_at) {
		proc_kill(&r->p, SIGKILL);
		r->kill_sent = true;
	}
}

static int poll_timeout(const struct run *r, uint64_t now)
{
	uint64_t at = 0;
	if (r->deadline && !r->term_sent)
		at = r->deadline;
	else if (r->term_sent && !r->kill_sent)
		at = r->kill_at;
	if (!at)
		return -1;
	return at > now ? (int)(at - now < 60000 ? at - now : 60000) : 0;
}

/* Runs the loop until the client exits. Returns 0 or -errno. */
static int pump(struct run *r)
{
	while (!r->exited) {
		struct pollfd pf[4] = {
		    {.fd = r->out.fd, .events = POLLIN},
		    {.fd = r->err.fd, .events = POLLIN},
		    {.fd = r->in_fd, .events = POLLOUT},
		    {.fd = r->p.pidfd, .events = POLLIN},
		};
		int n = poll(pf, 4, poll_timeout(r, now_ms()));
		if (n < 0 && errno != EINTR)
			return -errno;
		int ret;
		if (n > 0 && pf[0].revents && (ret = capture_read(&r->out)) < 0)
			return ret;
		if (n > 0 && pf[1].revents && (ret = capture_read(&r->err)) < 0)
			return ret;
		if (n > 0 && pf[2].revents)
			feed_stdin(r);
		if (n > 0 && pf[3].revents)
			r->exited = true;
		check_timeout(r, now_ms());
	}
	/* What the command wrote is in the pipes by now; take it, but do
	 * not wait for the end of file a background job may hold back. */
	uint64_t stop = now_ms() + FINAL_DRAIN_MS;
	while ((r->out.fd >= 0 || r->err.fd >= 0) && now_ms() < stop) {
		int ro = r->out.fd >= 0 ? capture_read(&r->out) : 0;
		int re = r->err.fd >= 0 ? capture_read(&r->err) : 0;
		if (ro < 0)
			return ro;
		if (re < 0)
			return re;
		/* both would block: the rest belongs to a background job */
		if ((r->out.fd < 0 || ro == 1) && (r->err.fd < 0 || re == 1)) {
			struct pollfd pf[2] = {
			    {.fd = r->out.fd, .events = POLLIN},
			    {.fd = r->err.fd, .events = POLLIN},
			};
			if (poll(pf, 2, 0) <= 0)
				break;
		}
	}
	return 0;
}

/* The client's own failure (no such sandbox, the exec refused) as an
 * error; 0 when the command ran. */
static int client_failure(const struct exec_sandbox *xs, int status,
			  const char *stderr_text, struct wr_error **err)
{
	if ((status != 2 && status != 125) || !stderr_text ||
	    strncmp(stderr_text, CLIENT_PREFIX, strlen(CLIENT_PREFIX)) != 0)
		return 0;
	const char *msg = stderr_text + strlen(CLIENT_PREFIX);
	size_t len = strcspn(msg, "\n");
	return wr_error_set(err, status == 2 ? ENOENT : EIO,
			    "exec in sandbox %s: %.*s", xs->sandbox, (int)len,
			    msg);
}

int exec_sandbox_run(void *ctx, char *const argv[], const void *stdin_data,
		     size_t stdin_len, uint64_t timeout_ms, size_t max_output,
		     struct tools_exec_result *out, struct wr_error **err)
{
	const struct exec_sandbox *xs = ctx;
	size_t argc = 0;
	while (argv[argc])
		argc++;
	if (argc == 0)
		return wr_error_set(
		    err, EINVAL, "exec in sandbox %s: no command", xs->sandbox);
	struct sandbox_exec_cmd ex = {
	    .name = xs->sandbox, .cwd = TOOLS_WORKSPACE, .argv = argv};
	struct sandbox_cmdline cl;
	int built = sandbox_cmdline_exec(xs->warren_bin, &ex, &cl);
	if (built < 0)
		return wr_error_set(err, -built, "exec in sandbox %s",
				    xs->sandbox);

	struct run r = {
	    .in_fd = -1,
	    .in_data = stdin_data,
	    .in_len = stdin_data ? stdin_len : 0,
	    .out = {.fd = -1, .max = max_output},
	    .err = {.fd = -1, .max = max_output},
	};
	/* A write to a pipe whose reader is gone raises SIGPIPE, which would
	 * kill the server: block it in this thread for the run and consume
	 * the one our write raised (if it was not pending already). */
	sigset_t pipe_set, old_mask, pending;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
	sigpending(&pending);
	bool pipe_was_pending = sigismember(&pending, SIGPIPE) == 1;

	/* the client dies with the server (its hang-up makes the sandbox's
	 * init end the command) */
	struct proc_spec spec = {
	    .argv = (const char *const *)cl.argv,
	    .in = {PROC_PIPE, -1},
	    .out = {PROC_PIPE, -1},
	    .err = {PROC_PIPE, -1},
	    .die_with_parent = true,
	    .nonblock = true,
	};
	int ret = proc_start(&spec, &r.p, err);
	sandbox_cmdline_clear(&cl);
	if (ret < 0) {
		wr_error_wrap(err, "exec in sandbox %s", xs->sandbox);
		goto restore;
	}
	r.in_fd = TAKE_FD(r.p.in_fd);
	r.out.fd = TAKE_FD(r.p.out_fd);
	r.err.fd = TAKE_FD(r.p.err_fd);
	if (timeout_ms)
		r.deadline = now_ms() + timeout_ms;
	feed_stdin(&r);

	ret = pump(&r);
	if (ret < 0) {
		/* not the command's fault: stop it before reporting */
		proc_kill(&r.p, SIGKILL);
		wr_error_set(err, -ret, "exec in sandbox %s: %s", xs->sandbox,
			     argv[0]);
	}
	int status = proc_wait(&r.p);
	proc_close(&r.p);
	if (r.in_fd >= 0)
		close(r.in_fd);
	if (r.out.fd >= 0)
		close(r.out.fd);
	if (r.err.fd >= 0)
		close(r.err.fd);
	if (ret < 0)
		goto free_captures;
	if (status < 0) {
		ret = wr_error_set(err, -status, "exec in sandbox %s: wait",
				   xs->sandbox);
		goto free_captures;
	}
	if (!r.timed_out) {
		if (r.err.buf)
			r.err.buf[r.err.len] = '\0';
		ret = client_failure(xs, status, r.err.buf, err);
		if (ret < 0)
			goto free_captures;
	}
	struct tools_exec_result res = {
	    .status = r.timed_out ? 124 : status,
	    .truncated = r.out.truncated || r.err.truncated,
	};
	if (capture_take(&r.out, &res.out, &res.out_len) < 0 ||
	    capture_take(&r.err, &res.err, &res.err_len) < 0) {
		tools_exec_result_clear(&res);
		ret = wr_error_set(err, ENOMEM, "exec in sandbox %s",
				   xs->sandbox);
		goto free_captures;
	}
	*out = res;
free_captures:
	free(r.out.buf);
	free(r.err.buf);
restore:
	if (r.epipe && !pipe_was_pending) {
		struct timespec zero = {0, 0};
		sigtimedwait(&pipe_set, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
	return ret;
}

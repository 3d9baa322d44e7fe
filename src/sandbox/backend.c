/* backend.c - the backend table, and the public handle calls that go
 * through it.
 *
 * A backend is one row of `backends` below (and its name in
 * backend_name.c): how it creates a sandbox from a checked configuration,
 * how it tears one down, and what it must undo itself when a record is
 * removed; waiting for a one-off sandbox and destroying a handle are the
 * same for both (here). Everything else is shared
 * by construction: the configuration and its checks (config.c), the
 * runtime records (runtime.c), the cgroup with the limits (cgroup.c),
 * removal and reaping by record (manage.c), warren-init and the exec
 * protocol (exec_client.c, proto.c). Adding a backend is adding a row. */
#include "sandbox/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct sandbox_backend_ops *const backends[SANDBOX_BACKEND_MAX] =
    {
	[SANDBOX_BACKEND_NATIVE] = &native_backend_ops,
	[SANDBOX_BACKEND_GVISOR] = &gvisor_backend_ops,
};

const struct sandbox_backend_ops *sandbox_backend_ops(enum sandbox_backend b)
{
	return (unsigned)b < SANDBOX_BACKEND_MAX && backends[b]
		   ? backends[b]
		   : backends[SANDBOX_BACKEND_NATIVE];
}

int sandbox_backend_check(enum sandbox_backend b, struct wr_error **err)
{
	const struct sandbox_backend_ops *ops = sandbox_backend_ops(b);
	return ops->check ? ops->check(err) : 0;
}

int sandbox_create(const struct sandbox_config *cfg, enum sandbox_mode mode,
		   char *const argv[], struct sandbox **out,
		   struct wr_error **err)
{
	if ((unsigned)cfg->backend >= SANDBOX_BACKEND_MAX)
		return wr_error_input(err, EINVAL, "unknown sandbox backend");
	return sandbox_backend_ops(cfg->backend)
	    ->create(cfg, mode, argv, out, err);
}

static int exit_code_of(const siginfo_t *info)
{
	if (info->si_code == CLD_EXITED)
		return info->si_status;
	return 128 + info->si_status;
}

/* Copies what is there from a relay pipe to its destination; false at
 * its end. */
static bool relay_some(int from, int to)
{
	char buf[16384];
	ssize_t n = read(from, buf, sizeof(buf));
	if (n < 0 && errno == EINTR)
		return true;
	if (n <= 0)
		return false;
	for (ssize_t off = 0; off < n;) {
		ssize_t w = write(to, buf + off, (size_t)(n - off));
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return true; /* the reader went away: keep draining */
		off += w;
	}
	return true;
}

/* RUN mode, either backend: waits for the sandbox's process, forwarding
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT to it and copying the relay pipes
 * (gvisor: regular files as stdout/stderr); at the timeout, exit 124; then
 * the backend's teardown. The signals stay blocked until the teardown is
 * done, so that one cannot interrupt it. */
int sandbox_run_wait(struct sandbox *sb, struct sandbox_result *res,
		     struct wr_error **err)
{
	memset(res, 0, sizeof(*res));
	res->timings = sb->timings;
	sigset_t set, old;
	sigemptyset(&set);
	int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
	for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
		sigaddset(&set, forwarded[i]);
	sigprocmask(SIG_BLOCK, &set, &old);
	_cleanup_close_ int sfd =
	    signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	uint64_t deadline =
	    sb->timeout_ms ? sb->started_us + sb->timeout_ms * 1000 : 0;
	int ret = 0;
	while (sb->pidfd >= 0) {
		int wait_ms = -1;
		if (deadline) {
			uint64_t now = wr_mono_us();
			wait_ms = now >= deadline
				      ? 0
				      : (int)((deadline - now + 999) / 1000);
		}
		struct pollfd pfd[4] = {{sb->pidfd, POLLIN, 0},
					{sfd, POLLIN, 0},
					{sb->relay_from[0], POLLIN, 0},
					{sb->relay_from[1], POLLIN, 0}};
		int n = poll(pfd, 4, wait_ms);
		if (n < 0 && errno != EINTR) {
			ret = wr_error_set(err, errno, "wait for sandbox");
			break;
		}
		if (n == 0 && deadline) {
			res->timed_out = true;
			res->exit_code = 124;
			break;
		}
		for (int i = 0; i < 2; i++) {
			if ((pfd[2 + i].revents & (POLLIN | POLLHUP)) &&
			    !relay_some(sb->relay_from[i], sb->relay_to[i])) {
				close(sb->relay_from[i]);
				sb->relay_from[i] = -1;
			}
		}
		if (pfd[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == sizeof(si))
				syscall(SYS_pidfd_send_signal, sb->pidfd,
					(int)si.ssi_signo, NULL, 0);
		}
		if (pfd[0].revents & POLLIN) {
			siginfo_t info = {0};
			if (waitid(P_PIDFD, (id_t)sb->pidfd, &info, WEXITED) ==
			    0) {
				res->exit_code = exit_code_of(&info);
				close(sb->pidfd);
				sb->pidfd = -1;
			}
		}
	}
	res->run_us = wr_mono_us() - sb->started_us;
	uint64_t t = wr_mono_us();
	int r = sandbox_backend_ops(sb->backend)->teardown(sb, &res->oom_killed);
	/* every writer is gone with the sandbox: the pipes to their end */
	for (int i = 0; i < 2; i++) {
		while (sb->relay_from[i] >= 0 &&
		       relay_some(sb->relay_from[i], sb->relay_to[i]))
			;
	}
	res->destroy_us = wr_mono_us() - t;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (r < 0 && ret == 0)
		ret = wr_error_set(err, -r, "destroy sandbox %s", sb->name);
	sandbox_free(sb);
	return ret;
}

int sandbox_destroy(struct sandbox *sb, struct wr_error **err)
{
	int r = sandbox_backend_ops(sb->backend)->teardown(sb, NULL);
	if (r < 0)
		r = wr_error_set(err, -r, "destroy sandbox %s", sb->name);
	sandbox_free(sb);
	return r;
}

void sandbox_detach(struct sandbox *sb)
{
	sandbox_free(sb);
}

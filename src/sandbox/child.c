/* child.c - the set-up child: from clone() to exec of warren-init.
 *
 * This runs in the process cloned into the new namespaces. It may die on
 * error, but first reports the failing step and errno to the parent over the
 * sync socket, so the user sees which step failed. The socket is
 * close-on-exec: once init runs, the parent reads EOF, which means success. */
#include "sandbox/internal.h"

#include "util/cleanup.h"
#include "util/fdpass.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static __attribute__((noreturn)) void child_fail(struct child_plan *plan,
						 struct child_report *report)
{
	if (report->err == 0)
		report->err = EINVAL;
	if (send(plan->sync_fd, report, sizeof(*report), MSG_NOSIGNAL) < 0) {
		/* the parent is gone; nothing to tell */
	}
	_exit(125);
}

#define CHILD_CHECK(cond, ...)                                     \
	do {                                                       \
		if (!(cond)) {                                     \
			report.err = errno;                        \
			snprintf(report.step, sizeof(report.step), \
				 __VA_ARGS__);                     \
			child_fail(plan, &report);                 \
		}                                                  \
	} while (0)

/* A new network namespace starts with lo down: services bound to 127.0.0.1
 * would fail in confusing ways. */
static int loopback_up(void)
{
	_cleanup_close_ int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		return -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		return -errno;
	return 0;
}

static void wait_for_parent(struct child_plan *plan)
{
	struct child_report go;
	ssize_t n;
	do {
		n = recv(plan->sync_fd, &go, sizeof(go), 0);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(go) || go.err != 0)
		_exit(125);
}

/* The second release: a message with up to max descriptors attached. */
static size_t wait_for_parent_fds(struct child_plan *plan, int *fds, size_t max)
{
	struct child_report go;
	size_t n_fds;
	ssize_t n =
	    wr_recv_fds(plan->sync_fd, &go, sizeof(go), fds, max, &n_fds);
	if (n != (ssize_t)sizeof(go) || go.err != 0)
		_exit(125);
	return n_fds;
}

void child_main(struct child_plan *plan)
{
	struct child_report report = {0};
	const struct sandbox_config *cfg = plan->cfg;

	/* No descriptor of the caller's may leak inside: everything from 3 up
	 * closes on exec except the exec socket init needs. */
	syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
	if (plan->listen_fd >= 0)
		fcntl(plan->listen_fd, F_SETFD, 0);

	/* Wait until the parent has written our uid/gid maps: before that we
	 * are nobody and cannot create a file. */
	wait_for_parent(plan);

	/* Become root of the user namespace (host uid = slot base). */
	CHILD_CHECK(setresgid(0, 0, 0) == 0 && setgroups(0, NULL) == 0 &&
			setresuid(0, 0, 0) == 0,
		    "switch to root of the user namespace");
	/* A one-off sandbox dies with the warren that runs it. Set after the
	 * uid change, which clears it; if the parent is already gone, the
	 * second release below reads EOF and we exit. */
	if (plan->mode == SANDBOX_MODE_RUN)
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* No controlling terminal: nothing inside can reach the caller's
	 * terminal through it (seccomp also blocks TIOCSTI). */
	setsid();

	if (rootfs_setup(plan, &report) < 0)
		child_fail(plan, &report);
	const char *hostname = cfg->hostname ? cfg->hostname : "warren";
	CHILD_CHECK(sethostname(hostname, strlen(hostname)) == 0,
		    "set hostname");
	int r = loopback_up();
	if (r < 0) {
		errno = -r;
		CHILD_CHECK(0, "bring up loopback");
	}
	const char *cwd = cfg->cwd ? cfg->cwd : SANDBOX_DEFAULT_CWD;
	CHILD_CHECK(chdir(cwd) == 0, "chdir to %s inside the sandbox", cwd);
	if (plan->mode == SANDBOX_MODE_SERVE) {
		/* a detached init has no terminal to write to */
		int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		CHILD_CHECK(devnull >= 0, "open /dev/null");
		for (int fd = 0; fd < 3; fd++)
			dup2(devnull, fd);
		close(devnull);
	}

	/* The parent built the cgroup while we built the root; the second
	 * release hands us its v1 "tasks" files. We move in before running
	 * anything but our own code, and only then make the cgroup namespace,
	 * so that it is rooted at the sandbox's cgroup. */
	int task_fds[CG_MAX];
	size_t n_task_fds = wait_for_parent_fds(plan, task_fds, CG_MAX);
	r = cgroup_enter_self(task_fds, n_task_fds);
	for (size_t i = 0; i < n_task_fds; i++)
		close(task_fds[i]);
	if (r < 0) {
		errno = -r;
		CHILD_CHECK(0, "enter the sandbox's cgroup");
	}
	CHILD_CHECK(unshare(CLONE_NEWCGROUP) == 0, "new cgroup namespace");

	if (security_apply(cfg, &plan->seccomp, &report) < 0)
		child_fail(plan, &report);

	/* argv for warren-init */
	char *init_argv[WR_PROTO_INIT_ARGS_MAX];
	size_t a = 0;
	char sock_arg[16], timeout_arg[32];
	init_argv[a++] = (char *)"warren-init";
	if (plan->mode == SANDBOX_MODE_RUN) {
		init_argv[a++] = (char *)"run";
		init_argv[a++] = (char *)"--";
		for (size_t i = 0;
		     plan->argv[i] && a + 1 < WR_PROTO_INIT_ARGS_MAX; i++)
			init_argv[a++] = plan->argv[i];
	} else {
		snprintf(sock_arg, sizeof(sock_arg), "%d", plan->listen_fd);
		init_argv[a++] = (char *)"serve";
		init_argv[a++] = (char *)"--socket";
		init_argv[a++] = sock_arg;
		if (cfg->timeout_ms) {
			snprintf(timeout_arg, sizeof(timeout_arg), "%llu",
				 (unsigned long long)cfg->timeout_ms);
			init_argv[a++] = (char *)"--timeout-ms";
			init_argv[a++] = timeout_arg;
		}
	}
	init_argv[a] = NULL;
	syscall(SYS_execveat, plan->init_fd, "", init_argv, plan->init_env,
		AT_EMPTY_PATH);
	CHILD_CHECK(0, "exec warren-init");
	_exit(125);
}

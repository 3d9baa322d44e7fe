/* proc.c - starting a child process (proc.h). */
#include "util/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* The step of the child that failed, reported with its errno. */
enum child_step {
	STEP_PDEATHSIG,
	STEP_PARENT_GONE,
	STEP_SETPGID,
	STEP_DESCRIPTORS,
	STEP_EXEC,
	STEP_MAX,
};

static const char *const step_names[STEP_MAX] = {
    [STEP_PDEATHSIG] = "PR_SET_PDEATHSIG",
    [STEP_PARENT_GONE] = "parent gone",
    [STEP_SETPGID] = "setpgid",
    [STEP_DESCRIPTORS] = "descriptors",
    [STEP_EXEC] = NULL,
};

struct child_report {
	int step;
	int errnum;
};

/* All the child needs, made before vfork: the child only reads it. */
struct child_plan {
	const char *const *argv;
	char *const *envp;
	int src[4];    /* what becomes the child's 0, 1, 2 (and 3) */
	int n_fds;     /* 3, or 4 with a descriptor 3 */
	int report_fd; /* write end of the report pipe (O_CLOEXEC) */
	pid_t parent;
	bool new_group;
	bool die_with_parent;
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static _Noreturn void child_fail(int report_fd, int step)
{
	struct child_report rep = {step, errno};
	ssize_t n = write(report_fd, &rep, sizeof(rep));
	(void)n; /* nothing else to tell it with */
	_exit(127);
}

/* The child, from vfork to exec. It shares our memory until then: it
 * calls only async-signal-safe functions, writes nothing but its own
 * stack (the plan is read-only to it) and leaves with exec or _exit. */
static _Noreturn void child_run(const struct child_plan *pl)
{
	/* Every disposition back to the default while all signals are still
	 * blocked (the parent blocked them before vfork): a handler of ours
	 * must not run here, on our memory, and an ignored signal (the
	 * server ignores SIGPIPE) would stay ignored across exec. */
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &dfl, NULL); /* KILL, STOP, libc's own: EINVAL */
	/* asked first, then checked: a parent that died before the prctl
	 * would never send the signal */
	if (pl->die_with_parent) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
			child_fail(pl->report_fd, STEP_PDEATHSIG);
		if (getppid() != pl->parent) {
			errno = ESRCH;
			child_fail(pl->report_fd, STEP_PARENT_GONE);
		}
	}
	if (pl->new_group && setpgid(0, 0) < 0)
		child_fail(pl->report_fd, STEP_SETPGID);
	/* Sources and the report pipe out of the range 0..n_fds-1 first, so
	 * that no dup2 below overwrites a source still to be copied, and
	 * every target is a fresh copy (dup2 onto itself would keep its
	 * O_CLOEXEC). The copies are O_CLOEXEC: only the targets survive. */
	int src[4], report = pl->report_fd;
	for (int i = 0; i < pl->n_fds; i++) {
		src[i] = pl->src[i];
		if (src[i] < pl->n_fds &&
		    (src[i] = fcntl(src[i], F_DUPFD_CLOEXEC, pl->n_fds)) < 0)
			child_fail(report, STEP_DESCRIPTORS);
	}
	if (report < pl->n_fds &&
	    (report = fcntl(report, F_DUPFD_CLOEXEC, pl->n_fds)) < 0)
		child_fail(pl->report_fd, STEP_DESCRIPTORS);
	for (int i = 0; i < pl->n_fds; i++)
		if (dup2(src[i], i) < 0)
			child_fail(report, STEP_DESCRIPTORS);
	/* everything else goes, but the report pipe (exec closes that);
	 * close_range failing (a kernel before 5.9) leaves O_CLOEXEC alone
	 * as the wall */
	if (report > pl->n_fds)
		close_range((unsigned)pl->n_fds, (unsigned)report - 1, 0);
	close_range((unsigned)report + 1, ~0u, 0);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	const char *name = pl->argv[0];
	if (strchr(name, '/'))
		execve(name, (char *const *)pl->argv, pl->envp);
	else
		execvpe(name, (char *const *)pl->argv, pl->envp);
	child_fail(report, STEP_EXEC);
}

/* The child's end of one of its descriptors, and ours of a pipe. */
static int stdio_source(const struct proc_stdio *io, int target, int null_fd,
			int stdout_src, int pipe_fds[2], int *src)
{
	switch (io->kind) {
	case PROC_NULL: *src = target == 3 ? -1 : null_fd; return 0;
	case PROC_PIPE:
		if (target == 3)
			return -EINVAL;
		if (pipe2(pipe_fds, O_CLOEXEC) < 0)
			return -errno;
		*src = target == 0 ? pipe_fds[0] : pipe_fds[1];
		return 0;
	case PROC_FD:
		if (io->fd < 0)
			return -EBADF;
		*src = io->fd;
		return 0;
	case PROC_STDOUT:
		if (target != 2)
			return -EINVAL;
		*src = stdout_src;
		return 0;
	default: return -EINVAL;
	}
}

static void set_nonblock(int fd)
{
	int fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int proc_start(const struct proc_spec *s, struct proc *out,
	       struct wr_error **err)
{
	const char *name = s->argv[0];
	int pipes[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
	int report[2] = {-1, -1};
	int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null_fd < 0)
		return wr_error_set(err, errno, "run %s: /dev/null", name);
	struct child_plan pl = {
	    .argv = s->argv,
	    .envp = s->envp ? (char *const *)s->envp : environ,
	    .n_fds = s->fd3.kind == PROC_FD ? 4 : 3,
	    .parent = getpid(),
	    .new_group = s->new_group,
	    .die_with_parent = s->die_with_parent,
	};
	const struct proc_stdio *io[4] = {&s->in, &s->out, &s->err, &s->fd3};
	int r = 0;
	for (int i = 0; i < pl.n_fds && r == 0; i++)
		r = stdio_source(io[i], i, null_fd, pl.src[1],
				 i < 3 ? pipes[i] : NULL, &pl.src[i]);
	if (r == 0 && pipe2(report, O_CLOEXEC) < 0)
		r = -errno;
	if (r < 0) {
		r = wr_error_set(err, -r, "run %s: descriptors", name);
		goto fail;
	}
	pl.report_fd = report[1];

	/* vfork, not posix_spawn: the child must ask for PR_SET_PDEATHSIG
	 * and close what is not its own before exec. vfork rather than fork:
	 * our page tables are not copied for a child that only execs (a fork
	 * of the running server costs ~0.5 ms more, on every sandbox create
	 * and exec). Every signal is blocked across it, so that no handler
	 * runs in the child before it has reset them all. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pid_t pid = vfork();
	if (pid == 0)
		child_run(&pl);
	int vfork_errno = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close_fd(&report[1]);
	close_fd(&null_fd);
	close_fd(&pipes[0][0]);
	close_fd(&pipes[1][1]);
	close_fd(&pipes[2][1]);
	if (pid < 0) {
		r = wr_error_set(err, vfork_errno, "run %s: vfork", name);
		goto fail;
	}
	/* The child has exec'd (the pipe closed with exec) or reported why
	 * not and exited: vfork returns only then. */
	struct child_report rep;
	ssize_t n;
	do
		n = read(report[0], &rep, sizeof(rep));
	while (n < 0 && errno == EINTR);
	close_fd(&report[0]);
	if (n == (ssize_t)sizeof(rep)) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		const char *step = rep.step >= 0 && rep.step < STEP_MAX
				       ? step_names[rep.step]
				       : "?";
		if (step)
			r = wr_error_set(err, rep.errnum, "run %s: %s", name,
					 step);
		else
			r = wr_error_set(err, rep.errnum, "run %s", name);
		goto fail;
	}
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0); /* O_CLOEXEC */
	if (pidfd < 0) {
		int e = errno;
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		r = wr_error_set(err, e, "run %s: pidfd_open", name);
		goto fail;
	}
	*out = (struct proc){
	    .pid = pid,
	    .pidfd = pidfd,
	    .in_fd = pipes[0][1],
	    .out_fd = pipes[1][0],
	    .err_fd = pipes[2][0],
	    .group = s->new_group,
	};
	if (s->nonblock) {
		set_nonblock(out->in_fd);
		set_nonblock(out->out_fd);
		set_nonblock(out->err_fd);
	}
	return 0;
fail:
	close_fd(&null_fd);
	close_fd(&report[0]);
	close_fd(&report[1]);
	for (int i = 0; i < 3; i++) {
		close_fd(&pipes[i][0]);
		close_fd(&pipes[i][1]);
	}
	return r;
}

int proc_kill(const struct proc *p, int sig)
{
	/* never kill(0) or kill(-1): a reaped or unset child is gone */
	if (p->pid <= 0)
		return -ESRCH;
	return kill(p->group ? -p->pid : p->pid, sig) < 0 ? -errno : 0;
}

int proc_reap(struct proc *p, int ms)
{
	if (p->pid <= 0)
		return -ECHILD;
	if (ms >= 0 && p->pidfd >= 0) {
		struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
		int r;
		do
			r = poll(&pf, 1, ms);
		while (r < 0 && errno == EINTR);
		if (r == 0)
			proc_kill(p, SIGKILL);
	}
	int status;
	pid_t r;
	do
		r = waitpid(p->pid, &status, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	p->pid = 0;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int proc_wait(struct proc *p)
{
	return proc_reap(p, -1);
}

void proc_close(struct proc *p)
{
	close_fd(&p->pidfd);
	close_fd(&p->in_fd);
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
}

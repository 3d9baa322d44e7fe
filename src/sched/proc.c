/* proc.c - the control plane's child processes (see proc.h). */
#include "sched/proc.h"

#include "util/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int spawn_env(char *const argv[], char *const envp[], int log_fd,
		     struct proc *out, struct wr_error **err);

int proc_spawn(char *const argv[], int log_fd, struct proc *out,
	       struct wr_error **err)
{
	return spawn_env(argv, NULL, log_fd, out, err);
}

/* proc_spawn with the child's environment (NULL: ours). */
static int spawn_env(char *const argv[], char *const envp[], int log_fd,
		     struct proc *out, struct wr_error **err)
{
	int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
	if (pipe2(out_pipe, O_CLOEXEC) < 0 ||
	    (log_fd < 0 && pipe2(err_pipe, O_CLOEXEC) < 0)) {
		int e = errno;
		close_fd(&out_pipe[0]);
		close_fd(&out_pipe[1]);
		return wr_error_set(err, e, "spawn %s: pipe", argv[0]);
	}
	int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	pid_t parent = getpid();
	/* vfork, not posix_spawn: the child must ask for PR_SET_PDEATHSIG
	 * before exec. vfork rather than fork: the server's page tables are
	 * not copied for a child that only execs (a fork of the running
	 * server costs ~0.5 ms more, on every sandbox create and exec). The
	 * child shares our memory until it execs: it calls only
	 * async-signal-safe functions, writes nothing but its own locals and
	 * leaves with _exit. */
	pid_t pid = vfork();
	if (pid < 0) {
		int e = errno;
		close_fd(&out_pipe[0]);
		close_fd(&out_pipe[1]);
		close_fd(&err_pipe[0]);
		close_fd(&err_pipe[1]);
		close_fd(&null_fd);
		return wr_error_set(err, e, "spawn %s: vfork", argv[0]);
	}
	if (pid == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(127);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (null_fd < 0 || dup2(null_fd, 0) < 0 ||
		    dup2(out_pipe[1], 1) < 0 ||
		    dup2(log_fd >= 0 ? log_fd : err_pipe[1], 2) < 0)
			_exit(127);
		if (envp)
			execve(argv[0], argv, envp);
		else
			execv(argv[0], argv);
		_exit(127);
	}
	close_fd(&null_fd);
	close_fd(&out_pipe[1]);
	close_fd(&err_pipe[1]);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		int e = errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close_fd(&out_pipe[0]);
		close_fd(&err_pipe[0]);
		return wr_error_set(err, e, "spawn %s: pidfd_open", argv[0]);
	}
	fcntl(pidfd, F_SETFD, FD_CLOEXEC);
	out->pid = pid;
	out->pidfd = pidfd;
	out->out_fd = out_pipe[0];
	out->err_fd = err_pipe[0];
	return 0;
}

int proc_spawn_stdin(char *const argv[], int *in_fd, struct proc *out,
		     struct wr_error **err)
{
	int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1},
	    err_pipe[2] = {-1, -1};
	if (pipe2(in_pipe, O_CLOEXEC) < 0 || pipe2(out_pipe, O_CLOEXEC) < 0 ||
	    pipe2(err_pipe, O_CLOEXEC) < 0) {
		int e = errno;
		for (int i = 0; i < 2; i++) {
			close_fd(&in_pipe[i]);
			close_fd(&out_pipe[i]);
			close_fd(&err_pipe[i]);
		}
		return wr_error_set(err, e, "spawn %s: pipe", argv[0]);
	}
	pid_t parent = getpid();
	/* as in proc_spawn: vfork, PR_SET_PDEATHSIG, and only
	 * async-signal-safe calls until exec */
	pid_t pid = vfork();
	if (pid < 0) {
		int e = errno;
		for (int i = 0; i < 2; i++) {
			close_fd(&in_pipe[i]);
			close_fd(&out_pipe[i]);
			close_fd(&err_pipe[i]);
		}
		return wr_error_set(err, e, "spawn %s: vfork", argv[0]);
	}
	if (pid == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(127);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* dup2 clears O_CLOEXEC on the copies: only 0, 1, 2 survive */
		if (dup2(in_pipe[0], 0) < 0 || dup2(out_pipe[1], 1) < 0 ||
		    dup2(err_pipe[1], 2) < 0)
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	close_fd(&in_pipe[0]);
	close_fd(&out_pipe[1]);
	close_fd(&err_pipe[1]);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		int e = errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close_fd(&in_pipe[1]);
		close_fd(&out_pipe[0]);
		close_fd(&err_pipe[0]);
		return wr_error_set(err, e, "spawn %s: pidfd_open", argv[0]);
	}
	fcntl(pidfd, F_SETFD, FD_CLOEXEC);
	*in_fd = in_pipe[1];
	out->pid = pid;
	out->pidfd = pidfd;
	out->out_fd = out_pipe[0];
	out->err_fd = err_pipe[0];
	return 0;
}

int proc_wait(struct proc *p)
{
	int status;
	pid_t r;
	do
		r = waitpid(p->pid, &status, 0);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

void proc_close(struct proc *p)
{
	close_fd(&p->pidfd);
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
}

/* Appends what fd has to buf (keeping the last max bytes when tail, else
 * the first max); returns 0 at EOF, 1 if more may come, -errno. */
static int drain(int fd, char *buf, size_t max, size_t *len, bool tail)
{
	char chunk[4096];
	ssize_t n = read(fd, chunk, sizeof(chunk));
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 1 : -errno;
	if (n == 0)
		return 0;
	size_t k = (size_t)n;
	if (!tail) {
		size_t room = max - *len;
		if (k > room)
			k = room;
		memcpy(buf + *len, chunk, k);
		*len += k;
		return 1;
	}
	if (k >= max) {
		memcpy(buf, chunk + (k - max), max);
		*len = max;
	} else {
		if (*len + k > max) {
			size_t drop = *len + k - max;
			memmove(buf, buf + drop, *len - drop);
			*len -= drop;
		}
		memcpy(buf + *len, chunk, k);
		*len += k;
	}
	return 1;
}

int proc_run(char *const argv[], size_t max, int log_fd, char **out,
	     char **out_err, struct wr_error **err)
{
	return proc_run_tracked(argv, max, log_fd, out, out_err, NULL, NULL,
				err);
}

static int run_env(char *const argv[], char *const envp[], size_t max,
		   int log_fd, char **out, char **out_err, pid_t *track,
		   pthread_mutex_t *mu, struct wr_error **err);

int proc_run_env(char *const argv[], char *const envp[], size_t max, char **out,
		 char **out_err, struct wr_error **err)
{
	return run_env(argv, envp, max, -1, out, out_err, NULL, NULL, err);
}

int proc_run_tracked(char *const argv[], size_t max, int log_fd, char **out,
		     char **out_err, pid_t *track, pthread_mutex_t *mu,
		     struct wr_error **err)
{
	return run_env(argv, NULL, max, log_fd, out, out_err, track, mu, err);
}

static int run_env(char *const argv[], char *const envp[], size_t max,
		   int log_fd, char **out, char **out_err, pid_t *track,
		   pthread_mutex_t *mu, struct wr_error **err)
{
	struct proc p;
	int r = spawn_env(argv, envp, log_fd, &p, err);
	if (r < 0)
		return r;
	if (track) {
		pthread_mutex_lock(mu);
		*track = p.pid;
		pthread_mutex_unlock(mu);
	}
	char *obuf = wr_malloc(max + 1);
	char *ebuf = p.err_fd >= 0 ? wr_malloc(max + 1) : NULL;
	size_t olen = 0, elen = 0;
	if (!obuf || (p.err_fd >= 0 && !ebuf)) {
		free(obuf);
		free(ebuf);
		if (track) {
			pthread_mutex_lock(mu);
			*track = 0;
			pthread_mutex_unlock(mu);
		}
		kill(p.pid, SIGKILL);
		proc_wait(&p);
		proc_close(&p);
		return wr_error_set(err, ENOMEM, "run %s", argv[0]);
	}
	while (p.out_fd >= 0 || p.err_fd >= 0) {
		struct pollfd pf[2] = {{.fd = p.out_fd, .events = POLLIN},
				       {.fd = p.err_fd, .events = POLLIN}};
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		if (pf[0].revents &&
		    drain(p.out_fd, obuf, max, &olen, false) <= 0)
			close_fd(&p.out_fd);
		if (pf[1].revents &&
		    drain(p.err_fd, ebuf, max, &elen, true) <= 0)
			close_fd(&p.err_fd);
	}
	if (track) {
		/* before the reap: the pid must not be signalled once it may
		 * be reused */
		pthread_mutex_lock(mu);
		*track = 0;
		pthread_mutex_unlock(mu);
	}
	int status = proc_wait(&p);
	proc_close(&p);
	obuf[olen] = '\0';
	if (ebuf)
		ebuf[elen] = '\0';
	if (out)
		*out = obuf;
	else
		free(obuf);
	if (out_err && ebuf)
		*out_err = ebuf;
	else
		free(ebuf);
	return status;
}

/* utime + stime of pid from /proc/pid/stat, 0 if gone. */
static uint64_t cpu_ticks(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: fields start
	 * after the last ')' */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	unsigned long long ut = 0, st = 0;
	if (sscanf(p + 1,
		   " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
		   &ut, &st) != 2)
		return 0;
	return ut + st;
}

static void walk(pid_t pid, int depth, struct proc_activity *a)
{
	a->cpu_ticks += cpu_ticks(pid);
	if (depth > 64)
		return;
	char path[96], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid,
		 (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	char *save = NULL;
	for (char *tok = strtok_r(buf, " \n", &save); tok;
	     tok = strtok_r(NULL, " \n", &save)) {
		pid_t child = (pid_t)atoi(tok);
		if (child <= 0 || a->processes > 100000)
			continue;
		a->processes++;
		walk(child, depth + 1, a);
	}
}

int proc_tree_activity(pid_t pid, struct proc_activity *out)
{
	if (pid <= 0 || kill(pid, 0) < 0)
		return -ESRCH;
	struct proc_activity a = {0};
	walk(pid, 0, &a);
	*out = a;
	return 0;
}

/* proc.c - the control plane's child processes (see proc.h): its
 * shorthands over util/proc.h and util/spawn.h, and the activity of a
 * process tree. */
#include "sched/proc.h"

#include "util/cleanup.h"
#include "util/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int proc_spawn(char *const argv[], int log_fd, struct proc *out,
	       struct wr_error **err)
{
	struct proc_spec s = {
	    .argv = (const char *const *)argv,
	    .out = {PROC_PIPE, -1},
	    .err = log_fd >= 0 ? (struct proc_stdio){PROC_FD, log_fd}
			       : (struct proc_stdio){PROC_PIPE, -1},
	    .die_with_parent = true,
	};
	return proc_start(&s, out, err);
}

int proc_spawn_stdin(char *const argv[], int *in_fd, struct proc *out,
		     struct wr_error **err)
{
	struct proc_spec s = {
	    .argv = (const char *const *)argv,
	    .in = {PROC_PIPE, -1},
	    .out = {PROC_PIPE, -1},
	    .err = {PROC_PIPE, -1},
	    .die_with_parent = true,
	};
	int r = proc_start(&s, out, err);
	if (r < 0)
		return r;
	*in_fd = TAKE_FD(out->in_fd);
	return 0;
}

static int run(char *const argv[], char *const envp[], size_t max, int log_fd,
	       char **out, char **out_err, pid_t *track, pthread_mutex_t *mu,
	       struct wr_error **err)
{
	struct spawn_call c = {
	    .argv = (const char *const *)argv,
	    .envp = (const char *const *)envp,
	    .in_fd = -1,
	    .out_fd = -1,
	    .out = out,
	    .out_max = max,
	    .out_truncate = true,
	    .err_fd = log_fd >= 0 ? log_fd : -1,
	    .err_out = log_fd < 0 ? out_err : NULL,
	    .err_max = max,
	    .keep_group = true,
	    .die_with_parent = true,
	    .track = track,
	    .track_mu = mu,
	};
	return spawn_run(&c, err);
}

int proc_run(char *const argv[], size_t max, int log_fd, char **out,
	     char **out_err, struct wr_error **err)
{
	return run(argv, NULL, max, log_fd, out, out_err, NULL, NULL, err);
}

int proc_run_env(char *const argv[], char *const envp[], size_t max, char **out,
		 char **out_err, struct wr_error **err)
{
	return run(argv, envp, max, -1, out, out_err, NULL, NULL, err);
}

int proc_run_tracked(char *const argv[], size_t max, int log_fd, char **out,
		     char **out_err, pid_t *track, pthread_mutex_t *mu,
		     struct wr_error **err)
{
	return run(argv, NULL, max, log_fd, out, out_err, track, mu, err);
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

/* test_spawn.c - util/proc.h and util/spawn.h: the child's descriptors
 * (exactly 0, 1, 2 and a given 3, whatever O_CLOEXEC says), its signal
 * state, environment, process group, death with the starting thread,
 * exec failures as errors, exit statuses (128+N for a signal), waiting
 * with a limit; spawn_run's caps (fail or truncate), stderr tails, the
 * deadline that kills the group, and the published pid. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util/cleanup.h"
#include "util/proc.h"
#include "util/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Runs argv with spawn_run, stdout captured: its status. */
static int run_capture(const char *const *argv, const char *const *envp,
		       char **out)
{
	struct spawn_call c = {
	    .argv = argv, .envp = envp, .in_fd = -1, .out_fd = -1, .out = out};
	struct wr_error *err = NULL;
	int r = spawn_run(&c, &err);
	wr_error_free(err);
	return r;
}

/* Reads fd to its end (at most size - 1 bytes), NUL-ended. */
static size_t read_all(int fd, char *buf, size_t size)
{
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || len + (size_t)n >= size - 1) {
			len += n > 0 ? (size_t)n : 0;
			break;
		}
		len += (size_t)n;
	}
	buf[len] = '\0';
	return len;
}

static void test_only_its_own_descriptors(void **state)
{
	(void)state;
	/* a descriptor of ours without O_CLOEXEC: the child must not have
	 * it all the same */
	int leak = open("/dev/null", O_RDONLY);
	assert_true(leak >= 0);
	assert_int_equal(dup2(leak, 50), 50);
	close(leak);
	const char *argv[] = {
	    "/bin/sh", "-c",
	    "for n in 0 1 2 3 50; do test -e /proc/$$/fd/$n && printf $n; "
	    "done; true",
	    NULL};
	_cleanup_free_ char *out = NULL;
	assert_int_equal(run_capture(argv, NULL, &out), 0);
	assert_string_equal(out, "012");
	close(50);
}

static void test_descriptor_3_and_stderr_with_stdout(void **state)
{
	(void)state;
	int out[2], three[2];
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(three, O_CLOEXEC), 0);
	const char *argv[] = {"/bin/sh", "-c",
			      "echo one; echo two >&2; echo three >&3", NULL};
	struct proc_spec s = {
	    .argv = argv,
	    .out = {PROC_FD, out[1]},
	    .err = {PROC_STDOUT, -1},
	    .fd3 = {PROC_FD, three[1]},
	};
	struct proc p;
	struct wr_error *err = NULL;
	assert_int_equal(proc_start(&s, &p, &err), 0);
	assert_null(err);
	close(out[1]);
	close(three[1]);
	assert_int_equal(p.in_fd, -1);
	assert_int_equal(p.out_fd, -1);
	assert_int_equal(p.err_fd, -1);
	assert_int_equal(proc_wait(&p), 0);
	proc_close(&p);
	char buf[256];
	read_all(out[0], buf, sizeof(buf));
	assert_string_equal(buf, "one\ntwo\n");
	read_all(three[0], buf, sizeof(buf));
	assert_string_equal(buf, "three\n");
	close(out[0]);
	close(three[0]);
}

/* Descriptors of ours at 0..3 given as other targets: each lands where
 * it was asked, none overwritten on the way. */
static void test_sources_in_the_low_range(void **state)
{
	(void)state;
	int saved_in = dup(0);
	int pipe_fds[2];
	assert_int_equal(pipe2(pipe_fds, 0), 0);
	/* our stdin becomes the write end: the child's stdout is our 0 */
	assert_int_equal(dup2(pipe_fds[1], 0), 0);
	close(pipe_fds[1]);
	const char *argv[] = {"/bin/echo", "low", NULL};
	struct proc_spec s = {.argv = argv, .out = {PROC_FD, 0}};
	struct proc p;
	assert_int_equal(proc_start(&s, &p, NULL), 0);
	assert_int_equal(proc_wait(&p), 0);
	proc_close(&p);
	dup2(saved_in, 0);
	close(saved_in);
	char buf[64];
	read_all(pipe_fds[0], buf, sizeof(buf));
	assert_string_equal(buf, "low\n");
	close(pipe_fds[0]);
}

static void test_stdin_pipe(void **state)
{
	(void)state;
	const char *argv[] = {"cat", NULL};
	struct proc_spec s = {
	    .argv = argv, .in = {PROC_PIPE, -1}, .out = {PROC_PIPE, -1}};
	struct proc p;
	assert_int_equal(proc_start(&s, &p, NULL), 0);
	assert_true(p.in_fd >= 0);
	assert_true(fcntl(p.in_fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(write(p.in_fd, "xyz", 3), 3);
	close(p.in_fd);
	p.in_fd = -1;
	char buf[64];
	read_all(p.out_fd, buf, sizeof(buf));
	assert_string_equal(buf, "xyz");
	assert_int_equal(proc_wait(&p), 0);
	proc_close(&p);
}

static void test_exec_failure_is_an_error(void **state)
{
	(void)state;
	const char *by_path[] = {"/nonexistent/warren-test", NULL};
	const char *by_name[] = {"warren-test-no-such-command", NULL};
	struct proc_spec s = {.argv = by_path};
	struct proc p;
	struct wr_error *err = NULL;
	assert_int_equal(proc_start(&s, &p, &err), -ENOENT);
	assert_non_null(err);
	assert_non_null(strstr(err->msg, "run /nonexistent/warren-test"));
	wr_error_free(err);
	err = NULL;
	s.argv = by_name;
	assert_int_equal(proc_start(&s, &p, &err), -ENOENT);
	wr_error_free(err);
	/* and through spawn_run */
	_cleanup_free_ char *out = NULL;
	assert_int_equal(run_capture(by_name, NULL, &out), -ENOENT);
	assert_null(out);
}

static void test_exit_status_and_signals(void **state)
{
	(void)state;
	const char *three[] = {"/bin/sh", "-c", "exit 3", NULL};
	const char *term[] = {"/bin/sh", "-c", "kill -TERM $$", NULL};
	assert_int_equal(run_capture(three, NULL, NULL), 3);
	assert_int_equal(run_capture(term, NULL, NULL), 128 + SIGTERM);
}

/* Default dispositions and an empty mask, whatever the thread had. */
static void test_signal_state_reset(void **state)
{
	(void)state;
	sigset_t usr, old;
	sigemptyset(&usr);
	sigaddset(&usr, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr, &old);
	struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
	sigaction(SIGPIPE, &ign, &old_pipe);
	const char *argv[] = {"grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status",
			      NULL};
	_cleanup_free_ char *out = NULL;
	assert_int_equal(run_capture(argv, NULL, &out), 0);
	sigaction(SIGPIPE, &old_pipe, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	unsigned long long blocked = ~0ull, ignored = ~0ull;
	assert_int_equal(
	    sscanf(out, "SigBlk: %llx SigIgn: %llx", &blocked, &ignored), 2);
	assert_true(blocked == 0);
	/* libc's own signals (32, 33: thread cancellation, set*id) may stay
	 * as the process that started us left them: libc refuses to touch
	 * them, and its posix_spawn ignores them in every child too */
	assert_true((ignored & 0x7fffffffull) == 0); /* 1..31 */
}

static void test_environment(void **state)
{
	(void)state;
	const char *argv[] = {"/usr/bin/env", NULL};
	const char *envp[] = {"WARREN_TEST_ONLY=1", NULL};
	_cleanup_free_ char *out = NULL;
	assert_int_equal(run_capture(argv, envp, &out), 0);
	assert_string_equal(out, "WARREN_TEST_ONLY=1\n");
	/* NULL: ours */
	setenv("WARREN_TEST_OURS", "yes", 1);
	free(out);
	out = NULL;
	assert_int_equal(run_capture(argv, NULL, &out), 0);
	assert_non_null(strstr(out, "WARREN_TEST_OURS=yes\n"));
	unsetenv("WARREN_TEST_OURS");
}

static void test_group_kill_and_reap(void **state)
{
	(void)state;
	const char *argv[] = {"sleep", "30", NULL};
	struct proc_spec s = {.argv = argv, .new_group = true};
	struct proc p;
	assert_int_equal(proc_start(&s, &p, NULL), 0);
	assert_true(p.group);
	assert_int_equal(getpgid(p.pid), p.pid);
	assert_int_equal(proc_kill(&p, SIGTERM), 0);
	assert_int_equal(proc_wait(&p), 128 + SIGTERM);
	assert_int_equal(p.pid, 0);
	/* never a kill(0) or kill(-1) for a reaped child */
	assert_int_equal(proc_kill(&p, SIGTERM), -ESRCH);
	proc_close(&p);

	/* in our group; a reap with a limit kills it */
	s.new_group = false;
	assert_int_equal(proc_start(&s, &p, NULL), 0);
	assert_int_equal(getpgid(p.pid), getpgid(0));
	uint64_t t0 = now_ms();
	assert_int_equal(proc_reap(&p, 100), 128 + SIGKILL);
	assert_true(now_ms() - t0 < 5000);
	proc_close(&p);
}

static void *start_sleeper(void *arg)
{
	const char *argv[] = {"sleep", "30", NULL};
	struct proc_spec s = {.argv = argv, .die_with_parent = true};
	return proc_start(&s, arg, NULL) == 0 ? arg : NULL;
}

/* PR_SET_PDEATHSIG: the child goes with the thread that started it. */
static void test_dies_with_the_starting_thread(void **state)
{
	(void)state;
	struct proc p;
	pthread_t t;
	void *ok = NULL;
	assert_int_equal(pthread_create(&t, NULL, start_sleeper, &p), 0);
	pthread_join(t, &ok);
	assert_non_null(ok);
	uint64_t t0 = now_ms();
	assert_int_equal(proc_wait(&p), 128 + SIGKILL);
	assert_true(now_ms() - t0 < 5000);
	proc_close(&p);
}

static void test_caps(void **state)
{
	(void)state;
	const char *argv[] = {"/bin/sh", "-c",
			      "printf 0123456789; printf abcdefghij >&2; "
			      "printf 'last words\\n' >&2",
			      NULL};
	_cleanup_free_ char *out = NULL, *errors = NULL;
	struct wr_error *err = NULL;
	struct spawn_call c = {
	    .argv = argv, .in_fd = -1, .out_fd = -1, .out = &out, .out_max = 4};
	assert_int_equal(spawn_run(&c, &err), -EFBIG);
	assert_null(out);
	wr_error_free(err);
	err = NULL;

	size_t len = 0;
	struct spawn_call t = {
	    .argv = argv,
	    .in_fd = -1,
	    .out_fd = -1,
	    .out = &out,
	    .out_len = &len,
	    .out_max = 4,
	    .out_truncate = true,
	    .err_out = &errors,
	    .err_max = 8,
	};
	assert_int_equal(spawn_run(&t, &err), 0);
	assert_null(err);
	assert_string_equal(out, "0123");
	assert_int_equal(len, 4);
	assert_string_equal(errors, "t words\n"); /* its last 8 bytes */
	assert_string_equal(t.err_tail, "abcdefghijlast words");
}

static void test_stderr_to_a_descriptor(void **state)
{
	(void)state;
	int pipe_fds[2];
	assert_int_equal(pipe2(pipe_fds, O_CLOEXEC), 0);
	const char *argv[] = {"/bin/sh", "-c", "echo to-log >&2", NULL};
	struct spawn_call c = {
	    .argv = argv, .in_fd = -1, .out_fd = -1, .err_fd = pipe_fds[1]};
	assert_int_equal(spawn_run(&c, NULL), 0);
	close(pipe_fds[1]);
	assert_string_equal(c.err_tail, "");
	char buf[64];
	read_all(pipe_fds[0], buf, sizeof(buf));
	assert_string_equal(buf, "to-log\n");
	close(pipe_fds[0]);
}

/* The deadline kills the group: a background child holding the pipes
 * goes too, and the call returns at once. */
static void test_deadline_kills_the_group(void **state)
{
	(void)state;
	const char *argv[] = {"/bin/sh", "-c", "sleep 30 & sleep 30", NULL};
	struct wr_error *err = NULL;
	struct spawn_call c = {
	    .argv = argv, .in_fd = -1, .out_fd = -1, .timeout_ms = 200};
	uint64_t t0 = now_ms();
	assert_int_equal(spawn_run(&c, &err), -ETIMEDOUT);
	assert_true(now_ms() - t0 < 5000);
	assert_non_null(err);
	wr_error_free(err);
}

struct tracked {
	pthread_mutex_t mu;
	pid_t pid;
};

static void *stop_when_published(void *arg)
{
	struct tracked *t = arg;
	for (int i = 0; i < 5000; i++) {
		pthread_mutex_lock(&t->mu);
		pid_t pid = t->pid;
		if (pid > 0)
			kill(pid, SIGTERM);
		pthread_mutex_unlock(&t->mu);
		if (pid > 0)
			break;
		usleep(1000);
	}
	return NULL;
}

static void test_published_pid(void **state)
{
	(void)state;
	struct tracked t = {.mu = PTHREAD_MUTEX_INITIALIZER};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, stop_when_published, &t), 0);
	const char *argv[] = {"sleep", "30", NULL};
	struct spawn_call c = {.argv = argv,
			       .in_fd = -1,
			       .out_fd = -1,
			       .keep_group = true,
			       .track = &t.pid,
			       .track_mu = &t.mu};
	assert_int_equal(spawn_run(&c, NULL), 128 + SIGTERM);
	pthread_join(th, NULL);
	assert_int_equal(t.pid, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_only_its_own_descriptors),
	    cmocka_unit_test(test_descriptor_3_and_stderr_with_stdout),
	    cmocka_unit_test(test_sources_in_the_low_range),
	    cmocka_unit_test(test_stdin_pipe),
	    cmocka_unit_test(test_exec_failure_is_an_error),
	    cmocka_unit_test(test_exit_status_and_signals),
	    cmocka_unit_test(test_signal_state_reset),
	    cmocka_unit_test(test_environment),
	    cmocka_unit_test(test_group_kill_and_reap),
	    cmocka_unit_test(test_dies_with_the_starting_thread),
	    cmocka_unit_test(test_caps),
	    cmocka_unit_test(test_stderr_to_a_descriptor),
	    cmocka_unit_test(test_deadline_kills_the_group),
	    cmocka_unit_test(test_published_pid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

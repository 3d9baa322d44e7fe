/* standin.h - for the unit tests that talk to a local stand-in server of
 * tests/tools (chat_server.py, forge_server.py): writing its recording,
 * starting it on a free port, stopping it. Included after cmocka.h by one
 * test file each (static functions: a test binary is one .c file). */
#ifndef WR_TESTS_STANDIN_H
#define WR_TESTS_STANDIN_H

#include "util/alloc.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* JSON written with ' for " so that the recordings read well in C. */
static inline char *standin_dq(const char *text)
{
	char *s = wr_strdup(text);
	assert_non_null(s);
	for (char *c = s; *c; c++)
		if (*c == '\'')
			*c = '"';
	return s;
}

static inline void standin_write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/* Starts `python3 SCRIPT --port 0 --recording RECORDING --log LOG
 * [OPTION VALUE]` (the log emptied first) and returns the port it printed
 * on its first line; *pid gets the process. Fails the test if it does not
 * start within 10 s. */
static inline int standin_start(const char *script, const char *recording,
				const char *log, const char *option,
				const char *value, pid_t *pid)
{
	int fds[2];
	assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
	unlink(log);
	pid_t child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		dup2(fds[1], STDOUT_FILENO);
		const char *argv[12] = {"python3",   script,	"--port",
					"0",	     "--recording", recording,
					"--log",     log};
		if (option && value) {
			argv[8] = option;
			argv[9] = value;
		}
		execvp("python3", (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	*pid = child;
	char line[32] = "";
	size_t len = 0;
	while (len < sizeof(line) - 1 && !strchr(line, '\n')) {
		struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
		if (poll(&pfd, 1, 10000) <= 0)
			break;
		ssize_t n = read(fds[0], line + len, sizeof(line) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		line[len] = '\0';
	}
	close(fds[0]);
	int port = atoi(line);
	if (port <= 0)
		fail_msg("%s did not start (printed '%s')", script, line);
	return port;
}

static inline void standin_stop(pid_t *pid)
{
	if (*pid > 0) {
		kill(*pid, SIGTERM);
		waitpid(*pid, NULL, 0);
	}
	*pid = -1;
}

#endif

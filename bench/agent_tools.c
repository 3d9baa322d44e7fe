/* bench/agent_tools - what one agent tool call costs on its way into the
 * sandbox, against the raw exec path and against the host, measured in one
 * process and alternating the three so that noise hits them alike:
 *
 *   agent_tools [-n RUNS] WARREN SANDBOX FILE HOST_FILE
 *
 *   read_file   tools_call("read_file", {"path": FILE}) through the
 *               sandbox exec backend (agent/exec_sandbox.h): argument
 *               parsing, `warren sandbox exec SANDBOX --cwd /workspace --
 *               head -c N -- FILE`, capture, line numbering, the reply
 *   raw exec    `WARREN sandbox exec SANDBOX -- cat FILE` spawned here,
 *               stdout read to the end through a pipe
 *   host cat    `cat HOST_FILE` spawned here the same way
 *
 * Prints median, p10 and p90 of each (after 10 warm-up rounds), the tool's
 * overhead over the raw exec, and whether the read_file median meets the
 * target (<= 2 ms). Exits non-zero if a call fails. */
#include "agent/exec_sandbox.h"
#include "agent/tools.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TARGET_MS 2.0
#define WARMUP 10

extern char **environ;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Spawns argv with stdout on a pipe, reads it to the end, waits. */
static double spawn_read(char **argv)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		perror("bench: pipe");
		exit(1);
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
	double t0 = now_ms();
	pid_t pid;
	int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (r != 0) {
		fprintf(stderr, "bench: spawn %s: %s\n", argv[0], strerror(r));
		exit(1);
	}
	char buf[65536];
	ssize_t n;
	size_t total = 0;
	while ((n = read(p[0], buf, sizeof(buf))) > 0 ||
	       (n < 0 && errno == EINTR))
		total += n > 0 ? (size_t)n : 0;
	close(p[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	double dt = now_ms() - t0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || total == 0) {
		fprintf(stderr, "bench: %s failed (status %d, %zu bytes)\n",
			argv[0], status, total);
		exit(1);
	}
	return dt;
}

static double tool_read(const struct tools_config *cfg,
			const struct tools_exec *ex, const char *args)
{
	struct tools_call_result res = {0};
	struct wr_error *err = NULL;
	double t0 = now_ms();
	int r = tools_call(cfg, ex, "read_file", args, &res, &err);
	double dt = now_ms() - t0;
	if (r < 0 || res.status != 0 || !res.content ||
	    strncmp(res.content, "     1\t", 7) != 0) {
		fprintf(stderr, "bench: read_file failed: %s\n",
			r < 0 && err ? err->msg
				     : (res.content ? res.content : "?"));
		exit(1);
	}
	tools_call_result_clear(&res);
	return dt;
}

struct series {
	const char *name;
	double *ms;
};

static double pct(const double *sorted, int n, double p)
{
	int i = (int)(p * (n - 1) + 0.5);
	return sorted[i];
}

int main(int argc, char **argv)
{
	int runs = 200;
	int opt;
	while ((opt = getopt(argc, argv, "n:")) != -1) {
		if (opt == 'n')
			runs = atoi(optarg);
	}
	if (argc - optind != 4 || runs < 10) {
		fprintf(stderr, "usage: agent_tools [-n RUNS>=10] WARREN "
				"SANDBOX FILE HOST_FILE\n");
		return 2;
	}
	char *warren = argv[optind], *sandbox = argv[optind + 1];
	char *file = argv[optind + 2], *host_file = argv[optind + 3];

	struct exec_sandbox xs = {warren, sandbox};
	struct tools_exec ex = {exec_sandbox_run, &xs};
	struct tools_config cfg = {0};
	char args[4096];
	snprintf(args, sizeof(args), "{\"path\": \"%s\"}", file);
	char *raw[] = {warren, (char *)"sandbox", (char *)"exec", sandbox,
		       (char *)"--",  (char *)"cat", file,	 NULL};
	char *host[] = {(char *)"cat", host_file, NULL};

	struct series s[3] = {{"read_file via tools_call", NULL},
			      {"raw: warren sandbox exec -- cat", NULL},
			      {"host: cat", NULL}};
	for (int k = 0; k < 3; k++) {
		s[k].ms = calloc((size_t)runs, sizeof(double));
		if (!s[k].ms)
			return 1;
	}
	for (int i = -WARMUP; i < runs; i++) {
		double a = tool_read(&cfg, &ex, args);
		double b = spawn_read(raw);
		double c = spawn_read(host);
		if (i >= 0) {
			s[0].ms[i] = a;
			s[1].ms[i] = b;
			s[2].ms[i] = c;
		}
	}
	char head[64];
	snprintf(head, sizeof(head), "per call (n=%d each)", runs);
	printf("%-34s %9s %9s %9s\n", head, "median", "p10", "p90");
	double med[3];
	for (int k = 0; k < 3; k++) {
		qsort(s[k].ms, (size_t)runs, sizeof(double), cmp_double);
		med[k] = pct(s[k].ms, runs, 0.5);
		printf("%-34s %6.3f ms %6.3f ms %6.3f ms\n", s[k].name, med[k],
		       pct(s[k].ms, runs, 0.1), pct(s[k].ms, runs, 0.9));
		free(s[k].ms);
	}
	printf("tool overhead over the raw exec (median): %+.3f ms\n",
	       med[0] - med[1]);
	printf("read_file median %.3f ms, target <= %.1f ms: %s\n", med[0],
	       TARGET_MS, med[0] <= TARGET_MS ? "met" : "MISSED");
	return 0;
}

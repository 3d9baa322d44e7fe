/* bench/sandbox - Warren's sandbox start cost against bubblewrap's, measured
 * in one process on the same machine, alternating the two so that noise from
 * other load hits both alike.
 *
 *   sandbox [-n RUNS] [-s PAUSE_MS] -- WARREN_CMD... :: BASELINE_CMD...
 *
 * -s pauses between runs: a sandbox started after an idle moment can pay
 * costs (an RCU grace period in the kernel's cgroup attach) that
 * back-to-back runs hide.
 *
 * Prints the median, p10 and p90 wall time of each command and the ratio of
 * the medians (warren / baseline). Exits non-zero if either command fails. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static double run_once(char **argv)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	double t0 = now_ms();
	pid_t pid;
	int r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0) {
		fprintf(stderr, "bench: spawn %s: %s\n", argv[0], strerror(r));
		exit(1);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	double dt = now_ms() - t0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "bench: %s failed (status %d)\n", argv[0], status);
		exit(1);
	}
	return dt;
}

static void report(const char *label, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	printf("%-10s median %7.3f ms   p10 %7.3f ms   p90 %7.3f ms   (n=%d)\n",
	       label, v[n / 2], v[n / 10], v[(n * 9) / 10], n);
}

int main(int argc, char **argv)
{
	int runs = 200, pause_ms = 0, i = 1;
	while (i + 1 < argc && argv[i][0] == '-' && argv[i][1] != '-') {
		if (!strcmp(argv[i], "-n"))
			runs = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-s"))
			pause_ms = atoi(argv[i + 1]);
		else
			break;
		i += 2;
	}
	if (runs < 10 || i >= argc || strcmp(argv[i], "--")) {
		fprintf(stderr, "usage: sandbox [-n RUNS>=10] [-s PAUSE_MS] -- "
				"WARREN_CMD... :: BASELINE_CMD...\n");
		return 2;
	}
	char **a = argv + i + 1;
	int split = 0;
	while (a[split] && strcmp(a[split], "::"))
		split++;
	if (!a[split] || split == 0 || !a[split + 1]) {
		fprintf(stderr, "bench: need two commands separated by ::\n");
		return 2;
	}
	a[split] = NULL;
	char **b = a + split + 1;
	double *va = calloc((size_t)runs, sizeof(double));
	double *vb = calloc((size_t)runs, sizeof(double));
	if (!va || !vb)
		return 1;
	/* warm-up: page cache, dentries, the first cgroup attach */
	for (int k = 0; k < 5; k++) {
		run_once(a);
		run_once(b);
	}
	struct timespec pause = { pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L };
	for (int k = 0; k < runs; k++) {
		if (pause_ms)
			nanosleep(&pause, NULL);
		va[k] = run_once(a);
		if (pause_ms)
			nanosleep(&pause, NULL);
		vb[k] = run_once(b);
	}
	report("warren", va, runs);
	report("baseline", vb, runs);
	printf("ratio (median warren / median baseline): %.3f\n",
	       va[runs / 2] / vb[runs / 2]);
	free(va);
	free(vb);
	return 0;
}

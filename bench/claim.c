/* bench/claim.c - the latency of the store's session_claim (src/store/
 * store.h, "Leases") on one backend: N queued sessions are inserted, a
 * registered worker claims them one call at a time until the queue is
 * empty, and each call's wall time is kept; with -t 2, two workers on two
 * handles claim at once (PostgreSQL: FOR UPDATE SKIP LOCKED; SQLite:
 * BEGIN IMMEDIATE serialises them). Prints one line:
 *
 *   claim BACKEND n=N batch=B threads=T p50=MS p90=MS p99=MS mean=MS
 *         insert_mean=MS claimed=N
 *
 * usage: bench/claim STORE-URL [-n N] [-b BATCH] [-t THREADS]
 *   STORE-URL: a SQLite path or a postgresql:// URL (bench/claim.sh starts
 *   a private PostgreSQL and gives a fresh path for SQLite). */
#include "store/store.h"
#include "util/error.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define THREADS_MAX 8

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void die(const char *what, struct wr_error *err)
{
	fprintf(stderr, "bench/claim: %s: %s\n", what,
		err && err->msg ? err->msg : "failed");
	exit(1);
}

struct claimer {
	const char *url;
	char worker[STORE_ID_MAX];
	int batch;
	double *lat; /* one per call */
	size_t n_lat, cap;
	size_t claimed;
};

static void *claim_loop(void *arg)
{
	struct claimer *cl = arg;
	struct wr_error *err = NULL;
	struct store *st = store_open(cl->url, &err);
	if (!st)
		die("open", err);
	for (;;) {
		struct store_claim *v = NULL;
		size_t n = 0;
		double t0 = now_ms();
		int r = st->ops->session_claim(st, cl->worker, NULL,
					       store_now_ms(), 600000,
					       cl->batch, &v, &n, &err);
		double ms = now_ms() - t0;
		if (r < 0)
			die("session_claim", err);
		store_claims_free(v, n);
		if (n == 0)
			break; /* the queue is empty: not counted */
		if (cl->n_lat == cl->cap) {
			cl->cap = cl->cap ? cl->cap * 2 : 1024;
			cl->lat = realloc(cl->lat, cl->cap * sizeof(double));
			if (!cl->lat)
				die("memory", NULL);
		}
		cl->lat[cl->n_lat++] = ms;
		cl->claimed += n;
	}
	store_close(st);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench/claim STORE-URL [-n N] [-b BATCH] "
				"[-t THREADS]\n");
		return 2;
	}
	const char *url = argv[1];
	int n = 2000, batch = 1, threads = 1, ch;
	optind = 2;
	while ((ch = getopt(argc, argv, "n:b:t:")) != -1) {
		switch (ch) {
		case 'n': n = atoi(optarg); break;
		case 'b': batch = atoi(optarg); break;
		case 't': threads = atoi(optarg); break;
		default: return 2;
		}
	}
	if (n < 1 || batch < 1 || threads < 1 || threads > THREADS_MAX) {
		fprintf(stderr, "bench/claim: bad -n, -b or -t\n");
		return 2;
	}
	struct wr_error *err = NULL;
	struct store *st = store_open(url, &err);
	if (!st)
		die("open", err);
	struct store_repo repo = {.name = (char *)"bench",
				  .url = (char *)"/src/bench"};
	store_new_id("r-", repo.id);
	if (st->ops->repo_add(st, &repo, &err) < 0)
		die("repo_add", err);
	double insert_ms = 0;
	int64_t t_created = store_now_ms();
	for (int i = 0; i < n; i++) {
		struct store_session s = {.user = (char *)"bench",
					  .prompt = (char *)"fix the test",
					  .created_ms = t_created + i};
		store_new_id("s-", s.id);
		snprintf(s.repo_id, sizeof(s.repo_id), "%s", repo.id);
		double t0 = now_ms();
		if (st->ops->session_create(st, &s, &err) < 0)
			die("session_create", err);
		insert_ms += now_ms() - t0;
	}
	struct claimer cls[THREADS_MAX];
	memset(cls, 0, sizeof(cls));
	for (int i = 0; i < threads; i++) {
		cls[i].url = url;
		cls[i].batch = batch;
		snprintf(cls[i].worker, sizeof(cls[i].worker), "w-bench-%d", i);
		struct store_worker w = {.host = (char *)"bench",
					 .max_sandboxes = n};
		snprintf(w.id, sizeof(w.id), "%s", cls[i].worker);
		if (st->ops->worker_register(st, &w, &err) < 0)
			die("worker_register", err);
	}
	pthread_t tids[THREADS_MAX];
	for (int i = 0; i < threads; i++)
		if (pthread_create(&tids[i], NULL, claim_loop, &cls[i]))
			die("pthread_create", NULL);
	size_t total = 0, claimed = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(tids[i], NULL);
		total += cls[i].n_lat;
		claimed += cls[i].claimed;
	}
	double *all = malloc((total ? total : 1) * sizeof(double));
	if (!all)
		die("memory", NULL);
	size_t k = 0;
	double sum = 0;
	for (int i = 0; i < threads; i++) {
		for (size_t j = 0; j < cls[i].n_lat; j++) {
			all[k++] = cls[i].lat[j];
			sum += cls[i].lat[j];
		}
		free(cls[i].lat);
	}
	qsort(all, total, sizeof(double), cmp_double);
#define PCT(p) (total ? all[(size_t)((double)(total - 1) * (p))] : 0.0)
	printf("claim %s n=%d batch=%d threads=%d p50=%.3f p90=%.3f "
	       "p99=%.3f mean=%.3f insert_mean=%.3f claimed=%zu\n",
	       store_url_is_pg(url) ? "postgresql" : "sqlite", n, batch,
	       threads, PCT(0.5), PCT(0.9), PCT(0.99),
	       total ? sum / (double)total : 0.0, insert_ms / n, claimed);
	free(all);
	store_close(st);
	/* every session claimed once, none twice */
	return claimed == (size_t)n ? 0 : 1;
}

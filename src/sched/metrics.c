/* metrics.c - the control plane's numbers, in Prometheus text format. */
#include "sched/internal.h"

#include "util/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Upper bounds of the latency buckets, in milliseconds (+Inf last). */
static const double bucket_le[METRIC_BUCKETS - 1] = {
    1, 2, 5, 10, 15, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 60000};

static const char *const phase_names[PHASE_MAX] = {
    [PHASE_QUEUE] = "queue_wait",    [PHASE_RESTORE] = "restore",
    [PHASE_SYNC] = "sync",	     [PHASE_SERVICES] = "services_ready",
    [PHASE_PULL] = "snapshot_pull",
    [PHASE_AGENT] = "agent_started", [PHASE_TOTAL] = "total",
};

void metrics_observe(struct control *c, enum metric_phase p, double ms)
{
	if (p >= PHASE_MAX || ms < 0)
		return;
	size_t b = 0;
	while (b < METRIC_BUCKETS - 1 && ms > bucket_le[b])
		b++;
	pthread_mutex_lock(&c->metrics_mu);
	c->m.bucket[p][b]++;
	c->m.count[p]++;
	c->m.sum_ms[p] += ms;
	pthread_mutex_unlock(&c->metrics_mu);
}

void metrics_add(struct control *c, uint64_t *counter, uint64_t n)
{
	pthread_mutex_lock(&c->metrics_mu);
	*counter += n;
	pthread_mutex_unlock(&c->metrics_mu);
}

char *control_metrics(struct control *c)
{
	int64_t counts[SESSION_STATE_MAX] = {0};
	struct wr_error *err = NULL;
	if (c->st->ops->session_count(c->st, counts, &err) < 0)
		wr_error_free(err);
	struct metrics m;
	pthread_mutex_lock(&c->metrics_mu);
	m = c->m;
	pthread_mutex_unlock(&c->metrics_mu);
	/* sandboxes alive now count towards sandbox-seconds too */
	unsigned active = 0, resting = 0;
	double live_seconds = 0;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	pthread_mutex_lock(&c->mu);
	for (struct run *r = c->runs; r; r = r->next) {
		if (r->done)
			continue;
		active++;
		if (r->resting)
			resting++;
		if (r->sandbox_start_ms)
			live_seconds += (now - r->sandbox_start_ms) / 1000.0;
	}
	pthread_mutex_unlock(&c->mu);

	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	fputs("# HELP warren_sessions Sessions by state.\n"
	      "# TYPE warren_sessions gauge\n",
	      f);
	for (int s = 0; s < SESSION_STATE_MAX; s++)
		fprintf(f, "warren_sessions{state=\"%s\"} %lld\n",
			session_state_name((enum session_state)s),
			(long long)counts[s]);
	fprintf(f,
		"# HELP warren_queue_depth Sessions waiting for a sandbox.\n"
		"# TYPE warren_queue_depth gauge\n"
		"warren_queue_depth %lld\n"
		"# HELP warren_sandboxes Sandboxes held by sessions now.\n"
		"# TYPE warren_sandboxes gauge\n"
		"warren_sandboxes{kind=\"active\"} %u\n"
		"warren_sandboxes{kind=\"resting\"} %u\n"
		"warren_sandboxes_max %u\n",
		(long long)counts[SESSION_QUEUED], active - resting, resting,
		c->cfg.max_sandboxes);
	fputs("# HELP warren_start_latency_ms Session start latency by phase "
	      "(request to the agent's first output line).\n"
	      "# TYPE warren_start_latency_ms histogram\n",
	      f);
	for (int p = 0; p < PHASE_MAX; p++) {
		uint64_t cum = 0;
		for (int b = 0; b < METRIC_BUCKETS; b++) {
			cum += m.bucket[p][b];
			if (b < METRIC_BUCKETS - 1)
				fprintf(f,
					"warren_start_latency_ms_bucket{phase="
					"\"%s\",le=\"%g\"} %llu\n",
					phase_names[p], bucket_le[b],
					(unsigned long long)cum);
			else
				fprintf(f,
					"warren_start_latency_ms_bucket{phase="
					"\"%s\",le=\"+Inf\"} %llu\n",
					phase_names[p],
					(unsigned long long)cum);
		}
		fprintf(f,
			"warren_start_latency_ms_sum{phase=\"%s\"} %.3f\n"
			"warren_start_latency_ms_count{phase=\"%s\"} %llu\n",
			phase_names[p], m.sum_ms[p], phase_names[p],
			(unsigned long long)m.count[p]);
	}
	fprintf(f,
		"# HELP warren_sandbox_seconds_total Sandbox time used by "
		"sessions.\n"
		"# TYPE warren_sandbox_seconds_total counter\n"
		"warren_sandbox_seconds_total %.3f\n"
		"# HELP warren_session_retries_total Re-provisionings after a "
		"sandbox died.\n"
		"# TYPE warren_session_retries_total counter\n"
		"warren_session_retries_total %llu\n"
		"# TYPE warren_sessions_started_total counter\n"
		"warren_sessions_started_total %llu\n"
		"# TYPE warren_sandboxes_started_total counter\n"
		"warren_sandboxes_started_total %llu\n"
		"# TYPE warren_snapshot_builds_total counter\n"
		"warren_snapshot_builds_total{result=\"ok\"} %llu\n"
		"warren_snapshot_builds_total{result=\"failed\"} %llu\n",
		m.sandbox_seconds + live_seconds, (unsigned long long)m.retries,
		(unsigned long long)m.sessions_started,
		(unsigned long long)m.sandboxes_started,
		(unsigned long long)m.snapshot_builds,
		(unsigned long long)m.snapshot_build_failures);
	fprintf(f,
		"# HELP warren_verify_total Sessions' verification outcomes.\n"
		"# TYPE warren_verify_total counter\n"
		"warren_verify_total{result=\"first_attempt\"} %llu\n"
		"warren_verify_total{result=\"after_retries\"} %llu\n"
		"warren_verify_total{result=\"failed\"} %llu\n"
		"# HELP warren_model_tokens_total Tokens of the built-in "
		"agent's model calls.\n"
		"# TYPE warren_model_tokens_total counter\n"
		"warren_model_tokens_total{kind=\"prompt\"} %llu\n"
		"warren_model_tokens_total{kind=\"completion\"} %llu\n"
		"# HELP warren_model_cost_total Model cost at the configured "
		"prices.\n"
		"# TYPE warren_model_cost_total counter\n"
		"warren_model_cost_total %.6f\n",
		(unsigned long long)m.verify_first_pass,
		(unsigned long long)m.verify_retry_pass,
		(unsigned long long)m.verify_failed,
		(unsigned long long)m.prompt_tokens,
		(unsigned long long)m.completion_tokens, m.cost);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

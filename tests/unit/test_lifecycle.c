/* test_lifecycle.c - the session state machine (session/lifecycle.c)
 * against a scripted fake: no store, no sandbox, no root. Each case
 * scripts what the operations answer and checks the trace of what the
 * machine asked for and the state the session is left in: a sandbox
 * dying in each state, lifetime and idle expiry, follow-ups, cancel in
 * each state, verification retries. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "session/lifecycle.h"

#define MAXQ 16

/* A queue of scripted answers; past its end, the default. */
struct script {
	int v[MAXQ];
	int n, next;
};

static int pop(struct script *s, int dflt)
{
	return s->next < s->n ? s->v[s->next++] : dflt;
}

#define SCRIPT(...)                                                         \
	(struct script)                                                     \
	{                                                                   \
		.v = {__VA_ARGS__},                                         \
		.n = sizeof((int[]){__VA_ARGS__}) / sizeof(int)             \
	}

struct fake {
	/* scripted answers */
	struct script provision, agent, commit, verify_pass, verify_step,
	    rest, pending, alive, backoff;
	int uncommitted;
	/* a stop that appears when the named operation has been called
	 * `stop_after` times */
	const char *stop_op;
	int stop_after;
	enum session_stop stop_kind;
	bool refuse_running;
	/* what happened */
	char trace[4096];
	int calls_of_stop_op;
	enum session_stop stop_now;
	enum session_state finished;
	char finish_why[SESSION_WHY_MAX];
	int finish_exit;
	int turns_given, agent_runs, feedback_runs, commits;
	int result_attempts;
	bool result_first, result_passed;
	unsigned deaths_said;
	uint64_t last_backoff;
};

static void t(struct fake *f, const char *op)
{
	size_t len = strlen(f->trace);
	snprintf(f->trace + len, sizeof(f->trace) - len, "%s%s",
		 len ? " " : "", op);
	if (f->stop_op && !strcmp(f->stop_op, op) &&
	    ++f->calls_of_stop_op == f->stop_after)
		f->stop_now = f->stop_kind;
}

static enum session_stop op_stop(void *ctx)
{
	return ((struct fake *)ctx)->stop_now;
}

static void op_finish(void *ctx, enum session_state to, const char *why,
		      int exit_code)
{
	struct fake *f = ctx;
	t(f, "finish");
	f->finished = to;
	snprintf(f->finish_why, sizeof(f->finish_why), "%s", why);
	f->finish_exit = exit_code;
}

static void op_sandbox_stop(void *ctx) { t(ctx, "sandbox_stop"); }
static void op_checkpoint(void *ctx) { t(ctx, "checkpoint"); }

static enum session_step op_provision(void *ctx, char *why)
{
	struct fake *f = ctx;
	t(f, "provision");
	enum session_step e = pop(&f->provision, SESSION_STEP_OK);
	if (e != SESSION_STEP_OK)
		snprintf(why, SESSION_WHY_MAX, "no snapshot: build failed");
	if (f->stop_now != SESSION_STOP_NONE && e == SESSION_STEP_OK)
		e = SESSION_STEP_STOPPED;
	return e;
}

static bool op_to_running(void *ctx)
{
	struct fake *f = ctx;
	t(f, "to_running");
	return !f->refuse_running;
}

static int op_next_turn(void *ctx, struct session_turn *turn, char *why)
{
	struct fake *f = ctx;
	t(f, "next_turn");
	int p = pop(&f->pending, 0);
	if (p < 0) {
		snprintf(why, SESSION_WHY_MAX, "messages: store gone");
		return -1;
	}
	if (p == 0)
		return 0;
	turn->number = ++f->turns_given;
	turn->prompt = "do it";
	return 1;
}

static int op_uncommitted(void *ctx)
{
	struct fake *f = ctx;
	t(f, "uncommitted");
	int u = f->uncommitted;
	f->uncommitted = 0;
	return u;
}

static enum session_step op_agent(void *ctx, const struct session_turn *turn,
				  int *exit_code, char *why)
{
	struct fake *f = ctx;
	t(f, turn->feedback ? "agent(feedback)" : "agent");
	f->agent_runs++;
	if (turn->feedback)
		f->feedback_runs++;
	enum session_step e = pop(&f->agent, SESSION_STEP_OK);
	if (f->stop_now != SESSION_STOP_NONE)
		e = SESSION_STEP_STOPPED;
	*exit_code = e == SESSION_STEP_FAILED ? 3 : 0;
	if (e == SESSION_STEP_FAILED)
		snprintf(why, SESSION_WHY_MAX, "agent exited with status 3");
	if (e == SESSION_STEP_DIED)
		snprintf(why, SESSION_WHY_MAX, "sandbox died (its init is gone)");
	return e;
}

static void op_turn_done(void *ctx, const struct session_turn *turn,
			 int exit_code)
{
	(void)turn;
	(void)exit_code;
	t(ctx, "turn_done");
}

static enum session_step op_commit(void *ctx, const struct session_turn *turn,
				   char *why)
{
	(void)turn;
	struct fake *f = ctx;
	t(f, "commit");
	f->commits++;
	enum session_step e = pop(&f->commit, SESSION_STEP_OK);
	if (e == SESSION_STEP_FAILED)
		snprintf(why, SESSION_WHY_MAX,
			 "result: a gitlink is not allowed");
	return e;
}

static bool op_has_verify(void *ctx)
{
	(void)ctx;
	return true;
}

static void op_verifying(void *ctx, bool on, int attempt)
{
	(void)attempt;
	t(ctx, on ? "verifying" : "running");
}

static enum session_step op_verify(void *ctx, const struct session_turn *turn,
				   int attempt, bool *passed, char *why)
{
	(void)turn;
	(void)attempt;
	struct fake *f = ctx;
	t(f, "verify");
	enum session_step e = pop(&f->verify_step, SESSION_STEP_OK);
	*passed = pop(&f->verify_pass, 1);
	if (f->stop_now != SESSION_STOP_NONE)
		e = SESSION_STEP_STOPPED;
	if (e == SESSION_STEP_FAILED)
		snprintf(why, SESSION_WHY_MAX, "verify: sandbox create failed");
	return e;
}

static bool op_alive(void *ctx)
{
	struct fake *f = ctx;
	return pop(&f->alive, 1);
}

static void op_result(void *ctx, const struct session_turn *turn, int attempts,
		      bool first_passed, bool passed)
{
	(void)turn;
	struct fake *f = ctx;
	t(f, "result");
	f->result_attempts = attempts;
	f->result_first = first_passed;
	f->result_passed = passed;
}

static void op_review(void *ctx, int exit_code)
{
	(void)exit_code;
	t(ctx, "review");
}

static bool op_rest(void *ctx)
{
	struct fake *f = ctx;
	t(f, "rest");
	return pop(&f->rest, 0);
}

static void op_rested(void *ctx) { t(ctx, "rested"); }

static void op_interrupted(void *ctx, unsigned deaths, const char *why)
{
	(void)why;
	struct fake *f = ctx;
	t(f, deaths ? "interrupted" : "interrupted(shutdown)");
	f->deaths_said = deaths;
}

static bool op_backoff(void *ctx, int attempt, uint64_t ms)
{
	(void)attempt;
	struct fake *f = ctx;
	t(f, "backoff");
	f->last_backoff = ms;
	return pop(&f->backoff, 1) && f->stop_now == SESSION_STOP_NONE;
}

static bool op_reprovision(void *ctx)
{
	t(ctx, "reprovision");
	return true;
}

static const struct session_ops fake_ops = {
    .stop = op_stop,
    .finish = op_finish,
    .sandbox_stop = op_sandbox_stop,
    .checkpoint = op_checkpoint,
    .provision = op_provision,
    .to_running = op_to_running,
    .next_turn = op_next_turn,
    .uncommitted = op_uncommitted,
    .agent = op_agent,
    .turn_done = op_turn_done,
    .commit = op_commit,
    .has_verify = op_has_verify,
    .verifying = op_verifying,
    .verify = op_verify,
    .alive = op_alive,
    .result = op_result,
    .review = op_review,
    .rest = op_rest,
    .rested = op_rested,
    .interrupted = op_interrupted,
    .backoff = op_backoff,
    .reprovision = op_reprovision,
};

static const struct session_policy policy = {
    .retry_max = 2,
    .retry_backoff_ms = 1000,
    .backoff_max_ms = 60000,
    .verify_retries = 2,
};

static enum session_state run(struct fake *f)
{
	f->finished = SESSION_STATE_MAX;
	return session_lifecycle_run(&fake_ops, f, &policy);
}

#define HAPPY_TURN                                                          \
	"next_turn agent turn_done commit verifying verify result next_turn " \
	"uncommitted"

static void one_turn_to_review(void **state)
{
	(void)state;
	struct fake f = {.pending = SCRIPT(1)};
	assert_int_equal(run(&f), SESSION_REVIEW);
	assert_string_equal(f.trace, "provision to_running " HAPPY_TURN
				     " review rest sandbox_stop rested");
	assert_int_equal(f.finished, SESSION_STATE_MAX);
	assert_int_equal(f.result_attempts, 1);
	assert_true(f.result_first && f.result_passed);
}

static void verification_retries_until_it_passes(void **state)
{
	(void)state;
	/* fails, fails, passes: the agent runs twice more on the feedback,
	 * each attempt a new commit */
	struct fake f = {.pending = SCRIPT(1), .verify_pass = SCRIPT(0, 0, 1)};
	assert_int_equal(run(&f), SESSION_REVIEW);
	assert_int_equal(f.agent_runs, 3);
	assert_int_equal(f.feedback_runs, 2);
	assert_int_equal(f.commits, 3);
	assert_int_equal(f.result_attempts, 3);
	assert_false(f.result_first);
	assert_true(f.result_passed);
	assert_non_null(strstr(f.trace, "verify running agent(feedback) "
					"commit verifying verify"));
}

static void verification_retries_run_out(void **state)
{
	(void)state;
	/* retries 2: three attempts, then review with the failure */
	struct fake f = {.pending = SCRIPT(1),
			 .verify_pass = SCRIPT(0, 0, 0, 0)};
	assert_int_equal(run(&f), SESSION_REVIEW);
	assert_int_equal(f.result_attempts, 3);
	assert_false(f.result_passed);
	assert_int_equal(f.feedback_runs, 2);
}

static void follow_ups_run_in_the_resting_sandbox(void **state)
{
	(void)state;
	struct fake f = {.pending = SCRIPT(1, 0, 1, 0), .rest = SCRIPT(1, 0)};
	assert_int_equal(run(&f), SESSION_REVIEW);
	assert_int_equal(f.turns_given, 2);
	assert_int_equal(f.commits, 2);
	/* one provisioning only: the follow-up took the same sandbox */
	assert_null(strstr(strstr(f.trace, "rest") + 4, "provision"));
}

static void idle_expiry_in_review_keeps_the_result(void **state)
{
	(void)state;
	/* the rest ends without a stop (idle, reclaim): review, no sandbox */
	struct fake f = {.pending = SCRIPT(1)};
	assert_int_equal(run(&f), SESSION_REVIEW);
	assert_non_null(strstr(f.trace, "rest sandbox_stop rested"));
	assert_int_equal(f.finished, SESSION_STATE_MAX);
}

static void lifetime_expiry_while_running_checkpoints(void **state)
{
	(void)state;
	struct fake f = {.pending = SCRIPT(1), .stop_op = "agent",
			 .stop_after = 1, .stop_kind = SESSION_STOP_EXPIRE};
	assert_int_equal(run(&f), SESSION_EXPIRED);
	assert_non_null(strstr(f.trace, "agent checkpoint sandbox_stop finish"));
	assert_non_null(strstr(f.finish_why, "lifetime reached"));
}

static void lifetime_expiry_in_review_leaves_it_in_review(void **state)
{
	(void)state;
	struct fake f = {.pending = SCRIPT(1), .stop_op = "rest",
			 .stop_after = 1, .stop_kind = SESSION_STOP_EXPIRE};
	assert_int_equal(run(&f), SESSION_REVIEW);
	assert_null(strstr(f.trace, "checkpoint"));
	assert_int_equal(f.finished, SESSION_STATE_MAX);
}

/* cancel in each state: provisioning, running, verifying, review,
 * interrupted (its back-off), and between provisioning and running */
static void cancel_in_each_state(void **state)
{
	(void)state;
	struct {
		const char *op;
		int after;
		struct script agent;
		const char *tail;
	} cases[] = {
	    {"provision", 1, {{0}, 0, 0}, "provision sandbox_stop finish"},
	    {"agent", 1, {{0}, 0, 0}, "agent sandbox_stop finish"},
	    {"verify", 1, {{0}, 0, 0}, "verify sandbox_stop finish"},
	    {"rest", 1, {{0}, 0, 0}, "rest sandbox_stop finish"},
	    {"backoff", 1, SCRIPT(SESSION_STEP_DIED), "backoff finish"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fake f = {.pending = SCRIPT(1),
				 .agent = cases[i].agent,
				 .stop_op = cases[i].op,
				 .stop_after = cases[i].after,
				 .stop_kind = SESSION_STOP_CANCEL};
		enum session_state left = run(&f);
		if (left != SESSION_CANCELLED ||
		    !strstr(f.trace, cases[i].tail))
			fail_msg("cancel at %s: left %s, trace '%s'",
				 cases[i].op, session_state_name(left),
				 f.trace);
		assert_string_equal(f.finish_why, "cancelled by user");
	}
	/* cancelled while provisioning: the store refuses running */
	struct fake f = {.pending = SCRIPT(1), .refuse_running = true,
			 .stop_now = SESSION_STOP_NONE};
	f.stop_op = "to_running";
	f.stop_after = 1;
	f.stop_kind = SESSION_STOP_CANCEL;
	assert_int_equal(run(&f), SESSION_CANCELLED);
	assert_string_equal(f.trace,
			    "provision to_running sandbox_stop finish");
	/* a cancel already there: nothing is provisioned */
	struct fake g = {.stop_now = SESSION_STOP_CANCEL};
	assert_int_equal(run(&g), SESSION_CANCELLED);
	assert_string_equal(g.trace, "finish");
}

/* the sandbox dies in each state where it lives: provisioning (a
 * failure there fails the session: nothing ran yet), running, verifying
 * (found dead after a failed attempt), committing */
static void sandbox_death_in_each_state(void **state)
{
	(void)state;
	/* running: interrupted, back-off, the same workspace again (the
	 * turn's messages were not consumed: pending again) */
	struct fake r = {.pending = SCRIPT(1, 1, 0),
			 .agent = SCRIPT(SESSION_STEP_DIED)};
	assert_int_equal(run(&r), SESSION_REVIEW);
	assert_non_null(strstr(r.trace, "agent sandbox_stop interrupted "
					"backoff reprovision provision "
					"to_running next_turn agent"));
	assert_int_equal(r.deaths_said, 1);
	assert_int_equal(r.last_backoff, 1000);
	/* verifying: a failed attempt, then the sandbox is gone */
	struct fake v = {.pending = SCRIPT(1, 0), .verify_pass = SCRIPT(0),
			 .alive = SCRIPT(0)};
	assert_int_equal(run(&v), SESSION_REVIEW);
	assert_non_null(strstr(v.trace, "verify sandbox_stop interrupted"));
	/* committing: the export found no sandbox */
	struct fake c = {.pending = SCRIPT(1, 0),
			 .commit = SCRIPT(SESSION_STEP_DIED)};
	assert_int_equal(run(&c), SESSION_REVIEW);
	assert_non_null(strstr(c.trace, "commit sandbox_stop interrupted"));
	/* provisioning: the session fails with the cause */
	struct fake p = {.provision = SCRIPT(SESSION_STEP_FAILED)};
	assert_int_equal(run(&p), SESSION_FAILED);
	assert_string_equal(p.finish_why, "no snapshot: build failed");
	assert_string_equal(p.trace, "provision sandbox_stop finish");
}

static void deaths_past_the_retries_fail_it(void **state)
{
	(void)state;
	struct fake f = {.pending = SCRIPT(1, 1, 1),
			 .agent = SCRIPT(SESSION_STEP_DIED, SESSION_STEP_DIED,
					 SESSION_STEP_DIED)};
	assert_int_equal(run(&f), SESSION_FAILED);
	assert_int_equal(f.deaths_said, 3);
	assert_non_null(strstr(f.finish_why, "gave up after 3 sandbox deaths"));
	/* the back-off doubled: 1 s, then 2 s */
	assert_int_equal(f.last_backoff, 2000);
}

static void shutdown_leaves_it_interrupted(void **state)
{
	(void)state;
	struct fake f = {.pending = SCRIPT(1), .stop_op = "agent",
			 .stop_after = 1, .stop_kind = SESSION_STOP_SHUTDOWN};
	assert_int_equal(run(&f), SESSION_INTERRUPTED);
	assert_non_null(strstr(f.trace, "sandbox_stop interrupted(shutdown)"));
	assert_null(strstr(f.trace, "checkpoint"));
	/* in review, a shutdown leaves it there */
	struct fake g = {.pending = SCRIPT(1), .stop_op = "rest",
			 .stop_after = 1, .stop_kind = SESSION_STOP_SHUTDOWN};
	assert_int_equal(run(&g), SESSION_REVIEW);
}

static void failures_end_it_with_their_cause(void **state)
{
	(void)state;
	struct fake a = {.pending = SCRIPT(1),
			 .agent = SCRIPT(SESSION_STEP_FAILED)};
	assert_int_equal(run(&a), SESSION_FAILED);
	assert_string_equal(a.finish_why, "agent exited with status 3");
	assert_int_equal(a.finish_exit, 3);
	assert_non_null(strstr(a.trace, "agent turn_done sandbox_stop finish"));
	struct fake c = {.pending = SCRIPT(1),
			 .commit = SCRIPT(SESSION_STEP_FAILED)};
	assert_int_equal(run(&c), SESSION_FAILED);
	assert_string_equal(c.finish_why, "result: a gitlink is not allowed");
	struct fake v = {.pending = SCRIPT(1),
			 .verify_step = SCRIPT(SESSION_STEP_FAILED)};
	assert_int_equal(run(&v), SESSION_FAILED);
	assert_string_equal(v.finish_why, "verify: sandbox create failed");
	struct fake m = {.pending = SCRIPT(-1)};
	assert_int_equal(run(&m), SESSION_FAILED);
	assert_string_equal(m.finish_why, "messages: store gone");
}

static void an_uncommitted_turn_is_committed_first(void **state)
{
	(void)state;
	/* the agent of turn 2 finished, then the server stopped: at the next
	 * start nothing is pending and turn 2 is committed and verified */
	struct fake f = {.uncommitted = 2};
	assert_int_equal(run(&f), SESSION_REVIEW);
	assert_int_equal(f.agent_runs, 0);
	assert_string_equal(f.trace,
			    "provision to_running next_turn uncommitted commit "
			    "verifying verify result review rest sandbox_stop "
			    "rested");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(one_turn_to_review),
	    cmocka_unit_test(verification_retries_until_it_passes),
	    cmocka_unit_test(verification_retries_run_out),
	    cmocka_unit_test(follow_ups_run_in_the_resting_sandbox),
	    cmocka_unit_test(idle_expiry_in_review_keeps_the_result),
	    cmocka_unit_test(lifetime_expiry_while_running_checkpoints),
	    cmocka_unit_test(lifetime_expiry_in_review_leaves_it_in_review),
	    cmocka_unit_test(cancel_in_each_state),
	    cmocka_unit_test(sandbox_death_in_each_state),
	    cmocka_unit_test(deaths_past_the_retries_fail_it),
	    cmocka_unit_test(shutdown_leaves_it_interrupted),
	    cmocka_unit_test(failures_end_it_with_their_cause),
	    cmocka_unit_test(an_uncommitted_turn_is_committed_first),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

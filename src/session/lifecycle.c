/* lifecycle.c - the session state machine (lifecycle.h): one function per
 * state, each returning the next; the operations do the work. */
#include "session/lifecycle.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* The machine's own state: what carries over from one state to the next. */
struct machine {
	const struct session_ops *ops;
	void *ctx;
	const struct session_policy *policy;
	unsigned deaths;
	int exit_code; /* the last agent's status, INT_MIN: none yet */
	char why[SESSION_WHY_MAX];
	enum session_state left; /* where the session was left, once done */
	bool done;
};

static enum session_state end_in(struct machine *m, enum session_state s)
{
	m->left = s;
	m->done = true;
	return s;
}

static enum session_state finish(struct machine *m, enum session_state to,
				 const char *why, int exit_code)
{
	m->ops->finish(m->ctx, to, why, exit_code);
	return end_in(m, to);
}

/* What a stop means once the sandbox is gone: cancel ends the session,
 * expiry ends it expired, a shutdown leaves it interrupted (resumed at the
 * next start) - or in review, where it already rests. */
static enum session_state stopped(struct machine *m, enum session_state in)
{
	switch (m->ops->stop(m->ctx)) {
	case SESSION_STOP_CANCEL:
		return finish(m, SESSION_CANCELLED, "cancelled by user",
			      INT_MIN);
	case SESSION_STOP_EXPIRE:
		return finish(m, SESSION_EXPIRED,
			      "lifetime reached (workspace checkpointed)",
			      INT_MIN);
	case SESSION_STOP_SHUTDOWN:
	case SESSION_STOP_NONE:
		break;
	}
	if (in == SESSION_REVIEW)
		return end_in(m, SESSION_REVIEW);
	m->ops->interrupted(m->ctx, 0, "server shutdown");
	return end_in(m, SESSION_INTERRUPTED);
}

/* ---- provisioning --------------------------------------------------- */

static enum session_state on_provisioning(struct machine *m)
{
	const struct session_ops *ops = m->ops;
	if (ops->stop(m->ctx) != SESSION_STOP_NONE)
		return stopped(m, SESSION_PROVISIONING);
	m->why[0] = '\0';
	enum session_step e = ops->provision(m->ctx, m->why);
	if (e != SESSION_STEP_OK) {
		ops->sandbox_stop(m->ctx);
		if (e == SESSION_STEP_STOPPED ||
		    ops->stop(m->ctx) != SESSION_STOP_NONE)
			return stopped(m, SESSION_PROVISIONING);
		return finish(m, SESSION_FAILED, m->why, INT_MIN);
	}
	if (!ops->to_running(m->ctx)) {
		/* cancelled while provisioning */
		ops->sandbox_stop(m->ctx);
		return stopped(m, SESSION_PROVISIONING);
	}
	return SESSION_RUNNING;
}

/* ---- running and verifying ----------------------------------------- */

/* After the agent: its work tree becomes one commit, which Warren
 * verifies; a failure goes back to the agent for up to verify_retries
 * more attempts, each ending in a new commit verified again. */
static enum session_step commit_and_verify(struct machine *m,
					   const struct session_turn *turn)
{
	const struct session_ops *ops = m->ops;
	int attempts = 0;
	bool first_passed = false, passed = false;
	for (;;) {
		enum session_step e = ops->commit(m->ctx, turn, m->why);
		if (e != SESSION_STEP_OK)
			return e;
		if (!ops->has_verify(m->ctx))
			break;
		ops->verifying(m->ctx, true, attempts);
		e = ops->verify(m->ctx, turn, attempts + 1, &passed, m->why);
		if (e != SESSION_STEP_OK)
			return ops->stop(m->ctx) != SESSION_STOP_NONE
				   ? SESSION_STEP_STOPPED
				   : e;
		attempts++;
		if (attempts == 1)
			first_passed = passed;
		if (ops->stop(m->ctx) != SESSION_STOP_NONE)
			return SESSION_STEP_STOPPED;
		if (passed || (unsigned)attempts > m->policy->verify_retries)
			break;
		if (!ops->alive(m->ctx)) {
			snprintf(m->why, sizeof(m->why),
				 "sandbox died (its init is gone)");
			return SESSION_STEP_DIED;
		}
		/* back to the agent with what failed */
		ops->verifying(m->ctx, false, attempts);
		struct session_turn again = *turn;
		again.feedback = attempts;
		e = ops->agent(m->ctx, &again, &m->exit_code, m->why);
		if (e != SESSION_STEP_OK)
			return e;
	}
	ops->result(m->ctx, turn, attempts, first_passed, passed);
	return SESSION_STEP_OK;
}

/* Turns while messages are pending, each ending committed (and
 * verified); OK when none is left. */
static enum session_step run_turns(struct machine *m)
{
	const struct session_ops *ops = m->ops;
	for (;;) {
		if (ops->stop(m->ctx) != SESSION_STOP_NONE)
			return SESSION_STEP_STOPPED;
		struct session_turn turn = {0};
		int pending = ops->next_turn(m->ctx, &turn, m->why);
		if (pending < 0)
			return SESSION_STEP_FAILED;
		if (pending == 0) {
			/* a turn whose agent finished but whose result was
			 * not committed (a death or a stop in between) */
			int left = ops->uncommitted(m->ctx);
			if (left > 0) {
				struct session_turn t = {.number = left};
				return commit_and_verify(m, &t);
			}
			return SESSION_STEP_OK;
		}
		enum session_step e =
		    ops->agent(m->ctx, &turn, &m->exit_code, m->why);
		if (e == SESSION_STEP_DIED || e == SESSION_STEP_STOPPED)
			return e;
		ops->turn_done(m->ctx, &turn, m->exit_code);
		if (e == SESSION_STEP_FAILED)
			return e;
		e = commit_and_verify(m, &turn);
		if (e != SESSION_STEP_OK)
			return e;
	}
}

static enum session_state on_running(struct machine *m)
{
	const struct session_ops *ops = m->ops;
	m->why[0] = '\0';
	switch (run_turns(m)) {
	case SESSION_STEP_OK:
		return SESSION_REVIEW;
	case SESSION_STEP_FAILED:
		ops->sandbox_stop(m->ctx);
		return finish(m, SESSION_FAILED, m->why, m->exit_code);
	case SESSION_STEP_STOPPED:
		if (ops->stop(m->ctx) == SESSION_STOP_EXPIRE)
			ops->checkpoint(m->ctx);
		ops->sandbox_stop(m->ctx);
		return stopped(m, SESSION_RUNNING);
	case SESSION_STEP_DIED:
		break;
	}
	return SESSION_INTERRUPTED;
}

/* ---- review ---------------------------------------------------------- */

static enum session_state on_review(struct machine *m)
{
	const struct session_ops *ops = m->ops;
	ops->review(m->ctx, m->exit_code);
	if (ops->rest(m->ctx))
		return SESSION_RUNNING; /* a follow-up: the same sandbox */
	/* idle, reclaimed, expired or shutdown: the session stays in review
	 * without a sandbox; cancelled: it ends */
	ops->sandbox_stop(m->ctx);
	if (ops->stop(m->ctx) == SESSION_STOP_CANCEL)
		return finish(m, SESSION_CANCELLED, "cancelled by user",
			      INT_MIN);
	ops->rested(m->ctx);
	return end_in(m, SESSION_REVIEW);
}

/* ---- interrupted ------------------------------------------------------ */

/* The sandbox died: interrupted, then the same workspace in a new sandbox
 * after a back-off, at most retry_max times. */
static enum session_state on_interrupted(struct machine *m)
{
	const struct session_ops *ops = m->ops;
	ops->sandbox_stop(m->ctx);
	m->deaths++;
	ops->interrupted(m->ctx, m->deaths, m->why);
	if (m->deaths > m->policy->retry_max) {
		char gave_up[SESSION_WHY_MAX + 64];
		snprintf(gave_up, sizeof(gave_up),
			 "gave up after %u sandbox deaths: %s", m->deaths,
			 m->why);
		return finish(m, SESSION_FAILED, gave_up, INT_MIN);
	}
	uint64_t backoff = m->policy->retry_backoff_ms;
	for (unsigned i = 1; i < m->deaths && backoff < m->policy->backoff_max_ms;
	     i++)
		backoff *= 2;
	if (backoff > m->policy->backoff_max_ms)
		backoff = m->policy->backoff_max_ms;
	if (!ops->backoff(m->ctx, (int)m->deaths + 1, backoff))
		return stopped(m, SESSION_INTERRUPTED);
	if (!ops->reprovision(m->ctx))
		return end_in(m, SESSION_INTERRUPTED);
	return SESSION_PROVISIONING;
}

enum session_state session_lifecycle_run(const struct session_ops *ops,
					 void *ctx,
					 const struct session_policy *policy)
{
	struct machine m = {
	    .ops = ops,
	    .ctx = ctx,
	    .policy = policy,
	    .exit_code = INT_MIN,
	};
	enum session_state s = SESSION_PROVISIONING;
	while (!m.done) {
		switch (s) {
		case SESSION_PROVISIONING:
			s = on_provisioning(&m);
			break;
		case SESSION_RUNNING:
		case SESSION_VERIFYING:
			s = on_running(&m);
			break;
		case SESSION_REVIEW:
			s = on_review(&m);
			break;
		case SESSION_INTERRUPTED:
			s = on_interrupted(&m);
			break;
		default:
			/* no other state is the runner's to drive */
			return end_in(&m, s);
		}
	}
	return m.left;
}

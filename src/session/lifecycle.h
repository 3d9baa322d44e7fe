/* lifecycle.h - a session's life as a state machine, one function per state.
 *
 * The session lifecycle of ARCHITECTURE.md, for one admitted session:
 *
 *   provisioning -> running <-> verifying -> review -> (follow-up) running
 *        ^             |                       |
 *        |             v (sandbox died)        v (cancel, idle, expiry)
 *        +------- interrupted                 ends, or rests in review
 *
 * session_lifecycle_run() drives it: each state's function does its work
 * through the operations of a struct session_ops and returns the next
 * state. Everything with an effect outside - the store, sandboxes, the
 * agent, Warren's verification, the clock - is an operation, so the
 * lifecycle has no I/O of its own and is tested against fakes, without
 * root (tests/unit/test_lifecycle.c). The control plane's runner
 * (sched/runner.c) fills the table with the real ones.
 *
 * Strings the operations fill ("why") are the caller's buffers of
 * SESSION_WHY_MAX bytes. */
#ifndef WR_SESSION_LIFECYCLE_H
#define WR_SESSION_LIFECYCLE_H

#include "store/store.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SESSION_WHY_MAX 1024

/* What an operation that does work says. */
enum session_step {
	SESSION_STEP_OK,
	SESSION_STEP_FAILED,  /* the session fails; why says why */
	SESSION_STEP_DIED,    /* its sandbox died: interrupted, then again */
	SESSION_STEP_STOPPED, /* a stop came (cancel, expiry, shutdown) */
};

/* Why the session must stop, if it must. */
enum session_stop {
	SESSION_STOP_NONE,
	SESSION_STOP_CANCEL,   /* the user cancelled: it ends cancelled */
	SESSION_STOP_EXPIRE,   /* its lifetime is over: checkpoint, expired */
	SESSION_STOP_SHUTDOWN, /* the server stops: interrupted, resumed */
};

/* One turn of the agent. */
struct session_turn {
	int number;	  /* 1, 2, ... */
	const char *prompt; /* the turn's messages (the operations' own) */
	int feedback;	  /* > 0: the agent runs again on verification
			   * attempt `feedback`'s failure */
};

struct session_ops {
	/* ---- stops and the end */
	enum session_stop (*stop)(void *ctx);
	/* The final state, in the store (the sandbox is gone already). */
	void (*finish)(void *ctx, enum session_state to, const char *why,
		       int exit_code);
	void (*sandbox_stop)(void *ctx);
	/* At expiry, before the sandbox goes: the workspace kept. */
	void (*checkpoint)(void *ctx);

	/* ---- provisioning */
	/* The snapshot, the limits, the sandbox: OK, FAILED, STOPPED. */
	enum session_step (*provision)(void *ctx, char *why);
	/* provisioning -> running in the store; false: refused (the session
	 * was cancelled meanwhile). */
	bool (*to_running)(void *ctx);

	/* ---- turns */
	/* The next turn's pending messages: 1 (turn filled), 0 (none), or
	 * -1 (why). A turn cut short by a sandbox death keeps its number. */
	int (*next_turn)(void *ctx, struct session_turn *turn, char *why);
	/* The last turn that ran to its end without a commit (a death or a
	 * stop between the two), else 0. */
	int (*uncommitted)(void *ctx);
	/* One run of the agent: OK (exit 0), FAILED, DIED, STOPPED;
	 * *exit_code its status when it ran. */
	enum session_step (*agent)(void *ctx, const struct session_turn *turn,
				   int *exit_code, char *why);
	/* The turn's messages are consumed, its end recorded. */
	void (*turn_done)(void *ctx, const struct session_turn *turn,
			  int exit_code);
	/* The work tree becomes the result commit: OK, FAILED (refused or
	 * broken), DIED. */
	enum session_step (*commit)(void *ctx, const struct session_turn *turn,
				    char *why);
	bool (*has_verify)(void *ctx);
	/* running <-> verifying, in the store (attempt: the one just
	 * failed, going back to running). */
	void (*verifying)(void *ctx, bool on, int attempt);
	/* Warren's verification of the last commit, in a fresh sandbox:
	 * OK with *passed, FAILED (it could not run), STOPPED. */
	enum session_step (*verify)(void *ctx, const struct session_turn *turn,
				    int attempt, bool *passed, char *why);
	/* Does the session's sandbox still live? */
	bool (*alive)(void *ctx);
	/* The verified (or unverified: attempts 0) result is recorded. */
	void (*result)(void *ctx, const struct session_turn *turn,
		       int attempts, bool first_passed, bool passed);

	/* ---- review */
	/* -> review, in the store, with the outcome. */
	void (*review)(void *ctx, int exit_code);
	/* Rests in review; true when a follow-up came (the session is
	 * running it: review -> running done), false when the rest ended
	 * (idle, cancel, expiry, shutdown, reclaim). */
	bool (*rest)(void *ctx);
	/* The rest ended and the session stays in review without a
	 * sandbox. */
	void (*rested)(void *ctx);

	/* ---- interruptions */
	/* -> interrupted, in the store: deaths > 0 after a sandbox died
	 * (why), 0 at shutdown. */
	void (*interrupted)(void *ctx, unsigned deaths, const char *why);
	/* Waits ms before the next attempt (attempt: its number); false if
	 * a stop came. */
	bool (*backoff)(void *ctx, int attempt, uint64_t ms);
	/* interrupted -> provisioning, in the store; false: refused. */
	bool (*reprovision)(void *ctx);
};

struct session_policy {
	unsigned retry_max;	   /* re-provisionings after deaths */
	uint64_t retry_backoff_ms; /* the first wait, doubled each time */
	uint64_t backoff_max_ms;
	unsigned verify_retries; /* agent attempts after a failed verify */
};

/* Runs the session from provisioning until it ends or rests; returns the
 * state it was left in (failed, cancelled, expired, review, interrupted).
 * attempts: the session's provisionings so far. */
enum session_state session_lifecycle_run(const struct session_ops *ops,
					 void *ctx,
					 const struct session_policy *policy);

#endif

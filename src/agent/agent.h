/* agent.h - the built-in agent loop: the model proposes, tools act in the
 * sandbox, until the model calls finish or a budget ends the turn.
 *
 * The conversation is an OpenAI chat-completions "messages" array. The
 * caller owns it and makes it durable: every message the loop adds is
 * handed to record() before the loop goes on, so a turn interrupted at any
 * point (sandbox death, server restart) resumes from what was recorded —
 * agent_resume_pending() re-runs tool calls that have no result yet. */
#ifndef WR_AGENT_AGENT_H
#define WR_AGENT_AGENT_H

#include "agent/provider.h"
#include "agent/tools.h"
#include "meter/meter.h"
#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct agent_budget { /* 0: no limit */
	unsigned max_model_calls; /* per turn */
	uint64_t max_tokens;	  /* per session, prompt + completion */
	double max_cost;	  /* per session, in the prices' currency */
	uint64_t max_wall_ms;	  /* per turn */
};

struct agent_usage {
	uint64_t prompt_tokens, completion_tokens, cached_tokens;
	double cost;
	unsigned model_calls, tool_calls, retries;
	double model_ms, tool_ms; /* time in model calls and in tools */
};

enum agent_end {
	AGENT_FINISHED, /* the model called finish */
	AGENT_ANSWERED, /* the model stopped without tools: taken as done */
	AGENT_BUDGET,	/* a budget ran out: the turn ends cleanly */
	AGENT_STOPPED,	/* should_stop said so (cancel, expiry, shutdown) */
	AGENT_END_MAX
};

struct agent_loop {
	struct provider *provider;
	const struct tools_config *tools;
	const struct tools_exec *exec;
	struct agent_budget budget;
	struct meter_prices prices; /* meter.h: the cost of a call */
	/* usage of the session so far (turns before this one); updated */
	struct agent_usage *usage;
	/* stores one message durably (the loop's copy stays its own) */
	int (*record)(void *ctx, const json_t *message,
		      const struct agent_usage *usage);
	/* a tool produced an artifact file (screenshot) */
	void (*artifact)(void *ctx, const char *path);
	bool (*should_stop)(void *ctx);
	void *ctx;
};

struct agent_result {
	enum agent_end end;
	char *summary; /* finish's summary, the last answer, or why */
};

/* The system message for a session: where things are, the tools, the
 * verification, when to finish. */
json_t *agent_system_message(const char *repo_name, bool has_verify);

/* Runs tool calls of the last assistant message in messages that have no
 * tool result yet (a turn interrupted mid-tool). */
int agent_resume_pending(const struct agent_loop *l, json_t *messages,
			 struct agent_result *res, bool *finished,
			 struct wr_error **err);

/* Runs the loop on messages (which end with the user's prompt or tool
 * results) until finish, an answer without tools, a budget or a stop.
 * -errno when the provider or the sandbox fails (err says which). */
int agent_run(const struct agent_loop *l, json_t *messages,
	      struct agent_result *res, struct wr_error **err);
void agent_result_clear(struct agent_result *res);
const char *agent_end_name(enum agent_end e);

#endif

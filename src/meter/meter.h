/* meter.h - what a model call costs and whether a session may make
 * another: the one metering code under the built-in agent (agent/loop.c)
 * and the model gateway (gateway/), so a CLI agent's calls and the
 * built-in agent's are counted and capped alike.
 *
 * Prices are per million tokens. Cached prompt tokens (a provider's
 * prompt cache: OpenAI's prompt_tokens_details.cached_tokens, Anthropic's
 * cache_read_input_tokens) are part of the prompt tokens and cost the
 * cached price, or the prompt price where none is set. Pure functions,
 * no locks: the caller owns the totals. */
#ifndef WR_METER_METER_H
#define WR_METER_METER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* The model APIs' wire formats, each with its own usage object. */
enum meter_wire {
	METER_WIRE_CHAT,      /* OpenAI Chat Completions */
	METER_WIRE_RESPONSES, /* OpenAI Responses */
	METER_WIRE_MESSAGES,  /* Anthropic Messages */
	METER_WIRE_MAX
};

struct meter_prices { /* per million tokens; cached 0: the prompt price */
	double prompt;
	double completion;
	double cached;
};

/* One call's usage as the upstream reported it. */
struct meter_tokens {
	uint64_t prompt;     /* every prompt token, cached ones included */
	uint64_t completion; /* output, reasoning included */
	uint64_t cached;     /* of prompt, read from a prompt cache */
};

/* What a session has used so far. */
struct meter_totals {
	uint64_t prompt_tokens, completion_tokens, cached_tokens;
	double cost;
	unsigned model_calls;
};

/* 0 in a field: no limit there. */
struct meter_budget {
	uint64_t max_tokens; /* prompt + completion */
	double max_cost;
	unsigned max_model_calls;
};

/* "chat_completions", "responses", "messages"; NULL out of range. */
const char *meter_wire_name(enum meter_wire w);

/* Reads a usage object of wire w into *out, over what *out holds (a
 * field the object lacks keeps its value: Anthropic's stream brings the
 * prompt's tokens first and the completion's at the end):
 *   chat       {"prompt_tokens", "completion_tokens",
 *               "prompt_tokens_details": {"cached_tokens"}}
 *   responses  {"input_tokens", "output_tokens",
 *               "input_tokens_details": {"cached_tokens"}}
 *   messages   {"input_tokens", "output_tokens", "cache_read_input_tokens",
 *               "cache_creation_input_tokens"}: the prompt is all three
 *               inputs (Anthropic counts cached ones apart)
 * Negative or non-integer counts are 0. false if u is not an object. */
bool meter_usage_read(enum meter_wire w, const json_t *u,
		      struct meter_tokens *out);

/* The cost of one call. */
double meter_cost(const struct meter_prices *p, const struct meter_tokens *t);
/* Adds one call (its tokens, its cost, one model call) to the totals;
 * returns the call's cost. */
double meter_charge(struct meter_totals *tot, const struct meter_prices *p,
		    const struct meter_tokens *t);
/* NULL while the budget has room for another call, else why not
 * ("the session's token budget is spent (2000000 of 2000000)") in
 * why[0..size). calls: the calls the model-call limit counts (a turn's
 * for the built-in agent, the session's for the gateway). */
const char *meter_budget_spent(const struct meter_budget *b,
			       const struct meter_totals *tot, unsigned calls,
			       const char *scope, char *why, unsigned size);

#endif

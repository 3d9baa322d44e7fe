/* meter.c - model call costs and budgets (meter.h). */
#include "meter/meter.h"

#include <stdio.h>

static const char *const wire_names[METER_WIRE_MAX] = {
    [METER_WIRE_CHAT] = "chat_completions",
    [METER_WIRE_RESPONSES] = "responses",
    [METER_WIRE_MESSAGES] = "messages",
};

const char *meter_wire_name(enum meter_wire w)
{
	return (unsigned)w < METER_WIRE_MAX ? wire_names[w] : NULL;
}

/* A count in o at key, if it is one: *set tells. */
static uint64_t count(const json_t *o, const char *key, bool *set)
{
	const json_t *v = json_object_get(o, key);
	*set = json_is_integer(v);
	json_int_t n = json_integer_value(v);
	return n > 0 ? (uint64_t)n : 0;
}

bool meter_usage_read(enum meter_wire w, const json_t *u,
		      struct meter_tokens *out)
{
	if (!json_is_object(u))
		return false;
	bool set;
	uint64_t n;
	if (w == METER_WIRE_MESSAGES) {
		/* each of the three inputs may come alone (a stream's
		 * message_delta repeats some); the prompt is their sum */
		uint64_t in = count(u, "input_tokens", &set);
		bool any = set;
		uint64_t rd = count(u, "cache_read_input_tokens", &set);
		any |= set;
		uint64_t cr = count(u, "cache_creation_input_tokens", &set);
		any |= set;
		if (any) {
			out->prompt = in + rd + cr;
			out->cached = rd;
		}
		n = count(u, "output_tokens", &set);
		if (set)
			out->completion = n;
		return true;
	}
	bool chat = w == METER_WIRE_CHAT;
	n = count(u, chat ? "prompt_tokens" : "input_tokens", &set);
	if (set)
		out->prompt = n;
	n = count(u, chat ? "completion_tokens" : "output_tokens", &set);
	if (set)
		out->completion = n;
	n = count(json_object_get(u, chat ? "prompt_tokens_details"
					  : "input_tokens_details"),
		  "cached_tokens", &set);
	if (set)
		out->cached = n;
	return true;
}

double meter_cost(const struct meter_prices *p, const struct meter_tokens *t)
{
	uint64_t cached = t->cached <= t->prompt ? t->cached : t->prompt;
	double cached_price = p->cached > 0 ? p->cached : p->prompt;
	return ((double)(t->prompt - cached) * p->prompt +
		(double)cached * cached_price +
		(double)t->completion * p->completion) /
	       1e6;
}

double meter_charge(struct meter_totals *tot, const struct meter_prices *p,
		    const struct meter_tokens *t)
{
	double cost = meter_cost(p, t);
	tot->prompt_tokens += t->prompt;
	tot->completion_tokens += t->completion;
	tot->cached_tokens += t->cached <= t->prompt ? t->cached : t->prompt;
	tot->cost += cost;
	tot->model_calls++;
	return cost;
}

const char *meter_budget_spent(const struct meter_budget *b,
			       const struct meter_totals *tot, unsigned calls,
			       const char *scope, char *why, unsigned size)
{
	uint64_t tokens = tot->prompt_tokens + tot->completion_tokens;
	if (b->max_model_calls && calls >= b->max_model_calls)
		snprintf(why, size, "the %s's model-call budget is spent (%u "
			 "of %u calls)", scope, calls, b->max_model_calls);
	else if (b->max_tokens && tokens >= b->max_tokens)
		snprintf(why, size,
			 "the session's token budget is spent (%llu of %llu "
			 "tokens)",
			 (unsigned long long)tokens,
			 (unsigned long long)b->max_tokens);
	else if (b->max_cost > 0 && tot->cost >= b->max_cost)
		snprintf(why, size,
			 "the session's cost budget is spent (%.4f of %.4f)",
			 tot->cost, b->max_cost);
	else
		return NULL;
	return why;
}

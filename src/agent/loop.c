/* loop.c - the built-in agent loop (see agent.h). */
#include "agent/agent.h"

#include "util/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const end_names[AGENT_END_MAX] = {
    [AGENT_FINISHED] = "finished",
    [AGENT_ANSWERED] = "answered",
    [AGENT_BUDGET] = "budget",
    [AGENT_STOPPED] = "stopped",
};

const char *agent_end_name(enum agent_end e)
{
	return (int)e >= 0 && e < AGENT_END_MAX ? end_names[e] : "?";
}

void agent_result_clear(struct agent_result *res)
{
	if (!res)
		return;
	free(res->summary);
	res->summary = NULL;
}

static double mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

json_t *agent_system_message(const char *repo_name, bool has_verify)
{
	char *text = wr_asprintf(
	    "You are a software engineer working in an isolated sandbox on "
	    "the repository %s, checked out at /workspace (your working "
	    "directory). Its dependencies are installed and its services are "
	    "running. Use the tools to read and change code and to run "
	    "commands; you have no network access. Keep changes focused on "
	    "the request. %sWhen the work is done, call finish with a short "
	    "summary of the change: it becomes the commit message a human "
	    "reviews.",
	    repo_name,
	    has_verify ? "Run run_verify before finishing: Warren runs the "
			 "same verification after you finish, and a failure "
			 "comes back to you. "
		       : "");
	json_t *m = json_pack("{s:s, s:s}", "role", "system", "content",
			      text ? text : "");
	free(text);
	return m;
}

/* The budget's verdict through the meter (meter.h), the turn's wall
 * time besides; *why in why[] when there is no room. */
static bool budget_left(const struct agent_loop *l, unsigned calls,
			double started, char *why, size_t size)
{
	const struct agent_budget *b = &l->budget;
	const struct agent_usage *u = l->usage;
	struct meter_budget mb = {.max_tokens = b->max_tokens,
				  .max_cost = b->max_cost,
				  .max_model_calls = b->max_model_calls};
	struct meter_totals tot = {.prompt_tokens = u->prompt_tokens,
				   .completion_tokens = u->completion_tokens,
				   .cost = u->cost};
	if (meter_budget_spent(&mb, &tot, calls, "turn", why,
			       (unsigned)size))
		return false;
	if (b->max_wall_ms && mono_ms() - started >= b->max_wall_ms) {
		snprintf(why, size, "the turn's time budget is spent");
		return false;
	}
	return true;
}

static int record(const struct agent_loop *l, const json_t *m,
		  struct wr_error **err)
{
	int r = l->record ? l->record(l->ctx, m, l->usage) : 0;
	if (r < 0)
		return wr_error_set(err, -r, "record the transcript");
	return 0;
}

/* Runs one tool call and appends (and records) its result message. */
static int run_call(const struct agent_loop *l, json_t *messages,
		    const json_t *call, struct agent_result *res,
		    bool *finished, struct wr_error **err)
{
	const char *id = json_string_value(json_object_get(call, "id"));
	json_t *fn = json_object_get(call, "function");
	const char *name = json_string_value(json_object_get(fn, "name"));
	const char *args = json_string_value(json_object_get(fn, "arguments"));
	struct tools_call_result tr = {0};
	double t0 = mono_ms();
	int r = tools_call(l->tools, l->exec, name ? name : "",
			   args ? args : "{}", &tr, err);
	l->usage->tool_ms += mono_ms() - t0;
	if (r < 0)
		return r;
	l->usage->tool_calls++;
	if (tr.artifact && l->artifact)
		l->artifact(l->ctx, tr.artifact);
	json_t *m = json_pack("{s:s, s:s, s:s}", "role", "tool", "tool_call_id",
			      id ? id : "", "content",
			      tr.content ? tr.content : "");
	if (!m) /* content that is not UTF-8 */
		m = json_pack("{s:s, s:s, s:s}", "role", "tool", "tool_call_id",
			      id ? id : "", "content",
			      "[the tool's output was not valid UTF-8]");
	r = m ? record(l, m, err) : wr_error_set(err, ENOMEM, "tool result");
	if (r == 0)
		json_array_append(messages, m);
	json_decref(m);
	if (r == 0 && tr.finished) {
		*finished = true;
		free(res->summary);
		res->summary = wr_strdup(tr.summary ? tr.summary : "");
		res->end = AGENT_FINISHED;
	}
	tools_call_result_clear(&tr);
	return r;
}

int agent_resume_pending(const struct agent_loop *l, json_t *messages,
			 struct agent_result *res, bool *finished,
			 struct wr_error **err)
{
	*finished = false;
	size_t n = json_array_size(messages);
	/* the last assistant message with tool calls, and the results that
	 * follow it */
	size_t at = n;
	for (size_t i = n; i-- > 0;) {
		json_t *m = json_array_get(messages, i);
		const char *role = json_string_value(json_object_get(m, "role"));
		if (role && !strcmp(role, "assistant")) {
			at = i;
			break;
		}
		if (!role || strcmp(role, "tool"))
			return 0; /* a user message after it: nothing pending */
	}
	if (at == n)
		return 0;
	json_t *calls =
	    json_object_get(json_array_get(messages, at), "tool_calls");
	size_t i;
	json_t *call;
	json_array_foreach(calls, i, call)
	{
		const char *id = json_string_value(json_object_get(call, "id"));
		bool done = false;
		for (size_t k = at + 1; k < n && id; k++) {
			const char *tid = json_string_value(json_object_get(
			    json_array_get(messages, k), "tool_call_id"));
			if (tid && !strcmp(tid, id))
				done = true;
		}
		if (done)
			continue;
		int r = run_call(l, messages, call, res, finished, err);
		if (r < 0)
			return r;
	}
	return 0;
}

int agent_run(const struct agent_loop *l, json_t *messages,
	      struct agent_result *res, struct wr_error **err)
{
	json_t *tools = tools_definitions();
	if (!tools)
		return wr_error_set(err, ENOMEM, "tool definitions");
	double started = mono_ms();
	unsigned calls = 0;
	int r = 0;
	res->end = AGENT_ANSWERED;
	for (;;) {
		char why[160];
		if (l->should_stop && l->should_stop(l->ctx)) {
			res->end = AGENT_STOPPED;
			break;
		}
		if (!budget_left(l, calls, started, why, sizeof(why))) {
			res->end = AGENT_BUDGET;
			free(res->summary);
			res->summary = wr_strdup(why);
			break;
		}
		struct provider_reply reply = {0};
		double t0 = mono_ms();
		r = l->provider->ops->complete(l->provider, messages, tools,
					       &reply, err);
		l->usage->model_ms += mono_ms() - t0;
		if (r < 0) {
			wr_error_wrap(err, "model");
			break;
		}
		calls++;
		struct agent_usage *u = l->usage;
		u->model_calls++;
		u->retries += reply.retries;
		struct meter_tokens used = {
		    .prompt = reply.usage.prompt_tokens,
		    .completion = reply.usage.completion_tokens,
		    .cached = reply.usage.cached_tokens};
		struct meter_totals tot = {
		    .prompt_tokens = u->prompt_tokens,
		    .completion_tokens = u->completion_tokens,
		    .cached_tokens = u->cached_tokens,
		    .cost = u->cost};
		meter_charge(&tot, &l->prices, &used);
		u->prompt_tokens = tot.prompt_tokens;
		u->completion_tokens = tot.completion_tokens;
		u->cached_tokens = tot.cached_tokens;
		u->cost = tot.cost;
		r = record(l, reply.message, err);
		if (r < 0) {
			provider_reply_clear(&reply);
			break;
		}
		json_array_append(messages, reply.message);
		json_t *tool_calls =
		    json_object_get(reply.message, "tool_calls");
		if (json_array_size(tool_calls) == 0) {
			/* an answer without tools ends the turn */
			const char *content = json_string_value(
			    json_object_get(reply.message, "content"));
			free(res->summary);
			res->summary = wr_strdup(content ? content : "");
			res->end = AGENT_ANSWERED;
			provider_reply_clear(&reply);
			break;
		}
		bool finished = false;
		size_t i;
		json_t *call;
		json_array_foreach(tool_calls, i, call)
		{
			r = run_call(l, messages, call, res, &finished, err);
			if (r < 0)
				break;
		}
		provider_reply_clear(&reply);
		if (r < 0 || finished)
			break;
	}
	json_decref(tools);
	return r;
}

/* provider.c - choosing a model provider backend, and what the backends
 * share: checking an assistant message and putting it in the form that goes
 * back into the next request's "messages". */
#include "agent/provider.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int provider_new(const struct provider_config *cfg, struct provider **out,
		 struct wr_error **err)
{
	if (!cfg || !cfg->kind || !*cfg->kind)
		return wr_error_input(err, 0,
				      "model provider: no kind given "
				      "(\"openai\" or \"replay\")");
	if (!strcmp(cfg->kind, "openai"))
		return provider_openai_new(cfg, out, err);
	if (!strcmp(cfg->kind, "replay"))
		return provider_replay_new(cfg, out, err);
	return wr_error_input(err, 0,
			      "model provider: unknown kind '%.64s' (expected "
			      "\"openai\" or \"replay\")",
			      cfg->kind);
}

void provider_reply_clear(struct provider_reply *r)
{
	if (!r)
		return;
	json_decref(r->message);
	free(r->finish_reason);
	memset(r, 0, sizeof(*r));
}

/* content: a string, null, or (some compatible servers) an array of parts
 * of which the "text" ones count. */
static int normalize_content(const json_t *content, json_t **out,
			     struct wr_error **err)
{
	if (!content || json_is_null(content)) {
		*out = json_null();
		return 0;
	}
	if (json_is_string(content)) {
		*out = json_deep_copy(content);
		return *out ? 0 : wr_error_set(err, ENOMEM, "content");
	}
	if (!json_is_array(content))
		return wr_error_set(err, 0,
				    "content is neither a string nor null");
	size_t len = 0, i;
	const json_t *part;
	json_array_foreach(content, i, part)
	{
		const json_t *text = json_object_get(part, "text");
		if (json_is_string(text))
			len += json_string_length(text);
	}
	_cleanup_free_ char *joined = wr_malloc(len + 1);
	if (!joined)
		return wr_error_set(err, ENOMEM, "content");
	size_t at = 0;
	json_array_foreach(content, i, part)
	{
		const json_t *text = json_object_get(part, "text");
		if (!json_is_string(text))
			continue;
		memcpy(joined + at, json_string_value(text),
		       json_string_length(text));
		at += json_string_length(text);
	}
	*out = json_stringn(joined, at);
	return *out ? 0 : wr_error_set(err, ENOMEM, "content");
}

static int normalize_call(const json_t *call, size_t index, json_t **out,
			  struct wr_error **err)
{
	if (!json_is_object(call))
		return wr_error_set(err, 0, "tool_calls[%zu] is not an object",
				    index);
	const json_t *type = json_object_get(call, "type");
	if (type && !json_is_null(type) &&
	    !(json_is_string(type) &&
	      !strcmp(json_string_value(type), "function")))
		return wr_error_set(
		    err, 0, "tool_calls[%zu]: type is not \"function\"", index);
	const json_t *fn = json_object_get(call, "function");
	if (!json_is_object(fn))
		return wr_error_set(
		    err, 0, "tool_calls[%zu]: no \"function\" object", index);
	const char *name = json_string_value(json_object_get(fn, "name"));
	if (!name || !*name)
		return wr_error_set(err, 0, "tool_calls[%zu]: no function name",
				    index);

	const json_t *id = json_object_get(call, "id");
	if (id && !json_is_null(id) &&
	    (!json_is_string(id) || !json_string_length(id)))
		return wr_error_set(
		    err, 0, "tool_calls[%zu]: id is not a string", index);
	_cleanup_free_ char *made_id = NULL;
	if (!json_is_string(id)) {
		made_id = wr_asprintf("call_%zu", index);
		if (!made_id)
			return wr_error_set(err, ENOMEM, "tool call");
	}

	/* The API takes the arguments back as a JSON text in a string. */
	const json_t *args = json_object_get(fn, "arguments");
	_cleanup_free_ char *args_text = NULL;
	if (!args || json_is_null(args) ||
	    (json_is_string(args) && !json_string_length(args)))
		args_text = wr_strdup("{}");
	else if (json_is_string(args))
		args_text = wr_strndup(json_string_value(args),
				       json_string_length(args));
	else if (json_is_object(args) || json_is_array(args))
		args_text = json_dumps(args, JSON_COMPACT);
	else
		return wr_error_set(err, 0,
				    "tool_calls[%zu]: arguments are neither a "
				    "string nor an object",
				    index);
	if (!args_text)
		return wr_error_set(err, ENOMEM, "tool call");

	json_t *norm = json_pack("{s:s, s:s, s:{s:s, s:s}}", "id",
				 made_id ? made_id : json_string_value(id),
				 "type", "function", "function", "name", name,
				 "arguments", args_text);
	if (!norm)
		return wr_error_set(err, ENOMEM, "tool call");
	*out = norm;
	return 0;
}

int provider_message_normalize(const json_t *message, json_t **out,
			       struct wr_error **err)
{
	if (!json_is_object(message))
		return wr_error_set(err, 0, "the message is not an object");
	const json_t *role = json_object_get(message, "role");
	if (role && !json_is_null(role) &&
	    !(json_is_string(role) &&
	      !strcmp(json_string_value(role), "assistant")))
		return wr_error_set(err, 0,
				    "the message's role is not "
				    "\"assistant\"");
	const json_t *calls = json_object_get(message, "tool_calls");
	if (calls && !json_is_null(calls) && !json_is_array(calls))
		return wr_error_set(err, 0, "tool_calls is not an array");
	if (json_array_size(calls) > PROVIDER_TOOL_CALLS_MAX)
		return wr_error_set(err, 0,
				    "%zu tool calls in one message (at most "
				    "%d)",
				    json_array_size(calls),
				    PROVIDER_TOOL_CALLS_MAX);

	json_t *content = NULL;
	int r = normalize_content(json_object_get(message, "content"), &content,
				  err);
	if (r < 0)
		return r;
	json_t *norm = json_object();
	if (!norm)
		json_decref(content);
	if (!norm ||
	    json_object_set_new(norm, "role", json_string("assistant")) ||
	    json_object_set_new(norm, "content", content)) {
		json_decref(norm);
		return wr_error_set(err, ENOMEM, "message");
	}
	if (json_array_size(calls)) {
		json_t *list = json_array();
		if (!list || json_object_set_new(norm, "tool_calls", list)) {
			json_decref(norm);
			return wr_error_set(err, ENOMEM, "message");
		}
		size_t i;
		const json_t *call;
		json_array_foreach(calls, i, call)
		{
			json_t *one = NULL;
			r = normalize_call(call, i, &one, err);
			if (r == 0 && json_array_append_new(list, one))
				r = wr_error_set(err, ENOMEM, "message");
			if (r < 0) {
				json_decref(norm);
				return r;
			}
		}
	}
	*out = norm;
	return 0;
}

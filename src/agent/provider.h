/* provider.h - model providers for the built-in agent loop.
 *
 * A provider takes the conversation so far (OpenAI chat-completions
 * "messages" array) and the tool definitions, and returns the assistant's
 * next message: text content and/or tool calls, with token usage.
 * Backends, behind one struct of function pointers:
 *   openai  any OpenAI-compatible chat-completions endpoint over libcurl
 *           (base URL, model, API key held by the server, never by a
 *           sandbox); streaming (SSE) or not; retries with back-off on 429
 *           and 5xx (honouring Retry-After), a clear error on other 4xx
 *   replay  a recorded transcript file played back, one recorded
 *           assistant message per call (offline demos and tests)
 * Providers are used from one thread at a time (a session's runner). */
#ifndef WR_AGENT_PROVIDER_H
#define WR_AGENT_PROVIDER_H

#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct provider_config {
	const char *kind;	   /* "openai" or "replay" */
	const char *base_url;	   /* openai: e.g. https://api.openai.com/v1 */
	const char *model;	   /* openai: model name */
	const char *api_key;	   /* openai: bearer token, may be NULL */
	bool stream;		   /* openai: ask for a streamed response */
	unsigned max_retries;	   /* openai: on 429/5xx/transport errors */
	uint64_t retry_backoff_ms; /* first back-off, doubled per retry */
	uint64_t timeout_ms;	   /* per request, whole response */
	const char *replay_file;   /* replay: the recorded transcript */
	unsigned replay_start;	   /* replay: replies already played (a
				    * resumed session's assistant messages):
				    * play goes on after the entry that gave
				    * the last of them, faults passed too */
	/* added after the first draft; 0 picks the default */
	uint64_t retry_wait_max_ms; /* cap on one wait, Retry-After or
				     * back-off (PROVIDER_RETRY_WAIT_MAX_MS) */
	size_t max_response;	    /* openai: bytes of one response
				     * (PROVIDER_RESPONSE_MAX) */
};

/* Defaults for the fields of struct provider_config left 0 (max_retries
 * 0 means no retry). */
#define PROVIDER_TIMEOUT_MS (10 * 60 * 1000ull)	  /* a long generation */
#define PROVIDER_RETRY_BACKOFF_MS 1000ull	  /* 1, 2, 4, 8 s ... */
#define PROVIDER_RETRY_WAIT_MAX_MS (60 * 1000ull) /* one wait, at most */
#define PROVIDER_RESPONSE_MAX ((size_t)8 << 20)	  /* 8 MiB */
/* Tool calls in one assistant message, at most. */
#define PROVIDER_TOOL_CALLS_MAX 128

struct provider_usage {
	uint64_t prompt_tokens;
	uint64_t completion_tokens;
	uint64_t cached_tokens; /* of prompt_tokens, from a prompt cache */
};

struct provider_reply {
	/* the assistant message exactly as it goes back into "messages":
	 * {"role":"assistant","content":...,"tool_calls":[{"id","type":
	 * "function","function":{"name","arguments"}}]} (owned) */
	json_t *message;
	char *finish_reason; /* "stop", "tool_calls", "length", ... */
	struct provider_usage usage;
	unsigned retries; /* how many retries this call needed */
};

struct provider;

struct provider_ops {
	/* messages: array of message objects; tools: array of tool
	 * definitions ({"type":"function","function":{...}}) or NULL. On
	 * error *err says what failed; err->bad_input is set for a 4xx
	 * (a request the provider refuses: retrying will not help). */
	int (*complete)(struct provider *p, const json_t *messages,
			const json_t *tools, struct provider_reply *out,
			struct wr_error **err);
	void (*free)(struct provider *p);
};

struct provider {
	const struct provider_ops *ops;
};

/* Errors: -EINVAL with err->bad_input for a configuration or a request the
 * model API refuses (4xx), -EAGAIN for 429 and -EIO for 5xx once the
 * retries are spent, -EHOSTUNREACH / -ETIMEDOUT / -ECONNRESET for the
 * transport, -EFBIG for a response over max_response, -EBADMSG for a
 * response that is not chat-completions, -ENODATA for a replay with no
 * response left. */
int provider_new(const struct provider_config *cfg, struct provider **out,
		 struct wr_error **err);
static inline void provider_free(struct provider *p)
{
	if (p)
		p->ops->free(p);
}
void provider_reply_clear(struct provider_reply *r);

/* Check an assistant message from a model API or a recording and return
 * it in the form that goes back into "messages": role "assistant";
 * content a string or null (text parts of a content array joined);
 * tool_calls (left out when empty) each with an id ("call_N" made up when
 * missing), type "function", function.name and function.arguments as a
 * string (an object is serialised, a missing or empty one becomes "{}").
 * *err names the part that is wrong. Shared by the backends. */
int provider_message_normalize(const json_t *message, json_t **out,
			       struct wr_error **err);

/* The backends, for provider_new once cfg->kind is matched. */
int provider_openai_new(const struct provider_config *cfg,
			struct provider **out, struct wr_error **err);
int provider_replay_new(const struct provider_config *cfg,
			struct provider **out, struct wr_error **err);

#endif

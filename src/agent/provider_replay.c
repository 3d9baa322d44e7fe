/* provider_replay.c - the "replay" backend: a recorded transcript played
 * back, for offline demos and tests.
 *
 * The file is the recording tests/tools/chat_server.py serves, so that one
 * recording drives both the replay and the openai backend:
 *
 *   {"responses": [
 *     {"message": {"role": "assistant", "content": "...",
 *                  "tool_calls": [...]},
 *      "usage": {"prompt_tokens": 10, "completion_tokens": 5},
 *      "finish_reason": "stop"},                        (optional)
 *     {"status": 429, "retry_after": 0.1},               a fault
 *     {"status": 400, "error": {"message": "..."}},
 *     ...]}
 *
 * or, for sessions of several tasks under one server (an eval's suite),
 * several scripts, each chosen by a text its session's first user message
 * holds:
 *
 *   {"scripts": [{"when": "TEXT", "responses": [ENTRY, ...]}, ...]}
 *
 * The first call picks the first script whose "when" is in the first user
 * message (none: that call fails, naming the file). Each complete() plays
 * the next entry. A replay is a script: beyond that choice it does not
 * look at the messages or tools it is given. The faults play as the openai
 * backend would meet them: 429, 408 and 5xx are retried (the next entry
 * is played, with no wait) up to max_retries and counted in
 * reply.retries; any other status fails that call (a 4xx with bad_input).
 * "hang_up" counts as a retried failure; "raw" (a body chat_server.py
 * sends as is) fails the call, as a malformed response would. The whole
 * file is checked when the provider is made, so that a bad recording is
 * named before the first turn. With replay_start N (a resumed session
 * whose transcript holds N assistant messages) play starts after the
 * N-th entry that is a message. */
#include "agent/provider.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REPLAY_FILE_MAX ((off_t)64 << 20)

struct replay_provider {
	struct provider base;
	char *path;
	json_t *responses; /* checked entries, messages normalized; NULL
			      until a script is chosen */
	json_t *scripts;   /* or NULL: the file had one script */
	unsigned start;	   /* replies already played (a resumed session) */
	size_t next;
	unsigned max_retries;
};

static bool retried_status(json_int_t status)
{
	return status == 429 || status == 408 || status >= 500;
}

/* Check one entry; messages are replaced by their normalized form. */
static int check_entry(json_t *entry, size_t i, struct wr_error **err)
{
	if (!json_is_object(entry))
		return wr_error_input(err, 0, "responses[%zu] is not an object",
				      i);
	const json_t *status = json_object_get(entry, "status");
	if (status &&
	    (!json_is_integer(status) || json_integer_value(status) < 100 ||
	     json_integer_value(status) > 599))
		return wr_error_input(err, 0,
				      "responses[%zu]: status is not an HTTP "
				      "status",
				      i);
	const json_t *message = json_object_get(entry, "message");
	bool fault = status && json_integer_value(status) != 200;
	if (fault || json_is_true(json_object_get(entry, "hang_up")))
		return 0;
	const json_t *raw = json_object_get(entry, "raw");
	if (raw) {
		if (!json_is_string(raw))
			return wr_error_input(err, 0,
					      "responses[%zu]: raw is not a "
					      "string",
					      i);
		return 0;
	}
	if (!message)
		return wr_error_input(err, 0,
				      "responses[%zu]: no \"message\" (nor a "
				      "fault: \"status\", \"hang_up\", "
				      "\"raw\")",
				      i);
	json_t *norm = NULL;
	int r = provider_message_normalize(message, &norm, err);
	if (r < 0) {
		if (err && *err && (*err)->errnum != ENOMEM)
			(*err)->bad_input = true; /* the recording is wrong */
		return wr_error_wrap(err, "responses[%zu].message", i);
	}
	if (json_object_set_new(entry, "message", norm))
		return wr_error_set(err, ENOMEM, "replay");

	const json_t *usage = json_object_get(entry, "usage");
	if (usage && !json_is_null(usage)) {
		const json_t *prompt = json_object_get(usage, "prompt_tokens");
		const json_t *completion =
		    json_object_get(usage, "completion_tokens");
		if (!json_is_object(usage) ||
		    (prompt && (!json_is_integer(prompt) ||
				json_integer_value(prompt) < 0)) ||
		    (completion && (!json_is_integer(completion) ||
				    json_integer_value(completion) < 0)))
			return wr_error_input(err, 0,
					      "responses[%zu]: usage is not "
					      "{\"prompt_tokens\": N, "
					      "\"completion_tokens\": N}",
					      i);
	}
	const json_t *finish = json_object_get(entry, "finish_reason");
	if (finish && !json_is_null(finish) && !json_is_string(finish))
		return wr_error_input(err, 0,
				      "responses[%zu]: finish_reason is not a "
				      "string",
				      i);
	return 0;
}

/* A "responses" array: there, not empty, every entry checked. */
static int check_responses(json_t *responses, struct wr_error **err)
{
	if (!json_is_array(responses))
		return wr_error_input(err, 0, "no \"responses\" array");
	if (json_array_size(responses) == 0)
		return wr_error_input(err, 0, "\"responses\" is empty");
	size_t i;
	json_t *entry;
	json_array_foreach(responses, i, entry)
	{
		int r = check_entry(entry, i, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* *out: the file's "responses", or its "scripts". */
static int load(const char *path, json_t **out, struct wr_error **err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return wr_error_input(err, errno, "open");
	struct stat st;
	if (fstat(fd, &st) < 0)
		return wr_error_set(err, errno, "stat");
	if (!S_ISREG(st.st_mode))
		return wr_error_input(err, 0, "not a regular file");
	if (st.st_size > REPLAY_FILE_MAX)
		return wr_error_input(err, 0, "larger than %lld MiB",
				      (long long)(REPLAY_FILE_MAX >> 20));
	json_error_t jerr;
	json_t *doc = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
	if (!doc)
		return wr_error_input(err, 0, "line %d, column %d: %s",
				      jerr.line, jerr.column, jerr.text);
	json_t *scripts = json_object_get(doc, "scripts");
	int r = 0;
	if (scripts) {
		if (!json_is_array(scripts) || json_array_size(scripts) == 0)
			r = wr_error_input(err, 0,
					   "\"scripts\" is not a non-empty array");
		size_t k;
		json_t *sc;
		json_array_foreach(scripts, k, sc)
		{
			if (r < 0)
				break;
			if (!json_is_string(json_object_get(sc, "when")) ||
			    !*json_string_value(json_object_get(sc, "when")))
				r = wr_error_input(err, 0,
						   "scripts[%zu]: no \"when\" "
						   "text",
						   k);
			else if ((r = check_responses(
				      json_object_get(sc, "responses"), err)) <
				 0)
				r = wr_error_wrap(err, "scripts[%zu]", k);
		}
		if (r == 0)
			*out = json_incref(scripts);
	} else {
		json_t *responses = json_object_get(doc, "responses");
		r = check_responses(responses, err);
		if (r == 0)
			*out = json_incref(responses);
	}
	json_decref(doc);
	return r;
}

/* An entry that plays as an assistant message (not a fault). */
static bool entry_is_reply(const json_t *entry)
{
	const json_t *status = json_object_get(entry, "status");
	return json_object_get(entry, "message") &&
	       !json_object_get(entry, "raw") &&
	       !json_is_true(json_object_get(entry, "hang_up")) &&
	       (!status || json_integer_value(status) == 200);
}

static int fault_error(const struct replay_provider *p, size_t i,
		       const json_t *entry, unsigned retries,
		       struct wr_error **err)
{
	const json_t *status = json_object_get(entry, "status");
	json_int_t code = json_integer_value(status);
	const json_t *e = json_object_get(entry, "error");
	const char *said = json_string_value(
	    json_is_object(e) ? json_object_get(e, "message") : e);
	const char *sep = said ? ": " : "";
	if (!said)
		said = "";
	if (json_object_get(entry, "raw")) {
		wr_error_set(err, 0,
			     "replay file %s: responses[%zu] is a raw body "
			     "(chat_server.py only)",
			     p->path, i);
		return -EBADMSG;
	}
	if (!status) { /* hang_up */
		wr_error_set(err, 0,
			     "replay file %s: responses[%zu]: %sthe connection "
			     "failed (recorded)",
			     p->path, i,
			     retries ? "gave up after retries: " : "");
		return -ECONNRESET;
	}
	if (retried_status(code)) {
		wr_error_set(err, 0,
			     "replay file %s: responses[%zu]: gave up after %u "
			     "retr%s: HTTP %lld%s%.1000s",
			     p->path, i, retries, retries == 1 ? "y" : "ies",
			     (long long)code, sep, said);
		return code == 429 ? -EAGAIN : code == 408 ? -ETIMEDOUT : -EIO;
	}
	if (code >= 400 && code <= 499) {
		wr_error_input(
		    err, 0,
		    "replay file %s: responses[%zu]: HTTP %lld%s%.1000s",
		    p->path, i, (long long)code, sep, said);
		return -EINVAL;
	}
	wr_error_set(
	    err, 0,
	    "replay file %s: responses[%zu]: unexpected HTTP %lld%s%.1000s",
	    p->path, i, (long long)code, sep, said);
	return -EBADMSG;
}

/* A resumed session: its transcript holds start assistant messages, so
 * the recording goes on after the entry that gave the last of them
 * (faults among the played entries are passed too). */
static void skip_played(struct replay_provider *p)
{
	for (unsigned played = 0; played < p->start &&
				  p->next < json_array_size(p->responses);
	     p->next++)
		if (entry_is_reply(json_array_get(p->responses, p->next)))
			played++;
}

/* The script whose "when" the first user message holds. */
static int choose_script(struct replay_provider *p, const json_t *messages,
			 struct wr_error **err)
{
	const char *prompt = NULL;
	size_t i;
	const json_t *m;
	json_array_foreach(messages, i, m)
	{
		const char *role = json_string_value(json_object_get(m, "role"));
		if (role && !strcmp(role, "user")) {
			prompt = json_string_value(json_object_get(m, "content"));
			break;
		}
	}
	const json_t *sc;
	json_array_foreach(p->scripts, i, sc)
	{
		const char *when =
		    json_string_value(json_object_get(sc, "when"));
		if (prompt && strstr(prompt, when)) {
			p->responses =
			    json_incref(json_object_get(sc, "responses"));
			skip_played(p);
			return 0;
		}
	}
	return wr_error_input(err, 0,
			      "replay file %s: no script's \"when\" is in the "
			      "session's prompt",
			      p->path);
}

static int replay_complete(struct provider *base, const json_t *messages,
			   const json_t *tools, struct provider_reply *out,
			   struct wr_error **err)
{
	struct replay_provider *p = (struct replay_provider *)base;
	(void)tools; /* a script: it does not react */
	if (!p->responses) {
		int r = choose_script(p, messages, err);
		if (r < 0)
			return r;
	}
	size_t count = json_array_size(p->responses);
	unsigned retries = 0;
	for (;;) {
		if (p->next >= count) {
			wr_error_set(err, 0,
				     "replay file %s: no recorded response "
				     "left (all %zu played)",
				     p->path, count);
			return -ENODATA;
		}
		size_t i = p->next++;
		const json_t *entry = json_array_get(p->responses, i);
		const json_t *message = json_object_get(entry, "message");
		const json_t *status = json_object_get(entry, "status");
		if (!entry_is_reply(entry)) {
			bool retried =
			    status ? retried_status(json_integer_value(status))
				   : !json_object_get(entry, "raw");
			if (retried && retries < p->max_retries) {
				retries++;
				continue;
			}
			return fault_error(p, i, entry, retries, err);
		}

		const char *finish =
		    json_string_value(json_object_get(entry, "finish_reason"));
		if (!finish)
			finish = json_array_size(
				     json_object_get(message, "tool_calls"))
				     ? "tool_calls"
				     : "stop";
		json_t *copy = json_deep_copy(message);
		char *finish_copy = wr_strdup(finish);
		if (!copy || !finish_copy) {
			json_decref(copy);
			free(finish_copy);
			return wr_error_set(err, ENOMEM, "replay");
		}
		const json_t *usage = json_object_get(entry, "usage");
		json_int_t prompt =
		    json_integer_value(json_object_get(usage, "prompt_tokens"));
		json_int_t completion = json_integer_value(
		    json_object_get(usage, "completion_tokens"));
		memset(out, 0, sizeof(*out));
		out->message = copy;
		out->finish_reason = finish_copy;
		out->usage.prompt_tokens = (uint64_t)prompt;
		out->usage.completion_tokens = (uint64_t)completion;
		out->retries = retries;
		return 0;
	}
}

static void replay_free(struct provider *base)
{
	struct replay_provider *p = (struct replay_provider *)base;
	json_decref(p->responses);
	json_decref(p->scripts);
	free(p->path);
	free(p);
}

static const struct provider_ops replay_ops = {
    .complete = replay_complete,
    .free = replay_free,
};

int provider_replay_new(const struct provider_config *cfg,
			struct provider **out, struct wr_error **err)
{
	if (!cfg->replay_file || !*cfg->replay_file)
		return wr_error_input(err, 0,
				      "replay provider: no replay_file");
	json_t *loaded = NULL;
	int r = load(cfg->replay_file, &loaded, err);
	if (r < 0)
		return wr_error_wrap(err, "replay file %s", cfg->replay_file);
	struct replay_provider *p = wr_calloc(1, sizeof(*p));
	char *path = wr_strdup(cfg->replay_file);
	if (!p || !path) {
		free(p);
		free(path);
		json_decref(loaded);
		return wr_error_set(err, ENOMEM, "replay provider");
	}
	p->base.ops = &replay_ops;
	p->path = path;
	p->max_retries = cfg->max_retries;
	p->start = cfg->replay_start;
	/* one script plays from now; several wait for the first call's
	 * prompt to choose */
	bool several = json_is_array(loaded) && json_array_size(loaded) &&
		       json_object_get(json_array_get(loaded, 0), "when");
	if (several) {
		p->scripts = loaded;
	} else {
		p->responses = loaded;
		skip_played(p);
	}
	*out = &p->base;
	return 0;
}

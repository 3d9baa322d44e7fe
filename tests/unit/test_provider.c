/* test_provider.c - the agent's model providers (src/agent/provider*.c).
 *
 * The openai backend talks to tests/tools/chat_server.py, a local
 * stand-in for a paid model API that serves a recording this test writes
 * and logs every request it gets: replies streamed and not (content from
 * pieces, parallel tool calls from fragments, lines cut between reads),
 * usage, what the client sent (model, messages, tools, the bearer key,
 * stream options), retries on 429 (Retry-After honoured and capped), 5xx
 * and dropped connections, a 4xx refused at once with the server's words,
 * a server that is down, malformed JSON and SSE, a response over the cap,
 * a timeout. The replay backend plays the same recording format: in
 * order, faults as the openai backend meets them, out of responses, and a
 * malformed file named with what is wrong.
 *
 * Run from the top of the tree (the script is tests/tools/chat_server.py;
 * $WARREN_CHAT_SERVER overrides); scratch files in /tmp, removed at the
 * end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "standin.h"

#include "agent/provider.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char root[] = "/tmp/warren-unit-provider.XXXXXX";
static char recording_path[256], log_path[256];
static const char *script = "tests/tools/chat_server.py";
static pid_t server_pid = -1;
static char base_url[128];

/* ---- helpers ---- */

static json_t *json_dq(const char *text)
{
	_cleanup_free_ char *s = standin_dq(text);
	json_error_t jerr;
	json_t *doc = json_loads(s, 0, &jerr);
	if (!doc)
		fail_msg("bad JSON in the test: %s: %s", jerr.text, s);
	return doc;
}

static void write_recording(const char *text)
{
	_cleanup_free_ char *s = standin_dq(text);
	standin_write_text(recording_path, s);
}

static void stop_server(void)
{
	standin_stop(&server_pid);
}

static int teardown(void **state)
{
	(void)state;
	stop_server();
	return 0;
}

/* Start chat_server.py on a free port with the recording written last;
 * the request log starts empty. */
static void start_server(const char *require_key)
{
	int port = standin_start(script, recording_path, log_path, "--require-key",
				 require_key, &server_pid);
	snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d/v1", port);
}

static struct provider_config openai_cfg(bool stream)
{
	return (struct provider_config){
	    .kind = "openai",
	    .base_url = base_url,
	    .model = "gpt-test",
	    .api_key = "sk-test-123",
	    .stream = stream,
	    .max_retries = 2,
	    .retry_backoff_ms = 1,
	    .timeout_ms = 20000,
	};
}

static struct provider *new_provider(const struct provider_config *cfg)
{
	struct provider *p = NULL;
	struct wr_error *err = NULL;
	int r = provider_new(cfg, &p, &err);
	if (r < 0)
		fail_msg("provider_new: %s", err ? err->msg : "?");
	assert_non_null(p);
	return p;
}

/* The conversation the tests send. */
static json_t *conversation(void)
{
	return json_dq("[{'role': 'system', 'content': 'You are a test.'},"
		       " {'role': 'user', 'content': 'Say hello. \\u00e9'}]");
}

static json_t *tool_defs(void)
{
	return json_dq(
	    "[{'type': 'function', 'function': {'name': 'bash', "
	    "'description': 'run a command', 'parameters': {'type': "
	    "'object', 'properties': {'command': {'type': 'string'}}, "
	    "'required': ['command']}}},"
	    " {'type': 'function', 'function': {'name': 'read_file', "
	    "'parameters': {'type': 'object', 'properties': {'path': "
	    "{'type': 'string'}}}}}]");
}

/* One call that must succeed. */
static void complete_ok(struct provider *p, const json_t *messages,
			const json_t *tools, struct provider_reply *reply)
{
	struct wr_error *err = NULL;
	int r = p->ops->complete(p, messages, tools, reply, &err);
	if (r < 0)
		fail_msg("complete: %d %s", r, err ? err->msg : "?");
	assert_null(err);
	assert_non_null(reply->message);
	assert_non_null(reply->finish_reason);
}

/* One call that must fail; returns the error (the caller frees it). */
static struct wr_error *complete_fails(struct provider *p, int want,
				       const char *says)
{
	json_auto_t *messages = conversation();
	struct provider_reply reply = {0};
	struct wr_error *err = NULL;
	int r = p->ops->complete(p, messages, NULL, &reply, &err);
	assert_null(reply.message); /* written only on success */
	if (r >= 0)
		fail_msg("complete succeeded, expected '%s'", says);
	assert_non_null(err);
	if (want)
		assert_int_equal(r, want);
	if (!strstr(err->msg, says))
		fail_msg("error '%s' does not say '%s'", err->msg, says);
	return err;
}

static void assert_says(const struct wr_error *err, const char *says)
{
	assert_non_null(err);
	if (!strstr(err->msg, says))
		fail_msg("error '%s' does not say '%s'", err->msg, says);
}

/* The requests chat_server.py received, one JSON object each. */
static json_t *server_log(void)
{
	json_t *list = json_array();
	FILE *f = fopen(log_path, "re");
	if (!f)
		return list;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		json_t *one = json_loads(line, 0, NULL);
		assert_non_null(one);
		json_array_append_new(list, one);
	}
	free(line);
	fclose(f);
	return list;
}

static const char *str_at(const json_t *doc, const char *key)
{
	return json_string_value(json_object_get(doc, key));
}

static const json_t *call_at(const json_t *message, size_t i)
{
	return json_array_get(json_object_get(message, "tool_calls"), i);
}

static void assert_call(const json_t *message, size_t i, const char *id,
			const char *name, const char *arguments)
{
	const json_t *call = call_at(message, i);
	assert_non_null(call);
	assert_string_equal(str_at(call, "id"), id);
	assert_string_equal(str_at(call, "type"), "function");
	const json_t *fn = json_object_get(call, "function");
	assert_string_equal(str_at(fn, "name"), name);
	assert_string_equal(str_at(fn, "arguments"), arguments);
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static int remove_entry(const char *path, const struct stat *st, int flag,
			struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static int group_setup(void **state)
{
	(void)state;
	const char *env = getenv("WARREN_CHAT_SERVER");
	if (env && *env)
		script = env;
	if (access(script, R_OK) < 0) {
		fprintf(stderr,
			"%s: not found (run from the top of the tree)\n",
			script);
		return -1;
	}
	if (!mkdtemp(root))
		return -1;
	snprintf(recording_path, sizeof(recording_path), "%s/recording.json",
		 root);
	snprintf(log_path, sizeof(log_path), "%s/requests.jsonl", root);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	stop_server();
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

/* ---- openai: replies ---- */

static const char *const two_calls =
    "{'responses': [{'message': {'role': 'assistant', 'content': null, "
    "'tool_calls': ["
    "{'id': 'call_A1', 'type': 'function', 'function': {'name': 'bash', "
    "'arguments': '{\\'command\\': \\'ls -la /workspace\\'}'}},"
    "{'id': 'call_B2', 'type': 'function', 'function': {'name': "
    "'read_file', 'arguments': {'path': 'src/main.c'}}}]},"
    " 'usage': {'prompt_tokens': 120, 'completion_tokens': 33}}]}";

static void test_plain_reply(void **state)
{
	(void)state;
	write_recording("{'responses': [{'message': {'role': 'assistant', "
			"'content': 'Hello there, \\u00e9l\\u00e8ve!'}, "
			"'usage': {'prompt_tokens': 11, 'completion_tokens': "
			"4}}]}");
	start_server(NULL);
	struct provider_config cfg = openai_cfg(false);
	struct provider *p = new_provider(&cfg);
	json_auto_t *messages = conversation();
	struct provider_reply reply = {0};
	complete_ok(p, messages, NULL, &reply);

	assert_string_equal(str_at(reply.message, "role"), "assistant");
	assert_string_equal(str_at(reply.message, "content"),
			    "Hello there, \xc3\xa9l\xc3\xa8ve!");
	assert_null(json_object_get(reply.message, "tool_calls"));
	assert_string_equal(reply.finish_reason, "stop");
	assert_int_equal(reply.usage.prompt_tokens, 11);
	assert_int_equal(reply.usage.completion_tokens, 4);
	assert_int_equal(reply.retries, 0);

	/* what the client sent */
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 1);
	const json_t *rq = json_array_get(log, 0);
	assert_string_equal(str_at(rq, "path"), "/v1/chat/completions");
	assert_string_equal(str_at(rq, "authorization"), "Bearer sk-test-123");
	assert_string_equal(str_at(rq, "content_type"), "application/json");
	const json_t *body = json_object_get(rq, "body");
	assert_string_equal(str_at(body, "model"), "gpt-test");
	assert_true(json_equal(json_object_get(body, "messages"), messages));
	assert_null(json_object_get(body, "tools"));
	assert_null(json_object_get(body, "tool_choice"));
	assert_true(json_is_false(json_object_get(body, "stream")));
	assert_null(json_object_get(body, "stream_options"));

	provider_reply_clear(&reply);
	assert_null(reply.message);
	provider_free(p);
}

static void test_tool_calls(void **state)
{
	(void)state;
	write_recording(two_calls);
	start_server(NULL);
	struct provider_config cfg = openai_cfg(false);
	cfg.api_key = NULL;
	struct provider *p = new_provider(&cfg);
	json_auto_t *messages = conversation();
	json_auto_t *tools = tool_defs();
	struct provider_reply reply = {0};
	complete_ok(p, messages, tools, &reply);

	assert_true(json_is_null(json_object_get(reply.message, "content")));
	assert_int_equal(
	    json_array_size(json_object_get(reply.message, "tool_calls")), 2);
	assert_call(reply.message, 0, "call_A1", "bash",
		    "{\"command\": \"ls -la /workspace\"}");
	/* arguments as an object become the string the API wants back */
	assert_call(reply.message, 1, "call_B2", "read_file",
		    "{\"path\":\"src/main.c\"}");
	assert_string_equal(reply.finish_reason, "tool_calls");
	assert_int_equal(reply.usage.prompt_tokens, 120);
	assert_int_equal(reply.usage.completion_tokens, 33);

	json_auto_t *log = server_log();
	const json_t *rq = json_array_get(log, 0);
	assert_true(json_is_null(json_object_get(rq, "authorization")));
	const json_t *body = json_object_get(rq, "body");
	assert_true(json_equal(json_object_get(body, "tools"), tools));
	assert_string_equal(str_at(body, "tool_choice"), "auto");
	provider_reply_clear(&reply);
	provider_free(p);
}

static void test_stream_text(void **state)
{
	(void)state;
	write_recording(
	    "{'responses': [{'message': {'role': 'assistant', 'content': "
	    "'Streaming works: one, two, three, four, five \\u2713.'}, "
	    "'usage': {'prompt_tokens': 21, 'completion_tokens': 12}}]}");
	start_server(NULL);
	struct provider_config cfg = openai_cfg(true);
	struct provider *p = new_provider(&cfg);
	json_auto_t *messages = conversation();
	struct provider_reply reply = {0};
	complete_ok(p, messages, NULL, &reply);
	assert_string_equal(str_at(reply.message, "content"),
			    "Streaming works: one, two, three, four, five "
			    "\xe2\x9c\x93.");
	assert_null(json_object_get(reply.message, "tool_calls"));
	assert_string_equal(reply.finish_reason, "stop");
	assert_int_equal(reply.usage.prompt_tokens, 21);
	assert_int_equal(reply.usage.completion_tokens, 12);

	json_auto_t *log = server_log();
	const json_t *rq = json_array_get(log, 0);
	assert_string_equal(str_at(rq, "accept"), "text/event-stream");
	assert_string_equal(str_at(rq, "authorization"), "Bearer sk-test-123");
	const json_t *body = json_object_get(rq, "body");
	assert_true(json_is_true(json_object_get(body, "stream")));
	assert_true(json_is_true(json_object_get(
	    json_object_get(body, "stream_options"), "include_usage")));
	assert_true(json_equal(json_object_get(body, "messages"), messages));
	provider_reply_clear(&reply);
	provider_free(p);
}

/* Three parallel calls whose fragments take turns, and some text; then
 * the same cut into 7-byte writes, so lines (and UTF-8 characters) are
 * split between reads. */
static void test_stream_parallel_calls(void **state)
{
	(void)state;
	static const char *const entry =
	    "{'message': {'role': 'assistant', 'content': 'Let me look "
	    "\\u2014 three things at once.', 'tool_calls': ["
	    "{'id': 'call_1', 'type': 'function', 'function': {'name': "
	    "'bash', 'arguments': '{\\'command\\': \\'git status "
	    "--short\\'}'}},"
	    "{'id': 'call_2', 'type': 'function', 'function': {'name': "
	    "'read_file', 'arguments': '{\\'path\\': \\'README.md\\', "
	    "\\'start_line\\': 1, \\'end_line\\': 40}'}},"
	    "{'id': 'call_3', 'type': 'function', 'function': {'name': "
	    "'list_files', 'arguments': '{}'}}]},"
	    " 'usage': {'prompt_tokens': 300, 'completion_tokens': 77}, ";
	_cleanup_free_ char *rec =
	    wr_asprintf("{'responses': [%s 'interleave_tool_calls': true}, %s "
			"'chunk_bytes': 7}]}",
			entry, entry);
	write_recording(rec);
	start_server(NULL);
	struct provider_config cfg = openai_cfg(true);
	struct provider *p = new_provider(&cfg);
	json_auto_t *messages = conversation();
	json_auto_t *tools = tool_defs();
	for (int round = 0; round < 2; round++) {
		struct provider_reply reply = {0};
		complete_ok(p, messages, tools, &reply);
		assert_string_equal(str_at(reply.message, "content"),
				    "Let me look \xe2\x80\x94 three things at "
				    "once.");
		assert_int_equal(json_array_size(json_object_get(reply.message,
								 "tool_calls")),
				 3);
		assert_call(reply.message, 0, "call_1", "bash",
			    "{\"command\": \"git status --short\"}");
		assert_call(reply.message, 1, "call_2", "read_file",
			    "{\"path\": \"README.md\", \"start_line\": 1, "
			    "\"end_line\": 40}");
		assert_call(reply.message, 2, "call_3", "list_files", "{}");
		assert_string_equal(reply.finish_reason, "tool_calls");
		assert_int_equal(reply.usage.prompt_tokens, 300);
		assert_int_equal(reply.usage.completion_tokens, 77);
		provider_reply_clear(&reply);
	}
	provider_free(p);
}

/* Event streams as other servers write them: CRLF and CR line ends,
 * comments, "data:" without a space, an event: field, a data split over
 * two lines, no [DONE] (finish_reason suffices), one byte per write. */
static void test_stream_framing(void **state)
{
	(void)state;
	const char *sse =
	    ": keep-alive\r\n\r\n"
	    "data:{'choices':[{'index':0,'delta':{'role':'assistant',"
	    "'content':'Hi'}}]}\r\n\r\n"
	    "event: message\r"
	    "data: {'choices':[{'index':0,'delta':{'content':' there'}}]}\r\r"
	    "data: {'choices':[{'index':0,'delta':\n"
	    "data: {'tool_calls':[{'index':0,'id':'c9','function':{'name':"
	    "'bash','arguments':'{\\'command'}}]}}]}\n\n"
	    "data: {'choices':[{'index':0,'delta':{'tool_calls':[{'index':0,"
	    "'function':{'arguments':'\\':\\'true\\'}'}}]}}]}\n\n"
	    "data: {'choices':[{'index':0,'delta':{},'finish_reason':"
	    "'tool_calls'}],'usage':{'prompt_tokens':5,'completion_tokens':"
	    "6}}\n\n";
	/* the SSE text goes into a JSON string in the recording */
	_cleanup_free_ char *text = standin_dq(sse);
	json_auto_t *rec = json_pack("{s:[{s:s, s:i}]}", "responses", "raw",
				     text, "chunk_bytes", 1);
	assert_int_equal(json_dump_file(rec, recording_path, 0), 0);
	start_server(NULL);
	struct provider_config cfg = openai_cfg(true);
	struct provider *p = new_provider(&cfg);
	json_auto_t *messages = conversation();
	struct provider_reply reply = {0};
	complete_ok(p, messages, NULL, &reply);
	assert_string_equal(str_at(reply.message, "content"), "Hi there");
	assert_call(reply.message, 0, "c9", "bash", "{\"command\":\"true\"}");
	assert_string_equal(reply.finish_reason, "tool_calls");
	assert_int_equal(reply.usage.prompt_tokens, 5);
	assert_int_equal(reply.usage.completion_tokens, 6);
	provider_reply_clear(&reply);
	provider_free(p);
}

/* The assistant message goes back as is in the next request, with the
 * tool results, and the server takes it. */
static void test_message_goes_back(void **state)
{
	(void)state;
	write_recording(
	    "{'responses': [{'message': {'content': null, 'tool_calls': "
	    "[{'id': 'call_X', 'type': 'function', 'function': {'name': "
	    "'bash', 'arguments': '{\\'command\\': \\'make\\'}'}}]}},"
	    " {'message': {'content': 'Built.'}}]}");
	start_server(NULL);
	struct provider_config cfg = openai_cfg(true);
	struct provider *p = new_provider(&cfg);
	json_auto_t *messages = conversation();
	json_auto_t *tools = tool_defs();
	struct provider_reply reply = {0};
	complete_ok(p, messages, tools, &reply);
	/* nothing but role, content and tool_calls */
	assert_int_equal(json_object_size(reply.message), 3);
	assert_true(json_is_null(json_object_get(reply.message, "content")));
	json_array_append(messages, reply.message);
	json_array_append_new(messages,
			      json_dq("{'role': 'tool', 'tool_call_id': "
				      "'call_X', 'content': 'ok'}"));
	struct provider_reply second = {0};
	complete_ok(p, messages, tools, &second);
	assert_string_equal(str_at(second.message, "content"), "Built.");

	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 2);
	const json_t *sent = json_object_get(
	    json_object_get(json_array_get(log, 1), "body"), "messages");
	assert_int_equal(json_array_size(sent), 4);
	assert_true(json_equal(json_array_get(sent, 2), reply.message));
	assert_call(json_array_get(sent, 2), 0, "call_X", "bash",
		    "{\"command\": \"make\"}");
	provider_reply_clear(&reply);
	provider_reply_clear(&second);
	provider_free(p);
}

/* ---- openai: retries ---- */

static void test_retry_after_honoured(void **state)
{
	(void)state;
	write_recording("{'responses': [{'status': 429, 'retry_after': 0.4, "
			"'error': {'message': 'Rate limit reached'}},"
			" {'message': {'content': 'after the wait'}}]}");
	start_server(NULL);
	struct provider_config cfg = openai_cfg(false);
	struct provider *p = new_provider(&cfg);
	json_auto_t *messages = conversation();
	struct provider_reply reply = {0};
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	complete_ok(p, messages, NULL, &reply);
	double took = seconds_since(&t0);
	assert_true(took >= 0.38); /* the back-off alone would be 1 ms */
	assert_int_equal(reply.retries, 1);
	assert_string_equal(str_at(reply.message, "content"), "after the wait");
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 2);
	provider_reply_clear(&reply);
	provider_free(p);
}

static void test_retry_after_capped(void **state)
{
	(void)state;
	write_recording("{'responses': [{'status': 429, 'retry_after': 120},"
			" {'status': 503, 'retry_after': 3600},"
			" {'message': {'content': 'no long wait'}}]}");
	start_server(NULL);
	struct provider_config cfg = openai_cfg(true);
	cfg.retry_wait_max_ms = 150;
	struct provider *p = new_provider(&cfg);
	json_auto_t *messages = conversation();
	struct provider_reply reply = {0};
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	complete_ok(p, messages, NULL, &reply);
	double took = seconds_since(&t0);
	assert_true(took >= 0.28 && took < 5);
	assert_int_equal(reply.retries, 2);
	provider_reply_clear(&reply);
	provider_free(p);
}

/* A dropped connection and 5xx, no Retry-After: back-off 60 + 120 + 240
 * ms. */
static void test_retry_server_errors(void **state)
{
	(void)state;
	/* the hang-up first: on a reused connection libcurl would itself
	 * resend the request once, taking the next entry */
	write_recording("{'responses': [{'hang_up': true},"
			" {'status': 500},"
			" {'status': 502, 'error': {'message': 'Bad gateway'}},"
			" {'message': {'content': 'third time lucky'}, "
			"'usage': {'prompt_tokens': 1, 'completion_tokens': "
			"2}}]}");
	start_server(NULL);
	struct provider_config cfg = openai_cfg(true);
	cfg.max_retries = 3;
	cfg.retry_backoff_ms = 60;
	struct provider *p = new_provider(&cfg);
	json_auto_t *messages = conversation();
	struct provider_reply reply = {0};
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	complete_ok(p, messages, NULL, &reply);
	double took = seconds_since(&t0);
	if (took < 0.06 + 0.12 + 0.24 - 0.02)
		fail_msg("three back-offs took %.3f s", took);
	assert_int_equal(reply.retries, 3);
	assert_string_equal(str_at(reply.message, "content"),
			    "third time lucky");
	assert_int_equal(reply.usage.completion_tokens, 2);
	provider_reply_clear(&reply);
	provider_free(p);
}

static void test_retries_exhausted(void **state)
{
	(void)state;
	write_recording("{'responses': [{'status': 500}, {'status': 503}, "
			"{'status': 500, 'error': {'message': 'The server had "
			"an error'}}, {'status': 429}]}");
	start_server(NULL);
	struct provider_config cfg = openai_cfg(false);
	struct provider *p = new_provider(&cfg);
	struct wr_error *err = complete_fails(p, -EIO, "HTTP 500");
	assert_says(err, "gave up after 2 retries");
	assert_says(err, "The server had an error");
	assert_says(err, base_url);
	assert_false(err->bad_input);
	wr_error_free(err);
	provider_free(p);

	cfg.max_retries = 0; /* 429 with no retry allowed */
	p = new_provider(&cfg);
	err = complete_fails(p, -EAGAIN, "HTTP 429");
	assert_null(strstr(err->msg, "gave up"));
	wr_error_free(err);
	provider_free(p);
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 4);
}

/* ---- openai: errors ---- */

static void test_bad_request(void **state)
{
	(void)state;
	write_recording(
	    "{'responses': [{'status': 400, 'error': {'message': "
	    "'Invalid value for \\'messages[1].role\\': \\'robot\\'.', "
	    "'type': 'invalid_request_error', 'param': 'messages', 'code': "
	    "null}}, {'message': {'content': 'never reached'}}]}");
	start_server(NULL);
	struct provider_config cfg = openai_cfg(true);
	struct provider *p = new_provider(&cfg);
	struct wr_error *err = complete_fails(p, -EINVAL, "HTTP 400");
	assert_true(err->bad_input);
	assert_says(err, "Invalid value for \"messages[1].role\": \"robot\".");
	wr_error_free(err);
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 1); /* no retry */
	provider_free(p);
}

static void test_unauthorized(void **state)
{
	(void)state;
	write_recording("{'responses': [{'message': {'content': 'welcome'}}]}");
	start_server("sk-right");
	struct provider_config cfg = openai_cfg(false);
	cfg.api_key = "sk-wrong";
	struct provider *p = new_provider(&cfg);
	struct wr_error *err = complete_fails(p, -EINVAL, "HTTP 401");
	assert_true(err->bad_input);
	assert_says(err, "Incorrect API key provided");
	assert_null(strstr(err->msg, "sk-wrong")); /* never the key */
	wr_error_free(err);
	provider_free(p);

	cfg.api_key = "sk-right";
	p = new_provider(&cfg);
	json_auto_t *messages = conversation();
	struct provider_reply reply = {0};
	complete_ok(p, messages, NULL, &reply);
	assert_string_equal(str_at(reply.message, "content"), "welcome");
	provider_reply_clear(&reply);
	provider_free(p);
}

static void test_server_down(void **state)
{
	(void)state;
	/* a port nobody listens on: bound, then closed */
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	socklen_t len = sizeof(sa);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%d/v1/",
		 ntohs(sa.sin_port));
	struct provider_config cfg = openai_cfg(false);
	cfg.max_retries = 1;
	struct provider *p = new_provider(&cfg);
	struct wr_error *err =
	    complete_fails(p, -EHOSTUNREACH, "cannot connect");
	assert_says(err, "gave up after 1 retry");
	/* named without the trailing slash it was given with */
	base_url[strlen(base_url) - 1] = '\0';
	assert_says(err, base_url);
	assert_false(err->bad_input);
	wr_error_free(err);
	provider_free(p);
}

static void test_malformed_json(void **state)
{
	(void)state;
	write_recording(
	    "{'responses': ["
	    "{'raw': '{\\'choices\\': [{\\'message\\': {\\'content\\': "
	    "\\'cut off'},"
	    "{'raw': '{\\'object\\': \\'chat.completion\\', \\'choices\\': "
	    "[]}'},"
	    "{'raw': '{\\'choices\\': [{\\'message\\': {\\'content\\': null, "
	    "\\'tool_calls\\': [{\\'id\\': \\'c\\', \\'function\\': "
	    "{\\'arguments\\': \\'{}\\'}}]}}]}'},"
	    "{'raw': '{\\'choices\\': [{\\'message\\': {\\'content\\': "
	    "42}}]}'},"
	    "{'raw': '<html>Bad gateway</html>', 'status': 502, "
	    "'content_type': 'text/html'},"
	    "{'raw': '', 'status': 200}]}");
	start_server(NULL);
	struct provider_config cfg = openai_cfg(false);
	cfg.max_retries = 0;
	struct provider *p = new_provider(&cfg);
	struct wr_error *err = complete_fails(p, -EBADMSG, "not JSON");
	wr_error_free(err);
	err = complete_fails(p, -EBADMSG, "no choices[0].message");
	wr_error_free(err);
	err = complete_fails(p, -EBADMSG, "tool_calls[0]: no function name");
	wr_error_free(err);
	err = complete_fails(p, -EBADMSG, "content is neither");
	wr_error_free(err);
	err = complete_fails(p, -EIO, "HTTP 502: <html>Bad gateway</html>");
	wr_error_free(err);
	err = complete_fails(p, -EBADMSG, "empty response");
	wr_error_free(err);
	provider_free(p);
}

static void test_malformed_sse(void **state)
{
	(void)state;
	write_recording(
	    "{'responses': ["
	    "{'raw': 'data: {\\'choices\\': [{\\'delta\\': {\\'content\\': "
	    "\\'ok\\'}}]}\\n\\ndata: {broken\\n\\n'},"
	    "{'raw': 'data: {\\'choices\\': [{\\'delta\\': {\\'content\\': "
	    "\\'half a reply\\'}}]}\\n\\n'},"
	    "{'raw': 'data: {\\'choices\\': \\'many\\'}\\n\\n'},"
	    "{'raw': 'data: {\\'choices\\': [{\\'delta\\': {\\'tool_calls\\': "
	    "[{\\'index\\': 0, \\'id\\': \\'x\\', \\'function\\': "
	    "{\\'arguments\\': \\'{}\\'}}]}, \\'finish_reason\\': "
	    "\\'tool_calls\\'}]}\\n\\ndata: [DONE]\\n\\n'},"
	    "{'raw': 'data: {\\'error\\': {\\'message\\': \\'overloaded\\'}}"
	    "\\n\\n'},"
	    "{'raw': 'data: [\\'not\\', \\'an object\\']\\n\\n'}]}");
	start_server(NULL);
	struct provider_config cfg = openai_cfg(true);
	cfg.max_retries = 0;
	struct provider *p = new_provider(&cfg);
	struct wr_error *err =
	    complete_fails(p, -EBADMSG, "malformed event in the stream");
	wr_error_free(err);
	err = complete_fails(p, -ECONNRESET, "the stream ended before");
	wr_error_free(err);
	err = complete_fails(p, -EBADMSG, "choices is not an array");
	wr_error_free(err);
	err = complete_fails(p, -EBADMSG, "no function name");
	wr_error_free(err);
	err = complete_fails(p, -EIO, "error in the stream: overloaded");
	wr_error_free(err);
	err = complete_fails(p, -EBADMSG, "not an object");
	wr_error_free(err);
	provider_free(p);
}

/* A response of 9 MiB against the 8 MiB default; then a small cap. */
static void test_response_too_big(void **state)
{
	(void)state;
	size_t big = (size_t)9 << 20;
	char *content = wr_malloc(big + 1);
	assert_non_null(content);
	memset(content, 'x', big);
	content[big] = '\0';
	json_auto_t *rec = json_pack(
	    "{s:[{s:{s:s}}, {s:{s:s}}, {s:{s:s}}]}", "responses", "message",
	    "content", content, "message", "content", content, "message",
	    "content", "a reply of more than forty bytes, surely enough");
	free(content);
	assert_non_null(rec);
	assert_int_equal(json_dump_file(rec, recording_path, 0), 0);
	start_server(NULL);
	for (int stream = 0; stream < 2; stream++) {
		struct provider_config cfg = openai_cfg(stream);
		struct provider *p = new_provider(&cfg);
		struct wr_error *err =
		    complete_fails(p, -EFBIG, "larger than 8 MiB");
		assert_false(err->bad_input);
		wr_error_free(err);
		provider_free(p);
	}
	struct provider_config cfg = openai_cfg(false);
	cfg.max_response = 40;
	struct provider *p = new_provider(&cfg);
	struct wr_error *err =
	    complete_fails(p, -EFBIG, "larger than 40 bytes");
	wr_error_free(err);
	provider_free(p);
	json_auto_t *log = server_log();
	assert_int_equal(json_array_size(log), 3); /* none retried */
}

static void test_timeout(void **state)
{
	(void)state;
	write_recording("{'responses': [{'delay': 3, 'message': {'content': "
			"'too late'}}]}");
	start_server(NULL);
	struct provider_config cfg = openai_cfg(true);
	cfg.timeout_ms = 300;
	cfg.max_retries = 0;
	struct provider *p = new_provider(&cfg);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct wr_error *err =
	    complete_fails(p, -ETIMEDOUT, "no complete response within 300 ms");
	assert_true(seconds_since(&t0) < 2);
	wr_error_free(err);
	provider_free(p);
}

static void test_config_errors(void **state)
{
	(void)state;
	struct {
		struct provider_config cfg;
		const char *says;
	} cases[] = {
	    {{.kind = NULL}, "no kind"},
	    {{.kind = "anthropic"}, "unknown kind 'anthropic'"},
	    {{.kind = "openai", .model = "m"}, "no base_url"},
	    {{.kind = "openai", .base_url = "ftp://host/v1", .model = "m"},
	     "not an http:// or https:// URL"},
	    {{.kind = "openai", .base_url = "http://h/v1"}, "no model"},
	    {{.kind = "openai",
	      .base_url = "http://h/v1",
	      .model = "m",
	      .api_key = "sk\r\nX-Evil: 1"},
	     "control characters"},
	    {{.kind = "openai",
	      .base_url = "http://h/v1",
	      .model = "m",
	      .max_retries = 1000},
	     "retries 1000"},
	    {{.kind = "replay"}, "no replay_file"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct provider *p = NULL;
		struct wr_error *err = NULL;
		int r = provider_new(&cases[i].cfg, &p, &err);
		assert_int_equal(r, -EINVAL);
		assert_null(p);
		assert_says(err, cases[i].says);
		assert_true(err->bad_input);
		wr_error_free(err);
	}
	/* messages must be an array */
	struct provider_config cfg = {
	    .kind = "openai", .base_url = "http://127.0.0.1:1", .model = "m"};
	struct provider *p = new_provider(&cfg);
	json_auto_t *not_list = json_object();
	struct provider_reply reply = {0};
	struct wr_error *err = NULL;
	assert_int_equal(p->ops->complete(p, not_list, NULL, &reply, &err),
			 -EINVAL);
	assert_says(err, "messages is not an array");
	wr_error_free(err);
	provider_free(p);
}

/* ---- replay ---- */

static struct provider *replay_provider(const char *text, unsigned retries)
{
	write_recording(text);
	struct provider_config cfg = {.kind = "replay",
				      .replay_file = recording_path,
				      .max_retries = retries};
	return new_provider(&cfg);
}

static void test_replay_in_order(void **state)
{
	(void)state;
	struct provider *p = replay_provider(two_calls, 0);
	json_auto_t *messages = conversation();
	struct provider_reply reply = {0};
	complete_ok(p, messages, NULL, &reply);
	assert_call(reply.message, 0, "call_A1", "bash",
		    "{\"command\": \"ls -la /workspace\"}");
	assert_call(reply.message, 1, "call_B2", "read_file",
		    "{\"path\":\"src/main.c\"}");
	assert_string_equal(reply.finish_reason, "tool_calls");
	assert_int_equal(reply.usage.prompt_tokens, 120);
	assert_int_equal(reply.usage.completion_tokens, 33);
	provider_reply_clear(&reply);
	/* one response recorded: the second call has none */
	struct wr_error *err =
	    complete_fails(p, -ENODATA, "no recorded response left");
	assert_says(err, recording_path);
	wr_error_free(err);
	provider_free(p);

	p = replay_provider(
	    "{'responses': [{'message': {'content': 'first'}},"
	    " {'message': {'content': 'second', 'tool_calls': []}, "
	    "'finish_reason': 'length', 'usage': {'prompt_tokens': 7}}]}",
	    0);
	complete_ok(p, messages, NULL, &reply);
	assert_string_equal(str_at(reply.message, "content"), "first");
	assert_string_equal(reply.finish_reason, "stop");
	provider_reply_clear(&reply);
	complete_ok(p, NULL, NULL, &reply); /* a script: ignores its input */
	assert_string_equal(str_at(reply.message, "content"), "second");
	assert_null(json_object_get(reply.message, "tool_calls"));
	assert_string_equal(reply.finish_reason, "length");
	assert_int_equal(reply.usage.prompt_tokens, 7);
	assert_int_equal(reply.usage.completion_tokens, 0);
	provider_reply_clear(&reply);
	provider_free(p);
}

/* Faults play as the openai backend meets them. */
static void test_replay_faults(void **state)
{
	(void)state;
	struct provider *p = replay_provider(
	    "{'responses': [{'status': 429, 'retry_after': 5}, {'hang_up': "
	    "true}, {'message': {'content': 'ok'}},"
	    " {'status': 400, 'error': {'message': 'context too long'}},"
	    " {'status': 500}, {'status': 500}, {'status': 500},"
	    " {'message': {'content': 'unreached'}}]}",
	    2);
	json_auto_t *messages = conversation();
	struct provider_reply reply = {0};
	complete_ok(p, messages, NULL, &reply);
	assert_int_equal(reply.retries, 2);
	assert_string_equal(str_at(reply.message, "content"), "ok");
	provider_reply_clear(&reply);
	struct wr_error *err = complete_fails(p, -EINVAL, "HTTP 400");
	assert_true(err->bad_input);
	assert_says(err, "context too long");
	wr_error_free(err);
	err = complete_fails(p, -EIO, "gave up after 2 retries: HTTP 500");
	assert_false(err->bad_input);
	wr_error_free(err);
	provider_free(p);
}

/* A resumed session goes on after the replies its transcript holds. */
static void test_replay_resume(void **state)
{
	(void)state;
	write_recording("{'responses': [{'message': {'content': 'A'}}, "
			"{'status': 429}, {'message': {'content': 'B'}}, "
			"{'status': 400}, {'message': {'content': 'C'}}]}");
	json_auto_t *messages = conversation();
	const char *want[] = {"A", "B", NULL, NULL};
	for (unsigned start = 0; start < ARRAY_SIZE(want); start++) {
		struct provider_config cfg = {.kind = "replay",
					      .replay_file = recording_path,
					      .max_retries = 1,
					      .replay_start = start};
		struct provider *p = new_provider(&cfg);
		struct provider_reply reply = {0};
		if (want[start]) {
			complete_ok(p, messages, NULL, &reply);
			assert_string_equal(str_at(reply.message, "content"),
					    want[start]);
			assert_int_equal(reply.retries, start == 1 ? 1 : 0);
			provider_reply_clear(&reply);
		} else if (start == 2) {
			wr_error_free(complete_fails(p, -EINVAL, "HTTP 400"));
			complete_ok(p, messages, NULL, &reply);
			assert_string_equal(str_at(reply.message, "content"),
					    "C");
			provider_reply_clear(&reply);
		} else {
			struct wr_error *err = complete_fails(
			    p, -ENODATA, "recorded response left");
			wr_error_free(err);
		}
		provider_free(p);
	}
}

/* Several scripts: the session's first user message chooses one; a
 * resumed session goes on within it; no match fails, naming the file. */
static void test_replay_scripts(void **state)
{
	(void)state;
	write_recording(
	    "{'scripts': [{'when': 'Say goodbye', 'responses': "
	    "[{'message': {'content': 'bye'}}]},"
	    " {'when': 'Say hello', 'responses': [{'message': {'content': "
	    "'hi'}}, {'message': {'content': 'hi again'}}]}]}");
	json_auto_t *messages = conversation();
	for (unsigned start = 0; start < 2; start++) {
		struct provider_config cfg = {.kind = "replay",
					      .replay_file = recording_path,
					      .replay_start = start};
		struct provider *p = new_provider(&cfg);
		struct provider_reply reply = {0};
		complete_ok(p, messages, NULL, &reply);
		assert_string_equal(str_at(reply.message, "content"),
				    start ? "hi again" : "hi");
		provider_reply_clear(&reply);
		provider_free(p);
	}
	struct provider *p = replay_provider(
	    "{'scripts': [{'when': 'Say goodbye', 'responses': "
	    "[{'message': {'content': 'bye'}}]}]}",
	    0);
	struct wr_error *err =
	    complete_fails(p, -EINVAL, "no script's \"when\" is in");
	assert_true(err->bad_input);
	assert_says(err, recording_path);
	wr_error_free(err);
	provider_free(p);
	/* a script without its text, or with a bad entry, is refused when
	 * the provider is made, naming which */
	const char *bad[][2] = {
	    {"{'scripts': [{'responses': [{'message': {'content': 'x'}}]}]}",
	     "scripts[0]: no \"when\""},
	    {"{'scripts': [{'when': 'a', 'responses': [{'usage': 1}]}]}",
	     "scripts[0]"},
	    {"{'scripts': []}", "\"scripts\" is not a non-empty array"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		write_recording(bad[i][0]);
		struct provider_config cfg = {.kind = "replay",
					      .replay_file = recording_path};
		struct provider *q = NULL;
		struct wr_error *e = NULL;
		assert_int_equal(provider_new(&cfg, &q, &e), -EINVAL);
		assert_null(q);
		assert_says(e, bad[i][1]);
		wr_error_free(e);
	}
}

static void test_replay_malformed(void **state)
{
	(void)state;
	struct {
		const char *text; /* NULL: no file */
		const char *says;
	} cases[] = {
	    {NULL, "No such file or directory"},
	    {"{'responses': [{'message': {'content': 'x'}},]}", "line 1"},
	    {"{'replies': []}", "no \"responses\" array"},
	    {"{'responses': []}", "\"responses\" is empty"},
	    {"{'responses': [{'message': {'content': 'a'}}, {'message': "
	     "{'tool_calls': [{'id': 'c', 'function': {'arguments': "
	     "'{}'}}]}}]}",
	     "responses[1].message: tool_calls[0]: no function name"},
	    {"{'responses': [{'message': {'role': 'user', 'content': 'a'}}]}",
	     "responses[0].message: the message's role is not"},
	    {"{'responses': [{'message': {'content': 'a'}, 'usage': "
	     "{'prompt_tokens': 'many'}}]}",
	     "responses[0]: usage is not"},
	    {"{'responses': [{'content': 'a'}]}",
	     "responses[0]: no \"message\""},
	    {"{'responses': [{'status': 9000}]}",
	     "responses[0]: status is not an HTTP status"},
	    {"{'responses': [1]}", "responses[0] is not an object"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		unlink(recording_path);
		if (cases[i].text)
			write_recording(cases[i].text);
		struct provider_config cfg = {.kind = "replay",
					      .replay_file = recording_path};
		struct provider *p = NULL;
		struct wr_error *err = NULL;
		int r = provider_new(&cfg, &p, &err);
		assert_true(r < 0);
		assert_null(p);
		assert_says(err, "replay file ");
		assert_says(err, recording_path);
		assert_says(err, cases[i].says);
		assert_true(err->bad_input);
		wr_error_free(err);
	}
}

/* One recording drives both backends to the same replies. */
static void test_same_recording(void **state)
{
	(void)state;
	const char *rec =
	    "{'responses': [{'status': 503}, {'message': {'content': 'Plan: "
	    "edit.', 'tool_calls': [{'id': 'call_e', 'type': 'function', "
	    "'function': {'name': 'edit_file', 'arguments': '{\\'path\\': "
	    "\\'a.c\\', \\'old_text\\': \\'x\\', \\'new_text\\': "
	    "\\'y\\'}'}}]}, 'usage': {'prompt_tokens': 9, "
	    "'completion_tokens': 8}}, {'message': {'content': 'Done.'}}]}";
	write_recording(rec);
	start_server(NULL);
	struct provider_config cfg = openai_cfg(true);
	struct provider *live = new_provider(&cfg);
	struct provider *replay = replay_provider(rec, 1);
	json_auto_t *messages = conversation();
	for (int turn = 0; turn < 2; turn++) {
		struct provider_reply a = {0}, b = {0};
		complete_ok(live, messages, NULL, &a);
		complete_ok(replay, messages, NULL, &b);
		assert_true(json_equal(a.message, b.message));
		assert_string_equal(a.finish_reason, b.finish_reason);
		assert_int_equal(a.usage.prompt_tokens, b.usage.prompt_tokens);
		assert_int_equal(a.usage.completion_tokens,
				 b.usage.completion_tokens);
		assert_int_equal(a.retries, b.retries);
		provider_reply_clear(&a);
		provider_reply_clear(&b);
	}
	provider_free(live);
	provider_free(replay);
}

/* Every allocation of a call failing in turn (util/alloc.h's test hook):
 * an error or a reply, never a crash or a leak (ASan). */
static void test_allocation_failures(void **state)
{
	(void)state;
	enum { ROUNDS = 80 }; /* more than a call's allocations */
	json_auto_t *entry = json_dq(
	    "{'message': {'content': 'Looking.', 'tool_calls': [{'id': 'c1', "
	    "'type': 'function', 'function': {'name': 'bash', 'arguments': "
	    "'{\\'command\\': \\'ls\\'}'}}, {'id': 'c2', 'type': "
	    "'function', 'function': {'name': 'list_files', 'arguments': "
	    "'{}'}}]}, 'usage': {'prompt_tokens': 3, 'completion_tokens': "
	    "4}}");
	json_auto_t *rec = json_pack("{s:[]}", "responses");
	json_t *list = json_object_get(rec, "responses");
	for (int i = 0; i < ROUNDS; i++)
		json_array_append(list, entry);
	assert_int_equal(json_dump_file(rec, recording_path, 0), 0);
	start_server(NULL);
	/* the replay loads one entry, so that its calls are reached too */
	_cleanup_free_ char *replay_path = wr_asprintf("%s/one.json", root);
	json_auto_t *one = json_pack("{s:[O]}", "responses", entry);
	assert_int_equal(json_dump_file(one, replay_path, 0), 0);
	json_auto_t *messages = conversation();
	int failed = 0;
	for (int round = 0; round < 2 * ROUNDS; round++) {
		bool replay = round % 2;
		struct provider_config cfg = openai_cfg(true);
		cfg.max_retries = 0;
		if (replay) {
			cfg.kind = "replay";
			cfg.replay_file = replay_path;
		}
		struct provider *p = NULL;
		struct wr_error *err = NULL;
		wr_alloc_fail_at((unsigned long)round / 2 + 1);
		int r = provider_new(&cfg, &p, &err);
		if (r == 0) {
			struct provider_reply reply = {0};
			r = p->ops->complete(p, messages, NULL, &reply, &err);
			if (r == 0)
				assert_int_equal(
				    json_array_size(json_object_get(
					reply.message, "tool_calls")),
				    2);
			provider_reply_clear(&reply);
			provider_free(p);
		}
		wr_alloc_fail_at(0);
		if (r < 0) {
			assert_non_null(err);
			failed++;
		}
		wr_error_free(err);
	}
	assert_true(failed > 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_plain_reply, teardown),
	    cmocka_unit_test_teardown(test_tool_calls, teardown),
	    cmocka_unit_test_teardown(test_stream_text, teardown),
	    cmocka_unit_test_teardown(test_stream_parallel_calls, teardown),
	    cmocka_unit_test_teardown(test_stream_framing, teardown),
	    cmocka_unit_test_teardown(test_message_goes_back, teardown),
	    cmocka_unit_test_teardown(test_retry_after_honoured, teardown),
	    cmocka_unit_test_teardown(test_retry_after_capped, teardown),
	    cmocka_unit_test_teardown(test_retry_server_errors, teardown),
	    cmocka_unit_test_teardown(test_retries_exhausted, teardown),
	    cmocka_unit_test_teardown(test_bad_request, teardown),
	    cmocka_unit_test_teardown(test_unauthorized, teardown),
	    cmocka_unit_test_teardown(test_server_down, teardown),
	    cmocka_unit_test_teardown(test_malformed_json, teardown),
	    cmocka_unit_test_teardown(test_malformed_sse, teardown),
	    cmocka_unit_test_teardown(test_response_too_big, teardown),
	    cmocka_unit_test_teardown(test_timeout, teardown),
	    cmocka_unit_test(test_config_errors),
	    cmocka_unit_test(test_replay_in_order),
	    cmocka_unit_test(test_replay_faults),
	    cmocka_unit_test(test_replay_resume),
	    cmocka_unit_test(test_replay_scripts),
	    cmocka_unit_test(test_replay_malformed),
	    cmocka_unit_test_teardown(test_same_recording, teardown),
	    cmocka_unit_test_teardown(test_allocation_failures, teardown),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

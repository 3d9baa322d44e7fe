/* test_gateway.c - the model gateway (src/gateway/): its settings, the
 * usage it reads out of answers, and calls through a session's socket to
 * tests/tools/chat_server.py, a local stand-in for a paid model API that
 * wants the real key.
 *
 * The calls go over the session's unix socket with libcurl
 * (CURLOPT_UNIX_SOCKET_PATH): the path the relay takes when it moves the
 * bytes itself. Run from the top of the tree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gateway/gateway.h"
#include "standin.h"
#include "util/capbuf.h"
#include "security/secrets.h"
#include "util/fs.h"

#include <curl/curl.h>
#include <sys/stat.h>

static const char *script = "tests/tools/chat_server.py";
static const char *real_key = "sk-real-key-0123456789abcdef";
static char dir[256], recording_path[300], log_path[300], sock_dir[300],
    sock_path[340];
static pid_t server_pid = -1;
static int port;

/* ---- what the gateway reports ---------------------------------------- */

static struct gateway_call last_call;
static char last_decision[32], last_reason[256];
static _Atomic int calls_reported;

/* The report comes once the answer is out: a moment after the client
 * has it. */
static void wait_reports(int n)
{
	for (int i = 0; i < 400 && calls_reported < n; i++)
		usleep(5000);
	assert_int_equal(calls_reported, n);
}

static void on_call(void *ctx, const char *session_id,
		    const struct gateway_call *call)
{
	(void)ctx;
	(void)session_id;
	last_call = *call;
	snprintf(last_decision, sizeof(last_decision), "%s", call->decision);
	snprintf(last_reason, sizeof(last_reason), "%s", call->reason);
	last_call.decision = last_decision;
	last_call.reason = last_reason;
	calls_reported++;
}

/* ---- the usage in answers ---------------------------------------------- */

static void scan_lines(struct gateway_usage_scan *u, const char *text)
{
	const char *p = text;
	while (*p) {
		size_t n = strcspn(p, "\n");
		gateway_scan_sse_line(u, p, n);
		p += n + (p[n] == '\n');
	}
}

static void test_usage_chat(void **state)
{
	(void)state;
	struct gateway_usage_scan u = {.wire = METER_WIRE_CHAT};
	scan_lines(&u, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n"
		       "\n"
		       "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":120,"
		       "\"completion_tokens\":7,\"prompt_tokens_details\":"
		       "{\"cached_tokens\":100}}}\n"
		       "data: [DONE]\n");
	assert_true(u.seen);
	assert_int_equal(u.tokens.prompt, 120);
	assert_int_equal(u.tokens.completion, 7);
	assert_int_equal(u.tokens.cached, 100);
	/* a chunk without usage and "usage": null change nothing */
	struct gateway_usage_scan v = {.wire = METER_WIRE_CHAT};
	scan_lines(&v, "data: {\"choices\":[],\"usage\":null}\n");
	assert_false(v.seen);
	struct gateway_usage_scan w = {.wire = METER_WIRE_CHAT};
	const char *body = "{\"id\":\"x\",\"usage\":{\"prompt_tokens\":5,"
			   "\"completion_tokens\":3}}";
	gateway_scan_body(&w, body, strlen(body));
	assert_true(w.seen);
	assert_int_equal(w.tokens.prompt, 5);
	assert_int_equal(w.tokens.completion, 3);
}

static void test_usage_responses(void **state)
{
	(void)state;
	struct gateway_usage_scan u = {.wire = METER_WIRE_RESPONSES};
	scan_lines(&u,
		   "event: response.output_text.delta\n"
		   "data: {\"type\":\"response.output_text.delta\",\"delta\":"
		   "\"usage\"}\n"
		   "event: response.completed\n"
		   "data: {\"type\":\"response.completed\",\"response\":{"
		   "\"usage\":{\"input_tokens\":50,\"output_tokens\":9,"
		   "\"input_tokens_details\":{\"cached_tokens\":20}}}}\n");
	assert_true(u.seen);
	assert_int_equal(u.tokens.prompt, 50);
	assert_int_equal(u.tokens.completion, 9);
	assert_int_equal(u.tokens.cached, 20);
}

static void test_usage_messages(void **state)
{
	(void)state;
	struct gateway_usage_scan u = {.wire = METER_WIRE_MESSAGES};
	scan_lines(&u,
		   "event: message_start\n"
		   "data: {\"type\":\"message_start\",\"message\":{\"usage\":"
		   "{\"input_tokens\":10,\"cache_read_input_tokens\":30,"
		   "\"cache_creation_input_tokens\":5,\"output_tokens\":1}}}\n"
		   "event: message_delta\n"
		   "data: {\"type\":\"message_delta\",\"usage\":"
		   "{\"output_tokens\":42}}\n");
	assert_true(u.seen);
	/* the prompt is all three inputs, the output the last count */
	assert_int_equal(u.tokens.prompt, 45);
	assert_int_equal(u.tokens.cached, 30);
	assert_int_equal(u.tokens.completion, 42);
	struct meter_prices p = {.prompt = 3, .completion = 15, .cached = 0.3};
	double cost = meter_cost(&p, &u.tokens);
	assert_true(cost > 0.000684 - 1e-9 && cost < 0.000684 + 1e-9);
}

/* ---- the settings ---------------------------------------------------- */

static int parse_text(const char *text, struct gateway_settings *s,
		      struct wr_error **err)
{
	char *dq = standin_dq(text);
	json_t *o = json_loads(dq, 0, NULL);
	free(dq);
	assert_non_null(o);
	int r = gateway_settings_parse(o, s, err);
	json_decref(o);
	return r;
}

static void expect_error(const char *text, const char *says)
{
	struct gateway_settings s = {0};
	struct wr_error *err = NULL;
	assert_true(parse_text(text, &s, &err) < 0);
	assert_non_null(err);
	if (!strstr(err->msg, says))
		fail_msg("'%s' does not say '%s'", err->msg, says);
	assert_true(err->bad_input);
	wr_error_free(err);
}

static void test_settings(void **state)
{
	(void)state;
	setenv("WR_TEST_GATEWAY_KEY", real_key, 1);
	struct gateway_settings s = {0};
	struct wr_error *err = NULL;
	int r = parse_text(
	    "{'port': 4100, 'upstreams': {'chat_completions': {'base_url': "
	    "'http://127.0.0.1:9/v1/', 'api_key_env': 'WR_TEST_GATEWAY_KEY', "
	    "'models': ['m1', 'm2']}}, 'prices': {'m1': {'prompt': 1, "
	    "'completion': 2}, '*': {'prompt': 5, 'completion': 6, 'cached': "
	    "0.5}}, 'budget': {'tokens': 1000, 'cost': 1.5, 'model_calls': 3}, "
	    "'timeout': '30s'}",
	    &s, &err);
	if (r < 0)
		fail_msg("%s", err->msg);
	assert_int_equal(s.port, 4100);
	assert_string_equal(s.upstream[METER_WIRE_CHAT].base_url,
			    "http://127.0.0.1:9/v1");
	assert_string_equal(s.upstream[METER_WIRE_CHAT].api_key, real_key);
	assert_int_equal(s.upstream[METER_WIRE_CHAT].n_models, 2);
	assert_null(s.upstream[METER_WIRE_MESSAGES].base_url);
	assert_true(gateway_price_of(&s, "m1").prompt == 1);
	assert_true(gateway_price_of(&s, "other").cached == 0.5);
	assert_int_equal(s.budget.max_tokens, 1000);
	assert_int_equal(s.budget.max_model_calls, 3);
	assert_int_equal(s.timeout_ms, 30000);
	gateway_settings_clear(&s);

	expect_error("{'upstreams': {'chat_completions': {'base_url': "
		     "'http://x/v1'}}, 'colour': 1}",
		     "unknown key 'colour'");
	expect_error("{'upstreams': {'embeddings': {'base_url': 'http://x'}}}",
		     "unknown wire format 'embeddings'");
	expect_error("{'upstreams': {'messages': {'base_url': 'ftp://x'}}}",
		     "gateway.upstreams.messages.base_url");
	expect_error("{'upstreams': {'messages': {'api_key_env': "
		     "'WR_TEST_GATEWAY_KEY'}}}",
		     "base_url is missing");
	expect_error("{'upstreams': {'messages': {'base_url': 'http://x', "
		     "'api_key_env': 'WR_TEST_NO_SUCH_VAR'}}}",
		     "is not set");
	expect_error("{'port': 0, 'upstreams': {}}", "gateway.port");
	expect_error("{'prices': {'m': {'prompt': -1, 'completion': 1}}}",
		     "gateway.prices.m");
	expect_error("{'budget': {'tokens': 'many'}}", "budget.tokens");
	expect_error("{}", "no upstream");

	/* a key file others may read is refused */
	char key_file[320];
	snprintf(key_file, sizeof(key_file), "%s/key", dir);
	standin_write_text(key_file, "sk-from-file-000000\n");
	chmod(key_file, 0644);
	char text[600];
	snprintf(text, sizeof(text),
		 "{'upstreams': {'messages': {'base_url': 'http://x', "
		 "'api_key_file': '%s'}}}",
		 key_file);
	expect_error(text, "chmod 600");
	chmod(key_file, 0600);
	r = parse_text(text, &s, &err);
	assert_int_equal(r, 0);
	assert_string_equal(s.upstream[METER_WIRE_MESSAGES].api_key,
			    "sk-from-file-000000");
	gateway_settings_clear(&s);

	struct meter_prices p = {1, 2, 0};
	struct meter_budget b = {.max_tokens = 9, .max_model_calls = 4};
	assert_int_equal(gateway_settings_from_model("http://127.0.0.1:1/v1",
						     "k", &p, &b, &s, &err),
			 0);
	assert_non_null(s.upstream[METER_WIRE_CHAT].base_url);
	assert_non_null(s.upstream[METER_WIRE_RESPONSES].base_url);
	assert_null(s.upstream[METER_WIRE_MESSAGES].base_url);
	assert_int_equal(s.budget.max_tokens, 9);
	/* the built-in agent's call budget is per turn: not the session's */
	assert_int_equal(s.budget.max_model_calls, 0);
	gateway_settings_clear(&s);
}

/* ---- calls through a session's socket ----------------------------------- */

struct answer {
	long status;
	struct capbuf body;
};

static struct answer call(const char *method, const char *path,
			  const char *token, const char *body)
{
	struct answer a = {.body = CAPBUF_INIT(1 << 20)};
	CURL *c = curl_easy_init();
	assert_non_null(c);
	char url[256];
	snprintf(url, sizeof(url), "http://localhost%s", path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock_path);
	struct curl_slist *h =
	    curl_slist_append(NULL, "Content-Type: application/json");
	char auth[200];
	if (token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		h = curl_slist_append(h, auth);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (!strcmp(method, "POST"))
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, capbuf_curl_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &a.body);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
	CURLcode rc = curl_easy_perform(c);
	if (rc != CURLE_OK)
		fail_msg("%s %s: %s", method, path, curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	capbuf_append(&a.body, "", 0);
	return a;
}

static void expect_in(const struct answer *a, const char *says)
{
	if (!a->body.data || !strstr(a->body.data, says))
		fail_msg("the answer (%ld) '%s' does not say '%s'", a->status,
			 a->body.data ? a->body.data : "", says);
}

/* The gateway with its stand-in upstream, a session open, a turn's
 * token in token[]. */
struct rig {
	struct gateway_settings set;
	struct gateway *gw;
	char token[GATEWAY_TOKEN_LEN + 1];
};

/* settings: a "gateway" object whose base URL is %d (the stand-in's
 * port), or NULL for the built-in agent's model with the real key. */
static void rig_start_with(struct rig *g, const char *recording,
			   const struct meter_budget *budget,
			   const char *settings)
{
	char *rec = standin_dq(recording);
	standin_write_text(recording_path, rec);
	free(rec);
	port = standin_start(script, recording_path, log_path, "--require-key",
			     real_key, &server_pid);
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1", port);
	struct meter_prices p = {.prompt = 2, .completion = 10};
	struct wr_error *err = NULL;
	memset(g, 0, sizeof(*g));
	if (settings) {
		char text[1024];
		snprintf(text, sizeof(text), settings, port);
		if (parse_text(text, &g->set, &err) < 0)
			fail_msg("%s", err->msg);
	} else {
		assert_int_equal(gateway_settings_from_model(
				     url, real_key, &p, budget, &g->set, &err),
				 0);
	}
	if (budget)
		g->set.budget = *budget;
	struct gateway_config cfg = {
	    .settings = &g->set, .data_dir = dir, .on_call = on_call};
	if (gateway_start(&cfg, &g->gw, &err) < 0)
		fail_msg("%s", err->msg);
	if (gateway_session_open(g->gw, "s-1", sock_dir, NULL, &err) < 0)
		fail_msg("%s", err->msg);
	assert_int_equal(gateway_turn_open(g->gw, "s-1", g->token), 0);
	assert_int_equal(strlen(g->token), GATEWAY_TOKEN_LEN);
	calls_reported = 0;
}

static void rig_start(struct rig *g, const char *recording,
		      const struct meter_budget *budget)
{
	rig_start_with(g, recording, budget, NULL);
}

static void rig_stop(struct rig *g)
{
	gateway_session_close(g->gw, "s-1");
	gateway_stop(g->gw);
	gateway_settings_clear(&g->set);
	standin_stop(&server_pid);
	/* the session's directory and socket are gone */
	struct stat st;
	assert_int_equal(stat(sock_dir, &st), -1);
}

static json_t *server_log(void)
{
	json_t *list = json_array();
	FILE *f = fopen(log_path, "re");
	char *line = NULL;
	size_t cap = 0;
	while (f && getline(&line, &cap, f) > 0)
		json_array_append_new(list, json_loads(line, 0, NULL));
	free(line);
	if (f)
		fclose(f);
	return list;
}

static const char two_answers[] =
    "{'responses': [{'message': {'role': 'assistant', 'content': 'hello "
    "there'}, 'usage': {'prompt_tokens': 1000, 'completion_tokens': 100}}, "
    "{'message': {'role': 'assistant', 'content': 'streamed words'}, "
    "'usage': {'prompt_tokens': 2000, 'completion_tokens': 200}}]}";

static void test_calls(void **state)
{
	(void)state;
	struct rig g;
	rig_start(&g, two_answers, NULL);
	/* not streamed */
	struct answer a = call(
	    "POST", "/v1/chat/completions", g.token,
	    "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
	    "\"hi\"}]}");
	assert_int_equal(a.status, 200);
	expect_in(&a, "hello there");
	assert_null(strstr(a.body.data, real_key));
	capbuf_free(&a.body);
	wait_reports(1);
	assert_string_equal(last_call.decision, "forwarded");
	assert_int_equal(last_call.tokens.prompt, 1000);
	assert_int_equal(last_call.tokens.completion, 100);
	assert_true(last_call.cost > 0.002999 && last_call.cost < 0.003001);
	/* streamed: the gateway asks for the usage chunk itself */
	a = call("POST", "/v1/chat/completions", g.token,
		 "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":"
		 "\"user\",\"content\":\"again\"}]}");
	assert_int_equal(a.status, 200);
	expect_in(&a, "data: ");
	expect_in(&a, "[DONE]");
	capbuf_free(&a.body);
	wait_reports(2);
	assert_true(last_call.streamed);
	assert_true(last_call.usage_seen);
	assert_int_equal(last_call.tokens.prompt, 2000);
	struct meter_totals t;
	assert_int_equal(gateway_session_usage(g.gw, "s-1", &t), 0);
	assert_int_equal(t.prompt_tokens, 3000);
	assert_int_equal(t.completion_tokens, 300);
	assert_int_equal(t.model_calls, 2);
	/* what the stand-in saw: the real key, and the usage asked for */
	json_t *log = server_log();
	assert_int_equal(json_array_size(log), 2);
	char want[128];
	snprintf(want, sizeof(want), "Bearer %s", real_key);
	for (size_t i = 0; i < 2; i++)
		assert_string_equal(
		    json_string_value(json_object_get(json_array_get(log, i),
						      "authorization")),
		    want);
	json_t *body = json_object_get(json_array_get(log, 1), "body");
	assert_true(json_is_true(json_object_get(
	    json_object_get(body, "stream_options"), "include_usage")));
	json_decref(log);
	/* refusals: none reach the stand-in */
	a = call("POST", "/v1/chat/completions", NULL, "{\"model\":\"m\"}");
	assert_int_equal(a.status, 401);
	expect_in(&a, "no session token");
	capbuf_free(&a.body);
	a = call("POST", "/v1/chat/completions", "wgw_forged",
		 "{\"model\":\"m\"}");
	assert_int_equal(a.status, 401);
	expect_in(&a, "not this session's token");
	capbuf_free(&a.body);
	wait_reports(4);
	assert_string_equal(last_call.decision, "refused");
	a = call("POST", "/v1/embeddings", g.token, "{}");
	assert_int_equal(a.status, 404);
	capbuf_free(&a.body);
	a = call("POST", "/v1/messages", g.token, "{\"model\":\"m\"}");
	assert_int_equal(a.status, 404);
	expect_in(&a, "does not serve the messages API");
	expect_in(&a, "\"type\":\"error\"");
	capbuf_free(&a.body);
	/* the turn ends: its token is dead */
	gateway_turn_close(g.gw, "s-1");
	a = call("POST", "/v1/chat/completions", g.token, "{\"model\":\"m\"}");
	assert_int_equal(a.status, 401);
	expect_in(&a, "no longer valid");
	capbuf_free(&a.body);
	log = server_log();
	assert_int_equal(json_array_size(log), 2);
	json_decref(log);
	rig_stop(&g);
}

static void test_budget(void **state)
{
	(void)state;
	struct rig g;
	struct meter_budget b = {.max_tokens = 1000};
	rig_start(&g, two_answers, &b);
	struct answer a = call("POST", "/v1/chat/completions", g.token,
			       "{\"model\":\"m\",\"messages\":[]}");
	assert_int_equal(a.status, 200);
	capbuf_free(&a.body);
	a = call("POST", "/v1/chat/completions", g.token,
		 "{\"model\":\"m\",\"messages\":[]}");
	assert_int_equal(a.status, 403);
	expect_in(&a, "token budget is spent (1100 of 1000");
	expect_in(&a, "budget_exceeded");
	capbuf_free(&a.body);
	wait_reports(2);
	assert_string_equal(last_call.decision, "refused");
	json_t *log = server_log();
	assert_int_equal(json_array_size(log), 1);
	json_decref(log);
	rig_stop(&g);
}

/* An upstream that refuses the key: its error comes back, the key cut
 * out of it. */
static void test_upstream_error(void **state)
{
	(void)state;
	struct rig g;
	char rec[400];
	snprintf(rec, sizeof(rec),
		 "{'responses': [{'status': 400, 'error': {'message': "
		 "'Incorrect API key provided: %s'}}]}",
		 real_key);
	rig_start(&g, rec, NULL);
	struct answer a = call("POST", "/v1/chat/completions", g.token,
			       "{\"model\":\"m\",\"messages\":[]}");
	assert_int_equal(a.status, 400);
	expect_in(&a, "Incorrect API key provided: ****");
	assert_null(strstr(a.body.data, real_key));
	capbuf_free(&a.body);
	wait_reports(1);
	assert_string_equal(last_call.decision, "failed");
	struct meter_totals t;
	assert_int_equal(gateway_session_usage(g.gw, "s-1", &t), 0);
	assert_int_equal(t.model_calls, 0);
	rig_stop(&g);
}

/* A key from the secret store: read at each call, so a rotated secret is
 * used at once, and a missing one is a clear 502 that reaches nobody. */
static void test_secret_key(void **state)
{
	(void)state;
	struct rig g;
	struct wr_error *err = NULL;
	assert_int_equal(secrets_set(dir, "GW_UPSTREAM", real_key,
				     strlen(real_key), NULL, &err),
			 0);
	rig_start_with(&g, two_answers, NULL,
		       "{'upstreams': {'chat_completions': {'base_url': "
		       "'http://127.0.0.1:%d/v1', 'api_key_secret': "
		       "'GW_UPSTREAM'}}}");
	struct answer a = call("POST", "/v1/chat/completions", g.token,
			       "{\"model\":\"m\",\"messages\":[]}");
	assert_int_equal(a.status, 200);
	expect_in(&a, "hello there");
	capbuf_free(&a.body);
	/* rotated to a key the upstream does not take: its 401 comes back */
	assert_int_equal(secrets_set(dir, "GW_UPSTREAM", "sk-rotated-000000",
				     17, NULL, &err),
			 0);
	a = call("POST", "/v1/chat/completions", g.token,
		 "{\"model\":\"m\",\"messages\":[]}");
	assert_int_equal(a.status, 401);
	capbuf_free(&a.body);
	/* gone: the gateway says so and forwards nothing */
	assert_int_equal(secrets_delete(dir, "GW_UPSTREAM", &err), 0);
	a = call("POST", "/v1/chat/completions", g.token,
		 "{\"model\":\"m\",\"messages\":[]}");
	assert_int_equal(a.status, 502);
	expect_in(&a, "its secret");
	assert_null(strstr(a.body.data, real_key));
	capbuf_free(&a.body);
	json_t *log = server_log();
	/* the first call and the rotated one; the 401 took no entry */
	assert_int_equal(json_array_size(log), 2);
	json_decref(log);
	rig_stop(&g);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/wr-test-gateway.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(recording_path, sizeof(recording_path), "%s/rec.json", dir);
	snprintf(log_path, sizeof(log_path), "%s/log.jsonl", dir);
	snprintf(sock_dir, sizeof(sock_dir), "%s/s-1.gateway", dir);
	snprintf(sock_path, sizeof(sock_path), "%s/%s", sock_dir,
		 GATEWAY_SOCKET_NAME);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	standin_stop(&server_pid);
	wr_rm_rf(dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_usage_chat),
	    cmocka_unit_test(test_usage_responses),
	    cmocka_unit_test(test_usage_messages),
	    cmocka_unit_test(test_settings),
	    cmocka_unit_test(test_calls),
	    cmocka_unit_test(test_budget),
	    cmocka_unit_test(test_upstream_error),
	    cmocka_unit_test(test_secret_key),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

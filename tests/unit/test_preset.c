/* test_preset.c - agent presets (src/agents/preset.c): the objects and
 * texts that name them, and the scripts that run a turn of each. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agents/preset.h"

#include <string.h>

static void expect_error(const char *json, const char *says)
{
	json_t *o = json_loads(json, 0, NULL);
	assert_non_null(o);
	struct agents_preset p;
	struct wr_error *err = NULL;
	assert_true(agents_preset_parse(o, &p, &err) < 0);
	json_decref(o);
	assert_non_null(err);
	if (!strstr(err->msg, says))
		fail_msg("'%s' does not say '%s'", err->msg, says);
	assert_true(err->bad_input);
	wr_error_free(err);
}

static void test_parse(void **state)
{
	(void)state;
	json_t *o = json_loads("{\"preset\": \"codex\"}", 0, NULL);
	struct agents_preset p;
	assert_int_equal(agents_preset_parse(o, &p, NULL), 0);
	json_decref(o);
	assert_int_equal(p.kind, AGENTS_CODEX);
	assert_string_equal(p.version, agents_preset_pinned(AGENTS_CODEX));
	assert_string_equal(p.model, "");
	o = json_loads("{\"preset\": \"claude-code\", \"version\": \"2.1.0\", "
		       "\"model\": \"claude-x\"}",
		       0, NULL);
	assert_int_equal(agents_preset_parse(o, &p, NULL), 0);
	json_decref(o);
	assert_string_equal(p.version, "2.1.0");
	json_t *canon = agents_preset_json(&p);
	char *text = json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(text, "{\"model\":\"claude-x\",\"preset\":"
				  "\"claude-code\",\"version\":\"2.1.0\"}");
	free(text);
	json_decref(canon);
	assert_true(agents_is_preset("{\"preset\":\"opencode\"}"));
	assert_false(agents_is_preset("{\"builtin\":true}"));
	assert_false(agents_is_preset("[\"sh\"]"));
	assert_false(agents_is_preset(NULL));

	expect_error("{\"preset\": \"aider\"}", "not one Warren knows");
	expect_error("{\"preset\": \"codex\", \"version\": \"1; rm -rf /\"}",
		     "version");
	expect_error("{\"preset\": \"codex\", \"version\": \"-x\"}", "version");
	expect_error("{\"preset\": \"codex\", \"model\": \"a b\"}", "model");
	expect_error("{\"preset\": \"codex\", \"colour\": 1}",
		     "unknown key 'colour'");
	expect_error("{\"preset\": 3}", "expected");
}

static void test_parse_text(void **state)
{
	(void)state;
	struct agents_preset p;
	struct wr_error *err = NULL;
	assert_int_equal(agents_preset_parse_text("opencode@1.2.3", &p, &err),
			 0);
	assert_int_equal(p.kind, AGENTS_OPENCODE);
	assert_string_equal(p.version, "1.2.3");
	assert_int_equal(agents_preset_parse_text("claude-code", &p, &err), 0);
	assert_string_equal(p.version,
			    agents_preset_pinned(AGENTS_CLAUDE_CODE));
	assert_true(agents_preset_parse_text("@1.0", &p, &err) < 0);
	wr_error_free(err);
	err = NULL;
	assert_true(agents_preset_parse_text("codex@", &p, &err) < 0);
	wr_error_free(err);
}

static char *script_of(const char *json, const char *model)
{
	json_t *o = json_loads(json, 0, NULL);
	struct agents_preset p;
	assert_int_equal(agents_preset_parse(o, &p, NULL), 0);
	json_decref(o);
	json_t *argv = agents_preset_argv(&p, model, 4242);
	assert_non_null(argv);
	assert_int_equal(json_array_size(argv), 3);
	assert_string_equal(json_string_value(json_array_get(argv, 0)),
			    "/bin/sh");
	char *s = strdup(json_string_value(json_array_get(argv, 2)));
	json_decref(argv);
	return s;
}

static void expect_in(const char *script, const char *what)
{
	if (!strstr(script, what))
		fail_msg("the script does not hold '%s':\n%s", what, script);
}

static void test_scripts(void **state)
{
	(void)state;
	char *s = script_of("{\"preset\": \"codex\"}", "gw-model");
	expect_in(s, "/opt/warren-agents/codex-0.171.0/node_modules/@openai/"
		     "codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex");
	expect_in(s, "model = \"gw-model\"");
	expect_in(s, "base_url = \"http://127.0.0.1:4242/v1\"");
	expect_in(s, "env_key = \"OPENAI_API_KEY\"");
	expect_in(s, "wire_api = \"responses\"");
	expect_in(s, "exec resume --last");
	expect_in(s, "<\"$WARREN_PROMPT_FILE\"");
	/* no key of any kind is written: the token is the environment's */
	assert_null(strstr(s, "sk-"));
	free(s);
	s = script_of("{\"preset\": \"opencode\", \"model\": \"own\"}", "gw");
	expect_in(s, "\"model\": \"warren/own\"");
	expect_in(s, "{env:OPENAI_API_KEY}");
	expect_in(s, "OPENCODE_DISABLE_MODELS_FETCH=1");
	expect_in(s, "--continue");
	free(s);
	/* a configured model that would need quoting: the preset's own */
	s = script_of("{\"preset\": \"claude-code\"}", "x\"; rm -rf /");
	expect_in(s, "--model claude-sonnet-4-5");
	expect_in(s, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1");
	expect_in(s, "IS_SANDBOX=1");
	assert_null(strstr(s, "rm -rf"));
	free(s);
	char pkg[128];
	struct agents_preset p = {.kind = AGENTS_CLAUDE_CODE};
	snprintf(p.version, sizeof(p.version), "2.1.332");
	agents_preset_package(&p, pkg, sizeof(pkg));
	assert_string_equal(pkg, "@anthropic-ai/claude-code@2.1.332");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_parse_text),
	    cmocka_unit_test(test_scripts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

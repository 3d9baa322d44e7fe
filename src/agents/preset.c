/* preset.c - the agent presets (preset.h): the table of CLIs, and the
 * script that runs one turn of each. What each CLI needs was found by
 * running it offline against tests/tools/model_server.py; docs/agents.md
 * says it for users. */
#include "agents/preset.h"

#include "util/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct preset_info {
	const char *name;
	const char *package; /* on the npm registry */
	const char *pinned;
	const char *wire;
	const char *model; /* asked for when nothing else says */
};

static const struct preset_info presets[AGENTS_PRESET_MAX] = {
    [AGENTS_OPENCODE] = {"opencode", "opencode-ai", "1.18.33",
			 "chat_completions", "gpt-5.5"},
    [AGENTS_CODEX] = {"codex", "@openai/codex", "0.171.0", "responses",
		      "gpt-5.5"},
    [AGENTS_CLAUDE_CODE] = {"claude-code", "@anthropic-ai/claude-code",
			    "2.1.332", "messages", "claude-sonnet-4-5"},
};

const char *agents_preset_name(enum agents_preset_kind k)
{
	return (unsigned)k < AGENTS_PRESET_MAX ? presets[k].name : NULL;
}

const char *agents_preset_pinned(enum agents_preset_kind k)
{
	return (unsigned)k < AGENTS_PRESET_MAX ? presets[k].pinned : NULL;
}

const char *agents_preset_wire(enum agents_preset_kind k)
{
	return (unsigned)k < AGENTS_PRESET_MAX ? presets[k].wire : NULL;
}

/* A version or a model as it goes into a file and onto a command line:
 * no quoting needed anywhere. */
static bool token_ok(const char *s, size_t max, const char *extra)
{
	size_t n = strlen(s);
	if (n == 0 || n >= max || s[0] == '-' || s[0] == '.')
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || strchr(extra, *p)))
			return false;
	return true;
}

static int kind_of(const char *name, struct wr_error **err)
{
	for (int k = 0; k < AGENTS_PRESET_MAX; k++)
		if (!strcmp(name, presets[k].name))
			return k;
	return wr_error_input(err, EINVAL,
			      "agent preset '%.64s': not one Warren knows "
			      "(opencode, codex, claude-code)",
			      name);
}

int agents_preset_parse(const json_t *agent, struct agents_preset *out,
			struct wr_error **err)
{
	const char *name = json_string_value(json_object_get(agent, "preset"));
	if (!json_is_object(agent) || !name)
		return wr_error_input(err, EINVAL,
				      "agent preset: expected {\"preset\": "
				      "NAME, \"version\": V, \"model\": M}");
	struct agents_preset p = {0};
	int k = kind_of(name, err);
	if (k < 0)
		return k;
	p.kind = (enum agents_preset_kind)k;
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)agent, key, v)
	{
		const char *t = json_string_value(v);
		if (!strcmp(key, "preset"))
			continue;
		if (!strcmp(key, "version")) {
			if (!t || !token_ok(t, sizeof(p.version), ".+-"))
				return wr_error_input(
				    err, EINVAL,
				    "agent preset %s: version: expected a "
				    "version (\"%s\")",
				    name, presets[k].pinned);
			snprintf(p.version, sizeof(p.version), "%s", t);
		} else if (!strcmp(key, "model")) {
			if (!t || !token_ok(t, sizeof(p.model), ".:_/-"))
				return wr_error_input(
				    err, EINVAL,
				    "agent preset %s: model: expected a model "
				    "name",
				    name);
			snprintf(p.model, sizeof(p.model), "%s", t);
		} else {
			return wr_error_input(err, EINVAL,
					      "agent preset %s: unknown key "
					      "'%.64s' (preset, version, "
					      "model)",
					      name, key);
		}
	}
	if (!p.version[0])
		snprintf(p.version, sizeof(p.version), "%s",
			 presets[k].pinned);
	*out = p;
	return 0;
}

int agents_preset_parse_text(const char *text, struct agents_preset *out,
			     struct wr_error **err)
{
	char name[64];
	const char *at = strchr(text, '@');
	size_t n = at ? (size_t)(at - text) : strlen(text);
	if (n == 0 || n >= sizeof(name))
		return wr_error_input(err, EINVAL,
				      "--agent-preset '%.64s': expected "
				      "NAME[@VERSION]",
				      text);
	memcpy(name, text, n);
	name[n] = '\0';
	json_t *o = json_pack("{s:s}", "preset", name);
	if (o && at)
		json_object_set_new(o, "version", json_string(at + 1));
	if (!o)
		return wr_error_set(err, ENOMEM, "agent preset");
	int r = agents_preset_parse(o, out, err);
	json_decref(o);
	return r;
}

bool agents_is_builtin(const char *agent_json)
{
	json_t *a = agent_json ? json_loads(agent_json, 0, NULL) : NULL;
	bool builtin = json_is_object(a) &&
		       json_is_true(json_object_get(a, "builtin")) &&
		       json_object_size(a) == 1;
	json_decref(a);
	return builtin;
}

bool agents_is_preset(const char *agent_json)
{
	json_t *a = agent_json ? json_loads(agent_json, 0, NULL) : NULL;
	bool yes = json_is_string(json_object_get(a, "preset"));
	json_decref(a);
	return yes;
}

json_t *agents_preset_json(const struct agents_preset *p)
{
	json_t *o = json_pack("{s:s, s:s}", "preset", presets[p->kind].name,
			      "version", p->version);
	if (o && p->model[0])
		json_object_set_new(o, "model", json_string(p->model));
	return o;
}

void agents_preset_package(const struct agents_preset *p, char *out,
			   size_t size)
{
	snprintf(out, size, "%s@%s", presets[p->kind].package, p->version);
}

void agents_preset_mount(const struct agents_preset *p, char *out,
			 size_t size)
{
	snprintf(out, size, AGENTS_MOUNT_DIR "/%s-%s", presets[p->kind].name,
		 p->version);
}

/* ---- the scripts of a turn ----------------------------------------------
 * Each runs in the sandbox under the turn's wrapper (runner.c), which has
 * set WARREN_PROMPT_FILE, WARREN_TURN and, from the gateway, the base
 * URLs and the token. L is the layer's node_modules; the configuration is
 * written once per sandbox, under $HOME. */

static char *opencode_script(const char *layer, const char *model,
			     const char *version)
{
	return wr_asprintf(
	    "L=%s/node_modules\n"
	    "bin=$L/opencode-linux-x64/bin/opencode\n"
	    /* the wrapper's own choice: the baseline build without AVX2 */
	    "grep -q avx2 /proc/cpuinfo 2>/dev/null || "
	    "bin=$L/opencode-linux-x64-baseline/bin/opencode\n"
	    "cfg=$HOME/.config/opencode\n"
	    "if [ ! -f \"$cfg/opencode.json\" ]; then\n"
	    "mkdir -p \"$cfg/node_modules\" || exit 125\n"
	    "cat >\"$cfg/opencode.json\" <<'EOF'\n"
	    "{\"$schema\": \"https://opencode.ai/config.json\",\n"
	    " \"model\": \"warren/%s\", \"small_model\": \"warren/%s\",\n"
	    " \"autoupdate\": false, \"share\": \"disabled\",\n"
	    " \"permission\": {\"*\": \"allow\", \"external_directory\": "
	    "\"allow\", \"doom_loop\": \"allow\"},\n"
	    " \"provider\": {\"warren\": {\"npm\": "
	    "\"@ai-sdk/openai-compatible\",\n"
	    "   \"name\": \"Warren model gateway\",\n"
	    "   \"options\": {\"baseURL\": \"{env:OPENAI_BASE_URL}\", "
	    "\"apiKey\": \"{env:OPENAI_API_KEY}\"},\n"
	    "   \"models\": {\"%s\": {\"name\": \"%s\", \"tool_call\": true,\n"
	    "     \"limit\": {\"context\": 200000, \"output\": 32000}}}}}}\n"
	    "EOF\n"
	    /* opencode installs its plugin package with npm at each start
	     * unless the directory says it has it: say so */
	    "echo '{\"dependencies\": {\"@opencode-ai/plugin\": \"%s\"}}' "
	    ">\"$cfg/package.json\"\n"
	    "echo '{\"lockfileVersion\": 3, \"packages\": {\"\": "
	    "{\"dependencies\": {\"@opencode-ai/plugin\": \"%s\"}}}}' "
	    ">\"$cfg/package-lock.json\"\n"
	    "fi\n"
	    "export OPENCODE_DISABLE_MODELS_FETCH=1 "
	    "OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1 "
	    "OPENCODE_DISABLE_SHARE=1\n"
	    /* always: with no conversation yet it starts one */
	    "set -- run --format json --auto --continue\n"
	    "exec \"$bin\" \"$@\" <\"$WARREN_PROMPT_FILE\"\n",
	    layer, model, model, model, model, version, version);
}

static char *codex_script(const char *layer, const char *model,
			  unsigned port)
{
	return wr_asprintf(
	    "bin=%s/node_modules/@openai/codex-linux-x64/vendor/"
	    "x86_64-unknown-linux-musl/bin/codex\n"
	    "export CODEX_HOME=$HOME/.codex\n"
	    "if [ ! -f \"$CODEX_HOME/config.toml\" ]; then\n"
	    "mkdir -p \"$CODEX_HOME\" || exit 125\n"
	    "cat >\"$CODEX_HOME/config.toml\" <<'EOF'\n"
	    "model = \"%s\"\n"
	    "model_provider = \"warren\"\n"
	    "approval_policy = \"never\"\n"
	    "sandbox_mode = \"danger-full-access\"\n"
	    "check_for_update_on_startup = false\n"
	    "web_search = \"disabled\"\n"
	    "\n"
	    "[model_providers.warren]\n"
	    "name = \"Warren model gateway\"\n"
	    /* codex reads no OPENAI_BASE_URL: the URL is the file's */
	    "base_url = \"http://127.0.0.1:%u/v1\"\n"
	    "env_key = \"OPENAI_API_KEY\"\n"
	    "wire_api = \"responses\"\n"
	    "\n"
	    "[analytics]\n"
	    "enabled = false\n"
	    "\n"
	    "[features]\n"
	    "plugins = false\n"
	    "unbounded_connection_retries = false\n"
	    "EOF\n"
	    "fi\n"
	    /* always: with no conversation yet it starts one */
	    "exec \"$bin\" exec resume --last --json --strict-config "
	    "--skip-git-repo-check --dangerously-bypass-approvals-and-sandbox "
	    "- <\"$WARREN_PROMPT_FILE\"\n",
	    layer, model, port);
}

static char *claude_script(const char *layer, const char *model)
{
	return wr_asprintf(
	    "bin=%s/node_modules/@anthropic-ai/claude-code-linux-x64/claude\n"
	    /* no traffic but the model's; root may skip the permission
	     * prompts (the sandbox is the boundary); a refused token is
	     * not retried for minutes */
	    "export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 "
	    "DISABLE_AUTOUPDATER=1 IS_SANDBOX=1 CLAUDE_CODE_MAX_RETRIES=4\n"
	    /* always --continue: with no conversation yet it starts one */
	    "exec \"$bin\" -p --output-format stream-json --verbose "
	    "--dangerously-skip-permissions --model %s --continue "
	    "<\"$WARREN_PROMPT_FILE\"\n",
	    layer, model);
}

json_t *agents_preset_argv(const struct agents_preset *p, const char *model,
			   unsigned port)
{
	char layer[AGENTS_VERSION_MAX + 64];
	agents_preset_mount(p, layer, sizeof(layer));
	const char *m = p->model[0] ? p->model
			: model	    ? model
				    : presets[p->kind].model;
	/* a configured name that would need quoting: the preset's own */
	if (!token_ok(m, AGENTS_MODEL_MAX, ".:_/-"))
		m = presets[p->kind].model;
	char *script = NULL;
	switch (p->kind) {
	case AGENTS_OPENCODE:
		script = opencode_script(layer, m, p->version);
		break;
	case AGENTS_CODEX: script = codex_script(layer, m, port); break;
	case AGENTS_CLAUDE_CODE: script = claude_script(layer, m); break;
	default: return NULL;
	}
	json_t *argv =
	    script ? json_pack("[s, s, s]", "/bin/sh", "-c", script) : NULL;
	free(script);
	return argv;
}

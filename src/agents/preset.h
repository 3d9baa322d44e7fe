/* preset.h - agent presets: the agent CLIs Warren knows how to run in a
 * session (OpenCode, Codex, Claude Code), installed from the npm registry
 * into an agents layer (agents/layer.h) and pointed at the model gateway.
 *
 * A preset is a session's, repository's or server's agent:
 *   {"preset": "opencode" | "codex" | "claude-code",
 *    "version": "1.18.33",        (optional: the pinned one below)
 *    "model": "gpt-5.5"}          (optional: what the CLI asks the gateway
 *                                  for; default: the first model the
 *                                  gateway's upstream allows, else the
 *                                  preset's)
 * For a turn it becomes an ordinary command agent: a shell script that
 * writes the CLI's configuration inside the sandbox (once: its provider
 * is the gateway, it runs headless and never asks, no telemetry, no
 * update), then runs the CLI on the turn's prompt file, continuing the
 * same conversation from the second turn on. What the CLI prints (JSON
 * lines) is the turn's output, and so the session's transcript.
 * docs/agents.md has what each preset writes. */
#ifndef WR_AGENTS_PRESET_H
#define WR_AGENTS_PRESET_H

#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

enum agents_preset_kind {
	AGENTS_OPENCODE,
	AGENTS_CODEX,
	AGENTS_CLAUDE_CODE,
	AGENTS_PRESET_MAX
};

#define AGENTS_VERSION_MAX 64
#define AGENTS_MODEL_MAX 128
#define AGENTS_MOUNT_DIR "/opt/warren-agents"

struct agents_preset {
	enum agents_preset_kind kind;
	char version[AGENTS_VERSION_MAX];
	char model[AGENTS_MODEL_MAX]; /* "": the default */
};

/* "opencode", "codex", "claude-code"; NULL out of range. */
const char *agents_preset_name(enum agents_preset_kind k);
/* The version pinned for k: what "version" defaults to. */
const char *agents_preset_pinned(enum agents_preset_kind k);
/* The wire format the CLI speaks: "chat_completions", "responses" or
 * "messages" (meter_wire_name's). */
const char *agents_preset_wire(enum agents_preset_kind k);

/* The preset object above: 0, or -EINVAL (bad_input) naming what is
 * wrong. Unknown keys are errors. */
int agents_preset_parse(const json_t *agent, struct agents_preset *out,
			struct wr_error **err);
/* "NAME[@VERSION]", as `--agent-preset` takes it. */
int agents_preset_parse_text(const char *text, struct agents_preset *out,
			     struct wr_error **err);
/* Is agent_json (a session's agent) the built-in agent
 * ({"builtin": true})? */
bool agents_is_builtin(const char *agent_json);
/* Is agent_json (a session's agent) a preset object? */
bool agents_is_preset(const char *agent_json);
/* The canonical object: {"preset", "version"[, "model"]}. */
json_t *agents_preset_json(const struct agents_preset *p);

/* The npm package its layer holds, "opencode-ai@1.18.33" (its platform
 * binaries come as optional dependencies). */
void agents_preset_package(const struct agents_preset *p, char *out,
			   size_t size);
/* Where its layer is in the sandbox: AGENTS_MOUNT_DIR/NAME-VERSION. */
void agents_preset_mount(const struct agents_preset *p, char *out,
			 size_t size);
/* The argv (a JSON array) of one turn; model: the model to ask for
 * (the preset's own when p->model is "" and model is NULL); port: the
 * gateway's inside the sandbox. NULL on ENOMEM. */
json_t *agents_preset_argv(const struct agents_preset *p, const char *model,
			   unsigned port);

#endif

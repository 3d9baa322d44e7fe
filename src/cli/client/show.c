/* show.c - `warren show ID`: one session as "key: value" lines.
 *
 *   GET /sessions/{id} */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char show_usage[] =
    "usage: warren show ID [--json]\n"
    "\n"
    "Shows one session: state, repository, prompt, agent, limits, times.\n"
    "\n"
    "  --json         the session as the API returns it\n"
    "  --server URL   Warren server (default $WARREN_SERVER, else\n"
    "                 " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T      API token (default $WARREN_TOKEN, else\n"
    "                 $WARREN_HOME/admin.token, ./.warren/admin.token)\n";

/* "key:" padded so that the values line up. */
static void field(const char *key, const char *value)
{
	_cleanup_free_ char *clean = value ? client_clean(value) : NULL;
	printf("%-11s %s\n", key, clean ? clean : "-");
}

static void field_time(const char *key, int64_t ms, int64_t now)
{
	char when[64], age[32], text[128];
	if (ms <= 0) {
		field(key, NULL);
		return;
	}
	client_format_time(ms, when, sizeof(when));
	client_format_age(now - ms, age, sizeof(age));
	snprintf(text, sizeof(text), "%s (%s ago)", when, age);
	field(key, text);
}

/* A multi-line prompt: the first line after the key, the rest indented
 * under the value. */
static void field_text(const char *key, const char *text)
{
	if (!text) {
		field(key, NULL);
		return;
	}
	const char *line = text;
	bool first = true;
	while (line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		_cleanup_free_ char *one = wr_strndup(line, len);
		_cleanup_free_ char *clean = one ? client_clean(one) : NULL;
		printf("%-11s %s\n", first ? key : "", clean ? clean : "");
		first = false;
		line = nl ? nl + 1 : NULL;
	}
}

/* {"memory": "1G", "pids": 256} -> "memory=1G pids=256" */
static char *limits_text(const json_t *limits)
{
	char *out = wr_strdup("");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)limits, key, v)
	{
		if (!out)
			return NULL;
		_cleanup_free_ char *value =
		    json_is_string(v) ? wr_strdup(json_string_value(v))
				      : json_dumps(v, JSON_ENCODE_ANY);
		char *joined = value ? wr_asprintf("%s%s%s=%s", out,
						   *out ? " " : "", key, value)
				     : NULL;
		free(out);
		out = joined;
	}
	return out;
}

/* outcome.start_ms: {"queue": 0.4, ..., "total": 5.0} on one line. */
static char *timings_text(const json_t *timings)
{
	char *out = wr_strdup("");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)timings, key, v)
	{
		if (!out)
			return NULL;
		if (!json_is_number(v))
			continue;
		char *joined =
		    wr_asprintf("%s%s%s %.1f ms", out, *out ? ", " : "", key,
				json_number_value(v));
		free(out);
		out = joined;
	}
	return out;
}

static void print_session(const json_t *s)
{
	int64_t now = client_now_ms();
	char buf[64];
	field("id:", client_json_str(s, "id"));
	field("state:", client_json_str(s, "state"));
	if (client_json_str(s, "reason"))
		field("reason:", client_json_str(s, "reason"));
	const char *repo = client_json_str(s, "repo");
	const char *repo_id = client_json_str(s, "repo_id");
	_cleanup_free_ char *repo_text =
	    repo && repo_id ? wr_asprintf("%s (%s)", repo, repo_id) : NULL;
	field("repo:", repo_text ? repo_text : repo ? repo : repo_id);
	field("ref:", client_json_str(s, "ref"));
	field("user:", client_json_str(s, "user"));
	field_text("prompt:", client_json_str(s, "prompt"));
	json_t *agent = json_object_get(s, "agent");
	/* an argv, {"builtin": true} (the server's model drives it) or a
	 * preset (a CLI Warren installs) */
	const char *preset = client_json_str(agent, "preset");
	char preset_text[200];
	snprintf(preset_text, sizeof(preset_text), "preset %s %s",
		 preset ? preset : "", client_or(client_json_str(agent, "version"), ""));
	_cleanup_free_ char *agent_text =
	    preset ? wr_strdup(preset_text)
	    : json_is_object(agent)
		? wr_strdup(json_is_true(json_object_get(agent, "builtin"))
				? "built-in (the server's model)"
				: "?")
	    : agent && !json_is_null(agent) ? client_argv_string(agent)
					    : NULL;
	field("agent:", agent_text);
	json_t *limits = json_object_get(s, "limits");
	_cleanup_free_ char *limits_str =
	    json_is_object(limits) && json_object_size(limits)
		? limits_text(limits)
		: NULL;
	field("limits:", limits_str);
	field("snapshot:", client_json_str(s, "snapshot_id"));
	field("sandbox:", client_json_str(s, "sandbox"));
	snprintf(buf, sizeof(buf), "%lld",
		 (long long)client_json_int(s, "attempts", 0));
	field("attempts:", buf);
	snprintf(buf, sizeof(buf), "%lld",
		 (long long)client_json_int(s, "turns", 0));
	field("turns:", buf);
	int64_t code = client_json_int(s, "exit_code", -1);
	snprintf(buf, sizeof(buf), "%lld", (long long)code);
	field("exit code:", code >= 0 ? buf : NULL);
	field_time("created:", client_json_int(s, "created_ms", 0), now);
	field_time("updated:", client_json_int(s, "updated_ms", 0), now);
	field_time("started:", client_json_int(s, "started_ms", 0), now);
	field_time("finished:", client_json_int(s, "finished_ms", 0), now);

	/* The outcome: the start breakdown, then whatever else it holds. */
	json_t *outcome = json_object_get(s, "outcome");
	const char *key;
	json_t *v;
	json_object_foreach(outcome, key, v)
	{
		bool start = !strcmp(key, "start_ms") && json_is_object(v);
		_cleanup_free_ char *label =
		    wr_asprintf("%s:", start ? "start" : key);
		_cleanup_free_ char *text =
		    start ? timings_text(v)
			  : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
		field(label ? label : "?", text);
	}
}

int client_cmd_show(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "show",
	    .usage = show_usage,
	};
	int code = client_parse(c, &verb, NULL, argc, argv);
	if (code != CLIENT_CONTINUE)
		return code;
	code = client_check_args(c, 1, 1, "session ID");
	if (code != CLIENT_CONTINUE)
		return code;

	_cleanup_free_ char *id = client_escape(c->args[0]);
	_cleanup_free_ char *path = id ? wr_asprintf("/sessions/%s", id) : NULL;
	if (!path)
		return client_exit(c, -ENOMEM, NULL);
	json_t *session = NULL;
	struct wr_error *err = NULL;
	int r = client_get(c, path, &session, &err);
	if (r < 0)
		return client_exit(c, r, err);
	if (c->json)
		r = client_print_json(session);
	else
		print_session(session);
	json_decref(session);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

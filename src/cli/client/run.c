/* run.c - `warren run`: start a session, and optionally follow it to rest.
 *
 *   POST /sessions {repo, prompt, ref?, agent?, limits?}
 *   GET  /sessions/{id}/events   (--follow, --wait)
 *   GET  /sessions/{id}          (the state it came to rest in) */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char run_usage[] =
    "usage: warren run --repo R [options] \"PROMPT\"\n"
    "\n"
    "Starts a session: an agent works on PROMPT in a sandbox restored from\n"
    "the newest snapshot of repository R.\n"
    "\n"
    "  --repo R            repository id, name, git URL or local path\n"
    "                      (a URL or path not registered yet is registered)\n"
    "  --ref REF           branch, tag or commit to work on (default: the\n"
    "                      repository's)\n"
    "  --agent CMD         the agent, a shell command line (run as sh -c "
    "CMD;\n"
    "                      default: the repository's, then the server's)\n"
    "  --agent-preset NAME[@VERSION]\n"
    "                      an agent CLI Warren installs and runs: opencode,\n"
    "                      codex or claude-code (default: its pinned version)\n"
    "  --limit KEY=VALUE   a limit, repeatable: cpus=1.5 memory=1G pids=256\n"
    "                      disk=2G lifetime=1h idle=10m\n"
    "  -f, --follow        show the progress and the agent's output until "
    "the\n"
    "                      session rests; exit 0 if it reached review, "
    "4 if its\n"
    "                      verification failed there, else 1\n"
    "  --raw               with --follow: the agent's output lines as it "
    "wrote\n"
    "                      them, on a terminal too (by default a terminal "
    "gets\n"
    "                      their control characters shown visibly: ^[ for "
    "ESC)\n"
    "  -w, --wait          wait like --follow, printing only the result\n"
    "  --json              the session as JSON (--follow: JSON lines)\n"
    "  --server URL        Warren server (default $WARREN_SERVER, else\n"
    "                      " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T           API token (default $WARREN_TOKEN, else\n"
    "                      $WARREN_HOME/admin.token, ./.warren/admin.token)\n"
    "\n"
    "Exit status: 0 session started (--follow/--wait: it reached review,\n"
    "its verification passed or there was none), 1 API error\n"
    "(--follow/--wait: it rested in another state), 2 usage error, 3\n"
    "server unreachable, 4 (--follow/--wait) it rests in review with its\n"
    "verification failed.\n";

enum {
	OPT_REPO = 0x100,
	OPT_REF,
	OPT_AGENT,
	OPT_PRESET,
	OPT_LIMIT,
	OPT_RAW,
};

static const struct option run_options[] = {
    {"repo", required_argument, NULL, OPT_REPO},
    {"ref", required_argument, NULL, OPT_REF},
    {"agent", required_argument, NULL, OPT_AGENT},
    {"agent-preset", required_argument, NULL, OPT_PRESET},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"follow", no_argument, NULL, 'f'},
    {"wait", no_argument, NULL, 'w'},
    {"raw", no_argument, NULL, OPT_RAW},
    {NULL, 0, NULL, 0},
};

struct run_opts {
	const char *repo, *ref, *agent, *preset;
	bool follow, wait, raw;
	json_t *limits; /* object, or NULL */
};

/* --limit KEY=VALUE: the known keys are checked here (the server checks
 * them against its maximums); values go as the API's example has them,
 * strings except pids. Unknown keys are left to the server to refuse. */
static int parse_limit(struct client *c, struct run_opts *o, const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg || !eq[1]) {
		client_usage_error(c, "--limit '%s': not KEY=VALUE", arg);
		return -1;
	}
	_cleanup_free_ char *key = wr_strndup(arg, (size_t)(eq - arg));
	const char *value = eq + 1;
	if (!key)
		return -1;
	uint64_t n;
	int r = 0;
	json_t *v = NULL;
	if (!strcmp(key, "cpus"))
		r = wr_parse_cpus(value, &n);
	else if (!strcmp(key, "memory") || !strcmp(key, "disk"))
		r = wr_parse_size(value, &n);
	else if (!strcmp(key, "lifetime") || !strcmp(key, "idle"))
		r = wr_parse_duration(value, &n);
	if (!strcmp(key, "pids")) {
		r = wr_parse_uint(value, 1, UINT32_MAX, &n);
		if (r == 0)
			v = json_integer((json_int_t)n);
	} else if (r == 0) {
		v = json_string(value);
	}
	if (r < 0) {
		client_usage_error(c, "--limit %s: bad value '%s'", key, value);
		return -1;
	}
	if (!o->limits)
		o->limits = json_object();
	/* (json_string() and keys refuse what is not UTF-8) */
	if (!v || !o->limits || json_object_set_new(o->limits, key, v) < 0) {
		client_usage_error(c, "--limit '%s': not valid UTF-8", arg);
		return -1;
	}
	return 0;
}

static int on_option(struct client *c, void *ctx, int opt, const char *arg)
{
	struct run_opts *o = ctx;
	switch (opt) {
	case OPT_REPO: o->repo = arg; return 0;
	case OPT_REF: o->ref = arg; return 0;
	case OPT_AGENT:
		if (!*arg) {
			client_usage_error(c, "--agent: empty command");
			return -1;
		}
		o->agent = arg;
		return 0;
	case OPT_PRESET: o->preset = arg; return 0;
	case OPT_LIMIT: return parse_limit(c, o, arg);
	case 'f': o->follow = true; return 0;
	case 'w': o->wait = true; return 0;
	case OPT_RAW: o->raw = true; return 0;
	}
	return -1;
}

/* --- following --------------------------------------------------------- */

struct progress {
	int64_t created_ms; /* elapsed times count from here */
	bool raw;	    /* --raw: output lines as they are */
};

/* Human --follow: the agent's output on its own stream (as it is, or
 * made visible on a terminal: client_print_event), and the lifecycle as
 * "[  0.3s] provisioning" lines on stderr. */
static int show_progress(void *ctx, json_t *event)
{
	struct progress *p = ctx;
	const char *kind = client_json_str(event, "kind");
	json_t *data = json_object_get(event, "data");
	if (!kind)
		return 0;
	if (!strcmp(kind, "output"))
		return client_print_event(event, p->raw);
	int64_t t = client_json_int(event, "time_ms", 0) - p->created_ms;
	double elapsed = (double)(t < 0 ? 0 : t) / 1000.0;
	_cleanup_free_ char *what = NULL;
	if (!strcmp(kind, "state")) {
		const char *reason = client_json_str(data, "reason");
		what = wr_asprintf(
		    "%s%s%s", client_or(client_json_str(data, "state"), "?"),
		    reason ? ": " : "", reason ? reason : "");
	} else if (!strcmp(kind, "phase")) {
		json_t *ms = json_object_get(data, "ms");
		const char *phase =
		    client_or(client_json_str(data, "phase"), "?");
		what = json_is_number(ms) ? wr_asprintf("  %s %.1f ms", phase,
							json_number_value(ms))
					  : wr_asprintf("  %s", phase);
	} else if (!strcmp(kind, "message")) {
		what =
		    wr_asprintf("message from %s: %s",
				client_or(client_json_str(data, "user"), "?"),
				client_or(client_json_str(data, "text"), ""));
	} else if (!strcmp(kind, "turn")) {
		const char *status = client_json_str(data, "status");
		if (status && !strcmp(status, "started"))
			what = wr_asprintf(
			    "turn %lld started",
			    (long long)client_json_int(data, "turn", 0));
		else
			what = wr_asprintf(
			    "turn %lld ended with exit code %lld",
			    (long long)client_json_int(data, "turn", 0),
			    (long long)client_json_int(data, "exit_code", -1));
	} else if (!strcmp(kind, "error")) {
		what = wr_asprintf(
		    "error: %s",
		    client_or(client_json_str(data, "message"), "?"));
	} else {
		/* verification, the result, the built-in agent's steps */
		_cleanup_free_ char *summary = client_event_summary(event);
		if (!summary)
			return 0;
		char prefix[32];
		snprintf(prefix, sizeof(prefix), "[%5.1fs] ", elapsed);
		fflush(stdout);
		return client_print_lines(stderr, prefix, summary);
	}
	_cleanup_free_ char *clean = what ? client_clean(what) : NULL;
	if (!clean)
		return -ENOMEM;
	fflush(stdout); /* the agent's lines so far come first */
	fprintf(stderr, "[%5.1fs] %s\n", elapsed, clean);
	return 0;
}

static int json_event(void *ctx, json_t *event)
{
	(void)ctx;
	return client_print_json_line(event);
}

static int quiet_event(void *ctx, json_t *event)
{
	(void)ctx;
	(void)event;
	return 0;
}

/* Follows the session until it rests; prints the result; the exit code:
 * 0 review, 4 review with failed verification, 1 any other state. */
static int follow(struct client *c, struct run_opts *o, json_t *session)
{
	const char *id = client_json_str(session, "id");
	struct progress p = {client_json_int(session, "created_ms", 0), o->raw};
	struct client_follow f = {.session_id = id, .ctx = &p};
	if (c->json)
		f.on_event = o->wait ? quiet_event : json_event;
	else
		f.on_event = o->wait ? quiet_event : show_progress;
	f.quiet = o->wait;
	if (!c->json && !o->wait) {
		_cleanup_free_ char *clean = client_clean(id);
		fprintf(stderr, "session %s\n", clean ? clean : id);
	}
	if (c->json && !o->wait) {
		int r = client_print_json_line(session);
		if (r < 0)
			return client_exit(c, r, NULL);
	}

	struct wr_error *err = NULL;
	int r = client_follow(c, &f, &err);
	if (r < 0)
		return client_exit(c, r, err);

	/* The stream has ended: ask for the state it rests in. */
	_cleanup_free_ char *eid = client_escape(id);
	_cleanup_free_ char *path =
	    eid ? wr_asprintf("/sessions/%s", eid) : NULL;
	if (!path)
		return client_exit(c, -ENOMEM, NULL);
	json_t *final = NULL;
	r = client_get(c, path, &final, &err);
	if (r < 0)
		return client_exit(c, r, err);
	const char *state = client_json_str(final, "state");
	bool review = state && !strcmp(state, "review");
	/* in review with failed checks: not a success, and said so */
	json_t *verify =
	    json_object_get(json_object_get(final, "outcome"), "verify");
	bool checks_failed =
	    review && verify && !json_is_true(json_object_get(verify, "passed"));
	if (c->json) {
		r = o->wait ? client_print_json(final)
			    : client_print_json_line(final);
	} else {
		const char *reason = client_json_str(final, "reason");
		int64_t code = client_json_int(final, "exit_code", -1);
		int64_t attempts = client_json_int(verify, "attempts", 1);
		_cleanup_free_ char *checks =
		    checks_failed
			? wr_asprintf(", verification failed after %lld "
				      "attempt%s",
				      (long long)attempts,
				      attempts == 1 ? "" : "s")
			: NULL;
		_cleanup_free_ char *line = wr_asprintf(
		    "%s %s%s%s%s", id, state ? state : "?",
		    checks ? checks : "", reason && *reason ? ": " : "",
		    reason && *reason ? reason : "");
		_cleanup_free_ char *clean = line ? client_clean(line) : NULL;
		if (!clean) {
			json_decref(final);
			return client_exit(c, -ENOMEM, NULL);
		}
		/* --wait prints the result on stdout; --follow keeps stdout
		 * for the agent's own output */
		FILE *out = o->wait ? stdout : stderr;
		fflush(stdout);
		fprintf(out, "%s", clean);
		if (code >= 0)
			fprintf(out, " (exit code %lld)", (long long)code);
		fputc('\n', out);
	}
	json_decref(final);
	if (r < 0)
		return client_exit(c, r, NULL);
	if (checks_failed)
		return CLIENT_EXIT_VERIFY_FAILED;
	return review ? CLIENT_EXIT_OK : CLIENT_EXIT_FAILED;
}

int client_cmd_run(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "run",
	    .usage = run_usage,
	    .shortopts = "fw",
	    .options = run_options,
	    .on_option = on_option,
	};
	struct run_opts o = {0};
	json_t *body = NULL, *session = NULL;
	char *repo = NULL;
	struct wr_error *err = NULL;
	int code = client_parse(c, &verb, &o, argc, argv);
	if (code != CLIENT_CONTINUE)
		goto out;
	code = client_check_args(c, 1, 1, "the prompt");
	if (code != CLIENT_CONTINUE)
		goto out;
	code = CLIENT_EXIT_USAGE;
	if (!o.repo) {
		client_usage_error(c, "missing --repo");
		goto out;
	}
	if (!*c->args[0]) {
		client_usage_error(c, "the prompt is empty");
		goto out;
	}
	if (o.follow && o.wait) {
		client_usage_error(c, "--follow and --wait exclude each other");
		goto out;
	}
	if (o.raw && !o.follow) {
		client_usage_error(c, "--raw goes with --follow");
		goto out;
	}
	if (o.agent && o.preset) {
		client_usage_error(c,
				   "--agent and --agent-preset exclude each "
				   "other");
		goto out;
	}

	/* A relative path means something on this side only. */
	repo = client_local_path(o.repo, false);
	body = json_object();
	if (!repo || !body) {
		code = client_exit(c, -ENOMEM, NULL);
		goto out;
	}
	int r = client_json_set_str(body, "repo", repo, &err);
	if (r == 0)
		r = client_json_set_str(body, "prompt", c->args[0], &err);
	if (r == 0 && o.ref)
		r = client_json_set_str(body, "ref", o.ref, &err);
	if (r == 0 && o.agent)
		r = client_json_set_agent(body, o.agent, &err);
	if (r == 0 && o.preset)
		r = client_json_set_preset(body, o.preset, &err);
	if (r == 0 && o.limits && json_object_set(body, "limits", o.limits))
		r = wr_error_set(&err, ENOMEM, "limits");
	if (r < 0) {
		code = client_exit(c, r, err);
		goto out;
	}
	r = client_post(c, "/sessions", body, &session, &err);
	if (r < 0) {
		code = client_exit(c, r, err);
		goto out;
	}
	if (!client_json_str(session, "id")) {
		wr_error_set(&err, 0, "the server's session has no id");
		code = client_exit(c, -EPROTO, err);
		goto out;
	}
	if (o.follow || o.wait) {
		code = follow(c, &o, session);
		goto out;
	}
	if (c->json) {
		r = client_print_json(session);
	} else {
		_cleanup_free_ char *line = wr_asprintf(
		    "%s %s", client_json_str(session, "id"),
		    client_or(client_json_str(session, "state"), "?"));
		_cleanup_free_ char *clean = line ? client_clean(line) : NULL;
		r = clean ? 0 : -ENOMEM;
		if (clean)
			printf("%s\n", clean);
	}
	code = r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
out:
	free(repo);
	json_decref(body);
	json_decref(session);
	json_decref(o.limits);
	return code;
}

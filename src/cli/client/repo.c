/* repo.c - `warren repo add|ls|refresh|set|rm`: the repositories the server
 * knows.
 *
 *   POST /repositories {url, name?, ref?, refresh?, agent?} -> 201 repo
 *   GET  /repositories -> {"repositories": [...]}
 *   POST /repositories/{id}/refresh -> 202 {"status": "queued"}
 *   PATCH /repositories/{id} {url?, ref?, refresh?, agent?} -> 200 repo
 *   DELETE /repositories/{id} -> 200 {"status": "removed"} (409 in use)
 *   GET  /repositories/{id}/builds -> {"builds": [...]} (show)
 *   GET  /repositories/{id}/builds/{build}/log -> text (log)
 *   POST /repositories/{id}/builds/cancel -> 200 build (409 none) */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char repo_usage[] =
    "usage: warren repo add URL [--name N] [--ref REF] [--refresh DURATION]\n"
    "                           [--agent CMD | --agent-preset NAME[@V]]\n"
    "                           [--json]\n"
    "       warren repo ls [--json]\n"
    "       warren repo refresh ID|NAME [--json]\n"
    "       warren repo set ID|NAME [--url URL] [--ref REF|--ref ''] \n"
    "                               [--refresh DURATION] [--agent CMD|'']\n"
    "                               [--agent-preset NAME[@VERSION]]\n"
    "       warren repo rm ID|NAME\n"
    "       warren repo show ID|NAME [--json]\n"
    "       warren repo log ID|NAME [BUILD]\n"
    "       warren repo cancel-build ID|NAME [--json]\n"
    "\n"
    "add: registers a repository (a git URL or a local path; a relative\n"
    "     path is made absolute here) and starts its first snapshot build.\n"
    "     Prints the repository's id and name.\n"
    "  --name N            its name (default: the last path component)\n"
    "  --ref REF           default branch, tag or commit of its sessions\n"
    "  --refresh DURATION  rebuild its snapshot this often: 90s, 30m, 1h\n"
    "  --agent CMD         default agent of its sessions (run as sh -c "
    "CMD)\n"
    "  --agent-preset NAME[@VERSION]  or an agent CLI Warren installs:\n"
    "                      opencode, codex, claude-code\n"
    "ls: lists the repositories.\n"
    "refresh: queues a snapshot refresh of a repository now.\n"
    "set: changes a repository (an empty --ref: the remote's HEAD; an\n"
    "     empty --agent: none); a new URL or ref starts a build.\n"
    "rm: removes a repository; refused while one of its sessions is not\n"
    "    finished. Its sessions' history stays.\n"
    "show: the repository and its last builds (state, times, error).\n"
    "log: a build's log (default: the last build's).\n"
    "cancel-build: stops its running or queued snapshot build.\n"
    "\n"
    "  --json              the API's JSON\n"
    "  --server URL        Warren server (default $WARREN_SERVER, else\n"
    "                      " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T           API token (default $WARREN_TOKEN, else\n"
    "                      $WARREN_HOME/admin.token, "
    "./.warren/admin.token)\n";

enum {
	OPT_NAME = 0x100,
	OPT_REF,
	OPT_REFRESH,
	OPT_AGENT,
	OPT_PRESET,
	OPT_URL,
};

static const struct option repo_options[] = {
    {"name", required_argument, NULL, OPT_NAME},
    {"ref", required_argument, NULL, OPT_REF},
    {"refresh", required_argument, NULL, OPT_REFRESH},
    {"agent", required_argument, NULL, OPT_AGENT},
    {"agent-preset", required_argument, NULL, OPT_PRESET},
    {"url", required_argument, NULL, OPT_URL},
    {NULL, 0, NULL, 0},
};

struct repo_opts {
	const char *name, *ref, *refresh, *agent, *url, *preset;
	bool ref_set, agent_set;
	const char *add_only; /* the first option only `add` (or `set`) takes */
};

static int on_option(struct client *c, void *ctx, int opt, const char *arg)
{
	struct repo_opts *o = ctx;
	uint64_t ms;
	switch (opt) {
	case OPT_NAME: o->name = arg; break;
	case OPT_REF:
		o->ref = arg;
		o->ref_set = true;
		break;
	case OPT_URL: o->url = arg; break;
	case OPT_AGENT:
		/* empty: none (`repo set`); `repo add` refuses it */
		o->agent = arg;
		o->agent_set = true;
		break;
	case OPT_PRESET:
		o->preset = arg;
		o->agent_set = true;
		break;
	case OPT_REFRESH:
		if (wr_parse_duration(arg, &ms) < 0 || ms == 0) {
			client_usage_error(c,
					   "--refresh '%s': not a duration "
					   "(90s, 30m, 1h)",
					   arg);
			return -1;
		}
		o->refresh = arg;
		break;
	default: return -1;
	}
	if (!o->add_only)
		o->add_only = opt == OPT_NAME	 ? "--name"
			      : opt == OPT_REF	 ? "--ref"
			      : opt == OPT_AGENT ? "--agent"
			      : opt == OPT_PRESET ? "--agent-preset"
			      : opt == OPT_URL	 ? "--url"
						 : "--refresh";
	return 0;
}

static int print_repo_line(const json_t *repo)
{
	_cleanup_free_ char *line =
	    wr_asprintf("%s %s", client_or(client_json_str(repo, "id"), "?"),
			client_or(client_json_str(repo, "name"), "?"));
	_cleanup_free_ char *clean = line ? client_clean(line) : NULL;
	if (!clean)
		return -ENOMEM;
	printf("%s\n", clean);
	return 0;
}

static int repo_add(struct client *c, struct repo_opts *o)
{
	int code = client_check_args(c, 1, 1, "repository URL or path");
	if (code != CLIENT_CONTINUE)
		return code;
	if (o->url) {
		client_usage_error(c, "--url is an option of 'repo set' (give "
				      "the URL as the argument)");
		return CLIENT_EXIT_USAGE;
	}
	if (o->agent && o->preset) {
		client_usage_error(c, "--agent and --agent-preset exclude each "
				      "other");
		return CLIENT_EXIT_USAGE;
	}
	if (o->agent && !*o->agent) {
		client_usage_error(c, "--agent: empty command");
		return CLIENT_EXIT_USAGE;
	}
	struct wr_error *err = NULL;
	json_t *body = json_object();
	json_t *repo = NULL;
	/* The server resolves paths from its own directory: send ours. */
	_cleanup_free_ char *url = client_local_path(c->args[0], true);
	int r = body && url ? 0 : wr_error_set(&err, ENOMEM, "repo");
	if (r == 0)
		r = client_json_set_str(body, "url", url, &err);
	if (r == 0 && o->name)
		r = client_json_set_str(body, "name", o->name, &err);
	if (r == 0 && o->ref)
		r = client_json_set_str(body, "ref", o->ref, &err);
	if (r == 0 && o->refresh)
		r = client_json_set_str(body, "refresh", o->refresh, &err);
	if (r == 0 && o->agent)
		r = client_json_set_agent(body, o->agent, &err);
	if (r == 0 && o->preset)
		r = client_json_set_preset(body, o->preset, &err);
	if (r == 0)
		r = client_post(c, "/repositories", body, &repo, &err);
	json_decref(body);
	if (r < 0)
		return client_exit(c, r, err);
	r = c->json ? client_print_json(repo) : print_repo_line(repo);
	json_decref(repo);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

static int print_repos(const json_t *list)
{
	static const char *const headers[] = {"ID",	   "NAME",	"REF",
					      "BUILD",	   "REFRESH", "REFRESHED",
					      "URL"};
	struct client_table t;
	client_table_init(&t, headers, ARRAY_SIZE(headers));
	int64_t now = client_now_ms();
	size_t i;
	json_t *repo;
	int r = 0;
	json_array_foreach(list, i, repo)
	{
		char every[32] = "-", refreshed[40] = "never";
		/* the interval in effect (the spec's or the default when
		 * the repository has none); an older server's own only */
		int64_t refresh_ms = client_json_int(
		    repo, "refresh_every_ms",
		    client_json_int(repo, "refresh_ms", 0));
		int64_t last = client_json_int(repo, "last_refresh_ms", 0);
		if (refresh_ms > 0)
			client_format_duration(refresh_ms, every,
					       sizeof(every));
		if (last > 0) {
			client_format_age(now - last, refreshed,
					  sizeof(refreshed));
			strcat(refreshed, " ago");
		}
		/* the last build: queued, building, ready or failed */
		const json_t *build = json_object_get(repo, "build");
		r = client_table_add(&t, client_json_str(repo, "id"),
				     client_json_str(repo, "name"),
				     client_json_str(repo, "default_ref"),
				     client_or(client_json_str(build, "state"),
					       "-"),
				     every, refreshed,
				     client_json_str(repo, "url"));
		if (r < 0)
			break;
	}
	if (r == 0) {
		if (t.n_rows)
			client_table_print(&t, stdout);
		else
			fprintf(stderr, "no repositories\n");
	}
	/* a failed build's cause, once per repository, under the table */
	json_array_foreach(list, i, repo)
	{
		const json_t *build = json_object_get(repo, "build");
		const char *state = client_json_str(build, "state");
		if (r < 0 || !state || strcmp(state, "failed"))
			continue;
		_cleanup_free_ char *line = wr_asprintf(
		    "%s: build failed: %s",
		    client_or(client_json_str(repo, "name"), "?"),
		    client_or(client_json_str(build, "error"), "?"));
		_cleanup_free_ char *clean = line ? client_clean(line) : NULL;
		fflush(stdout); /* after the table */
		if (clean)
			fprintf(stderr, "%s\n", clean);
	}
	client_table_clear(&t);
	return r;
}

static int repo_ls(struct client *c)
{
	int code = client_check_args(c, 0, 0, "");
	if (code != CLIENT_CONTINUE)
		return code;
	json_t *doc = NULL;
	struct wr_error *err = NULL;
	int r = client_get(c, "/repositories", &doc, &err);
	if (r < 0)
		return client_exit(c, r, err);
	json_t *list = json_object_get(doc, "repositories");
	if (!json_is_array(list)) {
		json_decref(doc);
		wr_error_set(&err, 0,
			     "bad response: no \"repositories\" array");
		return client_exit(c, -EPROTO, err);
	}
	r = c->json ? client_print_json(doc) : print_repos(list);
	json_decref(doc);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

/* The route takes an id: the repository by id or name, as
 * /repositories/ID + suffix (escaped); not known: the argument as it is,
 * for the server to say so. NULL with *r set on failure. */
static char *repo_path(struct client *c, const char *suffix, int *r,
		       struct wr_error **err)
{
	json_t *doc = NULL;
	*r = client_get(c, "/repositories", &doc, err);
	if (*r < 0)
		return NULL;
	const char *want = c->args[0], *repo_id = NULL;
	size_t i;
	json_t *repo;
	json_array_foreach(json_object_get(doc, "repositories"), i, repo)
	{
		const char *rid = client_json_str(repo, "id");
		const char *name = client_json_str(repo, "name");
		if (rid &&
		    (!strcmp(rid, want) || (name && !strcmp(name, want))))
			repo_id = rid;
		if (rid && !strcmp(rid, want))
			break; /* an id wins over a name */
	}
	_cleanup_free_ char *id = client_escape(repo_id ? repo_id : want);
	char *path = id ? wr_asprintf("/repositories/%s%s", id, suffix) : NULL;
	json_decref(doc);
	if (!path)
		*r = -ENOMEM;
	return path;
}

static int repo_set(struct client *c, struct repo_opts *o)
{
	int code = client_check_args(c, 1, 1, "repository ID or NAME");
	if (code != CLIENT_CONTINUE)
		return code;
	if (o->name) {
		client_usage_error(c, "--name: a repository's name does not "
				      "change");
		return CLIENT_EXIT_USAGE;
	}
	if (!o->url && !o->ref_set && !o->refresh && !o->agent_set) {
		client_usage_error(c, "nothing to change: --url, --ref, "
				      "--refresh or --agent");
		return CLIENT_EXIT_USAGE;
	}
	struct wr_error *err = NULL;
	int r;
	_cleanup_free_ char *path = repo_path(c, "", &r, &err);
	if (!path)
		return client_exit(c, r, err);
	json_t *body = json_object();
	_cleanup_free_ char *url =
	    o->url ? client_local_path(o->url, true) : NULL;
	r = body && (!o->url || url) ? 0 : wr_error_set(&err, ENOMEM, "repo");
	if (r == 0 && url)
		r = client_json_set_str(body, "url", url, &err);
	if (r == 0 && o->ref_set)
		r = *o->ref ? client_json_set_str(body, "ref", o->ref, &err)
			    : json_object_set_new(body, "ref", json_null());
	if (r == 0 && o->refresh)
		r = client_json_set_str(body, "refresh", o->refresh, &err);
	if (r == 0 && o->preset)
		r = client_json_set_preset(body, o->preset, &err);
	else if (r == 0 && o->agent_set)
		r = *o->agent ? client_json_set_agent(body, o->agent, &err)
			      : json_object_set_new(body, "agent", json_null());
	json_t *repo = NULL;
	if (r == 0)
		r = client_patch(c, path, body, &repo, &err);
	json_decref(body);
	if (r < 0)
		return client_exit(c, r, err);
	r = c->json ? client_print_json(repo) : print_repo_line(repo);
	json_decref(repo);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

static int repo_rm(struct client *c)
{
	int code = client_check_args(c, 1, 1, "repository ID or NAME");
	if (code != CLIENT_CONTINUE)
		return code;
	struct wr_error *err = NULL;
	int r;
	_cleanup_free_ char *path = repo_path(c, "", &r, &err);
	if (!path)
		return client_exit(c, r, err);
	json_t *answer = NULL;
	r = client_delete(c, path, &answer, &err);
	if (r < 0)
		return client_exit(c, r, err);
	if (c->json) {
		r = client_print_json(answer);
	} else {
		_cleanup_free_ char *line =
		    wr_asprintf("removed %s", c->args[0]);
		_cleanup_free_ char *clean = line ? client_clean(line) : NULL;
		if (clean)
			printf("%s\n", clean);
		else
			r = -ENOMEM;
	}
	json_decref(answer);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

/* POST to the repository's route suffix (REPOSITORY the argument), then
 * its answer: JSON with --json, else the line line_of makes of it. */
static int repo_post(struct client *c, const char *suffix,
		     char *(*line_of)(struct client *c, const json_t *answer))
{
	int code = client_check_args(c, 1, 1, "repository ID or NAME");
	if (code != CLIENT_CONTINUE)
		return code;
	json_t *answer = NULL;
	struct wr_error *err = NULL;
	int r;
	_cleanup_free_ char *path = repo_path(c, suffix, &r, &err);
	if (!path)
		return client_exit(c, r, err);
	r = client_post(c, path, NULL, &answer, &err);
	if (r < 0)
		return client_exit(c, r, err);
	if (c->json) {
		r = client_print_json(answer);
	} else {
		_cleanup_free_ char *line = line_of(c, answer);
		_cleanup_free_ char *clean = line ? client_clean(line) : NULL;
		if (clean)
			printf("%s\n", clean);
		else
			r = -ENOMEM;
	}
	json_decref(answer);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

static char *refresh_line(struct client *c, const json_t *answer)
{
	return wr_asprintf(
	    "refresh of %s %s", c->args[0],
	    client_or(client_json_str(answer, "status"), "queued"));
}

static int repo_refresh(struct client *c)
{
	return repo_post(c, "/refresh", refresh_line);
}

static void print_time(const char *key, int64_t ms, int64_t now)
{
	if (ms <= 0)
		return;
	char age[40];
	client_format_age(now - ms, age, sizeof(age));
	printf("%s: %s ago\n", key, age);
}

static int print_builds(const json_t *list)
{
	static const char *const headers[] = {"BUILD", "STATE", "STARTED",
					      "TOOK", "SNAPSHOT", "ERROR"};
	struct client_table t;
	client_table_init(&t, headers, ARRAY_SIZE(headers));
	int64_t now = client_now_ms();
	size_t i;
	json_t *b;
	int r = 0;
	json_array_foreach(list, i, b)
	{
		char started[40] = "-", took[32] = "-", snap[16] = "-";
		int64_t s0 = client_json_int(b, "started_ms", 0);
		int64_t s1 = client_json_int(b, "finished_ms", 0);
		if (s0 > 0) {
			client_format_age(now - s0, started, sizeof(started));
			strcat(started, " ago");
		}
		if (s0 > 0 && s1 >= s0)
			client_format_duration(s1 - s0, took, sizeof(took));
		const char *sid = client_json_str(b, "snapshot_id");
		if (sid)
			snprintf(snap, sizeof(snap), "%.12s", sid);
		r = client_table_add(&t, client_json_str(b, "id"),
				     client_json_str(b, "state"), started, took,
				     snap,
				     client_or(client_json_str(b, "error"), ""));
		if (r < 0)
			break;
	}
	if (r == 0) {
		if (t.n_rows)
			client_table_print(&t, stdout);
		else
			printf("no builds\n");
	}
	client_table_clear(&t);
	return r;
}

static int repo_show(struct client *c)
{
	int code = client_check_args(c, 1, 1, "repository ID or NAME");
	if (code != CLIENT_CONTINUE)
		return code;
	struct wr_error *err = NULL;
	json_t *doc = NULL, *builds = NULL;
	int r = client_get(c, "/repositories", &doc, &err);
	if (r < 0)
		return client_exit(c, r, err);
	const char *want = c->args[0];
	json_t *repo = NULL, *o;
	size_t i;
	json_array_foreach(json_object_get(doc, "repositories"), i, o)
	{
		const char *rid = client_json_str(o, "id");
		const char *name = client_json_str(o, "name");
		if (rid && !strcmp(rid, want)) {
			repo = o;
			break;
		}
		if (name && !strcmp(name, want))
			repo = o;
	}
	if (!repo) {
		json_decref(doc);
		wr_error_set(&err, 0, "404 not_found: repository %s not found",
			     want);
		return client_exit(c, -ENOENT, err);
	}
	_cleanup_free_ char *id = client_escape(client_json_str(repo, "id"));
	_cleanup_free_ char *path =
	    id ? wr_asprintf("/repositories/%s/builds", id) : NULL;
	r = path ? client_get(c, path, &builds, &err) : -ENOMEM;
	if (r < 0) {
		json_decref(doc);
		return client_exit(c, r, err);
	}
	json_t *list = json_object_get(builds, "builds");
	if (c->json) {
		json_t *out = json_deep_copy(repo);
		if (out)
			json_object_set(out, "builds",
					list ? list : json_array());
		r = out ? client_print_json(out) : -ENOMEM;
		json_decref(out);
	} else {
		const json_t *b = json_object_get(repo, "build");
		static const char *const keys[] = {"id", "name", "url",
						   "default_ref"};
		static const char *const labels[] = {"id", "name", "url", "ref"};
		for (size_t k = 0; k < ARRAY_SIZE(keys) && r == 0; k++) {
			const char *v = client_json_str(repo, keys[k]);
			_cleanup_free_ char *vc =
			    client_clean(v ? v : (k == 3 ? "HEAD" : "?"));
			if (!vc)
				r = -ENOMEM;
			else
				printf("%s: %s\n", labels[k], vc);
		}
		if (r == 0) {
			const char *st = client_json_str(b, "state");
			_cleanup_free_ char *sc = client_clean(st ? st : "none");
			printf("build: %s\n", sc ? sc : "?");
			int64_t now = client_now_ms();
			print_time("started", client_json_int(b, "started_ms", 0),
				   now);
			print_time("finished",
				   client_json_int(b, "finished_ms", 0), now);
			const char *e = client_json_str(b, "error");
			_cleanup_free_ char *ec = e ? client_clean(e) : NULL;
			if (ec)
				printf("error: %s\n", ec);
			printf("\n");
			r = print_builds(list);
		} else {
			r = -ENOMEM;
		}
	}
	json_decref(builds);
	json_decref(doc);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

static int repo_log(struct client *c)
{
	int code = client_check_args(c, 1, 2, "repository ID or NAME");
	if (code != CLIENT_CONTINUE)
		return code;
	struct wr_error *err = NULL;
	int r;
	_cleanup_free_ char *base = repo_path(c, "/builds", &r, &err);
	if (!base)
		return client_exit(c, r, err);
	_cleanup_free_ char *build = NULL;
	if (c->n_args == 2) {
		build = client_escape(c->args[1]);
	} else {
		json_t *doc = NULL;
		r = client_get(c, base, &doc, &err);
		if (r < 0)
			return client_exit(c, r, err);
		const char *last = client_json_str(
		    json_array_get(json_object_get(doc, "builds"), 0), "id");
		build = last ? client_escape(last) : NULL;
		json_decref(doc);
		if (!last) {
			wr_error_set(&err, 0, "no builds yet");
			return client_exit(c, -ENOENT, err);
		}
	}
	_cleanup_free_ char *path =
	    build ? wr_asprintf("%s/%s/log", base, build) : NULL;
	if (!path)
		return client_exit(c, -ENOMEM, NULL);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	r = client_get_bytes(c, path, "text/plain", &text, &len, &err);
	if (r < 0)
		return client_exit(c, r, err);
	if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0)
		return client_exit(c, errno ? -errno : -EIO, NULL);
	return CLIENT_EXIT_OK;
}

static char *cancel_build_line(struct client *c, const json_t *answer)
{
	return wr_asprintf("build %s of %s: %s (%s)",
			   client_or(client_json_str(answer, "id"), "?"),
			   c->args[0],
			   client_or(client_json_str(answer, "state"), "?"),
			   client_or(client_json_str(answer, "error"), ""));
}

static int repo_cancel_build(struct client *c)
{
	return repo_post(c, "/builds/cancel", cancel_build_line);
}

int client_cmd_repo(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "repo",
	    .usage = repo_usage,
	    .options = repo_options,
	    .on_option = on_option,
	};
	struct repo_opts o = {0};
	/* One parse for all sub-verbs: the shared options may come before
	 * the sub-verb ("warren repo --server X ls"). */
	int code = client_parse(c, &verb, &o, argc, argv);
	if (code != CLIENT_CONTINUE)
		return code;
	if (c->n_args == 0) {
		client_usage_error(c, "missing sub-command: add, ls, refresh, "
				      "set or rm");
		return CLIENT_EXIT_USAGE;
	}
	const char *sub = c->args[0];
	c->args++;
	c->n_args--;
	if (!strcmp(sub, "add")) {
		c->verb = "repo add";
		return repo_add(c, &o);
	}
	if (!strcmp(sub, "set")) {
		c->verb = "repo set";
		return repo_set(c, &o);
	}
	if (!strcmp(sub, "show") || !strcmp(sub, "log") ||
	    !strcmp(sub, "cancel-build")) {
		c->verb = !strcmp(sub, "show")	 ? "repo show"
			  : !strcmp(sub, "log") ? "repo log"
						 : "repo cancel-build";
		if (o.add_only) {
			client_usage_error(c, "%s is an option of 'repo add'",
					   o.add_only);
			return CLIENT_EXIT_USAGE;
		}
		return !strcmp(sub, "show")  ? repo_show(c)
		       : !strcmp(sub, "log") ? repo_log(c)
					     : repo_cancel_build(c);
	}
	bool ls = !strcmp(sub, "ls") || !strcmp(sub, "list");
	bool rm = !strcmp(sub, "rm") || !strcmp(sub, "remove");
	if (!ls && !rm && strcmp(sub, "refresh")) {
		client_usage_error(c,
				   "unknown sub-command '%s' (add, ls, "
				   "refresh, set, rm, show, log, "
				   "cancel-build)",
				   sub);
		return CLIENT_EXIT_USAGE;
	}
	c->verb = ls ? "repo ls" : rm ? "repo rm" : "repo refresh";
	if (o.add_only) {
		client_usage_error(c, "%s is an option of 'repo add'",
				   o.add_only);
		return CLIENT_EXIT_USAGE;
	}
	return ls ? repo_ls(c) : rm ? repo_rm(c) : repo_refresh(c);
}

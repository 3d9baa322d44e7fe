/* repo.c - `warren repo add|ls|refresh`: the repositories the server knows.
 *
 *   POST /repositories {url, name?, ref?, refresh?, agent?} -> 201 repo
 *   GET  /repositories -> {"repositories": [...]}
 *   POST /repositories/{id}/refresh -> 202 {"status": "queued"} */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char repo_usage[] =
    "usage: warren repo add URL [--name N] [--ref REF] [--refresh DURATION]\n"
    "                           [--agent CMD] [--json]\n"
    "       warren repo ls [--json]\n"
    "       warren repo refresh ID|NAME [--json]\n"
    "\n"
    "add: registers a repository (a git URL or a local path; a relative\n"
    "     path is made absolute here) and starts its first snapshot build.\n"
    "     Prints the repository's id and name.\n"
    "  --name N            its name (default: the last path component)\n"
    "  --ref REF           default branch, tag or commit of its sessions\n"
    "  --refresh DURATION  rebuild its snapshot this often: 90s, 30m, 1h\n"
    "  --agent CMD         default agent of its sessions (run as sh -c "
    "CMD)\n"
    "ls: lists the repositories.\n"
    "refresh: queues a snapshot refresh of a repository now.\n"
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
};

static const struct option repo_options[] = {
    {"name", required_argument, NULL, OPT_NAME},
    {"ref", required_argument, NULL, OPT_REF},
    {"refresh", required_argument, NULL, OPT_REFRESH},
    {"agent", required_argument, NULL, OPT_AGENT},
    {NULL, 0, NULL, 0},
};

struct repo_opts {
	const char *name, *ref, *refresh, *agent;
	const char *add_only; /* the first option only `add` takes */
};

static int on_option(struct client *c, void *ctx, int opt, const char *arg)
{
	struct repo_opts *o = ctx;
	uint64_t ms;
	switch (opt) {
	case OPT_NAME: o->name = arg; break;
	case OPT_REF: o->ref = arg; break;
	case OPT_AGENT:
		if (!*arg) {
			client_usage_error(c, "--agent: empty command");
			return -1;
		}
		o->agent = arg;
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
		int64_t refresh_ms = client_json_int(repo, "refresh_ms", 0);
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

static int repo_refresh(struct client *c)
{
	int code = client_check_args(c, 1, 1, "repository ID or NAME");
	if (code != CLIENT_CONTINUE)
		return code;
	/* The route takes an id: find the repository by id or name. */
	json_t *doc = NULL, *answer = NULL;
	struct wr_error *err = NULL;
	int r = client_get(c, "/repositories", &doc, &err);
	if (r < 0)
		return client_exit(c, r, err);
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
	/* not known: let the server say so */
	_cleanup_free_ char *id = client_escape(repo_id ? repo_id : want);
	_cleanup_free_ char *path =
	    id ? wr_asprintf("/repositories/%s/refresh", id) : NULL;
	json_decref(doc);
	if (!path)
		return client_exit(c, -ENOMEM, NULL);
	r = client_post(c, path, NULL, &answer, &err);
	if (r < 0)
		return client_exit(c, r, err);
	if (c->json) {
		r = client_print_json(answer);
	} else {
		_cleanup_free_ char *line = wr_asprintf(
		    "refresh of %s %s", c->args[0],
		    client_or(client_json_str(answer, "status"), "queued"));
		_cleanup_free_ char *clean = line ? client_clean(line) : NULL;
		if (clean)
			printf("%s\n", clean);
		else
			r = -ENOMEM;
	}
	json_decref(answer);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
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
		client_usage_error(c,
				   "missing sub-command: add, ls or refresh");
		return CLIENT_EXIT_USAGE;
	}
	const char *sub = c->args[0];
	c->args++;
	c->n_args--;
	if (!strcmp(sub, "add")) {
		c->verb = "repo add";
		return repo_add(c, &o);
	}
	bool ls = !strcmp(sub, "ls") || !strcmp(sub, "list");
	if (!ls && strcmp(sub, "refresh")) {
		client_usage_error(c,
				   "unknown sub-command '%s' (add, ls, "
				   "refresh)",
				   sub);
		return CLIENT_EXIT_USAGE;
	}
	c->verb = ls ? "repo ls" : "repo refresh";
	if (o.add_only) {
		client_usage_error(c, "%s is an option of 'repo add'",
				   o.add_only);
		return CLIENT_EXIT_USAGE;
	}
	return ls ? repo_ls(c) : repo_refresh(c);
}

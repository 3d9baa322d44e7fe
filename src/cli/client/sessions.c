/* sessions.c - `warren sessions`: list sessions, newest first.
 *
 *   GET /sessions?state=&user=&repo=&limit=&before= */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char sessions_usage[] =
    "usage: warren sessions [--state S] [--user U] [--repo R] [--limit N]\n"
    "                       [--before ID] [--json]\n"
    "\n"
    "Lists sessions, newest first: ID, STATE, REPO, USER, AGE, PROMPT.\n"
    "\n"
    "  --state S      only sessions in state S (queued, provisioning, "
    "running,\n"
    "                 verifying, review, approved, pushed, rejected, "
    "failed,\n"
    "                 cancelled, expired, interrupted)\n"
    "  --user U       only sessions of user U\n"
    "  --repo R       only sessions of repository R (id or name)\n"
    "  --limit N      at most N sessions, 1 to 500 (default 50)\n"
    "  --before ID    the page after ID (the hint printed under a full "
    "page)\n"
    "  --json         the API's JSON: {\"sessions\": [...], \"next\": ...}\n"
    "  --server URL   Warren server (default $WARREN_SERVER, else\n"
    "                 " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T      API token (default $WARREN_TOKEN, else\n"
    "                 $WARREN_HOME/admin.token, ./.warren/admin.token)\n";

enum {
	OPT_STATE = 0x100,
	OPT_USER,
	OPT_REPO,
	OPT_LIMIT,
	OPT_BEFORE,
};

static const struct option sessions_options[] = {
    {"state", required_argument, NULL, OPT_STATE},
    {"user", required_argument, NULL, OPT_USER},
    {"repo", required_argument, NULL, OPT_REPO},
    {"limit", required_argument, NULL, OPT_LIMIT},
    {"before", required_argument, NULL, OPT_BEFORE},
    {NULL, 0, NULL, 0},
};

struct sessions_opts {
	const char *state, *user, *repo, *limit, *before;
};

static int on_option(struct client *c, void *ctx, int opt, const char *arg)
{
	struct sessions_opts *o = ctx;
	uint64_t n;
	switch (opt) {
	case OPT_STATE: o->state = arg; return 0;
	case OPT_USER: o->user = arg; return 0;
	case OPT_REPO: o->repo = arg; return 0;
	case OPT_BEFORE: o->before = arg; return 0;
	case OPT_LIMIT:
		if (wr_parse_uint(arg, 1, 500, &n) < 0) {
			client_usage_error(
			    c, "--limit '%s': not a number from 1 to 500", arg);
			return -1;
		}
		o->limit = arg;
		return 0;
	}
	return -1;
}

static int print_table(json_t *doc)
{
	static const char *const headers[] = {"ID",   "STATE", "REPO",
					      "USER", "AGE",   "PROMPT"};
	json_t *list = json_object_get(doc, "sessions");
	struct client_table t;
	client_table_init(&t, headers, ARRAY_SIZE(headers));
	t.fit_width = client_terminal_width();
	t.last_max = 60;
	int64_t now = client_now_ms();
	size_t i;
	json_t *s;
	int r = 0;
	json_array_foreach(list, i, s)
	{
		char age[32];
		client_format_age(now - client_json_int(s, "created_ms", now),
				  age, sizeof(age));
		const char *repo = client_json_str(s, "repo");
		r = client_table_add(
		    &t, client_json_str(s, "id"), client_json_str(s, "state"),
		    repo ? repo : client_json_str(s, "repo_id"),
		    client_json_str(s, "user"), age,
		    client_json_str(s, "prompt"));
		if (r < 0)
			break;
	}
	if (r == 0) {
		if (t.n_rows)
			client_table_print(&t, stdout);
		else
			fprintf(stderr, "no sessions\n");
	}
	client_table_clear(&t);
	const char *next = client_json_str(doc, "next");
	if (r == 0 && next) {
		_cleanup_free_ char *clean = client_clean(next);
		fprintf(stderr, "more: warren sessions --before %s\n",
			clean ? clean : "");
	}
	return r;
}

int client_cmd_sessions(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "sessions",
	    .usage = sessions_usage,
	    .options = sessions_options,
	    .on_option = on_option,
	};
	struct sessions_opts o = {0};
	int code = client_parse(c, &verb, &o, argc, argv);
	if (code != CLIENT_CONTINUE)
		return code;
	code = client_check_args(c, 0, 0, "");
	if (code != CLIENT_CONTINUE)
		return code;

	_cleanup_free_ char *query = NULL;
	_cleanup_free_ char *repo =
	    o.repo ? client_local_path(o.repo, false) : NULL;
	const struct {
		const char *key, *value;
	} params[] = {{"state", o.state},
		      {"user", o.user},
		      {"repo", repo},
		      {"limit", o.limit},
		      {"before", o.before}};
	if (o.repo && !repo)
		return client_exit(c, -ENOMEM, NULL);
	for (size_t i = 0; i < ARRAY_SIZE(params); i++)
		if (params[i].value && client_query_add(&query, params[i].key,
							params[i].value) < 0)
			return client_exit(c, -ENOMEM, NULL);
	_cleanup_free_ char *path =
	    wr_asprintf("/sessions%s", query ? query : "");
	if (!path)
		return client_exit(c, -ENOMEM, NULL);

	json_t *doc = NULL;
	struct wr_error *err = NULL;
	int r = client_get(c, path, &doc, &err);
	if (r < 0)
		return client_exit(c, r, err);
	if (!json_is_array(json_object_get(doc, "sessions"))) {
		json_decref(doc);
		wr_error_set(&err, 0, "bad response: no \"sessions\" array");
		return client_exit(c, -EPROTO, err);
	}
	r = c->json ? client_print_json(doc) : print_table(doc);
	json_decref(doc);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

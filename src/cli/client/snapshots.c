/* snapshots.c - `warren snapshots [--repo R]`: the snapshots the server
 * knows, newest first as the server lists them.
 *
 *   GET /snapshots?repo=      (and GET /repositories for the names) */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char snapshots_usage[] =
    "usage: warren snapshots [--repo R] [--json]\n"
    "\n"
    "Lists the snapshots sessions start from: ID (first 12 characters),\n"
    "REPO, COMMIT, AGE.\n"
    "\n"
    "  --repo R       only the snapshots of repository R (id or name)\n"
    "  --json         the API's JSON: {\"snapshots\": [...]}\n"
    "  --server URL   Warren server (default $WARREN_SERVER, else\n"
    "                 " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T      API token (default $WARREN_TOKEN, else\n"
    "                 $WARREN_HOME/admin.token, ./.warren/admin.token)\n";

enum { OPT_REPO = 0x100 };

static const struct option snapshots_options[] = {
    {"repo", required_argument, NULL, OPT_REPO},
    {NULL, 0, NULL, 0},
};

static int on_option(struct client *c, void *ctx, int opt, const char *arg)
{
	(void)c;
	if (opt != OPT_REPO)
		return -1;
	*(const char **)ctx = arg;
	return 0;
}

/* The name of repository id in {"repositories": [...]}, or NULL. */
static const char *repo_name(const json_t *repos, const char *id)
{
	size_t i;
	json_t *repo;
	json_array_foreach(json_object_get(repos, "repositories"), i, repo)
	{
		const char *rid = client_json_str(repo, "id");
		if (id && rid && !strcmp(id, rid))
			return client_json_str(repo, "name");
	}
	return NULL;
}

static int print_table(struct client *c, const json_t *list)
{
	static const char *const headers[] = {"ID", "REPO", "COMMIT", "AGE"};
	/* Names read better than ids; without them the ids will do. */
	json_t *repos = NULL;
	struct wr_error *err = NULL;
	if (json_array_size(list) &&
	    client_get(c, "/repositories", &repos, &err) < 0)
		wr_error_free(err);
	struct client_table t;
	client_table_init(&t, headers, ARRAY_SIZE(headers));
	int64_t now = client_now_ms();
	size_t i;
	json_t *snap;
	int r = 0;
	json_array_foreach(list, i, snap)
	{
		char age[32], id[13], commit[11];
		snprintf(id, sizeof(id), "%s",
			 client_or(client_json_str(snap, "id"), "?"));
		snprintf(commit, sizeof(commit), "%s",
			 client_or(client_json_str(snap, "commit"), "-"));
		client_format_age(now -
				      client_json_int(snap, "created_ms", now),
				  age, sizeof(age));
		const char *repo_id = client_json_str(snap, "repo_id");
		const char *name = repo_name(repos, repo_id);
		r = client_table_add(&t, id, name ? name : repo_id, commit,
				     age);
		if (r < 0)
			break;
	}
	if (r == 0) {
		if (t.n_rows)
			client_table_print(&t, stdout);
		else
			fprintf(stderr, "no snapshots\n");
	}
	client_table_clear(&t);
	json_decref(repos);
	return r;
}

int client_cmd_snapshots(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "snapshots",
	    .usage = snapshots_usage,
	    .options = snapshots_options,
	    .on_option = on_option,
	};
	const char *repo = NULL;
	int code = client_parse(c, &verb, &repo, argc, argv);
	if (code != CLIENT_CONTINUE)
		return code;
	code = client_check_args(c, 0, 0, "");
	if (code != CLIENT_CONTINUE)
		return code;

	_cleanup_free_ char *query = NULL;
	if (repo && client_query_add(&query, "repo", repo) < 0)
		return client_exit(c, -ENOMEM, NULL);
	_cleanup_free_ char *path =
	    wr_asprintf("/snapshots%s", query ? query : "");
	if (!path)
		return client_exit(c, -ENOMEM, NULL);
	json_t *doc = NULL;
	struct wr_error *err = NULL;
	int r = client_get(c, path, &doc, &err);
	if (r < 0)
		return client_exit(c, r, err);
	json_t *list = json_object_get(doc, "snapshots");
	if (!json_is_array(list)) {
		json_decref(doc);
		wr_error_set(&err, 0, "bad response: no \"snapshots\" array");
		return client_exit(c, -EPROTO, err);
	}
	r = c->json ? client_print_json(doc) : print_table(c, list);
	json_decref(doc);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

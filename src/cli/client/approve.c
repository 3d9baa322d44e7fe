/* approve.c - `warren approve ID`: the reviewer accepts a session's change;
 * the server pushes its branch warren/<id> to the repository's remote.
 *
 *   POST /sessions/{id}/approve -> 200 session */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>

static const char approve_usage[] =
    "usage: warren approve ID [--json]\n"
    "\n"
    "Approves session ID, which must be in review (a reviewer or admin\n"
    "token is needed): the server pushes its branch warren/ID to the\n"
    "repository's remote, and the session ends pushed (or failed, with the\n"
    "push's error). Prints the session's id and state.\n"
    "\n"
    "  --json         the session as the API returns it\n"
    "  --server URL   Warren server (default $WARREN_SERVER, else\n"
    "                 " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T      API token (default $WARREN_TOKEN, else\n"
    "                 $WARREN_HOME/admin.token, ./.warren/admin.token)\n";

int client_cmd_approve(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "approve",
	    .usage = approve_usage,
	};
	int code = client_parse(c, &verb, NULL, argc, argv);
	if (code != CLIENT_CONTINUE)
		return code;
	code = client_check_args(c, 1, 1, "session ID");
	if (code != CLIENT_CONTINUE)
		return code;

	_cleanup_free_ char *id = client_escape(c->args[0]);
	_cleanup_free_ char *path =
	    id ? wr_asprintf("/sessions/%s/approve", id) : NULL;
	if (!path)
		return client_exit(c, -ENOMEM, NULL);
	json_t *session = NULL;
	struct wr_error *err = NULL;
	int r = client_post(c, path, NULL, &session, &err);
	if (r < 0)
		return client_exit(c, r, err);
	if (c->json) {
		r = client_print_json(session);
	} else {
		_cleanup_free_ char *line = wr_asprintf(
		    "%s %s", client_or(client_json_str(session, "id"), "?"),
		    client_or(client_json_str(session, "state"), "?"));
		_cleanup_free_ char *clean = line ? client_clean(line) : NULL;
		if (clean)
			printf("%s\n", clean);
		else
			r = -ENOMEM;
	}
	json_decref(session);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

/* send.c - `warren send ID "TEXT"`: a follow-up message to a session.
 * It is queued behind a running turn, or starts a new turn on a session in
 * review.
 *
 *   POST /sessions/{id}/messages {text} -> 202 {"id": N, "session": {...}} */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char send_usage[] =
    "usage: warren send ID \"TEXT\" [--json]\n"
    "\n"
    "Sends a follow-up message to session ID: queued behind a running turn,\n"
    "or the start of a new turn if the session is in review. Prints the\n"
    "message number and the session's state.\n"
    "\n"
    "  --json         the API's answer: {\"id\": N, \"session\": {...}}\n"
    "  --server URL   Warren server (default $WARREN_SERVER, else\n"
    "                 " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T      API token (default $WARREN_TOKEN, else\n"
    "                 $WARREN_HOME/admin.token, ./.warren/admin.token)\n";

int client_cmd_send(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "send",
	    .usage = send_usage,
	};
	int code = client_parse(c, &verb, NULL, argc, argv);
	if (code != CLIENT_CONTINUE)
		return code;
	code = client_check_args(c, 2, 2,
				 c->n_args ? "the message text" : "session ID");
	if (code != CLIENT_CONTINUE)
		return code;
	if (!*c->args[1]) {
		client_usage_error(c, "the message is empty");
		return CLIENT_EXIT_USAGE;
	}

	struct wr_error *err = NULL;
	_cleanup_free_ char *id = client_escape(c->args[0]);
	_cleanup_free_ char *path =
	    id ? wr_asprintf("/sessions/%s/messages", id) : NULL;
	json_t *body = json_object();
	if (!path || !body) {
		json_decref(body);
		return client_exit(c, -ENOMEM, NULL);
	}
	int r = client_json_set_str(body, "text", c->args[1], &err);
	json_t *answer = NULL;
	if (r == 0)
		r = client_post(c, path, body, &answer, &err);
	json_decref(body);
	if (r < 0)
		return client_exit(c, r, err);
	if (c->json) {
		r = client_print_json(answer);
	} else {
		json_t *session = json_object_get(answer, "session");
		_cleanup_free_ char *line = wr_asprintf(
		    "message %lld sent to %s (%s)",
		    (long long)client_json_int(answer, "id", 0),
		    client_or(client_json_str(session, "id"), c->args[0]),
		    client_or(client_json_str(session, "state"), "?"));
		_cleanup_free_ char *clean = line ? client_clean(line) : NULL;
		if (clean)
			printf("%s\n", clean);
		else
			r = -ENOMEM;
	}
	json_decref(answer);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

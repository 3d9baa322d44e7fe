/* reject.c - `warren reject ID [--reason TEXT]`: the reviewer turns a
 * session's change down; the session ends rejected.
 *
 *   POST /sessions/{id}/reject {reason?} -> 200 session */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The API's limit on a reason (docs/api.md). */
#define REJECT_REASON_MAX 4096

static const char reject_usage[] =
    "usage: warren reject ID [--reason TEXT] [--json]\n"
    "\n"
    "Rejects session ID, which must be in review (a reviewer or admin token\n"
    "is needed): its change is dropped and it ends rejected. Prints the\n"
    "session's id and state.\n"
    "\n"
    "  --reason TEXT  why (up to 4096 bytes), kept with the session\n"
    "  --json         the session as the API returns it\n"
    "  --server URL   Warren server (default $WARREN_SERVER, else\n"
    "                 " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T      API token (default $WARREN_TOKEN, else\n"
    "                 $WARREN_HOME/admin.token, ./.warren/admin.token)\n";

enum {
	OPT_REASON = 0x100,
};

static const struct option reject_options[] = {
    {"reason", required_argument, NULL, OPT_REASON},
    {NULL, 0, NULL, 0},
};

static int on_option(struct client *c, void *ctx, int opt, const char *arg)
{
	if (opt != OPT_REASON)
		return -1;
	if (!*arg || strspn(arg, " \t\r\n") == strlen(arg)) {
		client_usage_error(c, "--reason: empty text");
		return -1;
	}
	if (strlen(arg) > REJECT_REASON_MAX) {
		client_usage_error(c, "--reason: longer than %d bytes",
				   REJECT_REASON_MAX);
		return -1;
	}
	*(const char **)ctx = arg;
	return 0;
}

int client_cmd_reject(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "reject",
	    .usage = reject_usage,
	    .options = reject_options,
	    .on_option = on_option,
	};
	const char *reason = NULL;
	int code = client_parse(c, &verb, &reason, argc, argv);
	if (code != CLIENT_CONTINUE)
		return code;
	code = client_check_args(c, 1, 1, "session ID");
	if (code != CLIENT_CONTINUE)
		return code;

	struct wr_error *err = NULL;
	_cleanup_free_ char *id = client_escape(c->args[0]);
	_cleanup_free_ char *path =
	    id ? wr_asprintf("/sessions/%s/reject", id) : NULL;
	json_t *body = json_object();
	if (!path || !body) {
		json_decref(body);
		return client_exit(c, -ENOMEM, NULL);
	}
	int r = reason ? client_json_set_str(body, "reason", reason, &err) : 0;
	json_t *session = NULL;
	if (r == 0)
		r = client_post(c, path, body, &session, &err);
	json_decref(body);
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

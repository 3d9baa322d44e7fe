/* token.c - `warren token create --user U --role R`: a new API token
 * (admin only). The server keeps only its hash: this is the one time it
 * is shown.
 *
 *   POST /tokens {user, role} -> 201 {"token", "user", "role"} */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char token_usage[] =
    "usage: warren token create --user U --role R [--json]\n"
    "\n"
    "Creates an API token for user U with role R (needs an admin token).\n"
    "Prints the token on stdout, alone: the server keeps only its hash, so\n"
    "it cannot be shown again.\n"
    "\n"
    "  --user U       the user the token acts as\n"
    "  --role R       its role: admin, reviewer or submitter\n"
    "  --json         the API's JSON: {\"token\", \"user\", \"role\"}\n"
    "  --server URL   Warren server (default $WARREN_SERVER, else\n"
    "                 " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T      API token (default $WARREN_TOKEN, else\n"
    "                 $WARREN_HOME/admin.token, ./.warren/admin.token)\n";

enum {
	OPT_USER = 0x100,
	OPT_ROLE,
};

static const struct option token_options[] = {
    {"user", required_argument, NULL, OPT_USER},
    {"role", required_argument, NULL, OPT_ROLE},
    {NULL, 0, NULL, 0},
};

struct token_opts {
	const char *user, *role;
};

static int on_option(struct client *c, void *ctx, int opt, const char *arg)
{
	struct token_opts *o = ctx;
	if (!*arg) {
		client_usage_error(c, "--%s: empty value",
				   opt == OPT_USER ? "user" : "role");
		return -1;
	}
	if (opt == OPT_USER)
		o->user = arg;
	else if (opt == OPT_ROLE)
		o->role = arg;
	else
		return -1;
	return 0;
}

int client_cmd_token(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "token",
	    .usage = token_usage,
	    .options = token_options,
	    .on_option = on_option,
	};
	struct token_opts o = {0};
	int code = client_parse(c, &verb, &o, argc, argv);
	if (code != CLIENT_CONTINUE)
		return code;
	if (c->n_args == 0) {
		client_usage_error(c, "missing sub-command: create");
		return CLIENT_EXIT_USAGE;
	}
	if (strcmp(c->args[0], "create")) {
		client_usage_error(c, "unknown sub-command '%s' (create)",
				   c->args[0]);
		return CLIENT_EXIT_USAGE;
	}
	c->verb = "token create";
	c->args++;
	c->n_args--;
	code = client_check_args(c, 0, 0, "");
	if (code != CLIENT_CONTINUE)
		return code;
	if (!o.user || !o.role) {
		client_usage_error(c, "missing %s",
				   o.user ? "--role" : "--user");
		return CLIENT_EXIT_USAGE;
	}

	struct wr_error *err = NULL;
	json_t *body = json_object();
	json_t *answer = NULL;
	int r = body ? 0 : wr_error_set(&err, ENOMEM, "token");
	if (r == 0)
		r = client_json_set_str(body, "user", o.user, &err);
	if (r == 0)
		r = client_json_set_str(body, "role", o.role, &err);
	if (r == 0)
		r = client_post(c, "/tokens", body, &answer, &err);
	json_decref(body);
	if (r < 0)
		return client_exit(c, r, err);
	const char *token = client_json_str(answer, "token");
	if (c->json) {
		r = client_print_json(answer);
	} else if (!token) {
		wr_error_set(&err, 0, "bad response: no \"token\"");
		json_decref(answer);
		return client_exit(c, -EPROTO, err);
	} else {
		printf("%s\n", token);
		fprintf(stderr,
			"token for %s (role %s); it will not be shown again\n",
			o.user, o.role);
	}
	json_decref(answer);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

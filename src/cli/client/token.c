/* token.c - `warren token create|ls|revoke`: the server's API tokens
 * (admin only). The server keeps only a token's hash: creation is the one
 * time a token is shown; lists show names, never tokens.
 *
 *   POST   /tokens {user, role, name?, expires?}
 *            -> 201 {"token", "user", "role", "name", "expires_ms"}
 *   GET    /tokens -> {"tokens": [{"name", "id", "user", "role", ...}]}
 *   DELETE /tokens/{name} -> {"name", "revoked_ms"} */
#include "cli/client/client.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char token_usage[] =
    "usage: warren token create --user U --role R [--name N]\n"
    "                           [--expires DURATION] [--json]\n"
    "       warren token ls [--json]\n"
    "       warren token revoke NAME [--json]\n"
    "\n"
    "API tokens; every sub-command needs an admin token.\n"
    "\n"
    "create: a token for user U with role R. Prints the token on stdout,\n"
    "     alone: the server keeps only its hash, so it cannot be shown\n"
    "     again.\n"
    "  --user U            the user the token acts as\n"
    "  --role R            its role: admin, reviewer or submitter\n"
    "  --name N            its name, for ls and revoke: 1 to 64 of\n"
    "                      [A-Za-z0-9._-] (default: the user and random\n"
    "                      digits)\n"
    "  --expires DURATION  it stops working after this long: 90s, 12h, 30d\n"
    "                      (default: never)\n"
    "ls: lists the tokens by name (never the tokens themselves).\n"
    "revoke: revokes the token called NAME; it stops working at once.\n"
    "\n"
    "  --json              the API's JSON\n"
    "  --server URL        Warren server (default $WARREN_SERVER, else\n"
    "                      " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T           API token (default $WARREN_TOKEN, else\n"
    "                      $WARREN_HOME/admin.token, "
    "./.warren/admin.token)\n";

enum {
	OPT_USER = 0x100,
	OPT_ROLE,
	OPT_NAME,
	OPT_EXPIRES,
};

static const struct option token_options[] = {
    {"user", required_argument, NULL, OPT_USER},
    {"role", required_argument, NULL, OPT_ROLE},
    {"name", required_argument, NULL, OPT_NAME},
    {"expires", required_argument, NULL, OPT_EXPIRES},
    {NULL, 0, NULL, 0},
};

struct token_opts {
	const char *user, *role, *name, *expires;
	const char *create_only; /* the first option only `create` takes */
};

static const char *option_name(int opt)
{
	switch (opt) {
	case OPT_USER: return "--user";
	case OPT_ROLE: return "--role";
	case OPT_NAME: return "--name";
	default: return "--expires";
	}
}

static int on_option(struct client *c, void *ctx, int opt, const char *arg)
{
	struct token_opts *o = ctx;
	uint64_t ms;
	if (!*arg) {
		client_usage_error(c, "%s: empty value", option_name(opt));
		return -1;
	}
	switch (opt) {
	case OPT_USER: o->user = arg; break;
	case OPT_ROLE: o->role = arg; break;
	case OPT_NAME: o->name = arg; break;
	case OPT_EXPIRES:
		if (wr_parse_duration(arg, &ms) < 0 || ms == 0) {
			client_usage_error(c,
					   "--expires '%s': not a duration "
					   "(90s, 12h, 30d)",
					   arg);
			return -1;
		}
		o->expires = arg;
		break;
	default: return -1;
	}
	if (!o->create_only)
		o->create_only = option_name(opt);
	return 0;
}

static int token_create(struct client *c, const struct token_opts *o)
{
	int code = client_check_args(c, 0, 0, "");
	if (code != CLIENT_CONTINUE)
		return code;
	if (!o->user || !o->role) {
		client_usage_error(c, "missing %s",
				   o->user ? "--role" : "--user");
		return CLIENT_EXIT_USAGE;
	}

	struct wr_error *err = NULL;
	json_t *body = json_object();
	json_t *answer = NULL;
	int r = body ? 0 : wr_error_set(&err, ENOMEM, "token");
	if (r == 0)
		r = client_json_set_str(body, "user", o->user, &err);
	if (r == 0)
		r = client_json_set_str(body, "role", o->role, &err);
	if (r == 0 && o->name)
		r = client_json_set_str(body, "name", o->name, &err);
	if (r == 0 && o->expires)
		r = client_json_set_str(body, "expires", o->expires, &err);
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
		char expires[40] = "";
		int64_t at = client_json_int(answer, "expires_ms", 0);
		if (at > 0) {
			char when[32];
			client_format_time(at, when, sizeof(when));
			snprintf(expires, sizeof(expires), ", expires %s",
				 when);
		}
		_cleanup_free_ char *name = client_clean(
		    client_or(client_json_str(answer, "name"), "?"));
		fprintf(stderr,
			"token %s for %s (role %s%s); it will not be shown "
			"again\n",
			name ? name : "?", o->user, o->role, expires);
	}
	json_decref(answer);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

/* "5m ago", "in 3d": a time relative to now. */
static void format_relative(int64_t at, int64_t now, char *buf, size_t size)
{
	char age[32];
	client_format_age(at > now ? at - now : now - at, age, sizeof(age));
	snprintf(buf, size, at > now ? "in %s" : "%s ago", age);
}

static int print_tokens(const json_t *list)
{
	static const char *const headers[] = {"NAME",	 "USER",    "ROLE",
					      "CREATED", "EXPIRES", "REVOKED"};
	struct client_table t;
	client_table_init(&t, headers, ARRAY_SIZE(headers));
	int64_t now = client_now_ms();
	size_t i;
	json_t *tok;
	int r = 0;
	json_array_foreach(list, i, tok)
	{
		char created[40], expires[40] = "never", revoked[40] = "-";
		int64_t expires_ms = client_json_int(tok, "expires_ms", 0);
		int64_t revoked_ms = client_json_int(tok, "revoked_ms", 0);
		format_relative(client_json_int(tok, "created_ms", now), now,
				created, sizeof(created));
		if (expires_ms > 0)
			format_relative(expires_ms, now, expires,
					sizeof(expires));
		if (revoked_ms > 0)
			format_relative(revoked_ms, now, revoked,
					sizeof(revoked));
		r = client_table_add(&t, client_json_str(tok, "name"),
				     client_json_str(tok, "user"),
				     client_json_str(tok, "role"), created,
				     expires, revoked);
		if (r < 0)
			break;
	}
	if (r == 0) {
		if (t.n_rows)
			client_table_print(&t, stdout);
		else
			fprintf(stderr, "no tokens\n");
	}
	client_table_clear(&t);
	return r;
}

static int token_ls(struct client *c)
{
	int code = client_check_args(c, 0, 0, "");
	if (code != CLIENT_CONTINUE)
		return code;
	json_t *doc = NULL;
	struct wr_error *err = NULL;
	int r = client_get(c, "/tokens", &doc, &err);
	if (r < 0)
		return client_exit(c, r, err);
	json_t *list = json_object_get(doc, "tokens");
	if (!json_is_array(list)) {
		json_decref(doc);
		wr_error_set(&err, 0, "bad response: no \"tokens\" array");
		return client_exit(c, -EPROTO, err);
	}
	r = c->json ? client_print_json(doc) : print_tokens(list);
	json_decref(doc);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

static int token_revoke(struct client *c)
{
	int code = client_check_args(c, 1, 1, "token name");
	if (code != CLIENT_CONTINUE)
		return code;
	const char *name = c->args[0];
	_cleanup_free_ char *escaped = client_escape(name);
	_cleanup_free_ char *path =
	    escaped ? wr_asprintf("/tokens/%s", escaped) : NULL;
	if (!path)
		return client_exit(c, -ENOMEM, NULL);
	json_t *answer = NULL;
	struct wr_error *err = NULL;
	int r = client_delete(c, path, &answer, &err);
	if (r < 0)
		return client_exit(c, r, err);
	if (c->json) {
		r = client_print_json(answer);
	} else {
		_cleanup_free_ char *clean = client_clean(
		    client_or(client_json_str(answer, "name"), name));
		printf("%s revoked\n", clean ? clean : name);
	}
	json_decref(answer);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
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
		client_usage_error(c, "missing sub-command: create, ls or "
				      "revoke");
		return CLIENT_EXIT_USAGE;
	}
	const char *sub = c->args[0];
	if (strcmp(sub, "create") && strcmp(sub, "ls") &&
	    strcmp(sub, "revoke")) {
		client_usage_error(c,
				   "unknown sub-command '%s' (create, ls, "
				   "revoke)",
				   sub);
		return CLIENT_EXIT_USAGE;
	}
	c->verb = !strcmp(sub, "create") ? "token create"
		  : !strcmp(sub, "ls")	 ? "token ls"
					 : "token revoke";
	c->args++;
	c->n_args--;
	if (strcmp(sub, "create") && o.create_only) {
		client_usage_error(c, "%s is an option of `token create`",
				   o.create_only);
		return CLIENT_EXIT_USAGE;
	}
	if (!strcmp(sub, "create"))
		return token_create(c, &o);
	if (!strcmp(sub, "ls"))
		return token_ls(c);
	return token_revoke(c);
}

/* secret.c - `warren secret set|ls|rm`: the server's secrets (admin
 * only), which snapshot builds hand to the hooks of specs that name them
 * (docs/security.md, "Secrets").
 *
 *   PUT    /secrets/{name} {value} -> {"name", "created_ms", "updated_ms"}
 *   GET    /secrets -> {"secrets": [{"name", "created_ms", "updated_ms"}]}
 *   DELETE /secrets/{name} -> {"name", "deleted_ms"}
 *
 * The value is read from stdin, never from the command line, where it
 * would sit in the shell's history and in /proc/PID/cmdline; on a terminal
 * it is not echoed. Our copies of it are wiped once sent. */
#include "cli/client/client.h"

#include "security/secrets.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

static const char secret_usage[] =
    "usage: warren secret set NAME [--repo R]... [--any-repo] [--raw] "
    "[--json]\n"
    "                                        (the value on stdin)\n"
    "       warren secret ls [--json]\n"
    "       warren secret rm NAME [--json]\n"
    "\n"
    "Secrets for snapshot builds; every sub-command needs an admin token.\n"
    "A repository's spec names the secrets its onCreateCommand and\n"
    "updateContentCommand get (customizations.warren.secrets); sessions\n"
    "never get them.\n"
    "\n"
    "set: stores the value read from stdin under NAME (A-Z, 0-9 and '_',\n"
    "     not starting with a digit, at most 64), replacing any earlier\n"
    "     one. On a terminal it asks for one line and does not echo it.\n"
    "     One final newline is dropped unless --raw is given. At most\n"
    "     64 KiB of UTF-8 text, without NUL bytes.\n"
    "  --raw               keep the value exactly as read\n"
    "  --repo R            only the builds of repository R get it (repeat\n"
    "                      for more); without --repo or --any-repo, an\n"
    "                      existing secret keeps its list, a new one is for\n"
    "                      any repository\n"
    "  --any-repo          any repository's build may get it again\n"
    "ls: lists the secrets by name (never their values).\n"
    "rm: deletes the secret called NAME.\n"
    "\n"
    "  --json              the API's JSON\n"
    "  --server URL        Warren server (default $WARREN_SERVER, else\n"
    "                      " CLIENT_DEFAULT_SERVER ")\n"
    "  --token T           API token (default $WARREN_TOKEN, else\n"
    "                      $WARREN_HOME/admin.token, "
    "./.warren/admin.token)\n";

enum {
	OPT_RAW = 0x100,
	OPT_REPO,
	OPT_ANY_REPO,
};

static const struct option secret_options[] = {
    {"raw", no_argument, NULL, OPT_RAW},
    {"repo", required_argument, NULL, OPT_REPO},
    {"any-repo", no_argument, NULL, OPT_ANY_REPO},
    {NULL, 0, NULL, 0},
};

#define REPOS_MAX 256 /* SECRETS_REPOS_MAX, the server's */

struct secret_opts {
	bool raw;
	bool any_repo;
	const char *repos[REPOS_MAX];
	size_t n_repos;
};

static int on_option(struct client *c, void *ctx, int opt, const char *arg)
{
	struct secret_opts *o = ctx;
	switch (opt) {
	case OPT_RAW: o->raw = true; return 0;
	case OPT_ANY_REPO: o->any_repo = true; return 0;
	case OPT_REPO:
		if (o->n_repos == REPOS_MAX) {
			client_usage_error(c, "more than %d --repo",
					   REPOS_MAX);
			return -1;
		}
		o->repos[o->n_repos++] = arg;
		return 0;
	default: return -1;
	}
}

/* secrets_name_valid() without linking the store (and libsodium) into
 * the client: a bad name is refused before the value is typed. */
static bool name_valid(const char *name)
{
	size_t len = strlen(name);
	if (len == 0 || len > SECRETS_NAME_MAX ||
	    (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((name[i] >= 'A' && name[i] <= 'Z') ||
		      (name[i] >= '0' && name[i] <= '9') || name[i] == '_'))
			return false;
	return true;
}

/* A value buffer: SECRETS_VALUE_MAX and a byte to notice more, and a NUL */
#define VALUE_BUF (SECRETS_VALUE_MAX + 2)

static void value_freep(char **value)
{
	if (*value)
		explicit_bzero(*value, VALUE_BUF);
	free(*value);
}

/* One line from the terminal with echo off. */
static int read_tty(const char *name, char *buf, size_t *len,
		    struct wr_error **err)
{
	struct termios saved, quiet;
	if (tcgetattr(STDIN_FILENO, &saved) < 0)
		return wr_error_set(err, errno, "stdin");
	quiet = saved;
	quiet.c_lflag &= ~(tcflag_t)ECHO;
	quiet.c_lflag |= ECHONL;
	fprintf(stderr, "value of %s (not shown): ", name);
	fflush(stderr);
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) < 0)
		return wr_error_set(err, errno, "stdin");
	size_t n = 0;
	int r = 0;
	for (;;) {
		char ch;
		ssize_t got = read(STDIN_FILENO, &ch, 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			r = wr_error_set(err, errno, "read stdin");
			break;
		}
		if (got == 0 || ch == '\n')
			break;
		if (n == VALUE_BUF - 1) {
			r = wr_error_input(err, 0,
					   "the value is longer than %d bytes",
					   SECRETS_VALUE_MAX);
			break;
		}
		buf[n++] = ch;
	}
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
	if (r < 0)
		return r;
	*len = n;
	return 0;
}

/* All of stdin (a pipe or a file). */
static int read_stream(char *buf, size_t *len, struct wr_error **err)
{
	size_t n = 0;
	for (;;) {
		ssize_t got = read(STDIN_FILENO, buf + n, VALUE_BUF - 1 - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return wr_error_set(err, errno, "read stdin");
		if (got == 0)
			break;
		n += (size_t)got;
		if (n == VALUE_BUF - 1)
			return wr_error_input(
			    err, 0, "the value is longer than %d bytes",
			    SECRETS_VALUE_MAX);
	}
	*len = n;
	return 0;
}

static int secret_set(struct client *c, const struct secret_opts *o)
{
	int code = client_check_args(c, 1, 1, "secret name");
	if (code != CLIENT_CONTINUE)
		return code;
	const char *name = c->args[0];
	if (!name_valid(name)) {
		client_usage_error(c,
				   "'%s' is not a secret name (1 to %d of A-Z, "
				   "0-9 and '_', not starting with a digit)",
				   name, SECRETS_NAME_MAX);
		return CLIENT_EXIT_USAGE;
	}
	struct wr_error *err = NULL;
	_cleanup_(value_freep) char *value = wr_malloc(VALUE_BUF);
	if (!value)
		return client_exit(c, -ENOMEM, NULL);
	size_t len = 0;
	bool tty = isatty(STDIN_FILENO);
	int r = tty ? read_tty(name, value, &len, &err)
		    : read_stream(value, &len, &err);
	if (r < 0)
		return client_exit(c, r, err);
	if (!o->raw && !tty && len > 0 && value[len - 1] == '\n') {
		len--;
		if (len > 0 && value[len - 1] == '\r')
			len--;
	}
	value[len] = '\0';
	if (len == 0) {
		wr_error_input(&err, 0, "the value is empty");
		return client_exit(c, -EINVAL, err);
	}
	if (memchr(value, '\0', len)) {
		wr_error_input(&err, 0, "the value contains a NUL byte");
		return client_exit(c, -EINVAL, err);
	}

	_cleanup_free_ char *escaped = client_escape(name);
	_cleanup_free_ char *path =
	    escaped ? wr_asprintf("/secrets/%s", escaped) : NULL;
	json_t *body = json_object();
	json_t *answer = NULL;
	r = body && path ? client_json_set_str(body, "value", value, &err)
			 : wr_error_set(&err, ENOMEM, "secret");
	if (r == 0 && (o->any_repo || o->n_repos)) {
		/* the server checks the names */
		json_t *repos = o->any_repo ? json_null() : json_array();
		for (size_t i = 0; repos && i < o->n_repos; i++)
			json_array_append_new(repos, json_string(o->repos[i]));
		if (!repos || json_object_set_new(body, "repositories", repos))
			r = wr_error_set(&err, ENOMEM, "secret");
	}
	if (r == 0)
		r = client_put(c, path, body, &answer, &err);
	json_t *v = json_object_get(body, "value");
	if (v) /* jansson's copy of the value */
		explicit_bzero((char *)json_string_value(v),
			       json_string_length(v));
	json_decref(body);
	if (r < 0)
		return client_exit(c, r, err);
	if (c->json) {
		r = client_print_json(answer);
	} else {
		_cleanup_free_ char *clean = client_clean(
		    client_or(client_json_str(answer, "name"), name));
		printf("secret %s set\n", clean ? clean : name);
	}
	json_decref(answer);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

static int print_secrets(const json_t *list)
{
	static const char *const headers[] = {"NAME", "REPOSITORIES",
					      "CREATED", "UPDATED"};
	struct client_table t;
	client_table_init(&t, headers, ARRAY_SIZE(headers));
	size_t i;
	json_t *s;
	int r = 0;
	json_array_foreach(list, i, s)
	{
		char created[32], updated[32];
		client_format_time(client_json_int(s, "created_ms", 0), created,
				   sizeof(created));
		client_format_time(client_json_int(s, "updated_ms", 0), updated,
				   sizeof(updated));
		/* "any", or the names */
		char repos[256] = "";
		json_t *granted = json_object_get(s, "repositories");
		size_t k;
		json_t *name;
		json_array_foreach(granted, k, name)
		{
			size_t used = strlen(repos);
			snprintf(repos + used, sizeof(repos) - used, "%s%s",
				 k ? "," : "", json_string_value(name));
		}
		_cleanup_free_ char *clean =
		    client_clean(json_is_array(granted) ? repos : "any");
		r = client_table_add(&t, client_json_str(s, "name"),
				     clean ? clean : "?", created, updated);
		if (r < 0)
			break;
	}
	if (r == 0) {
		if (t.n_rows)
			client_table_print(&t, stdout);
		else
			fprintf(stderr, "no secrets\n");
	}
	/* a copy another server wrote under another key (a server of an
	 * older version says nothing: no "decrypts") */
	json_array_foreach(list, i, s)
	{
		if (!json_is_false(json_object_get(s, "decrypts")))
			continue;
		_cleanup_free_ char *clean =
		    client_clean(client_json_str(s, "name"));
		fprintf(stderr,
			"secret %s does not decrypt with this server's key "
			"(every server needs the same key: secrets_key_file)\n",
			clean ? clean : "?");
	}
	client_table_clear(&t);
	return r;
}

static int secret_ls(struct client *c)
{
	int code = client_check_args(c, 0, 0, "");
	if (code != CLIENT_CONTINUE)
		return code;
	json_t *doc = NULL;
	struct wr_error *err = NULL;
	int r = client_get(c, "/secrets", &doc, &err);
	if (r < 0)
		return client_exit(c, r, err);
	json_t *list = json_object_get(doc, "secrets");
	if (!json_is_array(list)) {
		json_decref(doc);
		wr_error_set(&err, 0, "bad response: no \"secrets\" array");
		return client_exit(c, -EPROTO, err);
	}
	r = c->json ? client_print_json(doc) : print_secrets(list);
	json_decref(doc);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

static int secret_rm(struct client *c)
{
	int code = client_check_args(c, 1, 1, "secret name");
	if (code != CLIENT_CONTINUE)
		return code;
	const char *name = c->args[0];
	_cleanup_free_ char *escaped = client_escape(name);
	_cleanup_free_ char *path =
	    escaped ? wr_asprintf("/secrets/%s", escaped) : NULL;
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
		printf("secret %s deleted\n", clean ? clean : name);
	}
	json_decref(answer);
	return r < 0 ? client_exit(c, r, NULL) : CLIENT_EXIT_OK;
}

int client_cmd_secret(struct client *c, int argc, char **argv)
{
	static const struct client_verb verb = {
	    .name = "secret",
	    .usage = secret_usage,
	    .options = secret_options,
	    .on_option = on_option,
	};
	struct secret_opts o = {0};
	int code = client_parse(c, &verb, &o, argc, argv);
	if (code != CLIENT_CONTINUE)
		return code;
	if (c->n_args == 0) {
		client_usage_error(c, "missing sub-command: set, ls or rm");
		return CLIENT_EXIT_USAGE;
	}
	const char *sub = c->args[0];
	if (strcmp(sub, "set") && strcmp(sub, "ls") && strcmp(sub, "rm")) {
		client_usage_error(c, "unknown sub-command '%s' (set, ls, rm)",
				   sub);
		return CLIENT_EXIT_USAGE;
	}
	c->verb = !strcmp(sub, "set")  ? "secret set"
		  : !strcmp(sub, "ls") ? "secret ls"
				       : "secret rm";
	c->args++;
	c->n_args--;
	if (strcmp(sub, "set") && (o.raw || o.n_repos || o.any_repo)) {
		client_usage_error(c, "--raw, --repo and --any-repo are options "
				      "of `secret set`");
		return CLIENT_EXIT_USAGE;
	}
	if (o.any_repo && o.n_repos) {
		client_usage_error(c, "--repo and --any-repo: one or the other");
		return CLIENT_EXIT_USAGE;
	}
	if (!strcmp(sub, "set"))
		return secret_set(c, &o);
	if (!strcmp(sub, "ls"))
		return secret_ls(c);
	return secret_rm(c);
}

/* broker_hook.c - the control plane's side of the credential broker
 * (security/broker.h, docs/security.md "Credential broker").
 *
 * Every session's sandbox gets the broker: sandbox_start (runner.c) opens
 * the session's socket and token, binds their directory read-only at
 * /run/warren-broker and the client (warren-git-connect, next to warren)
 * at /run/warren-git-connect, and once the sandbox is up points the
 * workspace's origin at the broker. The repository's credentials (the
 * server configuration's repositories[].credentials) go to the broker,
 * never into the sandbox. sandbox_stop closes the session's broker (its
 * token expires with the sandbox), and a session that ends (a final
 * state, or approved) ends its broker session: its token is refused from
 * then on.
 *
 * Each broker connection is a "broker" event of the session and a
 * "broker" record in its audit log (actor "agent": the agent's git made
 * the call). */
#include "sched/internal.h"

#include "security/broker.h"
#include "security/secrets.h"
#include "snapshot/git.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void audit_cb(void *ctx, const char *session_id, const json_t *details)
{
	struct control *c = ctx;
	json_t *d = json_deep_copy(details);
	int64_t seq =
	    control_event(c, session_id, EVENT_BROKER, json_deep_copy(details));
	if (d && seq > 0)
		json_object_set_new(d, "event_seq", json_integer(seq));
	control_audit(c, session_id, "agent", "broker", d);
}

/* warren-git-connect, next to the warren executable (caller frees). */
static char *client_path(const struct control *c)
{
	_cleanup_free_ char *bin = wr_strdup(c->warren_bin);
	return bin ? wr_asprintf("%s/warren-git-connect", dirname(bin)) : NULL;
}

int control_broker_start(struct control *c, struct wr_error **err)
{
	_cleanup_free_ char *client = client_path(c);
	if (!client)
		return wr_error_set(err, ENOMEM, "broker");
	if (access(client, X_OK) < 0)
		return wr_error_set(err, errno,
				    "%s (the credential broker's client; "
				    "`make` builds it)",
				    client);
	struct broker_config bcfg = {
	    .data_dir = c->data_dir,
	    .hook_relay = client,
	    .audit = audit_cb,
	    .ctx = c,
	};
	return broker_start(&bcfg, &c->broker, err);
}

void control_broker_clear(struct control_broker *b)
{
	free(b->dir);
	free(b->client);
	memset(b, 0, sizeof(*b));
}

static const struct control_credentials *credentials_of(const struct control *c,
							const char *repo_name)
{
	for (size_t i = 0; repo_name && i < c->cfg.n_credentials; i++)
		if (!strcmp(c->cfg.credentials[i].repo_name, repo_name))
			return &c->cfg.credentials[i];
	return NULL;
}

int control_broker_prepare(struct run *run, const struct store_session *s,
			   struct control_broker *out, struct wr_error **err)
{
	struct control *c = run->ctl;
	memset(out, 0, sizeof(*out));
	if (!c->broker)
		return 0;
	struct store_repo repo = {0};
	int r = c->st->ops->repo_get(c->st, s->repo_id, &repo, err);
	if (r < 0)
		return wr_error_wrap(err, "broker");
	const struct control_credentials *cred = credentials_of(c, repo.name);
	char *secret = NULL;
	size_t secret_len = 0;
	if (cred && cred->password_secret &&
	    secrets_get(c->data_dir, cred->password_secret, &secret,
			&secret_len, err) < 0) {
		r = wr_error_wrap(err, "broker: repository %s: credentials",
				  repo.name);
		store_repo_clear(&repo);
		return r;
	}
	_cleanup_free_ char *mirror =
	    git_mirror_path(c->data_dir, repo.url, NULL);
	_cleanup_free_ char *client = client_path(c);
	_cleanup_free_ char *dir =
	    wr_asprintf("%s/sessions/%s.broker", c->data_dir, s->id);
	struct broker_remote remote = {
	    .name = repo.name,
	    .url = repo.url,
	    .mirror = mirror,
	    .username = cred ? cred->username : NULL,
	    .password = secret ? secret
			: cred ? cred->password
			       : NULL,
	    .ssh_key_file = cred ? cred->ssh_key_file : NULL,
	    .known_hosts_file = cred ? cred->known_hosts_file : NULL,
	};
	r = client && dir
		? broker_session_open(c->broker, s->id, dir, &remote, err)
		: wr_error_set(err, ENOMEM, "broker");
	secrets_value_free(secret, secret_len);
	store_repo_clear(&repo);
	if (r < 0)
		return wr_error_wrap(err, "credential broker");
	out->dir = wr_strdup(dir);
	out->client = wr_strdup(client);
	if (!out->dir || !out->client) {
		control_broker_clear(out);
		broker_session_close(c->broker, s->id);
		return wr_error_set(err, ENOMEM, "broker");
	}
	out->on = true;
	return 0;
}

int control_broker_request(const struct control_broker *b,
			   struct sandbox_request *req)
{
	if (!b->on)
		return 0;
	if (req->n_binds + 2 > SBX_MAX_BINDS)
		return -E2BIG;
	req->binds[req->n_binds++] =
	    (struct sandbox_bind){b->dir, BROKER_SANDBOX_DIR, true};
	req->binds[req->n_binds++] =
	    (struct sandbox_bind){b->client, BROKER_SANDBOX_CLIENT, true};
	return 0;
}

int control_broker_configure(struct run *run, struct wr_error **err)
{
	struct control *c = run->ctl;
	/* origin goes through the broker, for fetch and push; a workspace
	 * without git (or without git installed) has nothing to point */
	static const char script[] =
	    "cd /workspace 2>/dev/null && git rev-parse --git-dir >/dev/null "
	    "2>&1 || exit 0\n"
	    "git config protocol.ext.allow always || exit 1\n"
	    "git remote set-url origin \"$1\" 2>/dev/null || "
	    "git remote add origin \"$1\"\n";
	char *cmd[] = {"/bin/sh", "-c", (char *)script, "warren-broker",
		       BROKER_REMOTE_URL, NULL};
	struct sandbox_exec_cmd ex = {.name = run->sandbox, .argv = cmd};
	struct sandbox_cmdline cl;
	int status = sandbox_cmdline_exec(c->warren_bin, &ex, &cl);
	if (status < 0)
		return wr_error_set(err, -status, "broker: command line");
	_cleanup_free_ char *errors = NULL;
	status = proc_run(cl.argv, 4096, -1, NULL, &errors, err);
	sandbox_cmdline_clear(&cl);
	if (status < 0)
		return wr_error_wrap(err, "broker: configure the workspace");
	if (status != 0) {
		size_t len = errors ? strlen(errors) : 0;
		while (len && errors[len - 1] == '\n')
			errors[--len] = '\0';
		return wr_error_set(err, EIO,
				    "broker: configure the workspace's origin "
				    "(exit %d): %s",
				    status, len ? errors : "no output");
	}
	return 0;
}

void control_broker_close(struct run *run)
{
	broker_session_close(run->ctl->broker, run->id);
}

void control_broker_end(struct control *c, const char *session_id)
{
	broker_session_end(c->broker, session_id);
}

char **control_broker_remote_env(struct control *c, const char *repo_name,
				 const char *url, const char *mirror)
{
	const struct control_credentials *cred = credentials_of(c, repo_name);
	if (!cred)
		return NULL; /* the server's own git credentials */
	char *secret = NULL;
	size_t secret_len = 0;
	if (cred->password_secret &&
	    secrets_get(c->data_dir, cred->password_secret, &secret,
			&secret_len, NULL) < 0)
		secret = NULL;
	struct broker_remote remote = {
	    .name = repo_name,
	    .url = url,
	    .mirror = mirror,
	    .username = cred->username,
	    .password = secret ? secret : cred->password,
	    .ssh_key_file = cred->ssh_key_file,
	    .known_hosts_file = cred->known_hosts_file,
	};
	char **envp = broker_remote_env(&remote);
	secrets_value_free(secret, secret_len);
	return envp;
}

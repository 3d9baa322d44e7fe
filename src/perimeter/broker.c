/* broker.c - the perimeter's side of the credential broker
 * (security/broker.h, docs/security.md "Credential broker").
 *
 * Every session's sandbox gets the broker: perimeter_sandbox_prepare opens
 * the session's socket and token, binds their directory read-only at
 * /run/warren-broker and the client (warren-git-connect, next to warren)
 * at /run/warren-git-connect, and once the sandbox is up points the
 * workspace's origin at the broker. The repository's credentials (the
 * server configuration's repositories[].credentials) go to the broker,
 * never into the sandbox. perimeter_sandbox_close closes the session's broker (its
 * token expires with the sandbox), and a session that ends (a final
 * state, or approved) ends its broker session: its token is refused from
 * then on.
 *
 * Each broker connection is a "broker" event of the session and a
 * "broker" record in its audit log (actor "agent": the agent's git made
 * the call). */
#include "perimeter/internal.h"

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
	struct perimeter *p = ctx;
	json_t *d = json_deep_copy(details);
	int64_t seq = perimeter_event(p, session_id, EVENT_BROKER,
				      json_deep_copy(details));
	if (d && seq > 0)
		json_object_set_new(d, "event_seq", json_integer(seq));
	perimeter_audit(p, session_id, "agent", "broker", d);
}

/* warren-git-connect, next to the warren executable (caller frees). */
static char *client_path(const struct perimeter *p)
{
	_cleanup_free_ char *bin = wr_strdup(p->cfg.warren_bin);
	return bin ? wr_asprintf("%s/warren-git-connect", dirname(bin)) : NULL;
}

int perimeter_broker_start(struct perimeter *p, struct wr_error **err)
{
	_cleanup_free_ char *client = client_path(p);
	if (!client)
		return wr_error_set(err, ENOMEM, "broker");
	if (access(client, X_OK) < 0)
		return wr_error_set(err, errno,
				    "%s (the credential broker's client; "
				    "`make` builds it)",
				    client);
	struct broker_config bcfg = {
	    .data_dir = p->cfg.data_dir,
	    .hook_relay = client,
	    .audit = audit_cb,
	    .ctx = p,
	};
	return broker_start(&bcfg, &p->broker, err);
}

static const struct perimeter_credentials *
credentials_of(const struct perimeter *p, const char *repo_name)
{
	for (size_t i = 0; repo_name && i < p->cfg.n_credentials; i++)
		if (!strcmp(p->cfg.credentials[i].repo_name, repo_name))
			return &p->cfg.credentials[i];
	return NULL;
}

int perimeter_broker_prepare(struct perimeter *p,
			     const struct store_session *s,
			     struct perimeter_sandbox *out,
			     struct wr_error **err)
{
	if (!p->broker)
		return 0;
	struct store_repo repo = {0};
	int r = p->cfg.st->ops->repo_get(p->cfg.st, s->repo_id, &repo, err);
	if (r < 0)
		return wr_error_wrap(err, "broker");
	const struct perimeter_credentials *cred =
	    credentials_of(p, repo.name);
	char *secret = NULL;
	size_t secret_len = 0;
	if (cred && cred->password_secret &&
	    secrets_get(p->cfg.data_dir, cred->password_secret, &secret,
			&secret_len, err) < 0) {
		r = wr_error_wrap(err, "broker: repository %s: credentials",
				  repo.name);
		store_repo_clear(&repo);
		return r;
	}
	_cleanup_free_ char *mirror =
	    git_mirror_path(p->cfg.data_dir, repo.url, NULL);
	_cleanup_free_ char *client = NULL, *dir = NULL;
	r = perimeter_fs_path(p, s->id, "broker", &dir, err);
	if (r == 0)
		r = perimeter_fs_path(p, s->id, "bin/" PERIMETER_FS_GIT_CLIENT,
				      &client, err);
	if (r < 0) {
		secrets_value_free(secret, secret_len);
		store_repo_clear(&repo);
		return wr_error_wrap(err, "credential broker");
	}
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
		? broker_session_open(p->broker, s->id, dir, &remote, err)
		: wr_error_set(err, ENOMEM, "broker");
	secrets_value_free(secret, secret_len);
	store_repo_clear(&repo);
	if (r < 0)
		return wr_error_wrap(err, "credential broker");
	out->broker.dir = TAKE_PTR(dir);
	out->broker.client = TAKE_PTR(client);
	out->broker.on = true;
	return 0;
}

int perimeter_broker_configure(struct perimeter *p, const char *sandbox,
			       struct wr_error **err)
{
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
	return perimeter_sandbox_relay(p, sandbox, cmd,
				       "broker: configure the workspace's "
				       "origin",
				       err);
}

char **perimeter_remote_env(const struct perimeter *p, const char *repo_name,
			    const char *url, const char *mirror)
{
	const struct perimeter_credentials *cred = credentials_of(p, repo_name);
	if (!cred)
		return NULL; /* the server's own git credentials */
	char *secret = NULL;
	size_t secret_len = 0;
	if (cred->password_secret &&
	    secrets_get(p->cfg.data_dir, cred->password_secret, &secret,
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

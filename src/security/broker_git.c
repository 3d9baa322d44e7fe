/* broker_git.c - the credential broker's host git (broker.h): the
 * environment that carries a remote's credentials, git processes, the
 * sessions' staging repositories, and deciding and applying one ref
 * update of a push. broker.c owns the connections and sessions, over
 * session_server.c's sockets and threads. */
#include "security/broker_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/gitenv.h"
#include "util/proc.h"
#include "util/spawn.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double broker_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static void free_secret(char *s)
{
	if (s)
		explicit_bzero(s, strlen(s));
	free(s);
}

void broker_remote_clear(struct remote *r)
{
	free(r->name);
	free(r->url);
	free(r->mirror);
	free(r->username);
	free_secret(r->password);
	free(r->ssh_key_file);
	free(r->known_hosts_file);
	memset(r, 0, sizeof(*r));
}

int broker_remote_copy(const struct broker_remote *in, struct remote *out)
{
	memset(out, 0, sizeof(*out));
	const char *const src[] = {
	    in->name,	  in->url,	    in->mirror,		 in->username,
	    in->password, in->ssh_key_file, in->known_hosts_file};
	char **const dst[] = {&out->name,
			      &out->url,
			      &out->mirror,
			      &out->username,
			      &out->password,
			      &out->ssh_key_file,
			      &out->known_hosts_file};
	for (size_t i = 0; i < ARRAY_SIZE(src); i++)
		if (src[i] && !(*dst[i] = wr_strdup(src[i]))) {
			broker_remote_clear(out);
			return -ENOMEM;
		}
	return 0;
}

/* The remote for people to read: the URL without user information. */
void broker_url_redacted(const char *url, char *out, size_t size)
{
	const char *scheme = url ? strstr(url, "://") : NULL;
	const char *host = scheme ? scheme + 3 : NULL;
	const char *at = host ? strchr(host, '@') : NULL;
	const char *slash = host ? strchr(host, '/') : NULL;
	if (!url)
		snprintf(out, size, "?");
	else if (!at || (slash && slash < at))
		snprintf(out, size, "%s", url);
	else
		snprintf(out, size, "%.*s***%s", (int)(host - url), url, at);
}

/* The user information of any URL in text (git's messages name the URL),
 * "user:secret" in https://user:secret@host, becomes three asterisks, in
 * place. */
static void redact_userinfo(char *text)
{
	for (char *p = strstr(text, "://"); p; p = strstr(p, "://")) {
		char *host = p + 3;
		size_t span = strcspn(host, "@/ \t\n'\"");
		if (host[span] == '@' && span > 0) {
			memmove(host + 3, host + span, strlen(host + span) + 1);
			memcpy(host, "***", 3);
		}
		p = host;
	}
}

/* ---- the environment of host git ------------------------------------------
 */

void broker_envv_clear(struct envv *e)
{
	for (size_t i = 0; i < e->n; i++)
		free_secret(e->v[i]);
	memset(e, 0, sizeof(*e));
}

static int envv_add(struct envv *e, char *s)
{
	if (!s || e->n >= ENV_MAX) {
		free_secret(s);
		return -ENOMEM;
	}
	e->v[e->n++] = s;
	e->v[e->n] = NULL;
	return 0;
}

/* scheme://host[:port] of url, for scoping the credential helper to that
 * server (a redirect elsewhere gets nothing). NULL if url has no scheme. */
static char *url_authority(const char *url)
{
	const char *scheme = strstr(url, "://");
	if (!scheme)
		return NULL;
	const char *host = scheme + 3;
	const char *at = strchr(host, '@');
	const char *end = host + strcspn(host, "/?#");
	if (at && at < end)
		host = at + 1;
	return wr_asprintf("%.*s%.*s", (int)(scheme + 3 - url), url,
			   (int)(end - host), host);
}

/* The environment of a host git that talks to the remote: the base, and
 * with creds the repository's credentials. The secret goes into the
 * environment of that git process only (readable by root on the host; a
 * sandbox sees no host process), and reaches git through a credential
 * helper that prints it from there: never an argument, never a file. */
int broker_env_build(const struct remote *r, bool creds, struct envv *e)
{
	memset(e, 0, sizeof(*e));
	/* the one locked-down environment of host git (util/gitenv.h);
	 * its GIT_CONFIG_COUNT last, so a credential key can extend it */
	_cleanup_free_ char *auth =
	    creds && r->username && r->password && r->url
		? url_authority(r->url)
		: NULL;
	for (const char *const *v = git_locked_env(); *v; v++) {
		if (auth && !strncmp(*v, "GIT_CONFIG_COUNT=", 17))
			continue;
		if (envv_add(e, wr_strdup(*v)) < 0)
			goto oom;
	}
	if (!creds)
		return 0;
	if (auth) {
		if (envv_add(e, wr_asprintf("GIT_CONFIG_COUNT=%d",
					    GIT_LOCKED_CONFIG_COUNT + 1)) < 0 ||
		    envv_add(e, wr_asprintf("GIT_CONFIG_KEY_%d=credential.%s."
					    "helper",
					    GIT_LOCKED_CONFIG_COUNT, auth)) <
			0 ||
		    envv_add(e, wr_asprintf(
				    "GIT_CONFIG_VALUE_%d=!f() { test \"$1\" = "
				    "get && printf 'username=%%s\\npassword="
				    "%%s\\n' \"$WARREN_BROKER_USERNAME\" "
				    "\"$WARREN_BROKER_PASSWORD\"; }; f",
				    GIT_LOCKED_CONFIG_COUNT)) < 0 ||
		    envv_add(e, wr_asprintf("WARREN_BROKER_USERNAME=%s",
					    r->username)) < 0 ||
		    envv_add(e, wr_asprintf("WARREN_BROKER_PASSWORD=%s",
					    r->password)) < 0)
			goto oom;
	}
	if (r->ssh_key_file) {
		char *cmd =
		    r->known_hosts_file
			? wr_asprintf("GIT_SSH_COMMAND=ssh -i '%s' -o "
				      "IdentitiesOnly=yes -o BatchMode=yes -o "
				      "StrictHostKeyChecking=yes -o "
				      "UserKnownHostsFile='%s'",
				      r->ssh_key_file, r->known_hosts_file)
			: wr_asprintf("GIT_SSH_COMMAND=ssh -i '%s' -o "
				      "IdentitiesOnly=yes -o BatchMode=yes",
				      r->ssh_key_file);
		if (envv_add(e, cmd) < 0)
			goto oom;
	}
	return 0;
oom:
	broker_envv_clear(e);
	return -ENOMEM;
}

const char *broker_credential_kind(const struct remote *r)
{
	if (r->username && r->password)
		return "https";
	if (r->ssh_key_file)
		return "ssh key";
	return "none";
}

/* ---- host git processes ---------------------------------------------------
 */

void broker_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Starts git (argv[0] "git", found on PATH) in a process group of its own
 * (util/proc.h: a clean signal state, nothing open but what it is given,
 * so that a git process never holds a socket of another session's
 * connection), stdout and stderr piped, stdin piped or from /dev/null,
 * extra_fd (if >= 0) as its descriptor 3. Our ends are non-blocking. */
int broker_spawn_git(char *const argv[], char *const envp[], bool pipe_in,
		     int extra_fd, struct proc *out)
{
	struct proc_spec s = {
	    .argv = (const char *const *)argv,
	    .envp = (const char *const *)envp,
	    .in = {pipe_in ? PROC_PIPE : PROC_NULL, -1},
	    .out = {PROC_PIPE, -1},
	    .err = {PROC_PIPE, -1},
	    .fd3 = {extra_fd >= 0 ? PROC_FD : PROC_NULL, extra_fd},
	    .new_group = true,
	    .nonblock = true,
	};
	return proc_start(&s, out, NULL);
}

int broker_child_reap(struct proc *ch, int ms)
{
	int status = proc_reap(ch, ms);
	proc_close(ch);
	return status;
}

/* Keeps the last bytes of a stream in tail (NUL-terminated). */
void broker_tail_add(char *tail, size_t size, const char *data, size_t n)
{
	size_t len = strlen(tail);
	if (n >= size - 1) {
		memcpy(tail, data + n - (size - 1), size - 1);
		tail[size - 1] = '\0';
		return;
	}
	if (len + n > size - 1) {
		size_t drop = len + n - (size - 1);
		memmove(tail, tail + drop, len - drop);
		len -= drop;
	}
	memcpy(tail + len, data, n);
	tail[len + n] = '\0';
}

/* The last line of text that says something, trimmed. */
void broker_last_words(const char *text, char *out, size_t size)
{
	size_t len = strlen(text);
	while (len && (text[len - 1] == '\n' || text[len - 1] == ' ' ||
		       text[len - 1] == '\r'))
		len--;
	size_t start = len;
	while (start && text[start - 1] != '\n')
		start--;
	snprintf(out, size, "%.*s", (int)(len - start), text + start);
	redact_userinfo(out);
}

/* Runs a short git command to its end within timeout_ms (then its group
 * is killed): its exit status (or -errno); up to max bytes of its stdout
 * in *out (if out), the rest dropped; the tail of its stderr, or what went
 * wrong, in err_tail. */
static int git_capture(char *const argv[], char *const envp[], int timeout_ms,
		       char **out, size_t max, char err_tail[ERR_TAIL])
{
	struct spawn_call c = {
	    .argv = (const char *const *)argv,
	    .envp = (const char *const *)envp,
	    .in_fd = -1,
	    .out_fd = -1,
	    .out = out,
	    .out_max = max,
	    .out_truncate = true,
	    .timeout_ms = (uint64_t)timeout_ms,
	};
	struct wr_error *err = NULL;
	int status = spawn_run(&c, &err);
	wr_error_free(err);
	if (status == -ETIMEDOUT) {
		snprintf(err_tail, ERR_TAIL, "timed out after %d s",
			 timeout_ms / 1000);
	} else if (status < 0) {
		snprintf(err_tail, ERR_TAIL, "cannot run git: %s",
			 strerror(-status));
	} else {
		/* the end of spawn's longer tail: the last words are there */
		size_t len = strlen(c.err_tail);
		size_t skip = len >= ERR_TAIL ? len - (ERR_TAIL - 1) : 0;
		snprintf(err_tail, ERR_TAIL, "%s", c.err_tail + skip);
	}
	return status;
}

static int git_timeout(const struct broker *b)
{
	return (int)(b->cfg.git_timeout_ms ? b->cfg.git_timeout_ms
					   : GIT_TIMEOUT_MS);
}

/* ---- staging repositories -------------------------------------------------
 */

struct staging_lock *broker_staging_lock(struct broker *b, const char *id)
{
	pthread_mutex_lock(&b->mu);
	struct staging_lock *l = b->locks;
	while (l && strcmp(l->id, id))
		l = l->next;
	if (!l && (l = wr_calloc(1, sizeof(*l)))) {
		snprintf(l->id, sizeof(l->id), "%s", id);
		pthread_mutex_init(&l->mu, NULL);
		l->next = b->locks;
		b->locks = l;
	}
	if (l)
		l->users++;
	pthread_mutex_unlock(&b->mu);
	if (l)
		pthread_mutex_lock(&l->mu);
	return l;
}

void broker_staging_unlock(struct broker *b, struct staging_lock *l)
{
	if (!l)
		return;
	pthread_mutex_unlock(&l->mu);
	pthread_mutex_lock(&b->mu);
	if (--l->users == 0) {
		struct staging_lock **pp = &b->locks;
		while (*pp != l)
			pp = &(*pp)->next;
		*pp = l->next;
		pthread_mutex_destroy(&l->mu);
		free(l);
	}
	pthread_mutex_unlock(&b->mu);
}

char *broker_staging_path(const struct broker *b, const char *id)
{
	return wr_asprintf("%s/%s.git", b->broker_dir, id);
}

/* Removes a session's staging repository (under its lock: no connection
 * is working in it). */
void broker_staging_remove(struct broker *b, const char *id)
{
	_cleanup_free_ char *path = broker_staging_path(b, id);
	_cleanup_free_ char *tmp = wr_asprintf("%s/.%s.tmp", b->broker_dir, id);
	struct staging_lock *l = broker_staging_lock(b, id);
	if (path)
		wr_rm_rf(path);
	if (tmp)
		wr_rm_rf(tmp);
	broker_staging_unlock(b, l);
}

/* The staging repository of the session, made if it is missing (lock
 * held): a bare clone of the mirror sharing its objects (O(1) in the
 * repository's size), or of the remote when there is no mirror. */
int broker_staging_ensure(struct broker *b, struct broker_session *s, char *why,
			  size_t why_size)
{
	_cleanup_free_ char *head = wr_asprintf("%s/HEAD", s->staging);
	_cleanup_free_ char *tmp =
	    wr_asprintf("%s/.%s.tmp", b->broker_dir, s->base.id);
	if (!head || !tmp) {
		snprintf(why, why_size, "out of memory");
		return -ENOMEM;
	}
	if (access(head, F_OK) == 0)
		return 0;
	wr_rm_rf(tmp);
	struct stat st;
	bool from_mirror = s->remote.mirror && stat(s->remote.mirror, &st) == 0;
	struct envv env;
	if (broker_env_build(&s->remote, !from_mirror, &env) < 0) {
		snprintf(why, why_size, "out of memory");
		return -ENOMEM;
	}
	char *argv[] = {"git",
			"clone",
			"--bare",
			"--quiet",
			from_mirror ? "--shared" : "--no-local",
			"--",
			from_mirror ? s->remote.mirror : s->remote.url,
			tmp,
			NULL};
	char err_tail[ERR_TAIL];
	int r = git_capture(argv, env.v, git_timeout(b), NULL, 0, err_tail);
	broker_envv_clear(&env);
	if (r == 0 && rename(tmp, s->staging) < 0)
		r = -errno;
	if (r != 0) {
		char words[REASON_MAX];
		broker_last_words(err_tail, words, sizeof(words));
		snprintf(why, why_size,
			 "cannot make the staging repository: %s",
			 words[0] ? words : strerror(r < 0 ? -r : EIO));
		wr_rm_rf(tmp);
		return r < 0 ? r : -EIO;
	}
	return 0;
}

/* Brings the staging repository's branches and tags to the remote's (lock
 * held), at most once per refresh_min_ms. "ok", "fresh" (skipped) or the
 * error in why. */
const char *broker_staging_refresh(struct broker *b, struct broker_session *s,
				   char *why, size_t why_size)
{
	unsigned min =
	    b->cfg.refresh_min_ms ? b->cfg.refresh_min_ms : REFRESH_MIN_MS;
	double now = broker_mono_ms();
	if (s->refreshed_ms && now - s->refreshed_ms < min)
		return "fresh";
	struct envv env;
	if (broker_env_build(&s->remote, true, &env) < 0) {
		snprintf(why, why_size, "out of memory");
		return NULL;
	}
	char *argv[] = {"git",
			"-C",
			s->staging,
			"fetch",
			"--quiet",
			"--prune",
			"--no-write-fetch-head",
			"--",
			s->remote.url,
			"+refs/heads/*:refs/heads/*",
			"+refs/tags/*:refs/tags/*",
			NULL};
	char err_tail[ERR_TAIL];
	int r = git_capture(argv, env.v, git_timeout(b), NULL, 0, err_tail);
	broker_envv_clear(&env);
	if (r != 0) {
		char words[REASON_MAX];
		broker_last_words(err_tail, words, sizeof(words));
		snprintf(why, why_size, "%s", words[0] ? words : "git failed");
		return NULL;
	}
	s->refreshed_ms = broker_mono_ms();
	return "ok";
}

/* ---- one ref update of a push ---------------------------------------------
 */

const char *broker_ref_outcome_name(enum broker_ref_outcome o)
{
	static const char *const names[] = {"pushed", "refused", "failed"};
	return o < ARRAY_SIZE(names) ? names[o] : "?";
}

/* A git command in the staging repository with the base environment:
 * its status; the first line of its stdout in out (if out). */
static int staging_git(struct broker *b, struct broker_session *s,
		       char *const args[], char *out, size_t out_size,
		       char err_tail[ERR_TAIL])
{
	char *argv[16] = {"git", "-C", s->staging};
	size_t n = 3;
	for (size_t i = 0; args[i] && n < ARRAY_SIZE(argv) - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	struct envv env;
	if (broker_env_build(&s->remote, false, &env) < 0)
		return -ENOMEM;
	_cleanup_free_ char *text = NULL;
	int r = git_capture(argv, env.v, git_timeout(b), out ? &text : NULL,
			    4096, err_tail);
	broker_envv_clear(&env);
	if (out) {
		out[0] = '\0';
		if (text)
			snprintf(out, out_size, "%.*s",
				 (int)strcspn(text, "\n"), text);
	}
	return r;
}

/* Decides and applies one update (the staging lock held): checks the name,
 * the namespace and deletion (broker_command_check), that the ref is where
 * the pusher saw it, that the new value is a commit and a fast-forward of
 * the old; pushes it from the host to the remote (that ref only, never
 * forced, with the credentials); then moves the staging ref. */
enum broker_ref_outcome broker_apply_command(struct broker *b,
					     struct broker_session *s,
					     const struct broker_command *cmd,
					     char *why, size_t why_size)
{
	if (broker_command_check(s->base.id, cmd, why, why_size) < 0)
		return REF_REFUSED;
	char err_tail[ERR_TAIL], current[BROKER_OID_MAX + 8], words[REASON_MAX];
	char ref[BROKER_REF_MAX + 8];
	snprintf(ref, sizeof(ref), "%s", cmd->ref);
	/* where the branch is now, as the staging repository knows it */
	char *rp[] = {"rev-parse", "--verify", "--quiet", ref, NULL};
	int r = staging_git(b, s, rp, current, sizeof(current), err_tail);
	if (r < 0 || r > 1) {
		snprintf(why, why_size, "warren broker: cannot read %s", ref);
		return REF_FAILED;
	}
	bool exists = r == 0 && current[0];
	bool creating = broker_oid_is_zero(cmd->old_oid);
	if (creating ? exists : !exists || strcmp(current, cmd->old_oid)) {
		char at[40];
		if (exists)
			snprintf(at, sizeof(at), "at %.12s", current);
		else
			snprintf(at, sizeof(at), "gone");
		snprintf(why, why_size,
			 "warren broker: %s is %s, not where you saw it (fetch "
			 "first)",
			 ref, at);
		return REF_REFUSED;
	}
	char newv[BROKER_OID_MAX + 1], type[32];
	snprintf(newv, sizeof(newv), "%s", cmd->new_oid);
	char *ct[] = {"cat-file", "-t", newv, NULL};
	r = staging_git(b, s, ct, type, sizeof(type), err_tail);
	if (r != 0) {
		snprintf(why, why_size, "warren broker: %.12s was not received",
			 newv);
		return REF_FAILED;
	}
	if (strcmp(type, "commit")) {
		snprintf(why, why_size,
			 "warren broker: only a commit may be pushed to a "
			 "branch (%.12s is a %s)",
			 newv, type);
		return REF_REFUSED;
	}
	if (!creating) {
		char oldv[BROKER_OID_MAX + 1];
		snprintf(oldv, sizeof(oldv), "%s", cmd->old_oid);
		char *mb[] = {"merge-base", "--is-ancestor", oldv, newv, NULL};
		r = staging_git(b, s, mb, NULL, 0, err_tail);
		if (r == 1) {
			snprintf(why, why_size,
				 "warren broker: not a fast-forward (force "
				 "pushes are refused)");
			return REF_REFUSED;
		}
		if (r != 0) {
			broker_last_words(err_tail, words, sizeof(words));
			snprintf(why, why_size, "warren broker: %s", words);
			return REF_FAILED;
		}
	}
	/* to the real remote, from the host: this ref, not forced */
	char spec[BROKER_OID_MAX + BROKER_REF_MAX + 4];
	snprintf(spec, sizeof(spec), "%s:%s", newv, ref);
	struct envv env;
	if (broker_env_build(&s->remote, true, &env) < 0) {
		snprintf(why, why_size, "warren broker: out of memory");
		return REF_FAILED;
	}
	char *push[] = {"git",	       "-C", s->staging,    "push", "--quiet",
			"--no-verify", "--", s->remote.url, spec,   NULL};
	r = git_capture(push, env.v, git_timeout(b), NULL, 0, err_tail);
	broker_envv_clear(&env);
	if (r != 0) {
		broker_last_words(err_tail, words, sizeof(words));
		snprintf(why, why_size,
			 "warren broker: the repository did not take it: %s",
			 words[0] ? words : "git push failed");
		return REF_FAILED;
	}
	/* the staging repository follows, so a fetch sees the branch */
	char oldv[BROKER_OID_MAX + 1];
	snprintf(oldv, sizeof(oldv), "%s", cmd->old_oid);
	char *ur[] = {"update-ref", "-m", "warren broker", ref, newv,
		      oldv,	    NULL};
	if (staging_git(b, s, ur, NULL, 0, err_tail) != 0)
		snprintf(why, why_size,
			 "pushed; the staging repository "
			 "follows at the next fetch");
	else
		why[0] = '\0';
	return REF_PUSHED;
}

char **broker_remote_env(const struct broker_remote *remote)
{
	struct remote r = {
	    .name = (char *)remote->name,
	    .url = (char *)remote->url,
	    .mirror = (char *)remote->mirror,
	    .username = (char *)remote->username,
	    .password = (char *)remote->password,
	    .ssh_key_file = (char *)remote->ssh_key_file,
	    .known_hosts_file = (char *)remote->known_hosts_file,
	};
	struct envv e;
	if (broker_env_build(&r, true, &e) < 0)
		return NULL;
	char **out = wr_calloc(e.n + 1, sizeof(char *));
	if (!out) {
		broker_envv_clear(&e);
		return NULL;
	}
	for (size_t i = 0; i < e.n; i++)
		out[i] = e.v[i]; /* the strings move over */
	return out;
}

void broker_env_free(char **envp)
{
	for (size_t i = 0; envp && envp[i]; i++) {
		sodium_memzero(envp[i], strlen(envp[i]));
		free(envp[i]);
	}
	free(envp);
}

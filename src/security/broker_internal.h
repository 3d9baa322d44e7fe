/* broker_internal.h - what broker.c (connections, sessions) and
 * broker_git.c (host git: its environment and processes, the staging
 * repositories, applying a ref update) share. Not for other modules: the
 * interface is broker.h. */
#ifndef WR_SECURITY_BROKER_INTERNAL_H
#define WR_SECURITY_BROKER_INTERNAL_H

#include "security/broker.h"
#include "security/session_server.h"
#include "util/proc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define GIT_TIMEOUT_MS (5 * 60 * 1000) /* one host git command */
#define REFRESH_MIN_MS 5000
#define EXIT_WAIT_MS 5000 /* for git to exit after its output ended */
#define ERR_TAIL 1024
#define REASON_MAX 512
#define EXPIRED_MAX 256 /* expired tokens remembered, for the record */
#define ENV_MAX 48

/* The session's repository: broker_remote, copied. */
struct remote {
	char *name, *url, *mirror, *username, *password, *ssh_key_file,
	    *known_hosts_file;
};

struct broker_session {
	/* first: id, directory, socket and token paths, expiry
	 * (session_server.h); the server allocates the whole */
	struct sess_srv_session base;
	char *staging;
	struct remote remote;
	unsigned char token_hash[BROKER_TOKEN_HASH_BYTES];
	double refreshed_ms; /* the last refresh (under the staging lock) */
};

/* One per session id with work on its staging repository; outlives a
 * sandbox's record (b->mu for the list and users). */
struct staging_lock {
	struct staging_lock *next;
	char id[BROKER_SESSION_MAX];
	pthread_mutex_t mu;
	unsigned users;
};

struct expired_token {
	unsigned char hash[BROKER_TOKEN_HASH_BYTES];
	char session[BROKER_SESSION_MAX];
	char why[64];
};

struct broker {
	struct broker_config cfg;
	char *data_dir, *broker_dir, *hooks_dir, *hook_relay;
	/* the sockets, token files, connections and their threads */
	struct sess_srv *srv;
	pthread_mutex_t mu; /* the staging locks: the list and their users */
	struct staging_lock *locks;
	/* a ring, under the session server's lock (written as a session
	 * expires) */
	struct expired_token expired[EXPIRED_MAX];
	size_t n_expired, next_expired;
};

double broker_mono_ms(void);

/* ---- broker_git.c ------------------------------------------------------- */

int broker_remote_copy(const struct broker_remote *in, struct remote *out);
void broker_remote_clear(struct remote *r); /* wipes the password */
/* The URL without its user information, for records. */
void broker_url_redacted(const char *url, char *out, size_t size);
/* "https", "ssh key" or "none". */
const char *broker_credential_kind(const struct remote *r);

/* The environment of a host git process (NULL-terminated v). */
struct envv {
	char *v[ENV_MAX + 1];
	size_t n;
};
/* The base (no prompt, no user's or system's configuration) and, with
 * creds, the remote's credentials. */
int broker_env_build(const struct remote *r, bool creds, struct envv *e);
void broker_envv_clear(struct envv *e); /* wipes every string */

/* Starts git in a process group of its own (util/proc.h): stdout and
 * stderr piped, stdin piped (pipe_in) or from /dev/null, extra_fd (if >= 0)
 * as its descriptor 3, nothing else open; our ends non-blocking. 0 or
 * -errno. */
int broker_spawn_git(char *const argv[], char *const envp[], bool pipe_in,
		     int extra_fd, struct proc *out);
/* Waits for its exit within ms (then kills its group); closes our ends.
 * The exit status, 128+N for a signal. */
int broker_child_reap(struct proc *ch, int ms);
void broker_close_fd(int *fd);
/* Keeps the last bytes of a stream in tail (NUL-terminated). */
void broker_tail_add(char *tail, size_t size, const char *data, size_t n);
/* The last line of text that says something, trimmed, user information
 * of URLs in it redacted. */
void broker_last_words(const char *text, char *out, size_t size);

/* The staging repository's lock of a session id (made on first use,
 * freed with its last user); NULL on ENOMEM. */
struct staging_lock *broker_staging_lock(struct broker *b, const char *id);
void broker_staging_unlock(struct broker *b, struct staging_lock *l);
char *broker_staging_path(const struct broker *b, const char *id);
/* Removes a session's staging repository (takes its lock). */
void broker_staging_remove(struct broker *b, const char *id);
/* Makes the session's staging repository if it is missing (lock held):
 * 0, or -errno with why. */
int broker_staging_ensure(struct broker *b, struct broker_session *s, char *why,
			  size_t why_size);
/* Brings it to the remote (lock held), at most every refresh_min_ms:
 * "ok", "fresh", or NULL with why. */
const char *broker_staging_refresh(struct broker *b, struct broker_session *s,
				   char *why, size_t why_size);

enum broker_ref_outcome { REF_PUSHED, REF_REFUSED, REF_FAILED };
/* "pushed", "refused", "failed". */
const char *broker_ref_outcome_name(enum broker_ref_outcome o);
/* Decides and applies one ref update of a push (the staging lock held);
 * why: the reason git shows for a refusal or failure, else a note or "". */
enum broker_ref_outcome broker_apply_command(struct broker *b,
					     struct broker_session *s,
					     const struct broker_command *cmd,
					     char *why, size_t why_size);

#endif

/* broker.h - the credential broker: git for a sandbox, without the
 * repository's credentials in it (docs/security.md, "Credential broker").
 *
 * A sandbox has no network and holds no secret. Its git reaches the
 * session's repository through a unix socket per session
 * (DATA/sessions/<id>.broker/broker.sock), bound read-only into the sandbox
 * at /run/warren-broker beside a token file. The workspace's `origin` is
 *
 *   ext::/run/warren-git-connect %S /run/warren-broker/broker.sock
 *
 * so `git fetch` and `git push` run warren-git-connect (src/init/
 * gitconnect.c) as their transport, the way they would run ssh: it sends
 * one header line, "warren-broker/1 SERVICE TOKEN\n", then carries git's
 * own pack protocol both ways. Here, for each connection:
 *
 *   1. the token is checked: its SHA-256 against the session's (compared
 *      with sodium_memcmp), valid only while the session's sandbox lives
 *      and the session has not ended; a refusal is an ERR packet git
 *      prints ("fatal: remote error: ...");
 *   2. git-upload-pack (fetch) runs against the session's staging
 *      repository on the host (DATA/broker/<id>.git: a bare clone sharing
 *      the repository mirror's objects), refreshed from the real remote
 *      first, with the host's credentials;
 *   3. git-receive-pack (push) runs against the same staging repository
 *      with every ref update handed to the broker (receive.procReceiveRefs
 *      and a proc-receive hook that relays to this process over an
 *      inherited descriptor). Each update is decided here: only
 *      refs/heads/warren/<session> and refs under it, no deletion, only a
 *      commit, only a fast-forward of what the branch is now. An accepted
 *      update is pushed from the host to the real remote (that ref only,
 *      never forced) and only then reported "ok"; a refused one is "ng"
 *      with the reason, which git shows as "[remote rejected]";
 *   4. every connection is reported to the audit callback: the service,
 *      the decision, each ref with its old and new ids and its own
 *      decision, the bytes and the time.
 *
 * The token is 256 random bits, kept here only as its hash. It lives as
 * long as the sandbox it was made for: closing the session (its sandbox
 * stops) or ending it (a final state) expires it, and a later use is
 * refused with the reason and reported, to the session whose socket it
 * came through and to the session it belonged to.
 *
 * broker_policy.c owns the pure parts (tokens, the header, ref names and
 * the policy, pkt-lines); broker.c the connections and sessions, over the
 * session server (session_server.h: sockets, token files, threads);
 * broker_git.c the host's git (credentials in its environment, staging
 * repositories, applying a ref update). Nothing here prints. */
#ifndef WR_SECURITY_BROKER_H
#define WR_SECURITY_BROKER_H

#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Where things are inside a sandbox. */
#define BROKER_SANDBOX_DIR "/run/warren-broker" /* socket and token */
#define BROKER_SANDBOX_SOCKET BROKER_SANDBOX_DIR "/broker.sock"
#define BROKER_SANDBOX_TOKEN BROKER_SANDBOX_DIR "/token"
#define BROKER_SANDBOX_CLIENT "/run/warren-git-connect"
#define BROKER_SOCKET_NAME "broker.sock"
#define BROKER_TOKEN_NAME "token"
/* The workspace's origin (ext:: runs the client with the service). */
#define BROKER_REMOTE_URL \
	"ext::" BROKER_SANDBOX_CLIENT " %S " BROKER_SANDBOX_SOCKET

#define BROKER_MAGIC "warren-broker/1"
#define BROKER_HEADER_MAX 512	   /* the client's header line, '\n' included */
#define BROKER_TOKEN_MAX 128	   /* a token's characters */
#define BROKER_TOKEN_HASH_BYTES 32 /* SHA-256 */
#define BROKER_SESSION_MAX 128	   /* a session id's length */
#define BROKER_REF_MAX 1024	   /* a ref name's length */
#define BROKER_OID_MAX 64	   /* hex digits of an object id (SHA-256) */
#define BROKER_COMMANDS_MAX 256	   /* ref updates in one push */
#define BROKER_PKT_MAX 65520	   /* a pkt-line, its 4-byte length included */
#define BROKER_CONN_MAX 16	   /* concurrent connections per session */

/* ---- tokens (broker_policy.c) ------------------------------------------ */

/* A new token: "wrb_" and 43 base64url characters of 32 random bytes.
 * out must hold BROKER_TOKEN_MAX + 1. 0 or -EIO (libsodium). */
int broker_token_new(char out[BROKER_TOKEN_MAX + 1]);
/* SHA-256 of the token's text. */
void broker_token_hash(const char *token,
		       unsigned char out[BROKER_TOKEN_HASH_BYTES]);
/* Constant-time comparison of two hashes. */
bool broker_token_hash_equal(const unsigned char *a, const unsigned char *b);

/* ---- the client's header (broker_policy.c) ----------------------------- */

enum broker_service {
	BROKER_UPLOAD_PACK,  /* git-upload-pack: fetch, clone, ls-remote */
	BROKER_RECEIVE_PACK, /* git-receive-pack: push */
	BROKER_SERVICE_MAX,
};

const char *broker_service_name(enum broker_service s);

struct broker_header {
	enum broker_service service;
	char token[BROKER_TOKEN_MAX + 1];
};

/* Parses "warren-broker/1 SERVICE TOKEN" (line without its '\n'): 0, or
 * -EBADMSG with *why. A token is 1 to BROKER_TOKEN_MAX of
 * [A-Za-z0-9_-]. */
int broker_header_parse(const char *line, size_t len, struct broker_header *out,
			const char **why);

/* ---- refs and the policy (broker_policy.c) ----------------------------- */

/* git's rules for a full ref name (git check-ref-format): starts with
 * "refs/", components not empty and not starting with '.', not ending in
 * ".lock"; no "..", "@{", control characters, space, ~ ^ : ? * [ \, no
 * trailing '/' or '.'; at most BROKER_REF_MAX bytes. */
bool broker_refname_valid(const char *ref);

/* Is ref the session's branch, refs/heads/warren/<session_id>, or a ref
 * below it (refs/heads/warren/<session_id>/...)? */
bool broker_ref_in_namespace(const char *session_id, const char *ref);

bool broker_oid_valid(const char *oid); /* 40 or 64 lowercase hex digits */
bool broker_oid_is_zero(const char *oid);

/* One ref update of a push, as receive-pack hands it over. */
struct broker_command {
	char old_oid[BROKER_OID_MAX + 1];
	char new_oid[BROKER_OID_MAX + 1];
	char ref[BROKER_REF_MAX + 1];
};

/* Parses "OLD NEW REF" (a trailing '\n' is allowed): 0 or -EBADMSG. */
int broker_command_parse(const char *line, size_t len,
			 struct broker_command *out);

/* What can be decided from the command alone: a valid name in the
 * session's namespace, not a deletion. 0, or -EACCES with the reason in
 * why (what git shows the pusher). */
int broker_command_check(const char *session_id,
			 const struct broker_command *cmd, char *why,
			 size_t why_size);

/* ---- pkt-lines (broker_policy.c) --------------------------------------- */

#define BROKER_PKT_FLUSH 0 /* "0000" */
#define BROKER_PKT_DELIM 1 /* "0001" */
#define BROKER_PKT_END 2   /* "0002" */

/* The length field of a pkt-line: its whole length (4 + payload, at most
 * BROKER_PKT_MAX), BROKER_PKT_FLUSH/DELIM/END, or -EBADMSG. */
int broker_pkt_len(const char hdr[4]);
/* Formats payload as a pkt-line into buf: its length, or -E2BIG. */
int broker_pkt_format(char *buf, size_t size, const char *payload, size_t len);

/* ---- the broker (broker.c) --------------------------------------------- */

/* The repository a session's git reaches, and how the host reaches it.
 * Credentials go to the host's git only: https ones through a credential
 * helper fed from the environment of that git process, an ssh key as
 * GIT_SSH_COMMAND; never on a command line, in a file or in a sandbox. */
struct broker_remote {
	const char *name;	  /* the repository's name, for records */
	const char *url;	  /* where pushes go and fetches come from */
	const char *mirror;	  /* its mirror on the host (may be NULL) */
	const char *username;	  /* https credentials, or NULL */
	const char *password;	  /* (wiped when the session closes) */
	const char *ssh_key_file; /* ssh credentials, or NULL */
	const char *known_hosts_file; /* for ssh (NULL: the system's) */
};

/* One connection's record: {"service", "decision": "allowed"|"refused"|
 * "failed", "reason", "refs": [{"ref", "old", "new", "decision":
 * "pushed"|"refused"|"failed", "reason"}], "remote" (without user
 * information), "credential", "refresh", "bytes_up", "bytes_down", "ms",
 * "exit_code", "token_session"}. session_id is the session the record
 * belongs to: the socket's, or (for a refused token of another session)
 * that session too. Called from the connection's thread. */
typedef void (*broker_audit_fn)(void *ctx, const char *session_id,
				const json_t *details);

struct broker_config {
	const char *data_dir;	/* staging repositories in DATA/broker */
	const char *hook_relay; /* warren-git-connect on the host */
	broker_audit_fn audit;	/* may be NULL */
	void *ctx;
	unsigned max_conns;	    /* per session; 0: BROKER_CONN_MAX */
	unsigned refresh_min_ms;    /* between refreshes; 0: 5 s */
	unsigned git_timeout_ms;    /* one host git command; 0: 5 min */
	unsigned conn_idle_ms;	    /* no byte either way; 0: 10 min */
	unsigned header_timeout_ms; /* the header; 0: 10 s */
};

struct broker;

/* Starts the acceptor; empties DATA/broker (staging repositories are
 * caches of the remote, made again on first use) and writes the
 * proc-receive hook there. */
int broker_start(const struct broker_config *cfg, struct broker **out,
		 struct wr_error **err);
/* Opens the session: a listener at dir/broker.sock (dir made 0711, the
 * socket 0666 and the token file 0644: the sandbox's processes run as an
 * unmapped uid and reach them only through the bind mount; DATA/sessions
 * itself is 0700) and a new token in dir/token. A session that is open
 * already gets a new token (the old one expires). The remote's strings
 * are copied. */
int broker_session_open(struct broker *b, const char *session_id,
			const char *dir, const struct broker_remote *remote,
			struct wr_error **err);
/* The session's sandbox stopped: its token expires, its connections
 * end, the listener, the socket, the token file and dir go. Unknown
 * sessions are fine. */
void broker_session_close(struct broker *b, const char *session_id);
/* The session ended (a final state, or approved): its token expires and
 * its connections end now; its staging repository goes (now, or when the
 * session closes). */
void broker_session_end(struct broker *b, const char *session_id);
/* Closes every session and waits for every connection. */
void broker_stop(struct broker *b);

/* The environment (NULL-terminated, caller frees with broker_env_free,
 * which wipes it) of a host git that talks to remote with its
 * credentials: the approval push uses it, so the remote's credentials
 * reach that git process only, as they do the broker's. */
char **broker_remote_env(const struct broker_remote *remote);
void broker_env_free(char **envp);

#endif

/* session_server.h - the per-session unix-socket server under the
 * credential broker (broker.c) and the egress proxy (egress.c).
 *
 * Each open session has a directory (DATA/sessions/<id>.broker or
 * <id>.egress, made 0711) holding a listening socket (0666) and, where the
 * backend has one, a token file (0644), all bound read-only into the
 * session's sandbox. One acceptor thread polls every session's listener
 * (and an eventfd that wakes it when sessions come and go); each accepted
 * connection is handed to a worker thread, up to max_conns per session,
 * and served there by the backend's ops->serve: its own protocol (the
 * broker's git relay, the proxy's CONNECT and HTTP) is all the backend
 * writes.
 *
 * What this module owns: the sessions (open, then closing until the
 * acceptor has closed their listener), their directories, sockets and
 * token files, the connections and the workers that serve them, expiry
 * (a session's connections end, and later ones may be refused, while it
 * still listens) and the stale directories a previous server left.
 *
 * Lifetimes: a session is referenced by the registry (until the acceptor
 * has closed its listening socket) and by each of its connections; the
 * last reference frees it. The server's lock guards the session lists,
 * every session's connections and their descriptors: client sockets are
 * closed under it, so expiring a session can shut them down (waking their
 * workers) without racing a close and a reuse of the descriptor. A backend
 * keeps what the expiry touches (a git process group, an upstream socket)
 * under the same lock, through sess_srv_lock().
 *
 * A backend embeds struct sess_srv_session and struct sess_srv_conn as
 * the first member of its own session and connection (sizes in the
 * config); the server allocates them zeroed and frees them. Nothing here
 * prints. */
#ifndef WR_SECURITY_SESSION_SERVER_H
#define WR_SECURITY_SESSION_SERVER_H

#include "util/error.h"

#include <stdbool.h>
#include <stddef.h>

#define SESS_SRV_ID_MAX 128	/* a session id's length */
#define SESS_SRV_EXPIRED_MAX 64 /* the reason a session expired */

struct sess_srv;

struct sess_srv_conn;

/* One session. Backends read id, the paths, expired and closed (the last
 * two under the lock); the rest is the server's. */
struct sess_srv_session {
	char id[SESS_SRV_ID_MAX];
	char *dir, *sock_path;
	char *token_path; /* NULL without a token file */
	/* why its connections ended and new ones are refused, "" while
	 * they are served (the lock) */
	char expired[SESS_SRV_EXPIRED_MAX];
	bool closed; /* out of the open list: its sandbox stopped (lock) */
	/* the server's */
	bool ended; /* sess_srv_end(): the session is over, not just closed */
	struct sess_srv_session *next;
	int listen_fd;
	unsigned refs;	 /* the registry's + one per connection */
	unsigned active; /* connections */
	struct sess_srv_conn *conns;
};

/* One accepted connection. */
struct sess_srv_conn {
	struct sess_srv_session *sess; /* referenced while cn lives */
	int client_fd; /* closed (or replaced) under the lock, -1 once closed */
	/* the server's */
	struct sess_srv *srv;
	struct sess_srv_conn *next, *prev;
	struct sess_srv_conn *queued_next; /* waiting for a worker */
};

/* What a backend does; ctx is the config's. "Lock held" means the
 * server's lock: such a callback must not block or take it again. */
struct sess_srv_ops {
	/* Serves cn, in a worker thread, without the lock. Calls
	 * sess_srv_conn_hangup() once the client is done with, before its
	 * records: the client is not kept waiting for them. */
	void (*serve)(void *ctx, struct sess_srv_conn *cn);
	/* A connection that is not served: a short answer naming why,
	 * best effort and without blocking, then fd is closed (the
	 * acceptor, lock held). */
	void (*refuse)(void *ctx, int fd, const char *why);
	/* May be NULL. The backend's part of a new connection, before
	 * anything else can see it (lock held); allocates nothing. */
	void (*conn_init)(void *ctx, struct sess_srv_conn *cn);
	/* May be NULL. The session expires: end what cn runs besides its
	 * client socket, which the server shuts down (lock held). */
	void (*conn_end)(void *ctx, struct sess_srv_conn *cn);
	/* May be NULL. s expires, once, s->expired saying why (lock held,
	 * before its connections end). */
	void (*expire)(void *ctx, struct sess_srv_session *s);
	/* May be NULL. Frees the backend's part of s (not s itself), with
	 * its last reference or when it was never opened (lock held, or
	 * nobody else has s); a part left zeroed too. */
	void (*session_clear)(void *ctx, struct sess_srv_session *s);
};

struct sess_srv_config {
	const char *name;	 /* "broker", "egress": messages' context */
	const char *socket_name; /* the listener, dir/NAME */
	const char *token_name;	 /* the token file, dir/NAME; NULL: none */
	size_t session_size;	 /* the backend's session, at least ours */
	size_t conn_size;	 /* the backend's connection, at least ours */
	unsigned max_conns;	 /* per session, more are refused */
	/* workers kept waiting for the next connection; 0: a thread per
	 * connection, and a connection no thread can be started for is
	 * refused rather than left waiting behind a long one */
	unsigned spare_workers;
	bool nonblocking; /* accepted sockets non-blocking */
	const struct sess_srv_ops *ops;
	void *ctx;
};

/* Is id a session id: 1 to SESS_SRV_ID_MAX - 1 of [A-Za-z0-9._-], not
 * starting with '.' (it names a directory)? */
bool sess_srv_id_ok(const char *id);

/* Starts the acceptor. The strings of cfg must outlive the server. */
int sess_srv_start(const struct sess_srv_config *cfg, struct sess_srv **out,
		   struct wr_error **err);
/* Closes every session (why: the reason they expire), removes their
 * files, waits for every connection and worker, frees srv. */
void sess_srv_stop(struct sess_srv *srv, const char *why);

/* A new session for id at dir (zeroed, cfg.session_size) in *out, not
 * open yet: the backend fills its part, then sess_srv_session_open().
 * -ENOMEM, or -EINVAL for a bad id. */
int sess_srv_session_new(struct sess_srv *srv, const char *id, const char *dir,
			 struct sess_srv_session **out, struct wr_error **err);
/* Frees a session that was never opened (ops->session_clear first). */
void sess_srv_session_free(struct sess_srv *srv, struct sess_srv_session *s);
/* Makes s->dir (0711: the sandbox's processes, an unmapped uid, may pass
 * through to the socket and the token, not list), writes token (if the
 * server has a token file; 0644), listens at the socket (0666: connect(2)
 * needs write permission) and serves s from now on. s is the server's
 * from here, on failure too (then freed, the token file removed). The
 * caller makes sure no open session has s's id. */
int sess_srv_session_open(struct sess_srv *srv, struct sess_srv_session *s,
			  const char *token, struct wr_error **err);

/* The open session's connections end and it expires with why (once; the
 * first reason stays), and it is marked ended; it keeps listening until
 * closed. false if no session id is open. */
bool sess_srv_end(struct sess_srv *srv, const char *id, const char *why);
/* Closes the open session id: it expires with why, its listener goes
 * with the acceptor's next turn, its socket, token file and directory
 * now. *was_ended (may be NULL): whether sess_srv_end() came first
 * (false for no such session). Unknown sessions are fine. */
void sess_srv_close(struct sess_srv *srv, const char *id, const char *why,
		    bool *was_ended);

/* The server's lock, for what a backend keeps with its connections, and
 * for the _locked calls. */
void sess_srv_lock(struct sess_srv *srv);
void sess_srv_unlock(struct sess_srv *srv);
/* The open session id, or NULL (lock held). */
struct sess_srv_session *sess_srv_find_locked(struct sess_srv *srv,
					      const char *id);
/* The open session after s (NULL: the first), or NULL (lock held). */
struct sess_srv_session *sess_srv_next_locked(struct sess_srv *srv,
					      struct sess_srv_session *s);
/* Closes cn's client socket (from serve: the client is done with). */
void sess_srv_conn_hangup(struct sess_srv_conn *cn);
void sess_srv_conn_hangup_locked(struct sess_srv_conn *cn);

/* ---- what the relay passes (src/init/relay.c) -------------------------- */

/* The relay in a sandbox offers each client's socket itself: one byte 0
 * with the socket attached. Or, when it could not, it relays the bytes,
 * which start with the request. */
enum {
	SESS_SRV_TAKE_BYTES = -1,  /* the request's first bytes */
	SESS_SRV_TAKE_AGAIN = -2,  /* nothing yet */
	SESS_SRV_TAKE_CLOSED = -3, /* end of file, or reset */
	SESS_SRV_TAKE_BAD = -4,	   /* a 0 without a socket, or both */
	SESS_SRV_TAKE_FAILED = -5,
};
/* One message from the unix socket fd (non-blocking): the passed client
 * socket (>= 0: a connected TCP socket, made non-blocking), the first
 * bytes of a request in buf (SESS_SRV_TAKE_BYTES, *len set), or another
 * SESS_SRV_TAKE_. */
int sess_srv_take_passed(int fd, char *buf, size_t cap, size_t *len);
/* Answers a connection that is not served (fd: the unix socket, or the
 * client's socket it passes, read first) with a 503 naming why, from
 * "warren NAME", and closes it. Does not block. */
void sess_srv_refuse_http(int fd, const char *name, const char *why);

/* Removes what a previous server left in sessions_dir: every entry named
 * <something><suffix> (its tokens are dead, no session is open yet). */
void sess_srv_remove_stale(const char *sessions_dir, const char *suffix);

#endif

/* broker.c - the credential broker's connections and sessions
 * (broker.h) over the session server (session_server.c: sockets, token
 * files, the acceptor and the connection threads); its host git is
 * broker_git.c.
 *
 * Each accepted connection gets a thread of its own, up to max_conns per
 * session. A connection thread reads the header, checks the token, makes
 * the session's staging repository if it has none, and runs
 * git-upload-pack or git-receive-pack on it with its standard streams
 * relayed to the client. For a push, receive-pack hands every ref update
 * to its proc-receive hook, a relay (warren-git-connect --fd 3) back to
 * this thread over a socket pair the thread made; the thread decides and
 * applies each update there (proc_receive) and answers ok or ng per ref.
 *
 * Lifetimes are the session server's: a session lives while it is
 * registered or a connection of it does. A connection's git process group
 * is published under the server's lock, so expiring a session (its
 * sandbox stopped, or the session ended) can kill it as well as shut down
 * the client's socket. Work on a staging repository (making it,
 * refreshing it, updating a ref) holds that session's staging lock, which
 * outlives a sandbox: the records of one session's old and new sandboxes
 * share it. */
#include "security/broker_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_TIMEOUT_MS 10000
#define HOOK_TIMEOUT_MS 30000	      /* one packet from the hook */
#define CONN_IDLE_MS (10 * 60 * 1000) /* no byte moved either way */
#define RELAY_BUF (64 * 1024)

/* One connection: the session server's, and the git it runs. */
struct conn {
	struct sess_srv_conn base; /* first: the server allocates it */
	struct broker *b;
	pid_t child; /* its git process group, 0 if none (the server's lock) */
};

_Static_assert(offsetof(struct conn, base) == 0,
	       "the session server's part comes first");
_Static_assert(offsetof(struct broker_session, base) == 0,
	       "the session server's part comes first");
_Static_assert(BROKER_SESSION_MAX == SESS_SRV_ID_MAX,
	       "a session id is the session server's");

static struct broker_session *session_of(struct conn *cn)
{
	return (struct broker_session *)cn->base.sess;
}

/* ---- the proc-receive hook ------------------------------------------------
 */

static int wait_fd(int fd, short events, double until)
{
	for (;;) {
		int left = (int)(until - broker_mono_ms());
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {fd, events, 0};
		int r = poll(&p, 1, left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

static int read_full(int fd, char *buf, size_t n, double until)
{
	size_t got = 0;
	while (got < n) {
		int r = wait_fd(fd, POLLIN, until);
		if (r < 0)
			return r;
		ssize_t k = recv(fd, buf + got, n - got, MSG_DONTWAIT);
		if (k == 0)
			return -ECONNRESET;
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (k > 0)
			got += (size_t)k;
	}
	return 0;
}

static int send_full(int fd, const char *buf, size_t n, double until)
{
	while (n > 0) {
		ssize_t k = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k > 0) {
			buf += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		int r = wait_fd(fd, POLLOUT, until);
		if (r < 0)
			return r;
	}
	return 0;
}

/* What pkt_read returns for a flush (or a delimiter): no read error is
 * ENOMSG. */
#define PKT_FLUSH (-ENOMSG)

/* Reads one pkt-line: its payload length (payload NUL-terminated in buf,
 * a trailing '\n' kept), PKT_FLUSH, or -errno. */
static int pkt_read(int fd, char *buf, size_t size, double until)
{
	char hdr[4];
	int r = read_full(fd, hdr, 4, until);
	if (r < 0)
		return r;
	int len = broker_pkt_len(hdr);
	if (len < 0)
		return len;
	if (len < 4)
		return PKT_FLUSH; /* a delimiter or an end: the same here */
	size_t n = (size_t)len - 4;
	if (n + 1 > size)
		return -E2BIG;
	r = read_full(fd, buf, n, until);
	if (r < 0)
		return r;
	buf[n] = '\0';
	return (int)n;
}

static int pkt_write(int fd, const char *text, double until)
{
	char buf[BROKER_PKT_MAX];
	int n = broker_pkt_format(buf, sizeof(buf), text, strlen(text));
	if (n < 0)
		return n;
	return send_full(fd, buf, (size_t)n, until);
}

/* receive-pack's proc-receive protocol (githooks(5)), on the broker's end
 * of the hook's relay: version, the ref updates, then one "ok REF" or
 * "ng REF REASON" for each. Fills rec's "refs". On a protocol error the
 * hook's end is closed without a report, and receive-pack refuses every
 * update ("fail to run proc-receive hook"). */
static void proc_receive(struct conn *cn, int fd, json_t *rec)
{
	struct broker *b = cn->b;
	struct broker_session *s = session_of(cn);
	_cleanup_free_ char *buf = wr_malloc(BROKER_PKT_MAX);
	struct broker_command *cmds =
	    wr_calloc(BROKER_COMMANDS_MAX, sizeof(*cmds));
	json_t *refs = json_array();
	size_t n = 0;
	const char *problem = NULL;
	double until = broker_mono_ms() + HOOK_TIMEOUT_MS;
	if (!buf || !cmds || !refs) {
		problem = "out of memory";
		goto out;
	}
	/* version negotiation: we take version 1, no push options, no
	 * atomic pushes (receive-pack is told not to offer them) */
	int k = pkt_read(fd, buf, BROKER_PKT_MAX, until);
	if (k < 0 || strncmp(buf, "version=1", 9)) {
		problem = "proc-receive: no version 1";
		goto out;
	}
	while ((k = pkt_read(fd, buf, BROKER_PKT_MAX, until)) >= 0)
		;
	if (k != PKT_FLUSH || pkt_write(fd, "version=1", until) < 0 ||
	    send_full(fd, "0000", 4, until) < 0) {
		problem = "proc-receive: version negotiation failed";
		goto out;
	}
	for (;;) {
		k = pkt_read(fd, buf, BROKER_PKT_MAX, until);
		if (k == PKT_FLUSH)
			break;
		if (k < 0 || n >= BROKER_COMMANDS_MAX ||
		    broker_command_parse(buf, (size_t)k, &cmds[n]) < 0) {
			problem =
			    k < 0 ? "proc-receive: read failed"
			    : n >= BROKER_COMMANDS_MAX
				? "proc-receive: more than 256 ref updates"
				: "proc-receive: a malformed ref update";
			goto out;
		}
		n++;
	}
	/* one at a time per session: a staging ref and the remote's move
	 * together */
	struct staging_lock *l = broker_staging_lock(b, s->base.id);
	for (size_t i = 0; i < n; i++) {
		char why[REASON_MAX];
		enum broker_ref_outcome o =
		    l ? broker_apply_command(b, s, &cmds[i], why, sizeof(why))
		      : REF_FAILED;
		if (!l)
			snprintf(why, sizeof(why),
				 "warren broker: out of memory");
		json_array_append_new(
		    refs,
		    json_pack("{s:s, s:s, s:s, s:s, s:s?}", "ref", cmds[i].ref,
			      "old", cmds[i].old_oid, "new", cmds[i].new_oid,
			      "decision", broker_ref_outcome_name(o), "reason",
			      why[0] ? why : NULL));
		char line[BROKER_REF_MAX + REASON_MAX + 8];
		if (o == REF_PUSHED)
			snprintf(line, sizeof(line), "ok %s", cmds[i].ref);
		else
			snprintf(line, sizeof(line), "ng %s %s", cmds[i].ref,
				 why);
		/* the pusher may wait long for a slow remote: each answer
		 * has its own time */
		if (pkt_write(fd, line, broker_mono_ms() + HOOK_TIMEOUT_MS) < 0)
			problem = "proc-receive: the hook went away";
	}
	broker_staging_unlock(b, l);
	if (!problem &&
	    send_full(fd, "0000", 4, broker_mono_ms() + HOOK_TIMEOUT_MS) < 0)
		problem = "proc-receive: the hook went away";
out:
	shutdown(fd, SHUT_WR);
	if (problem)
		json_object_set_new(rec, "hook_error", json_string(problem));
	json_object_set_new(rec, "refs", refs ? refs : json_array());
	free(cmds);
}

/* ---- relaying a git service -----------------------------------------------
 */

struct flow {
	char *buf;
	size_t len, off;
	bool eof;
	uint64_t bytes;
};

static void set_child(struct conn *cn, pid_t pid)
{
	sess_srv_lock(cn->b->srv);
	cn->child = pid;
	/* a session closed while it started: it ends now */
	if (pid > 0 && cn->base.sess->expired[0])
		kill(-pid, SIGKILL);
	sess_srv_unlock(cn->b->srv);
}

/* Moves bytes between the client and the git process until git's output
 * has ended and reached the client; serves the proc-receive hook when it
 * calls. Records bytes and how it ended in rec. */
static void relay(struct conn *cn, struct proc *ch, int hook_fd, json_t *rec)
{
	struct broker *b = cn->b;
	int client = cn->base.client_fd;
	_cleanup_free_ char *ubuf = wr_malloc(RELAY_BUF);
	_cleanup_free_ char *dbuf = wr_malloc(RELAY_BUF);
	char err_tail[ERR_TAIL] = "";
	const char *ended = NULL;
	if (!ubuf || !dbuf) {
		ended = "out of memory";
		goto out;
	}
	struct flow up = {.buf = ubuf}, down = {.buf = dbuf};
	bool err_open = true, shut = false;
	unsigned idle =
	    b->cfg.conn_idle_ms ? b->cfg.conn_idle_ms : CONN_IDLE_MS;
	double last = broker_mono_ms();
	while (!(down.eof && down.len == 0)) {
		struct pollfd p[5] = {
		    {client, 0, 0},
		    {ch->in_fd, up.len > up.off ? POLLOUT : 0, 0},
		    {ch->out_fd, !down.eof && down.len == 0 ? POLLIN : 0, 0},
		    {err_open ? ch->err_fd : -1, POLLIN, 0},
		    {hook_fd, POLLIN, 0},
		};
		if (!up.eof && up.len == 0)
			p[0].events |= POLLIN;
		if (down.len > down.off)
			p[0].events |= POLLOUT;
		for (int i = 0; i < 3; i++)
			if (!p[i].events)
				p[i].fd = -1; /* a hung-up peer: no POLLHUP */
		int left = (int)(last + idle - broker_mono_ms());
		if (left <= 0) {
			ended = "idle for too long";
			break;
		}
		int r = poll(p, 5, left);
		if (r < 0 && errno != EINTR) {
			ended = "poll failed";
			break;
		}
		if (r <= 0)
			continue;
		last = broker_mono_ms();
		/* client -> git */
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR) && !up.eof &&
		    up.len == 0) {
			ssize_t k =
			    recv(client, up.buf, RELAY_BUF, MSG_DONTWAIT);
			if (k > 0) {
				up.len = (size_t)k;
				up.off = 0;
			} else if (k == 0 ||
				   (errno != EAGAIN && errno != EINTR)) {
				up.eof = true;
			}
		}
		if (up.len > up.off && ch->in_fd >= 0) {
			ssize_t k =
			    write(ch->in_fd, up.buf + up.off, up.len - up.off);
			if (k > 0) {
				up.off += (size_t)k;
				up.bytes += (uint64_t)k;
			} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
				/* git stopped reading: what the client
				 * still sends goes nowhere */
				broker_close_fd(&ch->in_fd);
			}
		}
		if (ch->in_fd < 0 || up.off == up.len)
			up.len = up.off = 0;
		if (up.eof && up.len == 0 && ch->in_fd >= 0)
			broker_close_fd(&ch->in_fd);
		/* git -> client */
		if (p[2].revents && !down.eof && down.len == 0) {
			ssize_t k = read(ch->out_fd, down.buf, RELAY_BUF);
			if (k > 0) {
				down.len = (size_t)k;
				down.off = 0;
			} else if (k == 0 ||
				   (errno != EAGAIN && errno != EINTR)) {
				down.eof = true;
			}
		}
		if (down.len > down.off) {
			ssize_t k = send(client, down.buf + down.off,
					 down.len - down.off,
					 MSG_NOSIGNAL | MSG_DONTWAIT);
			if (k > 0) {
				down.off += (size_t)k;
				down.bytes += (uint64_t)k;
			} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
				ended = "the client went away";
				break;
			}
			if (down.off == down.len)
				down.len = down.off = 0;
		}
		/* git's stderr: kept for the record, not sent (git reports
		 * to the client in band) */
		if (p[3].revents) {
			char chunk[1024];
			ssize_t k = read(ch->err_fd, chunk, sizeof(chunk));
			if (k > 0)
				broker_tail_add(err_tail, sizeof(err_tail),
						chunk, (size_t)k);
			else if (k == 0 || (errno != EAGAIN && errno != EINTR))
				err_open = false;
		}
		if (p[4].revents) {
			/* the hook calls; or receive-pack is gone without
			 * one (nothing to update): stop listening either
			 * way (the caller closes it) */
			char c;
			ssize_t k =
			    recv(hook_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
			if (k > 0) {
				proc_receive(cn, hook_fd, rec);
				hook_fd = -1;
				last = broker_mono_ms();
			} else if (k == 0 ||
				   (errno != EAGAIN && errno != EINTR)) {
				hook_fd = -1;
			}
		}
	}
	if (down.eof && down.len == 0 && !shut) {
		shutdown(client, SHUT_WR);
		shut = true;
	}
	json_object_set_new(rec, "bytes_up",
			    json_integer((json_int_t)up.bytes));
	json_object_set_new(rec, "bytes_down",
			    json_integer((json_int_t)down.bytes));
out:
	if (ended) {
		proc_kill(ch, SIGKILL);
		json_object_set_new(rec, "ended", json_string(ended));
	}
	int status = broker_child_reap(ch, EXIT_WAIT_MS);
	set_child(cn, 0);
	json_object_set_new(rec, "exit_code", json_integer(status));
	if (status != 0 && err_tail[0]) {
		char words[REASON_MAX];
		broker_last_words(err_tail, words, sizeof(words));
		json_object_set_new(rec, "git_error", json_string(words));
	}
}

/* ---- one connection -------------------------------------------------------
 */

/* An error git shows the user: "fatal: remote error: TEXT". */
static void send_err(int fd, const char *text)
{
	char line[REASON_MAX + 32], pkt[REASON_MAX + 40];
	snprintf(line, sizeof(line), "ERR warren broker: %s\n", text);
	int n = broker_pkt_format(pkt, sizeof(pkt), line, strlen(line));
	if (n > 0)
		send_full(fd, pkt, (size_t)n, broker_mono_ms() + 2000);
}

/* Reads the header line without reading past it: git's own bytes follow
 * (though git waits for the server to speak first). */
static int read_header(int fd, char *line, size_t size, double until)
{
	for (;;) {
		int r = wait_fd(fd, POLLIN, until);
		if (r < 0)
			return r;
		ssize_t k = recv(fd, line, size, MSG_PEEK | MSG_DONTWAIT);
		if (k == 0)
			return -ECONNRESET;
		if (k < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -errno;
		}
		char *nl = memchr(line, '\n', (size_t)k);
		if (nl) {
			size_t n = (size_t)(nl - line) + 1;
			if (recv(fd, line, n, MSG_DONTWAIT) != (ssize_t)n)
				return -EIO;
			line[n - 1] = '\0';
			return (int)(n - 1);
		}
		if ((size_t)k >= size)
			return -E2BIG;
		/* a partial line: wait for more (poll sees the same bytes
		 * as readable, so sleep a moment instead of spinning) */
		usleep(1000);
	}
}

/* The token's verdict (the session server's lock held): NULL if it is
 * the session's live token, else why not; *other names the session it
 * belonged to, if another. */
static const char *token_verdict(struct broker *b, struct broker_session *s,
				 const unsigned char *h, char *why, size_t size,
				 char *other, size_t other_size)
{
	other[0] = '\0';
	if (broker_token_hash_equal(h, s->token_hash)) {
		if (!s->base.expired[0])
			return NULL;
		snprintf(why, size, "token expired (%s)", s->base.expired);
		return why;
	}
	for (size_t i = 0; i < b->n_expired; i++) {
		const struct expired_token *e = &b->expired[i];
		if (!broker_token_hash_equal(h, e->hash))
			continue;
		if (strcmp(e->session, s->base.id)) {
			snprintf(other, other_size, "%s", e->session);
			snprintf(why, size,
				 "a token of session %s, expired (%s)",
				 e->session, e->why);
		} else {
			snprintf(why, size, "token expired (%s)", e->why);
		}
		return why;
	}
	for (struct sess_srv_session *it = sess_srv_next_locked(b->srv, NULL);
	     it; it = sess_srv_next_locked(b->srv, it)) {
		struct broker_session *o = (struct broker_session *)it;
		if (o != s && broker_token_hash_equal(h, o->token_hash)) {
			snprintf(other, other_size, "%s", o->base.id);
			snprintf(why, size,
				 "a token of another session (%s): a token "
				 "works only on its own session's socket",
				 o->base.id);
			return why;
		}
	}
	snprintf(why, size, "unknown token");
	return why;
}

static void handle(struct conn *cn, json_t *rec, char *other, size_t other_size)
{
	struct broker *b = cn->b;
	struct broker_session *s = session_of(cn);
	int fd = cn->base.client_fd;
	char line[BROKER_HEADER_MAX + 1], why[REASON_MAX];
	unsigned hto = b->cfg.header_timeout_ms ? b->cfg.header_timeout_ms
						: HEADER_TIMEOUT_MS;
	int n =
	    read_header(fd, line, BROKER_HEADER_MAX, broker_mono_ms() + hto);
	struct broker_header hdr = {0};
	const char *bad = NULL;
	if (n < 0)
		bad = n == -E2BIG	? "header line too long"
		      : n == -ETIMEDOUT ? "no header in time"
					: "closed before a header";
	else if (broker_header_parse(line, (size_t)n, &hdr, &bad) == 0)
		json_object_set_new(
		    rec, "service",
		    json_string(broker_service_name(hdr.service)));
	explicit_bzero(line, sizeof(line));
	if (bad) {
		json_object_set_new(rec, "decision", json_string("refused"));
		snprintf(why, sizeof(why), "bad request: %s", bad);
		json_object_set_new(rec, "reason", json_string(why));
		send_err(fd, why);
		return;
	}
	/* the token: its hash against the session's */
	unsigned char h[BROKER_TOKEN_HASH_BYTES];
	broker_token_hash(hdr.token, h);
	explicit_bzero(&hdr.token, sizeof(hdr.token));
	sess_srv_lock(b->srv);
	const char *refused =
	    token_verdict(b, s, h, why, sizeof(why), other, other_size);
	sess_srv_unlock(b->srv);
	if (refused) {
		json_object_set_new(rec, "decision", json_string("refused"));
		json_object_set_new(rec, "reason", json_string(refused));
		if (other[0])
			json_object_set_new(rec, "token_session",
					    json_string(other));
		send_err(fd, refused);
		return;
	}
	char remote[1024];
	broker_url_redacted(s->remote.url, remote, sizeof(remote));
	json_object_set_new(rec, "remote", json_string(remote));
	json_object_set_new(rec, "credential",
			    json_string(broker_credential_kind(&s->remote)));

	/* the staging repository; for a fetch, brought up to the remote */
	struct staging_lock *l = broker_staging_lock(b, s->base.id);
	int r = l ? broker_staging_ensure(b, s, why, sizeof(why)) : -ENOMEM;
	if (!l)
		snprintf(why, sizeof(why), "out of memory");
	if (r == 0 && hdr.service == BROKER_UPLOAD_PACK) {
		char rwhy[REASON_MAX];
		const char *fresh =
		    broker_staging_refresh(b, s, rwhy, sizeof(rwhy));
		/* a remote out of reach: serve what the staging has */
		json_object_set_new(rec, "refresh",
				    fresh ? json_string(fresh)
					  : json_pack("{s:s}", "error", rwhy));
	}
	broker_staging_unlock(b, l);
	if (r < 0) {
		json_object_set_new(rec, "decision", json_string("failed"));
		json_object_set_new(rec, "reason", json_string(why));
		send_err(fd, why);
		return;
	}
	json_object_set_new(rec, "decision", json_string("allowed"));

	/* the service, its streams relayed: git's own protocol */
	int pair[2] = {-1, -1};
	char hooks[4096];
	snprintf(hooks, sizeof(hooks), "core.hooksPath=%s", b->hooks_dir);
	char *upload[] = {"git",	   "upload-pack", "--strict",
			  "--timeout=600", s->staging,	  NULL};
	/* every ref update under refs/ goes to the proc-receive hook (to
	 * us) and receive-pack applies none itself; its own deny settings
	 * stay as a second wall, should an update ever fall through */
	char *receive[] = {"git", "-c", "receive.procReceiveRefs=refs", "-c",
			   "receive.denyDeletes=true", "-c",
			   "receive.denyNonFastForwards=true", "-c",
			   "receive.fsckObjects=true", "-c",
			   "receive.autogc=false", "-c",
			   "receive.advertiseAtomic=false", "-c",
			   "receive.advertisePushOptions=false", "-c",
			   /* what a sandbox may put on the host's disk with
			    * one push (review.c's cap on a bundle) */
			   "receive.maxInputSize=512m", "-c", hooks,
			   "receive-pack", s->staging, NULL};
	bool push = hdr.service == BROKER_RECEIVE_PACK;
	if (push &&
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0) {
		json_object_set_new(rec, "decision", json_string("failed"));
		json_object_set_new(rec, "reason",
				    json_string("socketpair failed"));
		send_err(fd, "internal error");
		return;
	}
	struct envv env;
	struct proc ch;
	r = broker_env_build(&s->remote, false, &env);
	if (r == 0)
		r = broker_spawn_git(push ? receive : upload, env.v, true,
				     push ? pair[1] : -1, &ch);
	broker_envv_clear(&env);
	broker_close_fd(&pair[1]);
	if (r < 0) {
		broker_close_fd(&pair[0]);
		json_object_set_new(rec, "decision", json_string("failed"));
		json_object_set_new(rec, "reason",
				    json_string("cannot run git"));
		send_err(fd, "cannot run git");
		return;
	}
	set_child(cn, ch.pid);
	relay(cn, &ch, pair[0], rec);
	broker_close_fd(&pair[0]);
}

/* ---- the session server's callbacks --------------------------------------
 */

/* One connection, from its header to its record (a worker thread). */
static void serve(void *ctx, struct sess_srv_conn *base)
{
	struct conn *cn = (struct conn *)base;
	struct broker *b = ctx;
	cn->b = b;
	char session[BROKER_SESSION_MAX], other[BROKER_SESSION_MAX] = "";
	snprintf(session, sizeof(session), "%s", base->sess->id);
	double t0 = broker_mono_ms();
	json_t *rec = json_object();
	if (rec)
		handle(cn, rec, other, sizeof(other));
	sess_srv_conn_hangup(base);
	/* the record after the socket is gone: the client is not kept
	 * waiting for it */
	if (rec && b->cfg.audit) {
		json_object_set_new(
		    rec, "ms",
		    json_real(
			(double)(int64_t)((broker_mono_ms() - t0) * 1000) /
			1000.0));
		b->cfg.audit(b->cfg.ctx, session, rec);
		if (other[0]) {
			/* the session the token was made for hears of it */
			json_object_set_new(rec, "socket_session",
					    json_string(session));
			b->cfg.audit(b->cfg.ctx, other, rec);
		}
	}
	json_decref(rec);
}

static void refuse(void *ctx, int fd, const char *text)
{
	(void)ctx;
	char line[256], pkt[264];
	snprintf(line, sizeof(line), "ERR warren broker: %s\n", text);
	int n = broker_pkt_format(pkt, sizeof(pkt), line, strlen(line));
	if (n > 0 &&
	    send(fd, pkt, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* the client is gone or not reading: nothing to tell */
	}
	close(fd);
}

/* The session expires: its connection's git goes with the socket. */
static void conn_end(void *ctx, struct sess_srv_conn *base)
{
	(void)ctx;
	struct conn *cn = (struct conn *)base;
	if (cn->child > 0)
		kill(-cn->child, SIGKILL);
}

/* The token of s expires (the server's lock held): remembered by its
 * hash, so that a later use is named for what it is. */
static void expire(void *ctx, struct sess_srv_session *base)
{
	struct broker *b = ctx;
	struct broker_session *s = (struct broker_session *)base;
	struct expired_token *e = &b->expired[b->next_expired];
	memcpy(e->hash, s->token_hash, sizeof(e->hash));
	snprintf(e->session, sizeof(e->session), "%s", base->id);
	snprintf(e->why, sizeof(e->why), "%s", base->expired);
	b->next_expired = (b->next_expired + 1) % EXPIRED_MAX;
	if (b->n_expired < EXPIRED_MAX)
		b->n_expired++;
}

static void session_clear(void *ctx, struct sess_srv_session *base)
{
	(void)ctx;
	struct broker_session *s = (struct broker_session *)base;
	free(s->staging);
	broker_remote_clear(&s->remote);
	explicit_bzero(s->token_hash, sizeof(s->token_hash));
}

static const struct sess_srv_ops server_ops = {
    .serve = serve,
    .refuse = refuse,
    .conn_end = conn_end,
    .expire = expire,
    .session_clear = session_clear,
};

/* ---- sessions -------------------------------------------------------------
 */

int broker_session_open(struct broker *b, const char *session_id,
			const char *dir, const struct broker_remote *remote,
			struct wr_error **err)
{
	if (!sess_srv_id_ok(session_id))
		return wr_error_set(err, EINVAL, "broker: bad session id");
	if (!remote || !remote->url)
		return wr_error_set(err, EINVAL, "broker: no remote");
	/* a session open already (its sandbox was not closed): it is
	 * closed first, its token with it */
	broker_session_close(b, session_id);
	struct sess_srv_session *base;
	int r = sess_srv_session_new(b->srv, session_id, dir, &base, err);
	if (r < 0)
		return r;
	struct broker_session *s = (struct broker_session *)base;
	char token[BROKER_TOKEN_MAX + 1];
	s->staging = broker_staging_path(b, session_id);
	if (!s->staging || broker_remote_copy(remote, &s->remote) < 0)
		r = wr_error_set(err, ENOMEM, "broker");
	else if (broker_token_new(token) < 0)
		r = wr_error_set(err, EIO, "broker: token: libsodium");
	if (r < 0) {
		explicit_bzero(token, sizeof(token));
		sess_srv_session_free(b->srv, base);
		return r;
	}
	/* the token itself goes to dir/token only: kept here as its hash */
	broker_token_hash(token, s->token_hash);
	r = sess_srv_session_open(b->srv, base, token, err);
	explicit_bzero(token, sizeof(token));
	return r;
}

void broker_session_close(struct broker *b, const char *session_id)
{
	if (!b || !session_id)
		return;
	bool ended;
	sess_srv_close(b->srv, session_id, "its sandbox stopped", &ended);
	if (ended)
		broker_staging_remove(b, session_id);
}

void broker_session_end(struct broker *b, const char *session_id)
{
	if (!b || !session_id || !sess_srv_id_ok(session_id))
		return;
	/* open: the staging repository goes when the sandbox's record is
	 * closed (its connections may still be finishing) */
	if (!sess_srv_end(b->srv, session_id, "the session ended"))
		broker_staging_remove(b, session_id);
}

/* ---- start and stop -------------------------------------------------------
 */

/* The proc-receive hook of every staging repository: the relay back to
 * the connection's thread, over the descriptor 3 it inherited through
 * receive-pack. */
static int write_hook(struct broker *b, struct wr_error **err)
{
	if (strchr(b->hook_relay, '\'') || strchr(b->hook_relay, '\n'))
		return wr_error_set(err, EINVAL,
				    "broker: %s: a quote in the path",
				    b->hook_relay);
	if (wr_mkdir_p(b->hooks_dir, 0700) < 0)
		return wr_error_set(err, errno, "broker: mkdir %s",
				    b->hooks_dir);
	_cleanup_free_ char *path =
	    wr_asprintf("%s/proc-receive", b->hooks_dir);
	_cleanup_free_ char *text = wr_asprintf(
	    "#!/bin/sh\n"
	    "# The proc-receive hook of the Warren credential broker's "
	    "staging\n"
	    "# repositories (src/security/broker.c): every ref update of a "
	    "push goes\n"
	    "# to the broker, which decides it. Descriptor 3 is the "
	    "broker's end;\n"
	    "# without it the relay fails and git refuses every update.\n"
	    "exec '%s' --fd 3\n",
	    b->hook_relay);
	if (!path || !text)
		return wr_error_set(err, ENOMEM, "broker");
	int r = wr_write_file_atomic(path, text, strlen(text), 0700, false);
	if (r == 0 && chmod(path, 0700) < 0)
		r = -errno;
	if (r < 0)
		return wr_error_set(err, -r, "broker: write %s", path);
	return 0;
}

static void broker_free(struct broker *b)
{
	pthread_mutex_destroy(&b->mu);
	free(b->data_dir);
	free(b->broker_dir);
	free(b->hooks_dir);
	free(b->hook_relay);
	explicit_bzero(b->expired, sizeof(b->expired));
	free(b);
}

int broker_start(const struct broker_config *cfg, struct broker **out,
		 struct wr_error **err)
{
	if (!cfg->data_dir || !cfg->hook_relay)
		return wr_error_set(err, EINVAL,
				    "broker: no data directory or hook relay");
	struct broker *b = wr_calloc(1, sizeof(*b));
	if (!b)
		return wr_error_set(err, ENOMEM, "broker");
	b->cfg = *cfg;
	pthread_mutex_init(&b->mu, NULL);
	b->data_dir = wr_strdup(cfg->data_dir);
	b->broker_dir = wr_asprintf("%s/broker", cfg->data_dir);
	b->hooks_dir = wr_asprintf("%s/broker/.hooks", cfg->data_dir);
	b->hook_relay = wr_strdup(cfg->hook_relay);
	b->cfg.data_dir = b->data_dir;
	b->cfg.hook_relay = b->hook_relay;
	int r = 0;
	if (!b->data_dir || !b->broker_dir || !b->hooks_dir || !b->hook_relay)
		r = wr_error_set(err, ENOMEM, "broker");
	/* staging repositories are caches of the remote: whatever a
	 * previous server left is made again on first use */
	if (r == 0 && wr_rm_rf(b->broker_dir) < 0)
		r = wr_error_set(err, errno, "broker: clean %s", b->broker_dir);
	if (r == 0 && wr_mkdir_p(b->broker_dir, 0700) < 0)
		r = wr_error_set(err, errno, "broker: mkdir %s", b->broker_dir);
	/* the socket directories a previous server left
	 * (DATA/sessions/<id>.broker): no session is open yet, so their
	 * tokens are dead; the files go */
	_cleanup_free_ char *sessions =
	    wr_asprintf("%s/sessions", cfg->data_dir);
	if (r == 0 && sessions)
		sess_srv_remove_stale(sessions, ".broker");
	if (r == 0)
		r = write_hook(b, err);
	if (r == 0) {
		const struct sess_srv_config scfg = {
		    .name = "broker",
		    .socket_name = BROKER_SOCKET_NAME,
		    .token_name = BROKER_TOKEN_NAME,
		    .session_size = sizeof(struct broker_session),
		    .conn_size = sizeof(struct conn),
		    .max_conns =
			cfg->max_conns ? cfg->max_conns : BROKER_CONN_MAX,
		    /* a thread per connection: a push may hold one for
		     * minutes */
		    .spare_workers = 0,
		    .nonblocking = false,
		    .ops = &server_ops,
		    .ctx = b,
		};
		r = sess_srv_start(&scfg, &b->srv, err);
	}
	if (r < 0) {
		broker_free(b);
		return r;
	}
	*out = b;
	return 0;
}

void broker_stop(struct broker *b)
{
	if (!b)
		return;
	/* connections end once their sockets are shut down and their git
	 * killed; one in a host git command within its timeout */
	sess_srv_stop(b->srv, "the server stopped");
	pthread_mutex_lock(&b->mu);
	while (b->locks) {
		struct staging_lock *l = b->locks;
		b->locks = l->next;
		pthread_mutex_destroy(&l->mu);
		free(l);
	}
	pthread_mutex_unlock(&b->mu);
	broker_free(b);
}

/* broker.c - the credential broker's sockets, threads and sessions
 * (broker.h); its host git is broker_git.c.
 *
 * One acceptor thread polls every open session's listening socket (and an
 * eventfd that wakes it when sessions come and go); each accepted
 * connection gets a thread of its own, up to max_conns per session. A
 * connection thread reads the header, checks the token, makes the
 * session's staging repository if it has none, and runs git-upload-pack or
 * git-receive-pack on it with its standard streams relayed to the client.
 * For a push, receive-pack hands every ref update to its proc-receive hook,
 * a relay (warren-git-connect --fd 3) back to this thread over a socket
 * pair the thread made; the thread decides and applies each update there
 * (proc_receive) and answers ok or ng per ref.
 *
 * Lifetimes, as in egress.c: a session is referenced by the registry (until
 * the acceptor has closed its listening socket) and by each of its
 * connections; the last reference frees it. Client sockets are closed and
 * git process groups killed under the lock, so closing a session can end
 * its connections without racing a close and a reuse of the descriptor.
 * Work on a staging repository (making it, refreshing it, updating a ref)
 * holds that session's staging lock, which outlives a sandbox: the records
 * of one session's old and new sandboxes share it. */
#include "security/broker_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define HEADER_TIMEOUT_MS 10000
#define HOOK_TIMEOUT_MS 30000	      /* one packet from the hook */
#define CONN_IDLE_MS (10 * 60 * 1000) /* no byte moved either way */
#define RELAY_BUF (64 * 1024)
#define THREAD_STACK (256 * 1024)

static bool session_id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n >= BROKER_SESSION_MAX || id[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-'))
			return false;
	}
	return true;
}

static void wake(struct broker *b)
{
	uint64_t one = 1;
	if (write(b->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the acceptor wakes anyway */
	}
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
	struct broker_session *s = cn->sess;
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
	struct staging_lock *l = broker_staging_lock(b, s->id);
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
	pthread_mutex_lock(&cn->b->mu);
	cn->child = pid;
	/* a session closed while it started: it ends now */
	if (pid > 0 && cn->sess->expired[0])
		kill(-pid, SIGKILL);
	pthread_mutex_unlock(&cn->b->mu);
}

/* Moves bytes between the client and the git process until git's output
 * has ended and reached the client; serves the proc-receive hook when it
 * calls. Records bytes and how it ended in rec. */
static void relay(struct conn *cn, struct child *ch, int hook_fd, json_t *rec)
{
	struct broker *b = cn->b;
	int client = cn->client_fd;
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
		    {ch->in, up.len > up.off ? POLLOUT : 0, 0},
		    {ch->out, !down.eof && down.len == 0 ? POLLIN : 0, 0},
		    {err_open ? ch->err : -1, POLLIN, 0},
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
		if (up.len > up.off && ch->in >= 0) {
			ssize_t k =
			    write(ch->in, up.buf + up.off, up.len - up.off);
			if (k > 0) {
				up.off += (size_t)k;
				up.bytes += (uint64_t)k;
			} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
				/* git stopped reading: what the client
				 * still sends goes nowhere */
				broker_close_fd(&ch->in);
			}
		}
		if (ch->in < 0 || up.off == up.len)
			up.len = up.off = 0;
		if (up.eof && up.len == 0 && ch->in >= 0)
			broker_close_fd(&ch->in);
		/* git -> client */
		if (p[2].revents && !down.eof && down.len == 0) {
			ssize_t k = read(ch->out, down.buf, RELAY_BUF);
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
			ssize_t k = read(ch->err, chunk, sizeof(chunk));
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
		kill(-ch->pid, SIGKILL);
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

/* The token's verdict (b->mu held): NULL if it is the session's live
 * token, else why not; *other names the session it belonged to, if
 * another. */
static const char *token_verdict(struct broker *b, struct broker_session *s,
				 const unsigned char *h, char *why, size_t size,
				 char *other, size_t other_size)
{
	other[0] = '\0';
	if (broker_token_hash_equal(h, s->token_hash)) {
		if (!s->expired[0])
			return NULL;
		snprintf(why, size, "token expired (%s)", s->expired);
		return why;
	}
	for (size_t i = 0; i < b->n_expired; i++) {
		const struct expired_token *e = &b->expired[i];
		if (!broker_token_hash_equal(h, e->hash))
			continue;
		if (strcmp(e->session, s->id)) {
			snprintf(other, other_size, "%s", e->session);
			snprintf(why, size,
				 "a token of session %s, expired (%s)",
				 e->session, e->why);
		} else {
			snprintf(why, size, "token expired (%s)", e->why);
		}
		return why;
	}
	for (struct broker_session *o = b->sessions; o; o = o->next)
		if (o != s && broker_token_hash_equal(h, o->token_hash)) {
			snprintf(other, other_size, "%s", o->id);
			snprintf(why, size,
				 "a token of another session (%s): a token "
				 "works only on its own session's socket",
				 o->id);
			return why;
		}
	snprintf(why, size, "unknown token");
	return why;
}

static void handle(struct conn *cn, json_t *rec, char *other, size_t other_size)
{
	struct broker *b = cn->b;
	struct broker_session *s = cn->sess;
	int fd = cn->client_fd;
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
	pthread_mutex_lock(&b->mu);
	const char *refused =
	    token_verdict(b, s, h, why, sizeof(why), other, other_size);
	pthread_mutex_unlock(&b->mu);
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
	struct staging_lock *l = broker_staging_lock(b, s->id);
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
	struct child ch;
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

/* Drops a reference to s (b->mu held); the last one frees it. */
static void session_unref(struct broker_session *s)
{
	if (--s->refs > 0)
		return;
	free(s->dir);
	free(s->sock_path);
	free(s->token_path);
	free(s->staging);
	broker_remote_clear(&s->remote);
	explicit_bzero(s->token_hash, sizeof(s->token_hash));
	free(s);
}

static void *conn_main(void *arg)
{
	struct conn *cn = arg;
	struct broker *b = cn->b;
	char session[BROKER_SESSION_MAX], other[BROKER_SESSION_MAX] = "";
	snprintf(session, sizeof(session), "%s", cn->sess->id);
	double t0 = broker_mono_ms();
	json_t *rec = json_object();
	if (rec)
		handle(cn, rec, other, sizeof(other));
	pthread_mutex_lock(&b->mu);
	close(cn->client_fd);
	cn->client_fd = -1;
	pthread_mutex_unlock(&b->mu);
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
	pthread_mutex_lock(&b->mu);
	struct broker_session *s = cn->sess;
	if (cn->prev)
		cn->prev->next = cn->next;
	else
		s->conns = cn->next;
	if (cn->next)
		cn->next->prev = cn->prev;
	s->active--;
	session_unref(s);
	if (--b->conns_total == 0)
		pthread_cond_broadcast(&b->idle_cv);
	pthread_mutex_unlock(&b->mu);
	free(cn);
	return NULL;
}

/* ---- the acceptor ---------------------------------------------------------
 */

static void refuse(int fd, const char *text)
{
	char line[256], pkt[264];
	snprintf(line, sizeof(line), "ERR warren broker: %s\n", text);
	int n = broker_pkt_format(pkt, sizeof(pkt), line, strlen(line));
	if (n > 0 &&
	    send(fd, pkt, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* the client is gone or not reading: nothing to tell */
	}
	close(fd);
}

/* Accepts what s's listener has (b->mu held). */
static void accept_all(struct broker *b, struct broker_session *s)
{
	unsigned max = b->cfg.max_conns ? b->cfg.max_conns : BROKER_CONN_MAX;
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return; /* EAGAIN: all taken */
		if (s->closed) {
			close(fd);
			continue;
		}
		if (s->active >= max) {
			refuse(fd, "too many connections for this session");
			continue;
		}
		struct conn *cn = wr_calloc(1, sizeof(*cn));
		if (!cn) {
			refuse(fd, "out of memory");
			continue;
		}
		cn->b = b;
		cn->sess = s;
		cn->client_fd = fd;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, THREAD_STACK);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_t t;
		s->refs++;
		s->active++;
		b->conns_total++;
		cn->next = s->conns;
		if (s->conns)
			s->conns->prev = cn;
		s->conns = cn;
		int e = pthread_create(&t, &attr, conn_main, cn);
		pthread_attr_destroy(&attr);
		if (e) {
			s->conns = cn->next;
			if (s->conns)
				s->conns->prev = NULL;
			s->refs--;
			s->active--;
			b->conns_total--;
			free(cn);
			refuse(fd, "cannot start a connection thread");
		}
	}
}

/* Closes the listeners of closed sessions (b->mu held). */
static void reap_closing(struct broker *b)
{
	while (b->closing) {
		struct broker_session *s = b->closing;
		b->closing = s->next;
		if (s->listen_fd >= 0)
			close(s->listen_fd);
		s->listen_fd = -1;
		session_unref(s);
	}
}

static void *acceptor_main(void *arg)
{
	struct broker *b = arg;
	struct pollfd *pfd = NULL;
	struct broker_session **owner = NULL;
	size_t cap = 0;
	pthread_mutex_lock(&b->mu);
	while (!b->stopping) {
		reap_closing(b);
		size_t n = 1;
		for (struct broker_session *s = b->sessions; s; s = s->next)
			n++;
		if (n > cap) {
			struct pollfd *p = wr_realloc(pfd, n * sizeof(*p));
			if (p)
				pfd = p;
			struct broker_session **o =
			    wr_realloc(owner, n * sizeof(*o));
			if (o)
				owner = o;
			if (!p || !o) {
				/* try again in a moment */
				pthread_mutex_unlock(&b->mu);
				usleep(100 * 1000);
				pthread_mutex_lock(&b->mu);
				continue;
			}
			cap = n;
		}
		pfd[0] = (struct pollfd){b->wake_fd, POLLIN, 0};
		size_t k = 1;
		for (struct broker_session *s = b->sessions; s; s = s->next) {
			pfd[k] = (struct pollfd){s->listen_fd, POLLIN, 0};
			owner[k++] = s;
		}
		/* the listeners stay open while we poll: only this thread
		 * closes them (reap_closing) */
		pthread_mutex_unlock(&b->mu);
		int r = poll(pfd, (nfds_t)k, -1);
		pthread_mutex_lock(&b->mu);
		if (r < 0)
			continue;
		if (pfd[0].revents & POLLIN) {
			uint64_t v;
			if (read(b->wake_fd, &v, sizeof(v)) < 0) {
				/* nothing pending */
			}
		}
		for (size_t i = 1; i < k; i++)
			if (pfd[i].revents & POLLIN)
				accept_all(b, owner[i]);
	}
	reap_closing(b);
	pthread_mutex_unlock(&b->mu);
	free(pfd);
	free(owner);
	return NULL;
}

/* ---- sessions -------------------------------------------------------------
 */

/* Binds a listening unix socket at dir/broker.sock through the directory's
 * descriptor: /proc/self/fd/N/broker.sock fits sun_path however long the
 * data directory's path is. */
static int listen_at(int dir_fd, const char *dir, struct wr_error **err)
{
	if (unlinkat(dir_fd, BROKER_SOCKET_NAME, 0) < 0 && errno != ENOENT)
		return wr_error_set(err, errno, "broker: remove %s/%s", dir,
				    BROKER_SOCKET_NAME);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return wr_error_set(err, errno, "broker: socket");
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	snprintf(sun.sun_path, sizeof(sun.sun_path), "/proc/self/fd/%d/%s",
		 dir_fd, BROKER_SOCKET_NAME);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    fchmodat(dir_fd, BROKER_SOCKET_NAME, 0666, 0) < 0 ||
	    listen(fd, SOMAXCONN) < 0) {
		int e = errno;
		close(fd);
		return wr_error_set(err, e, "broker: listen on %s/%s", dir,
				    BROKER_SOCKET_NAME);
	}
	return fd;
}

/* Writes a new token into dir/token (0644: read by the sandbox through
 * the bind mount) and its hash into hash. */
static int token_write(int dir_fd, const char *dir, unsigned char *hash,
		       struct wr_error **err)
{
	char token[BROKER_TOKEN_MAX + 1];
	if (broker_token_new(token) < 0)
		return wr_error_set(err, EIO, "broker: token: libsodium");
	broker_token_hash(token, hash);
	static const char tmp[] = BROKER_TOKEN_NAME ".tmp";
	unlinkat(dir_fd, tmp, 0);
	int fd =
	    openat(dir_fd, tmp,
		   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int r = 0;
	size_t len = strlen(token);
	if (fd < 0 || fchmod(fd, 0644) < 0 ||
	    write(fd, token, len) != (ssize_t)len ||
	    renameat(dir_fd, tmp, dir_fd, BROKER_TOKEN_NAME) < 0)
		r = wr_error_set(err, errno, "broker: write %s/%s", dir,
				 BROKER_TOKEN_NAME);
	if (fd >= 0)
		close(fd);
	if (r < 0)
		unlinkat(dir_fd, tmp, 0);
	explicit_bzero(token, sizeof(token));
	return r;
}

/* The token of s expires (b->mu held): remembered by its hash, so that a
 * later use is named for what it is; the session's connections end. */
static void expire_locked(struct broker *b, struct broker_session *s,
			  const char *why)
{
	if (s->expired[0])
		return;
	snprintf(s->expired, sizeof(s->expired), "%s", why);
	struct expired_token *e = &b->expired[b->next_expired];
	memcpy(e->hash, s->token_hash, sizeof(e->hash));
	snprintf(e->session, sizeof(e->session), "%s", s->id);
	snprintf(e->why, sizeof(e->why), "%s", why);
	b->next_expired = (b->next_expired + 1) % EXPIRED_MAX;
	if (b->n_expired < EXPIRED_MAX)
		b->n_expired++;
	for (struct conn *cn = s->conns; cn; cn = cn->next) {
		if (cn->client_fd >= 0)
			shutdown(cn->client_fd, SHUT_RDWR);
		if (cn->child > 0)
			kill(-cn->child, SIGKILL);
	}
}

static struct broker_session **find(struct broker *b, const char *id)
{
	struct broker_session **pp = &b->sessions;
	while (*pp && strcmp((*pp)->id, id))
		pp = &(*pp)->next;
	return pp;
}

int broker_session_open(struct broker *b, const char *session_id,
			const char *dir, const struct broker_remote *remote,
			struct wr_error **err)
{
	if (!session_id_ok(session_id))
		return wr_error_set(err, EINVAL, "broker: bad session id");
	if (!remote || !remote->url)
		return wr_error_set(err, EINVAL, "broker: no remote");
	/* a session open already (its sandbox was not closed): it is
	 * closed first, its token with it */
	broker_session_close(b, session_id);
	/* 0711: the sandbox's processes (an unmapped uid, "others" here)
	 * may pass through to the socket and the token, not list; the
	 * socket is 0666 since connect(2) needs write permission. Nobody
	 * else on the host gets this far: DATA/sessions is 0700. */
	if (mkdir(dir, 0711) < 0 && errno != EEXIST)
		return wr_error_set(err, errno, "broker: mkdir %s", dir);
	_cleanup_close_ int dir_fd =
	    open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir_fd < 0)
		return wr_error_set(err, errno, "broker: open %s", dir);
	if (fchmod(dir_fd, 0711) < 0)
		return wr_error_set(err, errno, "broker: chmod %s", dir);
	struct broker_session *s = wr_calloc(1, sizeof(*s));
	if (!s)
		return wr_error_set(err, ENOMEM, "broker");
	s->listen_fd = -1;
	snprintf(s->id, sizeof(s->id), "%s", session_id);
	s->dir = wr_strdup(dir);
	s->sock_path = wr_asprintf("%s/%s", dir, BROKER_SOCKET_NAME);
	s->token_path = wr_asprintf("%s/%s", dir, BROKER_TOKEN_NAME);
	s->staging = broker_staging_path(b, session_id);
	s->refs = 1;
	int r = 0;
	if (!s->dir || !s->sock_path || !s->token_path || !s->staging ||
	    broker_remote_copy(remote, &s->remote) < 0)
		r = wr_error_set(err, ENOMEM, "broker");
	if (r == 0)
		r = token_write(dir_fd, dir, s->token_hash, err);
	if (r == 0) {
		s->listen_fd = listen_at(dir_fd, dir, err);
		if (s->listen_fd < 0)
			r = s->listen_fd;
	}
	if (r < 0) {
		unlinkat(dir_fd, BROKER_TOKEN_NAME, 0);
		if (s->listen_fd >= 0)
			close(s->listen_fd);
		session_unref(s);
		return r;
	}
	pthread_mutex_lock(&b->mu);
	s->next = b->sessions;
	b->sessions = s;
	wake(b);
	pthread_mutex_unlock(&b->mu);
	return 0;
}

/* Takes s out of the open list (b->mu held): its token expires, its
 * listener goes with the acceptor's next turn. */
static void detach_locked(struct broker *b, struct broker_session **pp,
			  const char *why)
{
	struct broker_session *s = *pp;
	*pp = s->next;
	expire_locked(b, s, why);
	s->closed = true;
	s->next = b->closing;
	b->closing = s;
	wake(b);
}

void broker_session_close(struct broker *b, const char *session_id)
{
	if (!b || !session_id)
		return;
	pthread_mutex_lock(&b->mu);
	struct broker_session **pp = find(b, session_id);
	struct broker_session *s = *pp;
	char *dir = NULL, *sock = NULL, *token = NULL;
	bool ended = false;
	if (s) {
		dir = wr_strdup(s->dir);
		sock = wr_strdup(s->sock_path);
		token = wr_strdup(s->token_path);
		ended = s->ended;
		detach_locked(b, pp, "its sandbox stopped");
	}
	pthread_mutex_unlock(&b->mu);
	/* the paths go now; the listener with the acceptor's next turn */
	if (sock)
		unlink(sock);
	if (token)
		unlink(token);
	if (dir)
		rmdir(dir);
	free(sock);
	free(token);
	free(dir);
	if (ended)
		broker_staging_remove(b, session_id);
}

void broker_session_end(struct broker *b, const char *session_id)
{
	if (!b || !session_id || !session_id_ok(session_id))
		return;
	pthread_mutex_lock(&b->mu);
	struct broker_session *s = *find(b, session_id);
	if (s) {
		expire_locked(b, s, "the session ended");
		s->ended = true;
	}
	pthread_mutex_unlock(&b->mu);
	/* open: the staging repository goes when the sandbox's record is
	 * closed (its connections may still be finishing) */
	if (!s)
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

/* The socket directories a previous server left (DATA/sessions/<id>.broker):
 * no session is open yet, so their tokens are dead; the files go. */
static void remove_stale_sessions(struct broker *b)
{
	_cleanup_free_ char *sessions = wr_asprintf("%s/sessions", b->data_dir);
	DIR *d = sessions ? opendir(sessions) : NULL;
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (e->d_name[0] == '.' || n <= 7 ||
		    strcmp(e->d_name + n - 7, ".broker"))
			continue;
		_cleanup_free_ char *path =
		    wr_asprintf("%s/%s", sessions, e->d_name);
		if (path)
			wr_rm_rf(path);
	}
	closedir(d);
}

static void broker_free(struct broker *b)
{
	if (b->wake_fd >= 0)
		close(b->wake_fd);
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->idle_cv);
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
	b->wake_fd = -1;
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->idle_cv, NULL);
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
	if (r == 0)
		remove_stale_sessions(b);
	if (r == 0)
		r = write_hook(b, err);
	if (r == 0) {
		b->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (b->wake_fd < 0)
			r = wr_error_set(err, errno, "broker: eventfd");
	}
	if (r == 0) {
		int e = pthread_create(&b->acceptor, NULL, acceptor_main, b);
		if (e)
			r = wr_error_set(err, e, "broker: thread");
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
	pthread_mutex_lock(&b->mu);
	while (b->sessions) {
		struct broker_session *s = b->sessions;
		if (s->sock_path)
			unlink(s->sock_path);
		if (s->token_path)
			unlink(s->token_path);
		if (s->dir)
			rmdir(s->dir);
		detach_locked(b, &b->sessions, "the server stopped");
	}
	b->stopping = true;
	wake(b);
	pthread_mutex_unlock(&b->mu);
	pthread_join(b->acceptor, NULL);
	/* connection threads end once their sockets are shut down and
	 * their git killed; one in a host git command within its timeout */
	pthread_mutex_lock(&b->mu);
	while (b->conns_total > 0)
		pthread_cond_wait(&b->idle_cv, &b->mu);
	while (b->locks) {
		struct staging_lock *l = b->locks;
		b->locks = l->next;
		pthread_mutex_destroy(&l->mu);
		free(l);
	}
	pthread_mutex_unlock(&b->mu);
	broker_free(b);
}

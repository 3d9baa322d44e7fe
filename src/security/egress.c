/* egress.c - the egress proxy's connections (egress.h), over the session
 * server (session_server.c: the sockets, the acceptor and the workers).
 *
 * Each accepted connection gets a thread of its own while it lasts, up to
 * max_conns per session: a worker that was waiting for one (up to
 * SPARE_WORKERS wait), else a new one. A connection's thread reads the
 * request head, asks the policy callback for the session's allowlist,
 * resolves and checks, connects, and relays with poll(2) over two
 * non-blocking sockets until both directions are done.
 *
 * The relay in the sandbox (src/init/relay.c) does not copy bytes: it
 * passes each accepted TCP connection over its unix connection (one byte,
 * 0, with the socket attached; no request head starts with it) and lets
 * go once the proxy hangs up that connection. The connection's thread takes
 * that socket as its client (a connected TCP socket, or the connection is
 * refused) and closes the unix one: the head is read from the client's socket
 * and the relay splices to and from it directly, one hop and one copy less.
 * Anything else on the unix socket is the request itself, as a relay that
 * copies sends it.
 *
 * Lifetimes are the session server's. A connection's sockets, the client's
 * and the upstream one, are replaced and closed under the server's lock,
 * so egress_session_close() can shut them down (waking their threads)
 * without racing a close and a reuse of the descriptor. */
#include "security/egress.h"

#include "security/session_server.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fdpass.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HEAD_TIMEOUT_MS 30000
#define REPLY_TIMEOUT_MS 5000
#define CONNECT_TIMEOUT_MS 10000
#define RELAY_BUF (64 * 1024)
#define MAX_ADDRS 16
#define OWN_ADDRS_MAX 64
#define OWN_REFRESH_MS 5000
/* Threads kept waiting for the next connection: a connection handed to
 * one starts at once, where a new thread would first be created (about
 * 30 us here) and fault in its stack. */
#define SPARE_WORKERS 8
#define AUDIT_QUEUE_MAX 4096

/* One connection: the session server's, and the upstream socket. */
struct conn {
	struct sess_srv_conn base; /* first: the server allocates it */
	struct egress *eg;
	int upstream_fd; /* closed under the server's lock */
};

_Static_assert(offsetof(struct conn, base) == 0,
	       "the session server's part comes first");
_Static_assert(EGRESS_SESSION_MAX == SESS_SRV_ID_MAX,
	       "a session id is the session server's");

/* A decision waiting for the audit thread. */
struct audit_item {
	struct audit_item *next;
	char session[EGRESS_SESSION_MAX];
	json_t *details;
};

struct egress {
	struct egress_config cfg;
	struct egress_rules *rules;
	/* the sockets, connections and their workers */
	struct sess_srv *srv;
	/* decisions to record, in order (audit_mu): a connection hands its
	 * record over and is done; the audit thread writes them. A full
	 * queue makes connections wait, holding their session's slot. */
	pthread_mutex_t audit_mu;
	pthread_cond_t audit_cv, audit_space_cv;
	struct audit_item *audit_head, *audit_tail;
	size_t audit_len;
	bool audit_stop, audit_started;
	pthread_t audit_thread;
	/* this host's addresses, refreshed now and then (own_mu) */
	pthread_mutex_t own_mu;
	struct sockaddr_storage own[OWN_ADDRS_MAX];
	size_t n_own;
	double own_at_ms;
};

static double mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

void egress_strv_free(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* ---- this host's addresses ------------------------------------------------
 */

static size_t own_addresses(struct egress *eg, struct sockaddr_storage *out)
{
	pthread_mutex_lock(&eg->own_mu);
	double now = mono_ms();
	if (eg->own_at_ms == 0 || now - eg->own_at_ms > OWN_REFRESH_MS) {
		struct ifaddrs *ifa = NULL;
		if (getifaddrs(&ifa) == 0) {
			size_t n = 0;
			for (struct ifaddrs *i = ifa; i && n < OWN_ADDRS_MAX;
			     i = i->ifa_next) {
				if (!i->ifa_addr)
					continue;
				int fam = i->ifa_addr->sa_family;
				if (fam != AF_INET && fam != AF_INET6)
					continue;
				memset(&eg->own[n], 0, sizeof(eg->own[n]));
				memcpy(&eg->own[n], i->ifa_addr,
				       fam == AF_INET
					   ? sizeof(struct sockaddr_in)
					   : sizeof(struct sockaddr_in6));
				n++;
			}
			eg->n_own = n;
			freeifaddrs(ifa);
		}
		eg->own_at_ms = now;
	}
	size_t n = eg->n_own;
	memcpy(out, eg->own, n * sizeof(*out));
	pthread_mutex_unlock(&eg->own_mu);
	return n;
}

/* ---- socket helpers --------------------------------------------------------
 */

/* Writes all of data to a non-blocking socket within timeout_ms. */
static int send_all(int fd, const char *data, size_t len, int timeout_ms)
{
	double until = mono_ms() + timeout_ms;
	while (len > 0) {
		ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
		if (n > 0) {
			data += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		int left = (int)(until - mono_ms());
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {fd, POLLOUT, 0};
		if (poll(&p, 1, left) < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

static const char *status_text(int code)
{
	switch (code) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 431: return "Request Header Fields Too Large";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Error";
	}
}

/* An answer of the proxy's own, then the end of the connection: half
 * close, and read what the client still sends for a moment, so that
 * closing with unread data (a reset) does not destroy the answer. */
static void reply(int fd, int code, const char *body)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; "
			 "charset=utf-8\r\nContent-Length: %zu\r\nConnection: "
			 "close\r\nX-Warren-Egress: %s\r\n\r\n",
			 code, status_text(code), strlen(body),
			 code == 403 ? "denied" : "error");
	if (send_all(fd, head, (size_t)n, REPLY_TIMEOUT_MS) < 0 ||
	    send_all(fd, body, strlen(body), REPLY_TIMEOUT_MS) < 0)
		return;
	shutdown(fd, SHUT_WR);
	char sink[4096];
	double until = mono_ms() + 200;
	size_t drained = 0;
	while (drained < 256 * 1024) {
		int left = (int)(until - mono_ms());
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, left) <= 0)
			break;
		ssize_t r = recv(fd, sink, sizeof(sink), 0);
		if (r <= 0)
			break;
		drained += (size_t)r;
	}
}

/* ---- one connection --------------------------------------------------------
 */

struct outcome {
	const char *decision; /* "allowed", "denied", "failed" */
	const char *kind;
	char method[24];
	char host[EGRESS_HOST_MAX + 1];
	uint16_t port;
	char address[INET6_ADDRSTRLEN];
	char reason[160];
	uint64_t bytes_up, bytes_down;
};

static void addr_text(const struct sockaddr_storage *ss, char *out, size_t size)
{
	const void *a =
	    ss->ss_family == AF_INET
		? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
		: (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
	if (!inet_ntop(ss->ss_family, a, out, (socklen_t)size))
		snprintf(out, size, "?");
}

/* Publishes the upstream socket (so a session close can shut it down);
 * false if the session is closing. */
static bool set_upstream(struct conn *cn, int fd)
{
	struct egress *eg = cn->eg;
	sess_srv_lock(eg->srv);
	bool closed = cn->base.sess->closed;
	if (!closed)
		cn->upstream_fd = fd;
	sess_srv_unlock(eg->srv);
	return !closed;
}

static void drop_upstream(struct conn *cn)
{
	struct egress *eg = cn->eg;
	sess_srv_lock(eg->srv);
	if (cn->upstream_fd >= 0)
		close(cn->upstream_fd);
	cn->upstream_fd = -1;
	sess_srv_unlock(eg->srv);
}

/* Connects to one address within the timeout: 0, or -errno. */
static int connect_one(struct conn *cn, const struct sockaddr_storage *ss,
		       unsigned timeout_ms)
{
	int fd = socket(ss->ss_family,
			SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (!set_upstream(cn, fd)) {
		close(fd);
		return -ECANCELED;
	}
	socklen_t len = ss->ss_family == AF_INET ? sizeof(struct sockaddr_in)
						 : sizeof(struct sockaddr_in6);
	int r = 0;
	if (connect(fd, (const struct sockaddr *)ss, len) < 0) {
		if (errno != EINPROGRESS) {
			r = -errno;
		} else {
			struct pollfd p = {fd, POLLOUT, 0};
			int pr;
			do {
				pr = poll(&p, 1, (int)timeout_ms);
			} while (pr < 0 && errno == EINTR);
			int soerr = 0;
			socklen_t sl = sizeof(soerr);
			if (pr == 0)
				r = -ETIMEDOUT;
			else if (pr < 0)
				r = -errno;
			else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr,
					    &sl) < 0)
				r = -errno;
			else if (soerr)
				r = -soerr;
		}
	}
	if (r < 0) {
		drop_upstream(cn);
		return r;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

struct pipe_dir {
	int from, to;
	char *buf;
	size_t len, off;
	bool eof;  /* from has no more */
	bool done; /* eof and all of it written, to half-closed */
	uint64_t bytes;
};

/* One direction through a pipe with splice(2): the bytes never come up
 * to user space (a 1 MiB body costs a fraction of recv+send). */
struct splice_dir {
	int from, to;
	int pipe[2];
	size_t queued; /* bytes in the pipe */
	size_t cap;    /* the pipe's capacity */
	bool eof, done;
	uint64_t bytes;
};

#define PIPE_CAP (64 * 1024) /* a pipe's default capacity */

/* One turn of one direction; false when the relay must end. */
static bool splice_turn(struct splice_dir *x)
{
	if (!x->eof && x->queued < x->cap) {
		ssize_t n =
		    splice(x->from, NULL, x->pipe[1], NULL, x->cap - x->queued,
			   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0)
			x->queued += (size_t)n;
		else if (n == 0)
			x->eof = true;
		else if (errno != EAGAIN && errno != EINTR)
			return false;
	}
	while (x->queued > 0) {
		ssize_t n = splice(x->pipe[0], NULL, x->to, NULL, x->queued,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0) {
			x->queued -= (size_t)n;
			x->bytes += (uint64_t)n;
		} else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			break;
		} else {
			return false;
		}
	}
	if (x->eof && x->queued == 0 && !x->done) {
		shutdown(x->to, SHUT_WR);
		x->done = true;
	}
	return true;
}

/* The relay with splice; -EMFILE (and others) before any byte moved if
 * the pipes cannot be had, and the caller copies instead. */
static int relay_splice(int client, int upstream, struct outcome *o)
{
	struct splice_dir d[2] = {
	    {.from = client, .to = upstream, .pipe = {-1, -1}},
	    {.from = upstream, .to = client, .pipe = {-1, -1}},
	};
	int r = 0;
	if (pipe2(d[0].pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    pipe2(d[1].pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		r = -errno;
		goto out;
	}
	/* the default capacity, 64 KiB: larger pipes were slower for a
	 * 1 MiB body (each hop forwards later), bench/egress.sh */
	d[0].cap = d[1].cap = PIPE_CAP;
	while (!d[0].done || !d[1].done) {
		struct pollfd p[2] = {{client, 0, 0}, {upstream, 0, 0}};
		for (int i = 0; i < 2; i++) {
			if (!d[i].eof && d[i].queued < d[i].cap)
				p[i].events |= POLLIN;
			if (d[i].queued > 0)
				p[1 - i].events |= POLLOUT;
		}
		for (int i = 0; i < 2; i++)
			if (!p[i].events)
				p[i].fd = -1; /* see relay() */
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (!splice_turn(&d[0]) || !splice_turn(&d[1]))
			break;
	}
	o->bytes_up = d[0].bytes;
	o->bytes_down = d[1].bytes;
out:
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 2; k++)
			if (d[i].pipe[k] >= 0)
				close(d[i].pipe[k]);
	return r;
}

/* Moves bytes both ways until both directions are done or one side
 * fails. Both sockets are non-blocking. */
static void relay(int client, int upstream, struct outcome *o)
{
	if (relay_splice(client, upstream, o) == 0)
		return;
	/* no descriptors for pipes: copy through user space */
	_cleanup_free_ char *up_buf = wr_malloc(RELAY_BUF);
	_cleanup_free_ char *down_buf = wr_malloc(RELAY_BUF);
	if (!up_buf || !down_buf)
		return;
	struct pipe_dir d[2] = {
	    {.from = client, .to = upstream, .buf = up_buf},
	    {.from = upstream, .to = client, .buf = down_buf},
	};
	while (!d[0].done || !d[1].done) {
		struct pollfd p[2] = {{client, 0, 0}, {upstream, 0, 0}};
		for (int i = 0; i < 2; i++) {
			if (!d[i].eof && d[i].len == 0)
				p[i].events |= POLLIN;
			if (d[i].len > d[i].off)
				p[1 - i].events |= POLLOUT;
		}
		/* a socket we want nothing from is left out: a peer that
		 * hung up would otherwise report POLLHUP on every turn */
		for (int i = 0; i < 2; i++)
			if (!p[i].events)
				p[i].fd = -1;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		bool failed = false;
		for (int i = 0; i < 2 && !failed; i++) {
			struct pipe_dir *x = &d[i];
			if (!x->eof && x->len == 0) {
				ssize_t n = recv(x->from, x->buf, RELAY_BUF, 0);
				if (n > 0) {
					x->len = (size_t)n;
					x->off = 0;
				} else if (n == 0) {
					x->eof = true;
				} else if (errno != EAGAIN && errno != EINTR) {
					failed = true;
				}
			}
			while (!failed && x->off < x->len) {
				ssize_t n = send(x->to, x->buf + x->off,
						 x->len - x->off, MSG_NOSIGNAL);
				if (n > 0) {
					x->off += (size_t)n;
					x->bytes += (uint64_t)n;
				} else if (n < 0 && (errno == EAGAIN ||
						     errno == EINTR)) {
					break;
				} else {
					failed = true;
				}
			}
			if (x->off == x->len)
				x->len = x->off = 0;
			if (!failed && x->eof && x->len == 0 && !x->done) {
				shutdown(x->to, SHUT_WR);
				x->done = true;
			}
		}
		if (failed)
			break;
	}
	o->bytes_up = d[0].bytes;
	o->bytes_down = d[1].bytes;
}

/* Is fd a connected TCP socket (what the relay passes)? */
/* The first bytes on a new connection: either the relay passes the
 * client's socket, which becomes cn's client_fd (the unix one is closed),
 * or they start the request head (buf, *len). 0, or -errno with *why
 * (-EBADMSG: answer the client). */
static int first_read(struct conn *cn, char *buf, size_t cap, size_t *len,
		      const char **why)
{
	int fd = cn->base.client_fd;
	double until = mono_ms() + HEAD_TIMEOUT_MS;
	int r;
	for (;;) {
		int left = (int)(until - mono_ms());
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, left) == 0) {
			*why = "no request within 30 s";
			return -ETIMEDOUT;
		}
		r = sess_srv_take_passed(fd, buf, cap, len);
		if (r != SESS_SRV_TAKE_AGAIN)
			break;
	}
	switch (r) {
	case SESS_SRV_TAKE_BYTES: return 0;
	case SESS_SRV_TAKE_CLOSED: *why = "closed before a request"; return -ECONNRESET;
	case SESS_SRV_TAKE_FAILED: *why = "read failed"; return -EIO;
	case SESS_SRV_TAKE_BAD:
		*why = "neither a request nor a connection passed by the "
		       "relay";
		return -EBADMSG;
	default: break;
	}
	struct egress *eg = cn->eg;
	sess_srv_lock(eg->srv);
	bool closed = cn->base.sess->closed;
	if (!closed) {
		close(cn->base.client_fd);
		cn->base.client_fd = r;
	}
	sess_srv_unlock(eg->srv);
	if (closed) {
		close(r);
		*why = "the session is closing";
		return -ECANCELED;
	}
	*len = 0;
	return 0;
}

/* Reads the request head: its length (> 0), or -errno / -EBADMSG... with
 * *why for the client. */
static int read_head(int fd, char *buf, size_t cap, size_t *len,
		     struct egress_request *req, const char **why)
{
	double until = mono_ms() + HEAD_TIMEOUT_MS;
	for (;;) {
		int r = egress_parse_head(buf, *len, req, why);
		if (r != 0)
			return r;
		if (*len >= cap) {
			*why = "request head larger than 16 KiB";
			return -E2BIG;
		}
		int left = (int)(until - mono_ms());
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, left) == 0) {
			*why = "no request within 30 s";
			return -ETIMEDOUT;
		}
		ssize_t n = recv(fd, buf + *len, cap - *len, 0);
		if (n == 0) {
			*why = "closed before a request";
			return -ECONNRESET;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			*why = "read failed";
			return -errno;
		}
		if (n > 0)
			*len += (size_t)n;
	}
}

/* Resolves host (static table, or getaddrinfo; an IP literal as it is):
 * the number of addresses, or -1 with *why. */
static int resolve(struct egress *eg, const struct egress_request *req,
		   struct sockaddr_storage *out, const char **why)
{
	size_t n = egress_rules_lookup(eg->rules, req->host, req->port, out,
				       MAX_ADDRS);
	if (n > 0)
		return (int)n;
	struct addrinfo hints = {.ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = req->ip_literal ? AI_NUMERICHOST
							     : AI_ADDRCONFIG};
	struct addrinfo *res = NULL;
	char port[8];
	snprintf(port, sizeof(port), "%u", (unsigned)req->port);
	int e = getaddrinfo(req->host, port, &hints, &res);
	if (e) {
		*why = e == EAI_SYSTEM ? strerror(errno) : gai_strerror(e);
		return -1;
	}
	for (struct addrinfo *ai = res; ai && n < MAX_ADDRS; ai = ai->ai_next) {
		if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
		    ai->ai_addrlen > sizeof(out[n]))
			continue;
		memset(&out[n], 0, sizeof(out[n]));
		memcpy(&out[n], ai->ai_addr, ai->ai_addrlen);
		n++;
	}
	freeaddrinfo(res);
	if (n == 0) {
		*why = "no IPv4 or IPv6 address";
		return -1;
	}
	return (int)n;
}

static void handle(struct conn *cn, struct outcome *o)
{
	struct egress *eg = cn->eg;
	const char *sid = cn->base.sess->id;
	char body[768];
	const char *why = "";
	_cleanup_free_ char *buf = wr_malloc(EGRESS_HEAD_MAX);
	if (!buf) {
		o->decision = "failed";
		snprintf(o->reason, sizeof(o->reason), "out of memory");
		reply(cn->base.client_fd, 503,
		      "warren egress: out of memory\n");
		return;
	}
	size_t len = 0;
	struct egress_request req;
	/* the relay's client socket, or the request's first bytes */
	int r = first_read(cn, buf, EGRESS_HEAD_MAX, &len, &why);
	int fd = cn->base.client_fd;
	if (r == 0)
		r = read_head(fd, buf, EGRESS_HEAD_MAX, &len, &req, &why);
	if (r < 0) {
		o->decision = "denied";
		snprintf(o->reason, sizeof(o->reason), "bad request: %s", why);
		if (r == -EBADMSG || r == -EPROTONOSUPPORT || r == -E2BIG) {
			snprintf(body, sizeof(body),
				 "warren egress: bad request: %s\n", why);
			reply(fd, r == -E2BIG ? 431 : 400, body);
		}
		return;
	}
	o->kind = req.kind == EGRESS_CONNECT ? "connect" : "http";
	snprintf(o->method, sizeof(o->method), "%s", req.method);
	snprintf(o->host, sizeof(o->host), "%s", req.host);
	o->port = req.port;
	bool v6 = strchr(req.host, ':') != NULL;
	char target[EGRESS_HOST_MAX + 16];
	snprintf(target, sizeof(target), "%s%s%s:%u", v6 ? "[" : "", req.host,
		 v6 ? "]" : "", (unsigned)req.port);

	/* 1. the session's allowlist, as it is now */
	char **allow = NULL;
	size_t n_allow = 0;
	r = eg->cfg.policy(eg->cfg.ctx, sid, &allow, &n_allow);
	if (r < 0) {
		o->decision = "denied";
		snprintf(o->reason, sizeof(o->reason),
			 "no egress policy for the session");
		snprintf(body, sizeof(body),
			 "warren egress: %s is not allowed for session %s (no "
			 "egress policy for the session)\n",
			 target, sid);
		reply(fd, 403, body);
		return;
	}
	r = egress_allowlist_check(eg->rules, (const char *const *)allow,
				   n_allow, req.host, req.ip_literal, req.port,
				   &why);
	egress_strv_free(allow, n_allow);
	/* a tunnel carries whatever Host header the client likes: only to
	 * TLS ports, plain HTTP is forwarded with Host set here */
	if (r == 0 && req.kind == EGRESS_CONNECT)
		r = egress_connect_check(eg->rules, req.port, &why);
	if (r < 0) {
		o->decision = "denied";
		snprintf(o->reason, sizeof(o->reason), "%s", why);
		snprintf(body, sizeof(body),
			 "warren egress: %s is not allowed for session %s "
			 "(%s)\n",
			 target, sid, why);
		reply(fd, 403, body);
		return;
	}

	/* 2. resolve once; every address is checked, only those that
	 * pass are connected to */
	struct sockaddr_storage addrs[MAX_ADDRS], own[OWN_ADDRS_MAX];
	int na = resolve(eg, &req, addrs, &why);
	if (na < 0) {
		o->decision = "failed";
		snprintf(o->reason, sizeof(o->reason), "cannot resolve: %s",
			 why);
		snprintf(body, sizeof(body),
			 "warren egress: cannot resolve %s: %s\n", req.host,
			 why);
		reply(fd, 502, body);
		return;
	}
	size_t n_own = own_addresses(eg, own);
	struct sockaddr_storage ok[MAX_ADDRS];
	size_t n_ok = 0;
	const char *denied_why = NULL;
	char denied_addr[INET6_ADDRSTRLEN] = "";
	for (int i = 0; i < na; i++) {
		if (egress_rules_check(eg->rules,
				       (const struct sockaddr *)&addrs[i], own,
				       n_own, &why) == 0) {
			ok[n_ok++] = addrs[i];
		} else if (!denied_why) {
			denied_why = why;
			addr_text(&addrs[i], denied_addr, sizeof(denied_addr));
		}
	}
	if (n_ok == 0) {
		o->decision = "denied";
		snprintf(o->address, sizeof(o->address), "%s", denied_addr);
		snprintf(o->reason, sizeof(o->reason), "resolves to %s, %s",
			 denied_addr, denied_why);
		snprintf(body, sizeof(body),
			 "warren egress: %s is not allowed for session %s "
			 "(it resolves to %s, %s)\n",
			 target, sid, denied_addr, denied_why);
		reply(fd, 403, body);
		return;
	}

	/* 3. connect */
	unsigned timeout = eg->cfg.connect_timeout_ms
			       ? eg->cfg.connect_timeout_ms
			       : CONNECT_TIMEOUT_MS;
	r = -EHOSTUNREACH;
	for (size_t i = 0; i < n_ok; i++) {
		addr_text(&ok[i], o->address, sizeof(o->address));
		r = connect_one(cn, &ok[i], timeout);
		if (r == 0 || r == -ECANCELED)
			break;
	}
	if (r < 0) {
		o->decision = "failed";
		snprintf(o->reason, sizeof(o->reason), "connect: %s",
			 strerror(-r));
		snprintf(body, sizeof(body),
			 "warren egress: cannot connect to %s (%s): %s\n",
			 target, o->address, strerror(-r));
		reply(fd, r == -ETIMEDOUT ? 504 : 502, body);
		return;
	}
	int up = cn->upstream_fd;
	o->decision = "allowed";
	size_t sent_head = 0; /* upstream: the rewritten head counts */
	if (req.kind == EGRESS_CONNECT) {
		static const char est[] =
		    "HTTP/1.1 200 Connection established\r\n\r\n";
		r = send_all(fd, est, sizeof(est) - 1, REPLY_TIMEOUT_MS);
	} else {
		size_t hlen;
		_cleanup_free_ char *head =
		    egress_http_upstream_head(buf, &req, &hlen);
		r = head ? send_all(up, head, hlen, REPLY_TIMEOUT_MS) : -ENOMEM;
		sent_head = hlen;
	}
	/* what the client sent after the head (a body, a TLS hello) */
	if (r == 0 && len > req.head_len)
		r = send_all(up, buf + req.head_len, len - req.head_len,
			     REPLY_TIMEOUT_MS);
	if (r < 0) {
		snprintf(o->reason, sizeof(o->reason), "%s", strerror(-r));
		return;
	}
	o->bytes_up = sent_head + (len - req.head_len);
	struct outcome moved = {0};
	relay(fd, up, &moved);
	o->bytes_up += moved.bytes_up;
	o->bytes_down = moved.bytes_down;
}

static json_t *audit_details(const struct outcome *o, double ms)
{
	json_t *d = json_object();
	if (!d)
		return NULL;
	json_object_set_new(d, "decision",
			    json_string(o->decision ? o->decision : "failed"));
	if (o->kind)
		json_object_set_new(d, "kind", json_string(o->kind));
	if (o->method[0])
		json_object_set_new(d, "method", json_string(o->method));
	if (o->host[0])
		json_object_set_new(d, "host", json_string(o->host));
	if (o->port)
		json_object_set_new(d, "port", json_integer(o->port));
	if (o->address[0])
		json_object_set_new(d, "address", json_string(o->address));
	if (o->reason[0])
		json_object_set_new(d, "reason", json_string(o->reason));
	json_object_set_new(d, "bytes_up",
			    json_integer((json_int_t)o->bytes_up));
	json_object_set_new(d, "bytes_down",
			    json_integer((json_int_t)o->bytes_down));
	json_object_set_new(d, "ms",
			    json_real((double)(int64_t)(ms * 1000) / 1000.0));
	return d;
}

/* Queues the decision for the audit thread (waits while the queue is
 * full). */
static void audit(struct conn *cn, const struct outcome *o, double ms)
{
	struct egress *eg = cn->eg;
	if (!eg->cfg.audit)
		return;
	struct audit_item *it = wr_calloc(1, sizeof(*it));
	if (!it)
		return;
	snprintf(it->session, sizeof(it->session), "%s", cn->base.sess->id);
	it->details = audit_details(o, ms);
	pthread_mutex_lock(&eg->audit_mu);
	while (eg->audit_len >= AUDIT_QUEUE_MAX && !eg->audit_stop)
		pthread_cond_wait(&eg->audit_space_cv, &eg->audit_mu);
	if (eg->audit_tail)
		eg->audit_tail->next = it;
	else
		eg->audit_head = it;
	eg->audit_tail = it;
	eg->audit_len++;
	pthread_cond_signal(&eg->audit_cv);
	pthread_mutex_unlock(&eg->audit_mu);
}

/* Writes the queued decisions, one at a time, in order; at stop, what is
 * queued still goes. */
static void *audit_main(void *arg)
{
	struct egress *eg = arg;
	pthread_mutex_lock(&eg->audit_mu);
	for (;;) {
		while (!eg->audit_head && !eg->audit_stop)
			pthread_cond_wait(&eg->audit_cv, &eg->audit_mu);
		struct audit_item *it = eg->audit_head;
		if (!it)
			break; /* stopping, and nothing left */
		eg->audit_head = it->next;
		if (!eg->audit_head)
			eg->audit_tail = NULL;
		eg->audit_len--;
		pthread_cond_signal(&eg->audit_space_cv);
		pthread_mutex_unlock(&eg->audit_mu);
		if (it->details)
			eg->cfg.audit(eg->cfg.ctx, it->session, it->details);
		json_decref(it->details);
		free(it);
		pthread_mutex_lock(&eg->audit_mu);
	}
	pthread_mutex_unlock(&eg->audit_mu);
	return NULL;
}

/* ---- the session server's callbacks --------------------------------------
 */

/* One connection, from its head to its audit record (a worker thread). */
static void serve(void *ctx, struct sess_srv_conn *base)
{
	struct egress *eg = ctx;
	struct conn *cn = (struct conn *)base;
	double t0 = mono_ms();
	struct outcome o = {0};
	handle(cn, &o);
	double ms = mono_ms() - t0;
	sess_srv_lock(eg->srv);
	if (cn->upstream_fd >= 0)
		close(cn->upstream_fd);
	cn->upstream_fd = -1;
	sess_srv_conn_hangup_locked(base);
	sess_srv_unlock(eg->srv);
	/* the record after the sockets are gone: the client is not kept
	 * waiting for it */
	audit(cn, &o, ms);
}

/* A connection that cannot be served: a short answer, best effort (the
 * socket is non-blocking), to the client's socket if the relay passed it
 * already; if not yet, on the unix socket, and the relay hands it on. */
static void refuse(void *ctx, int fd, const char *why)
{
	(void)ctx;
	sess_srv_refuse_http(fd, "egress", why);
}

static void conn_init(void *ctx, struct sess_srv_conn *base)
{
	struct conn *cn = (struct conn *)base;
	cn->eg = ctx;
	cn->upstream_fd = -1;
}

/* The session closes: the upstream socket is shut down with the client's,
 * which wakes the relay. */
static void conn_end(void *ctx, struct sess_srv_conn *base)
{
	(void)ctx;
	struct conn *cn = (struct conn *)base;
	if (cn->upstream_fd >= 0)
		shutdown(cn->upstream_fd, SHUT_RDWR);
}

static const struct sess_srv_ops server_ops = {
    .serve = serve,
    .refuse = refuse,
    .conn_init = conn_init,
    .conn_end = conn_end,
};

/* ---- sessions ---------------------------------------------------------------
 */

int egress_session_open(struct egress *eg, const char *session_id,
			const char *dir, char **sock_path,
			struct wr_error **err)
{
	if (!sess_srv_id_ok(session_id))
		return wr_error_set(err, EINVAL, "egress: bad session id");
	sess_srv_lock(eg->srv);
	struct sess_srv_session *open =
	    sess_srv_find_locked(eg->srv, session_id);
	if (open) {
		char *copy = sock_path ? wr_strdup(open->sock_path) : NULL;
		sess_srv_unlock(eg->srv);
		if (sock_path && !copy)
			return wr_error_set(err, ENOMEM, "egress");
		if (sock_path)
			*sock_path = copy;
		return 0;
	}
	sess_srv_unlock(eg->srv);
	struct sess_srv_session *s;
	int r = sess_srv_session_new(eg->srv, session_id, dir, &s, err);
	if (r < 0)
		return r;
	/* the path, copied before s is the server's (and may go) */
	char *copy = sock_path ? wr_strdup(s->sock_path) : NULL;
	if (sock_path && !copy) {
		sess_srv_session_free(eg->srv, s);
		return wr_error_set(err, ENOMEM, "egress");
	}
	r = sess_srv_session_open(eg->srv, s, NULL, err);
	if (r < 0) {
		free(copy);
		return r;
	}
	if (sock_path)
		*sock_path = copy;
	return 0;
}

void egress_session_close(struct egress *eg, const char *session_id)
{
	if (!eg || !session_id)
		return;
	sess_srv_close(eg->srv, session_id, "its sandbox stopped", NULL);
}

/* Lets the audit thread write what is queued, and waits for it. */
static void stop_audit(struct egress *eg)
{
	if (!eg->audit_started)
		return;
	pthread_mutex_lock(&eg->audit_mu);
	eg->audit_stop = true;
	pthread_cond_broadcast(&eg->audit_cv);
	pthread_cond_broadcast(&eg->audit_space_cv);
	pthread_mutex_unlock(&eg->audit_mu);
	pthread_join(eg->audit_thread, NULL);
	eg->audit_started = false;
}

static void egress_free(struct egress *eg)
{
	pthread_mutex_destroy(&eg->own_mu);
	pthread_mutex_destroy(&eg->audit_mu);
	pthread_cond_destroy(&eg->audit_cv);
	pthread_cond_destroy(&eg->audit_space_cv);
	egress_rules_free(eg->rules);
	free(eg);
}

int egress_start(const struct egress_config *cfg, struct egress **out,
		 struct wr_error **err)
{
	if (!cfg->policy)
		return wr_error_set(err, EINVAL, "egress: no policy callback");
	struct egress *eg = wr_calloc(1, sizeof(*eg));
	if (!eg)
		return wr_error_set(err, ENOMEM, "egress");
	eg->cfg = *cfg;
	eg->cfg.rules = NULL;
	eg->cfg.self_addr = NULL;
	int r = egress_rules_new(cfg->rules, &eg->rules, err);
	if (r < 0) {
		free(eg);
		return r;
	}
	if (cfg->self_port && egress_rules_set_self(eg->rules, cfg->self_addr,
						    cfg->self_port) < 0) {
		/* a name, not an address: any local address with the port */
		egress_rules_set_self(eg->rules, NULL, cfg->self_port);
	}
	pthread_mutex_init(&eg->own_mu, NULL);
	pthread_mutex_init(&eg->audit_mu, NULL);
	pthread_cond_init(&eg->audit_cv, NULL);
	pthread_cond_init(&eg->audit_space_cv, NULL);
	const struct sess_srv_config scfg = {
	    .name = "egress",
	    .socket_name = EGRESS_SOCKET_NAME,
	    .token_name = NULL,
	    .session_size = sizeof(struct sess_srv_session),
	    .conn_size = sizeof(struct conn),
	    .max_conns = cfg->max_conns ? cfg->max_conns : EGRESS_CONN_MAX,
	    .spare_workers = SPARE_WORKERS,
	    .nonblocking = true,
	    .ops = &server_ops,
	    .ctx = eg,
	};
	r = sess_srv_start(&scfg, &eg->srv, err);
	if (r < 0) {
		egress_free(eg);
		return r;
	}
	if (eg->cfg.audit) {
		int e = pthread_create(&eg->audit_thread, NULL, audit_main, eg);
		if (e) {
			sess_srv_stop(eg->srv, "the server stopped");
			egress_free(eg);
			return wr_error_set(err, e, "egress: threads");
		}
		eg->audit_started = true;
	}
	*out = eg;
	return 0;
}

void egress_stop(struct egress *eg)
{
	if (!eg)
		return;
	/* connections end once their sockets are shut down; one in
	 * getaddrinfo ends with its resolver's timeout */
	sess_srv_stop(eg->srv, "the server stopped");
	stop_audit(eg);
	egress_free(eg);
}

/* egress.c - the egress proxy's sockets and threads (egress.h).
 *
 * One acceptor thread polls every session's listening socket (and an
 * eventfd that wakes it when sessions come and go); each accepted
 * connection gets a thread of its own while it lasts, up to max_conns per
 * session: a worker that was waiting for one (up to SPARE_WORKERS wait),
 * else a new one. A connection's thread reads the request head, asks the
 * policy callback for
 * the session's allowlist, resolves and checks, connects, and relays with
 * poll(2) over two non-blocking sockets until both directions are done.
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
 * Lifetimes: a session is referenced by the registry (until the acceptor
 * has closed its listening socket) and by each of its connections; the
 * last reference frees it. Sockets of connections are closed under the
 * lock, so egress_session_close() can shut them down (waking their
 * threads) without racing a close and a reuse of the descriptor. */
#include "security/egress.h"

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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define HEAD_TIMEOUT_MS 30000
#define REPLY_TIMEOUT_MS 5000
#define CONNECT_TIMEOUT_MS 10000
#define RELAY_BUF (64 * 1024)
#define MAX_ADDRS 16
#define OWN_ADDRS_MAX 64
#define OWN_REFRESH_MS 5000
#define THREAD_STACK (256 * 1024) /* getaddrinfo's NSS modules need room */
/* Threads kept waiting for the next connection: a connection handed to
 * one starts at once, where a new thread would first be created (about
 * 30 us here) and fault in its stack. */
#define SPARE_WORKERS 8
#define AUDIT_QUEUE_MAX 4096

struct egress_session;

struct conn {
	struct conn *next, *prev;
	struct conn *queued_next; /* waiting for a worker (eg->mu) */
	struct egress *eg;
	struct egress_session *sess;
	int client_fd, upstream_fd; /* closed under eg->mu */
};

struct egress_session {
	struct egress_session *next;
	char id[EGRESS_SESSION_MAX];
	char *dir, *sock_path;
	int listen_fd;
	unsigned refs;	 /* the registry's + one per connection */
	unsigned active; /* connections */
	bool closed;
	struct conn *conns;
};

/* A decision waiting for the audit thread. */
struct audit_item {
	struct audit_item *next;
	char session[EGRESS_SESSION_MAX];
	json_t *details;
};

struct egress {
	struct egress_config cfg;
	struct egress_rules *rules;
	pthread_mutex_t mu;
	pthread_cond_t idle_cv;		 /* conns_total reached 0 */
	struct egress_session *sessions; /* open */
	struct egress_session *closing;	 /* listening socket still open */
	unsigned conns_total;
	/* connections accepted and not yet taken by a worker, and the
	 * workers: alive, and waiting for one (eg->mu; idle_cv also tells
	 * that workers reached 0) */
	struct conn *queue_head, *queue_tail;
	unsigned queued, workers, idle_workers;
	pthread_cond_t work_cv;
	int wake_fd;
	pthread_t acceptor;
	bool stopping;
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

static bool session_id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n >= EGRESS_SESSION_MAX || id[0] == '.')
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

static void wake(struct egress *eg)
{
	uint64_t one = 1;
	if (write(eg->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the acceptor wakes anyway */
	}
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

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

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
	pthread_mutex_lock(&eg->mu);
	bool closed = cn->sess->closed;
	if (!closed)
		cn->upstream_fd = fd;
	pthread_mutex_unlock(&eg->mu);
	return !closed;
}

static void drop_upstream(struct conn *cn)
{
	struct egress *eg = cn->eg;
	pthread_mutex_lock(&eg->mu);
	if (cn->upstream_fd >= 0)
		close(cn->upstream_fd);
	cn->upstream_fd = -1;
	pthread_mutex_unlock(&eg->mu);
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
static bool passed_socket_ok(int fd)
{
	struct stat st;
	int domain = 0, type = 0, proto = 0;
	socklen_t l1 = sizeof(domain), l2 = sizeof(type), l3 = sizeof(proto);
	struct sockaddr_storage peer;
	socklen_t pl = sizeof(peer);
	return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
	       getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l1) == 0 &&
	       (domain == AF_INET || domain == AF_INET6) &&
	       getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l2) == 0 &&
	       type == SOCK_STREAM &&
	       getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l3) == 0 &&
	       proto == IPPROTO_TCP &&
	       getpeername(fd, (struct sockaddr *)&peer, &pl) == 0;
}

enum {
	TAKE_BYTES = -1,  /* the request's first bytes */
	TAKE_AGAIN = -2,  /* nothing yet */
	TAKE_CLOSED = -3, /* end of file, or reset */
	TAKE_BAD = -4,	  /* a 0 without a socket, descriptors with bytes */
	TAKE_FAILED = -5,
};

/* One message from the unix socket fd (non-blocking): the relay's passed
 * client socket (>= 0), the first bytes of a request in buf (TAKE_BYTES,
 * *len set), or another TAKE_. */
static int take_passed(int fd, char *buf, size_t cap, size_t *len)
{
	int fds[1];
	size_t n_fds = 0;
	ssize_t n = wr_recv_fds(fd, buf, cap, fds, 1, &n_fds);
	if (n > 0 && buf[0] != '\0' && n_fds == 0) {
		*len = (size_t)n;
		return TAKE_BYTES;
	}
	if (n == 1 && buf[0] == '\0' && n_fds == 1 &&
	    passed_socket_ok(fds[0]) && set_nonblock(fds[0]) == 0)
		return fds[0];
	for (size_t i = 0; i < n_fds; i++)
		close(fds[i]);
	if (n == -EAGAIN || n == -EINTR)
		return TAKE_AGAIN;
	if (n == 0 || n == -ECONNRESET)
		return TAKE_CLOSED;
	return n < 0 ? TAKE_FAILED : TAKE_BAD;
}

/* The first bytes on a new connection: either the relay passes the
 * client's socket, which becomes cn->client_fd (the unix one is closed),
 * or they start the request head (buf, *len). 0, or -errno with *why
 * (-EBADMSG: answer the client). */
static int first_read(struct conn *cn, char *buf, size_t cap, size_t *len,
		      const char **why)
{
	int fd = cn->client_fd;
	double until = mono_ms() + HEAD_TIMEOUT_MS;
	int r;
	for (;;) {
		int left = (int)(until - mono_ms());
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, left) == 0) {
			*why = "no request within 30 s";
			return -ETIMEDOUT;
		}
		r = take_passed(fd, buf, cap, len);
		if (r != TAKE_AGAIN)
			break;
	}
	switch (r) {
	case TAKE_BYTES: return 0;
	case TAKE_CLOSED: *why = "closed before a request"; return -ECONNRESET;
	case TAKE_FAILED: *why = "read failed"; return -EIO;
	case TAKE_BAD:
		*why = "neither a request nor a connection passed by the "
		       "relay";
		return -EBADMSG;
	default: break;
	}
	struct egress *eg = cn->eg;
	pthread_mutex_lock(&eg->mu);
	bool closed = cn->sess->closed;
	if (!closed) {
		close(cn->client_fd);
		cn->client_fd = r;
	}
	pthread_mutex_unlock(&eg->mu);
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
	const char *sid = cn->sess->id;
	char body[768];
	const char *why = "";
	_cleanup_free_ char *buf = wr_malloc(EGRESS_HEAD_MAX);
	if (!buf) {
		o->decision = "failed";
		snprintf(o->reason, sizeof(o->reason), "out of memory");
		reply(cn->client_fd, 503, "warren egress: out of memory\n");
		return;
	}
	size_t len = 0;
	struct egress_request req;
	/* the relay's client socket, or the request's first bytes */
	int r = first_read(cn, buf, EGRESS_HEAD_MAX, &len, &why);
	int fd = cn->client_fd;
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
	snprintf(it->session, sizeof(it->session), "%s", cn->sess->id);
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

/* Drops a reference to s (eg->mu held); the last one frees it. */
static void session_unref(struct egress_session *s)
{
	if (--s->refs > 0)
		return;
	free(s->dir);
	free(s->sock_path);
	free(s);
}

/* One connection, from its head to its audit record; frees cn. */
static void serve_conn(struct conn *cn)
{
	struct egress *eg = cn->eg;
	double t0 = mono_ms();
	struct outcome o = {0};
	handle(cn, &o);
	double ms = mono_ms() - t0;
	pthread_mutex_lock(&eg->mu);
	if (cn->upstream_fd >= 0)
		close(cn->upstream_fd);
	close(cn->client_fd);
	cn->upstream_fd = cn->client_fd = -1;
	pthread_mutex_unlock(&eg->mu);
	/* the record after the sockets are gone: the client is not kept
	 * waiting for it */
	audit(cn, &o, ms);
	pthread_mutex_lock(&eg->mu);
	struct egress_session *s = cn->sess;
	if (cn->prev)
		cn->prev->next = cn->next;
	else
		s->conns = cn->next;
	if (cn->next)
		cn->next->prev = cn->prev;
	s->active--;
	session_unref(s);
	if (--eg->conns_total == 0)
		pthread_cond_broadcast(&eg->idle_cv);
	pthread_mutex_unlock(&eg->mu);
	free(cn);
}

/* A worker: serves queued connections one after the other; waits for the
 * next while fewer than SPARE_WORKERS others wait, else ends. */
static void *worker_main(void *arg)
{
	struct egress *eg = arg;
	pthread_mutex_lock(&eg->mu);
	for (;;) {
		while (!eg->queue_head && !eg->stopping &&
		       eg->idle_workers < SPARE_WORKERS) {
			eg->idle_workers++;
			pthread_cond_wait(&eg->work_cv, &eg->mu);
			eg->idle_workers--;
		}
		struct conn *cn = eg->queue_head;
		if (!cn)
			break; /* stopping, or enough spares */
		eg->queue_head = cn->queued_next;
		if (!eg->queue_head)
			eg->queue_tail = NULL;
		eg->queued--;
		pthread_mutex_unlock(&eg->mu);
		serve_conn(cn);
		pthread_mutex_lock(&eg->mu);
	}
	if (--eg->workers == 0)
		pthread_cond_broadcast(&eg->idle_cv);
	pthread_mutex_unlock(&eg->mu);
	return NULL;
}

/* Hands cn to a waiting worker, or to a new one when every waiting worker
 * has a connection already (eg->mu held). -errno if there is none and
 * none could be started: cn stays the caller's. */
static int dispatch(struct egress *eg, struct conn *cn)
{
	cn->queued_next = NULL;
	if (eg->queue_tail)
		eg->queue_tail->queued_next = cn;
	else
		eg->queue_head = cn;
	eg->queue_tail = cn;
	eg->queued++;
	if (eg->idle_workers >= eg->queued) {
		pthread_cond_signal(&eg->work_cv);
		return 0;
	}
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	int e = pthread_create(&t, &attr, worker_main, eg);
	pthread_attr_destroy(&attr);
	if (e == 0) {
		eg->workers++;
		return 0;
	}
	if (eg->workers > 0)
		return 0; /* a busy worker takes it when it is done */
	/* nobody will: take it back (it is the queue's last) */
	struct conn **pp = &eg->queue_head;
	struct conn *prev = NULL;
	while (*pp != cn) {
		prev = *pp;
		pp = &(*pp)->queued_next;
	}
	*pp = NULL;
	eg->queue_tail = prev;
	eg->queued--;
	return -e;
}

/* ---- the acceptor ----------------------------------------------------------
 */

/* A connection that cannot be served: a short answer, best effort (the
 * socket is non-blocking), to the client's socket if the relay passed it
 * already; if not yet, on the unix socket, and the relay hands it on. */
static void refuse(int fd, const char *body)
{
	if (set_nonblock(fd) == 0) {
		char byte[1];
		size_t len;
		int passed = take_passed(fd, byte, sizeof(byte), &len);
		if (passed >= 0) {
			close(fd);
			fd = passed;
			/* what the client sent, read: closing a TCP socket
			 * with unread bytes resets it, answer and all */
			char sink[4096];
			for (int i = 0; i < 16; i++)
				if (recv(fd, sink, sizeof(sink),
					 MSG_DONTWAIT) <= 0)
					break;
		}
	}
	char text[512];
	int n = snprintf(text, sizeof(text),
			 "HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
			 "text/plain; charset=utf-8\r\nContent-Length: "
			 "%zu\r\nConnection: close\r\n\r\n%s",
			 strlen(body), body);
	if (send(fd, text, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* the client is gone or not reading: nothing to tell */
	}
	shutdown(fd, SHUT_WR);
	close(fd);
}

/* Accepts what s's listener has (eg->mu held). */
static void accept_all(struct egress *eg, struct egress_session *s)
{
	unsigned max = eg->cfg.max_conns ? eg->cfg.max_conns : EGRESS_CONN_MAX;
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return; /* EAGAIN: all taken */
		if (s->closed) {
			close(fd);
			continue;
		}
		if (s->active >= max) {
			refuse(fd, "warren egress: too many connections for "
				   "this session\n");
			continue;
		}
		struct conn *cn = wr_calloc(1, sizeof(*cn));
		if (!cn || set_nonblock(fd) < 0) {
			free(cn);
			refuse(fd, "warren egress: out of memory\n");
			continue;
		}
		cn->eg = eg;
		cn->sess = s;
		cn->client_fd = fd;
		cn->upstream_fd = -1;
		s->refs++;
		s->active++;
		eg->conns_total++;
		cn->next = s->conns;
		if (s->conns)
			s->conns->prev = cn;
		s->conns = cn;
		if (dispatch(eg, cn) < 0) {
			s->conns = cn->next;
			if (s->conns)
				s->conns->prev = NULL;
			s->refs--;
			s->active--;
			eg->conns_total--;
			free(cn);
			refuse(fd, "warren egress: cannot start a connection "
				   "thread\n");
		}
	}
}

/* Closes the listeners of closed sessions (eg->mu held). */
static void reap_closing(struct egress *eg)
{
	while (eg->closing) {
		struct egress_session *s = eg->closing;
		eg->closing = s->next;
		if (s->listen_fd >= 0)
			close(s->listen_fd);
		s->listen_fd = -1;
		session_unref(s);
	}
}

static void *acceptor_main(void *arg)
{
	struct egress *eg = arg;
	struct pollfd *pfd = NULL;
	struct egress_session **owner = NULL;
	size_t cap = 0;
	pthread_mutex_lock(&eg->mu);
	while (!eg->stopping) {
		reap_closing(eg);
		size_t n = 1;
		for (struct egress_session *s = eg->sessions; s; s = s->next)
			n++;
		if (n > cap) {
			struct pollfd *p = wr_realloc(pfd, n * sizeof(*p));
			if (p)
				pfd = p;
			struct egress_session **o =
			    wr_realloc(owner, n * sizeof(*o));
			if (o)
				owner = o;
			if (!p || !o) {
				/* try again in a moment */
				pthread_mutex_unlock(&eg->mu);
				usleep(100 * 1000);
				pthread_mutex_lock(&eg->mu);
				continue;
			}
			cap = n;
		}
		pfd[0] = (struct pollfd){eg->wake_fd, POLLIN, 0};
		size_t k = 1;
		for (struct egress_session *s = eg->sessions; s; s = s->next) {
			pfd[k] = (struct pollfd){s->listen_fd, POLLIN, 0};
			owner[k++] = s;
		}
		/* the listeners stay open while we poll: only this thread
		 * closes them (reap_closing) */
		pthread_mutex_unlock(&eg->mu);
		int r = poll(pfd, (nfds_t)k, -1);
		pthread_mutex_lock(&eg->mu);
		if (r < 0)
			continue;
		if (pfd[0].revents & POLLIN) {
			uint64_t v;
			if (read(eg->wake_fd, &v, sizeof(v)) < 0) {
				/* nothing pending */
			}
		}
		for (size_t i = 1; i < k; i++)
			if (pfd[i].revents & POLLIN)
				accept_all(eg, owner[i]);
	}
	reap_closing(eg);
	pthread_mutex_unlock(&eg->mu);
	free(pfd);
	free(owner);
	return NULL;
}

/* ---- sessions ---------------------------------------------------------------
 */

/* Binds a listening unix socket at dir/proxy.sock through the directory's
 * descriptor: /proc/self/fd/N/proxy.sock fits sun_path however long the
 * data directory's path is. */
static int listen_at(int dir_fd, struct wr_error **err, const char *dir)
{
	if (unlinkat(dir_fd, EGRESS_SOCKET_NAME, 0) < 0 && errno != ENOENT)
		return wr_error_set(err, errno, "remove %s/%s", dir,
				    EGRESS_SOCKET_NAME);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return wr_error_set(err, errno, "egress socket");
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	snprintf(sun.sun_path, sizeof(sun.sun_path), "/proc/self/fd/%d/%s",
		 dir_fd, EGRESS_SOCKET_NAME);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    fchmodat(dir_fd, EGRESS_SOCKET_NAME, 0666, 0) < 0 ||
	    listen(fd, SOMAXCONN) < 0) {
		int e = errno;
		close(fd);
		return wr_error_set(err, e, "listen on %s/%s", dir,
				    EGRESS_SOCKET_NAME);
	}
	return fd;
}

int egress_session_open(struct egress *eg, const char *session_id,
			const char *dir, char **sock_path,
			struct wr_error **err)
{
	if (!session_id_ok(session_id))
		return wr_error_set(err, EINVAL, "egress: bad session id");
	pthread_mutex_lock(&eg->mu);
	for (struct egress_session *s = eg->sessions; s; s = s->next)
		if (!strcmp(s->id, session_id)) {
			char *copy = sock_path ? wr_strdup(s->sock_path) : NULL;
			pthread_mutex_unlock(&eg->mu);
			if (sock_path && !copy)
				return wr_error_set(err, ENOMEM, "egress");
			if (sock_path)
				*sock_path = copy;
			return 0;
		}
	pthread_mutex_unlock(&eg->mu);
	/* 0711: the sandbox's processes (an unmapped uid, "others" here)
	 * may pass through to the socket, not list; the socket is 0666
	 * since connect(2) needs write permission. Nobody else on the host
	 * gets this far: DATA/sessions is 0700. */
	if (mkdir(dir, 0711) < 0 && errno != EEXIST)
		return wr_error_set(err, errno, "egress: mkdir %s", dir);
	_cleanup_close_ int dir_fd =
	    open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir_fd < 0)
		return wr_error_set(err, errno, "egress: open %s", dir);
	if (fchmod(dir_fd, 0711) < 0)
		return wr_error_set(err, errno, "egress: chmod %s", dir);
	struct egress_session *s = wr_calloc(1, sizeof(*s));
	if (!s)
		return wr_error_set(err, ENOMEM, "egress");
	snprintf(s->id, sizeof(s->id), "%s", session_id);
	s->dir = wr_strdup(dir);
	s->sock_path = wr_asprintf("%s/%s", dir, EGRESS_SOCKET_NAME);
	char *copy = s->sock_path ? wr_strdup(s->sock_path) : NULL;
	if (!s->dir || !s->sock_path || (sock_path && !copy)) {
		free(copy);
		free(s->dir);
		free(s->sock_path);
		free(s);
		return wr_error_set(err, ENOMEM, "egress");
	}
	s->listen_fd = listen_at(dir_fd, err, dir);
	if (s->listen_fd < 0) {
		int r = s->listen_fd;
		free(copy);
		free(s->dir);
		free(s->sock_path);
		free(s);
		return r;
	}
	s->refs = 1;
	pthread_mutex_lock(&eg->mu);
	s->next = eg->sessions;
	eg->sessions = s;
	wake(eg);
	pthread_mutex_unlock(&eg->mu);
	if (sock_path)
		*sock_path = copy;
	else
		free(copy);
	return 0;
}

/* Moves s from the open list to the closing one and ends its
 * connections (eg->mu held). */
static void session_detach(struct egress *eg, struct egress_session *s)
{
	s->closed = true;
	for (struct conn *cn = s->conns; cn; cn = cn->next) {
		shutdown(cn->client_fd, SHUT_RDWR);
		if (cn->upstream_fd >= 0)
			shutdown(cn->upstream_fd, SHUT_RDWR);
	}
	s->next = eg->closing;
	eg->closing = s;
}

void egress_session_close(struct egress *eg, const char *session_id)
{
	if (!eg || !session_id)
		return;
	pthread_mutex_lock(&eg->mu);
	struct egress_session **pp = &eg->sessions;
	while (*pp && strcmp((*pp)->id, session_id))
		pp = &(*pp)->next;
	struct egress_session *s = *pp;
	char *dir = NULL, *sock = NULL;
	if (s) {
		*pp = s->next;
		dir = wr_strdup(s->dir);
		sock = wr_strdup(s->sock_path);
		session_detach(eg, s);
		wake(eg);
	}
	pthread_mutex_unlock(&eg->mu);
	/* the path goes now; the listener with the acceptor's next turn */
	if (sock)
		unlink(sock);
	if (dir)
		rmdir(dir);
	free(sock);
	free(dir);
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
	close(eg->wake_fd);
	pthread_mutex_destroy(&eg->mu);
	pthread_mutex_destroy(&eg->own_mu);
	pthread_mutex_destroy(&eg->audit_mu);
	pthread_cond_destroy(&eg->idle_cv);
	pthread_cond_destroy(&eg->work_cv);
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
	eg->wake_fd = -1;
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
	eg->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (eg->wake_fd < 0) {
		r = wr_error_set(err, errno, "egress: eventfd");
		egress_rules_free(eg->rules);
		free(eg);
		return r;
	}
	pthread_mutex_init(&eg->mu, NULL);
	pthread_mutex_init(&eg->own_mu, NULL);
	pthread_mutex_init(&eg->audit_mu, NULL);
	pthread_cond_init(&eg->idle_cv, NULL);
	pthread_cond_init(&eg->work_cv, NULL);
	pthread_cond_init(&eg->audit_cv, NULL);
	pthread_cond_init(&eg->audit_space_cv, NULL);
	int e = 0;
	if (eg->cfg.audit) {
		e = pthread_create(&eg->audit_thread, NULL, audit_main, eg);
		eg->audit_started = e == 0;
	}
	if (!e)
		e = pthread_create(&eg->acceptor, NULL, acceptor_main, eg);
	if (e) {
		stop_audit(eg);
		egress_free(eg);
		return wr_error_set(err, e, "egress: threads");
	}
	*out = eg;
	return 0;
}

void egress_stop(struct egress *eg)
{
	if (!eg)
		return;
	pthread_mutex_lock(&eg->mu);
	while (eg->sessions) {
		struct egress_session *s = eg->sessions;
		eg->sessions = s->next;
		if (s->sock_path)
			unlink(s->sock_path);
		if (s->dir)
			rmdir(s->dir);
		session_detach(eg, s);
	}
	eg->stopping = true;
	wake(eg);
	pthread_mutex_unlock(&eg->mu);
	pthread_join(eg->acceptor, NULL);
	/* connection threads end once their sockets are shut down; one in
	 * getaddrinfo ends with its resolver's timeout */
	pthread_mutex_lock(&eg->mu);
	while (eg->conns_total > 0)
		pthread_cond_wait(&eg->idle_cv, &eg->mu);
	/* the waiting workers end too */
	pthread_cond_broadcast(&eg->work_cv);
	while (eg->workers > 0)
		pthread_cond_wait(&eg->idle_cv, &eg->mu);
	pthread_mutex_unlock(&eg->mu);
	stop_audit(eg);
	egress_free(eg);
}

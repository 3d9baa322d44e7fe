/* warren-relay - the egress proxy's end inside a sandbox.
 *
 *   warren-relay [--listen ADDR:PORT] [--foreground] SOCKET
 *
 * A sandbox with egress has no network interface but loopback; the
 * control plane's proxy for its session is a unix socket bound into it
 * (/run/warren-egress/proxy.sock). Programs speak HTTP proxy to a TCP
 * address (HTTP_PROXY=http://127.0.0.1:3128), so this relay listens there
 * and, for each connection, connects to SOCKET and moves bytes both ways:
 * one process, one poll(2) loop, no parsing (the proxy does all of that,
 * outside the sandbox, where the policy is). The bytes go through a pipe
 * per direction with splice(2), never through this process's memory: the
 * pipe is the buffer (64 KiB at most), and a connection costs six
 * descriptors and no heap beyond its small record.
 *
 * First, though, once the client has sent its first bytes, it offers the
 * proxy the connection itself: one byte, 0 (no request head starts with
 * it), with the accepted socket attached (SCM_RIGHTS), and closes its own
 * copies once the proxy hangs up the unix connection (it has taken the
 * socket; a proxy that refuses the connection answers there instead, and
 * the relay passes that on). The proxy then reads the request from and
 * relays to the client's socket directly: no hop here, no copy (a socket
 * carries its network namespace; the proxy outside the sandbox uses it as
 * it is). Only if that send fails does the relay move the bytes itself,
 * over the same unix connection.
 *
 * The control plane starts it with `warren sandbox exec NAME -- RELAY
 * SOCKET`. It binds its port first, so a failure is the exec's exit status,
 * then leaves the exec behind as a daemon: it forks, the child starts a
 * session of its own (init's signal to the exec's process group does not
 * reach it) and points its standard streams at /dev/null (the exec's
 * pipes, which the server reads to the end, are closed); the parent exits
 * 0 and the exec returns. Init reaps it like any orphan; it ends with the
 * sandbox.
 *
 * Static, libc only, like warren-init: it lives as long as the sandbox. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util/fdpass.h"

#define PIPE_CAP (64 * 1024) /* a pipe's default capacity */
#define MAX_PAIRS 1024
#define FIRST_BYTES_MS 30000 /* as long as the proxy waits for a head */

struct half {
	int pipe[2];
	size_t cap;    /* the pipe's capacity */
	size_t queued; /* bytes in the pipe */
	bool eof, done;
};

struct pair {
	int tcp, unix_fd;
	bool waiting;	  /* for the client's first bytes (unix_fd -1) */
	bool passed;	  /* tcp sent to the proxy: until it hangs up */
	double since;	  /* accepted (CLOCK_MONOTONIC, ms) */
	struct half up;	  /* tcp -> unix */
	struct half down; /* unix -> tcp */
};

static struct pair *pairs[MAX_PAIRS];
static size_t n_pairs, max_pairs;
static struct sockaddr_un proxy_addr;

static void usage(void)
{
	fprintf(stderr, "usage: warren-relay [--listen ADDR:PORT] "
			"[--foreground] SOCKET\n");
	exit(2);
}

static void die(const char *what)
{
	fprintf(stderr, "warren-relay: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int listen_tcp(const char *spec)
{
	char addr[64];
	const char *colon = strrchr(spec, ':');
	if (!colon || (size_t)(colon - spec) >= sizeof(addr))
		usage();
	memcpy(addr, spec, (size_t)(colon - spec));
	addr[colon - spec] = '\0';
	char *end;
	long port = strtol(colon + 1, &end, 10);
	struct sockaddr_in sin = {.sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port)};
	if (*end || port < 1 || port > 65535 ||
	    inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		usage();
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		die("socket");
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		fprintf(stderr, "warren-relay: listen on %s: %s\n", spec,
			strerror(errno));
		exit(1);
	}
	if (listen(fd, SOMAXCONN) < 0)
		die("listen");
	return fd;
}

static void daemonize(void)
{
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid > 0)
		_exit(0);
	setsid();
	if (chdir("/") < 0) {
		/* nothing depends on the working directory */
	}
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		if (null > 2)
			close(null);
	}
}

static void pair_free(struct pair *p)
{
	int fds[] = {p->tcp,	    p->unix_fd,	     p->up.pipe[0],
		     p->up.pipe[1], p->down.pipe[0], p->down.pipe[1]};
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(p);
}

static void pair_close(size_t i)
{
	pair_free(pairs[i]);
	pairs[i] = pairs[--n_pairs];
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

/* One connection from the backlog, waiting for its first bytes: false
 * when there is none. */
static bool accept_one(int listen_fd)
{
	int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (c < 0)
		return false;
	struct pair *p = calloc(1, sizeof(*p));
	if (!p) {
		close(c);
		return true;
	}
	p->tcp = c;
	p->unix_fd = -1;
	p->up.pipe[0] = p->up.pipe[1] = p->down.pipe[0] = p->down.pipe[1] = -1;
	p->waiting = true;
	p->since = now_ms();
	pairs[n_pairs++] = p;
	return true;
}

/* The client has spoken (or hung up): its connection goes to the proxy,
 * passed or, failing that, relayed. False when the pair is done. */
static bool hand_over(struct pair *p)
{
	p->waiting = false;
	/* non-blocking: a proxy whose backlog is full answers EAGAIN at
	 * once instead of stalling every other connection */
	p->unix_fd =
	    socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (p->unix_fd < 0 ||
	    connect(p->unix_fd, (struct sockaddr *)&proxy_addr,
		    sizeof(proxy_addr)) < 0) {
		/* what the client sent, read: a socket closed with bytes
		 * unread is reset instead of ended */
		char sink[4096];
		for (int i = 0; i < 16; i++)
			if (recv(p->tcp, sink, sizeof(sink), 0) <= 0)
				break;
		shutdown(p->tcp, SHUT_WR);
		return false;
	}
	/* the connection itself to the proxy: done here. Only once the
	 * request is in the socket: a refusal (too many connections) is
	 * answered at once, and closing a socket with bytes still on their
	 * way would reset it, answer and all. */
	static const char pass_marker = '\0';
	if (wr_send_fds(p->unix_fd, &pass_marker, 1, &p->tcp, 1) == 0) {
		p->passed = true;
		return true;
	}
	/* could not pass it: relay the bytes */
	if (pipe2(p->up.pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    pipe2(p->down.pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return false;
	/* the default capacity: larger pipes were slower for a 1 MiB body
	 * (each hop forwards later) */
	p->up.cap = p->down.cap = PIPE_CAP;
	return true;
}

/* A passed connection's unix socket has news: end of file once the
 * proxy has taken the client's socket (ours is closed then, without a
 * shutdown: the socket is the proxy's now), or the proxy's refusal (too
 * many connections) when it had not: that goes to the client, and the
 * connection ends. False when the pair is done. */
static bool passed_news(struct pair *p)
{
	char buf[4096];
	ssize_t n = recv(p->unix_fd, buf, sizeof(buf), 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n > 0) {
		if (send(p->tcp, buf, (size_t)n, MSG_NOSIGNAL) < 0) {
			/* the client is gone: nothing to tell */
		}
		char sink[4096];
		for (int i = 0; i < 16; i++)
			if (recv(p->tcp, sink, sizeof(sink), 0) <= 0)
				break;
		shutdown(p->tcp, SHUT_WR);
	}
	return false;
}

/* One direction's turn; false when the pair must end. */
static bool move(struct half *h, int from, int to)
{
	if (!h->eof && h->queued < h->cap) {
		ssize_t n =
		    splice(from, NULL, h->pipe[1], NULL, h->cap - h->queued,
			   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0)
			h->queued += (size_t)n;
		else if (n == 0)
			h->eof = true;
		else if (errno != EAGAIN && errno != EINTR)
			return false;
	}
	while (h->queued > 0) {
		ssize_t n = splice(h->pipe[0], NULL, to, NULL, h->queued,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n > 0)
			h->queued -= (size_t)n;
		else if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		else
			return false;
	}
	if (h->eof && h->queued == 0 && !h->done) {
		shutdown(to, SHUT_WR);
		h->done = true;
	}
	return true;
}

static short want_in(const struct half *h)
{
	return !h->eof && h->queued < h->cap ? POLLIN : 0;
}

static short want_out(const struct half *h)
{
	return h->queued > 0 ? POLLOUT : 0;
}

static void serve(int listen_fd)
{
	static struct pollfd pfd[1 + 2 * MAX_PAIRS];
	for (;;) {
		size_t n = 0;
		bool waiting = false;
		pfd[n++] = (struct pollfd){n_pairs < max_pairs ? listen_fd : -1,
					   POLLIN, 0};
		for (size_t i = 0; i < n_pairs; i++) {
			struct pair *p = pairs[i];
			short t = want_in(&p->up) | want_out(&p->down);
			short u = want_in(&p->down) | want_out(&p->up);
			if (p->waiting) {
				t = POLLIN;
				u = 0;
				waiting = true;
			} else if (p->passed) {
				t = 0;
				u = POLLIN;
			}
			/* nothing wanted: left out (a peer that hung up
			 * reports POLLHUP on every turn) */
			pfd[n++] = (struct pollfd){t ? p->tcp : -1, t, 0};
			pfd[n++] = (struct pollfd){u ? p->unix_fd : -1, u, 0};
		}
		if (poll(pfd, (nfds_t)n, waiting ? 1000 : -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		/* pairs first, from the end: closing one moves the last
		 * into its place, which was handled already */
		size_t np = n_pairs;
		double now = waiting ? now_ms() : 0;
		for (size_t i = np; i-- > 0;) {
			struct pair *p = pairs[i];
			if (p->waiting) {
				if (pfd[1 + 2 * i].revents
					? !hand_over(p)
					: now - p->since > FIRST_BYTES_MS)
					pair_close(i);
				continue;
			}
			if (!pfd[1 + 2 * i].revents && !pfd[2 + 2 * i].revents)
				continue;
			if (p->passed) {
				if (!passed_news(p))
					pair_close(i);
				continue;
			}
			if (!move(&p->up, p->tcp, p->unix_fd) ||
			    !move(&p->down, p->unix_fd, p->tcp) ||
			    (p->up.done && p->down.done))
				pair_close(i);
		}
		if (pfd[0].revents & POLLIN)
			for (int k = 0; k < 64 && n_pairs < max_pairs &&
					accept_one(listen_fd);
			     k++) {
			}
	}
}

int main(int argc, char **argv)
{
	const char *listen_spec = "127.0.0.1:3128", *sock = NULL;
	bool foreground = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--listen") && i + 1 < argc)
			listen_spec = argv[++i];
		else if (!strcmp(argv[i], "--foreground"))
			foreground = true;
		else if (argv[i][0] == '-' || sock)
			usage();
		else
			sock = argv[i];
	}
	if (!sock || strlen(sock) >= sizeof(proxy_addr.sun_path))
		usage();
	proxy_addr.sun_family = AF_UNIX;
	strcpy(proxy_addr.sun_path, sock);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	/* six descriptors a connection: as many as the limit allows */
	struct rlimit rl = {1024, 1024};
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	max_pairs = rl.rlim_cur > 16 ? (rl.rlim_cur - 16) / 6 : 1;
	if (max_pairs > MAX_PAIRS)
		max_pairs = MAX_PAIRS;
	int fd = listen_tcp(listen_spec);
	if (!foreground)
		daemonize();
	serve(fd);
	return 0;
}

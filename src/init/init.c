/* warren-init - PID 1 inside every Warren sandbox.
 *
 *   warren-init run [--timeout-ms N] -- CMD [ARGS...]
 *   warren-init serve --socket FD [--timeout-ms N]
 *   warren-init serve --listen PATH [--timeout-ms N]
 *   (with --seccomp FILE first: install that compiled filter, the gvisor
 *   backend's way of giving its sandbox the native one's filter)
 *
 * A PID 1 in a pid namespace gets no default signal actions and inherits every
 * orphan, so this init must (a) reap every child, or zombies pile up until the
 * pid limit stops the sandbox, and (b) handle the signals it wants, forwarding
 * them to the command, or a SIGTERM from outside does nothing. bubblewrap's
 * init does neither; ours does both. A command still running TERM_GRACE_MS
 * after a SIGTERM is killed, with everything else inside.
 *
 * It links only libc (statically), so an idle sandbox costs little memory.
 * It is started with an empty environment in serve mode: anything it holds
 * would be readable inside as /proc/1/environ. */
#include "sandbox/proto.h"
#include "util/fdpass.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define MAX_CLIENTS 256
#define TERM_GRACE_MS 2000

/* Signals init handles itself (via signalfd) rather than by default action. */
static const int handled_signals[] = {SIGCHLD, SIGTERM, SIGINT,	 SIGHUP,
				      SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};

struct client {
	int conn;   /* -1: free slot */
	pid_t pid;  /* 0: no command yet */
	int master; /* pty master kept open until the command exits */
};

static struct client clients[MAX_CLIENTS];
static sigset_t handled_set;
extern char **environ;

static void die(const char *what)
{
	fprintf(stderr, "warren-init: %s: %s\n", what, strerror(errno));
	exit(125);
}

static int status_to_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 125;
}

static int setup_signalfd(void)
{
	sigemptyset(&handled_set);
	for (size_t i = 0; i < sizeof(handled_signals) / sizeof(int); i++)
		sigaddset(&handled_set, handled_signals[i]);
	if (sigprocmask(SIG_BLOCK, &handled_set, NULL) < 0)
		die("sigprocmask");
	int fd = signalfd(-1, &handled_set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fd < 0)
		die("signalfd");
	return fd;
}

static int setup_timer(long long timeout_ms)
{
	if (timeout_ms <= 0)
		return -1;
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (fd < 0)
		die("timerfd_create");
	struct itimerspec its = {0};
	its.it_value.tv_sec = timeout_ms / 1000;
	its.it_value.tv_nsec = (timeout_ms % 1000) * 1000000L;
	if (timerfd_settime(fd, 0, &its, NULL) < 0)
		die("timerfd_settime");
	return fd;
}

/* In the forked child: restore what init changed, then exec. An exec failure
 * is reported through err_pipe (close-on-exec: EOF means success). */
static void exec_child(char **argv, char **env, int err_pipe)
{
	sigprocmask(SIG_UNBLOCK, &handled_set, NULL);
	for (size_t i = 0; i < sizeof(handled_signals) / sizeof(int); i++)
		signal(handled_signals[i], SIG_DFL);
	if (env)
		execvpe(argv[0], argv, env);
	else
		execvp(argv[0], argv);
	int e = errno;
	if (write(err_pipe, &e, sizeof(e)) < 0) {
		/* nothing more we can do */
	}
	_exit(e == ENOENT ? 127 : 126);
}

/* Returns the exec errno of the child (0 if exec succeeded). */
static int read_exec_error(int err_pipe)
{
	int e = 0;
	ssize_t n;
	do {
		n = read(err_pipe, &e, sizeof(e));
	} while (n < 0 && errno == EINTR);
	close(err_pipe);
	return n == (ssize_t)sizeof(e) ? e : 0;
}

/* ---------------------------------------------------------------- run */

static int run_mode(char **argv, long long timeout_ms)
{
	int sfd = setup_signalfd();
	int tfd = setup_timer(timeout_ms);
	/* posix_spawn (a vfork-style clone in musl) costs less than fork and
	 * reports an exec failure as its return value. The command gets its
	 * own process group, so a forwarded signal or a kill reaches the whole
	 * job, and default signal handling. */
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	sigset_t none;
	sigemptyset(&none);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
					    POSIX_SPAWN_SETSIGMASK |
					    POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &handled_set);
	pid_t cmd;
	int e = posix_spawnp(&cmd, argv[0], NULL, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	if (e) {
		fprintf(stderr, "warren-init: %s: %s\n", argv[0], strerror(e));
		return e == ENOENT ? 127 : 126;
	}
	int cmd_code = -1;
	int gfd = -1; /* the grace after a SIGTERM */
	for (;;) {
		struct pollfd pfd[3] = {{sfd, POLLIN, 0},
					{tfd, POLLIN, 0},
					{gfd, POLLIN, 0}};
		int n = poll(pfd, 3, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (tfd >= 0 && (pfd[1].revents & POLLIN)) {
			fprintf(stderr, "warren-init: timeout, stopping\n");
			kill(-1, SIGKILL);
			return 124;
		}
		/* a command that outlives the grace is killed with all
		 * else: a SIGTERM from outside always ends the sandbox */
		if (gfd >= 0 && (pfd[2].revents & POLLIN)) {
			fprintf(stderr, "warren-init: still running %d ms after "
					"SIGTERM, killing\n",
				TERM_GRACE_MS);
			kill(-1, SIGKILL);
			return 128 + SIGTERM;
		}
		struct signalfd_siginfo si;
		while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
			if (si.ssi_signo != SIGCHLD) {
				/* to the command's process group, as a
				 * terminal would deliver it */
				kill(-cmd, (int)si.ssi_signo);
				if (si.ssi_signo == SIGTERM && gfd < 0)
					gfd = setup_timer(TERM_GRACE_MS);
				continue;
			}
			int status;
			pid_t p;
			while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
				if (p == cmd)
					cmd_code = status_to_code(status);
			}
		}
		if (cmd_code >= 0)
			return cmd_code; /* exiting PID 1 kills the rest */
	}
}

/* -------------------------------------------------------------- serve */

static void send_msg(int conn, uint32_t type, int32_t value, const char *text,
		     int fd)
{
	struct wr_proto_msg msg = {.type = type, .value = value};
	if (text)
		snprintf(msg.text, sizeof(msg.text), "%s", text);
	/* MSG_NOSIGNAL inside: a vanished client must not kill init */
	wr_send_fds(conn, &msg, sizeof(msg), &fd, fd >= 0 ? 1 : 0);
}

static void client_close(struct client *c)
{
	if (c->conn >= 0)
		close(c->conn);
	if (c->master >= 0)
		close(c->master);
	c->conn = -1;
	c->master = -1;
	c->pid = 0;
}

static int open_pty(int *master_out, char *slave_name, size_t len,
		    uint16_t rows, uint16_t cols)
{
	int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		return -errno;
	if (grantpt(master) < 0 || unlockpt(master) < 0 ||
	    ptsname_r(master, slave_name, len) != 0) {
		int r = -errno;
		close(master);
		return r;
	}
	if (rows && cols) {
		struct winsize ws = {.ws_row = rows, .ws_col = cols};
		ioctl(master, TIOCSWINSZ, &ws);
	}
	*master_out = master;
	return 0;
}

/* Reads a request (with up to 3 descriptors) and starts the command. */
static void client_start(struct client *c)
{
	static char buf[WR_PROTO_MAX_REQUEST];
	int fds[3] = {-1, -1, -1};
	size_t nfds = 0;
	ssize_t n = wr_recv_fds(c->conn, buf, sizeof(buf), fds, 3, &nfds);
	bool truncated = n == -EMSGSIZE;
	if (n <= 0 && !truncated) {
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		client_close(c);
		return;
	}
	struct wr_proto_request req = {0};
	int r = wr_proto_parse_request(buf, (size_t)n, &req);
	bool tty = r == 0 && (req.flags & WR_PROTO_FLAG_TTY);
	if (r == 0 && truncated)
		r = -EBADMSG;
	if (r == 0 && !tty && nfds != 3)
		r = -EBADMSG;
	if (r < 0) {
		send_msg(c->conn, WR_MSG_ERROR, -r, "malformed exec request",
			 -1);
		goto fail;
	}
	char slave[64];
	if (tty) {
		r = open_pty(&c->master, slave, sizeof(slave), req.rows,
			     req.cols);
		if (r < 0) {
			send_msg(c->conn, WR_MSG_ERROR, -r, "open pty", -1);
			goto fail;
		}
	}
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0) {
		send_msg(c->conn, WR_MSG_ERROR, errno, "pipe", -1);
		goto fail;
	}
	pid_t pid = fork();
	if (pid < 0) {
		send_msg(c->conn, WR_MSG_ERROR, errno, "fork", -1);
		close(ep[0]);
		close(ep[1]);
		goto fail;
	}
	if (pid == 0) {
		close(ep[0]);
		/* a new session: the command gets no terminal of ours, and its
		 * process group can be signalled as a whole */
		setsid();
		if (tty) {
			int s = open(slave, O_RDWR);
			if (s < 0 || ioctl(s, TIOCSCTTY, 0) < 0)
				_exit(125);
			fds[0] = fds[1] = fds[2] = s;
		}
		for (int i = 0; i < 3; i++) {
			if (dup2(fds[i], i) < 0)
				_exit(125);
		}
		if (chdir(req.cwd) < 0) {
			/* negative: the working directory, not the command */
			int e = -errno;
			if (write(ep[1], &e, sizeof(e)) < 0) {
			}
			_exit(125);
		}
		exec_child(req.argv, req.env, ep[1]);
	}
	close(ep[1]);
	int e = read_exec_error(ep[0]);
	c->pid = pid;
	if (e) {
		char text[200];
		if (e < 0)
			snprintf(text, sizeof(text), "working directory %s: %s",
				 req.cwd, strerror(-e));
		else
			snprintf(text, sizeof(text), "%s: %s", req.argv[0],
				 strerror(e));
		send_msg(c->conn, WR_MSG_ERROR, e < 0 ? -e : e, text, -1);
	} else {
		send_msg(c->conn, WR_MSG_STARTED, pid, NULL,
			 tty ? c->master : -1);
	}
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	wr_proto_request_clear(&req);
	return;
fail:
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	wr_proto_request_clear(&req);
	client_close(c);
}

/* A message from a client whose command runs, or its hang-up. */
static void client_control(struct client *c)
{
	struct wr_proto_msg msg;
	ssize_t n = recv(c->conn, &msg, sizeof(msg), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n == (ssize_t)sizeof(msg) && msg.type == WR_MSG_SIGNAL &&
	    msg.value > 0 && msg.value < 65) {
		kill(-c->pid, msg.value);
		return;
	}
	/* hang-up or garbage: the command's lifetime is the connection's */
	kill(-c->pid, SIGKILL);
	close(c->conn);
	c->conn = -1;
}

static void reap(void)
{
	int status;
	pid_t p;
	while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
		for (int i = 0; i < MAX_CLIENTS; i++) {
			struct client *c = &clients[i];
			if (c->pid != p)
				continue;
			if (c->conn >= 0)
				send_msg(c->conn, WR_MSG_EXIT,
					 status_to_code(status), NULL, -1);
			client_close(c);
		}
	}
}

static int serve_mode(int listen_fd, long long timeout_ms)
{
	int sfd = setup_signalfd();
	int tfd = setup_timer(timeout_ms);
	if (fcntl(listen_fd, F_SETFD, FD_CLOEXEC) < 0)
		die("fcntl");
	for (int i = 0; i < MAX_CLIENTS; i++)
		clients[i] = (struct client){.conn = -1, .master = -1};
	long long term_deadline = -1; /* remaining grace after SIGTERM */
	struct pollfd pfd[MAX_CLIENTS + 3];
	for (;;) {
		int np = 0;
		pfd[np++] = (struct pollfd){sfd, POLLIN, 0};
		pfd[np++] = (struct pollfd){tfd, POLLIN, 0};
		pfd[np++] = (struct pollfd){term_deadline < 0 ? listen_fd : -1,
					    POLLIN, 0};
		for (int i = 0; i < MAX_CLIENTS; i++)
			pfd[np++] = (struct pollfd){clients[i].conn, POLLIN, 0};
		int n = poll(pfd, (nfds_t)np,
			     term_deadline < 0 ? -1 : (int)term_deadline);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (n == 0 && term_deadline >= 0)
			return 0; /* grace over: exiting kills the rest */
		if (pfd[1].revents & POLLIN)
			return 124; /* lifetime reached */
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGCHLD) {
					reap();
				} else if (si.ssi_signo == SIGTERM ||
					   si.ssi_signo == SIGINT) {
					kill(-1, SIGTERM);
					term_deadline = TERM_GRACE_MS;
				}
			}
			if (term_deadline >= 0) {
				/* done early once nothing is left */
				if (waitpid(-1, NULL, WNOHANG) < 0 &&
				    errno == ECHILD)
					return 0;
			}
		}
		if (pfd[2].revents & POLLIN) {
			int conn = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
			if (conn >= 0) {
				int slot = -1;
				for (int i = 0; i < MAX_CLIENTS; i++) {
					if (clients[i].conn < 0 &&
					    clients[i].pid == 0) {
						slot = i;
						break;
					}
				}
				if (slot < 0) {
					send_msg(conn, WR_MSG_ERROR, EAGAIN,
						 "too many concurrent execs",
						 -1);
					close(conn);
				} else {
					clients[slot].conn = conn;
				}
			}
		}
		for (int i = 0; i < MAX_CLIENTS; i++) {
			if (!(pfd[3 + i].revents &
			      (POLLIN | POLLHUP | POLLERR)))
				continue;
			struct client *c = &clients[i];
			if (c->conn < 0)
				continue;
			if (c->pid == 0)
				client_start(c);
			else
				client_control(c);
		}
	}
}

/* --listen: the exec socket made here, at a path the host also reaches
 * (the gvisor backend, where no descriptor can be handed in at start). */
static int listen_at(const char *path)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(addr.sun_path))
		return -1;
	strcpy(addr.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	unlink(path);
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    chmod(path, 0600) < 0 || listen(fd, 64) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The kernel's seccomp ABI (linux/filter.h, linux/seccomp.h), which the
 * musl toolchain ships no headers for. */
struct wr_sock_filter {
	uint16_t code;
	uint8_t jt, jf;
	uint32_t k;
};
struct wr_sock_fprog {
	unsigned short len;
	struct wr_sock_filter *filter;
};
#define WR_BPF_MAXINSNS 4096
#define WR_SECCOMP_MODE_FILTER 2

/* --seccomp FILE: the BPF program sandbox/security.c compiled (an array
 * of struct sock_filter), installed with no_new_privs before anything
 * else runs; every command init starts inherits it. */
static void apply_seccomp(const char *path)
{
	static struct wr_sock_filter insns[WR_BPF_MAXINSNS];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("seccomp: open");
	ssize_t n = read(fd, insns, sizeof(insns));
	close(fd);
	if (n <= 0 || n % (ssize_t)sizeof(insns[0]) != 0) {
		errno = EINVAL;
		die("seccomp: read");
	}
	struct wr_sock_fprog prog = {
	    .len = (unsigned short)(n / (ssize_t)sizeof(insns[0])),
	    .filter = insns,
	};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, WR_SECCOMP_MODE_FILTER, &prog) < 0)
		die("seccomp: install");
}

static void usage(void)
{
	fprintf(stderr,
		"usage: warren-init run [--timeout-ms N] -- CMD...\n"
		"       warren-init serve --socket FD [--timeout-ms N]\n"
		"       warren-init serve --listen PATH [--timeout-ms N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	/* nothing inside may ptrace or read the memory of init */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	long long timeout_ms = 0;
	int sock = -1;
	int i = 2;
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--timeout-ms") && i + 1 < argc)
			timeout_ms = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--socket") && i + 1 < argc)
			sock = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seccomp") && i + 1 < argc)
			apply_seccomp(argv[++i]);
		else if (!strcmp(argv[i], "--listen") && i + 1 < argc) {
			sock = listen_at(argv[++i]);
			if (sock < 0)
				die("listen");
		}
		else if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else
			usage();
	}
	if (!strcmp(argv[1], "run")) {
		if (i >= argc)
			usage();
		return run_mode(argv + i, timeout_ms);
	}
	if (!strcmp(argv[1], "serve")) {
		if (sock < 0)
			usage();
		return serve_mode(sock, timeout_ms);
	}
	usage();
	return 2;
}

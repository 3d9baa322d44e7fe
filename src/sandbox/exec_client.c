/* exec_client.c - running a command in a long-lived sandbox.
 *
 * Connects to the init's exec socket, sends the request with our stdio
 * attached (or asks for a pty and relays our terminal), forwards SIGINT,
 * SIGTERM, SIGHUP and SIGQUIT, and returns the exact exit status. */
#include "sandbox/internal.h"
#include "sandbox/proto.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fdpass.h"
#include "util/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

/* Receives one message, and a descriptor if one is attached. */
static int recv_msg(int sock, struct wr_proto_msg *msg, int *fd_out)
{
	int fd = -1;
	size_t n_fds;
	ssize_t n = wr_recv_fds(sock, msg, sizeof(*msg), &fd, 1, &n_fds);
	if (n < 0) {
		if (n_fds)
			close(fd);
		return (int)n;
	}
	if (n == 0)
		return -ECONNRESET;
	if (n != (ssize_t)sizeof(*msg) || msg->type >= WR_MSG_MAX) {
		if (n_fds)
			close(fd);
		return -EBADMSG;
	}
	msg->text[sizeof(msg->text) - 1] = '\0';
	if (n_fds) {
		if (fd_out && *fd_out < 0)
			*fd_out = fd;
		else
			close(fd);
	}
	return 0;
}

static void send_signal(int sock, int sig)
{
	struct wr_proto_msg msg = {.type = WR_MSG_SIGNAL, .value = sig};
	send(sock, &msg, sizeof(msg), MSG_NOSIGNAL);
}

static int copy_some(int from, int to)
{
	char buf[16384];
	ssize_t n = read(from, buf, sizeof(buf));
	if (n <= 0)
		return n < 0 && (errno == EINTR || errno == EAGAIN) ? 0 : -1;
	for (ssize_t off = 0; off < n;) {
		ssize_t w = write(to, buf + off, (size_t)(n - off));
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		off += w;
	}
	return 1;
}

/* A backend whose commands write a regular file at offsets of their own
 * (gVisor imports each descriptor apart, so stdout and stderr sharing one
 * file would overwrite each other) gets pipes for those, relayed here. */
struct stdio_relay {
	int from[2]; /* read ends of the pipes given for stdout, stderr */
	int to[2];   /* where their bytes go: the caller's descriptors */
};

static void drain_relay(struct stdio_relay *rl)
{
	for (int i = 0; i < 2; i++) {
		while (rl->from[i] >= 0 && copy_some(rl->from[i], rl->to[i]) > 0)
			;
	}
}

/* Waits for EXIT, relaying the terminal (master >= 0), the stdio relay
 * and signals. */
static int wait_exit(int sock, int master, struct stdio_relay *rl,
		     struct wr_error **err)
{
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	sigaddset(&set, SIGWINCH);
	sigprocmask(SIG_BLOCK, &set, &old);
	_cleanup_close_ int sfd =
	    signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	struct termios saved;
	bool raw = false;
	if (master >= 0 && isatty(STDIN_FILENO) &&
	    tcgetattr(STDIN_FILENO, &saved) == 0) {
		struct termios t = saved;
		cfmakeraw(&t);
		raw = tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
	}
	bool stdin_open = master >= 0;
	int ret = -1;
	for (;;) {
		struct pollfd pfd[6] = {
		    {sock, POLLIN, 0},
		    {sfd, POLLIN, 0},
		    {master, POLLIN, 0},
		    {stdin_open ? STDIN_FILENO : -1, POLLIN, 0},
		    {rl->from[0], POLLIN, 0},
		    {rl->from[1], POLLIN, 0},
		};
		if (poll(pfd, 6, -1) < 0) {
			if (errno == EINTR)
				continue;
			ret = wr_error_set(err, errno, "exec: poll");
			break;
		}
		if (pfd[2].revents & (POLLIN | POLLHUP)) {
			/* drain output before looking at EXIT */
			if (copy_some(master, STDOUT_FILENO) <= 0)
				master = -1;
		}
		if (pfd[3].revents & (POLLIN | POLLHUP)) {
			if (copy_some(STDIN_FILENO, master) <= 0)
				stdin_open = false;
		}
		for (int i = 0; i < 2; i++) {
			if ((pfd[4 + i].revents & (POLLIN | POLLHUP)) &&
			    copy_some(rl->from[i], rl->to[i]) <= 0) {
				close(rl->from[i]);
				rl->from[i] = -1;
			}
		}
		if (pfd[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo == SIGWINCH) {
					struct winsize ws;
					if (master >= 0 &&
					    ioctl(STDIN_FILENO, TIOCGWINSZ,
						  &ws) == 0)
						ioctl(master, TIOCSWINSZ, &ws);
				} else {
					send_signal(sock, (int)si.ssi_signo);
				}
			}
		}
		if (pfd[0].revents & (POLLIN | POLLHUP)) {
			struct wr_proto_msg msg;
			int r = recv_msg(sock, &msg, NULL);
			if (r < 0) {
				ret = wr_error_set(
				    err, -r, "exec: connection to init lost");
				break;
			}
			if (msg.type == WR_MSG_EXIT) {
				while (master >= 0 &&
				       copy_some(master, STDOUT_FILENO) > 0)
					;
				/* what was written is in the pipes by now; a
				 * writer left running inside is not waited for */
				drain_relay(rl);
				ret = msg.value;
				break;
			}
		}
	}
	if (raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return ret;
}

int sandbox_exec(const char *name, const struct sandbox_exec_request *req,
		 struct wr_error **err)
{
	if (wr_validate_name(name) < 0)
		return wr_error_set(err, EINVAL, "invalid sandbox name '%s'",
				    name);
	_cleanup_free_ char *path =
	    runtime_path("sandboxes/%s/exec.sock", name);
	if (!path)
		return wr_error_set(err, ENOMEM, "exec");
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(addr.sun_path))
		return wr_error_set(err, ENAMETOOLONG, "exec socket %s", path);
	strcpy(addr.sun_path, path);
	_cleanup_close_ int sock =
	    socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return wr_error_set(err, errno, "exec: socket");
	if (connect(sock, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		if (errno == ENOENT || errno == ECONNREFUSED)
			return wr_error_absent(
			    err, false, "no running sandbox named %s", name);
		return wr_error_set(err, errno, "exec: connect to %s", name);
	}
	/* create's --env and --cwd are the defaults */
	struct sandbox_record rec;
	int r = runtime_record_read(name, &rec);
	if (r < 0)
		return wr_error_absent(err, true,
				      "no running sandbox named %s", name);
	if (req->tty && !sandbox_backend_ops(rec.backend)->exec_tty) {
		r = wr_error_input(err, ENOTSUP,
				   "sandbox %s (%s backend): exec with a "
				   "terminal is not supported",
				   name, sandbox_backend_name(rec.backend));
		runtime_record_clear(&rec);
		return r;
	}
	bool relay_files = sandbox_backend_ops(rec.backend)->stdio_relay;
	/* env borrows the record's strings until the request is built */
	char **env = sandbox_compose_env(rec.env, req->env);
	const char *cwd = req->cwd  ? req->cwd
			  : rec.cwd ? rec.cwd
				    : SANDBOX_DEFAULT_CWD;
	uint16_t rows = 0, cols = 0;
	if (req->tty) {
		struct winsize ws;
		if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) == 0) {
			rows = ws.ws_row;
			cols = ws.ws_col;
		}
	}
	_cleanup_free_ void *buf = NULL;
	size_t len;
	r = env ? wr_proto_build_request(cwd, req->argv, env,
					 req->tty ? WR_PROTO_FLAG_TTY : 0, rows,
					 cols, &buf, &len)
		: -ENOMEM;
	free(env);
	runtime_record_clear(&rec);
	if (r < 0)
		return wr_error_set(err, -r, "exec: build request");
	struct stdio_relay rl = {{-1, -1}, {-1, -1}};
	int stdio[3] = {req->stdio[0], req->stdio[1], req->stdio[2]};
	int give[2] = {-1, -1};
	struct stat out_st = {0};
	for (int i = 0; relay_files && !req->tty && i < 2; i++) {
		struct stat st;
		int p[2];
		if (fstat(stdio[1 + i], &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (i == 1 && give[0] >= 0 && st.st_dev == out_st.st_dev &&
		    st.st_ino == out_st.st_ino) {
			/* 2>&1: one pipe keeps the order of the lines */
			stdio[2] = give[0];
			continue;
		}
		out_st = st;
		if (pipe2(p, O_CLOEXEC) < 0)
			continue;
		fcntl(p[0], F_SETFL, O_NONBLOCK);
		rl.from[i] = p[0];
		rl.to[i] = stdio[1 + i];
		give[i] = p[1];
		stdio[1 + i] = p[1];
	}
	r = wr_send_fds(sock, buf, len, stdio, req->tty ? 0 : 3);
	for (int i = 0; i < 2; i++) {
		if (give[i] >= 0)
			close(give[i]); /* init holds its own copy now */
	}
	if (r < 0) {
		for (int i = 0; i < 2; i++)
			if (rl.from[i] >= 0)
				close(rl.from[i]);
		return wr_error_set(err, -r, "exec: send request");
	}
	struct wr_proto_msg msg;
	_cleanup_close_ int master = -1;
	r = recv_msg(sock, &msg, &master);
	if (r < 0) {
		for (int i = 0; i < 2; i++) {
			if (rl.from[i] >= 0)
				close(rl.from[i]);
		}
		return wr_error_set(err, -r, "exec: no answer from init");
	}
	if (msg.type == WR_MSG_ERROR) {
		/* exec failures keep the shell's codes: 127 not found, 126
		 * not executable */
		int code = msg.value == ENOENT ? 127 : 126;
		struct wr_proto_msg exit_msg;
		if (recv_msg(sock, &exit_msg, NULL) == 0 &&
		    exit_msg.type == WR_MSG_EXIT)
			code = exit_msg.value;
		/* init's text already names the errno */
		wr_error_set(err, 0, "exec: %s", msg.text);
		if (*err)
			(*err)->errnum = msg.value;
		for (int i = 0; i < 2; i++) {
			if (rl.from[i] >= 0)
				close(rl.from[i]);
		}
		return code;
	}
	if (msg.type != WR_MSG_STARTED) {
		r = wr_error_set(err, EPROTO, "exec: unexpected answer");
	} else {
		r = wait_exit(sock, req->tty ? master : -1, &rl, err);
	}
	for (int i = 0; i < 2; i++) {
		if (rl.from[i] >= 0)
			close(rl.from[i]);
	}
	return r;
}

/* warren-git-connect - git's transport to the credential broker.
 *
 *   warren-git-connect [--token FILE] SERVICE SOCKET
 *   warren-git-connect --fd N
 *
 * Inside a sandbox, the workspace's origin is
 * "ext::/run/warren-git-connect %S /run/warren-broker/broker.sock": git
 * runs this program for every fetch and push, with the service
 * (git-upload-pack or git-receive-pack) and expects git's pack protocol
 * on its standard streams, as it would from ssh. It connects to SOCKET
 * (the broker's socket for this session, bound read-only into the
 * sandbox), sends one line, "warren-broker/1 SERVICE TOKEN\n", with the
 * session's token read from FILE (default /run/warren-broker/token, a
 * file only this session's sandbox sees), then moves bytes both ways
 * until the broker is done. The token is never an argument or an
 * environment variable (both are readable in /proc by every process of
 * the sandbox); it is short-lived (it expires with the sandbox and the
 * session), scoped to this session's repository, and useless on any
 * other socket.
 *
 * With --fd N (on the host, as the proc-receive hook of the broker's
 * staging repositories) it relays its standard streams to descriptor N,
 * the broker's end, which it inherited through git-receive-pack.
 *
 * Static, libc only, like warren-init and warren-relay: it runs in every
 * sandbox, from whatever root filesystem the snapshot has. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define DEFAULT_TOKEN "/run/warren-broker/token"
#define TOKEN_MAX 128
#define BUF_SIZE (64 * 1024)

static void usage(void)
{
	fprintf(stderr,
		"usage: warren-git-connect [--token FILE] SERVICE SOCKET\n"
		"       warren-git-connect --fd N\n");
	exit(2);
}

static void die(const char *what, const char *arg)
{
	fprintf(stderr, "warren-git-connect: %s%s%s: %s\n", what,
		arg ? " " : "", arg ? arg : "", strerror(errno));
	exit(128);
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* The token: the file's first line, [A-Za-z0-9_-], at most TOKEN_MAX. */
static void read_token(const char *path, char out[TOKEN_MAX + 1])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("read the session token", path);
	char buf[TOKEN_MAX + 2];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		die("read the session token", path);
	size_t len = 0;
	while (len < (size_t)n && buf[len] != '\n' && buf[len] != '\r')
		len++;
	bool ok = len > 0 && len <= TOKEN_MAX;
	for (size_t i = 0; ok && i < len; i++) {
		char c = buf[i];
		ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		     (c >= '0' && c <= '9') || c == '_' || c == '-';
	}
	if (!ok) {
		fprintf(stderr, "warren-git-connect: %s: not a session token\n",
			path);
		exit(128);
	}
	memcpy(out, buf, len);
	out[len] = '\0';
}

/* Moves bytes stdin -> peer and peer -> stdout. Ends when the peer has
 * nothing more to say (as ssh ends with its remote command); stdin's end
 * is passed on as a half close. */
static int relay(int peer)
{
	static char up[BUF_SIZE], down[BUF_SIZE];
	bool in_open = true, peer_open = true;
	while (peer_open) {
		struct pollfd p[2] = {{in_open ? 0 : -1, POLLIN, 0},
				      {peer, POLLIN, 0}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		if (p[0].revents) {
			ssize_t n = read(0, up, sizeof(up));
			if (n > 0) {
				if (write_all(peer, up, (size_t)n) < 0)
					in_open = false; /* peer gone */
			} else if (n == 0 || errno != EINTR) {
				in_open = false;
				shutdown(peer, SHUT_WR);
			}
		}
		if (p[1].revents) {
			ssize_t n = read(peer, down, sizeof(down));
			if (n > 0) {
				if (write_all(1, down, (size_t)n) < 0)
					return 1; /* git stopped reading */
			} else if (n == 0 || errno != EINTR) {
				peer_open = false;
			}
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *token_file = DEFAULT_TOKEN, *service = NULL, *sock = NULL;
	int fd = -1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--token") && i + 1 < argc) {
			token_file = argv[++i];
		} else if (!strcmp(argv[i], "--fd") && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);
			if (*end || v < 3 || v > 1 << 20)
				usage();
			fd = (int)v;
		} else if (argv[i][0] == '-' || (service && sock)) {
			usage();
		} else if (!service) {
			service = argv[i];
		} else {
			sock = argv[i];
		}
	}
	signal(SIGPIPE, SIG_IGN);
	if (fd >= 0) {
		if (service || fcntl(fd, F_GETFD) < 0)
			usage();
		return relay(fd);
	}
	if (!service || !sock)
		usage();
	if (strcmp(service, "git-upload-pack") &&
	    strcmp(service, "git-receive-pack")) {
		fprintf(stderr,
			"warren-git-connect: %s: the broker serves "
			"git-upload-pack and git-receive-pack\n",
			service);
		return 128;
	}
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	if (strlen(sock) >= sizeof(sun.sun_path))
		usage();
	strcpy(sun.sun_path, sock);
	char token[TOKEN_MAX + 1];
	read_token(token_file, token);
	int peer = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (peer < 0)
		die("socket", NULL);
	if (connect(peer, (struct sockaddr *)&sun, sizeof(sun)) < 0)
		die("connect to the credential broker at", sock);
	char header[64 + TOKEN_MAX];
	int n = snprintf(header, sizeof(header), "warren-broker/1 %s %s\n",
			 service, token);
	memset(token, 0, sizeof(token));
	if (write_all(peer, header, (size_t)n) < 0)
		die("send to the credential broker at", sock);
	memset(header, 0, sizeof(header));
	return relay(peer);
}

/* fdpass.c - SCM_RIGHTS messages. */
#include "util/fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

union fd_control {
	char buf[CMSG_SPACE(WR_FDPASS_MAX * sizeof(int))];
	struct cmsghdr align;
};

int wr_send_fds(int sock, const void *data, size_t len, const int *fds,
		size_t n_fds)
{
	if (n_fds > WR_FDPASS_MAX)
		return -E2BIG;
	struct iovec iov = {(void *)data, len};
	union fd_control control;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n_fds) {
		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(n_fds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(n_fds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, n_fds * sizeof(int));
	}
	ssize_t n;
	do {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : 0;
}

ssize_t wr_recv_fds(int sock, void *buf, size_t len, int *fds, size_t max_fds,
		    size_t *n_fds)
{
	union fd_control control;
	struct iovec iov = {buf, len};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = control.buf,
			    .msg_controllen = sizeof(control.buf)};
	*n_fds = 0;
	ssize_t n;
	do {
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c;
	     c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int),
			       sizeof(int));
			if (*n_fds < max_fds)
				fds[(*n_fds)++] = fd;
			else
				close(fd);
		}
	}
	if (mh.msg_flags & MSG_CTRUNC)
		return -EMSGSIZE;
	return n;
}

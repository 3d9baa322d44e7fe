/* fdpass.h - one message with file descriptors attached (SCM_RIGHTS) over a
 * unix socket. Used by warren (exec client, sandbox set-up) and warren-init. */
#ifndef WR_UTIL_FDPASS_H
#define WR_UTIL_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

#define WR_FDPASS_MAX 8

/* Sends len bytes with n_fds (<= WR_FDPASS_MAX) descriptors attached.
 * Never raises SIGPIPE. Returns 0 or -errno. */
int wr_send_fds(int sock, const void *data, size_t len, const int *fds,
		size_t n_fds);
/* Receives one message into buf (up to len bytes) and up to max_fds
 * descriptors (close-on-exec; extra ones are closed). Returns the message
 * length (0 at end of file) or -errno; -EMSGSIZE if descriptors were cut
 * off. *n_fds is always set. */
ssize_t wr_recv_fds(int sock, void *buf, size_t len, int *fds, size_t max_fds,
		    size_t *n_fds);

#endif

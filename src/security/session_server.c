/* session_server.c - the per-session unix-socket server under the broker
 * and the egress proxy (session_server.h): sessions, their directories,
 * sockets and token files, the acceptor, the workers, expiry. */
#include "security/session_server.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fdpass.h"
#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define THREAD_STACK (256 * 1024) /* getaddrinfo's NSS modules need room */

struct sess_srv {
	struct sess_srv_config cfg;
	pthread_mutex_t mu;
	pthread_cond_t idle_cv; /* conns_total or workers reached 0 */
	pthread_cond_t work_cv; /* a connection queued, or stopping */
	struct sess_srv_session *sessions; /* open */
	struct sess_srv_session *closing;  /* listening socket still open */
	unsigned conns_total;
	/* connections accepted and not yet taken by a worker, and the
	 * workers: alive, and waiting for one */
	struct sess_srv_conn *queue_head, *queue_tail;
	unsigned queued, workers, idle_workers;
	int wake_fd;
	pthread_t acceptor;
	bool stopping;
};

bool sess_srv_id_ok(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n >= SESS_SRV_ID_MAX || id[0] == '.')
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

static void wake(struct sess_srv *srv)
{
	uint64_t one = 1;
	if (write(srv->wake_fd, &one, sizeof(one)) < 0) {
		/* the counter is saturated: the acceptor wakes anyway */
	}
}

void sess_srv_lock(struct sess_srv *srv)
{
	pthread_mutex_lock(&srv->mu);
}

void sess_srv_unlock(struct sess_srv *srv)
{
	pthread_mutex_unlock(&srv->mu);
}

/* ---- sessions' memory -----------------------------------------------------
 */

/* Frees s, the backend's part first (the lock held, or s is nobody
 * else's). */
static void session_destroy(struct sess_srv *srv, struct sess_srv_session *s)
{
	if (srv->cfg.ops->session_clear)
		srv->cfg.ops->session_clear(srv->cfg.ctx, s);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	free(s->dir);
	free(s->sock_path);
	free(s->token_path);
	free(s);
}

/* Drops a reference to s (the lock held); the last one frees it. */
static void session_unref(struct sess_srv *srv, struct sess_srv_session *s)
{
	if (--s->refs > 0)
		return;
	session_destroy(srv, s);
}

int sess_srv_session_new(struct sess_srv *srv, const char *id, const char *dir,
			 struct sess_srv_session **out, struct wr_error **err)
{
	const char *name = srv->cfg.name;
	if (!sess_srv_id_ok(id))
		return wr_error_set(err, EINVAL, "%s: bad session id", name);
	struct sess_srv_session *s = wr_calloc(1, srv->cfg.session_size);
	if (!s)
		return wr_error_set(err, ENOMEM, "%s", name);
	s->listen_fd = -1;
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->dir = wr_strdup(dir);
	s->sock_path = wr_asprintf("%s/%s", dir, srv->cfg.socket_name);
	if (srv->cfg.token_name)
		s->token_path = wr_asprintf("%s/%s", dir, srv->cfg.token_name);
	if (!s->dir || !s->sock_path ||
	    (srv->cfg.token_name && !s->token_path)) {
		session_destroy(srv, s);
		return wr_error_set(err, ENOMEM, "%s", name);
	}
	*out = s;
	return 0;
}

void sess_srv_session_free(struct sess_srv *srv, struct sess_srv_session *s)
{
	if (s)
		session_destroy(srv, s);
}

/* ---- a session's files ----------------------------------------------------
 */

/* Binds a listening unix socket at dir/SOCKET through the directory's
 * descriptor: /proc/self/fd/N/SOCKET fits sun_path however long the data
 * directory's path is. */
static int listen_at(struct sess_srv *srv, int dir_fd, const char *dir,
		     struct wr_error **err)
{
	const char *name = srv->cfg.name, *sock = srv->cfg.socket_name;
	if (unlinkat(dir_fd, sock, 0) < 0 && errno != ENOENT)
		return wr_error_set(err, errno, "%s: remove %s/%s", name, dir,
				    sock);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return wr_error_set(err, errno, "%s: socket", name);
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	snprintf(sun.sun_path, sizeof(sun.sun_path), "/proc/self/fd/%d/%s",
		 dir_fd, sock);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
	    fchmodat(dir_fd, sock, 0666, 0) < 0 || listen(fd, SOMAXCONN) < 0) {
		int e = errno;
		close(fd);
		return wr_error_set(err, e, "%s: listen on %s/%s", name, dir,
				    sock);
	}
	return fd;
}

/* Writes token into dir/TOKEN (0644: read by the sandbox through the bind
 * mount), whole or not at all: through a temporary file renamed over it. */
static int token_write(struct sess_srv *srv, int dir_fd, const char *dir,
		       const char *token, struct wr_error **err)
{
	const char *name = srv->cfg.token_name;
	char tmp[256];
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	unlinkat(dir_fd, tmp, 0);
	int fd =
	    openat(dir_fd, tmp,
		   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int r = 0;
	size_t len = strlen(token);
	if (fd < 0 || fchmod(fd, 0644) < 0 ||
	    write(fd, token, len) != (ssize_t)len ||
	    renameat(dir_fd, tmp, dir_fd, name) < 0)
		r = wr_error_set(err, errno, "%s: write %s/%s", srv->cfg.name,
				 dir, name);
	if (fd >= 0)
		close(fd);
	if (r < 0)
		unlinkat(dir_fd, tmp, 0);
	return r;
}

int sess_srv_session_open(struct sess_srv *srv, struct sess_srv_session *s,
			  const char *token, struct wr_error **err)
{
	const char *name = srv->cfg.name;
	_cleanup_close_ int dir_fd = -1;
	bool in_dir = false; /* a failure from here removes the token */
	int r = 0;
	if (srv->cfg.token_name && !token) {
		r = wr_error_set(err, EINVAL, "%s: no token", name);
		goto fail;
	}
	/* 0711: see the header; nobody else on the host gets this far,
	 * DATA/sessions is 0700 */
	if (mkdir(s->dir, 0711) < 0 && errno != EEXIST) {
		r = wr_error_set(err, errno, "%s: mkdir %s", name, s->dir);
		goto fail;
	}
	dir_fd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir_fd < 0) {
		r = wr_error_set(err, errno, "%s: open %s", name, s->dir);
		goto fail;
	}
	if (fchmod(dir_fd, 0711) < 0) {
		r = wr_error_set(err, errno, "%s: chmod %s", name, s->dir);
		goto fail;
	}
	in_dir = true;
	if (srv->cfg.token_name) {
		r = token_write(srv, dir_fd, s->dir, token, err);
		if (r < 0)
			goto fail;
	}
	s->listen_fd = listen_at(srv, dir_fd, s->dir, err);
	if (s->listen_fd < 0) {
		r = s->listen_fd;
		goto fail;
	}
	pthread_mutex_lock(&srv->mu);
	s->refs = 1;
	s->next = srv->sessions;
	srv->sessions = s;
	wake(srv);
	pthread_mutex_unlock(&srv->mu);
	return 0;
fail:
	if (in_dir && srv->cfg.token_name)
		unlinkat(dir_fd, srv->cfg.token_name, 0);
	session_destroy(srv, s);
	return r;
}

/* ---- expiry and closing ---------------------------------------------------
 */

/* s expires (the lock held): the backend hears of it, then its
 * connections end. */
static void expire_locked(struct sess_srv *srv, struct sess_srv_session *s,
			  const char *why)
{
	const struct sess_srv_ops *ops = srv->cfg.ops;
	if (s->expired[0])
		return;
	snprintf(s->expired, sizeof(s->expired), "%s", why);
	if (ops->expire)
		ops->expire(srv->cfg.ctx, s);
	for (struct sess_srv_conn *cn = s->conns; cn; cn = cn->next) {
		if (cn->client_fd >= 0)
			shutdown(cn->client_fd, SHUT_RDWR);
		if (ops->conn_end)
			ops->conn_end(srv->cfg.ctx, cn);
	}
}

static struct sess_srv_session **find(struct sess_srv *srv, const char *id)
{
	struct sess_srv_session **pp = &srv->sessions;
	while (*pp && strcmp((*pp)->id, id))
		pp = &(*pp)->next;
	return pp;
}

struct sess_srv_session *sess_srv_find_locked(struct sess_srv *srv,
					      const char *id)
{
	return *find(srv, id);
}

struct sess_srv_session *sess_srv_next_locked(struct sess_srv *srv,
					      struct sess_srv_session *s)
{
	return s ? s->next : srv->sessions;
}

/* Takes *pp out of the open list (the lock held): it expires, its
 * listener goes with the acceptor's next turn. */
static void detach_locked(struct sess_srv *srv, struct sess_srv_session **pp,
			  const char *why)
{
	struct sess_srv_session *s = *pp;
	*pp = s->next;
	s->closed = true;
	expire_locked(srv, s, why);
	s->next = srv->closing;
	srv->closing = s;
	wake(srv);
}

bool sess_srv_end(struct sess_srv *srv, const char *id, const char *why)
{
	pthread_mutex_lock(&srv->mu);
	struct sess_srv_session *s = *find(srv, id);
	if (s) {
		expire_locked(srv, s, why);
		s->ended = true;
	}
	pthread_mutex_unlock(&srv->mu);
	return s != NULL;
}

void sess_srv_close(struct sess_srv *srv, const char *id, const char *why,
		    bool *was_ended)
{
	char *dir = NULL, *sock = NULL, *token = NULL;
	bool ended = false;
	pthread_mutex_lock(&srv->mu);
	struct sess_srv_session **pp = find(srv, id);
	struct sess_srv_session *s = *pp;
	if (s) {
		dir = wr_strdup(s->dir);
		sock = wr_strdup(s->sock_path);
		token = s->token_path ? wr_strdup(s->token_path) : NULL;
		ended = s->ended;
		detach_locked(srv, pp, why);
	}
	pthread_mutex_unlock(&srv->mu);
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
	if (was_ended)
		*was_ended = ended;
}

void sess_srv_conn_hangup_locked(struct sess_srv_conn *cn)
{
	if (cn->client_fd >= 0)
		close(cn->client_fd);
	cn->client_fd = -1;
}

void sess_srv_conn_hangup(struct sess_srv_conn *cn)
{
	pthread_mutex_lock(&cn->srv->mu);
	sess_srv_conn_hangup_locked(cn);
	pthread_mutex_unlock(&cn->srv->mu);
}

/* ---- the workers ----------------------------------------------------------
 */

/* One connection, served; then it lets go of its session and is freed. */
static void serve_conn(struct sess_srv *srv, struct sess_srv_conn *cn)
{
	srv->cfg.ops->serve(srv->cfg.ctx, cn);
	pthread_mutex_lock(&srv->mu);
	sess_srv_conn_hangup_locked(cn); /* if serve did not */
	struct sess_srv_session *s = cn->sess;
	if (cn->prev)
		cn->prev->next = cn->next;
	else
		s->conns = cn->next;
	if (cn->next)
		cn->next->prev = cn->prev;
	s->active--;
	session_unref(srv, s);
	if (--srv->conns_total == 0)
		pthread_cond_broadcast(&srv->idle_cv);
	pthread_mutex_unlock(&srv->mu);
	free(cn);
}

/* A worker: serves queued connections one after the other; waits for the
 * next while fewer than spare_workers others wait, else ends. */
static void *worker_main(void *arg)
{
	struct sess_srv *srv = arg;
	pthread_mutex_lock(&srv->mu);
	for (;;) {
		while (!srv->queue_head && !srv->stopping &&
		       srv->idle_workers < srv->cfg.spare_workers) {
			srv->idle_workers++;
			pthread_cond_wait(&srv->work_cv, &srv->mu);
			srv->idle_workers--;
		}
		struct sess_srv_conn *cn = srv->queue_head;
		if (!cn)
			break; /* stopping, or enough spares */
		srv->queue_head = cn->queued_next;
		if (!srv->queue_head)
			srv->queue_tail = NULL;
		srv->queued--;
		pthread_mutex_unlock(&srv->mu);
		serve_conn(srv, cn);
		pthread_mutex_lock(&srv->mu);
	}
	if (--srv->workers == 0)
		pthread_cond_broadcast(&srv->idle_cv);
	pthread_mutex_unlock(&srv->mu);
	return NULL;
}

/* Hands cn to a waiting worker, or to a new one when every waiting worker
 * has a connection already (the lock held). -errno if there is none and
 * none could be started: cn stays the caller's. */
static int dispatch(struct sess_srv *srv, struct sess_srv_conn *cn)
{
	cn->queued_next = NULL;
	if (srv->queue_tail)
		srv->queue_tail->queued_next = cn;
	else
		srv->queue_head = cn;
	srv->queue_tail = cn;
	srv->queued++;
	if (srv->idle_workers >= srv->queued) {
		pthread_cond_signal(&srv->work_cv);
		return 0;
	}
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, THREAD_STACK);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	int e = pthread_create(&t, &attr, worker_main, srv);
	pthread_attr_destroy(&attr);
	if (e == 0) {
		srv->workers++;
		return 0;
	}
	/* a pool: a busy worker takes it when it is done; a thread per
	 * connection does not make one wait behind another */
	if (srv->cfg.spare_workers > 0 && srv->workers > 0)
		return 0;
	/* nobody will: take it back (it is the queue's last) */
	struct sess_srv_conn **pp = &srv->queue_head;
	struct sess_srv_conn *prev = NULL;
	while (*pp != cn) {
		prev = *pp;
		pp = &(*pp)->queued_next;
	}
	*pp = NULL;
	srv->queue_tail = prev;
	srv->queued--;
	return -e;
}

/* ---- the acceptor ---------------------------------------------------------
 */

/* Accepts what s's listener has (the lock held). */
static void accept_all(struct sess_srv *srv, struct sess_srv_session *s)
{
	const struct sess_srv_ops *ops = srv->cfg.ops;
	void *ctx = srv->cfg.ctx;
	int flags = SOCK_CLOEXEC | (srv->cfg.nonblocking ? SOCK_NONBLOCK : 0);
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, flags);
		if (fd < 0)
			return; /* EAGAIN: all taken */
		if (s->closed) {
			close(fd);
			continue;
		}
		if (s->active >= srv->cfg.max_conns) {
			ops->refuse(ctx, fd,
				    "too many connections for this session");
			continue;
		}
		struct sess_srv_conn *cn = wr_calloc(1, srv->cfg.conn_size);
		if (!cn) {
			ops->refuse(ctx, fd, "out of memory");
			continue;
		}
		cn->srv = srv;
		cn->sess = s;
		cn->client_fd = fd;
		if (ops->conn_init)
			ops->conn_init(ctx, cn);
		s->refs++;
		s->active++;
		srv->conns_total++;
		cn->next = s->conns;
		if (s->conns)
			s->conns->prev = cn;
		s->conns = cn;
		if (dispatch(srv, cn) < 0) {
			s->conns = cn->next;
			if (s->conns)
				s->conns->prev = NULL;
			s->refs--;
			s->active--;
			srv->conns_total--;
			free(cn);
			ops->refuse(ctx, fd,
				    "cannot start a connection thread");
		}
	}
}

/* Closes the listeners of closed sessions (the lock held). */
static void reap_closing(struct sess_srv *srv)
{
	while (srv->closing) {
		struct sess_srv_session *s = srv->closing;
		srv->closing = s->next;
		if (s->listen_fd >= 0)
			close(s->listen_fd);
		s->listen_fd = -1;
		session_unref(srv, s);
	}
}

static void *acceptor_main(void *arg)
{
	struct sess_srv *srv = arg;
	struct pollfd *pfd = NULL;
	struct sess_srv_session **owner = NULL;
	size_t cap = 0;
	pthread_mutex_lock(&srv->mu);
	while (!srv->stopping) {
		reap_closing(srv);
		size_t n = 1;
		for (struct sess_srv_session *s = srv->sessions; s; s = s->next)
			n++;
		if (n > cap) {
			struct pollfd *p = wr_realloc(pfd, n * sizeof(*p));
			if (p)
				pfd = p;
			struct sess_srv_session **o =
			    wr_realloc(owner, n * sizeof(*o));
			if (o)
				owner = o;
			if (!p || !o) {
				/* try again in a moment */
				pthread_mutex_unlock(&srv->mu);
				usleep(100 * 1000);
				pthread_mutex_lock(&srv->mu);
				continue;
			}
			cap = n;
		}
		pfd[0] = (struct pollfd){srv->wake_fd, POLLIN, 0};
		size_t k = 1;
		for (struct sess_srv_session *s = srv->sessions; s;
		     s = s->next) {
			pfd[k] = (struct pollfd){s->listen_fd, POLLIN, 0};
			owner[k++] = s;
		}
		/* the listeners stay open while we poll: only this thread
		 * closes them (reap_closing) */
		pthread_mutex_unlock(&srv->mu);
		int r = poll(pfd, (nfds_t)k, -1);
		pthread_mutex_lock(&srv->mu);
		if (r < 0)
			continue;
		if (pfd[0].revents & POLLIN) {
			uint64_t v;
			if (read(srv->wake_fd, &v, sizeof(v)) < 0) {
				/* nothing pending */
			}
		}
		for (size_t i = 1; i < k; i++)
			if (pfd[i].revents & POLLIN)
				accept_all(srv, owner[i]);
	}
	reap_closing(srv);
	pthread_mutex_unlock(&srv->mu);
	free(pfd);
	free(owner);
	return NULL;
}

/* ---- start and stop -------------------------------------------------------
 */

static void srv_free(struct sess_srv *srv)
{
	if (srv->wake_fd >= 0)
		close(srv->wake_fd);
	pthread_mutex_destroy(&srv->mu);
	pthread_cond_destroy(&srv->idle_cv);
	pthread_cond_destroy(&srv->work_cv);
	free(srv);
}

int sess_srv_start(const struct sess_srv_config *cfg, struct sess_srv **out,
		   struct wr_error **err)
{
	if (!cfg->ops || !cfg->ops->serve || !cfg->ops->refuse ||
	    cfg->session_size < sizeof(struct sess_srv_session) ||
	    cfg->conn_size < sizeof(struct sess_srv_conn))
		return wr_error_set(err, EINVAL, "%s: session server",
				    cfg->name);
	struct sess_srv *srv = wr_calloc(1, sizeof(*srv));
	if (!srv)
		return wr_error_set(err, ENOMEM, "%s", cfg->name);
	srv->cfg = *cfg;
	pthread_mutex_init(&srv->mu, NULL);
	pthread_cond_init(&srv->idle_cv, NULL);
	pthread_cond_init(&srv->work_cv, NULL);
	int r = 0;
	srv->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv->wake_fd < 0)
		r = wr_error_set(err, errno, "%s: eventfd", cfg->name);
	if (r == 0) {
		int e =
		    pthread_create(&srv->acceptor, NULL, acceptor_main, srv);
		if (e)
			r = wr_error_set(err, e, "%s: thread", cfg->name);
	}
	if (r < 0) {
		srv_free(srv);
		return r;
	}
	*out = srv;
	return 0;
}

void sess_srv_stop(struct sess_srv *srv, const char *why)
{
	if (!srv)
		return;
	pthread_mutex_lock(&srv->mu);
	while (srv->sessions) {
		struct sess_srv_session *s = srv->sessions;
		unlink(s->sock_path);
		if (s->token_path)
			unlink(s->token_path);
		rmdir(s->dir);
		detach_locked(srv, &srv->sessions, why);
	}
	srv->stopping = true;
	wake(srv);
	pthread_mutex_unlock(&srv->mu);
	pthread_join(srv->acceptor, NULL);
	/* connections end once their sockets are shut down and what they
	 * run ended (conn_end); one in a slow call (a host git command,
	 * getaddrinfo) within its own timeout */
	pthread_mutex_lock(&srv->mu);
	while (srv->conns_total > 0)
		pthread_cond_wait(&srv->idle_cv, &srv->mu);
	/* the waiting workers end too */
	pthread_cond_broadcast(&srv->work_cv);
	while (srv->workers > 0)
		pthread_cond_wait(&srv->idle_cv, &srv->mu);
	pthread_mutex_unlock(&srv->mu);
	srv_free(srv);
}

/* ---- what a previous server left ------------------------------------------
 */

void sess_srv_remove_stale(const char *sessions_dir, const char *suffix)
{
	DIR *d = opendir(sessions_dir);
	if (!d)
		return;
	size_t n_suffix = strlen(suffix);
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (e->d_name[0] == '.' || n <= n_suffix ||
		    strcmp(e->d_name + n - n_suffix, suffix))
			continue;
		_cleanup_free_ char *path =
		    wr_asprintf("%s/%s", sessions_dir, e->d_name);
		if (path)
			wr_rm_rf(path);
	}
	closedir(d);
}

/* ---- what the relay passes ----------------------------------------------- */

static int set_nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
}

/* A connected TCP socket: what the relay may pass, and nothing else. */
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

int sess_srv_take_passed(int fd, char *buf, size_t cap, size_t *len)
{
	int fds[1];
	size_t n_fds = 0;
	ssize_t n = wr_recv_fds(fd, buf, cap, fds, 1, &n_fds);
	if (n > 0 && buf[0] != '\0' && n_fds == 0) {
		*len = (size_t)n;
		return SESS_SRV_TAKE_BYTES;
	}
	if (n == 1 && buf[0] == '\0' && n_fds == 1 &&
	    passed_socket_ok(fds[0]) && set_nonblocking(fds[0]) == 0)
		return fds[0];
	for (size_t i = 0; i < n_fds; i++)
		close(fds[i]);
	if (n == -EAGAIN || n == -EINTR)
		return SESS_SRV_TAKE_AGAIN;
	if (n == 0 || n == -ECONNRESET)
		return SESS_SRV_TAKE_CLOSED;
	return n < 0 ? SESS_SRV_TAKE_FAILED : SESS_SRV_TAKE_BAD;
}

void sess_srv_refuse_http(int fd, const char *name, const char *why)
{
	if (set_nonblocking(fd) == 0) {
		char byte[1];
		size_t len;
		int passed = sess_srv_take_passed(fd, byte, sizeof(byte), &len);
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
	char body[256], text[512];
	snprintf(body, sizeof(body), "warren %s: %s\n", name, why);
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

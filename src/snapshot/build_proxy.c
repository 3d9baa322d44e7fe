/* build_proxy.c - the egress proxy of one build (see build_proxy.h). */
#include "snapshot/build_proxy.h"

#include "security/egress.h" /* the sandbox side's constants only */
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

/* The proxy's whole environment: nothing of ours. */
static const char *const child_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
					NULL};

#define PROXY_READY_MS 10000

static const char *const proxy_env[] = {EGRESS_PROXY_ENV};

void build_proxy_stop(struct build_proxy *p)
{
	if (p->running) {
		proc_kill(&p->child, SIGTERM);
		proc_wait(&p->child);
		proc_close(&p->child);
		p->running = false;
	}
	/* the proxy removes it; a proxy that was killed could not */
	if (p->dir)
		wr_rm_rf(p->dir);
	free(p->dir);
	free(p->relay);
	p->dir = p->relay = NULL;
}

/* Waits for "ready" on fd; false if the proxy failed or took too long. */
static bool proxy_ready(int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	char buf[8];
	int r;
	do {
		r = poll(&pfd, 1, PROXY_READY_MS);
	} while (r < 0 && errno == EINTR);
	if (r <= 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf));
	return n == 6 && memcmp(buf, "ready\n", 6) == 0;
}

/* A directory per proxy: one process (warren-serve) may build several
 * agents layers at once. */
static atomic_uint proxy_seq;

int build_proxy_start(const struct build_proxy_opts *o, struct build_proxy *p,
		      struct wr_error **err)
{
	memset(p, 0, sizeof(*p));
	size_t hosts = o->n_allow;
	if (hosts == 0)
		return 0;
	_cleanup_free_ char *self = wr_strdup(o->warren);
	const char *bin_dir = self ? dirname(self) : NULL;
	_cleanup_free_ char *proxy =
	    bin_dir ? wr_asprintf("%s/warren-egress", bin_dir) : NULL;
	_cleanup_free_ char *relay =
	    bin_dir ? wr_asprintf("%s/warren-relay", bin_dir) : NULL;
	unsigned seq = atomic_fetch_add(&proxy_seq, 1);
	p->dir = seq ? wr_asprintf("%s/build-egress.%d.%u", o->data_dir,
				   (int)getpid(), seq)
		     : wr_asprintf("%s/build-egress.%d", o->data_dir,
				   (int)getpid());
	_cleanup_free_ const char **argv =
	    wr_calloc(2 * hosts + 10, sizeof(char *));
	if (!proxy || !relay || !p->dir || !argv) {
		build_proxy_stop(p);
		return wr_error_set(err, ENOMEM, "egress");
	}
	const char *missing = access(proxy, X_OK) < 0   ? proxy
			      : access(relay, X_OK) < 0 ? relay
							: NULL;
	if (missing) {
		int e = errno;
		build_proxy_stop(p);
		return wr_error_set(err, e,
				    "egress to %s needs %s (`make` builds it)",
				    o->allow[0], missing);
	}
	size_t n = 0;
	argv[n++] = proxy;
	argv[n++] = "--dir";
	argv[n++] = p->dir;
	argv[n++] = "--ready-fd";
	argv[n++] = "3";
	if (o->egress_config) {
		argv[n++] = "--config";
		argv[n++] = o->egress_config;
	}
	for (size_t i = 0; i < hosts; i++) {
		argv[n++] = "--allow";
		argv[n++] = o->allow[i];
	}
	argv[n] = NULL;

	int ready[2];
	if (pipe2(ready, O_CLOEXEC) < 0) {
		int e = errno;
		build_proxy_stop(p);
		return wr_error_set(err, e, "egress: pipe");
	}
	/* its output into the log; "ready" on descriptor 3. PDEATHSIG
	 * until the proxy sets its own (SIGTERM, which removes its socket) */
	struct proc_spec ps = {
	    .argv = argv,
	    .envp = child_env,
	    .out = {PROC_FD, o->log_fd},
	    .err = {PROC_STDOUT, -1},
	    .fd3 = {PROC_FD, ready[1]},
	    .die_with_parent = true,
	};
	int sr = proc_start(&ps, &p->child, err);
	close(ready[1]);
	if (sr < 0) {
		close(ready[0]);
		build_proxy_stop(p);
		return wr_error_wrap(err, "egress");
	}
	p->running = true;
	bool up = proxy_ready(ready[0]);
	close(ready[0]);
	if (!up) {
		build_proxy_stop(p);
		return wr_error_set(err, EIO,
				    "egress: %s did not start (its error is "
				    "in the build log)",
				    proxy);
	}
	p->relay = wr_strdup(relay);
	if (!p->relay) {
		build_proxy_stop(p);
		return wr_error_set(err, ENOMEM, "egress");
	}
	return 0;
}

void build_proxy_request(const struct build_proxy *p,
			  struct sandbox_request *req)
{
	if (!p->running)
		return;
	req->binds[req->n_binds++] =
	    (struct sandbox_bind){p->dir, EGRESS_SANDBOX_DIR, true};
	req->binds[req->n_binds++] =
	    (struct sandbox_bind){p->relay, EGRESS_SANDBOX_RELAY, true};
	for (size_t i = 0; i < ARRAY_SIZE(proxy_env); i++)
		req->env[req->n_env++] = proxy_env[i];
}

/* The relay daemonizes; it ends with the step's sandbox. */
char *build_proxy_script(const struct build_proxy *p, const char *script)
{
	if (!p->running)
		return wr_strdup(script);
	return wr_asprintf("%s %s || { echo 'warren: the egress relay did not "
			   "start' >&2; exit 125; }\n%s",
			   EGRESS_SANDBOX_RELAY, EGRESS_SANDBOX_SOCKET, script);
}


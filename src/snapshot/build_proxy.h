/* build_proxy.h - the egress proxy of one build: warren-egress, next to
 * the warren binary, run beside a build's sandboxes for the length of the
 * build, allowing exactly the hosts given under the server's deny rules.
 *
 * Snapshot builds (build.c: the spec's egress and buildEgress hosts) and
 * the agents layer (agents/layer.c: the npm registry's host) share it.
 * A sandbox reaches it through the socket directory and warren-relay
 * bound in (build_proxy_request), the relay started first by the step's
 * script (build_proxy_script). Each decision is one line "egress: JSON"
 * on log_fd. */
#ifndef WR_SNAPSHOT_BUILD_PROXY_H
#define WR_SNAPSHOT_BUILD_PROXY_H

#include "sandbox/request.h"
#include "util/error.h"
#include "util/proc.h"

#include <stdbool.h>
#include <stddef.h>

struct build_proxy_opts {
	const char *warren;	       /* warren-egress and warren-relay beside it */
	const char *data_dir;	       /* the socket's directory goes here */
	const char *egress_config;     /* the server's deny rules; NULL: defaults */
	const char *const *allow;      /* "host" or "host:port" */
	size_t n_allow;		       /* 0: no proxy, nothing started */
	int log_fd;		       /* its decisions and errors */
};

struct build_proxy {
	bool running; /* false: no proxy (none needed, or stopped) */
	struct proc child;
	char *dir;   /* DATA/build-egress.<pid>.<n>: the socket's */
	char *relay; /* warren-relay, bound in */
};

/* Starts the proxy and waits until it listens. With n_allow 0, p is left
 * not running and 0 is returned. On failure nothing is left running. */
int build_proxy_start(const struct build_proxy_opts *o, struct build_proxy *p,
		      struct wr_error **err);
/* Stops it, removes its directory; p may be zeroed or already stopped. */
void build_proxy_stop(struct build_proxy *p);
/* The step's sandbox gets the socket, the relay and the proxy variables
 * (two binds, EGRESS_PROXY_ENV): nothing when not running. */
void build_proxy_request(const struct build_proxy *p,
			 struct sandbox_request *req);
/* script, after starting the relay when running. Caller frees; NULL when
 * out of memory. */
char *build_proxy_script(const struct build_proxy *p, const char *script);

#endif

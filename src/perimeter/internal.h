/* internal.h - the perimeter's own state, shared by its files: egress.c
 * (the proxy and the allowlists), broker.c, gateway.c (with the agent
 * presets), audit.c. */
#ifndef WR_PERIMETER_INTERNAL_H
#define WR_PERIMETER_INTERNAL_H

#include "perimeter/perimeter.h"
#include "security/broker.h"
#include "security/egress.h"

#include <pthread.h>

struct perimeter {
	struct perimeter_config cfg; /* its strings are the caller's */
	struct perimeter_host host;
	struct egress *egress; /* NULL until started */
	struct broker *broker;
	struct gateway *gateway; /* NULL without a model */
	struct gateway_settings gateway_settings;
	char *build_egress_config;

	/* the allowlists the proxy last asked for, each with the store's
	 * session_writes count it was read at (guarded by mu, the
	 * perimeter's lock: a proxy thread asking never waits for the
	 * scheduler, nor it for the proxy) */
	pthread_mutex_t mu;
	struct egress_policy_slot {
		char id[STORE_ID_MAX]; /* "" when empty */
		uint64_t writes;
		char **hosts;
		size_t n;
	} policy_cache[64];

	/* each session's perimeter files (sessfs.c), under fs_mu */
	pthread_mutex_t fs_mu;
	struct perimeter_fs *fs_list;
};

static inline int64_t perimeter_event(struct perimeter *p,
				      const char *session_id,
				      enum event_kind kind, json_t *data)
{
	return p->host.event(p->host.ctx, session_id, kind, data);
}

/* perimeter.c: DATA/sessions/<id>.<what> (the session's socket
 * directory) and warren-relay beside warren, which must be there. */
/* sessfs.c: a session's perimeter files, in a tmpfs of its own that is
 * mounted nowhere (made at the first call, with the relay and the git
 * client in bin/). *out: /proc/PID/fd/N/what, the path of what in it, for
 * the server and as a bind source for the sandbox (what: "egress",
 * "broker", "gateway", which also get a symlink DATA/sessions/<id>.<what>
 * for the host's view; or "bin/NAME"). Caller frees *out. */
#define PERIMETER_FS_RELAY "warren-relay"
#define PERIMETER_FS_GIT_CLIENT "warren-git-connect"
#define PERIMETER_FS_NAME_MAX 128
int perimeter_fs_path(struct perimeter *p, const char *session_id,
		      const char *what, char **out, struct wr_error **err);
/* Frees the session's files (its symlinks go; the sockets and sandboxes
 * that still hold the tmpfs keep it until they go). */
void perimeter_fs_close(struct perimeter *p, const char *session_id);
void perimeter_fs_close_all(struct perimeter *p);

int perimeter_relay_paths(struct perimeter *p, const char *session_id,
			  const char *what, char **dir, char **relay,
			  struct wr_error **err);
/* egress.c */
int perimeter_egress_start(struct perimeter *p, struct wr_error **err);
void perimeter_egress_stop(struct perimeter *p);
int perimeter_egress_prepare(struct perimeter *p,
			     const struct store_session *s,
			     const char *snapshot_id,
			     struct perimeter_sandbox *out,
			     struct wr_error **err);
/* Starts a relay daemon in the sandbox (`warren sandbox exec NAME --
 * argv`): it binds first and daemonizes, so a failure is the exec's
 * status, with its words in *err naming what. */
int perimeter_sandbox_relay(struct perimeter *p, const char *sandbox,
			    char *const *argv, const char *what,
			    struct wr_error **err);
/* broker.c */
int perimeter_broker_start(struct perimeter *p, struct wr_error **err);
int perimeter_broker_prepare(struct perimeter *p,
			     const struct store_session *s,
			     struct perimeter_sandbox *out,
			     struct wr_error **err);
int perimeter_broker_configure(struct perimeter *p, const char *sandbox,
			       struct wr_error **err);
/* gateway.c */
int perimeter_gateway_start(struct perimeter *p, struct wr_error **err);
void perimeter_gateway_stop(struct perimeter *p);
int perimeter_gateway_prepare(struct perimeter *p,
			      const struct perimeter_run *r,
			      const struct store_session *s,
			      struct perimeter_sandbox *out,
			      struct wr_error **err);
int perimeter_gateway_relay(struct perimeter *p, const char *sandbox,
			    struct wr_error **err);
int perimeter_preset_prepare(struct perimeter *p,
			     const struct store_session *s,
			     struct perimeter_sandbox *out,
			     struct wr_error **err);

#endif

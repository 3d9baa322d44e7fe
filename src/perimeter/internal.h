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
};

static inline int64_t perimeter_event(struct perimeter *p,
				      const char *session_id,
				      enum event_kind kind, json_t *data)
{
	return p->host.event(p->host.ctx, session_id, kind, data);
}

/* perimeter.c: DATA/sessions/<id>.<what> (the session's socket
 * directory) and warren-relay beside warren, which must be there. */
int perimeter_relay_paths(const struct perimeter *p, const char *session_id,
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

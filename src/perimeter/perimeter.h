/* perimeter.h - what stands between a session's sandbox and the rest of
 * the world, as the control plane sees it (docs/security.md): the egress
 * proxy (security/egress.h), the credential broker (security/broker.h),
 * the model gateway (gateway/gateway.h) with the agent presets whose
 * CLIs call it (agents/), and each session's audit log
 * (security/audit.h).
 *
 * One struct perimeter per server, with a lock of its own (the
 * allowlists it caches); it owns the three daemons. It asks the control
 * plane for two things only, through struct perimeter_host: to append a
 * session's event, and a snapshot's spec egress hosts; and tells it the
 * model usage the gateway metered. Nothing here knows a run or the
 * scheduler: a session's sandbox is named by struct perimeter_run.
 *
 * Per session's sandbox: perimeter_sandbox_prepare (its sockets, token,
 * agents layer), perimeter_sandbox_request (their binds and variables
 * into the sandbox request), perimeter_sandbox_started (the relays, the
 * workspace's origin), perimeter_sandbox_close once the sandbox is gone,
 * perimeter_session_end once the session is. Per command-agent turn:
 * perimeter_turn_open / perimeter_turn_close (the gateway token). */
#ifndef WR_PERIMETER_PERIMETER_H
#define WR_PERIMETER_PERIMETER_H

#include "agent/agent.h"
#include "gateway/gateway.h"
#include "sandbox/request.h"
#include "store/store.h"
#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENTS_REGISTRY_DEFAULT "https://registry.npmjs.org/"

/* The credentials the credential broker uses for a repository's remote,
 * by repository name: https (username and a password or token, given or
 * the name of a secret in the server's secret store, read at each
 * sandbox start) or an ssh key. They never enter a sandbox. */
struct perimeter_credentials {
	const char *repo_name;
	const char *username;
	const char *password;	     /* or: */
	const char *password_secret; /* a name in the secret store */
	const char *ssh_key_file;
	const char *known_hosts_file;
};

/* Every string and array stays the caller's for the perimeter's life. */
struct perimeter_config {
	const char *data_dir;	/* sessions/<id>.{egress,broker,gateway} */
	const char *warren_bin; /* the relays and the client sit beside it */
	struct store *st;
	/* the API's own endpoint, which no sandbox may reach */
	const char *api_addr;
	uint16_t api_port;
	/* the configuration's "egress" object as JSON text (NULL: the
	 * default rules) */
	const char *egress_json;
	const struct perimeter_credentials *credentials;
	size_t n_credentials;
	/* the configuration's "gateway" object as JSON text; NULL: the
	 * model's API, if it is of the "openai" kind */
	const char *gateway_json;
	bool model_configured;
	const struct provider_config *model;
	const struct agent_budget *budget;
	const struct meter_prices *prices;
	/* where agent presets are installed from (NULL: the default) */
	const char *agents_registry;
};

/* What the perimeter asks of the control plane. */
struct perimeter_host {
	void *ctx;
	/* Appends a session's event (data consumed); its seq, or < 0. */
	int64_t (*event)(void *ctx, const char *session_id,
			 enum event_kind kind, json_t *data);
	/* The egress hosts of the spec at snapshot_id: a new reference to
	 * an array, or NULL (none). */
	json_t *(*spec_egress)(void *ctx, const char *snapshot_id);
	/* What one turn's model calls added, through the gateway. */
	void (*model_usage)(void *ctx, const struct meter_totals *added);
	/* The lease epoch the host's writes about the session carry (a
	 * worker's: sched/lease.c), so its audit records are fenced like
	 * its events; NULL or 0: no check. */
	int64_t (*epoch)(void *ctx, const char *session_id);
};

struct perimeter;

/* The perimeter of a control plane: the audit log and the checks work
 * from here on; the daemons once perimeter_start ran. */
int perimeter_new(const struct perimeter_config *cfg,
		  const struct perimeter_host *host, struct perimeter **out,
		  struct wr_error **err);
/* Starts the egress proxy, the broker and (with a model or a "gateway")
 * the gateway. On failure err names what failed; perimeter_free stops
 * what did start. */
int perimeter_start(struct perimeter *p, struct wr_error **err);
/* Stops the daemons and frees everything (NULL: nothing). */
void perimeter_free(struct perimeter *p);
/* DATA/build-egress.json: the deny rules for snapshot builds' own
 * proxies (`warren snapshot refresh --egress-config`). */
const char *perimeter_build_egress_config(const struct perimeter *p);

/* A session's sandbox, as the perimeter needs to know it. usage: the
 * session's usage as its runner keeps it (the runner's thread only). */
struct perimeter_run {
	const char *id;
	const char *sandbox;
	struct agent_usage *usage;
};

/* What a session's sandbox gets; "on" parts only. */
struct perimeter_sandbox {
	struct {
		bool on;
		char *dir, *relay; /* host paths: socket dir, the relay */
	} egress, gateway;
	struct {
		bool on;
		char *dir, *client; /* host paths: socket dir, the client */
	} broker;
	struct {
		bool on;
		char *layer;	 /* DATA/agents/<id> */
		char mount[128]; /* where the sandbox sees it */
		double layer_ms; /* to have it (built, or found) */
	} preset;
};

/* Opens the session's egress listener (if it may reach any host: its
 * spec's at snapshot_id, or its own list), its broker session and token,
 * its gateway socket (with the usage it had so far), and builds or finds
 * its agent preset's layer. On failure nothing is left open. */
int perimeter_sandbox_prepare(struct perimeter *p,
			      const struct perimeter_run *r,
			      const struct store_session *s,
			      const char *snapshot_id,
			      struct perimeter_sandbox *out,
			      struct wr_error **err);
/* Adds the binds and the variables to req (-E2BIG if full). */
int perimeter_sandbox_request(const struct perimeter_sandbox *ps,
			      struct sandbox_request *req);
/* Once the sandbox runs: the egress and gateway relays (they daemonize),
 * and, unless the snapshot was built so, the workspace's origin pointed
 * at the broker. */
int perimeter_sandbox_started(struct perimeter *p,
			      const struct perimeter_run *r,
			      const struct perimeter_sandbox *ps,
			      bool origin_set, struct wr_error **err);
void perimeter_sandbox_clear(struct perimeter_sandbox *ps);
/* The sandbox is gone: the session's sockets close, its broker token
 * expires. */
void perimeter_sandbox_close(struct perimeter *p, const char *session_id);
/* The session ended: its broker token is refused from now on. */
void perimeter_session_end(struct perimeter *p, const char *session_id);

/* A command agent's turn: its gateway token and base URLs. */
struct perimeter_turn {
	bool on; /* the gateway runs */
	char token[GATEWAY_TOKEN_LEN + 1];
	char openai_base[64], anthropic_base[64];
};
int perimeter_turn_open(struct perimeter *p, const struct perimeter_run *r,
			struct perimeter_turn *t);
/* The token dies; the session's usage becomes the gateway's totals (a
 * "usage" event of turn number, the host's model_usage). */
void perimeter_turn_close(struct perimeter *p, const struct perimeter_run *r,
			  int number);
void perimeter_turn_clear(struct perimeter_turn *t);

/* A submission's egress list: NULL/null is none; else an array of at
 * most 256 allowlist entries (bad_input otherwise). *out: a copy. */
int perimeter_egress_check(const json_t *list, json_t **out,
			   struct wr_error **err);
/* A preset object checked against what the gateway serves, in its
 * canonical form (*canonical, caller frees). */
int perimeter_preset_check(const struct perimeter *p, const char *agent_json,
			   char **canonical, struct wr_error **err);
/* The argv of a preset's turn (NULL: not a preset, or no memory). */
json_t *perimeter_preset_argv(const struct perimeter *p,
			      const char *agent_json);
/* The environment of a host git pushing to the repository's remote with
 * the credentials configured for the broker (NULL: none configured, the
 * server's own git credentials apply). Free with broker_env_free. */
char **perimeter_remote_env(const struct perimeter *p, const char *repo_name,
			    const char *url, const char *mirror);

/* The session's audit log. None of these fails: a write that does not
 * happen is logged. details are consumed; a NULL user means the system. */
void perimeter_audit(struct perimeter *p, const char *session_id,
		     const char *actor, const char *kind, json_t *details);
void perimeter_audit_user(struct perimeter *p, const char *session_id,
			  const char *user, const char *kind,
			  json_t *details);
/* What an event (its store seq) means for the audit, if anything (data
 * is not consumed). */
void perimeter_audit_event(struct perimeter *p, const char *session_id,
			   enum event_kind kind, const json_t *data,
			   int64_t seq);
void perimeter_audit_transition(struct perimeter *p, const char *user,
				const char *id, int from,
				enum session_state to,
				const struct store_session_update *upd,
				const json_t *extra, int64_t seq);
void perimeter_audit_submit(struct perimeter *p,
			    const struct store_session *s,
			    const char *repo_name);
void perimeter_audit_message(struct perimeter *p, const char *session_id,
			     const char *user, int64_t message_id,
			     const char *text);
/* One exec of a command agent: status is its exit status (128+N for a
 * signal) or -errno if it did not start. */
void perimeter_audit_exec(struct perimeter *p, const struct store_session *s,
			  const char *sandbox, int turn, int status,
			  long lines, bool truncated);
void perimeter_audit_decision(struct perimeter *p, const char *session_id,
			      const char *user, const char *decision,
			      const char *reason);
/* push: review_push's record, or NULL with error set */
void perimeter_audit_push(struct perimeter *p, const char *session_id,
			  const char *user, const json_t *push,
			  const char *error);

#endif

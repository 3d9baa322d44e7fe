/* control.h - the control plane's session manager: what the API (and the
 * server's main) may ask of it.
 *
 * Owns the session lifecycle: submission (validation, repository lookup,
 * limits against the server's maximums), the queue and the scheduler thread
 * that admits sessions (global cap, free memory, per-user fairness), the
 * runner of each session (sandbox from the newest snapshot, drift sync,
 * services, the agent command, output lines as events), follow-ups,
 * cancel, lifetime and idle timers, retry after sandbox death, snapshot
 * builds and refreshes, reconciliation after a crash, and the metrics.
 *
 * Every state change goes through the store in one transaction; the
 * control plane keeps only caches and timers in memory. */
#ifndef WR_SCHED_CONTROL_H
#define WR_SCHED_CONTROL_H

#include "agent/agent.h"
#include "blobs/blobs.h"
#include "perimeter/perimeter.h"
#include "review/evidence.h"
#include "review/forge.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* Per-session limits; 0 means "not set" (the server's default applies). */
struct control_limits {
	uint64_t millicpus;
	uint64_t memory_bytes;
	uint64_t pids;
	uint64_t disk_bytes; /* the workspace's filesystem (its image's size) */
	uint64_t inodes;     /* files that filesystem holds */
	uint64_t lifetime_ms;
	uint64_t idle_ms;
};

struct control_forge {
	const char *repo_name;
	struct forge_config forge;
};

/* When may a session start from a repository's newest snapshot? Beyond
 * either bound it waits for a refresh (a build) first. 0: no bound. */
struct control_staleness {
	const char *repo_name; /* NULL: the server's default */
	int64_t max_age_ms;
	int max_behind; /* commits of the session's ref not in the snapshot */
};

#define CONTROL_BUILD_PARALLEL_MAX 8

struct control_config {
	const char *data_dir;	  /* snapshots, layers, sessions/, artifacts/ */
	const char *warren_bin;	  /* the lean `warren` executable */
	unsigned max_sandboxes;	  /* global cap on concurrent sandboxes */
	unsigned max_per_user;	  /* one user's share of the cap, 0: cap/2+1 */
	uint64_t min_free_memory; /* admit only while MemAvailable exceeds */
	/* a build step printing nothing this long is stopped (0: 10 min) */
	uint64_t build_hung_after_ms;
	/* a file holding the "blobs" object (the server's configuration
	 * file): each snapshot built is pushed to that registry (`warren
	 * snapshot push`); NULL: none */
	const char *blobs_file;
	/* the same registry, parsed (its strings the caller's): a worker's
	 * checkpoints go there (sched/checkpoint.c); NULL: none */
	const struct blobs_config *blobs;
	/* snapshot builds of different repositories at once (builds.parallel,
	 * 1..CONTROL_BUILD_PARALLEL_MAX; 0: 2) */
	unsigned build_parallel;
	/* the agent output a session keeps, all turns (0: 64 MiB) */
	uint64_t max_output_bytes;
	struct control_limits defaults; /* applied where a session sets none */
	struct control_limits maximums; /* a session may not ask for more */
	unsigned retry_max;	   /* re-provisioning attempts after death */
	uint64_t retry_backoff_ms; /* first back-off, doubled per retry */
	const char *default_agent_json; /* JSON argv, NULL: none configured */
	uint64_t refresh_check_ms; /* how often due refreshes are looked for */
	/* the built-in agent: used by sessions whose agent is
	 * {"builtin": true}, and by those with no agent at all when a model
	 * is configured */
	bool model_configured;
	struct provider_config model;
	struct agent_budget budget;
	struct meter_prices prices;
	unsigned verify_retries; /* agent attempts after a failed verify */
	/* sandbox.backend: where sessions run unless their repository's
	 * spec says (customizations.warren.backend) */
	enum sandbox_backend backend;
	/* registering a repository does not ask its remote first (the unit
	 * tests' fake URLs); a server always asks */
	bool no_remote_check;
	struct evidence_limits evidence; /* the limits of a change */
	/* repositories whose approval also opens a pull request, by name
	 * (the strings stay the caller's for the control plane's life) */
	const struct control_forge *forges;
	size_t n_forges;
	/* the remotes' credentials, for the credential broker (the strings
	 * stay the caller's for the control plane's life) */
	const struct perimeter_credentials *credentials;
	size_t n_credentials;
	/* staleness policies: the server's default (repo_name NULL) and per
	 * repository; none: a session takes the newest snapshot as it is
	 * and syncs whatever the drift */
	const struct control_staleness *staleness;
	size_t n_staleness;
	bool no_worker; /* accept and store, never run (fuzzing, tests) */
	/* a worker among others on a shared store (`--role worker`): its id
	 * (NULL: not a worker, the one server running sessions), the lease
	 * of a claim (0: 15 s) and how often it is renewed (0: a third of
	 * it), the sandboxes of all workers together (0: no cap but each
	 * worker's max_sandboxes) */
	const char *worker_id;
	uint64_t lease_ms;
	uint64_t renew_ms;
	unsigned max_sandboxes_total;
	/* the egress proxy (security/egress.h): the server configuration's
	 * "egress" object as JSON text (NULL: the default rules), and the
	 * API's own endpoint, which no sandbox may reach through it */
	const char *egress_json;
	/* the model gateway (gateway/gateway.h): the configuration's
	 * "gateway" object as JSON text; NULL: the model's API, if any */
	const char *gateway_json;
	/* the npm registry agent presets are installed from (NULL:
	 * AGENTS_REGISTRY_DEFAULT) */
	const char *agents_registry;
	const char *api_addr;
	uint16_t api_port;
};

/* A submission from the API. */
struct control_submit {
	const char *user;
	const char *repo; /* repository id, name, or a URL/path */
	const char *prompt;
	const char *ref;	/* NULL: the repository's default */
	const char *agent_json; /* JSON argv array, NULL: repo/server default */
	const struct control_limits *limits; /* NULL: defaults */
	/* hosts the session may reach besides its repository's spec
	 * egress: a JSON array of allowlist entries, NULL: none. Kept in
	 * the session's limits_json under "egress". */
	const json_t *egress;
	/* may an unregistered URL or path be registered on the fly (an
	 * admin's submission)? Otherwise only registered repositories (by
	 * id, name or their URL) are taken: -EACCES. */
	bool may_register;
};

struct control;

/* Reconciles what a previous server left (sessions in provisioning,
 * running or verifying; sandboxes named after sessions), then starts the
 * scheduler (unless cfg->no_worker). */
int control_start(const struct control_config *cfg, struct store *st,
		  struct control **out, struct wr_error **err);
/* Clean shutdown: stops admitting, checkpoints every running session to
 * `interrupted` (reason "server shutdown"), stops their sandboxes, joins
 * the threads. The sessions resume at the next start. */
void control_stop(struct control *c);

/* 0 and *out on success; -EINVAL (bad_input) on a bad field, -ENOENT for
 * an unknown repository. */
int control_submit(struct control *c, const struct control_submit *req,
		   struct store_session *out, struct wr_error **err);
/* A follow-up: queued behind a running turn, or starts a new turn on a
 * session in review. -ENOENT unknown, -EPERM (bad_input) if the session is
 * in a terminal state. Returns the message id. */
int64_t control_message(struct control *c, const char *session_id,
			const char *user, const char *text,
			struct wr_error **err);
/* Stops the turn and the sandbox; the session goes to cancelled. -EPERM
 * (bad_input) if it already finished. */
int control_cancel(struct control *c, const char *session_id, const char *user,
		   struct wr_error **err);

/* The reviewer's decision on a session in review. Approve: the session
 * goes to approved, its branch warren/<id> is pushed to the repository's
 * remote (the URL it was registered with; only that ref, never forced)
 * and it ends pushed (or failed with the push's error). Reject: it ends
 * rejected with the reason. -EPERM (bad_input) unless the session is in
 * review. */
int control_approve(struct control *c, const char *session_id,
		    const char *user, struct wr_error **err);
int control_reject(struct control *c, const char *session_id,
		   const char *user, const char *reason,
		   struct wr_error **err);

/* An eval's hidden tests on a session's result (POST
 * /api/v1/sessions/{id}/check): each of commands ([{"kind": "fail_to_pass"
 * or "pass_to_pass", "command": a shell line}], checked by the API) runs
 * as `/bin/sh -c` in /workspace of a fresh sandbox at the result commit,
 * the path of Warren's own verification (work.c); tests (NULL, or
 * {"relative/path": "content"}) are written to the session's evidence
 * directory, bound read-only at $WARREN_TASK_TESTS of that sandbox only,
 * and removed after. -EPERM (bad input) unless the session has a result
 * and no turn running; -EBUSY while it is checked already, or beyond
 * CONTROL_CHECKS_MAX checks at once. *out: {"session", "commit", "passed",
 * "results": [{"kind", "command", "status", "ms", "output"}], "sandbox":
 * "fresh", "setup_ms", "teardown_ms"}. Runs in the caller's thread. */
#define CONTROL_CHECKS_MAX 8
int control_check(struct control *c, const char *session_id,
		  const json_t *commands, const json_t *tests, json_t **out,
		  struct wr_error **err);

/* Pilot numbers (GET /api/v1/stats): sessions by outcome, verify pass
 * rate on the first attempt and after retries, model tokens and cost,
 * sandbox-seconds, reviewer minutes (review to decision), accepted
 * changes per reviewer minute, cost per accepted change. */
json_t *control_stats(struct control *c);

/* Registers a repository (name may be NULL: derived from the URL) and
 * starts its first snapshot build in the background. */
int control_repo_add(struct control *c, const char *name, const char *url,
		     const char *default_ref, uint64_t refresh_ms,
		     const char *agent_json, struct store_repo *out,
		     struct wr_error **err);
/* Changes a registered repository: its url (checked as for add), its
 * default ref (set_ref: to ref, NULL the remote's HEAD), its refresh
 * interval (set_refresh) and its agent (set_agent: agent_json, NULL
 * none); what is not set stays. A new url or ref starts a build. */
struct control_repo_change {
	const char *url;
	bool set_ref;
	const char *ref;
	bool set_refresh;
	uint64_t refresh_ms;
	bool set_agent;
	const char *agent_json;
};
int control_repo_update(struct control *c, const char *id_or_name,
			const struct control_repo_change *ch,
			struct store_repo *out, struct wr_error **err);
/* Removes a repository (its sessions' history stays, by id): -EBUSY while
 * one of its sessions is not finished or its snapshot build runs. Its
 * build state goes; its snapshots' layers are left to `warren snapshot
 * gc`. */
int control_repo_remove(struct control *c, const char *id_or_name,
			struct wr_error **err);
/* How often the repository's snapshot is rebuilt, as the scheduler does
 * it: its own interval, else its spec's (customizations.warren.refresh),
 * else every 30 minutes; source (may be NULL) says which: "repository",
 * "spec" or "default". */
uint64_t control_repo_refresh_every(struct control *c,
				    const struct store_repo *repo,
				    const char **source);
/* Queues a snapshot refresh of the repository (id or name). */
int control_repo_refresh(struct control *c, const char *id_or_name,
			 struct wr_error **err);

/* Event notification for streams: the generation changes whenever any
 * session gets an event; wait returns when it differs from gen or after
 * timeout_ms. Returns the current generation. */
uint64_t control_event_generation(struct control *c);
uint64_t control_wait_events(struct control *c, uint64_t gen, int timeout_ms);

/* Prometheus text exposition of the metrics (caller frees). */
char *control_metrics(struct control *c);

/* The limits a session runs with: each one asked, else the repository
 * spec's, else the server's default; never above the server's maximum. */
void control_limits_resolve(const struct control *c,
			    const struct control_limits *asked,
			    const struct control_limits *spec,
			    struct control_limits *out);

/* Parses a JSON limits object ({"cpus":"1.5","memory":"1G","pids":256,
 * "disk":"2G","inodes":100000,"lifetime":"1h","idle":"10m"}); unknown keys
 * are an error. */
int control_limits_from_json(const char *what, const void *json_obj,
			     struct control_limits *out, struct wr_error **err);

/* The built-in maximums of a session's limits, for each that the
 * configuration leaves unset (a submitter cannot lift its own limits past
 * the host; only an admin's limits.max raises them): memory, half the
 * host's; CPUs, three quarters of the host's (at least one); pids
 * CONTROL_BUILTIN_MAX_PIDS; lifetime CONTROL_BUILTIN_MAX_LIFETIME_MS;
 * disk, a quarter of the data directory's filesystem; inodes
 * CONTROL_BUILTIN_MAX_INODES. */
#define CONTROL_BUILTIN_MAX_PIDS 16384
#define CONTROL_BUILTIN_MAX_INODES (1ull << 20)
#define CONTROL_MAX_OUTPUT_DEFAULT (64ull << 20)
#define CONTROL_BUILTIN_MAX_LIFETIME_MS (24ull * 3600 * 1000)
void control_builtin_maximums(const char *data_dir,
			      struct control_limits *mx);

/* A repository's last build (sched/snapshots.c), or NULL: {"state":
 * "queued"|"building"|"ready"|"failed", "queued_ms", "started_ms",
 * "finished_ms", "error", "snapshot"}. Caller decrefs. */
json_t *control_build_state(struct control *c, const char *repo_id);

/* A repository's builds, each with its own record and log in
 * DATA/builds/<repo id>/<build id>.{json,log} (the last
 * CONTROL_BUILD_HISTORY of them): a JSON array, newest first, of
 * {"id", "state", "queued_ms", "started_ms", "finished_ms", "error",
 * "snapshot_id"}. Caller decrefs. */
#define CONTROL_BUILD_HISTORY 20
json_t *control_builds_list(struct control *c, const char *repo_id);
/* A build's log (a running one's so far); -ENOENT for an unknown build. */
int control_build_log(struct control *c, const char *repo_id,
		      const char *build_id, char **text, size_t *len);
/* b-<13 digits>-<8 hex digits> */
bool control_build_id_valid(const char *s);
/* Stops the repository's running or queued build: it fails with "cancelled
 * by <by>". 0 and *build (its record, as it ended) on success; -ENOENT for
 * an unknown repository, -EALREADY when none is running or queued. */
int control_build_cancel(struct control *c, const char *id_or_name,
			 const char *by, json_t **build, struct wr_error **err);

#endif

/* internal.h - what control.c, runner.c and metrics.c share. */
#ifndef WR_SCHED_INTERNAL_H
#define WR_SCHED_INTERNAL_H

#include "sandbox/request.h"
#include "sched/control.h"
#include "sched/proc.h"
#include "perimeter/perimeter.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* Start-latency phases (POST to the agent's first line), in order. */
enum metric_phase {
	PHASE_QUEUE,	/* created -> admitted */
	PHASE_RESTORE,	/* sandbox from the snapshot's layers */
	PHASE_SYNC,	/* drift sync and session hooks */
	PHASE_SERVICES, /* services started and ready */
	PHASE_PULL,	/* the snapshot pulled from the registry */
	PHASE_AGENT,	/* agent exec -> its first output line */
	PHASE_TOTAL,	/* created -> first output line */
	PHASE_MAX
};

#define METRIC_BUCKETS 16

struct metrics {
	uint64_t bucket[PHASE_MAX][METRIC_BUCKETS]; /* cumulative at render */
	uint64_t count[PHASE_MAX];
	double sum_ms[PHASE_MAX];
	uint64_t sessions_started;
	uint64_t retries;
	uint64_t sandboxes_started;
	double sandbox_seconds; /* of sandboxes already stopped */
	uint64_t snapshot_builds, snapshot_build_failures;
	uint64_t verify_first_pass, verify_retry_pass, verify_failed;
	uint64_t prompt_tokens, completion_tokens;
	double cost;
};

/* One admitted session: a thread that holds one sandbox slot. */
struct run {
	struct run *next;
	struct control *ctl;
	char id[STORE_ID_MAX];
	char *user;
	char sandbox[64];
	pthread_t thread;
	pthread_cond_t cv; /* wakes the runner (with ctl->mu) */
	/* below: guarded by ctl->mu */
	pid_t child;		/* its current `warren` child, 0 if none */
	pid_t init_pid;		/* the sandbox's init, 0 without a sandbox */
	bool cancel;		/* cancel the session */
	bool expire;		/* lifetime reached */
	bool shutdown;		/* the server is stopping */
	bool reclaim;		/* give the slot back (idle, or needed) */
	bool wake;		/* a follow-up arrived */
	bool resting;		/* in review, sandbox kept for a follow-up */
	bool done;		/* thread finished, to be joined */
	bool lost;		/* a worker's lease on it was lost: stopped,
				 * its writes refused (lease.c) */
	int64_t queued_ms;	/* time it waited in the queue (admission) */
	int64_t life_start_ms;	/* lifetime counts from here */
	int64_t last_active_ms; /* idle counts from here */
	int64_t sandbox_start_ms;
	/* sandbox time of the session's sandboxes gone (earlier lives'
	 * included, from outcome.sandbox_seconds), under mu */
	double sandbox_seconds;
	unsigned baseline_procs; /* processes once services were ready */
	uint64_t last_cpu_ticks;
	struct control_limits limits;
	/* the runner's own (no lock): the spec's verify commands, the
	 * commit the session started from, model usage so far */
	json_t *verify;
	json_t *artifacts; /* the spec's evidence files (relative paths) */
	char base[41];
	char snapshot_id[72];	  /* the snapshot the sandbox came from */
	enum sandbox_backend backend; /* where its sandboxes run */
	char snapshot_commit[41]; /* its commit */
	uint64_t output_bytes;	  /* the agent's output stored, all turns */
	bool output_capped;	  /* the session's output cap was reached */
	struct agent_usage usage;
	struct provider *provider; /* the built-in agent's, made at first use */
};

/* How a turn ended (runner.c, work.c). */
enum turn_end {
	TURN_OK,
	TURN_FAILED,
	TURN_DIED,
	TURN_STOPPED, /* cancel, expiry or shutdown */
};

struct control {
	char *data_dir, *warren_bin, *default_agent_json, *worker_id;
	struct control_config cfg; /* strings point at the copies above */
	struct store *st;

	pthread_mutex_t mu;
	pthread_cond_t cv; /* wakes the scheduler */
	struct run *runs;
	bool stopping;
	bool sched_started;
	pthread_t sched_thread;
	bool mem_blocked; /* admission is waiting for memory */
	bool sched_wake;  /* work arrived since the scheduler last looked */

	/* a worker's leases (lease.c): the sessions its runners hold, with
	 * the epoch of each claim; mu is a leaf lock (taken with c->mu
	 * held, never the other way) */
	struct control_leases {
		pthread_mutex_t mu;
		pthread_cond_t cv; /* wakes the lease thread to stop */
		struct lease_held {
			char id[STORE_ID_MAX];
			int64_t epoch;
		} *held;
		size_t n, cap;
		pthread_t thread;
		pthread_t watch; /* stops what a stuck renewal cannot */
		bool started, stopping;
		int64_t last_renew_ms; /* the last renewal that went through */
	} leases;

	pthread_mutex_t build_state_mu; /* DATA/builds/ files */
	/* snapshot builds and refreshes: a lock of their own. Lock order:
	 * builds.mu may be held while taking mu (a session waiting for a
	 * build reads its run's flags), never the other way. */
	struct control_builds {
		pthread_mutex_t mu;
		pthread_cond_t cv; /* a build ended, a waiter was stopped */
		bool stopping;	   /* the server stops: no new build */
		char **building;   /* repository ids with a build running */
		size_t n_building;
		/* (the refresh queue is the store's: build_enqueue) */
		/* the refresh workers: up to cfg.build_parallel builds at
		 * once, each of another repository (a build of one never
		 * waits for another's, a hung one included) */
		struct refresh_worker {
			struct control *c;
			pthread_t thread;
			bool started, running;
		} workers[CONTROL_BUILD_PARALLEL_MAX];
		pid_t pids[16]; /* `warren snapshot` children, to stop them */
		char pid_repo[16][STORE_ID_MAX]; /* whose build each is */
		/* the session whose runner builds in that slot (NULL: a
		 * refresh worker), whose cancel stops a build nobody else
		 * waits for */
		const struct run *owner[16];
		json_t *waiting; /* repository id -> sessions waiting */
		json_t *cancels; /* repository id -> who cancelled its build */
		/* snapshot ids being pulled from the registry: one pull
		 * each, whoever else needs it waits (cv) */
		char **pulling;
		size_t n_pulling;
		/* snapshot id -> when a session last resolved it (epoch
		 * ms), for the layer cache (layer_cache.c) */
		json_t *used;
	} builds;

	/* the spec settings of snapshots already looked at (guarded by
	 * spec_mu, a lock of its own: reading a spec never waits for the
	 * scheduler, nor it for a spec) */
	pthread_mutex_t spec_mu;
	struct spec_limit_cache {
		char snapshot_id[STORE_ID_MAX];
		struct control_limits limits;
		uint64_t refresh_ms;
		json_t *verify;	   /* argv arrays of the verify commands */
		json_t *artifacts; /* paths of the evidence files */
		json_t *egress;	   /* the spec's allowed hosts */
		bool origin_set;   /* its origin points at the broker */
		int backend;	   /* the spec's backend, -1: not said */
	} spec_cache[64];
	size_t n_spec_cache, next_spec_cache;

	pthread_mutex_t ev_mu;
	pthread_cond_t ev_cv;
	uint64_t ev_gen;

	pthread_mutex_t metrics_mu;
	struct metrics m;

	/* the egress proxy, the broker, the gateway, the audit log
	 * (perimeter/perimeter.h): a lock of their own */
	struct perimeter *perimeter;
};

/* runner.c */
void *runner_main(void *arg);
/* Builds (or refreshes) the repository's snapshot; serialised per
 * repository. Returns 0 and the store record of the newest snapshot. */
int control_snapshot_ensure(struct control *c, const struct store_repo *repo,
			    bool refresh, struct store_snapshot *out,
			    struct wr_error **err);
/* The snapshot a session of repo starts from: the newest, unless the
 * repository's staleness policy (or the server's) finds it too old or
 * too far behind the repository's ref, then a fresh one built first.
 * *decision (NULL when no policy applies) says which, for the session's
 * record: {"max_age_ms", "max_behind", "newest": "fresh"|"behind"|
 * "stale"|"none", "age_ms", "commits_behind", "waited": bool}. waiter:
 * the session's run, whose cancel, expiry or shutdown ends a wait for
 * another's build (-ECANCELED). With a policy, the newest snapshot the
 * store names is pulled first when the data directory lacks it
 * (control_snapshot_local), so that the refresh measures it rather than
 * building again: *pull (when pull is given) says that pull, NULL
 * without one. */
int control_snapshot_for_session(struct control *c,
				 const struct store_repo *repo,
				 const struct run *waiter,
				 struct store_snapshot *out, json_t **decision,
				 json_t **pull, struct wr_error **err);

/* Makes sure the data directory holds snapshot_id before a session
 * starts from it: 0 when it does; else, with the server's registry
 * (cfg.blobs_file), pulls it (`warren snapshot pull` as a child, in a
 * build slot so that the server's stop ends it), once however many
 * sessions need it at the same time: the others wait for that pull.
 * *pull written on success when a pull ran or was waited for (NULL
 * otherwise): {"ms", "waited": bool, "layers_fetched", "bytes_fetched"}.
 * Errors say the snapshot is missing and why it could not be pulled;
 * waiter's cancel, expiry or the server's stop end a wait (-ECANCELED). */
int control_snapshot_local(struct control *c, const char *snapshot_id,
			   const struct run *waiter, json_t **pull,
			   struct wr_error **err);

/* What the repository's spec at a snapshot's commit asks for: its limits
 * (customizations.warren.limits) and refresh interval; read once per
 * snapshot (runner.c). */
/* Was snapshot_id built with the workspace's origin pointing at the
 * credential broker (its manifest says so)? Reads the cache
 * control_spec_info fills; false when it is not there. */
bool control_snapshot_origin_set(struct control *c, const char *snapshot_id);
/* Where a session on the snapshot runs: its spec's backend, else the
 * server's (call after control_spec_info). */
enum sandbox_backend control_spec_backend(struct control *c,
					  const char *snapshot_id);
void control_spec_info(struct control *c, const char *snapshot_id,
		       struct control_limits *limits, uint64_t *refresh_ms,
		       json_t **verify, json_t **artifacts);

/* snapshots.c: is the newest snapshot of repo_id in the data directory
 * (or none built anywhere yet)? */
bool control_snapshot_cached(struct control *c, const char *repo_id);

/* lease.c: a worker's leases (see there) */
/* a queued session whose snapshot this worker lacks waits this long for a
 * worker that has it before this one takes it (and pulls) */
#define WORKER_PREFER_CACHED_MS 1000
#define LEASE_DEFAULT_MS 15000
#define LEASE_REAP_BATCH 500 /* lease_reap takes at most this many a call */
#define LEASE_NOT_HELD (-1) /* an epoch no session has: refused */
bool control_is_worker(const struct control *c);
/* The epoch this worker's writes about session_id carry: its claim's,
 * LEASE_NOT_HELD once lost, 0 for a session no runner of ours holds (or
 * not a worker). */
int64_t lease_epoch(struct control *c, const char *session_id);
int lease_hold(struct control *c, const char *session_id, int64_t epoch);
void lease_drop(struct control *c, const char *session_id);
/* Claims the queued session_id for this worker: 0, -EBUSY (another
 * worker's), or -errno. */
int lease_claim(struct control *c, const char *session_id);
int lease_start(struct control *c, struct wr_error **err);
void lease_stop(struct control *c);
void control_wake_scheduler(struct control *c);
/* What every worker runs, from the store: *out the users' sessions at
 * work (owned: worker_load_free); returns the sandboxes held (at work, or
 * resting in review). */
struct sched_user_load;
unsigned worker_load(struct control *c, struct sched_user_load **out,
		     size_t *n_out);
void worker_load_free(struct sched_user_load *load, size_t n);
/* The sandboxes all workers may hold: worker.max_sandboxes_total, else
 * the sum of the live workers' own caps (this one's at least). */
unsigned worker_capacity(struct control *c);

/* layer_cache.c: the data directory's snapshots under blobs.cache_max
 * (see there). used: a session resolved snapshot_id; trim: after a pull
 * of keep. */
void layer_cache_used(struct control *c, const char *snapshot_id);
void layer_cache_trim(struct control *c, const char *keep);

/* checkpoint.c: a worker's checkpoints in the registry (see there) */
#define CHECKPOINT_BUNDLE_NAME "checkpoint.bundle"
#define CHECKPOINT_SANDBOX_DIR "/run/warren-checkpoint"
bool checkpoint_enabled(const struct control *c);
/* Pushes the bundle of result (its commit over its base) for turn; *out
 * the record for outcome.checkpoint (NULL: nothing to keep, no change). */
int checkpoint_push(struct control *c, const char *session_id,
		    const json_t *result, int turn, json_t **out,
		    struct wr_error **err);
/* Does the session start from its checkpoint here (one recorded, and no
 * workspace of it in the data directory)? */
bool checkpoint_needed(const struct control *c, const char *session_id,
		       const json_t *outcome);
/* DATA/sessions/<id>.checkpoint, where the bundle is pulled. */
char *checkpoint_dir(const struct control *c, const char *session_id);
/* Pulls the bundle ckpt records into fd (its digest checked). */
int checkpoint_pull_bundle(struct control *c, const json_t *ckpt, int fd,
			   struct wr_error **err);
int checkpoint_fetch(struct control *c, const char *session_id,
		     const json_t *ckpt, struct wr_error **err);
void checkpoint_forget(const struct control *c, const char *session_id);

/* runner.c */
bool run_stop_requested(struct run *run);
/* The run's memory, CPU and pids limits and its backend, into req; with
 * req->upper set, its disk and inode limits as that layer's filesystem. */
void run_sandbox_request(const struct run *run, struct sandbox_request *req);
/* Runs a `warren sandbox` command line to completion (its pid tracked in
 * run->child while it runs), keeping at most max bytes of its stdout in
 * *out; a status other than 0 becomes an error naming what and the last
 * line the command wrote to stderr. Returns the status or -errno. */
int run_sandbox_cmd(struct run *run, const struct sandbox_cmdline *cl,
		    size_t max, char **out, const char *what,
		    struct wr_error **err);
/* snapshots.c: run was cancelled; a build its runner runs that no other
 * session waits for is stopped (failed, "cancelled by BY"). */
void control_build_owner_cancelled(struct control *c, const struct run *run,
				   const char *by);
/* snapshots.c: a repository's last build, kept in DATA/builds/<id>.json
 * (survives restarts): {"state": queued|building|ready|failed,
 * "queued_ms", "started_ms", "finished_ms", "error", "snapshot"}. */
void control_build_state_set(struct control *c, const char *repo_id,
			     const char *state, const char *error,
			     const char *snapshot_id);
/* The session's bytes on disk: workspace, evidence, artifacts. */
uint64_t run_disk_used(const struct run *run);
/* Is the workspace's own filesystem full (of bytes or of files), by the
 * kernel's figures for the running sandbox? why: the reason, said to the
 * user. False for a workspace directory or without a sandbox. */
#define WORKSPACE_FULL_BYTES (64u << 10)
bool run_workspace_full(const struct run *run, char *why, size_t why_size);
/* Is the sandbox's init alive (after an exec that ended with status)? */
bool run_sandbox_alive(struct run *run, int status);

/* work.c: the built-in agent's turn, verification, the result */
/* prompt: the turn's messages (follow_on false: a turn already begun is
 * resumed from its transcript instead), or what the agent is told next
 * within the turn (follow_on true: a failed verification). */
enum turn_end work_agent_turn(struct run *run, const struct store_session *s,
			      int number, const char *prompt, bool follow_on,
			      char **summary, char *why, size_t why_size);
bool work_has_verify(const struct run *run);
/* Warren's verification of result (outcome.result: its commit) in a
 * fresh sandbox from the session's snapshot; *out names the commit. */
int work_verify(struct run *run, const json_t *result, json_t **out,
		struct wr_error **err);
int work_commit(struct run *run, const struct store_session *s,
		const char *message, json_t **out, struct wr_error **err);
/* Copies the spec's artifact files out of the workspace; returns the
 * names collected (JSON array). */
json_t *work_collect_artifacts(struct run *run);

/* control.c */
/* Condition variables that wait on CLOCK_MONOTONIC (a wall-clock jump does
 * not disturb timers), and a deadline ms from now on that clock. */
void control_cond_init(pthread_cond_t *cv);
void control_deadline(struct timespec *ts, uint64_t ms);
void control_notify(struct control *c);
/* Appends an event (data is consumed) and wakes the streams. */
int64_t control_event(struct control *c, const char *session_id,
		      enum event_kind kind, json_t *data);
/* A state transition (see store.h) that also wakes the streams. */
int64_t control_transition(struct control *c, const char *id, int from,
			   enum session_state to,
			   const struct store_session_update *upd,
			   json_t *extra, struct wr_error **err);
/* The same on a user's behalf (a cancel, a follow-up, a decision): its
 * audit record names user:<user>; control_transition's the system. */
int64_t control_transition_as(struct control *c, const char *user,
			      const char *id, int from, enum session_state to,
			      const struct store_session_update *upd,
			      json_t *extra, struct wr_error **err);

json_t *control_limits_to_json(const struct control_limits *l);
/* The perimeter's view of the run's session and sandbox. */
struct perimeter_run run_perimeter(struct run *run);

/* metrics.c */
void metrics_observe(struct control *c, enum metric_phase p, double ms);
void metrics_add(struct control *c, uint64_t *counter, uint64_t n);

#endif

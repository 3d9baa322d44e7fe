/* sandbox.h - one disposable, isolated Linux sandbox, on one of two backends.
 *
 * The sandbox module owns creating, exec-ing into, limiting and destroying a
 * sandbox; it is the only code that calls clone/mount/pivot_root/seccomp.
 *
 * A sandbox is: a cgroup (v2 where its controllers are enabled, else the v1
 * memory/cpu/pids hierarchies) with limits set before any process enters; a
 * process cloned into new user, mount, pid, uts, ipc, net and cgroup
 * namespaces whose root maps to an unprivileged host uid range of its own
 * (a "slot"); an overlay root built from read-only layers and a writable
 * upper directory; and warren-init as PID 1, which either runs one command
 * (run mode) or serves exec requests on a unix socket (serve mode).
 *
 * Long-lived sandboxes are recorded under the runtime directory
 * ($WARREN_RUNTIME_DIR; default /run/warren where /run is a tmpfs, else
 * /dev/shm/warren) so that any later warren process
 * can exec into them, list them, remove them, and clean up after a warren that
 * crashed. */
#ifndef WR_SANDBOX_H
#define WR_SANDBOX_H

#include "util/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum sandbox_net {
	SANDBOX_NET_NONE, /* loopback only */
	SANDBOX_NET_MAX,
};

/* Where a sandbox's processes run. Both backends share the layers, the
 * writable upper, the limits (one cgroup), warren-init and its exec
 * protocol, and the runtime records; backend.c holds the table. */
enum sandbox_backend {
	SANDBOX_BACKEND_NATIVE, /* Linux namespaces, seccomp (create.c) */
	SANDBOX_BACKEND_GVISOR, /* gVisor's runsc, ptrace platform (gvisor.c) */
	SANDBOX_BACKEND_MAX,
};

/* "native", "gvisor". */
const char *sandbox_backend_name(enum sandbox_backend b);
/* -EINVAL for an unknown name. */
int sandbox_backend_parse(const char *name, enum sandbox_backend *out);
/* Can this host run the backend? (gvisor: runsc is installed.) -ENOENT
 * with a message saying what is missing. */
int sandbox_backend_check(enum sandbox_backend b, struct wr_error **err);

enum sandbox_mode {
	SANDBOX_MODE_RUN,   /* init runs argv, exits with its status */
	SANDBOX_MODE_SERVE, /* init waits for exec requests */
	SANDBOX_MODE_MAX,
};

struct sandbox_bind {
	const char *source; /* host path */
	const char *dest;   /* absolute path inside */
	bool read_only;
};

/* Strings are borrowed (e.g. from argv); arrays are owned by the config and
 * released with sandbox_config_clear(). Zero limits mean "the default". */
struct sandbox_config {
	const char *name;    /* NULL: generated (one-off sandboxes) */
	const char *rootfs;  /* NULL: host mode (host /usr + minimal /etc) */
	const char **layers; /* read-only lower layers, bottom first */
	size_t n_layers;
	const char *upper; /* NULL: scratch upper, discarded at exit;
			    * else a layer directory: DIR/upper + DIR/work */
	struct sandbox_bind *binds;
	size_t n_binds;
	const char **env; /* "K=V" */
	size_t n_env;
	const char *cwd;      /* default /workspace */
	const char *hostname; /* default: "warren" */
	const char *data_dir; /* the data directory (absolute) whose warren
			       * made it, recorded for `sandbox ls`; NULL:
			       * none */
	uint64_t memory_bytes;
	uint64_t millicpus; /* 0: unlimited */
	uint64_t pids;
	uint64_t disk_bytes; /* size cap of the writable layer: the scratch
			      * layer's tmpfs, or with upper the size of
			      * the layer's image (upper/layer.img) */
	uint64_t inodes;     /* with upper and disk_bytes: files the image
			      * holds (0: one per 16 KiB) */
	uint64_t timeout_ms; /* 0: none */
	enum sandbox_net net;
	enum sandbox_backend backend; /* zero: native */
	bool allow_userns; /* let the sandbox create user namespaces */
	bool owner_bound;  /* long-lived, but reaped when the warren that
			    * created it dies */
	bool no_seccomp;   /* tests/debugging only; never the default */
};

#define SANDBOX_DEFAULT_MEMORY (4ULL << 30)
#define SANDBOX_DEFAULT_PIDS 4096
#define SANDBOX_DEFAULT_DISK (10ULL << 30)
#define SANDBOX_DEFAULT_CWD "/workspace"

/* The environment a command gets inside unless told otherwise: never the
 * caller's, which may hold secrets. NULL-terminated. */
extern const char *const sandbox_default_env[];

void sandbox_config_clear(struct sandbox_config *cfg);
/* Checks everything that can be checked before creating anything: paths
 * exist, flags don't conflict, names are valid. -EINVAL with a message that
 * names the option on bad input. */
int sandbox_config_validate(const struct sandbox_config *cfg,
			    struct wr_error **err);

/* Setup timings, in microseconds. */
struct sandbox_timings {
	uint64_t cgroup_us;  /* cgroup create + limits */
	uint64_t prepare_us; /* idmapped layer mounts */
	uint64_t clone_us;   /* clone until the child is released */
	uint64_t setup_us; /* child: mounts, pivot, caps, seccomp, exec init */
	uint64_t total_us; /* request to init running */
};

struct sandbox;

/* Creates the sandbox and starts its init. In RUN mode argv is the command;
 * in SERVE mode argv must be NULL and cfg->name is required. */
int sandbox_create(const struct sandbox_config *cfg, enum sandbox_mode mode,
		   char *const argv[], struct sandbox **out,
		   struct wr_error **err);

struct sandbox_result {
	int exit_code;	 /* the command's status, 128+N if killed by signal N */
	bool timed_out;	 /* the wall-clock timeout fired */
	bool oom_killed; /* the memory limit killed a process */
	uint64_t run_us; /* init start to exit */
	uint64_t destroy_us;
	struct sandbox_timings timings;
};

/* RUN mode: waits for the command (forwarding SIGINT/SIGTERM/SIGHUP), then
 * destroys the sandbox and frees it. Always consumes sb. */
int sandbox_run_wait(struct sandbox *sb, struct sandbox_result *res,
		     struct wr_error **err);
/* SERVE mode: leaves the sandbox running and frees the handle. */
void sandbox_detach(struct sandbox *sb);
/* Kills everything and removes every trace; frees sb. */
int sandbox_destroy(struct sandbox *sb, struct wr_error **err);
const struct sandbox_timings *sandbox_get_timings(const struct sandbox *sb);
const char *sandbox_get_name(const struct sandbox *sb);
pid_t sandbox_get_init_pid(const struct sandbox *sb);

/* Long-lived sandboxes by name. */
struct sandbox_info {
	char *name;
	pid_t init_pid;
	int slot;
	uid_t host_uid_base;
	int64_t created_ms;  /* unix epoch ms */
	int64_t deadline_ms; /* 0: no timeout */
	bool alive;
	enum sandbox_backend backend;
	char *upper;   /* NULL: scratch */
	char **layers; /* lower layers, NULL-terminated (may be NULL) */
	char *data_dir; /* the creator's data directory; NULL: not recorded */
};
int sandbox_list(struct sandbox_info **out, size_t *n_out,
		 struct wr_error **err);
void sandbox_info_free_array(struct sandbox_info *infos, size_t n);
/* The ids of the layers under layers_dir (DATA/layers) that live
 * sandboxes use as lower layers (*n_out of them; caller frees each and
 * the array), which a gc or a cache eviction must keep. NULL when there
 * are none or on failure. */
char **sandbox_layers_in_use(const char *layers_dir, size_t *n_out);
/* Kill, unmount, remove cgroup and state: nothing left behind. -ENOENT if no
 * such sandbox. */
int sandbox_remove(const char *name, struct wr_error **err);
/* Cleans every record whose sandbox is gone (crashed warren, killed init,
 * expired timeout). Returns the number cleaned. */
int sandbox_reap_stale(struct wr_error **err);

struct sandbox_exec_request {
	char *const *argv;
	char *const *env; /* NULL-terminated "K=V", on top of the default
			   * environment and create's --env; may be NULL */
	const char *cwd;  /* NULL: create's --cwd, else /workspace */
	bool tty;
	int stdio[3]; /* fds handed to the command (ignored with tty) */
};
/* Runs a command in a long-lived sandbox through its init's exec socket;
 * with tty, relays the caller's terminal. Returns the command's exit code
 * (>= 0) or -errno. */
int sandbox_exec(const char *name, const struct sandbox_exec_request *req,
		 struct wr_error **err);

/* Is path a writable-layer directory made by --upper (DIR/upper, DIR/work,
 * owned by the store range)? --layer accepts such a DIR for DIR/upper. */
bool sandbox_is_upper_dir(const char *path);

/* Runtime directory: $WARREN_RUNTIME_DIR, else /run/warren where /run is
 * a tmpfs, else /dev/shm/warren. */
const char *sandbox_runtime_dir(void);

#endif

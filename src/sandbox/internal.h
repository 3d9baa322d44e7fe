/* internal.h - shared between the files of the sandbox module only. */
#ifndef WR_SANDBOX_INTERNAL_H
#define WR_SANDBOX_INTERNAL_H

#include "sandbox/sandbox.h"

#include <stdbool.h>
#include <linux/filter.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- host uid ranges ------------------------------------------------------
 * Each sandbox runs in its own 65536-id host range (its "slot"), so two
 * sandboxes never share a host uid. Everything Warren stores on disk (layers,
 * persistent upper directories) is owned by one fixed unprivileged "store"
 * range, and each sandbox sees it through an idmapped mount that maps the
 * store range onto its slot range: a layer written in one slot is usable in
 * every other slot, and no file on the host is ever owned by a real user
 * (a setuid file written inside is setuid to an unused id). */
#define WR_IDS_PER_SLOT 65536u
#define WR_STORE_UID 1000000000u
#define WR_SLOT_UID_BASE (WR_STORE_UID + WR_IDS_PER_SLOT)
#define WR_MAX_SLOTS 1024

static inline uid_t wr_slot_uid(int slot)
{
	return (uid_t)(WR_SLOT_UID_BASE + (unsigned)slot * WR_IDS_PER_SLOT);
}

static inline bool wr_in_store_range(uid_t uid)
{
	return uid >= WR_STORE_UID && uid < WR_STORE_UID + WR_IDS_PER_SLOT;
}

/* ---- cgroups (cgroup.c) ---------------------------------------------------
 */
enum cg_controller {
	CG_MEMORY,
	CG_CPU,
	CG_PIDS,
	CG_UNIFIED, /* the v2 tree, for tracking and cgroup.kill */
	CG_MAX,
};

struct sandbox_cgroup {
	char *path[CG_MAX]; /* NULL: controller not used */
	bool v2[CG_MAX];
};

struct sandbox_limits {
	uint64_t memory_bytes;
	uint64_t millicpus;
	uint64_t pids;
};

int cgroup_create(const char *name, const struct sandbox_limits *limits,
		  struct sandbox_cgroup *cg, struct wr_error **err);
/* Is a v2 directory part of this sandbox's cgroup? (Then the child is
 * cloned straight into it with CLONE_INTO_CGROUP.) */
bool cgroup_has_v2(const struct sandbox_cgroup *cg);
int cgroup_open_v2_dir(const struct sandbox_cgroup *cg);
/* Opens the v1 "tasks" file of each v1 hierarchy (up to CG_MAX fds). */
int cgroup_open_v1_tasks(const struct sandbox_cgroup *cg, int *fds,
			 size_t *n_out);
/* In the child: move the calling (single-threaded) process in. */
int cgroup_enter_self(const int *fds, size_t n);
/* Kills every process in the cgroup (repeatedly, until empty or timeout). */
int cgroup_kill_all(const struct sandbox_cgroup *cg, int timeout_ms);
bool cgroup_oom_killed(const struct sandbox_cgroup *cg);
/* Removes the cgroup directories; -EBUSY at once if one still holds a
 * process (the directories removed so far stay removed). */
int cgroup_destroy_if_empty(struct sandbox_cgroup *cg);
/* Removes the cgroup directories (after kill_all), waiting for the last
 * tasks to be released. */
int cgroup_destroy(struct sandbox_cgroup *cg);
void cgroup_clear(struct sandbox_cgroup *cg);
/* Fills cg with the paths a sandbox called name would have. */
int cgroup_paths_for(const char *name, struct sandbox_cgroup *cg);

/* ---- idmapped mounts (idmap.c) ------------------------------------------ */
/* A user namespace whose only purpose is to describe a mapping for
 * mount_setattr(MOUNT_ATTR_IDMAP): inside [inside, inside+count) maps to host
 * [outside, ...). Returns an fd or -errno. */
int idmap_userns_open(uid_t inside, uid_t outside, uint32_t count);
/* Does a read-only bind of path become an overlay of it (rootfs.c)? A
 * directory that holds no unix socket at its top (overlayfs passes no
 * connection through to a socket in a lower layer). */
bool bind_wants_overlay(const char *path);
/* A detached clone of path (open_tree), idmapped through userns_fd (if >= 0)
 * and with the given MOUNT_ATTR_* flags. Returns an fd or -errno. */
int idmap_mount_open(const char *path, int userns_fd, uint64_t attr_set);
/* The same for a detached mount already open as fd: the MOUNT_ATTR_* flags,
 * and the mapping of userns_fd (if >= 0). Returns 0 or -errno. */
int idmap_mount_set(int fd, int userns_fd, uint64_t attr_set);

/* ---- writable layers in an image of their own (layerimg.c) -------------- */
#define LAYER_IMAGE_NAME "layer.img"
/* Does the layer directory dir keep its layer in dir/layer.img? */
bool layer_image_present(const char *dir);
/* Makes dir/layer.img, an ext4 filesystem of bytes (inodes files; 0:
 * mke2fs's ratio), unless it is there. Returns 0 or -errno (err set). */
int layer_image_create(const char *dir, uint64_t bytes, uint64_t inodes,
		       struct wr_error **err);
/* The image's filesystem as a detached mount, nodev and nosuid: writable
 * with upper/ and an empty work/ made, or read-only. Returns an fd or
 * -errno (err set). */
int layer_image_mount(const char *dir, bool read_only, struct wr_error **err);
/* The writable layer of sb's --upper as a detached mount (DIR itself, or
 * the filesystem of DIR/layer.img), nodev, idmapped through store_ns.
 * Returns an fd or -errno (err set). */
int upper_mount_open(const struct sandbox *sb, int store_ns,
		     struct wr_error **err);
/* A --layer path as a detached read-only clone, not yet idmapped: the
 * layer of a writable-layer directory (DIR/upper, or upper/ in its
 * image), else the path itself; *owner: the owner of its root, which
 * picks the mapping; what names it in errors ("--layer"). Returns an fd
 * or -errno (err set). */
int layer_source_open(const char *path, const char *what, uid_t *owner,
		      struct wr_error **err);

/* A compiled seccomp program (security.c). */
struct seccomp_program {
	struct sock_fprog prog;
};

/* ---- child side (child.c, rootfs.c) -------------------------------------- */
#define WR_MAX_LAYERS 64
#define WR_MAX_BINDS 64
#define WR_PROTO_INIT_ARGS_MAX 4200

/* Everything the cloned child needs, prepared by the parent before clone. */
struct child_plan {
	const struct sandbox_config *cfg;
	enum sandbox_mode mode;
	char *const *argv;
	int slot;
	int sync_fd;	 /* SOCK_SEQPACKET to the parent */
	int init_fd;	 /* O_PATH fd of warren-init */
	int listen_fd;	 /* serve mode: exec socket */
	int stage_dirfd; /* empty host directory used as mount staging point */
	const char *stage_path;
	int layer_fds[WR_MAX_LAYERS + 1]; /* detached mounts, bottom first */
	size_t n_layer_fds;
	int upper_parent_fd; /* detached mount holding upper + work, or -1 */
	const char *upper_name;
	const char *work_name;
	int bind_fds[WR_MAX_BINDS];
	/* a read-only directory bind mounted as a read-only overlay of it, so
	 * that its mount names no host path (see rootfs.c) */
	bool bind_overlay[WR_MAX_BINDS];
	char **init_env; /* environment for init (run mode: the command's) */
	struct seccomp_program seccomp;
	bool host_mode;
};

/* Report of a failed child step, sent over sync_fd. */
struct child_report {
	int32_t err; /* positive errno; 0 = release/ok */
	char step[200];
};

/* Runs in the cloned child; never returns. */
__attribute__((noreturn)) void child_main(struct child_plan *plan);
/* Build the root filesystem under plan->stage and pivot into it. On error
 * writes the step into report and returns -errno. */
int rootfs_setup(struct child_plan *plan, struct child_report *report);
/* Capabilities, no_new_privs, seccomp (security.c). */
int security_apply(const struct sandbox_config *cfg,
		   const struct seccomp_program *program,
		   struct child_report *report);
/* Compiles the filter (or reads it from the runtime cache). */
int seccomp_prepare(bool allow_userns, struct seccomp_program *out);
void seccomp_program_clear(struct seccomp_program *p);

/* ---- host base layer (hostbase.c) --------------------------------------- */
extern const char *const hostbase_top_entries[];
extern const size_t hostbase_n_top_entries;
/* Path of the cached base layer for host mode, built if missing. */
char *hostbase_ensure(struct wr_error **err);

/* ---- runtime records (runtime.c) ---------------------------------------- */
struct sandbox_record {
	char *name;
	int slot;
	enum sandbox_backend backend;
	enum sandbox_mode mode;
	pid_t init_pid;
	uint64_t init_start; /* /proc/PID/stat starttime, guards pid reuse */
	pid_t owner_pid;     /* the warren that created it */
	uint64_t owner_start;
	int64_t created_ms;
	int64_t deadline_ms;
	char *upper;
	char *work_dir; /* persistent upper's work dir, removed at destroy */
	char **env;	/* serve mode: create's --env, defaults for exec */
	char *cwd;	/* serve mode: create's --cwd, default for exec */
	char **layers;	/* lower layers (paths), so gc keeps them */
	char *data_dir; /* the creator's data directory (sandbox ls) */
	bool owner_bound; /* dies with its owner, like a one-off sandbox */
};

char *runtime_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int runtime_ensure_dirs(struct wr_error **err);
/* Claims a free slot and the record directory for name (atomic). */
int runtime_claim(const char *name, int *slot_out, struct wr_error **err);
void runtime_release(const char *name, int slot);
int runtime_record_write(const struct sandbox_record *rec,
			 struct wr_error **err);
int runtime_record_read(const char *name, struct sandbox_record *rec);
void runtime_record_clear(struct sandbox_record *rec);
uint64_t proc_start_time(pid_t pid); /* 0 if not running */
bool runtime_record_alive(const struct sandbox_record *rec);
/* Name of a live sandbox using upper dir (realpath), or NULL. */
char *runtime_upper_in_use(const char *upper_real);
/* env = defaults, then the record's, then extra; later keys replace
 * earlier ones. NULL-terminated; the strings are borrowed. */
char **sandbox_compose_env(char *const *record_env, char *const *extra);
int64_t wr_now_ms(void);
uint64_t wr_mono_us(void);

/* ---- one sandbox, whatever its backend (create.c, gvisor.c) ------------- */
struct sandbox {
	char *name;
	int slot;
	enum sandbox_mode mode;
	enum sandbox_backend backend;
	struct sandbox_cgroup cg;
	int pidfd; /* the process run_wait waits for: native's init, the
		    * gvisor launcher (`runsc run`) */
	pid_t init_pid;
	char *upper_real; /* persistent upper (realpath) or NULL */
	char *work_dir;	  /* its overlay work dir, ours to remove (NULL
			   * for an image: its work dir is emptied at
			   * each mount) */
	bool upper_image; /* the layer is in upper_real/layer.img */
	uint64_t timeout_ms;
	uint64_t started_us;
	struct sandbox_timings timings;
	/* gvisor run mode: pipes standing in for regular files as the
	 * command's stdout/stderr (read ends; -1: none), and where to */
	int relay_from[2];
	int relay_to[2];
};

/* What create.c and gvisor.c share. */
struct sandbox *sandbox_alloc(const struct sandbox_config *cfg,
			      enum sandbox_mode mode);
void sandbox_free(struct sandbox *sb);
/* Checks and prepares --upper DIR (store-owned DIR, DIR/upper, DIR/work;
 * with --disk, DIR/layer.img instead); fills sb->upper_real, sb->work_dir
 * and sb->upper_image. */
int sandbox_prepare_upper(struct sandbox *sb, const struct sandbox_config *cfg,
			  struct wr_error **err);
/* The path of warren-init ($WARREN_INIT, beside warren, or libexec). */
char *sandbox_find_init(void);
/* A one-off command's environment: the default plus cfg->env. */
char **sandbox_config_env(const struct sandbox_config *cfg);
/* The checks every backend's create starts with: the configuration, the
 * command, the runtime directory; reaps stale records. */
int sandbox_create_precheck(const struct sandbox_config *cfg,
			    enum sandbox_mode mode, char *const argv[],
			    struct wr_error **err);
/* The record of a sandbox being created (the strings borrowed from cfg and
 * sb; *env_out and *layers_out are the caller's to free). */
int sandbox_record_init(const struct sandbox *sb,
			const struct sandbox_config *cfg,
			struct sandbox_record *rec, char ***env_out,
			char ***layers_out, struct wr_error **err);

/* sandbox_record_init, then the record written (so a crash from here on
 * leaves something the next warren finds), then --upper prepared and the
 * record written again with it. */
int sandbox_record_start(struct sandbox *sb, const struct sandbox_config *cfg,
			 struct sandbox_record *rec, char ***env_out,
			 char ***layers_out, struct wr_error **err);

/* ---- the overlay root both backends stand on (rootfs.c) ----------------- */
/* Mounts the staging tmpfs at plan->stage_path (the disk cap), attaches
 * plan's layers and upper there, mounts the overlay at STAGE/root and
 * creates the base directories in it. Run in a private mount namespace.
 * Returns an O_PATH fd of the new root or -errno (the step in report). */
int rootfs_stage_overlay(struct child_plan *plan, struct child_report *report);
/* Host mode: /etc/hosts and /etc/hostname naming cfg->hostname. */
int rootfs_write_host_names(int root_fd, const struct sandbox_config *cfg,
			    struct child_report *report);
/* The capabilities root keeps inside (security.c). */
extern const int sandbox_kept_caps[];
extern const size_t sandbox_n_kept_caps;

/* ---- backends (backend.c) ------------------------------------------------
 * The one table a new backend fills. create makes a sandbox from a checked
 * configuration; teardown undoes everything of a handle (its process
 * killed and reaped, the cgroup, the record; *oom: did the memory limit
 * kill something) - the shared run_wait and destroy (backend.c) call it;
 * cleanup undoes what the backend itself left for a record being removed
 * (before the shared cgroup, work dir and record removal of manage.c);
 * check says whether the host can run it. */
struct sandbox_backend_ops {
	int (*check)(struct wr_error **err);
	int (*create)(const struct sandbox_config *cfg, enum sandbox_mode mode,
		      char *const argv[], struct sandbox **out,
		      struct wr_error **err);
	int (*teardown)(struct sandbox *sb, bool *oom);
	void (*cleanup)(const struct sandbox_record *rec);
	bool exec_tty;	  /* can exec relay a terminal? */
	bool stdio_relay; /* exec: regular files as stdout/stderr go
			   * through pipes (exec_client.c) */
};
extern const struct sandbox_backend_ops native_backend_ops;
extern const struct sandbox_backend_ops gvisor_backend_ops;
const struct sandbox_backend_ops *sandbox_backend_ops(enum sandbox_backend b);

#endif

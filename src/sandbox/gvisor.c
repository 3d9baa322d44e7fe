/* gvisor.c - the gvisor backend: the same sandbox under gVisor's runsc.
 *
 * The processes of a gvisor sandbox run on gVisor's Sentry, a kernel in
 * user space (ptrace platform, network "none"): a system call made inside
 * is served by the Sentry, never by the host's kernel. Everything else is
 * the native sandbox's:
 *   - the root: the same overlay of the same layers and writable upper,
 *     built by rootfs.c, here on the host in a private mount namespace of
 *     a launcher process that then runs runsc; runsc's gofer serves it
 *     to the Sentry;
 *   - the uid model (internal.h): the Sentry runs the sandbox in a user
 *     namespace mapping 0.. onto the sandbox's slot range, the layers and
 *     the upper are idmapped from the store range onto that slot range:
 *     root inside owns its files (store-owned on disk) and is nobody to
 *     any other host file, bound ones included;
 *   - the limits: one cgroup (cgroup.c) built before the launcher moves
 *     into it; runsc runs with --ignore-cgroups and its gofer and Sentry
 *     inherit the launcher's cgroup, so memory, CPU and pids hold for the
 *     whole sandbox, gVisor's own processes included;
 *   - PID 1 is warren-init, bound in read-only at /dev/.warren-init, with
 *     the same exec protocol: in serve mode init creates its socket in a
 *     directory of the record bound at /dev/.warren-exec (runsc's
 *     --host-uds=all makes a unix socket made inside a host socket there,
 *     descriptors passed included), and the record's exec.sock is a
 *     symlink to it, so exec_client.c is the same for both backends;
 *   - the records, listing, removal and reaping (runtime.c, manage.c);
 *     removal also runs `runsc delete --force` (the cleanup op below).
 * What differs: exec with a terminal is refused (a pty inside the Sentry
 * cannot be handed to the host), and a process inside can reach init's
 * socket (it gains nothing: the same root in the same sandbox). */
#include "sandbox/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* Warren's own plumbing inside, in the Sentry's /dev (a tmpfs of its own,
 * never part of a layer): init (named warren-init, as with native), its
 * filter, the directory of its exec socket */
#define GV_INIT_PATH "/dev/.warren/warren-init"
#define GV_EXEC_DIR "/dev/.warren/exec"
#define GV_SECCOMP_PATH "/dev/.warren/seccomp"
/* pids: what gVisor's own processes and threads (Sentry, gofer, ptrace
 * stubs) take of the cgroup's count on top of the sandbox's tasks, whose
 * own limit gVisor enforces as RLIMIT_NPROC */
#define GV_PIDS_OVERHEAD 512
#define GV_DIR "gvisor" /* under the runtime directory */
#define GV_SOCKET_WAIT_MS 10000
#define GV_ERR_MAX 4096

static const char *const runsc_candidates[] = {
    "/usr/bin/runsc", "/usr/sbin/runsc", "/usr/local/bin/runsc", NULL};

/* $WARREN_RUNSC, else the first runsc installed; NULL if none. */
static const char *runsc_path(void)
{
	const char *env = getenv("WARREN_RUNSC");
	if (env && *env)
		return access(env, X_OK) == 0 ? env : NULL;
	for (size_t i = 0; runsc_candidates[i]; i++) {
		if (access(runsc_candidates[i], X_OK) == 0)
			return runsc_candidates[i];
	}
	return NULL;
}

static int gvisor_check(struct wr_error **err)
{
	if (!runsc_path())
		return wr_error_input(
		    err, ENOENT,
		    "the gvisor backend needs gVisor's runsc (apt-get install "
		    "runsc, or set WARREN_RUNSC)");
	return 0;
}

/* runsc's global flags, then the sub-command's arguments. Returns a
 * NULL-terminated argv borrowing every string but its own array. */
static char **runsc_argv(const char *root, char *const *args)
{
	static const char *const flags[] = {
	    "--network=none", "--host-uds=all", "--ignore-cgroups",
	    "--file-access=shared", "--overlay2=none", "--directfs=false", NULL};
	size_t n = 0;
	while (args[n])
		n++;
	char **argv = wr_calloc(n + 12, sizeof(char *));
	if (!argv)
		return NULL;
	size_t k = 0;
	argv[k++] = (char *)runsc_path();
	argv[k++] = (char *)"--root";
	argv[k++] = (char *)root;
	for (size_t i = 0; flags[i]; i++)
		argv[k++] = (char *)flags[i];
	/* WARREN_RUNSC_DEBUG=DIR: runsc's debug logs there (operators) */
	static char debug_flag[4200];
	const char *debug = getenv("WARREN_RUNSC_DEBUG");
	if (debug && *debug && strlen(debug) < 4000) {
		snprintf(debug_flag, sizeof(debug_flag), "--debug-log=%s/",
			 debug);
		argv[k++] = (char *)"--debug";
		argv[k++] = debug_flag;
	}
	for (size_t i = 0; i < n; i++)
		argv[k++] = args[i];
	argv[k] = NULL;
	return argv;
}

static char *const runsc_env[] = {
    (char *)"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    NULL};

/* Runs `runsc --root R ARGS...` to completion with stdout and stderr to
 * err_fd (or /dev/null). Returns its exit status or -errno. */
static int runsc_run(char *const *args, int err_fd)
{
	_cleanup_free_ char *root = runtime_path("runsc");
	_cleanup_free_ char **argv = root ? runsc_argv(root, args) : NULL;
	if (!argv || !argv[0])
		return argv ? -ENOENT : -ENOMEM;
	struct proc_spec spec = {
	    .argv = (const char *const *)argv,
	    .envp = (const char *const *)runsc_env,
	    .in = {PROC_NULL, -1},
	    .out = err_fd >= 0 ? (struct proc_stdio){PROC_FD, err_fd}
			       : (struct proc_stdio){PROC_NULL, -1},
	    .err = {PROC_STDOUT, -1},
	};
	struct proc p;
	int r = proc_start(&spec, &p, NULL);
	if (r < 0)
		return r;
	r = proc_wait(&p);
	proc_close(&p);
	return r;
}

/* ---- the OCI bundle ----------------------------------------------------- */

static const struct {
	int cap;
	const char *name;
} cap_names[] = {
    {CAP_CHOWN, "CAP_CHOWN"},
    {CAP_DAC_OVERRIDE, "CAP_DAC_OVERRIDE"},
    {CAP_FOWNER, "CAP_FOWNER"},
    {CAP_FSETID, "CAP_FSETID"},
    {CAP_KILL, "CAP_KILL"},
    {CAP_SETGID, "CAP_SETGID"},
    {CAP_SETUID, "CAP_SETUID"},
    {CAP_SETPCAP, "CAP_SETPCAP"},
    {CAP_SETFCAP, "CAP_SETFCAP"},
    {CAP_NET_BIND_SERVICE, "CAP_NET_BIND_SERVICE"},
    {CAP_SYS_CHROOT, "CAP_SYS_CHROOT"},
};

/* The capabilities native keeps (security.c), by name. */
static json_t *kept_caps_json(void)
{
	json_t *caps = json_array();
	for (size_t i = 0; caps && i < sandbox_n_kept_caps; i++) {
		for (size_t k = 0; k < ARRAY_SIZE(cap_names); k++) {
			if (cap_names[k].cap == sandbox_kept_caps[i])
				json_array_append_new(
				    caps, json_string(cap_names[k].name));
		}
	}
	return caps;
}

static int add_mount(json_t *mounts, const char *dest, const char *type,
		     const char *source, const char *const *options)
{
	json_t *opts = json_array();
	for (size_t i = 0; opts && options && options[i]; i++)
		json_array_append_new(opts, json_string(options[i]));
	json_t *m = json_pack("{s:s, s:s, s:s, s:o}", "destination", dest,
			      "type", type, "source", source, "options", opts);
	return m && !json_array_append_new(mounts, m) ? 0 : -ENOMEM;
}

static json_t *string_array(char *const *list)
{
	json_t *a = json_array();
	for (size_t i = 0; a && list && list[i]; i++)
		json_array_append_new(a, json_string(list[i]));
	return a;
}

/* config.json: the root, init and its arguments, the mounts native makes
 * itself (rootfs.c) as OCI mounts, the capabilities native keeps. */
static json_t *bundle_config(const struct sandbox_config *cfg,
			     enum sandbox_mode mode, char *const argv[],
			     const char *root, const char *init_path,
			     const char *exec_dir, const char *seccomp_path,
			     bool persistent_upper, int slot,
			     char *const *bind_paths)
{
	char timeout_arg[32];
	json_t *args = json_array();
	json_array_append_new(args, json_string(GV_INIT_PATH));
	json_array_append_new(
	    args, json_string(mode == SANDBOX_MODE_RUN ? "run" : "serve"));
	if (seccomp_path) {
		json_array_append_new(args, json_string("--seccomp"));
		json_array_append_new(args, json_string(GV_SECCOMP_PATH));
	}
	_cleanup_free_ char **env = NULL;
	if (mode == SANDBOX_MODE_RUN) {
		json_array_append_new(args, json_string("--"));
		for (size_t i = 0; argv[i]; i++)
			json_array_append_new(args, json_string(argv[i]));
		env = sandbox_config_env(cfg);
	} else {
		json_array_append_new(args, json_string("--listen"));
		json_array_append_new(args,
				      json_string(GV_EXEC_DIR "/exec.sock"));
		if (cfg->timeout_ms) {
			snprintf(timeout_arg, sizeof(timeout_arg), "%llu",
				 (unsigned long long)cfg->timeout_ms);
			json_array_append_new(args, json_string("--timeout-ms"));
			json_array_append_new(args, json_string(timeout_arg));
		}
		env = wr_calloc(1, sizeof(char *)); /* init: empty env */
	}
	if (!env) {
		json_decref(args);
		return NULL;
	}
	json_t *caps = kept_caps_json();
	json_t *process = json_pack(
	    "{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:b, s:{s:O, s:O, s:O}}",
	    "terminal", 0, "user", "uid", 0, "gid", 0, "args", args, "env",
	    string_array(env), "cwd", cfg->cwd ? cfg->cwd : SANDBOX_DEFAULT_CWD,
	    "noNewPrivileges", 1, "capabilities", "bounding", caps,
	    "effective", caps, "permitted", caps);
	json_decref(caps);
	uint64_t pids = cfg->pids ? cfg->pids : SANDBOX_DEFAULT_PIDS;
	json_object_set_new(process, "rlimits",
			    json_pack("[{s:s, s:I, s:I}]", "type", "RLIMIT_NPROC",
				      "hard", (json_int_t)pids, "soft",
				      (json_int_t)pids));
	json_t *mounts = json_array();
	json_int_t host_id = (json_int_t)wr_slot_uid(slot);
	json_t *o = json_pack(
	    "{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:{s:[{s:s}, {s:s}, {s:s}, "
	    "{s:s}, {s:s}, {s:s}], s:[{s:i, s:I, s:i}], s:[{s:i, s:I, s:i}]}}",
	    "ociVersion", "1.0.2", "process", process, "root", "path", root,
	    "readonly", 0, "hostname", cfg->hostname ? cfg->hostname : "warren",
	    "mounts", mounts, "linux", "namespaces", "type", "pid", "type",
	    "network", "type", "ipc", "type", "uts", "type", "mount", "type",
	    "user", "uidMappings", "containerID", 0, "hostID", host_id, "size",
	    (int)WR_IDS_PER_SLOT, "gidMappings", "containerID", 0, "hostID",
	    host_id, "size", (int)WR_IDS_PER_SLOT);
	if (!o)
		return NULL;
	static const char *const proc_opts[] = {"nosuid", "nodev", "noexec",
						NULL};
	/* the Sentry's own tmpfs; not read-only as native's (gVisor then
	 * refuses even `> /dev/null`): no device node can be made there
	 * (seccomp), and it goes with the sandbox */
	static const char *const dev_opts[] = {"nosuid", "noexec", "mode=755",
					       "size=65536k", NULL};
	static const char *const pts_opts[] = {
	    "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620",
	    NULL};
	static const char *const shm_opts[] = {"nosuid", "nodev", "mode=1777",
					       NULL};
	static const char *const ro_bind[] = {"rbind", "ro", "nosuid", "nodev",
					      NULL};
	static const char *const rw_bind[] = {"rbind", "rw", "nosuid", "nodev",
					      NULL};
	int r = 0;
	r |= add_mount(mounts, "/proc", "proc", "proc", proc_opts);
	r |= add_mount(mounts, "/dev", "tmpfs", "tmpfs", dev_opts);
	r |= add_mount(mounts, "/dev/pts", "devpts", "devpts", pts_opts);
	r |= add_mount(mounts, "/dev/shm", "tmpfs", "shm", shm_opts);
	/* no sysfs: native has none either (an empty read-only tmpfs over
	 * the Sentry's own) */
	static const char *const sys_opts[] = {"ro", "nosuid", "nodev",
					       "noexec", "size=4k", NULL};
	r |= add_mount(mounts, "/sys", "tmpfs", "tmpfs", sys_opts);
	if (!persistent_upper) {
		/* /tmp in the scratch layer, under the disk cap, as with
		 * native (runsc would give it a tmpfs of its own) */
		char tmp_src[4200];
		snprintf(tmp_src, sizeof(tmp_src), "%s/tmp", root);
		static const char *const tmp_bind[] = {"rbind", "rw", "nosuid",
						       "nodev", NULL};
		r |= add_mount(mounts, "/tmp", "bind", tmp_src, tmp_bind);
	}
	if (persistent_upper) {
		/* /tmp and /run stay out of a persistent layer (rootfs.c) */
		char size_opt[64];
		uint64_t disk =
		    cfg->disk_bytes ? cfg->disk_bytes : SANDBOX_DEFAULT_DISK;
		snprintf(size_opt, sizeof(size_opt), "size=%llu",
			 (unsigned long long)disk);
		const char *tmp_opts[] = {"nosuid", "nodev", "mode=1777",
					  size_opt, NULL};
		static const char *const run_opts[] = {
		    "nosuid", "nodev", "mode=0755", "size=16m", NULL};
		r |= add_mount(mounts, "/tmp", "tmpfs", "tmpfs", tmp_opts);
		r |= add_mount(mounts, "/run", "tmpfs", "tmpfs", run_opts);
	}
	if (!cfg->rootfs) {
		/* host mode: the host's /usr and top-level directories */
		r |= add_mount(mounts, "/usr", "bind", "/usr", ro_bind);
		for (size_t i = 0; i < hostbase_n_top_entries; i++) {
			char host[64];
			snprintf(host, sizeof(host), "/%s",
				 hostbase_top_entries[i]);
			struct stat st;
			if (lstat(host, &st) < 0 || !S_ISDIR(st.st_mode))
				continue;
			r |= add_mount(mounts, host, "bind", host, ro_bind);
		}
	}
	/* binds: the launcher's nosuid, nodev (and ro) mounts of the
	 * sources, which the kernel enforces for the gofer */
	for (size_t i = 0; i < cfg->n_binds; i++) {
		r |= add_mount(mounts, cfg->binds[i].dest, "bind",
			       bind_paths[i],
			       cfg->binds[i].read_only ? ro_bind : rw_bind);
	}
	static const char *const init_opts[] = {"bind", "ro", NULL};
	r |= add_mount(mounts, GV_INIT_PATH, "bind", init_path, init_opts);
	if (exec_dir)
		r |= add_mount(mounts, GV_EXEC_DIR, "bind", exec_dir, rw_bind);
	if (seccomp_path)
		r |= add_mount(mounts, GV_SECCOMP_PATH, "bind", seccomp_path,
			       init_opts);
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- the launcher -------------------------------------------------------
 * A child of warren, in the sandbox's cgroup and a private mount namespace
 * of its own: it builds the overlay (rootfs.c) and execs runsc, whose
 * gofer and Sentry inherit both. A step that fails is reported on
 * report_fd; on exec the descriptor closes (O_CLOEXEC) and the parent
 * reads end of file. */
struct launcher {
	struct child_plan plan;
	int cg_fds[CG_MAX]; /* v1 tasks / v2 cgroup.procs, to write "0" */
	size_t n_cg_fds;
	int report_fd;
	int out_fd; /* serve mode: runsc's output, else -1 (inherited) */
	int relay_w[2]; /* run mode: pipes for stdout/stderr, or -1 */
	bool host_mode;
	uid_t slot_uid; /* the sandbox's root on the host */
	char **argv;	/* runsc */
	char *bind_paths[WR_MAX_BINDS]; /* where plan.bind_fds go */
};

__attribute__((noreturn)) static void launcher_fail(struct launcher *l,
						    struct child_report *rep)
{
	if (write(l->report_fd, rep, sizeof(*rep)) < 0) {
		/* the parent sees EOF and says the launcher died */
	}
	_exit(125);
}

/* File-system ids uid (setfsuid clears the file capabilities from the
 * effective set when leaving 0: raised again from the permitted set). */
static int as_slot_root(uid_t uid)
{
	setfsuid(uid);
	setfsgid(uid);
	if ((uid_t)setfsuid((uid_t)-1) != uid) {
		errno = EPERM;
		return -1;
	}
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0)
		return -1;
	for (int i = 0; i < 2; i++)
		data[i].effective = data[i].permitted;
	return (int)syscall(SYS_capset, &hdr, data);
}

__attribute__((noreturn)) static void launcher_main(struct launcher *l)
{
	struct child_report rep = {0};
	pid_t parent = getppid();
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* until runsc runs: below */
	for (size_t i = 0; i < l->n_cg_fds; i++) {
		if (write(l->cg_fds[i], "0", 1) != 1) {
			rep.err = errno;
			snprintf(rep.step, sizeof(rep.step),
				 "enter the sandbox's cgroup");
			launcher_fail(l, &rep);
		}
		close(l->cg_fds[i]);
	}
	if (unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		rep.err = errno;
		snprintf(rep.step, sizeof(rep.step), "private mount namespace");
		launcher_fail(l, &rep);
	}
	for (size_t i = 0; i < l->plan.cfg->n_binds; i++) {
		if (syscall(SYS_move_mount, l->plan.bind_fds[i], "", AT_FDCWD,
			    l->bind_paths[i], MOVE_MOUNT_F_EMPTY_PATH) < 0) {
			rep.err = errno;
			snprintf(rep.step, sizeof(rep.step), "bind %s",
				 l->plan.cfg->binds[i].source);
			launcher_fail(l, &rep);
		}
	}
	/* overlayfs does its upper-layer work with its mounter's credentials:
	 * mount it as the sandbox's root (the slot's first id, through the
	 * upper's idmapped mount the store uid on disk), with the
	 * capabilities kept in effect; host root is not mapped there */
	if (as_slot_root(l->slot_uid) < 0) {
		rep.err = errno;
		snprintf(rep.step, sizeof(rep.step),
			 "take the slot's ids for the overlay");
		launcher_fail(l, &rep);
	}
	int root_fd = rootfs_stage_overlay(&l->plan, &rep);
	if (root_fd < 0)
		launcher_fail(l, &rep);
	if (l->host_mode &&
	    rootfs_write_host_names(root_fd, l->plan.cfg, &rep) < 0)
		launcher_fail(l, &rep);
	close(root_fd);
	if (as_slot_root(0) < 0) {
		rep.err = errno;
		snprintf(rep.step, sizeof(rep.step), "take host root's ids back");
		launcher_fail(l, &rep);
	}
	if (chdir("/") < 0) {
		rep.err = errno;
		snprintf(rep.step, sizeof(rep.step), "chdir /");
		launcher_fail(l, &rep);
	}
	if (l->out_fd >= 0) {
		int in = open("/dev/null", O_RDONLY);
		if (in >= 0)
			dup2(in, 0);
		dup2(l->out_fd, 1);
		dup2(l->out_fd, 2);
	}
	for (int i = 0; i < 2; i++) {
		if (l->relay_w[i] >= 0)
			dup2(l->relay_w[i], 1 + i);
	}
	/* warren gone: SIGTERM, which `runsc run` forwards to init inside
	 * (init ends the command, then itself, and the Sentry ends with it);
	 * a SIGKILL would leave the Sentry running until the next warren
	 * reaps the record. Set here: a change of file ids (as_slot_root)
	 * clears it. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(125);
	execve(l->argv[0], l->argv, runsc_env);
	rep.err = errno;
	snprintf(rep.step, sizeof(rep.step), "exec %s", l->argv[0]);
	launcher_fail(l, &rep);
}

/* Idmapped detached mounts for the launcher, as native makes them
 * (create.c): store-owned paths onto the sandbox's slot range, others
 * (a root-owned --rootfs) from ids 0.. onto it. The Sentry runs the
 * sandbox in a user namespace mapping 0.. to the same slot range
 * (bundle_config), so root inside owns its layers and upper and is
 * nobody to every other host file, as with native. */
static int open_layers(struct launcher *l, const struct sandbox_config *cfg,
		       const char *base, const struct sandbox *sb,
		       struct wr_error **err)
{
	_cleanup_close_ int store_ns = idmap_userns_open(
	    WR_STORE_UID, wr_slot_uid(sb->slot), WR_IDS_PER_SLOT);
	_cleanup_close_ int zero_ns =
	    idmap_userns_open(0, wr_slot_uid(sb->slot), WR_IDS_PER_SLOT);
	if (store_ns < 0 || zero_ns < 0)
		return wr_error_set(err, store_ns < 0 ? -store_ns : -zero_ns,
				    "create a user namespace for the idmapped "
				    "layers (see docs/security.md)");
	size_t n = 0;
	const char *paths[WR_MAX_LAYERS + 1];
	paths[n++] = cfg->rootfs ? cfg->rootfs : base;
	for (size_t i = 0; i < cfg->n_layers && n <= WR_MAX_LAYERS; i++)
		paths[n++] = cfg->layers[i];
	for (size_t i = 0; i < n; i++) {
		uid_t owner;
		_cleanup_close_ int fd =
		    layer_source_open(paths[i], "layer", &owner, err);
		if (fd < 0)
			return fd;
		int r = idmap_mount_set(
		    fd, wr_in_store_range(owner) ? store_ns : zero_ns,
		    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV);
		if (r < 0)
			return wr_error_set(err, -r, "layer %s: idmapped mount",
					    paths[i]);
		l->plan.layer_fds[l->plan.n_layer_fds++] = TAKE_FD(fd);
	}
	if (sb->upper_real) {
		int fd = upper_mount_open(sb, store_ns, err);
		if (fd < 0)
			return fd;
		l->plan.upper_parent_fd = fd;
		l->plan.upper_name = "upper";
		l->plan.work_name = "work";
	}
	return 0;
}

static int open_cgroup_fds(struct launcher *l, const struct sandbox_cgroup *cg)
{
	int r = cgroup_open_v1_tasks(cg, l->cg_fds, &l->n_cg_fds);
	if (r < 0)
		return r;
	if (cg->path[CG_UNIFIED]) {
		char path[1200];
		snprintf(path, sizeof(path), "%s/cgroup.procs",
			 cg->path[CG_UNIFIED]);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		l->cg_fds[l->n_cg_fds++] = fd;
	}
	return 0;
}

/* gVisor writes a regular file given as stdout or stderr at offsets of
 * its own per descriptor (2>&1 into one file would overwrite itself):
 * such a file gets a pipe, relayed by run_wait; one pipe for both when
 * they are the same file, so that the lines keep their order. */
static void relay_regular_files(struct sandbox *sb, struct launcher *l)
{
	struct stat st[2];
	for (int i = 0; i < 2; i++) {
		if (fstat(1 + i, &st[i]) < 0 || !S_ISREG(st[i].st_mode))
			continue;
		if (i == 1 && l->relay_w[0] >= 0 &&
		    st[1].st_dev == st[0].st_dev &&
		    st[1].st_ino == st[0].st_ino) {
			l->relay_w[1] = l->relay_w[0];
			continue;
		}
		int p[2];
		if (pipe2(p, O_CLOEXEC) < 0)
			continue;
		sb->relay_from[i] = p[0];
		sb->relay_to[i] = 1 + i;
		l->relay_w[i] = p[1];
	}
}

/* Each --bind source as a detached nosuid, nodev (ro) mount, as native
 * makes them, and the empty file or directory the launcher attaches it
 * to (GV_DIR/<name>/binds/<i>), the source runsc is given. */
static int open_binds(struct launcher *l, const struct sandbox_config *cfg,
		      const char *gv_dir, struct wr_error **err)
{
	if (cfg->n_binds > WR_MAX_BINDS)
		return wr_error_input(err, E2BIG, "too many --bind");
	_cleanup_free_ char *dir = wr_asprintf("%s/binds", gv_dir);
	if (!dir)
		return wr_error_set(err, ENOMEM, "--bind");
	if (cfg->n_binds && mkdir(dir, 0711) < 0)
		return wr_error_set(err, errno, "create %s", dir);
	for (size_t i = 0; i < cfg->n_binds; i++) {
		uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
		if (cfg->binds[i].read_only)
			attrs |= MOUNT_ATTR_RDONLY;
		int fd = idmap_mount_open(cfg->binds[i].source, -1, attrs);
		if (fd < 0)
			return wr_error_input(err, -fd, "--bind %s",
					      cfg->binds[i].source);
		l->plan.bind_fds[i] = fd;
		struct stat st;
		l->bind_paths[i] = wr_asprintf("%s/%zu", dir, i);
		if (!l->bind_paths[i] || fstat(fd, &st) < 0)
			return wr_error_set(err, errno ? errno : ENOMEM,
					    "--bind %s", cfg->binds[i].source);
		int made = S_ISDIR(st.st_mode)
			       ? mkdir(l->bind_paths[i], 0755)
			       : close(open(l->bind_paths[i],
					    O_CREAT | O_EXCL | O_WRONLY |
						O_CLOEXEC,
					    0644));
		if (made < 0)
			return wr_error_set(err, errno, "create %s",
					    l->bind_paths[i]);
	}
	return 0;
}

static void launcher_clear(struct launcher *l)
{
	for (size_t i = 0; i < WR_MAX_BINDS; i++) {
		if (l->plan.bind_fds[i] >= 0)
			close(l->plan.bind_fds[i]);
		l->plan.bind_fds[i] = -1;
		free(l->bind_paths[i]);
		l->bind_paths[i] = NULL;
	}
	for (size_t i = 0; i < l->plan.n_layer_fds; i++)
		close(l->plan.layer_fds[i]);
	l->plan.n_layer_fds = 0;
	if (l->plan.upper_parent_fd >= 0)
		close(l->plan.upper_parent_fd);
	l->plan.upper_parent_fd = -1;
	for (size_t i = 0; i < l->n_cg_fds; i++)
		close(l->cg_fds[i]);
	l->n_cg_fds = 0;
	if (l->out_fd >= 0)
		close(l->out_fd);
	l->out_fd = -1;
	for (int i = 0; i < 2; i++) {
		if (l->relay_w[i] >= 0 && (i == 0 || l->relay_w[1] != l->relay_w[0]))
			close(l->relay_w[i]);
	}
	l->relay_w[0] = l->relay_w[1] = -1;
	free(l->argv);
	l->argv = NULL;
}

/* The last line runsc wrote, for an error message. */
static char *last_line_of(const char *path)
{
	_cleanup_free_ char *text = NULL;
	if (wr_read_file(path, GV_ERR_MAX * 4, &text, NULL) < 0 || !text)
		return NULL;
	size_t len = strlen(text);
	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
		text[--len] = '\0';
	char *nl = strrchr(text, '\n');
	return wr_strdup(nl ? nl + 1 : text);
}

/* The Sentry's pid, from `runsc state`. */
static pid_t sandbox_pid_of(const char *name, const char *scratch)
{
	_cleanup_close_ int fd =
	    open(scratch, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	char *args[] = {(char *)"state", (char *)name, NULL};
	if (fd < 0 || runsc_run(args, fd) != 0)
		return 0;
	_cleanup_free_ char *text = NULL;
	if (wr_read_file(scratch, 1 << 20, &text, NULL) < 0)
		return 0;
	json_t *o = json_loads(text, 0, NULL);
	pid_t pid = (pid_t)json_integer_value(json_object_get(o, "pid"));
	json_decref(o);
	return pid;
}

/* GV_DIR/<name>: empty of mounts once the launcher's namespace is gone */
static void remove_gv_dir(const char *name)
{
	_cleanup_free_ char *d = runtime_path(GV_DIR "/%s", name);
	if (d)
		wr_rm_rf(d);
}

static void runsc_delete(const char *name)
{
	char *args[] = {(char *)"delete", (char *)"--force", (char *)name,
			NULL};
	runsc_run(args, -1);
}

/* Everything after a failure or at the end: runsc's state, the cgroup
 * (and with it every process: launcher, gofer, Sentry), the work dir, the
 * record. The mounts lived in the launcher's namespace and went with it. */
static int gv_teardown(struct sandbox *sb, bool *oom)
{
	int ret = 0;
	if (sb->pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
		siginfo_t info;
		while (waitid(P_PIDFD, (id_t)sb->pidfd, &info, WEXITED) < 0 &&
		       errno == EINTR)
			;
		close(sb->pidfd);
		sb->pidfd = -1;
	}
	if (oom)
		*oom = cgroup_oom_killed(&sb->cg);
	if (cgroup_kill_all(&sb->cg, 2000) < 0)
		ret = -EBUSY;
	runsc_delete(sb->name);
	int r = cgroup_destroy(&sb->cg);
	if (r < 0 && ret == 0)
		ret = r;
	if (sb->work_dir)
		wr_rm_rf(sb->work_dir);
	remove_gv_dir(sb->name);
	runtime_release(sb->name, sb->slot);
	return ret;
}

/* Until init accepts on its socket: the file appears at bind, before
 * listen (a connect then is refused), so a connect is the test. init sees
 * a connection that ends without a request, and drops it. */
static bool wait_for_socket(const char *path, pid_t sentry)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(addr.sun_path))
		return false;
	strcpy(addr.sun_path, path);
	for (int waited = 0; waited < GV_SOCKET_WAIT_MS; waited += 2) {
		int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return false;
		int r = connect(fd, (struct sockaddr *)&addr, sizeof(addr));
		close(fd);
		if (r == 0)
			return true;
		if (sentry > 0 && kill(sentry, 0) < 0)
			return false;
		usleep(2000);
	}
	return false;
}

static int gvisor_create(const struct sandbox_config *cfg,
			 enum sandbox_mode mode, char *const argv[],
			 struct sandbox **out, struct wr_error **err)
{
	uint64_t t0 = wr_mono_us();
	int r = gvisor_check(err);
	if (r < 0)
		return r;
	r = sandbox_create_precheck(cfg, mode, argv, err);
	if (r < 0)
		return r;
	_cleanup_free_ char **rec_env = NULL;
	_cleanup_free_ char **rec_layers = NULL;
	_cleanup_free_ char *init_path = NULL, *base = NULL, *dir = NULL,
			    *stage = NULL, *bundle = NULL, *exec_dir = NULL,
			    *out_path = NULL, *config_path = NULL,
			    *runsc_root = NULL, *root = NULL,
			    *seccomp_path = NULL, *gv_dir = NULL,
			    *gv_base = NULL;
	_cleanup_close_ int report_rd = -1;
	struct launcher l = {.report_fd = -1, .out_fd = -1, .relay_w = {-1, -1}};
	l.plan.upper_parent_fd = -1;
	for (size_t i = 0; i < WR_MAX_BINDS; i++)
		l.plan.bind_fds[i] = -1;
	struct sandbox *sb = sandbox_alloc(cfg, mode);
	if (!sb)
		return wr_error_set(err, ENOMEM, "create sandbox");
	sb->backend = SANDBOX_BACKEND_GVISOR;
	int slot;
	r = runtime_claim(sb->name, &slot, err);
	if (r < 0) {
		sandbox_free(sb);
		return r;
	}
	sb->slot = slot;
	struct sandbox_record rec;
	r = sandbox_record_start(sb, cfg, &rec, &rec_env, &rec_layers, err);
	if (r < 0)
		goto fail;
	uint64_t t_prep = wr_mono_us();
	/* the record's directory stays root's; what the Sentry's gofer
	 * reaches (it runs in the sandbox's user namespace, as its slot
	 * range) lives in GV_DIR/<name>, traversable */
	dir = runtime_path("sandboxes/%s", sb->name);
	gv_dir = runtime_path(GV_DIR "/%s", sb->name);
	stage = runtime_path(GV_DIR "/%s/stage", sb->name);
	bundle = runtime_path("sandboxes/%s/bundle", sb->name);
	exec_dir = runtime_path(GV_DIR "/%s/exec", sb->name);
	out_path = runtime_path("sandboxes/%s/runsc.out", sb->name);
	config_path = runtime_path("sandboxes/%s/bundle/config.json", sb->name);
	runsc_root = runtime_path("runsc");
	gv_base = runtime_path(GV_DIR);
	root = runtime_path(GV_DIR "/%s/stage/root", sb->name);
	init_path = sandbox_find_init();
	if (!dir || !gv_dir || !gv_base || !stage || !bundle || !exec_dir ||
	    !out_path || !config_path || !runsc_root || !root || !init_path) {
		r = wr_error_set(err, ENOMEM, "create sandbox");
		goto fail;
	}
	if (access(init_path, X_OK) < 0) {
		r = wr_error_set(err, errno, "%s", init_path);
		goto fail;
	}
	if ((mkdir(runsc_root, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(gv_base, 0711) < 0 && errno != EEXIST) ||
	    mkdir(gv_dir, 0711) < 0 || mkdir(stage, 0755) < 0 ||
	    mkdir(bundle, 0700) < 0 ||
	    (mode == SANDBOX_MODE_SERVE &&
	     (mkdir(exec_dir, 0700) < 0 ||
	      chown(exec_dir, wr_slot_uid(sb->slot), wr_slot_uid(sb->slot)) <
		  0))) {
		r = wr_error_set(err, errno, "create %s/…", gv_dir);
		goto fail;
	}
	if (!cfg->rootfs) {
		base = hostbase_ensure(err);
		if (!base) {
			r = -EIO;
			goto fail;
		}
	}
	r = open_layers(&l, cfg, base, sb, err);
	if (r == 0)
		r = open_binds(&l, cfg, gv_dir, err);
	if (r < 0)
		goto fail;
	/* the native filter, installed by init inside gVisor: the Sentry's
	 * own surface, and the same denials on top */
	if (!cfg->no_seccomp) {
		seccomp_path = runtime_path(GV_DIR "/%s/seccomp.bpf", sb->name);
		struct seccomp_program prog = {0};
		r = seccomp_path ? seccomp_prepare(cfg->allow_userns, &prog)
				 : -ENOMEM;
		if (r == 0)
			r = wr_write_file_atomic(
			    seccomp_path, (const char *)prog.prog.filter,
			    prog.prog.len * sizeof(prog.prog.filter[0]), 0644,
			    false);
		seccomp_program_clear(&prog);
		if (r < 0) {
			r = wr_error_set(err, -r, "seccomp filter");
			goto fail;
		}
	}
	json_t *config =
	    bundle_config(cfg, mode, argv, root, init_path,
			  mode == SANDBOX_MODE_SERVE ? exec_dir : NULL,
			  seccomp_path, sb->upper_real != NULL, sb->slot,
			  l.bind_paths);
	char *text = config ? json_dumps(config, JSON_INDENT(1)) : NULL;
	json_decref(config);
	r = text ? wr_write_file_atomic(config_path, text, strlen(text), 0600,
					false)
		 : -ENOMEM;
	free(text);
	if (r < 0) {
		r = wr_error_set(err, -r, "write %s", config_path);
		goto fail;
	}
	struct sandbox_limits limits = {
	    .memory_bytes =
		cfg->memory_bytes ? cfg->memory_bytes : SANDBOX_DEFAULT_MEMORY,
	    .millicpus = cfg->millicpus,
	    .pids = (cfg->pids ? cfg->pids : SANDBOX_DEFAULT_PIDS) +
		    GV_PIDS_OVERHEAD,
	};
	uint64_t t_cg = wr_mono_us();
	r = cgroup_create(sb->name, &limits, &sb->cg, err);
	if (r < 0)
		goto fail;
	r = open_cgroup_fds(&l, &sb->cg);
	if (r < 0) {
		r = wr_error_set(err, -r, "cgroup: open its process lists");
		goto fail;
	}
	sb->timings.cgroup_us = wr_mono_us() - t_cg;
	char *serve_args[] = {(char *)"run", (char *)"--detach",
			      (char *)"--bundle", bundle, sb->name, NULL};
	char *run_args[] = {(char *)"run", (char *)"--bundle", bundle, sb->name,
			    NULL};
	l.argv = runsc_argv(runsc_root,
			    mode == SANDBOX_MODE_SERVE ? serve_args : run_args);
	if (mode == SANDBOX_MODE_SERVE)
		l.out_fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC |
					      O_CLOEXEC,
				0600);
	int pipe_fds[2];
	if (!l.argv || (mode == SANDBOX_MODE_SERVE && l.out_fd < 0) ||
	    pipe2(pipe_fds, O_CLOEXEC) < 0) {
		r = wr_error_set(err, l.argv ? errno : ENOMEM,
				 "prepare the launcher");
		goto fail;
	}
	report_rd = pipe_fds[0];
	l.report_fd = pipe_fds[1];
	if (mode == SANDBOX_MODE_RUN)
		relay_regular_files(sb, &l);
	l.plan.cfg = cfg;
	l.plan.mode = mode;
	l.plan.stage_path = stage;
	l.host_mode = cfg->rootfs == NULL;
	l.slot_uid = wr_slot_uid(sb->slot);
	uint64_t t_clone = wr_mono_us();
	sb->timings.prepare_us = t_clone - t_prep;
	pid_t pid = fork();
	if (pid < 0) {
		r = wr_error_set(err, errno, "fork the launcher");
		goto fail;
	}
	if (pid == 0) {
		close(report_rd);
		launcher_main(&l);
	}
	close(l.report_fd);
	l.report_fd = -1;
	sb->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct child_report rep = {0};
	ssize_t n;
	do {
		n = read(report_rd, &rep, sizeof(rep));
	} while (n < 0 && errno == EINTR);
	if (n != 0) {
		if (n == (ssize_t)sizeof(rep))
			r = wr_error_set(err, rep.err, "sandbox setup: %.*s",
					 (int)sizeof(rep.step), rep.step);
		else
			r = wr_error_set(err, EPROTO,
					 "sandbox setup: launcher died");
		goto fail;
	}
	sb->timings.clone_us = wr_mono_us() - t_clone;
	if (mode == SANDBOX_MODE_SERVE) {
		/* runsc run --detach returns once init runs */
		siginfo_t info = {0};
		while (waitid(P_PIDFD, (id_t)sb->pidfd, &info, WEXITED) < 0 &&
		       errno == EINTR)
			;
		close(sb->pidfd);
		sb->pidfd = -1;
		if (info.si_code != CLD_EXITED || info.si_status != 0) {
			_cleanup_free_ char *why = last_line_of(out_path);
			r = wr_error_set(err, EIO, "runsc run: %s",
					 why && *why ? why : "failed");
			goto fail;
		}
		_cleanup_free_ char *sock = wr_asprintf("%s/exec.sock", exec_dir);
		_cleanup_free_ char *link = wr_asprintf("%s/exec.sock", dir);
		pid_t sentry = sandbox_pid_of(sb->name, out_path);
		if (!sock || !link || sentry <= 0) {
			r = wr_error_set(err, sentry <= 0 ? ESRCH : ENOMEM,
					 "runsc state %s", sb->name);
			goto fail;
		}
		if (!wait_for_socket(sock, sentry)) {
			r = wr_error_set(err, ETIMEDOUT,
					 "warren-init did not listen under "
					 "gVisor within %d s",
					 GV_SOCKET_WAIT_MS / 1000);
			goto fail;
		}
		if (symlink(sock, link) < 0) {
			r = wr_error_set(err, errno, "link %s", link);
			goto fail;
		}
		sb->init_pid = sentry;
		rec.init_pid = sentry;
		rec.init_start = proc_start_time(sentry);
		r = runtime_record_write(&rec, err);
		if (r < 0)
			goto fail;
	}
	sb->started_us = wr_mono_us();
	sb->timings.setup_us = sb->started_us - t_clone;
	sb->timings.total_us = sb->started_us - t0;
	launcher_clear(&l);
	*out = sb;
	return 0;
fail:
	launcher_clear(&l);
	gv_teardown(sb, NULL);
	sandbox_free(sb);
	return r;
}

/* Removal by record (manage.c): runsc's own state, before the shared
 * steps kill the cgroup and remove the record. */
static void gvisor_cleanup(const struct sandbox_record *rec)
{
	if (runsc_path())
		runsc_delete(rec->name);
	remove_gv_dir(rec->name);
}

const struct sandbox_backend_ops gvisor_backend_ops = {
    .check = gvisor_check,
    .create = gvisor_create,
    /* a one-off sandbox's process is `runsc run` in the foreground: its
     * exit status is the command's, signals go to it (runsc forwards
     * them inside), the timeout kills the cgroup (gv_teardown) */
    .teardown = gv_teardown,
    .cleanup = gvisor_cleanup,
    .exec_tty = false,
    .stdio_relay = true,
};

/* create.c - a sandbox's life: create, wait, destroy.
 *
 * Order of set-up, each step undone on failure (see ARCHITECTURE.md):
 *   1. claim a name and a uid slot, write the record (so a crash at any later
 *      point leaves something the next warren can find and clean);
 *   2. cgroup with its limits, before any process enters;
 *   3. open, as host root, everything the child may not reach itself: the
 *      layers and the persistent upper as idmapped detached mounts, the
 *      --bind sources, warren-init, the exec socket;
 *   4. clone into new user/mount/pid/uts/ipc/net namespaces; write the
 *      uid/gid maps and move the child into the cgroup while it waits; then
 *      release it (child.c takes it from there);
 *   5. read the child's report: EOF (the sync socket closed on exec) means
 *      init is running. */
#include "sandbox/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fdpass.h"
#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/mount.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

void sandbox_free(struct sandbox *sb)
{
	if (!sb)
		return;
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	for (int i = 0; i < 2; i++) {
		if (sb->relay_from[i] >= 0)
			close(sb->relay_from[i]);
	}
	cgroup_clear(&sb->cg);
	free(sb->name);
	free(sb->upper_real);
	free(sb->work_dir);
	free(sb);
}

const struct sandbox_timings *sandbox_get_timings(const struct sandbox *sb)
{
	return &sb->timings;
}

const char *sandbox_get_name(const struct sandbox *sb)
{
	return sb->name;
}

pid_t sandbox_get_init_pid(const struct sandbox *sb)
{
	return sb->init_pid;
}

static char *generate_name(void)
{
	unsigned char rnd[4] = {0};
	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd)) {
		uint64_t t = wr_mono_us();
		memcpy(rnd, &t, sizeof(rnd));
	}
	return wr_asprintf("run-%d-%02x%02x%02x%02x", (int)getpid(), rnd[0],
			   rnd[1], rnd[2], rnd[3]);
}

char *sandbox_find_init(void)
{
	const char *env = getenv("WARREN_INIT");
	if (env && *env)
		return wr_strdup(env);
	_cleanup_free_ char *dir = wr_self_dir();
	if (!dir)
		return NULL;
	char *p = wr_asprintf("%s/warren-init", dir);
	if (p && access(p, X_OK) == 0)
		return p;
	free(p);
	return wr_asprintf("%s/../libexec/warren/warren-init", dir);
}

/* --upper DIR is a writable-layer directory of Warren's: DIR/upper holds the
 * layer (what later becomes a --layer), DIR/work is overlayfs's work dir
 * (same filesystem, outside the layer, emptied after use). DIR itself is
 * owned by the store range, so the sandbox can traverse it whatever the
 * permissions of DIR's parents; the idmapped mount handed to the child is
 * DIR. See internal.h for the uid model. */
static int make_store_dir(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return -errno;
	if (chown(path, WR_STORE_UID, WR_STORE_UID) < 0 ||
	    chmod(path, mode) < 0)
		return -errno;
	return 0;
}

static bool dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return false;
	struct dirent *de;
	bool empty = true;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			empty = false;
	}
	closedir(d);
	return empty;
}

bool sandbox_is_upper_dir(const char *path)
{
	struct stat st;
	char layer[PATH_MAX];
	snprintf(layer, sizeof(layer), "%s/upper", path);
	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    !wr_in_store_range(st.st_uid))
		return false;
	return (stat(layer, &st) == 0 && S_ISDIR(st.st_mode)) ||
	       layer_image_present(path);
}

/* --upper DIR --disk N: the layer in DIR/layer.img (layerimg.c), made
 * now if DIR is new. */
static int prepare_upper_image(struct sandbox *sb,
			       const struct sandbox_config *cfg,
			       struct wr_error **err)
{
	_cleanup_free_ char *plain = wr_asprintf("%s/upper", sb->upper_real);
	struct stat st;
	if (!plain)
		return wr_error_set(err, ENOMEM, "--upper");
	if (!layer_image_present(sb->upper_real) && lstat(plain, &st) == 0)
		return wr_error_input(
		    err, EINVAL,
		    "--disk with --upper %s: it holds a layer directory made "
		    "without --disk, which has no size cap; use a new "
		    "directory",
		    cfg->upper);
	int r = make_store_dir(sb->upper_real, 0700);
	if (r < 0)
		return wr_error_set(err, -r, "--upper: prepare %s",
				    sb->upper_real);
	sb->upper_image = true;
	return layer_image_create(sb->upper_real, cfg->disk_bytes,
				  cfg->inodes, err);
}

int sandbox_prepare_upper(struct sandbox *sb, const struct sandbox_config *cfg,
			  struct wr_error **err)
{
	const char *upper = cfg->upper;
	struct stat st;
	if (lstat(upper, &st) < 0) {
		if (errno != ENOENT)
			return wr_error_input(err, errno, "--upper %s", upper);
		if (mkdir(upper, 0755) < 0)
			return wr_error_input(err, errno, "--upper: create %s",
					      upper);
	} else if (!S_ISDIR(st.st_mode)) {
		return wr_error_input(err, ENOTDIR, "--upper %s", upper);
	} else if (!sandbox_is_upper_dir(upper) && !dir_is_empty(upper)) {
		/* an empty directory can become one; a populated one that is
		 * not ours is not ours to take over */
		return wr_error_input(
		    err, EINVAL,
		    "--upper %s is not empty and not a Warren layer "
		    "directory; use a new or empty directory",
		    upper);
	}
	char real[PATH_MAX];
	if (!realpath(upper, real))
		return wr_error_input(err, errno, "--upper %s", upper);
	if (!strcmp(real, "/"))
		return wr_error_input(err, EINVAL, "--upper cannot be /");
	_cleanup_free_ char *user = runtime_upper_in_use(real);
	if (user)
		return wr_error_input(err, EBUSY,
				      "--upper %s is in use by sandbox %s",
				      real, user);
	sb->upper_real = wr_strdup(real);
	if (!sb->upper_real)
		return wr_error_set(err, ENOMEM, "--upper");
	if (cfg->disk_bytes || layer_image_present(real))
		return prepare_upper_image(sb, cfg, err);
	sb->work_dir = wr_asprintf("%s/work", real);
	_cleanup_free_ char *layer = wr_asprintf("%s/upper", real);
	if (!sb->upper_real || !sb->work_dir || !layer)
		return wr_error_set(err, ENOMEM, "--upper");
	/* a work dir left by a crash is stale by definition (not in use) */
	wr_rm_rf(sb->work_dir);
	/* 0700: only the store uid (root inside) may enter. A setuid file
	 * written inside is setuid to the store uid; no host user can reach
	 * it to run it. */
	int r = make_store_dir(real, 0700);
	if (r == 0)
		r = make_store_dir(layer, 0755);
	if (r == 0)
		r = make_store_dir(sb->work_dir, 0700);
	if (r < 0)
		return wr_error_set(err, -r, "--upper: prepare %s", real);
	return 0;
}

struct prepared {
	int store_ns; /* userns: store range -> slot range */
	int zero_ns;  /* userns: 0.. -> slot range */
	int init_fd;
	int listen_fd;
	int sync[2];
	char **env;
	struct child_plan plan;
};

static void prepared_clear(struct prepared *p)
{
	int *fds[] = {&p->store_ns,
		      &p->zero_ns,
		      &p->init_fd,
		      &p->listen_fd,
		      &p->sync[0],
		      &p->sync[1],
		      &p->plan.upper_parent_fd};
	for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	for (size_t i = 0; i < p->plan.n_layer_fds; i++)
		close(p->plan.layer_fds[i]);
	p->plan.n_layer_fds = 0;
	for (size_t i = 0; i < WR_MAX_BINDS; i++) {
		if (p->plan.bind_fds[i] >= 0)
			close(p->plan.bind_fds[i]);
		p->plan.bind_fds[i] = -1;
	}
	free(p->env);
	p->env = NULL;
	seccomp_program_clear(&p->plan.seccomp);
}

static int userns_for(struct prepared *p, uid_t owner, int slot)
{
	bool store = wr_in_store_range(owner);
	int *ns = store ? &p->store_ns : &p->zero_ns;
	if (*ns < 0) {
		*ns = idmap_userns_open(store ? WR_STORE_UID : 0,
					wr_slot_uid(slot), WR_IDS_PER_SLOT);
	}
	return *ns;
}

bool bind_wants_overlay(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return false; /* a file, or not there: bound as it is */
	bool socket = false;
	struct dirent *de;
	while (!socket && (de = readdir(d))) {
		struct stat st;
		socket = de->d_type == DT_SOCK ||
			 (de->d_type == DT_UNKNOWN &&
			  fstatat(dirfd(d), de->d_name, &st,
				  AT_SYMLINK_NOFOLLOW) == 0 &&
			  S_ISSOCK(st.st_mode));
	}
	closedir(d);
	return !socket;
}

static int open_layer(struct prepared *p, const char *path, int slot,
		      const char *what, struct wr_error **err)
{
	uid_t owner;
	_cleanup_close_ int fd = layer_source_open(path, what, &owner, err);
	if (fd < 0)
		return fd;
	int ns = userns_for(p, owner, slot);
	if (ns < 0)
		return wr_error_set(err, -ns,
				    "%s %s: create a user namespace (are user "
				    "namespaces disabled or restricted on this "
				    "host? see docs/security.md)",
				    what, path);
	int r = idmap_mount_set(fd, ns, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV);
	if (r < 0)
		return wr_error_set(err, -r, "%s %s: idmapped mount", what,
				    path);
	p->plan.layer_fds[p->plan.n_layer_fds++] = TAKE_FD(fd);
	return 0;
}

const char *const sandbox_default_env[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=/root",
    "LANG=C.UTF-8",
    "USER=root",
    NULL,
};

static size_t count_list(char *const *list)
{
	size_t n = 0;
	while (list && list[n])
		n++;
	return n;
}

/* Appends list to env (of n entries), a later key replacing an earlier. */
static void merge_env(char **env, size_t *n, char *const *list)
{
	for (size_t i = 0; list && list[i]; i++) {
		const char *kv = list[i];
		const char *eq = strchr(kv, '=');
		size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
		size_t j;
		for (j = 0; j < *n; j++) {
			if (!strncmp(env[j], kv, klen + 1))
				break;
		}
		env[j] = (char *)kv;
		if (j == *n)
			(*n)++;
	}
}

/* A command's environment: the fixed default plus what was asked for,
 * never the caller's (which may hold secrets). */
char **sandbox_compose_env(char *const *record_env, char *const *extra)
{
	size_t cap = count_list((char *const *)sandbox_default_env) +
		     count_list(record_env) + count_list(extra) + 1;
	char **env = wr_calloc(cap, sizeof(char *));
	if (!env)
		return NULL;
	size_t n = 0;
	merge_env(env, &n, (char *const *)sandbox_default_env);
	merge_env(env, &n, record_env);
	merge_env(env, &n, extra);
	env[n] = NULL;
	return env;
}

char **sandbox_config_env(const struct sandbox_config *cfg)
{
	_cleanup_free_ char **extra = wr_calloc(cfg->n_env + 1, sizeof(char *));
	if (!extra)
		return NULL;
	for (size_t i = 0; i < cfg->n_env; i++)
		extra[i] = (char *)cfg->env[i];
	return sandbox_compose_env(NULL, extra);
}

static int open_listen_socket(const char *name, struct wr_error **err)
{
	_cleanup_free_ char *path =
	    runtime_path("sandboxes/%s/exec.sock", name);
	if (!path)
		return wr_error_set(err, ENOMEM, "socket path");
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(addr.sun_path))
		return wr_error_set(err, ENAMETOOLONG, "exec socket %s", path);
	strcpy(addr.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return wr_error_set(err, errno, "exec socket");
	unlink(path);
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    chmod(path, 0600) < 0 || listen(fd, 64) < 0) {
		int r = wr_error_set(err, errno, "exec socket %s", path);
		close(fd);
		return r;
	}
	return fd;
}

/* clone3's arguments (linux/sched.h clashes with glibc's sched.h). */
struct wr_clone_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack,
	    stack_size, tls, set_tid, set_tid_size, cgroup;
};
#define WR_CLONE_INTO_CGROUP 0x200000000ULL

static int write_id_maps(pid_t pid, int slot)
{
	char path[64], map[64];
	snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)wr_slot_uid(slot),
		 WR_IDS_PER_SLOT);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	int r = wr_write_file(path, map);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
	return wr_write_file(path, map);
}

static void kill_and_reap(struct sandbox *sb)
{
	if (sb->pidfd < 0)
		return;
	syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
	siginfo_t info;
	while (waitid(P_PIDFD, (id_t)sb->pidfd, &info, WEXITED) < 0 &&
	       errno == EINTR)
		;
}

/* Undo everything after a failure or at the end of a sandbox's life. */
static int teardown(struct sandbox *sb, bool *oom)
{
	int ret = 0;
	kill_and_reap(sb);
	if (oom)
		*oom = cgroup_oom_killed(&sb->cg);
	/* Once PID 1 of the pid namespace is gone the kernel has killed and
	 * reaped every other process in it, so the cgroup is normally empty
	 * already; kill only if removing it says otherwise. */
	int r = cgroup_destroy_if_empty(&sb->cg);
	if (r == -EBUSY) {
		if (cgroup_kill_all(&sb->cg, 2000) < 0)
			ret = -EBUSY;
		r = cgroup_destroy(&sb->cg);
	}
	if (r < 0 && ret == 0)
		ret = r;
	if (sb->work_dir)
		wr_rm_rf(sb->work_dir);
	runtime_release(sb->name, sb->slot);
	return ret;
}

int sandbox_create_precheck(const struct sandbox_config *cfg,
			    enum sandbox_mode mode, char *const argv[],
			    struct wr_error **err)
{
	int r = sandbox_config_validate(cfg, err);
	if (r < 0)
		return r;
	if (mode == SANDBOX_MODE_RUN && (!argv || !argv[0]))
		return wr_error_set(err, EINVAL, "no command to run");
	if (mode == SANDBOX_MODE_SERVE && !cfg->name)
		return wr_error_input(err, EINVAL,
				      "a long-lived sandbox needs --name");
	size_t argc = 0;
	while (argv && argv[argc])
		argc++;
	if (argc > WR_PROTO_INIT_ARGS_MAX - 8)
		return wr_error_set(err, E2BIG, "too many arguments");
	r = runtime_ensure_dirs(err);
	if (r < 0)
		return r;
	/* every start cleans what a crashed warren left (and frees a name
	 * held by the record of a dead sandbox) */
	sandbox_reap_stale(NULL);
	return 0;
}

struct sandbox *sandbox_alloc(const struct sandbox_config *cfg,
			      enum sandbox_mode mode)
{
	struct sandbox *sb = wr_calloc(1, sizeof(*sb));
	if (!sb)
		return NULL;
	sb->pidfd = -1;
	sb->slot = -1;
	sb->relay_from[0] = sb->relay_from[1] = -1;
	sb->mode = mode;
	sb->backend = cfg->backend;
	sb->timeout_ms = cfg->timeout_ms;
	sb->name = cfg->name ? wr_strdup(cfg->name) : generate_name();
	if (!sb->name) {
		free(sb);
		return NULL;
	}
	return sb;
}

int sandbox_record_init(const struct sandbox *sb,
			const struct sandbox_config *cfg,
			struct sandbox_record *rec, char ***env_out,
			char ***layers_out, struct wr_error **err)
{
	*rec = (struct sandbox_record){
	    .name = sb->name,
	    .slot = sb->slot,
	    .backend = sb->backend,
	    .mode = sb->mode,
	    .owner_pid = getpid(),
	    .owner_start = proc_start_time(getpid()),
	    .created_ms = wr_now_ms(),
	    .deadline_ms =
		cfg->timeout_ms ? wr_now_ms() + (int64_t)cfg->timeout_ms : 0,
	    .owner_bound = cfg->owner_bound,
	    .data_dir = (char *)cfg->data_dir,
	};
	*env_out = NULL;
	*layers_out = NULL;
	if (sb->mode == SANDBOX_MODE_SERVE) {
		/* exec uses create's --env and --cwd as its defaults */
		char **env = wr_calloc(cfg->n_env + 1, sizeof(char *));
		if (!env)
			return wr_error_set(err, ENOMEM, "create sandbox");
		for (size_t i = 0; i < cfg->n_env; i++)
			env[i] = (char *)cfg->env[i];
		rec->env = *env_out = env;
		rec->cwd = (char *)cfg->cwd;
	}
	char **layers = wr_calloc(cfg->n_layers + 1, sizeof(char *));
	if (!layers)
		return wr_error_set(err, ENOMEM, "create sandbox");
	for (size_t i = 0; i < cfg->n_layers; i++)
		layers[i] = (char *)cfg->layers[i];
	rec->layers = *layers_out = layers;
	return 0;
}

int sandbox_record_start(struct sandbox *sb, const struct sandbox_config *cfg,
			 struct sandbox_record *rec, char ***env_out,
			 char ***layers_out, struct wr_error **err)
{
	int r = sandbox_record_init(sb, cfg, rec, env_out, layers_out, err);
	if (r == 0)
		r = runtime_record_write(rec, err);
	if (r == 0 && cfg->upper) {
		r = sandbox_prepare_upper(sb, cfg, err);
		if (r == 0) {
			rec->upper = sb->upper_real;
			rec->work_dir = sb->work_dir;
			r = runtime_record_write(rec, err);
		}
	}
	return r;
}

static int native_create(const struct sandbox_config *cfg,
			 enum sandbox_mode mode, char *const argv[],
			 struct sandbox **out, struct wr_error **err)
{
	uint64_t t0 = wr_mono_us();
	/* declared before the first goto: cleanup must never see garbage */
	_cleanup_free_ char *init_path = NULL;
	_cleanup_free_ char *stage = NULL;
	_cleanup_free_ char **rec_env = NULL;
	_cleanup_free_ char **rec_layers = NULL;
	_cleanup_close_ int v2_dir = -1;
	int r = sandbox_create_precheck(cfg, mode, argv, err);
	if (r < 0)
		return r;
	struct sandbox *sb = sandbox_alloc(cfg, mode);
	if (!sb)
		return wr_error_set(err, ENOMEM, "create sandbox");
	struct prepared prep = {.store_ns = -1,
				.zero_ns = -1,
				.init_fd = -1,
				.listen_fd = -1,
				.sync = {-1, -1}};
	prep.plan.upper_parent_fd = -1;
	for (size_t i = 0; i < WR_MAX_BINDS; i++)
		prep.plan.bind_fds[i] = -1;
	int slot;
	r = runtime_claim(sb->name, &slot, err);
	if (r < 0)
		goto fail_early;
	sb->slot = slot;
	struct sandbox_record rec;
	r = sandbox_record_start(sb, cfg, &rec, &rec_env, &rec_layers, err);
	if (r < 0)
		goto fail;

	uint64_t t_prep = wr_mono_us();

	/* everything the child needs, opened with host privileges */
	init_path = sandbox_find_init();
	if (!init_path) {
		r = wr_error_set(err, ENOMEM, "locate warren-init");
		goto fail;
	}
	prep.init_fd = open(init_path, O_PATH | O_CLOEXEC);
	if (prep.init_fd < 0) {
		r = wr_error_set(err, errno, "open %s", init_path);
		goto fail;
	}
	if (cfg->rootfs) {
		r = open_layer(&prep, cfg->rootfs, slot, "--rootfs", err);
		if (r < 0)
			goto fail;
	} else {
		_cleanup_free_ char *base = hostbase_ensure(err);
		if (!base) {
			r = -EIO;
			goto fail;
		}
		r = open_layer(&prep, base, slot, "host base layer", err);
		if (r < 0)
			goto fail;
	}
	for (size_t i = 0; i < cfg->n_layers; i++) {
		r = open_layer(&prep, cfg->layers[i], slot, "--layer", err);
		if (r < 0)
			goto fail;
	}
	if (sb->upper_real) {
		int ns = userns_for(&prep, WR_STORE_UID, slot);
		int fd = ns < 0 ? wr_error_set(err, -ns,
					       "--upper %s: user namespace",
					       sb->upper_real)
				: upper_mount_open(sb, ns, err);
		if (fd < 0) {
			r = fd;
			goto fail;
		}
		prep.plan.upper_parent_fd = fd;
		prep.plan.upper_name = "upper";
		prep.plan.work_name = "work";
	}
	for (size_t i = 0; i < cfg->n_binds; i++) {
		uint64_t attrs = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
		if (cfg->binds[i].read_only)
			attrs |= MOUNT_ATTR_RDONLY;
		int fd = idmap_mount_open(cfg->binds[i].source, -1, attrs);
		if (fd < 0) {
			r = wr_error_input(err, -fd, "--bind %s",
					   cfg->binds[i].source);
			goto fail;
		}
		prep.plan.bind_fds[i] = fd;
		prep.plan.bind_overlay[i] =
		    cfg->binds[i].read_only &&
		    bind_wants_overlay(cfg->binds[i].source);
	}
	if (mode == SANDBOX_MODE_SERVE) {
		prep.listen_fd = open_listen_socket(sb->name, err);
		if (prep.listen_fd < 0) {
			r = prep.listen_fd;
			goto fail;
		}
	}
	if (mode == SANDBOX_MODE_RUN) {
		prep.env = sandbox_config_env(cfg);
	} else {
		prep.env = wr_calloc(1, sizeof(char *)); /* init: empty env */
	}
	stage = runtime_path("stage");
	if (!prep.env || !stage) {
		r = wr_error_set(err, ENOMEM, "create sandbox");
		goto fail;
	}
	if (!cfg->no_seccomp) {
		r = seccomp_prepare(cfg->allow_userns, &prep.plan.seccomp);
		if (r < 0) {
			r = wr_error_set(err, -r, "compile seccomp filter");
			goto fail;
		}
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, prep.sync) <
	    0) {
		r = wr_error_set(err, errno, "sync socket");
		goto fail;
	}
	prep.plan.cfg = cfg;
	prep.plan.mode = mode;
	prep.plan.argv = argv;
	prep.plan.slot = slot;
	prep.plan.sync_fd = prep.sync[1];
	prep.plan.init_fd = prep.init_fd;
	prep.plan.listen_fd = prep.listen_fd;
	prep.plan.stage_path = stage;
	prep.plan.init_env = prep.env;
	prep.plan.host_mode = cfg->rootfs == NULL;

	struct sandbox_limits limits = {
	    .memory_bytes =
		cfg->memory_bytes ? cfg->memory_bytes : SANDBOX_DEFAULT_MEMORY,
	    .millicpus = cfg->millicpus,
	    .pids = cfg->pids ? cfg->pids : SANDBOX_DEFAULT_PIDS,
	};
	/* On cgroup v2 the child is cloned straight into its cgroup
	 * (CLONE_INTO_CGROUP), so the cgroup must exist first. Without v2,
	 * the parent builds it while the child builds its root, and the child
	 * moves itself in (see cgroup_enter_self). Either way no process runs
	 * sandbox code before the limits are in force. */
	struct sandbox_cgroup layout_probe;
	bool cgroup_first = cgroup_paths_for(sb->name, &layout_probe) == 0 &&
			    cgroup_has_v2(&layout_probe);
	cgroup_clear(&layout_probe);
	if (cgroup_first) {
		uint64_t t = wr_mono_us();
		r = cgroup_create(sb->name, &limits, &sb->cg, err);
		if (r < 0)
			goto fail;
		v2_dir = cgroup_open_v2_dir(&sb->cg);
		if (v2_dir < 0) {
			r = wr_error_set(err, -v2_dir,
					 "cgroup: open v2 directory");
			goto fail;
		}
		sb->timings.cgroup_us = wr_mono_us() - t;
	}
	uint64_t t_clone = wr_mono_us();
	sb->timings.prepare_us = t_clone - t_prep;
	int pidfd = -1;
	/* no new stack: the child continues here like fork() */
	struct wr_clone_args args = {
	    .flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS |
		     CLONE_NEWIPC | CLONE_NEWNET | CLONE_PIDFD,
	    .pidfd = (uint64_t)(uintptr_t)&pidfd,
	    .exit_signal = SIGCHLD,
	};
	if (v2_dir >= 0) {
		args.flags |= WR_CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)v2_dir;
	}
	pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
	if (pid < 0) {
		if (errno == EPERM || errno == ENOSPC || errno == EUSERS)
			r = wr_error_set(err, errno,
					 "clone new namespaces (are user "
					 "namespaces disabled or restricted "
					 "on this host? see docs/security.md)");
		else
			r = wr_error_set(err, errno, "clone new namespaces");
		goto fail;
	}
	if (pid == 0) {
		close(prep.sync[0]);
		child_main(&prep.plan);
	}
	sb->pidfd = pidfd;
	sb->init_pid = pid;
	close(prep.sync[1]);
	prep.sync[1] = -1;

	r = write_id_maps(pid, slot);
	if (r < 0) {
		r = wr_error_set(err, -r, "write uid/gid maps");
		goto fail;
	}
	struct child_report report = {0};
	if (send(prep.sync[0], &report, sizeof(report), MSG_NOSIGNAL) < 0) {
		r = wr_error_set(err, errno, "release sandbox child");
		goto fail;
	}
	uint64_t t_setup = wr_mono_us();
	sb->timings.clone_us = t_setup - t_clone;
	/* The child builds its root filesystem meanwhile; it waits for the
	 * second release, which carries its v1 cgroup "tasks" files, before
	 * running anything but our own set-up code. */
	if (!cgroup_first) {
		r = cgroup_create(sb->name, &limits, &sb->cg, err);
		if (r < 0)
			goto fail;
	}
	int task_fds[CG_MAX];
	size_t n_task_fds = 0;
	r = cgroup_open_v1_tasks(&sb->cg, task_fds, &n_task_fds);
	if (r < 0) {
		r = wr_error_set(err, -r, "cgroup: open tasks files");
		goto fail;
	}
	if (!cgroup_first)
		sb->timings.cgroup_us = wr_mono_us() - t_setup;
	r = wr_send_fds(prep.sync[0], &report, sizeof(report), task_fds,
			n_task_fds);
	for (size_t i = 0; i < n_task_fds; i++)
		close(task_fds[i]);
	if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
		/* (a child that failed a step explains itself below) */
		r = wr_error_set(err, -r, "release sandbox child");
		goto fail;
	}
	/* A child that failed exits with our release still unread in its
	 * queue, which resets the pair: the kernel may report ECONNRESET
	 * before handing over the report the child queued first. The error
	 * is cleared once reported, so read again. */
	ssize_t n;
	int resets = 0;
	do {
		n = recv(prep.sync[0], &report, sizeof(report), 0);
	} while (n < 0 && (errno == EINTR ||
			   (errno == ECONNRESET && resets++ == 0)));
	if (n != 0) {
		if (n == (ssize_t)sizeof(report))
			r = wr_error_set(err, report.err, "sandbox setup: %.*s",
					 (int)sizeof(report.step), report.step);
		else
			r = wr_error_set(err, EPROTO,
					 "sandbox setup: child died");
		goto fail;
	}
	sb->started_us = wr_mono_us();
	sb->timings.setup_us = sb->started_us - t_setup;
	sb->timings.total_us = sb->started_us - t0;
	prepared_clear(&prep);

	/* A one-off sandbox is found through its owner (this process): if we
	 * die, init dies with us and the next warren removes the rest. A
	 * long-lived one is found through its init. */
	if (mode == SANDBOX_MODE_SERVE) {
		rec.init_pid = pid;
		rec.init_start = proc_start_time(pid);
		r = runtime_record_write(&rec, err);
		if (r < 0) {
			teardown(sb, NULL);
			sandbox_free(sb);
			return r;
		}
	}
	*out = sb;
	return 0;

fail:
	prepared_clear(&prep);
	teardown(sb, NULL);
	sandbox_free(sb);
	return r;
fail_early:
	prepared_clear(&prep);
	sandbox_free(sb);
	return r;
}

const struct sandbox_backend_ops native_backend_ops = {
    .create = native_create,
    .teardown = teardown,
    .exec_tty = true,
};

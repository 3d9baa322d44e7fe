/* cgroup.c - one cgroup per sandbox, on v2 or v1, chosen per controller.
 *
 * Hosts differ: pure v2, pure v1, or hybrid (this one: v1 memory/cpu/pids
 * and a v2 mount with no controllers, which crun refuses outright). We detect
 * per controller: v2 if the unified mount lists it in cgroup.controllers,
 * else the v1 hierarchy that has it. A v2 directory is created even without
 * controllers: it tracks every process of the sandbox and gives us
 * cgroup.kill. Limits are written before any process enters. The limit files
 * differ by version; each version is a small table of operations. */
#include "sandbox/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CG_PARENT "warren"

struct cg_backend {
	const char *name;
	int (*set_memory)(const char *dir, uint64_t bytes);
	int (*set_cpu)(const char *dir, uint64_t millicpus);
	int (*set_pids)(const char *dir, uint64_t pids);
	bool (*oom_killed)(const char *dir);
};

static int write_u64(const char *dir, const char *file, uint64_t value)
{
	char path[512], text[32];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	snprintf(text, sizeof(text), "%llu", (unsigned long long)value);
	return wr_write_file(path, text);
}

/* Reads "key N" from a flat-keyed cgroup file. */
static long long read_key(const char *dir, const char *file, const char *key)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	_cleanup_free_ char *text = NULL;
	if (wr_read_file(path, 64 * 1024, &text, NULL) < 0)
		return -1;
	size_t klen = strlen(key);
	for (char *line = text; line && *line;) {
		if (!strncmp(line, key, klen) && line[klen] == ' ')
			return atoll(line + klen + 1);
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -1;
}

/* ---- v1 */
static int v1_set_memory(const char *dir, uint64_t bytes)
{
	int r = write_u64(dir, "memory.limit_in_bytes", bytes);
	if (r < 0)
		return r;
	/* memory+swap at the same cap: swap is not a way around the limit */
	char path[512];
	snprintf(path, sizeof(path), "%s/memory.memsw.limit_in_bytes", dir);
	if (access(path, F_OK) == 0)
		r = write_u64(dir, "memory.memsw.limit_in_bytes", bytes);
	return r;
}

static int v1_set_cpu(const char *dir, uint64_t millicpus)
{
	int r = write_u64(dir, "cpu.cfs_period_us", 100000);
	if (r < 0)
		return r;
	return write_u64(dir, "cpu.cfs_quota_us", millicpus * 100);
}

static int v1_set_pids(const char *dir, uint64_t pids)
{
	return write_u64(dir, "pids.max", pids);
}

static bool v1_oom_killed(const char *dir)
{
	return read_key(dir, "memory.oom_control", "oom_kill") > 0;
}

static const struct cg_backend cg_v1 = {
    .name = "v1",
    .set_memory = v1_set_memory,
    .set_cpu = v1_set_cpu,
    .set_pids = v1_set_pids,
    .oom_killed = v1_oom_killed,
};

/* ---- v2 */
static int v2_set_memory(const char *dir, uint64_t bytes)
{
	int r = write_u64(dir, "memory.max", bytes);
	if (r < 0)
		return r;
	char path[512];
	snprintf(path, sizeof(path), "%s/memory.swap.max", dir);
	if (access(path, F_OK) == 0)
		r = wr_write_file(path, "0");
	return r;
}

static int v2_set_cpu(const char *dir, uint64_t millicpus)
{
	char path[512], text[64];
	snprintf(path, sizeof(path), "%s/cpu.max", dir);
	snprintf(text, sizeof(text), "%llu 100000",
		 (unsigned long long)(millicpus * 100));
	return wr_write_file(path, text);
}

static bool v2_oom_killed(const char *dir)
{
	return read_key(dir, "memory.events", "oom_kill") > 0;
}

static const struct cg_backend cg_v2 = {
    .name = "v2",
    .set_memory = v2_set_memory,
    .set_cpu = v2_set_cpu,
    .set_pids = v1_set_pids, /* same file name: pids.max */
    .oom_killed = v2_oom_killed,
};

/* ---- detection */
struct cg_layout {
	bool done;
	char *mount[CG_MAX]; /* hierarchy mount point per controller */
	bool v2[CG_MAX];
};
static struct cg_layout layout;

static const char *const controller_names[CG_MAX] = {"memory", "cpu", "pids",
						     NULL};

static bool has_word(const char *list, const char *word, char sep)
{
	size_t len = strlen(word);
	for (const char *p = list; p && *p;) {
		if (!strncmp(p, word, len) &&
		    (p[len] == sep || p[len] == '\0' || p[len] == '\n' ||
		     p[len] == ' '))
			return true;
		p = strchr(p, sep);
		if (p)
			p++;
	}
	return false;
}

static int detect_layout(void)
{
	if (layout.done)
		return 0;
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	char line[4096];
	char *v2_mount = NULL;
	while (fgets(line, sizeof(line), f)) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SRC SUPER
		 */
		char *sep = strstr(line, " - ");
		if (!sep)
			continue;
		char mnt[1024], fstype[64], src[256], super[1024];
		if (sscanf(line, "%*s %*s %*s %*s %1023s", mnt) != 1)
			continue;
		if (sscanf(sep + 3, "%63s %255s %1023s", fstype, src, super) !=
		    3)
			continue;
		if (!strcmp(fstype, "cgroup2") && !v2_mount) {
			v2_mount = wr_strdup(mnt);
			if (!v2_mount)
				return -ENOMEM;
		} else if (!strcmp(fstype, "cgroup")) {
			for (int c = 0; c < CG_UNIFIED; c++) {
				if (!layout.mount[c] &&
				    has_word(super, controller_names[c], ',')) {
					layout.mount[c] = wr_strdup(mnt);
					if (!layout.mount[c])
						return -ENOMEM;
				}
			}
		}
	}
	if (v2_mount) {
		char path[1100];
		snprintf(path, sizeof(path), "%s/cgroup.controllers", v2_mount);
		_cleanup_free_ char *ctrls = NULL;
		wr_read_file(path, 4096, &ctrls, NULL);
		for (int c = 0; c < CG_UNIFIED; c++) {
			if (ctrls &&
			    has_word(ctrls, controller_names[c], ' ')) {
				free(layout.mount[c]);
				layout.mount[c] = wr_strdup(v2_mount);
				layout.v2[c] = true;
				if (!layout.mount[c]) {
					free(v2_mount);
					return -ENOMEM;
				}
			}
		}
		/* The unified tree is used when it carries one of our
		 * controllers. A hybrid host's empty v2 mount adds nothing the
		 * v1 pids cgroup and the pid namespace do not already give
		 * (tracking, kill-all), and would cost five more cgroupfs
		 * operations per sandbox. With no v1 hierarchy at all, it is
		 * still used for tracking. */
		bool useful = layout.v2[CG_MEMORY] || layout.v2[CG_CPU] ||
			      layout.v2[CG_PIDS] || !layout.mount[CG_PIDS];
		if (useful) {
			layout.mount[CG_UNIFIED] = v2_mount;
			layout.v2[CG_UNIFIED] = true;
		} else {
			free(v2_mount);
		}
	}
	layout.done = true;
	return 0;
}

/* On v2, controllers must be enabled in every ancestor's subtree_control.
 * Our parent cgroup holds no processes, so the "no internal processes" rule
 * cannot bite there; the hierarchy root is exempt from it. */
static void v2_enable_controllers(const char *mount)
{
	char path[1100];
	const char *dirs[2] = {mount, NULL};
	char parent[1100];
	snprintf(parent, sizeof(parent), "%s/" CG_PARENT, mount);
	dirs[1] = parent;
	for (int d = 0; d < 2; d++) {
		for (int c = 0; c < CG_UNIFIED; c++) {
			if (!layout.v2[c])
				continue;
			snprintf(path, sizeof(path),
				 "%s/cgroup.subtree_control", dirs[d]);
			char text[32];
			snprintf(text, sizeof(text), "+%s",
				 controller_names[c]);
			wr_write_file(path, text); /* already on: fine */
		}
	}
}

int cgroup_paths_for(const char *name, struct sandbox_cgroup *cg)
{
	int r = detect_layout();
	if (r < 0)
		return r;
	memset(cg, 0, sizeof(*cg));
	for (int c = 0; c < CG_MAX; c++) {
		if (!layout.mount[c])
			continue;
		/* v2 controllers share the unified directory */
		if (c != CG_UNIFIED && layout.v2[c])
			continue;
		cg->path[c] =
		    wr_asprintf("%s/" CG_PARENT "/%s", layout.mount[c], name);
		if (!cg->path[c]) {
			cgroup_clear(cg);
			return -ENOMEM;
		}
		cg->v2[c] = layout.v2[c];
	}
	return 0;
}

static const char *dir_for(const struct sandbox_cgroup *cg, int c,
			   const struct cg_backend **ops)
{
	if (layout.v2[c]) {
		*ops = &cg_v2;
		return cg->path[CG_UNIFIED];
	}
	*ops = &cg_v1;
	return cg->path[c];
}

int cgroup_create(const char *name, const struct sandbox_limits *limits,
		  struct sandbox_cgroup *cg, struct wr_error **err)
{
	int r = cgroup_paths_for(name, cg);
	if (r < 0)
		return wr_error_set(err, -r, "cgroup: detect hierarchies");
	if (!cg->path[CG_MEMORY] && !layout.v2[CG_MEMORY])
		return wr_error_set(
		    err, ENOTSUP, "cgroup: no memory controller on this host");
	if (cg->path[CG_UNIFIED] &&
	    (layout.v2[CG_MEMORY] || layout.v2[CG_CPU] || layout.v2[CG_PIDS])) {
		char parent[1100];
		snprintf(parent, sizeof(parent), "%s/" CG_PARENT,
			 layout.mount[CG_UNIFIED]);
		mkdir(parent, 0755);
		v2_enable_controllers(layout.mount[CG_UNIFIED]);
	}
	for (int c = 0; c < CG_MAX; c++) {
		if (!cg->path[c])
			continue;
		char parent[1100];
		snprintf(parent, sizeof(parent), "%s/" CG_PARENT,
			 layout.mount[c]);
		/* another warren may remove the (then empty) parent between
		 * our two mkdirs: retry */
		int tries = 0;
		for (;;) {
			if (mkdir(parent, 0755) < 0 && errno != EEXIST)
				return wr_error_set(err, errno,
						    "cgroup: mkdir %s", parent);
			if (mkdir(cg->path[c], 0755) == 0 || errno != ENOENT ||
			    ++tries > 3)
				break;
		}
		if (tries > 3 || access(cg->path[c], F_OK) < 0) {
			r = wr_error_set(err, errno, "cgroup: mkdir %s",
					 cg->path[c]);
			cgroup_destroy(cg);
			return r;
		}
	}
	const struct cg_backend *ops = NULL;
	const char *dir;
	if (limits->memory_bytes) {
		dir = dir_for(cg, CG_MEMORY, &ops);
		r = dir ? ops->set_memory(dir, limits->memory_bytes) : -ENOTSUP;
		if (r < 0)
			goto fail_limit;
	}
	if (limits->millicpus) {
		dir = dir_for(cg, CG_CPU, &ops);
		r = dir ? ops->set_cpu(dir, limits->millicpus) : -ENOTSUP;
		if (r < 0)
			goto fail_limit;
	}
	if (limits->pids) {
		dir = dir_for(cg, CG_PIDS, &ops);
		r = dir ? ops->set_pids(dir, limits->pids) : -ENOTSUP;
		if (r < 0)
			goto fail_limit;
	}
	return 0;
fail_limit:
	r = wr_error_set(err, -r, "cgroup: set limits (%s)",
			 ops ? ops->name : "?");
	cgroup_destroy(cg);
	return r;
}

bool cgroup_has_v2(const struct sandbox_cgroup *cg)
{
	return cg->path[CG_UNIFIED] != NULL;
}

int cgroup_open_v2_dir(const struct sandbox_cgroup *cg)
{
	if (!cg->path[CG_UNIFIED])
		return -ENOENT;
	int fd = open(cg->path[CG_UNIFIED], O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int cgroup_open_v1_tasks(const struct sandbox_cgroup *cg, int *fds,
			 size_t *n_out)
{
	size_t n = 0;
	for (int c = 0; c < CG_UNIFIED; c++) {
		if (!cg->path[c] || cg->v2[c])
			continue;
		char path[1200];
		snprintf(path, sizeof(path), "%s/tasks", cg->path[c]);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0) {
			int r = -errno;
			while (n > 0)
				close(fds[--n]);
			return r;
		}
		fds[n++] = fd;
	}
	*n_out = n;
	return 0;
}

/* Writing "0" to a v1 "tasks" file moves the calling thread. Unlike a
 * write to cgroup.procs (and unlike the same write naming a pid), moving
 * oneself by thread skips the global threadgroup lock, whose write side
 * waits for an RCU grace period: 5-15 ms whenever no other cgroup write
 * happened just before. The files were opened by the parent (root), which
 * is whose permission the kernel checks. */
int cgroup_enter_self(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (write(fds[i], "0", 1) != 1)
			return -errno;
	}
	return 0;
}

/* Number of processes listed in dir/cgroup.procs (0 if gone). Kills them
 * with sig if sig != 0. */
static int procs_signal(const char *dir, int sig)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	int n = 0, pid;
	while (fscanf(f, "%d", &pid) == 1) {
		n++;
		if (sig)
			kill(pid, sig);
	}
	return n;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* The shared parent goes too once empty (EBUSY while others use it). */
static void remove_parent_if_empty(const char *path)
{
	char parent[1100];
	snprintf(parent, sizeof(parent), "%s", path);
	char *slash = strrchr(parent, '/');
	if (slash) {
		*slash = '\0';
		rmdir(parent);
	}
}

int cgroup_kill_all(const struct sandbox_cgroup *cg, int timeout_ms)
{
	if (cg->path[CG_UNIFIED]) {
		char path[1200];
		snprintf(path, sizeof(path), "%s/cgroup.kill",
			 cg->path[CG_UNIFIED]);
		wr_write_file(path, "1");
	}
	for (int waited = 0;; waited++) {
		int left = 0;
		for (int c = 0; c < CG_MAX; c++) {
			if (cg->path[c])
				left += procs_signal(cg->path[c], SIGKILL);
		}
		if (left == 0)
			return 0;
		if (waited >= timeout_ms)
			return -EBUSY;
		sleep_ms(1);
	}
}

bool cgroup_oom_killed(const struct sandbox_cgroup *cg)
{
	const struct cg_backend *ops;
	const char *dir = dir_for(cg, CG_MEMORY, &ops);
	return dir && ops->oom_killed(dir);
}

int cgroup_destroy_if_empty(struct sandbox_cgroup *cg)
{
	for (int c = 0; c < CG_MAX; c++) {
		if (!cg->path[c])
			continue;
		if (rmdir(cg->path[c]) < 0 && errno != ENOENT)
			return -errno;
		remove_parent_if_empty(cg->path[c]);
		free(cg->path[c]);
		cg->path[c] = NULL;
	}
	return 0;
}

int cgroup_destroy(struct sandbox_cgroup *cg)
{
	int ret = 0;
	for (int c = 0; c < CG_MAX; c++) {
		if (!cg->path[c])
			continue;
		/* rmdir fails with EBUSY until the last task is released */
		for (int tries = 0;; tries++) {
			if (rmdir(cg->path[c]) == 0 || errno == ENOENT)
				break;
			if (errno != EBUSY || tries > 2000) {
				ret = -errno;
				break;
			}
			sleep_ms(1);
		}
		remove_parent_if_empty(cg->path[c]);
	}
	return ret;
}

void cgroup_clear(struct sandbox_cgroup *cg)
{
	for (int c = 0; c < CG_MAX; c++) {
		free(cg->path[c]);
		cg->path[c] = NULL;
	}
}

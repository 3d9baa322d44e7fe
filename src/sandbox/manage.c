/* manage.c - long-lived sandboxes by name: list, remove, reap the stale.
 *
 * A sandbox outlives the warren that created it; any later warren finds it
 * through its record. Removal kills init through a pidfd (checked against the
 * recorded start time, so a recycled pid is never signalled): the kernel then
 * kills every process of the pid namespace, the mount namespace and every
 * mount in it go with them, and we remove the cgroup, the work dir and the
 * record. */
#include "sandbox/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/parse.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Serialises removal of one record between concurrent warrens. */
static int lock_record(const char *name)
{
	_cleanup_free_ char *dir = runtime_path("sandboxes/%s", name);
	if (!dir)
		return -ENOMEM;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static int kill_init(const struct sandbox_record *rec)
{
	if (rec->init_pid <= 0)
		return 0;
	_cleanup_close_ int pidfd =
	    (int)syscall(SYS_pidfd_open, rec->init_pid, 0);
	if (pidfd < 0)
		return errno == ESRCH ? 0 : -errno;
	/* the pid may have been recycled between record and pidfd_open */
	if (proc_start_time(rec->init_pid) != rec->init_start)
		return 0;
	if (syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0) < 0)
		return errno == ESRCH ? 0 : -errno;
	struct pollfd pfd = {pidfd, POLLIN, 0};
	/* pidfd becomes readable once the process has exited */
	if (poll(&pfd, 1, 5000) <= 0)
		return -ETIMEDOUT;
	return 0;
}

static int remove_record(const struct sandbox_record *rec)
{
	const struct sandbox_backend_ops *ops = sandbox_backend_ops(rec->backend);
	if (ops->cleanup)
		ops->cleanup(rec);
	int ret = kill_init(rec);
	struct sandbox_cgroup cg;
	if (cgroup_paths_for(rec->name, &cg) == 0) {
		if (cgroup_kill_all(&cg, 2000) < 0 && ret == 0)
			ret = -EBUSY;
		int r = cgroup_destroy(&cg);
		if (r < 0 && ret == 0)
			ret = r;
		cgroup_clear(&cg);
	}
	if (rec->work_dir)
		wr_rm_rf(rec->work_dir);
	runtime_release(rec->name, rec->slot);
	return ret;
}

int sandbox_remove(const char *name, struct wr_error **err)
{
	if (wr_validate_name(name) < 0)
		return wr_error_set(err, EINVAL, "invalid sandbox name '%s'",
				    name);
	_cleanup_close_ int lock = lock_record(name);
	if (lock < 0) {
		if (lock == -ENOENT)
			return wr_error_absent(err, false, "no sandbox named %s",
					    name);
		return wr_error_set(err, -lock, "lock sandbox %s", name);
	}
	struct sandbox_record rec;
	int r = runtime_record_read(name, &rec);
	if (r < 0) {
		/* a record dir without a readable record: remains of a crash
		 * before the first write; nothing else can exist */
		runtime_release(name, -1);
		return 0;
	}
	r = remove_record(&rec);
	runtime_record_clear(&rec);
	if (r < 0)
		return wr_error_set(err, -r, "remove sandbox %s", name);
	return 0;
}

static bool record_expired(const struct sandbox_record *rec)
{
	return rec->deadline_ms > 0 && wr_now_ms() > rec->deadline_ms + 5000;
}

int sandbox_reap_stale(struct wr_error **err)
{
	_cleanup_free_ char *dir = runtime_path("sandboxes");
	if (!dir)
		return wr_error_set(err, ENOMEM, "runtime path");
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0
				       : wr_error_set(err, errno, "%s", dir);
	int cleaned = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		struct sandbox_record rec;
		int r = runtime_record_read(de->d_name, &rec);
		if (r < 0) {
			/* no record yet: stale only if old (a creator may be
			 * between claim and first write) */
			_cleanup_free_ char *p =
			    runtime_path("sandboxes/%s", de->d_name);
			struct stat st;
			if (p && stat(p, &st) == 0 &&
			    time(NULL) - st.st_mtime > 60) {
				runtime_release(de->d_name, -1);
				cleaned++;
			}
			continue;
		}
		if (!runtime_record_alive(&rec) || record_expired(&rec)) {
			_cleanup_close_ int lock = lock_record(rec.name);
			/* re-check under the lock: another warren may have
			 * finished the job */
			struct sandbox_record again;
			if (lock >= 0 &&
			    runtime_record_read(rec.name, &again) == 0) {
				/* and ask again whether it is dead: the first
				 * read may have caught a creator mid-way
				 * (no init yet, its owner just gone), which
				 * has since finished and started the init */
				if (!runtime_record_alive(&again) ||
				    record_expired(&again)) {
					remove_record(&again);
					cleaned++;
				}
				runtime_record_clear(&again);
			}
		}
		runtime_record_clear(&rec);
	}
	closedir(d);
	/* slot claims whose record is gone */
	_cleanup_free_ char *slots = runtime_path("slots");
	d = slots ? opendir(slots) : NULL;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char path[4096], owner[128] = "";
		snprintf(path, sizeof(path), "%s/%s", slots, de->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		if (!fgets(owner, sizeof(owner), f))
			owner[0] = '\0';
		fclose(f);
		struct stat st;
		_cleanup_free_ char *rdir = runtime_path("sandboxes/%s", owner);
		/* a claimer makes its record directory before its slot, so a
		 * slot whose owner has no record directory is stale (an empty
		 * slot file is still being written: skipped) */
		if (rdir && owner[0] && stat(rdir, &st) < 0 &&
		    errno == ENOENT) {
			unlink(path);
			cleaned++;
		}
	}
	if (d)
		closedir(d);
	return cleaned;
}

int sandbox_list(struct sandbox_info **out, size_t *n_out,
		 struct wr_error **err)
{
	_cleanup_free_ char *dir = runtime_path("sandboxes");
	if (!dir)
		return wr_error_set(err, ENOMEM, "runtime path");
	*out = NULL;
	*n_out = 0;
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0
				       : wr_error_set(err, errno, "%s", dir);
	struct sandbox_info *infos = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int ret = 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		struct sandbox_record rec;
		if (runtime_record_read(de->d_name, &rec) < 0)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct sandbox_info *grown =
			    wr_realloc(infos, ncap * sizeof(*infos));
			if (!grown) {
				runtime_record_clear(&rec);
				ret =
				    wr_error_set(err, ENOMEM, "list sandboxes");
				break;
			}
			infos = grown;
			cap = ncap;
		}
		infos[n++] = (struct sandbox_info){
		    .name = TAKE_PTR(rec.name),
		    .init_pid = rec.init_pid,
		    .slot = rec.slot,
		    .host_uid_base = wr_slot_uid(rec.slot),
		    .created_ms = rec.created_ms,
		    .deadline_ms = rec.deadline_ms,
		    .alive = runtime_record_alive(&rec),
		    .backend = rec.backend,
		    .upper = TAKE_PTR(rec.upper),
		    .layers = TAKE_PTR(rec.layers),
		    .data_dir = TAKE_PTR(rec.data_dir),
		};
		runtime_record_clear(&rec);
	}
	closedir(d);
	if (ret < 0) {
		sandbox_info_free_array(infos, n);
		return ret;
	}
	*out = infos;
	*n_out = n;
	return 0;
}

void sandbox_info_free_array(struct sandbox_info *infos, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(infos[i].name);
		free(infos[i].upper);
		free(infos[i].data_dir);
		for (size_t k = 0; infos[i].layers && infos[i].layers[k]; k++)
			free(infos[i].layers[k]);
		free(infos[i].layers);
	}
	free(infos);
}

char **sandbox_layers_in_use(const char *layers_dir, size_t *n_out)
{
	struct sandbox_info *infos = NULL;
	size_t n = 0;
	*n_out = 0;
	if (sandbox_list(&infos, &n, NULL) < 0)
		return NULL;
	size_t cap = 0, count = 0;
	char **ids = NULL;
	size_t dlen = strlen(layers_dir);
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; infos[i].layers && infos[i].layers[k]; k++) {
			const char *p = infos[i].layers[k];
			if (strncmp(p, layers_dir, dlen) || p[dlen] != '/')
				continue;
			if (count == cap) {
				cap = cap ? cap * 2 : 16;
				char **grown =
				    wr_realloc(ids, cap * sizeof(char *));
				if (!grown)
					break;
				ids = grown;
			}
			ids[count] = wr_strndup(p + dlen + 1, 64);
			if (ids[count])
				count++;
		}
	}
	sandbox_info_free_array(infos, n);
	*n_out = count;
	return ids;
}

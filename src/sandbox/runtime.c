/* runtime.c - records of sandboxes under the runtime directory.
 *
 *   $WARREN_RUNTIME_DIR (default /run/warren)
 *     sandboxes/<name>/state.json   the record (written atomically)
 *     sandboxes/<name>/exec.sock    init's exec socket (serve mode)
 *     slots/<n>                     slot claims, created O_EXCL
 *     stage/                        empty: each child mounts its staging
 *                                   tmpfs here, in its own mount namespace
 *
 * A record names its init by pid and start time (so a reused pid is never
 * mistaken for it) and the warren that created it, so that any later warren
 * can tell a live sandbox from the remains of a crashed one. */
#include "sandbox/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#define STATE_MAX_BYTES (64 * 1024)

int64_t wr_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t wr_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Runtime state is small, hot and meaningless after a reboot: it belongs on
 * a tmpfs (on ext4 each record's create/unlink costs a journal commit, as
 * much as the whole sandbox set-up). /run is a tmpfs on systemd hosts; where
 * it is not, we use /dev/shm, which is one everywhere. */
const char *sandbox_runtime_dir(void)
{
	static const char *cached;
	if (cached)
		return cached;
	const char *dir = getenv("WARREN_RUNTIME_DIR");
	if (dir && *dir)
		return cached = dir;
	struct statfs sfs;
	if (statfs("/run", &sfs) == 0 &&
	    (sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC))
		return cached = "/run/warren";
	return cached = "/dev/shm/warren";
}

char *runtime_path(const char *fmt, ...)
{
	char rel[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	return wr_asprintf("%s/%s", sandbox_runtime_dir(), rel);
}

int runtime_ensure_dirs(struct wr_error **err)
{
	static const char *const subdirs[] = {"sandboxes", "slots", "stage"};
	const char *base = sandbox_runtime_dir();
	int r = wr_mkdir_p(base, 0755);
	if (r < 0)
		return wr_error_set(err, -r, "create runtime directory %s",
				    base);
	/* in a world-writable parent (/dev/shm) someone else could have made
	 * it first, or planted a symlink: it must be a directory of ours */
	struct stat st;
	if (lstat(base, &st) < 0)
		return wr_error_set(err, errno, "runtime directory %s", base);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022))
		return wr_error_set(err, EPERM,
				    "runtime directory %s is not a directory "
				    "owned by us and writable only by us",
				    base);
	for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++) {
		_cleanup_free_ char *p = runtime_path("%s", subdirs[i]);
		if (!p)
			return wr_error_set(err, ENOMEM, "runtime path");
		/* sandboxes/ and slots/ hold sockets and records: root only */
		mode_t mode = strcmp(subdirs[i], "stage") ? 0700 : 0755;
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return wr_error_set(err, errno, "create %s", p);
	}
	return 0;
}

uint64_t proc_start_time(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	_cleanup_free_ char *text = NULL;
	if (pid <= 0 || wr_read_file(path, 4096, &text, NULL) < 0)
		return 0;
	/* comm may hold spaces and parens: fields resume after the last ')' */
	char *p = strrchr(text, ')');
	if (!p)
		return 0;
	p++;
	/* field 3 (state) is the first after ')'; starttime is field 22 */
	char state = 0;
	unsigned long long start = 0;
	if (sscanf(p,
		   " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
		   "%*d %*d %*d %*d %*d %*d %llu",
		   &state, &start) != 2)
		return 0;
	if (state == 'Z' || state == 'X')
		return 0; /* exited; only waiting to be reaped */
	return start;
}

int runtime_claim(const char *name, int *slot_out, struct wr_error **err)
{
	_cleanup_free_ char *dir = runtime_path("sandboxes/%s", name);
	if (!dir)
		return wr_error_set(err, ENOMEM, "runtime path");
	if (mkdir(dir, 0700) < 0) {
		if (errno == EEXIST)
			return wr_error_input(
			    err, EEXIST, "a sandbox named %s exists", name);
		return wr_error_set(err, errno, "create %s", dir);
	}
	/* spread claims so concurrent creators rarely collide */
	unsigned start = (unsigned)(getpid() * 2654435761u) % WR_MAX_SLOTS;
	for (unsigned i = 0; i < WR_MAX_SLOTS; i++) {
		int slot = (int)((start + i) % WR_MAX_SLOTS);
		_cleanup_free_ char *p = runtime_path("slots/%d", slot);
		if (!p)
			break;
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			if (errno == EEXIST)
				continue;
			int r = wr_error_set(err, errno, "claim slot %s", p);
			rmdir(dir);
			return r;
		}
		if (write(fd, name, strlen(name)) < 0) {
			/* the name is informational only */
		}
		close(fd);
		*slot_out = slot;
		return 0;
	}
	rmdir(dir);
	return wr_error_set(err, EAGAIN, "no free sandbox slot (%d in use)",
			    WR_MAX_SLOTS);
}

void runtime_release(const char *name, int slot)
{
	if (slot >= 0) {
		/* only our own claim: after `rm` of a one-off sandbox, its
		 * owner's teardown releases again, and the slot may have
		 * been claimed anew in between */
		_cleanup_free_ char *p = runtime_path("slots/%d", slot);
		_cleanup_free_ char *owner = NULL;
		if (p && wr_read_file(p, 256, &owner, NULL) == 0 &&
		    (!name || strcmp(owner, name) == 0))
			unlink(p);
	}
	if (name) {
		_cleanup_free_ char *dir = runtime_path("sandboxes/%s", name);
		if (dir)
			wr_rm_rf(dir);
	}
}

int runtime_record_write(const struct sandbox_record *rec,
			 struct wr_error **err)
{
	json_t *o =
	    json_pack("{s:s, s:i, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
		      "name", rec->name, "slot", rec->slot, "mode",
		      rec->mode == SANDBOX_MODE_SERVE ? "serve" : "run",
		      "init_pid", (json_int_t)rec->init_pid, "init_start",
		      (json_int_t)rec->init_start, "owner_pid",
		      (json_int_t)rec->owner_pid, "owner_start",
		      (json_int_t)rec->owner_start, "created_ms",
		      (json_int_t)rec->created_ms, "deadline_ms",
		      (json_int_t)rec->deadline_ms, "host_uid_base",
		      (json_int_t)wr_slot_uid(rec->slot), "store_uid",
		      (json_int_t)WR_STORE_UID);
	if (!o)
		return wr_error_set(err, ENOMEM, "encode sandbox record");
	json_object_set_new(o, "backend",
			    json_string(sandbox_backend_name(rec->backend)));
	if (rec->upper)
		json_object_set_new(o, "upper", json_string(rec->upper));
	if (rec->owner_bound)
		json_object_set_new(o, "owner_bound", json_true());
	if (rec->work_dir)
		json_object_set_new(o, "work_dir", json_string(rec->work_dir));
	if (rec->cwd)
		json_object_set_new(o, "cwd", json_string(rec->cwd));
	if (rec->data_dir)
		json_object_set_new(o, "data_dir", json_string(rec->data_dir));
	if (rec->layers) {
		json_t *layers = json_array();
		for (size_t i = 0; rec->layers[i]; i++)
			json_array_append_new(layers, json_string(rec->layers[i]));
		json_object_set_new(o, "layers", layers);
	}
	if (rec->env) {
		json_t *env = json_array();
		for (size_t i = 0; rec->env[i]; i++)
			json_array_append_new(env, json_string(rec->env[i]));
		json_object_set_new(o, "env", env);
	}
	char *text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
	json_decref(o);
	if (!text)
		return wr_error_set(err, ENOMEM, "encode sandbox record");
	_cleanup_free_ char *path =
	    runtime_path("sandboxes/%s/state.json", rec->name);
	int r =
	    path ? wr_write_file_atomic(path, text, strlen(text), 0600, false)
		 : -ENOMEM;
	free(text);
	if (r < 0)
		return wr_error_set(err, -r, "write sandbox record");
	return 0;
}

static char **dup_string_array(json_t *arr)
{
	if (!json_is_array(arr) || json_array_size(arr) > 4096)
		return NULL;
	size_t n = json_array_size(arr);
	char **list = wr_calloc(n + 1, sizeof(char *));
	for (size_t i = 0; list && i < n; i++) {
		const char *s = json_string_value(json_array_get(arr, i));
		list[i] = wr_strdup(s ? s : "");
	}
	return list;
}

static char *dup_json_string(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? wr_strdup(s) : NULL;
}

int runtime_record_read(const char *name, struct sandbox_record *rec)
{
	_cleanup_free_ char *path =
	    runtime_path("sandboxes/%s/state.json", name);
	if (!path)
		return -ENOMEM;
	_cleanup_free_ char *text = NULL;
	int r = wr_read_file(path, STATE_MAX_BYTES, &text, NULL);
	if (r < 0)
		return r;
	json_error_t jerr;
	json_t *o = json_loads(text, 0, &jerr);
	if (!o || !json_is_object(o)) {
		json_decref(o);
		return -EBADMSG;
	}
	memset(rec, 0, sizeof(*rec));
	rec->name = wr_strdup(name);
	rec->slot = (int)json_integer_value(json_object_get(o, "slot"));
	const char *mode = json_string_value(json_object_get(o, "mode"));
	rec->mode = mode && !strcmp(mode, "serve") ? SANDBOX_MODE_SERVE
						   : SANDBOX_MODE_RUN;
	rec->init_pid =
	    (pid_t)json_integer_value(json_object_get(o, "init_pid"));
	rec->init_start =
	    (uint64_t)json_integer_value(json_object_get(o, "init_start"));
	rec->owner_pid =
	    (pid_t)json_integer_value(json_object_get(o, "owner_pid"));
	rec->owner_start =
	    (uint64_t)json_integer_value(json_object_get(o, "owner_start"));
	rec->created_ms = json_integer_value(json_object_get(o, "created_ms"));
	rec->deadline_ms =
	    json_integer_value(json_object_get(o, "deadline_ms"));
	const char *backend = json_string_value(json_object_get(o, "backend"));
	if (backend && sandbox_backend_parse(backend, &rec->backend) < 0) {
		json_decref(o);
		free(rec->name);
		rec->name = NULL;
		return -EBADMSG;
	}
	rec->upper = dup_json_string(o, "upper");
	rec->work_dir = dup_json_string(o, "work_dir");
	rec->cwd = dup_json_string(o, "cwd");
	rec->data_dir = dup_json_string(o, "data_dir");
	rec->owner_bound = json_is_true(json_object_get(o, "owner_bound"));
	rec->layers = dup_string_array(json_object_get(o, "layers"));
	json_t *env = json_object_get(o, "env");
	if (json_is_array(env) && json_array_size(env) <= 4096) {
		size_t n = json_array_size(env);
		rec->env = wr_calloc(n + 1, sizeof(char *));
		for (size_t i = 0; rec->env && i < n; i++) {
			const char *kv =
			    json_string_value(json_array_get(env, i));
			rec->env[i] =
			    wr_strdup(kv && strchr(kv, '=') ? kv : "_=");
		}
	}
	json_decref(o);
	if (!rec->name || rec->slot < 0 || rec->slot >= WR_MAX_SLOTS) {
		runtime_record_clear(rec);
		return -EBADMSG;
	}
	return 0;
}

void runtime_record_clear(struct sandbox_record *rec)
{
	for (size_t i = 0; rec->env && rec->env[i]; i++)
		free(rec->env[i]);
	free(rec->env);
	for (size_t i = 0; rec->layers && rec->layers[i]; i++)
		free(rec->layers[i]);
	free(rec->layers);
	free(rec->cwd);
	free(rec->data_dir);
	free(rec->name);
	free(rec->upper);
	free(rec->work_dir);
	memset(rec, 0, sizeof(*rec));
}

bool runtime_record_alive(const struct sandbox_record *rec)
{
	bool owner_alive = rec->owner_pid > 0 &&
			   proc_start_time(rec->owner_pid) == rec->owner_start;
	if (rec->init_pid > 0) {
		bool init_alive =
		    rec->init_start != 0 &&
		    proc_start_time(rec->init_pid) == rec->init_start;
		/* a one-off sandbox lives only as long as its warren */
		if (rec->mode == SANDBOX_MODE_RUN || rec->owner_bound)
			return init_alive && owner_alive;
		return init_alive;
	}
	/* still being created: alive while its creator is */
	return owner_alive;
}

char *runtime_upper_in_use(const char *upper_real)
{
	_cleanup_free_ char *dir = runtime_path("sandboxes");
	if (!dir)
		return NULL;
	DIR *d = opendir(dir);
	if (!d)
		return NULL;
	char *found = NULL;
	struct dirent *de;
	while (!found && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		struct sandbox_record rec;
		if (runtime_record_read(de->d_name, &rec) < 0)
			continue;
		if (rec.upper && !strcmp(rec.upper, upper_real) &&
		    runtime_record_alive(&rec))
			found = wr_strdup(rec.name);
		runtime_record_clear(&rec);
	}
	closedir(d);
	return found;
}

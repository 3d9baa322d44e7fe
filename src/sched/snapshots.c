/* snapshots.c - the snapshots sessions start from: building or refreshing
 * a repository's (one build per repository at a time: in this process, and
 * among workers sharing the store through its build claim; `warren
 * snapshot refresh` as a child process, its log in
 * DATA/logs/build-<repo id>.log),
 * the staleness policy that decides whether a session waits for a fresh
 * one, and what the control plane reads from a snapshot's spec (limits,
 * refresh interval, verify commands, artifacts, egress hosts), cached per
 * snapshot. */
#include "sched/internal.h"

#include "snapshot/build.h"
#include "snapshot/git.h"
#include "util/alloc.h"
#include "util/log.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static double mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static bool building(struct control *c, const char *repo_id)
{
	for (size_t i = 0; i < c->builds.n_building; i++)
		if (!strcmp(c->builds.building[i], repo_id))
			return true;
	return false;
}

static pid_t *build_slot(struct control *c)
{
	for (size_t i = 0; i < sizeof(c->builds.pids) / sizeof(pid_t); i++)
		if (c->builds.pids[i] == 0)
			return &c->builds.pids[i];
	return NULL;
}

/* The last line the build wrote to its log after offset start that says
 * why it failed ("warren snapshot refresh: …", else the last non-empty
 * line). */
static void build_log_cause(const char *log_path, off_t start, char *out,
			    size_t size)
{
	out[0] = '\0';
	_cleanup_close_ int fd = open(log_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	off_t end = lseek(fd, 0, SEEK_END);
	off_t from = end - start > 65536 ? end - 65536 : start;
	if (end <= from)
		return;
	size_t len = (size_t)(end - from);
	_cleanup_free_ char *text = wr_malloc(len + 1);
	if (!text)
		return;
	ssize_t n = pread(fd, text, len, from);
	if (n <= 0)
		return;
	text[n] = '\0';
	const char *best = NULL, *last = NULL;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		if (!line[strspn(line, " \t")])
			continue;
		last = line;
		if (!strncmp(line, "warren snapshot", 15))
			best = line;
	}
	const char *pick = best ? best : last;
	if (pick)
		snprintf(out, size, "%s", pick);
}

/* ---- a repository's build state: DATA/builds/<repo id>.json -------------- */

static char *build_state_path(const struct control *c, const char *repo_id)
{
	return wr_asprintf("%s/builds/%s.json", c->data_dir, repo_id);
}

json_t *control_build_state(struct control *c, const char *repo_id)
{
	_cleanup_free_ char *path = build_state_path(c, repo_id);
	json_t *j = path ? json_load_file(path, 0, NULL) : NULL;
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

/* ---- each build's record and log: DATA/builds/<repo id>/<build id>.* --- */

bool control_build_id_valid(const char *s)
{
	if (!s || strncmp(s, "b-", 2) || strlen(s) != 2 + 13 + 1 + 8)
		return false;
	for (int i = 2; i < 15; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	if (s[15] != '-')
		return false;
	for (int i = 16; i < 24; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return false;
	return true;
}

static char *build_file(const struct control *c, const char *repo_id,
			const char *build_id, const char *ext)
{
	return wr_asprintf("%s/builds/%s/%s.%s", c->data_dir, repo_id,
			   build_id, ext);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The ids of the repository's builds, oldest first (ids sort by time). */
static size_t build_ids(const struct control *c, const char *repo_id,
			char ***out)
{
	*out = NULL;
	_cleanup_free_ char *dir =
	    wr_asprintf("%s/builds/%s", c->data_dir, repo_id);
	DIR *d = dir ? opendir(dir) : NULL;
	if (!d)
		return 0;
	char **v = NULL;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len != 24 + 5 || strcmp(e->d_name + 24, ".json"))
			continue;
		char *id = wr_strndup(e->d_name, 24);
		if (!id || !control_build_id_valid(id)) {
			free(id);
			continue;
		}
		char **nv = wr_realloc(v, (n + 1) * sizeof(*nv));
		if (!nv) {
			free(id);
			break;
		}
		v = nv;
		v[n++] = id;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), name_cmp);
	*out = v;
	return n;
}

static void build_ids_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Only the last CONTROL_BUILD_HISTORY builds are kept. */
static void build_history_prune(struct control *c, const char *repo_id)
{
	char **ids;
	size_t n = build_ids(c, repo_id, &ids);
	for (size_t i = 0; i + CONTROL_BUILD_HISTORY < n; i++) {
		_cleanup_free_ char *j = build_file(c, repo_id, ids[i], "json");
		_cleanup_free_ char *l = build_file(c, repo_id, ids[i], "log");
		if (j)
			unlink(j);
		if (l)
			unlink(l);
	}
	build_ids_free(ids, n);
}

static json_t *build_record(const struct control *c, const char *repo_id,
			    const char *build_id)
{
	_cleanup_free_ char *path = build_file(c, repo_id, build_id, "json");
	json_t *j = path ? json_load_file(path, 0, NULL) : NULL;
	if (j && !json_is_object(j)) {
		json_decref(j);
		j = NULL;
	}
	return j;
}

static void json_save(const char *path, json_t *j)
{
	char *text = json_dumps(j, JSON_COMPACT);
	if (path && text)
		wr_write_file_atomic(path, text, strlen(text), 0600, false);
	free(text);
}

/* The hook a failed build's error names (snapshot/build.c's step_error:
 * "hook NAME failed with status N", "hook NAME printed nothing …"), into
 * out; "" when it names none. */
static void failed_hook(const char *error, char *out, size_t size)
{
	out[0] = '\0';
	const char *p = error ? strstr(error, "hook ") : NULL;
	if (!p)
		return;
	p += strlen("hook ");
	size_t n = strcspn(p, " \n");
	if (n == 0 || n >= size || p[n] != ' ' ||
	    (strncmp(p + n, " failed with status ", 20) &&
	     strncmp(p + n, " printed nothing", 16)))
		return;
	memcpy(out, p, n);
	out[n] = '\0';
}

/* The times, error (and the hook it names) and snapshot that go with a
 * state (snapshot_key: the name the record gives the snapshot's id). */
static void state_apply(json_t *j, const char *state, const char *error,
			const char *snapshot_id, const char *snapshot_key,
			int64_t now)
{
	json_object_set_new(j, "state", json_string(state));
	if (!strcmp(state, "building")) {
		json_object_set_new(j, "started_ms", json_integer(now));
		json_object_del(j, "finished_ms");
	} else if (!strcmp(state, "queued")) {
		json_object_set_new(j, "queued_ms", json_integer(now));
	} else {
		json_object_set_new(j, "finished_ms", json_integer(now));
	}
	char hook[128];
	failed_hook(error, hook, sizeof(hook));
	if (error)
		json_object_set_new(j, "error", json_string(error));
	else if (strcmp(state, "queued"))
		json_object_del(j, "error");
	if (hook[0])
		json_object_set_new(j, "hook", json_string(hook));
	else if (error || strcmp(state, "queued"))
		json_object_del(j, "hook");
	if (snapshot_id)
		json_object_set_new(j, snapshot_key, json_string(snapshot_id));
}

static bool state_active(const char *state)
{
	return state && (!strcmp(state, "queued") || !strcmp(state, "building"));
}

/* Writes the state (queued, building, ready, failed), keeping the record's
 * other fields; error and snapshot only with the states they go with. A
 * build queued or started after one that ended is a new build: a new id,
 * a record of its own. */
void control_build_state_set(struct control *c, const char *repo_id,
			     const char *state, const char *error,
			     const char *snapshot_id)
{
	_cleanup_free_ char *dir = wr_asprintf("%s/builds", c->data_dir);
	_cleanup_free_ char *path = build_state_path(c, repo_id);
	_cleanup_free_ char *hist =
	    wr_asprintf("%s/builds/%s", c->data_dir, repo_id);
	if (!dir || !path || !hist)
		return;
	wr_mkdir_p(hist, 0700);
	pthread_mutex_lock(&c->build_state_mu);
	json_t *j = control_build_state(c, repo_id);
	if (!j)
		j = json_object();
	int64_t now = store_now_ms();
	const char *was = json_string_value(json_object_get(j, "state"));
	const char *id = json_string_value(json_object_get(j, "id"));
	json_t *rec = NULL;
	bool fresh = false;
	if (state_active(state) && (!state_active(was) || !id)) {
		uint32_t rnd = 0;
		if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
			rnd = (uint32_t)now ^ (uint32_t)getpid();
		char nid[32];
		snprintf(nid, sizeof(nid), "b-%013lld-%08x", (long long)now,
			 rnd);
		json_object_set_new(j, "id", json_string(nid));
		id = json_string_value(json_object_get(j, "id"));
		rec = json_pack("{s:s}", "id", nid);
		fresh = true;
	} else if (id && control_build_id_valid(id)) {
		rec = build_record(c, repo_id, id);
		if (!rec)
			rec = json_pack("{s:s}", "id", id);
	}
	state_apply(j, state, error, snapshot_id, "snapshot", now);
	json_save(path, j);
	if (rec) {
		state_apply(rec, state, error, snapshot_id, "snapshot_id", now);
		_cleanup_free_ char *rp = build_file(c, repo_id, id, "json");
		json_save(rp, rec);
		json_decref(rec);
	}
	if (fresh)
		build_history_prune(c, repo_id);
	json_decref(j);
	pthread_mutex_unlock(&c->build_state_mu);
}

/* Notes where the build's output starts in DATA/logs/build-<repo>.log
 * (the log of a running build is read from there). */
static char *build_log_begin(struct control *c, const char *repo_id,
			     off_t offset)
{
	char *id = NULL;
	pthread_mutex_lock(&c->build_state_mu);
	json_t *j = control_build_state(c, repo_id);
	const char *s = json_string_value(json_object_get(j, "id"));
	if (s && control_build_id_valid(s)) {
		id = wr_strdup(s);
		json_t *rec = build_record(c, repo_id, s);
		if (rec) {
			json_object_set_new(rec, "log_offset",
					    json_integer(offset));
			_cleanup_free_ char *rp =
			    build_file(c, repo_id, s, "json");
			json_save(rp, rec);
			json_decref(rec);
		}
	}
	json_decref(j);
	pthread_mutex_unlock(&c->build_state_mu);
	return id;
}

#define BUILD_LOG_MAX (4u << 20)

/* Up to BUILD_LOG_MAX bytes (the last ones) of path from offset on. */
static int log_read(const char *path, off_t from, char **text, size_t *len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	off_t end = lseek(fd, 0, SEEK_END);
	if (end < from)
		from = end;
	if (end - from > (off_t)BUILD_LOG_MAX)
		from = end - BUILD_LOG_MAX;
	size_t n = (size_t)(end - from);
	char *buf = wr_malloc(n + 1);
	if (!buf)
		return -ENOMEM;
	ssize_t got = n ? pread(fd, buf, n, from) : 0;
	if (got < 0) {
		int e = -errno;
		free(buf);
		return e;
	}
	buf[got] = '\0';
	*text = buf;
	*len = (size_t)got;
	return 0;
}

/* The build's part of the repository's log, into a log of its own. */
static void build_log_keep(struct control *c, const char *repo_id,
			   const char *build_id, const char *log_path,
			   off_t start)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	_cleanup_free_ char *dst = build_file(c, repo_id, build_id, "log");
	if (!dst || log_read(log_path, start, &text, &len) < 0)
		return;
	wr_write_file_atomic(dst, text, len, 0600, false);
}

json_t *control_builds_list(struct control *c, const char *repo_id)
{
	json_t *list = json_array();
	if (!list)
		return NULL;
	pthread_mutex_lock(&c->build_state_mu);
	char **ids;
	size_t n = build_ids(c, repo_id, &ids);
	for (size_t i = n; i-- > 0;) {
		json_t *rec = build_record(c, repo_id, ids[i]);
		if (!rec)
			continue;
		json_object_del(rec, "log_offset");
		json_array_append_new(list, rec);
	}
	build_ids_free(ids, n);
	pthread_mutex_unlock(&c->build_state_mu);
	return list;
}

int control_build_log(struct control *c, const char *repo_id,
		      const char *build_id, char **text, size_t *len)
{
	if (!control_build_id_valid(build_id))
		return -ENOENT;
	pthread_mutex_lock(&c->build_state_mu);
	json_t *rec = build_record(c, repo_id, build_id);
	pthread_mutex_unlock(&c->build_state_mu);
	if (!rec)
		return -ENOENT;
	_cleanup_free_ char *own = build_file(c, repo_id, build_id, "log");
	int r = own ? log_read(own, 0, text, len) : -ENOMEM;
	if (r == -ENOENT) {
		/* still running (or ended without output kept): the
		 * repository's log from where the build began */
		json_t *off = json_object_get(rec, "log_offset");
		_cleanup_free_ char *shared = wr_asprintf(
		    "%s/logs/build-%s.log", c->data_dir, repo_id);
		if (off && shared)
			r = log_read(shared, (off_t)json_integer_value(off),
				     text, len);
		else if (!off) {
			*text = wr_strdup("");
			*len = 0;
			r = *text ? 0 : -ENOMEM;
		}
		if (r == -ENOENT) {
			*text = wr_strdup("");
			*len = 0;
			r = *text ? 0 : -ENOMEM;
		}
	}
	json_decref(rec);
	return r;
}

/* The push of a built snapshot to the registry (cfg.blobs_file), by
 * `warren snapshot push` as a child, its stderr into the build's log. A
 * failure does not fail the build: it is logged, written to the log and
 * kept in the build's record as "push": {"ok", "error"|"manifest_digest",
 * "ms"}. */
static void snapshot_push(struct control *c, const char *repo_id,
			  const char *build_id, const char *snapshot_id,
			  const char *log_path)
{
	char *argv[] = {(char *)c->warren_bin,
			"snapshot",
			"push",
			(char *)snapshot_id,
			"--data",
			(char *)c->data_dir,
			"--blobs",
			(char *)c->cfg.blobs_file,
			"--json",
			NULL};
	int log_fd =
	    open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	off_t push_start = log_fd >= 0 ? lseek(log_fd, 0, SEEK_END) : 0;
	_cleanup_free_ char *output = NULL, *errors = NULL;
	struct wr_error *err = NULL;
	double t0 = mono_ms();
	int status = proc_run(argv, 64 << 10, log_fd, &output,
			      log_fd < 0 ? &errors : NULL, &err);
	double ms = mono_ms() - t0;
	json_t *answer = status == 0 ? json_loads(output, 0, NULL) : NULL;
	const char *digest =
	    json_string_value(json_object_get(answer, "manifest_digest"));
	json_t *push;
	if (digest) {
		push = json_pack("{s:b, s:s, s:f}", "ok", 1, "manifest_digest",
				 digest, "ms", ms);
	} else {
		char cause[1024] = "";
		if (status < 0)
			snprintf(cause, sizeof(cause), "%s",
				 err && err->msg ? err->msg : "cannot run it");
		else if (status != 0 && log_fd >= 0)
			build_log_cause(log_path, push_start, cause,
					sizeof(cause));
		else if (errors)
			snprintf(cause, sizeof(cause), "%s", errors);
		if (!cause[0])
			snprintf(cause, sizeof(cause),
				 status ? "exit status %d" : "no answer",
				 status);
		wr_log(WR_LOG_WARN, "builds",
		       "push of snapshot %.12s to the registry failed: %s",
		       snapshot_id, cause);
		if (log_fd >= 0)
			dprintf(log_fd,
				"warren serve: the push of snapshot %s to the "
				"registry failed (the build stands): %s\n",
				snapshot_id, cause);
		push = json_pack("{s:b, s:s, s:f}", "ok", 0, "error", cause,
				 "ms", ms);
	}
	json_decref(answer);
	wr_error_free(err);
	if (log_fd >= 0)
		close(log_fd);
	if (!build_id || !push) {
		json_decref(push);
		return;
	}
	pthread_mutex_lock(&c->build_state_mu);
	json_t *rec = build_record(c, repo_id, build_id);
	if (rec) {
		json_object_set(rec, "push", push);
		_cleanup_free_ char *rp =
		    build_file(c, repo_id, build_id, "json");
		json_save(rp, rec);
		json_decref(rec);
	}
	pthread_mutex_unlock(&c->build_state_mu);
	json_decref(push);
}

static bool snapshot_here(const struct control *c, const char *id);

/* The refresh measures the data directory's newest snapshot of the
 * repository: the store's newest, when the data directory lacks it (built
 * on another host), is pulled first so that it is not built again here.
 * A failed pull is logged; the refresh then builds. */
static void refresh_pull_newest(struct control *c,
				const struct store_repo *repo,
				const struct run *owner)
{
	if (!c->cfg.blobs_file)
		return;
	struct store_snapshot newest = {0};
	if (c->st->ops->snapshot_latest(c->st, repo->id, &newest, NULL) < 0)
		return;
	if (!snapshot_here(c, newest.id)) {
		json_t *pull = NULL;
		struct wr_error *err = NULL;
		if (control_snapshot_local(c, newest.id, owner, &pull, &err) <
		    0)
			wr_log(WR_LOG_WARN, "builds",
			       "repository %s: the refresh builds: %s",
			       repo->name ? repo->name : repo->id,
			       err && err->msg ? err->msg : "pull failed");
		wr_error_free(err);
		json_decref(pull);
	}
	store_snapshot_clear(&newest);
}

/* Runs `warren snapshot refresh` for repo and records the snapshot it
 * reports (built or kept), and pushes one it built when the server has a
 * registry. */
static int snapshot_refresh(struct control *c, const struct store_repo *repo,
			    const struct control_staleness *policy,
			    const struct run *owner, json_t **report,
			    struct store_snapshot *out, struct wr_error **err)
{
	refresh_pull_newest(c, repo, owner);
	char max_age[32], max_behind[32];
	_cleanup_free_ char *log_dir = wr_asprintf("%s/logs", c->data_dir);
	_cleanup_free_ char *log_path =
	    wr_asprintf("%s/logs/build-%s.log", c->data_dir, repo->id);
	if (!log_dir || !log_path)
		return wr_error_set(err, ENOMEM, "snapshot");
	wr_mkdir_p(log_dir, 0700);
	int log_fd =
	    open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	off_t log_start = log_fd >= 0 ? lseek(log_fd, 0, SEEK_END) : 0;
	_cleanup_free_ char *build_id = build_log_begin(c, repo->id, log_start);
	char *argv[32];
	int n = 0;
	argv[n++] = c->warren_bin;
	argv[n++] = "snapshot";
	argv[n++] = "refresh";
	argv[n++] = repo->url;
	argv[n++] = "--data";
	argv[n++] = c->data_dir;
	argv[n++] = "--json";
	const char *build_rules = perimeter_build_egress_config(c->perimeter);
	if (build_rules) {
		argv[n++] = "--egress-config";
		argv[n++] = (char *)build_rules;
	}
	/* for the secrets granted to some repositories only */
	if (repo->name) {
		argv[n++] = "--repo-name";
		argv[n++] = repo->name;
	}
	if (repo->default_ref) {
		argv[n++] = "--ref";
		argv[n++] = repo->default_ref;
	}
	/* builds run where the repository's sessions run, unless its spec
	 * says (the build reads it) */
	argv[n++] = "--backend";
	argv[n++] = (char *)sandbox_backend_name(c->cfg.backend);
	char hung[32];
	if (c->cfg.build_hung_after_ms) {
		snprintf(hung, sizeof(hung), "%llums",
			 (unsigned long long)c->cfg.build_hung_after_ms);
		argv[n++] = "--hung-after";
		argv[n++] = hung;
	}
	/* with a policy, the refresh builds only when the newest snapshot
	 * is beyond it */
	if (policy && policy->max_age_ms > 0) {
		snprintf(max_age, sizeof(max_age), "%llds",
			 (long long)((policy->max_age_ms + 999) / 1000));
		argv[n++] = "--max-age";
		argv[n++] = max_age;
	}
	if (policy && policy->max_behind > 0) {
		snprintf(max_behind, sizeof(max_behind), "%d",
			 policy->max_behind);
		argv[n++] = "--max-behind";
		argv[n++] = max_behind;
	}
	argv[n] = NULL;
	pthread_mutex_lock(&c->builds.mu);
	pid_t *slot = build_slot(c);
	if (slot) {
		*slot = -1; /* reserved until the child's pid is known */
		snprintf(c->builds.pid_repo[slot - c->builds.pids],
			 sizeof(c->builds.pid_repo[0]), "%s", repo->id);
		c->builds.owner[slot - c->builds.pids] = owner;
	}
	bool cancelled = json_object_get(c->builds.cancels, repo->id) != NULL;
	pthread_mutex_unlock(&c->builds.mu);
	if (cancelled) {
		if (slot) {
			pthread_mutex_lock(&c->builds.mu);
			*slot = 0;
			c->builds.owner[slot - c->builds.pids] = NULL;
			pthread_mutex_unlock(&c->builds.mu);
		}
		if (log_fd >= 0)
			close(log_fd);
		return wr_error_set(err, ECANCELED, "build cancelled");
	}
	_cleanup_free_ char *output = NULL, *errors = NULL;
	double t0 = mono_ms();
	int status =
	    proc_run_tracked(argv, 1 << 20, log_fd, &output,
			     log_fd < 0 ? &errors : NULL, slot, &c->builds.mu, err);
	double build_ms = mono_ms() - t0;
	if (slot) {
		pthread_mutex_lock(&c->builds.mu);
		*slot = 0;
		c->builds.owner[slot - c->builds.pids] = NULL;
		pthread_mutex_unlock(&c->builds.mu);
	}
	if (log_fd >= 0)
		close(log_fd);
	if (build_id)
		build_log_keep(c, repo->id, build_id, log_path, log_start);
	if (status < 0)
		return status;
	if (status != 0) {
		metrics_add(c, &c->m.snapshot_build_failures, 1);
		/* the cause is the refresh's own last words, in the log */
		char cause[1024];
		build_log_cause(log_path, log_start, cause, sizeof(cause));
		return wr_error_set(err, 0, "snapshot build of %s failed: %s",
				    repo->name,
				    cause[0] ? cause : "no message (see the log)");
	}
	json_error_t jerr;
	json_t *j = json_loads(output, 0, &jerr);
	json_t *m = json_object_get(j, "snapshot");
	const char *id = json_string_value(json_object_get(m, "id"));
	const char *commit = json_string_value(json_object_get(m, "commit"));
	if (!id || !commit || strlen(id) >= STORE_ID_MAX ||
	    strlen(commit) > 40) {
		json_decref(j);
		return wr_error_set(err, EPROTO,
				    "snapshot of %s: unexpected output",
				    repo->name);
	}
	if (json_is_true(json_object_get(j, "built"))) {
		metrics_add(c, &c->m.snapshot_builds, 1);
		if (c->cfg.blobs_file) {
			snapshot_push(c, repo->id, build_id, id, log_path);
			/* the build's own log with the push's lines */
			if (build_id)
				build_log_keep(c, repo->id, build_id, log_path,
					       log_start);
		}
	}
	if (report)
		*report = json_pack(
		    "{s:O?, s:O?, s:O?, s:b}", "newest",
		    json_object_get(j, "before"), "age_ms",
		    json_object_get(j, "age_ms"), "commits_behind",
		    json_object_get(j, "commits_behind"), "waited",
		    json_is_true(json_object_get(j, "built")));
	struct store_snapshot s = {0};
	snprintf(s.id, sizeof(s.id), "%s", id);
	snprintf(s.repo_id, sizeof(s.repo_id), "%s", repo->id);
	snprintf(s.commit, sizeof(s.commit), "%s", commit);
	s.created_ms = json_integer_value(json_object_get(m, "created_ms"));
	if (!s.created_ms)
		s.created_ms = store_now_ms();
	json_t *t = json_object_get(m, "timings");
	if (json_is_array(t))
		json_array_append_new(t, json_pack("{s:s, s:f}", "phase",
						   "refresh", "ms", build_ms));
	s.timings_json = t ? json_dumps(t, JSON_COMPACT) : NULL;
	json_decref(j);
	int r = c->st->ops->snapshot_add(c->st, &s, err);
	free(s.timings_json);
	if (r == -EEXIST) {
		wr_error_freep(err);
		r = 0;
	}
	if (r < 0)
		return r;
	return c->st->ops->snapshot_latest(c->st, repo->id, out, err);
}

/* With builds.mu held: n more (or fewer) sessions wait for repo_id's
 * build. */
static void waiting_add(struct control *c, const char *repo_id, int n)
{
	if (!c->builds.waiting)
		c->builds.waiting = json_object();
	json_int_t now =
	    json_integer_value(json_object_get(c->builds.waiting, repo_id)) + n;
	if (now > 0)
		json_object_set_new(c->builds.waiting, repo_id,
				    json_integer(now));
	else
		json_object_del(c->builds.waiting, repo_id);
}

void control_build_owner_cancelled(struct control *c, const struct run *run,
				   const char *by)
{
	pthread_mutex_lock(&c->builds.mu);
	for (size_t i = 0; i < ARRAY_SIZE(c->builds.pids); i++) {
		const char *repo_id = c->builds.pid_repo[i];
		if (c->builds.owner[i] != run || c->builds.pids[i] == 0 ||
		    json_object_get(c->builds.waiting, repo_id))
			continue;
		/* failed, saying by whom (snapshot_ensure); the pid may be
		 * reserved (-1) and not known yet: the cancel mark stops it
		 * before it starts */
		if (!c->builds.cancels)
			c->builds.cancels = json_object();
		json_object_set_new(c->builds.cancels, repo_id,
				    json_string(by && *by ? by : "someone"));
		if (c->builds.pids[i] > 0)
			kill(c->builds.pids[i], SIGTERM);
	}
	pthread_mutex_unlock(&c->builds.mu);
}

/* With builds.mu held: has the session waiting for a build been
 * cancelled, expired or shut down (its flags are under mu)? */
static bool waiter_stopped(struct control *c, const struct run *w)
{
	if (!w)
		return false;
	pthread_mutex_lock(&c->mu);
	bool stopped = w->cancel || w->shutdown || w->expire;
	pthread_mutex_unlock(&c->mu);
	return stopped;
}

/* ---- one build among the workers sharing the store ----------------------- */

#define BUILD_CLAIM_POLL_MS 300

/* Says on the waiting session that another worker builds its snapshot:
 * its reason and a snapshot event, once per holder; the log too. */
static void claim_wait_said(struct control *c, const struct run *waiter,
			    const struct store_repo *repo, const char *holder)
{
	const char *name = repo->name ? repo->name : repo->id;
	wr_log(WR_LOG_INFO, "builds",
	       "repository %s: waiting for worker %s's snapshot build", name,
	       holder);
	if (!waiter)
		return;
	char why[256];
	snprintf(why, sizeof(why),
		 "waiting for the snapshot build of %s on worker %s", name,
		 holder);
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	upd.reason = why;
	upd.epoch = lease_epoch(c, waiter->id);
	c->st->ops->session_update(c->st, waiter->id, &upd, NULL);
	control_event(c, waiter->id, EVENT_SNAPSHOT,
		      json_pack("{s:b, s:s, s:s, s:s, s:s}", "waiting", 1,
				"repo", name, "build", "building", "worker",
				holder, "reason", why));
}

/* A worker among others (`--role worker`) takes the store's claim of
 * repo's build (build_claim, with a lease the renewal thread extends with
 * its session leases), so that one build serves every worker's sessions.
 * While another worker holds it, this one waits: it asks again every
 * BUILD_CLAIM_POLL_MS, until the holder releases it or its lease runs out
 * (a worker that died holding it), and stops waiting when the waiter is
 * stopped, the build cancelled or the server stops (each broadcasts
 * builds.cv). *waited: another worker held it. Called without builds.mu. */
static int build_claim_take(struct control *c, const struct store_repo *repo,
			    const struct run *waiter, bool *waited,
			    struct wr_error **err)
{
	*waited = false;
	char said[STORE_ID_MAX] = "";
	for (;;) {
		bool got = false;
		_cleanup_free_ char *holder = NULL;
		int r = c->st->ops->build_claim(
		    c->st, repo->id, c->cfg.worker_id, store_now_ms(),
		    (int64_t)c->cfg.lease_ms, &got, &holder, err);
		if (r < 0)
			return r;
		if (got)
			return 0;
		*waited = true;
		if (holder && strcmp(holder, said)) {
			claim_wait_said(c, waiter, repo, holder);
			snprintf(said, sizeof(said), "%s", holder);
		}
		pthread_mutex_lock(&c->builds.mu);
		bool cancelled =
		    json_object_get(c->builds.cancels, repo->id) != NULL;
		bool stop = c->builds.stopping || cancelled ||
			    waiter_stopped(c, waiter);
		if (!stop) {
			struct timespec until;
			control_deadline(&until, BUILD_CLAIM_POLL_MS);
			pthread_cond_timedwait(&c->builds.cv, &c->builds.mu,
					       &until);
			cancelled = json_object_get(c->builds.cancels,
						    repo->id) != NULL;
			stop = c->builds.stopping || cancelled ||
			       waiter_stopped(c, waiter);
		}
		bool stopping = c->builds.stopping;
		pthread_mutex_unlock(&c->builds.mu);
		if (stop)
			return wr_error_set(
			    err, ECANCELED, "%s",
			    stopping	? "server stopping"
			    : cancelled ? "build cancelled"
					: "stopped while waiting for the "
					  "snapshot build");
	}
}

static void build_claim_release(struct control *c,
				const struct store_repo *repo)
{
	struct wr_error *err = NULL;
	/* a release that fails leaves the claim to run out */
	if (c->st->ops->build_release(c->st, repo->id, c->cfg.worker_id, &err) <
	    0)
		wr_log(WR_LOG_WARN, "builds",
		       "repository %s: release the build claim: %s",
		       repo->name ? repo->name : repo->id,
		       err && err->msg ? err->msg : "failed");
	wr_error_free(err);
}

static int snapshot_ensure(struct control *c, const struct store_repo *repo,
			   bool refresh, const struct control_staleness *policy,
			   const struct run *waiter, json_t **report,
			   struct store_snapshot *out, struct wr_error **err)
{
	struct store *st = c->st;
	if (!refresh && st->ops->snapshot_latest(st, repo->id, out, NULL) == 0)
		return 0;
	/* one build per repository at a time; who waited for one takes its
	 * result */
	pthread_mutex_lock(&c->builds.mu);
	bool waited = false;
	/* a session waiting for another's build: its cancel, expiry or the
	 * server's stop wakes it (control_cancel broadcasts builds.cv) */
	if (waiter)
		waiting_add(c, repo->id, 1);
	while (building(c, repo->id) && !c->builds.stopping &&
	       !waiter_stopped(c, waiter)) {
		waited = true;
		pthread_cond_wait(&c->builds.cv, &c->builds.mu);
	}
	if (waiter)
		waiting_add(c, repo->id, -1);
	if (c->builds.stopping || waiter_stopped(c, waiter)) {
		pthread_mutex_unlock(&c->builds.mu);
		return wr_error_set(err, ECANCELED,
				    c->builds.stopping ? "server stopping"
						: "stopped while waiting for the "
						  "snapshot build");
	}
	if (waited && !refresh) {
		pthread_mutex_unlock(&c->builds.mu);
		if (st->ops->snapshot_latest(st, repo->id, out, NULL) == 0)
			return 0;
		pthread_mutex_lock(&c->builds.mu);
	}
	char **b = wr_realloc(c->builds.building,
			      (c->builds.n_building + 1) * sizeof(*b));
	if (!b) {
		pthread_mutex_unlock(&c->builds.mu);
		return wr_error_set(err, ENOMEM, "snapshot");
	}
	c->builds.building = b;
	c->builds.building[c->builds.n_building++] = (char *)repo->id;
	pthread_mutex_unlock(&c->builds.mu);

	/* among workers, the store's claim first: another worker's build
	 * (waited for, or done just before the claim) serves this one's
	 * sessions, pulled from the registry (control_snapshot_local); a
	 * refresh goes on, and its pull of the store's newest snapshot
	 * (refresh_pull_newest) keeps that one fresh instead of building */
	int r = 0;
	bool claimed = false, served = false, ran = false;
	if (control_is_worker(c)) {
		bool waited_other = false;
		r = build_claim_take(c, repo, waiter, &waited_other, err);
		claimed = r == 0;
		if (claimed && !refresh &&
		    st->ops->snapshot_latest(st, repo->id, out, NULL) == 0)
			served = true;
	}
	if (r == 0 && !served) {
		ran = true;
		control_build_state_set(c, repo->id, "building", NULL, NULL);
		r = snapshot_refresh(c, repo, policy, waiter, report, out, err);
	}
	/* on every way out: a worker that died holding it loses it when
	 * its lease runs out */
	if (claimed)
		build_claim_release(c, repo);
	pthread_mutex_lock(&c->builds.mu);
	bool stopping = c->builds.stopping;
	/* cancelled (control_build_cancel): failed, saying by whom */
	_cleanup_free_ char *cancelled_by = NULL;
	json_t *by = json_object_get(c->builds.cancels, repo->id);
	if (by) {
		cancelled_by = wr_asprintf("cancelled by %s",
					   json_string_value(by)
					       ? json_string_value(by)
					       : "someone");
		json_object_del(c->builds.cancels, repo->id);
	}
	pthread_mutex_unlock(&c->builds.mu);
	if (r < 0 && cancelled_by)
		control_build_state_set(c, repo->id, "failed", cancelled_by,
					NULL);
	else if (!ran)
		; /* another worker's build, or none: no state of this one */
	else if (r < 0 && stopping)
		/* cut short by the server's stop, not failed: queued again at
		 * the next start (control.c, refresh_requeue) */
		control_build_state_set(c, repo->id, "queued", NULL, NULL);
	else if (r < 0)
		control_build_state_set(c, repo->id, "failed",
					err && *err && (*err)->msg
					    ? (*err)->msg
					    : "the build failed",
					NULL);
	else {
		control_build_state_set(c, repo->id, "ready", NULL, out->id);
		/* the cache's cap, now that it may hold one more */
		layer_cache_trim(c, out->id);
	}

	pthread_mutex_lock(&c->builds.mu);
	for (size_t i = 0; i < c->builds.n_building; i++)
		if (c->builds.building[i] == repo->id) {
			c->builds.building[i] =
			    c->builds.building[--c->builds.n_building];
			break;
		}
	pthread_cond_broadcast(&c->builds.cv);
	pthread_mutex_unlock(&c->builds.mu);
	return r;
}

int control_snapshot_ensure(struct control *c, const struct store_repo *repo,
			    bool refresh, struct store_snapshot *out,
			    struct wr_error **err)
{
	return snapshot_ensure(c, repo, refresh, NULL, NULL, NULL, out, err);
}

/* ---- a snapshot pulled before a session starts -------------------------- */

static bool snapshot_here(const struct control *c, const char *id)
{
	_cleanup_free_ char *path =
	    wr_asprintf("%s/snapshots/%s.json", c->data_dir, id);
	return path && access(path, F_OK) == 0;
}

bool control_snapshot_cached(struct control *c, const char *repo_id)
{
	struct store_snapshot newest;
	if (c->st->ops->snapshot_latest(c->st, repo_id, &newest, NULL) < 0)
		return true; /* none anywhere: whoever runs it builds it */
	bool here = snapshot_here(c, newest.id);
	store_snapshot_clear(&newest);
	return here;
}

/* under builds.mu */
static ssize_t pulling_index(const struct control *c, const char *id)
{
	for (size_t i = 0; i < c->builds.n_pulling; i++)
		if (!strcmp(c->builds.pulling[i], id))
			return (ssize_t)i;
	return -1;
}

/* `warren snapshot pull ID` into the data directory; its answer (the
 * --json object) into *answer. */
static int snapshot_pull(struct control *c, const char *id, json_t **answer,
			 struct wr_error **err)
{
	char *argv[] = {(char *)c->warren_bin,
			"snapshot",
			"pull",
			(char *)id,
			"--data",
			(char *)c->data_dir,
			"--blobs",
			(char *)c->cfg.blobs_file,
			"--json",
			NULL};
	pthread_mutex_lock(&c->builds.mu);
	pid_t *slot = c->builds.stopping ? NULL : build_slot(c);
	if (slot) {
		*slot = -1; /* reserved until the child's pid is known */
		/* no repository: a build's cancel never stops a pull */
		c->builds.pid_repo[slot - c->builds.pids][0] = '\0';
		c->builds.owner[slot - c->builds.pids] = NULL;
	}
	bool stopping = c->builds.stopping;
	pthread_mutex_unlock(&c->builds.mu);
	if (stopping)
		return wr_error_set(err, ECANCELED, "server stopping");
	_cleanup_free_ char *output = NULL, *errors = NULL;
	int status = proc_run_tracked(argv, 64 << 10, -1, &output, &errors,
				      slot, &c->builds.mu, err);
	if (slot) {
		pthread_mutex_lock(&c->builds.mu);
		*slot = 0;
		pthread_mutex_unlock(&c->builds.mu);
	}
	if (status < 0)
		return status;
	if (status != 0) {
		/* its one error line ("warren snapshot pull: ...") */
		char *e = errors ? errors : "";
		size_t len = strlen(e);
		while (len && (e[len - 1] == '\n' || e[len - 1] == '\r'))
			e[--len] = '\0';
		char *last = strrchr(e, '\n');
		const char *line = last ? last + 1 : e;
		const char *prefix = "warren snapshot pull: ";
		if (!strncmp(line, prefix, strlen(prefix)))
			line += strlen(prefix);
		if (!line[0])
			return wr_error_set(err, EIO, "exit status %d", status);
		return wr_error_set(err, EIO, "%s", line);
	}
	json_t *a = output ? json_loads(output, 0, NULL) : NULL;
	if (!json_is_object(a)) {
		json_decref(a);
		return wr_error_set(err, EPROTO, "no answer");
	}
	*answer = a;
	return 0;
}

int control_snapshot_local(struct control *c, const char *snapshot_id,
			   const struct run *waiter, json_t **pull,
			   struct wr_error **err)
{
	*pull = NULL;
	layer_cache_used(c, snapshot_id);
	if (snapshot_here(c, snapshot_id))
		return 0;
	if (!c->cfg.blobs_file)
		return wr_error_set(err, ENOENT,
				    "snapshot %s is not in the data directory, "
				    "and the server has no registry (blobs) to "
				    "pull it from",
				    snapshot_id);
	double t0 = mono_ms();
	bool waited = false;
	pthread_mutex_lock(&c->builds.mu);
	for (;;) {
		if (c->builds.stopping || waiter_stopped(c, waiter)) {
			bool stopping = c->builds.stopping;
			pthread_mutex_unlock(&c->builds.mu);
			if (stopping)
				return wr_error_set(err, ECANCELED,
						    "server stopping");
			return wr_error_set(err, ECANCELED,
					    "stopped while waiting for the "
					    "pull of snapshot %s",
					    snapshot_id);
		}
		if (pulling_index(c, snapshot_id) < 0)
			break;
		/* another session's runner pulls it: its end wakes us */
		waited = true;
		pthread_cond_wait(&c->builds.cv, &c->builds.mu);
	}
	/* the pull waited for may have brought it (or failed: then this
	 * one tries again) */
	if (waited && snapshot_here(c, snapshot_id)) {
		pthread_mutex_unlock(&c->builds.mu);
		*pull = json_pack("{s:f, s:b}", "ms", mono_ms() - t0, "waited",
				  1);
		return 0;
	}
	char **grown = wr_realloc(c->builds.pulling,
				  (c->builds.n_pulling + 1) * sizeof(*grown));
	char *mine = wr_strdup(snapshot_id);
	if (grown)
		c->builds.pulling = grown;
	if (!grown || !mine) {
		pthread_mutex_unlock(&c->builds.mu);
		free(mine);
		return wr_error_set(err, ENOMEM, "pull");
	}
	c->builds.pulling[c->builds.n_pulling++] = mine;
	pthread_mutex_unlock(&c->builds.mu);

	json_t *answer = NULL;
	int r = snapshot_pull(c, snapshot_id, &answer, err);
	double ms = mono_ms() - t0;

	pthread_mutex_lock(&c->builds.mu);
	ssize_t i = pulling_index(c, snapshot_id);
	if (i >= 0) {
		free(c->builds.pulling[i]);
		c->builds.pulling[i] =
		    c->builds.pulling[--c->builds.n_pulling];
	}
	pthread_cond_broadcast(&c->builds.cv);
	pthread_mutex_unlock(&c->builds.mu);
	if (r < 0) {
		wr_log(WR_LOG_WARN, "sessions",
		       "pull of snapshot %.12s from the registry failed: %s",
		       snapshot_id, err && *err && (*err)->msg ? (*err)->msg
							       : "failed");
		return wr_error_wrap(err,
				     "snapshot %s is not in the data "
				     "directory; its pull from the registry "
				     "failed",
				     snapshot_id);
	}
	wr_log(WR_LOG_INFO, "sessions",
	       "pulled snapshot %.12s from the registry in %.0f ms",
	       snapshot_id, ms);
	/* the cache's cap, now that it holds one more */
	layer_cache_trim(c, snapshot_id);
	*pull = json_pack(
	    "{s:f, s:b, s:O?, s:O?}", "ms", ms, "waited", waited,
	    "layers_fetched", json_object_get(answer, "layers_fetched"),
	    "bytes_fetched", json_object_get(answer, "bytes_fetched"));
	json_decref(answer);
	return 0;
}

/* The repository's policy, else the server's default, else NULL. */
static const struct control_staleness *
staleness_policy(const struct control *c, const struct store_repo *repo)
{
	const struct control_staleness *fallback = NULL;
	for (size_t i = 0; i < c->cfg.n_staleness; i++) {
		const struct control_staleness *p = &c->cfg.staleness[i];
		if (!p->repo_name)
			fallback = p;
		else if (repo->name && strcmp(p->repo_name, repo->name) == 0)
			return p;
	}
	return fallback;
}

int control_snapshot_for_session(struct control *c,
				 const struct store_repo *repo,
				 const struct run *waiter,
				 struct store_snapshot *out, json_t **decision,
				 json_t **pull, struct wr_error **err)
{
	*decision = NULL;
	if (pull)
		*pull = NULL;
	const struct control_staleness *policy = staleness_policy(c, repo);
	if (!policy || (policy->max_age_ms <= 0 && policy->max_behind <= 0))
		return snapshot_ensure(c, repo, false, NULL, waiter, NULL, out,
				       err);
	/* none at all: whoever builds the first one (this refresh, or the
	 * one the repository's registration queued), the session waits */
	struct store_snapshot newest = {0};
	bool had_none =
	    c->st->ops->snapshot_latest(c->st, repo->id, &newest, NULL) < 0;
	/* the refresh measures the newest snapshot of the data directory:
	 * one built elsewhere is pulled first, else it would build again
	 * what the registry has (a failed pull: it builds) */
	if (!had_none && pull && c->cfg.blobs_file) {
		struct wr_error *perr = NULL;
		if (control_snapshot_local(c, newest.id, waiter, pull, &perr) <
		    0) {
			if (waiter_stopped(c, waiter)) {
				store_snapshot_clear(&newest);
				if (err && !*err)
					*err = perr;
				else
					wr_error_free(perr);
				return -ECANCELED;
			}
			wr_error_free(perr);
		}
	}
	store_snapshot_clear(&newest);
	/* the refresh fetches the mirror, measures the newest snapshot
	 * against the ref, and builds only when it is beyond the policy */
	json_t *report = NULL;
	int r = snapshot_ensure(c, repo, true, policy, waiter, &report, out,
				err);
	if (r < 0) {
		json_decref(report);
		if (pull) {
			json_decref(*pull);
			*pull = NULL;
		}
		return r;
	}
	json_t *d = report ? report : json_object();
	if (had_none) {
		json_object_set_new(d, "newest", json_string("none"));
		json_object_set_new(d, "waited", json_true());
	}
	json_object_set_new(d, "max_age_ms",
			    json_integer(policy->max_age_ms));
	json_object_set_new(d, "max_behind", json_integer(policy->max_behind));
	*decision = d;
	return 0;
}

/* The spec's verify commands as a JSON array of argv arrays. */
static json_t *verify_json(const struct spec *spec)
{
	json_t *v = json_array();
	for (size_t i = 0; i < spec->n_verify; i++) {
		const struct spec_command *cmd = &spec->verify[i];
		json_t *argv = json_array();
		if (cmd->shell) {
			json_array_append_new(argv, json_string("/bin/sh"));
			json_array_append_new(argv, json_string("-c"));
			json_array_append_new(argv, json_string(cmd->shell));
		} else {
			for (size_t k = 0; cmd->argv && cmd->argv[k]; k++)
				json_array_append_new(
				    argv, json_string(cmd->argv[k]));
		}
		json_array_append_new(v, argv);
	}
	return v;
}

void control_spec_info(struct control *c, const char *snapshot_id,
		       struct control_limits *out, uint64_t *refresh_ms,
		       json_t **verify, json_t **artifacts)
{
	memset(out, 0, sizeof(*out));
	*refresh_ms = 0;
	if (verify)
		*verify = NULL;
	if (artifacts)
		*artifacts = NULL;
	pthread_mutex_lock(&c->spec_mu);
	for (size_t i = 0; i < c->n_spec_cache; i++)
		if (!strcmp(c->spec_cache[i].snapshot_id, snapshot_id)) {
			*out = c->spec_cache[i].limits;
			*refresh_ms = c->spec_cache[i].refresh_ms;
			if (verify)
				*verify = json_incref(c->spec_cache[i].verify);
			if (artifacts)
				*artifacts =
				    json_incref(c->spec_cache[i].artifacts);
			pthread_mutex_unlock(&c->spec_mu);
			return;
		}
	pthread_mutex_unlock(&c->spec_mu);
	_cleanup_free_ char *path =
	    wr_asprintf("%s/snapshots/%s.json", c->data_dir, snapshot_id);
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (!path || wr_read_file(path, 1 << 20, &text, &len) < 0)
		return;
	json_t *m = json_loadb(text, len, 0, NULL);
	const char *git_origin = json_string_value(
	    json_object_get(json_object_get(m, "extra"), "git_origin"));
	bool origin_set = git_origin && !strcmp(git_origin, "broker");
	const char *repo = json_string_value(json_object_get(m, "repo"));
	const char *commit = json_string_value(json_object_get(m, "commit"));
	_cleanup_free_ char *mirror =
	    repo ? git_mirror_path(c->data_dir, repo, NULL) : NULL;
	struct spec *spec = NULL;
	struct wr_error *err = NULL;
	json_t *verify_cmds = NULL, *artifact_paths = NULL;
	json_t *egress_hosts = NULL;
	int backend = -1;
	if (mirror && commit &&
	    snap_load_spec(mirror, commit, &spec, &err) == 0) {
		if (spec->backend_set)
			backend = (int)spec->backend;
		out->millicpus = spec->limits.millicpus;
		out->memory_bytes = spec->limits.memory_bytes;
		out->pids = spec->limits.pids;
		out->disk_bytes = spec->limits.disk_bytes;
		out->lifetime_ms = spec->limits.lifetime_ms;
		out->idle_ms = spec->limits.idle_ms;
		*refresh_ms = spec->refresh_ms;
		verify_cmds = verify_json(spec);
		artifact_paths = json_array();
		for (size_t i = 0; i < spec->n_artifacts; i++)
			json_array_append_new(artifact_paths,
					      json_string(spec->artifacts[i]));
		egress_hosts = json_array();
		for (size_t i = 0; i < spec->n_egress; i++)
			json_array_append_new(egress_hosts,
					      json_string(spec->egress[i]));
		spec_free(spec);
	} else if (err) {
		wr_log(WR_LOG_WARN, "builds", "spec of snapshot %.12s: %s",
		       snapshot_id, err->msg ? err->msg : "failed");
	}
	wr_error_free(err);
	json_decref(m);
	pthread_mutex_lock(&c->spec_mu);
	size_t slot = c->n_spec_cache < 64 ? c->n_spec_cache++
					   : c->next_spec_cache++ % 64;
	snprintf(c->spec_cache[slot].snapshot_id,
		 sizeof(c->spec_cache[slot].snapshot_id), "%s", snapshot_id);
	c->spec_cache[slot].limits = *out;
	c->spec_cache[slot].refresh_ms = *refresh_ms;
	c->spec_cache[slot].origin_set = origin_set;
	c->spec_cache[slot].backend = backend;
	json_decref(c->spec_cache[slot].verify);
	c->spec_cache[slot].verify = verify_cmds ? verify_cmds : json_array();
	if (verify)
		*verify = json_incref(c->spec_cache[slot].verify);
	json_decref(c->spec_cache[slot].artifacts);
	c->spec_cache[slot].artifacts =
	    artifact_paths ? artifact_paths : json_array();
	json_decref(c->spec_cache[slot].egress);
	c->spec_cache[slot].egress = egress_hosts ? egress_hosts : json_array();
	if (artifacts)
		*artifacts = json_incref(c->spec_cache[slot].artifacts);
	pthread_mutex_unlock(&c->spec_mu);
}

enum sandbox_backend control_spec_backend(struct control *c,
					  const char *snapshot_id)
{
	enum sandbox_backend b = c->cfg.backend;
	pthread_mutex_lock(&c->spec_mu);
	for (size_t i = 0; i < c->n_spec_cache; i++)
		if (!strcmp(c->spec_cache[i].snapshot_id, snapshot_id) &&
		    c->spec_cache[i].backend >= 0)
			b = (enum sandbox_backend)c->spec_cache[i].backend;
	pthread_mutex_unlock(&c->spec_mu);
	return b;
}

bool control_snapshot_origin_set(struct control *c, const char *snapshot_id)
{
	bool set = false;
	pthread_mutex_lock(&c->spec_mu);
	for (size_t i = 0; i < c->n_spec_cache; i++)
		if (!strcmp(c->spec_cache[i].snapshot_id, snapshot_id))
			set = c->spec_cache[i].origin_set;
	pthread_mutex_unlock(&c->spec_mu);
	return set;
}

int control_build_cancel(struct control *c, const char *id_or_name,
			 const char *by, json_t **build, struct wr_error **err)
{
	struct store_repo repo;
	int r = c->st->ops->repo_get(c->st, id_or_name, &repo, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *why =
	    wr_asprintf("cancelled by %s", by && *by ? by : "someone");
	if (!why) {
		store_repo_clear(&repo);
		return wr_error_set(err, ENOMEM, "cancel");
	}
	pthread_mutex_lock(&c->builds.mu);
	/* a refresh waiting in the queue is taken out of it */
	bool queued = false;
	struct wr_error *qerr = NULL;
	if (c->st->ops->build_unqueue(c->st, repo.id, &queued, &qerr) < 0)
		wr_log(WR_LOG_WARN, "builds", "repository %s: %s", repo.name,
		       qerr && qerr->msg ? qerr->msg : "unqueue");
	wr_error_free(qerr);
	bool running = building(c, repo.id);
	if (running) {
		if (!c->builds.cancels)
			c->builds.cancels = json_object();
		json_object_set_new(c->builds.cancels, repo.id,
				    json_string(by && *by ? by : "someone"));
	}
	pthread_mutex_unlock(&c->builds.mu);
	if (!running && !queued) {
		store_repo_clear(&repo);
		return wr_error_set(err, EALREADY,
				    "no build of %s is running or queued",
				    id_or_name);
	}
	if (!running) {
		control_build_state_set(c, repo.id, "failed", why, NULL);
	} else {
		/* SIGTERM to its `warren snapshot refresh`, which takes its
		 * sandbox down as at the server's stop (build_stop.sh); sent
		 * again while the build's pid is not known yet */
		for (int tries = 0; tries < 300; tries++) {
			pthread_mutex_lock(&c->builds.mu);
			bool still = building(c, repo.id);
			for (size_t i = 0;
			     still && i < sizeof(c->builds.pids) / sizeof(pid_t);
			     i++)
				if (c->builds.pids[i] > 0 &&
				    !strcmp(c->builds.pid_repo[i], repo.id))
					kill(c->builds.pids[i], SIGTERM);
			pthread_mutex_unlock(&c->builds.mu);
			if (!still)
				break;
			usleep(50 * 1000);
		}
	}
	if (build)
		*build = control_build_state(c, repo.id);
	store_repo_clear(&repo);
	return 0;
}

/* session.c - the start of a session restored from a snapshot (session.h). */
#include "snapshot/session.h"

#include "sandbox/sandbox.h"
#include "snapshot/build.h"
#include "snapshot/git.h"
#include "snapshot/script.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SESSION_OUTPUT_MAX (4 << 20)

bool snap_session_needed(const struct snap_manifest *m, const char *ref)
{
	if (ref)
		return true;
	json_t *work =
	    m->extra ? json_object_get(m->extra, "session_work") : NULL;
	/* manifests without the field: assume work, to be safe */
	return !work || json_is_true(work);
}

char *snap_session_mirror(const char *data_dir, const struct snap_manifest *m)
{
	if (!m->repo)
		return NULL;
	char *path = git_mirror_path(data_dir, m->repo, NULL);
	struct stat st;
	if (path && stat(path, &st) < 0) {
		free(path);
		return NULL;
	}
	return path;
}

static double wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Did a lockfile change between the snapshot's commit and commit? */
static int lockfiles_changed(const char *mirror, const char *commit,
			     const struct spec *spec,
			     const struct snap_manifest *m, bool *changed,
			     struct wr_error **err)
{
	struct snap_manifest now = {0};
	int r = snap_collect_lockfiles(mirror, commit, spec, &now, err);
	if (r < 0)
		return r;
	*changed = now.n_lockfiles != m->n_lockfiles;
	for (size_t i = 0; !*changed && i < now.n_lockfiles; i++) {
		if (strcmp(now.lockfiles[i].path, m->lockfiles[i].path) ||
		    strcmp(now.lockfiles[i].sha256, m->lockfiles[i].sha256))
			*changed = true;
	}
	for (size_t i = 0; i < now.n_lockfiles; i++)
		free(now.lockfiles[i].path);
	free(now.lockfiles);
	return 0;
}

struct session_args {
	const struct spec *spec;
	const char *commit;
	bool sync, rerun;
};

static void session_body(FILE *f, const void *arg)
{
	const struct session_args *a = arg;
	const struct spec *spec = a->spec;
	const char *commit = a->commit;
	bool sync = a->sync, rerun = a->rerun;
	fputs("set -u\ncd /workspace || exit 1\n", f);
	sh_phase(f, "sync");
	if (sync) {
		fprintf(
		    f,
		    "git fetch -q " MIRROR_IN_SANDBOX " %s && git checkout -q "
		    "--detach %s || { echo \"@@warren-failed sync 1\"; exit "
		    "1; }\n",
		    commit, commit);
	}
	sh_env(f, spec);
	if (rerun)
		sh_hook(f, "updateContentCommand", &spec->update_content);
	sh_phase(f, "hooks");
	sh_hook(f, "postCreateCommand", &spec->post_create);
	sh_hook(f, "postStartCommand", &spec->post_start);
	sh_phase(f, "services");
	sh_services_start(f, spec);
	sh_phase(f, "end");
}

static char *session_script(const struct spec *spec, const char *commit,
			    bool sync, bool rerun)
{
	struct session_args a = {spec, commit, sync, rerun};
	return sh_script(session_body, &a);
}

struct marks {
	char name[8][32];
	long long ns[8];
	size_t n;
	char failed[128];
	int failed_status;
	char why[320]; /* a failure's own words (@@warren-why) */
};

/* Reads the markers out of the script's output; the rest is the tail. */
static void parse_output(char *text, struct marks *mk, char *tail,
			 size_t tail_len)
{
	tail[0] = '\0';
	size_t used = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		if (!strncmp(line, "@@warren-phase ", 15)) {
			if (mk->n < 8 &&
			    sscanf(line + 15, "%31s %lld", mk->name[mk->n],
				   &mk->ns[mk->n]) == 2)
				mk->n++;
		} else if (!strcmp(line, "@@warren-tail-reset")) {
			tail[0] = '\0';
			used = 0;
		} else if (!strncmp(line, "@@warren-why ", 13)) {
			snprintf(mk->why, sizeof(mk->why), "%s", line + 13);
		} else if (!strncmp(line, "@@warren-failed ", 16)) {
			sscanf(line + 16, "%127s %d", mk->failed,
			       &mk->failed_status);
		} else if (strncmp(line, "@@warren-hook ", 14)) {
			size_t l = strlen(line);
			if (l + 6 >= tail_len)
				continue;
			if (used + l + 6 >=
			    tail_len) { /* keep the last lines */
				size_t drop = used + l + 6 - tail_len + 1;
				memmove(tail, tail + drop, used - drop + 1);
				used -= drop;
			}
			used += (size_t)snprintf(tail + used, tail_len - used,
						 "\n    %s", line);
		}
	}
}

static double phase_ms(const struct marks *mk, const char *name)
{
	for (size_t i = 0; i + 1 < mk->n; i++) {
		if (!strcmp(mk->name[i], name))
			return (double)(mk->ns[i + 1] - mk->ns[i]) / 1e6;
	}
	return 0;
}

/* Is ref a full commit id that the repository's mirror holds? */
static bool mirror_has_commit(const char *data_dir, const char *repo,
			      const char *ref)
{
	if (strlen(ref) != 40 || strspn(ref, "0123456789abcdef") != 40)
		return false;
	_cleanup_free_ char *mirror = git_mirror_path(data_dir, repo, NULL);
	_cleanup_free_ char *spec = wr_asprintf("%s^{commit}", ref);
	if (!mirror || !spec)
		return false;
	const char *argv[] = {"-C", mirror, "cat-file", "-e", spec, NULL};
	struct wr_error *ignored = NULL;
	int r = git_run(argv, NULL, 0, &ignored);
	wr_error_free(ignored);
	return r == 0;
}

int snap_session_start(const char *data_dir, const char *sandbox_name,
		       const struct snap_manifest *m, const char *ref,
		       struct snap_session *out, struct wr_error **err)
{
	double t0 = wall_ms();
	memset(out, 0, sizeof(*out));
	snprintf(out->commit, sizeof(out->commit), "%s",
		 m->commit ? m->commit : "");
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	out->age_ms =
	    (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000 - m->created_ms;
	if (!snap_session_needed(m, ref)) {
		out->total_ms = wall_ms() - t0;
		return 0;
	}
	/* a commit id the mirror holds already needs no fetch (Warren's
	 * verification sandbox starts at the session's base that way) */
	_cleanup_free_ char *mirror =
	    ref && !mirror_has_commit(data_dir, m->repo, ref)
		? git_mirror_update(data_dir, m->repo, err)
		: git_mirror_path(data_dir, m->repo, err);
	if (!mirror)
		return -EIO;
	char commit[41];
	int r;
	if (ref) {
		r = git_resolve(mirror, ref, commit, err);
		if (r < 0)
			return r;
	} else {
		snprintf(commit, sizeof(commit), "%s", m->commit);
	}
	bool sync = strcmp(commit, m->commit) != 0;
	if (sync) {
		int behind = git_count_between(mirror, m->commit, commit, err);
		if (behind < 0)
			return behind;
		out->commits_behind = behind;
	}
	struct spec *spec = NULL;
	r = snap_load_spec(mirror, commit, &spec, err);
	if (r < 0)
		return r;
	bool rerun = false;
	if (sync && spec->update_content.kind != SPEC_HOOK_NONE) {
		r = lockfiles_changed(mirror, commit, spec, m, &rerun, err);
		if (r < 0) {
			spec_free(spec);
			return r;
		}
	}
	_cleanup_free_ char *script = session_script(spec, commit, sync, rerun);
	spec_free(spec);
	if (!script)
		return wr_error_set(err, ENOMEM, "session script");

	/* the output goes to a memory file: no pipe to fill up and block */
	_cleanup_close_ int out_fd =
	    memfd_create("warren-session", MFD_CLOEXEC);
	_cleanup_close_ int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (out_fd < 0 || null_fd < 0)
		return wr_error_set(err, errno, "session output");
	char *argv[] = {"sh", "-c", script, NULL};
	struct sandbox_exec_request req = {
	    .argv = argv,
	    .cwd = "/workspace",
	    .stdio = {null_fd, out_fd, out_fd},
	};
	struct wr_error *exec_err = NULL;
	int code = sandbox_exec(sandbox_name, &req, &exec_err);
	if (code < 0) {
		if (err && !*err)
			*err = exec_err;
		else
			wr_error_free(exec_err);
		return wr_error_wrap(err, "session start");
	}
	wr_error_free(exec_err);
	off_t size = lseek(out_fd, 0, SEEK_END);
	if (size < 0 || size > SESSION_OUTPUT_MAX)
		size = SESSION_OUTPUT_MAX;
	_cleanup_free_ char *text = wr_malloc((size_t)size + 1);
	if (!text)
		return wr_error_set(err, ENOMEM, "session output");
	ssize_t n = pread(out_fd, text, (size_t)size, 0);
	text[n > 0 ? n : 0] = '\0';
	struct marks mk = {0};
	char tail[2048];
	parse_output(text, &mk, tail, sizeof(tail));
	if (code != 0) {
		if (mk.why[0])
			return wr_error_set(err, 0, "session start: %s%s",
					    mk.why, tail);
		if (mk.failed[0])
			return wr_error_set(
			    err, 0,
			    "session start: %s failed with status "
			    "%d%s",
			    mk.failed, mk.failed_status, tail);
		return wr_error_set(err, 0,
				    "session start: exited with status %d%s",
				    code, tail);
	}
	snprintf(out->commit, sizeof(out->commit), "%s", commit);
	out->synced = sync;
	out->hooks_rerun = rerun;
	out->sync_ms = phase_ms(&mk, "sync");
	out->hooks_ms = phase_ms(&mk, "hooks");
	out->services_ms = phase_ms(&mk, "services");
	out->total_ms = wall_ms() - t0;
	return 0;
}

json_t *snap_session_to_json(const struct snap_session *s,
			     const struct snap_manifest *m)
{
	return json_pack(
	    "{s:s, s:s, s:i, s:I, s:b, s:b, s:f, s:f, s:f, s:f}", "snapshot",
	    m->id, "commit", s->commit, "commits_behind", s->commits_behind,
	    "age_ms", (json_int_t)s->age_ms, "synced", s->synced, "hooks_rerun",
	    s->hooks_rerun, "sync_ms", s->sync_ms, "hooks_ms", s->hooks_ms,
	    "services_ms", s->services_ms, "total_ms", s->total_ms);
}

static void update_content_body(FILE *f, const void *arg)
{
	const struct spec *spec = arg;
	fputs("set -u\ncd /workspace || exit 1\n", f);
	sh_env(f, spec);
	sh_hook(f, "updateContentCommand", &spec->update_content);
}

char *snap_update_content_script(const struct spec *spec)
{
	if (spec->update_content.kind == SPEC_HOOK_NONE)
		return NULL;
	return sh_script(update_content_body, spec);
}

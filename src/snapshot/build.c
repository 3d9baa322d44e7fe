/* build.c - building a snapshot (see build.h for the phases). */
#include "snapshot/build.h"

#include "sandbox/request.h"

#include "security/broker.h" /* the sandbox side's constants only */
#include "security/egress.h" /* the same */
#include "security/secrets.h"
#include "snapshot/build_proxy.h"
#include "snapshot/git.h"
#include "snapshot/script.h"
#include "snapshot/spec.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"
#include "util/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef WARREN_VERSION
#define WARREN_VERSION "0.1.0"
#endif

#define SPEC_MAX_BYTES (1 << 20)
#define LOCKFILE_MAX_BYTES (64 << 20)
#define TAIL_LINES 20

char *snap_default_data_dir(void)
{
	const char *home = getenv("WARREN_HOME");
	char cwd[PATH_MAX];
	if (home && *home)
		return home[0] == '/' ? wr_strdup(home)
		       : getcwd(cwd, sizeof(cwd))
			   ? wr_asprintf("%s/%s", cwd, home)
			   : NULL;
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	return wr_asprintf("%s/.warren", cwd);
}

char *snap_data_dir(const char *data)
{
	_cleanup_free_ char *dir =
	    data ? wr_strdup(data) : snap_default_data_dir();
	char real[PATH_MAX];
	if (!dir)
		return NULL;
	if (realpath(dir, real))
		return wr_strdup(real);
	/* not made yet: absolute all the same */
	if (dir[0] != '/' && getcwd(real, sizeof(real)))
		return wr_asprintf("%s/%s", real, dir);
	return TAKE_PTR(dir);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void progress(const struct snap_build_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void progress(const struct snap_build_opts *o, const char *fmt, ...)
{
	if (o->progress_fd < 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vdprintf(o->progress_fd, fmt, ap);
	va_end(ap);
}

static const char sh_prelude[] =
    "set -u\n"
    /* the mirror belongs to another uid: let git read it (kept in the
     * dependencies layer's /root/.gitconfig, for later fetches) */
    "git config --global --get safe.directory >/dev/null 2>&1 || "
    "git config --global --add safe.directory '*'\n";

struct script_args {
	const struct spec *spec;
	const char *commit;
	/* the spec's secrets, when this step's hook gets them (else NULL) */
	const struct secret_set *secrets;
};

static void script_deps_body(FILE *f, const void *arg)
{
	const struct script_args *a = arg;
	const struct spec *spec = a->spec;
	const char *commit = a->commit;
	/* first: the builder writes them before it reads any output */
	sh_secrets_read(f, a->secrets);
	fputs(sh_prelude, f);
	sh_phase(f, "clone");
	fprintf(f,
		"git clone -q --no-checkout " MIRROR_IN_SANDBOX
		" /workspace && "
		"cd /workspace && git checkout -q --detach %s || { echo "
		"\"@@warren-failed clone 1\"; exit 1; }\n",
		commit);
	sh_env(f, spec);
	sh_phase(f, "install");
	sh_hook_secrets(f, "onCreateCommand", &spec->on_create, a->secrets);
	sh_secrets_forget(f, a->secrets);
	sh_phase(f, "end");
}

static char *script_deps(const struct spec *spec, const char *commit,
			 const struct secret_set *secrets)
{
	struct script_args a = {spec, commit, secrets};
	return sh_script(script_deps_body, &a);
}

/* What the hooks left in /workspace, against the snapshot's commit, as
 * "@@warren-built LINE" markers: git status's "?? PATH" lines (untracked
 * files; a wholly untracked directory as "DIR/") and git diff-index's raw
 * lines for the tracked files changed (":MODE MODE OLD NEW M|T|D\tPATH",
 * NEW the blob the build left). Paths stay C-quoted by git (quotePath),
 * so each record is one line; the builder unquotes them.
 *
 * The repository's index is not touched: a copy under /tmp (a tmpfs, not
 * part of the layer) is reset to the commit with read-tree -m, which keeps
 * the copy's stat data so unchanged files are not hashed again. status
 * reads the untracked files against it; add -u then stages the changed
 * tracked files (their blobs go to .git/objects, so a session can read
 * the build's version) and diff-index lists them. Untracked files are not
 * added: hashing node_modules or a build tree would cost time and write
 * every file's blob into the layer. The changed tracked files come
 * first: under the cap they are the records that matter most. At most
 * BUILT_MAX + 1 records of each kind reach the builder. */
#define BUILT_MAX 10000
#define BUILT_HEAD_TEXT "10001" /* BUILT_MAX + 1: enough to see a cut */

static void script_outputs(FILE *f, const char *commit)
{
	fprintf(
	    f,
	    "( cd /workspace || exit 1\n"
	    "unset GIT_DIR GIT_WORK_TREE GIT_COMMON_DIR GIT_OBJECT_DIRECTORY "
	    "GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_INDEX_FILE\n"
	    "w=/tmp/warren-built.$$\n"
	    "cp \"$(git rev-parse --git-path index)\" $w.index 2>/dev/null\n"
	    "export GIT_INDEX_FILE=$w.index\n"
	    "g='git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c "
	    "core.quotePath=true'\n"
	    "{ $g read-tree -m %s 2>/dev/null || $g read-tree %s; } &&\n"
	    "$g status --porcelain=v1 --untracked-files=normal --no-renames "
	    "--ignore-submodules=all >$w.status &&\n"
	    "$g add -u &&\n"
	    "$g diff-index --cached --no-renames --ignore-submodules=all %s "
	    ">$w.diff\n"
	    "rc=$?\n"
	    "if [ $rc = 0 ]; then\n"
	    "head -n " BUILT_HEAD_TEXT " $w.diff | sed 's/^/@@warren-built /'\n"
	    "grep '^?? ' $w.status | head -n " BUILT_HEAD_TEXT
	    " | sed 's/^/@@warren-built /'\n"
	    "fi\n"
	    "rm -f $w.index $w.index.lock $w.status $w.diff\n"
	    "exit $rc ) || { echo \"@@warren-failed outputs 1\"; exit 1; }\n",
	    commit, commit, commit);
}

static void script_repo_body(FILE *f, const void *arg)
{
	const struct script_args *a = arg;
	const struct spec *spec = a->spec;
	const char *commit = a->commit;
	sh_secrets_read(f, a->secrets);
	fputs(sh_prelude, f);
	sh_phase(f, "checkout");
	fprintf(f,
		"cd /workspace || exit 1\n"
		"if [ \"$(git rev-parse HEAD)\" != %s ]; then git fetch "
		"-q " MIRROR_IN_SANDBOX
		" %s && git checkout -q --detach %s || { echo "
		"\"@@warren-failed checkout 1\"; exit 1; }; fi\n",
		commit, commit, commit);
	sh_env(f, spec);
	sh_phase(f, "build");
	sh_hook_secrets(f, "updateContentCommand", &spec->update_content,
			a->secrets);
	/* services run without them */
	sh_secrets_forget(f, a->secrets);
	sh_phase(f, "services");
	sh_services_start(f, spec);
	sh_services_stop(f, spec);
	sh_phase(f, "outputs");
	script_outputs(f, commit);
	/* in a session, git reaches the remote through the credential
	 * broker (security/broker.h): origin points there, set once here
	 * rather than at every session start (the build's own hooks, above,
	 * still had the mirror) */
	fputs("cd /workspace && git config protocol.ext.allow always && "
	      "git remote set-url origin '" BROKER_REMOTE_URL "' || { echo "
	      "\"@@warren-failed origin 1\"; exit 1; }\n",
	      f);
	sh_phase(f, "end");
}

static char *script_repo(const struct spec *spec, const char *commit,
			 const struct secret_set *secrets)
{
	struct script_args a = {spec, commit, secrets};
	return sh_script(script_repo_body, &a);
}

/* ---- running a build step in a sandbox ----------------------------------- */

#define STEP_LINE_MAX (64u << 10) /* longer lines are cut */

struct phase_times {
	char name[32];
	long long start_ns;
};

/* What the build left in /workspace: the build step's @@warren-built
 * records, as the manifest's extra.build_output keeps them. */
struct built_output {
	json_t *untracked; /* paths; a wholly untracked directory ends in / */
	json_t *modified;  /* {"path", "blob"}: the blob the build left */
	size_t n;	   /* records kept, at most BUILT_MAX */
	size_t bytes;	   /* about their size in the manifest's JSON */
	bool truncated;	   /* some were left out */
};

/* The manifest is at most 1 MiB (store.c): the records get half. */
#define BUILT_MAX_BYTES (512 * 1024)

struct step_result {
	int exit_code;
	char failed_hook[128];
	int failed_status;
	char current_hook[128]; /* the last hook started */
	char why[320];		/* a failure's own words (@@warren-why) */
	uint64_t hung_ms;	/* stopped after printing nothing this long */
	char *tail[TAIL_LINES]; /* last lines of output, oldest first */
	size_t n_tail;
	struct phase_times marks[16];
	size_t n_marks;
	struct built_output built;
};

static void step_result_clear(struct step_result *r)
{
	for (size_t i = 0; i < r->n_tail; i++)
		free(r->tail[i]);
	r->n_tail = 0;
	json_decref(r->built.untracked);
	json_decref(r->built.modified);
	memset(&r->built, 0, sizeof(r->built));
}

static bool is_hex40(const char *s)
{
	size_t i = 0;
	for (; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return i == 40;
}

/* About the room a string takes in the manifest (quoted, escaped). */
static size_t json_text_len(const char *s)
{
	size_t n = 4; /* quotes, comma, newline */
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		n += *p < 0x20 ? 6 : (*p == '"' || *p == '\\') ? 2 : 1;
	return n;
}

/* One record: "?? PATH" (git status) or ":MODE MODE OLD NEW X\tPATH" (git
 * diff-index, raw). One that cannot be kept (the caps, a malformed line,
 * a path that is not UTF-8 and so no JSON string) sets truncated: the
 * lists are then known to be incomplete. */
static void built_add(struct built_output *b, const char *rec)
{
	_cleanup_free_ char *path = NULL;
	char blob[65] = "";
	const char *quoted = NULL;
	if (!strncmp(rec, "?? ", 3)) {
		quoted = rec + 3;
	} else if (rec[0] == ':') {
		const char *tab = strchr(rec, '\t');
		char status = 0;
		if (tab &&
		    sscanf(rec, ":%*o %*o %*64s %64s %c", blob, &status) == 2 &&
		    is_hex40(blob) &&
		    (status == 'M' || status == 'T' || status == 'D'))
			quoted = tab + 1;
	}
	if (b->n >= BUILT_MAX || !quoted || !(path = git_unquote_path(quoted)) ||
	    !path[0]) {
		b->truncated = true;
		return;
	}
	size_t bytes = json_text_len(path) + (blob[0] ? 64 : 0);
	if (b->bytes + bytes > BUILT_MAX_BYTES) {
		b->truncated = true;
		return;
	}
	if (!b->untracked)
		b->untracked = json_array();
	if (!b->modified)
		b->modified = json_array();
	json_t *rec_json =
	    blob[0] ? json_pack("{s:s, s:s}", "path", path, "blob", blob)
		    : json_string(path);
	if (!rec_json || !b->untracked || !b->modified ||
	    json_array_append_new(blob[0] ? b->modified : b->untracked,
				  rec_json) < 0) {
		b->truncated = true;
		return;
	}
	b->n++;
	b->bytes += bytes;
}

static void keep_tail(struct step_result *r, const char *line)
{
	char *copy = wr_strdup(line);
	if (!copy)
		return;
	if (r->n_tail == TAIL_LINES) {
		free(r->tail[0]);
		memmove(r->tail, r->tail + 1,
			(TAIL_LINES - 1) * sizeof(char *));
		r->n_tail--;
	}
	r->tail[r->n_tail++] = copy;
}

static void handle_line(const struct snap_build_opts *o, const char *label,
			char *line, int log_fd,
			const struct secret_set *secrets, struct step_result *r)
{
	/* a hook that prints a secret does not put it in the log */
	secrets_redact(line, secrets);
	dprintf(log_fd, "%s\n", line);
	if (!strncmp(line, "@@warren-phase ", 15)) {
		if (r->n_marks < 16 &&
		    sscanf(line + 15, "%31s %lld", r->marks[r->n_marks].name,
			   &r->marks[r->n_marks].start_ns) == 2) {
			r->n_marks++;
			if (strcmp(r->marks[r->n_marks - 1].name, "end"))
				progress(o, "==> %s\n",
					 r->marks[r->n_marks - 1].name);
		}
		return;
	}
	if (!strcmp(line, "@@warren-tail-reset")) {
		for (size_t i = 0; i < r->n_tail; i++)
			free(r->tail[i]);
		r->n_tail = 0;
		return;
	}
	if (!strncmp(line, "@@warren-why ", 13)) {
		snprintf(r->why, sizeof(r->why), "%s", line + 13);
		return;
	}
	if (!strncmp(line, "@@warren-failed ", 16)) {
		sscanf(line + 16, "%127s %d", r->failed_hook,
		       &r->failed_status);
		return;
	}
	if (!strncmp(line, "@@warren-built ", 15)) {
		/* the script's records come once its outputs phase began */
		if (r->n_marks &&
		    !strcmp(r->marks[r->n_marks - 1].name, "outputs"))
			built_add(&r->built, line + 15);
		return;
	}
	if (!strncmp(line, "@@warren-hook ", 14)) {
		snprintf(r->current_hook, sizeof(r->current_hook), "%s",
			 line + 14);
		progress(o, "    (%s)\n", line + 14);
		return;
	}
	if (line[0] == '{' && strstr(line, "\"exit_code\"")) {
		json_t *j = json_loads(line, 0, NULL);
		if (j && json_is_integer(json_object_get(j, "exit_code")))
			r->exit_code = (int)json_integer_value(
			    json_object_get(j, "exit_code"));
		json_decref(j);
		return;
	}
	keep_tail(r, line);
	progress(o, "    %s | %s\n", label, line);
}

/* Writes the secrets to the step's stdin, then closes it. The script
 * reads them before it writes anything, so this cannot wait on us reading
 * its output. A step that died early closes the pipe: EPIPE, not SIGPIPE
 * (the warren CLI is single-threaded: the disposition is ours to swap). */
static void feed_secrets(int fd, const struct secret_set *secrets)
{
	size_t len = 0;
	char *payload = sh_secrets_payload(secrets, &len);
	struct sigaction ign = {.sa_handler = SIG_IGN}, old;
	sigemptyset(&ign.sa_mask);
	sigaction(SIGPIPE, &ign, &old);
	for (size_t done = 0; payload && done < len;) {
		ssize_t n = write(fd, payload + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* the step fails on the missing values */
		done += (size_t)n;
	}
	sigaction(SIGPIPE, &old, NULL);
	close(fd);
	secrets_value_free(payload, len);
}

/* The whole environment of the builder's children (a step's `warren
 * sandbox run`, the egress proxy): nothing of ours. */
static const char *const child_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
					NULL};

/* Runs `warren sandbox run --json ARGS -- sh -c SCRIPT`, streaming its
 * output into the log (and the progress fd), keeping a tail for errors.
 * With secrets, the script's stdin is a pipe they are written to: the
 * script is in argv (host /proc/PID/cmdline), the values never are. */
static int run_step(const struct snap_build_opts *o, const char *label,
		    struct sandbox_request *req, const char *script, int log_fd,
		    const struct secret_set *secrets, struct step_result *r,
		    struct wr_error **err)
{
	char *cmd[] = {"sh", "-c", (char *)script, NULL};
	req->argv = cmd;
	req->json = true;
	/* listed under the data directory whose build it is */
	req->data_dir = o->data_dir;
	/* a builder killed (with the server that ran it) takes its step's
	 * sandbox down with it */
	req->die_with_parent = true;
	struct sandbox_cmdline cl;
	int built = sandbox_cmdline_run(o->warren, req, &cl);
	if (built < 0)
		return wr_error_set(err, -built, "%s: command line", label);
	bool feed = secrets && secrets->n > 0;
	/* stdout and stderr one stream, in the order written; PDEATHSIG
	 * until `--die-with-parent` takes over (SIGTERM, which tears the
	 * sandbox down) */
	struct proc_spec spec = {
	    .argv = (const char *const *)cl.argv,
	    .envp = child_env,
	    .in = {feed ? PROC_PIPE : PROC_NULL, -1},
	    .out = {PROC_PIPE, -1},
	    .err = {PROC_STDOUT, -1},
	    .die_with_parent = true,
	};
	struct proc child;
	int sr = proc_start(&spec, &child, err);
	sandbox_cmdline_clear(&cl);
	if (sr < 0)
		return wr_error_wrap(err, "%s", label);
	if (feed)
		feed_secrets(TAKE_FD(child.in_fd), secrets);
	r->exit_code = -1;
	/* Lines as they come; a step that prints nothing for hung_after is
	 * hung (a hook retrying DNS for ever must not hold every other
	 * build): SIGTERM, which `warren sandbox run` turns into the
	 * sandbox's teardown. */
	uint64_t hung_after =
	    o->hung_after_ms ? o->hung_after_ms : SNAP_HUNG_AFTER_MS_DEFAULT;
	char *line = wr_malloc(STEP_LINE_MAX + 1);
	size_t used = 0;
	bool killed = false;
	for (bool open_ = line != NULL; open_;) {
		struct pollfd pfd = {child.out_fd, POLLIN, 0};
		int pr = poll(&pfd, 1,
			      killed ? -1
				     : (int)(hung_after > INT32_MAX ? INT32_MAX
								   : hung_after));
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0) {
			proc_kill(&child, SIGTERM);
			killed = true;
			r->hung_ms = hung_after;
			continue;
		}
		char buf[8192];
		ssize_t got =
		    pr < 0 ? -1 : read(child.out_fd, buf, sizeof(buf));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		for (ssize_t i = 0; i < got; i++) {
			if (buf[i] != '\n' && used < STEP_LINE_MAX) {
				line[used++] = buf[i];
				continue;
			}
			if (buf[i] != '\n')
				continue; /* past the cap: the rest of the line */
			line[used] = '\0';
			handle_line(o, label, line, log_fd, secrets, r);
			used = 0;
		}
	}
	if (line && used) {
		line[used] = '\0';
		handle_line(o, label, line, log_fd, secrets, r);
	}
	if (line && feed)
		sodium_memzero(line, STEP_LINE_MAX + 1);
	free(line);
	/* ours closed first: a step still writing gets EPIPE, not a full
	 * pipe nobody reads */
	proc_close(&child);
	int status = proc_wait(&child);
	if (r->exit_code < 0)
		r->exit_code = status >= 0 ? status : 125;
	return 0;
}

/* The build's egress proxy, for the spec's hosts (egress + buildEgress);
 * none (not running) when it names none: the build has no network. */
static int start_proxy(const struct snap_build_opts *o, const struct spec *spec,
		       int log_fd, struct build_proxy *p, struct wr_error **err)
{
	size_t hosts = spec->n_egress + spec->n_build_egress;
	_cleanup_free_ const char **allow = wr_calloc(hosts + 1, sizeof(char *));
	if (!allow)
		return wr_error_set(err, ENOMEM, "egress");
	for (size_t i = 0; i < spec->n_egress; i++)
		allow[i] = spec->egress[i];
	for (size_t i = 0; i < spec->n_build_egress; i++)
		allow[spec->n_egress + i] = spec->build_egress[i];
	struct build_proxy_opts po = {
	    .warren = o->warren,
	    .data_dir = o->data_dir,
	    .egress_config = o->egress_config,
	    .allow = allow,
	    .n_allow = hosts,
	    .log_fd = log_fd,
	};
	int r = build_proxy_start(&po, p, err);
	if (r == 0 && p->running)
		progress(o, "    egress %zu host%s through the build's proxy\n",
			 hosts, hosts == 1 ? "" : "s");
	return r;
}

static int step_error(const char *label, const char *log_path,
		      const struct step_result *r, struct wr_error **err)
{
	char tail[4096] = "";
	size_t used = 0;
	for (size_t i = 0; i < r->n_tail && used < sizeof(tail) - 2; i++)
		used += (size_t)snprintf(tail + used, sizeof(tail) - used,
					 "\n    %s", r->tail[i]);
	if (r->hung_ms)
		return wr_error_set(
		    err, 0,
		    "%s: hook %s printed nothing for %llu s: stopped as hung "
		    "(log: %s)%s",
		    label, r->current_hook[0] ? r->current_hook : "?",
		    (unsigned long long)(r->hung_ms / 1000), log_path, tail);
	if (r->why[0])
		return wr_error_set(err, 0, "%s: %s (log: %s)%s", label, r->why,
				    log_path, tail);
	if (r->failed_hook[0])
		return wr_error_set(
		    err, 0, "%s: hook %s failed with status %d (log: %s)%s",
		    label, r->failed_hook, r->failed_status, log_path, tail);
	return wr_error_set(err, 0,
			    "%s: sandbox exited with status %d (log: %s)%s",
			    label, r->exit_code, log_path, tail);
}

static void add_timing(struct snap_manifest *m, const char *phase, double ms)
{
	struct snap_timing *grown =
	    wr_realloc(m->timings, (m->n_timings + 1) * sizeof(*grown));
	if (!grown)
		return;
	m->timings = grown;
	m->timings[m->n_timings].phase = wr_strdup(phase);
	m->timings[m->n_timings].ms = ms;
	if (m->timings[m->n_timings].phase)
		m->n_timings++;
}

/* Phase durations from the script's markers (ns timestamps inside). */
static void add_marked_timings(struct snap_manifest *m,
			       const struct step_result *r)
{
	for (size_t i = 0; i + 1 < r->n_marks; i++) {
		if (!strcmp(r->marks[i].name, "checkout"))
			continue; /* part of build */
		double ms =
		    (double)(r->marks[i + 1].start_ns - r->marks[i].start_ns) /
		    1e6;
		add_timing(m, r->marks[i].name, ms);
	}
}

/* extra.build_output: {"untracked": [...], "modified": [{"path", "blob"}],
 * "truncated": bool}; NULL when out of memory. */
static json_t *built_json(const struct built_output *b)
{
	json_t *untracked =
	    b->untracked ? json_incref(b->untracked) : json_array();
	json_t *modified =
	    b->modified ? json_incref(b->modified) : json_array();
	return json_pack("{s:o, s:o, s:b}", "untracked", untracked, "modified",
			 modified, "truncated", b->truncated);
}

#define BUILT_WARN_NAMES 10

static const char built_truncated[] =
    "warning: the build's outputs are recorded in part (more than 10000 "
    "paths, more than 512 KiB of them, or a path that is not UTF-8); "
    "sessions may count the rest as their own change";

/* The warning for the tracked files the build changed; NULL when it
 * changed none (or out of memory). A control character in a name is
 * written as '?': the warning is one line. */
static char *built_warning(const struct built_output *b)
{
	size_t n = json_array_size(b->modified);
	if (n == 0)
		return NULL;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	bool npm = false;
	fputs("warning: the build's hooks modified tracked files: ", f);
	for (size_t i = 0; i < n; i++) {
		const char *path = json_string_value(
		    json_object_get(json_array_get(b->modified, i), "path"));
		if (!path)
			continue;
		const char *base = strrchr(path, '/');
		if (!strcmp(base ? base + 1 : path, "package-lock.json"))
			npm = true;
		if (i >= BUILT_WARN_NAMES)
			continue;
		if (i)
			fputs(", ", f);
		for (const unsigned char *p = (const unsigned char *)path; *p;
		     p++)
			fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, f);
	}
	if (n > BUILT_WARN_NAMES)
		fprintf(f, " and %zu more", n - BUILT_WARN_NAMES);
	fputs("; sessions leave these changes out of their result", f);
	if (npm)
		fputs(" (for npm, `npm ci` installs without rewriting the "
		      "lockfile)",
		      f);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

/* ---- lockfiles and the dependencies key ---------------------------------- */

static void hex_digest(const unsigned char *digest, char hex[65])
{
	sodium_bin2hex(hex, 65, digest, crypto_hash_sha256_BYTES);
}

int snap_collect_lockfiles(const char *mirror, const char *commit,
			   const struct spec *spec, struct snap_manifest *m,
			   struct wr_error **err)
{
	char **names = git_root_names(mirror, commit, err);
	if (!names)
		return -EIO;
	size_t n_names = 0;
	while (names[n_names])
		n_names++;
	char **candidates = spec_lockfiles_in(spec, (const char *const *)names);
	git_free_list(names);
	if (!candidates)
		return wr_error_set(err, ENOMEM, "lockfiles");
	int r = 0;
	for (size_t i = 0; candidates[i] && r == 0; i++) {
		_cleanup_free_ char *text = NULL;
		size_t len = 0;
		int g = git_show_file(mirror, commit, candidates[i],
				      LOCKFILE_MAX_BYTES, &text, &len, err);
		if (g == -ENOENT)
			continue; /* listed by the spec, absent here */
		if (g < 0) {
			r = g;
			break;
		}
		struct snap_lockfile *grown = wr_realloc(
		    m->lockfiles, (m->n_lockfiles + 1) * sizeof(*grown));
		if (!grown) {
			r = wr_error_set(err, ENOMEM, "lockfiles");
			break;
		}
		m->lockfiles = grown;
		struct snap_lockfile *lf = &m->lockfiles[m->n_lockfiles];
		unsigned char digest[crypto_hash_sha256_BYTES];
		crypto_hash_sha256(digest, (const unsigned char *)text, len);
		hex_digest(digest, lf->sha256);
		lf->path = wr_strdup(candidates[i]);
		if (!lf->path) {
			r = wr_error_set(err, ENOMEM, "lockfiles");
			break;
		}
		m->n_lockfiles++;
	}
	spec_strv_free(candidates);
	return r;
}

/* sha256 over what decides the dependencies layer: its recipe version,
 * the spec, each lockfile's name and hash. */
static void deps_key(const struct snap_manifest *m, const char *spec_hash,
		     char key[65])
{
	crypto_hash_sha256_state st;
	crypto_hash_sha256_init(&st);
	static const char recipe[] = "warren-deps-layer-v1\n";
	crypto_hash_sha256_update(&st, (const unsigned char *)recipe,
				  sizeof(recipe) - 1);
	crypto_hash_sha256_update(&st, (const unsigned char *)spec_hash,
				  strlen(spec_hash));
	for (size_t i = 0; i < m->n_lockfiles; i++) {
		crypto_hash_sha256_update(
		    &st, (const unsigned char *)m->lockfiles[i].path,
		    strlen(m->lockfiles[i].path) + 1);
		crypto_hash_sha256_update(
		    &st, (const unsigned char *)m->lockfiles[i].sha256, 64);
	}
	unsigned char digest[crypto_hash_sha256_BYTES];
	crypto_hash_sha256_final(&st, digest);
	hex_digest(digest, key);
}

int snap_load_spec(const char *mirror, const char *commit, struct spec **out,
		   struct wr_error **err)
{
	static const char *const paths[] = {".devcontainer/devcontainer.json",
					    "warren.json"};
	for (size_t i = 0; i < sizeof(paths) / sizeof(*paths); i++) {
		_cleanup_free_ char *text = NULL;
		size_t len = 0;
		int r = git_show_file(mirror, commit, paths[i], SPEC_MAX_BYTES,
				      &text, &len, err);
		if (r == -ENOENT)
			continue;
		if (r < 0)
			return r;
		return spec_parse(text, len, paths[i], out, err);
	}
	return spec_defaults(out, err);
}

/* ---- the build ------------------------------------------------------------
 */

/* A layer about to be published must hold no secret its step was given:
 * a token a hook wrote into ~/.npmrc would reach every session. */
static int check_no_secret(const char *label, const char *layer_name,
			   const char *upper, const struct secret_set *secrets,
			   struct wr_error **err)
{
	char *name = NULL, *path = NULL;
	int r = secrets_find_in_tree(upper, secrets, &name, &path, err);
	if (r < 0)
		return wr_error_wrap(err, "%s", label);
	if (r == 0)
		return 0;
	r = wr_error_set(err, 0,
			 "%s: secret %s was left in the %s layer, in %s: a "
			 "secret must not outlive the hook that uses it "
			 "(remove that file before the hook ends, or keep it "
			 "under /tmp); nothing was published",
			 label, name, layer_name, path);
	free(name);
	free(path);
	return r;
}

/* "A, B": the names of the set, for progress lines. */
static void secret_names(const struct secret_set *s, char *buf, size_t size)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < s->n && used < size; i++)
		used += (size_t)snprintf(buf + used, size - used, "%s%s",
					 i ? ", " : "", s->v[i].name);
}

#define BUILD_STEP_TIMEOUT_MS (30 * 60 * 1000)

static void limit_request(const struct snap_build_opts *o,
			  const struct spec *spec, struct sandbox_request *req)
{
	/* a hung hook must not hang the build: the spec's lifetime, else
	 * 30 minutes per step */
	req->timeout_ms = spec->limits.lifetime_ms ? spec->limits.lifetime_ms
						   : BUILD_STEP_TIMEOUT_MS;
	req->memory_bytes = spec->limits.memory_bytes;
	req->pids = spec->limits.pids;
	req->millicpus = spec->limits.millicpus;
	req->backend = spec->backend_set ? spec->backend : o->backend;
}

int snap_build(const struct snap_build_opts *o, struct snap_manifest **out,
	       struct wr_error **err)
{
	if (sodium_init() < 0)
		return wr_error_set(err, EIO, "libsodium init");
	double t_start = now_ms();
	struct snap_store *store = NULL;
	struct spec *spec = NULL;
	struct snap_manifest *m = NULL;
	char *mirror = NULL, *deps_stage = NULL, *repo_stage = NULL;
	char *deps_script = NULL, *repo_script = NULL, *log_path = NULL;
	char *deps_path = NULL, *logs = NULL, *layer = NULL;
	char *warning = NULL;
	int log_fd = -1;
	struct step_result step = {0};
	struct secret_set secrets = {0};
	struct build_proxy proxy = {0};
	int r = snap_store_open(o->data_dir, &store, err);
	if (r < 0)
		goto out;

	progress(o, "==> fetch %s\n", o->repo);
	double t = now_ms();
	mirror = git_mirror_update(o->data_dir, o->repo, err);
	if (!mirror) {
		r = -EIO;
		goto out;
	}
	char commit[41];
	r = git_resolve(mirror, o->ref, commit, err);
	if (r < 0)
		goto out;
	double fetch_ms = now_ms() - t;
	progress(o, "    commit %s\n", commit);
	r = snap_load_spec(mirror, commit, &spec, err);
	if (r < 0) {
		wr_error_wrap(err, "spec at %.12s", commit);
		goto out;
	}
	/* the spec's secrets, from the store in the data directory: every
	 * one must exist before any step runs */
	r = secrets_load(o->data_dir, spec->secrets, spec->n_secrets,
			 o->repo_name, &secrets, err);
	if (r < 0) {
		wr_error_wrap(err, "spec at %.12s (%s)", commit,
			      spec->source ? spec->source : "defaults");
		goto out;
	}
	if (secrets.n) {
		char names[512];
		secret_names(&secrets, names, sizeof(names));
		progress(o,
			 "    secrets %s (onCreateCommand, "
			 "updateContentCommand only)\n",
			 names);
	}
	/* a step gets them only if its hook is there to use them */
	const struct secret_set *deps_secrets =
	    secrets.n && spec->on_create.kind != SPEC_HOOK_NONE ? &secrets
								: NULL;
	const struct secret_set *repo_secrets =
	    secrets.n && spec->update_content.kind != SPEC_HOOK_NONE ? &secrets
								     : NULL;
	m = wr_calloc(1, sizeof(*m));
	if (!m) {
		r = wr_error_set(err, ENOMEM, "build");
		goto out;
	}
	m->repo = git_repo_canonical(o->repo);
	m->ref = wr_strdup(o->ref ? o->ref : "HEAD");
	m->commit = wr_strdup(commit);
	m->spec_hash = wr_strdup(spec->hash);
	m->warren_version = wr_strdup(WARREN_VERSION);
	m->status = wr_strdup("ready");
	if (!m->repo || !m->ref || !m->commit || !m->spec_hash ||
	    !m->warren_version || !m->status) {
		r = wr_error_set(err, ENOMEM, "build");
		goto out;
	}
	add_timing(m, "fetch", fetch_ms);
	r = snap_collect_lockfiles(mirror, commit, spec, m, err);
	if (r < 0)
		goto out;
	char key[65];
	deps_key(m, spec->hash, key);
	m->deps_key = wr_strdup(key);

	/* the build log: every line of every step */
	logs = wr_asprintf("%s/logs", o->data_dir);
	log_path = wr_asprintf("%s/logs/build-%.12s-%lld.log", o->data_dir,
			       commit, (long long)time(NULL));
	if (!logs || !log_path) {
		r = wr_error_set(err, ENOMEM, "build log");
		goto out;
	}
	wr_mkdir_p(logs, 0700);
	log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (log_fd < 0) {
		r = wr_error_set(err, errno, "open %s", log_path);
		goto out;
	}

	r = start_proxy(o, spec, log_fd, &proxy, err);
	if (r < 0)
		goto out;
	char deps_id[65];
	uint64_t deps_bytes = 0;
	bool reused = !o->rebuild_deps &&
		      snap_store_layer_by_key(store, key, deps_id) == 0;
	if (reused) {
		progress(o, "==> install: dependencies layer %.12s reused\n",
			 deps_id);
		add_timing(m, "install", 0);
		add_timing(m, "clone", 0);
	} else {
		deps_stage = snap_store_stage_dir(store, "deps", err);
		_cleanup_free_ char *plain =
		    script_deps(spec, commit, deps_secrets);
		deps_script = plain ? build_proxy_script(&proxy, plain) : NULL;
		if (!deps_stage || !deps_script) {
			r = deps_stage ? wr_error_set(err, ENOMEM, "build")
				       : -EIO;
			goto out;
		}
		struct sandbox_request req = {.upper = deps_stage};
		req.binds[req.n_binds++] =
		    (struct sandbox_bind){mirror, MIRROR_IN_SANDBOX, true};
		limit_request(o, spec, &req);
		build_proxy_request(&proxy, &req);
		r = run_step(o, "install", &req, deps_script, log_fd,
			     deps_secrets, &step, err);
		if (r < 0)
			goto out;
		if (step.exit_code != 0) {
			r = step_error("install", log_path, &step, err);
			goto out;
		}
		add_marked_timings(m, &step);
		step_result_clear(&step);
		memset(&step, 0, sizeof(step));
		_cleanup_free_ char *staged =
		    wr_asprintf("%s/upper", deps_stage);
		if (!staged) {
			r = wr_error_set(err, ENOMEM, "build");
			goto out;
		}
		if (deps_secrets) {
			r = check_no_secret("install", "dependencies", staged,
					    deps_secrets, err);
			if (r < 0)
				goto out;
		}
		r = snap_store_publish_layer(store, staged, key, deps_id,
					     &deps_bytes, err);
		if (r < 0)
			goto out;
	}
	deps_path = snap_store_layer_path(store, deps_id);
	repo_stage = snap_store_stage_dir(store, "repo", err);
	{
		_cleanup_free_ char *plain =
		    script_repo(spec, commit, repo_secrets);
		repo_script = plain ? build_proxy_script(&proxy, plain) : NULL;
	}
	if (!deps_path || !repo_stage || !repo_script) {
		r = repo_stage ? wr_error_set(err, ENOMEM, "build") : -EIO;
		goto out;
	}
	struct sandbox_request req = {.upper = repo_stage};
	req.layers[req.n_layers++] = deps_path;
	req.binds[req.n_binds++] =
	    (struct sandbox_bind){mirror, MIRROR_IN_SANDBOX, true};
	limit_request(o, spec, &req);
	build_proxy_request(&proxy, &req);
	r = run_step(o, "build", &req, repo_script, log_fd, repo_secrets, &step,
		     err);
	if (r < 0)
		goto out;
	if (step.exit_code != 0) {
		r = step_error("build", log_path, &step, err);
		goto out;
	}
	add_marked_timings(m, &step);
	warning = built_warning(&step.built);
	if (warning) {
		dprintf(log_fd, "%s\n", warning);
		progress(o, "%s\n", warning);
	}
	if (step.built.truncated) {
		dprintf(log_fd, "%s\n", built_truncated);
		progress(o, "%s\n", built_truncated);
	}
	layer = wr_asprintf("%s/upper", repo_stage);
	char repo_id[65];
	uint64_t repo_bytes = 0;
	if (!layer) {
		r = wr_error_set(err, ENOMEM, "build");
		goto out;
	}
	if (repo_secrets) {
		r = check_no_secret("build", "repository", layer, repo_secrets,
				    err);
		if (r < 0)
			goto out;
	}
	progress(o, "==> publish\n");
	t = now_ms();
	r = snap_store_publish_layer(store, layer, NULL, repo_id, &repo_bytes,
				     err);
	if (r < 0)
		goto out;
	if (reused) {
		/* size of the reused layer, for the manifest */
		_cleanup_free_ char *p = snap_store_layer_path(store, deps_id);
		if (p)
			snap_layer_size(p, &deps_bytes, NULL);
	}
	m->layers = wr_calloc(2, sizeof(*m->layers));
	if (!m->layers) {
		r = wr_error_set(err, ENOMEM, "build");
		goto out;
	}
	memcpy(m->layers[0].id, deps_id, 65);
	m->layers[0].role = wr_strdup("deps");
	m->layers[0].bytes = deps_bytes;
	memcpy(m->layers[1].id, repo_id, 65);
	m->layers[1].role = wr_strdup("repo");
	m->layers[1].bytes = repo_bytes;
	m->n_layers = 2;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	m->created_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	/* what a session start needs to know without reading the spec */
	m->extra = json_object();
	if (m->extra) {
		bool session_work = spec->post_create.kind != SPEC_HOOK_NONE ||
				    spec->post_start.kind != SPEC_HOOK_NONE ||
				    spec->n_services > 0;
		json_object_set_new(m->extra, "session_work",
				    json_boolean(session_work));
		/* sessions need not point origin at the broker themselves */
		json_object_set_new(m->extra, "git_origin",
				    json_string("broker"));
		json_t *env = json_object();
		for (size_t i = 0; env && i < spec->n_container_env; i++)
			json_object_set_new(
			    env, spec->container_env[i].key,
			    json_string(spec->container_env[i].value));
		json_object_set_new(m->extra, "container_env", env);
		if (spec->source)
			json_object_set_new(m->extra, "spec_source",
					    json_string(spec->source));
		/* the secrets the spec named: names, never values */
		if (secrets.n) {
			json_t *names = json_array();
			for (size_t i = 0; names && i < secrets.n; i++)
				json_array_append_new(
				    names, json_string(secrets.v[i].name));
			json_object_set_new(m->extra, "secrets", names);
		}
		/* what the build itself produced in /workspace: sessions
		 * leave it out of their change */
		json_t *built = built_json(&step.built);
		if (!built ||
		    json_object_set_new(m->extra, "build_output", built) < 0) {
			r = wr_error_set(err, ENOMEM, "build");
			goto out;
		}
		json_t *warnings = json_array();
		if (warning)
			json_array_append_new(warnings, json_string(warning));
		if (step.built.truncated)
			json_array_append_new(warnings,
					      json_string(built_truncated));
		if (json_array_size(warnings))
			json_object_set_new(m->extra, "warnings", warnings);
		else
			json_decref(warnings);
	}
	add_timing(m, "publish", now_ms() - t);
	add_timing(m, "total", now_ms() - t_start);
	r = snap_store_publish_manifest(store, m, err);
	if (r < 0)
		goto out;
	progress(o, "==> snapshot %s ready (%.0f ms)\n", m->id,
		 now_ms() - t_start);
	*out = TAKE_PTR(m);
	r = 0;
out:
	build_proxy_stop(&proxy);
	secret_set_clear(&secrets);
	step_result_clear(&step);
	if (deps_stage)
		wr_rm_rf(deps_stage);
	if (repo_stage)
		wr_rm_rf(repo_stage);
	if (log_fd >= 0)
		close(log_fd);
	free(deps_stage);
	free(repo_stage);
	free(deps_script);
	free(repo_script);
	free(log_path);
	free(deps_path);
	free(logs);
	free(layer);
	free(warning);
	free(mirror);
	snap_manifest_free(m);
	spec_free(spec);
	snap_store_close(store);
	return r;
}

/* runner.c - one admitted session, from provisioning to rest.
 *
 * A runner thread owns one sandbox slot. It restores the repository's
 * snapshot (the newest, or a fresh one when the staleness policy asks:
 * snapshots.c) into a sandbox whose writable layer is the session's
 * workspace on disk (DATA/sessions/<id>), runs the agent for each pending
 * message (a turn), turns the agent's output lines into events, and then
 * rests in `review` with the sandbox kept for a follow-up until it is idle,
 * its slot is needed or its lifetime ends. When the sandbox dies under it,
 * the session goes `interrupted` and is re-provisioned on the same
 * workspace after a back-off, up to the retry limit.
 *
 * The sandbox work itself is done by the lean `warren` executable (proc.h):
 * `sandbox create` (restore, drift sync, hooks, services), `sandbox exec`
 * (a turn; it forwards SIGTERM to the agent), `sandbox rm`. */
#include "sched/internal.h"

#include "agents/preset.h"
#include "session/lifecycle.h"

#include "review/review.h"
#include "snapshot/git.h"
#include "util/alloc.h"
#include "util/log.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_BYTES 8192
#define TURN_MAX_LINES 100000
#define STOP_GRACE_MS 5000
#define BACKOFF_MAX_MS 60000
#define PROMPT_FILE "/tmp/warren-prompt"
#define DISK_CHECK_MS 5000

static double mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static void log_error(const struct run *run, const char *what,
		      struct wr_error *err)
{
	wr_log(WR_LOG_ERROR, "session", "%s: %s: %s", run->id, what,
	       err && err->msg ? err->msg : "failed");
}

/* The last line of text (for error messages), trimmed. */
static void tail_line(const char *text, char *out, size_t size)
{
	out[0] = '\0';
	if (!text)
		return;
	size_t len = strlen(text);
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
		len--;
	size_t start = len;
	while (start > 0 && text[start - 1] != '\n')
		start--;
	/* a few lines of context, not just the last */
	for (int more = 0; more < 3 && start > 0; more++) {
		start--;
		while (start > 0 && text[start - 1] != '\n')
			start--;
	}
	snprintf(out, size, "%.*s", (int)(len - start), text + start);
}

/* ---- requests from other threads ---------------------------------------- */

bool run_stop_requested(struct run *run)
{
	pthread_mutex_lock(&run->ctl->mu);
	bool stop = run->cancel || run->shutdown || run->expire;
	pthread_mutex_unlock(&run->ctl->mu);
	return stop;
}

static void set_child(struct run *run, pid_t pid)
{
	pthread_mutex_lock(&run->ctl->mu);
	run->child = pid;
	/* a request that came before the child existed */
	if (pid > 0 && (run->cancel || run->shutdown || run->expire))
		kill(pid, SIGTERM);
	pthread_mutex_unlock(&run->ctl->mu);
}

/* Bytes a session holds on disk, by looking: a workspace's image counts
 * what it has allocated (its filesystem caps that), a workspace
 * directory and the evidence what they hold. */
static __thread uint64_t usage_sum;
static int usage_add(const char *p, const struct stat *st, int flag,
		     struct FTW *ftw)
{
	(void)p;
	(void)flag;
	(void)ftw;
	usage_sum += (uint64_t)st->st_blocks * 512;
	return 0;
}

static uint64_t workspace_bytes(const char *dir)
{
	usage_sum = 0;
	nftw(dir, usage_add, 16, FTW_PHYS | FTW_MOUNT);
	return usage_sum;
}

/* A workspace made before workspaces had a filesystem of their own: its
 * layer is a directory on the data directory's filesystem (only measured:
 * no size cap of its own). */
static bool workspace_is_directory(const char *dir)
{
	_cleanup_free_ char *plain = wr_asprintf("%s/upper", dir);
	_cleanup_free_ char *img = wr_asprintf("%s/layer.img", dir);
	struct stat st;
	return plain && img && lstat(plain, &st) == 0 && lstat(img, &st) < 0;
}

bool run_workspace_full(const struct run *run, char *why, size_t why_size)
{
	struct control *c = run->ctl;
	_cleanup_free_ char *dir =
	    wr_asprintf("%s/sessions/%s", c->data_dir, run->id);
	if (!dir || workspace_is_directory(dir) || run->init_pid <= 0)
		return false;
	/* the kernel's figures for the sandbox's root, the overlay, whose
	 * free space is its writable layer's: the workspace's filesystem */
	char root[64];
	snprintf(root, sizeof(root), "/proc/%d/root/", (int)run->init_pid);
	struct statvfs fs;
	if (statvfs(root, &fs) < 0)
		return false;
	uint64_t bsize = fs.f_frsize ? fs.f_frsize : fs.f_bsize;
	if (fs.f_files && fs.f_favail == 0) {
		snprintf(why, why_size,
			 "inode limit exceeded: the workspace's %llu files are "
			 "used up",
			 (unsigned long long)fs.f_files);
		return true;
	}
	if ((uint64_t)fs.f_bavail * bsize < WORKSPACE_FULL_BYTES) {
		snprintf(why, why_size,
			 "disk limit exceeded: the workspace's filesystem "
			 "(%llu MiB, the session's disk limit) is full",
			 (unsigned long long)(run->limits.disk_bytes >> 20));
		return true;
	}
	return false;
}

uint64_t run_disk_used(const struct run *run)
{
	struct control *c = run->ctl;
	_cleanup_free_ char *sess =
	    wr_asprintf("%s/sessions/%s", c->data_dir, run->id);
	_cleanup_free_ char *art =
	    wr_asprintf("%s/artifacts/%s", c->data_dir, run->id);
	uint64_t used = sess ? workspace_bytes(sess) : 0;
	return used + (art ? workspace_bytes(art) : 0);
}

void run_sandbox_request(const struct run *run, struct sandbox_request *req)
{
	req->memory_bytes = run->limits.memory_bytes;
	req->millicpus = run->limits.millicpus;
	req->pids = run->limits.pids;
	req->backend = run->backend;
	/* a writable layer of the session's (its workspace, a verification's)
	 * is a filesystem of its own: the session's disk and inode limits,
	 * enforced by the kernel (a workspace directory of an earlier
	 * version stays one, measured) */
	if (req->upper && run->limits.disk_bytes &&
	    !workspace_is_directory(req->upper)) {
		req->disk_bytes = run->limits.disk_bytes;
		uint64_t most = run->limits.disk_bytes / 4096;
		req->inodes =
		    run->limits.inodes < most ? run->limits.inodes : most;
	}
}

int run_sandbox_cmd(struct run *run, const struct sandbox_cmdline *cl,
		    size_t max, char **out, const char *what,
		    struct wr_error **err)
{
	struct control *c = run->ctl;
	_cleanup_free_ char *errors = NULL;
	int status = proc_run_tracked(cl->argv, max, -1, out, &errors,
				      &run->child, &c->mu, err);
	if (status < 0)
		return wr_error_wrap(err, "%s", what);
	if (status != 0) {
		char why[1024];
		tail_line(errors, why, sizeof(why));
		wr_error_set(err, EIO, "%s failed (exit %d): %s", what, status,
			     why[0] ? why : "no output");
	}
	return status;
}

/* ---- the sandbox ----------------------------------------------------------
 */

static void sandbox_stop(struct run *run)
{
	struct control *c = run->ctl;
	struct sandbox_cmdline cl;
	struct wr_error *err = NULL;
	_cleanup_free_ char *errors = NULL;
	int status = sandbox_cmdline_remove(c->warren_bin, run->sandbox, &cl);
	if (status == 0) {
		status = proc_run(cl.argv, 4096, -1, NULL, &errors, &err);
		sandbox_cmdline_clear(&cl);
	}
	/* exit 1 with "no such sandbox" is fine: it is gone already */
	if (status < 0)
		log_error(run, "stop sandbox", err);
	wr_error_free(err);
	perimeter_sandbox_close(c->perimeter, run->id);
	pthread_mutex_lock(&c->mu);
	if (run->sandbox_start_ms) {
		double used = (store_now_ms() - run->sandbox_start_ms) / 1000.0;
		run->sandbox_seconds += used;
		pthread_mutex_lock(&c->metrics_mu);
		c->m.sandbox_seconds += used;
		pthread_mutex_unlock(&c->metrics_mu);
	}
	run->sandbox_start_ms = 0;
	run->init_pid = 0;
	pthread_mutex_unlock(&c->mu);
}

/* outcome.sandbox_seconds: the time of the session's sandboxes so far,
 * the one running included. */
static void outcome_sandbox_seconds(struct run *run, json_t *outcome)
{
	pthread_mutex_lock(&run->ctl->mu);
	double s = run->sandbox_seconds;
	if (run->sandbox_start_ms)
		s += (store_now_ms() - run->sandbox_start_ms) / 1000.0;
	pthread_mutex_unlock(&run->ctl->mu);
	json_object_set_new(outcome, "sandbox_seconds", json_real(s));
}

/* Is pid running (a zombie is not: the sandbox's init is reaped by the
 * host's init once it has died, which may take a moment)? */
static bool pid_running(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* After the exec client failed (status 125), its sandbox may be dying: give
 * the kernel a moment to finish the job before deciding. */
bool run_sandbox_alive(struct run *run, int status)
{
	pthread_mutex_lock(&run->ctl->mu);
	pid_t pid = run->init_pid;
	pthread_mutex_unlock(&run->ctl->mu);
	if (pid <= 0)
		return false;
	for (int i = 0; status == 125 && i < 50 && pid_running(pid); i++)
		usleep(10 * 1000);
	return pid_running(pid);
}

struct perimeter_run run_perimeter(struct run *run)
{
	return (struct perimeter_run){
	    .id = run->id, .sandbox = run->sandbox, .usage = &run->usage};
}

/* The checkpoint's commit checked out in the new sandbox's /workspace
 * (its bundle bound at CHECKPOINT_SANDBOX_DIR; the base's objects are the
 * snapshot's). */
static int checkpoint_apply(struct run *run, const json_t *ckpt,
			    struct wr_error **err)
{
	const char *commit = json_string_value(json_object_get(ckpt, "commit"));
	if (!commit || strlen(commit) != 40 ||
	    strspn(commit, "0123456789abcdef") != 40)
		return wr_error_set(err, EINVAL,
				    "the session's checkpoint: no commit");
	static const char script[] =
	    "set -e\n"
	    "cd /workspace\n"
	    "git bundle unbundle " CHECKPOINT_SANDBOX_DIR
	    "/" CHECKPOINT_BUNDLE_NAME " >/dev/null\n"
	    "git -c advice.detachedHead=false checkout -q --detach \"$1\"\n";
	char *cmd[] = {"/bin/sh", "-c", (char *)script, "warren-restore",
		       (char *)commit, NULL};
	struct sandbox_exec_cmd ex = {
	    .name = run->sandbox, .cwd = "/workspace", .argv = cmd};
	struct sandbox_cmdline cl;
	int r = sandbox_cmdline_exec(run->ctl->warren_bin, &ex, &cl);
	if (r < 0)
		return wr_error_set(err, -r, "the session's checkpoint");
	_cleanup_free_ char *errors = NULL;
	r = proc_run(cl.argv, 4096, -1, NULL, &errors, err);
	sandbox_cmdline_clear(&cl);
	if (r != 0)
		return r < 0 ? wr_error_wrap(err, "restore the checkpoint")
			     : wr_error_set(err, EIO,
					    "restore the checkpoint: exit %d: "
					    "%s",
					    r, errors ? errors : "");
	return 0;
}

/* `warren sandbox create` from the snapshot on the session's workspace;
 * fills the start breakdown into start (restore, sync, services). */
static int sandbox_start(struct run *run, const struct store_session *s,
			 const char *snapshot_id, json_t *outcome,
			 struct wr_error **err)
{
	json_t *start = json_object_get(outcome, "start_ms");
	struct control *c = run->ctl;
	_cleanup_free_ char *sessions = wr_asprintf("%s/sessions", c->data_dir);
	_cleanup_free_ char *upper =
	    wr_asprintf("%s/sessions/%s", c->data_dir, s->id);
	if (!sessions || !upper)
		return wr_error_set(err, ENOMEM, "sandbox");
	wr_mkdir_p(sessions, 0700);
	/* its egress, git remote, model and agent CLI, through the
	 * perimeter */
	struct perimeter_run pr = run_perimeter(run);
	_cleanup_(perimeter_sandbox_clear) struct perimeter_sandbox perim = {0};
	int er = perimeter_sandbox_prepare(c->perimeter, &pr, s, snapshot_id,
					   &perim, err);
	if (er < 0)
		return er;
	if (perim.preset.on)
		json_object_set_new(start, "agents_layer",
				    json_real(perim.preset.layer_ms));
	struct sandbox_request req = {
	    .name = run->sandbox,
	    .snapshot = snapshot_id,
	    .data_dir = c->data_dir,
	    .upper = upper,
	    .ref = s->ref,
	};
	run_sandbox_request(run, &req);
	/* a session taken over from a worker that died: its committed work
	 * comes from its checkpoint in the registry (checkpoint.c) */
	json_t *ckpt = checkpoint_needed(c, s->id, outcome)
			   ? json_object_get(outcome, "checkpoint")
			   : NULL;
	_cleanup_free_ char *ckdir = ckpt ? checkpoint_dir(c, s->id) : NULL;
	if (ckpt) {
		double tc = mono_ms();
		if (!ckdir || checkpoint_fetch(c, s->id, ckpt, err) < 0)
			return wr_error_wrap(err, "the session's checkpoint");
		json_object_set_new(start, "checkpoint",
				    json_real(mono_ms() - tc));
		req.binds[req.n_binds++] = (struct sandbox_bind){
		    ckdir, CHECKPOINT_SANDBOX_DIR, true};
	}
	struct sandbox_cmdline cl;
	int r = perimeter_sandbox_request(&perim, &req);
	if (r == 0)
		r = sandbox_cmdline_create(c->warren_bin, &req, &cl);
	if (r < 0)
		return wr_error_set(err, -r, "sandbox create: command line");
	_cleanup_free_ char *output = NULL;
	double t0 = mono_ms();
	int status = run_sandbox_cmd(run, &cl, 1 << 16, &output,
				     "sandbox create", err);
	sandbox_cmdline_clear(&cl);
	double wall = mono_ms() - t0;
	if (status != 0)
		return status < 0 ? status : -EIO;
	struct sandbox_create_answer ans;
	if (sandbox_create_answer_parse(output, &ans, err) < 0)
		return -EIO;
	pid_t init_pid = ans.init_pid;
	double sync = ans.sync_ms + ans.hooks_ms;
	double services = ans.services_ms;
	double restore = wall - sync - services;
	json_object_set_new(start, "restore", json_real(restore));
	json_object_set_new(start, "sync", json_real(sync));
	json_object_set_new(start, "services", json_real(services));
	if (ans.session)
		json_object_set(outcome, "session", ans.session);
	/* the commit the session starts from: the base of its diff */
	if (ans.commit[0])
		memcpy(run->base, ans.commit, 41);
	sandbox_create_answer_clear(&ans);
	metrics_observe(c, PHASE_RESTORE, restore);
	metrics_observe(c, PHASE_SYNC, sync);
	metrics_observe(c, PHASE_SERVICES, services);
	metrics_add(c, &c->m.sandboxes_started, 1);
	/* the relays are part of the baseline: started before it is taken */
	if (perimeter_sandbox_started(
		c->perimeter, &pr, &perim,
		control_snapshot_origin_set(c, snapshot_id), err) < 0)
		return -EIO;
	if (ckpt) {
		int cr = checkpoint_apply(run, ckpt, err);
		checkpoint_forget(c, s->id);
		if (cr < 0)
			return cr;
		control_event(c, run->id, EVENT_CHECKPOINT,
			      json_pack("{s:O}", "restored", ckpt));
	}
	struct proc_activity a = {0};
	proc_tree_activity((pid_t)init_pid, &a);
	pthread_mutex_lock(&c->mu);
	run->init_pid = (pid_t)init_pid;
	run->sandbox_start_ms = store_now_ms();
	run->baseline_procs = a.processes;
	run->last_cpu_ticks = a.cpu_ticks;
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/* ---- a turn ---------------------------------------------------------------
 */

struct line_buf {
	const char *stream;
	char buf[LINE_MAX_BYTES];
	size_t len;
};

struct turn {
	struct run *run;
	int number;
	long lines;
	bool truncated;
	double spawned_ms;
	double first_line_ms; /* 0 until the first line */
	uint64_t disk_used;   /* set when the disk limit was crossed */
	char disk_full[160];  /* set when the workspace's filesystem filled */
};

static void emit_line(struct turn *t, const char *stream, const char *line,
		      size_t len, bool partial)
{
	if (t->first_line_ms == 0)
		t->first_line_ms = mono_ms();
	/* a turn keeps TURN_MAX_LINES lines; the session, limits.max_output
	 * bytes of output across all its turns (the store is shared by every
	 * session: one agent printing without end must not fill it) */
	struct run *run = t->run;
	uint64_t cap = run->ctl->cfg.max_output_bytes;
	bool session_full = run->output_bytes + len > cap;
	if (t->lines >= TURN_MAX_LINES || session_full) {
		if (!t->truncated && !(session_full && run->output_capped))
			control_event(
			    run->ctl, run->id, EVENT_OUTPUT,
			    json_pack("{s:s, s:s, s:i, s:b}", "stream", stream,
				      "line",
				      session_full
					  ? "[warren: output truncated: the "
					    "session's output reached "
					    "limits.max_output]"
					  : "[warren: output truncated]",
				      "turn", t->number, "truncated", 1));
		t->truncated = true;
		if (session_full)
			run->output_capped = true;
		return;
	}
	t->lines++;
	run->output_bytes += len;
	json_t *data = json_object();
	json_object_set_new(data, "stream", json_string(stream));
	/* the agent's bytes may not be UTF-8: keep them readable */
	json_t *text = json_stringn(line, len);
	if (!text) {
		char *copy = wr_strndup(line, len);
		for (size_t i = 0; copy && i < len; i++)
			if ((unsigned char)copy[i] >= 0x80 || !copy[i])
				copy[i] = '?';
		text = json_string(copy ? copy : "");
		free(copy);
	}
	json_object_set_new(data, "line", text);
	json_object_set_new(data, "turn", json_integer(t->number));
	if (partial)
		json_object_set_new(data, "partial", json_true());
	control_event(t->run->ctl, t->run->id, EVENT_OUTPUT, data);
}

/* Reads what fd has; returns false at EOF or error. */
static bool read_lines(struct turn *t, int fd, struct line_buf *lb)
{
	char chunk[16384];
	ssize_t n = read(fd, chunk, sizeof(chunk));
	if (n < 0)
		return errno == EINTR || errno == EAGAIN;
	if (n == 0)
		return false;
	for (ssize_t i = 0; i < n; i++) {
		if (chunk[i] == '\n') {
			emit_line(t, lb->stream, lb->buf, lb->len, false);
			lb->len = 0;
			continue;
		}
		if (lb->len == sizeof(lb->buf)) {
			emit_line(t, lb->stream, lb->buf, lb->len, true);
			lb->len = 0;
		}
		lb->buf[lb->len++] = chunk[i];
	}
	return true;
}

/* Concatenated pending messages: the turn's prompt. */
static char *turn_prompt(struct store_message *msgs, size_t n)
{
	size_t len = 1;
	for (size_t i = 0; i < n; i++)
		len += strlen(msgs[i].text) + 2;
	char *p = wr_malloc(len);
	if (!p)
		return NULL;
	p[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (i)
			strcat(p, "\n\n");
		strcat(p, msgs[i].text);
	}
	return p;
}

/* Runs one turn of the agent; returns its exit status (128+N for a
 * signal) or -errno. */
static int turn_run(struct run *run, const struct store_session *s, int number,
		    const char *prompt, struct turn *t, struct wr_error **err)
{
	struct control *c = run->ctl;
	/* a preset is a command agent whose command Warren writes */
	json_t *agent = perimeter_preset_argv(c->perimeter, s->agent_json);
	if (!agent)
		agent = json_loads(s->agent_json ? s->agent_json : "[]", 0,
				   NULL);
	size_t na = json_array_size(agent);
	if (na == 0 || na > 256) {
		json_decref(agent);
		return wr_error_set(err, EINVAL, "no agent command");
	}
	_cleanup_free_ char *env_session =
	    wr_asprintf("WARREN_SESSION=%s", s->id);
	_cleanup_free_ char *env_turn = wr_asprintf("WARREN_TURN=%d", number);
	char **cmd = wr_calloc(8 + na, sizeof(char *));
	if (!env_session || !env_turn || !cmd) {
		free(cmd);
		json_decref(agent);
		return wr_error_set(err, ENOMEM, "turn");
	}
	int n = 0;
	/* The prompt never is on a command line or in a host process's
	 * environment (any host user reads those in ps): it comes on stdin,
	 * into the file inside the sandbox, and from there into
	 * $WARREN_PROMPT and each "{prompt}" of the agent's command
	 * template, replaced inside; then the agent's own argv runs, its
	 * stdin /dev/null. The turn's gateway token comes the same way, on
	 * the line before the prompt (empty without a gateway). */
	cmd[n++] = "/bin/sh";
	cmd[n++] = "-c";
	cmd[n++] =
	    /* read with builtins only: no process on the start path */
	    "IFS= read -r t || exit 125\n"
	    "if [ -n \"$t\" ]; then OPENAI_API_KEY=$t; "
	    "ANTHROPIC_AUTH_TOKEN=$t; export OPENAI_API_KEY "
	    "ANTHROPIC_AUTH_TOKEN; fi; t=\n"
	    "WARREN_PROMPT=; nl='\n'\n"
	    "while IFS= read -r l || [ -n \"$l\" ]; do "
	    "WARREN_PROMPT=\"$WARREN_PROMPT$l$nl\"; l=; done\n"
	    "WARREN_PROMPT=${WARREN_PROMPT%\"$nl\"}\n"
	    "printf '%s\\n' \"$WARREN_PROMPT\" >\"$WARREN_PROMPT_FILE\" || "
	    "exit 125\n"
	    "export WARREN_PROMPT\n"
	    "for a; do\n"
	    "  shift\n"
	    "  case $a in *'{prompt}'*) "
	    "a=${a%%\\{prompt\\}*}$WARREN_PROMPT${a#*\\{prompt\\}} ;; esac\n"
	    "  set -- \"$@\" \"$a\"\n"
	    "done\n"
	    "exec \"$@\" </dev/null\n";
	cmd[n++] = "warren-agent";
	for (size_t i = 0; i < na; i++)
		cmd[n++] = (char *)json_string_value(json_array_get(agent, i));
	cmd[n] = NULL;
	struct sandbox_exec_cmd ex = {
	    .name = run->sandbox,
	    .cwd = "/workspace",
	    .env = {"WARREN_PROMPT_FILE=" PROMPT_FILE, env_session, env_turn},
	    .n_env = 3,
	    .argv = cmd,
	};
	struct perimeter_run prun = run_perimeter(run);
	_cleanup_(perimeter_turn_clear) struct perimeter_turn gt;
	if (perimeter_turn_open(c->perimeter, &prun, &gt) == 0 && gt.on) {
		ex.env[ex.n_env++] = gt.openai_base;
		ex.env[ex.n_env++] = gt.anthropic_base;
	}
	struct sandbox_cmdline cl;
	int built = sandbox_cmdline_exec(c->warren_bin, &ex, &cl);
	free(cmd);
	if (built < 0) {
		json_decref(agent);
		perimeter_turn_close(c->perimeter, &prun, number);
		return wr_error_set(err, -built, "turn: command line");
	}
	struct proc p;
	t->spawned_ms = mono_ms();
	int in_fd = -1;
	int r = proc_spawn_stdin(cl.argv, &in_fd, &p, err);
	sandbox_cmdline_clear(&cl);
	json_decref(agent);
	if (r == 0) {
		/* the wrapper reads all of it before anything else; a child
		 * gone early is EPIPE (SIGPIPE is ignored by the server) */
		_cleanup_free_ char *text =
		    wr_asprintf("%s\n%s\n", gt.on ? gt.token : "", prompt);
		size_t len = text ? strlen(text) : 0;
		for (size_t done = 0; done < len;) {
			ssize_t w = write(in_fd, text + done, len - done);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				break;
			done += (size_t)w;
		}
		close(in_fd);
		if (text)
			explicit_bzero(text, len); /* the token */
	}
	if (r < 0) {
		perimeter_turn_close(c->perimeter, &prun, number);
		return r;
	}
	set_child(run, p.pid);
	struct line_buf out = {.stream = "stdout"}, errb = {.stream = "stderr"};
	bool exited = false;
	double stop_at = 0, disk_checked = mono_ms();
	while (!exited || p.out_fd >= 0 || p.err_fd >= 0) {
		/* the workspace, the evidence and the artifacts: all of the
		 * session's bytes on disk */
		if (run->limits.disk_bytes && !exited && !t->disk_used &&
		    mono_ms() - disk_checked > DISK_CHECK_MS) {
			disk_checked = mono_ms();
			uint64_t used = run_disk_used(run);
			if (used > run->limits.disk_bytes) {
				t->disk_used = used;
				kill(p.pid, SIGTERM);
			} else if (run_workspace_full(run, t->disk_full,
						      sizeof(t->disk_full))) {
				t->disk_used = used;
				kill(p.pid, SIGTERM);
			}
		}
		struct pollfd pf[3] = {
		    {.fd = p.out_fd, .events = POLLIN},
		    {.fd = p.err_fd, .events = POLLIN},
		    {.fd = exited ? -1 : p.pidfd, .events = POLLIN},
		};
		/* after the exit, take only what is already there: a
		 * background process may hold the pipes open */
		int pr = poll(pf, 3, exited ? 0 : 250);
		if (pr < 0 && errno != EINTR)
			break;
		if (pr == 0 && exited)
			break;
		if (pf[0].revents && !read_lines(t, p.out_fd, &out)) {
			close(p.out_fd);
			p.out_fd = -1;
		}
		if (pf[1].revents && !read_lines(t, p.err_fd, &errb)) {
			close(p.err_fd);
			p.err_fd = -1;
		}
		if (pf[2].revents)
			exited = true;
		/* cancel, expiry, shutdown: SIGTERM went to the agent (the
		 * exec client forwards it); after the grace, end the client */
		if (!exited && run_stop_requested(run)) {
			if (stop_at == 0)
				stop_at = mono_ms();
			else if (mono_ms() - stop_at > STOP_GRACE_MS)
				kill(p.pid, SIGKILL);
		}
	}
	if (out.len)
		emit_line(t, "stdout", out.buf, out.len, true);
	if (errb.len)
		emit_line(t, "stderr", errb.buf, errb.len, true);
	set_child(run, 0);
	int status = proc_wait(&p);
	proc_close(&p);
	perimeter_turn_close(c->perimeter, &prun, number);
	return status;
}

/* ---- lifecycle ------------------------------------------------------------
 */

/* The workspace at expiry: the agent was stopped; its files are kept as a
 * git stash commit under refs/warren/checkpoint (the working tree is left
 * as it is) and synced to disk before the sandbox goes. */
static void checkpoint(struct run *run)
{
	struct control *c = run->ctl;
	json_t *data = json_object();
	if (run_sandbox_alive(run, 0)) {
		char *cmd[] = {
		    "/bin/sh",
		    "-c",
		    "git add -A >/dev/null 2>&1; "
		    "sha=$(git -c user.name=warren -c "
		    "user.email=warren@localhost "
		    "stash create 'warren checkpoint' 2>/dev/null); "
		    "[ -n \"$sha\" ] || sha=$(git rev-parse HEAD 2>/dev/null); "
		    "git update-ref refs/warren/checkpoint \"$sha\" "
		    "2>/dev/null; "
		    "echo \"$sha\"; git status --porcelain 2>/dev/null | wc -l",
		    NULL};
		struct sandbox_exec_cmd ex = {
		    .name = run->sandbox, .cwd = "/workspace", .argv = cmd};
		struct sandbox_cmdline cl;
		_cleanup_free_ char *output = NULL;
		struct wr_error *err = NULL;
		int st = sandbox_cmdline_exec(c->warren_bin, &ex, &cl);
		if (st == 0) {
			st = proc_run(cl.argv, 4096, -1, &output, NULL, &err);
			sandbox_cmdline_clear(&cl);
		}
		if (st == 0 && output) {
			char sha[64] = "";
			long files = 0;
			if (sscanf(output, "%63s %ld", sha, &files) >= 1) {
				json_object_set_new(data, "commit",
						    json_string(sha));
				json_object_set_new(data, "files_changed",
						    json_integer(files));
			}
		}
		wr_error_free(err);
	}
	_cleanup_free_ char *upper =
	    wr_asprintf("%s/sessions/%s", c->data_dir, run->id);
	/* the workspace's own filesystem first (through the sandbox's root,
	 * the overlay, whose sync is its writable layer's), then the data
	 * directory's, which holds its image */
	char root[64];
	snprintf(root, sizeof(root), "/proc/%d/root/", (int)run->init_pid);
	const char *const dirs[] = {run->init_pid > 0 ? root : NULL, upper};
	for (size_t i = 0; i < 2; i++) {
		int fd = dirs[i] ? open(dirs[i], O_RDONLY | O_DIRECTORY |
							 O_CLOEXEC)
				 : -1;
		if (fd >= 0) {
			syncfs(fd);
			close(fd);
		}
	}
	json_object_set_new(data, "workspace", json_string(upper ? upper : ""));
	control_event(c, run->id, EVENT_CHECKPOINT, data);
}

/* Ends the session in a final state (the sandbox is already stopped). */
static void finish(struct run *run, enum session_state to, const char *why,
		   int exit_code)
{
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	upd.reason = why ? why : "";
	upd.sandbox = "";
	upd.finished_ms = store_now_ms();
	if (exit_code != INT32_MIN)
		upd.exit_code = exit_code;
	struct wr_error *err = NULL;
	if (control_transition(run->ctl, run->id, -1, to, &upd, NULL, &err) <
	    0) {
		/* ended already by another server (a reject, a cancel or a
		 * push through an API server): what stopped this run, not a
		 * failure */
		struct store_session s = {0};
		bool ended = run->ctl->st->ops->session_get(run->ctl->st,
							    run->id, &s,
							    NULL) == 0 &&
			     session_state_terminal(s.state);
		store_session_clear(&s);
		if (!ended)
			log_error(run, "finish", err);
		wr_error_free(err);
	}
}

/* Waits in review for a follow-up; returns true if one came (and the
 * session is running it), false when the rest is over. */
static bool rest(struct run *run)
{
	struct control *c = run->ctl;
	struct store *st = c->st;
	pthread_mutex_lock(&c->mu);
	run->resting = true;
	run->last_active_ms = store_now_ms();
	for (;;) {
		while (!run->wake && !run->cancel && !run->expire &&
		       !run->shutdown && !run->reclaim)
			pthread_cond_wait(&run->cv, &c->mu);
		if (!run->wake)
			break;
		run->wake = false;
		pthread_mutex_unlock(&c->mu);
		struct store_message *m = NULL;
		size_t n = 0;
		int r = st->ops->message_pending(st, run->id, &m, &n, NULL);
		store_messages_free(m, n);
		pthread_mutex_lock(&c->mu);
		if (r == 0 && n > 0) {
			struct store_session_update upd =
			    STORE_SESSION_UPDATE_INIT;
			upd.finished_ms = -1;
			upd.reason = "";
			struct wr_error *err = NULL;
			if (control_transition(
				c, run->id, SESSION_REVIEW, SESSION_RUNNING,
				&upd, json_pack("{s:s}", "why", "follow-up"),
				&err) >= 0) {
				run->resting = false;
				pthread_mutex_unlock(&c->mu);
				return true;
			}
			wr_error_free(err);
		}
	}
	run->resting = false;
	pthread_mutex_unlock(&c->mu);
	return false;
}

/* One run of the agent: the command agent (its output lines become
 * events) or the built-in loop. prompt: the turn's messages, or the
 * failure of a verification. */
static enum turn_end agent_once(struct run *run, struct store_session *s,
				int number, const char *prompt, bool follow_on,
				json_t *outcome, bool *first_turn,
				int *exit_code, char **summary, char *why,
				size_t why_size)
{
	struct control *c = run->ctl;
	if (agents_is_builtin(s->agent_json)) {
		if (*first_turn) {
			/* the built-in agent runs in the server: it has
			 * started once its first turn does (its first model
			 * request goes out now) */
			double total = (double)(store_now_ms() - s->created_ms);
			json_t *start = json_object_get(outcome, "start_ms");
			json_object_set_new(start, "agent", json_real(0));
			json_object_set_new(start, "total", json_real(total));
			metrics_observe(c, PHASE_AGENT, 0);
			metrics_observe(c, PHASE_TOTAL, total);
			*first_turn = false;
		}
		enum turn_end e =
		    work_agent_turn(run, s, number, prompt, follow_on, summary,
				    why, why_size);
		if (e == TURN_OK)
			*exit_code = 0;
		return e;
	}
	struct wr_error *err = NULL;
	struct turn t = {.run = run, .number = number};
	int status = turn_run(run, s, number, prompt, &t, &err);
	json_object_set_new(outcome, "output_bytes",
			    json_integer((json_int_t)run->output_bytes));
	if (run->output_capped)
		json_object_set_new(outcome, "output_truncated", json_true());
	perimeter_audit_exec(c->perimeter, s, run->sandbox, number, status,
			     t.lines, t.truncated);
	if (*first_turn && t.first_line_ms > 0) {
		double agent = t.first_line_ms - t.spawned_ms;
		double total = (double)(store_now_ms() - s->created_ms) -
			       (mono_ms() - t.first_line_ms);
		json_t *start = json_object_get(outcome, "start_ms");
		json_object_set_new(start, "agent", json_real(agent));
		json_object_set_new(start, "total", json_real(total));
		metrics_observe(c, PHASE_AGENT, agent);
		metrics_observe(c, PHASE_TOTAL, total);
		*first_turn = false;
	}
	if (status < 0) {
		snprintf(why, why_size, "agent: %s",
			 err && err->msg ? err->msg : strerror(-status));
		wr_error_free(err);
		return TURN_FAILED;
	}
	if (run_stop_requested(run))
		return TURN_STOPPED;
	if (t.disk_used && t.disk_full[0]) {
		snprintf(why, why_size, "%s", t.disk_full);
		return TURN_FAILED;
	}
	if (t.disk_used) {
		snprintf(why, why_size,
			 "disk limit exceeded: the workspace holds %llu MiB, "
			 "the limit is %llu MiB",
			 (unsigned long long)(t.disk_used >> 20),
			 (unsigned long long)(run->limits.disk_bytes >> 20));
		return TURN_FAILED;
	}
	/* the exec client could not finish (125 with the sandbox gone) or
	 * the agent was killed (SIGKILL: OOM, kill -9) */
	bool alive = run_sandbox_alive(run, status);
	if (!alive || status == 128 + SIGKILL) {
		snprintf(why, why_size, "%s",
			 !alive ? "sandbox died (its init is gone)"
				: "agent killed (SIGKILL: out of memory or "
				  "killed)");
		return TURN_DIED;
	}
	*exit_code = status;
	if (status != 0) {
		/* a write that failed for want of room is the likeliest cause
		 * of a failure with the workspace full: say that */
		char full[160];
		if (run_workspace_full(run, full, sizeof(full)))
			snprintf(why, why_size,
				 "agent exited with status %d; %s", status,
				 full);
		else
			snprintf(why, why_size, "agent exited with status %d",
				 status);
		return TURN_FAILED;
	}
	/* a turn that ends with its workspace full ends on the limit, as
	 * one stopped there: what it left may be cut short */
	if (run_workspace_full(run, t.disk_full, sizeof(t.disk_full))) {
		snprintf(why, why_size, "%s", t.disk_full);
		return TURN_FAILED;
	}
	return TURN_OK;
}

/* The commit message for a command agent: what was asked. */
static char *prompt_message(const struct store_session *s, const char *prompt)
{
	size_t first = strcspn(prompt, "\n");
	if (first > 72)
		first = 72;
	return wr_asprintf("%.*s\n\nWarren session %s.\n\n%s", (int)first,
			   prompt, s->id, prompt);
}

/* The turn number the session's last result was committed for. */
static int committed_turn(const json_t *outcome)
{
	return (int)json_integer_value(
	    json_object_get(json_object_get(outcome, "result"), "turn"));
}

/* A session whose repository has no snapshot yet waits for its build:
 * say so in its reason and its events (the build's state and start). */
static void snapshot_wait_said(struct run *run, const struct store_repo *repo)
{
	struct control *c = run->ctl;
	struct store_snapshot have = {0};
	if (c->st->ops->snapshot_latest(c->st, repo->id, &have, NULL) == 0) {
		store_snapshot_clear(&have);
		return;
	}
	json_t *b = control_build_state(c, repo->id);
	const char *state = json_string_value(json_object_get(b, "state"));
	json_int_t started =
	    json_integer_value(json_object_get(b, "started_ms"));
	char why[256];
	if (state && !strcmp(state, "building") && started > 0)
		snprintf(why, sizeof(why),
			 "waiting for the snapshot build of %s, started %lld s "
			 "ago",
			 repo->name,
			 (long long)((store_now_ms() - started) / 1000));
	else
		snprintf(why, sizeof(why),
			 "waiting for the snapshot build of %s", repo->name);
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	upd.reason = why;
	upd.epoch = lease_epoch(c, run->id);
	c->st->ops->session_update(c->st, run->id, &upd, NULL);
	control_event(c, run->id, EVENT_SNAPSHOT,
		      json_pack("{s:b, s:s, s:s?, s:s}", "waiting", 1, "repo",
				repo->name, "build", state, "reason", why));
	json_decref(b);
}

/* ---- the session's operations (session/lifecycle.h) ---------------------
 * The state machine is session/lifecycle.c; what each step does to the
 * store, the sandbox, the agent and the verification is here. */

struct runner_ctx {
	struct run *run;
	struct control *c;
	struct store_session s;
	struct store_repo repo;
	struct store_snapshot snap;
	json_t *outcome;
	struct control_limits asked;
	bool first_turn;
	/* the turn in flight: its messages (consumed once it ran), the
	 * agent's summary, the result commit and its verification */
	struct store_message *msgs;
	size_t n_msgs;
	char *prompt;
	char *summary;
	json_t *result, *vres;
};

static void turn_clear(struct runner_ctx *x)
{
	store_messages_free(x->msgs, x->n_msgs);
	x->msgs = NULL;
	x->n_msgs = 0;
	free(x->prompt);
	x->prompt = NULL;
	free(x->summary);
	x->summary = NULL;
	json_decref(x->result);
	x->result = NULL;
	json_decref(x->vres);
	x->vres = NULL;
}

static enum session_step step_of(enum turn_end e)
{
	switch (e) {
	case TURN_OK:
		return SESSION_STEP_OK;
	case TURN_FAILED:
		return SESSION_STEP_FAILED;
	case TURN_DIED:
		return SESSION_STEP_DIED;
	case TURN_STOPPED:
		break;
	}
	return SESSION_STEP_STOPPED;
}

static enum session_stop op_stop(void *ctx)
{
	struct run *run = ((struct runner_ctx *)ctx)->run;
	pthread_mutex_lock(&run->ctl->mu);
	enum session_stop why = run->cancel	? SESSION_STOP_CANCEL
				: run->expire	? SESSION_STOP_EXPIRE
				: run->shutdown ? SESSION_STOP_SHUTDOWN
						: SESSION_STOP_NONE;
	pthread_mutex_unlock(&run->ctl->mu);
	return why;
}

static void op_finish(void *ctx, enum session_state to, const char *why,
		      int exit_code)
{
	finish(((struct runner_ctx *)ctx)->run, to, why,
	       exit_code == INT_MIN ? INT32_MIN : exit_code);
}

static void op_sandbox_stop(void *ctx)
{
	sandbox_stop(((struct runner_ctx *)ctx)->run);
}

static void op_checkpoint(void *ctx)
{
	checkpoint(((struct runner_ctx *)ctx)->run);
}

/* The snapshot (waiting for its build), the limits (asked, else the
 * spec's, else the server's; capped), the backend, the sandbox. */
static enum session_step op_provision(void *ctx, char *why)
{
	struct runner_ctx *x = ctx;
	struct run *run = x->run;
	struct control *c = x->c;
	struct wr_error *err = NULL;
	json_t *start = json_object_get(x->outcome, "start_ms");
	double t0 = mono_ms();
	json_t *policy = NULL;
	snapshot_wait_said(run, &x->repo);
	store_snapshot_clear(&x->snap);
	json_t *pull = NULL;
	if (control_snapshot_for_session(c, &x->repo, run, &x->snap, &policy,
					 &pull, &err) < 0) {
		snprintf(why, SESSION_WHY_MAX, "no snapshot: %s",
			 err && err->msg ? err->msg : "failed");
		wr_error_free(err);
		return run_stop_requested(run) ? SESSION_STEP_STOPPED
					       : SESSION_STEP_FAILED;
	}
	if (policy) {
		/* the record says whether the session waited for a fresh
		 * snapshot, and why */
		control_event(c, run->id, EVENT_SNAPSHOT,
			      json_pack("{s:s, s:O}", "snapshot", x->snap.id,
					"policy", policy));
		json_object_set_new(x->outcome, "snapshot_policy", policy);
	}
	/* a snapshot built elsewhere (the store names it, the data
	 * directory lacks it): pulled from the registry first, its time in
	 * the start breakdown */
	json_t *own_pull = NULL;
	if (control_snapshot_local(c, x->snap.id, run, &own_pull, &err) < 0) {
		json_decref(pull);
		snprintf(why, SESSION_WHY_MAX, "%s",
			 err && err->msg ? err->msg : "snapshot pull failed");
		wr_error_free(err);
		return run_stop_requested(run) ? SESSION_STEP_STOPPED
					       : SESSION_STEP_FAILED;
	}
	/* a snapshot pulled from elsewhere came without the repository's
	 * mirror, which the evidence borrows the base's objects from */
	if (own_pull || pull) {
		_cleanup_free_ char *mp =
		    git_mirror_path(c->data_dir, x->repo.url, NULL);
		struct stat mst;
		if (mp && stat(mp, &mst) < 0) {
			_cleanup_free_ char *m =
			    git_mirror_update(c->data_dir, x->repo.url, &err);
			if (!m) {
				json_decref(pull);
				json_decref(own_pull);
				snprintf(why, SESSION_WHY_MAX,
					 "the repository's mirror: %s",
					 err && err->msg ? err->msg : "failed");
				wr_error_free(err);
				return run_stop_requested(run)
					   ? SESSION_STEP_STOPPED
					   : SESSION_STEP_FAILED;
			}
		}
	}
	/* (a policy's pull of the newest, before its refresh, is time this
	 * start spent too, even when the refresh then built another) */
	if (own_pull) {
		json_decref(pull);
		pull = own_pull;
	}
	if (pull) {
		double pull_ms = json_real_value(json_object_get(pull, "ms"));
		json_object_set_new(start, "pull", json_real(pull_ms));
		metrics_observe(c, PHASE_PULL, pull_ms);
		control_event(c, run->id, EVENT_PHASE,
			      json_pack("{s:s, s:f, s:O}", "phase", "pull", "ms",
					pull_ms, "pull", pull));
		json_object_set_new(x->outcome, "pull", pull);
	}
	struct control_limits from_spec, lim;
	uint64_t spec_refresh;
	json_decref(run->verify);
	json_decref(run->artifacts);
	control_spec_info(c, x->snap.id, &from_spec, &spec_refresh,
			  &run->verify, &run->artifacts);
	control_limits_resolve(c, &x->asked, &from_spec, &lim);
	enum sandbox_backend backend = control_spec_backend(c, x->snap.id);
	pthread_mutex_lock(&c->mu);
	run->limits = lim;
	run->backend = backend;
	pthread_mutex_unlock(&c->mu);
	/* the session record says where it ran */
	json_object_set_new(x->outcome, "backend",
			    json_string(sandbox_backend_name(backend)));
	json_object_set_new(x->outcome, "limits", control_limits_to_json(&lim));
	if (mono_ms() - t0 > 50)
		control_event(c, run->id, EVENT_PHASE,
			      json_pack("{s:s, s:f}", "phase", "snapshot", "ms",
					mono_ms() - t0));
	snprintf(run->base, sizeof(run->base), "%s", x->snap.commit);
	snprintf(run->snapshot_id, sizeof(run->snapshot_id), "%s", x->snap.id);
	snprintf(run->snapshot_commit, sizeof(run->snapshot_commit), "%s",
		 x->snap.commit);
	if (sandbox_start(run, &x->s, x->snap.id, x->outcome, &err) < 0) {
		snprintf(why, SESSION_WHY_MAX, "%s",
			 err && err->msg ? err->msg : "sandbox failed");
		wr_error_free(err);
		return run_stop_requested(run) ? SESSION_STEP_STOPPED
					       : SESSION_STEP_FAILED;
	}
	control_event(c, run->id, EVENT_PHASE,
		      json_pack("{s:s, s:O}", "phase", "ready", "start_ms",
				start));
	return SESSION_STEP_OK;
}

static bool op_to_running(void *ctx)
{
	struct runner_ctx *x = ctx;
	struct control *c = x->c;
	struct wr_error *err = NULL;
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	upd.sandbox = x->run->sandbox;
	upd.snapshot_id = x->snap.id;
	upd.reason = "";
	if (!x->s.started_ms)
		upd.started_ms = x->s.started_ms = store_now_ms();
	outcome_sandbox_seconds(x->run, x->outcome);
	char *oc = json_dumps(x->outcome, JSON_COMPACT);
	upd.outcome_json = oc;
	int64_t tr = control_transition(c, x->run->id, SESSION_PROVISIONING,
					SESSION_RUNNING, &upd, NULL, &err);
	free(oc);
	store_snapshot_clear(&x->snap);
	if (tr < 0) {
		wr_error_free(err);
		return false;
	}
	pthread_mutex_lock(&c->mu);
	x->run->life_start_ms = x->s.started_ms;
	pthread_mutex_unlock(&c->mu);
	return true;
}

static int op_next_turn(void *ctx, struct session_turn *turn, char *why)
{
	struct runner_ctx *x = ctx;
	struct store *st = x->c->st;
	struct wr_error *err = NULL;
	turn_clear(x);
	if (st->ops->message_pending(st, x->run->id, &x->msgs, &x->n_msgs,
				     &err) < 0) {
		snprintf(why, SESSION_WHY_MAX, "messages: %s",
			 err && err->msg ? err->msg : "failed");
		wr_error_free(err);
		return -1;
	}
	if (x->n_msgs == 0)
		return 0;
	x->prompt = turn_prompt(x->msgs, x->n_msgs);
	if (!x->prompt) {
		snprintf(why, SESSION_WHY_MAX, "out of memory");
		return -1;
	}
	/* a turn cut short by a sandbox death keeps its number */
	int number = committed_turn(x->outcome) < x->s.turns && x->s.turns > 0
			 ? x->s.turns
			 : x->s.turns + 1;
	if (number != x->s.turns) {
		struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
		upd.turns = number;
		upd.epoch = lease_epoch(x->c, x->run->id);
		st->ops->session_update(st, x->run->id, &upd, NULL);
		x->s.turns = number;
	}
	control_event(x->c, x->run->id, EVENT_TURN,
		      json_pack("{s:i, s:s}", "turn", number, "status",
				"started"));
	*turn = (struct session_turn){.number = number, .prompt = x->prompt};
	return 1;
}

static int op_uncommitted(void *ctx)
{
	struct runner_ctx *x = ctx;
	return x->s.turns > 0 && committed_turn(x->outcome) < x->s.turns
		   ? x->s.turns
		   : 0;
}

static enum session_step op_agent(void *ctx, const struct session_turn *turn,
				  int *exit_code, char *why)
{
	struct runner_ctx *x = ctx;
	_cleanup_free_ char *feedback = NULL;
	const char *prompt = turn->prompt;
	if (turn->feedback > 0) {
		/* back to the agent with what failed */
		feedback = review_verify_feedback(
		    x->vres, turn->feedback, (int)x->c->cfg.verify_retries + 1,
		    agents_is_builtin(x->s.agent_json));
		prompt = feedback ? feedback : "verification failed";
		free(x->summary);
		x->summary = NULL;
	}
	return step_of(agent_once(x->run, &x->s, turn->number,
				  prompt ? prompt : x->s.prompt,
				  turn->feedback > 0, x->outcome,
				  &x->first_turn, exit_code, &x->summary, why,
				  SESSION_WHY_MAX));
}

static void op_turn_done(void *ctx, const struct session_turn *turn,
			 int exit_code)
{
	struct runner_ctx *x = ctx;
	struct store *st = x->c->st;
	for (size_t i = 0; i < x->n_msgs; i++)
		st->ops->message_consume(st, x->msgs[i].id, turn->number, NULL);
	control_event(x->c, x->run->id, EVENT_TURN,
		      json_pack("{s:i, s:s, s:i}", "turn", turn->number,
				"status", "finished", "exit_code",
				exit_code == INT_MIN ? -1 : exit_code));
}

/* The work tree becomes the result commit, imported, judged and
 * committed on the host (review/evidence.h). */
static enum session_step op_commit(void *ctx, const struct session_turn *turn,
				   char *why)
{
	struct runner_ctx *x = ctx;
	struct run *run = x->run;
	struct wr_error *err = NULL;
	const char *prompt = turn->prompt ? turn->prompt : x->s.prompt;
	_cleanup_free_ char *message = x->summary && *x->summary
					   ? wr_strdup(x->summary)
					   : prompt_message(&x->s, prompt);
	json_decref(x->result);
	x->result = NULL;
	if (message && work_commit(run, &x->s, message, &x->result, &err) == 0)
		return SESSION_STEP_OK;
	snprintf(why, SESSION_WHY_MAX, "result: %s",
		 err && err->msg ? err->msg : "failed");
	bool refused = err && err->bad_input;
	wr_error_free(err);
	if (refused && run_sandbox_alive(run, 0))
		control_event(x->c, run->id, EVENT_RESULT,
			      json_pack("{s:i, s:s}", "turn", turn->number,
					"error", why));
	return refused || run_sandbox_alive(run, 125) ? SESSION_STEP_FAILED
						      : SESSION_STEP_DIED;
}

static bool op_has_verify(void *ctx)
{
	return work_has_verify(((struct runner_ctx *)ctx)->run);
}

static void op_verifying(void *ctx, bool on, int attempt)
{
	struct runner_ctx *x = ctx;
	if (on)
		control_transition(x->c, x->run->id, SESSION_RUNNING,
				   SESSION_VERIFYING, NULL, NULL, NULL);
	else
		control_transition(
		    x->c, x->run->id, SESSION_VERIFYING, SESSION_RUNNING, NULL,
		    json_pack("{s:s, s:i}", "why", "verification failed",
			      "attempt", attempt),
		    NULL);
}

/* Warren verifies exactly the result commit in a fresh sandbox (the
 * agent's word, and its workspace, are not evidence). */
static enum session_step op_verify(void *ctx, const struct session_turn *turn,
				   int attempt, bool *passed, char *why)
{
	struct runner_ctx *x = ctx;
	struct wr_error *err = NULL;
	json_decref(x->vres);
	x->vres = NULL;
	if (work_verify(x->run, x->result, &x->vres, &err) < 0) {
		snprintf(why, SESSION_WHY_MAX, "verify: %s",
			 err && err->msg ? err->msg : "failed");
		wr_error_free(err);
		return SESSION_STEP_FAILED;
	}
	*passed = json_is_true(json_object_get(x->vres, "passed"));
	control_event(x->c, x->run->id, EVENT_VERIFY,
		      json_pack("{s:i, s:i, s:O}", "turn", turn->number,
				"attempt", attempt, "verify", x->vres));
	return SESSION_STEP_OK;
}

static bool op_alive(void *ctx)
{
	return run_sandbox_alive(((struct runner_ctx *)ctx)->run, 0);
}

/* outcome.result, outcome.verify (naming the same commit), the evidence
 * files, outcome.usage; the verification metrics. */
static void op_result(void *ctx, const struct session_turn *turn, int attempts,
		      bool first_passed, bool passed)
{
	struct runner_ctx *x = ctx;
	struct control *c = x->c;
	struct run *run = x->run;
	json_t *outcome = x->outcome;
	if (attempts > 0 && x->vres) {
		json_t *vres = x->vres;
		x->vres = NULL;
		json_object_set_new(vres, "attempts", json_integer(attempts));
		json_object_set_new(vres, "first_attempt_passed",
				    json_boolean(first_passed));
		json_object_set_new(outcome, "verify", vres);
		pthread_mutex_lock(&c->metrics_mu);
		if (first_passed)
			c->m.verify_first_pass++;
		else if (passed)
			c->m.verify_retry_pass++;
		else
			c->m.verify_failed++;
		pthread_mutex_unlock(&c->metrics_mu);
	} else {
		/* no verification of this result: none of an earlier turn's
		 * may stand beside it */
		json_object_del(outcome, "verify");
	}
	/* the files the spec names as evidence (test reports...) */
	json_t *collected = work_collect_artifacts(run);
	if (json_array_size(collected))
		json_object_set_new(outcome, "artifacts", collected);
	else
		json_decref(collected);
	json_t *result = x->result;
	x->result = NULL;
	if (!result)
		return;
	json_object_set_new(result, "turn", json_integer(turn->number));
	if (x->summary)
		json_object_set_new(result, "summary", json_string(x->summary));
	control_event(c, run->id, EVENT_RESULT, json_incref(result));
	json_object_set_new(outcome, "result", result);
	json_object_set_new(
	    outcome, "usage",
	    json_pack("{s:I, s:I, s:f, s:i, s:i}", "prompt_tokens",
		      (json_int_t)run->usage.prompt_tokens, "completion_tokens",
		      (json_int_t)run->usage.completion_tokens, "cost",
		      run->usage.cost, "model_calls", run->usage.model_calls,
		      "tool_calls", run->usage.tool_calls));
}

/* A worker's checkpoint of the turn's result, recorded in the outcome
 * the review transition writes. A failure is said, and the session goes
 * on (only a takeover would miss it). */
static void checkpoint_turn(struct runner_ctx *x)
{
	json_t *res = json_object_get(x->outcome, "result");
	if (!checkpoint_enabled(x->c) || !res)
		return;
	if (!json_is_true(json_object_get(res, "changed"))) {
		json_object_del(x->outcome, "checkpoint");
		return;
	}
	json_t *ck = NULL;
	struct wr_error *err = NULL;
	int turn = (int)json_integer_value(json_object_get(res, "turn"));
	if (checkpoint_push(x->c, x->run->id, res, turn, &ck, &err) < 0) {
		wr_log(WR_LOG_WARN, "session", "%s: %s", x->run->id,
		       err && err->msg ? err->msg : "checkpoint failed");
		control_event(x->c, x->run->id, EVENT_CHECKPOINT,
			      json_pack("{s:s}", "error",
					err && err->msg ? err->msg : "failed"));
		wr_error_free(err);
		return;
	}
	if (!ck)
		return;
	control_event(x->c, x->run->id, EVENT_CHECKPOINT,
		      json_pack("{s:O}", "registry", ck));
	json_object_set_new(x->outcome, "checkpoint", ck);
}

static void op_review(void *ctx, int exit_code)
{
	struct runner_ctx *x = ctx;
	struct wr_error *err = NULL;
	checkpoint_turn(x);
	outcome_sandbox_seconds(x->run, x->outcome);
	struct store_session_update u = STORE_SESSION_UPDATE_INIT;
	u.finished_ms = store_now_ms();
	u.exit_code = exit_code == INT_MIN ? INT32_MIN : exit_code;
	char *o = json_dumps(x->outcome, JSON_COMPACT);
	u.outcome_json = o;
	if (control_transition(x->c, x->run->id, -1, SESSION_REVIEW, &u, NULL,
			       &err) < 0) {
		log_error(x->run, "review", err);
		wr_error_free(err);
	}
	free(o);
}

static bool op_rest(void *ctx)
{
	return rest(((struct runner_ctx *)ctx)->run);
}

static void op_rested(void *ctx)
{
	struct runner_ctx *x = ctx;
	struct store_session_update cl = STORE_SESSION_UPDATE_INIT;
	cl.sandbox = "";
	cl.epoch = lease_epoch(x->c, x->run->id);
	x->c->st->ops->session_update(x->c->st, x->run->id, &cl, NULL);
	control_notify(x->c);
}

static void op_interrupted(void *ctx, unsigned deaths, const char *why)
{
	struct runner_ctx *x = ctx;
	struct store_session_update u = STORE_SESSION_UPDATE_INIT;
	u.sandbox = "";
	struct wr_error *err = NULL;
	if (deaths == 0) {
		/* shutdown: resumed at the next start */
		u.reason = "server shutdown";
		if (control_transition(x->c, x->run->id, -1,
				       SESSION_INTERRUPTED, &u, NULL, &err) < 0)
			wr_error_free(err);
		return;
	}
	metrics_add(x->c, &x->c->m.retries, 1);
	u.reason = why;
	control_transition(x->c, x->run->id, -1, SESSION_INTERRUPTED, &u,
			   json_pack("{s:i}", "deaths", (int)deaths), NULL);
}

static bool op_backoff(void *ctx, int attempt, uint64_t ms)
{
	(void)attempt; /* the store's count is the session's */
	struct runner_ctx *x = ctx;
	struct run *run = x->run;
	control_event(x->c, run->id, EVENT_RETRY,
		      json_pack("{s:i, s:I}", "attempt",
				(int)(x->s.attempts + 1), "backoff_ms",
				(json_int_t)ms));
	struct timespec until;
	control_deadline(&until, ms);
	pthread_mutex_lock(&x->c->mu);
	while (!run->cancel && !run->shutdown && !run->expire &&
	       pthread_cond_timedwait(&run->cv, &x->c->mu, &until) !=
		   ETIMEDOUT)
		;
	pthread_mutex_unlock(&x->c->mu);
	return !run_stop_requested(run);
}

static bool op_reprovision(void *ctx)
{
	struct runner_ctx *x = ctx;
	struct wr_error *err = NULL;
	struct store_session_update pu = STORE_SESSION_UPDATE_INIT;
	pu.attempts = ++x->s.attempts;
	if (control_transition(x->c, x->run->id, SESSION_INTERRUPTED,
			       SESSION_PROVISIONING, &pu, NULL, &err) < 0) {
		wr_error_free(err);
		return false;
	}
	return true;
}

static const struct session_ops runner_ops = {
    .stop = op_stop,
    .finish = op_finish,
    .sandbox_stop = op_sandbox_stop,
    .checkpoint = op_checkpoint,
    .provision = op_provision,
    .to_running = op_to_running,
    .next_turn = op_next_turn,
    .uncommitted = op_uncommitted,
    .agent = op_agent,
    .turn_done = op_turn_done,
    .commit = op_commit,
    .has_verify = op_has_verify,
    .verifying = op_verifying,
    .verify = op_verify,
    .alive = op_alive,
    .result = op_result,
    .review = op_review,
    .rest = op_rest,
    .rested = op_rested,
    .interrupted = op_interrupted,
    .backoff = op_backoff,
    .reprovision = op_reprovision,
};

/* One admitted session: loads it, then runs its lifecycle. */
void *runner_main(void *arg)
{
	struct run *run = arg;
	struct control *c = run->ctl;
	struct store *st = c->st;
	struct runner_ctx x = {.run = run, .c = c, .first_turn = true};
	struct wr_error *err = NULL;
	char why[SESSION_WHY_MAX];

	if (st->ops->session_get(st, run->id, &x.s, &err) < 0 ||
	    st->ops->repo_get(st, x.s.repo_id, &x.repo, &err) < 0) {
		log_error(run, "load", err);
		snprintf(why, sizeof(why), "cannot load the session: %s",
			 err && err->msg ? err->msg : "");
		wr_error_free(err);
		finish(run, SESSION_FAILED, why, INT32_MIN);
		goto out;
	}
	/* what earlier lives of the session found (verify, result) stays;
	 * the start breakdown is this provisioning's */
	x.outcome =
	    x.s.outcome_json ? json_loads(x.s.outcome_json, 0, NULL) : NULL;
	if (!json_is_object(x.outcome)) {
		json_decref(x.outcome);
		x.outcome = json_object();
	}
	json_object_set_new(x.outcome, "start_ms",
			    json_pack("{s:I}", "queue",
				      (json_int_t)run->queued_ms));
	/* what earlier turns printed counts against the session's cap */
	run->output_bytes = (uint64_t)json_integer_value(
	    json_object_get(x.outcome, "output_bytes"));
	run->output_capped =
	    json_is_true(json_object_get(x.outcome, "output_truncated"));
	pthread_mutex_lock(&c->mu);
	run->sandbox_seconds = json_number_value(
	    json_object_get(x.outcome, "sandbox_seconds"));
	pthread_mutex_unlock(&c->mu);
	if (x.s.limits_json) {
		json_t *lj = json_loads(x.s.limits_json, 0, NULL);
		/* the session's egress list rides along; not a limit */
		json_object_del(lj, "egress");
		if (lj)
			control_limits_from_json("limits", lj, &x.asked, NULL);
		json_decref(lj);
	}
	pthread_mutex_lock(&c->mu);
	if (x.s.started_ms)
		run->life_start_ms = x.s.started_ms;
	pthread_mutex_unlock(&c->mu);
	metrics_add(c, &c->m.sessions_started, x.s.turns == 0 ? 1 : 0);

	const struct session_policy policy = {
	    .retry_max = c->cfg.retry_max,
	    .retry_backoff_ms = c->cfg.retry_backoff_ms,
	    .backoff_max_ms = BACKOFF_MAX_MS,
	    .verify_retries = c->cfg.verify_retries,
	};
	session_lifecycle_run(&runner_ops, &x, &policy);
out:
	turn_clear(&x);
	json_decref(x.outcome);
	store_session_clear(&x.s);
	store_repo_clear(&x.repo);
	store_snapshot_clear(&x.snap);
	pthread_mutex_lock(&c->mu);
	run->done = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	control_notify(c);
	return NULL;
}

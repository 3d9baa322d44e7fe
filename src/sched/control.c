/* control.c - the session manager: submission, follow-ups, cancel, the
 * scheduler thread (admission, lifetime and idle timers, joining finished
 * runners), refreshes, reconciliation at start and clean shutdown. The
 * runner of one session is in runner.c. */
#include "sched/internal.h"

#include "agents/preset.h"

#include "sandbox/sandbox.h"
#include "sched/sched.h"
#include "snapshot/spec.h"
#include "security/broker.h"
#include "snapshot/git.h"
#include "util/alloc.h"
#include "util/log.h"
#include "util/cleanup.h"
#include "util/parse.h"
#include "util/spawn.h"

#include <errno.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SCHED_TICK_MS 500
#define CANCEL_WAIT_MS 15000
/* A resting sandbox whose tree used less CPU than this share of the
 * interval, with no process beyond its baseline, is idle. */
#define IDLE_CPU_SHARE 0.02

/* ---- events and transitions ------------------------------------------ */

void control_cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &attr);
	pthread_condattr_destroy(&attr);
}

void control_deadline(struct timespec *ts, uint64_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void control_notify(struct control *c)
{
	pthread_mutex_lock(&c->ev_mu);
	c->ev_gen++;
	pthread_cond_broadcast(&c->ev_cv);
	pthread_mutex_unlock(&c->ev_mu);
}

uint64_t control_event_generation(struct control *c)
{
	pthread_mutex_lock(&c->ev_mu);
	uint64_t g = c->ev_gen;
	pthread_mutex_unlock(&c->ev_mu);
	return g;
}

uint64_t control_wait_events(struct control *c, uint64_t gen, int timeout_ms)
{
	struct timespec until;
	control_deadline(&until, timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
	pthread_mutex_lock(&c->ev_mu);
	while (c->ev_gen == gen) {
		if (pthread_cond_timedwait(&c->ev_cv, &c->ev_mu, &until) ==
		    ETIMEDOUT)
			break;
	}
	uint64_t g = c->ev_gen;
	pthread_mutex_unlock(&c->ev_mu);
	return g;
}

int64_t control_event(struct control *c, const char *session_id,
		      enum event_kind kind, json_t *data)
{
	char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
	struct wr_error *err = NULL;
	/* a worker's write about a session it holds carries its epoch */
	int64_t epoch = lease_epoch(c, session_id);
	int64_t seq = epoch ? c->st->ops->event_append_fenced(
				  c->st, session_id, epoch, kind,
				  text ? text : "{}", &err)
			    : c->st->ops->event_append(c->st, session_id, kind,
						       text ? text : "{}",
						       &err);
	free(text);
	if (seq < 0) {
		const char *name = event_kind_name(kind);
		wr_log(WR_LOG_ERROR, "session", "%s: event %s: %s",
		       session_id, name ? name : "?",
			err && err->msg ? err->msg : "failed");
		wr_error_free(err);
	}
	perimeter_audit_event(c->perimeter, session_id, kind, data, seq);
	json_decref(data);
	control_notify(c);
	return seq;
}

int64_t control_transition_as(struct control *c, const char *user,
			      const char *id, int from, enum session_state to,
			      const struct store_session_update *upd,
			      json_t *extra, struct wr_error **err)
{
	struct store_session_update u = STORE_SESSION_UPDATE_INIT;
	if (upd)
		u = *upd;
	if (!u.epoch)
		u.epoch = lease_epoch(c, id);
	char *text = extra ? json_dumps(extra, JSON_COMPACT) : NULL;
	int64_t r =
	    c->st->ops->session_transition(c->st, id, from, to, &u, text, err);
	free(text);
	if (r >= 0) {
		perimeter_audit_transition(c->perimeter, user, id, from, to,
					   upd, extra, r);
		/* the agent's work is over: its broker token is refused from
		 * now on, whether or not its sandbox is still there */
		if (session_state_terminal(to) || to == SESSION_APPROVED)
			perimeter_session_end(c->perimeter, id);
		control_notify(c);
	} else if (r == -ESTALE) {
		/* a worker that lost the session's lease: said once here,
		 * whoever asked */
		wr_log(WR_LOG_WARN, "session", "%s: to %s refused: %s", id,
		       session_state_name(to),
		       err && *err && (*err)->msg ? (*err)->msg : "stale");
	}
	json_decref(extra);
	return r;
}

int64_t control_transition(struct control *c, const char *id, int from,
			   enum session_state to,
			   const struct store_session_update *upd,
			   json_t *extra, struct wr_error **err)
{
	return control_transition_as(c, NULL, id, from, to, upd, extra, err);
}

/* ---- limits ------------------------------------------------------------ */

static int limit_value(const char *what, const char *key, json_t *v,
		       int (*parse)(const char *, uint64_t *), uint64_t *out,
		       struct wr_error **err)
{
	char buf[64];
	const char *text;
	if (json_is_string(v)) {
		text = json_string_value(v);
	} else if (json_is_integer(v) && json_integer_value(v) >= 0) {
		snprintf(buf, sizeof(buf), "%lld",
			 (long long)json_integer_value(v));
		text = buf;
	} else if (json_is_real(v) && json_real_value(v) >= 0) {
		snprintf(buf, sizeof(buf), "%g", json_real_value(v));
		text = buf;
	} else {
		return wr_error_input(err, EINVAL,
				      "%s.%s: expected a string or a number",
				      what, key);
	}
	uint64_t x;
	if (parse(text, &x) < 0 || x == 0)
		return wr_error_input(err, EINVAL, "%s.%s: invalid value '%s'",
				      what, key, text);
	*out = x;
	return 0;
}

static int parse_pids(const char *text, uint64_t *out)
{
	return wr_parse_uint(text, 1, 1u << 22, out);
}

static int parse_inodes(const char *text, uint64_t *out)
{
	return wr_parse_uint(text, 64, UINT32_MAX, out);
}

int control_limits_from_json(const char *what, const void *json_obj,
			     struct control_limits *out, struct wr_error **err)
{
	json_t *o = (json_t *)json_obj;
	if (!json_is_object(o))
		return wr_error_input(err, EINVAL, "%s: expected an object",
				      what);
	struct control_limits l = {0};
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		int r;
		if (!strcmp(key, "cpus"))
			r = limit_value(what, key, v, wr_parse_cpus,
					&l.millicpus, err);
		else if (!strcmp(key, "memory"))
			r = limit_value(what, key, v, wr_parse_size,
					&l.memory_bytes, err);
		else if (!strcmp(key, "pids"))
			r = limit_value(what, key, v, parse_pids, &l.pids, err);
		else if (!strcmp(key, "disk"))
			r = limit_value(what, key, v, wr_parse_size,
					&l.disk_bytes, err);
		else if (!strcmp(key, "inodes"))
			r = limit_value(what, key, v, parse_inodes, &l.inodes,
					err);
		else if (!strcmp(key, "lifetime"))
			r = limit_value(what, key, v, wr_parse_duration,
					&l.lifetime_ms, err);
		else if (!strcmp(key, "idle"))
			r = limit_value(what, key, v, wr_parse_duration,
					&l.idle_ms, err);
		else
			r = wr_error_input(
			    err, EINVAL,
			    "%s: unknown key '%s' (expected "
			    "cpus, memory, pids, disk, inodes, "
			    "lifetime, idle)",
			    what, key);
		if (r < 0)
			return r;
	}
	*out = l;
	return 0;
}

#define REPO_CHECK_TIMEOUT_MS (60ull * 1000)

void control_builtin_maximums(const char *data_dir, struct control_limits *mx)
{
	struct sysinfo si;
	if (!mx->memory_bytes && sysinfo(&si) == 0)
		mx->memory_bytes = (uint64_t)si.totalram * si.mem_unit / 2;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (!mx->millicpus)
		mx->millicpus = ncpu > 1 ? (uint64_t)ncpu * 750 : 1000;
	if (!mx->pids)
		mx->pids = CONTROL_BUILTIN_MAX_PIDS;
	if (!mx->lifetime_ms)
		mx->lifetime_ms = CONTROL_BUILTIN_MAX_LIFETIME_MS;
	struct statvfs fs;
	if (!mx->disk_bytes && data_dir && statvfs(data_dir, &fs) == 0)
		mx->disk_bytes = (uint64_t)fs.f_blocks * fs.f_frsize / 4;
	if (!mx->inodes)
		mx->inodes = CONTROL_BUILTIN_MAX_INODES;
}

/* The limits a session asks for must stay within the server's maximums. */
static int limits_check(const struct control *c,
			const struct control_limits *asked,
			struct wr_error **err)
{
	if (!asked)
		return 0;
	const struct control_limits *mx = &c->cfg.maximums;
	struct {
		const char *name;
		uint64_t asked, max;
	} f[] = {
	    {"cpus", asked->millicpus, mx->millicpus},
	    {"memory", asked->memory_bytes, mx->memory_bytes},
	    {"pids", asked->pids, mx->pids},
	    {"disk", asked->disk_bytes, mx->disk_bytes},
	    {"inodes", asked->inodes, mx->inodes},
	    {"lifetime", asked->lifetime_ms, mx->lifetime_ms},
	    {"idle", asked->idle_ms, mx->idle_ms},
	};
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i].max && f[i].asked > f[i].max)
			return wr_error_input(
			    err, EINVAL,
			    "limits.%s: more than the server allows",
			    f[i].name);
	return 0;
}

void control_limits_resolve(const struct control *c,
			    const struct control_limits *asked,
			    const struct control_limits *spec,
			    struct control_limits *out)
{
	const struct control_limits none = {0};
	const struct control_limits *a = asked ? asked : &none,
				    *s = spec ? spec : &none,
				    *d = &c->cfg.defaults,
				    *mx = &c->cfg.maximums;
#define RESOLVE(field)                                  \
	do {                                            \
		uint64_t v = a->field	? a->field      \
			     : s->field ? s->field      \
					: d->field;     \
		if (mx->field && (!v || v > mx->field)) \
			v = mx->field;                  \
		out->field = v;                         \
	} while (0)
	RESOLVE(millicpus);
	RESOLVE(memory_bytes);
	RESOLVE(pids);
	RESOLVE(disk_bytes);
	RESOLVE(inodes);
	RESOLVE(lifetime_ms);
	RESOLVE(idle_ms);
#undef RESOLVE
}

json_t *control_limits_to_json(const struct control_limits *l)
{
	json_t *o = json_object();
	if (l->millicpus)
		json_object_set_new(o, "cpus",
				    json_real(l->millicpus / 1000.0));
	if (l->memory_bytes)
		json_object_set_new(o, "memory",
				    json_integer((json_int_t)l->memory_bytes));
	if (l->pids)
		json_object_set_new(o, "pids",
				    json_integer((json_int_t)l->pids));
	if (l->disk_bytes)
		json_object_set_new(o, "disk",
				    json_integer((json_int_t)l->disk_bytes));
	if (l->inodes)
		json_object_set_new(o, "inodes",
				    json_integer((json_int_t)l->inodes));
	if (l->lifetime_ms)
		json_object_set_new(
		    o, "lifetime",
		    json_sprintf("%llums", (unsigned long long)l->lifetime_ms));
	if (l->idle_ms)
		json_object_set_new(
		    o, "idle",
		    json_sprintf("%llums", (unsigned long long)l->idle_ms));
	return o;
}

/* ---- submission -------------------------------------------------------- */

static bool looks_like_location(const char *repo)
{
	return repo[0] == '/' || strstr(repo, "://") || strchr(repo, '@');
}

/* A name for a repository from its URL or path: the last component,
 * without ".git", reduced to the name alphabet. */
static void name_from_url(const char *url, char out[64])
{
	size_t len = strlen(url);
	while (len > 1 && url[len - 1] == '/')
		len--;
	size_t start = len;
	while (start > 0 && url[start - 1] != '/' && url[start - 1] != ':')
		start--;
	size_t n = 0;
	for (size_t i = start; i < len && n < 60; i++) {
		char ch = url[i];
		if (!strncmp(url + i, ".git", 4) && i + 4 == len)
			break;
		out[n++] = (char)((ch >= 'a' && ch <= 'z') ||
					  (ch >= 'A' && ch <= 'Z') ||
					  (ch >= '0' && ch <= '9') ||
					  ch == '.' || ch == '_' || ch == '-'
				      ? ch
				      : '-');
	}
	if (n == 0 || out[0] == '.' || out[0] == '-' || out[0] == '_')
		n = (size_t)snprintf(out, 64, "repo");
	out[n] = '\0';
}

/* The agent JSON to use: asked, else the repository's, else the server's,
 * else the built-in agent when a model is configured; an argv array of
 * strings or {"builtin": true}. */
static int agent_resolve(const struct control *c, const char *asked,
			 const struct store_repo *repo, char **out,
			 struct wr_error **err)
{
	const char *src = asked		     ? asked
			  : repo->agent_json ? repo->agent_json
			  : c->default_agent_json ? c->default_agent_json
			  : c->cfg.model_configured ? "{\"builtin\":true}"
						    : NULL;
	if (!src)
		return wr_error_input(
		    err, EINVAL,
		    "agent: none given and none configured for repository "
		    "'%s' or the server (and no model for the built-in "
		    "agent)",
		    repo->name);
	if (agents_is_builtin(src)) {
		if (!c->cfg.model_configured)
			return wr_error_input(err, EINVAL,
					      "agent: the built-in agent needs "
					      "a model in the server's "
					      "configuration");
	} else if (agents_is_preset(src)) {
		return perimeter_preset_check(c->perimeter, src, out, err);
	} else {
		json_t *a = json_loads(src, 0, NULL);
		bool ok = json_is_array(a) && json_array_size(a) > 0 &&
			  json_array_size(a) <= 256;
		size_t i;
		json_t *v;
		json_array_foreach(a, i, v) if (!json_is_string(v)) ok = false;
		json_decref(a);
		if (!ok)
			return wr_error_input(err, EINVAL,
					      "agent: expected a non-empty "
					      "array of strings or "
					      "{\"builtin\": true}");
	}
	char *copy = wr_strdup(src);
	if (!copy)
		return wr_error_set(err, ENOMEM, "agent");
	*out = copy;
	return 0;
}

int control_submit(struct control *c, const struct control_submit *req,
		   struct store_session *out, struct wr_error **err)
{
	struct store *st = c->st;
	if (!req->repo || !*req->repo)
		return wr_error_input(err, EINVAL, "repo: required");
	if (!req->prompt || !*req->prompt)
		return wr_error_input(err, EINVAL, "prompt: required");
	if (strlen(req->prompt) > 100 * 1024)
		return wr_error_input(err, E2BIG,
				      "prompt: longer than 100 KiB");
	if (req->ref &&
	    (!*req->ref || strlen(req->ref) > 255 || req->ref[0] == '-'))
		return wr_error_input(err, EINVAL, "ref: invalid");
	struct store_repo repo = {0};
	int r = st->ops->repo_get(st, req->repo, &repo, err);
	if (r == -ENOENT && looks_like_location(req->repo)) {
		wr_error_freep(err);
		/* an unregistered URL or path: register it on the fly, or
		 * find it registered under its URL */
		struct store_repo *all = NULL;
		size_t n = 0;
		r = st->ops->repo_list(st, &all, &n, err);
		if (r < 0)
			return r;
		r = -ENOENT;
		for (size_t i = 0; i < n; i++)
			if (!strcmp(all[i].url, req->repo)) {
				r = st->ops->repo_get(st, all[i].id, &repo,
						      err);
				break;
			}
		store_repos_free(all, n);
		/* registering is an admin's act: a repository brings its
		 * spec (hooks run at build time, secrets, egress hosts), and
		 * a path names anything on this host */
		if (r == -ENOENT && !req->may_register)
			return wr_error_input(err, EACCES,
					      "repo: '%s' is not a registered "
					      "repository; only an admin "
					      "registers one (`warren repo add "
					      "URL`)",
					      req->repo);
		if (r == -ENOENT)
			r = control_repo_add(c, NULL, req->repo, NULL, 0, NULL,
					     &repo, err);
	} else if (r == -ENOENT) {
		wr_error_freep(err);
		return wr_error_input(err, ENOENT,
				      "repo: no repository '%s' (add it with "
				      "`warren repo add URL`)",
				      req->repo);
	}
	if (r < 0)
		return r;
	_cleanup_free_ char *agent = NULL, *limits_text = NULL;
	r = limits_check(c, req->limits, err);
	if (r == 0)
		r = agent_resolve(c, req->agent_json, &repo, &agent, err);
	if (r < 0) {
		store_repo_clear(&repo);
		return r;
	}
	/* the hosts it may reach besides its spec's: kept with its limits */
	json_t *egress = NULL;
	r = perimeter_egress_check(req->egress, &egress, err);
	if (r < 0) {
		store_repo_clear(&repo);
		return r;
	}
	/* what the session asked for; the spec's limits and the server's
	 * defaults fill the rest when it is provisioned */
	if (req->limits || egress) {
		json_t *lj = req->limits ? control_limits_to_json(req->limits)
					 : json_object();
		if (egress)
			json_object_set_new(lj, "egress", egress);
		limits_text = lj ? json_dumps(lj, JSON_COMPACT) : NULL;
		json_decref(lj);
	}

	struct store_session s = {0};
	store_new_id("s-", s.id);
	memcpy(s.repo_id, repo.id, sizeof(s.repo_id));
	s.user = (char *)req->user;
	s.prompt = (char *)req->prompt;
	s.ref = (char *)(req->ref ? req->ref : repo.default_ref);
	s.agent_json = agent;
	s.limits_json = limits_text;
	s.state = SESSION_QUEUED;
	s.exit_code = -1;
	s.created_ms = s.updated_ms = store_now_ms();
	r = st->ops->session_create(st, &s, err);
	if (r == 0)
		perimeter_audit_submit(c->perimeter, &s, repo.name);
	store_repo_clear(&repo);
	if (r < 0)
		return r;
	r = st->ops->session_get(st, s.id, out, err);
	control_notify(c);
	pthread_mutex_lock(&c->mu);
	c->sched_wake = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	return r;
}

static int64_t lease_epoch_cb(void *ctx, const char *session_id)
{
	return lease_epoch(ctx, session_id);
}

void control_wake_scheduler(struct control *c)
{
	pthread_mutex_lock(&c->mu);
	c->sched_wake = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static struct run *run_find(struct control *c, const char *id)
{
	for (struct run *r = c->runs; r; r = r->next)
		if (!r->done && !strcmp(r->id, id))
			return r;
	return NULL;
}

int64_t control_message(struct control *c, const char *session_id,
			const char *user, const char *text,
			struct wr_error **err)
{
	if (!text || !*text)
		return wr_error_input(err, EINVAL, "text: required");
	if (strlen(text) > 100 * 1024)
		return wr_error_input(err, E2BIG, "text: longer than 100 KiB");
	struct store *st = c->st;
	struct store_session s;
	int r = st->ops->session_get(st, session_id, &s, err);
	if (r < 0)
		return r;
	enum session_state state = s.state;
	/* a worker's live lease: its resting sandbox takes the message (the
	 * message's event wakes it there), nobody requeues it here */
	bool held_elsewhere = s.worker_id && s.worker_id[0] &&
			      s.lease_expires_ms >= store_now_ms() &&
			      !(c->cfg.worker_id &&
				!strcmp(s.worker_id, c->cfg.worker_id));
	store_session_clear(&s);
	if (session_state_terminal(state) || state == SESSION_APPROVED)
		return wr_error_input(err, EPERM,
				      "session %s is %s: it takes no more "
				      "messages",
				      session_id, session_state_name(state));
	/* under mu: a runner either sees the message or has finished */
	pthread_mutex_lock(&c->mu);
	int64_t id = st->ops->message_add(st, session_id, user, text, err);
	if (id < 0) {
		pthread_mutex_unlock(&c->mu);
		return id;
	}
	perimeter_audit_message(c->perimeter, session_id, user, id, text);
	struct run *run = run_find(c, session_id);
	if (run) {
		run->wake = true;
		pthread_cond_signal(&run->cv);
	} else if (state == SESSION_REVIEW && !held_elsewhere) {
		struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
		upd.requeue = true;
		upd.finished_ms = -1;
		struct wr_error *terr = NULL;
		if (control_transition_as(
			c, user, session_id, SESSION_REVIEW, SESSION_QUEUED,
			&upd, json_pack("{s:s}", "why", "follow-up"),
			&terr) < 0)
			wr_error_free(terr); /* raced: the runner has it */
		c->sched_wake = true;
	pthread_cond_signal(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	control_notify(c);
	return id;
}

int control_cancel(struct control *c, const char *session_id, const char *user,
		   struct wr_error **err)
{
	struct store *st = c->st;
	struct store_session s;
	int r = st->ops->session_get(st, session_id, &s, err);
	if (r < 0)
		return r;
	enum session_state state = s.state;
	store_session_clear(&s);
	if (session_state_terminal(state) || state == SESSION_APPROVED)
		return wr_error_input(err, EPERM,
				      "session %s is %s: nothing to cancel",
				      session_id, session_state_name(state));
	perimeter_audit_user(
	    c->perimeter, session_id, user, "cancel",
	    json_pack("{s:s}", "state", session_state_name(state)));
	pthread_mutex_lock(&c->mu);
	struct run *run = run_find(c, session_id);
	if (run) {
		run->cancel = true;
		if (run->child > 0)
			kill(run->child, SIGTERM);
		pthread_cond_signal(&run->cv);
	} else {
		/* not admitted (queued, or interrupted waiting for a slot) */
		struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
		upd.reason = "cancelled by user";
		upd.finished_ms = store_now_ms();
		struct wr_error *terr = NULL;
		if (control_transition_as(c, user, session_id, (int)state,
					  SESSION_CANCELLED, &upd, NULL,
					  &terr) < 0)
			wr_error_free(terr);
	}
	pthread_mutex_unlock(&c->mu);
	/* one waiting for a snapshot build stops waiting (builds.mu is
	 * never taken with mu held) */
	if (run) {
		pthread_mutex_lock(&c->builds.mu);
		pthread_cond_broadcast(&c->builds.cv);
		pthread_mutex_unlock(&c->builds.mu);
		/* its runner's own build, if nobody else waits for it */
		control_build_owner_cancelled(c, run, user);
	}
	/* wait (bounded) for the runner to stop the sandbox */
	uint64_t gen = control_event_generation(c);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		r = st->ops->session_get(st, session_id, &s, NULL);
		if (r < 0)
			return 0;
		state = s.state;
		store_session_clear(&s);
		if (session_state_terminal(state))
			return 0;
		struct timespec t1;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		long waited = (t1.tv_sec - t0.tv_sec) * 1000 +
			      (t1.tv_nsec - t0.tv_nsec) / 1000000;
		if (waited > CANCEL_WAIT_MS)
			return 0;
		gen = control_wait_events(c, gen, 200);
	}
}

/* ---- repositories ------------------------------------------------------ */

/* git ls-remote URL [REF] with the repository's credentials (the
 * broker's configuration) in the locked-down environment: the URL or path
 * must answer, and REF (a branch, a tag or a full commit id the remote
 * may not advertise) name something there. */
static int repo_check_remote(struct control *c, const char *name,
			     const char *url, const char *ref,
			     struct wr_error **err)
{
	char **env = perimeter_remote_env(c->perimeter, name, url, NULL);
	const char *argv[] = {"git", "ls-remote", "--", url, NULL};
	_cleanup_free_ char *out = NULL;
	struct spawn_call call = {
	    .argv = argv,
	    .envp = env ? (const char *const *)env : git_locked_env(),
	    .in_fd = -1,
	    .out_fd = -1,
	    .out = &out,
	    .out_max = 16u << 20,
	    .timeout_ms = REPO_CHECK_TIMEOUT_MS,
	};
	int status = spawn_run(&call, err);
	broker_env_free(env);
	if (status < 0)
		return wr_error_wrap(err, "url: %s", url);
	if (status != 0)
		return wr_error_input(err, 0, "url: %s: %s", url,
				      call.err_tail[0] ? call.err_tail
						       : "git ls-remote failed");
	if (!ref || (strlen(ref) == 40 && strspn(ref, "0123456789abcdef") == 40))
		return 0;
	/* "ID\tREFNAME" lines: REF as a name, a branch or a tag */
	_cleanup_free_ char *heads = wr_asprintf("refs/heads/%s", ref);
	_cleanup_free_ char *tags = wr_asprintf("refs/tags/%s", ref);
	if (!heads || !tags)
		return wr_error_set(err, ENOMEM, "ref");
	for (char *line = out; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		const char *tab = strchr(line, '\t');
		if (tab && (!strcmp(tab + 1, ref) || !strcmp(tab + 1, heads) ||
			    !strcmp(tab + 1, tags)))
			return 0;
		line = nl ? nl + 1 : NULL;
	}
	return wr_error_input(err, 0,
			      "ref: '%s' is not a branch or tag of %s", ref,
			      url);
}

/* What add checks of a url, a ref and an agent (and a change, of what
 * it sets). */
static int repo_fields_check(const char *url, const char *ref,
			     const char *agent_json, struct wr_error **err)
{
	if (url && (!*url || strlen(url) > 4096 || url[0] == '-'))
		return wr_error_input(err, EINVAL, "url: invalid");
	if (url && url[0] != '/' && !strstr(url, "://") && !strchr(url, '@'))
		return wr_error_input(err, EINVAL,
				      "url: expected an absolute path or a "
				      "git URL, got '%s'",
				      url);
	if (ref && (!*ref || ref[0] == '-' || strlen(ref) > 255))
		return wr_error_input(err, EINVAL, "ref: invalid");
	if (agent_json && agents_is_preset(agent_json)) {
		struct agents_preset p;
		json_t *a = json_loads(agent_json, 0, NULL);
		int r = agents_preset_parse(a, &p, err);
		json_decref(a);
		if (r < 0)
			return r;
	} else if (agent_json && !agents_is_builtin(agent_json)) {
		json_t *a = json_loads(agent_json, 0, NULL);
		bool ok = json_is_array(a) && json_array_size(a) > 0;
		size_t i;
		json_t *v;
		json_array_foreach(a, i, v) if (!json_is_string(v)) ok = false;
		json_decref(a);
		if (!ok)
			return wr_error_input(
			    err, EINVAL,
			    "agent: expected a non-empty array of strings");
	}
	return 0;
}

int control_repo_add(struct control *c, const char *name, const char *url,
		     const char *default_ref, uint64_t refresh_ms,
		     const char *agent_json, struct store_repo *out,
		     struct wr_error **err)
{
	if (!url)
		return wr_error_input(err, EINVAL, "url: invalid");
	int checked = repo_fields_check(url, default_ref, agent_json, err);
	if (checked < 0)
		return checked;
	char derived[64];
	if (!name) {
		name_from_url(url, derived);
		name = derived;
	}
	if (wr_validate_name(name) < 0)
		return wr_error_input(err, EINVAL,
				      "name: '%s' is not a valid name "
				      "([A-Za-z0-9][A-Za-z0-9._-]*, at most "
				      "63)",
				      name);
	/* the remote and the ref must exist: a repository that cannot be
	 * built is refused now, with git's reason, not later in a log */
	checked = c->cfg.no_remote_check
			  ? 0
			  : repo_check_remote(c, name, url, default_ref, err);
	if (checked < 0)
		return checked;
	struct store_repo r = {0};
	store_new_id("r-", r.id);
	r.name = (char *)name;
	r.url = (char *)url;
	r.default_ref = (char *)default_ref;
	r.agent_json = (char *)agent_json;
	r.refresh_ms = (int64_t)refresh_ms;
	r.created_ms = store_now_ms();
	int ret = c->st->ops->repo_add(c->st, &r, err);
	if (ret == -EEXIST) {
		wr_error_freep(err);
		return wr_error_input(
		    err, EEXIST, "name: a repository named '%s' exists", name);
	}
	if (ret < 0)
		return ret;
	ret = c->st->ops->repo_get(c->st, r.id, out, err);
	if (ret == 0 && !c->cfg.no_worker)
		control_repo_refresh(c, r.id, NULL);
	return ret;
}

int control_repo_update(struct control *c, const char *id_or_name,
			const struct control_repo_change *ch,
			struct store_repo *out, struct wr_error **err)
{
	struct store_repo r = {0};
	int ret = c->st->ops->repo_get(c->st, id_or_name, &r, err);
	if (ret < 0)
		return ret;
	ret = repo_fields_check(ch->url, ch->set_ref ? ch->ref : NULL,
				ch->set_agent ? ch->agent_json : NULL, err);
	/* a new remote or ref must exist, as at add */
	const char *url = ch->url ? ch->url : r.url;
	const char *ref = ch->set_ref ? ch->ref : r.default_ref;
	bool rebuild = (ch->url && strcmp(ch->url, r.url)) || ch->set_ref;
	if (ret == 0 && rebuild && !c->cfg.no_remote_check)
		ret = repo_check_remote(c, r.name, url, ref, err);
	if (ret < 0) {
		store_repo_clear(&r);
		return ret;
	}
	struct store_repo nr = r;
	nr.url = (char *)url;
	nr.default_ref = (char *)ref;
	nr.agent_json = ch->set_agent ? (char *)ch->agent_json : r.agent_json;
	nr.refresh_ms = ch->set_refresh ? (int64_t)ch->refresh_ms : r.refresh_ms;
	ret = c->st->ops->repo_update(c->st, &nr, err);
	if (ret == 0)
		ret = c->st->ops->repo_get(c->st, r.id, out, err);
	if (ret == 0 && rebuild && !c->cfg.no_worker)
		control_repo_refresh(c, r.id, NULL);
	store_repo_clear(&r);
	return ret;
}

int control_repo_remove(struct control *c, const char *id_or_name,
			struct wr_error **err)
{
	struct store_repo r = {0};
	int ret = c->st->ops->repo_get(c->st, id_or_name, &r, err);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&c->builds.mu);
	bool busy = false;
	for (size_t i = 0; i < c->builds.n_building; i++)
		busy |= !strcmp(c->builds.building[i], r.id);
	/* a refresh queued for it is not run */
	if (!busy) {
		struct wr_error *qerr = NULL;
		if (c->st->ops->build_unqueue(c->st, r.id, NULL, &qerr) < 0)
			wr_log(WR_LOG_WARN, "builds", "repository %s: %s",
			       r.name, qerr && qerr->msg ? qerr->msg : "?");
		wr_error_free(qerr);
	}
	pthread_mutex_unlock(&c->builds.mu);
	if (busy) {
		ret = wr_error_input(err, EBUSY,
				     "repository %s: its snapshot build is "
				     "running (wait for it, or stop the "
				     "server's build)",
				     r.name);
	} else {
		ret = c->st->ops->repo_remove(c->st, r.id, store_now_ms(), err);
	}
	if (ret == 0) {
		_cleanup_free_ char *state =
		    wr_asprintf("%s/builds/%s.json", c->data_dir, r.id);
		if (state)
			unlink(state);
	}
	store_repo_clear(&r);
	return ret;
}

static void *refresh_main(void *arg);

int control_repo_refresh(struct control *c, const char *id_or_name,
			 struct wr_error **err)
{
	struct store_repo repo;
	int r = c->st->ops->repo_get(c->st, id_or_name, &repo, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&c->builds.mu);
	bool queued_now = false;
	/* the queue is the store's: a restart finds it, and so does a
	 * server running builds when an API server took the refresh */
	if (!c->cfg.no_worker || c->st->ops->watch)
		r = c->st->ops->build_enqueue(c->st, repo.id, store_now_ms(),
					      &queued_now, err);
	/* a build already running keeps saying so; written before mu goes,
	 * so that a worker taking the refresh now says "building" after it */
	bool running = false;
	for (size_t i = 0; i < c->builds.n_building; i++)
		running |= !strcmp(c->builds.building[i], repo.id);
	if (queued_now && !running)
		control_build_state_set(c, repo.id, "queued", NULL, NULL);
	pthread_mutex_unlock(&c->builds.mu);
	/* the scheduler starts a worker for it */
	if (queued_now) {
		pthread_mutex_lock(&c->mu);
		c->sched_wake = true;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
	}
	store_repo_clear(&repo);
	return r;
}

/* A refresh worker: takes queued repositories one after another, in the
 * background (sessions never wait for it: they take the newest ready
 * snapshot, or wait for their own repository's first build). Several run
 * at once (cfg.build_parallel); builds of one repository are serialised
 * by control_snapshot_ensure. */
static void *refresh_main(void *arg)
{
	struct refresh_worker *w = arg;
	struct control *c = w->c;
	pthread_mutex_lock(&c->builds.mu);
	while (!c->builds.stopping) {
		char *id = NULL;
		struct wr_error *qerr = NULL;
		int q = c->st->ops->build_dequeue(c->st, &id, &qerr);
		if (q < 0 && q != -ENOENT)
			wr_log(WR_LOG_WARN, "builds", "%s",
			       qerr && qerr->msg ? qerr->msg : "take a build");
		wr_error_free(qerr);
		if (q < 0)
			break;
		pthread_mutex_unlock(&c->builds.mu);
		struct store_repo repo;
		struct wr_error *err = NULL;
		if (c->st->ops->repo_get(c->st, id, &repo, &err) == 0) {
			struct store_snapshot snap;
			c->st->ops->repo_set_refreshed(c->st, repo.id,
						       store_now_ms(), NULL);
			if (control_snapshot_ensure(c, &repo, true, &snap,
						    &err) == 0)
				store_snapshot_clear(&snap);
			store_repo_clear(&repo);
		}
		if (err) {
			wr_log(WR_LOG_WARN, "builds", "refresh %s: %s", id,
			       err->msg ? err->msg : "failed");
			wr_error_free(err);
		}
		free(id);
		pthread_mutex_lock(&c->builds.mu);
	}
	w->running = false;
	pthread_mutex_unlock(&c->builds.mu);
	return NULL;
}

/* A worker for each queued refresh, up to build_parallel (a finished
 * worker's thread is joined first). Called by the scheduler's thread
 * only, without mu. */
static void refresh_workers_start(struct control *c)
{
	pthread_mutex_lock(&c->builds.mu);
	unsigned parallel = c->cfg.build_parallel ? c->cfg.build_parallel : 2;
	if (parallel > CONTROL_BUILD_PARALLEL_MAX)
		parallel = CONTROL_BUILD_PARALLEL_MAX;
	unsigned running = 0;
	for (unsigned i = 0; i < parallel; i++)
		running += c->builds.workers[i].running;
	/* a worker started takes a queued refresh once it runs: at most as
	 * many new ones as are queued */
	size_t started_now = 0;
	/* how many wait, in the store (taken since: a worker finds none) */
	char **queued = NULL;
	size_t n_queued = 0;
	struct wr_error *qerr = NULL;
	if (running < parallel &&
	    c->st->ops->build_queue_list(c->st, &queued, &n_queued, &qerr) < 0)
		wr_log(WR_LOG_WARN, "builds", "%s",
		       qerr && qerr->msg ? qerr->msg : "list queued builds");
	wr_error_free(qerr);
	store_strv_free(queued, n_queued);
	for (unsigned i = 0; i < parallel && !c->builds.stopping &&
			     running < parallel && started_now < n_queued;
	     i++) {
		struct refresh_worker *w = &c->builds.workers[i];
		if (w->running)
			continue;
		if (w->started) {
			pthread_mutex_unlock(&c->builds.mu);
			pthread_join(w->thread, NULL);
			pthread_mutex_lock(&c->builds.mu);
			w->started = false;
			if (w->running || c->builds.stopping)
				continue;
		}
		w->c = c;
		w->running = true;
		if (pthread_create(&w->thread, NULL, refresh_main, w) == 0) {
			w->started = true;
			running++;
			started_now++;
		} else {
			w->running = false;
		}
	}
	pthread_mutex_unlock(&c->builds.mu);
}

/* After a restart: a build that was queued or running when the server
 * stopped is queued again (its state file says so). */
static void refresh_requeue(struct control *c)
{
	struct store_repo *repos = NULL;
	size_t n = 0;
	if (c->st->ops->repo_list(c->st, &repos, &n, NULL) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		json_t *b = control_build_state(c, repos[i].id);
		const char *st = json_string_value(json_object_get(b, "state"));
		if (st && (!strcmp(st, "queued") || !strcmp(st, "building")))
			control_repo_refresh(c, repos[i].id, NULL);
		json_decref(b);
	}
	store_repos_free(repos, n);
}

uint64_t control_repo_refresh_every(struct control *c,
				    const struct store_repo *repo,
				    const char **source)
{
	const char *unused_source;
	if (!source)
		source = &unused_source;
	if (repo->refresh_ms > 0) {
		*source = "repository";
		return (uint64_t)repo->refresh_ms;
	}
	uint64_t spec_every = 0;
	struct store_snapshot snap;
	if (c->st->ops->snapshot_latest(c->st, repo->id, &snap, NULL) == 0) {
		struct control_limits unused;
		control_spec_info(c, snap.id, &unused, &spec_every, NULL, NULL);
		store_snapshot_clear(&snap);
	}
	/* a spec that says none has the default */
	if (spec_every && spec_every != SPEC_DEFAULT_REFRESH_MS) {
		*source = "spec";
		return spec_every;
	}
	*source = "default";
	return SPEC_DEFAULT_REFRESH_MS;
}

/* Repositories whose refresh interval has passed go to the queue. */
static void refresh_due(struct control *c)
{
	struct store_repo *repos = NULL;
	size_t n = 0;
	if (c->st->ops->repo_list(c->st, &repos, &n, NULL) < 0)
		return;
	int64_t now = store_now_ms();
	for (size_t i = 0; i < n; i++) {
		int64_t every =
		    (int64_t)control_repo_refresh_every(c, &repos[i], NULL);
		int64_t last = repos[i].last_refresh_ms
				   ? repos[i].last_refresh_ms
				   : repos[i].created_ms;
		if (now - last >= every)
			control_repo_refresh(c, repos[i].id, NULL);
	}
	store_repos_free(repos, n);
}

/* ---- the scheduler thread ---------------------------------------------- */

static void run_free(struct run *r)
{
	if (!r)
		return;
	json_decref(r->verify);
	json_decref(r->artifacts);
	provider_free(r->provider);
	pthread_cond_destroy(&r->cv);
	free(r->user);
	free(r);
}

/* Starts a runner for a session just moved to provisioning (mu held). */
static int run_start(struct control *c, const struct store_session *s,
		     int64_t queued_ms)
{
	struct run *r = wr_calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->ctl = c;
	memcpy(r->id, s->id, sizeof(r->id));
	r->user = wr_strdup(s->user ? s->user : "");
	snprintf(r->sandbox, sizeof(r->sandbox), "ws-%s", s->id);
	control_cond_init(&r->cv);
	r->life_start_ms = s->started_ms ? s->started_ms : store_now_ms();
	r->queued_ms = queued_ms;
	r->last_active_ms = store_now_ms();
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	/* a runner needs little stack; 100 live sessions stay small */
	pthread_attr_setstacksize(&attr, 256 * 1024);
	int e = r->user ? pthread_create(&r->thread, &attr, runner_main, r)
			: ENOMEM;
	pthread_attr_destroy(&attr);
	if (e) {
		run_free(r);
		return -e;
	}
	r->next = c->runs;
	c->runs = r;
	return 0;
}

static unsigned runs_active(const struct control *c)
{
	unsigned n = 0;
	for (const struct run *r = c->runs; r; r = r->next)
		if (!r->done)
			n++;
	return n;
}

static void admit(struct control *c)
{
	struct store *st = c->st;
	struct store_session *q = NULL;
	size_t nq = 0;
	struct wr_error *err = NULL;
	if (st->ops->session_list_state(st, SESSION_QUEUED, &q, &nq, &err) <
	    0) {
		wr_log(WR_LOG_ERROR, "sched", "queue: %s",
		       err && err->msg ? err->msg : "failed");
		wr_error_free(err);
		return;
	}
	if (nq == 0)
		return;
	if (nq > 4096)
		nq = 4096; /* the rest waits for the next round */
	struct sched_entry *e = wr_calloc(nq, sizeof(*e));
	struct sched_user_load *load = NULL;
	size_t nload = 0;
	pthread_mutex_lock(&c->mu);
	unsigned active = runs_active(c);
	/* a user's share counts sandboxes at work; resting ones (review,
	 * kept for a follow-up) only take global slots, given back below */
	for (struct run *r = c->runs; r; r = r->next)
		if (!r->done && !r->resting)
			nload++;
	load = nload ? wr_calloc(nload, sizeof(*load)) : NULL;
	size_t k = 0;
	for (struct run *r = c->runs; r && load; r = r->next)
		if (!r->done && !r->resting)
			load[k++] = (struct sched_user_load){r->user, 1};
	if (!e || (nload && !load)) {
		pthread_mutex_unlock(&c->mu);
		free(e);
		free(load);
		store_sessions_free(q, nq);
		return;
	}
	for (size_t i = 0; i < nq; i++)
		e[i] = (struct sched_entry){q[i].user ? q[i].user : "",
					    q[i].queue_seq, false};
	struct sched_limits lim = {
	    .max_sandboxes = c->cfg.max_sandboxes,
	    .max_per_user = c->cfg.max_per_user,
	    .min_free_memory = c->cfg.min_free_memory,
	};
	/* a worker: the users' shares and the total cap count what every
	 * worker runs (the store's sessions at work), this one's own cap
	 * what it runs */
	struct sched_user_load *gload = NULL;
	size_t ngload = 0;
	unsigned capacity = c->cfg.max_sandboxes;
	if (control_is_worker(c)) {
		pthread_mutex_unlock(&c->mu);
		unsigned total = worker_load(c, &gload, &ngload);
		/* a user's share is of what all the workers hold */
		capacity = worker_capacity(c);
		pthread_mutex_lock(&c->mu);
		if (!lim.max_per_user)
			lim.max_per_user = capacity / 2 + 1;
		active = runs_active(c);
		if (gload) {
			load = gload;
			k = ngload;
		}
		if (c->cfg.max_sandboxes_total) {
			unsigned room = total < c->cfg.max_sandboxes_total
					    ? c->cfg.max_sandboxes_total - total
					    : 0;
			if (active + room < lim.max_sandboxes)
				lim.max_sandboxes = active + room;
		}
	}
	uint64_t mem = sched_mem_available();
	size_t picked = sched_pick(e, nq, load, k, active, mem, &lim);
	bool mem_blocked = picked == 0 && active < c->cfg.max_sandboxes &&
			   mem && mem < c->cfg.min_free_memory;
	if (mem_blocked != c->mem_blocked) {
		c->mem_blocked = mem_blocked;
		if (mem_blocked)
			fprintf(
			    stderr,
			    "warren serve: admission paused: %llu MiB "
			    "available, below the %llu MiB floor\n",
			    (unsigned long long)(mem >> 20),
			    (unsigned long long)(c->cfg.min_free_memory >> 20));
	}
	/* the cap is full and sessions wait: resting sandboxes give their
	 * slots back, oldest activity first */
	/* one resting sandbox for each session that still waits for a
	 * slot, oldest activity first */
	size_t waiting = nq - picked;
	while (waiting > 0 && active + picked >= c->cfg.max_sandboxes) {
		struct run *oldest = NULL;
		for (struct run *r = c->runs; r; r = r->next)
			if (!r->done && r->resting && !r->reclaim &&
			    (!oldest ||
			     r->last_active_ms < oldest->last_active_ms))
				oldest = r;
		if (!oldest)
			break;
		oldest->reclaim = true;
		pthread_cond_signal(&oldest->cv);
		waiting--;
	}
	for (size_t i = 0; i < nq; i++) {
		if (!e[i].picked)
			continue;
		int64_t queued_ms = store_now_ms() - q[i].updated_ms;
		struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
		upd.attempts = q[i].attempts + 1;
		struct wr_error *terr = NULL;
		/* a worker prefers what it has cached: a session whose
		 * snapshot it would pull waits a moment for one that has it
		 * (when there are others) */
		if (control_is_worker(c) && capacity > c->cfg.max_sandboxes &&
		    store_now_ms() - q[i].updated_ms < WORKER_PREFER_CACHED_MS &&
		    !control_snapshot_cached(c, q[i].repo_id)) {
			continue; /* the next round (a tick) looks again */
		}
		/* a worker runs only what it claimed: another may have taken
		 * it meanwhile */
		if (control_is_worker(c) && lease_claim(c, q[i].id) < 0)
			continue;
		json_t *data =
		    json_pack("{s:I}", "queued_ms", (json_int_t)queued_ms);
		if (control_is_worker(c))
			json_object_set_new(data, "worker",
					    json_string(c->cfg.worker_id));
		if (control_transition(c, q[i].id, SESSION_QUEUED,
				       SESSION_PROVISIONING, &upd, data,
				       &terr) < 0) {
			wr_error_free(terr); /* cancelled meanwhile */
			lease_drop(c, q[i].id);
			continue;
		}
		metrics_observe(c, PHASE_QUEUE, (double)queued_ms);
		int r = run_start(c, &q[i], queued_ms);
		if (r < 0) {
			struct store_session_update f =
			    STORE_SESSION_UPDATE_INIT;
			f.reason = "cannot start the session's runner";
			f.finished_ms = store_now_ms();
			control_transition(c, q[i].id, SESSION_PROVISIONING,
					   SESSION_FAILED, &f, NULL, &terr);
			wr_error_free(terr);
		}
	}
	pthread_mutex_unlock(&c->mu);
	free(e);
	if (load != gload)
		free(load);
	worker_load_free(gload, ngload);
	store_sessions_free(q, nq);
}

/* Lifetime and idle timers (mu held). */
static void timers(struct control *c, int64_t now)
{
	long hz = sysconf(_SC_CLK_TCK);
	for (struct run *r = c->runs; r; r = r->next) {
		if (r->done)
			continue;
		if (r->limits.lifetime_ms && !r->expire &&
		    now - r->life_start_ms >= (int64_t)r->limits.lifetime_ms) {
			r->expire = true;
			if (r->child > 0 && !r->resting)
				kill(r->child, SIGTERM);
			pthread_cond_signal(&r->cv);
			continue;
		}
		if (!r->resting || !r->init_pid)
			continue;
		/* idle means idle: a process beyond the baseline (services)
		 * or CPU use keeps the sandbox active */
		struct proc_activity a;
		if (proc_tree_activity(r->init_pid, &a) < 0)
			continue;
		int64_t since = now - r->last_active_ms;
		uint64_t used = a.cpu_ticks - r->last_cpu_ticks;
		bool busy =
		    a.processes > r->baseline_procs ||
		    (since > 0 && hz > 0 &&
		     used * 1000.0 / hz > IDLE_CPU_SHARE * SCHED_TICK_MS);
		r->last_cpu_ticks = a.cpu_ticks;
		if (busy) {
			r->last_active_ms = now;
			continue;
		}
		if (r->limits.idle_ms && !r->reclaim &&
		    since >= (int64_t)r->limits.idle_ms) {
			r->reclaim = true;
			pthread_cond_signal(&r->cv);
		}
	}
}

/* Joins finished runners (mu held; released while joining). */
static void reap_runs(struct control *c)
{
	for (struct run **pp = &c->runs; *pp;) {
		struct run *r = *pp;
		if (!r->done) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		pthread_mutex_unlock(&c->mu);
		pthread_join(r->thread, NULL);
		lease_drop(c, r->id);
		run_free(r);
		pthread_mutex_lock(&c->mu);
		pp = &c->runs; /* the list may have changed */
	}
}

static void *sched_main(void *arg)
{
	struct control *c = arg;
	int64_t last_refresh_check = 0;
	pthread_mutex_lock(&c->mu);
	while (!c->stopping) {
		reap_runs(c);
		int64_t now = store_now_ms();
		timers(c, now);
		if (now - last_refresh_check >=
		    (int64_t)c->cfg.refresh_check_ms) {
			last_refresh_check = now;
			pthread_mutex_unlock(&c->mu);
			refresh_due(c);
			pthread_mutex_lock(&c->mu);
		}
		pthread_mutex_unlock(&c->mu);
		refresh_workers_start(c);
		admit(c);
		pthread_mutex_lock(&c->mu);
		if (c->stopping)
			break;
		/* a submission or a finished runner that came while this
		 * round ran must not wait for the next tick */
		if (!c->sched_wake) {
			struct timespec until;
			control_deadline(&until, SCHED_TICK_MS);
			pthread_cond_timedwait(&c->cv, &c->mu, &until);
		}
		c->sched_wake = false;
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* ---- start, reconcile, stop -------------------------------------------- */

/* What a previous server left: sessions caught mid-flight go back to the
 * queue (keeping their place) through `interrupted`, with the reason in
 * their log; sandboxes of this store's sessions are stopped (their
 * workspaces are on disk; a new sandbox takes over). */
static int reconcile(struct control *c, struct wr_error **err)
{
	struct store *st = c->st;
	static const enum session_state inflight[] = {
	    SESSION_PROVISIONING, SESSION_RUNNING, SESSION_VERIFYING,
	    SESSION_INTERRUPTED};
	/* a worker's sessions in flight are its leases': lease_start ends
	 * its previous life's and they are reaped (other workers' are
	 * theirs) */
	for (size_t k = 0; !control_is_worker(c) &&
			   k < sizeof(inflight) / sizeof(inflight[0]);
	     k++) {
		struct store_session *v = NULL;
		size_t n = 0;
		int r =
		    st->ops->session_list_state(st, inflight[k], &v, &n, err);
		if (r < 0)
			return r;
		for (size_t i = 0; i < n; i++) {
			struct store_session_update upd =
			    STORE_SESSION_UPDATE_INIT;
			struct wr_error *terr = NULL;
			if (v[i].state != SESSION_INTERRUPTED) {
				char why[128];
				snprintf(why, sizeof(why),
					 "server restarted while the session "
					 "was %s",
					 session_state_name(v[i].state));
				upd.reason = why;
				upd.sandbox = "";
				if (control_transition(c, v[i].id,
						       (int)v[i].state,
						       SESSION_INTERRUPTED,
						       &upd, NULL, &terr) < 0) {
					wr_error_free(terr);
					continue;
				}
			}
			struct store_session_update q =
			    STORE_SESSION_UPDATE_INIT;
			q.sandbox = "";
			if (control_transition(
				c, v[i].id, SESSION_INTERRUPTED, SESSION_QUEUED,
				&q, json_pack("{s:s}", "why", "resume"),
				&terr) < 0)
				wr_error_free(terr);
		}
		store_sessions_free(v, n);
	}
	/* sandboxes named after this store's sessions */
	struct sandbox_info *sb = NULL;
	size_t nsb = 0;
	if (sandbox_list(&sb, &nsb, NULL) == 0) {
		for (size_t i = 0; i < nsb; i++) {
			/* a session's ("ws-"), or Warren's verification
			 * sandbox of one ("wv-"): never kept across a
			 * restart, the verification runs again */
			if (strncmp(sb[i].name, "ws-s-", 5) &&
			    strncmp(sb[i].name, "wv-s-", 5))
				continue;
			struct store_session s;
			if (st->ops->session_get(st, sb[i].name + 3, &s, NULL) <
			    0)
				continue;
			store_session_clear(&s);
			struct wr_error *rerr = NULL;
			if (sandbox_remove(sb[i].name, &rerr) < 0) {
				wr_log(WR_LOG_WARN, "sched",
				       "stop sandbox %s: %s", sb[i].name,
					rerr && rerr->msg ? rerr->msg : "");
				wr_error_free(rerr);
			}
			control_event(c, sb[i].name + 3, EVENT_SANDBOX,
				      json_pack("{s:s, s:s}", "sandbox",
						sb[i].name, "action",
						"stopped at server start"));
		}
		sandbox_info_free_array(sb, nsb);
	}
	/* resting sessions kept a sandbox name that is gone now (a
	 * worker's: lease.c, when its previous life's leases are reaped) */
	struct store_session *rv = NULL;
	size_t nr = 0;
	if (!control_is_worker(c) &&
	    st->ops->session_list_state(st, SESSION_REVIEW, &rv, &nr, NULL) ==
		0) {
		for (size_t i = 0; i < nr; i++) {
			if (!rv[i].sandbox)
				continue;
			struct store_session_update u =
			    STORE_SESSION_UPDATE_INIT;
			u.sandbox = "";
			st->ops->session_update(st, rv[i].id, &u, NULL);
		}
		store_sessions_free(rv, nr);
	}
	return 0;
}

/* ---- what other processes write (the store's watch) -------------------- */

/* An event of session_id (NULL: anything) was committed, maybe by another
 * process (an API server taking a cancel, a submission): streams look
 * again, the scheduler too, and a session of ours that another process
 * ended (cancelled) is stopped here as well. From the store's thread. */
static void store_changed(void *ctx, const char *session_id,
			  const char *kind)
{
	struct control *c = ctx;
	control_notify(c);
	/* a follow-up taken by another server for a session resting here:
	 * its runner reads the message */
	if (kind && session_id && event_kind_parse(kind) == EVENT_MESSAGE) {
		pthread_mutex_lock(&c->mu);
		struct run *run = run_find(c, session_id);
		if (run) {
			run->wake = true;
			pthread_cond_signal(&run->cv);
		}
		pthread_mutex_unlock(&c->mu);
		return;
	}
	/* a state change: a submission, a cancel (all of them when the
	 * watch cannot say) */
	if (kind && event_kind_parse(kind) != EVENT_STATE)
		return;
	pthread_mutex_lock(&c->mu);
	c->sched_wake = true;
	pthread_cond_signal(&c->cv);
	bool ours = session_id && run_find(c, session_id) != NULL;
	pthread_mutex_unlock(&c->mu);
	if (!ours)
		return;
	struct store_session s = {0};
	if (c->st->ops->session_get(c->st, session_id, &s, NULL) < 0)
		return;
	bool ended = session_state_terminal(s.state);
	store_session_clear(&s);
	if (!ended)
		return;
	pthread_mutex_lock(&c->mu);
	struct run *run = run_find(c, session_id);
	if (run && !run->cancel) {
		run->cancel = true;
		if (run->child > 0)
			kill(run->child, SIGTERM);
		pthread_cond_signal(&run->cv);
	}
	pthread_mutex_unlock(&c->mu);
}

/* ---- what the perimeter asks of the control plane ---------------------- */

static int64_t perimeter_event_cb(void *ctx, const char *session_id,
				  enum event_kind kind, json_t *data)
{
	return control_event(ctx, session_id, kind, data);
}

/* The egress hosts of the spec at snapshot_id (read once per snapshot
 * into the spec cache). */
static json_t *spec_egress_cb(void *ctx, const char *snapshot_id)
{
	struct control *c = ctx;
	struct control_limits unused;
	uint64_t every;
	control_spec_info(c, snapshot_id, &unused, &every, NULL, NULL);
	json_t *out = NULL;
	pthread_mutex_lock(&c->spec_mu);
	for (size_t i = 0; i < c->n_spec_cache; i++)
		if (!strcmp(c->spec_cache[i].snapshot_id, snapshot_id))
			out = json_incref(c->spec_cache[i].egress);
	pthread_mutex_unlock(&c->spec_mu);
	return out;
}

static void model_usage_cb(void *ctx, const struct meter_totals *added)
{
	struct control *c = ctx;
	pthread_mutex_lock(&c->metrics_mu);
	c->m.prompt_tokens += added->prompt_tokens;
	c->m.completion_tokens += added->completion_tokens;
	c->m.cost += added->cost;
	pthread_mutex_unlock(&c->metrics_mu);
}

static void control_free(struct control *c)
{
	if (!c)
		return;
	/* a start that failed after the lease thread began (a no-op after
	 * control_stop's) */
	lease_stop(c);
	/* no call from the store's thread after this */
	if (c->st && c->st->ops->watch)
		c->st->ops->watch(c->st, NULL, NULL, NULL);
	free(c->builds.building);
	for (size_t i = 0; i < c->builds.n_pulling; i++)
		free(c->builds.pulling[i]);
	free(c->builds.pulling);
	/* after the runners: their sandboxes are gone, so are the
	 * proxy's sessions */
	perimeter_free(c->perimeter);
	for (size_t i = 0; i < c->n_spec_cache; i++) {
		json_decref(c->spec_cache[i].verify);
		json_decref(c->spec_cache[i].artifacts);
		json_decref(c->spec_cache[i].egress);
	}
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->spec_mu);
	pthread_cond_destroy(&c->cv);
	pthread_cond_destroy(&c->builds.cv);
	pthread_mutex_destroy(&c->builds.mu);
	pthread_mutex_destroy(&c->build_state_mu);
	json_decref(c->builds.cancels);
	json_decref(c->builds.waiting);
	json_decref(c->builds.used);
	pthread_mutex_destroy(&c->ev_mu);
	pthread_cond_destroy(&c->ev_cv);
	pthread_mutex_destroy(&c->metrics_mu);
	pthread_mutex_destroy(&c->leases.mu);
	pthread_cond_destroy(&c->leases.cv);
	free(c->leases.held);
	free(c->worker_id);
	free(c->data_dir);
	free(c->warren_bin);
	free(c->default_agent_json);
	free(c);
}

int control_start(const struct control_config *cfg, struct store *st,
		  struct control **out, struct wr_error **err)
{
	struct control *c = wr_calloc(1, sizeof(*c));
	if (!c)
		return wr_error_set(err, ENOMEM, "control plane");
	c->cfg = *cfg;
	c->st = st;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->build_state_mu, NULL);
	pthread_mutex_init(&c->spec_mu, NULL);
	control_cond_init(&c->cv);
	control_cond_init(&c->builds.cv);
	pthread_mutex_init(&c->builds.mu, NULL);
	pthread_mutex_init(&c->ev_mu, NULL);
	control_cond_init(&c->ev_cv);
	pthread_mutex_init(&c->metrics_mu, NULL);
	pthread_mutex_init(&c->leases.mu, NULL);
	control_cond_init(&c->leases.cv);
	if (cfg->worker_id && cfg->worker_id[0]) {
		c->worker_id = wr_strdup(cfg->worker_id);
		c->cfg.worker_id = c->worker_id;
	}
	c->data_dir = wr_strdup(cfg->data_dir ? cfg->data_dir : ".warren");
	c->warren_bin = cfg->warren_bin ? wr_strdup(cfg->warren_bin) : NULL;
	c->default_agent_json =
	    cfg->default_agent_json ? wr_strdup(cfg->default_agent_json) : NULL;
	if (!c->data_dir || (cfg->warren_bin && !c->warren_bin) ||
	    (cfg->default_agent_json && !c->default_agent_json)) {
		control_free(c);
		return wr_error_set(err, ENOMEM, "control plane");
	}
	c->cfg.data_dir = c->data_dir;
	c->cfg.warren_bin = c->warren_bin;
	c->cfg.default_agent_json = c->default_agent_json;
	if (!c->cfg.max_sandboxes)
		c->cfg.max_sandboxes = 8;
	control_builtin_maximums(c->data_dir, &c->cfg.maximums);
	if (!c->cfg.max_output_bytes)
		c->cfg.max_output_bytes = CONTROL_MAX_OUTPUT_DEFAULT;
	if (!c->cfg.refresh_check_ms)
		c->cfg.refresh_check_ms = 60 * 1000;
	if (!c->cfg.retry_backoff_ms)
		c->cfg.retry_backoff_ms = 1000;
	struct perimeter_config pcfg = {
	    .data_dir = c->data_dir,
	    .warren_bin = c->warren_bin,
	    .st = st,
	    .api_addr = c->cfg.api_addr,
	    .api_port = c->cfg.api_port,
	    .egress_json = c->cfg.egress_json,
	    .credentials = c->cfg.credentials,
	    .n_credentials = c->cfg.n_credentials,
	    .gateway_json = c->cfg.gateway_json,
	    .model_configured = c->cfg.model_configured,
	    .model = &c->cfg.model,
	    .budget = &c->cfg.budget,
	    .prices = &c->cfg.prices,
	    .agents_registry = c->cfg.agents_registry,
	};
	struct perimeter_host host = {
	    .ctx = c,
	    .event = perimeter_event_cb,
	    .spec_egress = spec_egress_cb,
	    .model_usage = model_usage_cb,
	    .epoch = lease_epoch_cb,
	};
	int pr = perimeter_new(&pcfg, &host, &c->perimeter, err);
	if (pr < 0) {
		control_free(c);
		return pr;
	}
	/* a store other processes share (PostgreSQL): their writes wake
	 * this one's streams and scheduler */
	if (st->ops->watch) {
		pr = st->ops->watch(st, store_changed, c, err);
		if (pr < 0) {
			control_free(c);
			return wr_error_wrap(err, "watch the store");
		}
	}
	if (!cfg->no_worker) {
		if (!c->warren_bin) {
			control_free(c);
			return wr_error_set(err, EINVAL,
					    "control plane: no warren "
					    "executable");
		}
		int r = reconcile(c, err);
		if (r < 0) {
			control_free(c);
			return wr_error_wrap(err, "reconcile");
		}
		/* sessions outlive a server; records of sandboxes killed
		 * with it do not */
		sandbox_reap_stale(NULL);
		r = perimeter_start(c->perimeter, err);
		if (r < 0) {
			control_free(c);
			return r;
		}
		if (control_is_worker(c)) {
			r = lease_start(c, err);
			if (r < 0) {
				control_free(c);
				return r;
			}
		}
		/* what was queued or building when the server stopped */
		refresh_requeue(c);
		int e = pthread_create(&c->sched_thread, NULL, sched_main, c);
		if (e) {
			control_free(c);
			return wr_error_set(err, e, "scheduler thread");
		}
		c->sched_started = true;
	}
	*out = c;
	return 0;
}

void control_stop(struct control *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->stopping = true;
	for (struct run *r = c->runs; r; r = r->next) {
		r->shutdown = true;
		if (r->child > 0)
			kill(r->child, SIGTERM);
		pthread_cond_signal(&r->cv);
	}
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	/* a snapshot build in progress is stopped too (it publishes nothing
	 * half-done; the next refresh starts it again) */
	pthread_mutex_lock(&c->builds.mu);
	c->builds.stopping = true;
	for (size_t i = 0; i < sizeof(c->builds.pids) / sizeof(pid_t); i++)
		if (c->builds.pids[i] > 0)
			kill(c->builds.pids[i], SIGTERM);
	pthread_cond_broadcast(&c->builds.cv);
	pthread_mutex_unlock(&c->builds.mu);
	if (c->sched_started)
		pthread_join(c->sched_thread, NULL);
	pthread_mutex_lock(&c->mu);
	while (c->runs) {
		struct run *r = c->runs;
		c->runs = r->next;
		pthread_mutex_unlock(&c->mu);
		pthread_join(r->thread, NULL);
		lease_drop(c, r->id);
		run_free(r);
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	for (unsigned i = 0; i < CONTROL_BUILD_PARALLEL_MAX; i++) {
		if (c->builds.workers[i].started)
			pthread_join(c->builds.workers[i].thread, NULL);
	}
	/* after the runners: their sessions' states are written */
	lease_stop(c);
	control_notify(c);
	control_free(c);
}

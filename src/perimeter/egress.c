/* egress.c - the perimeter's side of the egress proxy
 * (security/egress.h, docs/security.md "Egress").
 *
 * The proxy asks, at each connection, for the session's allowlist: the
 * egress hosts of its repository's spec at the snapshot it runs on, plus
 * the session's own list from its submission (kept in limits_json under
 * "egress", beside the limits it asked for). Every decision becomes an
 * "egress" event of the session.
 *
 * In the sandbox (perimeter_sandbox_request): the session's socket
 * directory is bound read-only at /run/warren-egress, the relay binary
 * (warren-relay, next to warren) at /run/warren-egress-relay, and the
 * proxy variables are set for every command; once the sandbox is up, the
 * relay is started with `warren sandbox exec` and daemonizes. */
#include "perimeter/internal.h"

#include "sandbox/request.h"
#include "util/spawn.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/fs.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EGRESS_LIST_MAX 256

/* The egress hosts of the spec at snapshot_id (a new reference; an empty
 * array if none). */
static json_t *spec_egress(struct perimeter *p, const char *snapshot_id)
{
	json_t *out = snapshot_id && *snapshot_id
			  ? p->host.spec_egress(p->host.ctx, snapshot_id)
			  : NULL;
	return out ? out : json_array();
}

/* The session's whole allowlist (a new array: the spec's is shared with
 * the cache and stays as it is). */
static json_t *session_hosts(struct perimeter *p,
			     const struct store_session *s,
			     const char *snapshot_id)
{
	json_t *spec = spec_egress(p, snapshot_id);
	json_t *hosts = json_array();
	json_t *limits =
	    s->limits_json ? json_loads(s->limits_json, 0, NULL) : NULL;
	json_t *own = json_object_get(limits, "egress");
	size_t i;
	json_t *v;
	json_array_foreach(spec, i, v) json_array_append(hosts, v);
	json_array_foreach(own, i, v)
	{
		if (json_is_string(v))
			json_array_append(hosts, v);
	}
	json_decref(limits);
	json_decref(spec);
	return hosts;
}

static char **strv_dup(char *const *src, size_t n)
{
	char **v = wr_calloc(n + 1, sizeof(char *));
	for (size_t i = 0; v && i < n; i++) {
		v[i] = wr_strdup(src[i]);
		if (!v[i]) {
			egress_strv_free(v, i);
			return NULL;
		}
	}
	return v;
}

static struct egress_policy_slot *policy_slot(struct perimeter *p,
					      const char *session_id)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (const char *q = session_id; *q; q++)
		h = (h ^ (unsigned char)*q) * 16777619u;
	return &p->policy_cache[h % ARRAY_SIZE(p->policy_cache)];
}

/* The allowlist as the session's record says, read at each connection:
 * from the store, or the copy read the last time if no session record
 * was written since (the store's session_writes count, a write being
 * what could change it: the snapshot, the session's own list). */
static int policy_cb(void *ctx, const char *session_id, char ***allow,
		     size_t *n)
{
	struct perimeter *p = ctx;
	struct store *st = p->cfg.st;
	uint64_t writes = st->ops->session_writes(st);
	struct egress_policy_slot *slot = policy_slot(p, session_id);
	pthread_mutex_lock(&p->mu);
	if (slot->hosts && slot->writes == writes &&
	    strcmp(slot->id, session_id) == 0) {
		char **v = strv_dup(slot->hosts, slot->n);
		size_t k = slot->n;
		pthread_mutex_unlock(&p->mu);
		if (!v)
			return -ENOMEM;
		*allow = v;
		*n = k;
		return 0;
	}
	pthread_mutex_unlock(&p->mu);

	struct store_session s = {0};
	if (st->ops->session_get(st, session_id, &s, NULL) < 0)
		return -ENOENT;
	json_t *hosts = session_hosts(p, &s, s.snapshot_id);
	store_session_clear(&s);
	size_t k = json_array_size(hosts);
	char **v = wr_calloc(k + 1, sizeof(char *));
	if (!v) {
		json_decref(hosts);
		return -ENOMEM;
	}
	for (size_t i = 0; i < k; i++) {
		v[i] = wr_strdup(json_string_value(json_array_get(hosts, i)));
		if (!v[i]) {
			egress_strv_free(v, i);
			json_decref(hosts);
			return -ENOMEM;
		}
	}
	json_decref(hosts);
	/* kept with the count read before the record: a write after that
	 * count makes the copy stale, whether the read saw it or not */
	char **keep = strv_dup(v, k);
	if (keep) {
		pthread_mutex_lock(&p->mu);
		egress_strv_free(slot->hosts, slot->n);
		snprintf(slot->id, sizeof(slot->id), "%s", session_id);
		slot->writes = writes;
		slot->hosts = keep;
		slot->n = k;
		pthread_mutex_unlock(&p->mu);
	}
	*allow = v;
	*n = k;
	return 0;
}

void perimeter_egress_stop(struct perimeter *p)
{
	egress_stop(p->egress);
	p->egress = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(p->policy_cache); i++) {
		struct egress_policy_slot *slot = &p->policy_cache[i];
		egress_strv_free(slot->hosts, slot->n);
		slot->hosts = NULL;
		slot->id[0] = '\0';
	}
}

static void audit_cb(void *ctx, const char *session_id, const json_t *details)
{
	perimeter_event(ctx, session_id, EVENT_EGRESS, json_deep_copy(details));
}

/* The rules a snapshot build's own proxy (warren-egress) applies: the
 * server's, and the control plane's address as "self", in a file that
 * `warren snapshot refresh --egress-config` reads. */
static int write_build_rules(struct perimeter *p, const json_t *rules,
			     struct wr_error **err)
{
	json_t *obj = rules ? json_deep_copy(rules) : json_object();
	if (obj && p->cfg.api_port) {
		char self[128];
		const char *addr = p->cfg.api_addr ? p->cfg.api_addr
						   : "127.0.0.1";
		snprintf(self, sizeof(self), "%s:%u", addr,
			 (unsigned)p->cfg.api_port);
		json_object_set_new(obj, "self", json_string(self));
	}
	_cleanup_free_ char *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	json_decref(obj);
	free(p->build_egress_config);
	p->build_egress_config =
	    wr_asprintf("%s/build-egress.json", p->cfg.data_dir);
	if (!text || !p->build_egress_config)
		return wr_error_set(err, ENOMEM, "egress");
	int r = wr_write_file_atomic(p->build_egress_config, text,
				     strlen(text), 0600, false);
	if (r < 0)
		return wr_error_set(err, -r, "write %s",
				    p->build_egress_config);
	return 0;
}

int perimeter_egress_start(struct perimeter *p, struct wr_error **err)
{
	json_t *rules = NULL;
	if (p->cfg.egress_json) {
		json_error_t jerr;
		rules = json_loads(p->cfg.egress_json, 0, &jerr);
		if (!rules)
			return wr_error_input(err, EINVAL, "egress: %s",
					      jerr.text);
	}
	struct egress_config ecfg = {
	    .rules = rules,
	    .self_addr = p->cfg.api_addr,
	    .self_port = p->cfg.api_port,
	    .policy = policy_cb,
	    .audit = audit_cb,
	    .ctx = p,
	};
	int r = egress_start(&ecfg, &p->egress, err);
	if (r == 0)
		r = write_build_rules(p, rules, err);
	json_decref(rules);
	return r;
}

int perimeter_egress_check(const json_t *list, json_t **out,
			   struct wr_error **err)
{
	*out = NULL;
	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list) || json_array_size(list) > EGRESS_LIST_MAX)
		return wr_error_input(err, EINVAL,
				      "egress: expected an array of at most "
				      "%d hosts",
				      EGRESS_LIST_MAX);
	size_t i;
	json_t *v;
	json_array_foreach(list, i, v)
	{
		struct egress_allow e;
		const char *t = json_string_value(v);
		const char *why = NULL;
		if (!t)
			return wr_error_input(err, 0,
					      "egress[%zu]: expected a string",
					      i);
		if (egress_allow_check(t, &e, &why) < 0)
			return wr_error_input(
			    err, 0, "egress[%zu]: '%s': %s", i, t,
			    why ? why
				: "not a host (\"example.com\", "
				  "\"*.example.com\", \"example.com:8443\")");
	}
	*out = json_deep_copy(list);
	return *out ? 0 : wr_error_set(err, ENOMEM, "egress");
}

int perimeter_egress_prepare(struct perimeter *p,
			     const struct store_session *s,
			     const char *snapshot_id,
			     struct perimeter_sandbox *out,
			     struct wr_error **err)
{
	if (!p->egress)
		return 0;
	json_t *hosts = session_hosts(p, s, snapshot_id);
	size_t n = json_array_size(hosts);
	json_decref(hosts);
	if (n == 0)
		return 0; /* network none, no proxy */
	_cleanup_free_ char *dir = NULL, *relay = NULL;
	int r = perimeter_relay_paths(p, s->id, "egress", &dir, &relay, err);
	if (r < 0)
		return r;
	r = egress_session_open(p->egress, s->id, dir, NULL, err);
	if (r < 0)
		return wr_error_wrap(err, "egress");
	out->egress.dir = TAKE_PTR(dir);
	out->egress.relay = TAKE_PTR(relay);
	out->egress.on = true;
	return 0;
}

int perimeter_sandbox_relay(struct perimeter *p, const char *sandbox,
			    char *const *argv, const char *what,
			    struct wr_error **err)
{
	struct sandbox_exec_cmd ex = {.name = sandbox, .argv = argv};
	struct sandbox_cmdline cl;
	int status = sandbox_cmdline_exec(p->cfg.warren_bin, &ex, &cl);
	if (status < 0)
		return wr_error_set(err, -status, "%s: command line", what);
	struct spawn_call call = {
	    .argv = (const char *const *)cl.argv,
	    .envp = NULL,
	    .in_fd = -1,
	    .out_fd = -1,
	    .keep_group = true,
	    .die_with_parent = true,
	};
	status = spawn_run(&call, err);
	sandbox_cmdline_clear(&cl);
	if (status < 0)
		return wr_error_wrap(err, "%s", what);
	if (status != 0)
		return wr_error_set(err, EIO, "%s failed (exit %d): %s", what,
				    status,
				    call.err_tail[0] ? call.err_tail
						     : "no output");
	return 0;
}

/* gateway.c - the perimeter's side of the model gateway
 * (gateway/gateway.h, docs/agents.md "The key model").
 *
 * The gateway runs when the server's configuration has a "gateway"
 * object, or a model of the "openai" kind (then it serves that model's
 * API). Every session's sandbox then gets it: the session's socket
 * directory bound read-only at /run/warren-gateway, the relay (warren-
 * relay, next to warren) at /run/warren-gateway-relay, started once the
 * sandbox is up to listen on 127.0.0.1:PORT inside.
 *
 * Each turn of a command agent gets a token of its own
 * (gateway_turn_open), which reaches the agent the way the prompt does:
 * on the exec's stdin, never on a host command line; the base URLs are
 * plain variables. When the turn ends the token dies, and the session's
 * totals as the gateway metered them become its usage (the "usage"
 * event of the turn, the outcome's usage, the server's metrics): the
 * same fields the built-in agent fills. Each call is a "model_call"
 * event, copied into the audit log; a refusal by the budget is a
 * "budget" event as well. */
#include "perimeter/internal.h"

#include "agents/layer.h"
#include "agents/preset.h"
#include "gateway/gateway.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/log.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_call(void *ctx, const char *session_id,
		    const struct gateway_call *call)
{
	struct perimeter *p = ctx;
	json_t *d = json_pack(
	    "{s:s, s:s, s:s, s:s, s:s, s:i, s:b, s:b, s:{s:I, s:I, s:I}, "
	    "s:f, s:f}",
	    "wire", meter_wire_name(call->wire), "path", call->path, "model",
	    call->model, "decision", call->decision, "reason", call->reason,
	    "status", call->status, "streamed", call->streamed, "usage_seen",
	    call->usage_seen, "usage", "prompt_tokens",
	    (json_int_t)call->tokens.prompt, "completion_tokens",
	    (json_int_t)call->tokens.completion, "cached_tokens",
	    (json_int_t)call->tokens.cached, "cost", call->cost, "ms",
	    call->ms);
	perimeter_event(p, session_id, EVENT_MODEL_CALL, d);
	if (!strcmp(call->decision, "refused") &&
	    strstr(call->reason, "budget is spent"))
		perimeter_event(p, session_id, EVENT_BUDGET,
				json_pack("{s:s, s:s}", "reason",
					  call->reason, "by", "gateway"));
	if (call->request_body)
		perimeter_audit(p, session_id, "agent", "model_call_bodies",
				json_pack("{s:s, s:s, s:s}", "path",
					  call->path, "request",
					  call->request_body, "answer",
					  call->answer ? call->answer : ""));
}

int perimeter_gateway_start(struct perimeter *p, struct wr_error **err)
{
	int r = 0;
	const struct provider_config *m = p->cfg.model;
	if (p->cfg.gateway_json) {
		json_error_t jerr;
		json_t *o = json_loads(p->cfg.gateway_json, 0, &jerr);
		if (!o)
			return wr_error_input(err, EINVAL, "gateway: %s",
					      jerr.text);
		r = gateway_settings_parse(o, &p->gateway_settings, err);
		json_decref(o);
	} else if (p->cfg.model_configured && m && m->kind &&
		   !strcmp(m->kind, "openai")) {
		struct meter_budget b = {0};
		if (p->cfg.budget) {
			b.max_tokens = p->cfg.budget->max_tokens;
			b.max_cost = p->cfg.budget->max_cost;
		}
		struct meter_prices none = {0};
		r = gateway_settings_from_model(
		    m->base_url, m->api_key,
		    p->cfg.prices ? p->cfg.prices : &none, &b,
		    &p->gateway_settings, err);
	} else {
		return 0; /* no model anywhere: no gateway */
	}
	if (r < 0)
		return r;
	_cleanup_free_ char *sessions =
	    wr_asprintf("%s/sessions", p->cfg.data_dir);
	if (sessions)
		gateway_remove_stale(sessions);
	struct gateway_config gcfg = {
	    .settings = &p->gateway_settings,
	    .data_dir = p->cfg.data_dir,
	    .on_call = on_call,
	    .ctx = p,
	};
	return gateway_start(&gcfg, &p->gateway, err);
}

void perimeter_gateway_stop(struct perimeter *p)
{
	gateway_stop(p->gateway);
	p->gateway = NULL;
	gateway_settings_clear(&p->gateway_settings);
}

/* What the session used before this server took it up: the last
 * "usage" event the gateway's metering wrote. */
static void usage_load(struct perimeter *p, const char *session_id,
		       struct agent_usage *u)
{
	struct store *st = p->cfg.st;
	int64_t after = 0;
	for (;;) {
		struct store_event *ev = NULL;
		size_t n = 0;
		if (st->ops->event_list(st, session_id, after, 1000, &ev, &n,
					NULL) < 0 ||
		    n == 0)
			return;
		for (size_t i = 0; i < n; i++) {
			after = ev[i].seq;
			if (event_kind_parse(ev[i].kind) != EVENT_USAGE)
				continue;
			json_t *d = json_loads(ev[i].data_json, 0, NULL);
			const char *by =
			    json_string_value(json_object_get(d, "by"));
			if (by && !strcmp(by, "gateway")) {
				u->prompt_tokens = (uint64_t)json_integer_value(
				    json_object_get(d, "prompt_tokens"));
				u->completion_tokens =
				    (uint64_t)json_integer_value(
					json_object_get(d, "completion_tokens"));
				u->cached_tokens = (uint64_t)json_integer_value(
				    json_object_get(d, "cached_tokens"));
				u->cost =
				    json_number_value(json_object_get(d, "cost"));
				u->model_calls = (unsigned)json_integer_value(
				    json_object_get(d, "model_calls"));
			}
			json_decref(d);
		}
		store_events_free(ev, n);
	}
}

int perimeter_gateway_prepare(struct perimeter *p,
			      const struct perimeter_run *run,
			      const struct store_session *s,
			      struct perimeter_sandbox *out,
			      struct wr_error **err)
{
	if (!p->gateway)
		return 0;
	_cleanup_free_ char *dir = NULL, *relay = NULL;
	int r = perimeter_relay_paths(p, s->id, "gateway", &dir, &relay, err);
	if (r < 0)
		return r;
	/* the totals go on from what the session used before (a restart,
	 * a new sandbox after a death) */
	struct agent_usage *u = run->usage;
	if (u->model_calls == 0)
		usage_load(p, s->id, u);
	struct meter_totals used = {
	    .prompt_tokens = u->prompt_tokens,
	    .completion_tokens = u->completion_tokens,
	    .cached_tokens = u->cached_tokens,
	    .cost = u->cost,
	    .model_calls = u->model_calls,
	};
	r = gateway_session_open(p->gateway, s->id, dir, &used, err);
	if (r < 0)
		return wr_error_wrap(err, "gateway");
	out->gateway.dir = TAKE_PTR(dir);
	out->gateway.relay = TAKE_PTR(relay);
	out->gateway.on = true;
	return 0;
}

int perimeter_gateway_relay(struct perimeter *p, const char *sandbox,
			    struct wr_error **err)
{
	if (!p->gateway)
		return 0;
	char listen[32];
	snprintf(listen, sizeof(listen), "127.0.0.1:%u",
		 (unsigned)p->gateway_settings.port);
	char *cmd[] = {GATEWAY_SANDBOX_RELAY, "--listen", listen,
		       GATEWAY_SANDBOX_SOCKET, NULL};
	return perimeter_sandbox_relay(p, sandbox, cmd, "gateway relay", err);
}

int perimeter_turn_open(struct perimeter *p, const struct perimeter_run *run,
			struct perimeter_turn *t)
{
	memset(t, 0, sizeof(*t));
	if (!p->gateway)
		return 0;
	int r = gateway_turn_open(p->gateway, run->id, t->token);
	if (r < 0)
		return r;
	unsigned port = p->gateway_settings.port;
	snprintf(t->openai_base, sizeof(t->openai_base),
		 "OPENAI_BASE_URL=http://127.0.0.1:%u/v1", port);
	snprintf(t->anthropic_base, sizeof(t->anthropic_base),
		 "ANTHROPIC_BASE_URL=http://127.0.0.1:%u", port);
	t->on = true;
	return 0;
}

/* The session's totals from the gateway become its usage, and what this
 * turn added goes to the host (the metrics). */
void perimeter_turn_close(struct perimeter *p, const struct perimeter_run *run,
			  int number)
{
	if (!p->gateway)
		return;
	gateway_turn_close(p->gateway, run->id);
	struct meter_totals tot;
	if (gateway_session_usage(p->gateway, run->id, &tot) < 0)
		return;
	struct agent_usage *u = run->usage;
	struct meter_totals added = {
	    .prompt_tokens = tot.prompt_tokens - u->prompt_tokens,
	    .completion_tokens = tot.completion_tokens - u->completion_tokens,
	    .cached_tokens = tot.cached_tokens - u->cached_tokens,
	    .cost = tot.cost - u->cost,
	    .model_calls = tot.model_calls - u->model_calls,
	};
	if (p->host.model_usage)
		p->host.model_usage(p->host.ctx, &added);
	bool called = tot.model_calls != u->model_calls;
	u->prompt_tokens = tot.prompt_tokens;
	u->completion_tokens = tot.completion_tokens;
	u->cached_tokens = tot.cached_tokens;
	u->cost = tot.cost;
	u->model_calls = tot.model_calls;
	if (!called && tot.model_calls == 0)
		return; /* an agent that does not use the gateway */
	perimeter_event(
	    p, run->id, EVENT_USAGE,
	    json_pack("{s:i, s:I, s:I, s:I, s:f, s:i, s:s}", "turn", number,
		      "prompt_tokens", (json_int_t)tot.prompt_tokens,
		      "completion_tokens", (json_int_t)tot.completion_tokens,
		      "cached_tokens", (json_int_t)tot.cached_tokens, "cost",
		      tot.cost, "model_calls", tot.model_calls, "by",
		      "gateway"));
}

void perimeter_turn_clear(struct perimeter_turn *t)
{
	explicit_bzero(t, sizeof(*t));
}

/* ---- agent presets (agents/preset.h) ----------------------------------- */

int perimeter_preset_check(const struct perimeter *p, const char *agent_json,
			   char **canonical, struct wr_error **err)
{
	json_t *a = json_loads(agent_json, 0, NULL);
	struct agents_preset ap;
	int r = agents_preset_parse(a, &ap, err);
	json_decref(a);
	if (r < 0)
		return r;
	if (!p->gateway)
		return wr_error_input(err, EINVAL,
				      "agent preset %s: the server has no model "
				      "gateway (a \"gateway\" or a \"model\" in "
				      "its configuration)",
				      agents_preset_name(ap.kind));
	int wire = -1;
	for (int w = 0; w < METER_WIRE_MAX; w++)
		if (!strcmp(meter_wire_name((enum meter_wire)w),
			    agents_preset_wire(ap.kind)))
			wire = w;
	if (wire < 0 || !p->gateway_settings.upstream[wire].base_url)
		return wr_error_input(err, EINVAL,
				      "agent preset %s speaks the %s API, which "
				      "this server's gateway does not serve",
				      agents_preset_name(ap.kind),
				      agents_preset_wire(ap.kind));
	json_t *o = agents_preset_json(&ap);
	*canonical = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return *canonical ? 0 : wr_error_set(err, ENOMEM, "agent preset");
}

/* The model a preset asks the gateway for: the first its upstream allows,
 * else the built-in agent's, else the preset's own (NULL). */
static const char *preset_model(const struct perimeter *p,
				const struct agents_preset *ap)
{
	for (int w = 0; w < METER_WIRE_MAX; w++) {
		const struct gateway_upstream *u =
		    &p->gateway_settings.upstream[w];
		if (!strcmp(meter_wire_name((enum meter_wire)w),
			    agents_preset_wire(ap->kind)) &&
		    u->n_models)
			return u->models[0];
	}
	const struct provider_config *m = p->cfg.model;
	if (p->cfg.model_configured && m && m->model &&
	    strcmp(agents_preset_wire(ap->kind), "messages"))
		return m->model;
	return NULL;
}

json_t *perimeter_preset_argv(const struct perimeter *p,
			      const char *agent_json)
{
	json_t *a = json_loads(agent_json, 0, NULL);
	struct agents_preset ap;
	int r = agents_preset_parse(a, &ap, NULL);
	json_decref(a);
	if (r < 0)
		return NULL;
	return agents_preset_argv(&ap, preset_model(p, &ap),
				  p->gateway_settings.port);
}

int perimeter_preset_prepare(struct perimeter *p,
			     const struct store_session *s,
			     struct perimeter_sandbox *out,
			     struct wr_error **err)
{
	if (!agents_is_preset(s->agent_json))
		return 0;
	json_t *a = json_loads(s->agent_json, 0, NULL);
	struct agents_preset ap;
	int r = agents_preset_parse(a, &ap, err);
	json_decref(a);
	if (r < 0)
		return r;
	char spec[256];
	agents_preset_package(&ap, spec, sizeof(spec));
	const char *specs[] = {spec};
	struct agents_layer_req req = {
	    .data_dir = p->cfg.data_dir,
	    .warren_bin = p->cfg.warren_bin,
	    .packages = specs,
	    .n_packages = 1,
	    .registry = p->cfg.agents_registry ? p->cfg.agents_registry
						: AGENTS_REGISTRY_DEFAULT,
	    .egress_config = p->build_egress_config,
	};
	int64_t t0 = store_now_ms();
	r = agents_layer_ensure(&req, &out->preset.layer, err);
	if (r < 0)
		return wr_error_wrap(err, "the agents layer of %s %s",
				     agents_preset_name(ap.kind), ap.version);
	agents_preset_mount(&ap, out->preset.mount, sizeof(out->preset.mount));
	out->preset.layer_ms = (double)(store_now_ms() - t0);
	out->preset.on = true;
	return 0;
}

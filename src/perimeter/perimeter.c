/* perimeter.c - the perimeter's life, and a session's sandbox through it
 * (perimeter.h). */
#include "perimeter/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <libgen.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

int perimeter_new(const struct perimeter_config *cfg,
		  const struct perimeter_host *host, struct perimeter **out,
		  struct wr_error **err)
{
	*out = NULL;
	if (!cfg->data_dir || !cfg->st || !host->event || !host->spec_egress)
		return wr_error_set(err, EINVAL,
				    "perimeter: no data directory, store or "
				    "host");
	struct perimeter *p = wr_calloc(1, sizeof(*p));
	if (!p)
		return wr_error_set(err, ENOMEM, "perimeter");
	p->cfg = *cfg;
	p->host = *host;
	pthread_mutex_init(&p->mu, NULL);
	pthread_mutex_init(&p->fs_mu, NULL);
	*out = p;
	return 0;
}

int perimeter_start(struct perimeter *p, struct wr_error **err)
{
	if (!p->cfg.warren_bin)
		return wr_error_set(err, EINVAL, "perimeter: no warren "
						 "executable");
	int r = perimeter_egress_start(p, err);
	if (r < 0)
		return wr_error_wrap(err, "egress proxy");
	r = perimeter_broker_start(p, err);
	if (r < 0)
		return wr_error_wrap(err, "credential broker");
	r = perimeter_gateway_start(p, err);
	if (r < 0)
		return wr_error_wrap(err, "model gateway");
	return 0;
}

void perimeter_free(struct perimeter *p)
{
	if (!p)
		return;
	perimeter_egress_stop(p);
	perimeter_gateway_stop(p);
	broker_stop(p->broker);
	perimeter_fs_close_all(p);
	free(p->build_egress_config);
	pthread_mutex_destroy(&p->mu);
	pthread_mutex_destroy(&p->fs_mu);
	free(p);
}

const char *perimeter_build_egress_config(const struct perimeter *p)
{
	return p ? p->build_egress_config : NULL;
}

int perimeter_relay_paths(struct perimeter *p, const char *session_id,
			  const char *what, char **dir, char **relay,
			  struct wr_error **err)
{
	_cleanup_free_ char *d = NULL, *r = NULL;
	int e = perimeter_fs_path(p, session_id, what, &d, err);
	if (e == 0)
		e = perimeter_fs_path(p, session_id, "bin/" PERIMETER_FS_RELAY,
				      &r, err);
	if (e < 0)
		return wr_error_wrap(err, "%s", what);
	*dir = TAKE_PTR(d);
	*relay = TAKE_PTR(r);
	return 0;
}

void perimeter_sandbox_clear(struct perimeter_sandbox *ps)
{
	free(ps->egress.dir);
	free(ps->egress.relay);
	free(ps->gateway.dir);
	free(ps->gateway.relay);
	free(ps->broker.dir);
	free(ps->broker.client);
	free(ps->preset.layer);
	memset(ps, 0, sizeof(*ps));
}

int perimeter_sandbox_prepare(struct perimeter *p,
			      const struct perimeter_run *r,
			      const struct store_session *s,
			      const char *snapshot_id,
			      struct perimeter_sandbox *out,
			      struct wr_error **err)
{
	memset(out, 0, sizeof(*out));
	/* a session allowed any host reaches it through the egress proxy;
	 * its git reaches the repository's remote through the broker; its
	 * agent reaches the model through the gateway, without a key; an
	 * agent preset's CLI comes in its layer, built once */
	int e = perimeter_egress_prepare(p, s, snapshot_id, out, err);
	if (e == 0)
		e = perimeter_broker_prepare(p, s, out, err);
	if (e == 0)
		e = perimeter_gateway_prepare(p, r, s, out, err);
	if (e == 0)
		e = perimeter_preset_prepare(p, s, out, err);
	if (e < 0) {
		perimeter_sandbox_close(p, s->id);
		perimeter_sandbox_clear(out);
	}
	return e;
}

static int add_bind(struct sandbox_request *req, const char *source,
		    const char *target)
{
	if (req->n_binds >= SBX_MAX_BINDS)
		return -E2BIG;
	req->binds[req->n_binds++] =
	    (struct sandbox_bind){source, target, true};
	return 0;
}

int perimeter_sandbox_request(const struct perimeter_sandbox *ps,
			      struct sandbox_request *req)
{
	static const char *const egress_env[] = {EGRESS_PROXY_ENV};
	int r = 0;
	if (ps->egress.on) {
		if (req->n_env + ARRAY_SIZE(egress_env) > SBX_MAX_ENV)
			return -E2BIG;
		for (size_t i = 0; i < ARRAY_SIZE(egress_env); i++)
			req->env[req->n_env++] = egress_env[i];
		r = add_bind(req, ps->egress.dir, EGRESS_SANDBOX_DIR);
		if (r == 0)
			r = add_bind(req, ps->egress.relay,
				     EGRESS_SANDBOX_RELAY);
	}
	if (r == 0 && ps->broker.on) {
		r = add_bind(req, ps->broker.dir, BROKER_SANDBOX_DIR);
		if (r == 0)
			r = add_bind(req, ps->broker.client,
				     BROKER_SANDBOX_CLIENT);
	}
	if (r == 0 && ps->gateway.on) {
		r = add_bind(req, ps->gateway.dir, GATEWAY_SANDBOX_DIR);
		if (r == 0)
			r = add_bind(req, ps->gateway.relay,
				     GATEWAY_SANDBOX_RELAY);
	}
	if (r == 0 && ps->preset.on)
		r = add_bind(req, ps->preset.layer, ps->preset.mount);
	return r;
}

int perimeter_sandbox_started(struct perimeter *p,
			      const struct perimeter_run *r,
			      const struct perimeter_sandbox *ps,
			      bool origin_set, struct wr_error **err)
{
	/* the relays are part of the baseline: started before it is taken */
	if (ps->egress.on) {
		char *cmd[] = {EGRESS_SANDBOX_RELAY, EGRESS_SANDBOX_SOCKET,
			       NULL};
		if (perimeter_sandbox_relay(p, r->sandbox, cmd, "egress relay",
					    err) < 0)
			return -EIO;
	}
	if (ps->gateway.on && perimeter_gateway_relay(p, r->sandbox, err) < 0)
		return -EIO;
	/* a snapshot built before its origin was set at build time */
	if (ps->broker.on && !origin_set &&
	    perimeter_broker_configure(p, r->sandbox, err) < 0)
		return -EIO;
	return 0;
}

void perimeter_sandbox_close(struct perimeter *p, const char *session_id)
{
	egress_session_close(p->egress, session_id);
	broker_session_close(p->broker, session_id);
	gateway_session_close(p->gateway, session_id);
	perimeter_fs_close(p, session_id);
}

void perimeter_session_end(struct perimeter *p, const char *session_id)
{
	broker_session_end(p->broker, session_id);
}

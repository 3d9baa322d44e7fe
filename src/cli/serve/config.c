/* config.c - the server's configuration file (see config.h). */
#include "cli/serve/config.h"

#include "agents/preset.h"
#include "blobs/blobs.h"
#include "gateway/gateway.h"

#include "security/egress.h"
#include "security/secrets.h"
#include "util/alloc.h"
#include "review/forge.h"
#include "util/fs.h"
#include "util/parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void serve_config_defaults(struct serve_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	struct control_config *c = &cfg->control;
	c->max_sandboxes = 8;
	c->min_free_memory = 256ull << 20;
	c->retry_max = 3;
	c->retry_backoff_ms = 1000;
	c->refresh_check_ms = 60 * 1000;
	c->defaults.memory_bytes = 4ull << 30;
	c->defaults.pids = 4096;
	c->defaults.lifetime_ms = 2 * 3600 * 1000;
	c->defaults.idle_ms = 15 * 60 * 1000;
	c->verify_retries = 2;
	c->model.stream = true;
	c->model.max_retries = 4;
	c->model.retry_backoff_ms = 500;
	c->model.timeout_ms = 120 * 1000;
	c->budget.max_model_calls = 50;
	c->budget.max_wall_ms = 30 * 60 * 1000;
}

void serve_config_clear(struct serve_config *cfg)
{
	free(cfg->listen_addr);
	free(cfg->worker_id);
	free(cfg->agent_json);
	free(cfg->egress_json);
	free(cfg->gateway_json);
	blobs_config_clear(&cfg->blobs);
	free(cfg->agents_registry);
	free(cfg->web_dir);
	if (cfg->store)
		explicit_bzero(cfg->store, strlen(cfg->store)); /* a password */
	free(cfg->store);
	free(cfg->secrets_key_file);
	for (size_t i = 0; i < cfg->n_repos; i++) {
		free(cfg->repos[i].name);
		free(cfg->repos[i].url);
		free(cfg->repos[i].ref);
		free(cfg->repos[i].agent_json);
		free(cfg->repos[i].forge_kind);
		free(cfg->repos[i].forge_api_url);
		free(cfg->repos[i].forge_repo);
		free(cfg->repos[i].forge_base);
		if (cfg->repos[i].forge_token)
			explicit_bzero(cfg->repos[i].forge_token,
				       strlen(cfg->repos[i].forge_token));
		free(cfg->repos[i].forge_token);
		free(cfg->repos[i].cred_username);
		if (cfg->repos[i].cred_password)
			explicit_bzero(cfg->repos[i].cred_password,
				       strlen(cfg->repos[i].cred_password));
		free(cfg->repos[i].cred_password);
		free(cfg->repos[i].cred_password_secret);
		free(cfg->repos[i].cred_ssh_key_file);
		free(cfg->repos[i].cred_known_hosts_file);
	}
	free(cfg->repos);
	free(cfg->model.kind);
	free(cfg->model.base_url);
	free(cfg->model.model);
	if (cfg->model.api_key)
		explicit_bzero(cfg->model.api_key, strlen(cfg->model.api_key));
	free(cfg->model.api_key);
	free(cfg->model.replay_file);
	slack_config_clear(&cfg->slack);
	memset(cfg, 0, sizeof(*cfg));
}

int serve_parse_listen(const char *text, char **addr, uint16_t *port,
		       struct wr_error **err)
{
	const char *colon = strrchr(text, ':');
	if (!colon)
		return wr_error_input(err, EINVAL,
				      "listen '%s': expected ADDR:PORT", text);
	uint64_t p;
	if (wr_parse_uint(colon + 1, 1, 65535, &p) < 0)
		return wr_error_input(err, EINVAL, "listen '%s': bad port",
				      text);
	size_t len = (size_t)(colon - text);
	const char *start = text;
	if (len >= 2 && text[0] == '[' && text[len - 1] == ']') {
		start++;
		len -= 2;
	}
	char *a = len ? wr_strndup(start, len) : wr_strdup("0.0.0.0");
	if (!a)
		return wr_error_set(err, ENOMEM, "listen");
	free(*addr);
	*addr = a;
	*port = (uint16_t)p;
	return 0;
}

char *serve_agent_json(const json_t *v)
{
	json_t *argv = NULL;
	if (json_is_object(v) && json_object_get(v, "preset")) {
		/* checked when the control plane resolves an agent */
		struct agents_preset p;
		if (agents_preset_parse(v, &p, NULL) < 0)
			return NULL;
		json_t *o = agents_preset_json(&p);
		char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		return text;
	}
	if (json_is_object(v) && json_object_size(v) == 1 &&
	    json_is_true(json_object_get(v, "builtin")))
		return wr_strdup("{\"builtin\":true}");
	if (json_is_string(v))
		argv = json_pack("[s, s, s]", "sh", "-c", json_string_value(v));
	else if (json_is_array(v) && json_array_size(v) > 0) {
		size_t i;
		json_t *x;
		json_array_foreach(v, i, x) if (!json_is_string(x)) return NULL;
		argv = json_incref((json_t *)v);
	}
	char *text = argv ? json_dumps(argv, JSON_COMPACT) : NULL;
	json_decref(argv);
	return text;
}

static int bad(struct wr_error **err, const char *path, const char *key,
	       const char *expected)
{
	return wr_error_input(err, EINVAL, "%s: key '%s': expected %s", path,
			      key, expected);
}

static int get_size(const char *path, const char *key, json_t *v, uint64_t *out,
		    struct wr_error **err)
{
	char buf[32];
	const char *t = json_string_value(v);
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		snprintf(buf, sizeof(buf), "%lld",
			 (long long)json_integer_value(v));
		t = buf;
	}
	if (!t || wr_parse_size(t, out) < 0)
		return bad(err, path, key, "a size (\"256M\", \"2G\")");
	return 0;
}

static int get_duration(const char *path, const char *key, json_t *v,
			uint64_t *out, struct wr_error **err)
{
	const char *t = json_string_value(v);
	if (!t || wr_parse_duration(t, out) < 0)
		return bad(err, path, key, "a duration (\"90s\", \"30m\")");
	return 0;
}

static int get_uint(const char *path, const char *key, json_t *v, uint64_t max,
		    uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max)
		return -EINVAL;
	*out = (uint64_t)json_integer_value(v);
	(void)path;
	(void)key;
	return 0;
}

/* "staleness": {"max_age": DURATION, "max_behind": N}, at least one. */
static int load_staleness(const char *path, const char *where, json_t *o,
			  bool *has, int64_t *max_age_ms, int *max_behind,
			  struct wr_error **err)
{
	static const char shape[] =
	    "{\"max_age\": DURATION, \"max_behind\": COMMITS}";
	if (!json_is_object(o) || json_object_size(o) == 0)
		return bad(err, path, where, shape);
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		char full[96];
		snprintf(full, sizeof(full), "%s.%s", where, key);
		if (!strcmp(key, "max_age")) {
			uint64_t ms;
			int r = get_duration(path, full, v, &ms, err);
			if (r < 0)
				return r;
			if (ms == 0)
				return bad(err, path, full,
					   "a positive duration");
			*max_age_ms = (int64_t)ms;
		} else if (!strcmp(key, "max_behind")) {
			uint64_t n;
			if (get_uint(path, full, v, 1000000, &n) < 0 || n == 0)
				return bad(err, path, full,
					   "a number of commits, 1..1000000");
			*max_behind = (int)n;
		} else {
			return wr_error_input(err, EINVAL,
					      "%s: unknown key '%s'", path,
					      full);
		}
	}
	*has = true;
	return 0;
}

static int load_limits(const char *path, json_t *o, struct serve_config *cfg,
		       struct wr_error **err)
{
	if (!json_is_object(o))
		return bad(err, path, "limits", "an object");
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		uint64_t x;
		int r = 0;
		if (!strcmp(key, "max_sandboxes")) {
			if (get_uint(path, key, v, 100000, &x) < 0 || !x)
				return bad(err, path, "limits.max_sandboxes",
					   "a positive integer");
			cfg->control.max_sandboxes = (unsigned)x;
		} else if (!strcmp(key, "max_per_user")) {
			if (get_uint(path, key, v, 100000, &x) < 0)
				return bad(err, path, "limits.max_per_user",
					   "an integer");
			cfg->control.max_per_user = (unsigned)x;
		} else if (!strcmp(key, "min_free_memory")) {
			r = get_size(path, "limits.min_free_memory", v,
				     &cfg->control.min_free_memory, err);
		} else if (!strcmp(key, "max_output")) {
			r = get_size(path, "limits.max_output", v,
				     &cfg->control.max_output_bytes, err);
			if (r == 0 && cfg->control.max_output_bytes < 1024)
				r = bad(err, path, "limits.max_output",
					"a size of at least 1K");
		} else if (!strcmp(key, "default") || !strcmp(key, "max")) {
			/* the keys given replace the built-in values; the
			 * others stay */
			bool def = !strcmp(key, "default");
			struct control_limits l;
			struct control_limits *dst =
			    def ? &cfg->control.defaults
				: &cfg->control.maximums;
			r = control_limits_from_json(
			    def ? "limits.default" : "limits.max", v, &l, err);
			if (r == 0) {
				if (l.millicpus)
					dst->millicpus = l.millicpus;
				if (l.memory_bytes)
					dst->memory_bytes = l.memory_bytes;
				if (l.pids)
					dst->pids = l.pids;
				if (l.disk_bytes)
					dst->disk_bytes = l.disk_bytes;
				if (l.inodes)
					dst->inodes = l.inodes;
				if (l.lifetime_ms)
					dst->lifetime_ms = l.lifetime_ms;
				if (l.idle_ms)
					dst->idle_ms = l.idle_ms;
			}
		} else {
			return wr_error_input(err, EINVAL,
					      "%s: unknown key 'limits.%s'",
					      path, key);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

static int read_secret_file(const char *path, const char *key,
			    const char *file, char **out,
			    struct wr_error **err);

/* repositories[i].forge: where approval opens a pull request. */
static int load_forge(const char *path, const char *where, json_t *o,
		      struct serve_repo *r, struct wr_error **err)
{
	if (!json_is_object(o))
		return bad(err, path, "forge", "an object");
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		char **dst = !strcmp(key, "kind")      ? &r->forge_kind
			     : !strcmp(key, "api_url") ? &r->forge_api_url
			     : !strcmp(key, "repo")    ? &r->forge_repo
			     : !strcmp(key, "base")    ? &r->forge_base
						       : NULL;
		if (dst) {
			if (!json_is_string(v))
				return bad(err, path, key, "a string");
			free(*dst);
			*dst = wr_strdup(json_string_value(v));
			if (!*dst)
				return wr_error_set(err, ENOMEM, "config");
		} else if (!strcmp(key, "token_file")) {
			if (!json_is_string(v))
				return bad(err, path, key, "a path");
			free(r->forge_token);
			r->forge_token = NULL;
			int rr = read_secret_file(path, "forge.token_file",
						  json_string_value(v),
						  &r->forge_token, err);
			if (rr < 0)
				return rr;
		} else {
			return wr_error_input(err, EINVAL,
					      "%s: unknown key '%s.forge.%s'",
					      path, where, key);
		}
	}
	struct forge_config fc = {
	    .kind = r->forge_kind,
	    .api_url = r->forge_api_url,
	    .repo = r->forge_repo,
	    .token = r->forge_token,
	    .base_branch = r->forge_base,
	};
	int rr = forge_config_check(&fc, err);
	if (rr < 0)
		return wr_error_wrap(err, "%s: %s.forge", path, where);
	r->has_forge = true;
	return 0;
}

/* repositories[i].credentials: the remote's, for the credential broker.
 * https: a username and a password (or token) from a file or a secret;
 * ssh: a key file (and a known_hosts file). Nothing of it may break the
 * line-based credential protocol or the quoting of the ssh command. */
static int load_credentials(const char *path, const char *where, json_t *o,
			    struct serve_repo *r, struct wr_error **err)
{
	if (!json_is_object(o))
		return bad(err, path, "credentials", "an object");
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		char **dst =
		    !strcmp(key, "username")	      ? &r->cred_username
		    : !strcmp(key, "password_secret") ? &r->cred_password_secret
		    : !strcmp(key, "ssh_key_file")    ? &r->cred_ssh_key_file
		    : !strcmp(key, "known_hosts_file")
			? &r->cred_known_hosts_file
			: NULL;
		if (dst) {
			const char *t = json_string_value(v);
			if (!t || !*t || strpbrk(t, "\n\r'"))
				return bad(err, path, key,
					   "a string without quotes or "
					   "newlines");
			free(*dst);
			*dst = wr_strdup(t);
			if (!*dst)
				return wr_error_set(err, ENOMEM, "config");
		} else if (!strcmp(key, "password_file")) {
			if (!json_is_string(v))
				return bad(err, path, key, "a path");
			if (r->cred_password)
				explicit_bzero(r->cred_password,
					       strlen(r->cred_password));
			free(r->cred_password);
			r->cred_password = NULL;
			int rr = read_secret_file(
			    path, "credentials.password_file",
			    json_string_value(v), &r->cred_password, err);
			if (rr < 0)
				return rr;
			if (!*r->cred_password ||
			    strpbrk(r->cred_password, "\n\r"))
				return wr_error_input(
				    err, EINVAL,
				    "%s: %s.credentials.password_file: one "
				    "line expected",
				    path, where);
		} else {
			return wr_error_input(err, EINVAL,
					      "%s: unknown key "
					      "'%s.credentials.%s'",
					      path, where, key);
		}
	}
	bool https = r->cred_username &&
		     (!!r->cred_password != !!r->cred_password_secret);
	bool ssh = r->cred_ssh_key_file && !r->cred_username &&
		   !r->cred_password && !r->cred_password_secret;
	if (!https && !ssh)
		return wr_error_input(err, EINVAL,
				      "%s: %s.credentials: expected "
				      "{\"username\", \"password_file\" or "
				      "\"password_secret\"} or "
				      "{\"ssh_key_file\"[, "
				      "\"known_hosts_file\"]}",
				      path, where);
	if (r->cred_password_secret &&
	    !secrets_name_valid(r->cred_password_secret))
		return wr_error_input(err, EINVAL,
				      "%s: %s.credentials.password_secret: "
				      "not a secret name ([A-Z_][A-Z0-9_]*)",
				      path, where);
	r->has_credentials = true;
	return 0;
}

static int load_repo(const char *path, size_t i, json_t *o,
		     struct serve_repo *r, struct wr_error **err)
{
	char where[64];
	snprintf(where, sizeof(where), "repositories[%zu]", i);
	if (!json_is_object(o))
		return bad(err, path, where, "an object");
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		char **dst = !strcmp(key, "name")  ? &r->name
			     : !strcmp(key, "url") ? &r->url
			     : !strcmp(key, "ref") ? &r->ref
						   : NULL;
		if (dst) {
			if (!json_is_string(v))
				return bad(err, path, key, "a string");
			*dst = wr_strdup(json_string_value(v));
			if (!*dst)
				return wr_error_set(err, ENOMEM, "config");
		} else if (!strcmp(key, "refresh")) {
			int rr =
			    get_duration(path, key, v, &r->refresh_ms, err);
			if (rr < 0)
				return rr;
		} else if (!strcmp(key, "forge")) {
			int rr = load_forge(path, where, v, r, err);
			if (rr < 0)
				return rr;
		} else if (!strcmp(key, "staleness")) {
			char at[96];
			snprintf(at, sizeof(at), "%s.staleness", where);
			int rr = load_staleness(path, at, v, &r->has_staleness,
						&r->stale_max_age_ms,
						&r->stale_max_behind, err);
			if (rr < 0)
				return rr;
		} else if (!strcmp(key, "credentials")) {
			int rr = load_credentials(path, where, v, r, err);
			if (rr < 0)
				return rr;
		} else if (!strcmp(key, "agent")) {
			r->agent_json = serve_agent_json(v);
			if (!r->agent_json)
				return bad(err, path, key,
					   "a string or an array of strings");
		} else {
			return wr_error_input(err, EINVAL,
					      "%s: unknown key '%s.%s'", path,
					      where, key);
		}
	}
	if (!r->url)
		return wr_error_input(err, EINVAL, "%s: %s: 'url' is required",
				      path, where);
	/* the broker finds a session's credentials by its repository's
	 * name */
	if (r->has_credentials && !r->name)
		return wr_error_input(err, EINVAL,
				      "%s: %s: 'credentials' need a 'name'",
				      path, where);
	/* and the scheduler its staleness policy */
	if (r->has_staleness && !r->name)
		return wr_error_input(err, EINVAL,
				      "%s: %s: 'staleness' needs a 'name'",
				      path, where);
	return 0;
}

/* A secret from a file: the file must not be readable by group or others
 * (it is the model API's key: the server holds it, no sandbox ever does). */
static int read_secret_file(const char *path, const char *key,
			    const char *file, char **out,
			    struct wr_error **err)
{
	int r = wr_read_key_file(file, out);
	if (r == -EPERM)
		return wr_error_input(err, EPERM,
				      "%s: %s %s is readable by others (chmod "
				      "600 it)",
				      path, key, file);
	if (r < 0)
		return wr_error_input(err, -r, "%s: %s %s", path, key, file);
	return 0;
}

int serve_prices(const char *path, const char *key, const json_t *v,
		 struct meter_prices *out, struct wr_error **err)
{
	json_t *p = json_object_get(v, "prompt");
	json_t *q = json_object_get(v, "completion");
	json_t *k = json_object_get(v, "cached");
	size_t keys = 2 + (k != NULL);
	if (!json_is_object(v) || !json_is_number(p) || !json_is_number(q) ||
	    (k && !json_is_number(k)) || json_object_size(v) != keys ||
	    json_number_value(p) < 0 || json_number_value(q) < 0 ||
	    json_number_value(k) < 0)
		return bad(err, path, key,
			   "{\"prompt\": N, \"completion\": N, \"cached\": N} "
			   "per million tokens (cached is optional)");
	out->prompt = json_number_value(p);
	out->completion = json_number_value(q);
	out->cached = json_number_value(k);
	return 0;
}

static int model_string(const char *path, const char *key, json_t *v,
			char **dst, struct wr_error **err)
{
	if (!json_is_string(v) || !json_string_length(v))
		return bad(err, path, key, "a non-empty string");
	free(*dst);
	*dst = wr_strdup(json_string_value(v));
	return *dst ? 0 : wr_error_set(err, ENOMEM, "config");
}

static int load_model(const char *path, json_t *o, struct serve_config *cfg,
		      struct wr_error **err)
{
	if (!json_is_object(o))
		return bad(err, path, "model", "an object");
	struct serve_model *m = &cfg->model;
	struct control_config *c = &cfg->control;
	const char *key;
	json_t *v;
	int r = 0;
	json_object_foreach(o, key, v)
	{
		uint64_t x;
		if (!strcmp(key, "provider"))
			r = model_string(path, "model.provider", v, &m->kind,
					 err);
		else if (!strcmp(key, "base_url"))
			r = model_string(path, "model.base_url", v,
					 &m->base_url, err);
		else if (!strcmp(key, "model"))
			r = model_string(path, "model.model", v, &m->model, err);
		else if (!strcmp(key, "replay"))
			r = model_string(path, "model.replay", v,
					 &m->replay_file, err);
		else if (!strcmp(key, "api_key_file")) {
			if (!json_is_string(v))
				return bad(err, path, "model.api_key_file",
					   "a path");
			free(m->api_key);
			m->api_key = NULL;
			r = read_secret_file(path, "model.api_key_file",
					     json_string_value(v),
					     &m->api_key, err);
		} else if (!strcmp(key, "api_key_env")) {
			const char *val = json_is_string(v)
					      ? getenv(json_string_value(v))
					      : NULL;
			if (!val || !*val)
				return wr_error_input(
				    err, EINVAL,
				    "%s: model.api_key_env: the variable is "
				    "not set",
				    path);
			free(m->api_key);
			m->api_key = wr_strdup(val);
		} else if (!strcmp(key, "stream")) {
			if (!json_is_boolean(v))
				return bad(err, path, "model.stream",
					   "true or false");
			c->model.stream = json_is_true(v);
		} else if (!strcmp(key, "retries")) {
			if (get_uint(path, key, v, 20, &x) < 0)
				return bad(err, path, "model.retries",
					   "an integer 0..20");
			c->model.max_retries = (unsigned)x;
		} else if (!strcmp(key, "timeout")) {
			r = get_duration(path, "model.timeout", v,
					 &c->model.timeout_ms, err);
		} else if (!strcmp(key, "prices")) {
			r = serve_prices(path, "model.prices", v, &c->prices,
					 err);
		} else if (!strcmp(key, "budget")) {
			const char *bk;
			json_t *bv;
			if (!json_is_object(v))
				return bad(err, path, "model.budget",
					   "an object");
			json_object_foreach(v, bk, bv)
			{
				if (!strcmp(bk, "model_calls")) {
					if (get_uint(path, bk, bv, 100000,
						     &x) < 0)
						return bad(err, path,
							   "model.budget."
							   "model_calls",
							   "an integer");
					c->budget.max_model_calls = (unsigned)x;
				} else if (!strcmp(bk, "tokens")) {
					if (get_uint(path, bk, bv, UINT64_MAX,
						     &x) < 0)
						return bad(err, path,
							   "model.budget.tokens",
							   "an integer");
					c->budget.max_tokens = x;
				} else if (!strcmp(bk, "cost")) {
					if (!json_is_number(bv) ||
					    json_number_value(bv) < 0)
						return bad(err, path,
							   "model.budget.cost",
							   "a number");
					c->budget.max_cost =
					    json_number_value(bv);
				} else if (!strcmp(bk, "wall")) {
					r = get_duration(path,
							 "model.budget.wall",
							 bv,
							 &c->budget.max_wall_ms,
							 err);
					if (r < 0)
						return r;
				} else {
					return wr_error_input(
					    err, EINVAL,
					    "%s: unknown key 'model.budget.%s'",
					    path, bk);
				}
			}
		} else {
			return wr_error_input(err, EINVAL,
					      "%s: unknown key 'model.%s'", path,
					      key);
		}
		if (r < 0)
			return r;
	}
	if (!m->kind)
		m->kind = wr_strdup(m->replay_file ? "replay" : "openai");
	if (!strcmp(m->kind, "replay") ? !m->replay_file
				       : strcmp(m->kind, "openai") ||
					     !m->base_url || !m->model)
		return wr_error_input(err, EINVAL,
				      "%s: model: provider \"openai\" needs "
				      "base_url and model; \"replay\" needs "
				      "replay",
				      path);
	c->model_configured = true;
	c->model.kind = m->kind;
	c->model.base_url = m->base_url;
	c->model.model = m->model;
	c->model.api_key = m->api_key;
	c->model.replay_file = m->replay_file;
	return 0;
}

/* "api": what one client may hold (api/api.h). */
static int load_api(const char *path, json_t *v, struct serve_config *cfg,
		    struct wr_error **err)
{
	if (!json_is_object(v))
		return bad(err, path, "api",
			   "{\"max_per_client\": N, \"header_timeout\": "
			   "DURATION, \"body_timeout\": DURATION}");
	const char *key;
	json_t *x;
	json_object_foreach(v, key, x)
	{
		uint64_t n;
		if (!strcmp(key, "max_per_client")) {
			if (get_uint(path, key, x, 100000, &n) < 0 || n == 0)
				return bad(err, path, "api.max_per_client",
					   "an integer 1..100000");
			cfg->api_max_per_client = (unsigned)n;
		} else if (!strcmp(key, "header_timeout") ||
			   !strcmp(key, "body_timeout")) {
			bool header = key[0] == 'h';
			if (get_duration(path,
					 header ? "api.header_timeout"
						: "api.body_timeout",
					 x, &n, err) < 0)
				return -EINVAL;
			if (n == 0)
				return bad(err, path, key, "a duration above 0");
			if (header)
				cfg->api_header_timeout_ms = n;
			else
				cfg->api_body_timeout_ms = n;
		} else {
			return wr_error_input(
			    err, EINVAL,
			    "%s: api: unknown key '%s' (max_per_client, "
			    "header_timeout, body_timeout)",
			    path, key);
		}
	}
	return 0;
}

/* "sandbox": {"backend": "native" | "gvisor"}. */
static int load_sandbox(const char *path, json_t *v,
			struct control_config *ctl, struct wr_error **err)
{
	const char *key;
	json_t *x;
	if (!json_is_object(v))
		return bad(err, path, "sandbox",
			   "{\"backend\": \"native\" or \"gvisor\"}");
	json_object_foreach(v, key, x)
	{
		if (strcmp(key, "backend"))
			return wr_error_input(
			    err, EINVAL,
			    "%s: sandbox: unknown key '%s' (backend)", path,
			    key);
		if (!json_is_string(x) ||
		    sandbox_backend_parse(json_string_value(x),
					  &ctl->backend) < 0)
			return bad(err, path, "sandbox.backend",
				   "\"native\" or \"gvisor\"");
		if (sandbox_backend_check(ctl->backend, err) < 0)
			return wr_error_wrap(err, "%s: sandbox.backend", path);
	}
	return 0;
}

/* "review": the limits of a change (review/evidence.h). */
static int load_review(const char *path, json_t *v,
		       struct evidence_limits *lim, struct wr_error **err)
{
	if (!json_is_object(v))
		return bad(err, path, "review",
			   "{\"max_objects\": SIZE, \"max_files\": N, "
			   "\"max_diff\": SIZE}");
	const char *key;
	json_t *x;
	json_object_foreach(v, key, x)
	{
		uint64_t n;
		if (!strcmp(key, "max_objects")) {
			if (get_size(path, "review.max_objects", x,
				     &lim->max_object_bytes, err) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "max_diff")) {
			if (get_size(path, "review.max_diff", x,
				     &lim->max_diff_bytes, err) < 0)
				return -EINVAL;
		} else if (!strcmp(key, "max_files")) {
			if (get_uint(path, key, x, 10000000, &n) < 0 || n == 0)
				return bad(err, path, "review.max_files",
					   "an integer 1..10000000");
			lim->max_files = n;
		} else {
			return wr_error_input(
			    err, EINVAL,
			    "%s: review: unknown key '%s' (max_objects, "
			    "max_files, max_diff)",
			    path, key);
		}
	}
	return 0;
}

/* "worker": {"id", "lease", "renew", "max_sandboxes_total"}, what
 * --role worker uses (sched/lease.c). */
static int load_worker(const char *path, json_t *v, struct serve_config *cfg,
		       struct wr_error **err)
{
	static const char expect[] =
	    "{\"id\": NAME, \"lease\": DURATION, \"renew\": DURATION, "
	    "\"max_sandboxes_total\": N}";
	if (!json_is_object(v))
		return bad(err, path, "worker", expect);
	const char *k;
	json_t *x;
	json_object_foreach(v, k, x)
	{
		int r = 0;
		if (!strcmp(k, "id")) {
			const char *id = json_string_value(x);
			if (!id || !id[0] || strlen(id) >= STORE_ID_MAX ||
			    strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL"
				       "MNOPQRSTUVWXYZ0123456789.-_:") !=
				strlen(id))
				return bad(err, path, "worker.id",
					   "a name of letters, digits and "
					   ".-_: (at most 63)");
			free(cfg->worker_id);
			cfg->worker_id = wr_strdup(id);
			if (!cfg->worker_id)
				return wr_error_set(err, ENOMEM, "config");
		} else if (!strcmp(k, "lease")) {
			r = get_duration(path, "worker.lease", x,
					 &cfg->control.lease_ms, err);
			if (r == 0 && cfg->control.lease_ms < 1000)
				r = bad(err, path, "worker.lease",
					"a duration of at least 1s");
		} else if (!strcmp(k, "renew")) {
			r = get_duration(path, "worker.renew", x,
					 &cfg->control.renew_ms, err);
			if (r == 0 && cfg->control.renew_ms < 100)
				r = bad(err, path, "worker.renew",
					"a duration of at least 100ms");
		} else if (!strcmp(k, "max_sandboxes_total")) {
			uint64_t n = 0;
			if (get_uint(path, "worker.max_sandboxes_total", x,
				     1000000, &n) < 0)
				return bad(err, path,
					   "worker.max_sandboxes_total",
					   "an integer 0..1000000");
			cfg->control.max_sandboxes_total = (unsigned)n;
		} else {
			return bad(err, path, "worker", expect);
		}
		if (r < 0)
			return r;
	}
	if (cfg->control.lease_ms && cfg->control.renew_ms &&
	    cfg->control.renew_ms * 2 > cfg->control.lease_ms)
		return bad(err, path, "worker.renew",
			   "at most half of worker.lease");
	return 0;
}

int serve_config_load(const char *path, struct serve_config *cfg,
		      struct wr_error **err)
{
	json_error_t jerr;
	json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	/* jansson fails some allocations without a message: not the
	 * file's fault (exit 1, not 2) */
	if (!root && (json_error_code(&jerr) == json_error_out_of_memory ||
		      !jerr.text[0]))
		return wr_error_set(err, ENOMEM, "%s", path);
	if (!root)
		return wr_error_input(err, EINVAL, "%s:%d:%d: %s", path,
				      jerr.line, jerr.column, jerr.text);
	int r = 0;
	if (!json_is_object(root)) {
		r = wr_error_input(err, EINVAL, "%s: expected a JSON object",
				   path);
		goto out;
	}
	const char *key;
	json_t *v;
	json_object_foreach(root, key, v)
	{
		if (!strcmp(key, "listen")) {
			if (!json_is_string(v)) {
				r = bad(err, path, key, "\"ADDR:PORT\"");
				goto out;
			}
			r = serve_parse_listen(json_string_value(v),
					       &cfg->listen_addr, &cfg->port,
					       err);
		} else if (!strcmp(key, "limits")) {
			r = load_limits(path, v, cfg, err);
		} else if (!strcmp(key, "retry")) {
			json_t *m = json_object_get(v, "max");
			json_t *b = json_object_get(v, "backoff");
			uint64_t x;
			if (!json_is_object(v) ||
			    json_object_size(v) != (size_t)(!!m + !!b)) {
				r = bad(err, path, key,
					"{\"max\": N, \"backoff\": DURATION}");
				goto out;
			}
			if (m) {
				if (get_uint(path, key, m, 100, &x) < 0) {
					r = bad(err, path, "retry.max",
						"an integer 0..100");
					goto out;
				}
				cfg->control.retry_max = (unsigned)x;
			}
			if (b)
				r = get_duration(path, "retry.backoff", b,
						 &cfg->control.retry_backoff_ms,
						 err);
		} else if (!strcmp(key, "agent")) {
			free(cfg->agent_json);
			cfg->agent_json = serve_agent_json(v);
			if (!cfg->agent_json)
				r = bad(err, path, key,
					"a string or an array of strings");
		} else if (!strcmp(key, "model")) {
			r = load_model(path, v, cfg, err);
		} else if (!strcmp(key, "verify")) {
			json_t *rt = json_object_get(v, "retries");
			uint64_t x;
			if (!json_is_object(v) || json_object_size(v) != 1 ||
			    get_uint(path, key, rt, 20, &x) < 0) {
				r = bad(err, path, key, "{\"retries\": 0..20}");
				goto out;
			}
			cfg->control.verify_retries = (unsigned)x;
		} else if (!strcmp(key, "builds")) {
			json_t *h = json_object_get(v, "hung_after");
			json_t *par = json_object_get(v, "parallel");
			if (!json_is_object(v) ||
			    json_object_size(v) != (size_t)!!h + !!par) {
				r = bad(err, path, key,
					"{\"hung_after\": DURATION, "
					"\"parallel\": N}");
				goto out;
			}
			if (h)
				r = get_duration(
				    path, "builds.hung_after", h,
				    &cfg->control.build_hung_after_ms, err);
			if (r == 0 && h && !cfg->control.build_hung_after_ms)
				r = bad(err, path, "builds.hung_after",
					"a duration above 0");
			uint64_t np = 0;
			if (r == 0 && par &&
			    (get_uint(path, "builds.parallel", par,
				      CONTROL_BUILD_PARALLEL_MAX, &np) < 0 ||
			     np == 0))
				r = bad(err, path, "builds.parallel",
					"an integer 1..8");
			if (r == 0 && par)
				cfg->control.build_parallel = (unsigned)np;
		} else if (!strcmp(key, "worker")) {
			r = load_worker(path, v, cfg, err);
		} else if (!strcmp(key, "api")) {
			r = load_api(path, v, cfg, err);
		} else if (!strcmp(key, "review")) {
			r = load_review(path, v, &cfg->control.evidence, err);
		} else if (!strcmp(key, "sandbox")) {
			r = load_sandbox(path, v, &cfg->control, err);
		} else if (!strcmp(key, "egress")) {
			/* checked here, where the file is named; the proxy
			 * takes it again when the control plane starts */
			struct egress_rules *rules = NULL;
			r = egress_rules_new(v, &rules, err);
			egress_rules_free(rules);
			if (r < 0) {
				wr_error_wrap(err, "%s", path);
				goto out;
			}
			free(cfg->egress_json);
			cfg->egress_json = json_dumps(v, JSON_COMPACT);
			if (!cfg->egress_json)
				r = wr_error_set(err, ENOMEM, "config");
			cfg->control.egress_json = cfg->egress_json;
		} else if (!strcmp(key, "agents")) {
			/* {"registry": URL}: where agent presets come from */
			const char *reg = json_string_value(
			    json_object_get(v, "registry"));
			if (!json_is_object(v) || json_object_size(v) != 1 ||
			    !reg ||
			    (strncmp(reg, "http://", 7) &&
			     strncmp(reg, "https://", 8))) {
				r = bad(err, path, "agents",
					"{\"registry\": an http:// or https:// "
					"URL}");
				goto out;
			}
			free(cfg->agents_registry);
			cfg->agents_registry = wr_strdup(reg);
			if (!cfg->agents_registry)
				r = wr_error_set(err, ENOMEM, "config");
			cfg->control.agents_registry = cfg->agents_registry;
		} else if (!strcmp(key, "gateway")) {
			/* checked here, where the file is named (key files
			 * included); the control plane takes it again */
			struct gateway_settings gs = {0};
			r = gateway_settings_parse(v, &gs, err);
			gateway_settings_clear(&gs);
			if (r < 0) {
				wr_error_wrap(err, "%s", path);
				goto out;
			}
			free(cfg->gateway_json);
			cfg->gateway_json = json_dumps(v, JSON_COMPACT);
			if (!cfg->gateway_json)
				r = wr_error_set(err, ENOMEM, "config");
			cfg->control.gateway_json = cfg->gateway_json;
		} else if (!strcmp(key, "blobs")) {
			/* the registry of blobs (blobs/blobs.h): checked here,
			 * the password file included */
			struct blobs_config bc;
			r = blobs_config_parse(v, &bc, err);
			if (r < 0) {
				wr_error_wrap(err, "%s", path);
				goto out;
			}
			blobs_config_clear(&cfg->blobs);
			cfg->blobs = bc;
			cfg->has_blobs = true;
		} else if (!strcmp(key, "staleness")) {
			r = load_staleness(path, key, v, &cfg->has_staleness,
					   &cfg->stale_max_age_ms,
					   &cfg->stale_max_behind, err);
		} else if (!strcmp(key, "store")) {
			const char *url = json_string_value(v);
			if (!url || !*url) {
				r = bad(err, path, key,
					"a PostgreSQL URL (\"postgres://...\"), "
					"\"sqlite:PATH\" or a path");
				goto out;
			}
			free(cfg->store);
			cfg->store = wr_strdup(url);
			if (!cfg->store)
				r = wr_error_set(err, ENOMEM, "config");
		} else if (!strcmp(key, "secrets_key_file")) {
			/* checked (and set for the process) by main */
			const char *file = json_string_value(v);
			if (!file || file[0] != '/') {
				r = bad(err, path, key,
					"the absolute path of a 32-byte key "
					"file (0400 or 0600)");
				goto out;
			}
			free(cfg->secrets_key_file);
			cfg->secrets_key_file = wr_strdup(file);
			if (!cfg->secrets_key_file)
				r = wr_error_set(err, ENOMEM, "config");
		} else if (!strcmp(key, "web_dir")) {
			if (!json_is_string(v)) {
				r = bad(err, path, key,
					"a directory path, or \"\" for no web "
					"UI");
				goto out;
			}
			free(cfg->web_dir);
			cfg->web_dir = wr_strdup(json_string_value(v));
			if (!cfg->web_dir)
				r = wr_error_set(err, ENOMEM, "config");
		} else if (!strcmp(key, "slack")) {
			struct slack_config slack;
			r = slack_config_from_json(path, v, &slack, err);
			if (r == 0) {
				slack_config_clear(&cfg->slack);
				cfg->slack = slack;
				cfg->has_slack = true;
			}
		} else if (!strcmp(key, "refresh_check")) {
			r = get_duration(path, key, v,
					 &cfg->control.refresh_check_ms, err);
		} else if (!strcmp(key, "repositories")) {
			if (!json_is_array(v)) {
				r = bad(err, path, key, "an array");
				goto out;
			}
			size_t n = json_array_size(v);
			cfg->repos = wr_calloc(n ? n : 1, sizeof(*cfg->repos));
			if (!cfg->repos) {
				r = wr_error_set(err, ENOMEM, "config");
				goto out;
			}
			for (size_t i = 0; i < n && r == 0; i++) {
				cfg->n_repos = i + 1;
				r = load_repo(path, i, json_array_get(v, i),
					      &cfg->repos[i], err);
			}
		} else {
			r = wr_error_input(err, EINVAL, "%s: unknown key '%s'",
					   path, key);
		}
		if (r < 0)
			goto out;
	}
out:
	json_decref(root);
	return r;
}

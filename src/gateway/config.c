/* config.c - the gateway's settings: the "gateway" object of the server's
 * configuration, or the built-in agent's model (gateway.h). */
#include "gateway/gateway.h"

#include "security/secrets.h"
#include "util/alloc.h"
#include "util/fs.h"
#include "util/parse.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

static int bad(struct wr_error **err, const char *key, const char *expected)
{
	return wr_error_input(err, EINVAL, "gateway.%s: expected %s", key,
			      expected);
}

static int set_string(char **dst, const char *v, struct wr_error **err)
{
	char *s = wr_strdup(v);
	if (!s)
		return wr_error_set(err, ENOMEM, "gateway");
	free(*dst);
	*dst = s;
	return 0;
}

/* A base URL: http:// or https://, no query, no trailing '/'. */
static int base_url(const char *key, const json_t *v, char **dst,
		    struct wr_error **err)
{
	const char *t = json_string_value(v);
	if (!t || (strncmp(t, "http://", 7) && strncmp(t, "https://", 8)) ||
	    strpbrk(t, "?# \t\r\n") || strlen(t) > 2048)
		return bad(err, key, "an http:// or https:// URL");
	int r = set_string(dst, t, err);
	size_t len = r == 0 ? strlen(*dst) : 0;
	while (len > 8 && (*dst)[len - 1] == '/')
		(*dst)[--len] = '\0';
	return r;
}

/* A key as it goes into a header: printable, no spaces. */
static bool key_ok(const char *k)
{
	if (!*k)
		return false;
	for (const unsigned char *p = (const unsigned char *)k; *p; p++)
		if (*p <= ' ' || *p >= 0x7f)
			return false;
	return true;
}

static void key_free(char **k)
{
	if (*k) {
		sodium_memzero(*k, strlen(*k));
		free(*k);
		*k = NULL;
	}
}

static int upstream_key(const char *where, const char *key, const json_t *v,
			struct gateway_upstream *u, struct wr_error **err)
{
	const char *t = json_string_value(v);
	char name[96];
	snprintf(name, sizeof(name), "%s.%s", where, key);
	if (!t || !*t)
		return bad(err, name, "a non-empty string");
	if (u->api_key || u->api_key_secret)
		return wr_error_input(err, EINVAL,
				      "gateway.%s: one of api_key_file, "
				      "api_key_env, api_key_secret",
				      where);
	if (!strcmp(key, "api_key_secret")) {
		if (!secrets_name_valid(t))
			return bad(err, name,
				   "a secret's name ([A-Z0-9_], not starting "
				   "with a digit)");
		return set_string(&u->api_key_secret, t, err);
	}
	char *k = NULL;
	if (!strcmp(key, "api_key_file")) {
		int r = wr_read_key_file(t, &k);
		if (r == -EPERM)
			return wr_error_input(err, EPERM,
					      "gateway.%s: %s is readable by "
					      "others (chmod 600 it)",
					      name, t);
		if (r < 0)
			return wr_error_input(err, -r, "gateway.%s: %s", name,
					      t);
	} else {
		const char *val = getenv(t);
		if (!val || !*val)
			return wr_error_input(err, EINVAL,
					      "gateway.%s: the variable %s is "
					      "not set",
					      name, t);
		k = wr_strdup(val);
		if (!k)
			return wr_error_set(err, ENOMEM, "gateway");
	}
	if (!key_ok(k)) {
		key_free(&k);
		return wr_error_input(err, EINVAL,
				      "gateway.%s: the key holds spaces or "
				      "control characters",
				      name);
	}
	u->api_key = k;
	return 0;
}

static int upstream_models(const char *where, const json_t *v,
			   struct gateway_upstream *u, struct wr_error **err)
{
	char name[96];
	snprintf(name, sizeof(name), "%s.models", where);
	size_t n = json_array_size(v);
	if (!json_is_array(v) || n == 0 || n > GATEWAY_MODELS_MAX)
		return bad(err, name, "an array of 1 to 256 model names");
	u->models = wr_calloc(n, sizeof(char *));
	if (!u->models)
		return wr_error_set(err, ENOMEM, "gateway");
	for (size_t i = 0; i < n; i++) {
		const char *m = json_string_value(json_array_get(v, i));
		if (!m || !*m || strlen(m) > 256)
			return bad(err, name, "model names (strings)");
		u->models[i] = wr_strdup(m);
		if (!u->models[i])
			return wr_error_set(err, ENOMEM, "gateway");
		u->n_models = i + 1;
	}
	return 0;
}

static int upstream_parse(const char *wire, const json_t *o,
			  struct gateway_upstream *u, struct wr_error **err)
{
	char where[64];
	snprintf(where, sizeof(where), "upstreams.%s", wire);
	if (!json_is_object(o))
		return bad(err, where, "an object");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)o, key, v)
	{
		char name[96];
		snprintf(name, sizeof(name), "%s.%s", where, key);
		int r;
		if (!strcmp(key, "base_url"))
			r = base_url(name, v, &u->base_url, err);
		else if (!strcmp(key, "api_key_file") ||
			 !strcmp(key, "api_key_env") ||
			 !strcmp(key, "api_key_secret"))
			r = upstream_key(where, key, v, u, err);
		else if (!strcmp(key, "models"))
			r = upstream_models(where, v, u, err);
		else
			r = wr_error_input(err, EINVAL,
					   "gateway: unknown key '%s'", name);
		if (r < 0)
			return r;
	}
	if (!u->base_url)
		return wr_error_input(err, EINVAL, "gateway.%s: base_url is "
				      "missing", where);
	return 0;
}

static int upstreams_parse(const json_t *o, struct gateway_settings *s,
			   struct wr_error **err)
{
	if (!json_is_object(o) || json_object_size(o) == 0)
		return bad(err, "upstreams",
			   "an object of \"chat_completions\", \"responses\" "
			   "and \"messages\"");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)o, key, v)
	{
		int w = -1;
		for (int i = 0; i < METER_WIRE_MAX; i++)
			if (!strcmp(key, meter_wire_name((enum meter_wire)i)))
				w = i;
		if (w < 0)
			return wr_error_input(
			    err, EINVAL,
			    "gateway.upstreams: unknown wire format '%s' "
			    "(chat_completions, responses, messages)",
			    key);
		int r = upstream_parse(key, v, &s->upstream[w], err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* One price object: {"prompt", "completion"[, "cached"]}. */
static int price_parse(const char *model, const json_t *v,
		       struct meter_prices *out, struct wr_error **err)
{
	json_t *p = json_object_get(v, "prompt");
	json_t *c = json_object_get(v, "completion");
	json_t *k = json_object_get(v, "cached");
	size_t keys = 2 + (k != NULL);
	if (!json_is_object(v) || !json_is_number(p) || !json_is_number(c) ||
	    (k && !json_is_number(k)) || json_object_size(v) != keys ||
	    json_number_value(p) < 0 || json_number_value(c) < 0 ||
	    json_number_value(k) < 0)
		return wr_error_input(err, EINVAL,
				      "gateway.prices.%s: expected {\"prompt\": "
				      "N, \"completion\": N, \"cached\": N} per "
				      "million tokens (cached is optional)",
				      model);
	*out = (struct meter_prices){json_number_value(p),
				     json_number_value(c),
				     json_number_value(k)};
	return 0;
}

static int prices_parse(const json_t *o, struct gateway_settings *s,
			struct wr_error **err)
{
	size_t n = json_object_size(o);
	if (!json_is_object(o) || n > GATEWAY_PRICES_MAX)
		return bad(err, "prices",
			   "an object of at most 256 models' prices");
	s->prices = wr_calloc(n ? n : 1, sizeof(*s->prices));
	if (!s->prices)
		return wr_error_set(err, ENOMEM, "gateway");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)o, key, v)
	{
		struct gateway_price *gp = &s->prices[s->n_prices];
		int r = price_parse(key, v, &gp->prices, err);
		if (r < 0)
			return r;
		gp->model = wr_strdup(key);
		if (!gp->model)
			return wr_error_set(err, ENOMEM, "gateway");
		s->n_prices++;
	}
	return 0;
}

static int budget_parse(const json_t *o, struct meter_budget *b,
			struct wr_error **err)
{
	if (!json_is_object(o))
		return bad(err, "budget", "an object");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)o, key, v)
	{
		json_int_t n = json_integer_value(v);
		if (!strcmp(key, "tokens")) {
			if (!json_is_integer(v) || n < 0)
				return bad(err, "budget.tokens", "an integer");
			b->max_tokens = (uint64_t)n;
		} else if (!strcmp(key, "model_calls")) {
			if (!json_is_integer(v) || n < 0 || n > 10000000)
				return bad(err, "budget.model_calls",
					   "an integer");
			b->max_model_calls = (unsigned)n;
		} else if (!strcmp(key, "cost")) {
			if (!json_is_number(v) || json_number_value(v) < 0)
				return bad(err, "budget.cost", "a number");
			b->max_cost = json_number_value(v);
		} else {
			return wr_error_input(err, EINVAL,
					      "gateway: unknown key "
					      "'budget.%s'",
					      key);
		}
	}
	return 0;
}

static int settings_key(const char *key, const json_t *v,
			struct gateway_settings *s, struct wr_error **err)
{
	if (!strcmp(key, "port")) {
		json_int_t n = json_integer_value(v);
		if (!json_is_integer(v) || n < 1 || n > 65535)
			return bad(err, "port", "a port 1..65535");
		s->port = (uint16_t)n;
		return 0;
	}
	if (!strcmp(key, "upstreams"))
		return upstreams_parse(v, s, err);
	if (!strcmp(key, "prices"))
		return prices_parse(v, s, err);
	if (!strcmp(key, "budget"))
		return budget_parse(v, &s->budget, err);
	if (!strcmp(key, "audit_bodies")) {
		if (!json_is_boolean(v))
			return bad(err, "audit_bodies", "true or false");
		s->audit_bodies = json_is_true(v);
		return 0;
	}
	if (!strcmp(key, "timeout")) {
		const char *t = json_string_value(v);
		if (!t || wr_parse_duration(t, &s->timeout_ms) < 0 ||
		    s->timeout_ms == 0)
			return bad(err, "timeout", "a duration (\"10m\")");
		return 0;
	}
	return wr_error_input(err, EINVAL, "gateway: unknown key '%s'", key);
}

int gateway_settings_parse(const json_t *obj, struct gateway_settings *out,
			   struct wr_error **err)
{
	struct gateway_settings s = {.on = true,
				     .port = GATEWAY_PORT_DEFAULT,
				     .timeout_ms = GATEWAY_TIMEOUT_MS_DEFAULT};
	if (!json_is_object(obj))
		return wr_error_input(err, EINVAL, "gateway: expected an "
				      "object");
	const char *key;
	json_t *v;
	int r = 0;
	json_object_foreach((json_t *)obj, key, v)
	{
		r = settings_key(key, v, &s, err);
		if (r < 0)
			break;
	}
	bool any = false;
	for (int i = 0; i < METER_WIRE_MAX; i++)
		any |= s.upstream[i].base_url != NULL;
	if (r == 0 && !any)
		r = wr_error_input(err, EINVAL,
				   "gateway: no upstream (gateway.upstreams "
				   "names at least one wire format)");
	if (r < 0) {
		gateway_settings_clear(&s);
		return r;
	}
	*out = s;
	return 0;
}

int gateway_settings_from_model(const char *base, const char *api_key,
				const struct meter_prices *prices,
				const struct meter_budget *budget,
				struct gateway_settings *out,
				struct wr_error **err)
{
	struct gateway_settings s = {.on = true,
				     .port = GATEWAY_PORT_DEFAULT,
				     .timeout_ms = GATEWAY_TIMEOUT_MS_DEFAULT};
	json_t *url = json_string(base ? base : "");
	int r = 0;
	for (int w = METER_WIRE_CHAT; r == 0 && w <= METER_WIRE_RESPONSES;
	     w++) {
		struct gateway_upstream *u = &s.upstream[w];
		r = base_url("model.base_url", url, &u->base_url, err);
		if (r == 0 && api_key) {
			u->api_key = wr_strdup(api_key);
			if (!u->api_key)
				r = wr_error_set(err, ENOMEM, "gateway");
		}
	}
	json_decref(url);
	if (r == 0 && prices) {
		s.prices = wr_calloc(1, sizeof(*s.prices));
		if (s.prices)
			s.prices[0].model = wr_strdup("*");
		if (!s.prices || !s.prices[0].model)
			r = wr_error_set(err, ENOMEM, "gateway");
		else {
			s.prices[0].prices = *prices;
			s.n_prices = 1;
		}
	}
	if (budget)
		s.budget = (struct meter_budget){.max_tokens = budget->max_tokens,
						 .max_cost = budget->max_cost};
	if (r < 0) {
		gateway_settings_clear(&s);
		return r;
	}
	*out = s;
	return 0;
}

void gateway_settings_clear(struct gateway_settings *s)
{
	for (int i = 0; i < METER_WIRE_MAX; i++) {
		struct gateway_upstream *u = &s->upstream[i];
		free(u->base_url);
		key_free(&u->api_key);
		free(u->api_key_secret);
		for (size_t k = 0; k < u->n_models; k++)
			free(u->models[k]);
		free(u->models);
	}
	for (size_t i = 0; i < s->n_prices; i++)
		free(s->prices[i].model);
	free(s->prices);
	memset(s, 0, sizeof(*s));
}

struct meter_prices gateway_price_of(const struct gateway_settings *s,
				     const char *model)
{
	const struct gateway_price *any = NULL;
	for (size_t i = 0; i < s->n_prices; i++) {
		if (model && !strcmp(s->prices[i].model, model))
			return s->prices[i].prices;
		if (!strcmp(s->prices[i].model, "*"))
			any = &s->prices[i];
	}
	return any ? any->prices : (struct meter_prices){0, 0, 0};
}

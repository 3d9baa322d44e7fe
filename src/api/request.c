/* request.c - validation of what a client sends: query parameters, body
 * values, ids. Every failure is a 400 whose message names the parameter or
 * key and what was expected ("key 'prompt': expected a string"). */
#include "api/internal.h"

#include "agents/preset.h"

#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/parse.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *api_quote(const char *s, char buf[80])
{
	size_t i = 0;
	if (!s)
		s = "";
	for (; s[i] && i < 64; i++) {
		unsigned char ch = (unsigned char)s[i];
		buf[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
	}
	if (s[i])
		memcpy(buf + i, "...", 4);
	else
		buf[i] = '\0';
	return buf;
}

bool api_id_valid(const char *s, char prefix)
{
	if (!s || s[0] != prefix || s[1] != '-')
		return false;
	size_t n = 0;
	for (const char *p = s + 2; *p; p++, n++) {
		if (n == 32 ||
		    !((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z')))
			return false;
	}
	return n > 0;
}

static bool ascii_alnum(char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
	       (ch >= 'A' && ch <= 'Z');
}

bool api_artifact_name_valid(const char *s)
{
	if (!s || !ascii_alnum(s[0]) || strstr(s, ".."))
		return false;
	size_t n = 0;
	for (const char *p = s; *p; p++, n++) {
		if (n == API_ARTIFACT_NAME_MAX ||
		    !(ascii_alnum(*p) || *p == '.' || *p == '_' || *p == '-'))
			return false;
	}
	return true;
}

/* ---- query ---- */

static int unhex(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* Decodes s in place (form encoding: '+' is a space). -EINVAL for a
 * malformed escape or an encoded NUL. */
static int form_decode(char *s)
{
	char *w = s;
	for (const char *r = s; *r;) {
		if (*r == '+') {
			*w++ = ' ';
			r++;
		} else if (*r == '%') {
			int hi = unhex(r[1]);
			int lo = hi < 0 ? -1 : unhex(r[2]);
			if (lo < 0 || (hi == 0 && lo == 0))
				return -EINVAL;
			*w++ = (char)(hi * 16 + lo);
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return 0;
}

int api_query_parse(const char *raw, struct api_query *q,
		    const char *const *allowed, struct api_response *out)
{
	q->n = 0;
	if (!raw || !*raw)
		return 0;
	size_t len = strlen(raw);
	if (len > API_QUERY_MAX)
		return api_reject(out, 400, "the query string is too long");
	memcpy(q->buf, raw, len + 1);
	char *save = NULL;
	for (char *piece = strtok_r(q->buf, "&", &save); piece;
	     piece = strtok_r(NULL, "&", &save)) {
		char *value = strchr(piece, '=');
		if (value)
			*value++ = '\0';
		else
			value = piece + strlen(piece);
		char shown[80];
		if (form_decode(piece) < 0 || form_decode(value) < 0)
			return api_reject(out, 400,
					  "malformed percent-encoding in "
					  "the query string");
		bool known = false;
		for (size_t i = 0; allowed && allowed[i]; i++)
			known = known || strcmp(allowed[i], piece) == 0;
		if (!known)
			return api_reject(out, 400,
					  "unknown query parameter '%s'",
					  api_quote(piece, shown));
		for (size_t i = 0; i < q->n; i++)
			if (strcmp(q->p[i].key, piece) == 0)
				return api_reject(
				    out, 400,
				    "query parameter '%s' given twice", piece);
		if (q->n == API_QUERY_PARAMS)
			return api_reject(out, 400,
					  "too many query parameters");
		q->p[q->n].key = piece;
		q->p[q->n].value = value;
		q->n++;
	}
	return 0;
}

const char *api_query_get(const struct api_ctx *c, const char *key)
{
	for (size_t i = 0; i < c->query.n; i++)
		if (strcmp(c->query.p[i].key, key) == 0)
			/* "?state=" is the same as no state */
			return *c->query.p[i].value ? c->query.p[i].value
						    : NULL;
	return NULL;
}

/* ---- body ---- */

int api_body_check_keys(struct api_ctx *c, const char *const *allowed)
{
	const char *key;
	json_t *value;
	if (!c->body)
		return 0;
	json_object_foreach(c->body, key, value)
	{
		bool known = false;
		for (size_t i = 0; allowed[i]; i++)
			known = known || strcmp(allowed[i], key) == 0;
		if (!known) {
			char shown[80];
			return api_reject(c->out, 400, "unknown key '%s'",
					  api_quote(key, shown));
		}
	}
	return 0;
}

static json_t *body_value(struct api_ctx *c, const char *key)
{
	json_t *v = c->body ? json_object_get(c->body, key) : NULL;
	return json_is_null(v) ? NULL : v;
}

static bool blank(const char *s)
{
	for (; *s; s++)
		if (!isspace((unsigned char)*s))
			return false;
	return true;
}

static bool has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

int api_body_string(struct api_ctx *c, const char *key, bool required,
		    size_t max, unsigned flags, const char **out)
{
	json_t *v = body_value(c, key);
	*out = NULL;
	if (!v) {
		if (required)
			return api_reject(c->out, 400, "key '%s' is required",
					  key);
		return 0;
	}
	if (!json_is_string(v))
		return api_reject(c->out, 400, "key '%s': expected a string",
				  key);
	/* jansson refuses "\u0000" in strings: the length is strlen */
	const char *s = json_string_value(v);
	size_t len = json_string_length(v);
	if (len == 0 || ((flags & API_STR_NOT_BLANK) && blank(s)))
		return api_reject(c->out, 400, "key '%s': must not be empty",
				  key);
	if (len > max)
		return api_reject(c->out, 400,
				  "key '%s': longer than %zu bytes", key, max);
	if ((flags & API_STR_NO_CONTROL) && has_control(s))
		return api_reject(c->out, 400,
				  "key '%s': must not contain control "
				  "characters",
				  key);
	*out = s;
	return 0;
}

int api_body_agent(struct api_ctx *c, const char *key, char **json_out)
{
	json_t *v = body_value(c, key);
	*json_out = NULL;
	if (!v)
		return 0;
	json_t *argv = NULL;
	if (json_is_string(v)) {
		const char *cmd;
		if (api_body_string(c, key, true, API_AGENT_MAX,
				    API_STR_NOT_BLANK, &cmd) < 0)
			return -1;
		argv = json_pack("[s,s,s]", "sh", "-c", cmd);
	} else if (json_is_array(v)) {
		size_t n = json_array_size(v), total = 0, i;
		json_t *arg;
		if (n == 0 || n > API_AGENT_ARGS_MAX)
			return api_reject(c->out, 400,
					  "key '%s': expected 1 to %d "
					  "arguments",
					  key, API_AGENT_ARGS_MAX);
		json_array_foreach(v, i, arg)
		{
			if (!json_is_string(arg))
				return api_reject(
				    c->out, 400,
				    "key '%s': element %zu: expected a "
				    "string",
				    key, i);
			total += json_string_length(arg) + 1;
		}
		if (json_string_length(json_array_get(v, 0)) == 0)
			return api_reject(c->out, 400,
					  "key '%s': the command (element "
					  "0) must not be empty",
					  key);
		if (total > API_AGENT_MAX)
			return api_reject(c->out, 400,
					  "key '%s': longer than %d bytes", key,
					  API_AGENT_MAX);
		argv = json_incref(v);
	} else if (json_is_object(v) && json_object_get(v, "preset")) {
		/* an agent preset: checked here, canonical at submission */
		struct agents_preset p;
		struct wr_error *perr = NULL;
		if (agents_preset_parse(v, &p, &perr) < 0) {
			api_reject(c->out, 400, "key '%s': %s", key,
				   perr && perr->msg ? perr->msg
						     : "a bad preset");
			wr_error_free(perr);
			return -1;
		}
		argv = agents_preset_json(&p);
	} else if (json_is_object(v)) {
		/* the built-in agent: {"builtin": true} and nothing else */
		if (json_object_size(v) != 1 ||
		    !json_is_true(json_object_get(v, "builtin")))
			return api_reject(c->out, 400,
					  "key '%s': the only objects accepted "
					  "are {\"builtin\": true} and "
					  "{\"preset\": NAME, \"version\": V}",
					  key);
		argv = json_incref(v);
	} else {
		return api_reject(c->out, 400,
				  "key '%s': expected an array of "
				  "strings, a string or {\"builtin\": true}",
				  key);
	}
	char *text = argv ? json_dumps(argv, JSON_COMPACT) : NULL;
	json_decref(argv);
	if (!text)
		return api_reply_internal(c, "render the agent"), -1;
	*json_out = text;
	return 0;
}

int api_body_object(struct api_ctx *c, const char *key, json_t **out)
{
	json_t *v = body_value(c, key);
	*out = NULL;
	if (v && !json_is_object(v))
		return api_reject(c->out, 400, "key '%s': expected an object",
				  key);
	*out = v;
	return 0;
}

int api_body_duration(struct api_ctx *c, const char *key, bool *present,
		      uint64_t *ms_out)
{
	json_t *v = body_value(c, key);
	*present = false;
	if (!v)
		return 0;
	uint64_t ms;
	if (json_is_integer(v)) {
		json_int_t secs = json_integer_value(v);
		/* a century is more than anyone means */
		if (secs < 0 || secs > 100LL * 365 * 86400)
			return api_reject(c->out, 400, "key '%s': out of range",
					  key);
		ms = (uint64_t)secs * 1000;
	} else if (json_is_string(v)) {
		if (wr_parse_duration(json_string_value(v), &ms) < 0)
			return api_reject(c->out, 400,
					  "key '%s': expected a duration "
					  "such as \"6h\"",
					  key);
	} else {
		return api_reject(c->out, 400,
				  "key '%s': expected a duration string "
				  "or whole seconds",
				  key);
	}
	*present = true;
	*ms_out = ms;
	return 0;
}

int api_resolve_repo(struct api_ctx *c, const char *param, const char *text,
		     char id_out[STORE_ID_MAX])
{
	char shown[80];
	if (!api_id_valid(text, 'r') && wr_validate_name(text) < 0)
		return api_reject(c->out, 400,
				  "query parameter '%s': expected a "
				  "repository id or name",
				  param);
	struct store_repo repo = {0};
	struct wr_error *err = NULL;
	int r = c->a->st->ops->repo_get(c->a->st, text, &repo, &err);
	if (r == -ENOENT) {
		wr_error_free(err);
		return api_reject(c->out, 404, "repository '%s' not found",
				  api_quote(text, shown));
	}
	if (r < 0) {
		api_reply_failure(c, r, err, "look up the repository");
		wr_error_free(err);
		return -1;
	}
	memcpy(id_out, repo.id, STORE_ID_MAX);
	store_repo_clear(&repo);
	return 0;
}

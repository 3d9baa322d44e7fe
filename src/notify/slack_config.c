/* slack_config.c - the "slack" object of warren serve's configuration file
 * (slack.h, docs/slack.md), and the checks of the URLs Warren sends to.
 *
 * The secrets come from a file (which must not be readable by group or
 * others, as the model's API key) or from the server's environment; they
 * are read once, at start, and wiped when the configuration is cleared.
 * Every error names the key ("FILE: key 'slack.users.U1.role': …"), the
 * way the rest of the configuration's do (cli/serve/config.c). */
#include "notify/slack.h"

#include "api/api.h"
#include "util/alloc.h"
#include "util/fs.h"
#include "util/parse.h"
#include "util/url.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define RETRIES_MAX 20
#define TIMEOUT_MAX_MS (10ull * 60 * 1000)

static void wipe_free(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void slack_config_clear(struct slack_config *cfg)
{
	if (!cfg)
		return;
	wipe_free(cfg->signing_secret);
	wipe_free(cfg->bot_token);
	free(cfg->api_url);
	free(cfg->base_url);
	for (size_t i = 0; i < cfg->n_users; i++) {
		free(cfg->users[i].slack_id);
		free(cfg->users[i].user);
		free(cfg->users[i].role);
	}
	free(cfg->users);
	memset(cfg, 0, sizeof(*cfg));
}

const struct slack_user *slack_user_find(const struct slack_config *cfg,
					 const char *slack_id)
{
	for (size_t i = 0; cfg && slack_id && i < cfg->n_users; i++)
		if (!strcmp(cfg->users[i].slack_id, slack_id))
			return &cfg->users[i];
	return NULL;
}

/* ---- URLs ------------------------------------------------------------- */

/* No control characters, spaces, quotes, user info, query or fragment,
 * nothing that would end a mrkdwn link (|, >): a URL fit to put in a
 * request line and a message. */
static bool url_chars_ok(const char *url)
{
	size_t n = strlen(url);
	if (n == 0 || n > SLACK_URL_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)url[i] <= ' ' || url[i] == 0x7f)
			return false;
	return !strpbrk(url, "@?#\\\"'<>|`{}^");
}

bool slack_url_ok(const char *url)
{
	struct wr_url_parts u;
	if (!url || !url_chars_ok(url) || !wr_url_http_parts(url, &u))
		return false;
	/* plain http only to this machine: a bot token must not travel in
	 * the clear */
	return u.https || wr_url_host_loopback(u.host, u.host_len);
}

static bool ends_with(const char *host, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);
	return len > n && !strncasecmp(host + len - n, suffix, n);
}

bool slack_response_url_ok(const struct slack_config *cfg, const char *url)
{
	struct wr_url_parts u, a;
	/* a response_url has a path with a secret in it, but never a query
	 * (url_chars_ok would refuse one anyway) */
	if (!url || !url_chars_ok(url) || !wr_url_http_parts(url, &u))
		return false;
	if (u.https && (ends_with(u.host, u.host_len, ".slack.com") ||
			ends_with(u.host, u.host_len, ".slack-gov.com")))
		return true;
	/* the same origin as the Web API's URL: a stand-in, a proxy */
	const char *api = cfg && cfg->api_url ? cfg->api_url : "";
	if (!wr_url_http_parts(api, &a))
		return false;
	return u.origin_len == a.origin_len &&
	       !strncasecmp(url, api, u.origin_len) && slack_url_ok(url);
}

/* ---- the configuration ----------------------------------------------------
 */

static int bad(struct wr_error **err, const char *path, const char *key,
	       const char *expected)
{
	return wr_error_input(err, EINVAL, "%s: key '%s': expected %s", path,
			      key, expected);
}

/* A secret from a file that group and others cannot read (trailing
 * newlines and spaces dropped) or from a variable of the environment. */
static int read_secret(const char *path, const char *key, const json_t *v,
		       bool from_file, char **out, struct wr_error **err)
{
	const char *name = json_string_value(v);
	if (!name || !*name)
		return bad(err, path, key,
			   from_file ? "a path" : "a variable's name");
	char *text = NULL;
	size_t len = 0;
	if (from_file) {
		struct stat st;
		if (stat(name, &st) < 0)
			return wr_error_input(err, errno, "%s: %s %s", path,
					      key, name);
		if (st.st_mode & 077)
			return wr_error_input(err, EPERM,
					      "%s: %s %s is readable by "
					      "others (chmod 600 it)",
					      path, key, name);
		int r = wr_read_file(name, SLACK_SECRET_MAX, &text, &len);
		if (r < 0)
			return wr_error_input(err, -r, "%s: %s %s", path, key,
					      name);
	} else {
		const char *val = getenv(name);
		if (!val || !*val)
			return wr_error_input(err, EINVAL,
					      "%s: %s: the variable %s is not "
					      "set",
					      path, key, name);
		text = wr_strdup(val);
		if (!text)
			return wr_error_set(err, ENOMEM, "config");
		len = strlen(text);
	}
	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' ||
		       text[len - 1] == ' '))
		text[--len] = '\0';
	/* it goes into an HMAC key or an Authorization header: one word of
	 * printable ASCII (and never into the message) */
	bool ok = len > 0 && len <= SLACK_SECRET_MAX;
	for (size_t i = 0; ok && i < len; i++)
		ok = text[i] > ' ' && text[i] < 0x7f;
	if (!ok) {
		wipe_free(text);
		return wr_error_input(err, EINVAL,
				      "%s: %s: the secret is empty, longer "
				      "than %d bytes, or holds spaces or "
				      "control characters",
				      path, key, SLACK_SECRET_MAX);
	}
	wipe_free(*out);
	*out = text;
	return 0;
}

static int url_value(const char *path, const char *key, const json_t *v,
		     bool for_token, char **out, struct wr_error **err)
{
	const char *url = json_string_value(v);
	struct wr_url_parts u;
	if (!url || !url_chars_ok(url) || !wr_url_http_parts(url, &u))
		return bad(err, path, key,
			   "an http:// or https:// URL without spaces, "
			   "quotes, user, query or fragment");
	if (for_token && !slack_url_ok(url))
		return wr_error_input(err, EINVAL,
				      "%s: key '%s': the bot token would go in "
				      "the clear (http:// is for a loopback "
				      "host only; use https://)",
				      path, key);
	size_t n = strlen(url);
	while (n && url[n - 1] == '/')
		n--;
	char *copy = wr_strndup(url, n);
	if (!copy)
		return wr_error_set(err, ENOMEM, "config");
	free(*out);
	*out = copy;
	return 0;
}

/* Slack's user ids: U… or W…, upper-case letters and digits. */
static bool slack_user_id_ok(const char *s)
{
	size_t n = strlen(s);
	if (n < 2 || n > 32)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9')))
			return false;
	return true;
}

static int load_user(const char *path, const char *id, const json_t *v,
		     struct slack_user *u, struct wr_error **err)
{
	char key[96];
	snprintf(key, sizeof(key), "slack.users.%s", id);
	if (!json_is_object(v))
		return bad(err, path, key, "{\"user\": NAME, \"role\": ROLE}");
	const char *k;
	const json_t *x;
	json_object_foreach((json_t *)v, k, x)
	{
		if (strcmp(k, "user") && strcmp(k, "role"))
			return wr_error_input(err, EINVAL,
					      "%s: unknown key '%s.%s'", path,
					      key, k);
	}
	const char *user = json_string_value(json_object_get(v, "user"));
	const char *role = json_string_value(json_object_get(v, "role"));
	snprintf(key, sizeof(key), "slack.users.%s.user", id);
	if (!user || api_validate_user(user) < 0)
		return bad(err, path, key,
			   "a user name (1 to 64 of [A-Za-z0-9._@+-], "
			   "starting with a letter or digit)");
	snprintf(key, sizeof(key), "slack.users.%s.role", id);
	if (!role || (strcmp(role, "admin") && strcmp(role, "reviewer") &&
		      strcmp(role, "submitter")))
		return bad(err, path, key, "admin, reviewer or submitter");
	u->slack_id = wr_strdup(id);
	u->user = wr_strdup(user);
	u->role = wr_strdup(role);
	if (!u->slack_id || !u->user || !u->role)
		return wr_error_set(err, ENOMEM, "config");
	return 0;
}

static int load_users(const char *path, const json_t *v,
		      struct slack_config *cfg, struct wr_error **err)
{
	if (!json_is_object(v))
		return bad(err, path, "slack.users",
			   "an object of Slack user ids (\"U0123ABC\": "
			   "{\"user\", \"role\"})");
	size_t n = json_object_size(v);
	if (n > SLACK_USERS_MAX)
		return wr_error_input(err, E2BIG,
				      "%s: key 'slack.users': more than %d "
				      "users",
				      path, SLACK_USERS_MAX);
	cfg->users = wr_calloc(n ? n : 1, sizeof(*cfg->users));
	if (!cfg->users)
		return wr_error_set(err, ENOMEM, "config");
	const char *id;
	const json_t *x;
	json_object_foreach((json_t *)v, id, x)
	{
		if (!slack_user_id_ok(id)) {
			char shown[40];
			snprintf(shown, sizeof(shown), "%.32s", id);
			for (char *p = shown; *p; p++)
				if ((unsigned char)*p < ' ' || *p == 0x7f)
					*p = '?';
			return wr_error_input(err, EINVAL,
					      "%s: key 'slack.users': '%s' is "
					      "not a Slack user id (like "
					      "U0123ABC: upper-case letters "
					      "and digits)",
					      path, shown);
		}
		/* counted first: a failure leaves nothing unfreed */
		struct slack_user *u = &cfg->users[cfg->n_users++];
		int r = load_user(path, id, x, u, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int load_duration(const char *path, const char *key, const json_t *v,
			 uint64_t max, uint64_t *out, struct wr_error **err)
{
	const char *t = json_string_value(v);
	uint64_t ms;
	if (!t || wr_parse_duration(t, &ms) < 0 || ms == 0 || ms > max)
		return bad(err, path, key,
			   "a duration (\"500ms\", \"5s\", \"1m\")");
	*out = ms;
	return 0;
}

static int load_key(const char *path, const char *key, const json_t *v,
		    struct slack_config *c, bool *secret_seen, bool *token_seen,
		    struct wr_error **err)
{
	char where[64];
	snprintf(where, sizeof(where), "slack.%s", key);
	if (!strcmp(key, "signing_secret_file") ||
	    !strcmp(key, "signing_secret_env")) {
		if (*secret_seen)
			return wr_error_input(err, EINVAL,
					      "%s: slack: give "
					      "signing_secret_file or "
					      "signing_secret_env, not both",
					      path);
		*secret_seen = true;
		return read_secret(path, where, v, !strcmp(key + 15, "file"),
				   &c->signing_secret, err);
	}
	if (!strcmp(key, "bot_token_file") || !strcmp(key, "bot_token_env")) {
		if (*token_seen)
			return wr_error_input(err, EINVAL,
					      "%s: slack: give bot_token_file "
					      "or bot_token_env, not both",
					      path);
		*token_seen = true;
		return read_secret(path, where, v, !strcmp(key + 10, "file"),
				   &c->bot_token, err);
	}
	if (!strcmp(key, "api_url"))
		return url_value(path, where, v, true, &c->api_url, err);
	if (!strcmp(key, "base_url"))
		return url_value(path, where, v, false, &c->base_url, err);
	if (!strcmp(key, "users"))
		return load_users(path, v, c, err);
	if (!strcmp(key, "retries")) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > RETRIES_MAX)
			return bad(err, path, where, "an integer 0..20");
		c->retries = (unsigned)json_integer_value(v);
		return 0;
	}
	if (!strcmp(key, "retry_backoff"))
		return load_duration(path, where, v, SLACK_BACKOFF_MAX_MS,
				     &c->retry_backoff_ms, err);
	if (!strcmp(key, "timeout"))
		return load_duration(path, where, v, TIMEOUT_MAX_MS,
				     &c->timeout_ms, err);
	if (!strcmp(key, "answer_within"))
		return load_duration(path, where, v, SLACK_ANSWER_WITHIN_MAX_MS,
				     &c->answer_within_ms, err);
	return wr_error_input(err, EINVAL, "%s: unknown key 'slack.%s'", path,
			      key);
}

int slack_config_from_json(const char *path, const json_t *v,
			   struct slack_config *out, struct wr_error **err)
{
	if (!json_is_object(v))
		return bad(err, path, "slack", "an object");
	struct slack_config c = {
	    .retries = SLACK_RETRIES_DEFAULT,
	    .retry_backoff_ms = SLACK_BACKOFF_MS_DEFAULT,
	    .timeout_ms = SLACK_TIMEOUT_MS_DEFAULT,
	    .answer_within_ms = SLACK_ANSWER_WITHIN_MS_DEFAULT,
	};
	bool secret_seen = false, token_seen = false;
	const char *key;
	const json_t *x;
	int r = 0;
	json_object_foreach((json_t *)v, key, x)
	{
		r = load_key(path, key, x, &c, &secret_seen, &token_seen, err);
		if (r < 0)
			goto out;
	}
	if (!c.signing_secret)
		r = wr_error_input(err, EINVAL,
				   "%s: slack: 'signing_secret_file' or "
				   "'signing_secret_env' is required (the "
				   "app's Signing Secret)",
				   path);
	else if (!c.bot_token)
		r = wr_error_input(err, EINVAL,
				   "%s: slack: 'bot_token_file' or "
				   "'bot_token_env' is required (the app's Bot "
				   "User OAuth Token, xoxb-…)",
				   path);
	else if (!c.base_url)
		r = wr_error_input(err, EINVAL,
				   "%s: slack: 'base_url' is required (the "
				   "web UI's public URL, for links to "
				   "sessions)",
				   path);
	else if (!c.api_url && !(c.api_url = wr_strdup(SLACK_API_URL_DEFAULT)))
		r = wr_error_set(err, ENOMEM, "config");
out:
	if (r < 0) {
		slack_config_clear(&c);
		return r;
	}
	*out = c;
	return 0;
}

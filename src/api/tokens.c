/* tokens.c - the /api/v1/tokens routes (admin only, router.c): create a
 * token, list them, revoke one by name.
 *
 * The plain text of a token is in the answer to its creation and nowhere
 * else: lists carry a token's name and id (the first digits of its hash),
 * never the token or its hash, and nothing here logs. */
#include "api/internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The longest expiry a token may be given: a century is more than anyone
 * means (and keeps now + expires far from overflowing). */
#define TOKEN_EXPIRES_MAX_MS (100LL * 365 * 86400 * 1000)

static void plain_freep(char **plain)
{
	if (*plain)
		explicit_bzero(*plain, strlen(*plain));
	free(*plain);
}

int api_tokens_create(struct api_ctx *c)
{
	static const char *const keys[] = {"user", "role", "name", "expires",
					   NULL};
	const char *user, *role, *name;
	bool has_expires;
	uint64_t expires = 0;
	struct wr_error *err = NULL;
	_cleanup_(plain_freep) char *plain = NULL;

	if (api_body_check_keys(c, keys) < 0 ||
	    api_body_string(c, "user", true, API_TOKEN_USER_MAX, 0, &user) <
		0 ||
	    api_body_string(c, "role", true, 16, 0, &role) < 0 ||
	    api_body_string(c, "name", false, STORE_TOKEN_NAME_MAX, 0, &name) <
		0 ||
	    api_body_duration(c, "expires", &has_expires, &expires) < 0)
		return 0;
	if (api_validate_user(user) < 0)
		return api_reply_error(c->out, 400,
				       "key 'user': expected 1 to %d of "
				       "[A-Za-z0-9._@+-], starting with a "
				       "letter or digit",
				       API_TOKEN_USER_MAX);
	if (api_role_parse(role) < 0)
		return api_reply_error(c->out, 400,
				       "key 'role': expected admin, reviewer "
				       "or submitter");
	if (name && !store_token_name_valid(name))
		return api_reply_error(c->out, 400,
				       "key 'name': expected 1 to %d of "
				       "[A-Za-z0-9._-], starting with a "
				       "letter or digit",
				       STORE_TOKEN_NAME_MAX);
	if (has_expires && (expires == 0 || expires > TOKEN_EXPIRES_MAX_MS))
		return api_reply_error(c->out, 400,
				       "key 'expires': expected a duration "
				       "from 1ms to 100 years");
	struct api_token_spec spec = {
	    .user = user,
	    .role = role,
	    .name = name,
	    .expires_ms = has_expires ? store_now_ms() + (int64_t)expires : 0,
	};
	char issued[STORE_TOKEN_NAME_MAX + 1];
	int r = api_token_issue(c->a->st, &spec, &plain, issued, &err);
	if (r < 0) {
		api_reply_failure(c, r, err, "create the token");
		wr_error_free(err);
		return 0;
	}
	json_t *expires_json =
	    spec.expires_ms ? json_integer(spec.expires_ms) : json_null();
	return api_reply_render(
	    c, 201,
	    json_pack("{s:s,s:s,s:s,s:s,s:o}", "token", plain, "user", user,
		      "role", role, "name", issued, "expires_ms", expires_json),
	    "render the token");
}

int api_tokens_list(struct api_ctx *c)
{
	struct store *st = c->a->st;
	struct store_token *v = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	int r = st->ops->token_list(st, &v, &n, &err);
	if (r < 0) {
		api_reply_failure(c, r, err, "list tokens");
		wr_error_free(err);
		return 0;
	}
	int64_t now = store_now_ms();
	json_t *list = json_array();
	int bad = !list;
	for (size_t i = 0; i < n && !bad; i++)
		bad = json_array_append_new(list, api_token_json(&v[i], now));
	store_tokens_free(v, n);
	json_t *obj = bad ? NULL : json_pack("{s:o}", "tokens", list);
	if (bad)
		json_decref(list);
	return api_reply_render(c, 200, obj, "render the tokens");
}

int api_token_revoke_route(struct api_ctx *c)
{
	int64_t revoked = 0;
	struct wr_error *err = NULL;
	/* the caller's own token too: this request is already allowed, the
	 * next one with it is not */
	int r = api_token_revoke(c->a, c->name, &revoked, &err);
	if (r == -ENOENT) {
		wr_error_free(err);
		return api_reply_error(c->out, 404, "no token named %s",
				       c->name);
	}
	if (r < 0) {
		api_reply_failure(c, r, err, "revoke the token");
		wr_error_free(err);
		return 0;
	}
	return api_reply_render(c, 200,
				json_pack("{s:s,s:I}", "name", c->name,
					  "revoked_ms", (json_int_t)revoked),
				"render the revocation");
}

/* GET /api/v1/whoami: who the token says the caller is, so that a client
 * (the web UI) shows only what the role may do. */
int api_whoami(struct api_ctx *c)
{
	json_t *obj = json_pack("{s:o,s:s}", "user",
				api_json_string(c->who.user), "role",
				api_role_name(c->who.role));
	return api_reply_render(c, 200, obj, "render the caller");
}

/* secrets.c - the /api/v1/secrets routes (admin only, router.c): set a
 * secret, list them, delete one (src/security/secrets.h holds them).
 *
 * A value comes in and never goes out: answers carry names and times,
 * nothing here logs (a 5xx logs the operation and the store's message,
 * which names the secret, never its value), and the value's copy in the
 * parsed body is wiped before the body is freed. */
#include "api/internal.h"

#include "security/secrets.h"
#include "util/alloc.h"

#include <errno.h>
#include <string.h>

bool api_secret_segment(const char *name)
{
	/* any segment: PUT says what is wrong with a bad name (400) */
	return name != NULL;
}

/* Bad input is the client's (400), a full store a conflict (409); a key
 * or directory others may read, a missing key, a file that does not
 * decrypt are the server's (500, logged with the store's message). */
static void failure(struct api_ctx *c, int r, struct wr_error *err,
		    const char *what)
{
	if (r == -ENOSPC) {
		api_reply_error(c->out, 409, "%s",
				err && err->msg ? err->msg : "store full");
	} else {
		if (r != -ENOMEM && !(err && err->bad_input))
			r = -EIO;
		api_reply_failure(c, r, err, what);
	}
	wr_error_free(err);
}

/* The router frees the parsed body without wiping it: the value's copy
 * (jansson's buffer, ours to clear until then) is wiped in place, on
 * every path out of the handler. */
static void wipe_value(struct api_ctx *c)
{
	json_t *v = json_object_get(c->body, "value");
	if (json_is_string(v))
		explicit_bzero((char *)json_string_value(v),
			       json_string_length(v));
}

static int no_store(struct api_ctx *c)
{
	return api_reply_error(c->out, 503,
			       "this server has no data directory for "
			       "secrets");
}

int api_secret_put(struct api_ctx *c)
{
	static const char *const keys[] = {"value", NULL};
	if (!c->a->data_dir) {
		wipe_value(c);
		return no_store(c);
	}
	if (!secrets_name_valid(c->name)) {
		char quoted[80];
		wipe_value(c);
		return api_reply_error(c->out, 400,
				       "'%s' is not a secret name: 1 to %d of "
				       "A-Z, 0-9 and '_', not starting with "
				       "a digit",
				       api_quote(c->name, quoted),
				       SECRETS_NAME_MAX);
	}
	const char *value;
	if (api_body_check_keys(c, keys) < 0 ||
	    api_body_string(c, "value", true, SECRETS_VALUE_MAX, 0, &value) <
		0) {
		wipe_value(c);
		return 0;
	}
	size_t len = json_string_length(json_object_get(c->body, "value"));
	struct secret_info info;
	struct wr_error *err = NULL;
	int r = secrets_set(c->a->data_dir, c->name, value, len, &info, &err);
	wipe_value(c);
	if (r < 0) {
		failure(c, r, err, "set the secret");
		return 0;
	}
	return api_reply_render(
	    c, 200,
	    json_pack("{s:s,s:I,s:I}", "name", info.name, "created_ms",
		      (json_int_t)info.created_ms, "updated_ms",
		      (json_int_t)info.updated_ms),
	    "render the secret");
}

int api_secrets_list(struct api_ctx *c)
{
	if (!c->a->data_dir)
		return no_store(c);
	struct secret_info *v = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	int r = secrets_list(c->a->data_dir, &v, &n, &err);
	if (r < 0) {
		failure(c, r, err, "list secrets");
		return 0;
	}
	json_t *list = json_array();
	int bad = !list;
	for (size_t i = 0; i < n && !bad; i++)
		bad = json_array_append_new(
		    list, json_pack("{s:s,s:I,s:I}", "name", v[i].name,
				    "created_ms", (json_int_t)v[i].created_ms,
				    "updated_ms", (json_int_t)v[i].updated_ms));
	free(v);
	json_t *obj = bad ? NULL : json_pack("{s:o}", "secrets", list);
	if (bad)
		json_decref(list);
	return api_reply_render(c, 200, obj, "render the secrets");
}

int api_secret_delete(struct api_ctx *c)
{
	if (!c->a->data_dir)
		return no_store(c);
	struct wr_error *err = NULL;
	int r = secrets_delete(c->a->data_dir, c->name, &err);
	if (r == -ENOENT) {
		wr_error_free(err);
		return api_reply_error(c->out, 404, "no secret named %s",
				       c->name);
	}
	if (r < 0) {
		failure(c, r, err, "delete the secret");
		return 0;
	}
	return api_reply_render(c, 200,
				json_pack("{s:s,s:I}", "name", c->name,
					  "deleted_ms",
					  (json_int_t)store_now_ms()),
				"render the deletion");
}

/* secrets.c - the /api/v1/secrets routes (admin only, router.c): set a
 * secret, list them, delete one (src/security/secrets.h holds them).
 *
 * A set or a delete writes this server's data directory first, as it
 * always did, then the store's copy of the files (security/
 * secrets_store.h): on a store servers share, every other server copies
 * them into its own data directory within a few seconds. A list is this
 * server's copy, each secret with whether it decrypts here.
 *
 * A value comes in and never goes out: answers carry names and times,
 * nothing here logs (a 5xx logs the operation and the store's message,
 * which names the secret, never its value), and the value's copy in the
 * parsed body is wiped before the body is freed. */
#include "api/internal.h"

#include "security/secrets.h"
#include "security/secrets_store.h"
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

/* The secret's repositories as JSON: null for any, else the names. NULL
 * only on allocation failure (or a list that cannot be read: logged). */
static json_t *repos_json(struct api_ctx *c, const char *name)
{
	char **repos = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	if (secrets_repos_get(c->a->data_dir, name, &repos, &n, &err) < 0) {
		api_log(WR_LOG_ERROR, "secret %s: its repositories: %s", name,
			err && err->msg ? err->msg : "failed");
		wr_error_free(err);
		return NULL;
	}
	if (n == 0)
		return json_null();
	json_t *list = json_array();
	for (size_t i = 0; list && i < n; i++)
		if (json_array_append_new(list, json_string(repos[i])) < 0) {
			json_decref(list);
			list = NULL;
		}
	secrets_repos_free(repos, n);
	return list;
}

/* The body's "repositories": absent (*set false: unchanged), null (any
 * repository: *n 0), or a non-empty array of repository names. -1 after
 * a 400. */
static int body_repos(struct api_ctx *c, bool *set, char **names,
		      size_t *n)
{
	json_t *v = json_object_get(c->body, "repositories");
	*set = v != NULL;
	*n = 0;
	if (!v || json_is_null(v))
		return 0;
	size_t k = json_array_size(v);
	if (!json_is_array(v) || k == 0 || k > SECRETS_REPOS_MAX)
		return api_reject(c->out, 400,
				  "key 'repositories': expected null (any "
				  "repository) or an array of 1 to %d "
				  "repository names",
				  SECRETS_REPOS_MAX);
	for (size_t i = 0; i < k; i++) {
		const char *name = json_string_value(json_array_get(v, i));
		if (!name || !secrets_repo_name_valid(name)) {
			char quoted[80];
			return api_reject(
			    c->out, 400,
			    "key 'repositories[%zu]': '%s' is not a "
			    "repository name",
			    i, api_quote(name ? name : "", quoted));
		}
		names[i] = (char *)name;
	}
	*n = k;
	return 0;
}

int api_secret_put(struct api_ctx *c)
{
	static const char *const keys[] = {"value", "repositories", NULL};
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
	char *names[SECRETS_REPOS_MAX];
	size_t n_names = 0;
	bool repos_set = false;
	if (body_repos(c, &repos_set, names, &n_names) < 0) {
		wipe_value(c);
		return 0;
	}
	size_t len = json_string_length(json_object_get(c->body, "value"));
	struct secret_info info;
	struct wr_error *err = NULL;
	/* the list first when the secret exists, so that no build gets the
	 * new value under the old list; a new secret needs its value first
	 * (until its list is written it is open to any repository, but no
	 * build could have it a moment before either) */
	int r = 0;
	bool listed = false;
	secrets_store_lock();
	if (repos_set) {
		r = secrets_repos_set(c->a->data_dir, c->name, names, n_names,
				      &err);
		listed = r == 0;
		if (r == -ENOENT) {
			wr_error_freep(&err);
			r = 0;
		}
	}
	if (r == 0)
		r = secrets_set(c->a->data_dir, c->name, value, len, &info,
				&err);
	wipe_value(c);
	if (r == 0 && repos_set && !listed)
		r = secrets_repos_set(c->a->data_dir, c->name, names, n_names,
				      &err);
	/* then the store's copy, for the other servers */
	bool local_failed = r < 0;
	if (r == 0)
		r = secrets_store_put(c->a->st, c->a->data_dir, c->name, &err);
	secrets_store_unlock();
	if (r < 0) {
		failure(c, r, err,
			local_failed
			    ? "set the secret"
			    : "store the secret (set on this server only)");
		return 0;
	}
	json_t *repos = repos_json(c, info.name);
	return api_reply_render(
	    c, 200,
	    repos ? json_pack("{s:s,s:I,s:I,s:o}", "name", info.name,
			      "created_ms", (json_int_t)info.created_ms,
			      "updated_ms", (json_int_t)info.updated_ms,
			      "repositories", repos)
		  : NULL,
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
	for (size_t i = 0; i < n && !bad; i++) {
		json_t *repos = repos_json(c, v[i].name);
		/* a copy from another server under another key says so
		 * here (the value is wiped at once) */
		struct wr_error *check_err = NULL;
		bool decrypts =
		    secrets_check(c->a->data_dir, v[i].name, &check_err) == 0;
		wr_error_free(check_err);
		bad =
		    !repos ||
		    json_array_append_new(
			list,
			json_pack("{s:s,s:I,s:I,s:o,s:b}", "name", v[i].name,
				  "created_ms", (json_int_t)v[i].created_ms,
				  "updated_ms", (json_int_t)v[i].updated_ms,
				  "repositories", repos, "decrypts", decrypts));
	}
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
	secrets_store_lock();
	int r = secrets_delete(c->a->data_dir, c->name, &err);
	bool local = r == 0;
	/* and the store's copy (gone from every server's cache): one this
	 * server had not synced yet is deleted too */
	bool stored = false;
	if (r == 0 || r == -ENOENT) {
		wr_error_freep(&err);
		r = secrets_name_valid(c->name)
			? secrets_store_delete(c->a->st, c->name, &stored, &err)
			: -ENOENT;
	}
	secrets_store_unlock();
	if (r == -ENOENT || (r == 0 && !local && !stored)) {
		wr_error_free(err);
		return api_reply_error(c->out, 404, "no secret named %s",
				       c->name);
	}
	if (r < 0) {
		failure(c, r, err,
			local ? "delete the secret from the store (deleted "
				"on this server only)"
			      : "delete the secret");
		return 0;
	}
	return api_reply_render(c, 200,
				json_pack("{s:s,s:I}", "name", c->name,
					  "deleted_ms",
					  (json_int_t)store_now_ms()),
				"render the deletion");
}

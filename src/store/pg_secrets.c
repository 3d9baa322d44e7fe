/* pg_secrets.c - secrets' files on PostgreSQL (store.h): one statement
 * each. Every server on the store copies them into its data directory
 * (security/secrets_store.c). */
#include "store/pg_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pg_secret_put(struct store *st, const struct store_secret *s,
		  struct wr_error **err)
{
	int r = store_secret_check(s, err);
	if (r < 0)
		return r;
	_cleanup_free_ char *text =
	    store_secret_file_encode(s->file, s->file_len);
	if (!text)
		return wr_error_set(err, ENOMEM, "store the secret %s",
				    s->name);
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, s->name);
	pg_text(&p, text);
	pg_text(&p, s->repos);
	pg_int(&p, s->updated_ms ? s->updated_ms : store_now_ms());
	r = pg_call(pg_of(st), &c, PG_SECRET_PUT, &p, &res, err,
		    "store the secret %s", s->name);
	if (r < 0)
		return r;
	if (pg_changes(res) == 0)
		return wr_error_set(err, ENOSPC,
				    "the store holds %d secrets already",
				    STORE_SECRETS_MAX);
	return 0;
}

int pg_secret_delete(struct store *st, const char *name, int64_t now_ms,
		     bool *deleted, struct wr_error **err)
{
	if (!store_secret_name_ok(name))
		return wr_error_input(err, 0, "'%.80s' is not a secret name",
				      name ? name : "");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, name);
	pg_int(&p, now_ms);
	int r = pg_call(pg_of(st), &c, PG_SECRET_DELETE, &p, &res, err,
			"delete the secret %s", name);
	if (r < 0)
		return r;
	if (deleted)
		*deleted = pg_changes(res) > 0;
	return 0;
}

int pg_secret_list(struct store *st, struct store_secret **out, size_t *n,
		   struct wr_error **err)
{
	*out = NULL;
	*n = 0;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	int r = pg_call(pg_of(st), &c, PG_SECRET_LIST, &p, &res, err,
			"list secrets");
	if (r < 0)
		return r;
	size_t k = (size_t)PQntuples(res);
	if (k > STORE_SECRETS_MAX)
		return wr_error_set(err, E2BIG, "list secrets: more than %d",
				    STORE_SECRETS_MAX);
	struct store_secret *v = wr_calloc(k ? k : 1, sizeof(*v));
	if (!v)
		return wr_error_set(err, ENOMEM, "list secrets");
	for (size_t i = 0; i < k; i++) {
		struct store_secret *s = &v[i];
		const char *name = PQgetvalue(res, (int)i, 0);
		snprintf(s->name, sizeof(s->name), "%s", name);
		r = store_secret_file_decode(PQgetvalue(res, (int)i, 1), s);
		if (r == 0 && !PQgetisnull(res, (int)i, 2) &&
		    !(s->repos = wr_strdup(PQgetvalue(res, (int)i, 2))))
			r = -ENOMEM;
		if (r < 0) {
			store_secrets_free(v, k);
			return wr_error_set(
			    err, -r, "list secrets: the row of %.80s", name);
		}
		s->updated_ms = pg_get_int64(res, (int)i, 3);
		s->deleted_ms = pg_get_int64(res, (int)i, 4);
	}
	if (k == 0) {
		free(v);
		v = NULL;
	}
	*out = v;
	*n = k;
	return 0;
}

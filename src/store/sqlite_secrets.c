/* sqlite_secrets.c - secrets' files on SQLite (store.h): one statement
 * each. The store copy on a store no other server shares is harmless:
 * DATA/secrets stays what the server reads (security/secrets_store.c). */
#include "store/sqlite_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sq_secret_put(struct store *st, const struct store_secret *s,
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
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	r = sq_prepare(c, SQ_SECRET_PUT, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, s->name);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, text);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 3, s->repos);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(
		    q, 4, s->updated_ms ? s->updated_ms : store_now_ms());
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "store the secret %s", s->name);
	if (sqlite3_changes(c->db) == 0)
		return wr_error_set(err, ENOSPC,
				    "the store holds %d secrets already",
				    STORE_SECRETS_MAX);
	return 0;
}

int sq_secret_delete(struct store *st, const char *name, int64_t now_ms,
		     bool *deleted, struct wr_error **err)
{
	if (!store_secret_name_ok(name))
		return wr_error_input(err, 0, "'%.80s' is not a secret name",
				      name ? name : "");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SECRET_DELETE, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, name);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 2, now_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "delete the secret %s", name);
	if (deleted)
		*deleted = sqlite3_changes(c->db) > 0;
	return 0;
}

int sq_secret_list(struct store *st, struct store_secret **out, size_t *n,
		   struct wr_error **err)
{
	*out = NULL;
	*n = 0;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SECRET_LIST, &q, err);
	if (r < 0)
		return r;
	struct store_secret *v = NULL;
	size_t k = 0;
	int rc;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		if (k == STORE_SECRETS_MAX) {
			store_secrets_free(v, k);
			return wr_error_set(err, E2BIG,
					    "list secrets: more than %d",
					    STORE_SECRETS_MAX);
		}
		struct store_secret *grown =
		    wr_realloc(v, (k + 1) * sizeof(*v));
		if (!grown) {
			store_secrets_free(v, k);
			return wr_error_set(err, ENOMEM, "list secrets");
		}
		v = grown;
		struct store_secret *s = &v[k];
		memset(s, 0, sizeof(*s));
		k++;
		const char *name = (const char *)sqlite3_column_text(q, 0);
		snprintf(s->name, sizeof(s->name), "%s", name ? name : "");
		r = store_secret_file_decode(
		    (const char *)sqlite3_column_text(q, 1), s);
		if (r == 0)
			r = sq_column_strdup(q, 2, &s->repos);
		if (r < 0) {
			store_secrets_free(v, k);
			return wr_error_set(err, -r,
					    "list secrets: the row of %.80s",
					    name ? name : "");
		}
		s->updated_ms = sqlite3_column_int64(q, 3);
		s->deleted_ms = sqlite3_column_int64(q, 4);
	}
	if (rc != SQLITE_DONE) {
		store_secrets_free(v, k);
		return sq_error(c, rc, err, "list secrets");
	}
	*out = v;
	*n = k;
	return 0;
}

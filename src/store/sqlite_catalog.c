/* sqlite_catalog.c - the SQLite backend's tokens, repositories and
 * snapshots: single-statement calls, each its own (implicit) transaction.
 * Writes take the writer connection, reads a pooled reader (sqlite.c). */
#include "store/sqlite_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <string.h>

/* ---- tokens ------------------------------------------------------------- */

int sq_token_add(struct store *st, const char *hash_hex,
		 const struct store_token *t, struct wr_error **err)
{
	int r = store_token_check(hash_hex, t, err);
	if (r < 0)
		return r;
	int64_t created = t->created_ms ? t->created_ms : store_now_ms();
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	r = sq_prepare(c, SQ_TOKEN_ADD, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, hash_hex);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, t->user);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 3, t->role);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 4, created);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 5, t->expires_ms);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 6, t->name);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return 0;
	/* the name, in practice: the hash of a new random token is new */
	if (sq_errno(rc) == -EEXIST)
		return wr_error_input(
		    err, EEXIST, "add token: a token named %s exists", t->name);
	return sq_error(c, rc, err, "add token %s", t->name);
}

int sq_token_lookup(struct store *st, const char *hash_hex, int64_t now_ms,
		    struct store_token *out, struct wr_error **err)
{
	if (!store_token_hash_ok(hash_hex))
		return wr_error_absent(err, true, "unknown token");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_TOKEN_LOOKUP, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, hash_hex);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 2, now_ms);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "look up token");
	r = sq_get_one(c, q, &store_token_record, out, "look up token", err);
	if (r == 0)
		return wr_error_input(err, ENOENT,
				      "unknown, revoked or expired token");
	return r < 0 ? r : 0;
}

int sq_token_count(struct store *st, struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_TOKEN_COUNT, &q, err);
	if (r < 0)
		return r;
	int rc = sqlite3_step(q);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "count tokens");
	int64_t n = sqlite3_column_int64(q, 0);
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

int sq_token_list(struct store *st, struct store_token **out, size_t *n_out,
		  struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_TOKEN_LIST, &q, err);
	if (r < 0)
		return r;
	void *v = NULL;
	size_t n = 0;
	r = sq_collect(c, q, &store_token_record, &v, &n, "list tokens", err);
	if (r == 0) {
		*out = v;
		*n_out = n;
	}
	return r;
}

int sq_token_revoke(struct store *st, const char *name, int64_t now_ms,
		    int64_t *revoked_ms_out, struct wr_error **err)
{
	if (!store_token_name_valid(name))
		return wr_error_absent(err, true, "no token named %s",
				       name ? name : "");
	if (now_ms <= 0)
		now_ms = store_now_ms();
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_TOKEN_REVOKE, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, name);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 2, now_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return wr_error_absent(err, true, "no token named %s", name);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "revoke token %s", name);
	if (revoked_ms_out)
		*revoked_ms_out = sqlite3_column_int64(q, 0);
	return 0;
}

int sq_token_touch(struct store *st, const char *hash_hex, int64_t now_ms,
		   struct wr_error **err)
{
	if (!store_token_hash_ok(hash_hex))
		return wr_error_absent(err, true, "unknown token");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_TOKEN_TOUCH, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, hash_hex);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 2, now_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "record a token's use");
	if (sqlite3_changes(c->db) == 0)
		return wr_error_absent(err, true, "unknown token");
	return 0;
}

/* ---- repositories ------------------------------------------------------- */

int sq_repo_add(struct store *st, const struct store_repo *r,
		struct wr_error **err)
{
	int ret = store_repo_check(r, err);
	if (ret < 0)
		return ret;
	int64_t created = r->created_ms ? r->created_ms : store_now_ms();
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	ret = sq_prepare(c, SQ_REPO_ADD, &q, err);
	if (ret < 0)
		return ret;
	int rc = sq_bind_text(q, 1, r->id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, r->name);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 3, r->url);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 4, r->default_ref);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 5, r->agent_json);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 6, r->refresh_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 7, created);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 8, r->last_refresh_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return 0;
	if (sq_errno(rc) == -EEXIST)
		return wr_error_input(err, EEXIST,
				      "add repository %s: a repository with "
				      "this name or id (%s) exists",
				      r->name, r->id);
	return sq_error(c, rc, err, "add repository %s", r->name);
}

int sq_repo_get(struct store *st, const char *id_or_name,
		struct store_repo *out, struct wr_error **err)
{
	if (!store_repo_key_ok(id_or_name))
		return wr_error_absent(err, true, "no repository %s",
				       id_or_name ? id_or_name : "");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_REPO_GET, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id_or_name);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "get repository %s", id_or_name);
	r = sq_get_one(c, q, &store_repo_record, out, "get repository", err);
	if (r == 0)
		return wr_error_absent(err, true, "no repository %s",
				       id_or_name);
	return r < 0 ? r : 0;
}

int sq_repo_list(struct store *st, struct store_repo **out, size_t *n_out,
		 struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_REPO_LIST, &q, err);
	if (r < 0)
		return r;
	void *v = NULL;
	size_t n = 0;
	r = sq_collect(c, q, &store_repo_record, &v, &n, "list repositories",
		       err);
	if (r == 0) {
		*out = v;
		*n_out = n;
	}
	return r;
}

int sq_repo_set_refreshed(struct store *st, const char *id, int64_t when_ms,
			  struct wr_error **err)
{
	if (!store_id_ok(id))
		return wr_error_absent(err, true, "no repository %s",
				       id ? id : "");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_REPO_SET_REFRESHED, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 2, when_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "set repository %s refreshed", id);
	if (sqlite3_changes(c->db) == 0)
		return wr_error_absent(err, true, "no repository %s", id);
	return 0;
}

int sq_repo_update(struct store *st, const struct store_repo *r,
		   struct wr_error **err)
{
	if (!store_id_ok(r->id))
		return wr_error_absent(err, true, "no repository %s", r->id);
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int ret = sq_prepare(c, SQ_REPO_UPDATE, &q, err);
	if (ret < 0)
		return ret;
	int rc = sq_bind_text(q, 1, r->id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, r->url);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 3, r->default_ref);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 4, r->agent_json);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 5, (int64_t)r->refresh_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "update repository %s", r->id);
	if (sqlite3_changes(c->db) == 0)
		return wr_error_absent(err, true, "no repository %s", r->id);
	return 0;
}

int sq_repo_remove(struct store *st, const char *id, int64_t now_ms,
		   struct wr_error **err)
{
	if (!store_id_ok(id))
		return wr_error_absent(err, true, "no repository %s",
				       id ? id : "");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int ret = sq_prepare(c, SQ_REPO_REMOVE, &q, err);
	if (ret < 0)
		return ret;
	int rc = sq_bind_text(q, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 2, now_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "remove repository %s", id);
	if (sqlite3_changes(c->db) > 0)
		return 0;
	/* not removed: gone, or still in use (same connection: the same
	 * view of the sessions) */
	_cleanup_(sq_resetp) sqlite3_stmt *a = NULL;
	ret = sq_prepare(c, SQ_REPO_ACTIVE, &a, err);
	if (ret < 0)
		return ret;
	rc = sq_bind_text(a, 1, id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(a);
	int64_t active = rc == SQLITE_ROW ? sqlite3_column_int64(a, 0) : 0;
	if (active > 0)
		return store_repo_busy(id, active, err);
	return wr_error_absent(err, true, "no repository %s", id);
}

/* ---- snapshots ---------------------------------------------------------- */

int sq_snapshot_add(struct store *st, const struct store_snapshot *s,
		    struct wr_error **err)
{
	int r = store_snapshot_check(s, err);
	if (r < 0)
		return r;
	int64_t created = s->created_ms ? s->created_ms : store_now_ms();
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	r = sq_prepare(c, SQ_SNAPSHOT_ADD, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, s->id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, s->repo_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_text(
		    q, 3, s->commit, (int)strnlen(s->commit, sizeof(s->commit)),
		    SQLITE_STATIC);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 4, created);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 5, s->timings_json);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return 0;
	if (sq_errno(rc) == -EEXIST)
		return wr_error_input(err, EEXIST, "snapshot %s exists", s->id);
	if (sq_errno(rc) == -ENOENT)
		return wr_error_input(err, ENOENT,
				      "add snapshot %s: no repository %s",
				      s->id, s->repo_id);
	return sq_error(c, rc, err, "add snapshot %s", s->id);
}

int sq_snapshot_latest(struct store *st, const char *repo_id,
		       struct store_snapshot *out, struct wr_error **err)
{
	if (!store_id_ok(repo_id))
		return wr_error_absent(err, true, "no snapshot of %s",
				       repo_id ? repo_id : "");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SNAPSHOT_LATEST, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, repo_id);
	if (rc != SQLITE_OK)
		return sq_error(c, rc, err, "latest snapshot of %s", repo_id);
	r = sq_get_one(c, q, &store_snapshot_record, out, "latest snapshot",
		       err);
	if (r == 0)
		return wr_error_absent(err, true, "no snapshot of %s", repo_id);
	return r < 0 ? r : 0;
}

int sq_snapshot_list(struct store *st, const char *repo_id,
		     struct store_snapshot **out, size_t *n_out,
		     struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(
	    c, repo_id ? SQ_SNAPSHOT_LIST_REPO : SQ_SNAPSHOT_LIST_ALL, &q, err);
	if (r < 0)
		return r;
	if (repo_id) {
		int rc = sq_bind_text(q, 1, repo_id);
		if (rc != SQLITE_OK)
			return sq_error(c, rc, err, "list snapshots");
	}
	void *v = NULL;
	size_t n = 0;
	r = sq_collect(c, q, &store_snapshot_record, &v, &n, "list snapshots",
		       err);
	if (r == 0) {
		*out = v;
		*n_out = n;
	}
	return r;
}

/* pg_catalog.c - the PostgreSQL backend's tokens, repositories and
 * snapshots: single-statement calls, each its own (implicit) transaction,
 * on a connection of the pool (pg.c). */
#include "store/pg_internal.h"

#include "util/cleanup.h"

#include <errno.h>
#include <string.h>

/* ---- tokens ------------------------------------------------------------- */

int pg_token_add(struct store *st, const char *hash_hex,
		 const struct store_token *t, struct wr_error **err)
{
	int r = store_token_check(hash_hex, t, err);
	if (r < 0)
		return r;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	r = pg_acquire(pg_of(st), &c, err);
	if (r < 0)
		return r;
	struct pg_params p = {0};
	pg_text(&p, hash_hex);
	pg_text(&p, t->user);
	pg_text(&p, t->role);
	pg_int(&p, t->created_ms ? t->created_ms : store_now_ms());
	pg_int(&p, t->expires_ms);
	pg_text(&p, t->name);
	r = pg_run(c, PG_TOKEN_ADD, &p, &res);
	/* the name, in practice: the hash of a new random token is new */
	if (r == -EEXIST)
		return wr_error_input(
		    err, EEXIST, "add token: a token named %s exists", t->name);
	if (r < 0)
		return pg_fail(c, res, r, err, "add token %s", t->name);
	return 0;
}

int pg_token_lookup(struct store *st, const char *hash_hex, int64_t now_ms,
		    struct store_token *out, struct wr_error **err)
{
	if (!store_token_hash_ok(hash_hex))
		return wr_error_absent(err, true, "unknown token");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, hash_hex);
	pg_int(&p, now_ms);
	int r = pg_call(pg_of(st), &c, PG_TOKEN_LOOKUP, &p, &res, err,
			"look up token");
	if (r < 0)
		return r;
	r = pg_get_one(res, &store_token_record, out, "look up token", err);
	if (r == 0)
		return wr_error_input(err, ENOENT,
				      "unknown, revoked or expired token");
	return r < 0 ? r : 0;
}

int pg_token_count(struct store *st, struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	int r = pg_call(pg_of(st), &c, PG_TOKEN_COUNT, NULL, &res, err,
			"count tokens");
	if (r < 0)
		return r;
	int64_t n = pg_get_int64(res, 0, 0);
	return n > INT32_MAX ? INT32_MAX : (int)n;
}

int pg_token_list(struct store *st, struct store_token **out, size_t *n_out,
		  struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	int r = pg_call(pg_of(st), &c, PG_TOKEN_LIST, NULL, &res, err,
			"list tokens");
	if (r < 0)
		return r;
	return PG_COLLECT(res, &store_token_record, out, n_out, "list tokens",
			  err);
}

int pg_token_revoke(struct store *st, const char *name, int64_t now_ms,
		    int64_t *revoked_ms_out, struct wr_error **err)
{
	if (!store_token_name_valid(name))
		return wr_error_absent(err, true, "no token named %s",
				       name ? name : "");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, name);
	pg_int(&p, now_ms > 0 ? now_ms : store_now_ms());
	int r = pg_call(pg_of(st), &c, PG_TOKEN_REVOKE, &p, &res, err,
			"revoke token %s", name);
	if (r < 0)
		return r;
	if (PQntuples(res) < 1)
		return wr_error_absent(err, true, "no token named %s", name);
	if (revoked_ms_out)
		*revoked_ms_out = pg_get_int64(res, 0, 0);
	return 0;
}

int pg_token_touch(struct store *st, const char *hash_hex, int64_t now_ms,
		   struct wr_error **err)
{
	if (!store_token_hash_ok(hash_hex))
		return wr_error_absent(err, true, "unknown token");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, hash_hex);
	pg_int(&p, now_ms);
	int r = pg_call(pg_of(st), &c, PG_TOKEN_TOUCH, &p, &res, err,
			"record a token's use");
	if (r < 0)
		return r;
	if (pg_changes(res) == 0)
		return wr_error_absent(err, true, "unknown token");
	return 0;
}

/* ---- repositories ------------------------------------------------------- */

int pg_repo_add(struct store *st, const struct store_repo *r,
		struct wr_error **err)
{
	int ret = store_repo_check(r, err);
	if (ret < 0)
		return ret;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	ret = pg_acquire(pg_of(st), &c, err);
	if (ret < 0)
		return ret;
	struct pg_params p = {0};
	pg_text(&p, r->id);
	pg_text(&p, r->name);
	pg_text(&p, r->url);
	pg_text(&p, r->default_ref);
	pg_text(&p, r->agent_json);
	pg_int(&p, r->refresh_ms);
	pg_int(&p, r->created_ms ? r->created_ms : store_now_ms());
	pg_int(&p, r->last_refresh_ms);
	ret = pg_run(c, PG_REPO_ADD, &p, &res);
	if (ret == -EEXIST)
		return wr_error_input(err, EEXIST,
				      "add repository %s: a repository with "
				      "this name or id (%s) exists",
				      r->name, r->id);
	if (ret < 0)
		return pg_fail(c, res, ret, err, "add repository %s", r->name);
	return 0;
}

int pg_repo_get(struct store *st, const char *id_or_name,
		struct store_repo *out, struct wr_error **err)
{
	if (!store_repo_key_ok(id_or_name))
		return wr_error_absent(err, true, "no repository %s",
				       id_or_name ? id_or_name : "");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, id_or_name);
	int r = pg_call(pg_of(st), &c, PG_REPO_GET, &p, &res, err,
			"get repository %s", id_or_name);
	if (r < 0)
		return r;
	r = pg_get_one(res, &store_repo_record, out, "get repository", err);
	if (r == 0)
		return wr_error_absent(err, true, "no repository %s",
				       id_or_name);
	return r < 0 ? r : 0;
}

int pg_repo_list(struct store *st, struct store_repo **out, size_t *n_out,
		 struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	int r = pg_call(pg_of(st), &c, PG_REPO_LIST, NULL, &res, err,
			"list repositories");
	if (r < 0)
		return r;
	return PG_COLLECT(res, &store_repo_record, out, n_out,
			  "list repositories", err);
}

int pg_repo_set_refreshed(struct store *st, const char *id, int64_t when_ms,
			  struct wr_error **err)
{
	if (!store_id_ok(id))
		return wr_error_absent(err, true, "no repository %s",
				       id ? id : "");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	pg_int(&p, when_ms);
	int r = pg_call(pg_of(st), &c, PG_REPO_SET_REFRESHED, &p, &res, err,
			"set repository %s refreshed", id);
	if (r < 0)
		return r;
	if (pg_changes(res) == 0)
		return wr_error_absent(err, true, "no repository %s", id);
	return 0;
}

int pg_repo_update(struct store *st, const struct store_repo *r,
		   struct wr_error **err)
{
	if (!store_id_ok(r->id))
		return wr_error_absent(err, true, "no repository %s", r->id);
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, r->id);
	pg_text(&p, r->url);
	pg_text(&p, r->default_ref);
	pg_text(&p, r->agent_json);
	pg_int(&p, r->refresh_ms);
	int ret = pg_call(pg_of(st), &c, PG_REPO_UPDATE, &p, &res, err,
			  "update repository %s", r->id);
	if (ret < 0)
		return ret;
	if (pg_changes(res) == 0)
		return wr_error_absent(err, true, "no repository %s", r->id);
	return 0;
}

int pg_repo_remove(struct store *st, const char *id, int64_t now_ms,
		   struct wr_error **err)
{
	if (!store_id_ok(id))
		return wr_error_absent(err, true, "no repository %s",
				       id ? id : "");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	_cleanup_(pg_clearp) PGresult *active = NULL;
	struct pg_params p = {0};
	pg_text(&p, id);
	pg_int(&p, now_ms);
	int r = pg_call(pg_of(st), &c, PG_REPO_REMOVE, &p, &res, err,
			"remove repository %s", id);
	if (r < 0)
		return r;
	if (pg_changes(res) > 0)
		return 0;
	/* not removed: gone, or still in use */
	p = (struct pg_params){0};
	pg_text(&p, id);
	r = pg_exec(c, PG_REPO_ACTIVE, &p, &active, err, "remove repository %s",
		    id);
	if (r < 0)
		return r;
	int64_t n = pg_get_int64(active, 0, 0);
	if (n > 0)
		return store_repo_busy(id, n, err);
	return wr_error_absent(err, true, "no repository %s", id);
}

/* ---- snapshots ---------------------------------------------------------- */

int pg_snapshot_add(struct store *st, const struct store_snapshot *s,
		    struct wr_error **err)
{
	int r = store_snapshot_check(s, err);
	if (r < 0)
		return r;
	char commit[sizeof(s->commit)];
	snprintf(commit, sizeof(commit), "%s", s->commit);
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	r = pg_acquire(pg_of(st), &c, err);
	if (r < 0)
		return r;
	struct pg_params p = {0};
	pg_text(&p, s->id);
	pg_text(&p, s->repo_id);
	pg_text(&p, commit);
	pg_int(&p, s->created_ms ? s->created_ms : store_now_ms());
	pg_text(&p, s->timings_json);
	r = pg_run(c, PG_SNAPSHOT_ADD, &p, &res);
	if (r == -EEXIST)
		return wr_error_input(err, EEXIST, "snapshot %s exists", s->id);
	if (r == -ENOENT)
		return wr_error_input(err, ENOENT,
				      "add snapshot %s: no repository %s",
				      s->id, s->repo_id);
	if (r < 0)
		return pg_fail(c, res, r, err, "add snapshot %s", s->id);
	return 0;
}

int pg_snapshot_latest(struct store *st, const char *repo_id,
		       struct store_snapshot *out, struct wr_error **err)
{
	if (!store_id_ok(repo_id))
		return wr_error_absent(err, true, "no snapshot of %s",
				       repo_id ? repo_id : "");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, repo_id);
	int r = pg_call(pg_of(st), &c, PG_SNAPSHOT_LATEST, &p, &res, err,
			"latest snapshot of %s", repo_id);
	if (r < 0)
		return r;
	r = pg_get_one(res, &store_snapshot_record, out, "latest snapshot",
		       err);
	if (r == 0)
		return wr_error_absent(err, true, "no snapshot of %s", repo_id);
	return r < 0 ? r : 0;
}

int pg_snapshot_list(struct store *st, const char *repo_id,
		     struct store_snapshot **out, size_t *n_out,
		     struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	if (repo_id)
		pg_text(&p, repo_id);
	int r = pg_call(pg_of(st), &c,
			repo_id ? PG_SNAPSHOT_LIST_REPO : PG_SNAPSHOT_LIST_ALL,
			&p, &res, err, "list snapshots");
	if (r < 0)
		return r;
	return PG_COLLECT(res, &store_snapshot_record, out, n_out,
			  "list snapshots", err);
}

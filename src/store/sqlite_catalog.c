/* sqlite_catalog.c - the SQLite backend's tokens, repositories and
 * snapshots: single-statement calls, each its own (implicit) transaction.
 * Writes take the writer connection, reads a pooled reader (sqlite.c). */
#include "store/sqlite_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <string.h>

#define TOKEN_HASH_MAX 128 /* hex of a SHA-512 at most */
#define REPO_NAME_MAX 100
#define TEXT_MAX (64 * 1024) /* urls, refs, roles, JSON of a repository */

static bool text_ok(const char *s, size_t max)
{
	return s && *s && strnlen(s, max + 1) <= max;
}

/* ---- tokens ------------------------------------------------------------- */

/* A token's record from a row of TOKEN_COLUMNS (sqlite_schema.c). */
static int token_from_row(sqlite3_stmt *q, void *out)
{
	struct store_token t = {
	    .created_ms = sqlite3_column_int64(q, 2),
	    .expires_ms = sqlite3_column_int64(q, 3),
	    .revoked_ms = sqlite3_column_int64(q, 5),
	    .last_used_ms = sqlite3_column_int64(q, 6),
	};
	sq_column_copy(q, 7, t.id, sizeof(t.id));
	if (sq_column_strdup(q, 0, &t.user) < 0 ||
	    sq_column_strdup(q, 1, &t.role) < 0 ||
	    sq_column_strdup(q, 4, &t.name) < 0) {
		store_token_clear(&t);
		return -ENOMEM;
	}
	*(struct store_token *)out = t;
	return 0;
}

static void token_clear(void *t)
{
	store_token_clear(t);
}

int sq_token_add(struct store *st, const char *hash_hex,
		 const struct store_token *t, struct wr_error **err)
{
	if (!text_ok(hash_hex, TOKEN_HASH_MAX) || !t ||
	    !text_ok(t->user, 256) || !text_ok(t->role, 64))
		return wr_error_input(err, EINVAL,
				      "add token: hash, user and role are "
				      "required");
	if (!store_token_name_valid(t->name))
		return wr_error_input(err, EINVAL,
				      "add token: bad name (want 1 to %d of "
				      "[A-Za-z0-9._-], starting with a "
				      "letter or digit)",
				      STORE_TOKEN_NAME_MAX);
	int64_t created = t->created_ms ? t->created_ms : store_now_ms();
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_TOKEN_ADD, &q, err);
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
	if (!text_ok(hash_hex, TOKEN_HASH_MAX))
		return wr_error_absent(err, true, "unknown token");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_TOKEN_LOOKUP, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, hash_hex);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 2, now_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return wr_error_input(err, ENOENT,
				      "unknown, revoked or expired token");
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "look up token");
	struct store_token t;
	r = token_from_row(q, &t);
	if (r < 0)
		return wr_error_set(err, -r, "look up token");
	*out = t;
	return 0;
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
	r = sq_collect(c, q, sizeof(**out), token_from_row, token_clear, &v, &n,
		       "list tokens", err);
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
	if (!text_ok(hash_hex, TOKEN_HASH_MAX))
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

static bool repo_name_ok(const char *name)
{
	if (!text_ok(name, REPO_NAME_MAX))
		return false;
	for (const char *p = name; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
			    *p))
			return false;
	return strcmp(name, ".") && strcmp(name, "..");
}

static int repo_from_row(sqlite3_stmt *q, void *out)
{
	struct store_repo r = {
	    .refresh_ms = sqlite3_column_int64(q, 5),
	    .created_ms = sqlite3_column_int64(q, 6),
	    .last_refresh_ms = sqlite3_column_int64(q, 7),
	};
	sq_column_copy(q, 0, r.id, sizeof(r.id));
	if (sq_column_strdup(q, 1, &r.name) < 0 ||
	    sq_column_strdup(q, 2, &r.url) < 0 ||
	    sq_column_strdup(q, 3, &r.default_ref) < 0 ||
	    sq_column_strdup(q, 4, &r.agent_json) < 0) {
		store_repo_clear(&r);
		return -ENOMEM;
	}
	*(struct store_repo *)out = r;
	return 0;
}

static void repo_clear(void *r)
{
	store_repo_clear(r);
}

int sq_repo_add(struct store *st, const struct store_repo *r,
		struct wr_error **err)
{
	if (!r || !sq_id_ok(r->id))
		return wr_error_input(err, EINVAL, "add repository: bad id");
	if (!repo_name_ok(r->name))
		return wr_error_input(err, EINVAL,
				      "add repository: bad name '%s' (want "
				      "1 to %d of [A-Za-z0-9._-])",
				      r->name ? r->name : "", REPO_NAME_MAX);
	if (!text_ok(r->url, TEXT_MAX))
		return wr_error_input(err, EINVAL, "add repository %s: no url",
				      r->name);
	int64_t created = r->created_ms ? r->created_ms : store_now_ms();
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int ret = sq_prepare(c, SQ_REPO_ADD, &q, err);
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
	if (!text_ok(id_or_name, REPO_NAME_MAX))
		return wr_error_absent(err, true, "no repository %s",
				      id_or_name ? id_or_name : "");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_REPO_GET, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, id_or_name);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return wr_error_absent(err, true, "no repository %s",
				      id_or_name);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "get repository %s", id_or_name);
	struct store_repo rec;
	r = repo_from_row(q, &rec);
	if (r < 0)
		return wr_error_set(err, -r, "get repository %s", id_or_name);
	*out = rec;
	return 0;
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
	r = sq_collect(c, q, sizeof(**out), repo_from_row, repo_clear, &v, &n,
		       "list repositories", err);
	if (r == 0) {
		*out = v;
		*n_out = n;
	}
	return r;
}

int sq_repo_set_refreshed(struct store *st, const char *id, int64_t when_ms,
			  struct wr_error **err)
{
	if (!sq_id_ok(id))
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
	if (!sq_id_ok(r->id))
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
	if (!sq_id_ok(id))
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
		return wr_error_input(err, EBUSY,
				      "repository %s has %lld session%s not "
				      "finished: cancel or decide them first",
				      id, (long long)active,
				      active == 1 ? "" : "s");
	return wr_error_absent(err, true, "no repository %s", id);
}

/* ---- snapshots ---------------------------------------------------------- */

static int snapshot_from_row(sqlite3_stmt *q, void *out)
{
	struct store_snapshot s = {.created_ms = sqlite3_column_int64(q, 3)};
	sq_column_copy(q, 0, s.id, sizeof(s.id));
	sq_column_copy(q, 1, s.repo_id, sizeof(s.repo_id));
	sq_column_copy(q, 2, s.commit, sizeof(s.commit));
	if (sq_column_strdup(q, 4, &s.timings_json) < 0)
		return -ENOMEM;
	*(struct store_snapshot *)out = s;
	return 0;
}

static void snapshot_clear(void *s)
{
	store_snapshot_clear(s);
}

int sq_snapshot_add(struct store *st, const struct store_snapshot *s,
		    struct wr_error **err)
{
	if (!s || !sq_id_ok(s->id) || !sq_id_ok(s->repo_id))
		return wr_error_input(err, EINVAL, "add snapshot: bad id");
	if (!text_ok(s->commit, sizeof(s->commit) - 1))
		return wr_error_input(err, EINVAL, "add snapshot %s: no commit",
				      s->id);
	int64_t created = s->created_ms ? s->created_ms : store_now_ms();
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SNAPSHOT_ADD, &q, err);
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
	if (!sq_id_ok(repo_id))
		return wr_error_absent(err, true, "no snapshot of %s",
				      repo_id ? repo_id : "");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_SNAPSHOT_LATEST, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, repo_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return wr_error_absent(err, true, "no snapshot of %s",
				      repo_id);
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "latest snapshot of %s", repo_id);
	struct store_snapshot rec;
	r = snapshot_from_row(q, &rec);
	if (r < 0)
		return wr_error_set(err, -r, "latest snapshot of %s", repo_id);
	*out = rec;
	return 0;
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
	r = sq_collect(c, q, sizeof(**out), snapshot_from_row, snapshot_clear,
		       &v, &n, "list snapshots", err);
	if (r == 0) {
		*out = v;
		*n_out = n;
	}
	return r;
}

/* sqlite_builds.c - the snapshot build queue and the build claims on
 * SQLite (store.h): one statement (a claim: one transaction) each, on the
 * writer connection. */
#include "store/sqlite_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sq_build_enqueue(struct store *st, const char *repo_id, int64_t now_ms,
		     bool *added, struct wr_error **err)
{
	if (!store_id_ok(repo_id))
		return wr_error_absent(err, true, "no repository %s",
				       repo_id ? repo_id : "");
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_BUILD_ENQUEUE, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, repo_id);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 2, now_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "queue the build of %s", repo_id);
	if (added)
		*added = sqlite3_changes(c->db) > 0;
	return 0;
}

int sq_build_dequeue(struct store *st, char **repo_id, struct wr_error **err)
{
	*repo_id = NULL;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_BUILD_DEQUEUE, &q, err);
	if (r < 0)
		return r;
	int rc = sqlite3_step(q);
	if (rc == SQLITE_DONE)
		return -ENOENT; /* none waits: not an error to say */
	if (rc != SQLITE_ROW)
		return sq_error(c, rc, err, "take a queued build");
	if (sq_column_strdup(q, 0, repo_id) < 0)
		return wr_error_set(err, ENOMEM, "take a queued build");
	/* to its end: the DELETE is done once the statement is */
	rc = sqlite3_step(q);
	if (rc != SQLITE_DONE) {
		free(*repo_id);
		*repo_id = NULL;
		return sq_error(c, rc, err, "take a queued build");
	}
	return 0;
}

int sq_build_unqueue(struct store *st, const char *repo_id, bool *removed,
		     struct wr_error **err)
{
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_BUILD_UNQUEUE, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, repo_id ? repo_id : "");
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "unqueue the build of %s",
				repo_id ? repo_id : "");
	if (removed)
		*removed = sqlite3_changes(c->db) > 0;
	return 0;
}

int sq_build_queue_list(struct store *st, char ***ids, size_t *n,
			struct wr_error **err)
{
	*ids = NULL;
	*n = 0;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_reader(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	int r = sq_prepare(c, SQ_BUILD_QUEUE_LIST, &q, err);
	if (r < 0)
		return r;
	char **v = NULL;
	size_t k = 0;
	int rc;
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		char **grown = wr_realloc(v, (k + 1) * sizeof(*v));
		if (!grown || sq_column_strdup(q, 0, &(grown[k])) < 0) {
			store_strv_free(grown ? grown : v, k);
			return wr_error_set(err, ENOMEM, "list queued builds");
		}
		v = grown;
		k++;
	}
	if (rc != SQLITE_DONE) {
		store_strv_free(v, k);
		return sq_error(c, rc, err, "list queued builds");
	}
	*ids = v;
	*n = k;
	return 0;
}

/* ---- build claims (store.h, build_claim) ---- */

static int claim_args_ok(const char *repo_id, const char *worker, bool lease_ok,
			 const char *what, struct wr_error **err)
{
	if (!store_id_ok(repo_id) || !store_id_ok(worker) || !lease_ok)
		return wr_error_input(
		    err, EINVAL, "%s: bad repository, worker or lease", what);
	return 0;
}

int sq_build_claim(struct store *st, const char *repo_id, const char *worker,
		   int64_t now_ms, int64_t lease_ms, bool *got, char **holder,
		   struct wr_error **err)
{
	int r =
	    claim_args_ok(repo_id, worker, lease_ms > 0, "claim a build", err);
	if (r < 0)
		return r;
	/* the claim and the read of who holds it in one write transaction:
	 * what it says is what the store holds */
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_rollbackp) struct sq_conn *tx = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	_cleanup_(sq_resetp) sqlite3_stmt *h = NULL;
	r = sq_begin(c, true, &tx, err);
	if (r == 0)
		r = sq_prepare(c, SQ_BUILD_CLAIM, &q, err);
	if (r == 0)
		r = sq_prepare(c, SQ_BUILD_CLAIM_HOLDER, &h, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, repo_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, worker);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 3, now_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_bind_int64(q, 4, now_ms + lease_ms);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return sq_error(c, rc, err, "claim the build of %s", repo_id);
	bool taken = rc == SQLITE_ROW;
	/* to its end: no statement may be active at COMMIT */
	while (rc == SQLITE_ROW)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "claim the build of %s", repo_id);
	_cleanup_free_ char *who = NULL;
	if (!taken && holder) {
		rc = sq_bind_text(h, 1, repo_id);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(h);
		if (rc == SQLITE_ROW && sq_column_strdup(h, 0, &who) < 0)
			return wr_error_set(err, ENOMEM,
					    "claim the build of %s", repo_id);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE)
			return sq_error(c, rc, err, "claim the build of %s",
					repo_id);
		sqlite3_reset(h);
	}
	r = sq_commit(&tx, err);
	if (r < 0)
		return r;
	*got = taken;
	if (holder)
		*holder = TAKE_PTR(who);
	return 0;
}

int sq_build_release(struct store *st, const char *repo_id, const char *worker,
		     struct wr_error **err)
{
	int r = claim_args_ok(repo_id, worker, true, "release a build", err);
	if (r < 0)
		return r;
	_cleanup_(sq_releasep) struct sq_conn *c = sq_writer(sq_of(st));
	_cleanup_(sq_resetp) sqlite3_stmt *q = NULL;
	r = sq_prepare(c, SQ_BUILD_RELEASE, &q, err);
	if (r < 0)
		return r;
	int rc = sq_bind_text(q, 1, repo_id);
	if (rc == SQLITE_OK)
		rc = sq_bind_text(q, 2, worker);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	if (rc != SQLITE_DONE)
		return sq_error(c, rc, err, "release the build of %s", repo_id);
	return 0;
}

/* pg_builds.c - the snapshot build queue and the build claims on
 * PostgreSQL (store.h): one statement (a claim: one transaction) each;
 * servers taking builds at once skip each other's rows (FOR UPDATE SKIP
 * LOCKED); two claiming one repository's build take its row in turn. */
#include "store/pg_internal.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pg_build_enqueue(struct store *st, const char *repo_id, int64_t now_ms,
		     bool *added, struct wr_error **err)
{
	if (!store_id_ok(repo_id))
		return wr_error_absent(err, true, "no repository %s",
				       repo_id ? repo_id : "");
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, repo_id);
	pg_int(&p, now_ms);
	int r = pg_call(pg_of(st), &c, PG_BUILD_ENQUEUE, &p, &res, err,
			"queue the build of %s", repo_id);
	if (r < 0)
		return r;
	if (added)
		*added = pg_changes(res) > 0;
	return 0;
}

int pg_build_dequeue(struct store *st, char **repo_id, struct wr_error **err)
{
	*repo_id = NULL;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	int r = pg_call(pg_of(st), &c, PG_BUILD_DEQUEUE, &p, &res, err,
			"take a queued build");
	if (r < 0)
		return r;
	if (PQntuples(res) == 0)
		return -ENOENT; /* none waits: not an error to say */
	*repo_id = wr_strdup(PQgetvalue(res, 0, 0));
	return *repo_id ? 0 : wr_error_set(err, ENOMEM, "take a queued build");
}

int pg_build_unqueue(struct store *st, const char *repo_id, bool *removed,
		     struct wr_error **err)
{
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, repo_id ? repo_id : "");
	int r = pg_call(pg_of(st), &c, PG_BUILD_UNQUEUE, &p, &res, err,
			"unqueue the build of %s", repo_id ? repo_id : "");
	if (r < 0)
		return r;
	if (removed)
		*removed = pg_changes(res) > 0;
	return 0;
}

int pg_build_queue_list(struct store *st, char ***ids, size_t *n,
			struct wr_error **err)
{
	*ids = NULL;
	*n = 0;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	int r = pg_call(pg_of(st), &c, PG_BUILD_QUEUE_LIST, &p, &res, err,
			"list queued builds");
	if (r < 0)
		return r;
	size_t k = (size_t)PQntuples(res);
	char **v = wr_calloc(k + 1, sizeof(*v));
	if (!v)
		return wr_error_set(err, ENOMEM, "list queued builds");
	for (size_t i = 0; i < k; i++) {
		v[i] = wr_strdup(PQgetvalue(res, (int)i, 0));
		if (!v[i]) {
			store_strv_free(v, i);
			return wr_error_set(err, ENOMEM, "list queued builds");
		}
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

int pg_build_claim(struct store *st, const char *repo_id, const char *worker,
		   int64_t now_ms, int64_t lease_ms, bool *got, char **holder,
		   struct wr_error **err)
{
	int r =
	    claim_args_ok(repo_id, worker, lease_ms > 0, "claim a build", err);
	if (r < 0)
		return r;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_rollbackp) struct pg_conn *tx = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	_cleanup_(pg_clearp) PGresult *who = NULL;
	struct pg_params p = {0};
	pg_text(&p, repo_id);
	pg_text(&p, worker);
	pg_int(&p, now_ms);
	pg_int(&p, now_ms + lease_ms);
	r = pg_acquire(pg_of(st), &c, err);
	if (r == 0)
		r = pg_begin(c, &tx, err);
	/* the upsert locks the row (another claimer waits for this
	 * transaction), so the read after it sees who holds it now */
	if (r == 0)
		r = pg_exec(c, PG_BUILD_CLAIM, &p, &res, err,
			    "claim the build of %s", repo_id);
	if (r < 0)
		return r;
	bool taken = PQntuples(res) > 0;
	if (!taken && holder) {
		struct pg_params q = {0};
		pg_text(&q, repo_id);
		r = pg_exec(c, PG_BUILD_CLAIM_HOLDER, &q, &who, err,
			    "claim the build of %s", repo_id);
		if (r < 0)
			return r;
	}
	_cleanup_free_ char *name = NULL;
	if (who && PQntuples(who) > 0) {
		name = wr_strdup(PQgetvalue(who, 0, 0));
		if (!name)
			return wr_error_set(err, ENOMEM,
					    "claim the build of %s", repo_id);
	}
	r = pg_commit(&tx, err);
	if (r < 0)
		return r;
	*got = taken;
	if (holder)
		*holder = TAKE_PTR(name);
	return 0;
}

int pg_build_release(struct store *st, const char *repo_id, const char *worker,
		     struct wr_error **err)
{
	int r = claim_args_ok(repo_id, worker, true, "release a build", err);
	if (r < 0)
		return r;
	_cleanup_(pg_releasep) struct pg_conn *c = NULL;
	_cleanup_(pg_clearp) PGresult *res = NULL;
	struct pg_params p = {0};
	pg_text(&p, repo_id);
	pg_text(&p, worker);
	return pg_call(pg_of(st), &c, PG_BUILD_RELEASE, &p, &res, err,
		       "release the build of %s", repo_id);
}

/* refresh.c - rebuilding snapshots when their repository moves. */
#include "snapshot/refresh.h"

#include "snapshot/git.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *snap_freshness_name(enum snap_freshness f)
{
	static const char *const names[SNAP_FRESHNESS_MAX] = {"fresh", "behind",
							      "stale", "none"};
	return f < SNAP_FRESHNESS_MAX ? names[f] : "?";
}

static enum snap_freshness judge(int behind, int64_t age_ms,
				 const struct snap_staleness *p)
{
	if (behind == 0)
		return SNAP_FRESH;
	if (p && ((p->max_age_ms && age_ms > p->max_age_ms) ||
		  (p->max_commits_behind && behind > p->max_commits_behind)))
		return SNAP_STALE;
	return SNAP_BEHIND_OK;
}

int snap_refresh(const struct snap_build_opts *o,
		 const struct snap_staleness *policy, bool only_if_stale,
		 struct snap_refresh_result *res, struct wr_error **err)
{
	memset(res, 0, sizeof(*res));
	struct snap_store *store = NULL;
	int r = snap_store_open(o->data_dir, &store, err);
	if (r < 0)
		return r;
	struct snap_manifest **ms = NULL;
	size_t n = 0;
	struct wr_error *warning = NULL; /* corrupt manifests: skipped */
	_cleanup_free_ char *repo = git_repo_canonical(o->repo);
	if (!repo) {
		snap_store_close(store);
		return wr_error_set(err, ENOMEM, "refresh");
	}
	r = snap_store_list(store, repo, &ms, &n, &warning);
	wr_error_free(warning);
	if (r < 0) {
		snap_store_close(store);
		return wr_error_set(err, -r, "list snapshots of %s", o->repo);
	}
	/* newest first: the first ready one */
	struct snap_manifest *newest = NULL;
	for (size_t i = 0; i < n && !newest; i++) {
		if (ms[i]->status && !strcmp(ms[i]->status, "ready"))
			newest = ms[i];
	}
	_cleanup_free_ char *mirror =
	    git_mirror_update(o->data_dir, o->repo, err);
	char commit[41];
	if (!mirror || git_resolve(mirror, o->ref, commit, err) < 0) {
		snap_manifest_free_array(ms, n);
		snap_store_close(store);
		return -EIO;
	}
	res->before = SNAP_NONE;
	if (newest) {
		int behind =
		    strcmp(newest->commit, commit)
			? git_count_between(mirror, newest->commit, commit, err)
			: 0;
		if (behind < 0) {
			snap_manifest_free_array(ms, n);
			snap_store_close(store);
			return behind;
		}
		res->commits_behind = behind;
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		res->age_ms = (int64_t)now.tv_sec * 1000 +
			      now.tv_nsec / 1000000 - newest->created_ms;
		res->before = judge(behind, res->age_ms, policy);
	}
	bool build = res->before == SNAP_NONE || res->before == SNAP_STALE ||
		     (res->before == SNAP_BEHIND_OK && !only_if_stale);
	snap_store_close(store);
	if (!build) {
		/* keep the newest; free the rest */
		for (size_t i = 0; i < n; i++) {
			if (ms[i] != newest)
				snap_manifest_free(ms[i]);
		}
		free(ms);
		res->manifest = newest;
		return 0;
	}
	snap_manifest_free_array(ms, n);
	r = snap_build(o, &res->manifest, err);
	if (r < 0)
		return r;
	res->built = true;
	return 0;
}

void snap_refresh_result_clear(struct snap_refresh_result *res)
{
	snap_manifest_free(res->manifest);
	res->manifest = NULL;
}

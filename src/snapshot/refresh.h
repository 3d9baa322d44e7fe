/* refresh.h - keeping a repository's snapshots fresh.
 *
 * A refresh fetches the repository's mirror and builds a new snapshot when
 * the ref has moved past the newest ready snapshot (and the staleness
 * policy, if any, says it is due). Builds reuse the dependencies layer
 * when the spec and lockfiles are unchanged. Sessions never wait for a
 * refresh: they take the newest ready snapshot. `warren serve` (later)
 * calls snap_refresh on each repository's interval. */
#ifndef WR_SNAPSHOT_REFRESH_H
#define WR_SNAPSHOT_REFRESH_H

#include "snapshot/build.h"

#include <stdbool.h>
#include <stdint.h>

/* When may a session start from a snapshot? 0 = no limit. */
struct snap_staleness {
	int64_t max_age_ms;
	int max_commits_behind;
};

enum snap_freshness {
	SNAP_FRESH,	/* at the ref's commit */
	SNAP_BEHIND_OK, /* behind, within the policy: start, then sync */
	SNAP_STALE,	/* beyond the policy: refresh first */
	SNAP_NONE,	/* no ready snapshot of the repository */
	SNAP_FRESHNESS_MAX,
};

const char *snap_freshness_name(enum snap_freshness f);

struct snap_refresh_result {
	enum snap_freshness before; /* the newest snapshot, before */
	int commits_behind;	    /* of the newest snapshot, before */
	int64_t age_ms;
	bool built;			/* a new snapshot was built */
	struct snap_manifest *manifest; /* the newest ready snapshot after */
};

/* The newest ready snapshot of repo and how it stands against the ref
 * (resolved in the freshly fetched mirror) under policy. */
int snap_refresh(const struct snap_build_opts *o,
		 const struct snap_staleness *policy, bool only_if_stale,
		 struct snap_refresh_result *res, struct wr_error **err);
void snap_refresh_result_clear(struct snap_refresh_result *res);

#endif

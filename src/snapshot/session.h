/* session.h - starting work in a sandbox restored from a snapshot.
 *
 * Restoring is the O(1) overlay of the snapshot's layers (sandbox module).
 * Then, inside the running sandbox, through its exec socket:
 *   sync      with a ref, fetch and check out the newer commit from the
 *             repository's mirror (bound read-only into the sandbox); if
 *             the drift changed a lockfile, updateContentCommand re-runs
 *   hooks     postCreateCommand, postStartCommand
 *   services  the declared services start and must pass their ready probe
 * The outcome (commit, commits behind, snapshot age, whether hooks re-ran,
 * timings) is returned for the session's record. */
#ifndef WR_SNAPSHOT_SESSION_H
#define WR_SNAPSHOT_SESSION_H

#include "snapshot/store.h"
#include "util/error.h"

#include <stdbool.h>
#include <stdint.h>

struct snap_session {
	char commit[41];    /* the commit the workspace is at */
	int commits_behind; /* how far the snapshot was behind it */
	int64_t age_ms;	    /* the snapshot's age at the start */
	bool synced;	    /* a newer commit was checked out */
	bool hooks_rerun; /* updateContentCommand re-ran (lockfiles changed) */
	double sync_ms, hooks_ms, services_ms, total_ms;
};

/* Does a session from m need any work beyond the restore (given ref)? */
bool snap_session_needed(const struct snap_manifest *m, const char *ref);
/* The mirror path to bind into a session's sandbox (NULL if it has none). */
char *snap_session_mirror(const char *data_dir, const struct snap_manifest *m);
/* Runs the session start in the running sandbox called sandbox_name. */
int snap_session_start(const char *data_dir, const char *sandbox_name,
		       const struct snap_manifest *m, const char *ref,
		       struct snap_session *out, struct wr_error **err);
/* The script that runs spec's updateContentCommand in /workspace with its
 * containerEnv (NULL: the spec has none, or out of memory): what a change
 * of a lockfile needs before it is verified. */
struct spec;
char *snap_update_content_script(const struct spec *spec);
json_t *snap_session_to_json(const struct snap_session *s,
			     const struct snap_manifest *m);

#endif

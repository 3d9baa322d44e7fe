/* build.h - building a snapshot of a repository.
 *
 *   fetch     the repository's mirror under the data directory is updated
 *             (host side, the only step that touches the network)
 *   clone     a build sandbox clones the mirror into /workspace at the commit
 *   install   onCreateCommand, in the same sandbox: its writable layer is the
 *             dependencies layer, keyed by the spec and the lockfiles, and
 *             reused by later builds whose key is unchanged
 *   build     a second sandbox over the dependencies layer checks out the
 *             commit and runs updateContentCommand
 *   services  the declared services are started, probed until ready and
 *             stopped, so their data directories are initialised in the layer
 *   outputs   what the hooks left in /workspace against the commit (files
 *             created, tracked files changed) is recorded in the manifest's
 *             extra.build_output, for sessions to leave out of their change
 *   publish   both layers and the manifest are published atomically; a
 *             failing step publishes nothing
 *
 * Sandboxes are run through `warren sandbox run` (the same binary), so each
 * build step gets the full isolation of a session. */
#ifndef WR_SNAPSHOT_BUILD_H
#define WR_SNAPSHOT_BUILD_H

#include "snapshot/spec.h"
#include "snapshot/store.h"
#include "util/error.h"

#include <stdbool.h>
#include <stdint.h>

struct snap_build_opts {
	const char *data_dir;
	const char *repo;   /* a local path or any git URL */
	const char *ref;    /* NULL: the mirror's HEAD */
	const char *warren; /* the warren binary that runs the sandboxes */
	int progress_fd;    /* phase lines and hook output; -1: quiet */
	bool rebuild_deps;  /* ignore a cached dependencies layer */
	/* The server's egress rules for the build's proxy (a JSON object:
	 * the configuration's "egress", plus "self": "ADDR:PORT"); NULL:
	 * the defaults. Used only when the spec names hosts (egress,
	 * buildEgress): then warren-egress, next to warren, runs beside the
	 * build's sandboxes for the length of the build. */
	const char *egress_config;
	/* The repository's name as registered with warren serve, for the
	 * secrets given to some repositories only (security/secrets.h);
	 * NULL: the build gets only secrets open to any repository. */
	const char *repo_name;
	/* A step that prints nothing this long is stopped as hung (0:
	 * SNAP_HUNG_AFTER_MS_DEFAULT). */
	uint64_t hung_after_ms;
	/* where the steps run unless the spec says
	 * (customizations.warren.backend) */
	enum sandbox_backend backend;
};
#define SNAP_HUNG_AFTER_MS_DEFAULT (10ull * 60 * 1000)

/* Builds and publishes a snapshot; *out is its manifest. */
int snap_build(const struct snap_build_opts *o, struct snap_manifest **out,
	       struct wr_error **err);

/* The spec of a commit in a mirror: .devcontainer/devcontainer.json, else
 * warren.json, else the defaults. */
int snap_load_spec(const char *mirror, const char *commit, struct spec **out,
		   struct wr_error **err);
/* Adds to m->lockfiles the lockfiles (path, sha256) of commit. */
int snap_collect_lockfiles(const char *mirror, const char *commit,
			   const struct spec *spec, struct snap_manifest *m,
			   struct wr_error **err);

/* The data directory: $WARREN_HOME, else ./.warren (absolute; caller
 * frees). */
char *snap_default_data_dir(void);
/* The data directory of --data DIR (NULL: the default), absolute and
 * resolved where it exists; NULL only without memory. */
char *snap_data_dir(const char *data);

#endif

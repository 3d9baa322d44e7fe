/* layer.h - the agents layer: an agent CLI installed from the npm registry,
 * built once per set of packages and reused read-only by every session
 * whose agent is that preset.
 *
 * DATA/agents/<id>/ holds what `npm install --ignore-scripts --prefix DIR`
 * leaves in DIR (node_modules/, package.json, package-lock.json) and the
 * marker warren-agents-layer.json. The id is the sha256 of a format
 * version, the registry and the sorted package specs, so the same presets
 * share one layer. The install runs in a build sandbox (`warren sandbox
 * run`) whose only network is the build's egress proxy
 * (snapshot/build_proxy.h) allowing the registry's host alone.
 * docs/agents-layer.md has the whole story. */
#ifndef WR_AGENTS_LAYER_H
#define WR_AGENTS_LAYER_H

#include "util/error.h"

#include <stddef.h>
#include <stdint.h>

#define AGENTS_LAYER_MARKER "warren-agents-layer.json"
#define AGENTS_LAYER_MAX_PACKAGES 16
#define AGENTS_LAYER_TIMEOUT_MS_DEFAULT (15ull * 60 * 1000)

struct agents_layer_req {
	const char *data_dir;	/* DATA: layers go in DATA/agents/<id>/ */
	const char *warren_bin; /* the lean `warren` executable */
	const char *const *packages; /* npm specs, "opencode-ai@1.18.33" */
	size_t n_packages;
	const char *registry; /* e.g. "https://registry.npmjs.org/" */
	/* deny rules file for warren-egress (DATA/build-egress.json), may be
	 * NULL (the defaults: no private or loopback address) */
	const char *egress_config;
	uint64_t timeout_ms; /* the whole install, 0: 15 min */
};

/* The layer for req: DATA/agents/<id> (id: sha256 of the sorted specs, the
 * registry and a format version), holding <dir>/node_modules/... with the
 * packages installed (npm install --ignore-scripts --no-audit --no-fund
 * --prefix ...). Built at most once: a second caller for the same id waits
 * for the first (a lock file, DATA/agents/<id>.lock) and then reuses it; a
 * finished layer is marked complete (AGENTS_LAYER_MARKER, written last,
 * atomically) and is read-only from then on (chmod -R a-w); a failed or
 * interrupted build leaves nothing that looks complete (a temp dir
 * DATA/agents/.build-<id>.XXXXXX renamed into place only on success; stale
 * temp dirs from a killed server removed on the next call). *path gets the
 * layer directory (caller frees). -errno with *err naming the cause with
 * npm's last output lines on failure; a spec that is not a plain npm
 * "name@version" is refused (-EINVAL, err->bad_input) before anything
 * runs. Safe to call from several threads and processes at once. */
int agents_layer_ensure(const struct agents_layer_req *req, char **path,
			struct wr_error **err);

/* The id agents_layer_ensure would use (65 bytes: hex and NUL); -EINVAL
 * with err for a spec or registry it would refuse. */
int agents_layer_id(const struct agents_layer_req *req, char id[65],
		    struct wr_error **err);

#endif

/* evidence.h - the evidence of a session's change, computed on the host.
 *
 * Everything inside a session's sandbox is the agent's to forge: files,
 * .git/config, hooks, attributes, HEAD, refs, the git binary itself. So
 * the only thing taken from the sandbox is a tree: a script there stages
 * the work tree in a scratch index and streams the new objects out as a
 * pack (bytes, not trusted). On the host, in the session's quarantine
 * repository (DATA/sessions/<id>/evidence/result.git, owned by Warren,
 * never reachable from a sandbox, its base objects borrowed from the
 * repository's mirror):
 *   import   git index-pack --strict: every object checked (malformed
 *            objects, ".git" path components, .gitmodules symlinks...),
 *            every link resolved, under a size cap;
 *   judge    the changed entries: their count, no gitlink, no symlink
 *            that leaves the tree or points into .git, no ".git"
 *            component in any case;
 *   leave    out what the snapshot build produced (its manifest's
 *            build_output), never the agent's own edits;
 *   commit   Warren writes the one result commit itself (parent: the
 *            session's base, author: the prompting user), on
 *            refs/heads/warren/<id> of the quarantine;
 *   diff     the patch, file list and stats of base..commit, streamed to
 *            the artifact directory; binary files judged by git's own
 *            heuristic (no attribute is read);
 *   bundle   base..commit as a bundle for Warren's verification sandbox.
 * Every host git runs in the locked-down environment (util/gitenv.h).
 * The push (review.h) sends exactly this commit id from the quarantine. */
#ifndef WR_REVIEW_EVIDENCE_H
#define WR_REVIEW_EVIDENCE_H

#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* Defaults of the limits of a change (configurable: "review" in the
 * server's configuration). */
#define EVIDENCE_MAX_OBJECT_BYTES (50ull * 1000 * 1000)
#define EVIDENCE_MAX_FILES 10000
#define EVIDENCE_MAX_DIFF_BYTES (64ull << 20)

struct evidence_limits {
	uint64_t max_object_bytes; /* the new objects' pack (0: default) */
	uint64_t max_files;	   /* files the change touches (0: default) */
	uint64_t max_diff_bytes;   /* diff.patch kept (0: default) */
};

struct evidence_request {
	const char *data_dir;
	const char *session_id;
	const char *warren_bin; /* to exec into the agent's sandbox */
	const char *sandbox;	/* the agent's sandbox */
	const char *mirror;	/* the repository's mirror (holds base) */
	const char *base;	/* 40 hex: the commit the session started at */
	const char *author;	/* the prompting user */
	const char *message;	/* the commit message */
	const char *artifact_dir;
	/* the snapshot manifest's build_output (NULL: none recorded) */
	const json_t *build_output;
	struct evidence_limits limits;
};

/* The session's quarantine repository and its verification bundle's
 * directory (caller frees). */
char *evidence_repo_path(const char *data_dir, const char *session_id);
char *evidence_bundle_dir(const char *data_dir, const char *session_id);
#define EVIDENCE_BUNDLE_NAME "result.bundle"

/* Imports, judges and commits the agent's work tree (see above); writes
 * artifact_dir/diff.patch, files.json and branch.bundle. *out: {"branch",
 * "commit", "base", "tree", "files": [{"path", "additions", "deletions",
 * "binary"}], "additions", "deletions", "changed", "diff_truncated",
 * "diff_bytes", "object_bytes", "build_output": {"count", "paths"}}.
 * A change the checks refuse is an error with the reason, err->input
 * set (the agent's doing, not Warren's). */
int evidence_commit(const struct evidence_request *req, json_t **out,
		    struct wr_error **err);

/* The quarantine made from a bundle of refs/heads/warren/<session_id>
 * (a checkpoint the worker that ran the session pushed, on a host that
 * lacks its quarantine), its objects checked; it must name commit. */
int evidence_import_bundle(const char *data_dir, const char *session_id,
			   const char *mirror, const char *bundle,
			   const char *commit, struct wr_error **err);

/* Does the quarantine hold commit as refs/heads/warren/<session_id>? */
int evidence_check_commit(const char *data_dir, const char *session_id,
			  const char *commit, struct wr_error **err);

/* The judging rules, on their own (unit-tested): a path with a ".git"
 * component in any case; a symlink at path whose target stays inside the
 * tree (relative, never above the root) and out of any .git. */
bool evidence_path_has_dotgit(const char *path);
bool evidence_symlink_inside(const char *path, const char *target);

#endif

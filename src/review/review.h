/* review.h - what a human reviews: verification, the branch and its diff,
 * and, after approval, the push.
 *
 * Owns the evidence of a session's change:
 *   verify   Warren itself runs the spec's verify commands in the sandbox
 *            (the agent's word is not evidence): status, output, timings;
 *   commit   the workspace's changes become a commit on warren/<session>
 *            in the sandbox's repository, authored by the prompting user;
 *            the diff against the session's base commit, the files and the
 *            stats are written to the session's artifact directory;
 *   push     after approval: the branch leaves the sandbox as a git bundle
 *            (the sandbox holds no credential and has no network), is
 *            fetched into the repository's mirror on the host and pushed
 *            to the repository's remote as refs/heads/warren/<session> and
 *            nothing else, never forced.
 * Commands inside the sandbox go through a struct tools_exec (agent/tools.h),
 * host git through the host's git CLI. */
#ifndef WR_REVIEW_REVIEW_H
#define WR_REVIEW_REVIEW_H

#include "agent/tools.h"
#include "util/error.h"

#include <jansson.h>
#include <stddef.h>

/* Runs every verify command (argv arrays) in /workspace. *out:
 * {"passed": bool, "results": [{"command", "status", "ms", "output"}]}
 * (output: the tail of stdout+stderr, at most max_output bytes). */
int review_verify(const struct tools_exec *ex, char ***argvs, size_t n,
		  size_t max_output, json_t **out, struct wr_error **err);

/* Text for the agent after a failed verification: which commands failed
 * and the tail of their output. */
char *review_verify_feedback(const json_t *verify);

/* Commits the workspace on warren/<session_id> (author user, message
 * given) and writes artifact_dir/diff.patch (against base) and
 * artifact_dir/files.json. *out: {"branch", "commit", "base", "files":
 * [{"path", "additions", "deletions"}], "additions", "deletions",
 * "changed": bool}. */
int review_commit(const struct tools_exec *ex, const char *session_id,
		  const char *base, const char *user, const char *message,
		  const char *artifact_dir, json_t **out,
		  struct wr_error **err);

/* Pushes the branch in bundle (written by review_commit) to remote_url
 * as refs/heads/warren/<session_id>, through mirror (the repository's
 * mirror on the host, which holds the bundle's base). remote_env: the
 * environment of the git that talks to the remote (the credential
 * broker's, with the repository's credentials), NULL: the server's own.
 * *out: {"remote",
 * "ref", "commit"}. */
int review_push(const char *bundle, const char *session_id,
		const char *mirror, const char *remote_url,
		char *const remote_env[], json_t **out, struct wr_error **err);

#endif

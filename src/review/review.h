/* review.h - what a human reviews: verification, the branch and its diff,
 * and, after approval, the push.
 *
 * Owns the evidence of a session's change:
 *   verify   Warren itself runs the spec's verify commands in the sandbox
 *            (the agent's word is not evidence): status, output, timings;
 *   commit   the change, imported, judged and committed on the host
 *            (evidence.h);
 *   push     after approval: exactly the reviewed commit id leaves from
 *            the session's quarantine repository on the host to the
 *            repository's remote as refs/heads/warren/<session> and
 *            nothing else, never forced; the branch is read back.
 * Commands inside the sandbox go through a struct tools_exec (agent/tools.h),
 * host git through the host's git CLI. */
#ifndef WR_REVIEW_REVIEW_H
#define WR_REVIEW_REVIEW_H

#include "agent/tools.h"
#include "util/error.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Runs every verify command (argv arrays) in /workspace. *out:
 * {"passed": bool, "results": [{"command", "status", "ms", "output"}]}
 * (output: the tail of stdout+stderr, at most max_output bytes). */
int review_verify(const struct tools_exec *ex, char ***argvs, size_t n,
		  size_t max_output, json_t **out, struct wr_error **err);

/* Text for the agent after a failed verification: the attempt of how
 * many, which commands failed and the tail of their output; how to hand
 * the change back (builtin: the built-in agent's finish tool; else a
 * command agent's exit). */
char *review_verify_feedback(const json_t *verify, int attempt, int attempts,
			     bool builtin);

/* Pushes commit (the reviewed one, held by the session's quarantine
 * repository: evidence.h) to remote_url as refs/heads/warren/<session_id>,
 * never forced, then reads the branch back: it must name commit.
 * remote_env: the environment of the git that talks to the remote (the
 * credential broker's, with the repository's credentials, built on the
 * locked-down one), NULL: the locked-down one. *out: {"remote", "ref",
 * "commit"}. */
int review_push(const char *quarantine, const char *session_id,
		const char *commit, const char *remote_url,
		char *const remote_env[], json_t **out, struct wr_error **err);

#endif

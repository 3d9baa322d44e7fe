/* forge.h - pull requests on a forge, opened after approval.
 *
 * Owns the one call Warren makes to a forge's REST API: once a reviewer
 * approved a session and its branch warren/<session> was pushed to the
 * repository's remote, a pull request from that branch to the base
 * branch. GitHub's API (and GitHub Enterprise's, at another api_url) to
 * begin with; tested against tests/tools/forge_server.py, a local
 * recorded-response stand-in.
 *
 * Idempotent: when the forge says a pull request from the branch already
 * exists (a second approve, or a retried POST that had in fact gone
 * through), the open one is looked up and returned. The token goes out
 * only in the Authorization header, is wiped after the call and never
 * appears in an error message. */
#ifndef WR_REVIEW_FORGE_H
#define WR_REVIEW_FORGE_H

#include "util/error.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define FORGE_TIMEOUT_MS 30000ull	 /* one request, 0 in the config */
#define FORGE_RETRIES 2			 /* after a 5xx, 408, 429, transport */
#define FORGE_RETRY_BACKOFF_MS 1000ull	 /* the first wait, doubled */
#define FORGE_RETRY_WAIT_MAX_MS 10000ull /* any one wait, Retry-After too */
#define FORGE_RESPONSE_MAX (1u << 20)	 /* one response body */
#define FORGE_TITLE_MAX 256		 /* characters, GitHub's limit */
#define FORGE_BODY_MAX 65536		 /* characters, GitHub's limit */
#define FORGE_TITLE_CUT 72		 /* forge_title's length */

struct forge_config {
	const char *kind;	 /* "github" (NULL: "github") */
	const char *api_url;	 /* NULL: https://api.github.com; http://
				    only to a loopback host */
	const char *repo;	 /* "owner/name", [A-Za-z0-9._-] parts */
	const char *token;	 /* required; never logged */
	const char *base_branch; /* NULL or "": "main" */
	uint64_t timeout_ms;	 /* one request, 0: FORGE_TIMEOUT_MS */
	/* for tests; 0 means the default */
	uint64_t retry_backoff_ms; /* FORGE_RETRY_BACKOFF_MS */
	size_t max_response;	   /* FORGE_RESPONSE_MAX */
};

/* Checks a configuration without any request: the kind, the API URL, the
 * repository's name, the base branch and the token's form. -EINVAL with
 * bad_input. For the server to call when it loads its configuration. */
int forge_config_check(const struct forge_config *f, struct wr_error **err);

/* A pull request's title from a session's prompt: its first line with
 * text, control characters as spaces, trimmed, cut to FORGE_TITLE_CUT
 * characters on a character boundary (ending in U+2026 "…"); "Warren
 * session <session_id>" when the prompt has no text or is not UTF-8.
 * Always a title forge_open_pull_request accepts; NULL on allocation
 * failure. */
char *forge_title(const char *prompt, const char *session_id);

/* Opens a pull request from head_branch (a branch of the same repository,
 * e.g. "warren/<session>") to f->base_branch, titled title (at most
 * FORGE_TITLE_MAX characters) with body (markdown, NULL: none). *out:
 * {"url": html_url, "number": N, "api_url": url, "created": bool} -
 * created false when an open pull request from head_branch already existed
 * and is the one returned.
 *
 * Errors: -EINVAL with bad_input for a bad configuration, branch or title
 * (no request is made) and for a 4xx from the forge (with its message);
 * after FORGE_RETRIES retries of a 5xx, 408, 429 or a transport failure
 * -EIO, -ETIMEDOUT, -EAGAIN, -EHOSTUNREACH, -ECONNRESET; -EBADMSG for a
 * response that is not what GitHub sends; -EFBIG over max_response;
 * -ENOENT when the forge says a pull request exists but none is open. */
int forge_open_pull_request(const struct forge_config *f,
			    const char *head_branch, const char *title,
			    const char *body, json_t **out,
			    struct wr_error **err);

#endif

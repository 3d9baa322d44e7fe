/* slack_message.c - the text Warren posts to Slack: a session's outcome
 * (and its status, on request), the answer to a session started from
 * Slack, the usage.
 *
 * Slack's mrkdwn: *bold*, `code`, "> " quotes and <URL|label> links are
 * Warren's own; everything that comes from a user or an agent (a prompt,
 * the agent's summary, a reason, a verify command) is escaped (& < > as
 * Slack's entities), so that no text can make a link, mention someone or
 * ping a channel (<!channel>), and cut to a few hundred characters. A
 * message stays far below Slack's 40,000 characters. */
#include "notify/slack.h"

#include "notify/internal.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROMPT_SHOWN 300
#define SUMMARY_SHOWN 1500
#define REASON_SHOWN 500
#define COMMAND_SHOWN 120
#define ELLIPSIS "\xe2\x80\xa6"

/* ---- the buffer -----------------------------------------------------------
 */

void slack_buf_add(struct slack_buf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	size_t cap = b->cap ? b->cap : SLACK_POST_TEXT_MAX;
	if (n > cap - b->len) {
		b->failed = true;
		return;
	}
	if (b->len + n + 1 > b->size) {
		size_t size = b->size ? b->size : 256;
		while (size < b->len + n + 1)
			size *= 2;
		char *grown = wr_realloc(b->data, size);
		if (!grown) {
			b->failed = true;
			return;
		}
		b->data = grown;
		b->size = size;
	}
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void slack_buf_puts(struct slack_buf *b, const char *s)
{
	slack_buf_add(b, s, strlen(s));
}

void slack_buf_printf(struct slack_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *text = wr_vasprintf(fmt, ap);
	va_end(ap);
	if (!text)
		b->failed = true;
	else
		slack_buf_puts(b, text);
}

void slack_buf_clear(struct slack_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

char *slack_buf_take(struct slack_buf *b)
{
	if (!b->failed && !b->data)
		slack_buf_add(b, "", 0);
	if (b->failed) {
		slack_buf_clear(b);
		return NULL;
	}
	char *text = b->data;
	memset(b, 0, sizeof(*b));
	return text;
}

/* ---- escaping --------------------------------------------------------------
 */

enum put_mode {
	PUT_TEXT,   /* newlines kept */
	PUT_LINE,   /* newlines as spaces */
	PUT_CODE,   /* one line, inside `…`: backquotes become ' */
	PUT_QUOTED, /* newlines followed by "> " (inside a quote) */
};

/* text, escaped, at most max bytes of it (then "…"); invalid UTF-8 as
 * '?', control characters as spaces. */
static void put_escaped(struct slack_buf *b, const char *text, size_t max,
			enum put_mode mode)
{
	const unsigned char *s = (const unsigned char *)(text ? text : "");
	size_t len = strlen((const char *)s);
	for (size_t i = 0; i < len;) {
		size_t n = slack_utf8_seq(s + i, len - i);
		if (i + (n ? n : 1) > max) {
			slack_buf_puts(b, ELLIPSIS);
			return;
		}
		if (n == 0) {
			slack_buf_puts(b, "?");
			i++;
			continue;
		}
		if (n > 1) {
			slack_buf_add(b, (const char *)s + i, n);
			i += n;
			continue;
		}
		char c = (char)s[i++];
		switch (c) {
		case '&': slack_buf_puts(b, "&amp;"); break;
		case '<': slack_buf_puts(b, "&lt;"); break;
		case '>': slack_buf_puts(b, "&gt;"); break;
		case '`':
			slack_buf_puts(b, mode == PUT_CODE ? "'" : "`");
			break;
		case '\n':
			slack_buf_puts(b, mode == PUT_TEXT     ? "\n"
					  : mode == PUT_QUOTED ? "\n> "
							       : " ");
			break;
		default:
			if ((unsigned char)c < ' ' || c == 0x7f)
				c = ' ';
			slack_buf_add(b, &c, 1);
		}
	}
}

char *slack_escape(const char *text, size_t max)
{
	struct slack_buf b = {0};
	put_escaped(&b, text, max, PUT_TEXT);
	return slack_buf_take(&b);
}

/* The first line of text that has anything but spaces. */
static const char *first_line(const char *text, size_t *len)
{
	const char *p = text ? text : "";
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\r')
			p++;
		size_t n = strcspn(p, "\n");
		if (n || !p[n]) {
			while (n && (p[n - 1] == ' ' || p[n - 1] == '\r' ||
				     p[n - 1] == '\t'))
				n--;
			*len = n;
			return p;
		}
		p += n + 1;
	}
}

/* ---- sessions
 * ---------------------------------------------------------------- */

char *slack_session_url(const struct slack_config *cfg, const char *id)
{
	return wr_asprintf("%s/#/sessions/%s", cfg->base_url, id);
}

static const char *state_headline(enum session_state s)
{
	switch (s) {
	case SESSION_QUEUED: return "Queued";
	case SESSION_PROVISIONING: return "Starting";
	case SESSION_RUNNING: return "Running";
	case SESSION_VERIFYING: return "Verifying";
	case SESSION_REVIEW: return "Ready for review";
	case SESSION_APPROVED: return "Approved, pushing";
	case SESSION_PUSHED: return "Approved and pushed";
	case SESSION_REJECTED: return "Rejected";
	case SESSION_FAILED: return "Failed";
	case SESSION_CANCELLED: return "Cancelled";
	case SESSION_EXPIRED: return "Expired";
	case SESSION_INTERRUPTED: return "Interrupted, will resume";
	default: return "Unknown state";
	}
}

/* "<URL|s-…> on `repo`" */
static void put_session_ref(struct slack_buf *b, const char *url,
			    const struct store_session *s,
			    const char *repo_name)
{
	slack_buf_printf(b, "session <%s|%s> on `", url, s->id);
	put_escaped(b, repo_name ? repo_name : s->repo_id, 100, PUT_CODE);
	slack_buf_puts(b, "`");
}

static void put_verify(struct slack_buf *b, const json_t *outcome)
{
	const json_t *v = json_object_get(outcome, "verify");
	if (!json_is_object(v)) {
		/* a result without a verification: the repository has no
		 * verify commands */
		if (json_is_object(json_object_get(outcome, "result")))
			slack_buf_puts(b, "\n*Verify:* no verify commands");
		return;
	}
	json_int_t attempts =
	    json_integer_value(json_object_get(v, "attempts"));
	if (json_is_true(json_object_get(v, "passed"))) {
		slack_buf_puts(b, "\n*Verify:* passed");
		if (attempts > 1)
			slack_buf_printf(b, " after %lld attempts",
					 (long long)attempts);
		return;
	}
	slack_buf_puts(b, "\n*Verify:* failed");
	size_t i;
	const json_t *res;
	json_array_foreach(json_object_get(v, "results"), i, res)
	{
		const json_t *status = json_object_get(res, "status");
		if (!json_is_integer(status) || json_integer_value(status) == 0)
			continue;
		slack_buf_puts(b, ": `");
		put_escaped(b,
			    json_string_value(json_object_get(res, "command")),
			    COMMAND_SHOWN, PUT_CODE);
		slack_buf_printf(b, "` exited %lld",
				 (long long)json_integer_value(status));
		break;
	}
	if (attempts > 1)
		slack_buf_printf(b, " (%lld attempts)", (long long)attempts);
}

static void put_diff(struct slack_buf *b, const json_t *outcome)
{
	const json_t *result = json_object_get(outcome, "result");
	if (!json_is_object(result))
		return;
	if (!json_is_true(json_object_get(result, "changed"))) {
		slack_buf_puts(b, "\n*Diff:* no changes");
		return;
	}
	const json_t *total = json_object_get(result, "files_total");
	size_t files = total ? (size_t)json_integer_value(total)
			     : json_array_size(json_object_get(result, "files"));
	const char *commit =
	    json_string_value(json_object_get(result, "commit"));
	slack_buf_printf(
	    b, "\n*Diff:* %zu file%s changed, +%lld -%lld", files,
	    files == 1 ? "" : "s",
	    (long long)json_integer_value(json_object_get(result, "additions")),
	    (long long)json_integer_value(
		json_object_get(result, "deletions")));
	if (commit)
		slack_buf_printf(b, " at commit `%.12s`", commit);
	if (json_is_true(json_object_get(result, "diff_truncated")))
		slack_buf_puts(b, " (the diff is cut short)");
	json_int_t left = json_integer_value(json_object_get(
	    json_object_get(result, "build_output"), "count"));
	if (left > 0)
		slack_buf_printf(b, "; %lld build output%s left out",
				 (long long)left, left == 1 ? "" : "s");
}

/* Who decided and why; the push and the pull request. */
static void put_decision(struct slack_buf *b, const struct store_session *s,
			 const json_t *outcome)
{
	const json_t *d = json_object_get(outcome, "decision");
	const char *by = json_string_value(json_object_get(d, "by"));
	const char *why = json_string_value(json_object_get(d, "reason"));
	if (by && (s->state == SESSION_PUSHED || s->state == SESSION_REJECTED ||
		   s->state == SESSION_APPROVED)) {
		slack_buf_puts(b, "\n*By:* ");
		put_escaped(b, by, 64, PUT_LINE);
	}
	if (s->state == SESSION_REJECTED && why) {
		slack_buf_puts(b, "\n*Reason:* ");
		put_escaped(b, why, REASON_SHOWN, PUT_LINE);
	} else if ((s->state == SESSION_FAILED ||
		    s->state == SESSION_CANCELLED ||
		    s->state == SESSION_EXPIRED) &&
		   s->reason) {
		slack_buf_puts(b, "\n*Reason:* ");
		put_escaped(b, s->reason, REASON_SHOWN, PUT_LINE);
	}
	const json_t *push = json_object_get(outcome, "push");
	const char *ref = json_string_value(json_object_get(push, "ref"));
	if (s->state == SESSION_PUSHED && ref) {
		slack_buf_puts(b, "\n*Pushed:* `");
		put_escaped(b, ref, 200, PUT_CODE);
		slack_buf_puts(b, "`");
	}
	const json_t *pr = json_object_get(outcome, "pull_request");
	const char *pr_url = json_string_value(json_object_get(pr, "url"));
	json_int_t number = json_integer_value(json_object_get(pr, "number"));
	if (pr_url && number > 0 && !strpbrk(pr_url, "|<> \n") &&
	    (!strncmp(pr_url, "https://", 8) || !strncmp(pr_url, "http://", 7)))
		slack_buf_printf(b, "\n*Pull request:* <%s|#%lld>", pr_url,
				 (long long)number);
}

/* The details of a session: its prompt, the agent's summary, verify,
 * diff, decision. */
static void put_details(struct slack_buf *b, const struct store_session *s)
{
	size_t plen;
	const char *prompt = first_line(s->prompt, &plen);
	if (plen) {
		_cleanup_free_ char *line = wr_strndup(prompt, plen);
		if (!line) {
			b->failed = true;
			return;
		}
		slack_buf_puts(b, "\n*Prompt:* ");
		put_escaped(b, line, PROMPT_SHOWN, PUT_LINE);
	}
	json_t *outcome =
	    s->outcome_json ? json_loads(s->outcome_json, 0, NULL) : NULL;
	const char *summary = json_string_value(
	    json_object_get(json_object_get(outcome, "result"), "summary"));
	if (summary && *summary) {
		slack_buf_puts(b, "\n*Summary:*\n> ");
		put_escaped(b, summary, SUMMARY_SHOWN, PUT_QUOTED);
	}
	put_verify(b, outcome);
	put_diff(b, outcome);
	put_decision(b, s, outcome);
	json_decref(outcome);
}

static char *session_text(const struct slack_config *cfg,
			  const struct store_session *s, const char *repo_name,
			  bool with_user)
{
	_cleanup_free_ char *url = slack_session_url(cfg, s->id);
	if (!url)
		return NULL;
	struct slack_buf b = {0};
	slack_buf_printf(&b, "*%s:* ", state_headline(s->state));
	put_session_ref(&b, url, s, repo_name);
	if (with_user && s->user) {
		slack_buf_puts(&b, " (");
		put_escaped(&b, s->user, 64, PUT_LINE);
		slack_buf_puts(&b, ")");
	}
	put_details(&b, s);
	slack_buf_printf(&b, "\n<%s|Open it in Warren>", url);
	return slack_buf_take(&b);
}

char *slack_outcome_text(const struct slack_config *cfg,
			 const struct store_session *s, const char *repo_name)
{
	return session_text(cfg, s, repo_name, false);
}

char *slack_status_text(const struct slack_config *cfg,
			const struct store_session *s, const char *repo_name)
{
	return session_text(cfg, s, repo_name, true);
}

char *slack_started_text(const struct slack_config *cfg,
			 const struct store_session *s, const char *repo_name)
{
	_cleanup_free_ char *url = slack_session_url(cfg, s->id);
	if (!url)
		return NULL;
	struct slack_buf b = {0};
	slack_buf_puts(&b, "Started ");
	put_session_ref(&b, url, s, repo_name);
	if (s->user) {
		slack_buf_puts(&b, " for ");
		put_escaped(&b, s->user, 64, PUT_LINE);
	}
	if (s->ref) {
		slack_buf_puts(&b, " at `");
		put_escaped(&b, s->ref, 100, PUT_CODE);
		slack_buf_puts(&b, "`");
	}
	slack_buf_puts(&b, ". The outcome will follow here.");
	size_t plen;
	const char *prompt = first_line(s->prompt, &plen);
	if (plen) {
		_cleanup_free_ char *line = wr_strndup(prompt, plen);
		if (!line) {
			slack_buf_clear(&b);
			return NULL;
		}
		slack_buf_puts(&b, "\n> ");
		put_escaped(&b, line, PROMPT_SHOWN, PUT_LINE);
	}
	return slack_buf_take(&b);
}

char *slack_help_text(const char *prefix)
{
	struct slack_buf b = {0};
	_cleanup_free_ char *p = slack_escape(prefix ? prefix : "/warren", 40);
	if (!p)
		return NULL;
	slack_buf_printf(
	    &b,
	    "*Warren* runs a coding agent on a repository and brings the "
	    "change back for review.\n"
	    "• `%s REPO PROMPT`: start a session on a registered repository "
	    "(`REPO@REF` for another ref than its default)\n"
	    "• `%s status ID`: where a session is\n"
	    "• `%s approve ID`: approve a session in review and push its "
	    "branch (reviewers and admins)\n"
	    "• `%s reject ID [REASON]`: reject it (reviewers and admins)\n"
	    "• `%s help`: this text",
	    p, p, p, p, p);
	return slack_buf_take(&b);
}

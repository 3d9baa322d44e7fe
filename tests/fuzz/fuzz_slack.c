/* fuzz_slack.c - libFuzzer target for what Slack sends and what Warren
 * posts back (src/notify/slack_request.c, slack_message.c).
 *
 * The input goes, as it is, to every parser: a slash command's form body
 * (slack_form_parse), an Events API payload (slack_event_parse), a
 * command's text (slack_command_parse, slack_text_decode) and the mrkdwn
 * escaping (slack_escape); split at its first two newlines into a
 * timestamp, a signature and a body, to slack_verify; and as a session's
 * outcome JSON, to slack_outcome_text. Besides memory safety (ASan/UBSan),
 * properties that must hold for any input (a violation abort()s so the
 * fuzzer keeps the input):
 *   - a failed parse leaves its output untouched and says why (bad input,
 *     or out of memory);
 *   - a form has at most SLACK_FORM_FIELDS_MAX fields, with non-empty,
 *     unique keys, and values that are UTF-8 without NUL;
 *   - a command is one of the verbs with what it needs: a repository name
 *     of [A-Za-z0-9._-] and a prompt without white space at either end,
 *     or a session id "s-…";
 *   - a mention has a channel, a timestamp and a text; a URL check has a
 *     challenge;
 *   - decoding never lengthens a text; escaping leaves no '<' or '>' and
 *     gives UTF-8 whatever came in;
 *   - a body signed with slack_sign verifies, and the same signature does
 *     not verify a body one byte longer;
 *   - an outcome text is UTF-8, links to the session's page and holds no
 *     '<' but Warren's own links. */
#include "notify/slack.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SECRET "fuzz-signing-secret"

static void check(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_slack: %s\n", what);
		abort();
	}
}

static bool utf8(const char *s)
{
	json_t *j = json_string(s); /* jansson checks UTF-8 */
	json_decref(j);
	return j != NULL;
}

static void check_failure(int r, struct wr_error *err, const char *what)
{
	check(r < 0, what);
	check(err && err->msg, "a failure without a message");
	check(err->bad_input || r == -ENOMEM, "a failure not of the input");
}

static void fuzz_form(const char *body, size_t size)
{
	struct slack_form f = {.n = 12345};
	struct wr_error *err = NULL;
	int r = slack_form_parse(body, size, &f, &err);
	if (r < 0) {
		check_failure(r, err, "form");
		check(f.n == 12345 && !f.buf, "failed form wrote its output");
		wr_error_free(err);
		return;
	}
	check(!err, "a form parsed with an error");
	check(f.n <= SLACK_FORM_FIELDS_MAX, "too many form fields");
	for (size_t i = 0; i < f.n; i++) {
		check(f.f[i].key[0] != '\0', "an empty form key");
		check(utf8(f.f[i].key) && utf8(f.f[i].value),
		      "a form field that is not UTF-8");
		check(slack_form_get(&f, f.f[i].key) == f.f[i].value,
		      "a repeated form key");
	}
	slack_form_clear(&f);
}

static bool repo_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

static bool space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	       c == '\f';
}

static void fuzz_command(const char *text)
{
	struct slack_command c = {.verb = SLACK_VERB_MAX};
	struct wr_error *err = NULL;
	int r = slack_command_parse(text, &c, &err);
	if (r < 0) {
		check_failure(r, err, "command");
		check(c.verb == SLACK_VERB_MAX && !c.repo,
		      "failed command wrote its output");
		wr_error_free(err);
		return;
	}
	switch (c.verb) {
	case SLACK_VERB_RUN: {
		check(c.repo && *c.repo && c.prompt && *c.prompt,
		      "a run without a repository or a prompt");
		for (const char *p = c.repo; *p; p++)
			check(repo_char(*p), "a repository name's character");
		size_t n = strlen(c.prompt);
		check(!space(c.prompt[0]) && !space(c.prompt[n - 1]),
		      "a prompt not trimmed");
		check(utf8(c.prompt), "a prompt not UTF-8");
		break;
	}
	case SLACK_VERB_STATUS:
	case SLACK_VERB_APPROVE:
	case SLACK_VERB_REJECT:
		check(c.session_id && !strncmp(c.session_id, "s-", 2),
		      "a decision without a session id");
		break;
	case SLACK_VERB_HELP: break;
	default: check(0, "an unknown verb");
	}
	slack_command_clear(&c);
}

static void fuzz_event(const char *body, size_t size)
{
	struct slack_event e = {.kind = SLACK_EVENT_KIND_MAX};
	struct wr_error *err = NULL;
	int r = slack_event_parse(body, size, &e, &err);
	if (r < 0) {
		check_failure(r, err, "event");
		check(e.kind == SLACK_EVENT_KIND_MAX,
		      "failed event wrote its output");
		wr_error_free(err);
		return;
	}
	if (e.kind == SLACK_EVENT_URL_VERIFICATION)
		check(e.challenge && *e.challenge, "a check without challenge");
	else if (e.kind == SLACK_EVENT_MENTION)
		check(e.event_id && e.channel && e.ts && e.text &&
			  (e.user || e.from_bot),
		      "a mention without its fields");
	else
		check(e.kind == SLACK_EVENT_OTHER, "an unknown event kind");
	slack_event_clear(&e);
}

static void fuzz_text(const char *text)
{
	_cleanup_free_ char *decoded = slack_text_decode(text);
	check(decoded != NULL, "decode failed");
	check(strlen(decoded) <= strlen(text), "decoding lengthened a text");
	_cleanup_free_ char *escaped = slack_escape(text, 500);
	check(escaped != NULL, "escape failed");
	check(!strpbrk(escaped, "<>"), "escaping left a '<' or '>'");
	check(utf8(escaped), "an escaped text is not UTF-8");
}

static void fuzz_verify(const char *text, size_t size)
{
	/* TIMESTAMP \n SIGNATURE \n BODY */
	const char *nl1 = memchr(text, '\n', size);
	const char *nl2 =
	    nl1 ? memchr(nl1 + 1, '\n', size - (size_t)(nl1 + 1 - text)) : NULL;
	if (!nl2)
		return;
	_cleanup_free_ char *ts = wr_strndup(text, (size_t)(nl1 - text));
	_cleanup_free_ char *sig = wr_strndup(nl1 + 1, (size_t)(nl2 - nl1 - 1));
	const char *body = nl2 + 1;
	size_t len = size - (size_t)(body - text);
	check(ts && sig, "out of memory");
	int r = slack_verify(SECRET, ts, sig, body, len, 1700000000);
	check(r == 0 || r == -EINVAL || r == -ESTALE || r == -EACCES,
	      "verify: an unexpected result");
	char good[68];
	if (slack_sign(SECRET, "1700000000", body, len, good) == 0) {
		check(slack_verify(SECRET, "1700000000", good, body, len,
				   1700000000) == 0,
		      "a signed body does not verify");
		_cleanup_free_ char *longer = wr_malloc(len + 1);
		check(longer != NULL, "out of memory");
		memcpy(longer, body, len);
		longer[len] = 'x';
		check(slack_verify(SECRET, "1700000000", good, longer, len + 1,
				   1700000000) == -EACCES,
		      "a signature verifies another body");
	}
}

static void fuzz_outcome(const char *text)
{
	struct slack_config cfg = {.base_url = "https://warren.example"};
	struct store_session s = {
	    .id = "s-fuzz",
	    .repo_id = "r-fuzz",
	    .user = "fuzzer",
	    .prompt = (char *)text,
	    .reason = (char *)text,
	    .outcome_json = (char *)text,
	};
	for (int state = 0; state < SESSION_STATE_MAX; state++) {
		s.state = state;
		_cleanup_free_ char *out = slack_outcome_text(&cfg, &s, text);
		check(out != NULL, "no outcome text");
		check(utf8(out), "an outcome text is not UTF-8");
		check(
		    strstr(out, "<https://warren.example/#/sessions/s-fuzz|") !=
			NULL,
		    "an outcome text without its link");
		/* Warren's own links only: each '<' opens one of them */
		for (const char *p = strchr(out, '<'); p;
		     p = strchr(p + 1, '<'))
			check(!strncmp(p, "<https://warren.example/", 24) ||
				  !strncmp(p, "<http", 5),
			      "a '<' that is not a link of Warren's");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > SLACK_BODY_MAX + 16)
		return 0;
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	fuzz_form(text, size);
	fuzz_event(text, size);
	fuzz_verify(text, size);
	fuzz_command(text);
	fuzz_text(text);
	fuzz_outcome(text);
	free(text);
	return 0;
}

/* slack_request.c - what Slack sends, checked and taken apart: the v0
 * request signature, form-urlencoded bodies (slash commands), the text of
 * a command, Events API payloads (the URL check, app mentions).
 *
 * Pure functions over bytes: no I/O and no state, so that the fuzz target
 * (tests/fuzz/fuzz_slack.c) drives them directly. Everything they return
 * is bounded by what came in (itself capped at SLACK_BODY_MAX), and a
 * failure leaves the caller's out-parameter untouched. */
#include "notify/slack.h"

#include "notify/internal.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TIMESTAMP_DIGITS_MAX 18 /* fits an int64_t */
#define CHALLENGE_MAX 1024
#define REPO_NAME_MAX 100
#define REF_MAX 255
#define SESSION_ID_DIGITS_MAX 32

/* ---- the signature ------------------------------------------------------ */

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_hex(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* HMAC-SHA256(secret, "v0:" timestamp ":" body). */
static void hmac_v0(const char *secret, const char *timestamp, const char *body,
		    size_t len, unsigned char mac[crypto_auth_hmacsha256_BYTES])
{
	crypto_auth_hmacsha256_state state;
	crypto_auth_hmacsha256_init(&state, (const unsigned char *)secret,
				    strlen(secret));
	crypto_auth_hmacsha256_update(&state, (const unsigned char *)"v0:", 3);
	crypto_auth_hmacsha256_update(&state, (const unsigned char *)timestamp,
				      strlen(timestamp));
	crypto_auth_hmacsha256_update(&state, (const unsigned char *)":", 1);
	if (len)
		crypto_auth_hmacsha256_update(&state,
					      (const unsigned char *)body, len);
	crypto_auth_hmacsha256_final(&state, mac);
	/* the state holds the key's pads */
	sodium_memzero(&state, sizeof(state));
}

int slack_sign(const char *secret, const char *timestamp, const char *body,
	       size_t len, char out[68])
{
	if (!secret || !*secret || !timestamp || (len && !body))
		return -EINVAL;
	if (sodium_init() < 0)
		return -EIO;
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	hmac_v0(secret, timestamp, body, len, mac);
	memcpy(out, "v0=", 3);
	sodium_bin2hex(out + 3, 65, mac, sizeof(mac));
	sodium_memzero(mac, sizeof(mac));
	return 0;
}

int slack_verify(const char *secret, const char *timestamp,
		 const char *signature, const char *body, size_t len,
		 int64_t now_s)
{
	if (!secret || !*secret || !timestamp || !signature || (len && !body))
		return -EINVAL;
	size_t digits = strlen(timestamp);
	if (digits == 0 || digits > TIMESTAMP_DIGITS_MAX)
		return -EINVAL;
	for (size_t i = 0; i < digits; i++)
		if (!is_digit(timestamp[i]))
			return -EINVAL;
	int64_t ts = strtoll(timestamp, NULL, 10);
	/* a replayed request is refused once it is older than the window;
	 * one from the future as well (a clock that far off is not to be
	 * trusted either way) */
	if (ts < now_s - SLACK_SKEW_S || ts > now_s + SLACK_SKEW_S)
		return -ESTALE;
	/* "v0=" and exactly 64 hex digits */
	if (strncmp(signature, "v0=", 3) != 0 || strlen(signature) != 67)
		return -EINVAL;
	for (size_t i = 3; i < 67; i++)
		if (!is_hex(signature[i]))
			return -EINVAL;
	if (sodium_init() < 0)
		return -EIO;
	unsigned char given[crypto_auth_hmacsha256_BYTES];
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	size_t bin_len = 0;
	if (sodium_hex2bin(given, sizeof(given), signature + 3, 64, NULL,
			   &bin_len, NULL) != 0 ||
	    bin_len != sizeof(given))
		return -EINVAL;
	hmac_v0(secret, timestamp, body, len, mac);
	/* on the binary MACs, in constant time */
	int same = sodium_memcmp(mac, given, sizeof(mac)) == 0;
	sodium_memzero(mac, sizeof(mac));
	return same ? 0 : -EACCES;
}

/* ---- text --------------------------------------------------------------- */

size_t slack_utf8_seq(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	size_t n;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 1;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 2;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 3;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (left <= n)
		return 0;
	for (size_t k = 1; k <= n; k++) {
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[k] & 0x3f);
	}
	if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n + 1;
}

bool slack_utf8_valid(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	for (size_t i = 0; i < len;) {
		size_t n = slack_utf8_seq(u + i, len - i);
		if (!n)
			return false;
		i += n;
	}
	return true;
}

/* A name from the input, fit for a message: printable ASCII, cut. */
static const char *shown(const char *s, char buf[48])
{
	size_t n = 0;
	for (; s[n] && n < 40; n++)
		buf[n] = s[n] >= ' ' && s[n] <= '~' ? s[n] : '?';
	buf[n] = '\0';
	if (s[n])
		snprintf(buf + n, 8, "...");
	return buf;
}

/* ---- forms -------------------------------------------------------------- */

static int hex_value(char c)
{
	if (is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decodes [from, to) into *w ('+' a space, %XX a byte), NUL-terminated;
 * -EINVAL for a malformed escape or a NUL byte. */
static int form_decode(const char *from, const char *to, char **w)
{
	char *o = *w;
	for (const char *p = from; p < to; p++) {
		char c = *p;
		if (c == '+') {
			c = ' ';
		} else if (c == '%') {
			int hi = to - p > 2 ? hex_value(p[1]) : -1;
			int lo = hi < 0 ? -1 : hex_value(p[2]);
			if (lo < 0)
				return -EINVAL;
			c = (char)(hi * 16 + lo);
			p += 2;
		}
		if (c == '\0')
			return -EINVAL;
		*o++ = c;
	}
	*o++ = '\0';
	*w = o;
	return 0;
}

void slack_form_clear(struct slack_form *f)
{
	if (!f)
		return;
	free(f->buf);
	memset(f, 0, sizeof(*f));
}

const char *slack_form_get(const struct slack_form *f, const char *key)
{
	for (size_t i = 0; f && key && i < f->n; i++)
		if (!strcmp(f->f[i].key, key))
			return f->f[i].value;
	return NULL;
}

int slack_form_parse(const char *body, size_t len, struct slack_form *out,
		     struct wr_error **err)
{
	if (len > SLACK_BODY_MAX)
		return wr_error_input(err, E2BIG,
				      "the body is larger than %d bytes",
				      SLACK_BODY_MAX);
	if (len && !body)
		return wr_error_input(err, EINVAL, "no body");
	struct slack_form f = {0};
	/* each byte decodes to at most one; each field adds at most two
	 * NULs (a key without '=' gets an empty value) */
	f.buf = wr_malloc(2 * len + 2);
	if (!f.buf)
		return wr_error_set(err, ENOMEM, "form");
	char *w = f.buf;
	const char *p = body, *end = body + len;
	char name[48];
	int r = 0;
	while (p < end && r == 0) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *seg_end = amp ? amp : end;
		const char *eq = memchr(p, '=', (size_t)(seg_end - p));
		if (seg_end == p) { /* "&&": nothing there */
			p++;
			continue;
		}
		if (f.n == SLACK_FORM_FIELDS_MAX) {
			r = wr_error_input(err, E2BIG,
					   "more than %d form fields",
					   SLACK_FORM_FIELDS_MAX);
			break;
		}
		char *key = w;
		if (form_decode(p, eq ? eq : seg_end, &w) < 0) {
			r = wr_error_input(err, EINVAL,
					   "a form field's name has a "
					   "malformed %%-escape or a NUL");
			break;
		}
		char *value = w;
		if (form_decode(eq ? eq + 1 : seg_end, seg_end, &w) < 0) {
			r = wr_error_input(err, EINVAL,
					   "form field '%s': malformed "
					   "%%-escape or a NUL",
					   shown(key, name));
			break;
		}
		if (!*key)
			r = wr_error_input(err, EINVAL,
					   "a form field without a name");
		else if (!slack_utf8_valid(key, strlen(key)) ||
			 !slack_utf8_valid(value, strlen(value)))
			r = wr_error_input(err, EINVAL,
					   "form field '%s': not UTF-8",
					   shown(key, name));
		else if (slack_form_get(&f, key))
			r = wr_error_input(err, EINVAL,
					   "form field '%s' is repeated",
					   shown(key, name));
		if (r < 0)
			break;
		f.f[f.n].key = key;
		f.f[f.n].value = value;
		f.n++;
		p = amp ? amp + 1 : end;
	}
	if (r < 0) {
		slack_form_clear(&f);
		return r;
	}
	*out = f;
	return 0;
}

/* ---- Slack's escaping -----------------------------------------------------
 */

/* Appends [s, s + n) to *w with &amp; &lt; &gt; decoded. */
static void put_entities(const char *s, size_t n, char **w)
{
	char *o = *w;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '&') {
			size_t left = n - i;
			if (left >= 5 && !memcmp(s + i, "&amp;", 5)) {
				*o++ = '&';
				i += 4;
				continue;
			}
			if (left >= 4 && !memcmp(s + i, "&lt;", 4)) {
				*o++ = '<';
				i += 3;
				continue;
			}
			if (left >= 4 && !memcmp(s + i, "&gt;", 4)) {
				*o++ = '>';
				i += 3;
				continue;
			}
		}
		*o++ = s[i];
	}
	*w = o;
}

static bool is_link(const char *s, size_t n)
{
	return (n > 7 && !strncasecmp(s, "http://", 7)) ||
	       (n > 8 && !strncasecmp(s, "https://", 8)) ||
	       (n > 7 && !strncasecmp(s, "mailto:", 7));
}

char *slack_text_decode(const char *text)
{
	if (!text)
		text = "";
	size_t len = strlen(text);
	char *out = wr_malloc(len + 1);
	if (!out)
		return NULL;
	char *w = out;
	const char *p = text;
	while (*p) {
		size_t plain = strcspn(p, "<");
		put_entities(p, plain, &w);
		p += plain;
		if (!*p)
			break;
		/* <URL|label> or <URL>: Slack's link markup. Mentions
		 * (<@U…>, <#C…|name>, <!here>) stay as they are. */
		const char *close = strchr(p + 1, '>');
		size_t inner = close ? (size_t)(close - p - 1) : 0;
		if (close && !memchr(p + 1, '<', inner) &&
		    is_link(p + 1, inner)) {
			const char *bar = memchr(p + 1, '|', inner);
			if (bar)
				put_entities(bar + 1, (size_t)(close - bar - 1),
					     &w);
			else
				put_entities(p + 1, inner, &w);
			p = close + 1;
		} else {
			*w++ = *p++;
		}
	}
	*w = '\0';
	return out;
}

/* ---- a command's text -----------------------------------------------------
 */

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	       c == '\f';
}

static const char *skip_space(const char *p)
{
	while (is_space(*p))
		p++;
	return p;
}

static size_t word_len(const char *p)
{
	size_t n = 0;
	while (p[n] && !is_space(p[n]))
		n++;
	return n;
}

static bool word_is(const char *p, size_t n, const char *w)
{
	return n == strlen(w) && !strncasecmp(p, w, n);
}

/* The API's session id: "s-" + 1..32 of [0-9a-z]. */
static bool session_id_ok(const char *p, size_t n)
{
	if (n < 3 || n > 2 + SESSION_ID_DIGITS_MAX || p[0] != 's' ||
	    p[1] != '-')
		return false;
	for (size_t i = 2; i < n; i++)
		if (!is_digit(p[i]) && !(p[i] >= 'a' && p[i] <= 'z'))
			return false;
	return true;
}

/* A repository's name or id: 1..100 of [A-Za-z0-9._-], not "." or "..". */
static bool repo_ok(const char *p, size_t n)
{
	if (n == 0 || n > REPO_NAME_MAX || (n == 1 && p[0] == '.') ||
	    (n == 2 && !memcmp(p, "..", 2)))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		if (!is_digit(c) && !(c >= 'a' && c <= 'z') &&
		    !(c >= 'A' && c <= 'Z') && !strchr("._-", c))
			return false;
	}
	return true;
}

static bool ref_ok(const char *p, size_t n)
{
	if (n == 0 || n > REF_MAX || p[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] < ' ' || p[i] == 0x7f)
			return false;
	return true;
}

/* [p, end) without white space at either end, as a new string; NULL
 * (with *empty) when nothing is left. */
static int trimmed_copy(const char *p, char **out, bool *empty)
{
	p = skip_space(p);
	size_t n = strlen(p);
	while (n && is_space(p[n - 1]))
		n--;
	*empty = n == 0;
	if (!n) {
		*out = NULL;
		return 0;
	}
	*out = wr_strndup(p, n);
	return *out ? 0 : -ENOMEM;
}

void slack_command_clear(struct slack_command *c)
{
	if (!c)
		return;
	free(c->repo);
	free(c->ref);
	free(c->prompt);
	free(c->session_id);
	free(c->reason);
	memset(c, 0, sizeof(*c));
}

/* status ID, approve ID, reject ID [REASON]: 1 if verb (word) and id
 * make one of these (filled into *c), 0 if they do not (the text is a
 * repository and a prompt), or -errno. */
static int parse_verb(const char *verb, size_t vlen, const char *rest,
		      struct slack_command *c, struct wr_error **err)
{
	enum slack_verb v = word_is(verb, vlen, "status") ? SLACK_VERB_STATUS
			    : word_is(verb, vlen, "approve")
				? SLACK_VERB_APPROVE
			    : word_is(verb, vlen, "reject") ? SLACK_VERB_REJECT
							    : SLACK_VERB_MAX;
	if (v == SLACK_VERB_MAX)
		return 0;
	size_t idlen = word_len(rest);
	if (idlen == 0)
		return wr_error_input(err, EINVAL,
				      "%.*s needs a session id (%.*s s-…)",
				      (int)vlen, verb, (int)vlen, verb);
	if (!session_id_ok(rest, idlen))
		return 0; /* a repository called "status", say */
	const char *after = skip_space(rest + idlen);
	if (v != SLACK_VERB_REJECT && *after)
		return wr_error_input(err, EINVAL,
				      "%.*s takes one session id and nothing "
				      "more",
				      (int)vlen, verb);
	c->verb = v;
	c->session_id = wr_strndup(rest, idlen);
	if (!c->session_id)
		return wr_error_set(err, ENOMEM, "command");
	if (v == SLACK_VERB_REJECT) {
		bool empty;
		if (trimmed_copy(after, &c->reason, &empty) < 0)
			return wr_error_set(err, ENOMEM, "command");
		if (c->reason && strlen(c->reason) > SLACK_REASON_MAX)
			return wr_error_input(err, E2BIG,
					      "the reason is longer than %d "
					      "bytes",
					      SLACK_REASON_MAX);
	}
	return 1;
}

static int parse_run(const char *word, size_t wlen, const char *rest,
		     struct slack_command *c, struct wr_error **err)
{
	const char *at = memchr(word, '@', wlen);
	size_t rlen = at ? (size_t)(at - word) : wlen;
	char name[48];
	if (!repo_ok(word, rlen)) {
		_cleanup_free_ char *w = wr_strndup(word, wlen);
		return wr_error_input(err, EINVAL,
				      "'%s' is not a repository name "
				      "([A-Za-z0-9._-], optionally @REF)",
				      w ? shown(w, name) : "?");
	}
	if (at && !ref_ok(at + 1, wlen - rlen - 1))
		return wr_error_input(err, EINVAL,
				      "the ref after '@' is empty, starts "
				      "with '-' or is longer than %d bytes",
				      REF_MAX);
	bool empty;
	c->verb = SLACK_VERB_RUN;
	c->repo = wr_strndup(word, rlen);
	c->ref = at ? wr_strndup(at + 1, wlen - rlen - 1) : NULL;
	if (!c->repo || (at && !c->ref) ||
	    trimmed_copy(rest, &c->prompt, &empty) < 0)
		return wr_error_set(err, ENOMEM, "command");
	if (empty)
		return wr_error_input(err, EINVAL,
				      "what should the agent do on %s? Give a "
				      "prompt after the repository",
				      c->repo);
	if (strlen(c->prompt) > SLACK_PROMPT_MAX)
		return wr_error_input(err, E2BIG,
				      "the prompt is longer than %d bytes",
				      SLACK_PROMPT_MAX);
	return 0;
}

int slack_command_parse(const char *text, struct slack_command *out,
			struct wr_error **err)
{
	_cleanup_free_ char *decoded = slack_text_decode(text);
	if (!decoded)
		return wr_error_set(err, ENOMEM, "command");
	if (!slack_utf8_valid(decoded, strlen(decoded)))
		return wr_error_input(err, EINVAL, "the text is not UTF-8");
	struct slack_command c = {0};
	const char *word = skip_space(decoded);
	size_t wlen = word_len(word);
	const char *rest = skip_space(word + wlen);
	int r = 0;
	if (wlen == 0 || (word_is(word, wlen, "help") && !*rest)) {
		c.verb = SLACK_VERB_HELP;
	} else {
		r = parse_verb(word, wlen, rest, &c, err);
		if (r == 0)
			r = parse_run(word, wlen, rest, &c, err);
	}
	if (r < 0) {
		slack_command_clear(&c);
		return r;
	}
	*out = c;
	return 0;
}

/* ---- Events API payloads ----------------------------------------------------
 */

void slack_event_clear(struct slack_event *e)
{
	if (!e)
		return;
	free(e->challenge);
	free(e->event_id);
	free(e->user);
	free(e->channel);
	free(e->ts);
	free(e->thread_ts);
	free(e->text);
	memset(e, 0, sizeof(*e));
}

/* Slack's ids: [A-Za-z0-9._-], 1..SLACK_ID_MAX. */
static bool id_ok(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++) {
		char c = s[n];
		if (n == SLACK_ID_MAX ||
		    !(is_digit(c) || (c >= 'a' && c <= 'z') ||
		      (c >= 'A' && c <= 'Z') || strchr("._-", c)))
			return false;
	}
	return n > 0;
}

/* A message timestamp: digits and one '.', as "1515449522.000016". */
static bool ts_ok(const char *s)
{
	size_t n = 0, dots = 0;
	for (; s[n]; n++) {
		if (n == SLACK_ID_MAX || (!is_digit(s[n]) && s[n] != '.'))
			return false;
		dots += s[n] == '.';
	}
	return n > 0 && dots <= 1 && s[0] != '.';
}

/* A string member of o checked with ok (what it must be: what), copied
 * to *out (NULL when absent and optional). */
static int member(const json_t *o, const char *key, bool required,
		  bool (*ok)(const char *), const char *what, char **out,
		  struct wr_error **err)
{
	const json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v)) {
		if (required)
			return wr_error_input(err, EINVAL, "'%s' is missing",
					      key);
		return 0;
	}
	const char *s = json_string_value(v);
	if (!s || (ok && !ok(s)))
		return wr_error_input(err, EINVAL, "'%s' is not %s", key, what);
	*out = wr_strdup(s);
	return *out ? 0 : wr_error_set(err, ENOMEM, "event");
}

#define ID "a Slack id"
#define TS "a message timestamp"

static bool challenge_ok(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++)
		if (n == CHALLENGE_MAX || s[n] <= ' ' || s[n] > '~')
			return false;
	return n > 0;
}

/* The text after the first mention (<@U…>) of the app; all of it when
 * there is none. */
static char *after_mention(const char *text)
{
	const char *m = strstr(text, "<@");
	const char *close = m ? strchr(m, '>') : NULL;
	return wr_strdup(close ? close + 1 : text);
}

static int parse_mention(const json_t *ev, struct slack_event *e,
			 struct wr_error **err)
{
	e->kind = SLACK_EVENT_MENTION;
	e->from_bot = json_object_get(ev, "bot_id") != NULL;
	int r = member(ev, "user", !e->from_bot, id_ok, ID, &e->user, err);
	if (r == 0)
		r = member(ev, "channel", true, id_ok, ID, &e->channel, err);
	if (r == 0)
		r = member(ev, "ts", true, ts_ok, TS, &e->ts, err);
	if (r == 0)
		r = member(ev, "thread_ts", false, ts_ok, TS, &e->thread_ts,
			   err);
	if (r < 0)
		return wr_error_wrap(err, "app_mention");
	const json_t *text = json_object_get(ev, "text");
	if (text && !json_is_string(text))
		return wr_error_input(err, EINVAL,
				      "app_mention: 'text' is not a string");
	e->text = after_mention(text ? json_string_value(text) : "");
	return e->text ? 0 : wr_error_set(err, ENOMEM, "event");
}

int slack_event_parse(const char *body, size_t len, struct slack_event *out,
		      struct wr_error **err)
{
	if (len > SLACK_BODY_MAX)
		return wr_error_input(err, E2BIG,
				      "the body is larger than %d bytes",
				      SLACK_BODY_MAX);
	json_error_t jerr;
	json_t *doc =
	    json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &jerr);
	if (!doc) {
		char text[48];
		return wr_error_input(
		    err, EINVAL, "malformed JSON (line %d, column %d): %s",
		    jerr.line, jerr.column, shown(jerr.text, text));
	}
	struct slack_event e = {.kind = SLACK_EVENT_OTHER};
	int r = 0;
	const char *type = json_string_value(json_object_get(doc, "type"));
	if (!json_is_object(doc) || !type) {
		r = wr_error_input(err, EINVAL,
				   "expected an object with a 'type'");
	} else if (!strcmp(type, "url_verification")) {
		e.kind = SLACK_EVENT_URL_VERIFICATION;
		r = member(doc, "challenge", true, challenge_ok,
			   "1 to 1024 printable characters", &e.challenge, err);
	} else if (!strcmp(type, "event_callback")) {
		const json_t *ev = json_object_get(doc, "event");
		const char *etype =
		    json_string_value(json_object_get(ev, "type"));
		if (!json_is_object(ev) || !etype)
			r = wr_error_input(err, EINVAL,
					   "event_callback: expected an "
					   "'event' object with a 'type'");
		else if (!strcmp(etype, "app_mention")) {
			r = member(doc, "event_id", true, id_ok, ID,
				   &e.event_id, err);
			if (r == 0)
				r = parse_mention(ev, &e, err);
		}
	}
	json_decref(doc);
	if (r < 0) {
		slack_event_clear(&e);
		return r;
	}
	*out = e;
	return 0;
}

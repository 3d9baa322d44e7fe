/* test_slack.c - Slack (src/notify, src/api/slack.c): the v0 request
 * signature, form bodies, the command's text, Events API payloads, the
 * "slack" configuration and its errors, the text of the posts, the store's
 * outbox and event ids, the two routes through api_handle (with a real
 * store and the session manager with no_worker: sessions are stored,
 * never run), and the notifier's retries against a port nobody listens
 * on. Posting to a Slack stand-in is tests/integration/slack.sh's. The
 * store is SQLite's, or a PostgreSQL database when WARREN_TEST_STORE names
 * a server (teststore.h; tests/run.sh's second pass).
 *
 * Runs in a scratch directory under /tmp removed at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "api/api.h"
#include "notify/slack.h"
#include "teststore.h"
#include "util/alloc.h"
#include "util/cleanup.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SECRET "8f742231b10e8888abcd99yyyzzz85a5"
#define BASE_URL "https://warren.example"

static char root[] = "/tmp/warren-unit-slack.XXXXXX";
static struct store *st;
static struct slack_outbox *ob;
static struct control *ctl;
static struct api *api;	  /* with Slack */
static struct api *plain; /* without */
static struct slack_config cfg;
static char repo_id[STORE_ID_MAX];

static int remove_entry(const char *path, const struct stat *sb, int type,
			struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* A configuration file in the scratch directory; its path. */
static const char *write_file(const char *name, const char *text, int mode)
{
	static char path[512];
	snprintf(path, sizeof(path), "%s/%s", root, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, (mode_t)mode), 0);
	close(fd);
	return path;
}

/* slack_config_from_json on text (with {DIR} as the scratch directory);
 * the result, and the error's message in msg. */
static int load_config(const char *text, struct slack_config *out,
		       char msg[512])
{
	char buf[4096];
	const char *p = text;
	char *w = buf;
	while (*p && w < buf + sizeof(buf) - 256) {
		if (!strncmp(p, "{DIR}", 5)) {
			w += sprintf(w, "%s", root);
			p += 5;
		} else {
			*w++ = *p++;
		}
	}
	*w = '\0';
	json_error_t jerr;
	json_t *v = json_loads(buf, 0, &jerr);
	if (!v)
		print_message("bad test JSON: %s: %s\n", buf, jerr.text);
	assert_non_null(v);
	struct wr_error *err = NULL;
	int r = slack_config_from_json("test.json", v, out, &err);
	json_decref(v);
	snprintf(msg, 512, "%s", err && err->msg ? err->msg : "");
	if (r == 0)
		assert_null(err);
	else
		assert_true(err && err->bad_input);
	wr_error_free(err);
	return r;
}

static int group_setup(void **state)
{
	(void)state;
	if (!mkdtemp(root))
		return -1;
	write_file("signing.secret", SECRET "\n", 0600);
	write_file("bot.token", "xoxb-test-token\n", 0600);
	setenv("WARREN_TEST_SLACK_TOKEN", "xoxb-from-env", 1);
	char msg[512];
	/* the notifier tests post to port 9 of the loopback: nobody */
	if (load_config("{\"signing_secret_file\": \"{DIR}/signing.secret\","
			" \"bot_token_file\": \"{DIR}/bot.token\","
			" \"api_url\": \"http://127.0.0.1:9/api/\","
			" \"base_url\": \"" BASE_URL "/\","
			" \"retries\": 2, \"retry_backoff\": \"100ms\","
			" \"timeout\": \"2s\","
			" \"users\": {\"UALICE\": {\"user\": \"alice\","
			"                        \"role\": \"submitter\"},"
			"            \"UBOB\": {\"user\": \"bob\","
			"                      \"role\": \"reviewer\"},"
			"            \"UROOT\": {\"user\": \"root\","
			"                       \"role\": \"admin\"}}}",
			&cfg, msg) < 0) {
		print_message("config: %s\n", msg);
		return -1;
	}
	struct wr_error *err = NULL;
	st = store_open(teststore_url(root, "warren.db"), &err);
	if (!st)
		return -1;
	if (slack_outbox_open(st, &ob, &err) < 0)
		return -1;
	struct control_config cc = {.data_dir = root,
				     .no_worker = true,
				     .no_remote_check = true};
	if (control_start(&cc, st, &ctl, &err) < 0)
		return -1;
	struct store_repo repo = {0};
	if (control_repo_add(ctl, "c-hello", "/srv/git/c-hello", NULL, 0,
			     "[\"sh\",\"-c\",\"make test\"]", &repo, &err) < 0)
		return -1;
	snprintf(repo_id, sizeof(repo_id), "%s", repo.id);
	store_repo_clear(&repo);
	struct api_config ac = {
	    .st = st, .ctl = ctl, .slack = &cfg, .slack_outbox = ob};
	if (api_new(&ac, &api, &err) < 0)
		return -1;
	ac.slack = NULL;
	ac.slack_outbox = NULL;
	if (api_new(&ac, &plain, &err) < 0)
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	api_stop(api);
	api_stop(plain);
	control_stop(ctl);
	slack_outbox_close(ob);
	store_close(st);
	teststore_cleanup();
	slack_config_clear(&cfg);
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

/* ---- the signature ------------------------------------------------------ */

static void test_signature(void **state)
{
	(void)state;
	/* a request in the shape of Slack's documentation, and its
	 * signature as an independent implementation computes it (Python's
	 * hmac: tests/tools/slack_server.py sign SECRET TS < BODY) */
	const char *body =
	    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain="
	    "testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id="
	    "U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
	    "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2J"
	    "H3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=3989779"
	    "11680.47653893463.7b7d85a6d2e8f3ea0ac34a7e4b57c3e9";
	const char *ts = "1531420618";
	const char *want = "v0=5fb3ed27b21adec70ad2915e9c60f5ce7aeb49168daf20"
			   "05ab840c66ee2debb0";
	char sig[68];
	assert_int_equal(slack_sign(SECRET, ts, body, strlen(body), sig), 0);
	assert_string_equal(sig, want);
	int64_t now = 1531420618;
	size_t len = strlen(body);
	/* good, and good at the window's edges */
	assert_int_equal(slack_verify(SECRET, ts, want, body, len, now), 0);
	assert_int_equal(slack_verify(SECRET, ts, want, body, len, now + 300),
			 0);
	assert_int_equal(slack_verify(SECRET, ts, want, body, len, now - 300),
			 0);
	/* upper-case hex is the same signature */
	char upper[68];
	snprintf(upper, sizeof(upper), "v0=%s", want + 3);
	for (char *p = upper + 3; *p; p++)
		if (*p >= 'a' && *p <= 'f')
			*p = (char)(*p - 'a' + 'A');
	assert_int_equal(slack_verify(SECRET, ts, upper, body, len, now), 0);
	/* stale, and from the future */
	assert_int_equal(slack_verify(SECRET, ts, want, body, len, now + 301),
			 -ESTALE);
	assert_int_equal(slack_verify(SECRET, ts, want, body, len, now - 301),
			 -ESTALE);
	/* bad: one digit changed */
	char bad[68];
	snprintf(bad, sizeof(bad), "%s", want);
	bad[20] = bad[20] == '0' ? '1' : '0';
	assert_int_equal(slack_verify(SECRET, ts, bad, body, len, now),
			 -EACCES);
	/* the body altered: a byte changed, one dropped, one added */
	_cleanup_free_ char *altered = wr_strdup(body);
	altered[10] ^= 1;
	assert_int_equal(slack_verify(SECRET, ts, want, altered, len, now),
			 -EACCES);
	assert_int_equal(slack_verify(SECRET, ts, want, body, len - 1, now),
			 -EACCES);
	char longer[1024];
	snprintf(longer, sizeof(longer), "%s&x=1", body);
	assert_int_equal(
	    slack_verify(SECRET, ts, want, longer, strlen(longer), now),
	    -EACCES);
	/* the timestamp altered (it is signed too) */
	assert_int_equal(
	    slack_verify(SECRET, "1531420619", want, body, len, now), -EACCES);
	/* the wrong secret */
	assert_int_equal(
	    slack_verify("another-secret", ts, want, body, len, now), -EACCES);
	/* missing or malformed */
	assert_int_equal(slack_verify(SECRET, NULL, want, body, len, now),
			 -EINVAL);
	assert_int_equal(slack_verify(SECRET, ts, NULL, body, len, now),
			 -EINVAL);
	assert_int_equal(slack_verify(NULL, ts, want, body, len, now), -EINVAL);
	assert_int_equal(slack_verify("", ts, want, body, len, now), -EINVAL);
	assert_int_equal(slack_verify(SECRET, "", want, body, len, now),
			 -EINVAL);
	assert_int_equal(
	    slack_verify(SECRET, "15314206x8", want, body, len, now), -EINVAL);
	assert_int_equal(
	    slack_verify(SECRET, "-1531420618", want, body, len, now), -EINVAL);
	assert_int_equal(slack_verify(SECRET, "99999999999999999999999", want,
				      body, len, now),
			 -EINVAL);
	char v1[68];
	snprintf(v1, sizeof(v1), "v1=%s", want + 3);
	assert_int_equal(slack_verify(SECRET, ts, v1, body, len, now), -EINVAL);
	assert_int_equal(slack_verify(SECRET, ts, "v0=abc", body, len, now),
			 -EINVAL);
	char nonhex[68];
	snprintf(nonhex, sizeof(nonhex), "%s", want);
	nonhex[66] = 'g';
	assert_int_equal(slack_verify(SECRET, ts, nonhex, body, len, now),
			 -EINVAL);
	char trailing[80];
	snprintf(trailing, sizeof(trailing), "%s0", want);
	assert_int_equal(slack_verify(SECRET, ts, trailing, body, len, now),
			 -EINVAL);
	/* an empty body is signed too */
	assert_int_equal(slack_sign(SECRET, ts, NULL, 0, sig), 0);
	assert_int_equal(slack_verify(SECRET, ts, sig, NULL, 0, now), 0);
	assert_int_equal(slack_verify(SECRET, ts, sig, "x", 1, now), -EACCES);
}

/* ---- forms ------------------------------------------------------------------
 */

static void form_error(const char *body, int want, const char *part)
{
	struct slack_form f = {.n = 99};
	struct wr_error *err = NULL;
	assert_int_equal(slack_form_parse(body, strlen(body), &f, &err), want);
	assert_int_equal(f.n, 99); /* untouched */
	assert_non_null(err);
	if (!strstr(err->msg, part)) {
		print_message("'%s' lacks '%s'\n", err->msg, part);
		fail();
	}
	wr_error_free(err);
}

static void test_form(void **state)
{
	(void)state;
	const char *body = "team_id=T1&user_id=UALICE&command=%2Fwarren&"
			   "text=c-hello+fix+the+%22build%22%3A+100%25&"
			   "response_url=https%3A%2F%2Fhooks.slack.com%2Fx&"
			   "empty=&flag&&trailing=%C3%A9";
	struct slack_form f = {0};
	assert_int_equal(slack_form_parse(body, strlen(body), &f, NULL), 0);
	assert_int_equal(f.n, 8);
	assert_string_equal(slack_form_get(&f, "user_id"), "UALICE");
	assert_string_equal(slack_form_get(&f, "command"), "/warren");
	assert_string_equal(slack_form_get(&f, "text"),
			    "c-hello fix the \"build\": 100%");
	assert_string_equal(slack_form_get(&f, "response_url"),
			    "https://hooks.slack.com/x");
	assert_string_equal(slack_form_get(&f, "empty"), "");
	assert_string_equal(slack_form_get(&f, "flag"), "");
	assert_string_equal(slack_form_get(&f, "trailing"), "\xc3\xa9");
	assert_null(slack_form_get(&f, "missing"));
	slack_form_clear(&f);
	/* nothing at all */
	assert_int_equal(slack_form_parse("", 0, &f, NULL), 0);
	assert_int_equal(f.n, 0);
	slack_form_clear(&f);
	/* bytes after a NUL-less body's end are not read */
	assert_int_equal(slack_form_parse("a=1&b=2", 3, &f, NULL), 0);
	assert_int_equal(f.n, 1);
	assert_string_equal(slack_form_get(&f, "a"), "1");
	slack_form_clear(&f);

	form_error("text=%zz", -EINVAL, "'text': malformed");
	form_error("text=abc%4", -EINVAL, "'text': malformed");
	form_error("text=abc%", -EINVAL, "'text': malformed");
	form_error("text=a%00b", -EINVAL, "'text': malformed");
	form_error("te%0xt=a", -EINVAL, "name has a malformed");
	form_error("=value", -EINVAL, "without a name");
	form_error("text=%ff%fe", -EINVAL, "not UTF-8");
	form_error("text=%c0%80", -EINVAL, "not UTF-8");    /* overlong NUL */
	form_error("text=%ed%a0%80", -EINVAL, "not UTF-8"); /* surrogate */
	form_error("user_id=U1&text=a&user_id=U2", -EINVAL,
		   "'user_id' is repeated");
	char many[1024] = "";
	for (int i = 0; i <= SLACK_FORM_FIELDS_MAX; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many),
			 "%sk%d=v", i ? "&" : "", i);
	form_error(many, -E2BIG, "more than 64");
	_cleanup_free_ char *huge = wr_malloc(SLACK_BODY_MAX + 2);
	memset(huge, 'a', SLACK_BODY_MAX + 1);
	huge[SLACK_BODY_MAX + 1] = '\0';
	form_error(huge, -E2BIG, "larger than");
}

/* ---- the command's text
 * ------------------------------------------------------- */

static struct slack_command command_ok(const char *text)
{
	struct slack_command c = {0};
	struct wr_error *err = NULL;
	int r = slack_command_parse(text, &c, &err);
	if (r < 0)
		print_message("'%s': %s\n", text, err->msg);
	assert_int_equal(r, 0);
	return c;
}

static void command_error(const char *text, const char *part)
{
	struct slack_command c = {.verb = SLACK_VERB_MAX};
	struct wr_error *err = NULL;
	assert_int_equal(slack_command_parse(text, &c, &err), -EINVAL);
	assert_int_equal(c.verb, SLACK_VERB_MAX); /* untouched */
	assert_non_null(err);
	assert_true(err->bad_input);
	if (!strstr(err->msg, part)) {
		print_message("'%s' lacks '%s'\n", err->msg, part);
		fail();
	}
	wr_error_free(err);
}

static void test_command(void **state)
{
	(void)state;
	struct slack_command c = command_ok("");
	assert_int_equal(c.verb, SLACK_VERB_HELP);
	c = command_ok("   ");
	assert_int_equal(c.verb, SLACK_VERB_HELP);
	c = command_ok(" Help ");
	assert_int_equal(c.verb, SLACK_VERB_HELP);

	c = command_ok("c-hello fix the failing test");
	assert_int_equal(c.verb, SLACK_VERB_RUN);
	assert_string_equal(c.repo, "c-hello");
	assert_null(c.ref);
	assert_string_equal(c.prompt, "fix the failing test");
	slack_command_clear(&c);

	/* a repository called help, status or approve */
	c = command_ok("help me out");
	assert_int_equal(c.verb, SLACK_VERB_RUN);
	assert_string_equal(c.repo, "help");
	assert_string_equal(c.prompt, "me out");
	slack_command_clear(&c);
	c = command_ok("status update the badge");
	assert_int_equal(c.verb, SLACK_VERB_RUN);
	assert_string_equal(c.repo, "status");
	slack_command_clear(&c);

	/* Slack's escaping undone; several lines kept */
	c = command_ok("  app@release/2.0   make &lt;b&gt; bold &amp; "
		       "see <https://example.com/x?a=1&amp;b=2|the docs>\n"
		       "and <https://example.com/y>  \n ");
	assert_int_equal(c.verb, SLACK_VERB_RUN);
	assert_string_equal(c.repo, "app");
	assert_string_equal(c.ref, "release/2.0");
	assert_string_equal(c.prompt, "make <b> bold & see the docs\n"
				      "and https://example.com/y");
	slack_command_clear(&c);
	/* a repository name Slack made a link of */
	c = command_ok("<http://app.io|app.io> do it, <@U123> said");
	assert_string_equal(c.repo, "app.io");
	assert_string_equal(c.prompt, "do it, <@U123> said");
	slack_command_clear(&c);

	c = command_ok("status s-0123abcd");
	assert_int_equal(c.verb, SLACK_VERB_STATUS);
	assert_string_equal(c.session_id, "s-0123abcd");
	slack_command_clear(&c);
	c = command_ok("APPROVE s-1");
	assert_int_equal(c.verb, SLACK_VERB_APPROVE);
	assert_string_equal(c.session_id, "s-1");
	slack_command_clear(&c);
	c = command_ok("reject s-1");
	assert_int_equal(c.verb, SLACK_VERB_REJECT);
	assert_null(c.reason);
	slack_command_clear(&c);
	c = command_ok("reject s-1   not &lt;what&gt; we want  ");
	assert_int_equal(c.verb, SLACK_VERB_REJECT);
	assert_string_equal(c.reason, "not <what> we want");
	slack_command_clear(&c);

	command_error("c-hello", "Give a prompt");
	command_error("c-hello    ", "Give a prompt");
	command_error("status", "needs a session id");
	command_error("approve s-1 now", "one session id");
	command_error("bad/repo do it", "not a repository name");
	command_error("..  do it", "not a repository name");
	command_error("app@ do it", "the ref after '@'");
	command_error("app@-x do it", "the ref after '@'");
	command_error("app \xff\xfe", "not UTF-8");
	char long_repo[200];
	memset(long_repo, 'a', 101);
	snprintf(long_repo + 101, sizeof(long_repo) - 101, " go");
	command_error(long_repo, "not a repository name");
}

/* ---- Events API payloads
 * ---------------------------------------------------------- */

static void event_error(const char *body, const char *part)
{
	struct slack_event e = {.kind = SLACK_EVENT_KIND_MAX};
	struct wr_error *err = NULL;
	assert_int_equal(slack_event_parse(body, strlen(body), &e, &err),
			 -EINVAL);
	assert_int_equal(e.kind, SLACK_EVENT_KIND_MAX);
	if (!err || !strstr(err->msg, part)) {
		print_message("'%s' lacks '%s'\n", err ? err->msg : "", part);
		fail();
	}
	wr_error_free(err);
}

static void test_event(void **state)
{
	(void)state;
	struct slack_event e = {0};
	const char *verify =
	    "{\"token\": \"Jhj5dZrVaK7ZwHHjRyZWjbDl\", \"challenge\": "
	    "\"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P\", "
	    "\"type\": \"url_verification\"}";
	assert_int_equal(slack_event_parse(verify, strlen(verify), &e, NULL),
			 0);
	assert_int_equal(e.kind, SLACK_EVENT_URL_VERIFICATION);
	assert_string_equal(e.challenge, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdAL"
					 "WMmHkvFXO7tYXAYM8P");
	slack_event_clear(&e);

	const char *mention =
	    "{\"token\": \"x\", \"team_id\": \"T1\", \"api_app_id\": \"A1\","
	    " \"event\": {\"type\": \"app_mention\", \"user\": \"UALICE\","
	    "  \"text\": \"<@U0BOT> c-hello fix it\", \"ts\": "
	    "\"1515449522.000016\", \"channel\": \"C0LAN2Q65\", "
	    "\"event_ts\": \"1515449522000016\"},"
	    " \"type\": \"event_callback\", \"event_id\": \"Ev0LAN670R\","
	    " \"event_time\": 1515449522000016}";
	assert_int_equal(slack_event_parse(mention, strlen(mention), &e, NULL),
			 0);
	assert_int_equal(e.kind, SLACK_EVENT_MENTION);
	assert_string_equal(e.event_id, "Ev0LAN670R");
	assert_string_equal(e.user, "UALICE");
	assert_string_equal(e.channel, "C0LAN2Q65");
	assert_string_equal(e.ts, "1515449522.000016");
	assert_null(e.thread_ts);
	assert_string_equal(e.text, " c-hello fix it");
	assert_false(e.from_bot);
	slack_event_clear(&e);

	const char *in_thread =
	    "{\"type\": \"event_callback\", \"event_id\": \"Ev2\", \"event\":"
	    " {\"type\": \"app_mention\", \"user\": \"U1\", \"text\": \"hey "
	    "<@U0BOT|warren> help\", \"ts\": \"2.5\", \"thread_ts\": \"1.5\","
	    " \"channel\": \"C1\"}}";
	assert_int_equal(
	    slack_event_parse(in_thread, strlen(in_thread), &e, NULL), 0);
	assert_string_equal(e.thread_ts, "1.5");
	assert_string_equal(e.text, " help");
	slack_event_clear(&e);

	const char *bot =
	    "{\"type\": \"event_callback\", \"event_id\": \"Ev3\", \"event\":"
	    " {\"type\": \"app_mention\", \"bot_id\": \"B1\", \"text\": \"x\","
	    " \"ts\": \"2.5\", \"channel\": \"C1\"}}";
	assert_int_equal(slack_event_parse(bot, strlen(bot), &e, NULL), 0);
	assert_int_equal(e.kind, SLACK_EVENT_MENTION);
	assert_true(e.from_bot);
	assert_null(e.user);
	slack_event_clear(&e);

	const char *other = "{\"type\": \"event_callback\", \"event_id\": "
			    "\"Ev4\", \"event\": {\"type\": \"message\"}}";
	assert_int_equal(slack_event_parse(other, strlen(other), &e, NULL), 0);
	assert_int_equal(e.kind, SLACK_EVENT_OTHER);
	slack_event_clear(&e);
	const char *revoked = "{\"type\": \"app_rate_limited\"}";
	assert_int_equal(slack_event_parse(revoked, strlen(revoked), &e, NULL),
			 0);
	assert_int_equal(e.kind, SLACK_EVENT_OTHER);
	slack_event_clear(&e);

	event_error("", "malformed JSON");
	event_error("{\"type\": ", "malformed JSON");
	event_error("[1]", "an object with a 'type'");
	event_error("{\"type\": 3}", "an object with a 'type'");
	event_error("{\"type\": \"a\", \"type\": \"b\"}", "malformed JSON");
	event_error("{\"type\": \"url_verification\"}", "'challenge' is "
							"missing");
	event_error("{\"type\": \"url_verification\", \"challenge\": \"a b\"}",
		    "'challenge' is not");
	event_error("{\"type\": \"event_callback\"}", "an 'event' object");
	event_error("{\"type\": \"event_callback\", \"event_id\": \"Ev1\", "
		    "\"event\": {\"type\": \"app_mention\", \"user\": \"U1\", "
		    "\"ts\": \"1.2\"}}",
		    "'channel' is missing");
	event_error("{\"type\": \"event_callback\", \"event\": {\"type\": "
		    "\"app_mention\", \"user\": \"U1\", \"ts\": \"1.2\", "
		    "\"channel\": \"C1\"}}",
		    "'event_id' is missing");
	event_error("{\"type\": \"event_callback\", \"event_id\": \"Ev 1\", "
		    "\"event\": {\"type\": \"app_mention\"}}",
		    "'event_id' is not a Slack id");
	event_error("{\"type\": \"event_callback\", \"event_id\": \"Ev1\", "
		    "\"event\": {\"type\": \"app_mention\", \"user\": \"U1\", "
		    "\"ts\": \"1.2.3\", \"channel\": \"C1\"}}",
		    "'ts' is not a message timestamp");
	event_error("{\"type\": \"event_callback\", \"event_id\": \"Ev1\", "
		    "\"event\": {\"type\": \"app_mention\", \"user\": \"U1\", "
		    "\"ts\": \"1.2\", \"channel\": \"C1\", \"text\": 5}}",
		    "'text' is not a string");
}

/* ---- the configuration
 * ---------------------------------------------------------------- */

static void config_error(const char *text, const char *part)
{
	struct slack_config c = {.retries = 77};
	char msg[512];
	assert_int_equal(load_config(text, &c, msg) < 0, 1);
	assert_int_equal(c.retries, 77); /* untouched */
	if (!strstr(msg, part)) {
		print_message("'%s' lacks '%s'\n", msg, part);
		fail();
	}
}

#define SECRETS                                               \
	"\"signing_secret_file\": \"{DIR}/signing.secret\", " \
	"\"bot_token_env\": \"WARREN_TEST_SLACK_TOKEN\", "

static void test_config(void **state)
{
	(void)state;
	/* what the group set-up read */
	assert_string_equal(cfg.signing_secret, SECRET);
	assert_string_equal(cfg.bot_token, "xoxb-test-token");
	assert_string_equal(cfg.api_url, "http://127.0.0.1:9/api");
	assert_string_equal(cfg.base_url, BASE_URL);
	assert_int_equal(cfg.n_users, 3);
	const struct slack_user *u = slack_user_find(&cfg, "UBOB");
	assert_non_null(u);
	assert_string_equal(u->user, "bob");
	assert_string_equal(u->role, "reviewer");
	assert_null(slack_user_find(&cfg, "UNOBODY"));
	assert_null(slack_user_find(&cfg, NULL));

	/* the defaults */
	struct slack_config c = {0};
	char msg[512];
	assert_int_equal(load_config("{" SECRETS "\"base_url\": "
				     "\"http://warren.lan:7777\"}",
				     &c, msg),
			 0);
	assert_string_equal(c.api_url, SLACK_API_URL_DEFAULT);
	assert_string_equal(c.bot_token, "xoxb-from-env");
	assert_string_equal(c.base_url, "http://warren.lan:7777");
	assert_int_equal(c.retries, SLACK_RETRIES_DEFAULT);
	assert_int_equal(c.retry_backoff_ms, SLACK_BACKOFF_MS_DEFAULT);
	assert_int_equal(c.answer_within_ms, SLACK_ANSWER_WITHIN_MS_DEFAULT);
	assert_int_equal(c.n_users, 0);
	slack_config_clear(&c);

	config_error("[]", "key 'slack': expected an object");
	config_error("{\"base_url\": \"https://w\", \"bot_token_env\": "
		     "\"WARREN_TEST_SLACK_TOKEN\"}",
		     "'signing_secret_file' or 'signing_secret_env' is "
		     "required");
	config_error("{\"signing_secret_file\": \"{DIR}/signing.secret\", "
		     "\"base_url\": \"https://w\"}",
		     "'bot_token_file' or 'bot_token_env' is required");
	config_error("{" SECRETS "\"users\": {}}", "'base_url' is required");
	config_error("{" SECRETS "\"base_url\": \"https://w\", \"colour\": 1}",
		     "unknown key 'slack.colour'");
	config_error("{" SECRETS "\"signing_secret_env\": \"X\", "
		     "\"base_url\": \"https://w\"}",
		     "not both");
	/* a secret others can read, a missing file, an unset variable */
	write_file("open.secret", "s3cr3t", 0644);
	config_error("{\"signing_secret_file\": \"{DIR}/open.secret\", "
		     "\"bot_token_env\": \"WARREN_TEST_SLACK_TOKEN\", "
		     "\"base_url\": \"https://w\"}",
		     "slack.signing_secret_file");
	config_error("{\"signing_secret_file\": \"{DIR}/open.secret\"}",
		     "readable by others (chmod 600 it)");
	config_error("{\"signing_secret_file\": \"{DIR}/none.secret\"}",
		     "slack.signing_secret_file");
	config_error("{\"signing_secret_env\": \"WARREN_TEST_UNSET_VAR\"}",
		     "slack.signing_secret_env: the variable "
		     "WARREN_TEST_UNSET_VAR is not set");
	write_file("spaced.secret", "two words\n", 0600);
	config_error("{\"signing_secret_file\": \"{DIR}/spaced.secret\"}",
		     "holds spaces");
	config_error("{\"signing_secret_file\": 5}",
		     "key 'slack.signing_secret_file': expected a path");
	/* URLs */
	config_error("{" SECRETS "\"base_url\": \"ftp://w\"}",
		     "key 'slack.base_url': expected an http:// or https://");
	config_error("{" SECRETS "\"base_url\": \"https://w/a|b\"}",
		     "key 'slack.base_url'");
	config_error("{" SECRETS "\"base_url\": \"https://w\", \"api_url\": "
		     "\"http://slack.example/api\"}",
		     "key 'slack.api_url': the bot token would go in the "
		     "clear");
	config_error("{" SECRETS "\"base_url\": \"https://w\", \"api_url\": "
		     "\"https://user@slack.com/api\"}",
		     "key 'slack.api_url'");
	/* users */
	config_error("{" SECRETS "\"base_url\": \"https://w\", \"users\": []}",
		     "key 'slack.users': expected an object");
	config_error("{" SECRETS "\"base_url\": \"https://w\", \"users\": "
		     "{\"alice\": {\"user\": \"alice\", \"role\": "
		     "\"admin\"}}}",
		     "'alice' is not a Slack user id");
	config_error("{" SECRETS "\"base_url\": \"https://w\", \"users\": "
		     "{\"U1\": {\"user\": \"alice\", \"role\": \"boss\"}}}",
		     "key 'slack.users.U1.role': expected admin, reviewer or "
		     "submitter");
	config_error("{" SECRETS "\"base_url\": \"https://w\", \"users\": "
		     "{\"U1\": {\"user\": \"-alice\", \"role\": \"admin\"}}}",
		     "key 'slack.users.U1.user': expected a user name");
	config_error("{" SECRETS "\"base_url\": \"https://w\", \"users\": "
		     "{\"U1\": {\"role\": \"admin\"}}}",
		     "key 'slack.users.U1.user'");
	config_error("{" SECRETS "\"base_url\": \"https://w\", \"users\": "
		     "{\"U1\": {\"user\": \"a\", \"role\": \"admin\", "
		     "\"team\": \"T1\"}}}",
		     "unknown key 'slack.users.U1.team'");
	config_error("{" SECRETS "\"base_url\": \"https://w\", \"users\": "
		     "{\"U1\": \"alice\"}}",
		     "key 'slack.users.U1': expected");
	/* numbers */
	config_error("{" SECRETS "\"base_url\": \"https://w\", \"retries\": "
		     "21}",
		     "key 'slack.retries': expected an integer 0..20");
	config_error("{" SECRETS "\"base_url\": \"https://w\", "
		     "\"retry_backoff\": \"soon\"}",
		     "key 'slack.retry_backoff': expected a duration");
	config_error("{" SECRETS "\"base_url\": \"https://w\", \"timeout\": "
		     "\"0s\"}",
		     "key 'slack.timeout': expected a duration");
	/* past Slack's own three seconds, the answer is lost anyway */
	config_error("{" SECRETS "\"base_url\": \"https://w\", "
		     "\"answer_within\": \"3001ms\"}",
		     "key 'slack.answer_within': expected a duration");
}

static void test_urls(void **state)
{
	(void)state;
	assert_true(slack_url_ok("https://slack.com/api"));
	assert_true(slack_url_ok("http://127.0.0.1:8080/api"));
	assert_true(slack_url_ok("http://localhost/api"));
	assert_false(slack_url_ok("http://slack.com/api"));
	assert_false(slack_url_ok("https://slack.com/api?x=1"));
	assert_false(slack_url_ok("https://"));
	assert_false(slack_url_ok("file:///etc/passwd"));
	assert_false(slack_url_ok(NULL));

	assert_true(slack_response_url_ok(
	    &cfg, "https://hooks.slack.com/commands/T1/1/abc"));
	assert_true(slack_response_url_ok(
	    &cfg, "https://hooks.slack-gov.com/commands/T1/1/abc"));
	assert_true(slack_response_url_ok(&cfg, "http://127.0.0.1:9/x/y"));
	assert_false(slack_response_url_ok(
	    &cfg, "http://hooks.slack.com/commands/T1/1/abc"));
	assert_false(slack_response_url_ok(&cfg, "https://evil.com/hook"));
	assert_false(slack_response_url_ok(
	    &cfg, "https://hooks.slack.com.evil.com/commands"));
	assert_false(
	    slack_response_url_ok(&cfg, "https://slack.com@evil.com/"));
	assert_false(slack_response_url_ok(&cfg, "http://127.0.0.1:10/x"));
	assert_false(slack_response_url_ok(&cfg, "http://127.0.0.1:99/x"));
	assert_false(
	    slack_response_url_ok(&cfg, "https://hooks.slack.com/x?token=1"));
}

/* ---- the text of the posts
 * ------------------------------------------------------------- */

static void assert_has(const char *text, const char *part)
{
	if (!text || !strstr(text, part)) {
		print_message("'%s'\n  lacks '%s'\n", text ? text : "(null)",
			      part);
		fail();
	}
}

static void assert_lacks(const char *text, const char *part)
{
	if (strstr(text, part)) {
		print_message("'%s'\n  has '%s'\n", text, part);
		fail();
	}
}

static void test_messages(void **state)
{
	(void)state;
	struct store_session s = {
	    .id = "s-0f3c",
	    .repo_id = "r-1",
	    .user = "alice",
	    .prompt = "\n  make the greeting <!channel> friendlier  \nmore",
	    .state = SESSION_REVIEW,
	    .outcome_json =
		"{\"verify\": {\"passed\": true, \"attempts\": 2, "
		"\"results\": []}, \"result\": {\"changed\": true, "
		"\"files\": [{\"path\": \"a\"}, {\"path\": \"b\"}], "
		"\"additions\": 12, \"deletions\": 4, \"summary\": "
		"\"Greet <@U1> & say <https://x|bye>\\nline two\"}}",
	};
	_cleanup_free_ char *url = slack_session_url(&cfg, s.id);
	assert_string_equal(url, BASE_URL "/#/sessions/s-0f3c");
	_cleanup_free_ char *t = slack_outcome_text(&cfg, &s, "greeter");
	assert_has(t, "*Ready for review:*");
	assert_has(t, "<" BASE_URL "/#/sessions/s-0f3c|s-0f3c>");
	assert_has(t, "`greeter`");
	assert_has(t, "*Prompt:* make the greeting &lt;!channel&gt; "
		      "friendlier");
	assert_lacks(t, "more");
	assert_has(t, "> Greet &lt;@U1&gt; &amp; say &lt;https://x|bye&gt;\n"
		      "> line two");
	assert_has(t, "*Verify:* passed after 2 attempts");
	assert_has(t, "*Diff:* 2 files changed, +12 -4");
	assert_lacks(t, "<!channel>");
	assert_lacks(t, "<@U1>");

	s.state = SESSION_FAILED;
	s.reason = "verify: `make` <broke>";
	s.outcome_json = "{\"verify\": {\"passed\": false, \"attempts\": 3, "
			 "\"results\": [{\"command\": \"true\", \"status\": "
			 "0}, {\"command\": \"make `test`\", \"status\": "
			 "2}]}, \"result\": {\"changed\": false}}";
	free(t);
	t = slack_outcome_text(&cfg, &s, NULL);
	assert_has(t, "*Failed:*");
	assert_has(t, "on `r-1`"); /* the id when the name is unknown */
	assert_has(t, "*Verify:* failed: `make 'test'` exited 2 (3 attempts)");
	assert_has(t, "*Diff:* no changes");
	assert_has(t, "*Reason:* verify: `make` &lt;broke&gt;");

	s.state = SESSION_REJECTED;
	s.outcome_json = "{\"decision\": {\"decision\": \"rejected\", "
			 "\"by\": \"bob\", \"reason\": \"too much\"}}";
	free(t);
	t = slack_outcome_text(&cfg, &s, "greeter");
	assert_has(t, "*Rejected:*");
	assert_has(t, "*By:* bob");
	assert_has(t, "*Reason:* too much");
	assert_lacks(t, "Verify");

	s.state = SESSION_PUSHED;
	s.outcome_json =
	    "{\"decision\": {\"decision\": \"approved\", \"by\": \"bob\"}, "
	    "\"push\": {\"ref\": \"refs/heads/warren/s-0f3c\"}, "
	    "\"pull_request\": {\"url\": \"https://github.example/o/r/pull/7\","
	    " \"number\": 7}, \"result\": {\"changed\": true, \"files\": [1],"
	    " \"additions\": 1, \"deletions\": 0}}";
	free(t);
	t = slack_status_text(&cfg, &s, "greeter");
	assert_has(t, "*Approved and pushed:*");
	assert_has(t, "(alice)");
	assert_has(t, "*Pushed:* `refs/heads/warren/s-0f3c`");
	assert_has(t, "<https://github.example/o/r/pull/7|#7>");
	assert_has(t, "*Diff:* 1 file changed, +1 -0");
	assert_has(t, "*Verify:* no verify commands");

	s.state = SESSION_QUEUED;
	s.outcome_json = NULL;
	s.ref = "main";
	free(t);
	t = slack_started_text(&cfg, &s, "greeter");
	assert_has(t, "Started session <" BASE_URL "/#/sessions/s-0f3c|s-0f3c>"
		      " on `greeter` for alice at `main`");
	assert_has(t, "> make the greeting &lt;!channel&gt; friendlier");

	free(t);
	t = slack_help_text("/warren");
	assert_has(t, "`/warren REPO PROMPT`");
	assert_has(t, "`/warren reject ID [REASON]`");

	/* cut on a character boundary, invalid UTF-8 replaced */
	free(t);
	t = slack_escape("\xc3\xa9\xc3\xa9\xc3\xa9", 5);
	assert_string_equal(t, "\xc3\xa9\xc3\xa9\xe2\x80\xa6");
	free(t);
	t = slack_escape("a\xff"
			 "b\x01<",
			 100);
	assert_string_equal(t, "a?b &lt;");
}

/* ---- the store's outbox
 * ------------------------------------------------------------------- */

/* A queued session of user; its id in id_out. */
static void new_session(const char *user, char id_out[STORE_ID_MAX])
{
	struct control_submit req = {
	    .user = user, .repo = "c-hello", .prompt = "do something"};
	struct store_session s = {0};
	struct wr_error *err = NULL;
	assert_int_equal(control_submit(ctl, &req, &s, &err), 0);
	snprintf(id_out, STORE_ID_MAX, "%s", s.id);
	store_session_clear(&s);
}

static size_t count_due(int64_t now)
{
	struct slack_post *v = NULL;
	size_t n = 0;
	assert_int_equal(ob->ops->post_due(ob, now, 100, &v, &n, NULL), 0);
	slack_posts_free(v, n);
	return n;
}

/* Marks every due post done (so that each test starts with none). */
static void drain(void)
{
	struct slack_post *v = NULL;
	size_t n = 0;
	int64_t far = store_now_ms() + 365ll * 86400 * 1000;
	assert_int_equal(ob->ops->post_due(ob, far, 100, &v, &n, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		struct slack_post_update u = SLACK_POST_UPDATE_INIT;
		u.done_ms = 1;
		assert_int_equal(ob->ops->post_update(ob, v[i].id, &u, NULL),
				 0);
	}
	slack_posts_free(v, n);
}

static void test_outbox(void **state)
{
	(void)state;
	drain();
	char sid[STORE_ID_MAX];
	new_session("alice", sid);
	struct wr_error *err = NULL;
	struct slack_post p = {.kind = SLACK_POST_OUTCOME,
			       .channel = "C1",
			       .thread_ts = "1.5",
			       .slack_user = "UALICE"};
	snprintf(p.session_id, sizeof(p.session_id), "%s", sid);
	int64_t id = ob->ops->post_add(ob, &p, &err);
	assert_true(id > 0);
	int64_t now = store_now_ms();
	/* queued: not due */
	assert_int_equal(count_due(now), 0);
	/* a reply is due at once */
	struct slack_post reply = {
	    .kind = SLACK_POST_REPLY, .channel = "C1", .text = "hello"};
	int64_t rid = ob->ops->post_add(ob, &reply, NULL);
	assert_true(rid > id);
	assert_int_equal(count_due(now), 1);
	struct slack_post_update u = SLACK_POST_UPDATE_INIT;
	u.done_ms = now;
	assert_int_equal(ob->ops->post_update(ob, rid, &u, NULL), 0);
	assert_int_equal(count_due(now), 0);

	/* cancelled: it rests, the outcome is due */
	assert_int_equal(control_cancel(ctl, sid, "alice", NULL), 0);
	struct slack_post *v = NULL;
	size_t n = 0;
	assert_int_equal(ob->ops->post_due(ob, now, 10, &v, &n, NULL), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].id, id);
	assert_int_equal(v[0].kind, SLACK_POST_OUTCOME);
	assert_string_equal(v[0].session_id, sid);
	assert_string_equal(v[0].channel, "C1");
	assert_string_equal(v[0].thread_ts, "1.5");
	assert_string_equal(v[0].slack_user, "UALICE");
	assert_null(v[0].response_url);
	assert_null(v[0].posted_state);
	assert_int_equal(v[0].done_ms, 0);
	slack_posts_free(v, n);
	/* a failed attempt: not due before next_ms */
	u = (struct slack_post_update)SLACK_POST_UPDATE_INIT;
	u.attempts = 1;
	u.next_ms = now + 1000;
	u.last_error = "HTTP 503";
	assert_int_equal(ob->ops->post_update(ob, id, &u, NULL), 0);
	assert_int_equal(count_due(now), 0);
	assert_int_equal(count_due(now + 1000), 1);
	/* posted for the state it is in: not due again */
	u = (struct slack_post_update)SLACK_POST_UPDATE_INIT;
	u.posted_state = "cancelled";
	u.attempts = 0;
	u.last_error = "";
	assert_int_equal(ob->ops->post_update(ob, id, &u, NULL), 0);
	assert_int_equal(count_due(now + 1000), 0);
	assert_int_equal(ob->ops->post_list(ob, sid, &v, &n, NULL), 0);
	assert_int_equal(n, 1);
	assert_string_equal(v[0].posted_state, "cancelled");
	assert_int_equal(v[0].attempts, 0);
	assert_null(v[0].last_error);
	slack_posts_free(v, n);

	/* an outcome waits for the replies about its session written
	 * before it */
	char sid2[STORE_ID_MAX];
	new_session("alice", sid2);
	struct slack_post started = {
	    .kind = SLACK_POST_REPLY, .channel = "C1", .text = "Started"};
	snprintf(started.session_id, sizeof(started.session_id), "%s", sid2);
	int64_t sid2_reply = ob->ops->post_add(ob, &started, NULL);
	snprintf(p.session_id, sizeof(p.session_id), "%s", sid2);
	int64_t sid2_outcome = ob->ops->post_add(ob, &p, NULL);
	assert_true(sid2_reply > 0 && sid2_outcome > sid2_reply);
	assert_int_equal(control_cancel(ctl, sid2, "alice", NULL), 0);
	assert_int_equal(ob->ops->post_due(ob, now, 10, &v, &n, NULL), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].id, sid2_reply);
	slack_posts_free(v, n);
	u = (struct slack_post_update)SLACK_POST_UPDATE_INIT;
	u.done_ms = now;
	assert_int_equal(ob->ops->post_update(ob, sid2_reply, &u, NULL), 0);
	assert_int_equal(ob->ops->post_due(ob, now, 10, &v, &n, NULL), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].id, sid2_outcome);
	slack_posts_free(v, n);
	assert_int_equal(ob->ops->post_update(ob, sid2_outcome, &u, NULL), 0);

	/* what the store refuses */
	struct slack_post bad = {.kind = SLACK_POST_OUTCOME, .channel = "C1"};
	assert_int_equal(ob->ops->post_add(ob, &bad, &err), -EINVAL);
	wr_error_freep(&err);
	snprintf(bad.session_id, sizeof(bad.session_id), "s-nosuch");
	assert_int_equal(ob->ops->post_add(ob, &bad, &err), -ENOENT);
	wr_error_freep(&err);
	bad.channel = NULL;
	snprintf(bad.session_id, sizeof(bad.session_id), "%s", sid);
	assert_int_equal(ob->ops->post_add(ob, &bad, &err), -EINVAL);
	wr_error_freep(&err);
	struct slack_post eph = {
	    .kind = SLACK_POST_EPHEMERAL, .channel = "C1", .text = "x"};
	assert_int_equal(ob->ops->post_add(ob, &eph, &err), -EINVAL);
	wr_error_freep(&err);
	eph.slack_user = "U 1";
	assert_int_equal(ob->ops->post_add(ob, &eph, &err), -EINVAL);
	wr_error_freep(&err);
	assert_int_equal(ob->ops->post_update(ob, 999999, &u, &err), -ENOENT);
	wr_error_freep(&err);
	u.posted_state = "nonsense";
	assert_int_equal(ob->ops->post_update(ob, id, &u, &err), -EINVAL);
	wr_error_freep(&err);
	assert_int_equal(ob->ops->post_due(ob, now, 0, &v, &n, &err), -EINVAL);
	wr_error_freep(&err);
	/* the outbox is the store's own backend's, and the API's Slack
	 * needs one */
	struct slack_outbox *none = NULL;
	assert_int_equal(slack_outbox_open_sqlite(NULL, &none, &err), -EINVAL);
	wr_error_freep(&err);
	assert_int_equal(slack_outbox_open_pg(NULL, &none, &err), -EINVAL);
	wr_error_freep(&err);
	int other = teststore_pg() ? slack_outbox_open_sqlite(st, &none, &err)
				   : slack_outbox_open_pg(st, &none, &err);
	assert_int_equal(other, -EINVAL);
	wr_error_freep(&err);
	assert_null(none);
	struct api *no_outbox = NULL;
	struct api_config ac = {.st = st, .ctl = ctl, .slack = &cfg};
	assert_int_equal(api_new(&ac, &no_outbox, &err), -EINVAL);
	wr_error_freep(&err);
	assert_null(no_outbox);
}

static void test_event_ids(void **state)
{
	(void)state;
	struct wr_error *err = NULL;
	int64_t day = SLACK_EVENT_KEEP_MS;
	assert_int_equal(ob->ops->event_claim(ob, "EvA", 1000, day, NULL), 0);
	assert_int_equal(ob->ops->event_claim(ob, "EvA", 2000, day, &err),
			 -EEXIST);
	wr_error_freep(&err);
	assert_int_equal(ob->ops->event_claim(ob, "EvB", 2000, day, NULL), 0);
	/* released: handled again */
	assert_int_equal(ob->ops->event_release(ob, "EvB", NULL), 0);
	assert_int_equal(ob->ops->event_claim(ob, "EvB", 3000, day, NULL), 0);
	assert_int_equal(ob->ops->event_release(ob, "EvNone", NULL), 0);
	/* forgotten after a day */
	assert_int_equal(
	    ob->ops->event_claim(ob, "EvC", 1000 + day + 1, day, NULL), 0);
	assert_int_equal(
	    ob->ops->event_claim(ob, "EvA", 1000 + day + 2, day, NULL), 0);
	assert_int_equal(ob->ops->event_claim(ob, "Ev A", 1, day, &err),
			 -EINVAL);
	wr_error_freep(&err);
	assert_int_equal(ob->ops->event_claim(ob, "", 1, day, &err), -EINVAL);
	wr_error_freep(&err);
}

/* ---- the routes
 * ------------------------------------------------------------------------ */

struct slack_call {
	const char *path;
	const char *method;	  /* NULL: POST */
	const char *body;	  /* form or JSON */
	const char *content_type; /* NULL: by the path */
	int sign;		  /* 0 signed now, 1 unsigned, 2 wrong secret,
				     3 stale, 4 altered body */
	struct api *on;		  /* NULL: the API with Slack */
};

static json_t *slack_call(unsigned status, const struct slack_call *c)
{
	char ts[32], sig[68];
	time_t now = time(NULL);
	snprintf(ts, sizeof(ts), "%lld",
		 (long long)(c->sign == 3 ? now - 400 : now));
	const char *body = c->body ? c->body : "";
	assert_int_equal(slack_sign(c->sign == 2 ? "wrong" : SECRET, ts, body,
				    strlen(body), sig),
			 0);
	_cleanup_free_ char *sent = wr_strdup(body);
	if (c->sign == 4 && *sent)
		sent[0] ^= 1;
	bool form = !strcmp(c->path, "/slack/commands");
	struct api_request req = {
	    .method = c->method ? c->method : "POST",
	    .path = c->path,
	    .content_type = c->content_type ? c->content_type
			    : form ? "application/x-www-form-urlencoded"
				   : "application/json",
	    .slack_signature = c->sign == 1 ? NULL : sig,
	    .slack_timestamp = c->sign == 1 ? NULL : ts,
	    .body = sent,
	    .body_len = strlen(sent),
	};
	struct api_response r;
	assert_int_equal(api_handle(c->on ? c->on : api, &req, &r), 0);
	if (r.status != status)
		print_message("%s: %u %.*s\n", c->path, r.status,
			      (int)r.body_len, r.body ? r.body : "");
	assert_int_equal(r.status, status);
	json_t *j = json_loadb(r.body, r.body_len, 0, NULL);
	assert_non_null(j);
	api_response_clear(&r);
	return j;
}

#define SLACK(status, ...) slack_call(status, &(struct slack_call){__VA_ARGS__})

static int64_t sessions_now(void)
{
	int64_t counts[SESSION_STATE_MAX], n = 0;
	assert_int_equal(st->ops->session_count(st, counts, NULL), 0);
	for (int i = 0; i < SESSION_STATE_MAX; i++)
		n += counts[i];
	return n;
}

/* A slash command's form body. */
static char *command_body(const char *user, const char *text)
{
	return wr_asprintf("token=old&team_id=T1&team_domain=acme&channel_id="
			   "C42&channel_name=dev&user_id=%s&user_name=x&"
			   "command=%%2Fwarren&text=%s&api_app_id=A1&"
			   "response_url=http%%3A%%2F%%2F127.0.0.1%%3A9%%2F"
			   "commands%%2FT1%%2F1%%2Fabc&trigger_id=1.2.3",
			   user, text);
}

/* The answer's text (and that it is the kind wanted). */
static const char *reply_text(json_t *j, const char *type)
{
	assert_string_equal(
	    json_string_value(json_object_get(j, "response_type")), type);
	return json_string_value(json_object_get(j, "text"));
}

/* The session id in a started session's answer. */
static void id_from_text(const char *text, char id[STORE_ID_MAX])
{
	const char *p = strstr(text, "/#/sessions/");
	assert_non_null(p);
	p += strlen("/#/sessions/");
	size_t n = strcspn(p, "|>");
	assert_true(n > 2 && n < STORE_ID_MAX);
	memcpy(id, p, n);
	id[n] = '\0';
}

static void test_command_route(void **state)
{
	(void)state;
	_cleanup_free_ char *run = command_body("UALICE", "c-hello+fix+it");
	int64_t before = sessions_now();
	json_t *j;

	/* not configured: 404 */
	j = SLACK(404, .path = "/slack/commands", .body = run, .on = plain);
	json_decref(j);
	/* unsigned, wrong secret, stale, altered: 401, nothing created */
	for (int sign = 1; sign <= 4; sign++) {
		j = SLACK(401, .path = "/slack/commands", .body = run,
			  .sign = sign);
		assert_string_equal(json_string_value(json_object_get(
					json_object_get(j, "error"), "code")),
				    "unauthorized");
		json_decref(j);
	}
	/* signed, but not a POST, or not a form */
	j = SLACK(405, .path = "/slack/commands", .body = "", .method = "GET");
	json_decref(j);
	j = SLACK(415, .path = "/slack/commands", .body = run,
		  .content_type = "application/json");
	json_decref(j);
	j = SLACK(400, .path = "/slack/commands", .body = "text=%zz");
	json_decref(j);
	j = SLACK(400, .path = "/slack/commands", .body = "text=x");
	json_decref(j); /* no user_id */
	_cleanup_free_ char *evil = wr_asprintf(
	    "user_id=UALICE&text=c-hello+x&response_url=https%%3A%%2F%%2F"
	    "evil.example%%2Fhook");
	j = SLACK(400, .path = "/slack/commands", .body = evil);
	json_decref(j);
	assert_int_equal(sessions_now(), before);

	/* an unmapped user: told so, nothing created */
	_cleanup_free_ char *stranger =
	    command_body("USTRANGER", "c-hello+fix+it");
	j = SLACK(200, .path = "/slack/commands", .body = stranger);
	assert_has(reply_text(j, "ephemeral"),
		   "(USTRANGER) is not linked to a Warren user");
	json_decref(j);
	assert_int_equal(sessions_now(), before);

	/* help, a bad command, an unknown repository */
	_cleanup_free_ char *help = command_body("UALICE", "");
	j = SLACK(200, .path = "/slack/commands", .body = help);
	assert_has(reply_text(j, "ephemeral"), "`/warren status ID`");
	json_decref(j);
	_cleanup_free_ char *half = command_body("UALICE", "c-hello");
	j = SLACK(200, .path = "/slack/commands", .body = half);
	assert_has(reply_text(j, "ephemeral"), "Give a prompt");
	json_decref(j);
	_cleanup_free_ char *unknown = command_body("UALICE", "nope+fix+it");
	j = SLACK(200, .path = "/slack/commands", .body = unknown);
	assert_has(reply_text(j, "ephemeral"),
		   "No repository named `nope`. Registered: `c-hello`.");
	json_decref(j);
	assert_int_equal(sessions_now(), before);

	/* a session, as the mapped user, with its outcome post */
	j = SLACK(200, .path = "/slack/commands", .body = run);
	const char *text = reply_text(j, "in_channel");
	assert_has(text, "Started session <" BASE_URL "/#/sessions/s-");
	assert_has(text, " on `c-hello` for alice");
	char sid[STORE_ID_MAX];
	id_from_text(text, sid);
	json_decref(j);
	assert_int_equal(sessions_now(), before + 1);
	struct store_session s = {0};
	assert_int_equal(st->ops->session_get(st, sid, &s, NULL), 0);
	assert_string_equal(s.user, "alice");
	assert_string_equal(s.prompt, "fix it");
	assert_string_equal(s.repo_id, repo_id);
	store_session_clear(&s);
	struct slack_post *v = NULL;
	size_t n = 0;
	assert_int_equal(ob->ops->post_list(ob, sid, &v, &n, NULL), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].kind, SLACK_POST_OUTCOME);
	assert_string_equal(v[0].response_url,
			    "http://127.0.0.1:9/commands/T1/1/abc");
	assert_string_equal(v[0].channel, "C42");
	assert_null(v[0].thread_ts);
	assert_string_equal(v[0].slack_user, "UALICE");
	slack_posts_free(v, n);

	/* status: alice's own; another user's is not found for her */
	_cleanup_free_ char *status_text = wr_asprintf("status+%s", sid);
	_cleanup_free_ char *status = command_body("UALICE", status_text);
	j = SLACK(200, .path = "/slack/commands", .body = status);
	assert_has(reply_text(j, "ephemeral"), "*Queued:* session <");
	json_decref(j);
	char other[STORE_ID_MAX];
	new_session("carol", other);
	_cleanup_free_ char *other_text = wr_asprintf("status+%s", other);
	_cleanup_free_ char *status_other = command_body("UALICE", other_text);
	j = SLACK(200, .path = "/slack/commands", .body = status_other);
	assert_has(reply_text(j, "ephemeral"), "No session s-");
	json_decref(j);
	_cleanup_free_ char *status_bob = command_body("UBOB", other_text);
	j = SLACK(200, .path = "/slack/commands", .body = status_bob);
	assert_has(reply_text(j, "ephemeral"), "(carol)");
	json_decref(j);

	/* approve and reject: reviewers and admins only, in review only */
	_cleanup_free_ char *approve_text = wr_asprintf("approve+%s", sid);
	_cleanup_free_ char *approve = command_body("UALICE", approve_text);
	j = SLACK(200, .path = "/slack/commands", .body = approve);
	assert_has(reply_text(j, "ephemeral"),
		   "Approving a session needs the reviewer or admin role");
	json_decref(j);
	_cleanup_free_ char *reject_text =
	    wr_asprintf("reject+%s+not+now", sid);
	_cleanup_free_ char *reject = command_body("UBOB", reject_text);
	j = SLACK(200, .path = "/slack/commands", .body = reject);
	assert_has(reply_text(j, "ephemeral"), "Could not reject");
	json_decref(j);
	assert_int_equal(st->ops->session_get(st, sid, &s, NULL), 0);
	assert_int_equal(s.state, SESSION_QUEUED);
	store_session_clear(&s);
}

/* The events body of an app mention. */
static char *mention_body(const char *event_id, const char *user,
			  const char *text, const char *extra)
{
	return wr_asprintf(
	    "{\"token\": \"old\", \"team_id\": \"T1\", \"api_app_id\": \"A1\","
	    " \"type\": \"event_callback\", \"event_id\": \"%s\","
	    " \"event_time\": 1, \"event\": {\"type\": \"app_mention\","
	    " \"user\": \"%s\", \"text\": \"<@U0BOT> %s\", \"ts\": "
	    "\"1700000000.000100\", \"channel\": \"C77\"%s}}",
	    event_id, user, text, extra ? extra : "");
}

/* The posts in the outbox that are not done: replies of no session. */
static size_t replies_to(const char *user, enum slack_post_kind kind,
			 const char *part)
{
	struct slack_post *v = NULL;
	size_t n = 0, found = 0;
	assert_int_equal(
	    ob->ops->post_due(ob, store_now_ms() + 1, 100, &v, &n, NULL), 0);
	for (size_t i = 0; i < n; i++)
		if (v[i].kind == kind && v[i].slack_user &&
		    !strcmp(v[i].slack_user, user) && v[i].text &&
		    strstr(v[i].text, part))
			found++;
	slack_posts_free(v, n);
	return found;
}

static void test_event_route(void **state)
{
	(void)state;
	drain();
	json_t *j;
	int64_t before = sessions_now();
	/* the Request URL's check */
	const char *check = "{\"token\": \"t\", \"challenge\": \"c-42\", "
			    "\"type\": \"url_verification\"}";
	j = SLACK(200, .path = "/slack/events", .body = check);
	assert_string_equal(json_string_value(json_object_get(j, "challenge")),
			    "c-42");
	json_decref(j);
	j = SLACK(401, .path = "/slack/events", .body = check, .sign = 1);
	json_decref(j);
	j = SLACK(404, .path = "/slack/events", .body = check, .on = plain);
	json_decref(j);
	j = SLACK(415, .path = "/slack/events", .body = check,
		  .content_type = "application/x-www-form-urlencoded");
	json_decref(j);
	j = SLACK(400, .path = "/slack/events", .body = "{\"type\": ");
	json_decref(j);

	/* a mention starts a session, answered in a new thread */
	_cleanup_free_ char *m1 =
	    mention_body("EvM1", "UALICE", "c-hello fix the greeting", NULL);
	for (int sign = 1; sign <= 4; sign++) {
		j = SLACK(401, .path = "/slack/events", .body = m1,
			  .sign = sign);
		json_decref(j);
	}
	assert_int_equal(sessions_now(), before);
	j = SLACK(200, .path = "/slack/events", .body = m1);
	assert_true(json_is_true(json_object_get(j, "ok")));
	json_decref(j);
	assert_int_equal(sessions_now(), before + 1);
	assert_int_equal(replies_to("UALICE", SLACK_POST_REPLY,
				    "Started session <" BASE_URL),
			 1);
	/* Slack's retry of the same delivery: nothing more */
	j = SLACK(200, .path = "/slack/events", .body = m1);
	json_decref(j);
	assert_int_equal(sessions_now(), before + 1);
	assert_int_equal(
	    replies_to("UALICE", SLACK_POST_REPLY, "Started session"), 1);
	/* its outcome goes to the thread under the mention */
	struct store_session *list = NULL;
	size_t n = 0;
	/* (alice's newest: an earlier one may share its millisecond, and
	 * ids break such ties in no set order, so it is found by prompt) */
	struct store_session_filter f = {
	    .state = -1, .user = "alice", .limit = 10};
	assert_int_equal(st->ops->session_list(st, &f, &list, &n, NULL), 0);
	size_t k = 0;
	while (k < n && strcmp(list[k].prompt, "fix the greeting"))
		k++;
	assert_true(k < n);
	if (k > 0) {
		struct store_session t = list[0];
		list[0] = list[k];
		list[k] = t;
	}
	struct slack_post *v = NULL;
	size_t np = 0;
	assert_int_equal(ob->ops->post_list(ob, list[0].id, &v, &np, NULL), 0);
	assert_int_equal(np, 2);
	/* the answer first: the outcome waits for it */
	assert_int_equal(v[0].kind, SLACK_POST_REPLY);
	assert_int_equal(v[1].kind, SLACK_POST_OUTCOME);
	assert_string_equal(v[1].channel, "C77");
	assert_string_equal(v[1].thread_ts, "1700000000.000100");
	assert_null(v[1].response_url);
	slack_posts_free(v, np);
	store_sessions_free(list, n);

	/* in a thread: answered in that thread */
	_cleanup_free_ char *m2 =
	    mention_body("EvM2", "UBOB", "c-hello another one",
			 ", \"thread_ts\": \"1699999999.000001\"");
	j = SLACK(200, .path = "/slack/events", .body = m2);
	json_decref(j);
	assert_int_equal(sessions_now(), before + 2);
	f.user = "bob";
	assert_int_equal(st->ops->session_list(st, &f, &list, &n, NULL), 0);
	assert_int_equal(n, 1);
	assert_int_equal(ob->ops->post_list(ob, list[0].id, &v, &np, NULL), 0);
	assert_int_equal(np, 2);
	assert_string_equal(v[0].thread_ts, "1699999999.000001");
	assert_string_equal(v[1].thread_ts, "1699999999.000001");
	slack_posts_free(v, np);
	store_sessions_free(list, n);

	/* an unmapped user, a bad command: told alone, nothing created */
	_cleanup_free_ char *m3 =
	    mention_body("EvM3", "USTRANGER", "c-hello fix it", NULL);
	j = SLACK(200, .path = "/slack/events", .body = m3);
	json_decref(j);
	assert_int_equal(replies_to("USTRANGER", SLACK_POST_EPHEMERAL,
				    "is not linked to a Warren user"),
			 1);
	_cleanup_free_ char *m4 =
	    mention_body("EvM4", "UALICE", "c-hello", NULL);
	j = SLACK(200, .path = "/slack/events", .body = m4);
	json_decref(j);
	assert_int_equal(
	    replies_to("UALICE", SLACK_POST_EPHEMERAL, "`@Warren REPO PROMPT`"),
	    1);
	/* a bot's mention (Warren's own) and other events: ignored */
	const char *bot =
	    "{\"type\": \"event_callback\", \"event_id\": \"EvM5\", \"event\":"
	    " {\"type\": \"app_mention\", \"bot_id\": \"B1\", \"text\": "
	    "\"<@U0BOT> c-hello loop\", \"ts\": \"2.5\", \"channel\": \"C1\"}}";
	j = SLACK(200, .path = "/slack/events", .body = bot);
	json_decref(j);
	const char *message = "{\"type\": \"event_callback\", \"event_id\": "
			      "\"EvM6\", \"event\": {\"type\": \"message\"}}";
	j = SLACK(200, .path = "/slack/events", .body = message);
	json_decref(j);
	assert_int_equal(sessions_now(), before + 2);
	drain();
}

/* ---- the notifier
 * ----------------------------------------------------------------------- */

static void test_notifier_retries(void **state)
{
	(void)state;
	drain();
	/* a reply to the Web API at 127.0.0.1:9, where nobody listens:
	 * retried twice with back-off, then given up */
	struct slack_post p = {.kind = SLACK_POST_REPLY,
			       .channel = "C1",
			       .thread_ts = "1.5",
			       .text = "hello"};
	int64_t id = ob->ops->post_add(ob, &p, NULL);
	assert_true(id > 0);
	int64_t now = store_now_ms();
	assert_int_equal(slack_notifier_pass(&cfg, ob, st, now), 1);
	struct slack_post *v = NULL;
	size_t n = 0;
	assert_int_equal(ob->ops->post_due(ob, now + 100, 10, &v, &n, NULL), 0);
	assert_int_equal(n, 1);
	assert_int_equal(v[0].attempts, 1);
	assert_int_equal(v[0].next_ms, now + 100); /* retry_backoff */
	assert_has(v[0].last_error,
		   "Slack chat.postMessage: the connection failed");
	slack_posts_free(v, n);
	/* not before its time */
	assert_int_equal(slack_notifier_pass(&cfg, ob, st, now + 99), 0);
	assert_int_equal(slack_notifier_pass(&cfg, ob, st, now + 100), 1);
	/* doubled */
	assert_int_equal(slack_notifier_pass(&cfg, ob, st, now + 299), 0);
	assert_int_equal(slack_notifier_pass(&cfg, ob, st, now + 300), 1);
	/* the third failure is the last (retries: 2) */
	assert_int_equal(count_due(now + 3600 * 1000), 0);
	(void)id;
}

/* ---- allocation failures
 * ------------------------------------------------------------- */

/* Every allocation of the parsers and of the text of an outcome, failed
 * in turn: each call fails cleanly (-ENOMEM or NULL, nothing leaked: the
 * sanitizer build checks) or succeeds. */
static void test_alloc_failures(void **state)
{
	(void)state;
	const char *form = "user_id=UALICE&text=c-hello+fix+it&response_url="
			   "https%3A%2F%2Fhooks.slack.com%2Fx";
	const char *event = "{\"type\": \"event_callback\", \"event_id\": "
			    "\"Ev1\", \"event\": {\"type\": \"app_mention\", "
			    "\"user\": \"U1\", \"text\": \"<@U0> a b\", "
			    "\"ts\": \"1.2\", \"channel\": \"C1\"}}";
	struct store_session s = {
	    .id = "s-1",
	    .repo_id = "r-1",
	    .user = "alice",
	    .prompt = "make it so",
	    .state = SESSION_REVIEW,
	    .outcome_json = "{\"verify\": {\"passed\": true, \"attempts\": 1},"
			    " \"result\": {\"changed\": true, \"files\": [1],"
			    " \"summary\": \"done\"}}",
	};
	bool form_ok = false, cmd_ok = false, event_ok = false, text_ok = false;
	for (unsigned long n = 1; n < 200; n++) {
		struct wr_error *err = NULL;
		struct slack_form f = {0};
		struct slack_command c = {0};
		struct slack_event e = {0};
		wr_alloc_fail_at(n);
		int rf = slack_form_parse(form, strlen(form), &f, &err);
		wr_alloc_fail_at(0);
		assert_true(rf == 0 || rf == -ENOMEM);
		form_ok |= rf == 0;
		slack_form_clear(&f);
		wr_error_freep(&err);
		wr_alloc_fail_at(n);
		int rc = slack_command_parse("reject s-1 not now", &c, &err);
		wr_alloc_fail_at(0);
		assert_true(rc == 0 || rc == -ENOMEM);
		cmd_ok |= rc == 0;
		slack_command_clear(&c);
		wr_error_freep(&err);
		wr_alloc_fail_at(n);
		int re = slack_event_parse(event, strlen(event), &e, &err);
		wr_alloc_fail_at(0);
		assert_true(re == 0 || re == -ENOMEM);
		event_ok |= re == 0;
		slack_event_clear(&e);
		wr_error_freep(&err);
		wr_alloc_fail_at(n);
		char *t = slack_outcome_text(&cfg, &s, "c-hello");
		wr_alloc_fail_at(0);
		text_ok |= t != NULL;
		if (t)
			assert_has(t, "*Verify:* passed");
		free(t);
	}
	assert_true(form_ok && cmd_ok && event_ok && text_ok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_signature),
	    cmocka_unit_test(test_form),
	    cmocka_unit_test(test_command),
	    cmocka_unit_test(test_event),
	    cmocka_unit_test(test_config),
	    cmocka_unit_test(test_urls),
	    cmocka_unit_test(test_messages),
	    cmocka_unit_test(test_outbox),
	    cmocka_unit_test(test_event_ids),
	    cmocka_unit_test(test_command_route),
	    cmocka_unit_test(test_event_route),
	    cmocka_unit_test(test_notifier_retries),
	    cmocka_unit_test(test_alloc_failures),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

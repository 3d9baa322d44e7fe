/* test_spec.c - the environment spec: JSONC conversion, every key in each
 * of its forms, type errors with their exact key paths, caps, finding the
 * file in a repository (precedence, fallback, symlinks, file types),
 * lockfile discovery, and allocation failure at every step.
 *
 * Repositories are built in a scratch directory under /tmp, removed at the
 * end with nftw (not with the code under test). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "snapshot/spec.h"
#include "util/alloc.h"
#include "util/error.h"

/* sha256("{}") */
#define HASH_OF_EMPTY_OBJECT \
	"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"

/* Every key in use, in JSONC, with comments and trailing commas. */
static const char full_example[] =
    "// a full spec\n"
    "{\n"
    "  \"name\": \"demo\", /* unknown to warren */\n"
    "  \"image\": \"mcr.microsoft.com/devcontainers/base\",\n"
    "  \"onCreateCommand\": \"npm ci // not a comment\",\n"
    "  \"updateContentCommand\": [\"make\", \"deps\",],\n"
    "  \"postCreateCommand\": {\n"
    "    \"server\": \"npm start\",\n"
    "    \"db\": [\"pg_ctl\", \"start\"], // trailing comma next\n"
    "  },\n"
    "  \"postStartCommand\": \"echo \\\"/* hi */\\\"\",\n"
    "  \"containerEnv\": {\"NODE_ENV\": \"development\", \"EMPTY\": \"\"},\n"
    "  \"remoteEnv\": {\"PATH\": \"${containerEnv:PATH}:/opt/bin\"},\n"
    "  \"forwardPorts\": [3000, \"8080\", \"db:5432\"],\n"
    "  \"customizations\": {\n"
    "    \"vscode\": {\"extensions\": [\"ms-python.python\"]},\n"
    "    \"warren\": {\n"
    "      \"services\": [\n"
    "        {\"name\": \"postgres\", \"start\": \"pg_ctl start\",\n"
    "         \"ready\": [\"pg_isready\", \"-q\"], \"stop\": \"pg_ctl "
    "stop\"},\n"
    "        {\"name\": \"redis.cache\", \"start\": [\"redis-server\"]},\n"
    "      ],\n"
    "      \"verify\": [\"npm test\", [\"make\", \"check\"]],\n"
    "      \"egress\": [\"registry.npmjs.org\", \"*.github.com\",\n"
    "                 \"proxy.example.com:8443\"],\n"
    "      \"limits\": {\"cpus\": \"1.5\", \"memory\": \"2G\", \"disk\": "
    "1048576,\n"
    "                 \"pids\": 512, \"lifetime\": \"2h\", \"idle\": 600},\n"
    "      \"refresh\": \"1h\",\n"
    "      \"secrets\": [\"NPM_TOKEN\", \"_X1\"],\n"
    "      \"lockfiles\": [\"tools/deps.lock\", \"web/package-lock.json\"],\n"
    "      \"future\": {\"anything\": true},\n"
    "    },\n"
    "  },\n"
    "}\n";

static char root[] = "/tmp/warren-unit-spec.XXXXXX";
static char repo[PATH_MAX]; /* this test's repository under root */
static int test_seq;

/* ---- helpers ---------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int type,
			struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

static int group_setup(void **state)
{
	(void)state;
	return mkdtemp(root) ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	return nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int test_setup(void **state)
{
	(void)state;
	wr_alloc_fail_at(0);
	snprintf(repo, sizeof(repo), "%s/r%d", root, ++test_seq);
	return mkdir(repo, 0755);
}

static int test_teardown(void **state)
{
	(void)state;
	wr_alloc_fail_at(0);
	return 0;
}

/* repo/rel, in one of a few rotating buffers. */
static const char *R(const char *rel)
{
	static char bufs[8][PATH_MAX];
	static int next;
	char *b = bufs[next++ % 8];
	snprintf(b, PATH_MAX, "%s/%s", repo, rel);
	return b;
}

static void write_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static void write_text(const char *rel, const char *text)
{
	write_file(R(rel), text, strlen(text));
}

static struct spec *parse_len(const char *text, size_t len)
{
	struct spec *spec = NULL;
	struct wr_error *err = NULL;
	int r = spec_parse(text, len, "test.json", &spec, &err);
	if (r != 0)
		fail_msg("spec_parse failed (%d): %s\n--- input:\n%s", r,
			 err ? err->msg : "(no error)", text);
	assert_null(err);
	assert_non_null(spec);
	return spec;
}

static struct spec *parse(const char *text)
{
	return parse_len(text, strlen(text));
}

/* Expects spec_parse to fail on text with an input error whose message is
 * exactly want. */
static void expect_error_len(const char *text, size_t len, const char *want)
{
	struct spec *spec = NULL;
	struct wr_error *err = NULL;
	int r = spec_parse(text, len, "test.json", &spec, &err);
	if (r >= 0)
		fail_msg("spec_parse succeeded; want \"%s\"\n--- input:\n%s",
			 want, text);
	assert_null(spec);
	assert_non_null(err);
	if (strcmp(err->msg, want) != 0)
		fail_msg("message \"%s\"\n   want \"%s\"\n--- input:\n%s",
			 err->msg, want, text);
	assert_true(err->bad_input);
	assert_int_equal(r, -(err->errnum ? err->errnum : EINVAL));
	wr_error_free(err);
}

static void expect_error(const char *text, const char *want)
{
	expect_error_len(text, strlen(text), want);
}

/* The same for messages checked by their start (jansson's own wording). */
static void expect_error_prefix(const char *text, const char *want)
{
	struct spec *spec = NULL;
	struct wr_error *err = NULL;
	int r = spec_parse(text, strlen(text), NULL, &spec, &err);
	if (r >= 0)
		fail_msg("spec_parse succeeded; want \"%s...\"", want);
	assert_non_null(err);
	if (strncmp(err->msg, want, strlen(want)) != 0)
		fail_msg("message \"%s\"\n   want \"%s...\"", err->msg, want);
	assert_true(err->bad_input);
	wr_error_free(err);
}

static char *jsonc(const char *in)
{
	char *out = NULL;
	size_t out_len = 0;
	struct wr_error *err = NULL;
	int r = spec_jsonc_to_json(in, strlen(in), &out, &out_len, &err);
	if (r != 0)
		fail_msg("spec_jsonc_to_json: %s", err ? err->msg : "?");
	assert_int_equal(out_len, strlen(in));
	assert_int_equal(strlen(out), out_len);
	return out;
}

static void expect_jsonc_error(const char *in, const char *want)
{
	char *out = NULL;
	struct wr_error *err = NULL;
	int r = spec_jsonc_to_json(in, strlen(in), &out, NULL, &err);
	assert_int_equal(r, -EINVAL);
	assert_null(out);
	assert_non_null(err);
	assert_string_equal(err->msg, want);
	assert_true(err->bad_input);
	wr_error_free(err);
}

/* A JSON string of n copies of c, for the caps. */
static char *repeat(const char *prefix, const char *item, size_t n,
		    const char *sep, const char *suffix)
{
	size_t len = strlen(prefix) + n * (strlen(item) + strlen(sep) + 8) +
		     strlen(suffix) + 1;
	char *s = malloc(len);
	assert_non_null(s);
	size_t at = (size_t)sprintf(s, "%s", prefix);
	for (size_t i = 0; i < n; i++) {
		at += (size_t)sprintf(s + at, item, i);
		if (i + 1 < n)
			at += (size_t)sprintf(s + at, "%s", sep);
	}
	sprintf(s + at, "%s", suffix);
	return s;
}

static void assert_argv(char **argv, const char *a0, const char *a1,
			const char *a2)
{
	const char *want[] = {a0, a1, a2};
	assert_non_null(argv);
	for (size_t i = 0; i < 3; i++) {
		if (!want[i]) {
			assert_null(argv[i]);
			return;
		}
		assert_non_null(argv[i]);
		assert_string_equal(argv[i], want[i]);
	}
	assert_null(argv[3]);
}

/* ---- JSONC ------------------------------------------------------------ */

static void test_jsonc_blanks_comments_keeping_length_and_lines(void **state)
{
	(void)state;
	char *out = jsonc("{ // one\n\"a\": /* two\nthree */ 1 }");
	assert_string_equal(out, "{       \n\"a\":       \n         1 }");
	free(out);
	out = jsonc("[1 /**/, 2 /***/, 3/* / * **/]");
	assert_string_equal(out, "[1     , 2      , 3          ]");
	free(out);
	out = jsonc("// only a comment");
	assert_string_equal(out, "                 ");
	free(out);
}

static void test_jsonc_keeps_strings_byte_exact(void **state)
{
	(void)state;
	static const char in[] =
	    "{\"url\": \"http://example.com/*not*/ // x\",\n"
	    " \"q\": \"say \\\"//hi\\\" /*\", \"bs\": \"C:\\\\\", // c\n"
	    " \"u\": \"caf\xc3\xa9 \\u00e9 , ]\",}";
	char *out = jsonc(in);
	assert_memory_equal(out, in, strstr(in, "// c") - in);
	json_error_t jerr;
	json_t *doc = json_loads(out, 0, &jerr);
	if (!doc)
		fail_msg("jansson: %s (output: %s)", jerr.text, out);
	assert_string_equal(json_string_value(json_object_get(doc, "url")),
			    "http://example.com/*not*/ // x");
	assert_string_equal(json_string_value(json_object_get(doc, "q")),
			    "say \"//hi\" /*");
	assert_string_equal(json_string_value(json_object_get(doc, "bs")),
			    "C:\\");
	assert_string_equal(json_string_value(json_object_get(doc, "u")),
			    "caf\xc3\xa9 \xc3\xa9 , ]");
	json_decref(doc);
	free(out);
}

static void test_jsonc_drops_trailing_commas(void **state)
{
	(void)state;
	char *out = jsonc("{\"a\": [1, 2, ], \"b\": {\"c\": 1,},}");
	assert_string_equal(out, "{\"a\": [1, 2  ], \"b\": {\"c\": 1 } }");
	free(out);
	/* a comment between the comma and the bracket */
	out = jsonc("[1, // last\n /* x */ ]");
	assert_string_equal(out, "[1         \n         ]");
	free(out);
	/* commas inside strings are not trailing commas */
	out = jsonc("[\",]\", \",}\",]");
	assert_string_equal(out, "[\",]\", \",}\" ]");
	free(out);
}

static void test_jsonc_leaves_other_commas_to_jansson(void **state)
{
	(void)state;
	/* only a comma after a value is a trailing comma */
	static const char *const kept[] = {"[1,,]",	"[,]", "{,}",
					   "{\"a\":,}", ",",   "[1,\n,\n]"};
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		char *out = jsonc(kept[i]);
		assert_string_equal(out, kept[i]);
		free(out);
	}
	/* and jansson reports them where they are */
	expect_error_prefix("{\"a\": [1,,]}", "line 1, column 10: ");
	expect_error_prefix("{\n\"a\": 1,\n,}", "line 3, column 1: ");
	expect_error_prefix("{,}", "line 1, column 2: ");
}

static void test_jsonc_escapes_at_string_edges(void **state)
{
	(void)state;
	/* "\\" ends the string: the comment after it is a comment */
	char *out = jsonc("[\"\\\\\" // c\n]");
	assert_string_equal(out, "[\"\\\\\"     \n]");
	free(out);
	/* \" does not end it: the // stays inside */
	out = jsonc("[\"\\\" // s\"]");
	assert_string_equal(out, "[\"\\\" // s\"]");
	free(out);
	/* a lone slash is left for jansson to refuse */
	out = jsonc("[1 / 2]");
	assert_string_equal(out, "[1 / 2]");
	free(out);
	expect_error_prefix("{\"a\": 1 / 2}", "line 1, column ");
}

static void test_jsonc_byte_order_mark(void **state)
{
	(void)state;
	char *out = jsonc("\xef\xbb\xbf{\"a\": 1}");
	assert_string_equal(out, "   {\"a\": 1}");
	free(out);
	struct spec *spec = parse("\xef\xbb\xbf{\"postStartCommand\": \"x\"}");
	assert_int_equal(spec->post_start.kind, SPEC_HOOK_SHELL);
	spec_free(spec);
}

static void test_jsonc_unterminated_comment_and_string(void **state)
{
	(void)state;
	expect_jsonc_error("{\n\"a\": 1\n/* open\n\n", "line 3: unterminated "
						       "comment");
	expect_jsonc_error("/*/", "line 1: unterminated comment");
	expect_jsonc_error("{\n\n\n\"a\": \"open",
			   "line 4: unterminated string");
	expect_jsonc_error("[\"a\\\"]", "line 1: unterminated string");
	expect_jsonc_error("[\"a\\", "line 1: unterminated string");
	/* and through spec_parse, unchanged */
	expect_error("{\"a\": 1,\n // fine\n /* not fine",
		     "line 3: unterminated comment");
	expect_error("{\"a\":\n\"b", "line 2: unterminated string");
	/* a line comment may end the file */
	struct spec *spec = parse("{} // end");
	spec_free(spec);
}

static void test_jsonc_line_numbers_in_syntax_errors(void **state)
{
	(void)state;
	/* the error is on line 5, after comments spanning lines */
	expect_error_prefix("{\n// one\n/* two\nthree */\n\"a\": tru }",
			    "line 5, column ");
	expect_error_prefix("", "line 1, column 0: ");
}

static void test_jsonc_nul_bytes(void **state)
{
	(void)state;
	static const char in[] = "{\"a\": \"x\0y\"}";
	char *out = NULL;
	size_t out_len = 0;
	assert_int_equal(
	    spec_jsonc_to_json(in, sizeof(in) - 1, &out, &out_len, NULL), 0);
	assert_int_equal(out_len, sizeof(in) - 1);
	assert_memory_equal(out, in, sizeof(in) - 1);
	free(out);
	struct spec *spec = NULL;
	struct wr_error *err = NULL;
	assert_true(spec_parse(in, sizeof(in) - 1, NULL, &spec, &err) < 0);
	assert_non_null(err);
	assert_true(err->bad_input);
	wr_error_free(err);
}

/* ---- the document ----------------------------------------------------- */

static void test_full_example(void **state)
{
	(void)state;
	struct spec *spec = parse(full_example);
	assert_string_equal(spec->source, "test.json");
	assert_int_equal(strlen(spec->hash), 64);

	assert_int_equal(spec->on_create.kind, SPEC_HOOK_SHELL);
	assert_int_equal(spec->on_create.n_cmds, 1);
	assert_null(spec->on_create.cmds[0].name);
	assert_string_equal(spec->on_create.cmds[0].shell,
			    "npm ci // not a comment");
	assert_null(spec->on_create.cmds[0].argv);

	assert_int_equal(spec->update_content.kind, SPEC_HOOK_ARGV);
	assert_int_equal(spec->update_content.n_cmds, 1);
	assert_null(spec->update_content.cmds[0].shell);
	assert_argv(spec->update_content.cmds[0].argv, "make", "deps", NULL);

	assert_int_equal(spec->post_create.kind, SPEC_HOOK_PARALLEL);
	assert_int_equal(spec->post_create.n_cmds, 2);
	assert_string_equal(spec->post_create.cmds[0].name, "server");
	assert_string_equal(spec->post_create.cmds[0].shell, "npm start");
	assert_string_equal(spec->post_create.cmds[1].name, "db");
	assert_argv(spec->post_create.cmds[1].argv, "pg_ctl", "start", NULL);

	assert_int_equal(spec->post_start.kind, SPEC_HOOK_SHELL);
	assert_string_equal(spec->post_start.cmds[0].shell,
			    "echo \"/* hi */\"");

	assert_int_equal(spec->n_container_env, 2);
	assert_string_equal(spec->container_env[0].key, "NODE_ENV");
	assert_string_equal(spec->container_env[0].value, "development");
	assert_string_equal(spec->container_env[1].key, "EMPTY");
	assert_string_equal(spec->container_env[1].value, "");
	assert_int_equal(spec->n_remote_env, 1);
	assert_string_equal(spec->remote_env[0].key, "PATH");
	assert_string_equal(spec->remote_env[0].value,
			    "${containerEnv:PATH}:/opt/bin");

	assert_int_equal(spec->n_forward_ports, 3);
	assert_int_equal(spec->forward_ports[0], 3000);
	assert_int_equal(spec->forward_ports[1], 8080);
	assert_int_equal(spec->forward_ports[2], 5432);

	assert_int_equal(spec->n_services, 2);
	struct spec_service *pg = &spec->services[0];
	assert_string_equal(pg->name, "postgres");
	assert_string_equal(pg->start.shell, "pg_ctl start");
	assert_null(pg->start.name);
	assert_argv(pg->ready.argv, "pg_isready", "-q", NULL);
	assert_string_equal(pg->stop.shell, "pg_ctl stop");
	struct spec_service *redis = &spec->services[1];
	assert_string_equal(redis->name, "redis.cache");
	assert_argv(redis->start.argv, "redis-server", NULL, NULL);
	assert_null(redis->ready.shell);
	assert_null(redis->ready.argv);
	assert_null(redis->stop.shell);
	assert_null(redis->stop.argv);

	assert_int_equal(spec->n_verify, 2);
	assert_string_equal(spec->verify[0].shell, "npm test");
	assert_argv(spec->verify[1].argv, "make", "check", NULL);

	assert_int_equal(spec->n_egress, 3);
	assert_string_equal(spec->egress[0], "registry.npmjs.org");
	assert_string_equal(spec->egress[1], "*.github.com");
	assert_string_equal(spec->egress[2], "proxy.example.com:8443");
	assert_null(spec->egress[3]);

	assert_int_equal(spec->limits.millicpus, 1500);
	assert_int_equal(spec->limits.memory_bytes, 2ULL << 30);
	assert_int_equal(spec->limits.disk_bytes, 1048576);
	assert_int_equal(spec->limits.pids, 512);
	assert_int_equal(spec->limits.lifetime_ms, 2 * 3600 * 1000);
	assert_int_equal(spec->limits.idle_ms, 600 * 1000);
	assert_int_equal(spec->refresh_ms, 3600 * 1000);

	assert_int_equal(spec->n_secrets, 2);
	assert_string_equal(spec->secrets[0], "NPM_TOKEN");
	assert_string_equal(spec->secrets[1], "_X1");
	assert_null(spec->secrets[2]);
	assert_int_equal(spec->n_lockfiles, 2);
	assert_string_equal(spec->lockfiles[0], "tools/deps.lock");
	assert_string_equal(spec->lockfiles[1], "web/package-lock.json");
	assert_null(spec->lockfiles[2]);
	spec_free(spec);
}

static void test_unknown_keys_are_kept_in_raw(void **state)
{
	(void)state;
	struct spec *spec = parse(full_example);
	assert_non_null(spec->raw);
	assert_string_equal(
	    json_string_value(json_object_get(spec->raw, "name")), "demo");
	json_t *cust = json_object_get(spec->raw, "customizations");
	json_t *ext =
	    json_object_get(json_object_get(cust, "vscode"), "extensions");
	assert_int_equal(json_array_size(ext), 1);
	json_t *future =
	    json_object_get(json_object_get(cust, "warren"), "future");
	assert_true(json_is_true(json_object_get(future, "anything")));
	spec_free(spec);
}

static void test_empty_object_gives_defaults(void **state)
{
	(void)state;
	struct spec *spec = parse("{}");
	assert_string_equal(spec->hash, HASH_OF_EMPTY_OBJECT);
	struct spec_hook *hooks[] = {&spec->on_create, &spec->update_content,
				     &spec->post_create, &spec->post_start};
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(hooks[i]->kind, SPEC_HOOK_NONE);
		assert_int_equal(hooks[i]->n_cmds, 0);
		assert_null(hooks[i]->cmds);
	}
	assert_int_equal(spec->n_container_env + spec->n_remote_env +
			     spec->n_forward_ports + spec->n_services +
			     spec->n_verify + spec->n_egress + spec->n_secrets +
			     spec->n_lockfiles,
			 0);
	assert_null(spec->verify);
	assert_null(spec->egress);
	assert_int_equal(spec->limits.millicpus + spec->limits.memory_bytes +
			     spec->limits.pids + spec->limits.disk_bytes +
			     spec->limits.lifetime_ms + spec->limits.idle_ms,
			 0);
	assert_int_equal(spec->refresh_ms, 30 * 60 * 1000);
	spec_free(spec);
	/* customizations without warren, warren without keys */
	spec = parse("{\"customizations\": {\"vscode\": {}}}");
	assert_int_equal(spec->refresh_ms, 30 * 60 * 1000);
	spec_free(spec);
	spec = parse("{\"customizations\": {\"warren\": {}}}");
	assert_int_equal(spec->n_services, 0);
	spec_free(spec);
}

static void test_null_is_absent(void **state)
{
	(void)state;
	struct spec *spec =
	    parse("{\"postCreateCommand\": null, \"containerEnv\": null,"
		  " \"customizations\": {\"warren\": {\"limits\": "
		  "{\"cpus\": null}, \"refresh\": null, \"services\": "
		  "[{\"name\": \"a\", \"start\": \"x\", \"ready\": null}]}}}");
	assert_int_equal(spec->post_create.kind, SPEC_HOOK_NONE);
	assert_int_equal(spec->n_container_env, 0);
	assert_int_equal(spec->limits.millicpus, 0);
	assert_int_equal(spec->refresh_ms, 30 * 60 * 1000);
	assert_null(spec->services[0].ready.shell);
	assert_null(spec->services[0].ready.argv);
	spec_free(spec);
}

static void test_hash_is_sha256_of_the_bytes(void **state)
{
	(void)state;
	struct spec *a = parse("{}");
	struct spec *b = parse("{} ");
	struct spec *c = parse("{} ");
	assert_string_equal(a->hash, HASH_OF_EMPTY_OBJECT);
	assert_string_not_equal(a->hash, b->hash);
	assert_string_equal(b->hash, c->hash);
	spec_free(a);
	spec_free(b);
	spec_free(c);
	struct spec *spec = NULL;
	assert_int_equal(spec_parse("{}", 2, NULL, &spec, NULL), 0);
	assert_null(spec->source);
	spec_free(spec);
}

static void test_top_level_must_be_an_object(void **state)
{
	(void)state;
	expect_error("[]", "expected an object at the top level, got array");
	expect_error_prefix("\"x\"", "line 1, column ");
	expect_error_prefix("{} {}", "line 1, column ");
}

static void test_duplicate_keys_are_refused(void **state)
{
	(void)state;
	expect_error_prefix("{\"postStartCommand\": \"a\",\n"
			    " \"postStartCommand\": \"b\"}",
			    "line 2, column ");
}

/* ---- hooks ------------------------------------------------------------ */

static void test_hook_forms(void **state)
{
	(void)state;
	struct spec *spec =
	    parse("{\"onCreateCommand\": [\"a\"],"
		  " \"updateContentCommand\": {},"
		  " \"postCreateCommand\": {\"one\": [\"x\", \"y\", \"z\"]},"
		  " \"postStartCommand\": \"\"}");
	assert_int_equal(spec->on_create.kind, SPEC_HOOK_ARGV);
	assert_argv(spec->on_create.cmds[0].argv, "a", NULL, NULL);
	assert_int_equal(spec->update_content.kind, SPEC_HOOK_NONE);
	assert_int_equal(spec->update_content.n_cmds, 0);
	assert_int_equal(spec->post_create.kind, SPEC_HOOK_PARALLEL);
	assert_int_equal(spec->post_create.n_cmds, 1);
	assert_string_equal(spec->post_create.cmds[0].name, "one");
	assert_argv(spec->post_create.cmds[0].argv, "x", "y", "z");
	assert_int_equal(spec->post_start.kind, SPEC_HOOK_SHELL);
	assert_string_equal(spec->post_start.cmds[0].shell, "");
	spec_free(spec);
}

static void test_hook_type_errors(void **state)
{
	(void)state;
	expect_error("{\"onCreateCommand\": 1}",
		     "onCreateCommand: expected a string, an array of strings "
		     "or an object, got number");
	expect_error("{\"updateContentCommand\": true}",
		     "updateContentCommand: expected a string, an array of "
		     "strings or an object, got boolean");
	expect_error("{\"postCreateCommand\": []}",
		     "postCreateCommand: expected a non-empty array");
	expect_error("{\"postStartCommand\": [\"a\", 2]}",
		     "postStartCommand[1]: expected a string, got number");
	expect_error("{\"postStartCommand\": [[\"a\"]]}",
		     "postStartCommand[0]: expected a string, got array");
	expect_error("{\"postCreateCommand\": {\"ok\": \"x\", \"build\": {}}}",
		     "postCreateCommand.build: expected a string or an array "
		     "of strings, got object");
	expect_error("{\"postCreateCommand\": {\"b\": [\"x\", null]}}",
		     "postCreateCommand.b[1]: expected a string, got null");
	expect_error("{\"postCreateCommand\": {\"b\": []}}",
		     "postCreateCommand.b: expected a non-empty array");
	/* control characters in a key are not printed as they are */
	expect_error("{\"onCreateCommand\": {\"a\\nb\": 1}}",
		     "onCreateCommand.a?b: expected a string or an array of "
		     "strings, got number");
}

static void test_hook_caps(void **state)
{
	(void)state;
	char *ok = repeat("{\"postCreateCommand\": {", "\"c%zu\": \"x\"",
			  SPEC_MAX_COMMANDS, ",", "}}");
	struct spec *spec = parse(ok);
	assert_int_equal(spec->post_create.n_cmds, SPEC_MAX_COMMANDS);
	assert_string_equal(spec->post_create.cmds[255].name, "c255");
	spec_free(spec);
	free(ok);
	char *over = repeat("{\"postCreateCommand\": {", "\"c%zu\": \"x\"",
			    SPEC_MAX_COMMANDS + 1, ",", "}}");
	expect_error(over, "postCreateCommand: more than 256 commands");
	free(over);
	char *argv = repeat("{\"onCreateCommand\": [", "\"a%zu\"",
			    SPEC_MAX_ARGV + 1, ",", "]}");
	expect_error(argv, "onCreateCommand: more than 4096 arguments");
	free(argv);
}

static void test_string_length_cap(void **state)
{
	(void)state;
	size_t n = SPEC_MAX_STRING;
	char *text = malloc(n + 64);
	assert_non_null(text);
	int head = sprintf(text, "{\"postStartCommand\": \"");
	memset(text + head, 'x', n);
	strcpy(text + head + n, "\"}");
	struct spec *spec = parse(text);
	assert_int_equal(strlen(spec->post_start.cmds[0].shell), n);
	spec_free(spec);
	memset(text + head, 'x', n + 1);
	strcpy(text + head + n + 1, "\"}");
	expect_error(text, "postStartCommand: longer than 65536 bytes");
	/* the same for an object key */
	head = sprintf(text, "{\"containerEnv\": {\"");
	memset(text + head, 'K', n + 1);
	strcpy(text + head + n + 1, "\": \"v\"}}");
	struct spec *bad = NULL;
	struct wr_error *err = NULL;
	assert_int_equal(spec_parse(text, strlen(text), NULL, &bad, &err),
			 -EINVAL);
	assert_non_null(strstr(err->msg, ": longer than 65536 bytes"));
	assert_int_equal(strncmp(err->msg, "containerEnv.KKKK", 17), 0);
	wr_error_free(err);
	free(text);
}

static void test_file_size_cap(void **state)
{
	(void)state;
	size_t n = SPEC_MAX_FILE;
	char *text = malloc(n + 1);
	assert_non_null(text);
	memset(text, ' ', n);
	text[0] = '{';
	text[n - 1] = '}';
	struct spec *spec = parse_len(text, n);
	spec_free(spec);
	text[n - 1] = ' ';
	text[n] = '}';
	expect_error_len(text, n + 1, "larger than 1048576 bytes");
	free(text);
}

/* ---- environment and ports -------------------------------------------- */

static void test_env_errors_and_cap(void **state)
{
	(void)state;
	expect_error("{\"containerEnv\": []}",
		     "containerEnv: expected an object of strings, got array");
	expect_error("{\"remoteEnv\": {\"A\": \"1\", \"FOO\": 2}}",
		     "remoteEnv.FOO: expected a string, got number");
	expect_error("{\"containerEnv\": {\"FOO\": null}}",
		     "containerEnv.FOO: expected a string, got null");
	expect_error("{\"containerEnv\": {\"A=B\": \"x\"}}",
		     "containerEnv.A=B: a variable name must be non-empty and "
		     "without '='");
	expect_error("{\"containerEnv\": {\"\": \"x\"}}",
		     "containerEnv.: a variable name must be non-empty and "
		     "without '='");
	char *ok = repeat("{\"containerEnv\": {", "\"V%zu\": \"x\"",
			  SPEC_MAX_ENV, ",", "}}");
	struct spec *spec = parse(ok);
	assert_int_equal(spec->n_container_env, SPEC_MAX_ENV);
	assert_string_equal(spec->container_env[4095].key, "V4095");
	spec_free(spec);
	free(ok);
	char *over = repeat("{\"remoteEnv\": {", "\"V%zu\": \"x\"",
			    SPEC_MAX_ENV + 1, ",", "}}");
	expect_error(over, "remoteEnv: more than 4096 variables");
	free(over);
}

static void test_forward_ports(void **state)
{
	(void)state;
	struct spec *spec = parse("{\"forwardPorts\": [1, 65535, \"22\", "
				  "\"localhost:80\", \"a:b:9\"]}");
	assert_int_equal(spec->n_forward_ports, 5);
	int want[] = {1, 65535, 22, 80, 9};
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(spec->forward_ports[i], want[i]);
	spec_free(spec);
	expect_error("{\"forwardPorts\": 3000}",
		     "forwardPorts: expected an array, got number");
	expect_error("{\"forwardPorts\": [0]}",
		     "forwardPorts[0]: port 0 is out of range 1-65535");
	expect_error("{\"forwardPorts\": [80, 65536]}",
		     "forwardPorts[1]: port 65536 is out of range 1-65535");
	expect_error("{\"forwardPorts\": [-1]}",
		     "forwardPorts[0]: port -1 is out of range 1-65535");
	expect_error("{\"forwardPorts\": [80.5]}",
		     "forwardPorts[0]: expected an integer or a \"host:port\" "
		     "string, got number");
	expect_error("{\"forwardPorts\": [\"http\"]}",
		     "forwardPorts[0]: 'http' is not a port 1-65535 or "
		     "\"host:port\"");
	expect_error("{\"forwardPorts\": [\":80\"]}",
		     "forwardPorts[0]: ':80' is not a port 1-65535 or "
		     "\"host:port\"");
	expect_error("{\"forwardPorts\": [\"db:0\"]}",
		     "forwardPorts[0]: 'db:0' is not a port 1-65535 or "
		     "\"host:port\"");
	expect_error("{\"forwardPorts\": [\"db:\"]}",
		     "forwardPorts[0]: 'db:' is not a port 1-65535 or "
		     "\"host:port\"");
	char *over =
	    repeat("{\"forwardPorts\": [", "%zu", SPEC_MAX_LIST + 1, ",", "]}");
	over[strlen("{\"forwardPorts\": [")] = '1'; /* port 0 -> 1 */
	expect_error(over, "forwardPorts: more than 256 ports");
	free(over);
}

/* ---- customizations.warren -------------------------------------------- */

static void test_customizations_type_errors(void **state)
{
	(void)state;
	expect_error("{\"customizations\": []}",
		     "customizations: expected an object, got array");
	expect_error("{\"customizations\": {\"warren\": \"x\"}}",
		     "customizations.warren: expected an object, got string");
}

static void test_services_errors(void **state)
{
	(void)state;
	expect_error("{\"customizations\": {\"warren\": {\"services\": [\n"
		     "{\"name\": \"a\", \"start\": \"x\"},\n"
		     "{\"name\": \"b\", \"start\": 5}]}}}",
		     "customizations.warren.services[1].start: expected a "
		     "string or an array of strings, got number");
	expect_error("{\"customizations\": {\"warren\": {\"services\": {}}}}",
		     "customizations.warren.services: expected an array of "
		     "objects, got object");
	expect_error("{\"customizations\": {\"warren\": {\"services\": "
		     "[\"db\"]}}}",
		     "customizations.warren.services[0]: expected an object, "
		     "got string");
	expect_error("{\"customizations\": {\"warren\": {\"services\": "
		     "[{\"start\": \"x\"}]}}}",
		     "customizations.warren.services[0].name: required");
	expect_error("{\"customizations\": {\"warren\": {\"services\": "
		     "[{\"name\": \"db\"}]}}}",
		     "customizations.warren.services[0].start: required");
	expect_error("{\"customizations\": {\"warren\": {\"services\": "
		     "[{\"name\": 1, \"start\": \"x\"}]}}}",
		     "customizations.warren.services[0].name: expected a "
		     "string, got number");
	expect_error("{\"customizations\": {\"warren\": {\"services\": "
		     "[{\"name\": \"-db\", \"start\": \"x\"}]}}}",
		     "customizations.warren.services[0].name: '-db' is not a "
		     "valid service name (1-63 letters, digits, '_', '.', "
		     "'-', starting with a letter or digit)");
	expect_error("{\"customizations\": {\"warren\": {\"services\": "
		     "[{\"name\": \"db\", \"start\": \"x\", \"ready\": []}]}}}",
		     "customizations.warren.services[0].ready: expected a "
		     "non-empty array");
	expect_error("{\"customizations\": {\"warren\": {\"services\": "
		     "[{\"name\": \"db\", \"start\": \"x\", \"stop\": {}}]}}}",
		     "customizations.warren.services[0].stop: expected a "
		     "string or an array of strings, got object");
	expect_error("{\"customizations\": {\"warren\": {\"services\": "
		     "[{\"name\": \"db\", \"start\": \"x\"},"
		     " {\"name\": \"db\", \"start\": \"y\"}]}}}",
		     "customizations.warren.services[1].name: service 'db' is "
		     "declared twice");
	char *name64 =
	    repeat("{\"customizations\": {\"warren\": {\"services\": "
		   "[{\"start\": \"x\", \"name\": \"",
		   "a", 64, "", "\"}]}}}");
	expect_error_prefix(name64,
			    "customizations.warren.services[0].name: 'aaaa");
	free(name64);
	char *ok = repeat("{\"customizations\": {\"warren\": {\"services\": [",
			  "{\"name\": \"s%zu\", \"start\": \"x\"}",
			  SPEC_MAX_SERVICES, ",", "]}}}");
	struct spec *spec = parse(ok);
	assert_int_equal(spec->n_services, SPEC_MAX_SERVICES);
	spec_free(spec);
	free(ok);
	char *over =
	    repeat("{\"customizations\": {\"warren\": {\"services\": [",
		   "{\"name\": \"s%zu\", \"start\": \"x\"}",
		   SPEC_MAX_SERVICES + 1, ",", "]}}}");
	expect_error(over,
		     "customizations.warren.services: more than 64 services");
	free(over);
}

static struct spec *parse_verify(const char *value)
{
	char text[1024];
	snprintf(text, sizeof(text),
		 "{\"customizations\": {\"warren\": {\"verify\": %s}}}", value);
	return parse(text);
}

static void expect_verify_error(const char *value, const char *want)
{
	char text[1024];
	snprintf(text, sizeof(text),
		 "{\"customizations\": {\"warren\": {\"verify\": %s}}}", value);
	expect_error(text, want);
}

static void test_verify_forms(void **state)
{
	(void)state;
	struct spec *spec = parse_verify("\"make test\"");
	assert_int_equal(spec->n_verify, 1);
	assert_string_equal(spec->verify[0].shell, "make test");
	assert_null(spec->verify[0].argv);
	spec_free(spec);

	/* an array of strings is ONE argv command */
	spec = parse_verify("[\"make\", \"test\"]");
	assert_int_equal(spec->n_verify, 1);
	assert_argv(spec->verify[0].argv, "make", "test", NULL);
	spec_free(spec);

	/* with an array among its elements, it is several commands */
	spec = parse_verify("[[\"make\", \"lint\"], \"npm test\", [\"x\"]]");
	assert_int_equal(spec->n_verify, 3);
	assert_argv(spec->verify[0].argv, "make", "lint", NULL);
	assert_string_equal(spec->verify[1].shell, "npm test");
	assert_argv(spec->verify[2].argv, "x", NULL, NULL);
	spec_free(spec);

	spec = parse_verify("{\"unit\": \"make check\", \"lint\": [\"ruff\"]}");
	assert_int_equal(spec->n_verify, 2);
	assert_string_equal(spec->verify[0].name, "unit");
	assert_string_equal(spec->verify[0].shell, "make check");
	assert_string_equal(spec->verify[1].name, "lint");
	assert_argv(spec->verify[1].argv, "ruff", NULL, NULL);
	spec_free(spec);

	spec = parse_verify("{}");
	assert_int_equal(spec->n_verify, 0);
	assert_null(spec->verify);
	spec_free(spec);
}

static void test_verify_errors(void **state)
{
	(void)state;
	expect_verify_error("3", "customizations.warren.verify: expected a "
				 "string or an array of strings, got number");
	expect_verify_error("[]", "customizations.warren.verify: expected a "
				  "non-empty array");
	expect_verify_error("[\"a\", 1]", "customizations.warren.verify[1]: "
					  "expected a string, got number");
	expect_verify_error("[[\"a\"], 1]",
			    "customizations.warren.verify[1]: expected a "
			    "string or an array of strings, got number");
	expect_verify_error("[[\"a\"], {}]",
			    "customizations.warren.verify[1]: expected a "
			    "string or an array of strings, got object");
	expect_verify_error("[[\"a\"], []]", "customizations.warren.verify[1]: "
					     "expected a non-empty array");
	expect_verify_error("[[\"a\", false]]",
			    "customizations.warren.verify[0][1]: expected a "
			    "string, got boolean");
	expect_verify_error("{\"t\": 1}",
			    "customizations.warren.verify.t: expected a string "
			    "or an array of strings, got number");
	char *over = repeat("{\"customizations\": {\"warren\": {\"verify\": [",
			    "[\"c%zu\"]", SPEC_MAX_COMMANDS + 1, ",", "]}}}");
	expect_error(over, "customizations.warren.verify: more than 256 "
			   "commands");
	free(over);
}

static void expect_warren_error(const char *key, const char *value,
				const char *want)
{
	char text[2048];
	snprintf(text, sizeof(text),
		 "{\"customizations\": {\"warren\": {\"%s\": %s}}}", key,
		 value);
	expect_error(text, want);
}

static struct spec *parse_warren(const char *key, const char *value)
{
	char text[2048];
	snprintf(text, sizeof(text),
		 "{\"customizations\": {\"warren\": {\"%s\": %s}}}", key,
		 value);
	return parse(text);
}

static void test_egress(void **state)
{
	(void)state;
	struct spec *spec = parse_warren(
	    "egress", "[\"a.b\", \"*.c.d\", \"e:1\", \"*.f:65535\", "
		      "\"localhost\", \"10.0.0.1\", \"x-y.Z9\"]");
	assert_int_equal(spec->n_egress, 7);
	assert_string_equal(spec->egress[3], "*.f:65535");
	assert_null(spec->egress[7]);
	spec_free(spec);
	expect_warren_error("egress", "\"a.com\"",
			    "customizations.warren.egress: expected an array "
			    "of strings, got string");
	expect_warren_error("egress", "[1]",
			    "customizations.warren.egress[0]: expected a "
			    "string, got number");
	static const char *const bad[] = {
	    "",	      "http://a.com", "a..b", "a.",	   ".a",  "*.",
	    "*",      "a.*.com",      "a:0",  "a:65536",   "a:",  "a:b",
	    "-a.com", "a-.com",	      "a b",  "[::1]:443", "a/b", "*.*.a",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char value[128], want[512];
		snprintf(value, sizeof(value), "[\"ok.com\", \"%s\"]", bad[i]);
		snprintf(want, sizeof(want),
			 "customizations.warren.egress[1]: '%s' is not a "
			 "host name (\"example.com\", \"*.example.com\", "
			 "\"host:443\")",
			 bad[i]);
		expect_warren_error("egress", value, want);
	}
	/* the build's extra hosts: the same entries, their own key */
	spec = parse_warren("buildEgress",
			    "[\"registry.npmjs.org\", \"*.pypi.org:443\"]");
	assert_int_equal(spec->n_build_egress, 2);
	assert_string_equal(spec->build_egress[1], "*.pypi.org:443");
	assert_null(spec->build_egress[2]);
	assert_int_equal(spec->n_egress, 0);
	spec_free(spec);
	expect_warren_error("buildEgress", "[\"ok.com\", \"a b\"]",
			    "customizations.warren.buildEgress[1]: 'a b' is "
			    "not a host name (\"example.com\", "
			    "\"*.example.com\", \"host:443\")");
	expect_warren_error("buildEgress", "{}",
			    "customizations.warren.buildEgress: expected an "
			    "array of strings, got object");
	/* a value is shown cut and without control characters */
	expect_warren_error("egress", "[\"a\\nFAKE LOG LINE\"]",
			    "customizations.warren.egress[0]: 'a?FAKE LOG "
			    "LINE' is not a host name (\"example.com\", "
			    "\"*.example.com\", \"host:443\")");
	char *long_host = repeat("{\"customizations\": {\"warren\": "
				 "{\"egress\": [\"",
				 "b", 100, "", "_\"]}}}");
	expect_error_prefix(long_host,
			    "customizations.warren.egress[0]: 'bbbbbbbbbb");
	struct spec *none = NULL;
	struct wr_error *err = NULL;
	assert_int_equal(
	    spec_parse(long_host, strlen(long_host), NULL, &none, &err),
	    -EINVAL);
	assert_non_null(strstr(err->msg, "bbbb...' is not a host name"));
	wr_error_free(err);
	free(long_host);
	char label63[80], label64[80];
	memset(label63, 'a', 63);
	label63[63] = '\0';
	memset(label64, 'a', 64);
	label64[64] = '\0';
	char value[256];
	snprintf(value, sizeof(value), "[\"%s.com\"]", label63);
	spec = parse_warren("egress", value);
	spec_free(spec);
	snprintf(value, sizeof(value), "[\"%s.com\"]", label64);
	char text[512];
	snprintf(text, sizeof(text),
		 "{\"customizations\": {\"warren\": {\"egress\": %s}}}", value);
	assert_int_equal(spec_parse(text, strlen(text), NULL, &none, NULL),
			 -EINVAL);
	char *over = repeat("{\"customizations\": {\"warren\": {\"egress\": [",
			    "\"h%zu.com\"", SPEC_MAX_LIST + 1, ",", "]}}}");
	expect_error(over, "customizations.warren.egress: more than 256 hosts");
	free(over);
}

static void test_limits(void **state)
{
	(void)state;
	struct spec *spec = parse_warren(
	    "limits", "{\"cpus\": 2, \"memory\": 1073741824, \"disk\": "
		      "\"10GiB\", \"pids\": 1, \"lifetime\": 30, \"idle\": "
		      "\"1h30m\"}");
	assert_int_equal(spec->limits.millicpus, 2000);
	assert_int_equal(spec->limits.memory_bytes, 1ULL << 30);
	assert_int_equal(spec->limits.disk_bytes, 10ULL << 30);
	assert_int_equal(spec->limits.pids, 1);
	assert_int_equal(spec->limits.lifetime_ms, 30000);
	assert_int_equal(spec->limits.idle_ms, 90 * 60 * 1000);
	spec_free(spec);
	spec = parse_warren("limits", "{\"cpus\": 0.25}");
	assert_int_equal(spec->limits.millicpus, 250);
	spec_free(spec);
	spec = parse_warren("limits", "{\"cpus\": 1024, \"pids\": 4194304}");
	assert_int_equal(spec->limits.millicpus, 1024000);
	assert_int_equal(spec->limits.pids, 4194304);
	spec_free(spec);
	/* unknown limits are ignored, like every unknown key */
	spec = parse_warren("limits", "{\"gpus\": 8}");
	spec_free(spec);
}

static void test_limits_errors(void **state)
{
	(void)state;
	static const struct {
		const char *value;
		const char *want; /* after "customizations.warren.limits" */
	} cases[] = {
	    {"[]", ": expected an object, got array"},
	    {"{\"cpus\": true}",
	     ".cpus: expected a number or a string like \"0.5\", got boolean"},
	    {"{\"cpus\": 0}", ".cpus: must be between 0.001 and 1024"},
	    {"{\"cpus\": -1}", ".cpus: must be between 0.001 and 1024"},
	    {"{\"cpus\": 1025}", ".cpus: must be between 0.001 and 1024"},
	    {"{\"cpus\": 0.0001}", ".cpus: must be between 0.001 and 1024"},
	    {"{\"cpus\": 1e300}", ".cpus: must be between 0.001 and 1024"},
	    {"{\"cpus\": \"2000\"}", ".cpus: must be between 0.001 and 1024"},
	    {"{\"cpus\": \"two\"}", ".cpus: 'two' is not a number of CPUs"},
	    {"{\"memory\": \"2X\"}",
	     ".memory: '2X' is not a size (\"512M\", \"2G\")"},
	    {"{\"memory\": 0}", ".memory: must be positive"},
	    {"{\"memory\": \"0\"}", ".memory: must be positive"},
	    {"{\"memory\": -5}", ".memory: must be positive"},
	    {"{\"memory\": 1.5}",
	     ".memory: expected a size (\"2G\") or a number of bytes, got "
	     "number"},
	    {"{\"disk\": \"99999999999T\"}", ".disk: '99999999999T' is too "
					     "large"},
	    {"{\"disk\": [1]}", ".disk: expected a size (\"2G\") or a number "
				"of bytes, got array"},
	    {"{\"pids\": \"100\"}", ".pids: expected an integer, got string"},
	    {"{\"pids\": 0}", ".pids: must be between 1 and 4194304"},
	    {"{\"pids\": 4194305}", ".pids: must be between 1 and 4194304"},
	    {"{\"lifetime\": \"soon\"}",
	     ".lifetime: 'soon' is not a duration (\"90s\", \"30m\", "
	     "\"1h30m\")"},
	    {"{\"lifetime\": 0}", ".lifetime: must be positive"},
	    {"{\"lifetime\": \"0s\"}", ".lifetime: must be positive"},
	    {"{\"lifetime\": 9223372036854775807}", ".lifetime: too large"},
	    {"{\"idle\": {}}", ".idle: expected a duration (\"30m\") or a "
			       "number of seconds, got object"},
	    {"{\"idle\": \"999999999999999999d\"}",
	     ".idle: '999999999999999999d' is too large"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[512];
		snprintf(want, sizeof(want), "customizations.warren.limits%s",
			 cases[i].want);
		expect_warren_error("limits", cases[i].value, want);
	}
}

static void test_refresh(void **state)
{
	(void)state;
	struct spec *spec = parse_warren("refresh", "\"15m\"");
	assert_int_equal(spec->refresh_ms, 15 * 60 * 1000);
	spec_free(spec);
	spec = parse_warren("refresh", "60");
	assert_int_equal(spec->refresh_ms, 60 * 1000);
	spec_free(spec);
	expect_warren_error("refresh", "59",
			    "customizations.warren.refresh: at least one "
			    "minute");
	expect_warren_error("refresh", "\"30s\"",
			    "customizations.warren.refresh: at least one "
			    "minute");
	expect_warren_error("refresh", "\"daily\"",
			    "customizations.warren.refresh: 'daily' is not a "
			    "duration (\"90s\", \"30m\", \"1h30m\")");
	expect_warren_error("refresh", "[]",
			    "customizations.warren.refresh: expected a "
			    "duration (\"30m\") or a number of seconds, got "
			    "array");
}

static void test_secrets(void **state)
{
	(void)state;
	struct spec *spec =
	    parse_warren("secrets", "[\"A\", \"_\", \"AWS_SECRET_KEY_2\"]");
	assert_int_equal(spec->n_secrets, 3);
	assert_string_equal(spec->secrets[2], "AWS_SECRET_KEY_2");
	spec_free(spec);
	static const char *const bad[] = {"",	 "a",	"Abc", "1A",
					  "A-B", "A B", "A.B"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char value[64], want[256];
		snprintf(value, sizeof(value), "[\"%s\"]", bad[i]);
		snprintf(want, sizeof(want),
			 "customizations.warren.secrets[0]: '%s' is not a "
			 "secret name (A-Z, 0-9 and '_', not starting with a "
			 "digit)",
			 bad[i]);
		expect_warren_error("secrets", value, want);
	}
	expect_warren_error("secrets", "[\"A\", \"B\", \"A\"]",
			    "customizations.warren.secrets[2]: 'A' is listed "
			    "twice");
	expect_warren_error("secrets", "{\"A\": \"x\"}",
			    "customizations.warren.secrets: expected an array "
			    "of strings, got object");
}

static void test_spec_lockfiles_validation(void **state)
{
	(void)state;
	struct spec *spec = parse_warren(
	    "lockfiles", "[\"a\", \"b/c.lock\", \".hidden/x\", \"..x/y\"]");
	assert_int_equal(spec->n_lockfiles, 4);
	spec_free(spec);
	static const char *const bad[] = {
	    "",	     "/etc/passwd", "../x", "a/../../x", "a/..", "./a",
	    "a/./b", "a//b",	    "a/",   ".",	 "..",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char value[64], want[256];
		snprintf(value, sizeof(value), "[\"%s\"]", bad[i]);
		snprintf(want, sizeof(want),
			 "customizations.warren.lockfiles[0]: '%s' must be a "
			 "relative path inside the repository (no leading "
			 "'/', no empty, '.' or '..' component)",
			 bad[i]);
		expect_warren_error("lockfiles", value, want);
	}
	expect_warren_error("lockfiles", "[7]",
			    "customizations.warren.lockfiles[0]: expected a "
			    "string, got number");
}

/* ---- spec_load -------------------------------------------------------- */

static struct spec *load_ok(void)
{
	struct spec *spec = NULL;
	struct wr_error *err = NULL;
	int r = spec_load(repo, &spec, &err);
	if (r != 0)
		fail_msg("spec_load: %d %s", r, err ? err->msg : "");
	assert_non_null(spec);
	return spec;
}

static void expect_load_error(int errnum, const char *want)
{
	struct spec *spec = NULL;
	struct wr_error *err = NULL;
	int r = spec_load(repo, &spec, &err);
	if (r >= 0)
		fail_msg("spec_load succeeded; want \"%s\"", want);
	assert_null(spec);
	assert_non_null(err);
	assert_int_equal(r, -errnum);
	if (strncmp(err->msg, want, strlen(want)) != 0)
		fail_msg("message \"%s\"\n   want \"%s...\"", err->msg, want);
	assert_true(err->bad_input);
	wr_error_free(err);
}

static void test_load_defaults_without_a_file(void **state)
{
	(void)state;
	struct spec *spec = load_ok();
	assert_null(spec->source);
	assert_string_equal(spec->hash, SPEC_DEFAULTS_HASH);
	assert_int_equal(spec->refresh_ms, 30 * 60 * 1000);
	assert_true(json_is_object(spec->raw));
	assert_int_equal(json_object_size(spec->raw), 0);
	assert_int_equal(spec->post_start.kind, SPEC_HOOK_NONE);
	spec_free(spec);
	/* an empty .devcontainer directory is no spec either */
	assert_int_equal(mkdir(R(".devcontainer"), 0755), 0);
	spec = load_ok();
	assert_null(spec->source);
	spec_free(spec);
	struct spec *def = NULL;
	assert_int_equal(spec_defaults(&def, NULL), 0);
	assert_string_equal(def->hash, SPEC_DEFAULTS_HASH);
	spec_free(def);
}

static void test_load_warren_json_fallback(void **state)
{
	(void)state;
	write_text("warren.json", "{\"postStartCommand\": \"from warren\"}");
	struct spec *spec = load_ok();
	assert_string_equal(spec->source, "warren.json");
	assert_string_equal(spec->post_start.cmds[0].shell, "from warren");
	spec_free(spec);
	/* .devcontainer as a plain file is no devcontainer.json */
	write_text(".devcontainer", "not a directory");
	spec = load_ok();
	assert_string_equal(spec->source, "warren.json");
	spec_free(spec);
}

static void test_load_devcontainer_takes_precedence(void **state)
{
	(void)state;
	write_text("warren.json", "{\"postStartCommand\": \"from warren\"}");
	assert_int_equal(mkdir(R(".devcontainer"), 0755), 0);
	write_file(R(".devcontainer/devcontainer.json"), full_example,
		   strlen(full_example));
	struct spec *spec = load_ok();
	assert_string_equal(spec->source, ".devcontainer/devcontainer.json");
	assert_string_equal(spec->post_start.cmds[0].shell,
			    "echo \"/* hi */\"");
	struct spec *direct = parse(full_example);
	assert_string_equal(spec->hash, direct->hash);
	spec_free(direct);
	spec_free(spec);
	/* a broken devcontainer.json is an error, not a reason to fall back */
	write_text(".devcontainer/devcontainer.json",
		   "{\n  \"postStartCommand\": 1\n}");
	expect_load_error(EINVAL, ".devcontainer/devcontainer.json: "
				  "postStartCommand: expected a string, an "
				  "array of strings or an object, got number");
	write_text(".devcontainer/devcontainer.json", "{\n\n  /* open");
	expect_load_error(EINVAL, ".devcontainer/devcontainer.json: line 3: "
				  "unterminated comment");
	write_text(".devcontainer/devcontainer.json", "{\n\"a\": 1,,\n}");
	expect_load_error(
	    EINVAL, ".devcontainer/devcontainer.json: line 2, column 8: ");
}

static void test_load_symlinks(void **state)
{
	(void)state;
	/* a symlink within the repository is followed */
	assert_int_equal(mkdir(R(".devcontainer"), 0755), 0);
	assert_int_equal(mkdir(R("config"), 0755), 0);
	write_text("config/env.json", "{\"postStartCommand\": \"linked\"}");
	assert_int_equal(
	    symlink("../config/env.json", R(".devcontainer/devcontainer.json")),
	    0);
	struct spec *spec = load_ok();
	assert_string_equal(spec->post_start.cmds[0].shell, "linked");
	spec_free(spec);
	assert_int_equal(unlink(R(".devcontainer/devcontainer.json")), 0);

	/* out of the repository: relative, absolute, or through a
	 * symlinked directory */
	char outside[PATH_MAX];
	snprintf(outside, sizeof(outside), "%s/outside-%d.json", root,
		 test_seq);
	write_file(outside, "{}", 2);
	assert_int_equal(symlink("../../outside.json", R("warren.json")), 0);
	expect_load_error(EINVAL, "warren.json: resolves outside the "
				  "repository (symlink or '..')");
	assert_int_equal(unlink(R("warren.json")), 0);
	assert_int_equal(symlink(outside, R("warren.json")), 0);
	expect_load_error(EINVAL, "warren.json: resolves outside the "
				  "repository");
	assert_int_equal(unlink(R("warren.json")), 0);
	assert_int_equal(rmdir(R(".devcontainer")), 0);
	assert_int_equal(symlink(root, R(".devcontainer")), 0);
	expect_load_error(EINVAL, ".devcontainer/devcontainer.json: resolves "
				  "outside the repository");
	assert_int_equal(unlink(R(".devcontainer")), 0);

	/* a dangling symlink is an error, not "no spec" */
	assert_int_equal(symlink("missing.json", R("warren.json")), 0);
	expect_load_error(EINVAL, "warren.json: symlink to a missing file");
}

static void test_load_refuses_special_and_large_files(void **state)
{
	(void)state;
	/* a FIFO must neither hang the load nor be read */
	assert_int_equal(mkfifo(R("warren.json"), 0644), 0);
	expect_load_error(EINVAL, "warren.json: not a regular file");
	assert_int_equal(unlink(R("warren.json")), 0);
	assert_int_equal(mkdir(R("warren.json"), 0755), 0);
	expect_load_error(EINVAL, "warren.json: not a regular file");
	assert_int_equal(rmdir(R("warren.json")), 0);

	int fd = open(R("warren.json"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "{", 1), 1);
	assert_int_equal(ftruncate(fd, SPEC_MAX_FILE + 1), 0);
	close(fd);
	expect_load_error(EINVAL, "warren.json: larger than 1048576 bytes");
}

static void test_load_missing_repository(void **state)
{
	(void)state;
	struct spec *spec = NULL;
	struct wr_error *err = NULL;
	assert_int_equal(spec_load(R("nope"), &spec, &err), -ENOENT);
	assert_null(spec);
	assert_non_null(strstr(err->msg, "nope"));
	wr_error_free(err);
}

/* ---- spec_lockfiles --------------------------------------------------- */

static void test_lockfiles_discovery(void **state)
{
	(void)state;
	static const char *const present[] = {
	    "package-lock.json",    "requirements.txt",
	    "requirements-dev.txt", "go.sum",
	    "Cargo.lock",	    "mix.lock",
	    "random.txt",	    "requirements.in",
	    "yarn.lock.bak",
	};
	for (size_t i = 0; i < sizeof(present) / sizeof(present[0]); i++)
		write_text(present[i], "x");
	/* a symlink and a directory with well-known names are left out */
	assert_int_equal(symlink("package-lock.json", R("yarn.lock")), 0);
	assert_int_equal(mkdir(R("poetry.lock"), 0755), 0);
	assert_int_equal(mkdir(R("sub"), 0755), 0);
	write_text("sub/Gemfile.lock", "x"); /* not at the root */

	struct spec *spec = parse_warren(
	    "lockfiles", "[\"tools/b.lock\", \"go.sum\", \"a/missing\"]");
	char **files = spec_lockfiles(spec, repo);
	assert_non_null(files);
	static const char *const want[] = {
	    "Cargo.lock",	"a/missing",	     "go.sum",
	    "mix.lock",		"package-lock.json", "requirements-dev.txt",
	    "requirements.txt", "tools/b.lock",
	};
	size_t n = 0;
	while (files[n])
		n++;
	if (n != sizeof(want) / sizeof(want[0])) {
		for (size_t i = 0; i < n; i++)
			print_message("got %s\n", files[i]);
		fail_msg("%zu lockfiles, want %zu", n,
			 sizeof(want) / sizeof(want[0]));
	}
	for (size_t i = 0; i < n; i++)
		assert_string_equal(files[i], want[i]);
	spec_strv_free(files);
	spec_free(spec);

	/* without a spec: only what is at the root */
	files = spec_lockfiles(NULL, repo);
	assert_non_null(files);
	assert_string_equal(files[0], "Cargo.lock");
	assert_string_equal(files[1], "go.sum");
	spec_strv_free(files);
}

static void test_lockfiles_empty_and_missing(void **state)
{
	(void)state;
	struct spec *spec = parse("{}");
	char **files = spec_lockfiles(spec, repo);
	assert_non_null(files);
	assert_null(files[0]);
	spec_strv_free(files);
	spec_free(spec);
	errno = 0;
	assert_null(spec_lockfiles(NULL, R("nope")));
	assert_int_equal(errno, ENOENT);
	spec_strv_free(NULL);
}

static void test_lockfiles_from_names(void **state)
{
	(void)state;
	static const char *const names[] = {
	    "README.md",
	    "yarn.lock",
	    "requirements-test.txt",
	    "pnpm-lock.yaml",
	    "Pipfile.lock",
	    "composer.lock",
	    "Gemfile.lock",
	    "src",
	    "requirements.txt.orig",
	    NULL,
	};
	struct spec *spec =
	    parse_warren("lockfiles", "[\"yarn.lock\", \"deps/x.lock\"]");
	char **files = spec_lockfiles_in(spec, names);
	assert_non_null(files);
	static const char *const want[] = {
	    "Gemfile.lock",   "Pipfile.lock",
	    "composer.lock",  "deps/x.lock",
	    "pnpm-lock.yaml", "requirements-test.txt",
	    "yarn.lock",      NULL,
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (!want[i]) {
			assert_null(files[i]);
			break;
		}
		assert_non_null(files[i]);
		assert_string_equal(files[i], want[i]);
	}
	spec_strv_free(files);
	/* nothing at all: an empty list, not NULL */
	files = spec_lockfiles_in(NULL, NULL);
	assert_non_null(files);
	assert_null(files[0]);
	spec_strv_free(files);
	for (unsigned long n = 1; n < 100; n++) {
		wr_alloc_fail_at(n);
		errno = 0;
		files = spec_lockfiles_in(spec, names);
		int saved = errno;
		wr_alloc_fail_at(0);
		if (files) {
			assert_string_equal(files[6], "yarn.lock");
			spec_strv_free(files);
			break;
		}
		assert_int_equal(saved, ENOMEM);
	}
	spec_free(spec);
}

/* ---- allocation failure ----------------------------------------------- */

/* During these tests jansson allocates through the same wrappers, so its
 * allocations fail in turn too. jansson reports some of its own allocation
 * failures as syntax errors; where the failed allocation was jansson's, any
 * error will do (what matters then is that nothing leaks or crashes). */
static bool jansson_alloc_failed;

static void *jansson_malloc(size_t size)
{
	void *p = wr_malloc(size);
	if (!p)
		jansson_alloc_failed = true;
	return p;
}

static void use_wr_alloc_in_jansson(bool on)
{
	jansson_alloc_failed = false;
	if (on)
		json_set_alloc_funcs(jansson_malloc, free);
	else
		json_set_alloc_funcs(malloc, free);
}

/* After a success: true (go on) if an allocation of jansson's failed and
 * jansson coped, false when the failure point lies past the last
 * allocation. */
static bool finished_or_tolerated(void)
{
	bool tolerated = jansson_alloc_failed;
	jansson_alloc_failed = false;
	return tolerated;
}

static void check_alloc_failure(unsigned long n, int r, struct wr_error *err)
{
	if (!err)
		fail_msg("allocation %lu failed: r=%d without an error", n, r);
	if (jansson_alloc_failed) {
		assert_true(r < 0);
	} else if (r != -ENOMEM || err->errnum != ENOMEM || err->bad_input) {
		fail_msg("allocation %lu failed: r=%d, error %s", n, r,
			 err->msg);
	}
	jansson_alloc_failed = false;
}

static void test_parse_survives_allocation_failure(void **state)
{
	(void)state;
	use_wr_alloc_in_jansson(true);
	unsigned long n;
	for (n = 1; n < 100000; n++) {
		struct spec *spec = NULL;
		struct wr_error *err = NULL;
		wr_alloc_fail_at(n);
		int r = spec_parse(full_example, strlen(full_example),
				   "test.json", &spec, &err);
		wr_alloc_fail_at(0);
		if (r == 0) {
			assert_null(err);
			assert_int_equal(spec->n_services, 2);
			spec_free(spec);
			if (!finished_or_tolerated())
				break;
			continue;
		}
		check_alloc_failure(n, r, err);
		assert_null(spec);
		wr_error_free(err);
	}
	use_wr_alloc_in_jansson(false);
	print_message("spec_parse: failed each of %lu allocations\n", n - 1);
	assert_true(n > 100);
}

static void test_load_and_lockfiles_survive_allocation_failure(void **state)
{
	(void)state;
	assert_int_equal(mkdir(R(".devcontainer"), 0755), 0);
	write_file(R(".devcontainer/devcontainer.json"), full_example,
		   strlen(full_example));
	write_text("go.sum", "x");
	write_text("requirements.txt", "x");
	use_wr_alloc_in_jansson(true);
	unsigned long n;
	for (n = 1; n < 100000; n++) {
		struct spec *spec = NULL;
		struct wr_error *err = NULL;
		wr_alloc_fail_at(n);
		int r = spec_load(repo, &spec, &err);
		wr_alloc_fail_at(0);
		if (r == 0) {
			spec_free(spec);
			if (!finished_or_tolerated())
				break;
			continue;
		}
		check_alloc_failure(n, r, err);
		assert_null(spec);
		wr_error_free(err);
	}
	assert_true(n > 100);
	struct spec *spec = load_ok();
	for (n = 1; n < 1000; n++) {
		wr_alloc_fail_at(n);
		errno = 0;
		char **files = spec_lockfiles(spec, repo);
		int saved = errno;
		wr_alloc_fail_at(0);
		if (files) {
			assert_string_equal(files[0], "go.sum");
			assert_string_equal(files[1], "requirements.txt");
			assert_string_equal(files[2], "tools/deps.lock");
			assert_string_equal(files[3], "web/package-lock.json");
			assert_null(files[4]);
			spec_strv_free(files);
			break;
		}
		assert_int_equal(saved, ENOMEM);
	}
	assert_true(n > 4);
	spec_free(spec);
	use_wr_alloc_in_jansson(false);
}

static void test_defaults_and_jsonc_survive_allocation_failure(void **state)
{
	(void)state;
	use_wr_alloc_in_jansson(true);
	unsigned long n;
	for (n = 1; n < 1000; n++) {
		struct spec *spec = NULL;
		struct wr_error *err = NULL;
		wr_alloc_fail_at(n);
		int r = spec_defaults(&spec, &err);
		wr_alloc_fail_at(0);
		if (r == 0) {
			spec_free(spec);
			if (!finished_or_tolerated())
				break;
			continue;
		}
		check_alloc_failure(n, r, err);
		wr_error_free(err);
	}
	use_wr_alloc_in_jansson(false);
	assert_true(n > 1);
	char *out = NULL;
	struct wr_error *err = NULL;
	wr_alloc_fail_at(1);
	assert_int_equal(spec_jsonc_to_json("{}", 2, &out, NULL, &err),
			 -ENOMEM);
	wr_alloc_fail_at(0);
	assert_null(out);
	assert_int_equal(err->errnum, ENOMEM);
	wr_error_free(err);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, test_setup, test_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_jsonc_blanks_comments_keeping_length_and_lines),
	    T(test_jsonc_keeps_strings_byte_exact),
	    T(test_jsonc_drops_trailing_commas),
	    T(test_jsonc_leaves_other_commas_to_jansson),
	    T(test_jsonc_escapes_at_string_edges),
	    T(test_jsonc_byte_order_mark),
	    T(test_jsonc_unterminated_comment_and_string),
	    T(test_jsonc_line_numbers_in_syntax_errors),
	    T(test_jsonc_nul_bytes),
	    T(test_full_example),
	    T(test_unknown_keys_are_kept_in_raw),
	    T(test_empty_object_gives_defaults),
	    T(test_null_is_absent),
	    T(test_hash_is_sha256_of_the_bytes),
	    T(test_top_level_must_be_an_object),
	    T(test_duplicate_keys_are_refused),
	    T(test_hook_forms),
	    T(test_hook_type_errors),
	    T(test_hook_caps),
	    T(test_string_length_cap),
	    T(test_file_size_cap),
	    T(test_env_errors_and_cap),
	    T(test_forward_ports),
	    T(test_customizations_type_errors),
	    T(test_services_errors),
	    T(test_verify_forms),
	    T(test_verify_errors),
	    T(test_egress),
	    T(test_limits),
	    T(test_limits_errors),
	    T(test_refresh),
	    T(test_secrets),
	    T(test_spec_lockfiles_validation),
	    T(test_load_defaults_without_a_file),
	    T(test_load_warren_json_fallback),
	    T(test_load_devcontainer_takes_precedence),
	    T(test_load_symlinks),
	    T(test_load_refuses_special_and_large_files),
	    T(test_load_missing_repository),
	    T(test_lockfiles_discovery),
	    T(test_lockfiles_empty_and_missing),
	    T(test_lockfiles_from_names),
	    T(test_parse_survives_allocation_failure),
	    T(test_load_and_lockfiles_survive_allocation_failure),
	    T(test_defaults_and_jsonc_survive_allocation_failure),
	};
#undef T
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

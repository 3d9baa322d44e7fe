/* test_blobs.c - the registry client's pure parts (src/blobs/): the
 * "blobs" configuration and its errors, the repository, digest and tag
 * grammars, the WWW-Authenticate challenge parser, a token endpoint's
 * answer and the token cache, the registry's error bodies, and manifests
 * built and parsed back, bad ones refused. No network, no root. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "blobs/internal.h"
#include "util/fs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];
static char pw_path[128];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/warren-test.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(pw_path, sizeof(pw_path), "%s/pw", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return wr_rm_rf(dir);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

/* parses text as JSON into a config: the return, *msg the error's text */
static int parse_config(const char *text, struct blobs_config *cfg, char *msg,
			size_t cap)
{
	json_error_t jerr;
	json_t *v = json_loads(text, 0, &jerr);
	assert_non_null(v);
	struct wr_error *err = NULL;
	int r = blobs_config_parse(v, cfg, &err);
	json_decref(v);
	msg[0] = '\0';
	if (r < 0) {
		assert_non_null(err);
		snprintf(msg, cap, "%s", err->msg);
		wr_error_free(err);
	} else {
		assert_null(err);
	}
	return r;
}

static void expect_config_error(const char *text, const char *needle)
{
	struct blobs_config cfg = {0};
	char msg[512];
	int r = parse_config(text, &cfg, msg, sizeof(msg));
	if (r >= 0 || !strstr(msg, needle)) {
		fprintf(stderr, "config %s: got %d '%s', want '%s'\n", text, r,
			msg, needle);
		fail();
	}
	assert_null(cfg.registry); /* untouched */
}

static void test_config(void **state)
{
	(void)state;
	write_file(pw_path, "secret\n", 0600);
	char text[512], msg[512];
	snprintf(text, sizeof(text),
		 "{\"registry\": \"https://reg.example:5000/\", "
		 "\"repository\": \"warren/blobs\", \"username\": \"w\", "
		 "\"password_file\": \"%s\"}",
		 pw_path);
	struct blobs_config cfg = {0};
	assert_int_equal(parse_config(text, &cfg, msg, sizeof(msg)), 0);
	assert_string_equal(cfg.registry, "https://reg.example:5000");
	assert_string_equal(cfg.repository, "warren/blobs");
	assert_string_equal(cfg.username, "w");
	assert_string_equal(cfg.password_file, pw_path);
	char *pw = NULL;
	struct wr_error *err = NULL;
	assert_int_equal(blobs_config_password(&cfg, &pw, &err), 0);
	assert_string_equal(pw, "secret");
	free(pw);
	/* read at each use: a new password without a new parse */
	write_file(pw_path, "rotated", 0600);
	assert_int_equal(blobs_config_password(&cfg, &pw, &err), 0);
	assert_string_equal(pw, "rotated");
	free(pw);
	/* ... and a file that became readable by others is refused then */
	assert_int_equal(chmod(pw_path, 0640), 0);
	assert_int_equal(blobs_config_password(&cfg, &pw, &err), -EPERM);
	assert_non_null(strstr(err->msg, "blobs.password_file"));
	wr_error_freep(&err);
	assert_int_equal(chmod(pw_path, 0600), 0);
	blobs_config_clear(&cfg);

	/* no credentials at all is fine */
	assert_int_equal(
	    parse_config("{\"registry\": \"http://127.0.0.1:5000\","
			 " \"repository\": \"a\"}",
			 &cfg, msg, sizeof(msg)),
	    0);
	assert_null(cfg.username);
	assert_int_equal(cfg.cache_max, 0);
	blobs_config_clear(&cfg);

	/* a worker's layer cache cap: a size, or bytes */
	assert_int_equal(
	    parse_config("{\"registry\": \"http://127.0.0.1:5000\","
			 " \"repository\": \"a\", \"cache_max\": \"2G\"}",
			 &cfg, msg, sizeof(msg)),
	    0);
	assert_int_equal(cfg.cache_max, 2ull << 30);
	blobs_config_clear(&cfg);
	assert_int_equal(
	    parse_config("{\"registry\": \"http://127.0.0.1:5000\","
			 " \"repository\": \"a\", \"cache_max\": 4096}",
			 &cfg, msg, sizeof(msg)),
	    0);
	assert_int_equal(cfg.cache_max, 4096);
	blobs_config_clear(&cfg);
}

static void test_config_errors(void **state)
{
	(void)state;
	char text[512];
	expect_config_error("[]", "blobs: expected {");
	expect_config_error("{\"registry\": \"http://r\", \"repository\": \"a\", "
			    "\"cache_max\": \"lots\"}",
			    "blobs.cache_max: expected a size");
	expect_config_error("{\"registry\": \"http://r\", \"repository\": \"a\", "
			    "\"cache_max\": 0}",
			    "blobs.cache_max: expected a size");
	expect_config_error("{\"registry\": \"http://r\", \"repository\": \"a\", "
			    "\"cache_max\": true}",
			    "blobs.cache_max: expected a size");
	expect_config_error("{\"repository\": \"a\"}",
			    "blobs.registry: required");
	expect_config_error("{\"registry\": \"http://r\"}",
			    "blobs.repository: required");
	expect_config_error("{\"registry\": 5, \"repository\": \"a\"}",
			    "blobs.registry: expected a non-empty string");
	expect_config_error(
	    "{\"registry\": \"ftp://r\", \"repository\": \"a\"}",
	    "blobs.registry: 'ftp://r'");
	expect_config_error("{\"registry\": \"http://r/v2\", \"repository\": "
			    "\"a\"}",
			    "without a path");
	expect_config_error("{\"registry\": \"http://u@r\", \"repository\": "
			    "\"a\"}",
			    "blobs.registry");
	expect_config_error("{\"registry\": \"http://r\", \"repository\": "
			    "\"Warren\"}",
			    "blobs.repository: 'Warren'");
	expect_config_error("{\"registry\": \"http://r\", \"repository\": "
			    "\"a\", \"user\": \"x\"}",
			    "blobs: unknown key 'user'");
	expect_config_error("{\"registry\": \"http://r\", \"repository\": "
			    "\"a\", \"username\": \"x\"}",
			    "blobs.username: needs blobs.password_file");
	snprintf(text, sizeof(text),
		 "{\"registry\": \"http://r\", \"repository\": \"a\", "
		 "\"password_file\": \"%s\"}",
		 pw_path);
	expect_config_error(text, "blobs.password_file: needs blobs.username");

	/* the password file: there, regular, its owner's alone, not empty */
	char missing[160], link[160];
	snprintf(missing, sizeof(missing), "%s/missing", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	const char *fmt = "{\"registry\": \"http://r\", \"repository\": \"a\", "
			  "\"username\": \"u\", \"password_file\": \"%s\"}";
	snprintf(text, sizeof(text), fmt, missing);
	expect_config_error(text, "blobs.password_file");
	write_file(pw_path, "pw", 0644);
	snprintf(text, sizeof(text), fmt, pw_path);
	expect_config_error(text, "readable or writable by group or others");
	write_file(pw_path, "\n", 0600);
	expect_config_error(text, "empty");
	snprintf(text, sizeof(text), fmt, dir);
	expect_config_error(text, "not a regular file");
	write_file(pw_path, "pw", 0600);
	assert_int_equal(symlink(pw_path, link), 0);
	snprintf(text, sizeof(text), fmt, link);
	expect_config_error(text, "blobs.password_file"); /* not followed */
	unlink(link);
}

static void test_names(void **state)
{
	(void)state;
	const char *good[] = {"a",     "warren/blobs", "a.b",
			      "a_b",   "a__b",	       "a-b",
			      "a---b", "0/1/2",	       "ab-c.d_e/f"};
	const char *bad[] = {"",    "A",    "a/",    "/a", "a//b",
			     "a.",  "a..b", "a___b", "-a", "a_-b",
			     "a b", "a:b",  "a/_b"};
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		if (!blobs_repository_valid(good[i]))
			fail_msg("'%s' refused", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		if (blobs_repository_valid(bad[i]))
			fail_msg("'%s' accepted", bad[i]);
	char longname[300];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_false(blobs_repository_valid(longname));
	longname[BLOBS_REPOSITORY_MAX] = '\0';
	assert_true(blobs_repository_valid(longname));

	char d[80] = "sha256:";
	memset(d + 7, 'a', 64);
	d[71] = '\0';
	assert_true(blobs_digest_valid(d));
	d[10] = 'A';
	assert_false(blobs_digest_valid(d));
	d[10] = 'a';
	d[70] = '\0';
	assert_false(blobs_digest_valid(d));
	assert_false(blobs_digest_valid("sha512:aa"));

	assert_true(blobs_tag_valid("v1.2-rc_3"));
	assert_true(blobs_tag_valid("_x"));
	assert_false(blobs_tag_valid(".x"));
	assert_false(blobs_tag_valid("-x"));
	assert_false(blobs_tag_valid("a/b"));
	assert_false(blobs_tag_valid(""));
}

static int parse_ch(const char *s, struct blobs_challenge *ch)
{
	return blobs_challenge_parse(s, strlen(s), ch);
}

static void test_challenge(void **state)
{
	(void)state;
	struct blobs_challenge ch;
	assert_int_equal(parse_ch("Bearer realm=\"https://auth.example/token\","
				  "service=\"registry.example\","
				  "scope=\"repository:warren/blobs:pull,push\"",
				  &ch),
			 0);
	assert_int_equal(ch.scheme, BLOBS_AUTH_BEARER);
	assert_string_equal(ch.realm, "https://auth.example/token");
	assert_string_equal(ch.service, "registry.example");
	assert_string_equal(ch.scope, "repository:warren/blobs:pull,push");

	/* case-blind names, spaces around '=' and ',', tokens, escapes,
	 * unknown parameters skipped */
	assert_int_equal(parse_ch("bEaReR  REALM = \"a\\\"b\\\\c\" , x=y ,"
				  " Service=svc",
				  &ch),
			 0);
	assert_int_equal(ch.scheme, BLOBS_AUTH_BEARER);
	assert_string_equal(ch.realm, "a\"b\\c");
	assert_string_equal(ch.service, "svc");
	assert_string_equal(ch.scope, "");

	assert_int_equal(parse_ch("Basic realm=\"Registry Realm\"", &ch), 0);
	assert_int_equal(ch.scheme, BLOBS_AUTH_BASIC);
	assert_string_equal(ch.realm, "Registry Realm");
	assert_int_equal(parse_ch("Basic", &ch), 0);
	assert_int_equal(ch.scheme, BLOBS_AUTH_BASIC);
	assert_int_equal(parse_ch("Negotiate", &ch), 0);
	assert_int_equal(ch.scheme, BLOBS_AUTH_OTHER);

	/* the first of two challenges */
	assert_int_equal(parse_ch("Basic realm=\"b\", Bearer realm=\"t\"", &ch),
			 0);
	assert_int_equal(ch.scheme, BLOBS_AUTH_BASIC);
	assert_string_equal(ch.realm, "b");

	/* out written only on success */
	memset(&ch, 0, sizeof(ch));
	strcpy(ch.realm, "kept");
	const char *bad[] = {"",
			     " ",
			     "Bearer realm=\"open",
			     "Bearer realm=\"a\" service=\"b\"",
			     "Bearer realm=\"a\",realm=\"b\"",
			     "Bearer realm=",
			     "Bearer abc==",
			     "Bearer realm=\"a\\",
			     "Bearer realm=\"\x01\"",
			     "Bearer\x01realm=a",
			     "=x",
			     "Bearer realm=a b"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		int r = parse_ch(bad[i], &ch);
		if (r != -EINVAL)
			fail_msg("'%s': %d", bad[i], r);
	}
	assert_string_equal(ch.realm, "kept");
	/* a NUL inside the value's length */
	assert_int_equal(
	    blobs_challenge_parse("Bearer realm=\"a\0b\"", 18, &ch), -EINVAL);
	/* a realm past its field */
	char big[BLOBS_REALM_MAX + 64];
	int n = snprintf(big, sizeof(big), "Bearer realm=\"");
	memset(big + n, 'r', BLOBS_REALM_MAX);
	strcpy(big + n + BLOBS_REALM_MAX, "\"");
	assert_int_equal(parse_ch(big, &ch), -E2BIG);
	/* the longest that fits */
	strcpy(big + n + BLOBS_REALM_MAX - 1, "\"");
	assert_int_equal(parse_ch(big, &ch), 0);
	assert_int_equal(strlen(ch.realm), BLOBS_REALM_MAX - 1);
}

static void test_token(void **state)
{
	(void)state;
	char *tok = NULL;
	int64_t exp = 0;
	const char *a = "{\"token\": \"abc.def\", \"expires_in\": 300}";
	assert_int_equal(blobs_token_parse(a, strlen(a), &tok, &exp), 0);
	assert_string_equal(tok, "abc.def");
	assert_int_equal(exp, 300);
	struct blobs_token_cache tc = {0};
	assert_ptr_equal(blobs_token_store(&tc, "repository:a:pull", tok, exp),
			 tok);
	assert_string_equal(blobs_token_lookup(&tc, "repository:a:pull"),
			    "abc.def");
	assert_null(blobs_token_lookup(&tc, "repository:a:pull,push"));

	const char *b = "{\"access_token\": \"xyz\"}";
	assert_int_equal(blobs_token_parse(b, strlen(b), &tok, &exp), 0);
	assert_string_equal(tok, "xyz");
	assert_int_equal(exp, 60); /* the spec's default */
	/* the same scope again: replaced */
	blobs_token_store(&tc, "repository:a:pull", tok, exp);
	assert_string_equal(blobs_token_lookup(&tc, "repository:a:pull"),
			    "xyz");
	/* a token that expires at once is given back but not kept */
	const char *c = "{\"token\": \"now\", \"expires_in\": 0}";
	assert_int_equal(blobs_token_parse(c, strlen(c), &tok, &exp), 0);
	assert_string_equal(blobs_token_store(&tc, "s0", tok, exp), "now");
	assert_null(blobs_token_lookup(&tc, "s0"));
	/* more scopes than slots: still one for each new one */
	for (int i = 0; i < 2 * BLOBS_TOKEN_CACHE; i++) {
		char scope[32];
		snprintf(scope, sizeof(scope), "s%d", i);
		char *t = strdup("t");
		assert_non_null(blobs_token_store(&tc, scope, t, 100 + i));
		assert_non_null(blobs_token_lookup(&tc, scope));
	}
	blobs_token_cache_clear(&tc);

	const char *bad[] = {"",
			     "[]",
			     "{}",
			     "{\"token\": \"\"}",
			     "{\"token\": 5}",
			     "{\"token\": \"a b\"}",
			     "{\"token\": \"a\\nb\"}",
			     "{\"token\": \"a\", \"expires_in\": -1}",
			     "{\"token\": \"a\", \"expires_in\": \"60\"}"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		if (blobs_token_parse(bad[i], strlen(bad[i]), &tok, &exp) !=
		    -EBADMSG)
			fail_msg("token '%s' accepted", bad[i]);
}

static void test_error_body(void **state)
{
	(void)state;
	const char *a = "{\"errors\": [{\"code\": \"BLOB_UNKNOWN\", "
			"\"message\": \"blob unknown to registry\", "
			"\"detail\": \"sha256:x\"}, {\"code\": \"DENIED\", "
			"\"message\": \"no\\nway\"}]}";
	char *t = blobs_error_body_text(a, strlen(a));
	assert_string_equal(t, "BLOB_UNKNOWN: blob unknown to registry; "
			       "DENIED: no way");
	free(t);
	const char *b = "{\"errors\": [{\"code\": \"UNAUTHORIZED\"}]}";
	t = blobs_error_body_text(b, strlen(b));
	assert_string_equal(t, "UNAUTHORIZED");
	free(t);
	assert_null(blobs_error_body_text("<html>", 6));
	assert_null(blobs_error_body_text("{\"errors\": []}", 14));
	assert_null(blobs_error_body_text(NULL, 0));
}

#define D1        \
	"sha256:" \
	"1111111111111111111111111111111111111111111111111111111111111111"
#define D2        \
	"sha256:" \
	"2222222222222222222222222222222222222222222222222222222222222222"
#define D3        \
	"sha256:" \
	"3333333333333333333333333333333333333333333333333333333333333333"

static void test_manifest_round_trip(void **state)
{
	(void)state;
	struct blobs_descriptor layers[2] = {
	    {.media_type = BLOBS_MEDIA_LAYER_GZIP, .digest = D2, .size = 10},
	    {.media_type = "application/vnd.warren.bundle",
	     .digest = D3,
	     .size = 0}};
	struct blobs_manifest m = {.config = {.media_type = BLOBS_MEDIA_CONFIG,
					      .digest = D1,
					      .size = 2},
				   .layers = layers,
				   .n_layers = 2};
	struct wr_error *err = NULL;
	char *json = NULL;
	assert_int_equal(blobs_manifest_build(&m, &json, &err), 0);
	assert_non_null(strstr(json, "\"schemaVersion\":2"));
	assert_non_null(
	    strstr(json, "\"mediaType\":\"" BLOBS_MEDIA_MANIFEST "\""));
	struct blobs_manifest back;
	assert_int_equal(blobs_manifest_parse(json, strlen(json), &back, &err),
			 0);
	assert_string_equal(back.config.media_type, BLOBS_MEDIA_CONFIG);
	assert_string_equal(back.config.digest, D1);
	assert_int_equal(back.config.size, 2);
	assert_int_equal(back.n_layers, 2);
	for (size_t i = 0; i < 2; i++) {
		assert_string_equal(back.layers[i].media_type,
				    layers[i].media_type);
		assert_string_equal(back.layers[i].digest, layers[i].digest);
		assert_int_equal(back.layers[i].size, layers[i].size);
	}
	/* the same struct, the same bytes (and so the same digest) */
	char *again = NULL;
	assert_int_equal(blobs_manifest_build(&back, &again, &err), 0);
	assert_string_equal(json, again);
	free(again);
	free(json);
	blobs_manifest_clear(&back);

	/* a build refuses what a registry would */
	layers[1].media_type = NULL;
	assert_int_equal(blobs_manifest_build(&m, &json, &err), -EINVAL);
	assert_non_null(strstr(err->msg, "layers[1]: bad mediaType"));
	wr_error_freep(&err);
	layers[1].media_type = "text/plain";
	strcpy(layers[0].digest, "sha256:XYZ");
	assert_int_equal(blobs_manifest_build(&m, &json, &err), -EINVAL);
	assert_non_null(strstr(err->msg, "layers[0]: digest 'sha256:XYZ'"));
	wr_error_freep(&err);
	m.n_layers = 0;
	assert_int_equal(blobs_manifest_build(&m, &json, &err), -EINVAL);
	wr_error_freep(&err);
}

/* annotations on the manifest and on a layer: built, parsed back, the same
 * bytes again; what is not an object of strings refused both ways */
static void test_manifest_annotations(void **state)
{
	(void)state;
	struct blobs_descriptor layer = {
	    .media_type = BLOBS_MEDIA_LAYER_ZSTD, .digest = D2, .size = 10};
	layer.annotations = json_pack("{s:s}", "org.warren.layer.id", "abc");
	struct blobs_manifest m = {
	    .config = {.media_type = BLOBS_MEDIA_CONFIG,
		       .digest = D1,
		       .size = 2},
	    .layers = &layer,
	    .n_layers = 1,
	    .annotations = json_pack("{s:s, s:s}", "org.warren.snapshot.id",
				     "s1", "org.warren.snapshot.commit", "c1")};
	struct wr_error *err = NULL;
	char *json = NULL;
	assert_int_equal(blobs_manifest_build(&m, &json, &err), 0);
	struct blobs_manifest back;
	assert_int_equal(blobs_manifest_parse(json, strlen(json), &back, &err),
			 0);
	assert_string_equal(json_string_value(json_object_get(
				back.annotations, "org.warren.snapshot.id")),
			    "s1");
	assert_string_equal(
	    json_string_value(json_object_get(back.layers[0].annotations,
					      "org.warren.layer.id")),
	    "abc");
	assert_null(back.config.annotations);
	char *again = NULL;
	assert_int_equal(blobs_manifest_build(&back, &again, &err), 0);
	assert_string_equal(json, again);
	free(again);
	free(json);
	blobs_manifest_clear(&back);

	/* a value that is not a string: refused at build and at parse */
	json_object_set_new(m.annotations, "n", json_integer(1));
	assert_int_equal(blobs_manifest_build(&m, &json, &err), -EINVAL);
	assert_non_null(strstr(err->msg, "manifest: annotations: 'n'"));
	wr_error_freep(&err);
	const char *bad =
	    "{\"schemaVersion\":2,\"config\":{\"mediaType\":\"a/b\","
	    "\"digest\":\"" D1 "\",\"size\":1},\"layers\":[{\"mediaType\":"
	    "\"a/b\",\"digest\":\"" D2 "\",\"size\":1,\"annotations\":[]}]}";
	assert_int_equal(blobs_manifest_parse(bad, strlen(bad), &back, &err),
			 -EINVAL);
	assert_non_null(strstr(err->msg, "layers[0]: annotations"));
	wr_error_freep(&err);
	json_decref(m.annotations);
	json_decref(layer.annotations);
}

static void expect_manifest_error(const char *json, const char *needle)
{
	struct blobs_manifest m = {.n_layers = 99};
	struct wr_error *err = NULL;
	int r = blobs_manifest_parse(json, strlen(json), &m, &err);
	if (r >= 0 || !err || !strstr(err->msg, needle)) {
		fprintf(stderr, "manifest %s: got %d '%s', want '%s'\n", json,
			r, err ? err->msg : "", needle);
		fail();
	}
	assert_int_equal(m.n_layers, 99); /* untouched */
	wr_error_free(err);
}

#define CFG                                                      \
	"\"config\": {\"mediaType\": \"a/b\", \"digest\": \"" D1 \
	"\", \"size\": 1}"
#define LAYER "{\"mediaType\": \"a/b\", \"digest\": \"" D2 "\", \"size\": 3}"

static void test_manifest_rejects(void **state)
{
	(void)state;
	/* a minimal good one, without the optional mediaType */
	const char *ok =
	    "{\"schemaVersion\": 2, " CFG ", \"layers\": [" LAYER "]}";
	struct blobs_manifest m;
	struct wr_error *err = NULL;
	assert_int_equal(blobs_manifest_parse(ok, strlen(ok), &m, &err), 0);
	blobs_manifest_clear(&m);

	expect_manifest_error("{", "manifest: 1:");
	expect_manifest_error("[]", "expected an object");
	expect_manifest_error("{\"schemaVersion\": 1, " CFG
			      ", \"layers\": [" LAYER "]}",
			      "schemaVersion: expected 2");
	expect_manifest_error("{\"schemaVersion\": 2, \"mediaType\": "
			      "\"application/vnd.docker.distribution."
			      "manifest.v2+json\", " CFG ", \"layers\": [" LAYER
			      "]}",
			      "mediaType: expected");
	expect_manifest_error("{\"schemaVersion\": 2, " CFG ", \"layers\": []}",
			      "layers: expected an array of 1");
	expect_manifest_error("{\"schemaVersion\": 2, " CFG "}",
			      "layers: expected");
	expect_manifest_error("{\"schemaVersion\": 2, \"layers\": [" LAYER "]}",
			      "config: expected an object");
	expect_manifest_error("{\"schemaVersion\": 2, " CFG
			      ", \"layers\": [" LAYER ", 5]}",
			      "layers[1]: expected an object");
	expect_manifest_error(
	    "{\"schemaVersion\": 2, " CFG ", \"layers\": [{\"mediaType\": "
	    "\"a/b\", \"digest\": \"" D2 "\", \"size\": -1}]}",
	    "layers[0]: expected");
	expect_manifest_error(
	    "{\"schemaVersion\": 2, " CFG ", \"layers\": [{\"mediaType\": "
	    "\"a/b\", \"digest\": \"sha256:abc\", \"size\": 1}]}",
	    "layers[0]: digest 'sha256:abc'");
	expect_manifest_error(
	    "{\"schemaVersion\": 2, " CFG ", \"layers\": [{\"mediaType\": "
	    "\"not a type\", \"digest\": \"" D2 "\", \"size\": 1}]}",
	    "layers[0]: bad mediaType");
	expect_manifest_error("{\"schemaVersion\": 2, " CFG
			      ", \"layers\": [{\"digest\": \"" D2
			      "\", \"size\": 1}]}",
			      "layers[0]: expected");
	expect_manifest_error(
	    "{\"schemaVersion\": 2, \"schemaVersion\": 2, " CFG
	    ", \"layers\": [" LAYER "]}",
	    "duplicate");
	/* past the cap, before it is even read */
	size_t big = BLOBS_MANIFEST_MAX + 1;
	char *huge = malloc(big);
	assert_non_null(huge);
	memset(huge, ' ', big);
	assert_int_equal(blobs_manifest_parse(huge, big, &m, &err), -EFBIG);
	wr_error_freep(&err);
	free(huge);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config),
	    cmocka_unit_test(test_config_errors),
	    cmocka_unit_test(test_names),
	    cmocka_unit_test(test_challenge),
	    cmocka_unit_test(test_token),
	    cmocka_unit_test(test_error_body),
	    cmocka_unit_test(test_manifest_round_trip),
	    cmocka_unit_test(test_manifest_annotations),
	    cmocka_unit_test(test_manifest_rejects),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

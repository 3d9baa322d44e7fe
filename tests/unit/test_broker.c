/* test_broker.c - the credential broker (src/security/broker*.c): tokens,
 * the client's header, ref names, the session's namespace, ref updates and
 * their static checks, pkt-lines; and the broker itself on the host, with
 * real git through warren-git-connect (as a sandbox's git reaches it):
 * clone and fetch; a push to the session's branch reaches the remote; a
 * push to main, to another session's branch, a deletion, a tag and a
 * force push are refused with their reasons and change nothing; a bad,
 * another session's, a closed sandbox's and an ended session's token are
 * refused and recorded; every connection is recorded. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "security/broker.h"
#include "util/alloc.h"
#include "util/fs.h"

/* ---- tokens -------------------------------------------------------------- */

static void test_token(void **state)
{
	(void)state;
	char a[BROKER_TOKEN_MAX + 1], b[BROKER_TOKEN_MAX + 1];
	assert_int_equal(broker_token_new(a), 0);
	assert_int_equal(broker_token_new(b), 0);
	assert_string_not_equal(a, b);
	/* "wrb_" and 43 base64url characters: 256 bits */
	assert_int_equal(strlen(a), 4 + 43);
	assert_memory_equal(a, "wrb_", 4);
	struct broker_header h;
	char line[256];
	const char *why = NULL;
	snprintf(line, sizeof(line), "warren-broker/1 git-upload-pack %s", a);
	assert_int_equal(broker_header_parse(line, strlen(line), &h, &why), 0);
	assert_string_equal(h.token, a);
	unsigned char ha[BROKER_TOKEN_HASH_BYTES], hb[BROKER_TOKEN_HASH_BYTES],
	    ha2[BROKER_TOKEN_HASH_BYTES];
	broker_token_hash(a, ha);
	broker_token_hash(b, hb);
	broker_token_hash(a, ha2);
	assert_true(broker_token_hash_equal(ha, ha2));
	assert_false(broker_token_hash_equal(ha, hb));
}

/* ---- the header ---------------------------------------------------------- */

static void test_header(void **state)
{
	(void)state;
	struct broker_header h;
	const char *why = NULL;
	const char *good = "warren-broker/1 git-receive-pack wrb_abc-_XYZ09";
	assert_int_equal(broker_header_parse(good, strlen(good), &h, &why), 0);
	assert_int_equal(h.service, BROKER_RECEIVE_PACK);
	assert_string_equal(h.token, "wrb_abc-_XYZ09");
	assert_string_equal(broker_service_name(h.service), "git-receive-pack");
	static const char *const bad[] = {
	    "",
	    "warren-broker/1",
	    "warren-broker/2 git-upload-pack tok",
	    "warren-broker/1 git-upload-pack",
	    "warren-broker/1 git-upload-pack ",
	    "warren-broker/1 git-upload-archive tok",
	    "warren-broker/1 upload-pack tok",
	    "warren-broker/1 git-upload-pack tok extra",
	    "warren-broker/1 git-upload-pack to/k",
	    "warren-broker/1 git-upload-pack tok\r",
	    "WARREN-BROKER/1 git-upload-pack tok",
	    "warren-broker/1  git-upload-pack tok",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		assert_int_equal(
		    broker_header_parse(bad[i], strlen(bad[i]), &h, &why),
		    -EBADMSG);
		assert_non_null(why);
	}
	/* a token past the maximum */
	char line[400];
	int n =
	    snprintf(line, sizeof(line), "warren-broker/1 git-upload-pack ");
	memset(line + n, 'a', BROKER_TOKEN_MAX + 1);
	line[n + BROKER_TOKEN_MAX + 1] = '\0';
	assert_int_equal(broker_header_parse(line, strlen(line), &h, &why),
			 -EBADMSG);
	line[n + BROKER_TOKEN_MAX] = '\0';
	assert_int_equal(broker_header_parse(line, strlen(line), &h, &why), 0);
	/* a NUL inside is not a token character */
	const char nul[] = "warren-broker/1 git-upload-pack ab\0cd";
	assert_int_equal(broker_header_parse(nul, sizeof(nul) - 1, &h, &why),
			 -EBADMSG);
}

/* ---- refs ---------------------------------------------------------------- */

static void test_refname(void **state)
{
	(void)state;
	static const char *const good[] = {
	    "refs/heads/main",
	    "refs/heads/warren/s-1",
	    "refs/heads/warren/s-1/part.2",
	    "refs/tags/v1.0",
	    "refs/heads/a-b_c",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(broker_refname_valid(good[i]));
	static const char *const bad[] = {
	    "",
	    "refs/",
	    "main",
	    "HEAD",
	    "heads/main",
	    "refs/heads/a..b",
	    "refs/heads/a/",
	    "refs/heads/a.",
	    "refs/heads//a",
	    "refs/heads/.hidden",
	    "refs/heads/a/.b",
	    "refs/heads/a.lock",
	    "refs/heads/a.lock/b",
	    "refs/heads/a@{1}",
	    "refs/heads/a b",
	    "refs/heads/a~1",
	    "refs/heads/a^",
	    "refs/heads/a:b",
	    "refs/heads/a?",
	    "refs/heads/a*",
	    "refs/heads/a[",
	    "refs/heads/a\\b",
	    "refs/heads/a\tb",
	    "refs/heads/a\x7f",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(broker_refname_valid(bad[i]));
}

static void test_namespace(void **state)
{
	(void)state;
	const char *id = "s-abc";
	assert_true(broker_ref_in_namespace(id, "refs/heads/warren/s-abc"));
	assert_true(broker_ref_in_namespace(id, "refs/heads/warren/s-abc/x"));
	assert_true(broker_ref_in_namespace(id, "refs/heads/warren/s-abc/x/y"));
	/* a longer id that starts with this one is another session's */
	assert_false(broker_ref_in_namespace(id, "refs/heads/warren/s-abcd"));
	assert_false(
	    broker_ref_in_namespace(id, "refs/heads/warren/s-abc-other"));
	assert_false(broker_ref_in_namespace(id, "refs/heads/warren/s-ab"));
	assert_false(broker_ref_in_namespace(id, "refs/heads/warren/s-abc/"));
	assert_false(broker_ref_in_namespace(id, "refs/heads/warren/"));
	assert_false(broker_ref_in_namespace(id, "refs/heads/main"));
	assert_false(broker_ref_in_namespace(id, "refs/tags/warren/s-abc"));
	assert_false(broker_ref_in_namespace(id, "refs/heads/s-abc"));
	assert_false(broker_ref_in_namespace(id, "refs/remotes/warren/s-abc"));
	assert_false(broker_ref_in_namespace("", "refs/heads/warren/"));
}

#define Z40 "0000000000000000000000000000000000000000"
#define A40 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define B40 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static void test_command(void **state)
{
	(void)state;
	struct broker_command c;
	const char *line = A40 " " B40 " refs/heads/warren/s-1\n";
	assert_int_equal(broker_command_parse(line, strlen(line), &c), 0);
	assert_string_equal(c.old_oid, A40);
	assert_string_equal(c.new_oid, B40);
	assert_string_equal(c.ref, "refs/heads/warren/s-1");
	const char *sha256 =
	    "0000000000000000000000000000000000000000000000000000000000000000 "
	    "1111111111111111111111111111111111111111111111111111111111111111 "
	    "refs/heads/x";
	assert_int_equal(broker_command_parse(sha256, strlen(sha256), &c), 0);
	assert_true(broker_oid_is_zero(c.old_oid));
	static const char *const bad[] = {
	    "",
	    A40 " " B40,
	    A40 " " B40 " ",
	    A40 "  " B40 " refs/heads/x",
	    "aaaa " B40 " refs/heads/x",
	    A40 " "
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA refs/heads/x",
	    A40 " " B40 "b refs/heads/x",
	    "g" A40 " " B40 " refs/heads/x",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(
		    broker_command_parse(bad[i], strlen(bad[i]), &c), -EBADMSG);

	/* the static checks: name, namespace, deletion */
	char why[256];
	struct broker_command ok = {A40, B40, "refs/heads/warren/s-1"};
	assert_int_equal(broker_command_check("s-1", &ok, why, sizeof(why)), 0);
	struct broker_command create = {Z40, B40, "refs/heads/warren/s-1/a"};
	assert_int_equal(broker_command_check("s-1", &create, why, sizeof(why)),
			 0);
	struct broker_command main_ = {A40, B40, "refs/heads/main"};
	assert_int_equal(broker_command_check("s-1", &main_, why, sizeof(why)),
			 -EACCES);
	assert_non_null(strstr(why, "refs/heads/warren/s-1 and below"));
	struct broker_command other = {Z40, B40, "refs/heads/warren/s-2"};
	assert_int_equal(broker_command_check("s-1", &other, why, sizeof(why)),
			 -EACCES);
	struct broker_command tag = {Z40, B40, "refs/tags/warren/s-1"};
	assert_int_equal(broker_command_check("s-1", &tag, why, sizeof(why)),
			 -EACCES);
	struct broker_command del = {A40, Z40, "refs/heads/warren/s-1"};
	assert_int_equal(broker_command_check("s-1", &del, why, sizeof(why)),
			 -EACCES);
	assert_non_null(strstr(why, "deleting"));
	struct broker_command bad_name = {Z40, B40,
					  "refs/heads/warren/s-1/../main"};
	assert_int_equal(
	    broker_command_check("s-1", &bad_name, why, sizeof(why)), -EACCES);
	assert_non_null(strstr(why, "not a valid ref name"));
}

/* ---- pkt-lines ----------------------------------------------------------- */

static void test_pkt(void **state)
{
	(void)state;
	assert_int_equal(broker_pkt_len("0000"), BROKER_PKT_FLUSH);
	assert_int_equal(broker_pkt_len("0001"), BROKER_PKT_DELIM);
	assert_int_equal(broker_pkt_len("0002"), BROKER_PKT_END);
	assert_int_equal(broker_pkt_len("0004"), 4);
	assert_int_equal(broker_pkt_len("000a"), 10);
	assert_int_equal(broker_pkt_len("00A0"), 160);
	assert_int_equal(broker_pkt_len("fff0"), 65520);
	assert_int_equal(broker_pkt_len("fff1"), -EBADMSG);
	assert_int_equal(broker_pkt_len("0003"), -EBADMSG);
	assert_int_equal(broker_pkt_len("00g0"), -EBADMSG);
	assert_int_equal(broker_pkt_len(" 004"), -EBADMSG);
	char buf[64];
	assert_int_equal(broker_pkt_format(buf, sizeof(buf), "ok x", 4), 8);
	assert_memory_equal(buf, "0008ok x", 8);
	assert_int_equal(broker_pkt_format(buf, 6, "ok x", 4), -E2BIG);
}

/* ---- the broker, with real git ------------------------------------------ */

static char tmp[] = "/tmp/warren-test-broker.XXXXXX";
static char client[4096];
static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static json_t *records; /* [{"session", "details"}] */

static void audit_cb(void *ctx, const char *session_id, const json_t *d)
{
	(void)ctx;
	pthread_mutex_lock(&rec_mu);
	json_array_append_new(records, json_pack("{s:s, s:O}", "session",
						 session_id, "details", d));
	pthread_mutex_unlock(&rec_mu);
}

/* Runs a shell command (git with a clean configuration) in tmp; its exit
 * status, its output (stdout and stderr) in *out. */
static int sh(char **out, const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	char full[9000];
	snprintf(full, sizeof(full),
		 "cd %s && env -i PATH=/usr/bin:/bin HOME=%s "
		 "GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t "
		 "GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t "
		 "sh -c '%s' 2>&1",
		 tmp, tmp, cmd);
	FILE *p = popen(full, "r");
	assert_non_null(p);
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	size_t k;
	while ((k = fread(buf + len, 1, cap - 1 - len, p)) > 0)
		len += k;
	buf[len] = '\0';
	int st = pclose(p);
	if (getenv("BROKER_TEST_VERBOSE")) /* what git shows, to read */
		fprintf(stderr, "$ %s\n%s[exit %d]\n", cmd, buf,
			WIFEXITED(st) ? WEXITSTATUS(st) : 128);
	if (out)
		*out = buf;
	else
		free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char *rev(const char *repo, const char *ref)
{
	char *out = NULL;
	if (sh(&out, "git -C %s rev-parse --verify -q %s", repo, ref) != 0) {
		free(out);
		return NULL;
	}
	out[strcspn(out, "\n")] = '\0';
	return out;
}

/* The records of a session so far, as an array of details. */
static json_t *records_of(const char *session)
{
	json_t *a = json_array();
	pthread_mutex_lock(&rec_mu);
	size_t i;
	json_t *r;
	json_array_foreach(records, i, r)
	{
		if (!strcmp(json_string_value(json_object_get(r, "session")),
			    session))
			json_array_append(a, json_object_get(r, "details"));
	}
	pthread_mutex_unlock(&rec_mu);
	return a;
}

/* Waits until the session has n records (they come after the client is
 * done). */
static json_t *wait_records(const char *session, size_t n)
{
	for (int i = 0; i < 500; i++) {
		json_t *a = records_of(session);
		if (json_array_size(a) >= n)
			return a;
		json_decref(a);
		usleep(10 * 1000);
	}
	return records_of(session);
}

static int setup_git(void **state)
{
	(void)state;
	/* the client next to the build: BUILD/tests/test_broker ->
	 * BUILD/warren-git-connect */
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	snprintf(client, sizeof(client), "%s/../warren-git-connect",
		 dirname(exe));
	if (!mkdtemp(tmp))
		return -1;
	records = json_array();
	return 0;
}

static int teardown_git(void **state)
{
	(void)state;
	wr_rm_rf(tmp);
	json_decref(records);
	return 0;
}

static void test_broker_git(void **state)
{
	(void)state;
	if (access(client, X_OK) < 0)
		skip(); /* `make` builds it next to the tests */
	char *out = NULL;
	/* the remote, with a main branch; its mirror on the "host" */
	assert_int_equal(
	    sh(&out, "git init -q -b main seed && cd seed && echo one >f && "
		     "git add f && git commit -q -m one && "
		     "git clone -q --bare . ../remote.git && "
		     "git clone -q --mirror ../remote.git ../mirror.git"),
	    0);
	free(out);
	char *main0 = rev("remote.git", "refs/heads/main");
	assert_non_null(main0);

	char data[4096], dir[4096], dir2[4096], remote[4096], mirror[4096];
	snprintf(data, sizeof(data), "%s/data", tmp);
	snprintf(dir, sizeof(dir), "%s/data/s-one.broker", tmp);
	snprintf(dir2, sizeof(dir2), "%s/data/s-two.broker", tmp);
	snprintf(remote, sizeof(remote), "%s/remote.git", tmp);
	snprintf(mirror, sizeof(mirror), "%s/mirror.git", tmp);
	assert_int_equal(wr_mkdir_p(data, 0700), 0);
	struct broker_config cfg = {
	    .data_dir = data,
	    .hook_relay = client,
	    .audit = audit_cb,
	    .refresh_min_ms = 1,
	};
	struct broker *b = NULL;
	struct wr_error *err = NULL;
	assert_int_equal(broker_start(&cfg, &b, &err), 0);
	struct broker_remote rem = {.name = "proj",
				    .url = remote,
				    .mirror = mirror,
				    .username = "u",
				    .password = "not-used-for-a-path"};
	assert_int_equal(broker_session_open(b, "s-one", dir, &rem, &err), 0);
	assert_null(err);

	/* the directory as the sandbox sees it: socket 0666, token 0644,
	 * directory 0711 */
	char path[4200];
	struct stat st;
	snprintf(path, sizeof(path), "%s/broker.sock", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0666);
	snprintf(path, sizeof(path), "%s/token", dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0711);
	char *token1 = NULL;
	size_t tlen;
	assert_int_equal(wr_read_file(path, 256, &token1, &tlen), 0);
	assert_int_equal(tlen, 47);

	/* the workspace's origin, as sandbox_start sets it (with the
	 * token's path given: /run/warren-broker is not on the host) */
	char url[8192];
	snprintf(url, sizeof(url),
		 "ext::%s --token %s/token %%S %s/broker.sock", client, dir,
		 dir);
	assert_int_equal(
	    sh(&out,
	       "git -c protocol.ext.allow=always clone -q \"%s\" work && cd "
	       "work && git config protocol.ext.allow always && git log "
	       "--format=%%s",
	       url),
	    0);
	assert_non_null(strstr(out, "one"));
	free(out);

	/* a push to the session's branch reaches the remote */
	int r = sh(
	    &out, "cd work && echo two >f && git commit -q -am two && git push "
		  "origin HEAD:refs/heads/warren/s-one");
	assert_int_equal(r, 0);
	free(out);
	char *head = rev("work", "HEAD");
	char *pushed = rev("remote.git", "refs/heads/warren/s-one");
	assert_non_null(pushed);
	assert_string_equal(pushed, head);
	free(pushed);

	/* a fetch sees it (through the staging repository) */
	assert_int_equal(sh(&out,
			    "cd work && git fetch -q origin && git rev-parse "
			    "origin/warren/s-one"),
			 0);
	assert_non_null(strstr(out, head));
	free(out);

	/* main: refused with the reason; main unchanged */
	r = sh(&out, "cd work && git push origin HEAD:main");
	assert_int_not_equal(r, 0);
	assert_non_null(strstr(out, "remote rejected"));
	assert_non_null(
	    strstr(out, "may push only to refs/heads/warren/s-one and below"));
	free(out);
	char *main1 = rev("remote.git", "refs/heads/main");
	assert_string_equal(main0, main1);
	free(main1);

	/* another session's branch, a tag: refused */
	r = sh(&out, "cd work && git push origin HEAD:refs/heads/warren/s-two");
	assert_int_not_equal(r, 0);
	assert_non_null(strstr(out, "remote rejected"));
	free(out);
	assert_null(rev("remote.git", "refs/heads/warren/s-two"));
	r = sh(&out, "cd work && git tag t1 && git push origin t1");
	assert_int_not_equal(r, 0);
	free(out);
	assert_null(rev("remote.git", "refs/tags/t1"));

	/* a deletion: refused, the branch stays */
	r = sh(&out, "cd work && git push origin :refs/heads/warren/s-one");
	assert_int_not_equal(r, 0);
	assert_non_null(strstr(out, "deleting a ref is not allowed"));
	free(out);
	pushed = rev("remote.git", "refs/heads/warren/s-one");
	assert_string_equal(pushed, head);
	free(pushed);

	/* a force push of a rewritten branch: refused, unchanged */
	r = sh(&out, "cd work && git commit -q --amend -m rewritten && git "
		     "push -f origin HEAD:refs/heads/warren/s-one");
	assert_int_not_equal(r, 0);
	assert_non_null(strstr(out, "not a fast-forward"));
	free(out);
	pushed = rev("remote.git", "refs/heads/warren/s-one");
	assert_string_equal(pushed, head);
	free(pushed);

	/* a fast-forward on top: accepted */
	assert_int_equal(sh(&out,
			    "cd work && git reset -q --hard %s && echo "
			    "three >f && git commit -q -am three && "
			    "git push -q origin "
			    "HEAD:refs/heads/warren/s-one",
			    head),
			 0);
	free(out);
	char *head3 = rev("work", "HEAD");
	pushed = rev("remote.git", "refs/heads/warren/s-one");
	assert_string_equal(pushed, head3);
	free(pushed);

	/* the records: a push with each ref's decision */
	json_t *recs = wait_records("s-one", 11);
	size_t i;
	json_t *d;
	bool saw_pushed = false, saw_main = false, saw_delete = false,
	     saw_fetch = false;
	json_array_foreach(recs, i, d)
	{
		const char *svc =
		    json_string_value(json_object_get(d, "service"));
		assert_non_null(svc);
		assert_string_equal(
		    json_string_value(json_object_get(d, "decision")),
		    "allowed");
		assert_string_equal(
		    json_string_value(json_object_get(d, "credential")),
		    "https");
		if (!strcmp(svc, "git-upload-pack"))
			saw_fetch = true;
		size_t k;
		json_t *ref;
		json_array_foreach(json_object_get(d, "refs"), k, ref)
		{
			const char *name =
			    json_string_value(json_object_get(ref, "ref"));
			const char *dec =
			    json_string_value(json_object_get(ref, "decision"));
			if (!strcmp(name, "refs/heads/warren/s-one") &&
			    !strcmp(dec, "pushed"))
				saw_pushed = true;
			if (!strcmp(name, "refs/heads/main") &&
			    !strcmp(dec, "refused"))
				saw_main = true;
			if (!strcmp(name, "refs/heads/warren/s-one") &&
			    !strcmp(dec, "refused") &&
			    broker_oid_is_zero(
				json_string_value(json_object_get(ref, "new"))))
				saw_delete = true;
		}
	}
	assert_true(saw_pushed);
	assert_true(saw_main);
	assert_true(saw_delete);
	assert_true(saw_fetch);
	json_decref(recs);

	/* tokens: a made-up one */
	snprintf(path, sizeof(path), "%s/bad-token", tmp);
	assert_int_equal(wr_write_file_atomic(path, "wrb_not-a-real-token\n",
					      21, 0600, false),
			 0);
	char bad_url[8192];
	snprintf(bad_url, sizeof(bad_url),
		 "ext::%s --token %s %%S %s/broker.sock", client, path, dir);
	r = sh(&out, "git -c protocol.ext.allow=always ls-remote \"%s\"",
	       bad_url);
	assert_int_not_equal(r, 0);
	assert_non_null(strstr(out, "warren broker: unknown token"));
	free(out);

	/* another session's token on this session's socket */
	assert_int_equal(broker_session_open(b, "s-two", dir2, &rem, &err), 0);
	snprintf(bad_url, sizeof(bad_url),
		 "ext::%s --token %s/token %%S %s/broker.sock", client, dir2,
		 dir);
	r = sh(&out, "git -c protocol.ext.allow=always ls-remote \"%s\"",
	       bad_url);
	assert_int_not_equal(r, 0);
	assert_non_null(strstr(out, "a token of another session (s-two)"));
	free(out);
	/* a ref below a session's branch name is the session's too (git
	 * keeps a branch and refs below its name apart: s-two has no
	 * branch of its own yet) */
	char url2[8192];
	snprintf(url2, sizeof(url2),
		 "ext::%s --token %s/token %%S %s/broker.sock", client, dir2,
		 dir2);
	r = sh(&out,
	       "cd work && git push -q \"%s\" "
	       "HEAD:refs/heads/warren/s-two/part",
	       url2);
	assert_int_equal(r, 0);
	free(out);
	pushed = rev("remote.git", "refs/heads/warren/s-two/part");
	assert_non_null(pushed);
	free(pushed);
	/* ...the refusal is recorded for both sessions */
	recs = wait_records("s-two", 2);
	assert_int_equal(json_array_size(recs), 2);
	d = json_array_get(recs, 0);
	assert_string_equal(json_string_value(json_object_get(d, "decision")),
			    "refused");
	assert_string_equal(
	    json_string_value(json_object_get(d, "socket_session")), "s-one");
	json_decref(recs);

	/* the sandbox stops and a new one starts: the old token expires */
	snprintf(path, sizeof(path), "%s/old-token", tmp);
	assert_int_equal(wr_write_file_atomic(path, token1, tlen, 0600, false),
			 0);
	broker_session_close(b, "s-one");
	assert_int_equal(access(dir, F_OK), -1); /* its directory is gone */
	assert_int_equal(broker_session_open(b, "s-one", dir, &rem, &err), 0);
	snprintf(bad_url, sizeof(bad_url),
		 "ext::%s --token %s %%S %s/broker.sock", client, path, dir);
	r = sh(&out, "git -c protocol.ext.allow=always ls-remote \"%s\"",
	       bad_url);
	assert_int_not_equal(r, 0);
	assert_non_null(
	    strstr(out, "warren broker: token expired (its sandbox stopped)"));
	free(out);
	/* the new token works */
	r = sh(&out, "git -c protocol.ext.allow=always ls-remote \"%s\"", url);
	assert_int_equal(r, 0);
	assert_non_null(strstr(out, "refs/heads/warren/s-one"));
	free(out);

	/* the session ends: its token is refused though its sandbox's
	 * socket is still there, and the refusal is recorded */
	broker_session_end(b, "s-one");
	r = sh(&out, "git -c protocol.ext.allow=always ls-remote \"%s\"", url);
	assert_int_not_equal(r, 0);
	assert_non_null(
	    strstr(out, "warren broker: token expired (the session ended)"));
	free(out);
	bool saw_ended = false;
	for (int k = 0; !saw_ended && k < 200; k++) {
		usleep(10 * 1000);
		recs = records_of("s-one");
		json_array_foreach(recs, i, d)
		{
			const char *reason =
			    json_string_value(json_object_get(d, "reason"));
			if (reason && !strcmp(reason, "token expired (the "
						      "session ended)"))
				saw_ended = true;
		}
		json_decref(recs);
	}
	assert_true(saw_ended);
	/* the staging repository goes when the session's sandbox does */
	snprintf(path, sizeof(path), "%s/broker/s-one.git", data);
	assert_int_equal(access(path, F_OK), 0);
	broker_session_close(b, "s-one");
	assert_int_equal(access(path, F_OK), -1);

	/* the remote never saw anything but the session's refs change */
	assert_int_equal(sh(&out, "git -C remote.git for-each-ref "
				  "--format=%%\\(refname\\)"),
			 0);
	assert_non_null(strstr(out, "refs/heads/main\n"));
	assert_non_null(strstr(out, "refs/heads/warren/s-one\n"));
	assert_non_null(strstr(out, "refs/heads/warren/s-two/part\n"));
	assert_null(strstr(out, "refs/tags"));
	assert_null(strstr(out, "refs/heads/warren/s-two\n"));
	free(out);

	broker_stop(b);
	free(token1);
	free(main0);
	free(head);
	free(head3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_token),
	    cmocka_unit_test(test_header),
	    cmocka_unit_test(test_refname),
	    cmocka_unit_test(test_namespace),
	    cmocka_unit_test(test_command),
	    cmocka_unit_test(test_pkt),
	    cmocka_unit_test_setup_teardown(test_broker_git, setup_git,
					    teardown_git),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_audit.c - the audit chain (security/audit.h): appends verify; an
 * edited byte, a deleted line, two swapped lines, a spliced or renumbered
 * record break the chain at the right line; a torn last record is cut off
 * and recorded on the next append; concurrent appends stay one chain; many
 * sessions each keep their own. In a scratch directory under /tmp. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "security/audit.h"
#include "util/alloc.h"

static char root[] = "/tmp/warren-unit-audit.XXXXXX";
static char data[PATH_MAX]; /* this test's data directory */
static int test_seq;

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
	nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

static int setup(void **state)
{
	(void)state;
	snprintf(data, sizeof(data), "%s/t%d", root, ++test_seq);
	audit_cache_reset();
	return mkdir(data, 0700);
}

static char *log_path(const char *session)
{
	char *p = audit_path(data, session);
	assert_non_null(p);
	return p;
}

/* Appends n records to session, with details that exercise the canonical
 * form: nested objects, reals, non-ASCII text, escapes. */
static void append_n(const char *session, int n)
{
	for (int i = 0; i < n; i++) {
		json_t *d = json_pack(
		    "{s:i, s:s, s:f, s:{s:s, s:[i, b, n]}}", "i", i, "text",
		    "caf\xc3\xa9 \"quoted\" tab\there/slash", "ratio", i / 3.0,
		    "nested", "z", "last", "a", 1, 1);
		assert_non_null(d);
		const char *actor = i % 3 == 0	 ? "system"
				    : i % 3 == 1 ? "agent"
						 : "user:alice";
		struct wr_error *err = NULL;
		int r = audit_append(data, session, actor,
				     i % 2 ? "tool_call" : "state", d, &err);
		if (r < 0)
			fail_msg("append %d: %s", i, err ? err->msg : "?");
		json_decref(d);
	}
}

static struct audit_verify_result verify(const char *session)
{
	char *p = log_path(session);
	struct audit_verify_result res;
	struct wr_error *err = NULL;
	int r = audit_verify(p, &res, &err);
	if (r < 0)
		fail_msg("verify %s: %s", p, err ? err->msg : "?");
	free(p);
	return res;
}

/* The log's lines (newlines kept), to edit. */
struct lines {
	char *v[4096];
	size_t n;
};

static void read_lines(const char *session, struct lines *l)
{
	char *p = log_path(session);
	FILE *f = fopen(p, "r");
	assert_non_null(f);
	l->n = 0;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0 && l->n < 4096)
		l->v[l->n++] = strdup(line);
	free(line);
	fclose(f);
	free(p);
}

static void write_lines(const char *session, struct lines *l)
{
	char *p = log_path(session);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	for (size_t i = 0; i < l->n; i++)
		fputs(l->v[i], f);
	fclose(f);
	free(p);
}

/* A record re-serialized as a line (what a forger would write). */
static char *line_of(const json_t *rec)
{
	char *text = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
	assert_non_null(text);
	size_t len = strlen(text);
	char *line = malloc(len + 2);
	memcpy(line, text, len);
	line[len] = '\n';
	line[len + 1] = '\0';
	free(text);
	return line;
}

static void free_lines(struct lines *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	l->n = 0;
}

static void assert_problem(const struct audit_verify_result *res, uint64_t line,
			   const char *what)
{
	if (res->ok || res->line != line || !strstr(res->problem, what))
		fail_msg("want line %llu '%s', got ok=%d line %llu '%s'",
			 (unsigned long long)line, what, res->ok,
			 (unsigned long long)res->line, res->problem);
}

/* ---- a chain ------------------------------------------------------------ */

static void test_chain_verifies(void **state)
{
	(void)state;
	append_n("s-chain", 50);
	struct audit_verify_result res = verify("s-chain");
	assert_true(res.ok);
	assert_int_equal(res.records, 50);
	assert_int_equal(res.line, 0);
	assert_string_equal(res.session, "s-chain");

	struct lines l;
	read_lines("s-chain", &l);
	assert_int_equal(l.n, 50);
	for (size_t i = 0; i < l.n; i++) {
		json_t *rec = json_loads(l.v[i], 0, NULL);
		assert_non_null(rec);
		assert_int_equal(
		    json_integer_value(json_object_get(rec, "seq")),
		    (json_int_t)i + 1);
		assert_int_equal(json_object_size(rec), 8);
		assert_true(json_integer_value(json_object_get(
				rec, "time_ms")) > 1600000000000LL);
		const char *prev =
		    json_string_value(json_object_get(rec, "prev"));
		if (i == 0) {
			char zeros[AUDIT_HASH_HEX + 1];
			memset(zeros, '0', AUDIT_HASH_HEX);
			zeros[AUDIT_HASH_HEX] = '\0';
			assert_string_equal(prev, zeros);
		} else {
			json_t *before = json_loads(l.v[i - 1], 0, NULL);
			assert_string_equal(
			    prev,
			    json_string_value(json_object_get(before, "hash")));
			json_decref(before);
		}
		/* the hash is SHA-256 over the record without it, compact
		 * with sorted keys */
		const char *hash =
		    json_string_value(json_object_get(rec, "hash"));
		if (i == l.n - 1)
			assert_string_equal(hash, res.head);
		char want[AUDIT_HASH_HEX + 1];
		json_t *copy = json_copy(rec);
		json_object_del(copy, "hash");
		char *text = json_dumps(copy, JSON_COMPACT | JSON_SORT_KEYS);
		audit_sha256_hex(text, strlen(text), want);
		assert_string_equal(hash, want);
		free(text);
		json_decref(copy);
		json_decref(rec);
	}
	/* owner-only */
	char *p = log_path("s-chain");
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	char dir[PATH_MAX + 8];
	snprintf(dir, sizeof(dir), "%s/audit", data);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	free(p);
	free_lines(&l);
}

static void test_empty_details_and_empty_log(void **state)
{
	(void)state;
	struct wr_error *err = NULL;
	assert_int_equal(
	    audit_append(data, "s-empty", "system", "state", NULL, &err), 0);
	struct audit_verify_result res = verify("s-empty");
	assert_true(res.ok);
	assert_int_equal(res.records, 1);
	/* an empty file is an empty, intact chain */
	char *p = log_path("s-none");
	char dir[PATH_MAX + 8];
	snprintf(dir, sizeof(dir), "%s/audit", data);
	int fd = open(p, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	close(fd);
	res = verify("s-none");
	assert_true(res.ok);
	assert_int_equal(res.records, 0);
	assert_string_equal(res.head, "");
	free(p);
	/* no log at all */
	p = log_path("s-missing");
	assert_int_equal(audit_verify(p, &res, &err), -ENOENT);
	wr_error_free(err);
	free(p);
}

/* ---- tampering ----------------------------------------------------------- */

static void test_edit_one_byte_in_details(void **state)
{
	(void)state;
	append_n("s-edit", 10);
	struct lines l;
	read_lines("s-edit", &l);
	char *at = strstr(l.v[6], "last");
	assert_non_null(at);
	at[0] = 'L'; /* "last" -> "Last" in line 7's details */
	write_lines("s-edit", &l);
	struct audit_verify_result res = verify("s-edit");
	assert_problem(&res, 7, "line 7: hash mismatch (edited?)");
	assert_int_equal(res.records, 6);
	free_lines(&l);
}

static void test_edit_kind_actor_time(void **state)
{
	(void)state;
	/* line 6 is user:alice's tool_call; each edit keeps the length */
	static const struct {
		const char *from, *to;
	} edits[] = {
	    {"\"actor\":\"user:alice\"", "\"actor\":\"user:alicf\""},
	    {"\"kind\":\"tool_call\"", "\"kind\":\"tool_cal1\""},
	    {"\"time_ms\":1", "\"time_ms\":2"},
	};
	for (size_t e = 0; e < sizeof(edits) / sizeof(edits[0]); e++) {
		char session[32];
		snprintf(session, sizeof(session), "s-field%zu", e);
		append_n(session, 6);
		struct lines l;
		read_lines(session, &l);
		char *at = strstr(l.v[5], edits[e].from);
		assert_non_null(at);
		memcpy(at, edits[e].to, strlen(edits[e].to));
		write_lines(session, &l);
		struct audit_verify_result res = verify(session);
		assert_problem(&res, 6, "line 6: hash mismatch");
		free_lines(&l);
	}
}

static void test_edit_whitespace_is_seen(void **state)
{
	(void)state;
	append_n("s-space", 5);
	struct lines l;
	read_lines("s-space", &l);
	/* the same JSON, one more byte: not the canonical form */
	char *old = l.v[2];
	size_t len = strlen(old);
	char *wide = malloc(len + 2);
	wide[0] = ' ';
	memcpy(wide + 1, old, len + 1);
	l.v[2] = wide;
	free(old);
	write_lines("s-space", &l);
	struct audit_verify_result res = verify("s-space");
	assert_problem(&res, 3, "not in canonical form");
	free_lines(&l);
}

static void test_delete_line(void **state)
{
	(void)state;
	append_n("s-del", 10);
	struct lines l;
	read_lines("s-del", &l);
	free(l.v[4]);
	memmove(&l.v[4], &l.v[5], (l.n - 5) * sizeof(char *));
	l.n--;
	write_lines("s-del", &l);
	struct audit_verify_result res = verify("s-del");
	assert_problem(&res, 5,
		       "line 5: seq 6 follows 4 (deleted or reordered?)");
	assert_int_equal(res.records, 4);
	free_lines(&l);

	/* the first line */
	append_n("s-del1", 3);
	read_lines("s-del1", &l);
	free(l.v[0]);
	memmove(&l.v[0], &l.v[1], (l.n - 1) * sizeof(char *));
	l.n--;
	write_lines("s-del1", &l);
	res = verify("s-del1");
	assert_problem(&res, 1, "seq 2");
	free_lines(&l);
}

static void test_swap_lines(void **state)
{
	(void)state;
	append_n("s-swap", 10);
	struct lines l;
	read_lines("s-swap", &l);
	char *t = l.v[2];
	l.v[2] = l.v[3];
	l.v[3] = t;
	write_lines("s-swap", &l);
	struct audit_verify_result res = verify("s-swap");
	assert_problem(&res, 3, "line 3: seq 4 follows 2");
	free_lines(&l);

	/* the last two: still seen */
	append_n("s-swap-end", 4);
	read_lines("s-swap-end", &l);
	t = l.v[2];
	l.v[2] = l.v[3];
	l.v[3] = t;
	write_lines("s-swap-end", &l);
	res = verify("s-swap-end");
	assert_problem(&res, 3, "seq 4 follows 2");
	free_lines(&l);
}

/* Deleting a line and renumbering the rest keeps seq in order, but the
 * chain of hashes breaks where the line was. */
static void test_delete_and_renumber(void **state)
{
	(void)state;
	append_n("s-renum", 6);
	struct lines l;
	read_lines("s-renum", &l);
	for (size_t i = 3; i < l.n; i++) {
		json_t *rec = json_loads(l.v[i], 0, NULL);
		json_object_set_new(rec, "seq", json_integer((json_int_t)i));
		free(l.v[i]);
		l.v[i] = line_of(rec);
		json_decref(rec);
	}
	free(l.v[2]);
	memmove(&l.v[2], &l.v[3], (l.n - 3) * sizeof(char *));
	l.n--;
	write_lines("s-renum", &l);
	struct audit_verify_result res = verify("s-renum");
	assert_problem(&res, 3, "line 3: prev does not match line 2's hash");
	free_lines(&l);
}

/* A record from another session's log does not fit in. */
static void test_splice_from_other_log(void **state)
{
	(void)state;
	append_n("s-a", 4);
	append_n("s-b", 4);
	struct lines a, b;
	read_lines("s-a", &a);
	read_lines("s-b", &b);
	free(a.v[2]);
	a.v[2] = strdup(b.v[2]);
	write_lines("s-a", &a);
	struct audit_verify_result res = verify("s-a");
	assert_problem(&res, 3, "session s-b");
	free_lines(&a);
	free_lines(&b);
}

static void test_garbage_and_truncated_front(void **state)
{
	(void)state;
	append_n("s-junk", 4);
	struct lines l;
	read_lines("s-junk", &l);
	free(l.v[1]);
	l.v[1] = strdup("{\"seq\": 2, oops\n");
	write_lines("s-junk", &l);
	struct audit_verify_result res = verify("s-junk");
	assert_problem(&res, 2, "not a JSON object");
	free_lines(&l);

	/* cutting the front and renumbering: line 1's prev is not zeros */
	append_n("s-front", 4);
	read_lines("s-front", &l);
	json_t *rec = json_loads(l.v[1], 0, NULL);
	json_object_set_new(rec, "seq", json_integer(1));
	free(l.v[0]);
	l.v[0] = line_of(rec);
	json_decref(rec);
	l.n = 1;
	free(l.v[1]);
	free(l.v[2]);
	free(l.v[3]);
	write_lines("s-front", &l);
	res = verify("s-front");
	assert_problem(&res, 1, "prev is not the start of a chain");
	l.n = 1;
	free_lines(&l);
}

/* Records cut off the end leave a shorter chain that holds: only a head
 * noted earlier (an anchor) shows it. */
struct anchor_search {
	const char *hash;
	bool found;
};

static int search_anchor(void *ctx, uint64_t line, const json_t *rec)
{
	(void)line;
	struct anchor_search *s = ctx;
	if (!strcmp(json_string_value(json_object_get(rec, "hash")), s->hash))
		s->found = true;
	return 0;
}

static void test_cut_tail_needs_anchor(void **state)
{
	(void)state;
	append_n("s-tail", 8);
	struct audit_verify_result before = verify("s-tail");
	struct lines l;
	read_lines("s-tail", &l);
	free(l.v[7]);
	l.n--;
	write_lines("s-tail", &l);
	struct audit_verify_result after = verify("s-tail");
	assert_true(after.ok);
	assert_int_equal(after.records, 7);
	assert_string_not_equal(after.head, before.head);
	struct anchor_search s = {.hash = before.head};
	char *p = log_path("s-tail");
	struct audit_verify_result res;
	assert_int_equal(audit_walk(p, search_anchor, &s, &res, NULL), 0);
	assert_false(s.found);
	free(p);
	free_lines(&l);
}

/* ---- crashes and other writers ----------------------------------------- */

static void test_torn_last_record_recovers(void **state)
{
	(void)state;
	append_n("s-torn", 5);
	char *p = log_path("s-torn");
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	struct lines l;
	read_lines("s-torn", &l);
	size_t last = strlen(l.v[4]);
	/* a crash mid-write: part of the fifth record is on disk */
	assert_int_equal(truncate(p, st.st_size - (off_t)last / 2), 0);
	struct audit_verify_result res = verify("s-torn");
	assert_problem(&res, 5, "incomplete");
	assert_int_equal(res.records, 4);

	/* a restarted server: nothing cached */
	audit_cache_reset();
	json_t *d = json_pack("{s:s}", "after", "restart");
	assert_int_equal(
	    audit_append(data, "s-torn", "system", "state", d, NULL), 0);
	json_decref(d);
	res = verify("s-torn");
	assert_true(res.ok);
	assert_int_equal(res.records, 6);
	free_lines(&l);
	read_lines("s-torn", &l);
	json_t *rec = json_loads(l.v[4], 0, NULL);
	assert_string_equal(json_string_value(json_object_get(rec, "kind")),
			    "audit_recovered");
	assert_int_equal(json_integer_value(json_object_get(rec, "seq")), 5);
	assert_int_equal(json_integer_value(json_object_get(
			     json_object_get(rec, "details"), "dropped_bytes")),
			 (json_int_t)(last - last / 2));
	json_decref(rec);
	rec = json_loads(l.v[5], 0, NULL);
	assert_string_equal(json_string_value(json_object_get(rec, "kind")),
			    "state");
	json_decref(rec);
	free_lines(&l);

	/* the same while the server runs: the cached head no longer fits
	 * the file, so the tail is read again */
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(truncate(p, st.st_size - 3), 0);
	assert_int_equal(
	    audit_append(data, "s-torn", "agent", "exec", NULL, NULL), 0);
	res = verify("s-torn");
	assert_true(res.ok);
	assert_int_equal(res.records, 7);
	free(p);
}

static void test_torn_only_record(void **state)
{
	(void)state;
	char dir[PATH_MAX + 8];
	snprintf(dir, sizeof(dir), "%s/audit", data);
	assert_int_equal(mkdir(dir, 0700), 0);
	char *p = log_path("s-torn1");
	FILE *f = fopen(p, "w");
	fputs("{\"actor\":\"system\",\"deta", f);
	fclose(f);
	assert_int_equal(
	    audit_append(data, "s-torn1", "system", "state", NULL, NULL), 0);
	struct audit_verify_result res = verify("s-torn1");
	assert_true(res.ok);
	assert_int_equal(res.records, 2);
	free(p);
}

static void test_unreadable_last_record_refused(void **state)
{
	(void)state;
	append_n("s-bad", 3);
	char *p = log_path("s-bad");
	FILE *f = fopen(p, "a");
	fputs("not json at all\n", f);
	fclose(f);
	audit_cache_reset();
	struct wr_error *err = NULL;
	assert_int_equal(
	    audit_append(data, "s-bad", "system", "state", NULL, &err),
	    -EBADMSG);
	assert_non_null(strstr(err->msg, "unreadable"));
	wr_error_free(err);
	free(p);
}

static void test_log_replaced_starts_over(void **state)
{
	(void)state;
	append_n("s-gone", 3);
	char *p = log_path("s-gone");
	assert_int_equal(unlink(p), 0);
	append_n("s-gone", 2);
	struct audit_verify_result res = verify("s-gone");
	assert_true(res.ok);
	assert_int_equal(res.records, 2);
	free(p);
}

/* ---- concurrency and many sessions -------------------------------------- */

#define THREADS 4
#define PER_THREAD 200

static void *appender(void *arg)
{
	long t = (long)arg;
	for (int i = 0; i < PER_THREAD; i++) {
		json_t *d = json_pack("{s:i, s:i}", "thread", (int)t, "i", i);
		if (audit_append(data, "s-conc", t % 2 ? "agent" : "system",
				 "tool_call", d, NULL) < 0)
			return (void *)1;
		json_decref(d);
	}
	return NULL;
}

static void test_concurrent_appends(void **state)
{
	(void)state;
	pthread_t th[THREADS];
	for (long t = 0; t < THREADS; t++)
		assert_int_equal(
		    pthread_create(&th[t], NULL, appender, (void *)t), 0);
	for (int t = 0; t < THREADS; t++) {
		void *ret;
		pthread_join(th[t], &ret);
		assert_null(ret);
	}
	struct audit_verify_result res = verify("s-conc");
	assert_true(res.ok);
	assert_int_equal(res.records, THREADS * PER_THREAD);
}

/* Two writers that do not share a cache (two processes): flock and the
 * size check keep one chain. */
static void test_two_processes(void **state)
{
	(void)state;
	append_n("s-proc", 1);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < 100; i++)
			if (audit_append(data, "s-proc", "agent", "exec", NULL,
					 NULL) < 0)
				_exit(1);
		_exit(0);
	}
	for (int i = 0; i < 100; i++)
		assert_int_equal(
		    audit_append(data, "s-proc", "system", "state", NULL, NULL),
		    0);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	struct audit_verify_result res = verify("s-proc");
	assert_true(res.ok);
	assert_int_equal(res.records, 201);
}

static void test_many_sessions(void **state)
{
	(void)state;
	enum { SESSIONS = 300, ROUNDS = 3 };
	char id[32];
	for (int r = 0; r < ROUNDS; r++)
		for (int s = 0; s < SESSIONS; s++) {
			snprintf(id, sizeof(id), "s-many-%d", s);
			json_t *d = json_pack("{s:i}", "round", r);
			assert_int_equal(
			    audit_append(data, id, "system", "state", d, NULL),
			    0);
			json_decref(d);
		}
	for (int s = 0; s < SESSIONS; s++) {
		snprintf(id, sizeof(id), "s-many-%d", s);
		struct audit_verify_result res = verify(id);
		assert_true(res.ok);
		assert_int_equal(res.records, ROUNDS);
		assert_string_equal(res.session, id);
	}
}

/* ---- inputs and export -----------------------------------------------------
 */

static void test_bad_inputs(void **state)
{
	(void)state;
	static const char *const bad_ids[] = {"",	 "../x", "a/b",
					      ".hidden", "s x",	 NULL};
	for (size_t i = 0; bad_ids[i]; i++) {
		struct wr_error *err = NULL;
		assert_int_equal(audit_append(data, bad_ids[i], "system",
					      "state", NULL, &err),
				 -EINVAL);
		wr_error_free(err);
		assert_null(audit_path(data, bad_ids[i]));
	}
	static const char *const bad_actors[] = {"", "root",
						 "user:", "user:a\nb", "Agent"};
	for (size_t i = 0; i < sizeof(bad_actors) / sizeof(char *); i++)
		assert_int_equal(audit_append(data, "s-in", bad_actors[i],
					      "state", NULL, NULL),
				 -EINVAL);
	static const char *const bad_kinds[] = {"", "State", "a-b", "a b"};
	for (size_t i = 0; i < sizeof(bad_kinds) / sizeof(char *); i++)
		assert_int_equal(audit_append(data, "s-in", "system",
					      bad_kinds[i], NULL, NULL),
				 -EINVAL);
	json_t *arr = json_array();
	assert_int_equal(
	    audit_append(data, "s-in", "system", "state", arr, NULL), -EINVAL);
	json_decref(arr);
	/* a record over the cap */
	char *big = malloc(AUDIT_LINE_MAX);
	memset(big, 'x', AUDIT_LINE_MAX - 1);
	big[AUDIT_LINE_MAX - 1] = '\0';
	json_t *d = json_pack("{s:s}", "big", big);
	assert_int_equal(audit_append(data, "s-in", "system", "state", d, NULL),
			 -E2BIG);
	json_decref(d);
	free(big);
	/* nothing half-written */
	assert_int_equal(
	    audit_append(data, "s-in", "user:bob", "state", NULL, NULL), 0);
	struct audit_verify_result res = verify("s-in");
	assert_true(res.ok);
	assert_int_equal(res.records, 1);
}

static void test_export_is_verbatim(void **state)
{
	(void)state;
	append_n("s-exp", 12);
	char *p = log_path("s-exp");
	char out[PATH_MAX + 16];
	snprintf(out, sizeof(out), "%s/export.jsonl", data);
	int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(audit_export(p, fd, NULL), 0);
	close(fd);
	char *a = NULL, *b = NULL;
	size_t na = 0, nb = 0;
	FILE *fa = fopen(p, "r"), *fb = fopen(out, "r");
	na = (size_t)getdelim(&a, &na, '\0', fa);
	nb = (size_t)getdelim(&b, &nb, '\0', fb);
	fclose(fa);
	fclose(fb);
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, na);
	free(a);
	free(b);
	free(p);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup(f, setup)
	const struct CMUnitTest tests[] = {
	    T(test_chain_verifies),
	    T(test_empty_details_and_empty_log),
	    T(test_edit_one_byte_in_details),
	    T(test_edit_kind_actor_time),
	    T(test_edit_whitespace_is_seen),
	    T(test_delete_line),
	    T(test_swap_lines),
	    T(test_delete_and_renumber),
	    T(test_splice_from_other_log),
	    T(test_garbage_and_truncated_front),
	    T(test_cut_tail_needs_anchor),
	    T(test_torn_last_record_recovers),
	    T(test_torn_only_record),
	    T(test_unreadable_last_record_refused),
	    T(test_log_replaced_starts_over),
	    T(test_concurrent_appends),
	    T(test_two_processes),
	    T(test_many_sessions),
	    T(test_bad_inputs),
	    T(test_export_is_verbatim),
	};
#undef T
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

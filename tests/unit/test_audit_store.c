/* test_audit_store.c - the audit chain in the store (store.h's
 * audit_append, audit_list, audit_import; security/audit.h's
 * audit_store_*), on SQLite, and on PostgreSQL when WARREN_TEST_STORE
 * names a server (tests/run.sh's second pass): appends listed in order,
 * each record's prev the one before's hash, the walk intact and its head
 * the last hash, export as JSON Lines; an unknown session refused; a
 * fenced append with a stale epoch refused, writing nothing; appenders in
 * threads on two store handles (two connections, as two servers) making
 * one chain, never a fork; a record edited, deleted or reordered in the
 * table found by the walk at its line; the import of an older server's
 * log files, the same text and head, a broken one left where it is. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>
#include <libpq-fe.h>

#include "security/audit.h"
#include "store/store.h"
#include "teststore.h"

#include "testdb.h"

/* A session of a new repository. */
static void session_of(struct store *st, char sid[STORE_ID_MAX])
{
	char repo[STORE_ID_MAX];
	add_repo(st, "c-audit", repo);
	add_session(st, repo, sid);
}

static void append_n(struct store *st, const char *sid, int n)
{
	for (int i = 0; i < n; i++) {
		json_t *d = json_pack("{s:i}", "i", i);
		OK(audit_store_append(st, sid, 0, i % 2 ? "agent" : "system",
				      i % 2 ? "exec" : "state", d, &err_));
		json_decref(d);
	}
}

static struct audit_verify_result walk(struct store *st, const char *sid)
{
	struct audit_verify_result res;
	OK(audit_store_walk(st, sid, NULL, NULL, &res, &err_));
	return res;
}

static void test_append_and_list(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char sid[STORE_ID_MAX];
	session_of(st, sid);

	/* a session with no record yet: an empty chain */
	struct store_audit_record *v = NULL;
	size_t n = 9;
	OK(st->ops->audit_list(st, sid, 0, 0, &v, &n, &err_));
	assert_int_equal(n, 0);
	store_audit_records_free(v, n);

	append_n(st, sid, 5);
	OK(st->ops->audit_list(st, sid, 0, 0, &v, &n, &err_));
	assert_int_equal(n, 5);
	char prev[AUDIT_HASH_HEX + 1];
	memset(prev, '0', AUDIT_HASH_HEX);
	prev[AUDIT_HASH_HEX] = '\0';
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(v[i].seq, (int64_t)i + 1);
		json_t *rec = json_loads(v[i].record, 0, NULL);
		assert_non_null(rec);
		assert_int_equal(
		    json_integer_value(json_object_get(rec, "seq")),
		    (json_int_t)i + 1);
		assert_string_equal(
		    json_string_value(json_object_get(rec, "session")), sid);
		/* the chain: each prev the hash before it */
		assert_string_equal(
		    json_string_value(json_object_get(rec, "prev")), prev);
		assert_string_equal(
		    json_string_value(json_object_get(rec, "hash")), v[i].hash);
		memcpy(prev, v[i].hash, sizeof(prev));
		json_decref(rec);
	}
	store_audit_records_free(v, n);

	/* a page after seq 3 */
	OK(st->ops->audit_list(st, sid, 3, 1, &v, &n, &err_));
	assert_int_equal(n, 1);
	assert_int_equal(v[0].seq, 4);
	store_audit_records_free(v, n);

	struct audit_verify_result res = walk(st, sid);
	assert_true(res.ok);
	assert_int_equal(res.records, 5);
	assert_string_equal(res.head, prev);
	assert_string_equal(res.session, sid);

	/* export: one line per record, the stored text */
	FILE *f = tmpfile();
	assert_non_null(f);
	OK(audit_store_export(st, sid, fileno(f), &err_));
	rewind(f);
	char line[4096];
	int lines = 0;
	while (fgets(line, sizeof(line), f)) {
		lines++;
		assert_non_null(strchr(line, '\n'));
	}
	fclose(f);
	assert_int_equal(lines, 5);

	/* what audit_append refuses, the store's chain refuses too */
	FAILS(EINVAL,
	      audit_store_append(st, sid, 0, "root", "state", NULL, &err_));
	FAILS(EINVAL, audit_store_append(st, sid, 0, "system", "Bad Kind", NULL,
					 &err_));
	assert_int_equal(walk(st, sid).records, 5);
	store_close(st);
}

static void test_unknown_session(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	FAILS(ENOENT, audit_store_append(st, "s-none", 0, "system", "state",
					 NULL, &err_));
	struct store_audit_record *v = NULL;
	size_t n = 0;
	FAILS(ENOENT, st->ops->audit_list(st, "s-none", 0, 0, &v, &n, &err_));
	struct audit_verify_result res;
	FAILS(ENOENT, audit_store_walk(st, "s-none", NULL, NULL, &res, &err_));
	/* a known session without records: no chain to walk either */
	char sid[STORE_ID_MAX];
	session_of(st, sid);
	FAILS(ENOENT, audit_store_walk(st, sid, NULL, NULL, &res, &err_));
	store_close(st);
}

static void test_fenced_append(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char sid[STORE_ID_MAX];
	session_of(st, sid);
	struct store_worker w = {.id = "w-a", .started_ms = 100};
	OK(st->ops->worker_register(st, &w, &err_));
	struct store_claim *c = NULL;
	size_t n = 0;
	OK(st->ops->session_claim(st, "w-a", sid, 200, 1000, 0, &c, &n, &err_));
	assert_int_equal(n, 1);
	int64_t epoch = c[0].epoch;
	store_claims_free(c, n);
	assert_true(epoch >= 1);

	OK(audit_store_append(st, sid, epoch, "system", "state", NULL, &err_));
	FAILS(ESTALE, audit_store_append(st, sid, epoch + 1, "system", "state",
					 NULL, &err_));
	FAILS(ESTALE, audit_store_append(st, sid, epoch - 1 ? epoch - 1 : 99,
					 "system", "state", NULL, &err_));
	/* nothing written by the refused ones; epoch 0 is no check */
	assert_int_equal(walk(st, sid).records, 1);
	OK(audit_store_append(st, sid, 0, "system", "state", NULL, &err_));
	struct audit_verify_result res = walk(st, sid);
	assert_true(res.ok);
	assert_int_equal(res.records, 2);
	store_close(st);
}

/* ---- two appenders -------------------------------------------------------
 */

#define APPENDERS 4
#define APPENDS 40

struct appender {
	struct store *st;
	const char *sid;
	int failures;
};

static void *append_loop(void *arg)
{
	struct appender *a = arg;
	for (int i = 0; i < APPENDS; i++) {
		struct wr_error *err = NULL;
		if (audit_store_append(a->st, a->sid, 0, "agent", "exec", NULL,
				       &err) < 0)
			a->failures++;
		wr_error_free(err);
	}
	return NULL;
}

static void test_concurrent_appenders(void **state)
{
	(void)state;
	/* two handles: two connections (pools), as two servers would have */
	struct store *st[2] = {open_db("w.db"), open_db("w.db")};
	char sid[STORE_ID_MAX];
	session_of(st[0], sid);
	pthread_t t[APPENDERS];
	struct appender a[APPENDERS];
	for (int i = 0; i < APPENDERS; i++) {
		a[i] = (struct appender){.st = st[i % 2], .sid = sid};
		assert_int_equal(
		    pthread_create(&t[i], NULL, append_loop, &a[i]), 0);
	}
	for (int i = 0; i < APPENDERS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(a[i].failures, 0);
	}
	/* one chain: every seq once, each prev its predecessor's hash */
	struct audit_verify_result res = walk(st[1], sid);
	assert_true(res.ok);
	assert_int_equal(res.records, APPENDERS * APPENDS);
	store_close(st[0]);
	store_close(st[1]);
}

/* ---- tampering in the table ---------------------------------------------
 */

static void assert_broken(struct store *st, const char *sid, uint64_t line,
			  const char *problem)
{
	struct audit_verify_result res = walk(st, sid);
	assert_false(res.ok);
	assert_int_equal(res.line, line);
	assert_int_equal(res.records, line - 1);
	if (!strstr(res.problem, problem))
		fail_msg("problem '%s', want '%s'", res.problem, problem);
}

static void sqlf(const char *fmt, const char *sid)
{
	char sql[1024];
	snprintf(sql, sizeof(sql), fmt, sid);
	raw_sql("w.db", sql);
}

static void test_tamper(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], edited[STORE_ID_MAX], deleted[STORE_ID_MAX],
	    swapped[STORE_ID_MAX], rehashed[STORE_ID_MAX];
	add_repo(st, "c-tamper", repo);
	add_session(st, repo, edited);
	add_session(st, repo, deleted);
	add_session(st, repo, swapped);
	add_session(st, repo, rehashed);
	append_n(st, edited, 5);
	append_n(st, deleted, 5);
	append_n(st, swapped, 5);
	append_n(st, rehashed, 5);

	/* one byte of record 3's text */
	sqlf("UPDATE audit_records SET record = replace(record, "
	     "'\"i\":2', '\"i\":7') WHERE session_id = '%s' AND seq = 3",
	     edited);
	assert_broken(st, edited, 3, "line 3: hash mismatch (edited?)");

	/* a record in the middle deleted */
	sqlf("DELETE FROM audit_records WHERE session_id = '%s' AND seq = 2",
	     deleted);
	assert_broken(st, deleted, 2,
		      "line 2: seq 3 follows 1 (deleted or reordered?)");

	/* two records swapped (their seq columns: the store's order) */
	sqlf("UPDATE audit_records SET seq = -2 WHERE session_id = '%s' AND "
	     "seq = 2",
	     swapped);
	sqlf("UPDATE audit_records SET seq = 2 WHERE session_id = '%s' AND "
	     "seq = 3",
	     swapped);
	sqlf("UPDATE audit_records SET seq = 3 WHERE session_id = '%s' AND "
	     "seq = -2",
	     swapped);
	assert_broken(st, swapped, 2, "line 2: seq 3 follows 1");

	/* the head's hash column edited (the record's text intact): the
	 * chain cannot go on from it, and nothing is appended */
	sqlf("UPDATE audit_records SET hash = replace(hash, substr(hash, 1, "
	     "1), 'x') WHERE session_id = '%s' AND seq = 5",
	     rehashed);
	FAILS(EBADMSG, audit_store_append(st, rehashed, 0, "system", "state",
					  NULL, &err_));
	struct audit_verify_result res = walk(st, rehashed);
	assert_true(res.ok);
	assert_int_equal(res.records, 5);
	store_close(st);
}

/* ---- the import of an older server's files ------------------------------
 */

static void test_import(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], good[STORE_ID_MAX], broken[STORE_ID_MAX];
	add_repo(st, "c-import", repo);
	add_session(st, repo, good);
	add_session(st, repo, broken);
	const char *data = P("data");
	audit_cache_reset();
	for (int i = 0; i < 4; i++) {
		OK(audit_append(data, good, "system", "state", NULL, &err_));
		OK(audit_append(data, broken, "agent", "exec", NULL, &err_));
		/* a log of a session this store does not know */
		OK(audit_append(data, "s-elsewhere", "system", "state", NULL,
				&err_));
	}
	char *bp = audit_path(data, broken);
	int fd = open(bp, O_WRONLY | O_APPEND);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "{\"junk\":1}\n", 11), 11);
	close(fd);
	char *gp = audit_path(data, good);
	struct audit_verify_result file;
	OK(audit_verify(gp, &file, &err_));
	assert_true(file.ok);

	size_t skipped = 0;
	struct wr_error *err = NULL;
	assert_int_equal(audit_store_import_dir(st, data, &skipped, &err), 1);
	assert_int_equal(skipped, 2);
	assert_non_null(err);
	wr_error_free(err);
	/* the same chain, the same head; the file renamed */
	struct audit_verify_result res = walk(st, good);
	assert_true(res.ok);
	assert_int_equal(res.records, 4);
	assert_string_equal(res.head, file.head);
	assert_int_equal(access(gp, F_OK), -1);
	char done[4096];
	snprintf(done, sizeof(done), "%s.imported", gp);
	assert_int_equal(access(done, F_OK), 0);
	/* the broken one stays a file, not in the store */
	assert_int_equal(access(bp, F_OK), 0);
	FAILS(ENOENT, audit_store_walk(st, broken, NULL, NULL, &res, &err_));
	/* appends go on from the imported head */
	OK(audit_store_append(st, good, 0, "system", "state", NULL, &err_));
	res = walk(st, good);
	assert_true(res.ok);
	assert_int_equal(res.records, 5);
	/* again: nothing more to import; a chain present is not replaced */
	assert_int_equal(audit_store_import_dir(st, data, &skipped, NULL), 0);
	struct store_audit_record one = {.seq = 1, .record = (char *)"{}"};
	memset(one.hash, 'a', STORE_AUDIT_HASH_LEN);
	FAILS(EEXIST, st->ops->audit_import(st, good, &one, 1, &err_));
	free(bp);
	free(gp);
	store_close(st);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_append_and_list), T(test_unknown_session),
	    T(test_fenced_append),   T(test_concurrent_appenders),
	    T(test_tamper),	     T(test_import),
	};
#undef T
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

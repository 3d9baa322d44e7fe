/* test_db.c - the control plane's store (src/store/store.h), on SQLite,
 * and on PostgreSQL when WARREN_TEST_STORE names a server (tests/run.sh
 * runs it a second time against one of its own, tests/pg_server.sh): the
 * lifecycle table, ids, open and migrations (reopen, an older and a newer
 * schema, two opens at once, a file that is not a database, a URL that
 * names no server), every call's happy path and its -ENOENT, -EEXIST,
 * -ESTALE and -EPERM paths, the atomicity of a transition and its event,
 * gapless event seqs under concurrent appends (threads of one handle, and
 * two handles as two processes would be), pagination, token expiry, and
 * allocation failure at every step of the reading calls.
 *
 * SQLite's databases live in a scratch directory under /tmp, removed at
 * the end with nftw; PostgreSQL's are one database per test and name
 * (teststore.h), dropped after each test. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
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
#include <sqlite3.h>

#include "store/event_kind.h"
#include "store/store.h"
#include "teststore.h"
#include "util/alloc.h"
#include "util/error.h"

#include "testdb.h"

/* ---- lifecycle, ids ----------------------------------------------------- */

static void test_state_names_and_lifecycle(void **state)
{
	(void)state;
	for (int i = 0; i < SESSION_STATE_MAX; i++) {
		const char *name = session_state_name(i);
		assert_non_null(name);
		assert_int_equal(session_state_parse(name), i);
	}
	assert_null(session_state_name(SESSION_STATE_MAX));
	assert_null(session_state_name((enum session_state) - 1));
	assert_string_equal(session_state_name(SESSION_REVIEW), "review");
	assert_int_equal(session_state_parse("Queued"), -EINVAL);
	assert_int_equal(session_state_parse(""), -EINVAL);
	assert_int_equal(session_state_parse(NULL), -EINVAL);

	const enum session_state terminal[] = {
	    SESSION_PUSHED, SESSION_REJECTED, SESSION_FAILED, SESSION_CANCELLED,
	    SESSION_EXPIRED};
	int n_terminal = 0;
	for (int i = 0; i < SESSION_STATE_MAX; i++)
		n_terminal += session_state_terminal(i);
	assert_int_equal(n_terminal, 5);
	for (size_t i = 0; i < 5; i++) {
		assert_true(session_state_terminal(terminal[i]));
		for (int to = 0; to < SESSION_STATE_MAX; to++)
			assert_false(
			    session_transition_allowed(terminal[i], to));
	}
	/* the main line */
	const enum session_state line[] = {
	    SESSION_QUEUED,    SESSION_PROVISIONING, SESSION_RUNNING,
	    SESSION_VERIFYING, SESSION_REVIEW,	     SESSION_APPROVED,
	    SESSION_PUSHED};
	for (size_t i = 0; i + 1 < 7; i++) {
		assert_true(session_transition_allowed(line[i], line[i + 1]));
		assert_false(session_transition_allowed(line[i + 1], line[i]));
	}
	assert_true(
	    session_transition_allowed(SESSION_REVIEW, SESSION_REJECTED));
	assert_true(session_transition_allowed(SESSION_REVIEW, SESSION_QUEUED));
	assert_true(
	    session_transition_allowed(SESSION_REVIEW, SESSION_RUNNING));
	assert_true(
	    session_transition_allowed(SESSION_RUNNING, SESSION_REVIEW));
	assert_true(
	    session_transition_allowed(SESSION_INTERRUPTED, SESSION_QUEUED));
	assert_true(
	    session_transition_allowed(SESSION_INTERRUPTED, SESSION_FAILED));
	assert_true(
	    session_transition_allowed(SESSION_REVIEW, SESSION_CANCELLED));
	assert_false(
	    session_transition_allowed(SESSION_REVIEW, SESSION_FAILED));
	assert_true(
	    session_transition_allowed(SESSION_RUNNING, SESSION_INTERRUPTED));
	assert_true(session_transition_allowed(SESSION_INTERRUPTED,
					       SESSION_PROVISIONING));
	assert_true(
	    session_transition_allowed(SESSION_QUEUED, SESSION_CANCELLED));
	assert_true(
	    session_transition_allowed(SESSION_VERIFYING, SESSION_FAILED));
	assert_false(
	    session_transition_allowed(SESSION_QUEUED, SESSION_INTERRUPTED));
	assert_false(
	    session_transition_allowed(SESSION_QUEUED, SESSION_RUNNING));
	assert_false(
	    session_transition_allowed(SESSION_RUNNING, SESSION_RUNNING));
	assert_false(
	    session_transition_allowed(SESSION_REVIEW, SESSION_PUSHED));
	assert_false(
	    session_transition_allowed(SESSION_STATE_MAX, SESSION_QUEUED));
	assert_false(session_transition_allowed(SESSION_QUEUED, -1));
}

/* The event kinds' names are a contract (stored in the events table, sent
 * over the API): the table holds exactly these, each round-trips, nothing
 * else parses, and the store writes each kind under its name. */
static void test_event_kinds(void **state)
{
	(void)state;
	static const char *const contract[] = {
	    "state",  "message", "phase",      "snapshot",
	    "output", "turn",	 "transcript", "usage",
	    "budget", "verify",	 "result",     "checkpoint",
	    "retry",  "sandbox", "egress",     "broker", "model_call"};
	size_t n_contract = sizeof(contract) / sizeof(contract[0]);
	assert_int_equal(EVENT_KIND_MAX, n_contract);
	for (size_t i = 0; i < n_contract; i++) {
		int k = event_kind_parse(contract[i]);
		assert_true(k >= 0 && k < EVENT_KIND_MAX);
		assert_string_equal(event_kind_name(k), contract[i]);
	}
	for (int i = 0; i < EVENT_KIND_MAX; i++) {
		const char *name = event_kind_name(i);
		assert_non_null(name);
		assert_int_equal(event_kind_parse(name), i);
	}
	assert_string_equal(event_kind_name(EVENT_TRANSCRIPT), "transcript");
	assert_null(event_kind_name(EVENT_KIND_MAX));
	assert_null(event_kind_name((enum event_kind) - 1));
	assert_int_equal(event_kind_parse("State"), -EINVAL);
	assert_int_equal(event_kind_parse("state "), -EINVAL);
	assert_int_equal(event_kind_parse("outputs"), -EINVAL);
	assert_int_equal(event_kind_parse("nonsense"), -EINVAL);
	assert_int_equal(event_kind_parse(""), -EINVAL);
	assert_int_equal(event_kind_parse(NULL), -EINVAL);

	struct store *st = open_db("kinds.db");
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_session(st, repo, sid); /* event 1: state */
	for (int i = 0; i < EVENT_KIND_MAX; i++)
		assert_int_equal(
		    OK(st->ops->event_append(st, sid, i, NULL, &err_)), i + 2);
	FAILS(EINVAL, st->ops->event_append(st, sid, (enum event_kind) - 1,
					    NULL, &err_));
	struct store_event *ev = NULL;
	size_t n = 0;
	OK(st->ops->event_list(st, sid, 1, 0, &ev, &n, &err_));
	assert_int_equal(n, EVENT_KIND_MAX);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(ev[i].kind, event_kind_name(i));
	store_events_free(ev, n);
	store_close(st);
}

static void test_new_id(void **state)
{
	(void)state;
	char a[STORE_ID_MAX], b[STORE_ID_MAX];
	store_new_id("s-", a);
	store_new_id("s-", b);
	assert_int_equal(strlen(a), 18);
	assert_memory_equal(a, "s-", 2);
	assert_int_equal(strspn(a + 2, "0123456789abcdef"), 16);
	assert_string_not_equal(a, b);
	store_new_id(NULL, a);
	assert_int_equal(strlen(a), 16);
	/* a prefix too long for the buffer is cut, never overflows */
	char prefix[STORE_ID_MAX + 10];
	memset(prefix, 'p', sizeof(prefix) - 1);
	prefix[sizeof(prefix) - 1] = '\0';
	store_new_id(prefix, a);
	assert_int_equal(strlen(a), STORE_ID_MAX - 1);
	assert_int_equal(strspn(a + STORE_ID_MAX - 17, "0123456789abcdef"), 16);
	int64_t now = store_now_ms();
	assert_true(now > 1600000000000LL);
}

/* ---- open and migrations ------------------------------------------------ */

static void test_open_creates_migrates_and_reopens(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	assert_string_equal(store_backend_name(st),
			    teststore_pg() ? "postgres" : "sqlite");
	int version = store_schema_version(st);
	assert_true(version >= 1);
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_session(st, repo, sid);
	store_close(st);

	/* the schema is recorded, each migration once */
	assert_int_equal(teststore_int(U("w.db"), "SELECT MAX(version) "
						  "FROM schema_version"),
			 version);
	assert_int_equal(
	    teststore_int(U("w.db"), "SELECT COUNT(*) FROM schema_version"),
	    version);
	if (!teststore_pg()) {
		/* WAL is a property of the file */
		sqlite3 *db = NULL;
		assert_int_equal(sqlite3_open(P("w.db"), &db), SQLITE_OK);
		sqlite3_stmt *q = NULL;
		assert_int_equal(
		    sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL),
		    SQLITE_OK);
		assert_int_equal(sqlite3_step(q), SQLITE_ROW);
		assert_string_equal((const char *)sqlite3_column_text(q, 0),
				    "wal");
		sqlite3_finalize(q);
		sqlite3_close(db);
	}

	/* reopen: nothing migrates twice, the data is there */
	st = open_db("w.db");
	assert_int_equal(store_schema_version(st), version);
	struct store_repo r;
	OK(st->ops->repo_get(st, "c-hello", &r, &err_));
	assert_string_equal(r.id, repo);
	store_repo_clear(&r);
	assert_int_equal(state_of(st, sid), SESSION_QUEUED);
	assert_int_equal(count_events(st, sid), 1);
	store_close(st);
}

static void test_open_refuses_newer_schema(void **state)
{
	(void)state;
	store_close(open_db("new.db"));
	raw_sql("new.db", "INSERT INTO schema_version (version, applied_ms) "
			  "VALUES (999, 0)");
	struct wr_error *err = NULL;
	assert_null(store_open(U("new.db"), &err));
	assert_non_null(err);
	assert_int_equal(err->errnum, ENOTSUP);
	assert_non_null(strstr(err->msg, "999"));
	assert_non_null(strstr(err->msg, "newer"));
	wr_error_free(err);
}

static void test_open_errors(void **state)
{
	(void)state;
	ONLY_SQLITE();
	/* not a database */
	int fd = open(P("junk.db"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	char junk[4096];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = "not a database\n"[i % 15];
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	struct wr_error *err = NULL;
	assert_null(store_open_sqlite(P("junk.db"), &err));
	assert_non_null(err);
	assert_int_equal(err->errnum, EIO);
	assert_non_null(strstr(err->msg, "not a database"));
	assert_non_null(strstr(err->msg, "junk.db"));
	wr_error_free(err);

	/* a directory that does not exist */
	err = NULL;
	assert_null(store_open_sqlite(P("missing/w.db"), &err));
	assert_non_null(err);
	assert_int_equal(err->errnum, ENOENT);
	assert_non_null(strstr(err->msg, "missing/w.db"));
	wr_error_free(err);

	err = NULL;
	assert_null(store_open_sqlite("", &err));
	assert_int_equal(err->errnum, EINVAL);
	wr_error_free(err);
}

static void test_open_in_memory(void **state)
{
	(void)state;
	ONLY_SQLITE();
	struct wr_error *err = NULL;
	struct store *st = store_open_sqlite(":memory:", &err);
	if (!st)
		fail_err("open :memory:", -1, err);
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX];
	add_repo(st, "mem", repo);
	add_session(st, repo, sid);
	assert_int_equal(state_of(st, sid), SESSION_QUEUED);
	store_close(st);
}

/* A database four versions behind (migrations 7, 6, 5 and 4 undone) is brought
 * up to date at open, its data kept; opening again changes nothing. */
static void test_open_migrates_older_schema(void **state)
{
	(void)state;
	struct store *st = open_db("old.db");
	int latest = store_schema_version(st);
	assert_true(latest >= 5);
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_session(st, repo, sid);
	store_close(st);
	raw_sql("old.db", "DROP TABLE build_claims;"
			  "DROP TABLE secrets;"
			  "DROP TABLE audit_records;"
			  "DROP TABLE eval_items;"
			  "DROP TABLE eval_batches;"
			  "DROP TABLE eval_attempts;"
			  "DROP TABLE eval_runs;"
			  "DROP TABLE build_queue;"
			  "DROP TABLE workers;"
			  "DROP INDEX sessions_by_worker;"
			  "DROP INDEX sessions_by_lease;"
			  "ALTER TABLE sessions DROP COLUMN worker_id;"
			  "ALTER TABLE sessions DROP COLUMN lease_epoch;"
			  "ALTER TABLE sessions DROP COLUMN lease_expires_ms;"
			  "ALTER TABLE repositories DROP COLUMN removed_ms;"
			  "DELETE FROM schema_version WHERE version >= 4");
	assert_int_equal(teststore_int(U("old.db"), "SELECT MAX(version) "
						    "FROM schema_version"),
			 3);

	st = open_db("old.db");
	assert_int_equal(store_schema_version(st), latest);
	assert_int_equal(state_of(st, sid), SESSION_QUEUED);
	/* migration 4's column is back: a repository can be removed */
	char other[STORE_ID_MAX];
	add_repo(st, "spare", other);
	OK(st->ops->repo_remove(st, other, store_now_ms(), &err_));
	/* and migration 5's: the old session has no lease, and can get one */
	struct store_session got;
	OK(st->ops->session_get(st, sid, &got, &err_));
	assert_null(got.worker_id);
	assert_int_equal(got.lease_epoch, 0);
	assert_int_equal(got.lease_expires_ms, 0);
	store_session_clear(&got);
	struct store_worker w = {.id = "w-old"};
	OK(st->ops->worker_register(st, &w, &err_));
	struct store_claim *cl = NULL;
	size_t n = 0;
	assert_int_equal(OK(st->ops->session_claim(st, "w-old", NULL, 1000, 100,
						   1, &cl, &n, &err_)),
			 1);
	assert_string_equal(cl[0].id, sid);
	assert_int_equal(cl[0].epoch, 1);
	store_claims_free(cl, n);
	/* and migration 7's: an eval run can be published */
	struct store_eval_run er = {.id = "e-old", .user = "u",
				    .run_json = "{}"};
	OK(st->ops->eval_run_put(st, &er, &err_));
	/* and migration 8's: the old session's audit chain is in the store */
	struct store_audit_record rec = {.seq = 1, .record = (char *)"{}"};
	memset(rec.hash, 'a', STORE_AUDIT_HASH_LEN);
	OK(st->ops->audit_import(st, sid, &rec, 1, &err_));
	/* and migration 9's: a secret's file can be stored */
	unsigned char byte = 1;
	struct store_secret sec = {.name = "OLD", .file = &byte, .file_len = 1};
	OK(st->ops->secret_put(st, &sec, &err_));
	/* and migration 10's: a repository's build can be claimed */
	bool claimed = false;
	OK(st->ops->build_claim(st, repo, "w-old", 1000, 100, &claimed, NULL,
				&err_));
	assert_true(claimed);
	store_close(st);
	st = open_db("old.db");
	assert_int_equal(store_schema_version(st), latest);
	store_close(st);
	assert_int_equal(teststore_int(U("old.db"), "SELECT COUNT(*) "
						    "FROM schema_version"),
			 latest);
}

#define OPENERS 4

struct opener {
	const char *url;
	struct store *st;
	char error[256];
};

static void *open_one(void *arg)
{
	struct opener *o = arg;
	struct wr_error *err = NULL;
	o->st = store_open(o->url, &err);
	if (!o->st)
		snprintf(o->error, sizeof(o->error), "%s",
			 err ? err->msg : "?");
	wr_error_free(err);
	return NULL;
}

/* Servers starting at once on one new database: each migration is
 * applied once, every open succeeds. */
static void test_concurrent_opens(void **state)
{
	(void)state;
	const char *url = U("race.db");
	struct opener o[OPENERS];
	pthread_t t[OPENERS];
	for (int i = 0; i < OPENERS; i++) {
		o[i] = (struct opener){.url = url};
		assert_int_equal(pthread_create(&t[i], NULL, open_one, &o[i]),
				 0);
	}
	for (int i = 0; i < OPENERS; i++)
		pthread_join(t[i], NULL);
	int version = -1;
	for (int i = 0; i < OPENERS; i++) {
		if (!o[i].st)
			fail_msg("open %d: %s", i, o[i].error);
		if (version < 0)
			version = store_schema_version(o[i].st);
		assert_int_equal(store_schema_version(o[i].st), version);
	}
	for (int i = 0; i < OPENERS; i++)
		store_close(o[i].st);
	assert_int_equal(
	    teststore_int(url, "SELECT COUNT(*) FROM schema_version"), version);
	assert_int_equal(teststore_int(url, "SELECT value FROM counters "
					    "WHERE name = 'queue_seq'"),
			 0);
}

/* The URL of a store: which backend it names, and what an error shows of
 * it (never the password). Needs no server: nothing listens on a socket
 * in a directory that does not exist. */
static void test_open_urls(void **state)
{
	(void)state;
	char *shown = store_url_redact("postgres://alice:s3cret@db:5432/w");
	assert_string_equal(shown, "postgres://alice:***@db:5432/w");
	free(shown);
	shown = store_url_redact("postgresql://a@/w?host=/x&password=p%40ss"
				 "&sslmode=require");
	assert_string_equal(shown, "postgresql://a@/w?host=/x&password=***"
				   "&sslmode=require");
	free(shown);
	shown = store_url_redact("postgresql://alice@db/w");
	assert_string_equal(shown, "postgresql://alice@db/w");
	free(shown);
	shown = store_url_redact("/var/lib/warren/warren.db");
	assert_string_equal(shown, "/var/lib/warren/warren.db");
	free(shown);
	assert_true(store_url_is_pg("postgres://x"));
	assert_true(store_url_is_pg("postgresql:///w"));
	assert_false(store_url_is_pg("sqlite:/x.db"));
	assert_false(store_url_is_pg("/srv/postgres://x"));

	/* no server there: the error names the URL, not its password */
	struct wr_error *err = NULL;
	assert_null(store_open("postgres://alice:s3cret@/warren?host="
			       "/nonexistent-warren-dir&port=5432",
			       &err));
	assert_non_null(err);
	assert_int_equal(err->errnum, EIO);
	assert_non_null(strstr(err->msg, "postgres://alice:***@/warren"));
	assert_null(strstr(err->msg, "s3cret"));
	wr_error_free(err);
	err = NULL;
	assert_null(store_open("postgresql:///warren?host=/nonexistent-warren"
			       "-dir&password=hunter2",
			       &err));
	assert_non_null(strstr(err->msg, "password=***"));
	assert_null(strstr(err->msg, "hunter2"));
	wr_error_free(err);
	/* not a URI libpq reads: bad input, the password still hidden */
	err = NULL;
	assert_null(store_open("postgresql://alice:p%zz@/warren", &err));
	assert_int_equal(err->errnum, EINVAL);
	assert_true(err->bad_input);
	assert_null(strstr(err->msg, "p%zz"));
	wr_error_free(err);
	err = NULL;
	assert_null(store_open("mysql://db/warren", &err));
	assert_int_equal(err->errnum, EINVAL);
	assert_non_null(strstr(err->msg, "mysql"));
	wr_error_free(err);
	err = NULL;
	assert_null(store_open("", &err));
	assert_int_equal(err->errnum, EINVAL);
	wr_error_free(err);

	/* sqlite:PATH and a plain path are SQLite's */
	char url[PATH_MAX + 8];
	snprintf(url, sizeof(url), "sqlite:%s", P("named.db"));
	err = NULL;
	struct store *st = store_open(url, &err);
	if (!st)
		fail_err("store_open sqlite:", -1, err);
	assert_string_equal(store_backend_name(st), "sqlite");
	store_close(st);
	assert_int_equal(access(P("named.db"), F_OK), 0);
}

/* ---- tokens, repositories, snapshots ------------------------------------ */

/* The snapshot build queue: one entry per repository, oldest first, taken
 * once; what is queued survives a reopen (a restart). */
static void test_build_queue(void **state)
{
	(void)state;
	struct store *st = open_db("queue.db");
	char a[STORE_ID_MAX], b[STORE_ID_MAX];
	add_repo(st, "qa", a);
	add_repo(st, "qb", b);
	struct wr_error *err = NULL;
	bool added = false;
	assert_int_equal(st->ops->build_enqueue(st, b, 100, &added, &err), 0);
	assert_true(added);
	assert_int_equal(st->ops->build_enqueue(st, a, 200, &added, &err), 0);
	assert_true(added);
	/* queued already: not twice, its place kept */
	assert_int_equal(st->ops->build_enqueue(st, b, 300, &added, &err), 0);
	assert_false(added);
	char **ids = NULL;
	size_t n = 0;
	assert_int_equal(st->ops->build_queue_list(st, &ids, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(ids[0], b);
	assert_string_equal(ids[1], a);
	store_strv_free(ids, n);
	store_close(st);
	st = open_db("queue.db");
	char *got = NULL;
	assert_int_equal(st->ops->build_dequeue(st, &got, &err), 0);
	assert_string_equal(got, b);
	free(got);
	bool removed = false;
	assert_int_equal(st->ops->build_unqueue(st, b, &removed, &err), 0);
	assert_false(removed);
	assert_int_equal(st->ops->build_unqueue(st, a, &removed, &err), 0);
	assert_true(removed);
	assert_int_equal(st->ops->build_dequeue(st, &got, &err), -ENOENT);
	assert_null(got);
	assert_null(err);
	/* no id: refused, nothing queued */
	assert_int_equal(st->ops->build_enqueue(st, "", 1, &added, &err),
			 -ENOENT);
	wr_error_free(err);
	err = NULL;
	assert_int_equal(st->ops->build_queue_list(st, &ids, &n, &err), 0);
	assert_int_equal(n, 0);
	store_strv_free(ids, n);
	store_close(st);
}

/* Secrets' files: the bytes put come back as they went in (NUL and high
 * bytes included), a put replaces, a delete leaves a tombstone that a
 * later put revives; bad rows are refused; all survives a reopen. */
static void test_secrets_store(void **state)
{
	(void)state;
	struct store *st = open_db("secrets.db");
	struct wr_error *err = NULL;
	unsigned char bytes[300];
	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (unsigned char)(i * 7);
	struct store_secret a = {.name = "NPM_TOKEN",
				 .file = bytes,
				 .file_len = sizeof(bytes),
				 .repos = "[\"app\"]",
				 .updated_ms = 100};
	struct store_secret b = {
	    .name = "B", .file = bytes, .file_len = 1, .updated_ms = 50};
	if (st->ops->secret_put(st, &a, &err) < 0)
		fail_err("secret_put", -1, err);
	assert_int_equal(st->ops->secret_put(st, &b, &err), 0);
	struct store_secret *v = NULL;
	size_t n = 0;
	assert_int_equal(st->ops->secret_list(st, &v, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(v[0].name, "B");
	assert_null(v[0].repos);
	assert_int_equal(v[0].file_len, 1);
	assert_string_equal(v[1].name, "NPM_TOKEN");
	assert_int_equal(v[1].file_len, sizeof(bytes));
	assert_memory_equal(v[1].file, bytes, sizeof(bytes));
	assert_string_equal(v[1].repos, "[\"app\"]");
	assert_int_equal(v[1].updated_ms, 100);
	assert_int_equal(v[1].deleted_ms, 0);
	store_secrets_free(v, n);

	/* replaced: new bytes, no list */
	a.file_len = 10;
	a.repos = NULL;
	a.updated_ms = 200;
	assert_int_equal(st->ops->secret_put(st, &a, &err), 0);
	bool deleted = false;
	assert_int_equal(st->ops->secret_delete(st, "B", 300, &deleted, &err),
			 0);
	assert_true(deleted);
	assert_int_equal(st->ops->secret_delete(st, "B", 400, &deleted, &err),
			 0);
	assert_false(deleted);
	assert_int_equal(
	    st->ops->secret_delete(st, "NONE", 400, &deleted, &err), 0);
	assert_false(deleted);
	store_close(st);
	st = open_db("secrets.db");
	assert_int_equal(st->ops->secret_list(st, &v, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(v[0].name, "B");
	assert_int_equal(v[0].deleted_ms, 300);
	assert_int_equal(v[0].updated_ms, 300);
	assert_null(v[0].file);
	assert_int_equal(v[0].file_len, 0);
	assert_int_equal(v[1].file_len, 10);
	assert_memory_equal(v[1].file, bytes, 10);
	assert_null(v[1].repos);
	assert_int_equal(v[1].updated_ms, 200);
	store_secrets_free(v, n);

	/* a tombstone set again is live */
	b.updated_ms = 500;
	assert_int_equal(st->ops->secret_put(st, &b, &err), 0);
	assert_int_equal(st->ops->secret_list(st, &v, &n, &err), 0);
	assert_int_equal(v[0].deleted_ms, 0);
	assert_int_equal(v[0].file_len, 1);
	store_secrets_free(v, n);

	/* refused: a bad name, no file, too big a file */
	struct store_secret bad = {
	    .name = "lower", .file = bytes, .file_len = 1};
	assert_int_equal(st->ops->secret_put(st, &bad, &err), -EINVAL);
	wr_error_freep(&err);
	snprintf(bad.name, sizeof(bad.name), "OK");
	bad.file_len = 0;
	assert_int_equal(st->ops->secret_put(st, &bad, &err), -EINVAL);
	wr_error_freep(&err);
	bad.file_len = STORE_SECRET_FILE_MAX + 1;
	assert_int_equal(st->ops->secret_put(st, &bad, &err), -EINVAL);
	wr_error_freep(&err);
	assert_int_equal(st->ops->secret_delete(st, "../X", 1, NULL, &err),
			 -EINVAL);
	wr_error_freep(&err);
	assert_int_equal(st->ops->secret_list(st, &v, &n, &err), 0);
	assert_int_equal(n, 2);
	store_secrets_free(v, n);
	store_close(st);
}

/* Evals: a run published twice keeps its first user and time; attempts
 * of an unknown run are refused; a batch and its items go in together,
 * listed by batch (shuffled order kept) and by run; an item's first
 * showing stays; a verdict is given once. */
static void test_evals(void **state)
{
	(void)state;
	struct store *st = open_db("evals.db");
	struct store_eval_run r1 = {.id = "e-1", .user = "bob",
				    .run_json = "{\"agent\":\"a\"}",
				    .created_ms = 1000};
	struct store_eval_run r2 = {.id = "e-2", .user = "bob",
				    .run_json = "{\"agent\":\"b\"}",
				    .created_ms = 2000};
	OK(st->ops->eval_run_put(st, &r1, &err_));
	OK(st->ops->eval_run_put(st, &r2, &err_));
	struct store_eval_run again = {.id = "e-1", .user = "carol",
				       .run_json = "{\"state\":\"finished\"}",
				       .created_ms = 3000};
	OK(st->ops->eval_run_put(st, &again, &err_));
	struct store_eval_run got = {0};
	OK(st->ops->eval_run_get(st, "e-1", &got, &err_));
	assert_string_equal(got.user, "bob");
	assert_string_equal(got.run_json, "{\"state\":\"finished\"}");
	assert_int_equal(got.created_ms, 1000);
	assert_int_equal(got.updated_ms, 3000);
	store_eval_run_clear(&got);
	FAILS(ENOENT, st->ops->eval_run_get(st, "e-none", &got, &err_));
	struct store_eval_run bad = {.id = "e-3", .user = "bob"};
	FAILS(EINVAL, st->ops->eval_run_put(st, &bad, &err_));
	struct store_eval_run *runs = NULL;
	size_t n = 0;
	OK(st->ops->eval_run_list(st, &runs, &n, &err_));
	assert_int_equal(n, 2);
	assert_string_equal(runs[0].id, "e-2");
	assert_string_equal(runs[1].id, "e-1");
	store_eval_runs_free(runs, n);

	struct store_eval_attempt a = {.name = "t.1", .attempt_json = "{}",
				       .updated_ms = 5};
	OK(st->ops->eval_attempt_put(st, "e-1", &a, &err_));
	a.attempt_json = "{\"resolved\":true}";
	OK(st->ops->eval_attempt_put(st, "e-1", &a, &err_));
	a.name = "s.1";
	OK(st->ops->eval_attempt_put(st, "e-1", &a, &err_));
	FAILS(ENOENT, st->ops->eval_attempt_put(st, "e-none", &a, &err_));
	struct store_eval_attempt *av = NULL;
	OK(st->ops->eval_attempt_list(st, "e-1", &av, &n, &err_));
	assert_int_equal(n, 2);
	assert_string_equal(av[0].name, "s.1");
	assert_string_equal(av[1].name, "t.1");
	assert_string_equal(av[1].attempt_json, "{\"resolved\":true}");
	store_eval_attempts_free(av, n);

	struct store_eval_batch b = {.id = "b-1", .user = "bob",
				     .runs_json = "[\"e-1\",\"e-2\"]",
				     .created_ms = 10};
	struct store_eval_item items[] = {
	    {.item = "i-x", .pos = 1, .run_id = "e-1", .attempt = "t.1",
	     .session_id = "s-1", .prompt = "p1"},
	    {.item = "i-y", .pos = 0, .run_id = "e-2", .attempt = "t.1",
	     .session_id = "s-2", .prompt = "p2"},
	};
	OK(st->ops->eval_batch_add(st, &b, items, 2, &err_));
	FAILS(EEXIST, st->ops->eval_batch_add(st, &b, items, 2, &err_));
	struct store_eval_batch gb = {0};
	OK(st->ops->eval_batch_get(st, "b-1", &gb, &err_));
	assert_string_equal(gb.runs_json, "[\"e-1\",\"e-2\"]");
	store_eval_batch_clear(&gb);
	struct store_eval_batch *bv = NULL;
	OK(st->ops->eval_batch_list(st, &bv, &n, &err_));
	assert_int_equal(n, 1);
	store_eval_batches_free(bv, n);
	struct store_eval_item *iv = NULL;
	OK(st->ops->eval_item_list(st, "b-1", NULL, &iv, &n, &err_));
	assert_int_equal(n, 2);
	assert_string_equal(iv[0].item, "i-y");
	assert_string_equal(iv[1].item, "i-x");
	assert_null(iv[0].verdict);
	assert_int_equal(iv[0].shown_ms, 0);
	store_eval_items_free(iv, n);
	OK(st->ops->eval_item_list(st, NULL, "e-1", &iv, &n, &err_));
	assert_int_equal(n, 1);
	assert_string_equal(iv[0].session_id, "s-1");
	store_eval_items_free(iv, n);

	OK(st->ops->eval_item_show(st, "b-1", "i-x", 100, &err_));
	OK(st->ops->eval_item_show(st, "b-1", "i-x", 200, &err_));
	FAILS(ENOENT, st->ops->eval_item_show(st, "b-1", "i-none", 100, &err_));
	FAILS(EINVAL, st->ops->eval_item_decide(st, "b-1", "i-x", "maybe", "bob", 1, 300, &err_));
	OK(st->ops->eval_item_decide(st, "b-1", "i-x", "merge", "bob", 150,
				     300, &err_));
	FAILS(EALREADY, st->ops->eval_item_decide(st, "b-1", "i-x", "reject", "bob", 1, 400, &err_));
	FAILS(ENOENT, st->ops->eval_item_decide(st, "b-1", "i-none", "reject", "bob", 1, 400, &err_));
	struct store_eval_item it = {0};
	OK(st->ops->eval_item_get(st, "b-1", "i-x", &it, &err_));
	assert_string_equal(it.verdict, "merge");
	assert_string_equal(it.reviewer, "bob");
	assert_int_equal(it.review_ms, 150);
	assert_int_equal(it.shown_ms, 100);
	assert_int_equal(it.decided_ms, 300);
	store_eval_item_clear(&it);
	store_close(st);
}

static void test_tokens(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	assert_int_equal(OK(st->ops->token_count(st, &err_)), 0);
	struct store_token t = {.user = (char *)"admin",
				.role = (char *)"admin",
				.name = (char *)"admin"};
	OK(st->ops->token_add(st, "aa11", &t, &err_));
	FAILS(EEXIST, st->ops->token_add(st, "aa11", &t, &err_));
	/* a name is unique */
	FAILS(EEXIST, st->ops->token_add(st, "aa12", &t, &err_));
	int64_t now = store_now_ms();
	struct store_token exp = {.user = (char *)"bob",
				  .role = (char *)"submitter",
				  .name = (char *)"bob.ci-1",
				  .created_ms = now - 10,
				  .expires_ms = now + 1000};
	OK(st->ops->token_add(st, "bb22", &exp, &err_));
	assert_int_equal(OK(st->ops->token_count(st, &err_)), 2);

	struct store_token got;
	OK(st->ops->token_lookup(st, "aa11", now + 1000000000, &got, &err_));
	assert_string_equal(got.user, "admin");
	assert_string_equal(got.role, "admin");
	assert_string_equal(got.name, "admin");
	assert_string_equal(got.id, "aa11");
	assert_int_equal(got.expires_ms, 0);
	assert_int_equal(got.revoked_ms, 0);
	assert_int_equal(got.last_used_ms, 0);
	assert_true(got.created_ms >= now - 1000 && got.created_ms <= now);
	store_token_clear(&got);

	OK(st->ops->token_lookup(st, "bb22", now + 999, &got, &err_));
	assert_string_equal(got.user, "bob");
	assert_string_equal(got.name, "bob.ci-1");
	assert_int_equal(got.created_ms, now - 10);
	assert_int_equal(got.expires_ms, now + 1000);
	store_token_clear(&got);

	/* expired at expires_ms exactly; out untouched on failure */
	struct store_token untouched = {.user = (char *)"x"};
	FAILS(ENOENT,
	      st->ops->token_lookup(st, "bb22", now + 1000, &untouched, &err_));
	assert_string_equal(untouched.user, "x");
	FAILS(ENOENT,
	      st->ops->token_lookup(st, "cc33", now, &untouched, &err_));
	FAILS(EINVAL, st->ops->token_add(st, "", &t, &err_));

	/* names: required, [A-Za-z0-9._-], a letter or digit first, <= 64 */
	const char *bad_names[] = {
	    NULL,
	    "",
	    "-x",
	    ".",
	    "..",
	    "a b",
	    "a/b",
	    "al@ce",
	    "x\n",
	    "0123456789012345678901234567890123456789012345678901234567890123"
	    "4"};
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(*bad_names); i++) {
		struct store_token b = {.user = (char *)"u",
					.role = (char *)"admin",
					.name = (char *)bad_names[i]};
		FAILS(EINVAL, st->ops->token_add(st, "dd44", &b, &err_));
		assert_false(store_token_name_valid(bad_names[i]));
	}
	assert_true(store_token_name_valid("01234567890123456789012345678901234"
					   "56789012345678901234567890123"));
	assert_true(store_token_name_valid("A.b_c-9"));

	/* use: last_used_ms */
	OK(st->ops->token_touch(st, "aa11", now + 5, &err_));
	FAILS(ENOENT, st->ops->token_touch(st, "ee55", now, &err_));
	OK(st->ops->token_lookup(st, "aa11", now, &got, &err_));
	assert_int_equal(got.last_used_ms, now + 5);
	store_token_clear(&got);

	/* list: oldest first (bob's was made "10 ms before" now, admin's
	 * at most 1 s before: add one that is older than both), ids but
	 * never a hash */
	struct store_token old = {.user = (char *)"carol",
				  .role = (char *)"reviewer",
				  .name = (char *)"carol",
				  .created_ms = 1000};
	OK(st->ops->token_add(st, "0123456789abcdef", &old, &err_));
	struct store_token *v = NULL;
	size_t n = 0;
	OK(st->ops->token_list(st, &v, &n, &err_));
	assert_int_equal(n, 3);
	assert_string_equal(v[0].name, "carol");
	assert_string_equal(v[0].id, "01234567");
	assert_int_equal(v[0].created_ms, 1000);
	for (size_t i = 1; i < n; i++) {
		if (!strcmp(v[i].name, "admin")) {
			assert_string_equal(v[i].role, "admin");
			assert_string_equal(v[i].id, "aa11");
			assert_int_equal(v[i].last_used_ms, now + 5);
		} else {
			assert_string_equal(v[i].name, "bob.ci-1");
			assert_string_equal(v[i].id, "bb22");
			assert_int_equal(v[i].expires_ms, now + 1000);
		}
	}
	store_tokens_free(v, n);

	/* revoke: by name; the lookup refuses it; the first time stays */
	int64_t when = 0;
	FAILS(ENOENT, st->ops->token_revoke(st, "nobody", now, &when, &err_));
	FAILS(ENOENT, st->ops->token_revoke(st, "../x", now, &when, &err_));
	assert_int_equal(when, 0);
	OK(st->ops->token_revoke(st, "admin", now + 7, &when, &err_));
	assert_int_equal(when, now + 7);
	FAILS(ENOENT,
	      st->ops->token_lookup(st, "aa11", now + 8, &untouched, &err_));
	assert_string_equal(untouched.user, "x");
	OK(st->ops->token_revoke(st, "admin", now + 9, &when, &err_));
	assert_int_equal(when, now + 7);
	OK(st->ops->token_revoke(st, "admin", now + 9, NULL, &err_));
	OK(st->ops->token_list(st, &v, &n, &err_));
	assert_int_equal(n, 3);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(v[i].revoked_ms,
				 strcmp(v[i].name, "admin") ? 0 : now + 7);
	store_tokens_free(v, n);
	/* the others still work; revoked ones still count */
	OK(st->ops->token_lookup(st, "bb22", now, &got, &err_));
	store_token_clear(&got);
	assert_int_equal(OK(st->ops->token_count(st, &err_)), 3);
	store_close(st);

	/* it is all in the file */
	st = open_db("w.db");
	FAILS(ENOENT,
	      st->ops->token_lookup(st, "aa11", now, &untouched, &err_));
	store_close(st);
}

/* A database of schema version 1 (tokens without names) is migrated: the
 * first admin token is "admin", the others get a name from their user and
 * hash, and the tokens keep working. */
static void test_tokens_migration(void **state)
{
	(void)state;
	raw_sql("v1.db",
		"CREATE TABLE schema_version (version INTEGER PRIMARY KEY,"
		"  applied_ms BIGINT NOT NULL);"
		"INSERT INTO schema_version VALUES (1, 0);"
		/* as version 1 made it (later migrations change it too) */
		"CREATE TABLE repositories (id TEXT PRIMARY KEY,"
		"  name TEXT NOT NULL UNIQUE, url TEXT NOT NULL,"
		"  default_ref TEXT, agent_json TEXT,"
		"  refresh_ms BIGINT NOT NULL DEFAULT 0,"
		"  created_ms BIGINT NOT NULL,"
		"  last_refresh_ms BIGINT NOT NULL DEFAULT 0);"
		"CREATE TABLE tokens (hash TEXT PRIMARY KEY,"
		"  user_name TEXT NOT NULL, role TEXT NOT NULL,"
		"  created_ms BIGINT NOT NULL,"
		"  expires_ms BIGINT NOT NULL DEFAULT 0);"
		/* what migration 3's outbox refers to (PostgreSQL checks) */
		"CREATE TABLE sessions (id TEXT PRIMARY KEY);"
		"INSERT INTO tokens VALUES ('ab12ab12ab12ab12ab12ab12ab12ab12',"
		"  'admin', 'admin', 200, 0);"
		"INSERT INTO tokens VALUES ('cd34cd34cd34cd34cd34cd34cd34cd34',"
		"  'admin', 'admin', 100, 0);"
		"INSERT INTO tokens VALUES ('ef56ef56ef56ef56ef56ef56ef56ef56',"
		"  'bob+ci@example.com', 'submitter', 300, 0);");
	struct store *st = open_db("v1.db");
	assert_true(store_schema_version(st) >= 2);
	struct store_token *v = NULL;
	size_t n = 0;
	OK(st->ops->token_list(st, &v, &n, &err_));
	assert_int_equal(n, 3);
	assert_string_equal(v[0].name, "admin"); /* the oldest admin's */
	assert_string_equal(v[0].id, "cd34cd34");
	assert_string_equal(v[1].name, "admin-ab12ab12ab12ab12ab12ab12");
	assert_string_equal(v[2].name,
			    "bob_ci_example.com-ef56ef56ef56ef56ef56ef56");
	for (size_t i = 0; i < n; i++) {
		assert_true(store_token_name_valid(v[i].name));
		assert_int_equal(v[i].revoked_ms, 0);
	}
	store_tokens_free(v, n);
	struct store_token got;
	OK(st->ops->token_lookup(st, "ef56ef56ef56ef56ef56ef56ef56ef56", 1,
				 &got, &err_));
	assert_string_equal(got.user, "bob+ci@example.com");
	store_token_clear(&got);
	OK(st->ops->token_revoke(st, "admin", 5, NULL, &err_));
	FAILS(ENOENT,
	      st->ops->token_lookup(st, "cd34cd34cd34cd34cd34cd34cd34cd34", 6,
				    &got, &err_));
	store_close(st);
}

static void test_repositories(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	struct store_repo r = {.name = (char *)"zeta",
			       .url = (char *)"https://example.com/z.git",
			       .default_ref = (char *)"main",
			       .agent_json = (char *)"[\"sh\",\"-c\",\"x\"]",
			       .refresh_ms = 60000};
	store_new_id("r-", r.id);
	OK(st->ops->repo_add(st, &r, &err_));
	char alpha[STORE_ID_MAX];
	add_repo(st, "alpha", alpha);

	struct store_repo got;
	OK(st->ops->repo_get(st, r.id, &got, &err_));
	assert_string_equal(got.name, "zeta");
	assert_string_equal(got.url, "https://example.com/z.git");
	assert_string_equal(got.default_ref, "main");
	assert_string_equal(got.agent_json, "[\"sh\",\"-c\",\"x\"]");
	assert_int_equal(got.refresh_ms, 60000);
	assert_true(got.created_ms > 0);
	assert_int_equal(got.last_refresh_ms, 0);
	store_repo_clear(&got);
	OK(st->ops->repo_get(st, "alpha", &got, &err_));
	assert_string_equal(got.id, alpha);
	assert_null(got.default_ref);
	assert_null(got.agent_json);
	store_repo_clear(&got);

	/* a duplicate name, a duplicate id */
	struct store_repo dup = {.name = (char *)"alpha", .url = (char *)"/x"};
	store_new_id("r-", dup.id);
	FAILS(EEXIST, st->ops->repo_add(st, &dup, &err_));
	dup.name = (char *)"beta";
	memcpy(dup.id, alpha, STORE_ID_MAX);
	FAILS(EEXIST, st->ops->repo_add(st, &dup, &err_));
	dup.name = (char *)"bad name";
	store_new_id("r-", dup.id);
	FAILS(EINVAL, st->ops->repo_add(st, &dup, &err_));
	dup.name = (char *)"..";
	FAILS(EINVAL, st->ops->repo_add(st, &dup, &err_));

	struct store_repo *v = NULL;
	size_t n = 0;
	OK(st->ops->repo_list(st, &v, &n, &err_));
	assert_int_equal(n, 2);
	assert_string_equal(v[0].name, "alpha");
	assert_string_equal(v[1].name, "zeta");
	store_repos_free(v, n);

	OK(st->ops->repo_set_refreshed(st, alpha, 12345, &err_));
	OK(st->ops->repo_get(st, alpha, &got, &err_));
	assert_int_equal(got.last_refresh_ms, 12345);
	store_repo_clear(&got);
	FAILS(ENOENT, st->ops->repo_set_refreshed(st, "r-none", 1, &err_));
	FAILS(ENOENT, st->ops->repo_get(st, "nope", &got, &err_));
	store_close(st);
}

static void test_snapshots(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char a[STORE_ID_MAX], b[STORE_ID_MAX];
	add_repo(st, "a", a);
	add_repo(st, "b", b);
	struct store_snapshot got;
	FAILS(ENOENT, st->ops->snapshot_latest(st, a, &got, &err_));

	const char *commit = "0123456789abcdef0123456789abcdef01234567";
	for (int i = 0; i < 3; i++) {
		struct store_snapshot s = {.created_ms = 1000 + i,
					   .timings_json =
					       (char *)"{\"build\":1}"};
		snprintf(s.id, sizeof(s.id), "snap%d", i);
		snprintf(s.repo_id, sizeof(s.repo_id), "%s", i == 1 ? b : a);
		snprintf(s.commit, sizeof(s.commit), "%s", commit);
		OK(st->ops->snapshot_add(st, &s, &err_));
	}
	OK(st->ops->snapshot_latest(st, a, &got, &err_));
	assert_string_equal(got.id, "snap2");
	assert_string_equal(got.repo_id, a);
	assert_string_equal(got.commit, commit);
	assert_string_equal(got.timings_json, "{\"build\":1}");
	assert_int_equal(got.created_ms, 1002);
	store_snapshot_clear(&got);

	struct store_snapshot *v = NULL;
	size_t n = 0;
	OK(st->ops->snapshot_list(st, NULL, &v, &n, &err_));
	assert_int_equal(n, 3);
	assert_string_equal(v[0].id, "snap2");
	assert_string_equal(v[1].id, "snap1");
	assert_string_equal(v[2].id, "snap0");
	store_snapshots_free(v, n);
	OK(st->ops->snapshot_list(st, b, &v, &n, &err_));
	assert_int_equal(n, 1);
	assert_string_equal(v[0].id, "snap1");
	store_snapshots_free(v, n);
	OK(st->ops->snapshot_list(st, "r-none", &v, &n, &err_));
	assert_int_equal(n, 0);
	store_snapshots_free(v, n);

	struct store_snapshot s = {0};
	snprintf(s.id, sizeof(s.id), "snap0");
	snprintf(s.repo_id, sizeof(s.repo_id), "%s", a);
	snprintf(s.commit, sizeof(s.commit), "%s", commit);
	FAILS(EEXIST, st->ops->snapshot_add(st, &s, &err_));
	snprintf(s.id, sizeof(s.id), "snap9");
	snprintf(s.repo_id, sizeof(s.repo_id), "r-none");
	FAILS(ENOENT, st->ops->snapshot_add(st, &s, &err_));
	store_close(st);
}

/* ---- sessions ----------------------------------------------------------- */

static void test_session_create_and_get(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	struct store_session s = {
	    .user = (char *)"alice",
	    .prompt = (char *)"fix the failing test",
	    .ref = (char *)"main",
	    .agent_json = (char *)"[\"sh\",\"-c\",\"make\"]",
	    .limits_json = (char *)"{\"memory\":\"1G\"}",
	    /* ignored at create: */
	    .state = SESSION_RUNNING,
	    .attempts = 7,
	};
	store_new_id("s-", s.id);
	snprintf(s.repo_id, sizeof(s.repo_id), "%s", repo);
	OK(st->ops->session_create(st, &s, &err_));
	FAILS(EEXIST, st->ops->session_create(st, &s, &err_));

	struct store_session got;
	OK(st->ops->session_get(st, s.id, &got, &err_));
	assert_string_equal(got.id, s.id);
	assert_string_equal(got.repo_id, repo);
	assert_string_equal(got.user, "alice");
	assert_string_equal(got.prompt, "fix the failing test");
	assert_string_equal(got.ref, "main");
	assert_string_equal(got.agent_json, "[\"sh\",\"-c\",\"make\"]");
	assert_string_equal(got.limits_json, "{\"memory\":\"1G\"}");
	assert_int_equal(got.state, SESSION_QUEUED);
	assert_null(got.reason);
	assert_null(got.snapshot_id);
	assert_null(got.sandbox);
	assert_null(got.outcome_json);
	assert_int_equal(got.attempts, 0);
	assert_int_equal(got.turns, 0);
	assert_int_equal(got.exit_code, -1);
	assert_true(got.queue_seq > 0);
	assert_true(got.created_ms > 0);
	assert_int_equal(got.updated_ms, got.created_ms);
	assert_int_equal(got.started_ms, 0);
	assert_int_equal(got.finished_ms, 0);
	store_session_clear(&got);

	/* event 1, and the prompt as a pending message */
	json_t *j = event_data(st, s.id, 1, "state");
	assert_string_equal(json_string_value(json_object_get(j, "state")),
			    "queued");
	json_decref(j);
	struct store_message *m = NULL;
	size_t n = 0;
	OK(st->ops->message_pending(st, s.id, &m, &n, &err_));
	assert_int_equal(n, 1);
	assert_string_equal(m[0].user, "alice");
	assert_string_equal(m[0].text, "fix the failing test");
	assert_int_equal(m[0].turn, 0);
	store_messages_free(m, n);

	/* an unknown repository; unknown and malformed ids */
	struct store_session bad = {.user = (char *)"a", .prompt = (char *)"p"};
	store_new_id("s-", bad.id);
	snprintf(bad.repo_id, sizeof(bad.repo_id), "r-none");
	FAILS(ENOENT, st->ops->session_create(st, &bad, &err_));
	FAILS(ENOENT, st->ops->session_get(st, bad.id, &got, &err_));
	FAILS(ENOENT, st->ops->session_get(st, "", &got, &err_));
	char long_id[STORE_ID_MAX + 1];
	memset(long_id, 'a', STORE_ID_MAX);
	long_id[STORE_ID_MAX] = '\0';
	FAILS(ENOENT, st->ops->session_get(st, long_id, &got, &err_));
	/* nothing half-written by the failed create */
	struct store_event *ev = NULL;
	FAILS(ENOENT, st->ops->event_list(st, bad.id, 0, 0, &ev, &n, &err_));
	store_close(st);
}

static void test_session_transition(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_session(st, repo, sid);
	struct store_session before;
	OK(st->ops->session_get(st, sid, &before, &err_));

	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	upd.sandbox = "ws-1";
	upd.snapshot_id = "snap1";
	upd.attempts = 1;
	int64_t seq = OK(st->ops->session_transition(
	    st, sid, SESSION_QUEUED, SESSION_PROVISIONING, &upd,
	    "{\"attempt\":1,\"state\":\"bogus\"}", &err_));
	assert_int_equal(seq, 2);
	json_t *j = event_data(st, sid, 2, "state");
	/* the event's own keys win over extra's; key order is stable */
	char *text = json_dumps(j, JSON_COMPACT);
	assert_string_equal(text, "{\"state\":\"provisioning\",\"from\":"
				  "\"queued\",\"reason\":null,\"attempt\":1}");
	free(text);
	json_decref(j);

	struct store_session got;
	OK(st->ops->session_get(st, sid, &got, &err_));
	assert_int_equal(got.state, SESSION_PROVISIONING);
	assert_string_equal(got.sandbox, "ws-1");
	assert_string_equal(got.snapshot_id, "snap1");
	assert_int_equal(got.attempts, 1);
	assert_int_equal(got.exit_code, -1);
	assert_int_equal(got.queue_seq, before.queue_seq);
	assert_true(got.updated_ms >= before.updated_ms);
	store_session_clear(&got);

	/* a stale expectation changes nothing */
	FAILS(ESTALE, st->ops->session_transition(st, sid, SESSION_QUEUED,
						  SESSION_PROVISIONING, NULL,
						  NULL, &err_));
	/* neither does a transition the lifecycle does not allow */
	FAILS(EPERM, st->ops->session_transition(st, sid, -1, SESSION_REVIEW,
						 NULL, NULL, &err_));
	FAILS(EPERM, st->ops->session_transition(st, sid, SESSION_PROVISIONING,
						 SESSION_PROVISIONING, NULL,
						 NULL, &err_));
	assert_int_equal(count_events(st, sid), 2);
	assert_int_equal(state_of(st, sid), SESSION_PROVISIONING);

	/* any state (from -1), a reason, times, exit code */
	struct store_session_update run = STORE_SESSION_UPDATE_INIT;
	run.started_ms = 5000;
	run.turns = 1;
	assert_int_equal(OK(st->ops->session_transition(
			     st, sid, -1, SESSION_RUNNING, &run, NULL, &err_)),
			 3);
	struct store_session_update fin = STORE_SESSION_UPDATE_INIT;
	fin.reason = "agent exited 2";
	fin.exit_code = 2;
	fin.finished_ms = 9000;
	fin.outcome_json = "{\"exit\":2}";
	fin.sandbox = "";
	assert_int_equal(
	    OK(st->ops->session_transition(st, sid, SESSION_RUNNING,
					   SESSION_REVIEW, &fin, NULL, &err_)),
	    4);
	j = event_data(st, sid, 4, "state");
	assert_string_equal(json_string_value(json_object_get(j, "reason")),
			    "agent exited 2");
	assert_string_equal(json_string_value(json_object_get(j, "from")),
			    "running");
	json_decref(j);
	OK(st->ops->session_get(st, sid, &got, &err_));
	assert_int_equal(got.state, SESSION_REVIEW);
	assert_string_equal(got.reason, "agent exited 2");
	assert_null(got.sandbox);
	assert_string_equal(got.snapshot_id, "snap1");
	assert_string_equal(got.outcome_json, "{\"exit\":2}");
	assert_int_equal(got.exit_code, 2);
	assert_int_equal(got.turns, 1);
	assert_int_equal(got.started_ms, 5000);
	assert_int_equal(got.finished_ms, 9000);
	store_session_clear(&got);

	/* a follow-up: back to the end of the queue, reason and finish
	 * cleared */
	struct store_session_update again = STORE_SESSION_UPDATE_INIT;
	again.requeue = true;
	again.reason = "";
	again.finished_ms = -1;
	OK(st->ops->session_transition(st, sid, SESSION_REVIEW, SESSION_QUEUED,
				       &again, NULL, &err_));
	OK(st->ops->session_get(st, sid, &got, &err_));
	assert_int_equal(got.state, SESSION_QUEUED);
	assert_null(got.reason);
	assert_int_equal(got.finished_ms, 0);
	assert_true(got.queue_seq > before.queue_seq);
	store_session_clear(&got);

	FAILS(ENOENT, st->ops->session_transition(
			  st, "s-none", -1, SESSION_FAILED, NULL, NULL, &err_));
	FAILS(EINVAL, st->ops->session_transition(st, sid, -1, SESSION_FAILED,
						  NULL, "[1]", &err_));
	FAILS(EINVAL, st->ops->session_transition(st, sid, -1, SESSION_FAILED,
						  NULL, "{", &err_));
	FAILS(EINVAL, st->ops->session_transition(
			  st, sid, -1, SESSION_STATE_MAX, NULL, NULL, &err_));
	assert_int_equal(state_of(st, sid), SESSION_QUEUED);
	assert_int_equal(count_events(st, sid), 5);
	store_session_clear(&before);
	store_close(st);
}

/* A transition whose event cannot be written leaves no trace: the state,
 * the fields and the event counter roll back together. */
static void test_transition_and_event_are_atomic(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_session(st, repo, sid);
	raw_sql("w.db",
		teststore_pg()
		    ? "CREATE FUNCTION no_state_events() RETURNS trigger AS $$ "
		      "BEGIN IF NEW.kind = 'state' THEN "
		      "RAISE EXCEPTION 'injected failure'; END IF; "
		      "RETURN NEW; END $$ LANGUAGE plpgsql;"
		      "CREATE TRIGGER no_state_events BEFORE INSERT ON events "
		      "FOR EACH ROW EXECUTE FUNCTION no_state_events()"
		    : "CREATE TRIGGER no_state_events BEFORE INSERT ON "
		      "events WHEN NEW.kind = 'state' BEGIN "
		      "SELECT RAISE(ABORT, 'injected failure'); END");
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	upd.sandbox = "ws-x";
	upd.requeue = true;
	struct wr_error *err = NULL;
	int64_t r = st->ops->session_transition(
	    st, sid, SESSION_QUEUED, SESSION_PROVISIONING, &upd, NULL, &err);
	assert_int_equal(r, -EIO);
	assert_non_null(strstr(err->msg, "injected failure"));
	wr_error_free(err);

	struct store_session got;
	OK(st->ops->session_get(st, sid, &got, &err_));
	assert_int_equal(got.state, SESSION_QUEUED);
	assert_null(got.sandbox);
	int64_t queue_seq = got.queue_seq;
	store_session_clear(&got);
	assert_int_equal(count_events(st, sid), 1);

	/* other kinds still go in, and the seqs stay gapless */
	assert_int_equal(
	    OK(st->ops->event_append(st, sid, EVENT_OUTPUT, NULL, &err_)), 2);
	raw_sql("w.db", teststore_pg()
			    ? "DROP TRIGGER no_state_events ON events"
			    : "DROP TRIGGER no_state_events");
	assert_int_equal(OK(st->ops->session_transition(st, sid, SESSION_QUEUED,
							SESSION_PROVISIONING,
							&upd, NULL, &err_)),
			 3);
	OK(st->ops->session_get(st, sid, &got, &err_));
	assert_int_equal(got.state, SESSION_PROVISIONING);
	assert_string_equal(got.sandbox, "ws-x");
	/* the failed transition's queue position was rolled back too */
	assert_int_equal(got.queue_seq, queue_seq + 1);
	store_session_clear(&got);
	store_close(st);
}

static void test_session_update(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], a[STORE_ID_MAX], b[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_session(st, repo, a);
	add_session(st, repo, b);
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	upd.outcome_json = "{\"start_ms\":{\"total\":5}}";
	upd.attempts = 3;
	upd.exit_code = 0;
	upd.requeue = true;
	OK(st->ops->session_update(st, a, &upd, &err_));
	struct store_session got;
	OK(st->ops->session_get(st, a, &got, &err_));
	assert_int_equal(got.state, SESSION_QUEUED);
	assert_string_equal(got.outcome_json, "{\"start_ms\":{\"total\":5}}");
	assert_int_equal(got.attempts, 3);
	assert_int_equal(got.exit_code, 0);
	store_session_clear(&got);
	assert_int_equal(count_events(st, a), 1); /* no event */

	/* requeued: a is now behind b */
	struct store_session *v = NULL;
	size_t n = 0;
	OK(st->ops->session_list_state(st, SESSION_QUEUED, &v, &n, &err_));
	assert_int_equal(n, 2);
	assert_string_equal(v[0].id, b);
	assert_string_equal(v[1].id, a);
	store_sessions_free(v, n);
	FAILS(ENOENT, st->ops->session_update(st, "s-none", &upd, &err_));
	store_close(st);
}

/* The count a cache of session records checks: every committed write of
 * a record, and nothing else. */
static void test_session_writes(void **state)
{
	(void)state;
	struct store *st = open_db("writes.db");
	char repo[STORE_ID_MAX], a[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	uint64_t n0 = st->ops->session_writes(st);
	add_session(st, repo, a);
	assert_int_equal(st->ops->session_writes(st), n0 + 1);
	OK(st->ops->session_transition(
	    st, a, SESSION_QUEUED, SESSION_PROVISIONING, NULL, NULL, &err_));
	assert_int_equal(st->ops->session_writes(st), n0 + 2);
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	upd.snapshot_id = "snap-1";
	OK(st->ops->session_update(st, a, &upd, &err_));
	assert_int_equal(st->ops->session_writes(st), n0 + 3);
	/* events, reads and refused writes do not count */
	OK(st->ops->event_append(st, a, EVENT_OUTPUT, "{\"line\":\"x\"}",
				 &err_));
	struct store_session got;
	OK(st->ops->session_get(st, a, &got, &err_));
	store_session_clear(&got);
	FAILS(ESTALE,
	      st->ops->session_transition(st, a, SESSION_QUEUED,
					  SESSION_RUNNING, NULL, NULL, &err_));
	FAILS(ENOENT, st->ops->session_update(st, "s-none", &upd, &err_));
	assert_int_equal(st->ops->session_writes(st), n0 + 3);
	store_close(st);
}

static void test_events(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX], other[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_session(st, repo, sid);
	add_session(st, repo, other);
	for (int i = 0; i < 20; i++) {
		char data[64];
		snprintf(data, sizeof(data),
			 "{\"stream\":\"stdout\",\"line\":\"%d\"}", i);
		assert_int_equal(OK(st->ops->event_append(st, sid, EVENT_OUTPUT,
							  data, &err_)),
				 i + 2);
	}
	assert_int_equal(OK(st->ops->event_append(st, other, EVENT_PHASE,
						  "{\"phase\":\"x\"}", &err_)),
			 2);

	struct store_event *ev = NULL;
	size_t n = 0;
	OK(st->ops->event_list(st, sid, 5, 4, &ev, &n, &err_));
	assert_int_equal(n, 4);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(ev[i].seq, 6 + (int64_t)i);
		assert_string_equal(ev[i].kind, "output");
		assert_true(ev[i].time_ms > 0);
	}
	assert_string_equal(ev[0].data_json,
			    "{\"stream\":\"stdout\",\"line\":\"4\"}");
	store_events_free(ev, n);
	OK(st->ops->event_list(st, sid, 0, 0, &ev, &n, &err_));
	assert_int_equal(n, 21);
	store_events_free(ev, n);
	/* past the end: empty, not an error */
	OK(st->ops->event_list(st, sid, 21, 10, &ev, &n, &err_));
	assert_int_equal(n, 0);
	store_events_free(ev, n);

	FAILS(ENOENT,
	      st->ops->event_append(st, "s-none", EVENT_OUTPUT, "{}", &err_));
	FAILS(ENOENT, st->ops->event_list(st, "s-none", 0, 10, &ev, &n, &err_));
	FAILS(EINVAL,
	      st->ops->event_append(st, sid, EVENT_OUTPUT, "not json", &err_));
	FAILS(EINVAL, st->ops->event_append(st, sid, EVENT_OUTPUT,
					    "\"a string\"", &err_));
	FAILS(EINVAL,
	      st->ops->event_append(st, sid, EVENT_KIND_MAX, "{}", &err_));
	size_t big_len = STORE_EVENT_DATA_MAX + 10;
	char *big = malloc(big_len + 1);
	assert_non_null(big);
	memset(big, ' ', big_len);
	big[0] = '{';
	big[big_len - 1] = '}';
	big[big_len] = '\0';
	FAILS(E2BIG, st->ops->event_append(st, sid, EVENT_OUTPUT, big, &err_));
	free(big);
	/* nothing of the failures took a seq */
	assert_int_equal(
	    OK(st->ops->event_append(st, sid, EVENT_TURN, NULL, &err_)), 22);
	store_close(st);
}

/* ---- concurrency -------------------------------------------------------- */

#define APPENDERS 4
#define APPENDS 300

struct appender {
	struct store *st;
	const char *sid;
	int64_t seqs[APPENDS];
	int failures;
	char first_error[256];
};

static void *append_loop(void *arg)
{
	struct appender *a = arg;
	for (int i = 0; i < APPENDS; i++) {
		struct wr_error *err = NULL;
		a->seqs[i] = a->st->ops->event_append(
		    a->st, a->sid, EVENT_OUTPUT, "{\"line\":\"x\"}", &err);
		if (a->seqs[i] < 0) {
			if (!a->failures++)
				snprintf(a->first_error, sizeof(a->first_error),
					 "%s", err ? err->msg : "?");
			wr_error_free(err);
		}
	}
	return NULL;
}

struct getter {
	struct store *st;
	const char *sid;
	atomic_bool *stop;
	long gets;
	int failures;
};

static void *get_loop(void *arg)
{
	struct getter *g = arg;
	int64_t last_seen = 0;
	while (!atomic_load(g->stop)) {
		struct wr_error *err = NULL;
		struct store_session s;
		if (g->st->ops->session_get(g->st, g->sid, &s, &err) < 0) {
			g->failures++;
			wr_error_free(err);
			continue;
		}
		store_session_clear(&s);
		struct store_event *ev = NULL;
		size_t n = 0;
		if (g->st->ops->event_list(g->st, g->sid, last_seen, 100, &ev,
					   &n, &err) < 0) {
			g->failures++;
			wr_error_free(err);
			continue;
		}
		/* a reader sees a gapless prefix, in order */
		for (size_t i = 0; i < n; i++)
			if (ev[i].seq != last_seen + 1 + (int64_t)i)
				g->failures++;
		if (n)
			last_seen = ev[n - 1].seq;
		store_events_free(ev, n);
		g->gets++;
	}
	return NULL;
}

/* Every seq from 2 (event 1 is the creation) to the last exactly once. */
static void check_seqs(struct appender *a, size_t n_appenders)
{
	size_t total = n_appenders * APPENDS;
	bool *seen = calloc(total + 2, sizeof(bool));
	assert_non_null(seen);
	for (size_t t = 0; t < n_appenders; t++) {
		if (a[t].failures)
			fail_msg("appender %zu: %d failures, first: %s", t,
				 a[t].failures, a[t].first_error);
		for (int i = 0; i < APPENDS; i++) {
			int64_t s = a[t].seqs[i];
			assert_true(s >= 2 && s <= (int64_t)total + 1);
			assert_false(seen[s]);
			seen[s] = true;
			/* one thread's seqs increase */
			if (i)
				assert_true(s > a[t].seqs[i - 1]);
		}
	}
	free(seen);
}

static void test_concurrent_appends_are_gapless(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_session(st, repo, sid);
	static struct appender a[APPENDERS];
	pthread_t t[APPENDERS], gt[2];
	atomic_bool stop = false;
	struct getter g[2];
	for (int i = 0; i < 2; i++) {
		g[i] = (struct getter){.st = st, .sid = sid, .stop = &stop};
		assert_int_equal(pthread_create(&gt[i], NULL, get_loop, &g[i]),
				 0);
	}
	for (int i = 0; i < APPENDERS; i++) {
		a[i] = (struct appender){.st = st, .sid = sid};
		assert_int_equal(
		    pthread_create(&t[i], NULL, append_loop, &a[i]), 0);
	}
	for (int i = 0; i < APPENDERS; i++)
		pthread_join(t[i], NULL);
	atomic_store(&stop, true);
	for (int i = 0; i < 2; i++) {
		pthread_join(gt[i], NULL);
		assert_int_equal(g[i].failures, 0);
		assert_true(g[i].gets > 0);
	}
	check_seqs(a, APPENDERS);

	struct store_event *ev = NULL;
	size_t n = 0;
	OK(st->ops->event_list(st, sid, 0, 0, &ev, &n, &err_));
	assert_int_equal(n, APPENDERS * APPENDS + 1);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(ev[i].seq, (int64_t)i + 1);
	store_events_free(ev, n);
	store_close(st);
}

/* Two handles on one file (as two processes would have): the database's
 * write lock, not our mutex, keeps the seqs gapless. */
static void test_two_handles_append_gapless(void **state)
{
	(void)state;
	struct store *st1 = open_db("w.db");
	struct store *st2 = open_db("w.db");
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX];
	add_repo(st1, "c-hello", repo);
	add_session(st1, repo, sid);
	static struct appender a[2];
	pthread_t t[2];
	for (int i = 0; i < 2; i++) {
		a[i] = (struct appender){.st = i ? st2 : st1, .sid = sid};
		assert_int_equal(
		    pthread_create(&t[i], NULL, append_loop, &a[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	check_seqs(a, 2);
	assert_int_equal(count_events(st2, sid), 2 * APPENDS + 1);
	store_close(st2);
	store_close(st1);
}

/* Every kind of write to one session at once, with new sessions beside
 * it: transitions that requeue it, updates that requeue it, messages,
 * events. Each takes the session's row and the queue counter in the same
 * order, so none waits on another for ever (PostgreSQL would end one with
 * a deadlock error); the seqs stay gapless. */
#define MIXED 60

struct mixer {
	struct store *st;
	const char *sid, *repo;
	int kind;
	int failures;
	char first_error[256];
};

static int mixed_step(struct mixer *m, int i, struct wr_error **err)
{
	static const enum session_state cycle[] = {
	    SESSION_PROVISIONING, SESSION_INTERRUPTED, SESSION_QUEUED};
	struct store *st = m->st;
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	switch (m->kind) {
	case 0: {
		upd.requeue = cycle[i % 3] == SESSION_QUEUED;
		int64_t r = st->ops->session_transition(
		    st, m->sid, -1, cycle[i % 3], &upd, NULL, err);
		/* another thread's transition may have come first */
		return r == -ESTALE || r == -EPERM ? 0 : (int)(r < 0 ? r : 0);
	}
	case 1:
		upd.requeue = true;
		upd.attempts = i;
		return st->ops->session_update(st, m->sid, &upd, err);
	case 2: {
		int64_t r =
		    st->ops->message_add(st, m->sid, "bob", "more", err);
		return r < 0 ? (int)r : 0;
	}
	case 3: {
		int64_t r = st->ops->event_append(st, m->sid, EVENT_OUTPUT,
						  "{\"line\":\"x\"}", err);
		return r < 0 ? (int)r : 0;
	}
	default: {
		struct store_session s = {.user = (char *)"carol",
					  .prompt = (char *)"p"};
		store_new_id("s-", s.id);
		snprintf(s.repo_id, sizeof(s.repo_id), "%s", m->repo);
		return st->ops->session_create(st, &s, err);
	}
	}
}

static void *mixed_loop(void *arg)
{
	struct mixer *m = arg;
	for (int i = 0; i < MIXED; i++) {
		struct wr_error *err = NULL;
		int r = mixed_step(m, i, &err);
		if (r < 0 && !m->failures++)
			snprintf(m->first_error, sizeof(m->first_error),
				 "kind %d: %s", m->kind, err ? err->msg : "?");
		wr_error_free(err);
	}
	return NULL;
}

static void test_concurrent_mixed_writes(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_session(st, repo, sid);
	enum { KINDS = 5 };
	struct mixer m[KINDS];
	pthread_t t[KINDS];
	for (int i = 0; i < KINDS; i++) {
		m[i] = (struct mixer){
		    .st = st, .sid = sid, .repo = repo, .kind = i};
		assert_int_equal(pthread_create(&t[i], NULL, mixed_loop, &m[i]),
				 0);
	}
	for (int i = 0; i < KINDS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < KINDS; i++)
		if (m[i].failures)
			fail_msg("%d failures, first: %s", m[i].failures,
				 m[i].first_error);
	struct store_event *ev = NULL;
	size_t n = 0;
	OK(st->ops->event_list(st, sid, 0, 0, &ev, &n, &err_));
	for (size_t i = 0; i < n; i++)
		assert_int_equal(ev[i].seq, (int64_t)i + 1);
	store_events_free(ev, n);
	/* creation, the transitions that went in, messages, outputs */
	assert_true(n >= 1 + 2 * MIXED);
	/* every queue position was handed out once */
	struct store_session *v = NULL;
	size_t k = 0;
	OK(st->ops->session_list_state(st, SESSION_QUEUED, &v, &k, &err_));
	for (size_t i = 1; i < k; i++)
		assert_true(v[i].queue_seq > v[i - 1].queue_seq);
	store_sessions_free(v, k);
	store_close(st);
}

/* The server ends the store's connections (a restart, an administrator):
 * the next calls open them again, and none fails. */
static void test_reconnects(void **state)
{
	(void)state;
	if (!teststore_pg()) {
		skip();
		return;
	}
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_session(st, repo, sid);
	for (int round = 0; round < 2; round++) {
		teststore_pg_kill(U("w.db"));
		assert_int_equal(state_of(st, sid), SESSION_QUEUED);
		assert_int_equal(OK(st->ops->event_append(st, sid, EVENT_OUTPUT,
							  NULL, &err_)),
				 2 + round);
	}
	store_close(st);
}

/* ---- messages, artifacts ------------------------------------------------ */

static void test_messages(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_session(st, repo, sid);
	struct store_message *m = NULL;
	size_t n = 0;
	OK(st->ops->message_pending(st, sid, &m, &n, &err_));
	assert_int_equal(n, 1);
	int64_t first = m[0].id;
	store_messages_free(m, n);

	int64_t id =
	    OK(st->ops->message_add(st, sid, "bob", "also the docs", &err_));
	assert_true(id > first);
	json_t *j = event_data(st, sid, 2, "message");
	assert_int_equal(json_integer_value(json_object_get(j, "id")), id);
	assert_string_equal(json_string_value(json_object_get(j, "user")),
			    "bob");
	assert_string_equal(json_string_value(json_object_get(j, "text")),
			    "also the docs");
	json_decref(j);

	OK(st->ops->message_consume(st, first, 1, &err_));
	FAILS(ESTALE, st->ops->message_consume(st, first, 2, &err_));
	FAILS(ENOENT, st->ops->message_consume(st, id + 100, 1, &err_));
	FAILS(EINVAL, st->ops->message_consume(st, id, 0, &err_));
	OK(st->ops->message_pending(st, sid, &m, &n, &err_));
	assert_int_equal(n, 1);
	assert_int_equal(m[0].id, id);
	assert_string_equal(m[0].user, "bob");
	assert_string_equal(m[0].text, "also the docs");
	assert_true(m[0].created_ms > 0);
	store_messages_free(m, n);
	OK(st->ops->message_consume(st, id, 2, &err_));
	OK(st->ops->message_pending(st, sid, &m, &n, &err_));
	assert_int_equal(n, 0);
	store_messages_free(m, n);

	FAILS(ENOENT, st->ops->message_add(st, "s-none", "bob", "x", &err_));
	FAILS(ENOENT, st->ops->message_pending(st, "s-none", &m, &n, &err_));
	FAILS(EINVAL, st->ops->message_add(st, sid, "bob", "\xff\xfe", &err_));
	assert_int_equal(count_events(st, sid), 2);
	store_close(st);
}

static void test_artifacts(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX], other[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	add_session(st, repo, sid);
	add_session(st, repo, other);
	struct store_artifact a = {.name = (char *)"report/junit.xml",
				   .path = (char *)"/data/a/1",
				   .media_type = (char *)"application/xml",
				   .size = 123};
	OK(st->ops->artifact_add(st, sid, &a, &err_));
	FAILS(EEXIST, st->ops->artifact_add(st, sid, &a, &err_));
	struct store_artifact b = {.name = (char *)"diff.patch",
				   .path = (char *)"/data/a/2"};
	OK(st->ops->artifact_add(st, sid, &b, &err_));

	struct store_artifact *v = NULL;
	size_t n = 0;
	OK(st->ops->artifact_list(st, sid, &v, &n, &err_));
	assert_int_equal(n, 2);
	assert_string_equal(v[0].name, "diff.patch");
	assert_null(v[0].media_type);
	assert_string_equal(v[1].name, "report/junit.xml");
	assert_string_equal(v[1].path, "/data/a/1");
	assert_string_equal(v[1].media_type, "application/xml");
	assert_int_equal(v[1].size, 123);
	assert_true(v[1].created_ms > 0);
	store_artifacts_free(v, n);
	OK(st->ops->artifact_list(st, other, &v, &n, &err_));
	assert_int_equal(n, 0);
	store_artifacts_free(v, n);

	const char *bad[] = {"",     "/etc/passwd", "../x", "a/../b",
			     "a//b", "a/",	    ".."};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct store_artifact x = {.name = (char *)bad[i],
					   .path = (char *)"/p"};
		FAILS(EINVAL, st->ops->artifact_add(st, sid, &x, &err_));
	}
	FAILS(ENOENT, st->ops->artifact_add(st, "s-none", &b, &err_));
	FAILS(ENOENT, st->ops->artifact_list(st, "s-none", &v, &n, &err_));
	store_close(st);
}

/* ---- lists -------------------------------------------------------------- */

static int cmp_newest_first(const void *pa, const void *pb)
{
	const struct store_session *a = pa, *b = pb;
	if (a->created_ms != b->created_ms)
		return a->created_ms > b->created_ms ? -1 : 1;
	return -strcmp(a->id, b->id);
}

static void test_session_list_pagination(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char r1[STORE_ID_MAX], r2[STORE_ID_MAX];
	add_repo(st, "one", r1);
	add_repo(st, "two", r2);
	enum { N = 37 };
	struct store_session all[N];
	memset(all, 0, sizeof(all));
	for (int i = 0; i < N; i++) {
		/* pairs share a creation time: the id breaks the tie */
		add_session_at(st, i % 3 ? r1 : r2, i % 2 ? "bob" : "alice",
			       1000 + i / 2, all[i].id);
		all[i].created_ms = 1000 + i / 2;
	}
	qsort(all, N, sizeof(all[0]), cmp_newest_first);

	/* pages of 5 walk the whole list in order */
	struct store_session_filter f = {.state = -1, .limit = 5};
	char before[STORE_ID_MAX] = "";
	int seen = 0, pages = 0;
	for (;;) {
		f.before_id = *before ? before : NULL;
		struct store_session *v = NULL;
		size_t n = 0;
		OK(st->ops->session_list(st, &f, &v, &n, &err_));
		pages++;
		for (size_t i = 0; i < n; i++) {
			assert_true(seen < N);
			assert_string_equal(v[i].id, all[seen].id);
			assert_int_equal(v[i].created_ms, all[seen].created_ms);
			seen++;
		}
		if (n)
			memcpy(before, v[n - 1].id, STORE_ID_MAX);
		store_sessions_free(v, n);
		if (n < 5)
			break;
	}
	assert_int_equal(seen, N);
	assert_int_equal(pages, N / 5 + 1);

	/* filters */
	struct store_session *v = NULL;
	size_t n = 0;
	f = (struct store_session_filter){
	    .state = -1, .user = "bob", .limit = 500};
	OK(st->ops->session_list(st, &f, &v, &n, &err_));
	assert_int_equal(n, N / 2);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(v[i].user, "bob");
	store_sessions_free(v, n);
	f = (struct store_session_filter){
	    .state = -1, .repo_id = r2, .user = "alice", .limit = 1000};
	OK(st->ops->session_list(st, &f, &v, &n, &err_));
	assert_int_equal(n, 7); /* i = 0, 6, 12, ... 36 */
	for (size_t i = 0; i < n; i++)
		assert_string_equal(v[i].repo_id, r2);
	store_sessions_free(v, n);

	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	OK(st->ops->session_transition(st, all[3].id, SESSION_QUEUED,
				       SESSION_CANCELLED, &upd, NULL, &err_));
	f = (struct store_session_filter){.state = SESSION_CANCELLED,
					  .limit = 1};
	OK(st->ops->session_list(st, &f, &v, &n, &err_));
	assert_int_equal(n, 1);
	assert_string_equal(v[0].id, all[3].id);
	store_sessions_free(v, n);
	/* a limit of 0 means the default, more than 500 is 500 */
	f = (struct store_session_filter){.state = SESSION_QUEUED};
	OK(st->ops->session_list(st, &f, &v, &n, &err_));
	assert_int_equal(n, N - 1);
	store_sessions_free(v, n);

	f = (struct store_session_filter){.state = -1, .before_id = "s-none"};
	FAILS(ENOENT, st->ops->session_list(st, &f, &v, &n, &err_));
	f = (struct store_session_filter){.state = SESSION_STATE_MAX};
	FAILS(EINVAL, st->ops->session_list(st, &f, &v, &n, &err_));
	store_close(st);
}

static void test_queue_and_counts(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], s[4][STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	for (int i = 0; i < 4; i++)
		add_session(st, repo, s[i]);
	OK(st->ops->session_transition(
	    st, s[0], SESSION_QUEUED, SESSION_PROVISIONING, NULL, NULL, &err_));
	OK(st->ops->session_transition(st, s[1], SESSION_QUEUED, SESSION_FAILED,
				       NULL, NULL, &err_));
	struct store_session *v = NULL;
	size_t n = 0;
	OK(st->ops->session_list_state(st, SESSION_QUEUED, &v, &n, &err_));
	assert_int_equal(n, 2);
	assert_string_equal(v[0].id, s[2]);
	assert_string_equal(v[1].id, s[3]);
	assert_true(v[0].queue_seq < v[1].queue_seq);
	store_sessions_free(v, n);
	OK(st->ops->session_list_state(st, SESSION_RUNNING, &v, &n, &err_));
	assert_int_equal(n, 0);
	store_sessions_free(v, n);

	int64_t counts[SESSION_STATE_MAX];
	memset(counts, 0xff, sizeof(counts));
	OK(st->ops->session_count(st, counts, &err_));
	assert_int_equal(counts[SESSION_QUEUED], 2);
	assert_int_equal(counts[SESSION_PROVISIONING], 1);
	assert_int_equal(counts[SESSION_FAILED], 1);
	assert_int_equal(counts[SESSION_RUNNING], 0);
	assert_int_equal(counts[SESSION_INTERRUPTED], 0);
	store_close(st);
}

/* ---- allocation failure ------------------------------------------------- */

/* Fails allocation 1, 2, ... of call until it succeeds; every failure must
 * be a clean -ENOMEM with an error (ASan's leak check does the rest). */
#define EVERY_ALLOC(call, on_success)                                         \
	do {                                                                  \
		unsigned long n_;                                             \
		for (n_ = 1; n_ < 10000; n_++) {                              \
			struct wr_error *err_ = NULL;                         \
			wr_alloc_fail_at(n_);                                 \
			long long r_ = (long long)(call);                     \
			wr_alloc_fail_at(0);                                  \
			if (r_ >= 0) {                                        \
				assert_null(err_);                            \
				on_success;                                   \
				break;                                        \
			}                                                     \
			if (r_ != -ENOMEM || !err_ || err_->errnum != ENOMEM) \
				fail_msg("%s, allocation %lu failed: %lld "   \
					 "%s",                                \
					 #call, n_, r_,                       \
					 err_ ? err_->msg : "");              \
			wr_error_free(err_);                                  \
		}                                                             \
		assert_true(n_ > 1);                                          \
	} while (0)

/* store_open as an int-returning call, for EVERY_ALLOC. */
static int open_as_int(const char *url, struct store **out,
		       struct wr_error **err)
{
	*out = store_open(url, err);
	if (*out)
		return 0;
	return *err ? -(*err)->errnum : -EIO;
}

static void test_allocation_failure(void **state)
{
	(void)state;
	struct store *st = open_db("w.db");
	char repo[STORE_ID_MAX], sid[STORE_ID_MAX];
	add_repo(st, "c-hello", repo);
	for (int i = 0; i < 3; i++)
		add_session(st, repo, sid);
	struct store_session_update upd = STORE_SESSION_UPDATE_INIT;
	upd.sandbox = "ws";
	upd.reason = "r";
	upd.outcome_json = "{}";
	OK(st->ops->session_transition(st, sid, -1, SESSION_PROVISIONING, &upd,
				       NULL, &err_));
	OK(st->ops->message_add(st, sid, "bob", "more", &err_));
	struct store_artifact art = {.name = (char *)"a",
				     .path = (char *)"/p",
				     .media_type = (char *)"text/plain"};
	OK(st->ops->artifact_add(st, sid, &art, &err_));
	struct store_snapshot snap = {.id = "snap", .commit = "abc"};
	memcpy(snap.repo_id, repo, STORE_ID_MAX);
	OK(st->ops->snapshot_add(st, &snap, &err_));
	struct store_token tok = {
	    .user = (char *)"u", .role = (char *)"admin", .name = (char *)"u"};
	OK(st->ops->token_add(st, "ff", &tok, &err_));

	struct store_session s;
	EVERY_ALLOC(st->ops->session_get(st, sid, &s, &err_), ({
			    assert_string_equal(s.sandbox, "ws");
			    store_session_clear(&s);
		    }));
	struct store_session_filter f = {.state = -1, .before_id = NULL};
	struct store_session *sv = NULL;
	size_t n = 0;
	EVERY_ALLOC(st->ops->session_list(st, &f, &sv, &n, &err_), ({
			    assert_int_equal(n, 3);
			    store_sessions_free(sv, n);
		    }));
	EVERY_ALLOC(
	    st->ops->session_list_state(st, SESSION_QUEUED, &sv, &n, &err_), ({
		    assert_int_equal(n, 2);
		    store_sessions_free(sv, n);
	    }));
	struct store_event *ev = NULL;
	EVERY_ALLOC(st->ops->event_list(st, sid, 0, 0, &ev, &n, &err_), ({
			    assert_int_equal(n, 3);
			    store_events_free(ev, n);
		    }));
	struct store_message *mv = NULL;
	EVERY_ALLOC(st->ops->message_pending(st, sid, &mv, &n, &err_), ({
			    assert_int_equal(n, 2);
			    store_messages_free(mv, n);
		    }));
	struct store_artifact *av = NULL;
	EVERY_ALLOC(st->ops->artifact_list(st, sid, &av, &n, &err_), ({
			    assert_int_equal(n, 1);
			    store_artifacts_free(av, n);
		    }));
	struct store_repo *rv = NULL;
	EVERY_ALLOC(st->ops->repo_list(st, &rv, &n, &err_), ({
			    assert_int_equal(n, 1);
			    store_repos_free(rv, n);
		    }));
	struct store_repo r;
	EVERY_ALLOC(st->ops->repo_get(st, "c-hello", &r, &err_),
		    store_repo_clear(&r));
	struct store_snapshot *snv = NULL;
	EVERY_ALLOC(st->ops->snapshot_list(st, NULL, &snv, &n, &err_), ({
			    assert_int_equal(n, 1);
			    store_snapshots_free(snv, n);
		    }));
	struct store_token t;
	EVERY_ALLOC(st->ops->token_lookup(st, "ff", 0, &t, &err_),
		    store_token_clear(&t));
	struct store_token *tv = NULL;
	EVERY_ALLOC(st->ops->token_list(st, &tv, &n, &err_), ({
			    assert_int_equal(n, 1);
			    store_tokens_free(tv, n);
		    }));
	store_close(st);

	/* open: every allocation of ours on the way (SQLite's and libpq's
	 * are their own) */
	struct store *again = NULL;
	EVERY_ALLOC(open_as_int(U("w.db"), &again, &err_), store_close(again));
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, test_setup, test_teardown)
	const struct CMUnitTest tests[] = {
	    T(test_state_names_and_lifecycle),
	    T(test_event_kinds),
	    T(test_new_id),
	    T(test_open_creates_migrates_and_reopens),
	    T(test_open_refuses_newer_schema),
	    T(test_open_errors),
	    T(test_open_in_memory),
	    T(test_open_migrates_older_schema),
	    T(test_build_queue),
	    T(test_secrets_store),
	    T(test_evals),
	    T(test_concurrent_opens),
	    T(test_open_urls),
	    T(test_tokens),
	    T(test_tokens_migration),
	    T(test_repositories),
	    T(test_snapshots),
	    T(test_session_create_and_get),
	    T(test_session_transition),
	    T(test_transition_and_event_are_atomic),
	    T(test_session_update),
	    T(test_session_writes),
	    T(test_events),
	    T(test_concurrent_appends_are_gapless),
	    T(test_two_handles_append_gapless),
	    T(test_concurrent_mixed_writes),
	    T(test_reconnects),
	    T(test_messages),
	    T(test_artifacts),
	    T(test_session_list_pagination),
	    T(test_queue_and_counts),
	    T(test_allocation_failure),
	};
#undef T
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

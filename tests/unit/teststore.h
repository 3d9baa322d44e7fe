/* teststore.h - the store a unit test runs against, on either backend.
 *
 * Without WARREN_TEST_STORE, a store called NAME ("w.db") is the SQLite
 * file DIR/NAME. With WARREN_TEST_STORE set to a PostgreSQL URL (tests/
 * run.sh's second pass of the store's tests, against a server of its own:
 * tests/pg_server.sh), it is a database of that server of its own, named
 * after the test program, DIR's last component and NAME, created empty the
 * first time the process asks for it and dropped by teststore_cleanup.
 * Also raw SQL on a store's database, beside the store (to break it, or
 * to look at it), on either backend. Included after cmocka.h by one test
 * file each (static functions: a test binary is one .c file). */
#ifndef WR_TESTS_TESTSTORE_H
#define WR_TESTS_TESTSTORE_H

#include "store/store.h"

#include <errno.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TESTSTORE_MAX 64 /* databases one process creates at most */

static char teststore_dbs[TESTSTORE_MAX][64];
static char teststore_urls[TESTSTORE_MAX][1024];
static size_t teststore_n;

/* The server's URL (its maintenance database), or NULL: SQLite. */
static inline const char *teststore_pg(void)
{
	const char *url = getenv("WARREN_TEST_STORE");
	return url && store_url_is_pg(url) ? url : NULL;
}

/* Appends text to buf, percent-encoded as a URI query value. */
static inline void teststore_encode(char *buf, size_t size, const char *text)
{
	size_t n = strlen(buf);
	for (const unsigned char *p = (const unsigned char *)text;
	     *p && n + 4 < size; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~/", *p))
			buf[n++] = (char)*p;
		else
			n += (size_t)snprintf(buf + n, size - n, "%%%02X", *p);
	}
	buf[n] = '\0';
}

/* The server's URL with dbname as its database. */
static inline void teststore_pg_url(const char *dbname, char *out, size_t size)
{
	char *msg = NULL;
	PQconninfoOption *opts = PQconninfoParse(teststore_pg(), &msg);
	if (!opts)
		fail_msg("WARREN_TEST_STORE: %s", msg ? msg : "bad URL");
	snprintf(out, size, "postgresql:///%s?", dbname);
	for (PQconninfoOption *o = opts; o->keyword; o++) {
		if (!o->val || !*o->val || !strcmp(o->keyword, "dbname"))
			continue;
		size_t n = strlen(out);
		snprintf(out + n, size - n,
			 "%s%s=", out[n - 1] == '?' ? "" : "&", o->keyword);
		teststore_encode(out, size, o->val);
	}
	PQconninfoFree(opts);
}

static inline void teststore_quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* Runs sql on the server's maintenance database. */
static inline void teststore_pg_admin(const char *sql)
{
	PGconn *db = PQconnectdb(teststore_pg());
	if (PQstatus(db) != CONNECTION_OK)
		fail_msg("connect to %s: %s", teststore_pg(),
			 PQerrorMessage(db));
	PQsetNoticeProcessor(db, teststore_quiet, NULL);
	PGresult *res = PQexec(db, sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		fail_msg("%s: %s", sql, PQerrorMessage(db));
	PQclear(res);
	PQfinish(db);
}

/* The URL of the store called name, for a test whose files are in dir. */
static inline const char *teststore_url(const char *dir, const char *name)
{
	static char bufs[8][1024];
	static int next;
	char *b = bufs[next++ % 8];
	if (!teststore_pg()) {
		snprintf(b, 1024, "%s/%s", dir, name);
		return b;
	}
	/* test_db_t5_w_db: the program, the test's directory, the name */
	const char *base = strrchr(dir, '/');
	char db[64];
	snprintf(db, sizeof(db), "%s_%s_%s", program_invocation_short_name,
		 base ? base + 1 : dir, name);
	for (char *p = db; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
			*p = '_';
	for (size_t i = 0; i < teststore_n; i++)
		if (!strcmp(teststore_dbs[i], db)) {
			snprintf(b, 1024, "%s", teststore_urls[i]);
			return b;
		}
	if (teststore_n == TESTSTORE_MAX)
		fail_msg("teststore: more than %d databases", TESTSTORE_MAX);
	char sql[256];
	/* a database left by an earlier run of the same test starts over */
	snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)",
		 db);
	teststore_pg_admin(sql);
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s", db);
	teststore_pg_admin(sql);
	snprintf(teststore_dbs[teststore_n], sizeof(teststore_dbs[0]), "%s",
		 db);
	teststore_pg_url(db, teststore_urls[teststore_n],
			 sizeof(teststore_urls[0]));
	snprintf(b, 1024, "%s", teststore_urls[teststore_n++]);
	return b;
}

/* Drops the databases this process created (their stores closed). */
static inline void teststore_cleanup(void)
{
	for (size_t i = 0; teststore_pg() && i < teststore_n; i++) {
		char sql[256];
		snprintf(sql, sizeof(sql),
			 "DROP DATABASE IF EXISTS %s WITH (FORCE)",
			 teststore_dbs[i]);
		teststore_pg_admin(sql);
	}
	teststore_n = 0;
}

/* Runs sql (several statements) on the database of the store at url. */
static inline void teststore_sql(const char *url, const char *sql)
{
	if (store_url_is_pg(url)) {
		PGconn *db = PQconnectdb(url);
		if (PQstatus(db) != CONNECTION_OK)
			fail_msg("connect to %s: %s", url, PQerrorMessage(db));
		PQsetNoticeProcessor(db, teststore_quiet, NULL);
		PGresult *res = PQexec(db, sql);
		if (PQresultStatus(res) != PGRES_COMMAND_OK &&
		    PQresultStatus(res) != PGRES_TUPLES_OK)
			fail_msg("%s: %s", sql, PQerrorMessage(db));
		PQclear(res);
		PQfinish(db);
		return;
	}
	sqlite3 *db = NULL;
	if (sqlite3_open(url, &db) != SQLITE_OK)
		fail_msg("open %s: %s", url, sqlite3_errmsg(db));
	sqlite3_busy_timeout(db, 5000);
	char *msg = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg);
	sqlite3_close(db);
}

/* Ends every other connection to the PostgreSQL database at url, as a
 * restart of the server would, and waits until they are gone. */
static inline void teststore_pg_kill(const char *url)
{
	PGconn *db = PQconnectdb(url);
	if (PQstatus(db) != CONNECTION_OK)
		fail_msg("connect to %s: %s", url, PQerrorMessage(db));
	static const char *const sql[] = {
	    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
	    "datname = current_database() AND pid <> pg_backend_pid()",
	    "SELECT COUNT(*) FROM pg_stat_activity WHERE "
	    "datname = current_database() AND pid <> pg_backend_pid()"};
	PGresult *res = PQexec(db, sql[0]);
	PQclear(res);
	for (int i = 0; i < 500; i++) {
		res = PQexec(db, sql[1]);
		bool gone = PQresultStatus(res) == PGRES_TUPLES_OK &&
			    !strcmp(PQgetvalue(res, 0, 0), "0");
		PQclear(res);
		if (gone)
			break;
		usleep(10000);
	}
	PQfinish(db);
}

/* The single integer sql returns on the store's database. */
static inline long long teststore_int(const char *url, const char *sql)
{
	long long v = 0;
	if (store_url_is_pg(url)) {
		PGconn *db = PQconnectdb(url);
		PGresult *res = PQexec(db, sql);
		if (PQresultStatus(res) != PGRES_TUPLES_OK ||
		    PQntuples(res) < 1)
			fail_msg("%s: %s", sql, PQerrorMessage(db));
		v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		PQclear(res);
		PQfinish(db);
		return v;
	}
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	if (sqlite3_open(url, &db) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK ||
	    sqlite3_step(q) != SQLITE_ROW)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	v = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return v;
}

#endif

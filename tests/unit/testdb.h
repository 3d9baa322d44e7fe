/* testdb.h - what the store's unit tests share (test_db.c, test_lease.c):
 * a scratch directory per test under /tmp (removed at the end with nftw),
 * the store of a name on the backend under test (teststore.h), the OK and
 * FAILS checks of a call, and repositories, sessions and events made or
 * read for a test. Included after cmocka.h, jansson.h and teststore.h by
 * one test file each (static functions: a test binary is one .c file). */
#ifndef WR_TESTS_TESTDB_H
#define WR_TESTS_TESTDB_H

#include <ftw.h>
#include <limits.h>
#include <sys/stat.h>

#include "util/alloc.h"
#include "util/error.h"

static char root[] = "/tmp/warren-unit-db.XXXXXX";
static char dir[PATH_MAX]; /* this test's own directory under root */
static int test_seq;

static inline int remove_entry(const char *path, const struct stat *st,
			       int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

static inline int group_setup(void **state)
{
	(void)state;
	return mkdtemp(root) ? 0 : -1;
}

static inline int group_teardown(void **state)
{
	(void)state;
	return nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static inline int test_setup(void **state)
{
	(void)state;
	wr_alloc_fail_at(0);
	snprintf(dir, sizeof(dir), "%s/t%d", root, ++test_seq);
	return mkdir(dir, 0755);
}

static inline int test_teardown(void **state)
{
	(void)state;
	wr_alloc_fail_at(0);
	teststore_cleanup();
	return 0;
}

/* dir/rel, in one of a few rotating buffers. */
static inline const char *P(const char *rel)
{
	static char bufs[8][PATH_MAX];
	static int next;
	char *b = bufs[next++ % 8];
	snprintf(b, PATH_MAX, "%s/%s", dir, rel);
	return b;
}

static inline void fail_err(const char *what, long long r, struct wr_error *err)
{
	fail_msg("%s = %lld: %s", what, r, err ? err->msg : "(no error)");
}

/* A call that must succeed; evaluates to its result. */
#define OK(call)                                   \
	({                                         \
		struct wr_error *err_ = NULL;      \
		long long r_ = (long long)(call);  \
		if (r_ < 0)                        \
			fail_err(#call, r_, err_); \
		r_;                                \
	})
/* A call that must fail with -errnum and say why. */
#define FAILS(errnum, call)                                               \
	do {                                                              \
		struct wr_error *err_ = NULL;                             \
		long long r_ = (long long)(call);                         \
		if (r_ != -(errnum))                                      \
			fail_msg("%s = %lld, want %d: %s", #call, r_,     \
				 -(errnum), err_ ? err_->msg : "(none)"); \
		assert_non_null(err_);                                    \
		assert_non_null(err_->msg);                               \
		wr_error_free(err_);                                      \
	} while (0)

/* The URL of the store called name, on the backend under test. */
static inline const char *U(const char *name)
{
	return teststore_url(dir, name);
}

static inline struct store *open_db(const char *name)
{
	struct wr_error *err = NULL;
	struct store *st = store_open(U(name), &err);
	if (!st)
		fail_err("store_open", -1, err);
	return st;
}

/* Runs SQL on the database with a connection of its own. */
static inline void raw_sql(const char *name, const char *sql)
{
	teststore_sql(U(name), sql);
}

/* A test of one backend's own behaviour, skipped on the other. */
#define ONLY_SQLITE()                 \
	do {                          \
		if (teststore_pg()) { \
			skip();       \
			return;       \
		}                     \
	} while (0)

static inline void add_repo(struct store *st, const char *name,
			    char id[STORE_ID_MAX])
{
	struct store_repo r = {.name = (char *)name, .url = (char *)"/src/x"};
	store_new_id("r-", r.id);
	OK(st->ops->repo_add(st, &r, &err_));
	memcpy(id, r.id, STORE_ID_MAX);
}

static inline void add_session_at(struct store *st, const char *repo_id,
				  const char *user, int64_t created_ms,
				  char id[STORE_ID_MAX])
{
	struct store_session s = {.user = (char *)user,
				  .prompt = (char *)"fix the test",
				  .created_ms = created_ms};
	store_new_id("s-", s.id);
	snprintf(s.repo_id, sizeof(s.repo_id), "%s", repo_id);
	OK(st->ops->session_create(st, &s, &err_));
	memcpy(id, s.id, STORE_ID_MAX);
}

static inline void add_session(struct store *st, const char *repo_id,
			       char id[STORE_ID_MAX])
{
	add_session_at(st, repo_id, "alice", 0, id);
}

static inline enum session_state state_of(struct store *st, const char *id)
{
	struct store_session s;
	OK(st->ops->session_get(st, id, &s, &err_));
	enum session_state state = s.state;
	store_session_clear(&s);
	return state;
}

static inline size_t count_events(struct store *st, const char *id)
{
	struct store_event *ev = NULL;
	size_t n = 0;
	OK(st->ops->event_list(st, id, 0, 0, &ev, &n, &err_));
	store_events_free(ev, n);
	return n;
}

/* The data of event seq, parsed. */
static inline json_t *event_data(struct store *st, const char *id, int64_t seq,
				 const char *kind)
{
	struct store_event *ev = NULL;
	size_t n = 0;
	OK(st->ops->event_list(st, id, seq - 1, 1, &ev, &n, &err_));
	assert_int_equal(n, 1);
	assert_int_equal(ev[0].seq, seq);
	assert_string_equal(ev[0].kind, kind);
	json_t *j = json_loads(ev[0].data_json, 0, NULL);
	assert_non_null(j);
	store_events_free(ev, n);
	return j;
}

#endif

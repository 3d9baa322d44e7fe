/* pg_watch.c - what other processes write, as it is committed: a
 * connection of its own LISTENing on PG_WATCH_CHANNEL, on which every
 * event append NOTIFYs its session's id (pg_schema.c, PG_EVENT_APPEND).
 * An API server streams a worker's events this way, within the
 * notification's delay rather than a poll's.
 *
 * One thread waits on the connection's socket and a stop pipe. A
 * connection that fails is made again (a second, then doubling up to
 * 10 s); once it is back, the callback hears "anything" (session NULL):
 * what was committed meanwhile was not notified to it. */
#include "store/pg_internal.h"

#include "util/alloc.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WATCH_RETRY_MIN_MS 1000
#define WATCH_RETRY_MAX_MS 10000

struct pg_watch {
	struct pg_store *s;
	store_changed_fn changed;
	void *ctx;
	int stop[2]; /* written to once, at stop */
	pthread_t thread;
	PGconn *db;
};

/* A connection that LISTENs; NULL (said in the log) if it cannot. */
static PGconn *listen_open(struct pg_watch *w)
{
	PGconn *db = pg_connect(w->s);
	if (!db)
		return NULL;
	if (PQstatus(db) != CONNECTION_OK) {
		wr_log(WR_LOG_WARN, "store", "watch %s: %s", w->s->shown,
		       PQerrorMessage(db));
		PQfinish(db);
		return NULL;
	}
	PGresult *res = PQexec(db, "LISTEN " PG_WATCH_CHANNEL);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	if (!ok)
		wr_log(WR_LOG_WARN, "store", "watch %s: LISTEN: %s",
		       w->s->shown, PQerrorMessage(db));
	PQclear(res);
	if (!ok) {
		PQfinish(db);
		return NULL;
	}
	return db;
}

/* Waits up to ms for the stop pipe (and the connection's socket, if
 * fd >= 0); true when stopping. */
static bool wait_or_stop(struct pg_watch *w, int fd, int ms, bool *readable)
{
	struct pollfd pfd[2] = {{w->stop[0], POLLIN, 0}, {fd, POLLIN, 0}};
	int n;
	do {
		n = poll(pfd, fd >= 0 ? 2 : 1, ms);
	} while (n < 0 && errno == EINTR);
	if (readable)
		*readable = n > 0 && fd >= 0 && (pfd[1].revents & POLLIN);
	return n > 0 && (pfd[0].revents & (POLLIN | POLLHUP));
}

static void *watch_main(void *arg)
{
	struct pg_watch *w = arg;
	int retry_ms = WATCH_RETRY_MIN_MS;
	for (;;) {
		if (!w->db) {
			w->db = listen_open(w);
			if (!w->db) {
				if (wait_or_stop(w, -1, retry_ms, NULL))
					break;
				retry_ms = retry_ms * 2 > WATCH_RETRY_MAX_MS
					       ? WATCH_RETRY_MAX_MS
					       : retry_ms * 2;
				continue;
			}
			retry_ms = WATCH_RETRY_MIN_MS;
			/* (back) after a cut: what came meanwhile is unknown */
			w->changed(w->ctx, NULL, NULL);
		}
		bool readable = false;
		if (wait_or_stop(w, PQsocket(w->db), -1, &readable))
			break;
		if (!readable)
			continue;
		if (!PQconsumeInput(w->db) || PQstatus(w->db) != CONNECTION_OK) {
			wr_log(WR_LOG_WARN, "store",
			       "watch %s: the connection was lost: %s",
			       w->s->shown, PQerrorMessage(w->db));
			PQfinish(w->db);
			w->db = NULL;
			continue;
		}
		PGnotify *n;
		while ((n = PQnotifies(w->db))) {
			/* "SESSION KIND" (ids and kinds hold no space) */
			char *sp = strchr(n->extra, ' ');
			if (sp)
				*sp = '\0';
			w->changed(w->ctx, n->extra, sp ? sp + 1 : NULL);
			PQfreemem(n);
		}
	}
	return NULL;
}

int pg_watch(struct store *st, store_changed_fn changed, void *ctx,
	     struct wr_error **err)
{
	struct pg_store *s = pg_of(st);
	if (!changed) {
		pg_watch_stop(s);
		return 0;
	}
	if (s->watch)
		return wr_error_set(err, EBUSY, "store %s: a watch runs "
						"already",
				    s->shown);
	struct pg_watch *w = wr_calloc(1, sizeof(*w));
	if (!w)
		return wr_error_set(err, ENOMEM, "store watch");
	w->s = s;
	w->changed = changed;
	w->ctx = ctx;
	if (pipe2(w->stop, O_CLOEXEC) < 0) {
		int e = errno;
		free(w);
		return wr_error_set(err, e, "store watch: pipe");
	}
	/* the first LISTEN before the return: nothing committed after it is
	 * missed (a failure is retried by the thread) */
	w->db = listen_open(w);
	int e = pthread_create(&w->thread, NULL, watch_main, w);
	if (e) {
		if (w->db)
			PQfinish(w->db);
		close(w->stop[0]);
		close(w->stop[1]);
		free(w);
		return wr_error_set(err, e, "store watch: thread");
	}
	s->watch = w;
	return 0;
}

void pg_watch_stop(struct pg_store *s)
{
	struct pg_watch *w = s->watch;
	if (!w)
		return;
	if (write(w->stop[1], "x", 1) < 0) {
		/* the pipe is ours and empty: it cannot be full */
	}
	pthread_join(w->thread, NULL);
	if (w->db)
		PQfinish(w->db);
	close(w->stop[0]);
	close(w->stop[1]);
	free(w);
	s->watch = NULL;
}

/* secrets_store.c - secrets through the store (secrets_store.h).
 *
 * The sync compares bytes, not times: a row is written over the local
 * files when the file or the list differs, whatever the hosts' clocks
 * say, so that every host converges on the store's copy (the last put
 * wins there). The store is trusted no more than a file: names are
 * checked before they become paths, files and lists by
 * secrets_file_write, and what is written is still decrypted by
 * secrets_get with its own checks before any use. */
#include "security/secrets_store.h"

#include "security/secrets.h"
#include "store/store.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MODULE "secrets"

static pthread_mutex_t files_mu = PTHREAD_MUTEX_INITIALIZER;

void secrets_store_lock(void)
{
	pthread_mutex_lock(&files_mu);
}

void secrets_store_unlock(void)
{
	pthread_mutex_unlock(&files_mu);
}

/* The failures of copying a row already said (under files_mu): a row
 * that cannot be written is said once per version, not every pass. */
struct said {
	char name[STORE_SECRET_NAME_MAX + 1];
	int64_t updated_ms;
};
static struct said *said;
static size_t n_said;

/* true the first time for this version of the row (then remembered) */
static bool say_first(const struct store_secret *row)
{
	for (size_t i = 0; i < n_said; i++)
		if (!strcmp(said[i].name, row->name)) {
			if (said[i].updated_ms == row->updated_ms)
				return false;
			said[i].updated_ms = row->updated_ms;
			return true;
		}
	if (n_said < STORE_SECRETS_MAX) {
		struct said *grown =
		    wr_realloc(said, (n_said + 1) * sizeof(*said));
		if (grown) {
			said = grown;
			snprintf(said[n_said].name, sizeof(said[n_said].name),
				 "%s", row->name);
			said[n_said].updated_ms = row->updated_ms;
			n_said++;
		}
	}
	return true;
}

int secrets_store_put(struct store *st, const char *data_dir, const char *name,
		      struct wr_error **err)
{
	struct store_secret s = {.updated_ms = store_now_ms()};
	int r = secrets_file_read(data_dir, name, &s.file, &s.file_len,
				  &s.repos, err);
	if (r < 0)
		return r;
	snprintf(s.name, sizeof(s.name), "%s", name);
	r = st->ops->secret_put(st, &s, err);
	store_secret_clear(&s);
	return r;
}

int secrets_store_delete(struct store *st, const char *name, bool *deleted,
			 struct wr_error **err)
{
	return st->ops->secret_delete(st, name, store_now_ms(), deleted, err);
}

/* Does the local copy of row hold its bytes exactly? */
static bool same_files(const char *data_dir, const struct store_secret *row)
{
	unsigned char *file = NULL;
	size_t len = 0;
	char *repos = NULL;
	struct wr_error *err = NULL;
	if (secrets_file_read(data_dir, row->name, &file, &len, &repos, &err) <
	    0) {
		wr_error_free(err);
		return false;
	}
	bool same = len == row->file_len && !memcmp(file, row->file, len) &&
		    ((!repos && !row->repos) ||
		     (repos && row->repos && !strcmp(repos, row->repos)));
	free(file);
	free(repos);
	return same;
}

static void say_undecryptable(const char *data_dir, const char *name,
			      struct wr_error *err)
{
	const char *key = secrets_key_file();
	wr_log(WR_LOG_ERROR, MODULE,
	       "secret %s (from the store) does not decrypt with this "
	       "server's key %s%s: every server needs the same key "
	       "(secrets_key_file, docs/deploy.md); builds and sessions here "
	       "that use it fail (%s)",
	       name, key ? key : data_dir, key ? "" : "/secrets.key",
	       err && err->msg ? err->msg : "does not decrypt");
}

/* After name's files were written (or, at start, found): does it
 * decrypt here? Logged if not. */
static void check_key(const char *data_dir, const char *name,
		      struct secrets_sync_stats *stats)
{
	struct wr_error *err = NULL;
	int r = secrets_check(data_dir, name, &err);
	if (r == -EBADMSG || r == -ENOKEY) {
		stats->undecryptable++;
		say_undecryptable(data_dir, name, err);
	} else if (r < 0) {
		wr_log(WR_LOG_ERROR, MODULE, "secret %s: %s", name,
		       err && err->msg ? err->msg : "cannot be read");
	}
	wr_error_free(err);
}

static const struct store_secret *find_row(const struct store_secret *v,
					   size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			return &v[i];
	return NULL;
}

/* The local secrets the store has no row of (made before it kept them):
 * put there, if they decrypt here (a file this host cannot read is not
 * spread to the others). */
static void import_local(struct store *st, const char *data_dir,
			 const struct store_secret *rows, size_t n_rows,
			 struct secrets_sync_stats *stats)
{
	struct secret_info *local = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	if (secrets_list(data_dir, &local, &n, &err) < 0) {
		wr_log(WR_LOG_ERROR, MODULE, "import: %s",
		       err && err->msg ? err->msg : "cannot list");
		wr_error_free(err);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const char *name = local[i].name;
		if (find_row(rows, n_rows, name))
			continue;
		int r = secrets_check(data_dir, name, &err);
		if (r == 0)
			r = secrets_store_put(st, data_dir, name, &err);
		if (r == 0) {
			stats->imported++;
			wr_log(WR_LOG_INFO, MODULE,
			       "secret %s of this data directory imported "
			       "into the store",
			       name);
		} else {
			wr_log(WR_LOG_ERROR, MODULE,
			       "secret %s of this data directory not "
			       "imported into the store: %s",
			       name, err && err->msg ? err->msg : "failed");
		}
		wr_error_freep(&err);
	}
	free(local);
}

int secrets_sync_once(struct store *st, const char *data_dir, bool start,
		      struct secrets_sync_stats *stats, struct wr_error **err)
{
	struct secrets_sync_stats none;
	if (!stats)
		stats = &none;
	memset(stats, 0, sizeof(*stats));
	struct store_secret *rows = NULL;
	size_t n = 0;
	secrets_store_lock();
	int r = st->ops->secret_list(st, &rows, &n, err);
	if (r < 0) {
		secrets_store_unlock();
		return r;
	}
	for (size_t i = 0; i < n; i++) {
		const struct store_secret *row = &rows[i];
		struct wr_error *e = NULL;
		/* a name is a path component: only a valid one */
		if (!secrets_name_valid(row->name))
			continue;
		if (row->deleted_ms) {
			r = secrets_delete(data_dir, row->name, &e);
			if (r == 0) {
				stats->removed++;
				wr_log(WR_LOG_INFO, MODULE,
				       "secret %s deleted (the store's)",
				       row->name);
			} else if (r != -ENOENT && say_first(row)) {
				wr_log(WR_LOG_ERROR, MODULE,
				       "secret %s: remove the deleted "
				       "secret's files: %s",
				       row->name,
				       e && e->msg ? e->msg : "failed");
			}
			wr_error_free(e);
			continue;
		}
		if (same_files(data_dir, row)) {
			if (start)
				check_key(data_dir, row->name, stats);
			continue;
		}
		r = secrets_file_write(data_dir, row->name, row->file,
				       row->file_len, row->repos, &e);
		if (r < 0) {
			if (say_first(row))
				wr_log(WR_LOG_ERROR, MODULE,
				       "secret %s: write the store's copy: %s "
				       "(said once; tried again every %d ms)",
				       row->name,
				       e && e->msg ? e->msg : "failed",
				       SECRETS_SYNC_MS);
			wr_error_free(e);
			continue;
		}
		stats->written++;
		wr_log(WR_LOG_INFO, MODULE, "secret %s written (the store's)",
		       row->name);
		check_key(data_dir, row->name, stats);
	}
	if (start)
		import_local(st, data_dir, rows, n, stats);
	secrets_store_unlock();
	store_secrets_free(rows, n);
	return 0;
}

struct secrets_sync {
	struct store *st;
	const char *data_dir;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool stop;
	bool failing; /* the last pass could not read the store: said once */
	pthread_t thread;
};

static void *sync_main(void *arg)
{
	struct secrets_sync *s = arg;
	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += SECRETS_SYNC_MS / 1000;
		until.tv_nsec += (SECRETS_SYNC_MS % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (!s->stop && pthread_cond_timedwait(&s->cond, &s->mu,
							  &until) != ETIMEDOUT)
			;
		if (s->stop)
			break;
		pthread_mutex_unlock(&s->mu);
		struct wr_error *err = NULL;
		int r =
		    secrets_sync_once(s->st, s->data_dir, false, NULL, &err);
		if (r < 0 && !s->failing)
			wr_log(WR_LOG_WARN, MODULE,
			       "sync with the store: %s (tried again every "
			       "%d ms)",
			       err && err->msg ? err->msg : "failed",
			       SECRETS_SYNC_MS);
		else if (r == 0 && s->failing)
			wr_log(WR_LOG_INFO, MODULE,
			       "sync with the store works again");
		s->failing = r < 0;
		wr_error_free(err);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int secrets_sync_start(struct store *st, const char *data_dir,
		       struct secrets_sync **out, struct wr_error **err)
{
	*out = NULL;
	if (!st->ops->watch)
		return 0; /* this server's store alone: DATA/secrets is all */
	struct secrets_sync_stats stats;
	int r = secrets_sync_once(st, data_dir, true, &stats, err);
	if (r < 0)
		return r;
	if (stats.written || stats.removed || stats.imported ||
	    stats.undecryptable)
		wr_log(WR_LOG_INFO, MODULE,
		       "synced with the store: %u written, %u removed, %u "
		       "imported, %u that do not decrypt here",
		       stats.written, stats.removed, stats.imported,
		       stats.undecryptable);
	struct secrets_sync *s = wr_calloc(1, sizeof(*s));
	if (!s)
		return wr_error_set(err, ENOMEM, "secrets sync");
	s->st = st;
	s->data_dir = data_dir;
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cond, &ca);
	pthread_condattr_destroy(&ca);
	r = pthread_create(&s->thread, NULL, sync_main, s);
	if (r != 0) {
		pthread_cond_destroy(&s->cond);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return wr_error_set(err, r, "secrets sync: start its thread");
	}
	*out = s;
	return 0;
}

void secrets_sync_stop(struct secrets_sync *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

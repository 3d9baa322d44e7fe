/* lease.c - a worker's leases (`warren serve --role worker`).
 *
 * A worker shares the store with other workers and API servers. It takes
 * a queued session only by claiming it (the store's session_claim: the
 * session's lease, with a new epoch, the fencing token), keeps what it
 * holds by renewing every renew_ms (lease_renew), and takes back, as
 * any worker may, the leases that ran out (lease_reap: the session
 * becomes interrupted, then queued again here for any worker to claim).
 *
 * Every write the control plane makes about a session this worker holds
 * carries the epoch it claimed (control_event, control_transition and the
 * runner's updates look it up here): a worker that lost a lease (frozen,
 * cut off, killed and back) cannot change anything, the store refuses
 * it. A session missing from what a renewal says the worker holds, or held
 * at another epoch, is stopped here (its sandbox goes, nothing is
 * written); a worker that cannot renew for a whole lease stops all its
 * sessions' sandboxes on its own. */
#include "sched/internal.h"

#include "sched/sched.h"

#include "util/alloc.h"
#include "util/log.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool control_is_worker(const struct control *c)
{
	return c->cfg.worker_id && c->cfg.worker_id[0];
}

static struct lease_held *held_find(struct control_leases *l, const char *id)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->held[i].id, id))
			return &l->held[i];
	return NULL;
}

int64_t lease_epoch(struct control *c, const char *session_id)
{
	if (!control_is_worker(c) || !session_id)
		return 0;
	struct control_leases *l = &c->leases;
	pthread_mutex_lock(&l->mu);
	struct lease_held *h = held_find(l, session_id);
	/* a session no runner of ours has: not ours to fence (the API's
	 * writes about another worker's session); one whose lease we lost
	 * has LEASE_NOT_HELD, an epoch no session has */
	int64_t e = h ? h->epoch : 0;
	pthread_mutex_unlock(&l->mu);
	return e;
}

int lease_hold(struct control *c, const char *session_id, int64_t epoch)
{
	struct control_leases *l = &c->leases;
	pthread_mutex_lock(&l->mu);
	struct lease_held *h = held_find(l, session_id);
	if (!h && l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct lease_held *v =
		    wr_realloc(l->held, cap * sizeof(*v));
		if (!v) {
			pthread_mutex_unlock(&l->mu);
			return -ENOMEM;
		}
		l->held = v;
		l->cap = cap;
	}
	if (!h) {
		h = &l->held[l->n++];
		snprintf(h->id, sizeof(h->id), "%s", session_id);
	}
	h->epoch = epoch;
	pthread_mutex_unlock(&l->mu);
	return 0;
}

void lease_drop(struct control *c, const char *session_id)
{
	struct control_leases *l = &c->leases;
	pthread_mutex_lock(&l->mu);
	struct lease_held *h = held_find(l, session_id);
	if (h)
		*h = l->held[--l->n];
	pthread_mutex_unlock(&l->mu);
}

int lease_claim(struct control *c, const char *session_id)
{
	struct store_claim *cl = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	int r = c->st->ops->session_claim(
	    c->st, c->cfg.worker_id, session_id, store_now_ms(),
	    (int64_t)c->cfg.lease_ms, 1, &cl, &n, &err);
	if (r < 0 || n == 0) {
		if (r < 0 && r != -EBUSY)
			wr_log(WR_LOG_WARN, "sched", "%s: claim: %s",
			       session_id,
			       err && err->msg ? err->msg : strerror(-r));
		wr_error_free(err);
		free(cl);
		return r < 0 ? r : -EBUSY;
	}
	r = lease_hold(c, session_id, cl[0].epoch);
	free(cl);
	return r;
}

/* The runs a renewal did not confirm: stopped, their writes refused
 * (c->mu held). held NULL: every run (the lease could not be renewed). */
static void stop_lost_locked(struct control *c, const struct store_claim *held,
			     size_t n_held, const char *why)
{
	for (struct run *r = c->runs; r; r = r->next) {
		if (r->done || r->lost)
			continue;
		int64_t mine = lease_epoch(c, r->id);
		bool kept = false;
		for (size_t i = 0; held && i < n_held; i++)
			if (!strcmp(held[i].id, r->id) &&
			    held[i].epoch == mine)
				kept = true;
		if (kept)
			continue;
		wr_log(WR_LOG_WARN, "sched",
		       "%s: lease lost (%s): its sandbox is stopped here", r->id,
		       why);
		r->lost = true;
		r->shutdown = true;
		if (r->child > 0)
			kill(r->child, SIGTERM);
		pthread_cond_signal(&r->cv);
		/* from now on its writes carry an epoch no session has */
		lease_hold(c, r->id, LEASE_NOT_HELD);
	}
}

/* Sessions whose lease ran out (anyone's): interrupted by the store, then
 * back in the queue for any worker. */
static void reap(struct control *c, const char *why)
{
	struct store *st = c->st;
	for (int round = 0; round < 16; round++) {
		struct store_claim *cl = NULL;
		size_t n = 0;
		struct wr_error *err = NULL;
		int r = st->ops->lease_reap(st, store_now_ms(), why, &cl, &n,
					    &err);
		if (r < 0) {
			wr_log(WR_LOG_WARN, "sched", "reap leases: %s",
			       err && err->msg ? err->msg : strerror(-r));
			wr_error_free(err);
			return;
		}
		for (size_t i = 0; i < n; i++) {
			enum session_state state = cl[i].state;
			struct store_session_update u =
			    STORE_SESSION_UPDATE_INIT;
			u.sandbox = "";
			struct wr_error *terr = NULL;
			if (state == SESSION_INTERRUPTED &&
			    control_transition(
				c, cl[i].id, SESSION_INTERRUPTED,
				SESSION_QUEUED, &u,
				json_pack("{s:s, s:s, s:I}", "why", "resume",
					  "lost_by", cl[i].worker_id, "epoch",
					  (json_int_t)cl[i].epoch),
				&terr) < 0)
				wr_error_free(terr);
			else if (state == SESSION_REVIEW &&
				 !strcmp(cl[i].worker_id, c->cfg.worker_id))
				/* its resting sandbox went with our last
				 * life */
				st->ops->session_update(st, cl[i].id,
							&u, NULL);
		}
		free(cl);
		if (n > 0)
			control_wake_scheduler(c);
		if (r < LEASE_REAP_BATCH)
			return;
	}
}

static int renew(struct control *c)
{
	struct store_claim *held = NULL;
	size_t n = 0;
	struct wr_error *err = NULL;
	int64_t now = store_now_ms();
	int r = c->st->ops->lease_renew(c->st, c->cfg.worker_id, now,
					(int64_t)c->cfg.lease_ms, &held, &n,
					&err);
	pthread_mutex_lock(&c->mu);
	if (r >= 0) {
		c->leases.last_renew_ms = now;
		stop_lost_locked(c, held, n, "another worker holds it now");
	} else if (now - c->leases.last_renew_ms >=
		   (int64_t)c->cfg.lease_ms) {
		/* past a whole lease without a renewal: others may hold
		 * them by now; stop, on our own */
		stop_lost_locked(c, NULL, 0, "cannot renew: the store is out "
					     "of reach");
	}
	pthread_mutex_unlock(&c->mu);
	if (r < 0) {
		wr_log(WR_LOG_WARN, "sched", "renew leases: %s",
		       err && err->msg ? err->msg : strerror(-r));
		wr_error_free(err);
	}
	free(held);
	return r;
}

static void *lease_main(void *arg)
{
	struct control *c = arg;
	struct control_leases *l = &c->leases;
	pthread_mutex_lock(&l->mu);
	while (!l->stopping) {
		struct timespec until;
		control_deadline(&until, c->cfg.renew_ms);
		pthread_cond_timedwait(&l->cv, &l->mu, &until);
		if (l->stopping)
			break;
		pthread_mutex_unlock(&l->mu);
		if (renew(c) >= 0)
			reap(c, NULL);
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* The renewals' watchdog. A renewal does not always fail: over a link
 * cut, the store's connection hangs (its call waits for TCP to give up,
 * minutes) and renew() never gets to see a lease go by. This thread never
 * touches the store: past a whole lease without a renewal, it stops the
 * sessions' sandboxes as renew() would (others may hold them by now). */
static void *watch_main(void *arg)
{
	struct control *c = arg;
	struct control_leases *l = &c->leases;
	pthread_mutex_lock(&l->mu);
	while (!l->stopping) {
		struct timespec until;
		control_deadline(&until, c->cfg.renew_ms);
		pthread_cond_timedwait(&l->cv, &l->mu, &until);
		if (l->stopping)
			break;
		pthread_mutex_unlock(&l->mu);
		pthread_mutex_lock(&c->mu);
		if (store_now_ms() - c->leases.last_renew_ms >=
		    (int64_t)c->cfg.lease_ms)
			stop_lost_locked(c, NULL, 0,
					 "cannot renew: the store is out "
					 "of reach");
		pthread_mutex_unlock(&c->mu);
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

int lease_start(struct control *c, struct wr_error **err)
{
	struct store *st = c->st;
	struct control_leases *l = &c->leases;
	if (!c->cfg.lease_ms)
		c->cfg.lease_ms = LEASE_DEFAULT_MS;
	if (!c->cfg.renew_ms)
		c->cfg.renew_ms = c->cfg.lease_ms / 3;
	/* our previous life's leases end now: what it ran goes back to the
	 * queue at once instead of at its lease's end */
	struct wr_error *e2 = NULL;
	st->ops->worker_stop(st, c->cfg.worker_id, store_now_ms(), &e2);
	wr_error_free(e2);
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	struct store_worker w = {.host = host,
				 .max_sandboxes = (int)c->cfg.max_sandboxes};
	snprintf(w.id, sizeof(w.id), "%s", c->cfg.worker_id);
	int r = st->ops->worker_register(st, &w, err);
	if (r < 0)
		return wr_error_wrap(err, "register worker %s",
				     c->cfg.worker_id);
	reap(c, "the worker restarted");
	l->last_renew_ms = store_now_ms();
	int e = pthread_create(&l->thread, NULL, lease_main, c);
	if (e)
		return wr_error_set(err, e, "lease thread");
	e = pthread_create(&l->watch, NULL, watch_main, c);
	if (e) {
		pthread_mutex_lock(&l->mu);
		l->stopping = true;
		pthread_cond_broadcast(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->thread, NULL);
		return wr_error_set(err, e, "lease watchdog thread");
	}
	l->started = true;
	return 0;
}

void lease_stop(struct control *c)
{
	struct control_leases *l = &c->leases;
	if (!l->started)
		return;
	pthread_mutex_lock(&l->mu);
	l->stopping = true;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->thread, NULL);
	pthread_join(l->watch, NULL);
	l->started = false;
	/* what we still hold is let go at once (its state was written as
	 * interrupted by the runners' stop): reaped, queued for others */
	struct wr_error *err = NULL;
	c->st->ops->worker_stop(c->st, c->cfg.worker_id, store_now_ms(), &err);
	wr_error_free(err);
	reap(c, "the worker stopped");
}

unsigned worker_load(struct control *c, struct sched_user_load **out,
		     size_t *n_out)
{
	*out = NULL;
	*n_out = 0;
	static const enum session_state at_work[] = {
	    SESSION_PROVISIONING, SESSION_RUNNING, SESSION_VERIFYING,
	    SESSION_REVIEW};
	struct sched_user_load *load = NULL;
	size_t n = 0, cap = 0;
	unsigned total = 0;
	for (size_t k = 0; k < sizeof(at_work) / sizeof(at_work[0]); k++) {
		struct store_session *v = NULL;
		size_t nv = 0;
		if (c->st->ops->session_list_state(c->st, at_work[k], &v, &nv,
						   NULL) < 0)
			continue;
		for (size_t i = 0; i < nv; i++) {
			/* a resting sandbox takes a slot, not a share */
			bool resting = at_work[k] == SESSION_REVIEW;
			if (resting && (!v[i].sandbox || !v[i].sandbox[0]))
				continue;
			total++;
			if (resting)
				continue;
			const char *user = v[i].user ? v[i].user : "";
			size_t j = 0;
			while (j < n && strcmp(load[j].user, user))
				j++;
			if (j == n) {
				if (n == cap) {
					size_t nc = cap ? cap * 2 : 16;
					struct sched_user_load *nl = wr_realloc(
					    load, nc * sizeof(*nl));
					if (!nl)
						continue;
					load = nl;
					cap = nc;
				}
				char *u = wr_strdup(user);
				if (!u)
					continue;
				load[n++] = (struct sched_user_load){u, 0};
			}
			load[j].running++;
		}
		store_sessions_free(v, nv);
	}
	*out = load;
	*n_out = n;
	return total;
}

void worker_load_free(struct sched_user_load *load, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free((char *)load[i].user);
	free(load);
}

unsigned worker_capacity(struct control *c)
{
	if (c->cfg.max_sandboxes_total)
		return c->cfg.max_sandboxes_total;
	struct store_worker *w = NULL;
	size_t n = 0;
	if (c->st->ops->worker_list(c->st, &w, &n, NULL) < 0)
		return c->cfg.max_sandboxes;
	/* the live ones: not stopped, heard from within two leases */
	int64_t now = store_now_ms();
	unsigned total = 0;
	for (size_t i = 0; i < n; i++)
		if (!w[i].stopped_ms &&
		    now - w[i].heartbeat_ms <= 2 * (int64_t)c->cfg.lease_ms)
			total += w[i].max_sandboxes > 0
				     ? (unsigned)w[i].max_sandboxes
				     : c->cfg.max_sandboxes;
	store_workers_free(w, n);
	return total > c->cfg.max_sandboxes ? total : c->cfg.max_sandboxes;
}

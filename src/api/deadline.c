/* deadline.c - deadlines for a request's headers and body.
 *
 * libmicrohttpd runs a thread per connection and its idle timeout starts
 * again at every byte, so a client that sends one header line a minute
 * holds a thread (and a slot of the connection cap) for as long as it
 * likes. So every connection gets a deadline: from its start (or from the
 * end of its previous request plus the idle time a keep-alive connection
 * may wait) until its headers are complete, then until its body is; none
 * while its answer is written (an event stream may last hours). A watchdog
 * thread shuts down the socket of a connection past its deadline
 * (shutdown(2): the connection's own thread then reads end of file and
 * libmicrohttpd closes it, in that thread, as for any client that went
 * away). The per-client connection limit is libmicrohttpd's own
 * (server.c). */
#include "api/internal.h"

#include "util/alloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define WATCH_INTERVAL_MS 200

struct api_conn_deadline {
	struct api_conn_deadline *next, **prev;
	int fd;
	uint64_t deadline_ms; /* 0: none (an answer is being written) */
	bool cut;
};

struct api_deadlines {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	bool stop;
	uint64_t header_ms, body_ms, idle_ms;
	struct api_conn_deadline *conns;
	uint64_t cut_total;
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *watch(void *arg)
{
	struct api_deadlines *d = arg;
	pthread_mutex_lock(&d->mu);
	while (!d->stop) {
		uint64_t now = now_ms();
		for (struct api_conn_deadline *c = d->conns; c; c = c->next) {
			if (c->cut || !c->deadline_ms || now < c->deadline_ms)
				continue;
			/* the descriptor stays libmicrohttpd's: only its
			 * traffic ends here, the close is its thread's */
			shutdown(c->fd, SHUT_RDWR);
			c->cut = true;
			d->cut_total++;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += WATCH_INTERVAL_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&d->cv, &d->mu, &ts);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

int api_deadlines_start(uint64_t header_ms, uint64_t body_ms, uint64_t idle_ms,
			struct api_deadlines **out)
{
	struct api_deadlines *d = wr_calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->header_ms = header_ms;
	d->body_ms = body_ms;
	d->idle_ms = idle_ms;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	int r = pthread_create(&d->thread, NULL, watch, d);
	if (r != 0) {
		pthread_cond_destroy(&d->cv);
		pthread_mutex_destroy(&d->mu);
		free(d);
		return -r;
	}
	*out = d;
	return 0;
}

void api_deadlines_stop(struct api_deadlines *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	d->stop = true;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
	pthread_join(d->thread, NULL);
	/* connections still listed are libmicrohttpd's to close (it was
	 * stopped first): only the records go */
	while (d->conns) {
		struct api_conn_deadline *c = d->conns;
		d->conns = c->next;
		free(c);
	}
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

struct api_conn_deadline *api_deadline_open(struct api_deadlines *d, int fd)
{
	struct api_conn_deadline *c = wr_calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->fd = fd;
	pthread_mutex_lock(&d->mu);
	c->deadline_ms = now_ms() + d->header_ms;
	c->next = d->conns;
	c->prev = &d->conns;
	if (d->conns)
		d->conns->prev = &c->next;
	d->conns = c;
	pthread_mutex_unlock(&d->mu);
	return c;
}

void api_deadline_close(struct api_deadlines *d, struct api_conn_deadline *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&d->mu);
	*c->prev = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&d->mu);
	free(c);
}

void api_deadline_phase(struct api_deadlines *d, struct api_conn_deadline *c,
			enum api_deadline_phase phase)
{
	if (!c)
		return;
	pthread_mutex_lock(&d->mu);
	uint64_t now = now_ms();
	switch (phase) {
	case API_DEADLINE_BODY:
		c->deadline_ms = now + d->body_ms;
		break;
	case API_DEADLINE_ANSWER:
		c->deadline_ms = 0;
		break;
	case API_DEADLINE_IDLE:
		/* the next request's headers: within the keep-alive idle
		 * time and the header deadline */
		c->deadline_ms = now + d->idle_ms + d->header_ms;
		break;
	case API_DEADLINE_PHASE_MAX:
		break;
	}
	pthread_mutex_unlock(&d->mu);
}

uint64_t api_deadlines_cut(struct api_deadlines *d)
{
	pthread_mutex_lock(&d->mu);
	uint64_t n = d->cut_total;
	pthread_mutex_unlock(&d->mu);
	return n;
}

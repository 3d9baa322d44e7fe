/* sched.h - admission policy: which queued sessions start now.
 *
 * Pure functions over a snapshot of the queue and of what runs, so the
 * policy is tested on its own. The rules:
 *   - never more than max_sandboxes sandboxes at once;
 *   - no admission while the host's available memory is below the floor;
 *   - one user holds at most max_per_user of them (one user cannot fill
 *     every slot while others wait);
 *   - among the eligible, the user with the fewest running sessions goes
 *     first, and within a user the queue is FIFO (queue_seq order). */
#ifndef WR_SCHED_SCHED_H
#define WR_SCHED_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sched_entry {
	const char *user;
	int64_t queue_seq;
	bool picked; /* out: admitted this round */
};

struct sched_user_load {
	const char *user;
	unsigned running;
};

struct sched_limits {
	unsigned max_sandboxes;
	unsigned max_per_user; /* 0: max_sandboxes / 2 + 1 (at least 1) */
	uint64_t min_free_memory;
	uint64_t mem_per_session; /* expected memory of one more session */
};

/* Marks the entries to admit now (at most the free slots); returns how many.
 * queue is in FIFO order; load lists the running sessions per user;
 * running is their total; mem_available is the host's MemAvailable. */
size_t sched_pick(struct sched_entry *queue, size_t n_queue,
		  const struct sched_user_load *load, size_t n_load,
		  unsigned running, uint64_t mem_available,
		  const struct sched_limits *lim);

/* The effective per-user cap for lim. */
unsigned sched_user_cap(const struct sched_limits *lim);

/* MemAvailable from /proc/meminfo in bytes, or 0 if unknown. */
uint64_t sched_mem_available(void);

#endif

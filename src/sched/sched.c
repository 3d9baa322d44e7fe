/* sched.c - admission policy (see sched.h). */
#include "sched/sched.h"

#include <stdio.h>
#include <string.h>

unsigned sched_user_cap(const struct sched_limits *lim)
{
	if (lim->max_per_user)
		return lim->max_per_user;
	unsigned cap = lim->max_sandboxes / 2 + 1;
	return cap > lim->max_sandboxes ? lim->max_sandboxes : cap;
}

/* Running sessions of user: from load, plus those picked this round. */
static unsigned user_running(const char *user,
			     const struct sched_user_load *load, size_t n_load,
			     const struct sched_entry *queue, size_t n_queue)
{
	unsigned n = 0;
	for (size_t i = 0; i < n_load; i++)
		if (!strcmp(load[i].user, user))
			n += load[i].running;
	for (size_t i = 0; i < n_queue; i++)
		if (queue[i].picked && !strcmp(queue[i].user, user))
			n++;
	return n;
}

size_t sched_pick(struct sched_entry *queue, size_t n_queue,
		  const struct sched_user_load *load, size_t n_load,
		  unsigned running, uint64_t mem_available,
		  const struct sched_limits *lim)
{
	for (size_t i = 0; i < n_queue; i++)
		queue[i].picked = false;
	unsigned user_cap = sched_user_cap(lim);
	size_t picked = 0;
	uint64_t mem = mem_available;
	while (running + picked < lim->max_sandboxes) {
		/* memory floor: an unknown MemAvailable (0) does not block */
		if (mem_available &&
		    mem < lim->min_free_memory + lim->mem_per_session)
			break;
		/* the first entry (FIFO) of the least-loaded eligible user */
		size_t best = n_queue;
		unsigned best_load = 0;
		for (size_t i = 0; i < n_queue; i++) {
			if (queue[i].picked)
				continue;
			unsigned u = user_running(queue[i].user, load, n_load,
						  queue, n_queue);
			if (u >= user_cap)
				continue;
			if (best == n_queue || u < best_load) {
				best = i;
				best_load = u;
			}
		}
		if (best == n_queue)
			break;
		queue[best].picked = true;
		picked++;
		if (mem_available)
			mem = mem > lim->mem_per_session
				  ? mem - lim->mem_per_session
				  : 0;
	}
	return picked;
}

uint64_t sched_mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return 0;
	char line[256];
	uint64_t kib = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long v;
		if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
			kib = v;
			break;
		}
	}
	fclose(f);
	return kib * 1024;
}

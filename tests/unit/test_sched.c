/* test_sched.c - the admission policy (sched.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sched/sched.h"

#include <string.h>

static size_t pick(struct sched_entry *q, size_t n,
		   const struct sched_user_load *load, size_t nl,
		   unsigned running, uint64_t mem, unsigned cap,
		   unsigned per_user)
{
	struct sched_limits lim = {.max_sandboxes = cap,
				   .max_per_user = per_user,
				   .min_free_memory = 100};
	return sched_pick(q, n, load, nl, running, mem, &lim);
}

/* With room for everyone, the queue is taken in FIFO order. */
static void test_fifo_when_room(void **state)
{
	(void)state;
	struct sched_entry q[] = {
	    {"a", 1, false}, {"b", 2, false}, {"a", 3, false}};
	assert_int_equal(pick(q, 3, NULL, 0, 0, 0, 10, 10), 3);
	assert_true(q[0].picked && q[1].picked && q[2].picked);
}

/* The global cap: only the free slots are filled. */
static void test_global_cap(void **state)
{
	(void)state;
	struct sched_entry q[] = {
	    {"a", 1, false}, {"b", 2, false}, {"c", 3, false}};
	struct sched_user_load load[] = {{"x", 3}};
	assert_int_equal(pick(q, 3, load, 1, 3, 0, 4, 4), 1);
	assert_true(q[0].picked);
	assert_false(q[1].picked || q[2].picked);
	assert_int_equal(pick(q, 3, load, 1, 4, 0, 4, 4), 0);
}

/* One user cannot fill every slot: its later entries wait while another
 * user's entry, queued behind them, starts. */
static void test_per_user_fairness(void **state)
{
	(void)state;
	struct sched_entry q[] = {{"alice", 1, false},
				  {"alice", 2, false},
				  {"alice", 3, false},
				  {"alice", 4, false},
				  {"bob", 5, false}};
	assert_int_equal(pick(q, 5, NULL, 0, 0, 0, 4, 0), 4);
	/* default per-user cap for 4 slots: 3 */
	assert_int_equal(
	    sched_user_cap(&(struct sched_limits){.max_sandboxes = 4}), 3);
	assert_true(q[0].picked && q[1].picked && q[2].picked);
	assert_false(q[3].picked);
	assert_true(q[4].picked);
}

/* Among eligible users the least-loaded goes first. */
static void test_least_loaded_first(void **state)
{
	(void)state;
	struct sched_entry q[] = {{"alice", 1, false}, {"bob", 2, false}};
	struct sched_user_load load[] = {{"alice", 2}};
	assert_int_equal(pick(q, 2, load, 1, 2, 0, 3, 3), 1);
	assert_false(q[0].picked);
	assert_true(q[1].picked);
}

/* Below the memory floor nothing is admitted; an unknown (0) reading does
 * not block. */
static void test_memory_floor(void **state)
{
	(void)state;
	struct sched_entry q[] = {{"a", 1, false}};
	assert_int_equal(pick(q, 1, NULL, 0, 0, 50, 4, 4), 0);
	assert_int_equal(pick(q, 1, NULL, 0, 0, 500, 4, 4), 1);
	assert_int_equal(pick(q, 1, NULL, 0, 0, 0, 4, 4), 1);
	assert_true(sched_mem_available() > 0);
}

/* A cap of one slot per user with two users: one each. */
static void test_one_each(void **state)
{
	(void)state;
	struct sched_entry q[] = {
	    {"a", 1, false}, {"a", 2, false}, {"b", 3, false}, {"b", 4, false}};
	assert_int_equal(pick(q, 4, NULL, 0, 0, 0, 8, 1), 2);
	assert_true(q[0].picked && q[2].picked);
	assert_false(q[1].picked || q[3].picked);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fifo_when_room),
	    cmocka_unit_test(test_global_cap),
	    cmocka_unit_test(test_per_user_fairness),
	    cmocka_unit_test(test_least_loaded_first),
	    cmocka_unit_test(test_memory_floor),
	    cmocka_unit_test(test_one_each),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* test_eval_report.c - the arithmetic of `warren eval report`'s review
 * figures (src/cli/client/eval_report.c): accepted changes per reviewer
 * minute and cost per accepted change from known verdicts and review
 * times, nulls where a divisor is zero, no figures before a verdict, and
 * the difference of two runs in --compare. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include "cli/client/eval.h"

static double num(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);
	assert_true(json_is_number(v));
	return json_number_value(v);
}

static void test_figures(void **state)
{
	(void)state;
	/* 3 accepted of 4 reviewed in 90 s + 30 s + 45 s + 75 s = 4 min */
	json_t *tally =
	    json_pack("{s:i, s:i, s:i, s:i, s:i}", "reviewed", 4, "accepted", 3,
		      "changes", 1, "rejected", 0, "review_ms", 240000);
	json_t *f = eval_review_figures(0.6, tally);
	assert_non_null(f);
	assert_int_equal(json_integer_value(json_object_get(f, "reviewed")), 4);
	assert_int_equal(json_integer_value(json_object_get(f, "accepted")), 3);
	assert_int_equal(json_integer_value(json_object_get(f, "changes")), 1);
	assert_float_equal(num(f, "review_minutes"), 4.0, 1e-12);
	assert_float_equal(num(f, "accepted_per_reviewer_minute"), 0.75, 1e-12);
	assert_float_equal(num(f, "cost_per_accepted"), 0.2, 1e-12);
	json_decref(f);
	json_decref(tally);

	/* nothing accepted, no time: nulls, not infinities */
	tally = json_pack("{s:i, s:i, s:i}", "reviewed", 1, "accepted", 0,
			  "review_ms", 0);
	f = eval_review_figures(1.0, tally);
	assert_true(json_is_null(json_object_get(f, "cost_per_accepted")));
	assert_true(
	    json_is_null(json_object_get(f, "accepted_per_reviewer_minute")));
	json_decref(f);
	json_decref(tally);
}

static void test_report_and_compare(void **state)
{
	(void)state;
	json_t *a = json_pack("{s:s, s:f}", "id", "e-a", "cost", 1.5);
	json_t *b = json_pack("{s:s, s:f}", "id", "e-b", "cost", 0.0);
	/* no verdict: no figures */
	json_t *none = json_pack("{s:i, s:i, s:i}", "reviewed", 0, "accepted",
				 0, "review_ms", 0);
	assert_int_equal(eval_report_add_review(a, none), 0);
	assert_null(json_object_get(a, "review"));
	assert_int_equal(eval_report_add_review(a, NULL), 0);
	assert_null(json_object_get(a, "review"));
	/* a: 2 accepted in 3 min (1.5 per accepted); b: 1 in 0.5 min */
	json_t *ta = json_pack("{s:i, s:i, s:i}", "reviewed", 3, "accepted", 2,
			       "review_ms", 180000);
	json_t *tb = json_pack("{s:i, s:i, s:i}", "reviewed", 1, "accepted", 1,
			       "review_ms", 30000);
	assert_int_equal(eval_report_add_review(a, ta), 0);
	assert_int_equal(eval_report_add_review(b, tb), 0);
	const json_t *ra = json_object_get(a, "review");
	assert_float_equal(num(ra, "accepted_per_reviewer_minute"), 2.0 / 3.0,
			   1e-12);
	assert_float_equal(num(ra, "cost_per_accepted"), 0.75, 1e-12);
	assert_float_equal(
	    num(json_object_get(b, "review"), "accepted_per_reviewer_minute"),
	    2.0, 1e-12);
	json_t *cmp = eval_report_compare(a, b);
	assert_float_equal(num(json_object_get(cmp, "difference"),
			       "accepted_per_reviewer_minute"),
			   2.0 - 2.0 / 3.0, 1e-12);
	json_decref(cmp);
	json_decref(none);
	json_decref(ta);
	json_decref(tb);
	json_decref(a);
	json_decref(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_figures),
	    cmocka_unit_test(test_report_and_compare),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

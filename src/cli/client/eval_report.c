/* eval_report.c - `warren eval report RUN [--compare RUN2]`: a run's
 * attempts summed up (docs/eval.md, "Reading the report"): the resolve
 * rate and its spread across repeats, cost and time per resolved task,
 * how often Warren's verification agreed with the hidden tests; per task
 * and in total; two runs side by side; and, where the run's changes were
 * reviewed blind on the server, accepted changes per reviewer minute and
 * cost per accepted change. */
#include "cli/client/eval.h"

#include "util/alloc.h"
#include "util/cleanup.h"

#include <errno.h>
#include <math.h>
#include <string.h>

struct tally {
	int64_t runs, resolved;
	double cost, wall_ms;
	int64_t tokens;
	int64_t verified, agree, verify_passed, verify_passed_resolved;
};

static void tally_add(struct tally *t, const json_t *a)
{
	bool resolved = json_is_true(json_object_get(a, "resolved"));
	t->runs++;
	t->resolved += resolved;
	json_t *cost = json_object_get(a, "cost");
	t->cost += json_is_number(cost) ? json_number_value(cost) : 0;
	t->wall_ms += (double)client_json_int(a, "wall_ms", 0);
	t->tokens +=
	    client_json_int(json_object_get(a, "tokens"), "total", 0);
	json_t *passed =
	    json_object_get(json_object_get(a, "verify"), "passed");
	/* a session that never reached a result was not verified */
	if (json_is_boolean(passed) && json_object_get(a, "check")) {
		bool p = json_is_true(passed);
		t->verified++;
		t->agree += p == resolved;
		t->verify_passed += p;
		t->verify_passed_resolved += p && resolved;
	}
}

static json_t *ratio(double a, double b)
{
	return b > 0 ? json_real(a / b) : json_null();
}

static json_t *tally_json(const struct tally *t)
{
	json_t *j = json_pack(
	    "{s:I, s:I, s:o, s:f, s:I, s:f, s:o, s:o}", "runs",
	    (json_int_t)t->runs, "resolved", (json_int_t)t->resolved,
	    "resolve_rate", ratio((double)t->resolved, (double)t->runs),
	    "cost", t->cost, "tokens", (json_int_t)t->tokens, "wall_ms",
	    t->wall_ms, "cost_per_resolved",
	    ratio(t->cost, (double)t->resolved), "time_per_resolved_ms",
	    ratio(t->wall_ms, (double)t->resolved));
	if (j)
		json_object_set_new(
		    j, "verification",
		    json_pack("{s:I, s:I, s:o, s:I, s:o}", "verified",
			      (json_int_t)t->verified, "agree",
			      (json_int_t)t->agree, "agreement",
			      ratio((double)t->agree, (double)t->verified),
			      "passed", (json_int_t)t->verify_passed,
			      "passed_was_right",
			      ratio((double)t->verify_passed_resolved,
				    (double)t->verify_passed)));
	return j;
}

json_t *eval_report_build(const json_t *run, const json_t *attempts)
{
	int repeat = (int)json_integer_value(json_object_get(run, "repeat"));
	if (repeat < 1)
		repeat = 1;
	struct tally total = {0};
	struct tally *per_repeat = wr_calloc((size_t)repeat, sizeof(*per_repeat));
	json_t *tasks = json_array();
	if (!per_repeat || !tasks) {
		free(per_repeat);
		json_decref(tasks);
		return NULL;
	}
	int64_t pending = 0;
	size_t i, k;
	json_t *name, *a;
	json_array_foreach(json_object_get(run, "tasks"), i, name)
	{
		struct tally t = {0};
		json_array_foreach((json_t *)attempts, k, a)
		{
			const char *state = client_json_str(a, "state");
			if (!json_equal(json_object_get(a, "task"), name))
				continue;
			if (!state || strcmp(state, "done")) {
				pending++;
				continue;
			}
			tally_add(&t, a);
			tally_add(&total, a);
			int64_t rep = client_json_int(a, "repeat", 1);
			if (rep >= 1 && rep <= repeat)
				tally_add(&per_repeat[rep - 1], a);
		}
		json_t *tj = tally_json(&t);
		if (tj) {
			json_object_set(tj, "name", name);
			json_array_append_new(tasks, tj);
		}
	}
	/* the spread: the resolve rate of each repeat over the tasks */
	json_t *rates = json_array();
	double sum = 0, min = 1, max = 0;
	int n = 0;
	for (int r = 0; r < repeat; r++) {
		if (!per_repeat[r].runs)
			continue;
		double rate =
		    (double)per_repeat[r].resolved / (double)per_repeat[r].runs;
		json_array_append_new(rates, json_real(rate));
		sum += rate;
		min = rate < min ? rate : min;
		max = rate > max ? rate : max;
		n++;
	}
	double mean = n ? sum / n : 0, var = 0;
	for (int r = 0; r < repeat; r++)
		if (per_repeat[r].runs) {
			double d = (double)per_repeat[r].resolved /
				       (double)per_repeat[r].runs -
				   mean;
			var += d * d;
		}
	double stddev = n > 1 ? sqrt(var / (n - 1)) : 0;
	free(per_repeat);
	json_t *rep = tally_json(&total);
	if (!rep) {
		json_decref(tasks);
		json_decref(rates);
		return NULL;
	}
	json_object_set(rep, "id", json_object_get(run, "id"));
	json_object_set(rep, "suite", json_object_get(run, "suite_name"));
	json_object_set(rep, "agent", json_object_get(run, "agent"));
	json_object_set(rep, "oracle", json_object_get(run, "oracle"));
	json_object_set(rep, "repeat", json_object_get(run, "repeat"));
	json_object_set(rep, "state", json_object_get(run, "state"));
	json_object_set_new(rep, "pending", json_integer(pending));
	json_object_set_new(
	    rep, "spread",
	    json_pack("{s:o, s:f, s:f, s:f}", "per_repeat", rates, "min",
		      n ? min : 0.0, "max", n ? max : 0.0, "stddev", stddev));
	json_object_set_new(rep, "tasks", tasks);
	return rep;
}

static double num(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : 0;
}

json_t *eval_review_figures(double cost, const json_t *tally)
{
	int64_t reviewed = client_json_int(tally, "reviewed", 0);
	int64_t accepted = client_json_int(tally, "accepted", 0);
	int64_t review_ms = client_json_int(tally, "review_ms", 0);
	double minutes = (double)review_ms / 60000.0;
	return json_pack(
	    "{s:I, s:I, s:I, s:I, s:I, s:f, s:o, s:o}", "reviewed",
	    (json_int_t)reviewed, "accepted", (json_int_t)accepted, "changes",
	    (json_int_t)client_json_int(tally, "changes", 0), "rejected",
	    (json_int_t)client_json_int(tally, "rejected", 0), "review_ms",
	    (json_int_t)review_ms, "review_minutes", minutes,
	    "accepted_per_reviewer_minute", ratio((double)accepted, minutes),
	    "cost_per_accepted", ratio(cost, (double)accepted));
}

int eval_report_add_review(json_t *rep, const json_t *tally)
{
	if (client_json_int(tally, "reviewed", 0) <= 0)
		return 0; /* no verdict yet: no figures */
	json_t *fig = eval_review_figures(num(rep, "cost"), tally);
	return fig ? json_object_set_new(rep, "review", fig) : -ENOMEM;
}

json_t *eval_report_compare(const json_t *a, const json_t *b)
{
	double d = num(b, "resolve_rate") - num(a, "resolve_rate");
	double spread = num(json_object_get(a, "spread"), "stddev") +
			num(json_object_get(b, "spread"), "stddev");
	json_t *cmp = json_pack(
	    "{s:O, s:O, s:{s:f, s:f, s:f, s:b}}", "a", a, "b", b, "difference",
	    "resolve_rate", d, "cost", num(b, "cost") - num(a, "cost"),
	    "spread", spread, "exceeds_spread", fabs(d) > spread);
	/* accepted changes per reviewer minute, where both were reviewed */
	json_t *ra = json_object_get(json_object_get(a, "review"),
				     "accepted_per_reviewer_minute");
	json_t *rb = json_object_get(json_object_get(b, "review"),
				     "accepted_per_reviewer_minute");
	if (cmp)
		json_object_set_new(
		    json_object_get(cmp, "difference"),
		    "accepted_per_reviewer_minute",
		    json_is_number(ra) && json_is_number(rb)
			? json_real(json_number_value(rb) -
				    json_number_value(ra))
			: json_null());
	return cmp;
}

static void pct(char *buf, size_t size, const json_t *v)
{
	if (json_is_number(v))
		snprintf(buf, size, "%.0f%%", json_number_value(v) * 100);
	else
		snprintf(buf, size, "-");
}

static void money(char *buf, size_t size, const json_t *v)
{
	if (json_is_number(v))
		snprintf(buf, size, "%.4f", json_number_value(v));
	else
		snprintf(buf, size, "-");
}

static void secs(char *buf, size_t size, const json_t *v)
{
	if (json_is_number(v))
		snprintf(buf, size, "%.1fs", json_number_value(v) / 1000);
	else
		snprintf(buf, size, "-");
}

static void summary(const json_t *r)
{
	char rate[16], cpr[32], tpr[32], agree[16], right[16];
	const json_t *sp = json_object_get(r, "spread");
	const json_t *v = json_object_get(r, "verification");
	pct(rate, sizeof(rate), json_object_get(r, "resolve_rate"));
	money(cpr, sizeof(cpr), json_object_get(r, "cost_per_resolved"));
	secs(tpr, sizeof(tpr), json_object_get(r, "time_per_resolved_ms"));
	pct(agree, sizeof(agree), json_object_get(v, "agreement"));
	pct(right, sizeof(right), json_object_get(v, "passed_was_right"));
	_cleanup_free_ char *id =
	    client_clean(client_or(client_json_str(r, "id"), "?"));
	_cleanup_free_ char *suite =
	    client_clean(client_or(client_json_str(r, "suite"), "?"));
	_cleanup_free_ char *agent = client_clean(
	    json_is_true(json_object_get(r, "oracle"))
		? "(oracle: solution.patch)"
		: client_or(client_json_str(r, "agent"), "?"));
	printf("run %s: suite %s, agent %s\n", id, suite, agent);
	printf("  resolved      %lld of %lld runs (%s; per repeat %.0f%%..%.0f%%, "
	       "stddev %.1f points)\n",
	       (long long)client_json_int(r, "resolved", 0),
	       (long long)client_json_int(r, "runs", 0), rate,
	       num(sp, "min") * 100, num(sp, "max") * 100,
	       num(sp, "stddev") * 100);
	printf("  cost          %.4f in all, %s per resolved task\n",
	       num(r, "cost"), cpr);
	printf("  time          %.1fs in all, %s per resolved task\n",
	       num(r, "wall_ms") / 1000, tpr);
	printf("  verification  agreed with the hidden tests in %s of %lld "
	       "verified runs; \"checks passed\" was right in %s\n",
	       agree, (long long)client_json_int(v, "verified", 0), right);
	const json_t *rv = json_object_get(r, "review");
	if (rv) {
		char apm[32], cpa[32];
		const json_t *x = json_object_get(rv,
						  "accepted_per_reviewer_minute");
		if (json_is_number(x))
			snprintf(apm, sizeof(apm), "%.2f", json_number_value(x));
		else
			snprintf(apm, sizeof(apm), "-");
		money(cpa, sizeof(cpa), json_object_get(rv, "cost_per_accepted"));
		printf("  review        %lld accepted of %lld reviewed (%lld "
		       "need changes, %lld rejected) in %.2f reviewer minutes: "
		       "%s accepted per reviewer minute, %s per accepted "
		       "change\n",
		       (long long)client_json_int(rv, "accepted", 0),
		       (long long)client_json_int(rv, "reviewed", 0),
		       (long long)client_json_int(rv, "changes", 0),
		       (long long)client_json_int(rv, "rejected", 0),
		       num(rv, "review_minutes"), apm, cpa);
	}
	if (client_json_int(r, "pending", 0))
		printf("  pending       %lld attempts not finished\n",
		       (long long)client_json_int(r, "pending", 0));
}

/* The two runs' headline figures in two columns. */
static int side_by_side(const json_t *a, const json_t *b)
{
	static const char *const head[] = {"", "A", "B"};
	struct client_table t;
	if (client_table_init(&t, head, 3) < 0)
		return -ENOMEM;
	char v[4][5][40];
	const json_t *runs[2] = {a, b};
	for (int i = 0; i < 2; i++) {
		const json_t *r = runs[i];
		const json_t *rv = json_object_get(r, "review");
		const json_t *apm =
		    json_object_get(rv, "accepted_per_reviewer_minute");
		snprintf(v[i][0], sizeof(v[i][0]), "%lld of %lld",
			 (long long)client_json_int(r, "resolved", 0),
			 (long long)client_json_int(r, "runs", 0));
		money(v[i][1], sizeof(v[i][1]),
		      json_object_get(r, "cost_per_resolved"));
		secs(v[i][2], sizeof(v[i][2]),
		     json_object_get(r, "time_per_resolved_ms"));
		if (json_is_number(apm))
			snprintf(v[i][3], sizeof(v[i][3]), "%.2f",
				 json_number_value(apm));
		else
			snprintf(v[i][3], sizeof(v[i][3]), "-");
		money(v[i][4], sizeof(v[i][4]),
		      json_object_get(rv, "cost_per_accepted"));
	}
	static const char *const rows[] = {
	    "resolved", "cost per resolved task", "time per resolved task",
	    "accepted per reviewer minute", "cost per accepted change"};
	for (int k = 0; k < 5; k++)
		client_table_add(&t, rows[k], v[0][k], v[1][k]);
	putchar('\n');
	int r = client_table_print(&t, stdout);
	client_table_clear(&t);
	return r;
}

int eval_report_print(const json_t *a, const json_t *b)
{
	summary(a);
	if (b) {
		summary(b);
		json_t *cmp = eval_report_compare(a, b);
		const json_t *d = json_object_get(cmp, "difference");
		printf("difference (second - first): resolve rate %+.0f points "
		       "(%s the spread of %.1f points), cost %+.4f",
		       num(d, "resolve_rate") * 100,
		       json_is_true(json_object_get(d, "exceeds_spread"))
			   ? "exceeds"
			   : "within",
		       num(d, "spread") * 100, num(d, "cost"));
		if (json_is_number(json_object_get(
			d, "accepted_per_reviewer_minute")))
			printf(", accepted per reviewer minute %+.2f",
			       num(d, "accepted_per_reviewer_minute"));
		putchar('\n');
		json_decref(cmp);
		int r = side_by_side(a, b);
		if (r < 0)
			return r;
	}
	static const char *const one[] = {"TASK", "RESOLVED", "RATE", "COST",
					  "TIME", "VERIFY AGREES"};
	static const char *const two[] = {"TASK", "A RESOLVED", "B RESOLVED",
					  "A COST", "B COST", "DIFFERENCE"};
	struct client_table t;
	if (client_table_init(&t, b ? two : one, 6) < 0)
		return -ENOMEM;
	size_t i;
	json_t *ta;
	json_array_foreach(json_object_get(a, "tasks"), i, ta)
	{
		char res[32], rate[16], cost[32], time_s[32], agree[16];
		snprintf(res, sizeof(res), "%lld/%lld",
			 (long long)client_json_int(ta, "resolved", 0),
			 (long long)client_json_int(ta, "runs", 0));
		money(cost, sizeof(cost), json_object_get(ta, "cost"));
		if (!b) {
			pct(rate, sizeof(rate),
			    json_object_get(ta, "resolve_rate"));
			secs(time_s, sizeof(time_s),
			     json_object_get(ta, "wall_ms"));
			pct(agree, sizeof(agree),
			    json_object_get(json_object_get(ta, "verification"),
					    "agreement"));
			client_table_add(&t, client_json_str(ta, "name"), res,
					 rate, cost, time_s, agree);
			continue;
		}
		const json_t *tb = NULL;
		size_t k;
		json_t *x;
		json_array_foreach(json_object_get(b, "tasks"), k, x)
		if (json_equal(json_object_get(x, "name"),
			       json_object_get(ta, "name")))
			tb = x;
		char resb[32] = "-", costb[32] = "-", diff[32] = "-";
		if (tb) {
			snprintf(resb, sizeof(resb), "%lld/%lld",
				 (long long)client_json_int(tb, "resolved", 0),
				 (long long)client_json_int(tb, "runs", 0));
			money(costb, sizeof(costb),
			      json_object_get(tb, "cost"));
			snprintf(diff, sizeof(diff), "%+.0f points",
				 (num(tb, "resolve_rate") -
				  num(ta, "resolve_rate")) *
				     100);
		}
		client_table_add(&t, client_json_str(ta, "name"), res, resb,
				 cost, costb, diff);
	}
	putchar('\n');
	int r = client_table_print(&t, stdout);
	client_table_clear(&t);
	return r;
}

// evalreport.js - an eval run's report from its attempts, as `warren eval
// report` makes it (src/cli/client/eval_report.c, docs/eval.md "Reading
// the report"): resolve rate and its spread across repeats, cost and time
// per resolved task, per task; and, from the server's tally of blind
// verdicts, accepted changes per reviewer minute and cost per accepted
// change. Pure functions: no page, no request.

const ratio = (a, b) => (b > 0 ? a / b : null);

function tally(list) {
  const t = { runs: 0, resolved: 0, cost: 0, wall_ms: 0 };
  for (const a of list) {
    t.runs++;
    if (a.resolved === true) t.resolved++;
    t.cost += typeof a.cost === 'number' ? a.cost : 0;
    t.wall_ms += typeof a.wall_ms === 'number' ? a.wall_ms : 0;
  }
  t.resolve_rate = ratio(t.resolved, t.runs);
  t.cost_per_resolved = ratio(t.cost, t.resolved);
  t.time_per_resolved_ms = ratio(t.wall_ms, t.resolved);
  return t;
}

// The spread of a list of rates: min, max and the sample standard deviation.
function spread(rates) {
  if (!rates.length) return { per_repeat: [], min: 0, max: 0, stddev: 0 };
  const mean = rates.reduce((s, r) => s + r, 0) / rates.length;
  const v = rates.reduce((s, r) => s + (r - mean) * (r - mean), 0);
  return {
    per_repeat: rates,
    min: Math.min(...rates),
    max: Math.max(...rates),
    stddev: rates.length > 1 ? Math.sqrt(v / (rates.length - 1)) : 0,
  };
}

// review: {reviewed, accepted, changes, rejected, review_ms}; cost: the run's.
export function reviewFigures(cost, review) {
  if (!review || !(review.reviewed > 0)) return null;
  const minutes = (review.review_ms || 0) / 60000;
  return {
    reviewed: review.reviewed,
    accepted: review.accepted || 0,
    changes: review.changes || 0,
    rejected: review.rejected || 0,
    review_ms: review.review_ms || 0,
    review_minutes: minutes,
    accepted_per_reviewer_minute: ratio(review.accepted || 0, minutes),
    cost_per_accepted: ratio(cost, review.accepted || 0),
  };
}

// data: GET /evals/{id}'s answer ({id, run, attempts, review}).
export function buildReport(data) {
  const run = data.run || {};
  const repeat = Math.max(1, run.repeat || 1);
  const done = (data.attempts || []).filter((a) => a.state === 'done');
  const names = Array.isArray(run.tasks) && run.tasks.length ? run.tasks : [...new Set(done.map((a) => a.task))];
  const total = tally(done);
  const perRepeat = [];
  for (let k = 1; k <= repeat; k++) {
    const t = tally(done.filter((a) => (a.repeat || 1) === k));
    if (t.runs) perRepeat.push(t.resolve_rate);
  }
  const tasks = names.map((name) => {
    const mine = done.filter((a) => a.task === name);
    const t = tally(mine);
    const rates = [];
    for (let k = 1; k <= repeat; k++) {
      const r = mine.filter((a) => (a.repeat || 1) === k);
      if (r.length) rates.push(r.filter((a) => a.resolved === true).length / r.length);
    }
    return { name, ...t, spread: spread(rates) };
  });
  return {
    id: data.id,
    suite: run.suite_name,
    agent: run.oracle ? '(oracle: solution.patch)' : run.agent,
    state: run.state,
    repeat,
    pending: (data.attempts || []).length - done.length,
    ...total,
    spread: spread(perRepeat),
    tasks,
    review: reviewFigures(total.cost, data.review),
  };
}

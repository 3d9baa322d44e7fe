// An eval run (GET /evals/{id}): its report as `warren eval report` gives
// it (evalreport.js), drawn: resolve rate per task with the spread across
// repeats, cost and time per resolved task, the review figures; with a
// second run chosen (?compare=ID), both side by side.

import { get } from '../api.js';
import { chart, hbars, legend, rateBars } from '../charts.js';
import { buildReport } from '../evalreport.js';
import { h, replace } from '../dom.js';
import { cost, duration, num, num2, percent } from '../format.js';
import { card, errorBox, loading, pageHeader } from '../ui.js';

const TONES = ['accent', 'review'];

function tile(label, value, note) {
  return h(
    'div',
    { class: 'tile' },
    h('div', { class: 'tile-label' }, label),
    h('div', { class: 'tile-value' }, value),
    note ? h('div', { class: 'tile-note' }, note) : null,
  );
}

function chartCard(title, intro, ...content) {
  return h(
    'section',
    { class: 'card chart-card' },
    h('h2', { class: 'card-title' }, title),
    intro ? h('p', { class: 'help' }, intro) : null,
    ...content,
  );
}

function drawInto(box, draw) {
  requestAnimationFrame(() => chart(box, draw));
  return box;
}

function summary(rep, tone) {
  const rv = rep.review;
  return h(
    'section',
    { class: ['card', 'eval-summary', `eval-summary-${tone}`], dataset: { run: rep.id } },
    h('h2', { class: 'card-title' }, h('span', { class: ['swatch', `seg-${tone}`], 'aria-hidden': 'true' }), rep.id),
    h('p', { class: 'help eval-agent' }, `suite ${rep.suite || '—'} · agent ${rep.agent || '—'} · ${rep.state || '—'}`),
    h(
      'div',
      { class: 'tiles' },
      tile(
        'Resolved',
        `${num(rep.resolved)} of ${num(rep.runs)}`,
        `${percent(rep.resolve_rate)}; per repeat ${percent(rep.spread.min)}–${percent(rep.spread.max)}, stddev ${num2(rep.spread.stddev * 100)} points`,
      ),
      tile('Cost per resolved task', cost(rep.cost_per_resolved), `${cost(rep.cost)} in all`),
      tile(
        'Time per resolved task',
        rep.time_per_resolved_ms == null ? '—' : duration(rep.time_per_resolved_ms),
        `${duration(rep.wall_ms)} in all`,
      ),
      tile(
        'Accepted per reviewer minute',
        rv ? num2(rv.accepted_per_reviewer_minute) : '—',
        rv ? `${num(rv.accepted)} accepted of ${num(rv.reviewed)} reviewed in ${num2(rv.review_minutes)} min` : 'not reviewed yet',
      ),
      tile('Cost per accepted change', rv ? cost(rv.cost_per_accepted) : '—', rv ? `${num(rv.rejected)} rejected, ${num(rv.changes)} need changes` : ''),
    ),
    rep.pending ? h('p', { class: 'help' }, `${num(rep.pending)} attempts not finished yet.`) : null,
  );
}

function taskTable(reps) {
  const names = [...new Set(reps.flatMap((r) => r.tasks.map((t) => t.name)))];
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      { class: 'table eval-tasks' },
      h('caption', { class: 'sr-only' }, 'Per task'),
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          h('th', { scope: 'col' }, 'Task'),
          reps.map((r, i) => [
            h('th', { scope: 'col', class: 'num' }, reps.length > 1 ? `${'AB'[i]} resolved` : 'Resolved'),
            h('th', { scope: 'col', class: 'num' }, reps.length > 1 ? `${'AB'[i]} cost` : 'Cost'),
            h('th', { scope: 'col', class: 'num' }, reps.length > 1 ? `${'AB'[i]} time` : 'Time'),
          ]),
        ),
      ),
      h(
        'tbody',
        null,
        names.map((n) =>
          h(
            'tr',
            null,
            h('th', { scope: 'row' }, n),
            reps.map((r, i) => {
              const t = r.tasks.find((x) => x.name === n);
              const who = reps.length > 1 ? `${'AB'[i]} ` : '';
              const cell = (label, text) => h('td', { class: 'num', dataset: { label: `${who}${label}` } }, text);
              return t
                ? [
                    cell('resolved', `${num(t.resolved)}/${num(t.runs)}`),
                    cell('cost', cost(t.cost)),
                    cell('time', duration(t.wall_ms)),
                  ]
                : [cell('resolved', '—'), cell('cost', '—'), cell('time', '—')];
            }),
          ),
        ),
      ),
    ),
  );
}

export function mount(root, ctx) {
  const id = ctx.params[0];
  const other = ctx.query.get('compare') || '';
  ctx.setTitle(`Eval ${id}`);
  const ac = new AbortController();
  const body = h('div', { class: 'eval-run' }, loading('Loading the run…'));
  const picker = h('select', { id: 'eval-compare', class: 'select' }, h('option', { value: '' }, 'nothing'));
  picker.addEventListener('change', () => {
    const q = picker.value ? `?compare=${encodeURIComponent(picker.value)}` : '';
    ctx.go(`#/evals/${encodeURIComponent(id)}${q}`);
  });
  root.append(
    pageHeader(
      other ? 'Two eval runs side by side' : 'Eval run',
      h('div', { class: 'field-inline' }, h('label', { for: 'eval-compare', class: 'label' }, 'Compare with'), picker),
      h('a', { href: '#/evals', class: 'btn btn-small' }, 'All runs'),
    ),
    body,
  );

  async function load() {
    let list;
    let datas;
    try {
      [list, ...datas] = await Promise.all([
        get('/evals', { signal: ac.signal }),
        get(`/evals/${encodeURIComponent(id)}`, { signal: ac.signal }),
        ...(other ? [get(`/evals/${encodeURIComponent(other)}`, { signal: ac.signal })] : []),
      ]);
    } catch (e) {
      if (e.name === 'AbortError') return;
      replace(body, errorBox(e, 'Could not load the run'));
      return;
    }
    for (const r of list.evals || []) {
      if (r.id === id) continue;
      picker.append(h('option', { value: r.id }, `${r.id} · ${(r.run && r.run.agent) || (r.run && r.run.oracle ? 'oracle' : '')}`));
    }
    picker.value = other;
    const reps = datas.map(buildReport);
    const series = reps.map((r, i) => ({ name: reps.length > 1 ? `${'AB'[i]}: ${r.id}` : r.id, tone: TONES[i] }));
    const names = [...new Set(reps.flatMap((r) => r.tasks.map((t) => t.name)))];
    const rows = names.map((n) => ({
      label: n,
      values: reps.map((r) => {
        const t = r.tasks.find((x) => x.name === n);
        return t && t.runs ? { value: t.resolve_rate, min: t.spread.min, max: t.spread.max } : null;
      }),
    }));
    const perRun = (f) => reps.map((r, i) => ({ label: reps.length > 1 ? 'AB'[i] : r.id, value: f(r) || 0, tone: TONES[i] }));
    const rateBox = h('div', { class: 'chart-box', id: 'chart-resolve' });
    const costBox = h('div', { class: 'chart-box', id: 'chart-cost' });
    const timeBox = h('div', { class: 'chart-box', id: 'chart-time' });
    const apmBox = h('div', { class: 'chart-box', id: 'chart-review' });
    const reviewed = reps.some((r) => r.review);
    replace(
      body,
      h('div', { class: reps.length > 1 ? 'eval-side' : null }, reps.map((r, i) => summary(r, TONES[i]))),
      h(
        'div',
        { class: 'chart-grid' },
        chartCard(
          'Resolve rate per task',
          'Resolved attempts over finished ones; the whisker spans the rates of the repeats.',
          drawInto(rateBox, rateBars(rows, series, { title: 'Resolve rate per task' })),
          reps.length > 1 ? legend(series.map((x) => ({ label: x.name, tone: x.tone, value: '' }))) : null,
        ),
        chartCard(
          'Cost per resolved task',
          'The cost of every attempt, resolved or not, over the resolved ones.',
          drawInto(costBox, hbars(perRun((r) => r.cost_per_resolved), { title: 'Cost per resolved task', format: cost })),
        ),
        chartCard(
          'Time per resolved task',
          'The wall time of every attempt over the resolved ones.',
          drawInto(timeBox, hbars(perRun((r) => r.time_per_resolved_ms), { title: 'Time per resolved task', format: duration })),
        ),
        chartCard(
          'Accepted changes per reviewer minute',
          reviewed
            ? 'From the verdicts of blind review: changes a reviewer would merge, over the minutes the reviews took.'
            : 'No verdict yet: start a blind review on the Evals page.',
          reviewed
            ? drawInto(
                apmBox,
                hbars(perRun((r) => r.review && r.review.accepted_per_reviewer_minute), {
                  title: 'Accepted changes per reviewer minute',
                  format: num2,
                }),
              )
            : null,
        ),
      ),
      card('Per task', taskTable(reps)),
    );
  }
  load();
  return () => ac.abort();
}

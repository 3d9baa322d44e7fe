// Stats: the pilot's numbers (GET /stats) and the start-latency histograms
// (GET /metrics), drawn; plus what the sessions the caller can see say per
// reviewer and per repository.

import { get } from '../api.js';
import { chart, columns, hbars, legend, ring, stackedBar, stackedColumns } from '../charts.js';
import { h, replace } from '../dom.js';
import { cost, duration, durationShort, num, num1, num2 } from '../format.js';
import { START_PARTS, STATES, errorBox, loading, pageHeader, stateLabel, stateTone } from '../ui.js';

const PHASES = [
  { id: 'total', label: 'Total (request to first output)' },
  { id: 'queue_wait', label: 'Queue wait' },
  { id: 'restore', label: 'Restore' },
  { id: 'sync', label: 'Sync' },
  { id: 'services_ready', label: 'Services ready' },
  { id: 'agent_started', label: 'Agent started' },
];

// Prometheus text: warren_start_latency_ms_bucket{phase="restore",le="5"} 3
export function parseHistograms(text, name) {
  const out = new Map(); // phase -> {buckets: [{le, count}], sum, count}
  const get = (phase) => {
    if (!out.has(phase)) out.set(phase, { buckets: [], sum: 0, count: 0 });
    return out.get(phase);
  };
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = line.match(/^([a-z_]+)\{([^}]*)\}\s+([-+0-9.eE]+|NaN|\+Inf)$/);
    if (!m) continue;
    const labels = Object.fromEntries([...m[2].matchAll(/([a-z_]+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    const v = Number(m[3]);
    if (!labels.phase) continue;
    const hgm = get(labels.phase);
    if (m[1] === `${name}_bucket`)
      hgm.buckets.push({ le: labels.le === '+Inf' ? Infinity : Number(labels.le), count: v });
    else if (m[1] === `${name}_sum`) hgm.sum = v;
    else if (m[1] === `${name}_count`) hgm.count = v;
  }
  for (const hgm of out.values()) hgm.buckets.sort((a, b) => a.le - b.le);
  return out;
}

// The bucket bound under which a share q of the observations fall.
function quantile(hgm, q) {
  if (!hgm.count) return null;
  const want = q * hgm.count;
  for (const b of hgm.buckets) if (b.count >= want) return b.le;
  return Infinity;
}

function tile(label, value, note, cls = '') {
  return h(
    'div',
    { class: ['tile', cls] },
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

export function mount(root, ctx) {
  ctx.setTitle('Stats');
  const ac = new AbortController();
  const body = h('div', { class: 'stats' }, loading('Loading the numbers…'));
  const asOf = h('span', { class: 'muted small' });
  const again = h('button', { type: 'button', class: 'btn btn-small', onclick: () => load() }, 'Refresh');
  root.append(pageHeader('Stats', asOf, again), body);

  async function load() {
    again.disabled = true;
    let stats;
    let metrics = '';
    try {
      [stats, metrics] = await Promise.all([
        get('/stats', { signal: ac.signal }),
        get('/metrics', { as: 'text', signal: ac.signal }).catch((e) => {
          if (e.name === 'AbortError') throw e;
          return '';
        }),
      ]);
    } catch (e) {
      if (e.name === 'AbortError') return;
      replace(body, errorBox(e, 'Could not load the stats'));
      again.disabled = false;
      return;
    } finally {
      again.disabled = false;
    }
    replace(asOf, `as of ${new Date().toLocaleTimeString()}`);
    draw(stats, parseHistograms(metrics, 'warren_start_latency_ms'));
  }

  function draw(st, hist) {
    const rv = st.review || {};
    const model = st.model || {};
    const vf = st.verify || {};
    const tiles = h(
      'div',
      { class: 'tiles' },
      tile('Sessions', num(st.sessions), `${num(rv.decided)} decided`),
      tile(
        'Accepted per reviewer minute',
        num2(st.accepted_per_reviewer_minute),
        `${num(rv.accepted)} accepted in ${num1(rv.reviewer_minutes)} min of review`,
        'tile-key',
      ),
      tile('Cost per accepted change', cost(st.cost_per_accepted_change), `${cost(model.cost)} in all`, 'tile-key'),
      tile(
        'Time to decision',
        rv.mean_minutes_to_decision == null ? '—' : duration(rv.mean_minutes_to_decision * 60000),
        'mean, from review to decision',
      ),
      tile(
        'Tokens',
        num(model.prompt_tokens + model.completion_tokens),
        `${num(model.prompt_tokens)} prompt · ${num(model.completion_tokens)} completion`,
      ),
      tile(
        'Sandbox time',
        st.sandbox_seconds >= 1 ? duration(st.sandbox_seconds * 1000) : `${num1(st.sandbox_seconds || 0)} s`,
        'since the server started',
      ),
    );

    // start latency: the server's histogram, one phase at a time
    const phaseSel = h('select', { id: 'latency-phase', class: 'select' });
    const available = PHASES.filter((p) => hist.has(p.id));
    for (const p of available)
      phaseSel.append(h('option', { value: p.id }, `${p.label} (${num(hist.get(p.id).count)})`));
    const firstWithData = available.find((p) => hist.get(p.id).count > 0);
    if (firstWithData) phaseSel.value = firstWithData.id;
    const histBox = h('div', { class: 'chart-box' });
    const histNote = h('p', { class: 'chart-note' });
    const drawHist = () => {
      const hgm = hist.get(phaseSel.value);
      if (!hgm || !hgm.count) {
        replace(histBox, h('p', { class: 'empty-panel' }, 'No session has started since the server did.'));
        replace(histNote);
        return;
      }
      let prev = 0;
      let lo = 0;
      const bins = hgm.buckets.map((b) => {
        const label = b.le === Infinity ? `>${durationShort(lo)}` : `≤${durationShort(b.le)}`;
        const bin = { label, value: b.count - prev };
        prev = b.count;
        if (b.le !== Infinity) lo = b.le;
        return bin;
      });
      // trim empty buckets at both ends, keep one for context
      let a = bins.findIndex((b) => b.value > 0);
      let z = bins.length - 1 - [...bins].reverse().findIndex((b) => b.value > 0);
      a = Math.max(0, a - 1);
      z = Math.min(bins.length - 1, z + 1);
      const shown = bins.slice(a, z + 1);
      chart(
        histBox,
        columns(shown, {
          title: `Start latency, ${phaseSel.selectedOptions[0].textContent}`,
          format: num,
          xTitle: 'milliseconds (bucket upper bound)',
          yTitle: 'sessions',
        }),
      );
      const fmtQ = (v) => (v === null ? '—' : v === Infinity ? `>${durationShort(lo)}` : `≤ ${duration(v)}`);
      replace(
        histNote,
        `median ${fmtQ(quantile(hgm, 0.5))} · p90 ${fmtQ(quantile(hgm, 0.9))} · mean ${duration(hgm.sum / hgm.count)} · ${plural(hgm.count)} since the server started`,
      );
    };
    phaseSel.addEventListener('change', drawHist);

    // start-up of recent sessions, phase by phase (from the live list)
    const recent = ctx.live
      .list()
      .filter((s) => s.outcome && s.outcome.start_ms)
      .slice(0, 40)
      .reverse();
    const recentBox = h('div', { class: 'chart-box' });
    const recentItems = recent.map((s) => ({ label: s.id, parts: s.outcome.start_ms }));

    // outcomes
    const outcomeItems = STATES.filter((k) => (st.by_state || {})[k] > 0).map((k) => ({
      label: stateLabel(k),
      value: st.by_state[k],
      tone: stateTone(k),
    }));
    const outcomeBox = h('div', { class: 'chart-box' });
    const reviewBar = stackedBar(
      [
        { label: 'Accepted', value: rv.accepted || 0, tone: 'accepted' },
        { label: 'Rejected', value: rv.rejected || 0, tone: 'rejected' },
      ],
      { title: 'Decisions', format: num },
    );
    const reviewBox = h('div', { class: 'chart-box chart-box-thin' });

    // per reviewer and per repository, from the sessions this caller sees
    const seen = ctx.live.list();
    const byReviewer = new Map();
    const byRepo = new Map();
    for (const s of seen) {
      const o = s.outcome || {};
      const d = o.decision;
      const repo = s.repo || s.repo_id;
      if (!byRepo.has(repo)) byRepo.set(repo, { cost: 0, accepted: 0 });
      const r = byRepo.get(repo);
      r.cost += (o.usage && o.usage.cost) || 0;
      if (d) {
        if (!byReviewer.has(d.by)) byReviewer.set(d.by, { accepted: 0, ms: 0 });
        const x = byReviewer.get(d.by);
        x.ms += d.review_ms || 0;
        if (d.decision === 'approved') {
          x.accepted++;
          r.accepted++;
        }
      }
    }
    const reviewerItems = [...byReviewer.entries()]
      .map(([who, x]) => ({ label: who, value: x.ms > 0 ? x.accepted / (x.ms / 60000) : 0, tone: 'accent' }))
      .sort((a, b) => b.value - a.value);
    const repoItems = [...byRepo.entries()]
      .filter(([, r]) => r.accepted > 0)
      .map(([name, r]) => ({ label: name, value: r.cost / r.accepted, tone: 'accent' }))
      .sort((a, b) => b.value - a.value);
    const reviewerBox = h('div', { class: 'chart-box' });
    const repoBox = h('div', { class: 'chart-box' });
    const scope = ctx.me.role === 'submitter' ? 'your sessions' : `the ${num(seen.length)} newest sessions`;

    replace(
      body,
      tiles,
      h(
        'div',
        { class: 'chart-grid' },
        chartCard(
          'Start latency',
          'How long sessions waited from the request to a running agent, by phase: the server’s histogram since it started.',
          available.length
            ? h(
                'div',
                { class: 'field-inline' },
                h('label', { for: 'latency-phase', class: 'label' }, 'Phase'),
                phaseSel,
              )
            : null,
          histBox,
          histNote,
        ),
        chartCard(
          'Start-up of recent sessions',
          `Each column is one session (${scope}), split into its start-up phases.`,
          recentItems.length
            ? [
                drawInto(
                  recentBox,
                  stackedColumns(recentItems, START_PARTS, {
                    title: 'Start-up of recent sessions',
                    format: durationShort,
                  }),
                ),
                legend(START_PARTS.map((p) => ({ ...p, value: '' }))),
              ]
            : h('p', { class: 'empty-panel' }, 'No session has started yet.'),
        ),
        chartCard(
          'Outcomes',
          'Every session the server knows, by state.',
          outcomeItems.length
            ? drawInto(outcomeBox, hbars(outcomeItems, { title: 'Sessions by state', format: num }))
            : h('p', { class: 'empty-panel' }, 'No sessions yet.'),
        ),
        chartCard(
          'Verification',
          `Of ${plural(vf.sessions)} whose change went through the project's checks.`,
          h(
            'div',
            { class: 'rings' },
            h(
              'figure',
              { class: 'ring-fig' },
              ring(vf.first_attempt_pass_rate, {
                title: 'First-attempt pass rate',
                label: 'first try',
                tone: 'accent',
              }),
              h('figcaption', null, 'Passed on the first attempt'),
            ),
            h(
              'figure',
              { class: 'ring-fig' },
              ring(vf.final_pass_rate, { title: 'Final pass rate', label: 'in the end', tone: 'good' }),
              h('figcaption', null, 'Passed after the agent fixed failures'),
            ),
          ),
        ),
        chartCard(
          'Review',
          `${num(rv.decided)} decisions, ${num1(rv.reviewer_minutes)} reviewer minutes in all; accepted changes per reviewer minute: ${num2(st.accepted_per_reviewer_minute)}.`,
          drawInto(reviewBox, reviewBar.draw),
          reviewBar.legend,
          h('h3', { class: 'sub-title' }, 'Accepted changes per reviewer minute, by reviewer'),
          reviewerItems.length
            ? drawInto(
                reviewerBox,
                hbars(reviewerItems, { title: 'Accepted changes per reviewer minute, by reviewer', format: num2 }),
              )
            : h('p', { class: 'empty-panel' }, `No decisions among ${scope}.`),
        ),
        chartCard(
          'Cost per accepted change',
          `Model cost divided by accepted changes: ${cost(st.cost_per_accepted_change)} overall (${cost(model.cost)} for ${num(rv.accepted)} accepted).`,
          repoItems.length
            ? drawInto(repoBox, hbars(repoItems, { title: 'Cost per accepted change, by repository', format: cost }))
            : h('p', { class: 'empty-panel' }, `No accepted change among ${scope} yet.`),
          h('p', { class: 'chart-note' }, `By repository, over ${scope}.`),
        ),
      ),
    );
    requestAnimationFrame(drawHist);
  }

  function plural(n) {
    return `${num(n || 0)} ${n === 1 ? 'session' : 'sessions'}`;
  }

  load();
  return () => ac.abort();
}

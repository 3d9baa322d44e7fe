// Evals: the runs `warren eval run` published (GET /evals), their review
// tallies, the blind review batches (GET /evals/reviews) and a form that
// puts the resolved changes of chosen runs up for blind review (POST
// /evals/reviews). Reviewers and admins: an eval is the judge's.

import { get, post } from '../api.js';
import { h, replace } from '../dom.js';
import { num } from '../format.js';
import { announce, busy, card, errorBox, loading, pageHeader, timeEl } from '../ui.js';

function agentLabel(run) {
  if (!run) return '—';
  if (run.oracle) return '(oracle: solution.patch)';
  return run.agent || '—';
}

export function mount(root, ctx) {
  ctx.setTitle('Evals');
  const ac = new AbortController();
  const runsBox = h('div', null, loading('Loading eval runs…'));
  const batchesBox = h('div', null);
  root.append(
    pageHeader('Evals'),
    h(
      'p',
      { class: 'help' },
      'Runs of ',
      h('code', null, 'warren eval run'),
      ' over frozen tasks, as they are published. Open one for its report and charts; choose runs to put their resolved changes up for blind review.',
    ),
    runsBox,
    batchesBox,
  );

  async function load() {
    let evals;
    let reviews;
    try {
      [evals, reviews] = await Promise.all([
        get('/evals', { signal: ac.signal }),
        get('/evals/reviews', { signal: ac.signal }),
      ]);
    } catch (e) {
      if (e.name === 'AbortError') return;
      replace(runsBox, errorBox(e, 'Could not load the eval runs'));
      return;
    }
    const runs = evals.evals || [];
    if (!runs.length) {
      replace(
        runsBox,
        card(
          'Runs',
          h('p', { class: 'empty-panel' }, 'No eval run yet: ', h('code', null, 'warren eval run SUITE'), ' publishes one here.'),
        ),
      );
    } else {
      const picks = new Map();
      const rows = runs.map((r) => {
        const run = r.run || {};
        const box = h('input', { type: 'checkbox', id: `pick-${r.id}`, class: 'eval-pick', value: r.id });
        picks.set(r.id, box);
        const rv = r.review || {};
        return h(
          'tr',
          { dataset: { run: r.id } },
          h('td', null, box, h('label', { for: `pick-${r.id}`, class: 'sr-only' }, `Choose ${r.id} for blind review`)),
          h('td', null, h('a', { href: `#/evals/${encodeURIComponent(r.id)}`, class: 'mono' }, r.id)),
          h('td', { dataset: { label: 'Suite' } }, run.suite_name || '—'),
          h('td', { class: 'eval-agent', dataset: { label: 'Agent' } }, agentLabel(run)),
          h('td', { class: 'num', dataset: { label: 'Repeat' } }, num(run.repeat)),
          h('td', { dataset: { label: 'State' } }, run.state || '—'),
          h(
            'td',
            { class: 'num', dataset: { label: 'Accepted' } },
            rv.reviewed ? `${num(rv.accepted)} of ${num(rv.reviewed)}` : '—',
          ),
          h('td', { dataset: { label: 'Published' } }, timeEl(r.created_ms)),
        );
      });
      const err = h('div', { class: 'form-error', role: 'alert' });
      const start = h('button', { type: 'submit', class: 'btn btn-primary', id: 'start-review' }, 'Start blind review');
      const form = h(
        'form',
        {
          class: 'eval-review-form',
          onsubmit: async (e) => {
            e.preventDefault();
            replace(err);
            const chosen = [...picks.entries()].filter(([, b]) => b.checked).map(([id]) => id);
            if (!chosen.length) {
              replace(err, 'Choose one or more runs whose resolved changes to review.');
              return;
            }
            await busy(start, async () => {
              try {
                const b = await post('/evals/reviews', { runs: chosen });
                announce(`A blind review of ${b.items} changes is ready.`, 'good');
                ctx.go(`#/reviews/${encodeURIComponent(b.id)}`);
              } catch (x) {
                replace(err, x.describe ? x.describe() : String(x.message || x));
              }
            });
          },
        },
        h(
          'div',
          { class: 'table-wrap' },
          h(
            'table',
            { class: 'table eval-runs' },
            h(
              'thead',
              null,
              h(
                'tr',
                null,
                h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Choose')),
                h('th', { scope: 'col' }, 'Run'),
                h('th', { scope: 'col' }, 'Suite'),
                h('th', { scope: 'col' }, 'Agent'),
                h('th', { scope: 'col', class: 'num' }, 'Repeat'),
                h('th', { scope: 'col' }, 'State'),
                h('th', { scope: 'col', class: 'num' }, 'Accepted'),
                h('th', { scope: 'col' }, 'Published'),
              ),
            ),
            h('tbody', null, rows),
          ),
        ),
        h(
          'p',
          { class: 'help' },
          'A blind review shows each resolved change of the chosen runs in a random order, with the task’s prompt and the diff only: not the run, the agent or the cost.',
        ),
        err,
        start,
      );
      replace(runsBox, card('Runs', form));
    }
    const batches = reviews.reviews || [];
    replace(
      batchesBox,
      batches.length
        ? card(
            'Blind reviews',
            h(
              'ul',
              { class: 'plain-list eval-batches' },
              batches.map((b) =>
                h(
                  'li',
                  null,
                  h('a', { href: `#/reviews/${encodeURIComponent(b.id)}`, class: 'mono' }, b.id),
                  ` · ${num(b.decided)} of ${num(b.items)} reviewed · `,
                  timeEl(b.created_ms),
                ),
              ),
            ),
          )
        : null,
    );
  }
  load();
  return () => ac.abort();
}

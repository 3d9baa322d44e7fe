// The session page's summary column: the outcome (result, verification,
// decision, push), start-up timings, usage and cost, the sandbox and its
// limits, the artifacts.

import { chart, stackedBar } from '../charts.js';
import { h } from '../dom.js';
import { bytes, cost, dateTime, duration, num, plural, shortSha } from '../format.js';
import { ACTIVE, START_PARTS, card, facts, sessionTook, timeEl } from '../ui.js';

// "7200000ms" (as the runner records it), or seconds as a number
function limitTime(v) {
  const m = /^(\d+(?:\.\d+)?)ms$/.exec(String(v));
  if (m) return duration(Number(m[1]));
  if (typeof v === 'number') return duration(v * 1000);
  return String(v);
}

// The cards for session s; onDownload(artifact, button) saves an artifact.
export function summaryCards(s, artifacts, onDownload) {
  const o = s.outcome || {};
  const cards = [];

  // outcome
  const r = o.result;
  const v = o.verify;
  const d = o.decision;
  const p = o.push;
  const outcome = [];
  if (r) {
    if (r.summary) outcome.push(h('p', { class: 'summary-text' }, r.summary));
    outcome.push(
      facts([
        ['Branch', h('code', null, r.branch)],
        ['Commit', h('code', null, shortSha(r.commit))],
        ['Base', h('code', null, shortSha(r.base))],
        [
          'Change',
          r.changed
            ? [
                h('span', { class: 'add' }, `+${num(r.additions)}`),
                ' ',
                h('span', { class: 'del' }, `−${num(r.deletions)}`),
                ` in ${plural(r.files_total ?? (r.files || []).length, 'file')}`,
              ]
            : 'none',
        ],
        // what the snapshot's build produced is never part of the change
        [
          'Left out',
          r.build_output && r.build_output.count
            ? h(
                'span',
                { title: (r.build_output.paths || []).join('\n') },
                `${plural(r.build_output.count, 'build output')} (${(r.build_output.paths || []).slice(0, 3).join(', ')}${
                  r.build_output.count > 3 ? ', …' : ''
                })`,
              )
            : null,
        ],
      ]),
    );
  }
  if (v) {
    outcome.push(
      h(
        'p',
        { class: 'verify-summary' },
        h(
          'span',
          { class: ['pill', v.passed ? 'pill-good' : 'pill-bad'] },
          v.passed ? 'Checks passed' : 'Checks failed',
        ),
        ' ',
        h('span', { class: 'muted' }, v.attempts > 1 ? `after ${v.attempts} attempts` : 'on the first attempt'),
        v.commit ? h('span', { class: 'muted' }, ' on commit ', h('code', null, shortSha(v.commit))) : null,
      ),
    );
    // the verified commit must be the reviewed one: a mismatch is shown, never hidden
    if (r && v.commit && r.commit && v.commit !== r.commit)
      outcome.push(
        h(
          'div',
          { class: 'callout callout-error' },
          h('strong', null, 'Mismatch: '),
          `the checks ran on ${shortSha(v.commit)}, the change is ${shortSha(r.commit)}`,
        ),
      );
  }
  if (d) {
    outcome.push(
      facts([
        ['Decision', h('strong', null, d.decision === 'approved' ? 'Approved' : 'Rejected')],
        ['By', d.by],
        ['When', timeEl(d.at_ms)],
        ['Review time', duration(d.review_ms)],
        ['Reason', d.reason],
      ]),
    );
  }
  if (p) {
    if (p.error)
      outcome.push(h('div', { class: 'callout callout-error' }, h('strong', null, 'Push failed: '), p.error));
    else if (p.skipped) outcome.push(h('p', { class: 'muted' }, `Not pushed: ${p.skipped}.`));
    else
      outcome.push(
        h(
          'div',
          { class: 'pushed' },
          h('strong', null, 'Pushed '),
          h('code', null, p.ref),
          ' (',
          h('code', null, shortSha(p.commit)),
          ') to ',
          h('span', { class: 'mono break' }, p.remote),
        ),
      );
  }
  if (o.pull_request && o.pull_request.url) {
    outcome.push(
      h(
        'p',
        null,
        'Pull request ',
        h(
          'a',
          { href: o.pull_request.url, rel: 'noopener noreferrer', target: '_blank' },
          `#${o.pull_request.number ?? ''}`,
        ),
      ),
    );
  }
  if (!outcome.length) {
    outcome.push(
      h(
        'p',
        { class: 'muted' },
        ACTIVE.has(s.state)
          ? 'The agent is at work. The change appears here once it is verified and committed.'
          : 'No result.',
      ),
    );
  }
  cards.push(card('Outcome', ...outcome.map((part) => h('div', { class: 'outcome-part' }, part))));

  // timings
  const st = o.start_ms;
  const tim = [];
  if (st) {
    const parts = START_PARTS.filter((k) => typeof st[k.key] === 'number').map((k) => ({ ...k, value: st[k.key] }));
    const total = typeof st.total === 'number' ? st.total : parts.reduce((n, x) => n + x.value, 0);
    const bar = stackedBar(parts, { title: `Start-up: ${duration(total)}`, format: duration });
    const box = h('div', { class: 'chart-box chart-box-thin' });
    tim.push(
      h('p', { class: 'big-number' }, duration(total), h('span', { class: 'big-label' }, ' to start')),
      box,
      bar.legend,
    );
    requestAnimationFrame(() => chart(box, bar.draw));
  }
  const took = sessionTook(s);
  tim.push(
    facts([
      ['Created', h('span', { title: dateTime(s.created_ms) }, dateTime(s.created_ms))],
      ['Started', s.started_ms ? duration(s.started_ms - s.created_ms) + ' after' : null],
      ['Finished', s.finished_ms ? dateTime(s.finished_ms) : null],
      // created to review; the review's own time apart
      ['Took', took ? `${duration(took.took)}${s.state === 'review' || took.reviewMs !== null ? ' to review' : ''}` : null],
      [
        'Review',
        took && took.reviewMs !== null
          ? `${duration(took.reviewMs)} to the decision`
          : s.state === 'review' && took
            ? h('span', null, 'in review since ', timeEl(s.finished_ms, 'at'))
            : null,
      ],
      ['Turns', num(s.turns)],
      ['Sandboxes', s.attempts > 1 ? `${num(s.attempts)} (a sandbox died and was replaced)` : num(s.attempts)],
    ]),
  );
  cards.push(card('Timings', ...tim));

  // usage and cost
  const u = o.usage;
  if (u) {
    cards.push(
      card(
        'Usage',
        h('p', { class: 'big-number' }, cost(u.cost), h('span', { class: 'big-label' }, ' cost')),
        facts([
          ['Prompt tokens', num(u.prompt_tokens)],
          ['Completion tokens', num(u.completion_tokens)],
          ['Model calls', num(u.model_calls)],
          ['Tool calls', num(u.tool_calls)],
        ]),
      ),
    );
  }

  // sandbox
  const sn = o.session;
  const lim = o.limits;
  const sandboxFacts = facts([
    [
      'Snapshot commit',
      sn ? h('code', null, shortSha(sn.commit)) : s.snapshot_id ? h('code', null, shortSha(s.snapshot_id)) : null,
    ],
    ['Snapshot age', sn && typeof sn.age_ms === 'number' ? duration(sn.age_ms) : null],
    ['Commits behind', sn && sn.commits_behind ? num(sn.commits_behind) : null],
    ['Sandbox', s.sandbox ? h('code', null, s.sandbox) : null],
    ['Memory', lim && lim.memory ? bytes(lim.memory) : null],
    ['CPUs', lim && lim.cpus ? String(lim.cpus) : null],
    ['Processes', lim && lim.pids ? num(lim.pids) : null],
    ['Lifetime', lim && lim.lifetime ? limitTime(lim.lifetime) : null],
    ['Idle limit', lim && lim.idle ? limitTime(lim.idle) : null],
  ]);
  if (sandboxFacts.childElementCount) cards.push(card('Sandbox', sandboxFacts));

  // artifacts
  if (artifacts && artifacts.length) {
    cards.push(
      card(
        'Artifacts',
        h(
          'ul',
          { class: 'artifact-list' },
          artifacts.map((a) =>
            h(
              'li',
              null,
              h(
                'button',
                { type: 'button', class: 'link-button mono', onclick: (e) => onDownload(a, e.currentTarget) },
                a.name,
              ),
              h('span', { class: 'muted' }, ` ${bytes(a.size)}`),
            ),
          ),
        ),
      ),
    );
  }
  return cards;
}

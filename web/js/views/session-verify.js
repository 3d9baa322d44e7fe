// The verification tab: Warren's runs of the project's verify commands,
// each attempt with every command's status, time and output.

import { h } from '../dom.js';
import { duration } from '../format.js';

// v: the session's outcome.verify (or undefined); runs0: the verify events'
// data, in order. Returns the panel's content.
export function verifyPanel(v, runs0) {
  const parts = [];
  if (v) {
    parts.push(
      h(
        'div',
        { class: ['verify-banner', v.passed ? 'is-pass' : 'is-fail'] },
        h('strong', null, v.passed ? 'Verification passed' : 'Verification failed'),
        h(
          'span',
          null,
          v.attempts > 1
            ? ` after ${v.attempts} attempts (the first ${v.first_attempt_passed ? 'passed' : 'failed'}; the agent was sent back with the failures)`
            : ' on the first attempt',
        ),
      ),
    );
  }
  const runs = runs0.length ? runs0 : v ? [{ attempt: v.attempts, verify: v }] : [];
  runs.forEach((run, i) => {
    const last = i === runs.length - 1;
    const vv = run.verify || {};
    const d = h(
      'details',
      { class: 'verify-run' },
      h(
        'summary',
        null,
        h('span', { class: ['pill', vv.passed ? 'pill-good' : 'pill-bad'] }, vv.passed ? 'passed' : 'failed'),
        ` Attempt ${run.attempt ?? i + 1}`,
        run.turn ? h('span', { class: 'muted' }, ` · turn ${run.turn}`) : null,
      ),
      h(
        'ul',
        { class: 'verify-results' },
        (vv.results || []).map((r) =>
          h(
            'li',
            null,
            h(
              'div',
              { class: 'verify-cmd' },
              h('code', null, `$ ${r.command}`),
              h('span', { class: ['pill', r.status === 0 ? 'pill-good' : 'pill-bad'] }, `exit ${r.status}`),
              h('span', { class: 'muted' }, duration(r.ms)),
            ),
            r.output
              ? h('pre', { class: 'block terminal' }, r.output)
              : h('p', { class: 'muted small' }, '(no output)'),
          ),
        ),
      ),
    );
    d.open = last;
    parts.push(d);
  });
  return parts;
}

// The verification tab: Warren's runs of the project's verify commands,
// each attempt with every command's status, time and output (colours
// rendered, escapes made harmless: terminal.js). It opens at the failure:
// the last attempt expanded, its first failing command in view with its
// output scrolled to the end, where a test runner says what failed.

import { h } from '../dom.js';
import { duration } from '../format.js';
import { terminal } from '../terminal.js';

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
            { class: r.status === 0 ? null : 'is-failure', dataset: r.status === 0 ? null : { failure: '' } },
            h(
              'div',
              { class: 'verify-cmd' },
              h('code', null, `$ ${r.command}`),
              h('span', { class: ['pill', r.status === 0 ? 'pill-good' : 'pill-bad'] }, `exit ${r.status}`),
              h('span', { class: 'muted' }, duration(r.ms)),
            ),
            r.output
              ? terminal(r.output, { class: 'block terminal' })
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

// Brings the open attempt's first failing command into view, its output
// scrolled to the end; false when the open attempt has none.
export function scrollToFailure(panel) {
  const failed = panel.querySelector('.verify-run[open] [data-failure]');
  if (!failed) return false;
  failed.scrollIntoView({ block: 'start' });
  const out = failed.querySelector('pre');
  if (out) out.scrollTop = out.scrollHeight;
  return true;
}

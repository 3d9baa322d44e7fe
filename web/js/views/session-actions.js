// The session page's confirmations: approve (push), reject (with a reason),
// cancel. Each is a small form shown under the buttons; Escape or "Back"
// closes it.

import { h } from '../dom.js';

function approveParts(s) {
  const r = s.outcome && s.outcome.result;
  const nothing = r && r.changed === false;
  return {
    title: 'Approve this change?',
    text: nothing
      ? 'The agent changed nothing: approving records the decision and pushes nothing.'
      : [
          'Warren pushes the branch ',
          h('code', null, (r && r.branch) || `warren/${s.id}`),
          ' to the repository’s remote (never forced). Nothing else leaves.',
        ],
    go: nothing ? 'Approve' : 'Approve and push',
    goClass: 'btn-approve',
    back: 'Back',
  };
}

function rejectParts() {
  const reason = h('textarea', {
    id: 'reject-reason',
    class: 'textarea',
    rows: '3',
    maxlength: '4096',
    placeholder: 'Too broad: split the refactoring out.',
  });
  return {
    title: 'Reject this change?',
    text: 'The change is dropped and nothing is pushed. The reason is kept with the session.',
    fields: [
      h('label', { for: 'reject-reason', class: 'label' }, 'Reason ', h('span', { class: 'optional' }, '(optional)')),
      reason,
    ],
    body: () => (reason.value.trim() ? { reason: reason.value.trim() } : {}),
    go: 'Reject',
    goClass: 'btn-danger',
    back: 'Back',
  };
}

function cancelParts(s) {
  return {
    title: 'Cancel this session?',
    text:
      s.state === 'review'
        ? 'Its change is dropped and its sandbox stopped.'
        : 'The agent is stopped, and its sandbox with it. Nothing is kept for review.',
    go: 'Cancel session',
    goClass: 'btn-danger',
    back: 'Keep it',
  };
}

const KINDS = { approve: approveParts, reject: rejectParts, cancel: cancelParts };

// decisionForm('approve'|'reject'|'cancel', session, {onConfirm, onBack}):
// onConfirm(submitButton, errorElement, body) does the request.
export function decisionForm(kind, s, { onConfirm, onBack }) {
  const p = KINDS[kind](s);
  const err = h('div', { class: 'form-error', role: 'alert' });
  const go = h('button', { type: 'submit', class: ['btn', p.goClass] }, p.go);
  const form = h(
    'form',
    {
      class: 'panel-form',
      'aria-label': p.title,
      onsubmit: (e) => {
        e.preventDefault();
        onConfirm(go, err, p.body ? p.body() : undefined);
      },
      onkeydown: (e) => {
        if (e.key === 'Escape') {
          e.preventDefault();
          onBack();
        }
      },
    },
    h('h2', { class: 'panel-title' }, p.title),
    h('p', null, p.text),
    p.fields || null,
    err,
    h(
      'div',
      { class: 'form-actions' },
      go,
      h('button', { type: 'button', class: 'btn btn-quiet', onclick: onBack }, p.back),
    ),
  );
  return form;
}

// ui.js - small pieces shared by the views: state badges, times, error
// boxes, announcements for screen readers, and who may do what.

import { h, replace } from './dom.js';
import { ago, dateTime, iso } from './format.js';

export const STATES = [
  'queued',
  'provisioning',
  'running',
  'verifying',
  'review',
  'approved',
  'pushed',
  'rejected',
  'failed',
  'cancelled',
  'expired',
  'interrupted',
];

export const ACTIVE = new Set(['queued', 'provisioning', 'running', 'verifying', 'interrupted']);
export const FINISHED = new Set(['approved', 'pushed', 'rejected', 'failed', 'cancelled', 'expired']);
// A session rests in review or a terminal state: its event stream ends.
export const RESTING = new Set(['review', 'pushed', 'rejected', 'failed', 'cancelled', 'expired']);

// How long a session worked: from its creation to review (once decided, the
// decision's review time is its own, not part of it); one that never came
// to review, to its end. null while it works. {took, reviewMs} (reviewMs
// null before a decision).
export function sessionTook(s) {
  if (!s || !s.finished_ms || ACTIVE.has(s.state)) return null;
  const d = s.outcome && s.outcome.decision;
  const decided = d && typeof d.at_ms === 'number' && typeof d.review_ms === 'number';
  const reviewAt = decided ? d.at_ms - d.review_ms : s.finished_ms;
  return { took: reviewAt - s.created_ms, reviewMs: decided ? d.review_ms : null };
}

// The start-up phases of a session (outcome.start_ms), in order.
export const START_PARTS = [
  { key: 'queue', label: 'Queue', tone: 'queue' },
  { key: 'restore', label: 'Restore', tone: 'restore' },
  { key: 'sync', label: 'Sync', tone: 'sync' },
  { key: 'services', label: 'Services', tone: 'services' },
  { key: 'agent', label: 'Agent start', tone: 'agent' },
];

const LABELS = {
  queued: 'Queued',
  provisioning: 'Starting',
  running: 'Running',
  verifying: 'Verifying',
  review: 'In review',
  approved: 'Approved',
  pushed: 'Pushed',
  rejected: 'Rejected',
  failed: 'Failed',
  cancelled: 'Cancelled',
  expired: 'Expired',
  interrupted: 'Interrupted',
};

export function stateLabel(state) {
  return LABELS[state] || String(state);
}

// The badge's colour family: what a reviewer scans for.
export function stateTone(state) {
  if (state === 'review') return 'review';
  if (state === 'pushed' || state === 'approved') return 'good';
  if (state === 'failed' || state === 'expired') return 'bad';
  if (state === 'rejected' || state === 'cancelled') return 'muted';
  if (state === 'interrupted') return 'warn';
  return 'active';
}

// pulse: the badge shows a current state (not one in a history)
export function stateBadge(state, { pulse = true } = {}) {
  const live = pulse && ACTIVE.has(state) && state !== 'interrupted';
  return h(
    'span',
    { class: ['badge', `tone-${stateTone(state)}`], dataset: { state } },
    live ? h('span', { class: 'pulse', 'aria-hidden': 'true' }) : null,
    stateLabel(state),
  );
}

export function timeEl(ms, mode = 'ago') {
  const el = h('time', { datetime: iso(ms), title: dateTime(ms) }, mode === 'ago' ? ago(ms) : dateTime(ms));
  if (mode === 'ago') el.dataset.ago = String(ms);
  return el;
}

// Refresh every "5 min ago" on the page once in a while.
setInterval(() => {
  for (const el of document.querySelectorAll('time[data-ago]')) {
    el.textContent = ago(Number(el.dataset.ago));
  }
}, 15000);

// ---- who may do what (docs/api.md, Roles) ---------------------------------

export function isAdmin(me) {
  return me && me.role === 'admin';
}

export function mayReview(me) {
  return me && (me.role === 'reviewer' || me.role === 'admin');
}

// Message and cancel: one's own sessions; an admin, any.
export function mayAct(me, session) {
  return me && (me.role === 'admin' || session.user === me.user);
}

// ---- messages ---------------------------------------------------------------

// An error box: the server's message as it is (it names what was wrong).
export function errorBox(err, title = 'Something went wrong') {
  const text =
    err && typeof err.describe === 'function' ? err.describe() : String(err && err.message ? err.message : err);
  return h('div', { class: 'callout callout-error', role: 'alert' }, h('strong', null, title), h('p', null, text));
}

export function notice(text, tone = 'info') {
  return h('div', { class: ['callout', `callout-${tone}`] }, h('p', null, text));
}

// A polite announcement for screen readers (and a visible toast).
let toastTimer = null;
export function announce(text, tone = 'info', { toast: visible = true } = {}) {
  const live = document.getElementById('announcer');
  if (live) {
    // clear first so that the same text twice is announced twice
    live.textContent = '';
    setTimeout(() => {
      live.textContent = text;
    }, 30);
  }
  const toast = document.getElementById('toast');
  if (toast && visible) {
    replace(toast, text);
    toast.className = `toast toast-${tone} toast-show`;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => {
      toast.className = 'toast';
    }, 4000);
  }
}

export function hideToast() {
  const toast = document.getElementById('toast');
  if (toast) toast.className = 'toast';
}

// A button that shows it is busy while the promise runs.
export async function busy(button, fn) {
  const label = button.textContent;
  button.disabled = true;
  button.setAttribute('aria-busy', 'true');
  button.classList.add('is-busy');
  try {
    return await fn();
  } finally {
    button.disabled = false;
    button.removeAttribute('aria-busy');
    button.classList.remove('is-busy');
    button.textContent = label;
  }
}

export function pageHeader(title, ...extra) {
  return h(
    'div',
    { class: 'page-head' },
    h('h1', { tabindex: '-1', class: 'page-title' }, title),
    extra.length ? h('div', { class: 'page-actions' }, ...extra) : null,
  );
}

export function loading(text = 'Loading…') {
  return h('p', { class: 'loading', role: 'status' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), text);
}

// key/value list
export function facts(pairs) {
  return h(
    'dl',
    { class: 'facts' },
    pairs
      .filter((p) => p && p[1] !== undefined && p[1] !== null && p[1] !== '')
      .map(([k, v]) => h('div', { class: 'fact' }, h('dt', null, k), h('dd', null, v))),
  );
}

export function card(title, ...children) {
  return h('section', { class: 'card' }, title ? h('h2', { class: 'card-title' }, title) : null, ...children);
}

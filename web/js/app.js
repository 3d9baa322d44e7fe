// app.js - the shell: sign-in state, the header, and a hash router.
//
// Routes (the hash is the page's address; #/sessions/<id> is a contract:
// Slack's messages link there):
//   #/sessions[?state=&user=&repo=]   the list, live
//   #/sessions/<id>[?tab=]            one session
//   #/new[?repo=]                     start a session
//   #/repositories                    repositories, builds and snapshots
//   #/repositories/<id>/builds/<b>    one snapshot build and its log
//   #/stats                           the pilot's numbers, as charts
//   #/evals                           eval runs and blind reviews (reviewers)
//   #/evals/<id>[?compare=<id2>]      one run's report, charts; two side by side
//   #/reviews/<batch>                 a blind review, one change at a time
//   #/tokens                          API tokens (admin)
// Without a token every route shows the sign-in form, and the page asked
// for comes up once signed in.

import { authEvents, clearToken, get, getToken } from './api.js';
import { clear, h, replace } from './dom.js';
import { LiveSessions } from './live.js';
import { errorBox, hideToast, isAdmin, mayReview } from './ui.js';
import * as signin from './views/signin.js';
import * as sessions from './views/sessions.js';
import * as session from './views/session.js';
import * as newSession from './views/new-session.js';
import * as repositories from './views/repositories.js';
import * as buildLog from './views/build-log.js';
import * as stats from './views/stats.js';
import * as tokens from './views/tokens.js';
import * as evals from './views/evals.js';
import * as evalRun from './views/eval-run.js';
import * as review from './views/review.js';
import * as notFound from './views/not-found.js';

const ROUTES = [
  { re: /^\/sessions$/, view: sessions, nav: 'sessions' },
  { re: /^\/sessions\/([^/]+)$/, view: session, nav: 'sessions' },
  { re: /^\/new$/, view: newSession, nav: 'new' },
  { re: /^\/repositories$/, view: repositories, nav: 'repositories' },
  { re: /^\/repositories\/([^/]+)\/builds\/([^/]+)$/, view: buildLog, nav: 'repositories' },
  { re: /^\/stats$/, view: stats, nav: 'stats' },
  { re: /^\/evals$/, view: evals, nav: 'evals', reviewer: true },
  { re: /^\/evals\/([^/]+)$/, view: evalRun, nav: 'evals', reviewer: true },
  { re: /^\/reviews\/([^/]+)$/, view: review, nav: 'evals', reviewer: true },
  { re: /^\/tokens$/, view: tokens, nav: 'tokens', admin: true },
];

const NAV = [
  { id: 'sessions', href: '#/sessions', label: 'Sessions' },
  { id: 'new', href: '#/new', label: 'New session' },
  { id: 'repositories', href: '#/repositories', label: 'Repositories' },
  { id: 'stats', href: '#/stats', label: 'Stats' },
  { id: 'evals', href: '#/evals', label: 'Evals', reviewer: true },
  { id: 'tokens', href: '#/tokens', label: 'Tokens', admin: true },
];

const live = new LiveSessions();
let me = null; // {user, role} from /whoami
let unmount = null;
let signinNote = null; // why we are back at the sign-in page
let renderSeq = 0;

const $ = (id) => document.getElementById(id);

function parseHash() {
  const raw = location.hash.startsWith('#/') ? location.hash.slice(1) : '/sessions';
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  const query = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  return { path: path.replace(/\/+$/, '') || '/sessions', query };
}

function setTitle(title) {
  document.title = title ? `${title} · Warren` : 'Warren';
}

function renderHeader(active) {
  const nav = $('nav');
  const who = $('who');
  if (!me) {
    nav.hidden = true;
    who.hidden = true;
    clear(nav);
    return;
  }
  nav.hidden = false;
  who.hidden = false;
  replace(
    nav,
    h(
      'ul',
      null,
      NAV.filter((n) => (!n.admin || isAdmin(me)) && (!n.reviewer || mayReview(me))).map((n) =>
        h('li', null, h('a', { href: n.href, 'aria-current': n.id === active ? 'page' : null }, n.label)),
      ),
    ),
  );
  replace($('me'), h('span', { class: 'me-user' }, me.user), h('span', { class: 'role' }, me.role));
  renderConn();
}

function renderConn() {
  const el = $('conn');
  const labels = { live: 'Live', connecting: 'Connecting…', retrying: 'Reconnecting…', offline: 'Offline' };
  el.className = `conn conn-${live.status}`;
  el.title =
    live.status === 'live'
      ? 'Session states update as they change'
      : 'The live connection to the server is down; retrying';
  replace(el, h('span', { class: 'conn-dot', 'aria-hidden': 'true' }), labels[live.status] || live.status);
}
live.addEventListener('status', renderConn);

function focusTitle() {
  const t = document.querySelector('#main .page-title') || $('main');
  t.focus({ preventScroll: false });
}

async function render(opts = {}) {
  const seq = ++renderSeq;
  if (unmount) {
    try {
      unmount();
    } catch (e) {
      console.error(e);
    }
    unmount = null;
  }
  const main = $('main');
  clear(main);
  hideToast();
  const route = parseHash();

  if (!getToken()) {
    me = null;
    live.stop();
    renderHeader(null);
    setTitle('Sign in');
    unmount = signin.mount(main, {
      note: signinNote,
      onSignedIn: (who) => {
        me = who;
        signinNote = null;
        live.start();
        render({ focus: true });
      },
    });
    return;
  }

  if (!me) {
    try {
      me = await get('/whoami');
    } catch (e) {
      if (seq !== renderSeq) return;
      if (!getToken()) return; // a 401: the unauthorized handler re-renders
      renderHeader(null);
      replace(
        main,
        errorBox(e, 'Could not reach the server'),
        h('button', { type: 'button', class: 'btn', onclick: () => render() }, 'Try again'),
      );
      return;
    }
    if (seq !== renderSeq) return;
    live.start();
  }

  let match = null;
  let params = [];
  for (const r of ROUTES) {
    const m = route.path.match(r.re);
    if (m) {
      match = r;
      params = m.slice(1).map(decodeURIComponent);
      break;
    }
  }
  if (match && match.admin && !isAdmin(me)) match = null;
  if (match && match.reviewer && !mayReview(me)) match = null;
  renderHeader(match ? match.nav : null);
  const view = match ? match.view : notFound;
  unmount =
    view.mount(main, {
      me,
      live,
      params,
      query: route.query,
      setTitle,
      go: (hash) => {
        location.hash = hash;
      },
    }) || null;
  if (opts.focus) focusTitle();
}

window.addEventListener('hashchange', () => {
  if (location.hash && !location.hash.startsWith('#/')) return; // an in-page anchor
  render({ focus: true });
});

authEvents.addEventListener('unauthorized', () => {
  signinNote = 'The server did not accept your token (it may have expired or been revoked). Sign in again.';
  me = null;
  live.stop();
  render({ focus: true });
});

function signOut() {
  clearToken();
  me = null;
  signinNote = 'You are signed out. The token was removed from this tab.';
  live.stop();
  if (location.hash && location.hash !== '#/sessions') location.hash = '#/sessions';
  else render({ focus: true });
}

document.addEventListener('DOMContentLoaded', () => {
  $('signout').addEventListener('click', signOut);
  $('skip-link').addEventListener('click', (e) => {
    e.preventDefault();
    $('main').focus();
  });
  render();
});

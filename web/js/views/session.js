// One session (#/sessions/<id>): what it is and where it stands, its live
// event stream, the change file by file, verification, screenshots, cost
// and timings; and the buttons the caller's role may use: follow-up,
// cancel, approve, reject.

import { ApiError, get, post, stream } from '../api.js';
import { h, replace } from '../dom.js';
import { parseDiff, renderDiff } from '../diff.js';
import { ago, bytes, firstLine, num, shortSha } from '../format.js';
import {
  ACTIVE,
  FINISHED,
  RESTING,
  announce,
  errorBox,
  loading,
  mayAct,
  mayReview,
  notice,
  stateBadge,
  stateLabel,
  timeEl,
} from '../ui.js';
import { Timeline } from './activity.js';
import { decisionForm } from './session-actions.js';
import { summaryCards } from './session-summary.js';
import { scrollToFailure, verifyPanel } from './session-verify.js';

const TABS = [
  { id: 'activity', label: 'Activity' },
  { id: 'changes', label: 'Changes' },
  { id: 'verify', label: 'Verification' },
  { id: 'screenshots', label: 'Screenshots' },
];

function sessionPath(id, rest = '') {
  return `/sessions/${encodeURIComponent(id)}${rest}`;
}

export function mount(root, ctx) {
  const id = ctx.params[0];
  const { me, live } = ctx;
  const ac = new AbortController();
  const blobUrls = [];
  let session = null;
  let conn = null; // the event stream while it is open
  let lastSeq = 0;
  let timeline = null;
  const verifyRuns = []; // verify events, in order
  let artifacts = null;
  let diffFor = null; // the result commit the diff shown is of
  let shotsFor = null;
  let refreshTimer = null;
  let tab = null;
  let panelFor = null; // which action panel is open
  let tail = false; // keep the activity scrolled to its newest event
  let verifyAtFailure = false; // keep the verification at its failure

  ctx.setTitle(id);
  root.append(loading('Loading the session…'));

  // ---- the page's parts (made once, filled as the session changes) -----

  const el = {
    title: h('h1', { class: 'page-title session-title', tabindex: '-1' }),
    meta: h('div', { class: 'session-meta' }),
    prompt: h('div', { class: 'session-prompt' }),
    actions: h('div', { class: 'session-actions', role: 'group', 'aria-label': 'Actions' }),
    panel: h('div', { class: 'action-panel' }),
    reason: h('div'),
    streamState: h('span', { class: 'stream-state', role: 'status' }),
    activity: h('div', { class: 'activity' }),
    followup: h('div', { class: 'followup' }),
    changes: h('div', { class: 'changes' }),
    verify: h('div', { class: 'verify' }),
    shots: h('div', { class: 'shots' }),
    side: h('aside', { class: 'session-side', 'aria-label': 'Summary' }),
    tabs: new Map(),
    panels: new Map(),
  };
  // the reader took over: the panel stays where they put it
  for (const t of ['wheel', 'pointerdown', 'keydown', 'touchstart'])
    el.verify.addEventListener(t, () => {
      verifyAtFailure = false;
    });

  function tabList() {
    const list = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Session details' });
    TABS.forEach((t) => {
      const b = h(
        'button',
        {
          type: 'button',
          role: 'tab',
          id: `tab-${t.id}`,
          class: 'tab',
          'aria-controls': `panel-${t.id}`,
          'aria-selected': 'false',
          tabindex: '-1',
          dataset: { tab: t.id },
          onclick: () => selectTab(t.id, true),
        },
        h('span', { class: 'tab-label' }, t.label),
        h('span', { class: 'tab-count' }),
      );
      el.tabs.set(t.id, b);
      list.append(b);
    });
    list.addEventListener('keydown', (e) => {
      const ids = TABS.map((t) => t.id);
      let i = ids.indexOf(tab);
      if (e.key === 'ArrowRight') i = (i + 1) % ids.length;
      else if (e.key === 'ArrowLeft') i = (i - 1 + ids.length) % ids.length;
      else if (e.key === 'Home') i = 0;
      else if (e.key === 'End') i = ids.length - 1;
      else return;
      e.preventDefault();
      selectTab(ids[i], true);
      el.tabs.get(ids[i]).focus();
    });
    return list;
  }

  function panel(tid, ...children) {
    const p = h(
      'div',
      {
        role: 'tabpanel',
        id: `panel-${tid}`,
        class: 'tab-panel',
        'aria-labelledby': `tab-${tid}`,
        tabindex: '0',
        hidden: true,
      },
      ...children,
    );
    el.panels.set(tid, p);
    return p;
  }

  function selectTab(tid, user) {
    tab = tid;
    for (const [k, b] of el.tabs) {
      b.setAttribute('aria-selected', k === tid ? 'true' : 'false');
      b.tabIndex = k === tid ? 0 : -1;
    }
    for (const [k, p] of el.panels) p.hidden = k !== tid;
    if (user) {
      const q = tid === 'activity' ? '' : `?tab=${tid}`;
      history.replaceState(null, '', `#/sessions/${encodeURIComponent(id)}${q}`);
    }
    if (tid === 'changes') loadDiff();
    if (tid === 'screenshots') loadShots();
    // opened: at the failure (and kept there as runs arrive, until the
    // reader moves)
    if (tid === 'verify') {
      verifyAtFailure = true;
      drawVerify();
    }
  }

  function layout() {
    replace(
      root,
      h(
        'nav',
        { class: 'crumbs', 'aria-label': 'Breadcrumb' },
        h('a', { href: '#/sessions' }, 'Sessions'),
        h('span', { 'aria-hidden': 'true' }, ' / '),
        h('span', { class: 'mono', 'aria-current': 'page' }, id),
      ),
      h('header', { class: 'session-head' }, h('div', { class: 'session-heading' }, el.title, el.meta), el.actions),
      el.panel,
      el.reason,
      el.prompt,
      h(
        'div',
        { class: 'session-grid' },
        h(
          'div',
          { class: 'session-main' },
          tabList(),
          panel('activity', h('div', { class: 'panel-bar' }, el.streamState), el.activity, el.followup),
          panel('changes', el.changes),
          panel('verify', el.verify),
          panel('screenshots', el.shots),
        ),
        el.side,
      ),
    );
    timeline = new Timeline(session);
    el.activity.append(timeline.el);
    tail = !RESTING.has(session.state);
    const want = ctx.query.get('tab');
    const rested = RESTING.has(session.state) && session.outcome && session.outcome.result;
    selectTab(TABS.some((t) => t.id === want) ? want : rested ? 'changes' : 'activity', false);
  }

  // ---- drawing the session's state ----------------------------------------

  function drawHead() {
    const s = session;
    ctx.setTitle(`${firstLine(s.prompt, 60) || s.id} (${stateLabel(s.state)})`);
    replace(el.title, firstLine(s.prompt, 160) || s.id);
    replace(
      el.meta,
      stateBadge(s.state),
      h(
        'span',
        { class: 'meta-item' },
        h('span', { class: 'sr-only' }, 'Repository '),
        s.repo || s.repo_id,
        s.ref ? h('span', { class: 'mono' }, ` @ ${s.ref}`) : null,
      ),
      h('span', { class: 'meta-item' }, 'by ', h('strong', null, s.user)),
      h('span', { class: 'meta-item' }, 'created ', timeEl(s.created_ms)),
      h('span', { class: 'meta-item mono' }, s.id),
    );
    const full = String(s.prompt || '');
    if (full.trim() !== firstLine(full, 160)) {
      if (!el.prompt.firstChild) {
        replace(
          el.prompt,
          h(
            'details',
            { class: 'fold prompt-fold' },
            h('summary', null, 'Full prompt'),
            h('pre', { class: 'block prose-block' }, full),
          ),
        );
      }
    } else {
      replace(el.prompt);
    }
    if (s.reason && s.reason !== s.state && (FINISHED.has(s.state) || s.state === 'interrupted')) {
      const tone = s.state === 'failed' || s.state === 'expired' ? 'error' : 'info';
      replace(
        el.reason,
        h('div', { class: ['callout', `callout-${tone}`] }, h('strong', null, `${stateLabel(s.state)}: `), s.reason),
      );
    } else {
      replace(el.reason);
    }
    drawActions();
    drawFollowup();
    drawSide();
    drawCounts();
  }

  function drawCounts() {
    const r = session.outcome && session.outcome.result;
    replace(el.tabs.get('changes').querySelector('.tab-count'), r && r.changed ? String((r.files || []).length) : '');
    const shots = artifacts ? artifacts.filter((a) => /^image\//.test(a.media_type)).length : 0;
    replace(el.tabs.get('screenshots').querySelector('.tab-count'), shots ? String(shots) : '');
    const v = session.outcome && session.outcome.verify;
    const vc = el.tabs.get('verify').querySelector('.tab-count');
    vc.className = 'tab-count';
    if (v) {
      vc.classList.add(v.passed ? 'count-good' : 'count-bad');
      replace(vc, v.passed ? '✓' : '✗', h('span', { class: 'sr-only' }, v.passed ? ' passed' : ' failed'));
    } else {
      replace(vc);
    }
  }

  // ---- actions --------------------------------------------------------------

  function drawActions() {
    const s = session;
    const buttons = [];
    if (mayReview(me) && s.state === 'review') {
      buttons.push(
        h(
          'button',
          {
            type: 'button',
            class: 'btn btn-approve',
            dataset: { action: 'approve' },
            onclick: () => openPanel('approve'),
          },
          'Approve',
        ),
      );
      buttons.push(
        h(
          'button',
          {
            type: 'button',
            class: 'btn btn-danger-quiet',
            dataset: { action: 'reject' },
            onclick: () => openPanel('reject'),
          },
          'Reject',
        ),
      );
    }
    if (mayAct(me, s) && !FINISHED.has(s.state)) {
      buttons.push(
        h(
          'button',
          {
            type: 'button',
            class: 'btn',
            dataset: { action: 'followup' },
            onclick: () => {
              selectTab('activity', true);
              const t = el.followup.querySelector('textarea');
              if (t) t.focus();
            },
          },
          'Follow up',
        ),
      );
      buttons.push(
        h(
          'button',
          {
            type: 'button',
            class: 'btn btn-quiet',
            dataset: { action: 'cancel' },
            onclick: () => openPanel('cancel'),
          },
          'Cancel session',
        ),
      );
    }
    // keep the focused button focused across a redraw
    const focused =
      document.activeElement && el.actions.contains(document.activeElement)
        ? document.activeElement.dataset.action
        : null;
    replace(el.actions, buttons);
    if (focused) {
      const again = el.actions.querySelector(`[data-action="${focused}"]`);
      if (again) again.focus();
    }
    if (panelFor && !buttons.some((b) => b.dataset.action === panelFor)) closePanel(false);
  }

  function closePanel(refocus = true) {
    const was = panelFor;
    panelFor = null;
    replace(el.panel);
    el.panel.className = 'action-panel';
    if (refocus && was) {
      const b = el.actions.querySelector(`[data-action="${was}"]`);
      if (b) b.focus();
    }
  }

  function openPanel(kind) {
    if (panelFor === kind) {
      closePanel();
      return;
    }
    panelFor = kind;
    const form = decisionForm(kind, session, {
      onConfirm: (button, err, body) => act(button, err, kind, body),
      onBack: () => closePanel(),
    });
    el.panel.className = `action-panel is-open panel-${kind}`;
    replace(el.panel, form);
    const first = form.querySelector('textarea, button[type=submit]');
    if (first) first.focus();
  }

  async function act(button, err, action, body) {
    replace(err);
    const label = button.textContent;
    button.disabled = true;
    button.textContent = action === 'approve' ? 'Pushing…' : 'Working…';
    try {
      const s = await post(sessionPath(id, `/${action}`), body, { signal: ac.signal });
      closePanel(false);
      setSession(s);
      live.put(s);
      if (action === 'approve') {
        const p = s.outcome && s.outcome.push;
        if (s.state === 'pushed' && p) announce(`Approved. Pushed ${p.ref} (${shortSha(p.commit)}).`, 'good');
        else if (s.state === 'failed') announce(`Approved, but the push failed: ${s.reason}`, 'bad');
        else announce('Approved.', 'good');
      } else if (action === 'reject') {
        announce('Rejected. Nothing was pushed.');
      } else {
        announce('Session cancelled.');
      }
      el.title.focus();
    } catch (e) {
      if (e.name === 'AbortError') return;
      button.disabled = false;
      button.textContent = label;
      replace(err, errorBox(e, `Could not ${action}`));
      // the session may have moved on meanwhile
      refresh();
    }
  }

  function drawFollowup() {
    const s = session;
    if (!mayAct(me, s) || FINISHED.has(s.state)) {
      replace(el.followup);
      return;
    }
    const helpText =
      s.state === 'review'
        ? 'Starts a new turn in the same workspace; the change goes back to review after it.'
        : 'The agent reads it when its current turn is over.';
    if (el.followup.firstChild) {
      // keep what is being typed; only the hint follows the state
      const help = el.followup.querySelector('.help');
      if (help) help.textContent = helpText;
      return;
    }
    const text = h('textarea', {
      id: 'followup-text',
      class: 'textarea',
      rows: '3',
      placeholder: 'Also update the documentation.',
    });
    const err = h('div', { class: 'form-error', role: 'alert' });
    const send = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Send');
    const form = h(
      'form',
      {
        class: 'followup-form',
        'aria-label': 'Follow-up',
        onsubmit: async (e) => {
          e.preventDefault();
          replace(err);
          if (!text.value.trim()) {
            replace(err, 'Write the follow-up first.');
            text.focus();
            return;
          }
          send.disabled = true;
          send.textContent = 'Sending…';
          try {
            const r = await post(sessionPath(id, '/messages'), { text: text.value }, { signal: ac.signal });
            text.value = '';
            tail = true;
            el.activity.scrollTop = el.activity.scrollHeight;
            announce(
              session.state === 'review'
                ? 'Sent: a new turn starts in the same workspace.'
                : 'Sent: the agent reads it after the current turn.',
            );
            if (r && r.session) setSession(r.session);
            follow();
          } catch (ex) {
            if (ex.name === 'AbortError') return;
            replace(err, errorBox(ex, 'The follow-up was not sent'));
          } finally {
            send.disabled = false;
            send.textContent = 'Send';
          }
        },
      },
      h('label', { for: 'followup-text', class: 'label' }, 'Follow-up to the agent'),
      text,
      h('p', { class: 'help' }, helpText),
      err,
      h('div', { class: 'form-actions' }, send),
    );
    replace(el.followup, form);
  }

  // ---- the summary column ---------------------------------------------------

  function drawSide() {
    replace(el.side, summaryCards(session, artifacts, download));
  }

  // ---- changes, verification, screenshots ------------------------------------

  async function loadDiff() {
    const r = session && session.outcome && session.outcome.result;
    if (!r) {
      replace(
        el.changes,
        h(
          'p',
          { class: 'empty-panel' },
          ACTIVE.has(session.state)
            ? 'The change shows here once the agent is done and Warren has verified and committed it.'
            : 'This session has no change.',
        ),
      );
      diffFor = null;
      return;
    }
    if (!r.changed) {
      replace(el.changes, h('p', { class: 'empty-panel' }, 'The agent changed nothing.'));
      diffFor = r.commit;
      return;
    }
    if (diffFor === r.commit) return;
    diffFor = r.commit;
    replace(el.changes, loading('Loading the diff…'));
    let text;
    try {
      text = await get(sessionPath(id, '/diff'), { as: 'text', signal: ac.signal });
    } catch (e) {
      if (e.name === 'AbortError') return;
      diffFor = null;
      replace(el.changes, errorBox(e, 'Could not load the diff'));
      return;
    }
    const files = parseDiff(text);
    const { list, sections } = renderDiff(files);
    const dl = h(
      'button',
      {
        type: 'button',
        class: 'btn btn-small',
        onclick: (e) => {
          const blob = new Blob([text], { type: 'text/x-diff' });
          saveBlob(blob, `${id}.patch`, e.currentTarget);
        },
      },
      'Download patch',
    );
    replace(
      el.changes,
      h(
        'div',
        { class: 'changes-head' },
        h(
          'p',
          null,
          h('strong', null, `${files.length} ${files.length === 1 ? 'file' : 'files'} changed`),
          ' ',
          h('span', { class: 'add' }, `+${num(r.additions)}`),
          ' ',
          h('span', { class: 'del' }, `−${num(r.deletions)}`),
          h('span', { class: 'muted' }, ' on '),
          h('code', null, r.branch),
        ),
        dl,
      ),
      r.diff_truncated
        ? notice('The diff was too large and is cut short; the branch holds the whole change.', 'warn')
        : null,
      files.length > 1 ? h('nav', { class: 'diff-index', 'aria-label': 'Changed files' }, list) : null,
      sections,
    );
  }

  function drawVerify() {
    const v = session && session.outcome && session.outcome.verify;
    if (!v && !verifyRuns.length) {
      replace(
        el.verify,
        h(
          'p',
          { class: 'empty-panel' },
          ACTIVE.has(session.state)
            ? "Warren runs the project's verify commands when the agent is done."
            : 'No verification ran for this session.',
        ),
      );
      return;
    }
    replace(el.verify, verifyPanel(v, verifyRuns));
    if (verifyAtFailure) requestAnimationFrame(() => verifyAtFailure && scrollToFailure(el.verify));
  }

  async function loadArtifacts() {
    try {
      const r = await get(sessionPath(id, '/artifacts'), { signal: ac.signal });
      artifacts = r.artifacts || [];
    } catch (e) {
      if (e.name === 'AbortError') return;
      artifacts = artifacts || [];
    }
    drawSide();
    drawCounts();
    if (tab === 'screenshots') loadShots();
  }

  async function fetchBlob(a) {
    return get(sessionPath(id, `/artifacts/${encodeURIComponent(a.name)}`), { as: 'blob', signal: ac.signal });
  }

  function saveBlob(blob, name, button) {
    const u = URL.createObjectURL(blob);
    blobUrls.push(u);
    const link = h('a', { href: u, download: name, class: 'sr-only' });
    document.body.append(link);
    link.click();
    link.remove();
    if (button) button.focus();
  }

  async function download(a, button) {
    try {
      saveBlob(await fetchBlob(a), a.name, button);
    } catch (e) {
      if (e.name !== 'AbortError') announce(`Could not download ${a.name}: ${e.message}`, 'bad');
    }
  }

  async function loadShots() {
    if (!artifacts) {
      replace(el.shots, loading('Loading screenshots…'));
      return; // loadArtifacts calls back
    }
    const images = artifacts.filter((a) => /^image\//.test(a.media_type));
    const key = images.map((a) => `${a.name}:${a.created_ms}`).join(',');
    if (shotsFor === key) return;
    shotsFor = key;
    if (!images.length) {
      replace(
        el.shots,
        h(
          'p',
          { class: 'empty-panel' },
          'No screenshots. The agent takes them with its screenshot tool when the work has a page to show.',
        ),
      );
      return;
    }
    const grid = h('div', { class: 'shot-grid' });
    replace(el.shots, grid);
    for (const a of images) {
      const fig = h(
        'figure',
        { class: 'shot' },
        h('div', { class: 'shot-frame' }, loading('Loading…')),
        h(
          'figcaption',
          null,
          h('span', { class: 'mono' }, a.name),
          h('span', { class: 'muted' }, ` · ${bytes(a.size)} · ${ago(a.created_ms)}`),
        ),
      );
      grid.append(fig);
      fetchBlob(a)
        .then((blob) => {
          const u = URL.createObjectURL(blob);
          blobUrls.push(u);
          replace(
            fig.querySelector('.shot-frame'),
            h(
              'a',
              { href: u, target: '_blank', rel: 'noopener', title: 'Open at full size' },
              h('img', { src: u, alt: `Screenshot ${a.name} taken by the agent`, loading: 'lazy' }),
            ),
          );
        })
        .catch((e) => {
          if (e.name !== 'AbortError') replace(fig.querySelector('.shot-frame'), errorBox(e, 'Could not load it'));
        });
    }
  }

  // ---- keeping current ---------------------------------------------------------

  function setSession(s) {
    const before = session;
    if (before && s.prompt_truncated) s = { ...s, prompt: before.prompt, prompt_truncated: false };
    if (before && s.updated_ms < before.updated_ms) return;
    session = s;
    if (timeline) timeline.session = s;
    drawHead();
    if (before && before.state !== s.state) {
      announce(`Session is now ${stateLabel(s.state).toLowerCase()}.`, 'info', { toast: false });
      if (RESTING.has(s.state)) loadArtifacts();
    }
    if (tab === 'changes') loadDiff();
    if (tab === 'verify') drawVerify();
    // a follow-up took a resting session back to work: follow it again
    if (!RESTING.has(s.state)) {
      tail = true;
      follow();
    }
    drawStreamState();
  }

  function refresh() {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(async () => {
      try {
        setSession(await get(sessionPath(id), { signal: ac.signal }));
      } catch {
        /* the next event or the live list brings it */
      }
    }, 150);
  }

  function drawStreamState() {
    const open = Boolean(conn);
    el.activity.dataset.stream = open ? 'open' : 'closed';
    if (open && !RESTING.has(session.state)) {
      replace(el.streamState, h('span', { class: 'live-dot', 'aria-hidden': 'true' }), 'Streaming live');
      el.streamState.className = 'stream-state is-live';
    } else {
      replace(
        el.streamState,
        RESTING.has(session.state) ? `${stateLabel(session.state)}: the session is at rest` : 'Waiting for events…',
      );
      el.streamState.className = 'stream-state';
    }
  }

  function onEvent(ev) {
    let e;
    try {
      e = JSON.parse(ev.data);
    } catch {
      return;
    }
    if (!e || typeof e.seq !== 'number' || e.seq <= lastSeq) return;
    lastSeq = e.seq;
    const scroller = el.activity;
    const atEnd = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 60;
    timeline.add(e);
    // follow the tail of a live session, unless the reader scrolled up
    if (tail && atEnd) scroller.scrollTop = scroller.scrollHeight;
    if (e.kind === 'verify') {
      verifyRuns.push(e.data || {});
      if (tab === 'verify') drawVerify();
    }
    if (e.kind === 'state' || e.kind === 'result' || e.kind === 'turn') refresh();
    if (e.kind === 'result') loadArtifacts();
  }

  function follow() {
    if (conn || ac.signal.aborted) return;
    conn = stream(sessionPath(id, '/events'), {
      lastEventId: lastSeq || null,
      onEvent,
      onOpen: drawStreamState,
      onEnd: () => {
        conn = null;
        drawStreamState();
        refresh();
        loadArtifacts();
      },
      onStatus: (st) => {
        if (st === 'retrying') replace(el.streamState, 'Connection lost; reconnecting…');
      },
      onError: (err) => {
        conn = null;
        replace(el.streamState, errorBox(err, 'The event stream stopped'));
      },
    });
    drawStreamState();
  }

  const offLive = live.on('session', (e) => {
    if (e.detail.id === id && session) setSession(e.detail);
  });

  // ---- start -------------------------------------------------------------

  (async () => {
    try {
      session = await get(sessionPath(id), { signal: ac.signal });
    } catch (e) {
      if (e.name === 'AbortError') return;
      ctx.setTitle('Session not found');
      if (e instanceof ApiError && e.status === 404) {
        replace(
          root,
          h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/sessions' }, 'Sessions')),
          h('h1', { class: 'page-title', tabindex: '-1' }, 'Session not found'),
          h(
            'p',
            null,
            'There is no session ',
            h('code', null, id),
            ' that you can see: it does not exist, or it belongs to someone else.',
          ),
          h('p', null, h('a', { href: '#/sessions' }, 'Back to the sessions')),
        );
      } else {
        replace(
          root,
          h('h1', { class: 'page-title', tabindex: '-1' }, 'Session'),
          errorBox(e, 'Could not load the session'),
        );
      }
      root.querySelector('.page-title').focus();
      return;
    }
    layout();
    drawHead();
    follow();
    loadArtifacts();
    if (document.activeElement === document.body || document.activeElement === root)
      el.title.focus({ preventScroll: true });
  })();

  return () => {
    ac.abort();
    offLive();
    clearTimeout(refreshTimer);
    if (conn) conn.close();
    conn = null;
    for (const u of blobUrls) URL.revokeObjectURL(u);
  };
}

// The sessions list: every session the caller may see, live (live.js),
// filtered by state, user and repository in the page (the filters are in
// the address: #/sessions?state=review&user=alice).

import { get } from '../api.js';
import { h, replace } from '../dom.js';
import { cost, duration, firstLine, num } from '../format.js';
import {
  ACTIVE,
  FINISHED,
  STATES,
  errorBox,
  loading,
  pageHeader,
  sessionTook,
  stateBadge,
  stateLabel,
  timeEl,
} from '../ui.js';

const PAGE = 100;
const LIVE_WINDOW = 200; // GET /events follows the newest 200

const GROUPS = {
  active: { label: 'Active', test: (s) => ACTIVE.has(s.state) },
  review: { label: 'In review', test: (s) => s.state === 'review' },
  finished: { label: 'Finished', test: (s) => FINISHED.has(s.state) },
};

function matchState(filter, s) {
  if (!filter) return true;
  if (GROUPS[filter]) return GROUPS[filter].test(s);
  return s.state === filter;
}

function changeCell(s) {
  const r = s.outcome && s.outcome.result;
  if (!r) return h('span', { class: 'muted' }, '—');
  if (!r.changed) return h('span', { class: 'muted' }, 'no change');
  const files = r.files ? r.files.length : 0;
  return h(
    'span',
    { class: 'delta' },
    h('span', { class: 'add' }, `+${num(r.additions)}`),
    ' ',
    h('span', { class: 'del' }, `−${num(r.deletions)}`),
    h('span', { class: 'muted' }, ` · ${files} ${files === 1 ? 'file' : 'files'}`),
  );
}

// created to review; the review's own time in the title
function tookCell(s) {
  const t = sessionTook(s);
  if (!t) return h('span', { class: 'muted' }, '—');
  return t.reviewMs === null
    ? duration(t.took)
    : h('span', { title: `to review; then ${duration(t.reviewMs)} in review` }, duration(t.took));
}

function row(s) {
  const usage = s.outcome && s.outcome.usage;
  const link = h(
    'a',
    { href: `#/sessions/${encodeURIComponent(s.id)}`, class: 'row-link' },
    firstLine(s.prompt, 120) || s.id,
  );
  const tr = h(
    'tr',
    { dataset: { id: s.id, state: s.state } },
    h('td', { class: 'col-state', dataset: { label: 'State' } }, stateBadge(s.state)),
    h(
      'td',
      { class: 'col-session', dataset: { label: 'Session' } },
      link,
      h(
        'div',
        { class: 'sub' },
        h('span', { class: 'mono' }, s.id),
        h('span', { 'aria-hidden': 'true' }, ' · '),
        s.repo || s.repo_id,
        s.ref ? h('span', { class: 'mono' }, ` @ ${s.ref}`) : null,
      ),
    ),
    h('td', { class: 'col-user', dataset: { label: 'User' } }, s.user),
    h('td', { class: 'col-change', dataset: { label: 'Change' } }, changeCell(s)),
    h(
      'td',
      { class: 'col-cost num', dataset: { label: 'Cost' } },
      usage ? cost(usage.cost) : h('span', { class: 'muted' }, '—'),
    ),
    h('td', { class: 'col-created', dataset: { label: 'Created' } }, timeEl(s.created_ms)),
    h('td', { class: 'col-took num', dataset: { label: 'Took' } }, tookCell(s)),
  );
  // a click anywhere on the row opens it (the link stays the keyboard's way)
  tr.addEventListener('click', (e) => {
    if (e.target.closest('a, button') || window.getSelection().toString()) return;
    link.click();
  });
  return tr;
}

export function mount(root, ctx) {
  ctx.setTitle('Sessions');
  const { live, me } = ctx;
  const ac = new AbortController();
  const filter = {
    state: ctx.query.get('state') || '',
    user: ctx.query.get('user') || '',
    repo: ctx.query.get('repo') || '',
  };
  const submitter = me.role === 'submitter';
  if (submitter) filter.user = '';
  let olderNext = undefined; // undefined: not asked; null: no more
  const rows = new Map(); // id -> {tr, updated}

  const stateSel = h(
    'select',
    { id: 'f-state', class: 'select' },
    h('option', { value: '' }, 'All states'),
    h(
      'optgroup',
      { label: 'Groups' },
      Object.entries(GROUPS).map(([k, g]) => h('option', { value: k }, g.label)),
    ),
    h(
      'optgroup',
      { label: 'States' },
      STATES.map((st) => h('option', { value: `=${st}` }, stateLabel(st))),
    ),
  );
  stateSel.value = GROUPS[filter.state] || !filter.state ? filter.state : `=${filter.state}`;
  const userSel = h('select', { id: 'f-user', class: 'select' });
  const repoSel = h('select', { id: 'f-repo', class: 'select' });

  const summary = h('div', { class: 'summary', role: 'group', 'aria-label': 'Quick filters' });
  const tbody = h('tbody');
  const table = h(
    'table',
    { class: 'table sessions-table' },
    h('caption', { class: 'sr-only' }, 'Sessions, newest first'),
    h(
      'thead',
      null,
      h(
        'tr',
        null,
        h('th', { scope: 'col' }, 'State'),
        h('th', { scope: 'col' }, 'Session'),
        h('th', { scope: 'col' }, 'User'),
        h('th', { scope: 'col' }, 'Change'),
        h('th', { scope: 'col', class: 'num' }, 'Cost'),
        h('th', { scope: 'col' }, 'Created'),
        h('th', { scope: 'col', class: 'num' }, 'Took'),
      ),
    ),
    tbody,
  );
  const status = h('div', { class: 'list-status' });
  const more = h('div', { class: 'list-more' });
  const countNote = h('p', { class: 'sr-only', 'aria-live': 'polite' });

  root.append(
    pageHeader('Sessions', h('a', { href: '#/new', class: 'btn btn-primary' }, 'New session')),
    h(
      'form',
      { class: 'filters', role: 'search', 'aria-label': 'Filter sessions', onsubmit: (e) => e.preventDefault() },
      h('div', { class: 'field-inline' }, h('label', { for: 'f-state', class: 'label' }, 'State'), stateSel),
      submitter
        ? null
        : h('div', { class: 'field-inline' }, h('label', { for: 'f-user', class: 'label' }, 'User'), userSel),
      h('div', { class: 'field-inline' }, h('label', { for: 'f-repo', class: 'label' }, 'Repository'), repoSel),
      summary,
    ),
    h('div', { class: 'table-wrap' }, table),
    status,
    more,
    countNote,
  );

  function writeAddress() {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(filter)) if (v) q.set(k, v);
    const s = q.toString();
    history.replaceState(null, '', `#/sessions${s ? '?' + s : ''}`);
  }

  function options(sel, values, current, allLabel) {
    const want = [...new Set([...values, current].filter(Boolean))].sort();
    const have = [...sel.options].map((o) => o.value);
    const next = ['', ...want];
    if (have.join('\n') !== next.join('\n')) {
      replace(
        sel,
        h('option', { value: '' }, allLabel),
        want.map((v) => h('option', { value: v }, v)),
      );
    }
    sel.value = current;
  }

  stateSel.addEventListener('change', () => {
    filter.state = stateSel.value.replace(/^=/, '');
    writeAddress();
    draw();
  });
  userSel.addEventListener('change', () => {
    filter.user = userSel.value;
    writeAddress();
    draw();
  });
  repoSel.addEventListener('change', () => {
    filter.repo = repoSel.value;
    writeAddress();
    draw();
  });

  function quick(label, key, n) {
    const pressed = filter.state === key;
    return h(
      'button',
      {
        type: 'button',
        class: ['chip', `chip-${key}`],
        'aria-pressed': pressed ? 'true' : 'false',
        onclick: () => {
          filter.state = pressed ? '' : key;
          stateSel.value = filter.state;
          writeAddress();
          draw();
        },
      },
      h('span', { class: 'chip-n' }, num(n)),
      ' ',
      label,
    );
  }

  function draw() {
    const all = live.list();
    options(
      userSel,
      all.map((s) => s.user),
      filter.user,
      'All users',
    );
    options(
      repoSel,
      all.map((s) => s.repo || s.repo_id),
      filter.repo,
      'All repositories',
    );

    const inScope = all.filter(
      (s) => (!filter.user || s.user === filter.user) && (!filter.repo || (s.repo || s.repo_id) === filter.repo),
    );
    replace(
      summary,
      Object.entries(GROUPS).map(([k, g]) => quick(g.label.toLowerCase(), k, inScope.filter(g.test).length)),
    );

    const shown = inScope.filter((s) => matchState(filter.state, s));
    const keep = new Set();
    shown.forEach((s, i) => {
      keep.add(s.id);
      let r = rows.get(s.id);
      if (!r || r.updated !== s.updated_ms || r.state !== s.state) {
        const tr = row(s);
        const hadFocus = r && r.tr.contains(document.activeElement);
        if (r) r.tr.replaceWith(tr);
        r = { tr, updated: s.updated_ms, state: s.state };
        rows.set(s.id, r);
        if (hadFocus) tr.querySelector('a').focus();
      }
      if (tbody.children[i] !== r.tr) tbody.insertBefore(r.tr, tbody.children[i] || null);
    });
    for (const [id, r] of rows) {
      if (!keep.has(id)) {
        r.tr.remove();
        rows.delete(id);
      }
    }

    table.hidden = shown.length === 0;
    if (!live.ready && all.length === 0) {
      replace(status, loading('Loading sessions…'));
    } else if (all.length === 0) {
      replace(
        status,
        h(
          'div',
          { class: 'empty' },
          h('h2', null, submitter ? 'You have no sessions yet' : 'No sessions yet'),
          h('p', null, 'A session runs an agent on a repository in its own sandbox, then waits for review.'),
          h('a', { href: '#/new', class: 'btn btn-primary' }, 'Start a session'),
        ),
      );
    } else if (shown.length === 0) {
      replace(
        status,
        h(
          'div',
          { class: 'empty' },
          h('p', null, 'No sessions match these filters.'),
          h(
            'button',
            {
              type: 'button',
              class: 'btn',
              onclick: () => {
                filter.state = '';
                filter.user = '';
                filter.repo = '';
                stateSel.value = '';
                writeAddress();
                draw();
              },
            },
            'Clear filters',
          ),
        ),
      );
    } else {
      replace(status);
    }
    countNote.textContent = live.ready ? `${shown.length} sessions shown` : '';

    // older pages: the live stream covers only the newest sessions
    const canMore = live.ready && olderNext !== null && (olderNext !== undefined || all.length >= LIVE_WINDOW);
    replace(
      more,
      canMore ? h('button', { type: 'button', class: 'btn', onclick: loadOlder }, 'Load older sessions') : null,
    );
  }

  async function loadOlder(e) {
    const button = e.currentTarget;
    button.disabled = true;
    button.textContent = 'Loading…';
    const all = live.list();
    const before = olderNext || (all.length ? all[all.length - 1].id : undefined);
    try {
      const page = await get('/sessions', { query: { limit: PAGE, before }, signal: ac.signal });
      for (const s of page.sessions) live.put(s);
      olderNext = page.next;
    } catch (err) {
      if (err.name === 'AbortError') return;
      replace(more, errorBox(err, 'Could not load older sessions'));
      return;
    }
    draw();
  }

  let pending = false;
  const soon = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      draw();
    });
  };
  const offs = [live.on('session', soon), live.on('ready', soon)];
  draw();

  return () => {
    ac.abort();
    offs.forEach((off) => off());
  };
}

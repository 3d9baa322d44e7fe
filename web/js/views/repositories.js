// Repositories, their builds and their snapshots: what each session starts
// from (the commit, how old it is, what its build cost, phase by phase), and
// the recent builds (state, when, how long, the error and the failing hook,
// a link to the log for those who may read it). An admin adds repositories
// and asks for a refresh here.

import { get, post } from '../api.js';
import { chart, legend, stackedBar } from '../charts.js';
import { h, replace } from '../dom.js';
import { duration, num, shortSha } from '../format.js';
import { terminal, terminalPlain } from '../terminal.js';
import { announce, errorBox, facts, isAdmin, loading, mayReview, pageHeader, timeEl } from '../ui.js';

const SHOWN = 5;
const PHASE_TONES = {
  fetch: 'b-fetch',
  clone: 'b-clone',
  install: 'b-install',
  build: 'b-build',
  services: 'b-services',
  publish: 'b-publish',
};

// The build's phases, without what sums them up ('total', the build's own;
// 'refresh', the whole `warren snapshot refresh` around it): those are the
// total shown beside the bar, never a part of it.
const SUMS = new Set(['total', 'refresh']);

export function phases(snap) {
  // timings: [{phase, ms}] (an object in older records: {phase: ms})
  let t = snap.timings || [];
  if (!Array.isArray(t)) t = Object.entries(t).map(([phase, ms]) => ({ phase, ms }));
  const parts = t
    .filter((p) => p && !SUMS.has(p.phase) && typeof p.ms === 'number')
    .map((p) => ({ label: p.phase, value: p.ms, tone: PHASE_TONES[p.phase] || 'b-other' }));
  const sum = (name) => {
    const x = t.find((p) => p && p.phase === name && typeof p.ms === 'number');
    return x ? x.ms : null;
  };
  const total = sum('total') ?? sum('refresh') ?? parts.reduce((n, p) => n + p.value, 0);
  return { parts, total };
}

// The interval in effect (the server says it, and whence: the repository's
// own, its spec's, or the default).
function every(repo) {
  const ms = repo.refresh_every_ms ?? repo.refresh_ms;
  if (!ms) return 'only when asked';
  const from = { spec: ' (its spec’s)', default: ' (the default)' }[repo.refresh_source] || '';
  return `every ${duration(ms)}${from}`;
}

const BUILD_TONES = { ready: 'pill-good', failed: 'pill-bad', building: 'pill-accent', queued: 'pill-muted' };

// A build's error: its first line as text, and the tail of output that may
// follow it (a hook's last lines, which may hold colour codes) as output
function errorHead(error) {
  return terminalPlain(String(error || '').split('\n')[0]);
}

export function buildError(error) {
  const lines = String(error || '').split('\n');
  const tail = lines.slice(1).map((l) => l.replace(/^ {4}/, ''));
  return [
    h('span', { class: 'break' }, errorHead(error) || 'no message'),
    tail.some((l) => l.trim()) ? terminal(tail.join('\n'), { class: 'block terminal' }) : null,
  ];
}

// The button under a list cut at SHOWN: draw(all) draws it again.
function showAll(n, what, all, draw) {
  if (n <= SHOWN) return null;
  return h(
    'button',
    { type: 'button', class: 'btn btn-small btn-quiet', onclick: () => draw(!all) },
    all ? 'Show fewer' : `Show all ${num(n)} ${what}`,
  );
}

export function buildTook(b) {
  if (!b.started_ms) return null;
  return (b.finished_ms || Date.now()) - b.started_ms;
}

export function buildLogHref(repo, b) {
  return `#/repositories/${encodeURIComponent(repo.id)}/builds/${encodeURIComponent(b.id)}`;
}

export function mount(root, ctx) {
  ctx.setTitle('Repositories');
  const ac = new AbortController();
  const admin = isAdmin(ctx.me);
  const body = h('div', { class: 'repo-list' }, loading('Loading repositories…'));
  const addBox = h('div');
  const timers = new Set();
  let addOpen = false;

  const addButton = admin
    ? h(
        'button',
        {
          type: 'button',
          class: 'btn btn-primary',
          'aria-expanded': 'false',
          'aria-controls': 'add-repo',
          onclick: () => toggleAdd(),
        },
        'Add repository',
      )
    : null;

  root.append(
    pageHeader('Repositories', addButton),
    h(
      'p',
      { class: 'lede' },
      'Each session starts from the newest snapshot of its repository: cloned, dependencies installed, built once, restored copy-on-write. ' +
        'Snapshots are rebuilt on a schedule; a session started on a newer commit syncs to it.',
    ),
    addBox,
    body,
  );

  function toggleAdd() {
    addOpen = !addOpen;
    addButton.setAttribute('aria-expanded', addOpen ? 'true' : 'false');
    if (!addOpen) {
      replace(addBox);
      addButton.focus();
      return;
    }
    // field(id, label, attrs, help, {wide, optional})
    const field = (id, label, attrs, help, { wide = false, optional = false } = {}) =>
      h(
        'div',
        { class: ['field', wide && 'field-wide'] },
        h(
          'label',
          { for: id, class: 'label' },
          label,
          optional ? h('span', { class: 'optional' }, ' (optional)') : null,
        ),
        h('input', { id, name: id, class: 'input', autocomplete: 'off', spellcheck: 'false', ...attrs }),
        help ? h('p', { class: 'help' }, help) : null,
      );
    const err = h('div', { class: 'form-error', role: 'alert' });
    const go = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Add');
    const form = h(
      'form',
      {
        id: 'add-repo',
        class: 'card form form-grid add-repo',
        'aria-label': 'Add a repository',
        onsubmit: async (e) => {
          e.preventDefault();
          replace(err);
          const v = (n) => form.querySelector(`#${n}`).value.trim();
          const payload = { url: v('repo-url') };
          if (!payload.url) {
            replace(err, 'The URL (or absolute path) is required.');
            form.querySelector('#repo-url').focus();
            return;
          }
          if (v('repo-name')) payload.name = v('repo-name');
          if (v('repo-ref')) payload.ref = v('repo-ref');
          if (v('repo-refresh')) payload.refresh = v('repo-refresh');
          go.disabled = true;
          try {
            const r = await post('/repositories', payload, { signal: ac.signal });
            announce(`Added ${r.name}. Its first snapshot is building.`, 'good');
            toggleAdd();
            load();
          } catch (ex) {
            if (ex.name !== 'AbortError') replace(err, errorBox(ex, 'The repository was not added'));
          } finally {
            go.disabled = false;
          }
        },
      },
      h('h2', { class: 'card-title' }, 'Add a repository'),
      field(
        'repo-url',
        'Git URL or absolute path',
        { required: true, class: 'input mono', placeholder: 'https://github.com/acme/app.git' },
        null,
        { wide: true },
      ),
      field('repo-name', 'Name', { placeholder: 'app' }, 'Default: the URL’s last part.', { optional: true }),
      field('repo-ref', 'Default ref', { class: 'input mono', placeholder: 'main' }, null, { optional: true }),
      field('repo-refresh', 'Refresh every', { placeholder: '6h' }, 'How often the snapshot is rebuilt: 30m, 6h, 1d.', {
        optional: true,
      }),
      err,
      h(
        'div',
        { class: 'form-actions' },
        go,
        h('button', { type: 'button', class: 'btn btn-quiet', onclick: () => toggleAdd() }, 'Cancel'),
      ),
    );
    replace(addBox, form);
    form.querySelector('#repo-url').focus();
  }

  function snapshotTable(snaps, all) {
    const rows = (all ? snaps : snaps.slice(0, SHOWN)).map((sn, i) => {
      const { parts, total } = phases(sn);
      const bar = stackedBar(parts, { title: `Build of ${shortSha(sn.commit)}: ${duration(total)}`, format: duration });
      const box = h('div', { class: 'chart-box chart-box-thin' });
      requestAnimationFrame(() => chart(box, bar.draw));
      return h(
        'tr',
        null,
        h(
          'td',
          { dataset: { label: 'Commit' } },
          h('code', null, shortSha(sn.commit)),
          i === 0 ? h('span', { class: 'pill pill-accent' }, 'current') : null,
        ),
        h('td', { dataset: { label: 'Built' } }, timeEl(sn.created_ms)),
        h(
          'td',
          { class: 'col-breakdown', dataset: { label: 'Build' } },
          box,
          h('span', { class: 'sr-only' }, parts.map((p) => `${p.label} ${duration(p.value)}`).join(', ')),
        ),
        h('td', { class: 'num', dataset: { label: 'Total' } }, duration(total)),
      );
    });
    return h(
      'table',
      { class: 'table snap-table' },
      h('caption', { class: 'sr-only' }, 'Snapshots, newest first'),
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          h('th', { scope: 'col' }, 'Commit'),
          h('th', { scope: 'col' }, 'Built'),
          h('th', { scope: 'col' }, 'Build breakdown'),
          h('th', { scope: 'col', class: 'num' }, 'Total'),
        ),
      ),
      h('tbody', null, rows),
    );
  }

  function buildTable(repo, builds, all) {
    const reader = mayReview(ctx.me);
    const rows = (all ? builds : builds.slice(0, SHOWN)).map((b) =>
      h(
        'tr',
        { dataset: { build: b.id, state: b.state } },
        h('td', { dataset: { label: 'Build' } }, h('span', { class: ['pill', BUILD_TONES[b.state] || 'pill-muted'] }, b.state)),
        h('td', { dataset: { label: 'Started' } }, b.started_ms ? timeEl(b.started_ms) : timeEl(b.queued_ms)),
        h(
          'td',
          { class: 'num', dataset: { label: 'Took' } },
          buildTook(b) === null ? '—' : duration(buildTook(b)),
          b.state === 'building' ? h('span', { class: 'muted' }, ' so far') : null,
        ),
        h(
          'td',
          { class: 'build-error', dataset: { label: 'Error' } },
          b.error ? h('span', { class: 'break' }, errorHead(b.error)) : h('span', { class: 'muted' }, '—'),
        ),
        h('td', { dataset: { label: 'Hook' } }, b.hook ? h('code', null, b.hook) : h('span', { class: 'muted' }, '—')),
        reader
          ? h(
              'td',
              { dataset: { label: 'Log' } },
              h('a', { href: buildLogHref(repo, b), class: 'build-log-link' }, 'Log'),
            )
          : null,
      ),
    );
    return h(
      'table',
      { class: 'table build-table' },
      h('caption', { class: 'sr-only' }, `Builds of ${repo.name}, newest first`),
      h(
        'thead',
        null,
        h(
          'tr',
          null,
          h('th', { scope: 'col' }, 'Build'),
          h('th', { scope: 'col' }, 'Started'),
          h('th', { scope: 'col', class: 'num' }, 'Took'),
          h('th', { scope: 'col' }, 'Error'),
          h('th', { scope: 'col' }, 'Failing hook'),
          reader ? h('th', { scope: 'col' }, 'Log') : null,
        ),
      ),
      h('tbody', null, rows),
    );
  }

  function buildsBox(repo, builds) {
    const box = h('div', { class: 'builds' });
    const draw = (all) => {
      if (builds === null) {
        replace(box, h('p', { class: 'muted' }, 'The builds could not be loaded.'));
        return;
      }
      if (!builds.length) {
        replace(box, h('p', { class: 'muted' }, 'No build yet.'));
        return;
      }
      replace(
        box,
        h('div', { class: 'table-wrap' }, buildTable(repo, builds, all)),
        showAll(builds.length, 'builds', all, draw),
      );
    };
    draw(false);
    return box;
  }

  function repoCard(repo, snaps, builds) {
    const snapBox = h('div');
    const drawSnaps = (all) => {
      const b = repo.build;
      if (!snaps.length) {
        replace(
          snapBox,
          b && b.state === 'failed'
            ? h('p', { class: 'muted' }, 'No snapshot: its build failed (above). Sessions of this repository fail until a build succeeds.')
            : h(
                'p',
                { class: 'muted' },
                b && b.state === 'building'
                  ? 'No snapshot yet: the first build is running. Sessions wait for it.'
                  : 'No snapshot yet: the first build is queued. Sessions wait for it.',
              ),
        );
        return;
      }
      const allPhases = new Map();
      for (const sn of snaps.slice(0, all ? snaps.length : SHOWN))
        for (const p of phases(sn).parts) allPhases.set(p.label, p);
      replace(
        snapBox,
        h('div', { class: 'table-wrap' }, snapshotTable(snaps, all)),
        legend([...allPhases.values()].map((p) => ({ ...p, value: '' }))),
        showAll(snaps.length, 'snapshots', all, drawSnaps),
      );
    };
    drawSnaps(false);

    const actions = [
      h('a', { href: `#/new?repo=${encodeURIComponent(repo.name)}`, class: 'btn btn-small' }, 'New session'),
    ];
    if (admin) {
      const b = h('button', { type: 'button', class: 'btn btn-small', dataset: { action: 'refresh' } }, 'Refresh now');
      b.addEventListener('click', () => refreshNow(repo, snaps, b));
      actions.push(b);
    }
    return h(
      'section',
      { class: 'card repo-card', 'aria-labelledby': `repo-${repo.id}` },
      h(
        'div',
        { class: 'card-head' },
        h('h2', { class: 'card-title', id: `repo-${repo.id}` }, repo.name),
        h('div', { class: 'card-actions' }, actions),
      ),
      // the last build: a failure is shown here, with its cause
      repo.build && repo.build.state === 'failed'
        ? h(
            'div',
            { class: 'callout callout-error', dataset: { build: 'failed' } },
            h('strong', null, 'Build failed: '),
            buildError(repo.build.error),
            repo.build.finished_ms ? h('span', { class: 'muted' }, ' (', timeEl(repo.build.finished_ms), ')') : null,
            repo.build.hook ? h('p', { class: 'small' }, 'Failing hook: ', h('code', null, repo.build.hook)) : null,
            mayReview(ctx.me) && repo.build.id
              ? h('p', { class: 'small' }, h('a', { href: buildLogHref(repo, repo.build), class: 'build-log-link' }, 'Read the build’s log'))
              : null,
          )
        : null,
      facts([
        ['URL', h('span', { class: 'mono break' }, repo.url)],
        ['Build', repo.build ? repo.build.state : 'none yet'],
        ['Default ref', repo.default_ref ? h('code', null, repo.default_ref) : 'the remote’s default branch'],
        ['Refresh', every(repo)],
        ['Last refresh', repo.last_refresh_ms ? timeEl(repo.last_refresh_ms) : 'never'],
        ['Id', h('code', null, repo.id)],
      ]),
      h('h3', { class: 'sub-title' }, 'Builds'),
      buildsBox(repo, builds),
      h('h3', { class: 'sub-title' }, 'Snapshots'),
      snapBox,
    );
  }

  async function refreshNow(repo, snaps, button) {
    button.disabled = true;
    button.textContent = 'Queuing…';
    try {
      await post(`/repositories/${encodeURIComponent(repo.id)}/refresh`, undefined, { signal: ac.signal });
    } catch (e) {
      if (e.name === 'AbortError') return;
      button.disabled = false;
      button.textContent = 'Refresh now';
      announce(`Refresh of ${repo.name} failed: ${e.message}`, 'bad');
      return;
    }
    announce(`Refresh of ${repo.name} queued: a new snapshot is building.`);
    button.textContent = 'Refreshing…';
    const newest = snaps.length ? snaps[0].created_ms : 0;
    const last = repo.last_refresh_ms || 0;
    const started = Date.now();
    const poll = async () => {
      if (ac.signal.aborted) return;
      try {
        const [r, s] = await Promise.all([
          get('/repositories', { signal: ac.signal }),
          get('/snapshots', { query: { repo: repo.id }, signal: ac.signal }),
        ]);
        const now = r.repositories.find((x) => x.id === repo.id);
        const top = s.snapshots[0];
        if ((top && top.created_ms > newest) || (now && (now.last_refresh_ms || 0) > last)) {
          announce(
            top && top.created_ms > newest
              ? `New snapshot of ${repo.name}: ${shortSha(top.commit)}.`
              : `${repo.name} is up to date.`,
            'good',
          );
          load();
          return;
        }
      } catch (e) {
        if (e.name === 'AbortError') return;
      }
      if (Date.now() - started < 180000) {
        const t = setTimeout(poll, 2000);
        timers.add(t);
      } else {
        button.disabled = false;
        button.textContent = 'Refresh now';
      }
    };
    timers.add(setTimeout(poll, 1000));
  }

  async function load() {
    let repos;
    let snaps;
    try {
      [repos, snaps] = await Promise.all([
        get('/repositories', { signal: ac.signal }).then((r) => r.repositories),
        get('/snapshots', { signal: ac.signal }).then((r) => r.snapshots),
      ]);
    } catch (e) {
      if (e.name === 'AbortError') return;
      replace(body, errorBox(e, 'Could not load the repositories'));
      return;
    }
    if (!repos.length) {
      replace(
        body,
        h(
          'div',
          { class: 'empty' },
          h('h2', null, 'No repositories yet'),
          h(
            'p',
            null,
            admin
              ? 'Add one above: a git URL, or an absolute path on the server.'
              : 'An administrator registers repositories.',
          ),
        ),
      );
      return;
    }
    // each repository's recent builds (null: could not be read)
    const builds = await Promise.all(
      repos.map((r) =>
        get(`/repositories/${encodeURIComponent(r.id)}/builds`, { signal: ac.signal })
          .then((x) => x.builds)
          .catch(() => null),
      ),
    );
    if (ac.signal.aborted) return;
    const byRepo = new Map(repos.map((r) => [r.id, []]));
    for (const sn of snaps) if (byRepo.has(sn.repo_id)) byRepo.get(sn.repo_id).push(sn);
    for (const list of byRepo.values()) list.sort((a, b) => b.created_ms - a.created_ms);
    replace(
      body,
      repos.map((r, i) => repoCard(r, byRepo.get(r.id), builds[i])),
    );
  }
  load();

  return () => {
    ac.abort();
    for (const t of timers) clearTimeout(t);
  };
}

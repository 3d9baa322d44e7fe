// One snapshot build (#/repositories/<id>/builds/<build>): its state, when
// it ran, how long it took, its error and failing hook, and its log (admins
// and reviewers: GET …/builds/<build>/log), colours rendered and escapes
// harmless, opened at its end, where a failure says what failed. The log
// is fetched with the token, never put in an address.

import { get } from '../api.js';
import { h, replace } from '../dom.js';
import { duration } from '../format.js';
import { terminal } from '../terminal.js';
import { errorBox, facts, loading, mayReview, pageHeader, timeEl } from '../ui.js';
import { buildError, buildTook } from './repositories.js';

export function mount(root, ctx) {
  const [repoId, buildId] = ctx.params;
  const ac = new AbortController();
  const repoPath = `/repositories/${encodeURIComponent(repoId)}`;
  ctx.setTitle(`Build ${buildId}`);
  const head = h('div', null, loading('Loading the build…'));
  const logBox = h('div', { class: 'build-log' });
  root.append(
    pageHeader(`Build ${buildId}`, h('a', { href: '#/repositories', class: 'btn btn-small' }, 'Repositories')),
    head,
    logBox,
  );

  async function load() {
    let repo;
    let build;
    try {
      const [repos, builds] = await Promise.all([
        get('/repositories', { signal: ac.signal }).then((r) => r.repositories),
        get(`${repoPath}/builds`, { signal: ac.signal }).then((r) => r.builds),
      ]);
      repo = repos.find((r) => r.id === repoId);
      build = builds.find((b) => b.id === buildId);
    } catch (e) {
      if (e.name !== 'AbortError') replace(head, errorBox(e, 'Could not load the build'));
      return;
    }
    if (!repo || !build) {
      replace(head, h('p', { class: 'empty-panel' }, 'There is no such build (only the last 20 of a repository are kept).'));
      return;
    }
    const took = buildTook(build);
    replace(
      head,
      facts([
        ['Repository', repo.name],
        ['State', h('span', { dataset: { state: build.state } }, build.state)],
        ['Queued', build.queued_ms ? timeEl(build.queued_ms) : null],
        ['Started', build.started_ms ? timeEl(build.started_ms) : null],
        ['Took', took === null ? null : duration(took) + (build.state === 'building' ? ' so far' : '')],
        ['Failing hook', build.hook ? h('code', null, build.hook) : null],
        ['Snapshot', build.snapshot_id ? h('code', null, build.snapshot_id.slice(0, 12)) : null],
      ]),
      build.error
        ? h(
            'div',
            { class: 'callout callout-error', dataset: { build: 'failed' } },
            h('strong', null, 'Error: '),
            buildError(build.error),
          )
        : null,
    );
    if (!mayReview(ctx.me)) {
      replace(logBox, h('p', { class: 'muted' }, 'The build’s log is for reviewers and admins.'));
      return;
    }
    replace(logBox, loading('Loading the log…'));
    let text;
    try {
      text = await get(`${repoPath}/builds/${encodeURIComponent(buildId)}/log`, { signal: ac.signal, as: 'text' });
    } catch (e) {
      if (e.name !== 'AbortError') replace(logBox, errorBox(e, 'Could not load the log'));
      return;
    }
    const out = terminal(text || '(the log is empty)', { class: 'block terminal build-log-text', tabindex: '0' });
    replace(logBox, h('h2', { class: 'sub-title' }, 'Log'), out);
    // at its end: where a failure is
    requestAnimationFrame(() => {
      out.scrollTop = out.scrollHeight;
    });
  }
  load();
  return () => ac.abort();
}

// Blind review (#/reviews/<batch>): one change at a time, in the batch's
// shuffled order, with only what a reviewer of a pull request would have:
// the task's prompt and the diff (GET /evals/reviews/{batch}/items/{item}
// and .../diff). Nothing says which run, agent or configuration made it,
// nor what it cost. Three verdicts; the review time is measured here from
// when the change was shown until the verdict (the server clips it by its
// own clock) and sent with it.

import { get, post } from '../api.js';
import { parseDiff, renderDiff } from '../diff.js';
import { h, replace } from '../dom.js';
import { num } from '../format.js';
import { announce, errorBox, loading, notice, pageHeader } from '../ui.js';

const VERDICTS = [
  { id: 'merge', label: 'Would merge', cls: 'btn-primary' },
  { id: 'changes', label: 'Needs changes', cls: '' },
  { id: 'reject', label: 'Reject', cls: 'btn-danger' },
];

export function mount(root, ctx) {
  const batch = ctx.params[0];
  ctx.setTitle('Blind review');
  const ac = new AbortController();
  const progress = h('div', { class: 'review-progress', 'aria-live': 'polite' });
  const body = h('div', { class: 'blind-review' }, loading('Loading the review…'));
  root.append(pageHeader('Blind review'), progress, body);

  function showProgress(decided, total) {
    const bar = h('progress', { max: String(total || 1), value: String(decided), 'aria-label': 'Reviewed so far' });
    replace(progress, bar, h('span', { class: 'muted' }, ` ${num(decided)} of ${num(total)} reviewed`));
  }

  async function next() {
    let b;
    try {
      b = await get(`/evals/reviews/${encodeURIComponent(batch)}`, { signal: ac.signal });
    } catch (e) {
      if (e.name === 'AbortError') return;
      replace(body, errorBox(e, 'Could not load the review'));
      return;
    }
    showProgress(b.decided, b.total);
    const item = (b.items || []).find((i) => !i.verdict);
    if (!item) {
      replace(
        body,
        notice(`All ${num(b.total)} changes are reviewed. Thank you.`, 'good'),
        h('p', null, h('a', { href: '#/evals' }, 'Back to the eval runs')),
      );
      return;
    }
    await show(item, b.total);
  }

  async function show(item, total) {
    replace(body, loading('Loading the change…'));
    const base = `/evals/reviews/${encodeURIComponent(batch)}/items/${encodeURIComponent(item.item)}`;
    let it;
    let text;
    try {
      it = await get(base, { signal: ac.signal });
      text = await get(`${base}/diff`, { signal: ac.signal, as: 'text' });
    } catch (e) {
      if (e.name === 'AbortError') return;
      replace(body, errorBox(e, 'Could not load the change'));
      return;
    }
    const shownAt = performance.now();
    const files = parseDiff(text);
    const { list, sections } = renderDiff(files, 'blind-file');
    const err = h('div', { class: 'form-error', role: 'alert' });
    const buttons = VERDICTS.map((v) =>
      h(
        'button',
        {
          type: 'button',
          class: ['btn', v.cls],
          dataset: { verdict: v.id },
          onclick: () => decide(v, buttons),
        },
        v.label,
      ),
    );
    async function decide(v, all) {
      for (const bt of all) bt.disabled = true;
      const ms = Math.max(0, Math.round(performance.now() - shownAt));
      try {
        await post(base, { verdict: v.id, review_ms: ms });
        announce(`${v.label}: recorded.`, 'good');
        await next();
      } catch (e) {
        if (e.status === 409 && /already/.test(e.message || '')) {
          // another reviewer of the batch was first: on to the next one
          announce('This change was reviewed meanwhile; here is the next.', 'info');
          await next();
          return;
        }
        for (const bt of all) bt.disabled = false;
        replace(err, e.describe ? e.describe() : String(e.message || e));
      }
    }
    replace(
      body,
      h(
        'section',
        { class: 'card review-item', dataset: { item: it.item } },
        h('h2', { class: 'card-title' }, `Change ${num(it.position)} of ${num(total)}`),
        h('h3', { class: 'sub-title' }, 'The request'),
        h('pre', { class: 'review-prompt' }, it.prompt || ''),
        h('h3', { class: 'sub-title' }, 'The change'),
        files.length
          ? [files.length > 1 ? h('nav', { class: 'diff-index', 'aria-label': 'Changed files' }, list) : null, sections]
          : h('p', { class: 'empty-panel' }, 'The change is empty.'),
        h('div', { class: 'review-verdicts', role: 'group', 'aria-label': 'Verdict' }, buttons),
        err,
      ),
    );
  }

  next();
  return () => ac.abort();
}

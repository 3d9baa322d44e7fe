// New session: a repository, a prompt, optionally a ref and an agent. The
// agent is the repository's or the server's (the built-in agent when it has
// a model) unless an agent preset is chosen: a CLI Warren installs and runs
// through its model gateway (docs/agents.md).

import { get, post } from '../api.js';
import { h, replace } from '../dom.js';
import { ago, shortSha } from '../format.js';
import { errorBox, isAdmin, loading, pageHeader } from '../ui.js';

export function mount(root, ctx) {
  ctx.setTitle('New session');
  const ac = new AbortController();
  const body = h('div', null, loading('Loading repositories…'));
  root.append(
    pageHeader('New session'),
    h(
      'p',
      { class: 'lede' },
      'Describe the change. The agent works in its own sandbox on a fresh copy of the repository; ' +
        "Warren runs the project's own checks, then the change waits for review. Nothing is pushed before a reviewer approves it.",
    ),
    body,
  );

  (async () => {
    let repos;
    let snaps = [];
    try {
      [repos, snaps] = await Promise.all([
        get('/repositories', { signal: ac.signal }).then((r) => r.repositories),
        get('/snapshots', { signal: ac.signal })
          .then((r) => r.snapshots)
          .catch(() => []),
      ]);
    } catch (err) {
      if (err.name === 'AbortError') return;
      replace(body, errorBox(err, 'Could not load the repositories'));
      return;
    }
    if (!repos.length) {
      replace(
        body,
        h(
          'div',
          { class: 'empty' },
          h('h2', null, 'No repositories yet'),
          isAdmin(ctx.me)
            ? h('p', null, 'Register one on the ', h('a', { href: '#/repositories' }, 'Repositories'), ' page first.')
            : h('p', null, 'An administrator registers repositories; ask yours to add the one you need.'),
        ),
      );
      return;
    }
    replace(body, form(repos, snaps));
  })();

  function form(repos, snaps) {
    const newest = new Map();
    for (const s of snaps) if (!newest.has(s.repo_id)) newest.set(s.repo_id, s);
    const want = ctx.query.get('repo');
    const repoSel = h(
      'select',
      { id: 'repo', name: 'repo', class: 'select', required: true, 'aria-describedby': 'repo-help' },
      repos.map((r) => h('option', { value: r.name }, r.name)),
    );
    if (want && repos.some((r) => r.name === want || r.id === want)) {
      repoSel.value = repos.find((r) => r.name === want || r.id === want).name;
    }
    const repoHelp = h('p', { id: 'repo-help', class: 'help' });
    const prompt = h('textarea', {
      id: 'prompt',
      name: 'prompt',
      class: 'textarea',
      rows: '7',
      required: true,
      placeholder: 'Fix the flaky test in tests/net.c and explain the cause in the commit message.',
      'aria-describedby': 'prompt-help',
    });
    const ref = h('input', {
      id: 'ref',
      name: 'ref',
      class: 'input mono',
      autocomplete: 'off',
      spellcheck: 'false',
      'aria-describedby': 'ref-help',
    });
    const agentSel = h(
      'select',
      { id: 'agent', name: 'agent', class: 'select', 'aria-describedby': 'agent-help' },
      [
        h('option', { value: '' }, "The repository's agent"),
        h('option', { value: 'opencode' }, 'OpenCode'),
        h('option', { value: 'codex' }, 'Codex'),
        h('option', { value: 'claude-code' }, 'Claude Code'),
      ],
    );
    const error = h('div', { class: 'form-error', role: 'alert' });
    const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Start session');

    function describeRepo() {
      const r = repos.find((x) => x.name === repoSel.value);
      if (!r) return;
      const snap = newest.get(r.id);
      ref.placeholder = r.default_ref || 'the default branch';
      replace(
        repoHelp,
        h('span', { class: 'mono' }, r.url),
        h('br'),
        snap
          ? [
              'Newest snapshot: ',
              h('span', { class: 'mono' }, shortSha(snap.commit)),
              `, built ${ago(snap.created_ms)}.`,
            ]
          : 'No snapshot yet: the session waits for the first build.',
      );
    }
    repoSel.addEventListener('change', describeRepo);
    describeRepo();

    async function onSubmit(e) {
      e.preventDefault();
      replace(error);
      prompt.removeAttribute('aria-invalid');
      if (!prompt.value.trim()) {
        prompt.setAttribute('aria-invalid', 'true');
        replace(error, 'Write a prompt: what should the agent do?');
        prompt.focus();
        return;
      }
      const payload = { repo: repoSel.value, prompt: prompt.value };
      if (ref.value.trim()) payload.ref = ref.value.trim();
      if (agentSel.value) payload.agent = { preset: agentSel.value };
      submit.disabled = true;
      submit.textContent = 'Starting…';
      try {
        const s = await post('/sessions', payload, { signal: ac.signal });
        ctx.live.put(s);
        ctx.go(`#/sessions/${encodeURIComponent(s.id)}`);
      } catch (err) {
        if (err.name === 'AbortError') return;
        replace(error, errorBox(err, 'The session was not started'));
        submit.disabled = false;
        submit.textContent = 'Start session';
        if (/preset|agent/.test(err.message)) agentSel.focus();
        else if (/ref/.test(err.message)) ref.focus();
        else if (/prompt/.test(err.message)) prompt.focus();
      }
    }

    return h(
      'form',
      { class: 'form card', onsubmit: onSubmit, novalidate: true, 'aria-label': 'New session' },
      h('div', { class: 'field' }, h('label', { for: 'repo', class: 'label' }, 'Repository'), repoSel, repoHelp),
      h(
        'div',
        { class: 'field' },
        h('label', { for: 'prompt', class: 'label' }, 'Prompt'),
        prompt,
        h(
          'p',
          { id: 'prompt-help', class: 'help' },
          'What to change and how to tell it is right. Be as specific as you would be with a colleague.',
        ),
      ),
      h(
        'div',
        { class: 'field field-narrow' },
        h('label', { for: 'ref', class: 'label' }, 'Ref ', h('span', { class: 'optional' }, '(optional)')),
        ref,
        h('p', { id: 'ref-help', class: 'help' }, 'A branch, tag or commit to start from.'),
      ),
      h(
        'div',
        { class: 'field field-narrow' },
        h('label', { for: 'agent', class: 'label' }, 'Agent ', h('span', { class: 'optional' }, '(optional)')),
        agentSel,
        h(
          'p',
          { id: 'agent-help', class: 'help' },
          'An agent CLI runs in the sandbox with model access through Warren: no key is inside, and its calls count against the session\'s budget.',
        ),
      ),
      error,
      h('div', { class: 'form-actions' }, submit, h('a', { href: '#/sessions', class: 'btn btn-quiet' }, 'Cancel')),
    );
  }

  return () => ac.abort();
}

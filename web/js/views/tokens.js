// API tokens (admin): create one for a person (its text is shown once),
// see who has which, revoke.

import { del, get, post } from '../api.js';
import { h, replace } from '../dom.js';
import { announce, errorBox, loading, pageHeader, timeEl } from '../ui.js';

export function mount(root, ctx) {
  ctx.setTitle('Tokens');
  const ac = new AbortController();
  const list = h('div', null, loading('Loading tokens…'));
  const created = h('div', { class: 'token-created', 'aria-live': 'polite' });

  const user = h('input', {
    id: 't-user',
    class: 'input',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    placeholder: 'alice',
  });
  const role = h(
    'select',
    { id: 't-role', class: 'select', 'aria-describedby': 't-role-help' },
    h('option', { value: 'submitter' }, 'submitter'),
    h('option', { value: 'reviewer' }, 'reviewer'),
    h('option', { value: 'admin' }, 'admin'),
  );
  const roleHelp = h('p', { id: 't-role-help', class: 'help' });
  const describeRole = () => {
    roleHelp.textContent = {
      submitter: 'Starts sessions and follows, messages and cancels its own; sees no one else’s.',
      reviewer: 'Also reads every session, and approves or rejects any.',
      admin: 'Everything, repositories and tokens included.',
    }[role.value];
  };
  role.addEventListener('change', describeRole);
  describeRole();
  const name = h('input', {
    id: 't-name',
    class: 'input',
    autocomplete: 'off',
    spellcheck: 'false',
    placeholder: 'alice-laptop',
  });
  const expires = h('input', { id: 't-expires', class: 'input', autocomplete: 'off', placeholder: '30d' });
  const err = h('div', { class: 'form-error', role: 'alert' });
  const go = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Create token');

  async function onCreate(e) {
    e.preventDefault();
    replace(err);
    if (!user.value.trim()) {
      replace(err, 'Name the user the token is for.');
      user.focus();
      return;
    }
    const payload = { user: user.value.trim(), role: role.value };
    if (name.value.trim()) payload.name = name.value.trim();
    if (expires.value.trim()) payload.expires = expires.value.trim();
    go.disabled = true;
    try {
      const t = await post('/tokens', payload, { signal: ac.signal });
      const field = h('input', {
        id: 'new-token',
        class: 'input mono',
        readonly: true,
        value: t.token,
        'aria-describedby': 'new-token-help',
      });
      const copy = h('button', { type: 'button', class: 'btn btn-small' }, 'Copy');
      copy.addEventListener('click', async () => {
        field.select();
        try {
          await navigator.clipboard.writeText(t.token);
          announce('Token copied.');
        } catch {
          announce('Select the token and copy it (the browser refused the clipboard here).');
        }
      });
      replace(
        created,
        h(
          'div',
          { class: 'callout callout-good' },
          h('strong', null, `Token ${t.name} for ${t.user} (${t.role})`),
          h('label', { for: 'new-token', class: 'label' }, 'The token'),
          h('div', { class: 'copy-row' }, field, copy),
          h(
            'p',
            { id: 'new-token-help', class: 'help' },
            'Shown this once: the server keeps only its hash. Hand it over privately; the person signs in with it here.',
          ),
        ),
      );
      field.focus();
      field.select();
      user.value = '';
      name.value = '';
      expires.value = '';
      load();
    } catch (ex) {
      if (ex.name !== 'AbortError') replace(err, errorBox(ex, 'The token was not created'));
    } finally {
      go.disabled = false;
    }
  }

  async function revoke(t, button) {
    if (button.dataset.confirm !== 'yes') {
      button.dataset.confirm = 'yes';
      button.textContent = 'Confirm revoke';
      button.classList.add('btn-danger');
      return;
    }
    button.disabled = true;
    try {
      await del(`/tokens/${encodeURIComponent(t.name)}`, { signal: ac.signal });
      announce(`Token ${t.name} revoked.`);
      load();
    } catch (ex) {
      if (ex.name !== 'AbortError') announce(`Could not revoke ${t.name}: ${ex.message}`, 'bad');
      button.disabled = false;
    }
  }

  async function load() {
    let tokens;
    try {
      tokens = (await get('/tokens', { signal: ac.signal })).tokens;
    } catch (ex) {
      if (ex.name !== 'AbortError') replace(list, errorBox(ex, 'Could not load the tokens'));
      return;
    }
    tokens.sort((a, b) => Number(b.active) - Number(a.active) || b.created_ms - a.created_ms);
    replace(
      list,
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          { class: 'table tokens-table' },
          h('caption', { class: 'sr-only' }, 'API tokens'),
          h(
            'thead',
            null,
            h(
              'tr',
              null,
              ['Name', 'User', 'Role', 'Created', 'Expires', 'Last used', 'Status', ''].map((c) =>
                h('th', { scope: 'col' }, c),
              ),
            ),
          ),
          h(
            'tbody',
            null,
            tokens.map((t) => {
              const status = t.revoked_ms ? 'revoked' : t.active ? 'active' : 'expired';
              const b = t.active ? h('button', { type: 'button', class: 'btn btn-small btn-quiet' }, 'Revoke') : null;
              if (b) b.addEventListener('click', () => revoke(t, b));
              return h(
                'tr',
                { class: t.active ? '' : 'is-inactive' },
                h('td', { dataset: { label: 'Name' } }, h('code', null, t.name)),
                h('td', { dataset: { label: 'User' } }, t.user),
                h('td', { dataset: { label: 'Role' } }, t.role),
                h('td', { dataset: { label: 'Created' } }, timeEl(t.created_ms)),
                h('td', { dataset: { label: 'Expires' } }, t.expires_ms ? timeEl(t.expires_ms, 'date') : 'never'),
                h('td', { dataset: { label: 'Last used' } }, t.last_used_ms ? timeEl(t.last_used_ms) : 'never'),
                h(
                  'td',
                  { dataset: { label: 'Status' } },
                  h('span', { class: ['pill', status === 'active' ? 'pill-good' : 'pill-muted'] }, status),
                ),
                h('td', { class: 'col-actions' }, b),
              );
            }),
          ),
        ),
      ),
    );
  }

  root.append(
    pageHeader('Tokens'),
    h(
      'p',
      { class: 'lede' },
      'Everyone signs in with an API token; its role decides what they may do. The same tokens work with the warren command and the HTTP API.',
    ),
    h(
      'form',
      { class: 'card form form-grid', onsubmit: onCreate, 'aria-label': 'Create a token', novalidate: true },
      h('h2', { class: 'card-title' }, 'Create a token'),
      h('div', { class: 'field' }, h('label', { for: 't-user', class: 'label' }, 'User'), user),
      h('div', { class: 'field' }, h('label', { for: 't-role', class: 'label' }, 'Role'), role, roleHelp),
      h(
        'div',
        { class: 'field' },
        h('label', { for: 't-name', class: 'label' }, 'Token name ', h('span', { class: 'optional' }, '(optional)')),
        name,
      ),
      h(
        'div',
        { class: 'field' },
        h(
          'label',
          { for: 't-expires', class: 'label' },
          'Expires after ',
          h('span', { class: 'optional' }, '(optional)'),
        ),
        expires,
      ),
      err,
      h('div', { class: 'form-actions' }, go),
    ),
    created,
    h('h2', { class: 'section-title' }, 'All tokens'),
    list,
  );
  load();
  return () => ac.abort();
}

// Sign-in: an API token, checked with GET /whoami, then kept in this tab's
// sessionStorage.

import { get, setToken } from '../api.js';
import { h, replace } from '../dom.js';

const TOKEN_RE = /^wr_[A-Za-z0-9_-]{43}$/;

export function mount(root, ctx) {
  const input = h('input', {
    id: 'token',
    name: 'token',
    type: 'password',
    class: 'input mono',
    autocomplete: 'off',
    spellcheck: 'false',
    autocapitalize: 'off',
    required: true,
    placeholder: 'wr_…',
    'aria-describedby': 'token-help',
  });
  const error = h('div', { class: 'form-error', id: 'signin-error', role: 'alert' });
  const button = h('button', { type: 'submit', class: 'btn btn-primary btn-block' }, 'Sign in');
  const ac = new AbortController();

  async function submit(e) {
    e.preventDefault();
    replace(error);
    const token = input.value.trim();
    if (!token) {
      replace(error, 'Paste an API token.');
      input.focus();
      return;
    }
    if (!TOKEN_RE.test(token)) {
      replace(error, 'That does not look like a Warren token: it starts with wr_ followed by 43 characters.');
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    button.disabled = true;
    button.textContent = 'Signing in…';
    try {
      const who = await get('/whoami', { token, signal: ac.signal });
      setToken(token);
      ctx.onSignedIn(who);
    } catch (err) {
      if (err.name === 'AbortError') return;
      input.setAttribute('aria-invalid', 'true');
      replace(
        error,
        err.status === 401
          ? 'The server did not accept this token: it is unknown, revoked or expired.'
          : err.describe
            ? err.describe()
            : String(err),
      );
      button.disabled = false;
      button.textContent = 'Sign in';
      input.focus();
      input.select();
    }
  }

  root.append(
    h(
      'div',
      { class: 'signin' },
      h(
        'form',
        { class: 'signin-card', onsubmit: submit, novalidate: true, 'aria-labelledby': 'signin-title' },
        h('img', { src: 'favicon.svg', alt: '', width: '40', height: '40', class: 'signin-logo' }),
        h('h1', { id: 'signin-title', class: 'page-title', tabindex: '-1' }, 'Sign in to Warren'),
        ctx.note ? h('p', { class: 'callout callout-info' }, ctx.note) : null,
        h('label', { for: 'token', class: 'label' }, 'API token'),
        input,
        h(
          'p',
          { id: 'token-help', class: 'help' },
          'An administrator creates one for you (',
          h('code', null, 'warren token create --user NAME --role submitter'),
          ' or the Tokens page). It is kept in this browser tab only, until you sign out or close it.',
        ),
        error,
        button,
      ),
    ),
  );
  input.focus();
  return () => ac.abort();
}

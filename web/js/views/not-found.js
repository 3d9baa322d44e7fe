// A route that is not one of ours (or an admin page for someone else).

import { h } from '../dom.js';
import { pageHeader } from '../ui.js';

export function mount(root, ctx) {
  ctx.setTitle('Not found');
  root.append(
    pageHeader('Page not found'),
    h('p', null, 'There is no page at this address. ', h('a', { href: '#/sessions' }, 'Go to the sessions'), '.'),
  );
}

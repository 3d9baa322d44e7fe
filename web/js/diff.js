// diff.js - a unified diff (as `git diff` writes it) split into files and
// hunks, and drawn file by file: added, removed, context and hunk-header
// lines each in their own colour, with old and new line numbers, and the
// changed part of a changed line marked.

import { h, replace } from './dom.js';
import { num } from './format.js';

const MAX_LINES_SHOWN = 1500; // per file, before "Show all"

function unquote(p) {
  if (p.startsWith('"') && p.endsWith('"')) {
    return p.slice(1, -1).replace(/\\t/g, '\t').replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
  }
  return p;
}

function stripPrefix(p) {
  p = unquote(p.replace(/\t.*$/, ''));
  if (p === '/dev/null') return null;
  return p.replace(/^[ab]\//, '');
}

// "diff --git a/x y b/x y": the two halves are equal when nothing was renamed
function gitHeaderPath(line) {
  const rest = line.slice('diff --git '.length);
  const half = (rest.length - 1) / 2;
  if (Number.isInteger(half) && rest[half] === ' ') {
    const a = rest.slice(0, half);
    const b = rest.slice(half + 1);
    if (a.slice(2) === b.slice(2)) return stripPrefix(b);
  }
  const i = rest.lastIndexOf(' b/');
  return i >= 0 ? stripPrefix(rest.slice(i + 1)) : rest;
}

export function parseDiff(text) {
  const files = [];
  let file = null;
  let hunk = null;
  let oldLeft = 0;
  let newLeft = 0;
  let oldNo = 0;
  let newNo = 0;
  const lines = text.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();

  const startFile = (path) => {
    file = { path, oldPath: path, newPath: path, status: 'modified', meta: [], hunks: [], additions: 0, deletions: 0 };
    files.push(file);
    hunk = null;
  };

  for (const line of lines) {
    if (hunk && (oldLeft > 0 || newLeft > 0)) {
      const c = line[0];
      if (c === '+') {
        hunk.lines.push({ type: 'add', text: line.slice(1), old: null, new: newNo++ });
        newLeft--;
        file.additions++;
        continue;
      }
      if (c === '-') {
        hunk.lines.push({ type: 'del', text: line.slice(1), old: oldNo++, new: null });
        oldLeft--;
        file.deletions++;
        continue;
      }
      if (c === ' ' || line === '') {
        hunk.lines.push({ type: 'ctx', text: line.slice(1), old: oldNo++, new: newNo++ });
        oldLeft--;
        newLeft--;
        continue;
      }
      if (c === '\\') {
        hunk.lines.push({ type: 'meta', text: line, old: null, new: null });
        continue;
      }
      // anything else ends the hunk early (a malformed count)
    } else if (hunk && line[0] === '\\') {
      hunk.lines.push({ type: 'meta', text: line, old: null, new: null });
      continue;
    }
    if (line.startsWith('diff --git ')) {
      startFile(gitHeaderPath(line));
      continue;
    }
    if (!file) {
      if (line.startsWith('--- ')) startFile(stripPrefix(line.slice(4)) || '');
      else continue;
    }
    const m = line.match(/^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$/);
    if (m) {
      oldNo = Number(m[1]);
      newNo = Number(m[3]);
      oldLeft = m[2] === undefined ? 1 : Number(m[2]);
      newLeft = m[4] === undefined ? 1 : Number(m[4]);
      hunk = { header: line, context: m[5].trim(), lines: [] };
      file.hunks.push(hunk);
      continue;
    }
    if (line.startsWith('--- ')) {
      const p = stripPrefix(line.slice(4));
      file.oldPath = p;
      if (p === null) file.status = 'added';
      continue;
    }
    if (line.startsWith('+++ ')) {
      const p = stripPrefix(line.slice(4));
      file.newPath = p;
      if (p === null) file.status = 'deleted';
      else file.path = p;
      continue;
    }
    if (line.startsWith('new file mode')) file.status = 'added';
    else if (line.startsWith('deleted file mode')) file.status = 'deleted';
    else if (line.startsWith('rename from ')) {
      file.oldPath = unquote(line.slice(12));
      file.status = 'renamed';
    } else if (line.startsWith('rename to ')) {
      file.newPath = unquote(line.slice(10));
      file.path = file.newPath;
      file.status = 'renamed';
    } else if (line.startsWith('Binary files ') || line.startsWith('GIT binary patch')) {
      file.binary = true;
    }
    file.meta.push(line);
  }
  for (const f of files) {
    if (f.status === 'deleted' && f.oldPath) f.path = f.oldPath;
  }
  return files;
}

// The changed middle of a removed line and the added line that replaced it.
function markChange(a, b) {
  let pre = 0;
  const max = Math.min(a.length, b.length);
  while (pre < max && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < max - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
  // only worth marking when most of the line stayed
  const same = pre + suf;
  if (same < 3 || same < Math.min(a.length, b.length) * 0.3) return null;
  return { pre, suf };
}

function codeCell(sign, text, mark) {
  const td = h('td', { class: 'code' }, h('span', { class: 'sign', 'aria-hidden': 'true' }, sign));
  if (mark) {
    const end = text.length - mark.suf;
    td.append(text.slice(0, mark.pre), h('mark', { class: 'hl' }, text.slice(mark.pre, end)), text.slice(end));
  } else {
    td.append(text);
  }
  return td;
}

const SIGN = { add: '+', del: '-', ctx: ' ', meta: '' };

function hunkRows(hunk, budget) {
  const rows = [];
  rows.push(
    h(
      'tr',
      { class: 'd-hunk' },
      h('td', { class: 'ln', 'aria-hidden': 'true' }, '⋯'),
      h('td', { class: 'ln', 'aria-hidden': 'true' }),
      h('td', { class: 'code' }, hunk.header),
    ),
  );
  const L = hunk.lines;
  // pair runs of removed lines with the run of added lines that follows
  const marks = new Map();
  for (let i = 0; i < L.length; ) {
    if (L[i].type !== 'del') {
      i++;
      continue;
    }
    let j = i;
    while (j < L.length && L[j].type === 'del') j++;
    let k = j;
    while (k < L.length && L[k].type === 'add') k++;
    if (j - i === k - j) {
      for (let n = 0; n < j - i; n++) {
        const m = markChange(L[i + n].text, L[j + n].text);
        if (m) {
          marks.set(i + n, m);
          marks.set(j + n, m);
        }
      }
    }
    i = k;
  }
  for (let i = 0; i < L.length && budget.left > 0; i++, budget.left--) {
    const l = L[i];
    rows.push(
      h(
        'tr',
        { class: `d-${l.type}` },
        h('td', { class: 'ln' }, l.old ?? ''),
        h('td', { class: 'ln' }, l.new ?? ''),
        l.type === 'meta' ? h('td', { class: 'code' }, l.text) : codeCell(SIGN[l.type], l.text, marks.get(i)),
      ),
    );
  }
  return rows;
}

function fileBody(f, limit) {
  if (f.binary) return h('p', { class: 'diff-note' }, 'Binary file: its bytes are not shown.');
  if (!f.hunks.length) {
    if (f.status === 'renamed') return h('p', { class: 'diff-note' }, `Renamed from ${f.oldPath}, content unchanged.`);
    return h(
      'p',
      { class: 'diff-note' },
      f.meta.filter((m) => !m.startsWith('index ')).join('\n') || 'No textual change.',
    );
  }
  const total = f.hunks.reduce((n, hk) => n + hk.lines.length, 0);
  const budget = { left: limit };
  const tbody = h('tbody');
  for (const hk of f.hunks) {
    if (budget.left <= 0) break;
    tbody.append(...hunkRows(hk, budget));
  }
  const wrap = h(
    'div',
    { class: 'diff-scroll' },
    h(
      'table',
      { class: 'diff-table' },
      h('caption', { class: 'sr-only' }, `Changes in ${f.path}`),
      h(
        'thead',
        { class: 'sr-only' },
        h(
          'tr',
          null,
          h('th', { scope: 'col' }, 'Old line'),
          h('th', { scope: 'col' }, 'New line'),
          h('th', { scope: 'col' }, 'Line'),
        ),
      ),
      tbody,
    ),
  );
  if (total > limit) {
    const more = h(
      'button',
      {
        type: 'button',
        class: 'btn btn-small',
        onclick: () => replace(wrap.parentNode, fileBody(f, Infinity)),
      },
      `Show all ${num(total)} lines`,
    );
    return h('div', null, wrap, h('p', { class: 'diff-note' }, `${num(limit)} of ${num(total)} lines shown. `, more));
  }
  return h('div', null, wrap);
}

const STATUS_LABEL = { added: 'new', deleted: 'deleted', renamed: 'renamed' };

export function renderDiff(files, idPrefix = 'file') {
  const list = h('ol', { class: 'diff-files' });
  const sections = [];
  files.forEach((f, i) => {
    const id = `${idPrefix}-${i}`;
    const body = h('div', { class: 'diff-body', id: `${id}-body` }, fileBody(f, MAX_LINES_SHOWN));
    const toggle = h(
      'button',
      {
        type: 'button',
        class: 'diff-toggle',
        'aria-expanded': 'true',
        'aria-controls': `${id}-body`,
        title: 'Collapse or expand this file',
      },
      h('span', { class: 'chev', 'aria-hidden': 'true' }),
      h('span', { class: 'sr-only' }, `Show or hide ${f.path}`),
    );
    toggle.addEventListener('click', () => {
      const open = toggle.getAttribute('aria-expanded') === 'true';
      toggle.setAttribute('aria-expanded', open ? 'false' : 'true');
      body.hidden = open;
    });
    const delta = h(
      'span',
      { class: 'delta' },
      f.binary
        ? h('span', { class: 'muted' }, 'binary')
        : [h('span', { class: 'add' }, `+${f.additions}`), ' ', h('span', { class: 'del' }, `−${f.deletions}`)],
    );
    const head = h(
      'div',
      { class: 'diff-file-head' },
      toggle,
      h(
        'h3',
        { class: 'diff-path mono', id: `${id}-title`, tabindex: '-1' },
        f.status === 'renamed' ? `${f.oldPath} → ${f.path}` : f.path,
      ),
      STATUS_LABEL[f.status] ? h('span', { class: `file-status fs-${f.status}` }, STATUS_LABEL[f.status]) : null,
      delta,
    );
    sections.push(h('section', { class: 'diff-file', id, 'aria-labelledby': `${id}-title` }, head, body));
    list.append(
      h(
        'li',
        null,
        h(
          'button',
          {
            type: 'button',
            class: 'link-button mono',
            onclick: () => {
              const t = document.getElementById(`${id}-title`);
              t.scrollIntoView({ block: 'start', behavior: 'smooth' });
              t.focus({ preventScroll: true });
            },
          },
          f.path,
        ),
        ' ',
        delta.cloneNode(true),
      ),
    );
  });
  return { list, sections };
}

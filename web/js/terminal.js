// terminal.js - a program's output (build logs, verification, command
// output) shown as a terminal would colour it, and harmless: SGR colours and
// weights become spans with classes from a fixed set; every other escape
// sequence (cursor moves, line clearing, titles, OSC 52 clipboard writes) is
// dropped; a carriage return that is not part of a line end starts a new
// line, so nothing a program printed can be hidden behind what it prints
// next; the controls left, and the bidi overrides that would reorder the
// text, are shown as visible marks (^[, ^G, \u009b, \u202e). Text goes into
// the page as text nodes only.

import { h } from './dom.js';

// CSI (7- or 8-bit), then OSC, DCS, SOS, PM and APC strings up to their
// terminator (or the end), then the other escape sequences, a CR, and single
// controls and bidi formatting characters.
const TOKEN = new RegExp(
  [
    '(?:\\x1b\\[|\\x9b)([0-?]*)([ -/]*)([@-~])',
    '(?:\\x1b[\\]PX^_]|[\\x90\\x98\\x9d\\x9e\\x9f])[\\s\\S]*?(?:\\x07|\\x1b\\\\|\\x9c|$)',
    '\\x1b[ -/]*[0-~]?',
    '\\r',
    '[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069]',
  ].join('|'),
  'g',
);

function mark(c) {
  const code = c.charCodeAt(0);
  if (code < 0x20) return `^${String.fromCharCode(code + 0x40)}`;
  if (code === 0x7f) return '^?';
  return `\\u${code.toString(16).padStart(4, '0')}`;
}

// SGR parameters onto the current style: {fg, bg, bold, dim, italic, underline}
function sgr(style, params) {
  const p = params === '' ? [0] : params.split(/[;:]/).map((x) => (x === '' ? 0 : Number(x)));
  for (let i = 0; i < p.length; i++) {
    const n = p[i];
    if (n === 0) {
      for (const k of Object.keys(style)) delete style[k];
    } else if (n === 1) style.bold = true;
    else if (n === 2) style.dim = true;
    else if (n === 3) style.italic = true;
    else if (n === 4) style.underline = true;
    else if (n === 22) {
      delete style.bold;
      delete style.dim;
    } else if (n === 23) delete style.italic;
    else if (n === 24) delete style.underline;
    else if (n >= 30 && n <= 37) style.fg = n - 30;
    else if (n >= 90 && n <= 97) style.fg = n - 90 + 8;
    else if (n === 39) delete style.fg;
    else if (n >= 40 && n <= 47) style.bg = n - 40;
    else if (n >= 100 && n <= 107) style.bg = n - 100 + 8;
    else if (n === 49) delete style.bg;
    else if (n === 38 || n === 48) {
      // 256 colours (5;N): the first 16 kept, the rest left plain;
      // true colour (2;R;G;B) left plain
      const key = n === 38 ? 'fg' : 'bg';
      if (p[i + 1] === 5) {
        if (p[i + 2] < 16) style[key] = p[i + 2];
        else delete style[key];
        i += 2;
      } else if (p[i + 1] === 2) {
        delete style[key];
        i += 4;
      }
    }
  }
}

function classes(style) {
  const c = [];
  if (style.fg !== undefined) c.push(`ansi-fg-${style.fg}`);
  if (style.bg !== undefined) c.push(`ansi-bg-${style.bg}`);
  for (const k of ['bold', 'dim', 'italic', 'underline']) if (style[k]) c.push(`ansi-${k}`);
  return c;
}

// The nodes showing text: strings and spans, to append to a <pre>.
export function terminalNodes(text) {
  const src = String(text ?? '');
  const out = [];
  const style = {};
  const push = (t) => {
    if (!t) return;
    const c = classes(style);
    out.push(c.length ? h('span', { class: c }, t) : t);
  };
  let at = 0;
  TOKEN.lastIndex = 0;
  for (let m = TOKEN.exec(src); m; m = TOKEN.exec(src)) {
    push(src.slice(at, m.index));
    at = TOKEN.lastIndex;
    const tok = m[0];
    if (m[3] !== undefined) {
      if (m[3] === 'm' && m[2] === '') sgr(style, m[1]);
    } else if (tok[0] === '\r') {
      // "\r\n" is a line end; a lone CR (which would rewrite the line
      // on a terminal) starts a new one
      push(src[at] === '\n' ? '' : '\n');
    } else if (tok.length === 1 && tok !== '\x1b') {
      out.push(h('span', { class: 'ctl', title: 'a control character' }, mark(tok)));
    }
  }
  push(src.slice(at));
  return out;
}

// Text without escapes or controls (what a search or a summary line needs).
export function terminalPlain(text) {
  return terminalNodes(text)
    .map((n) => (typeof n === 'string' ? n : n.textContent))
    .join('');
}

// A <pre> of output: terminal(text, {class: [...]}).
export function terminal(text, attrs = {}) {
  return h('pre', attrs, terminalNodes(text));
}

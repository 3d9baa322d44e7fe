// activity.js - a session's events as a timeline: state changes, turns, the
// agent's conversation (each tool call with its result), output lines,
// verification runs, the committed result. Events are appended as they
// arrive (SSE), in seq order.

import { h } from '../dom.js';
import { cost, dateTime, duration, num, plural, shortSha } from '../format.js';
import { stateBadge } from '../ui.js';
import { terminal, terminalNodes } from '../terminal.js';

const LONG_LINES = 10;

function lineCount(text) {
  return text ? String(text).split('\n').length - (String(text).endsWith('\n') ? 1 : 0) : 0;
}

// output and results as a terminal shows them, escapes harmless
function pre(text, cls = '') {
  return terminal(text, { class: ['block', cls] });
}

// Long text folded behind a summary; short text shown as it is.
function foldable(summary, text, { open = null, cls = '' } = {}) {
  const n = lineCount(text);
  const d = h(
    'details',
    { class: ['fold', cls] },
    h('summary', null, summary, n ? h('span', { class: 'muted' }, ` · ${n} ${n === 1 ? 'line' : 'lines'}`) : null),
    pre(text),
  );
  d.open = open ?? n <= LONG_LINES;
  return d;
}

function parseArgs(raw) {
  if (raw && typeof raw === 'object') return raw;
  try {
    return JSON.parse(raw || '{}');
  } catch {
    return { _raw: String(raw) };
  }
}

// What a tool call does, in one line, and what to show below it.
function describeCall(name, args) {
  switch (name) {
    case 'bash':
      return { line: h('code', { class: 'cmd' }, `$ ${args.command ?? ''}`) };
    case 'read_file':
      return {
        line: [
          h('code', null, args.path ?? ''),
          args.start_line || args.end_line
            ? h('span', { class: 'muted' }, ` lines ${args.start_line ?? 1}–${args.end_line ?? 'end'}`)
            : null,
        ],
      };
    case 'write_file':
      return {
        line: [h('code', null, args.path ?? ''), h('span', { class: 'muted' }, ` · ${lineCount(args.content)} lines`)],
        body: foldable('Content', args.content ?? '', { open: false }),
      };
    case 'edit_file': {
      const old = String(args.old_text ?? '')
        .split('\n')
        .map((l) => `-${l}`)
        .join('\n');
      const neu = String(args.new_text ?? '')
        .split('\n')
        .map((l) => `+${l}`)
        .join('\n');
      return {
        line: h('code', null, args.path ?? ''),
        body: h(
          'pre',
          { class: 'block mini-diff' },
          h('span', { class: 'del' }, old),
          '\n',
          h('span', { class: 'add' }, neu),
        ),
      };
    }
    case 'list_files':
      return { line: args.pattern ? h('code', null, args.pattern) : h('span', { class: 'muted' }, 'all files') };
    case 'run_verify':
      return { line: h('span', { class: 'muted' }, "the project's verify commands") };
    case 'screenshot':
      return {
        line: [
          h('code', null, args.url ?? ''),
          args.name ? h('span', { class: 'muted' }, ` → ${args.name}.png`) : null,
        ],
      };
    case 'finish':
      return {
        line: h('span', { class: 'muted' }, 'done'),
        body: h('p', { class: 'finish-summary' }, String(args.summary ?? '')),
      };
    default:
      return { line: h('code', null, JSON.stringify(args)) };
  }
}

export class Timeline {
  constructor(session) {
    this.session = session;
    this.el = h('ol', { class: 'timeline', 'aria-label': 'Session events' });
    this.calls = new Map(); // tool_call_id -> element for its result
    this.output = null; // the <pre> of consecutive output lines
    this.sawUser = false;
    this.count = 0;
  }

  offset(ms) {
    const t = ms - this.session.created_ms;
    return h('span', { class: 'ev-time', title: dateTime(ms) }, t >= 0 ? `+${duration(t)}` : '');
  }

  item(cls, ev, ...children) {
    const li = h(
      'li',
      { class: ['ev', cls], dataset: { seq: String(ev.seq), kind: ev.kind } },
      this.offset(ev.time_ms),
      h('div', { class: 'ev-body' }, ...children),
    );
    this.el.append(li);
    this.count++;
    return li;
  }

  add(ev) {
    const d = ev.data || {};
    if (ev.kind !== 'output') this.output = null;
    switch (ev.kind) {
      case 'state':
        this.item(
          'ev-state',
          ev,
          h('span', { class: 'ev-label' }, 'State'),
          ' ',
          stateBadge(d.state, { pulse: false }),
          d.reason ? h('span', { class: 'ev-reason' }, ` ${d.reason}`) : null,
        );
        break;
      case 'phase':
        this.phase(ev, d);
        break;
      case 'turn':
        if (d.status === 'started') {
          this.item('ev-turn', ev, h('span', { class: 'turn-rule' }, `Turn ${d.turn}`));
        } else {
          this.item(
            'ev-turn-end',
            ev,
            h(
              'span',
              { class: 'muted' },
              `Turn ${d.turn} ${d.status}${d.exit_code !== undefined && d.exit_code !== null ? ` · exit ${d.exit_code}` : ''}`,
            ),
          );
        }
        break;
      case 'output':
        this.outputLine(ev, d);
        break;
      case 'message':
        this.item(
          'ev-message',
          ev,
          h(
            'div',
            { class: 'bubble bubble-user' },
            h('div', { class: 'bubble-head' }, `${d.user || 'someone'} · follow-up`),
            h('p', { class: 'prose' }, d.text ?? ''),
          ),
        );
        break;
      case 'transcript':
        this.transcript(ev, d);
        break;
      case 'verify':
        this.verify(ev, d);
        break;
      case 'result':
        this.item(
          'ev-result',
          ev,
          h('span', { class: 'ev-label' }, d.changed === false ? 'No change' : 'Committed'),
          ' ',
          d.changed === false
            ? h('span', { class: 'muted' }, 'the agent changed nothing')
            : [
                h('code', null, shortSha(d.commit)),
                ' on ',
                h('code', null, d.branch ?? ''),
                ` · ${plural((d.files || []).length, 'file')}, `,
                h('span', { class: 'add' }, `+${num(d.additions)}`),
                ' ',
                h('span', { class: 'del' }, `−${num(d.deletions)}`),
              ],
        );
        break;
      case 'usage':
        this.item(
          'ev-usage',
          ev,
          h('span', { class: 'ev-label' }, 'Agent run'),
          ' ',
          h(
            'span',
            { class: 'muted' },
            `${d.end || 'ended'} · ${num(d.model_calls)} model calls, ${num(d.tool_calls)} tool calls · ${num(d.prompt_tokens)} + ${num(d.completion_tokens)} tokens · cost ${cost(d.cost)}`,
          ),
        );
        break;
      case 'budget':
        this.item(
          'ev-budget',
          ev,
          h('div', { class: 'callout callout-warn' }, h('strong', null, 'Budget ran out: '), String(d.reason ?? '')),
        );
        break;
      case 'error':
        this.item(
          'ev-error',
          ev,
          h('div', { class: 'callout callout-error' }, h('strong', null, 'Error: '), String(d.message ?? '')),
        );
        break;
      default:
        this.item('ev-other', ev, h('span', { class: 'ev-label' }, ev.kind), ' ', h('code', null, JSON.stringify(d)));
    }
  }

  phase(ev, d) {
    const parts = d.start_ms
      ? Object.entries(d.start_ms)
          .filter(([, v]) => typeof v === 'number')
          .map(([k, v]) => `${k} ${duration(v)}`)
          .join(' · ')
      : '';
    const total = d.start_ms
      ? Object.values(d.start_ms).reduce((n, v) => n + (typeof v === 'number' ? v : 0), 0)
      : d.ms;
    this.item(
      'ev-phase',
      ev,
      h('span', { class: 'ev-label' }, d.phase === 'ready' ? 'Sandbox ready' : `Phase ${d.phase}`),
      ' ',
      total !== undefined ? h('span', null, duration(total)) : null,
      parts ? h('span', { class: 'muted' }, ` (${parts})`) : null,
    );
  }

  outputLine(ev, d) {
    if (!this.output) {
      this.output = h('pre', { class: 'block terminal' });
      this.item('ev-output', ev, this.output);
    }
    const text = `${d.line ?? ''}\n`;
    if (d.stream === 'stderr') this.output.append(h('span', { class: 'stderr' }, terminalNodes(text)));
    else this.output.append(...terminalNodes(text));
  }

  transcript(ev, d) {
    const m = d.message || {};
    if (m.role === 'system') {
      this.item('ev-system', ev, foldable('System prompt', m.content ?? '', { open: false, cls: 'fold-quiet' }));
      return;
    }
    if (m.role === 'user') {
      const first = !this.sawUser;
      this.sawUser = true;
      this.item(
        'ev-user',
        ev,
        h(
          'div',
          { class: 'bubble bubble-user' },
          h('div', { class: 'bubble-head' }, first ? 'Prompt' : 'To the agent'),
          h('p', { class: 'prose' }, m.content ?? ''),
        ),
      );
      return;
    }
    if (m.role === 'tool') {
      const slot = this.calls.get(m.tool_call_id);
      const result = foldable('Result', m.content ?? '', { cls: 'tool-result' });
      if (slot) slot.append(result);
      else this.item('ev-tool', ev, result);
      return;
    }
    // assistant
    const body = [];
    if (m.content) body.push(h('p', { class: 'prose' }, String(m.content)));
    for (const call of m.tool_calls || []) {
      const fn = call.function || {};
      const args = parseArgs(fn.arguments);
      const desc = describeCall(fn.name, args);
      const slot = h('div', { class: 'tool-slot' });
      this.calls.set(call.id, slot);
      body.push(
        h(
          'div',
          { class: 'tool-call', dataset: { tool: fn.name || '' } },
          h(
            'div',
            { class: 'tool-head' },
            h('span', { class: 'tool-name' }, fn.name || 'tool'),
            ' ',
            h('span', { class: 'tool-line' }, desc.line),
          ),
          desc.body || null,
          slot,
        ),
      );
    }
    this.item(
      'ev-assistant',
      ev,
      h('div', { class: 'bubble bubble-agent' }, h('div', { class: 'bubble-head' }, 'Agent'), ...body),
    );
  }

  verify(ev, d) {
    const v = d.verify || {};
    const results = v.results || [];
    this.item(
      'ev-verify',
      ev,
      h(
        'div',
        { class: ['verify-line', v.passed ? 'is-pass' : 'is-fail'] },
        h('span', { class: 'ev-label' }, `Verification, attempt ${d.attempt ?? '?'}`),
        ' ',
        h('span', { class: ['pill', v.passed ? 'pill-good' : 'pill-bad'] }, v.passed ? 'passed' : 'failed'),
        h('span', { class: 'muted' }, ` · ${results.length} ${results.length === 1 ? 'command' : 'commands'}`),
      ),
      results
        .filter((r) => r.status !== 0)
        .map((r) =>
          foldable(h('code', null, `${r.command} → exit ${r.status}`), r.output || '(no output)', { cls: 'fold-bad' }),
        ),
    );
  }
}

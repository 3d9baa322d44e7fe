// format.js - numbers, durations and times as people read them.

const nf = new Intl.NumberFormat(undefined);
const nf1 = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });
const nf2 = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });

export function num(n) {
  return n === null || n === undefined || Number.isNaN(n) ? '—' : nf.format(n);
}

export function num1(n) {
  return n === null || n === undefined || Number.isNaN(n) ? '—' : nf1.format(n);
}

export function num2(n) {
  return n === null || n === undefined || Number.isNaN(n) ? '—' : nf2.format(n);
}

// 0.4 ms, 12 ms, 3.4 s, 4 min 12 s, 2 h 5 min
export function duration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  if (ms < 0) ms = 0;
  if (ms < 10) return `${nf1.format(ms)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const sec = ms / 1000;
  if (sec < 10) return `${nf1.format(sec)} s`;
  if (sec < 60) return `${Math.round(sec)} s`;
  const min = Math.floor(sec / 60);
  if (min < 60) {
    const rest = Math.round(sec - min * 60);
    return rest ? `${min} min ${rest} s` : `${min} min`;
  }
  const hours = Math.floor(min / 60);
  if (hours < 48) {
    const rest = min - hours * 60;
    return rest ? `${hours} h ${rest} min` : `${hours} h`;
  }
  return `${Math.round(hours / 24)} d`;
}

// A short axis label: 250 ms, 2.5 s, 1 min
export function durationShort(ms) {
  if (ms >= 60000) return `${nf1.format(ms / 60000)} min`;
  if (ms >= 1000) return `${nf1.format(ms / 1000)} s`;
  return `${nf1.format(ms)} ms`;
}

export function ago(ms, now = Date.now()) {
  if (!ms) return '—';
  const d = Math.max(0, now - ms) / 1000;
  if (d < 10) return 'just now';
  if (d < 60) return `${Math.round(d)} s ago`;
  if (d < 3600) return `${Math.round(d / 60)} min ago`;
  if (d < 86400 * 2) return `${Math.round(d / 3600)} h ago`;
  return `${Math.round(d / 86400)} d ago`;
}

const dtf = new Intl.DateTimeFormat(undefined, {
  year: 'numeric',
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});
const dtfThisYear = new Intl.DateTimeFormat(undefined, {
  month: 'short',
  day: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
  second: '2-digit',
});

export function dateTime(ms) {
  if (!ms) return '—';
  const d = new Date(ms);
  return (d.getFullYear() === new Date().getFullYear() ? dtfThisYear : dtf).format(d);
}

export function iso(ms) {
  return ms ? new Date(ms).toISOString() : '';
}

// Cost in the currency of the configured prices (no symbol: it is not ours
// to know): four significant digits.
export function cost(c) {
  if (c === null || c === undefined || Number.isNaN(c)) return '—';
  if (c === 0) return '0';
  if (Math.abs(c) < 0.0001) return '<0.0001';
  return Number(c.toPrecision(c >= 1 ? 5 : 3)).toString();
}

export function bytes(n) {
  if (n === null || n === undefined) return '—';
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${nf1.format(v)} ${units[i]}`;
}

export function percent(r) {
  if (r === null || r === undefined || Number.isNaN(r)) return '—';
  return `${Math.round(r * 100)}%`;
}

export function shortSha(sha) {
  return sha ? String(sha).slice(0, 10) : '—';
}

export function firstLine(text, max = 140) {
  const line =
    String(text || '')
      .split('\n')
      .find((l) => l.trim()) || '';
  const t = line.trim();
  return t.length > max ? t.slice(0, max - 1) + '…' : t;
}

export function plural(n, one, many = one + 's') {
  return `${num(n)} ${n === 1 ? one : many}`;
}

// charts.js - small SVG charts drawn at the width they are given (so that
// text stays 12 px on a phone and on a wide screen), redrawn when their box
// changes size. Colours come from style.css (classes), never inline styles.
//
// Every chart is an <svg role="img"> with a <title> and a <desc> that says
// in words what the bars say.

import { h, newId, replace, s } from './dom.js';

const observers = new WeakMap();

// chart(container, draw): draw(width) returns an <svg>; redrawn on resize.
export function chart(container, draw) {
  let lastWidth = 0;
  const paint = () => {
    const w = Math.floor(container.clientWidth);
    if (w <= 0 || Math.abs(w - lastWidth) < 2) return;
    lastWidth = w;
    replace(container, draw(w));
  };
  const old = observers.get(container);
  if (old) old.disconnect();
  if ('ResizeObserver' in window) {
    const ro = new ResizeObserver(() => paint());
    ro.observe(container);
    observers.set(container, ro);
  }
  // draw once now if laid out, else on the observer's first call
  lastWidth = 0;
  paint();
  if (!container.firstChild) replace(container, draw(Math.max(280, Math.floor(container.clientWidth) || 600)));
}

function frame(width, height, title, desc) {
  const tid = newId('chart-t');
  const did = newId('chart-d');
  return s(
    'svg',
    {
      class: 'chart',
      width,
      height,
      viewBox: `0 0 ${width} ${height}`,
      role: 'img',
      'aria-labelledby': `${tid} ${did}`,
    },
    s('title', { id: tid }, title),
    s('desc', { id: did }, desc),
  );
}

// Round up to 1, 2 or 5 times a power of ten.
export function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// Horizontal bars, one per item: [{label, value, tone, note}].
export function hbars(items, { title, format = String, max, labelWidth } = {}) {
  return (width) => {
    const row = 30;
    const top = 6;
    const lw = labelWidth || Math.min(150, Math.max(80, width * 0.3));
    const vw = 70; // room for the value after the bar
    const height = top + items.length * row + 4;
    const m = max || niceMax(Math.max(0, ...items.map((i) => i.value || 0)));
    const bw = Math.max(20, width - lw - vw - 8);
    const desc = items.map((i) => `${i.label}: ${format(i.value)}`).join('; ');
    const svg = frame(width, height, title, desc);
    items.forEach((it, k) => {
      const y = top + k * row;
      const w = m > 0 ? Math.max(it.value > 0 ? 2 : 0, (bw * (it.value || 0)) / m) : 0;
      svg.append(
        s(
          'text',
          { x: lw - 10, y: y + row / 2, class: 'ch-label', 'text-anchor': 'end', 'dominant-baseline': 'central' },
          it.label,
        ),
        s('rect', { x: lw, y: y + 6, width: bw, height: row - 12, rx: 3, class: 'ch-track' }),
        s('rect', {
          x: lw,
          y: y + 6,
          width: w,
          height: row - 12,
          rx: 3,
          class: ['ch-bar', it.tone ? `tone-${it.tone}` : ''],
        }),
        s(
          'text',
          { x: lw + w + 8, y: y + row / 2, class: 'ch-value', 'dominant-baseline': 'central' },
          format(it.value),
        ),
      );
    });
    return svg;
  };
}

// Vertical columns (a histogram): [{label, value}] with a y axis of counts.
export function columns(bins, { title, format = String, xTitle = '', yTitle = '', tone = 'accent' } = {}) {
  return (width) => {
    const height = 220;
    const left = 40;
    const right = 8;
    const top = yTitle ? 26 : 12;
    const bottom = xTitle ? 52 : 34;
    const ih = height - top - bottom;
    const iw = Math.max(40, width - left - right);
    // counts: whole-number ticks (0, 1, 2, 3, 4 rather than 0.25 steps)
    const step = Math.max(1, Math.ceil(niceMax(Math.max(1, ...bins.map((b) => b.value)) / 4)));
    const m = step * 4;
    const desc =
      bins
        .filter((b) => b.value > 0)
        .map((b) => `${b.label}: ${format(b.value)}`)
        .join('; ') || 'no data yet';
    const svg = frame(width, height, title, desc);
    // grid and y ticks
    const ticks = 4;
    for (let i = 0; i <= ticks; i++) {
      const v = (m * i) / ticks;
      const y = top + ih - (ih * i) / ticks;
      svg.append(
        s('line', { x1: left, x2: left + iw, y1: y, y2: y, class: i === 0 ? 'ch-axis' : 'ch-grid' }),
        s(
          'text',
          { x: left - 6, y, class: 'ch-tick', 'text-anchor': 'end', 'dominant-baseline': 'central' },
          format(v),
        ),
      );
    }
    const n = bins.length || 1;
    const slot = iw / n;
    const gap = Math.min(6, slot * 0.2);
    // label every k-th bin so that labels do not collide
    const every = Math.max(1, Math.ceil(52 / slot));
    bins.forEach((b, i) => {
      const x = left + i * slot + gap / 2;
      const bh = (ih * b.value) / m;
      svg.append(
        s('rect', {
          x,
          y: top + ih - bh,
          width: Math.max(1, slot - gap),
          height: bh,
          rx: 2,
          class: ['ch-bar', `tone-${b.tone || tone}`],
        }),
      );
      if (b.value > 0 && slot > 18) {
        svg.append(
          s(
            'text',
            { x: x + (slot - gap) / 2, y: top + ih - bh - 4, class: 'ch-value', 'text-anchor': 'middle' },
            format(b.value),
          ),
        );
      }
      if (i % every === 0) {
        svg.append(
          s('text', { x: x + (slot - gap) / 2, y: top + ih + 16, class: 'ch-tick', 'text-anchor': 'middle' }, b.label),
        );
      }
    });
    if (xTitle)
      svg.append(
        s('text', { x: left + iw / 2, y: height - 8, class: 'ch-axis-title', 'text-anchor': 'middle' }, xTitle),
      );
    if (yTitle) svg.append(s('text', { x: 4, y: 11, class: 'ch-axis-title' }, yTitle));
    return svg;
  };
}

// One horizontal bar split into parts: [{label, value, tone}]; the legend
// is HTML (it wraps on a phone).
export function stackedBar(parts, { title, format = String, total } = {}) {
  const sum = total ?? parts.reduce((n, p) => n + (p.value || 0), 0);
  const draw = (width) => {
    const height = 28;
    const desc = parts.map((p) => `${p.label}: ${format(p.value)}`).join('; ');
    const svg = frame(width, height, title, desc);
    svg.append(s('rect', { x: 0, y: 4, width, height: 20, rx: 4, class: 'ch-track' }));
    let x = 0;
    for (const p of parts) {
      if (!(p.value > 0) || !(sum > 0)) continue;
      const w = Math.max(2, (width * p.value) / sum);
      svg.append(
        s(
          'rect',
          { x, y: 4, width: Math.min(w, width - x), height: 20, class: ['ch-seg', `seg-${p.tone}`] },
          s('title', null, `${p.label}: ${format(p.value)}`),
        ),
      );
      x += w;
    }
    return svg;
  };
  return { draw, legend: legend(parts, format) };
}

export function legend(parts, format = String) {
  return h(
    'ul',
    { class: 'legend' },
    parts.map((p) =>
      h(
        'li',
        null,
        h('span', { class: ['swatch', `seg-${p.tone}`], 'aria-hidden': 'true' }),
        h('span', { class: 'legend-label' }, p.label),
        ' ',
        h('span', { class: 'legend-value' }, format(p.value)),
      ),
    ),
  );
}

// Stacked columns, one per item: items [{label, parts: {key: value}}],
// keys [{key, label, tone}].
export function stackedColumns(items, keys, { title, format = String, yTitle = '' } = {}) {
  return (width) => {
    const height = 220;
    const left = 52;
    const right = 8;
    const top = yTitle ? 26 : 14;
    const bottom = 24;
    const ih = height - top - bottom;
    const iw = Math.max(40, width - left - right);
    const totals = items.map((it) => keys.reduce((n, k) => n + (it.parts[k.key] || 0), 0));
    const m = niceMax(Math.max(0, ...totals));
    const desc = items.length
      ? `${items.length} sessions; the slowest started in ${format(Math.max(...totals))}, the fastest in ${format(Math.min(...totals))}`
      : 'no data yet';
    const svg = frame(width, height, title, desc);
    for (let i = 0; i <= 4; i++) {
      const v = (m * i) / 4;
      const y = top + ih - (ih * i) / 4;
      svg.append(
        s('line', { x1: left, x2: left + iw, y1: y, y2: y, class: i === 0 ? 'ch-axis' : 'ch-grid' }),
        s(
          'text',
          { x: left - 6, y, class: 'ch-tick', 'text-anchor': 'end', 'dominant-baseline': 'central' },
          format(v),
        ),
      );
    }
    if (yTitle) svg.append(s('text', { x: 4, y: 11, class: 'ch-axis-title' }, yTitle));
    const n = Math.max(items.length, 8);
    const slot = iw / n;
    const gap = Math.min(6, slot * 0.25);
    items.forEach((it, i) => {
      const x = left + i * slot + gap / 2;
      let y = top + ih;
      const g = s(
        'g',
        { class: 'ch-col' },
        s('title', null, `${it.label}: ${keys.map((k) => `${k.label} ${format(it.parts[k.key] || 0)}`).join(', ')}`),
      );
      for (const k of keys) {
        const v = it.parts[k.key] || 0;
        if (!(v > 0)) continue;
        const bh = Math.max(1, (ih * v) / m);
        y -= bh;
        g.append(s('rect', { x, y, width: Math.max(1, slot - gap), height: bh, class: ['ch-seg', `seg-${k.tone}`] }));
      }
      svg.append(g);
    });
    if (items.length > 1) {
      svg.append(s('text', { x: left, y: height - 6, class: 'ch-tick' }, '← older'));
      svg.append(s('text', { x: left + iw, y: height - 6, class: 'ch-tick', 'text-anchor': 'end' }, 'newer →'));
    }
    return svg;
  };
}

// A share between 0 and 1 as a ring with the percentage in the middle.
export function ring(value, { title, label, tone = 'good' } = {}) {
  const size = 112;
  const r = 44;
  const c = 2 * Math.PI * r;
  const v = value === null || value === undefined ? null : Math.max(0, Math.min(1, value));
  const svg = frame(size, size, title, v === null ? 'no data yet' : `${Math.round(v * 100)} percent`);
  svg.setAttribute('class', 'chart chart-ring');
  svg.append(
    s('circle', { cx: size / 2, cy: size / 2, r, class: 'ring-track' }),
    v === null
      ? null
      : s('circle', {
          cx: size / 2,
          cy: size / 2,
          r,
          class: ['ring-value', `stroke-${tone}`],
          'stroke-dasharray': `${c * v} ${c}`,
          transform: `rotate(-90 ${size / 2} ${size / 2})`,
        }),
    s(
      'text',
      { x: size / 2, y: size / 2 - 4, class: 'ring-number', 'text-anchor': 'middle', 'dominant-baseline': 'central' },
      v === null ? '—' : `${Math.round(v * 100)}%`,
    ),
    s(
      'text',
      { x: size / 2, y: size / 2 + 18, class: 'ring-label', 'text-anchor': 'middle', 'dominant-baseline': 'central' },
      label || '',
    ),
  );
  return svg;
}

// Rates (0..1) per label for one or more series, side by side, each bar
// with a whisker from its spread's min to max (across repeats):
// rows [{label, values: [{value, min, max}]}], series [{name, tone}].
export function rateBars(rows, series, { title, format = (v) => `${Math.round(v * 100)}%` } = {}) {
  return (width) => {
    const bar = 14;
    const gap = 4;
    const rowH = series.length * (bar + gap) + 12;
    const top = 22;
    const lw = Math.min(170, Math.max(90, width * 0.28));
    const vw = 56;
    const bw = Math.max(40, width - lw - vw - 8);
    const height = top + rows.length * rowH + 4;
    const desc = rows
      .map(
        (r) =>
          `${r.label}: ` +
          r.values
            .map(
              (v, i) =>
                `${series[i].name} ${v ? format(v.value) : 'none'}${v && v.max > v.min ? ` (repeats ${format(v.min)} to ${format(v.max)})` : ''}`,
            )
            .join(', '),
      )
      .join('; ');
    const svg = frame(width, height, title, desc || 'no finished attempt yet');
    for (const t of [0, 0.5, 1]) {
      const x = lw + bw * t;
      svg.append(
        s('line', { x1: x, x2: x, y1: top - 4, y2: height - 4, class: t === 0 ? 'ch-axis' : 'ch-grid' }),
        s('text', { x, y: 12, class: 'ch-tick', 'text-anchor': 'middle' }, format(t)),
      );
    }
    rows.forEach((r, k) => {
      const y0 = top + k * rowH + 6;
      svg.append(
        s(
          'text',
          {
            x: lw - 10,
            y: y0 + (series.length * (bar + gap)) / 2 - gap / 2,
            class: 'ch-label',
            'text-anchor': 'end',
            'dominant-baseline': 'central',
          },
          r.label,
        ),
      );
      r.values.forEach((v, i) => {
        if (!v) return;
        const y = y0 + i * (bar + gap);
        const w = Math.max(v.value > 0 ? 2 : 0, bw * v.value);
        svg.append(
          s(
            'rect',
            { x: lw, y, width: w, height: bar, rx: 2, class: ['ch-bar', `tone-${series[i].tone}`] },
            s('title', null, `${series[i].name}: ${format(v.value)}`),
          ),
        );
        if (v.max > v.min) {
          const cy = y + bar / 2;
          svg.append(
            s('line', { x1: lw + bw * v.min, x2: lw + bw * v.max, y1: cy, y2: cy, class: 'ch-whisker' }),
            s('line', { x1: lw + bw * v.min, x2: lw + bw * v.min, y1: cy - 5, y2: cy + 5, class: 'ch-whisker' }),
            s('line', { x1: lw + bw * v.max, x2: lw + bw * v.max, y1: cy - 5, y2: cy + 5, class: 'ch-whisker' }),
          );
        }
        svg.append(
          s(
            'text',
            { x: lw + bw + 8, y: y + bar / 2, class: 'ch-value', 'dominant-baseline': 'central' },
            format(v.value),
          ),
        );
      });
    });
    return svg;
  };
}

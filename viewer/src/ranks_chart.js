// The ranks page's chart: one bar per rank, stacked by kind of memory (at
// each rank's peak or at the dump) or its fragmentation, with a tick for
// the reserved memory, the median as a dashed line, a red mark over the
// ranks that ran out of memory and an amber one under those that differ.

import { formatSize, niceByteStep } from './format.js';
import { fitCanvas } from './ui.js';
import { CATEGORIES } from './categories.js';

export const MODES = [
  ['peak', 'peak, by kind', 'allocated memory at each rank\'s peak, by kind; the tick is its peak reserved'],
  ['dump', 'at the dump, by kind', 'allocated memory when the snapshot was taken, by kind; the tick is the reserved memory then'],
  ['fragmentation', 'fragmentation', 'share of the cached free memory outside its largest free block, at the dump'],
];

const REST = '#c9ced6';  // bytes no kind accounts for

// The bars of one mode: per rank its parts ({name, value, color}, stacked
// from the bottom), its total and its tick (null: none); the median, and
// the top of the scale.
export function chartModel(rep, mode) {
  const percent = mode === 'fragmentation';
  const bars = rep.ranks.map((r) => {
    if (percent) {
      const f = r.at_dump.fragmentation;
      return { parts: [{ name: 'fragmentation', value: f, color: '#7a8ca3' }], total: f, tick: null };
    }
    const kinds = mode === 'peak' ? r.kinds_peak : r.kinds_now;
    const total = mode === 'peak' ? r.peak_allocated.bytes : r.at_dump.allocated;
    const parts = CATEGORIES.map((c) => ({ name: c.name, value: kinds[c.key] || 0, color: c.color }))
      .filter((p) => p.value > 0);
    const known = parts.reduce((s, p) => s + p.value, 0);
    if (total > known) parts.push({ name: 'not classified', value: total - known, color: REST });
    return { parts, total, tick: mode === 'peak' ? r.peak_reserved.bytes : r.at_dump.reserved };
  });
  const median = percent ? rep.median.fragmentation
    : mode === 'peak' ? rep.median.peak_allocated : rep.median.allocated_now;
  let max = percent ? 0.01 : 1;
  for (const b of bars) max = Math.max(max, b.total, b.tick || 0);
  return { bars, median, max: Math.max(max, median), percent };
}

// Rank labels on the x axis: every `stride`-th bar, at least `minGap` pixels apart.
export function labelStride(bars, width, minGap = 34) {
  const w = width / Math.max(1, bars);
  for (const s of [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]) if (s * w >= minGap) return s;
  return Math.ceil(bars / 2);
}

const PAD = { left: 72, right: 12, top: 18, bottom: 30 };
const MAX_BAR = 64;  // px: a few ranks stay bars, not walls

export class RankChart {
  constructor(canvas, { marks, onHover, onSelect }) {
    this.canvas = canvas;
    this.marks = marks;  // per bar: {oom, differs}
    this.model = null;
    this.selected = -1;
    this.hover = -1;
    canvas.addEventListener('mousemove', (e) => this._hover(this.indexAt(e.offsetX)));
    canvas.addEventListener('mouseleave', () => this._hover(-1));
    canvas.addEventListener('click', (e) => {
      const i = this.indexAt(e.offsetX);
      if (i >= 0) onSelect(i);
    });
    this.onHover = onHover;
    if (typeof window !== 'undefined') window.addEventListener('resize', () => this.draw());
  }

  setModel(model) {
    this.model = model;
    this.draw();
  }

  setSelected(i) {
    this.selected = i;
    this.draw();
  }

  _hover(i) {
    if (i === this.hover) return;
    this.hover = i;
    this.onHover(i);
    this.draw();
  }

  // The bar under x (CSS pixels), or -1.
  indexAt(x) {
    if (!this.model) return -1;
    const n = this.model.bars.length;
    const w = Math.min(MAX_BAR, (this.canvas.clientWidth - PAD.left - PAD.right) / Math.max(1, n));
    const i = Math.floor((x - PAD.left) / w);
    return i >= 0 && i < n ? i : -1;
  }

  draw() {
    const m = this.model;
    if (!m) return;
    const c = this.canvas;
    const dpr = fitCanvas(c);
    const ctx = c.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const W = c.clientWidth;
    const H = c.clientHeight;
    ctx.clearRect(0, 0, W, H);
    const plotW = W - PAD.left - PAD.right;
    const plotH = H - PAD.top - PAD.bottom;
    const n = m.bars.length;
    const w = Math.min(MAX_BAR, plotW / Math.max(1, n));
    const y = (v) => PAD.top + plotH - (v / m.max) * plotH;
    const fmt = (v) => (m.percent ? `${Math.round(v * 100)}%` : formatSize(v, false));
    // What the parts below share: width, plot height, bars and their width,
    // value to y, value to text.
    const g = { W, plotH, n, w, y, fmt };
    this.drawGrid(ctx, g);
    this.drawBars(ctx, g);
    this.drawMedian(ctx, g);
    this.drawRankLabels(ctx, g);
  }

  // Grid lines and y labels.
  drawGrid(ctx, { W, y, fmt }) {
    const m = this.model;
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = '#5b6776';
    ctx.strokeStyle = '#eef1f4';
    ctx.lineWidth = 1;
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    const step = m.percent ? (m.max > 0.5 ? 0.2 : m.max > 0.2 ? 0.1 : 0.05) : niceByteStep(m.max, 5);
    for (let v = 0; v <= m.max * 1.0001; v += step) {
      ctx.beginPath();
      ctx.moveTo(PAD.left, Math.round(y(v)) + 0.5);
      ctx.lineTo(W - PAD.right, Math.round(y(v)) + 0.5);
      ctx.stroke();
      ctx.fillText(fmt(v), PAD.left - 6, y(v));
    }
  }

  // The selected and hovered columns, then each rank's bar with its marks.
  drawBars(ctx, { plotH, n, w, y }) {
    const m = this.model;
    /** @type {[number, string][]} */
    const marked = [[this.selected, '#e6f0fa'], [this.hover, '#f0f3f7']];
    for (const [i, color] of marked) {
      if (i < 0 || i >= n) continue;
      ctx.fillStyle = color;
      ctx.fillRect(PAD.left + i * w, PAD.top, Math.max(1, w), plotH);
    }
    const gap = w > 6 ? Math.min(3, w * 0.15) : 0;
    for (let i = 0; i < n; i++) {
      const b = m.bars[i];
      const x0 = PAD.left + i * w + gap / 2;
      const bw = Math.max(1, w - gap);
      let acc = 0;
      for (const p of b.parts) {
        const top = y(acc + p.value);
        ctx.fillStyle = p.color;
        ctx.fillRect(x0, top, bw, y(acc) - top);
        acc += p.value;
      }
      if (b.tick !== null && b.tick > 0) {
        ctx.fillStyle = '#1d2633';
        ctx.fillRect(x0, Math.round(y(b.tick)) - 1, bw, 2);
      }
      const mk = this.marks[i] || {};
      if (mk.oom) {
        const cx = x0 + bw / 2;
        const top = Math.min(y(b.total), b.tick ? y(b.tick) : Infinity) - 3;
        const s = Math.max(3, Math.min(6, w / 2));
        ctx.fillStyle = '#c9302c';
        ctx.beginPath();
        ctx.moveTo(cx, top);
        ctx.lineTo(cx - s, top - 1.6 * s);
        ctx.lineTo(cx + s, top - 1.6 * s);
        ctx.fill();
      }
      if (mk.differs) {
        ctx.fillStyle = '#e09b16';
        ctx.fillRect(x0, PAD.top + plotH + 2, bw, 3);
      }
    }
  }

  // The median, dashed, and its label.
  drawMedian(ctx, { W, y, fmt }) {
    const m = this.model;
    ctx.strokeStyle = '#1d2633';
    ctx.setLineDash([5, 4]);
    ctx.beginPath();
    ctx.moveTo(PAD.left, Math.round(y(m.median)) + 0.5);
    ctx.lineTo(W - PAD.right, Math.round(y(m.median)) + 0.5);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.textAlign = 'left';
    ctx.textBaseline = 'bottom';
    ctx.fillStyle = '#1d2633';
    ctx.fillText(`median ${fmt(m.median)}`, PAD.left + 4, y(m.median) - 2);
  }

  // x labels: rank numbers, as many as fit.
  drawRankLabels(ctx, { plotH, n, w }) {
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    ctx.fillStyle = '#5b6776';
    const stride = labelStride(n, w * n);
    for (let i = 0; i < n; i += stride) {
      ctx.fillText(String(this.marks[i]?.rank ?? i), PAD.left + (i + 0.5) * w, PAD.top + plotH + 8);
    }
  }
}

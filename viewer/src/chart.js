// A time chart on a canvas for the profiler pages: lines or stacked areas
// over time, shaded bands (profiler steps), a marked peak, hover readout,
// wheel zoom, drag pan and double-click reset. The pure parts (stacking,
// ticks, lookup) are exported for the node tests.

import { upperBound } from './format.js';
import { fitCanvas, frameScheduler } from './ui.js';

// Cumulative sums of the series, bottom first: out[k][i] = sum of series 0..k at i.
export function stackSeries(series) {
  const out = [];
  let prev = null;
  for (const s of series) {
    const acc = new Float64Array(s.length);
    for (let i = 0; i < s.length; i++) acc[i] = s[i] + (prev ? prev[i] : 0);
    out.push(acc);
    prev = acc;
  }
  return out;
}

// The index of the last point at or before x (ts ascending); 0 before the first.
export function indexAt(ts, x) {
  return Math.max(0, upperBound(ts, x) - 1);
}

// About n round tick values covering [lo, hi].
export function ticks(lo, hi, n) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / Math.max(1, n);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
  return out;
}

// Byte ticks at powers of two of KiB/MiB/GiB, like the snapshot timelines.
export function byteTicks(max, n) {
  if (!(max > 0)) return [0];
  const raw = max / Math.max(1, n);
  let step = 1;
  while (step * 2 <= raw) step *= 2;
  if (step < raw) step *= 2;
  const out = [];
  for (let v = 0; v <= max + 1e-9; v += step) out.push(v);
  return out;
}

const PAD = { left: 70, right: 12, top: 10, bottom: 26 };

export class TimeChart {
  // opts: {ts (ms), series: [{name, color, values}], stacked, bands: [{x0, x1, label}] by x0,
  //        peak: index or -1, formatY(v), formatX(v), onHover(index | -1)}
  constructor(canvas, opts) {
    this.canvas = canvas;
    this.o = opts;
    this.ts = opts.ts;
    // Band starts, ascending (bands come in time order), to find those in view.
    this.bandStarts = Float64Array.from(opts.bands || [], (b) => b.x0);
    this.tops = opts.stacked ? stackSeries(opts.series.map((s) => s.values)) : opts.series.map((s) => s.values);
    this.maxY = 0;
    for (const t of this.tops) for (const v of t) this.maxY = Math.max(this.maxY, v);
    const n = this.ts.length;
    this.full = [n ? this.ts[0] : 0, n ? this.ts[n - 1] : 1];
    if (this.full[1] <= this.full[0]) this.full[1] = this.full[0] + 1;
    this.view = this.full.slice();
    this.hover = -1;
    this.schedule = frameScheduler(() => this.draw());
    this.bind();
    this.schedule();
  }

  xOf(t, w) { return PAD.left + (t - this.view[0]) / (this.view[1] - this.view[0]) * (w - PAD.left - PAD.right); }

  tOf(px, w) { return this.view[0] + (px - PAD.left) / (w - PAD.left - PAD.right) * (this.view[1] - this.view[0]); }

  bind() {
    const c = this.canvas;
    let drag = null;
    const cssX = (e) => e.clientX - c.getBoundingClientRect().left;
    c.addEventListener('wheel', (e) => {
      e.preventDefault();
      const w = c.getBoundingClientRect().width;
      const at = this.tOf(cssX(e), w);
      const k = e.deltaY < 0 ? 0.8 : 1.25;
      this.setView(at - (at - this.view[0]) * k, at + (this.view[1] - at) * k);
    }, { passive: false });
    c.addEventListener('mousedown', (e) => { drag = { x: cssX(e), view: this.view.slice() }; });
    window.addEventListener('mouseup', () => { drag = null; });
    c.addEventListener('mousemove', (e) => {
      const w = c.getBoundingClientRect().width;
      if (drag) {
        const dt = (cssX(e) - drag.x) / (w - PAD.left - PAD.right) * (drag.view[1] - drag.view[0]);
        this.setView(drag.view[0] - dt, drag.view[1] - dt);
      }
      this.setHover(this.ts.length ? indexAt(this.ts, this.tOf(cssX(e), w)) : -1);
    });
    c.addEventListener('mouseleave', () => this.setHover(-1));
    c.addEventListener('dblclick', () => this.setView(this.full[0], this.full[1]));
    window.addEventListener('resize', () => this.schedule());
  }

  setView(a, b) {
    const span = this.full[1] - this.full[0];
    const min = span * 1e-6;
    if (b - a < min) [a, b] = [(a + b) / 2 - min / 2, (a + b) / 2 + min / 2];
    if (b - a > span) [a, b] = this.full;
    if (a < this.full[0]) [a, b] = [this.full[0], this.full[0] + (b - a)];
    if (b > this.full[1]) [a, b] = [this.full[1] - (b - a), this.full[1]];
    this.view = [a, b];
    this.schedule();
  }

  setHover(i) {
    if (i === this.hover) return;
    this.hover = i;
    if (this.o.onHover) this.o.onHover(i);
    this.schedule();
  }

  draw() {
    const c = this.canvas;
    const dpr = fitCanvas(c);
    const ctx = c.getContext('2d');
    const w = c.width / dpr;
    const hgt = c.height / dpr;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, hgt);
    const y0 = hgt - PAD.bottom;
    const yScale = (y0 - PAD.top) / (this.maxY || 1);
    const yOf = (v) => y0 - v * yScale;
    ctx.font = '11px system-ui, sans-serif';
    this.drawSteps(ctx, w, y0);
    this.drawAxes(ctx, w, hgt, yOf);
    this.drawSeries(ctx, w, y0, yOf);
    this.drawMarks(ctx, w, y0);
  }

  // The steps' bands behind the series: only those in view, and at most one
  // per pixel column (a trace can hold 200,000 of them).
  drawSteps(ctx, w, y0) {
    const bands = this.o.bands || [];
    let lastPx = -1;
    for (let k = Math.max(0, upperBound(this.bandStarts, this.view[0]) - 1); k < bands.length; k++) {
      const b = bands[k];
      if (b.x0 > this.view[1]) break;
      const a = Math.max(PAD.left, this.xOf(b.x0, w));
      const z = Math.min(w - PAD.right, this.xOf(b.x1, w));
      if (z <= a) continue;
      if (z - a < 1) {
        if (Math.floor(a) === lastPx) continue;
        lastPx = Math.floor(a);
      }
      ctx.fillStyle = k % 2 ? 'rgba(80,110,160,0.06)' : 'rgba(80,110,160,0.12)';
      ctx.fillRect(a, PAD.top, Math.max(1, z - a), y0 - PAD.top);
      ctx.fillStyle = '#6a7686';
      if (z - a > 40) ctx.fillText(b.label, a + 3, PAD.top + 11);
    }
  }

  // Bytes up the left with their grid lines, the x labels along the bottom.
  drawAxes(ctx, w, hgt, yOf) {
    ctx.strokeStyle = '#e6eaef';
    ctx.fillStyle = '#5b6776';
    ctx.textAlign = 'right';
    for (const v of byteTicks(this.maxY, 5)) {
      const y = yOf(v);
      ctx.beginPath();
      ctx.moveTo(PAD.left, y);
      ctx.lineTo(w - PAD.right, y);
      ctx.stroke();
      ctx.fillText(this.o.formatY(v), PAD.left - 6, y + 4);
    }
    ctx.textAlign = 'center';
    for (const t of ticks(this.view[0], this.view[1], Math.max(2, Math.floor(w / 110)))) {
      ctx.fillText(this.o.formatX(t), this.xOf(t, w), hgt - 8);
    }
  }

  // The series, only the points in view (and one either side).
  drawSeries(ctx, w, y0, yOf) {
    const n = this.ts.length;
    const i0 = Math.max(0, indexAt(this.ts, this.view[0]) - 1);
    const i1 = Math.min(n - 1, indexAt(this.ts, this.view[1]) + 1);
    ctx.save();
    ctx.beginPath();
    ctx.rect(PAD.left, PAD.top, w - PAD.left - PAD.right, y0 - PAD.top);
    ctx.clip();
    for (let k = this.tops.length - 1; k >= 0; k--) {
      const top = this.tops[k];
      const below = this.o.stacked && k > 0 ? this.tops[k - 1] : null;
      const color = this.o.series[k].color;
      ctx.beginPath();
      for (let i = i0; i <= i1; i++) {
        const x = this.xOf(this.ts[i], w);
        const y = yOf(top[i]);
        if (i === i0) ctx.moveTo(x, y);
        else {  // steps: memory holds its value until the next point
          ctx.lineTo(x, yOf(top[i - 1]));
          ctx.lineTo(x, y);
        }
      }
      if (this.o.stacked) {
        for (let i = i1; i >= i0; i--) {
          const x = this.xOf(this.ts[i], w);
          ctx.lineTo(x, below ? yOf(below[i]) : y0);
          if (i > i0) ctx.lineTo(this.xOf(this.ts[i], w), below ? yOf(below[i - 1]) : y0);
        }
        ctx.closePath();
        ctx.fillStyle = color;
        ctx.globalAlpha = 0.8;
        ctx.fill();
        ctx.globalAlpha = 1;
      } else {
        ctx.strokeStyle = color;
        ctx.lineWidth = 1.5;
        ctx.stroke();
      }
    }
    ctx.restore();
  }

  // The peak and the hovered point.
  drawMarks(ctx, w, y0) {
    const n = this.ts.length;
    const mark = (i, color, dash) => {
      if (i < 0 || i >= n) return;
      const x = this.xOf(this.ts[i], w);
      if (x < PAD.left || x > w - PAD.right) return;
      ctx.strokeStyle = color;
      ctx.setLineDash(dash);
      ctx.beginPath();
      ctx.moveTo(x, PAD.top);
      ctx.lineTo(x, y0);
      ctx.stroke();
      ctx.setLineDash([]);
    };
    mark(this.o.peak ?? -1, '#c0392b', [4, 3]);
    mark(this.hover, '#1d2633', []);
  }
}

// record_function scopes and other annotations (the engine's an.* device
// columns: name, start and end in µs, -1 where the recording holds no START
// or no END) as labelled ranges on the timelines: a strip of lanes above the
// plot, nested scopes one lane lower, and the hovered scope marked across
// the plot.

import { TABLEAU10, countOf, formatCount, formatDuration, hashCode } from './format.js';
import { h } from './ui.js';

const LANE = 15;      // css px per lane
const MAX_LANES = 4;  // deeper scopes share the last lane

export class AnnotationModel {
  constructor(dev) {
    this.dev = dev;
    const has = dev.page.has('dev.an.name');
    const name = has ? dev.col('an.name') : new Uint32Array(0);
    const start = has ? dev.col('an.start') : new Float64Array(0);
    const end = has ? dev.col('an.end') : new Float64Array(0);
    this.n = name.length;
    this.nameId = name;
    this.openStart = new Uint8Array(this.n);
    this.openEnd = new Uint8Array(this.n);
    // On the page's clock: an unknown start is the first event, an unknown
    // end the last.
    const times = dev.times;
    const first = dev.n ? times[0] : dev.meta.t0;
    const last = dev.n ? times[dev.n - 1] : dev.meta.t0;
    this.t0 = new Float64Array(this.n);
    this.t1 = new Float64Array(this.n);
    for (let i = 0; i < this.n; i++) {
      this.openStart[i] = start[i] < 0 ? 1 : 0;
      this.openEnd[i] = end[i] < 0 ? 1 : 0;
      this.t0[i] = start[i] < 0 ? first : start[i];
      this.t1[i] = end[i] < 0 ? Math.max(last, this.t0[i]) : end[i];
    }
    // Lanes: each range on the first lane free at its start (ranges come
    // sorted by start), so scopes inside scopes go one lane down.
    this.lane = new Uint8Array(this.n);
    const laneEnd = [];
    for (let i = 0; i < this.n; i++) {
      let l = laneEnd.findIndex((t) => t <= this.t0[i]);
      if (l < 0) {
        l = laneEnd.length;
        laneEnd.push(0);
      }
      laneEnd[l] = this.t1[i];
      this.lane[i] = Math.min(l, MAX_LANES - 1);
    }
    this.lanes = Math.min(laneEnd.length, MAX_LANES);
    this.deepest = laneEnd.length;
    this._states = null;
  }

  name(i) { return this.dev.page.str(this.nameId[i]); }

  // Range i in events: [first, end) are the events inside it; on the
  // events axis it spans the states from `first` (after event first-1, when
  // it began) to `end` (when it ended).
  states(i) {
    if (!this._states) {
      const times = this.dev.times;
      const n = this.dev.n;
      const s0 = new Int32Array(this.n);
      const s1 = new Int32Array(this.n);
      for (let k = 0; k < this.n; k++) {
        s0[k] = this.openStart[k] ? 0 : lowerBound(times, this.t0[k], n);
        s1[k] = this.openEnd[k] ? n : Math.max(s0[k], lowerBound(times, this.t1[k], n));
      }
      this._states = [s0, s1];
    }
    return [this._states[0][i], this._states[1][i]];
  }

  // Range i on an axis: [a, b) in states, or µs when axis === 'time'.
  span(i, axis) {
    if (axis === 'time') return [this.t0[i], this.t1[i]];
    const [a, b] = this.states(i);
    return [a, b + 1];
  }

  // The ranges event i happened in, outermost first.
  at(i) {
    const out = [];
    for (let k = 0; k < this.n; k++) {
      const [a, b] = this.states(k);
      if (a <= i && i < b) out.push(k);
    }
    return out;
  }

  color(i) { return TABLEAU10[Math.abs(hashCode(this.name(i))) % 10]; }

  // What the tooltip says about range i.
  describe(i) {
    const dev = this.dev;
    const [s0, s1] = this.states(i);
    const from = this.openStart[i] ? 'before the recording began' : `at +${formatDuration(this.t0[i] - dev.times[0])}`;
    const to = this.openEnd[i] ? 'still open at the snapshot' : `at +${formatDuration(this.t1[i] - dev.times[0])}`;
    const lines = [this.name(i), `from ${from} to ${to}`];
    if (!this.openStart[i] && !this.openEnd[i]) lines.push(`lasted ${formatDuration(this.t1[i] - this.t0[i])}`);
    const evs = Math.max(0, s1 - s0);
    if (dev.n) {
      lines.push(evs ? `${countOf(evs, 'allocator event')}: trace entries ` +
        `${formatCount(dev.entry(s0))} to ${formatCount(dev.entry(Math.max(s0, s1 - 1)))}` : 'no allocator event inside');
    }
    return lines.join('\n');
  }

  // Indices of ranges whose name contains q (case-insensitive).
  matching(q) {
    const out = [];
    q = q.trim().toLowerCase();
    if (!q) return out;
    for (let i = 0; i < this.n; i++) if (this.name(i).toLowerCase().includes(q)) out.push(i);
    return out;
  }
}

// How many of the first n values of the ascending array a are < x.
function lowerBound(a, x, n) {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export function annotationModel(dev) {
  if (!dev._annotations) dev._annotations = new AnnotationModel(dev);
  return dev._annotations;
}

// The strip of a timeline view: its canvas sits above the plot and shares
// its horizontal scale (view.x0, view.x1, view.axis, view.g).
export class AnnotationStrip {
  constructor(view) {
    this.view = view;
    this.model = annotationModel(view.dev);
    this.hover = -1;
    this.boxes = [];
    this.canvas = h('canvas', {
      class: 'annot-strip', 'aria-label': 'record_function scopes and other annotations',
      style: { height: `${this.model.lanes * LANE + (this.model.lanes ? 4 : 0)}px` },
    });
    if (!this.model.n) this.canvas.hidden = true;
    this.canvas.addEventListener('mousemove', (e) => this.move(e));
    this.canvas.addEventListener('mouseleave', () => this.setHover(-1));
    this.canvas.addEventListener('click', () => {
      if (this.hover >= 0) this.zoomTo(this.hover);
    });
  }

  draw() {
    const v = this.view;
    const g = v.g;
    if (!this.model.n || !g) return;
    const cv = this.canvas;
    const dpr = g.dpr;
    const W = Math.max(1, Math.round(cv.getBoundingClientRect().width * dpr));
    const H = Math.max(1, Math.round((this.model.lanes * LANE + 4) * dpr));
    if (cv.width !== W || cv.height !== H) {
      cv.width = W;
      cv.height = H;
    }
    const ctx = cv.getContext('2d');
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, W, H);
    ctx.font = `${10.5 * dpr}px system-ui, sans-serif`;
    ctx.textBaseline = 'middle';
    const md = this.model;
    const span = v.x1 - v.x0;
    this.boxes = [];
    for (let i = 0; i < md.n; i++) {
      const [a, b] = md.span(i, v.axis);
      if (b < v.x0 || a > v.x1) continue;
      const xa = Math.max(g.L, g.L + (a - v.x0) / span * g.pw);
      const xb = Math.min(g.L + g.pw, g.L + (b - v.x0) / span * g.pw);
      const w = Math.max(1, xb - xa);
      const y = (2 + md.lane[i] * LANE) * dpr;
      const hh = (LANE - 3) * dpr;
      ctx.globalAlpha = i === this.hover ? 1 : 0.75;
      ctx.fillStyle = md.color(i);
      ctx.fillRect(xa, y, w, hh);
      if (md.openStart[i] || md.openEnd[i]) {
        // An open end fades out: the scope went on past the recording.
        ctx.fillStyle = 'rgba(255,255,255,0.6)';
        if (md.openStart[i]) ctx.fillRect(xa, y, Math.min(w, 4 * dpr), hh);
        if (md.openEnd[i]) ctx.fillRect(xa + w - Math.min(w, 4 * dpr), y, Math.min(w, 4 * dpr), hh);
      }
      ctx.globalAlpha = 1;
      if (w > 30 * dpr) {
        ctx.save();
        ctx.beginPath();
        ctx.rect(xa, y, w, hh);
        ctx.clip();
        ctx.fillStyle = '#fff';
        ctx.fillText(md.name(i), xa + 3 * dpr, y + hh / 2);
        ctx.restore();
      }
      this.boxes.push([i, xa, y, w, hh]);
    }
  }

  // The hovered range, shaded across the plot (called by the view's overlay).
  drawMarkers(ctx) {
    const v = this.view;
    const g = v.g;
    if (this.hover < 0 || !g) return;
    const [a, b] = this.model.span(this.hover, v.axis);
    const span = v.x1 - v.x0;
    const xa = Math.max(g.L, g.L + (a - v.x0) / span * g.pw);
    const xb = Math.min(g.L + g.pw, g.L + (b - v.x0) / span * g.pw);
    if (xb < g.L || xa > g.L + g.pw) return;
    ctx.fillStyle = 'rgba(47,111,179,0.10)';
    ctx.fillRect(xa, g.T, Math.max(1, xb - xa), g.ph);
    ctx.strokeStyle = 'rgba(47,111,179,0.8)';
    ctx.setLineDash([]);
    ctx.lineWidth = g.dpr;
    for (const x of [xa, xb]) {
      ctx.beginPath();
      ctx.moveTo(Math.round(x) + 0.5, g.T);
      ctx.lineTo(Math.round(x) + 0.5, g.T + g.ph);
      ctx.stroke();
    }
  }

  at(e) {
    const r = this.canvas.getBoundingClientRect();
    const dpr = this.view.g ? this.view.g.dpr : 1;
    const x = (e.clientX - r.left) * dpr;
    const y = (e.clientY - r.top) * dpr;
    for (let k = this.boxes.length - 1; k >= 0; k--) {
      const [i, bx, by, bw, bh] = this.boxes[k];
      if (x >= bx - 2 * dpr && x <= bx + bw + 2 * dpr && y >= by && y <= by + bh) return i;
    }
    return -1;
  }

  move(e) {
    const i = this.at(e);
    this.setHover(i);
    if (i >= 0) this.view.app.tooltip.show(e.clientX, e.clientY, this.model.describe(i));
  }

  setHover(i) {
    if (i === this.hover) return;
    this.hover = i;
    if (i < 0) this.view.app.tooltip.hide();
    this.canvas.style.cursor = i >= 0 ? 'zoom-in' : '';
    this.draw();
    this.view.scheduleOverlay();
  }

  // Zooms the view to range i (a little margin around it).
  zoomTo(i) {
    const v = this.view;
    const [a, b] = this.model.span(i, v.axis);
    const pad = Math.max(v.minSpan() / 2, (b - a) * 0.05);
    v.panTo(a - pad, b + pad, true);
  }
}

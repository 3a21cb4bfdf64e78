// The timeline view's canvases besides the bands (view_timeline.js paints
// those): the axes, the overlay (the hovered and pinned elements, the
// pointer's line, the annotation markers) and the minimap with its window.

import { formatCount, formatDurationTick, formatSize, niceStep } from './format.js';
import { SUMMARY_ID } from './timeline.js';
import { fitCanvas } from './ui.js';

// Bytes up the left, events or time along the bottom, on the bands' canvas.
export function drawTimelineAxes(view, ctx, g) {
  const dpr = g.dpr;
  ctx.save();
  ctx.font = `${11 * dpr}px system-ui, sans-serif`;
  ctx.fillStyle = '#5b6470';
  ctx.strokeStyle = 'rgba(30,40,60,0.10)';
  ctx.lineWidth = 1;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (let v = 0; v <= view.yMax + 1e-6; v += view.yStep) {
    const y = Math.round(g.T + g.ph - v * view.pxPerByte) + 0.5;
    ctx.beginPath();
    ctx.moveTo(g.L, y);
    ctx.lineTo(g.L + g.pw, y);
    ctx.stroke();
    ctx.fillText(formatSize(v, false), g.L - 6 * dpr, y);
  }
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  const span = view.x1 - view.x0;
  const step = niceStep(span, Math.max(2, g.pw / (110 * dpr)));
  const base = view.axis === 'time' ? view.dev.times[0] : 0;
  const first = base + Math.ceil((view.x0 - base) / step) * step;
  for (let x = first; x <= view.x1; x += step) {
    const px = Math.round(view.xToPx(x, g)) + 0.5;
    ctx.beginPath();
    ctx.moveTo(px, g.T + g.ph);
    ctx.lineTo(px, g.T + g.ph + 4 * dpr);
    ctx.strokeStyle = '#8a93a0';
    ctx.stroke();
    const label = view.axis === 'time' ? formatDurationTick(x - base, step, view.x1 - base) : formatCount(x);
    ctx.fillText(label, px, g.T + g.ph + 6 * dpr);
  }
  ctx.strokeStyle = '#8a93a0';
  ctx.beginPath();
  ctx.moveTo(g.L - 0.5, g.T);
  ctx.lineTo(g.L - 0.5, g.T + g.ph + 0.5);
  ctx.lineTo(g.L + g.pw, g.T + g.ph + 0.5);
  ctx.stroke();
  ctx.restore();
}

// Redrawn alone on hover, so that the bands need not be painted again.
export function drawTimelineOverlay(view) {
  const g = view.g;
  if (!g) return;
  const ctx = view.overlay.getContext('2d');
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.clearRect(0, 0, view.overlay.width, view.overlay.height);
  const mark = (id, fill) => {
    if (id < 0 && id !== SUMMARY_ID) return;
    const { off, ids, y0, y1 } = view.spans;
    ctx.fillStyle = fill;
    let runStart = -1;
    let ra = 0;
    let rb = 0;
    const flush = (c) => {
      if (runStart >= 0) ctx.fillRect(g.L + runStart, g.T + g.ph - rb, c - runStart, rb - ra);
      runStart = -1;
    };
    for (let c = 0; c < g.pw; c++) {
      let a = -1;
      let b = -1;
      for (let k = off[c]; k < off[c + 1]; k++) {
        if (ids[k] === id) {
          a = y0[k];
          b = y1[k];
          break;
        }
      }
      if (a < 0) {
        flush(c);
        continue;
      }
      if (runStart >= 0 && (a !== ra || b !== rb)) flush(c);
      if (runStart < 0) {
        runStart = c;
        ra = a;
        rb = b;
      }
    }
    flush(g.pw);
  };
  view.strip.drawMarkers(ctx);
  if (view.pinned !== -1) mark(view.pinned, 'rgba(10,20,40,0.45)');
  if (view.hover !== -1 && view.hover !== view.pinned) mark(view.hover, 'rgba(10,20,40,0.28)');
  if (view.mouse && view.mouse.inPlot) {
    const px = Math.round(view.mouse.px) + 0.5;
    ctx.strokeStyle = 'rgba(20,30,50,0.35)';
    ctx.setLineDash([3 * g.dpr, 3 * g.dpr]);
    ctx.beginPath();
    ctx.moveTo(px, g.T);
    ctx.lineTo(px, g.T + g.ph);
    ctx.stroke();
  }
}

// The whole domain's curve and the window on it.
export function drawTimelineMinimap(view) {
  const dpr = fitCanvas(view.minimap);
  const ctx = view.minimap.getContext('2d');
  const W = view.minimap.width;
  const H = view.minimap.height;
  const g = view.g;
  const L = g.L;
  const pw = g.pw;
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.clearRect(0, 0, W, H);
  const md = view.model;
  const { env, bucket, peak: top } = md.envelope();
  const [d0, d1] = view.domain();
  const peak = Math.max(1, top);
  const xOf = (x) => L + (x - d0) / (d1 - d0) * pw;
  ctx.fillStyle = '#e9eef5';
  ctx.fillRect(L, 0, pw, H);
  ctx.beginPath();
  ctx.moveTo(L, H);
  for (let b = 0; b < env.length; b++) {
    let xa;
    let xb;
    if (view.axis === 'time') {
      xa = xOf(view.dev.times[Math.min(md.n - 1, b * bucket)]);
      xb = xOf(view.dev.times[Math.min(md.n - 1, (b + 1) * bucket - 1)]);
    } else {
      xa = xOf(b * bucket + 1);
      xb = xOf(Math.min(md.n, (b + 1) * bucket) + 1);
    }
    const y = H - 2 * dpr - (env[b] / peak) * (H - 6 * dpr);
    ctx.lineTo(xa, y);
    ctx.lineTo(xb, y);
  }
  ctx.lineTo(L + pw, H);
  ctx.closePath();
  ctx.fillStyle = '#8fb3d9';
  ctx.fill();
  const a = Math.max(L, xOf(view.x0));
  const b = Math.min(L + pw, xOf(view.x1));
  ctx.fillStyle = 'rgba(245,247,250,0.72)';
  ctx.fillRect(L, 0, a - L, H);
  ctx.fillRect(b, 0, L + pw - b, H);
  ctx.strokeStyle = '#2f6fb3';
  ctx.lineWidth = 1.5 * dpr;
  ctx.strokeRect(a, 0.75 * dpr, Math.max(2 * dpr, b - a), H - 1.5 * dpr);
  view.mini = { L, pw, d0, d1, dpr };
}

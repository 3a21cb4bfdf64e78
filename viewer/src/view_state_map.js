// The state view's memory map: the selected event's segments as rows of
// boxes, their blocks inside, drawn on a canvas that wheel zooms and drag
// pans; hover shows an item's details.

import { fitCanvas } from './ui.js';

// Device pixels: the map's padding, row height and bytes-to-pixels scale.
function stateMapGeometry(view) {
  const dpr = fitCanvas(view.canvas);
  const W = view.canvas.width;
  const H = view.canvas.height;
  const L = view.layout;
  const pad = 8 * dpr;
  const rows = Math.max(1, L.rows);
  const rowH = Math.max(6 * dpr, Math.min(46 * dpr, (H - 2 * pad) / rows));
  const scale = (W - 2 * pad) / Math.max(1, L.rowWidth);
  return { dpr, W, H, pad, rowH, scale };
}

export function drawStateMap(view) {
  if (!view.layout || !view.el.isConnected) return;
  const g = stateMapGeometry(view);
  view.mg = g;
  const ctx = view.canvas.getContext('2d');
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.clearRect(0, 0, g.W, g.H);
  const z = view.zoom;
  ctx.setTransform(z.k, 0, 0, z.k, z.x, z.y);
  const px = 1 / z.k;  // one device pixel in drawing units
  for (const s of view.layout.segs) {
    const x = g.pad + s.x * g.scale;
    const y = g.pad + s.row * g.rowH;
    const w = Math.max(px, s.size * g.scale - 1.5 * g.dpr * px);
    const hh = g.rowH * 0.8;
    ctx.fillStyle = '#ffffff';
    ctx.fillRect(x, y, w, hh);
    for (const b of s.blocks) {
      const bx = g.pad + b.x * g.scale;
      const bw = Math.max(px, b.requested * g.scale);
      ctx.fillStyle = b.color;
      ctx.fillRect(bx, y, bw, hh);
      const lost = b.size - b.requested;
      if (lost > 0) {
        ctx.fillStyle = '#d62728';
        ctx.fillRect(bx + b.requested * g.scale, y, Math.max(px * 0.5, lost * g.scale), hh);
      }
      if (bw > 3 * px) {
        ctx.fillStyle = 'rgba(255,255,255,0.55)';
        ctx.fillRect(bx, y, px, hh);  // a hairline between neighbouring blocks
      }
    }
    ctx.lineWidth = px * g.dpr;
    ctx.strokeStyle = view.hoverItem && view.hoverItem.seg === s ? '#1f3b5c' : '#2b2f36';
    ctx.strokeRect(x, y, w, hh);
  }
  if (view.list.blockMatches) {
    // Search matches, outlined.
    ctx.lineWidth = 2 * px * g.dpr;
    ctx.strokeStyle = '#ff7f0e';
    for (const s of view.layout.segs) {
      for (const b of s.blocks) {
        if (view.list.blockMatches(b)) {
          ctx.strokeRect(g.pad + b.x * g.scale, g.pad + s.row * g.rowH, Math.max(px, b.size * g.scale), g.rowH * 0.8);
        }
      }
    }
  }
  if (view.hoverItem && view.hoverItem.block) {
    const b = view.hoverItem.block;
    const s = b.seg;
    ctx.lineWidth = 2 * px * g.dpr;
    ctx.strokeStyle = '#111';
    ctx.strokeRect(g.pad + b.x * g.scale, g.pad + s.row * g.rowH, Math.max(px, b.size * g.scale), g.rowH * 0.8);
  }
}

// The segment and block under a point in CSS pixels.
function stateMapItemAt(view, cx, cy) {
  const g = view.mg;
  if (!g || !view.layout) return null;
  const z = view.zoom;
  const x = (cx * g.dpr - z.x) / z.k;
  const y = (cy * g.dpr - z.y) / z.k;
  const row = Math.floor((y - g.pad) / g.rowH);
  if ((y - g.pad) - row * g.rowH > g.rowH * 0.8) return null;
  const bx = (x - g.pad) / g.scale;
  for (const s of view.layout.segs) {
    if (s.row !== row || bx < s.x || bx >= s.x + s.size) continue;
    for (const b of s.blocks) if (bx >= b.x && bx < b.x + b.size) return { seg: s, block: b };
    return { seg: s, block: null };
  }
  return null;
}

// Hover shows the item under the pointer; drag pans, wheel zooms around the
// pointer, double-click resets.
export function attachStateMapPointer(view) {
  const cv = view.canvas;
  let drag = null;
  cv.addEventListener('mousemove', (e) => {
    const r = cv.getBoundingClientRect();
    if (drag) {
      view.zoom.x = drag.zx + (e.clientX - drag.x) * view.mg.dpr;
      view.zoom.y = drag.zy + (e.clientY - drag.y) * view.mg.dpr;
      view.scheduleMap();
      return;
    }
    const item = stateMapItemAt(view, e.clientX - r.left, e.clientY - r.top);
    const same = item && view.hoverItem && item.seg === view.hoverItem.seg && item.block === view.hoverItem.block;
    if (same) {
      view.app.tooltip.show(e.clientX, e.clientY, view.tooltipFor(item));
      return;
    }
    view.hoverItem = item;
    if (!item) {
      view.app.tooltip.hide();
      view.showEventDetails();
    } else {
      view.app.tooltip.show(e.clientX, e.clientY, view.tooltipFor(item));
      view.showItemDetails(item);
    }
    view.scheduleMap();
  });
  cv.addEventListener('mouseleave', () => {
    view.hoverItem = null;
    view.app.tooltip.hide();
    view.showEventDetails();
    view.scheduleMap();
  });
  cv.addEventListener('mousedown', (e) => {
    drag = { x: e.clientX, y: e.clientY, zx: view.zoom.x, zy: view.zoom.y };
    const up = () => {
      drag = null;
      window.removeEventListener('mouseup', up);
    };
    window.addEventListener('mouseup', up);
    e.preventDefault();
  });
  cv.addEventListener('wheel', (e) => {
    e.preventDefault();
    const r = cv.getBoundingClientRect();
    const dpr = view.mg ? view.mg.dpr : 1;
    const mx = (e.clientX - r.left) * dpr;
    const my = (e.clientY - r.top) * dpr;
    const f = Math.exp(-e.deltaY * (e.deltaMode ? 30 : 1) * 0.002);
    const k = Math.max(1, Math.min(4000, view.zoom.k * f));
    const ff = k / view.zoom.k;
    view.zoom.x = mx - (mx - view.zoom.x) * ff;
    view.zoom.y = my - (my - view.zoom.y) * ff;
    view.zoom.k = k;
    if (k === 1) view.zoom = { k: 1, x: 0, y: 0 };
    view.scheduleMap();
  }, { passive: false });
  cv.addEventListener('dblclick', () => {
    view.zoom = { k: 1, x: 0, y: 0 };
    view.scheduleMap();
  });
}

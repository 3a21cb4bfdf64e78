// "Allocator State History": the event list (virtual: millions of rows stay
// smooth) and, for the selected event, the allocator's segments and blocks.

import {
  A, formatCount, formatEvent, formatSize, formatTimestamp, formatUserMetadata,
} from './format.js';
import { blockText, largestFree, layoutState, segmentText } from './state.js';
import { fill, fitCanvas, frameScheduler, h, setText } from './ui.js';

const ROW = 20;  // px per event row

export class StateView {
  constructor(app, dev) {
    this.app = app;
    this.dev = dev;
    this.model = app.stateModel(dev);
    this.n = dev.n;
    this.selected = this.n - 1;  // MemoryViz starts at the last event
    this.top = 0;
    this.layout = null;
    this.zoom = { k: 1, x: 0, y: 0 };
    this.hoverItem = null;
    this.schedule = frameScheduler(() => this.renderList());
    this.scheduleMap = frameScheduler(() => this.drawMap());
    this.oneStream = app.page.meta.streams.length <= 1;
    this.ooms = [];
    for (let i = 0; i < this.n; i++) if (dev.ev.action[i] === A.OOM) this.ooms.push(i);
    this.build();
    this.select(this.selected, true);
  }

  build() {
    this.rows = h('div', { class: 'ev-rows' });
    this.thumb = h('div', { class: 'ev-thumb' });
    this.scrollbar = h('div', { class: 'ev-scrollbar' }, this.thumb);
    this.list = h('div', {
      class: 'ev-list', tabindex: 0, role: 'listbox',
      'aria-label': 'allocator events; up/down select',
    }, this.rows, this.scrollbar);
    const oomButtons = this.ooms.slice(0, 8).map((i) => h('button', {
      type: 'button', class: 'oom-jump', onclick: () => this.select(i, true),
    }, `OOM at entry ${formatCount(this.dev.entry(i))}`));
    const head = h('div', { class: 'ev-head' },
      h('span', null, `${formatCount(this.n)} events`),
      this.ooms.length ? h('span', { class: 'oom-count' }, `${this.ooms.length} out-of-memory`) : null,
      oomButtons);
    this.jumpInput = h('input', {
      type: 'number', min: 0, max: Math.max(0, this.n ? this.dev.entry(this.n - 1) + 1 : 0),
      placeholder: 'go to trace entry #', class: 'jump', 'aria-label': 'go to trace entry number',
      onchange: () => {
        const v = parseInt(this.jumpInput.value, 10);
        if (Number.isFinite(v)) this.select(this.dev.eventOfEntry(v), true);
      },
    });
    head.append(this.jumpInput);

    this.stats = h('div', { class: 'st-stats' });
    this.canvas = h('canvas', { class: 'st-map', 'aria-label': 'segments and blocks' });
    this.detailsHead = h('div', { class: 'details-head mono' });
    this.detailsStack = h('pre', { class: 'stack' });
    const legend = h('div', { class: 'legend' },
      h('span', null, h('i', { class: 'sw seg' }), 'segment (reserved)'),
      h('span', null, h('i', { class: 'sw blk' }), 'block (allocated; colour by address)'),
      h('span', null, h('i', { class: 'sw pend' }), 'freed, waiting on record_stream'),
      h('span', null, h('i', { class: 'sw round' }), 'lost to rounding'),
      h('span', { class: 'hint' }, 'wheel: zoom · drag: pan · double-click: reset'));
    this.el = h('div', { class: 'view state-view' },
      h('div', { class: 'toolbar' }, h('h2', null, 'Allocator State History'), head),
      h('div', { class: 'st-body' },
        h('div', { class: 'st-left' }, this.list),
        h('div', { class: 'st-right' }, this.stats, h('div', { class: 'st-map-wrap' }, this.canvas), legend)),
      h('section', { class: 'details' }, this.detailsHead, this.detailsStack));
    if (!this.n) {
      this.rows.append(h('div', { class: 'empty' }, 'No events: the snapshot holds only the final state.'));
    }
    this.attachEvents();
  }

  activate() {
    // Sizes are known only now that the view is in the document.
    requestAnimationFrame(() => {
      this.select(this.selected, true);
      this.scheduleMap();
    });
    this.list.focus({ preventScroll: true });
  }

  visibleRows() {
    return Math.max(1, Math.floor(this.rows.clientHeight / ROW));
  }

  select(i, center = false) {
    if (!this.n) {
      this.updateState(-1);
      return;
    }
    i = Math.max(0, Math.min(this.n - 1, i));
    this.selected = i;
    const vis = this.visibleRows();
    if (center) this.top = i - Math.floor(vis / 2);
    else if (i < this.top) this.top = i;
    else if (i >= this.top + vis) this.top = i - vis + 1;
    this.top = Math.max(0, Math.min(Math.max(0, this.n - vis), this.top));
    this.schedule();
    this.updateState(i);
  }

  renderList() {
    const vis = this.visibleRows() + 1;
    const dev = this.dev;
    const frag = [];
    for (let r = 0; r < vis; r++) {
      const i = this.top + r;
      if (i >= this.n) break;
      const e = dev.event(i);
      // One line per event; the stream only when there is more than one.
      if (this.oneStream) e.stream = null;
      const text = formatEvent(e).replace(/\n\s+/, '  ');
      const cls = ['ev-row'];
      if (i === this.selected) cls.push('sel');
      if (e.action === A.OOM) cls.push('oom');
      if (e.action >= A.SEGMENT_ALLOC && e.action <= A.SEGMENT_UNMAP) cls.push('segev');
      frag.push(h('div', {
        class: cls.join(' '), 'data-index': i, role: 'option',
        'aria-selected': i === this.selected ? 'true' : 'false',
      }, h('span', { class: 'ev-idx', title: 'trace entry' }, String(this.dev.entry(i))), h('span', { class: 'ev-text' }, text)));
    }
    fill(this.rows, frag);
    const total = Math.max(1, this.n);
    const frac = Math.min(1, this.visibleRows() / total);
    const trackH = this.scrollbar.clientHeight;
    const thumbH = Math.max(24, frac * trackH);
    const pos = this.n > vis ? this.top / (this.n - this.visibleRows()) : 0;
    this.thumb.style.height = `${thumbH}px`;
    this.thumb.style.top = `${pos * (trackH - thumbH)}px`;
    this.thumb.style.display = frac >= 1 ? 'none' : 'block';
  }

  updateState(i) {
    const st = this.model.stateAfter(i);
    this.layout = layoutState(this.model, st);
    const L = this.layout;
    let pending = 0;
    let rounding = 0;
    let blocks = 0;
    for (const s of L.segs) {
      for (const b of s.blocks) {
        blocks++;
        if (b.pending) pending++;
        rounding += b.size - b.requested;
      }
    }
    fill(this.stats, [
      h('span', null, h('b', null, formatSize(L.allocated, false)), ' requested'),
      h('span', null, h('b', null, formatSize(L.reserved, false)), ' reserved'),
      h('span', null, `${formatCount(L.segs.length)} segments · ${formatCount(blocks)} blocks`),
      h('span', null, `${formatSize(rounding, false)} lost to rounding`),
      pending ? h('span', { class: 'warn' }, `${pending} waiting on record_stream`) : null,
      h('span', null, `largest free range ${formatSize(largestFree(L), false)}`),
    ].filter(Boolean));
    this.showEventDetails();
    this.scheduleMap();
    this.el.dataset.selected = String(i);
  }

  showEventDetails() {
    const i = this.selected;
    const L = this.layout;
    const prefix = `(${formatSize(L.allocated)} allocated / ${formatSize(L.reserved)} reserved)`;
    if (!this.n || i < 0) {
      this.detailsHead.textContent = prefix;
      this.dev.page.showStack(this.detailsStack, null);
      return;
    }
    const e = this.dev.event(i);
    const lines = [prefix, `trace entry ${formatCount(this.dev.entry(i))} at ${formatTimestamp(e.time)}`, formatEvent(e)];
    if (e.compileContext && e.compileContext !== 'N/A') lines.push(`Compile context: ${e.compileContext}`);
    const meta = formatUserMetadata(e.userMetadata);
    if (meta) lines.push(meta);
    setText(this.detailsHead, lines.join('\n'));
    this.dev.page.showStack(this.detailsStack, this.dev.page.stack(e.stack));
  }

  // --- the memory map ------------------------------------------------------------

  mapGeometry() {
    const dpr = fitCanvas(this.canvas);
    const W = this.canvas.width;
    const H = this.canvas.height;
    const L = this.layout;
    const pad = 8 * dpr;
    const rows = Math.max(1, L.rows);
    const rowH = Math.max(6 * dpr, Math.min(46 * dpr, (H - 2 * pad) / rows));
    const scale = (W - 2 * pad) / Math.max(1, L.rowWidth);
    return { dpr, W, H, pad, rowH, scale };
  }

  drawMap() {
    if (!this.layout || !this.el.isConnected) return;
    const g = this.mapGeometry();
    this.mg = g;
    const ctx = this.canvas.getContext('2d');
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, g.W, g.H);
    const z = this.zoom;
    ctx.setTransform(z.k, 0, 0, z.k, z.x, z.y);
    const px = 1 / z.k;  // one device pixel in drawing units
    for (const s of this.layout.segs) {
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
      ctx.strokeStyle = this.hoverItem && this.hoverItem.seg === s ? '#1f3b5c' : '#2b2f36';
      ctx.strokeRect(x, y, w, hh);
    }
    if (this.hoverItem && this.hoverItem.block) {
      const b = this.hoverItem.block;
      const s = b.seg;
      ctx.lineWidth = 2 * px * g.dpr;
      ctx.strokeStyle = '#111';
      ctx.strokeRect(g.pad + b.x * g.scale, g.pad + s.row * g.rowH, Math.max(px, b.size * g.scale), g.rowH * 0.8);
    }
  }

  // The segment and block under a point in CSS pixels.
  itemAt(cx, cy) {
    const g = this.mg;
    if (!g || !this.layout) return null;
    const z = this.zoom;
    const x = (cx * g.dpr - z.x) / z.k;
    const y = (cy * g.dpr - z.y) / z.k;
    const row = Math.floor((y - g.pad) / g.rowH);
    if ((y - g.pad) - row * g.rowH > g.rowH * 0.8) return null;
    const bx = (x - g.pad) / g.scale;
    for (const s of this.layout.segs) {
      if (s.row !== row || bx < s.x || bx >= s.x + s.size) continue;
      for (const b of s.blocks) if (bx >= b.x && bx < b.x + b.size) return { seg: s, block: b };
      return { seg: s, block: null };
    }
    return null;
  }

  attachEvents() {
    this.list.addEventListener('keydown', (e) => {
      const vis = this.visibleRows();
      const moves = {
        ArrowUp: -1, ArrowDown: 1, PageUp: -vis, PageDown: vis, Home: -Infinity, End: Infinity,
      };
      if (!(e.key in moves)) return;
      e.preventDefault();
      const d = moves[e.key];
      this.select(d === -Infinity ? 0 : d === Infinity ? this.n - 1 : this.selected + d);
    });
    this.list.addEventListener('wheel', (e) => {
      e.preventDefault();
      const unit = e.deltaMode === 1 ? 1 : e.deltaMode === 2 ? this.visibleRows() : 1 / ROW;
      this.scrollBy(e.deltaY * unit);
    }, { passive: false });
    this.rows.addEventListener('click', (e) => {
      const row = e.target.closest('.ev-row');
      if (row) this.select(+row.dataset.index);
      this.list.focus({ preventScroll: true });
    });
    this.thumb.addEventListener('mousedown', (e) => {
      e.preventDefault();
      const y0 = e.clientY;
      const top0 = this.top;
      const trackH = this.scrollbar.clientHeight - this.thumb.offsetHeight;
      const range = Math.max(1, this.n - this.visibleRows());
      const move = (ev) => {
        this.top = Math.round(top0 + (ev.clientY - y0) / Math.max(1, trackH) * range);
        this.scrollBy(0);
      };
      const up = () => {
        window.removeEventListener('mousemove', move);
        window.removeEventListener('mouseup', up);
      };
      window.addEventListener('mousemove', move);
      window.addEventListener('mouseup', up);
    });
    this.scrollbar.addEventListener('mousedown', (e) => {
      if (e.target !== this.scrollbar) return;
      const r = this.scrollbar.getBoundingClientRect();
      this.top = Math.round((e.clientY - r.top) / r.height * this.n - this.visibleRows() / 2);
      this.scrollBy(0);
    });

    const cv = this.canvas;
    let drag = null;
    cv.addEventListener('mousemove', (e) => {
      const r = cv.getBoundingClientRect();
      if (drag) {
        this.zoom.x = drag.zx + (e.clientX - drag.x) * this.mg.dpr;
        this.zoom.y = drag.zy + (e.clientY - drag.y) * this.mg.dpr;
        this.scheduleMap();
        return;
      }
      const item = this.itemAt(e.clientX - r.left, e.clientY - r.top);
      const same = item && this.hoverItem && item.seg === this.hoverItem.seg && item.block === this.hoverItem.block;
      if (same) {
        this.app.tooltip.show(e.clientX, e.clientY, this.tooltipFor(item));
        return;
      }
      this.hoverItem = item;
      if (!item) {
        this.app.tooltip.hide();
        this.showEventDetails();
      } else {
        this.app.tooltip.show(e.clientX, e.clientY, this.tooltipFor(item));
        this.showItemDetails(item);
      }
      this.scheduleMap();
    });
    cv.addEventListener('mouseleave', () => {
      this.hoverItem = null;
      this.app.tooltip.hide();
      this.showEventDetails();
      this.scheduleMap();
    });
    cv.addEventListener('mousedown', (e) => {
      drag = { x: e.clientX, y: e.clientY, zx: this.zoom.x, zy: this.zoom.y };
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
      const dpr = this.mg ? this.mg.dpr : 1;
      const mx = (e.clientX - r.left) * dpr;
      const my = (e.clientY - r.top) * dpr;
      const f = Math.exp(-e.deltaY * (e.deltaMode ? 30 : 1) * 0.002);
      const k = Math.max(1, Math.min(4000, this.zoom.k * f));
      const ff = k / this.zoom.k;
      this.zoom.x = mx - (mx - this.zoom.x) * ff;
      this.zoom.y = my - (my - this.zoom.y) * ff;
      this.zoom.k = k;
      if (k === 1) this.zoom = { k: 1, x: 0, y: 0 };
      this.scheduleMap();
    }, { passive: false });
    cv.addEventListener('dblclick', () => {
      this.zoom = { k: 1, x: 0, y: 0 };
      this.scheduleMap();
    });
    new ResizeObserver(() => {
      this.schedule();
      this.scheduleMap();
    }).observe(this.el);
  }

  scrollBy(rows) {
    const max = Math.max(0, this.n - this.visibleRows());
    this.top = Math.max(0, Math.min(max, Math.round(this.top + rows)));
    this.schedule();
  }

  tooltipFor(item) {
    return item.block ? blockText(item.block) : segmentText(item.seg);
  }

  showItemDetails(item) {
    const text = this.tooltipFor(item);
    const meta = formatUserMetadata((item.block || item.seg).userMetadata);
    setText(this.detailsHead, meta ? `${text}\n${meta}` : text);
    const stack = item.block ? item.block.stack : item.seg.stack;
    this.dev.page.showStack(this.detailsStack, this.dev.page.stack(stack));
  }
}

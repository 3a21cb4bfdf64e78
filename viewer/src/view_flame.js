// Flamegraphs of the snapshot's state: live memory by stack (torch's
// `memory`) and reserved memory by segment (torch's `segments`), as a
// zoomable icicle with search.

import { countOf, cutText, formatPercent, formatSize } from './format.js';
import { FlameTree, flameColor } from './flame.js';
import { fill, fitCanvas, frameScheduler, h, segmented, setText } from './ui.js';

const ROW_H = 20;

export class FlameView {
  constructor(app, dev) {
    this.app = app;
    this.dev = dev;
    this.which = 'fm';
    this.withFree = false;  // torch's flamegraphs include cached free blocks ("inactive")
    this.trees = {};
    this.focus = 0;
    this.hover = -1;
    this.match = null;
    this.schedule = frameScheduler(() => this.draw());
    this.build();
  }

  tree() {
    const key = `${this.which}:${this.withFree}`;
    if (!this.trees[key]) {
      const full = FlameTree.fromDevice(this.dev, this.which);
      this.trees[key] = this.withFree ? full : full.without(['inactive']);
    }
    return this.trees[key];
  }

  build() {
    this.kindCtl = segmented([
      ['fm', 'By stack', 'torch _memory_viz memory: blocks by stream, state and allocation stack'],
      ['fs', 'By segment', 'torch _memory_viz segments: blocks by stream, segment, state and stack'],
    ], this.which, (v) => {
      this.which = v;
      this.focus = 0;
      this.runSearch();
    });
    this.freeToggle = h('input', {
      type: 'checkbox', 'aria-label': 'include cached free blocks',
      onchange: () => {
        this.withFree = this.freeToggle.checked;
        this.focus = 0;
        this.runSearch();
      },
    });
    this.searchInput = h('input', {
      type: 'search', class: 'search', placeholder: 'Search frames…', 'aria-label': 'search the flamegraph',
    });
    this.searchInfo = h('span', { class: 'search-info' });
    this.searchInput.addEventListener('input', () => this.runSearch());
    this.crumbs = h('div', { class: 'crumbs' });
    this.canvas = h('canvas', { class: 'flame', tabindex: 0, 'aria-label': 'flamegraph' });
    this.scroller = h('div', { class: 'flame-wrap' }, this.canvas);
    this.detailsHead = h('div', { class: 'details-head mono' });
    this.el = h('div', { class: 'view flame-view' },
      h('div', { class: 'toolbar' }, h('h2', null, 'Flamegraph'), this.kindCtl,
        h('label', { class: 'check', title: 'as torch\'s memory/segments flamegraphs do' }, this.freeToggle,
          ' cached free blocks (inactive)'),
        this.searchInput,
        this.searchInfo, h('span', { class: 'spacer' }),
        h('span', { class: 'hint' }, 'click: zoom in · click the top row or Esc: zoom out')),
      this.crumbs, this.scroller,
      h('section', { class: 'details' }, this.detailsHead));
    this.attachEvents();
    this.updateCrumbs();
  }

  activate() { this.schedule(); }

  runSearch() {
    const t = this.tree();
    const r = t.search(this.searchInput.value);
    this.match = r.count ? r.match : null;
    this.searchInfo.textContent = this.searchInput.value.trim()
      ? `${countOf(r.count, 'frame')}, ${formatSize(r.bytes, false)} (${pct(r.bytes, t.value[0])})` : '';
    this.updateCrumbs();
    this.schedule();
  }

  updateCrumbs() {
    const t = this.tree();
    const chain = [];
    for (let p = this.focus; p >= 0; p = t.parent[p]) chain.push(p);
    chain.reverse();
    // A stack can be thousands of frames deep: the crumbs are appended, not spread.
    fill(this.crumbs, chain.map((i, k) => h('button', {
      type: 'button', class: 'crumb', title: k === 0 ? null : cutText(t.names[i], 2000), onclick: () => this.zoomTo(i),
    }, k === 0 ? `all (${formatSize(t.value[0], false)})` : cutText(t.names[i]))));
    this.showNode(this.focus);
  }

  zoomTo(i) {
    this.focus = i;
    this.updateCrumbs();
    this.schedule();
  }

  draw() {
    if (!this.el.isConnected) return;
    const t = this.tree();
    const rects = t.layout(this.focus);
    let maxDepth = 0;
    for (const r of rects) maxDepth = Math.max(maxDepth, r.depth);
    this.canvas.style.height = `${(maxDepth + 1) * ROW_H + 4}px`;
    const dpr = fitCanvas(this.canvas);
    const ctx = this.canvas.getContext('2d');
    const W = this.canvas.width;
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, W, this.canvas.height);
    ctx.font = `${11.5 * dpr}px ui-monospace, SFMono-Regular, Menlo, monospace`;
    ctx.textBaseline = 'middle';
    const rowH = ROW_H * dpr;
    this.rects = rects;
    this.dpr = dpr;
    for (const r of rects) {
      const x = r.x0 * W;
      const w = (r.x1 - r.x0) * W;
      if (w < 0.5) continue;
      const y = r.depth * rowH;
      const name = t.names[r.id];
      let fill = flameColor(name);
      if (this.match && !this.match[r.id]) fill = '#eceef1';
      else if (this.match) fill = '#e040a0';
      ctx.fillStyle = fill;
      ctx.fillRect(x, y, Math.max(0.5, w - 1), rowH - 1);
      if (r.id === this.hover) {
        ctx.strokeStyle = '#1b2430';
        ctx.lineWidth = 1.5 * dpr;
        ctx.strokeRect(x + 0.5, y + 0.5, Math.max(1, w - 2), rowH - 2);
      }
      if (w > 30 * dpr) {
        ctx.fillStyle = this.match && this.match[r.id] ? '#fff' : '#1b2430';
        const label = fitText(ctx, r.id === 0 ? 'all' : (name || '(all frames filtered)'), w - 8 * dpr);
        ctx.fillText(label, x + 4 * dpr, y + rowH / 2);
      }
    }
  }

  nodeAt(cx, cy) {
    if (!this.rects) return -1;
    const W = this.canvas.width;
    const x = cx * this.dpr / W;
    const depth = Math.floor(cy / ROW_H);
    for (const r of this.rects) if (r.depth === depth && x >= r.x0 && x < r.x1) return r.id;
    return -1;
  }

  showNode(i) {
    const t = this.tree();
    if (i < 0) return;
    const path = t.path(i);
    setText(this.detailsHead,
      `${i === 0 ? 'all' : t.names[i]}\n${formatSize(t.value[i])}, ${pct(t.value[i], t.value[0])} of the total` +
      (path.length > 1 ? `\n\n${path.join('\n')}` : ''));
  }

  attachEvents() {
    const cv = this.canvas;
    cv.addEventListener('mousemove', (e) => {
      const r = cv.getBoundingClientRect();
      const id = this.nodeAt(e.clientX - r.left, e.clientY - r.top);
      if (id !== this.hover) {
        this.hover = id;
        this.schedule();
        if (id >= 0) this.showNode(id);
        else this.showNode(this.focus);
      }
      if (id >= 0) {
        const t = this.tree();
        this.app.tooltip.show(e.clientX, e.clientY,
          `${id === 0 ? 'all' : t.names[id]}\n${formatSize(t.value[id])} (${pct(t.value[id], t.value[0])})`);
      } else this.app.tooltip.hide();
    });
    cv.addEventListener('mouseleave', () => {
      this.hover = -1;
      this.app.tooltip.hide();
      this.showNode(this.focus);
      this.schedule();
    });
    cv.addEventListener('click', (e) => {
      const r = cv.getBoundingClientRect();
      const id = this.nodeAt(e.clientX - r.left, e.clientY - r.top);
      if (id < 0) return;
      const t = this.tree();
      this.zoomTo(id === this.focus ? Math.max(0, t.parent[id]) : id);
    });
    cv.addEventListener('keydown', (e) => {
      if (e.key === 'Escape') this.zoomTo(Math.max(0, this.tree().parent[this.focus]));
    });
    new ResizeObserver(() => this.schedule()).observe(this.el);
  }
}

function pct(a, b) {
  return formatPercent(b ? a / b : 0);
}

function fitText(ctx, text, width) {
  if (ctx.measureText(text).width <= width) return text;
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(`${text.slice(0, mid)}…`).width <= width) lo = mid;
    else hi = mid - 1;
  }
  return lo > 0 ? `${text.slice(0, lo)}…` : '';
}

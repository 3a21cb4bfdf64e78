// "Active Memory Timeline" and "Active Cached Segment Timeline": the view,
// its controls (axis, detail, colours, search, filters), the bands' render,
// hover and pinned details. view_timeline_draw.js draws the axes, overlay
// and minimap; view_timeline_input.js answers the pointer and keys.

import { countOf, entriesText, formatCount, formatDuration, formatSize, niceByteStep } from './format.js';
import { AnnotationStrip } from './annotations.js';
import { elementMask, poolStreamControls } from './filters.js';
import { SUMMARY_ID } from './timeline.js';
import { paintSpans, stackSpans } from './timeline_paint.js';
import { drawTimelineAxes, drawTimelineMinimap, drawTimelineOverlay } from './view_timeline_draw.js';
import { attachMinimapBrush, attachPlotPointer, attachPlotZoom } from './view_timeline_input.js';
import { fitCanvas, frameScheduler, h, segmented, setText } from './ui.js';
import { Categories, KIND_COLORS, breakdownView, categoryLegend } from './categories.js';

const MARGIN = { left: 78, right: 14, top: 10, bottom: 26 };
// How many of the largest elements are drawn separately at first. MemoryViz
// stops at 15,000 because each one is an SVG polygon; here the cost of a
// frame grows with the live elements only, so all are drawn up to a point.
const DEFAULT_DETAIL = 500000;

export class TimelineView {
  constructor(app, dev, mode, model = null) {
    this.app = app;
    this.dev = dev;
    this.mode = mode;
    this.model = model || app.timeline(dev, mode);
    const md = this.model;
    this.noun = mode === 'st' ? 'segments' : 'allocations';
    this.axis = 'event';
    this.detail = Math.min(DEFAULT_DETAIL, md.m);
    this.hover = -1;
    this.pinned = -1;
    this.dim = null;
    this.match = null;
    this.spans = null;
    this.image = null;
    this.mouse = null;
    // What kind of memory each allocation is (the engine's classifier).
    const cats = mode === 'tl' ? new Categories(dev) : null;
    this.cats = cats && cats.available ? cats : null;
    this.resetView();
    this.schedule = frameScheduler(() => this.render());
    this.scheduleOverlay = frameScheduler(() => drawTimelineOverlay(this));
    this.build();
    if (app.range) {
      app.range.onChange((d) => {
        if (d !== dev) return;
        this.resetView();
        this.schedule();
      });
    }
  }

  // The x range of everything there is to see: the whole trace, or the
  // range of entries the page is limited to (states r0 to r1+1).
  domain() {
    const r = this.app.range ? this.app.range.events(this.dev) : null;
    if (this.axis === 'time') {
      const t = this.dev.times;
      const a = t[r ? r[0] : 0];
      return [a, Math.max(a + 1, t[r ? r[1] : this.dev.n - 1])];
    }
    return r ? [r[0], r[1] + 2] : [0, this.model.states];
  }

  resetView() {
    [this.x0, this.x1] = this.domain();
  }

  // The toolbar's controls: x axis, detail, search, pool and stream filters.
  buildControls() {
    const hasTime = this.dev.meta.hasTime && this.dev.n > 1;
    this.axisCtl = segmented([
      ['event', 'Events', 'x axis: one step per allocator event'],
      ['time', 'Time', 'x axis: wall-clock time of the events'],
    ], this.axis, (v) => this.setAxis(v));
    if (!hasTime) this.axisCtl.querySelector('[data-value=time]').disabled = true;

    this.detailInput = h('input', {
      type: 'range', min: 0, max: 1000, step: 1, class: 'detail',
      'aria-label': 'Detail: how many of the largest elements are drawn separately',
      oninput: () => {
        this.detail = this.detailFromSlider(+this.detailInput.value);
        this.updateDetailLabel();
        this.schedule();
      },
    });
    this.detailInput.value = this.sliderFromDetail(this.detail);
    this.detailLabel = h('span', { class: 'detail-label' });
    this.updateDetailLabel();

    this.searchInput = h('input', {
      type: 'search', class: 'search', placeholder: 'Search address (hex) or stack frame…',
      'aria-label': 'Search allocations',
    });
    this.searchInfo = h('span', { class: 'search-info' });
    /** @type {ReturnType<typeof setTimeout> | 0} */
    let timer = 0;
    this.searchInput.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.runSearch(), 180);
    });

    this.filters = poolStreamControls(this.dev, (pool, stream) => {
      this.model.setFilter(elementMask(this.model, pool, stream));
      this.schedule();
    });
  }

  build() {
    const md = this.model;
    this.buildControls();
    this.strip = new AnnotationStrip(this);
    this.canvas = h('canvas', { class: 'plot' });
    this.overlay = h('canvas', { class: 'plot-overlay', tabindex: 0, 'aria-label': 'memory timeline' });
    this.minimap = h('canvas', { class: 'minimap', 'aria-label': 'overview of the whole timeline; drag to select' });
    this.detailsHead = h('div', { class: 'details-head' });
    this.detailsStack = h('pre', { class: 'stack' });
    this.details = h('section', { class: 'details' }, this.detailsHead, this.detailsStack);
    this.showIdleDetails();
    this.kindCtl = null;
    if (this.cats) {
      this.legend = categoryLegend();
      this.legend.hidden = true;
      this.kindCtl = h('span', { class: 'kind-ctl' }, segmented([
        ['site', 'By site', 'colour: MemoryViz\'s, one colour per allocation'],
        ['kind', 'By kind', 'colour: parameter, gradient, optimizer state, activation, ...'],
      ], 'site', (v) => this.setColorMode(v)), this.legend);
      this.momentPane = h('section', { class: 'moment' });
    }

    const title = md.title || (this.mode === 'st' ? 'Active Cached Segment Timeline' : 'Active Memory Timeline');
    this.el = h('div', { class: `view timeline-view mode-${this.mode}` },
      h('div', { class: 'toolbar' },
        h('h2', null, title),
        this.axisCtl,
        h('label', { class: 'detail-ctl' }, this.detailInput, this.detailLabel),
        this.searchInput, this.searchInfo, this.filters, this.kindCtl,
        h('span', { class: 'spacer' }),
        h('button', { type: 'button', onclick: () => { this.resetView(); this.schedule(); } }, 'Reset zoom')),
      this.strip.canvas,
      h('div', { class: 'plot-wrap' }, this.canvas, this.overlay),
      h('div', { class: 'minimap-wrap' }, this.minimap),
      this.details, this.cats ? this.momentPane : null);
    if (this.cats) this.showMoment(md.meta.peakEvent + 1, true);
    if (md.m === 0) {
      this.el.querySelector('.plot-wrap').append(h('div', { class: 'empty' },
        this.dev.n ? `No ${this.noun} in this device's trace.` :
          'This snapshot has no allocation history (recorded with enabled="state" or history disabled): ' +
          'only the allocator state at the end is known.'));
    }
    this.attachEvents();
  }

  setColorMode(mode) {
    this.model.setColors(mode === 'kind' ? KIND_COLORS : null, mode === 'kind' ? this.cats.colorIndex() : null);
    this.legend.hidden = mode !== 'kind';
    this.el.dataset.colors = mode;
    this.schedule();
  }

  // What was allocated in state s, by kind and by module.
  showMoment(s, peak = false) {
    if (!this.cats || s < 0) return;
    const b = this.cats.breakdown(this.model, s);
    const title = peak ? 'At the allocated peak' : 'At the chosen moment';
    const note = `${this.stateLabel(s)}. Requested bytes, as the timeline stacks them; ` +
      (this.cats.meta.tagged ? `${this.cats.meta.tagged} storages tagged by memsight.torch, the rest inferred` :
        'inferred (no memsight.torch tags)') + '. Click the timeline for another moment.';
    this.momentPane.replaceChildren(breakdownView(title, note, b));
    this.el.dataset.moment = String(s);
  }

  sliderFromDetail(k) {
    const m = this.model.m;
    if (m <= 1) return 1000;
    return Math.round(Math.log(Math.max(1, k)) / Math.log(m) * 1000);
  }

  detailFromSlider(v) {
    const m = this.model.m;
    if (v <= 0) return 0;
    return Math.min(m, Math.round(Math.exp(v / 1000 * Math.log(Math.max(1, m)))));
  }

  updateDetailLabel() {
    const m = this.model.m;
    this.detailLabel.textContent = `Detail: ${formatCount(Math.min(this.detail, m))} of ${formatCount(m)} ${this.noun}`;
  }

  setAxis(axis) {
    if (axis === this.axis) return;
    // Keep the visible window: convert its ends.
    const md = this.model;
    let a;
    let b;
    if (axis === 'time') {
      a = md.stateTime(Math.max(0, Math.floor(this.x0)));
      b = md.stateTime(Math.min(md.n, Math.ceil(this.x1)));
    } else {
      a = md.stateAtTime(this.x0);
      b = md.stateAtTime(this.x1) + 1;
    }
    this.axis = axis;
    const [d0, d1] = this.domain();
    this.x0 = Math.max(d0, a);
    this.x1 = Math.min(d1, Math.max(b, this.x0 + this.minSpan()));
    this.schedule();
  }

  minSpan() {
    return this.axis === 'time' ? 10 : 4;
  }

  runSearch() {
    const q = this.searchInput.value;
    if (!q.trim()) {
      this.dim = null;
      this.match = null;
      this.searchInfo.textContent = '';
    } else {
      const match = this.model.search(q);
      const dim = new Uint8Array(match.length);
      let count = 0;
      for (let e = 0; e < match.length; e++) {
        count += match[e];
        dim[e] = match[e] ^ 1;
      }
      this.match = match;
      this.dim = dim;
      this.searchInfo.textContent = `${formatCount(count)} match${count === 1 ? '' : 'es'}`;
    }
    this.schedule();  // matches are drawn separately, so the stacks change
  }

  activate() {
    this.schedule();
  }

  // --- geometry --------------------------------------------------------------

  geometry() {
    const dpr = this.dpr;
    const W = this.canvas.width;
    const H = this.canvas.height;
    const L = Math.round(MARGIN.left * dpr);
    const T = Math.round(MARGIN.top * dpr);
    const pw = Math.max(1, W - L - Math.round(MARGIN.right * dpr));
    const ph = Math.max(1, H - T - Math.round(MARGIN.bottom * dpr));
    return { dpr, W, H, L, T, pw, ph };
  }

  xToPx(x, g) { return g.L + (x - this.x0) / (this.x1 - this.x0) * g.pw; }

  // --- rendering --------------------------------------------------------------

  render() {
    if (!this.el.isConnected) return;
    this.dpr = fitCanvas(this.canvas);
    fitCanvas(this.overlay);
    const g = this.geometry();
    this.g = g;
    const md = this.model;
    const t0 = performance.now();
    const { rep, low, maxTotal } = md.columns(this.x0, this.x1, g.pw, this.axis);
    const step = niceByteStep(maxTotal || 1, 5);
    this.yMax = Math.max(step, Math.ceil((maxTotal * 1.03) / step) * step);
    this.yStep = step;
    this.rep = rep;
    this.pxPerByte = g.ph / this.yMax;
    this.spans = stackSpans(md, rep, this.detail, this.pxPerByte, g.ph, this.match);
    this.lightFrom = new Int32Array(g.pw);
    for (let c = 0; c < g.pw; c++) this.lightFrom[c] = rep[c] < 0 ? g.ph : Math.floor(low[c] * this.pxPerByte);
    this.repaint();
    this.renderMs = performance.now() - t0;
    if (!this.app.timing.firstRender) this.app.timing.firstRender = this.renderMs;
    drawTimelineMinimap(this);
    this.strip.draw();
    this.el.dataset.rendered = String((+this.el.dataset.rendered || 0) + 1);
  }

  repaint() {
    const g = this.g;
    if (!g || !this.spans) return;
    const ctx = this.canvas.getContext('2d');
    if (!this.image || this.image.width !== g.pw || this.image.height !== g.ph) {
      this.image = ctx.createImageData(g.pw, g.ph);
    }
    const pixels = new Uint32Array(this.image.data.buffer);
    pixels.fill(0xffffffff);
    paintSpans(this.model, this.spans, pixels, g.pw, g.ph, this.dim, this.lightFrom);
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, g.W, g.H);
    ctx.putImageData(this.image, g.L, g.T);
    drawTimelineAxes(this, ctx, g);
    drawTimelineOverlay(this);
  }

  // --- interaction ------------------------------------------------------------

  attachEvents() {
    attachPlotPointer(this);
    attachPlotZoom(this);
    attachMinimapBrush(this);
    new ResizeObserver(() => this.schedule()).observe(this.el);
  }

  zoomAt(fx, factor) {
    const [d0, d1] = this.domain();
    const span = this.x1 - this.x0;
    const at = this.x0 + fx * span;
    let w = Math.min(d1 - d0, Math.max(this.minSpan(), span * factor));
    this.panTo(at - fx * w, at - fx * w + w);
  }

  // Moves the window to [a, b), kept inside the domain.
  panTo(a, b, resize = false) {
    const [d0, d1] = this.domain();
    let w = Math.max(this.minSpan(), b - a);
    if (resize) w = Math.max(this.minSpan(), Math.min(d1 - d0, b - a));
    w = Math.min(w, d1 - d0);
    a = Math.max(d0, Math.min(a, d1 - w));
    this.x0 = a;
    this.x1 = a + w;
    this.schedule();
  }

  setHover(id, cx, cy, col) {
    const changed = id !== this.hover;
    this.hover = id;
    if (id === -1) {
      this.app.tooltip.hide();
      if (changed && this.pinned === -1) this.showIdleDetails();
      return;
    }
    this.app.tooltip.show(cx, cy, this.tooltipText(id, col));
    if (changed && this.pinned === -1) this.showDetails(id);
  }

  tooltipText(id, col) {
    const s = this.rep && col >= 0 ? this.rep[col] : -1;
    const where = s >= 0 ? this.stateLabel(s) : '';
    if (id === SUMMARY_ID) {
      const total = this.model.total[s];
      let drawn = 0;
      const { off, ids, y0, y1 } = this.spans;
      for (let k = off[col]; k < off[col + 1]; k++) if (ids[k] !== SUMMARY_ID) drawn += y1[k] - y0[k];
      return `${formatSize(Math.max(0, total - drawn / this.pxPerByte), false)} (approx.) in ` +
        `${this.noun} below the detail limit\n${where}`;
    }
    const i = this.model.info(id);
    const kind = this.cats ? `\n${this.cats.label(id)}` : '';
    return `${i.name}  ${formatSize(i.size)}\nstream ${i.stream}${kind}\n${where}`;
  }

  stateLabel(s) {
    const md = this.model;
    const total = formatSize(md.total[s], false);
    // What the bands add up to: segment sizes, or (as memory_viz draws them)
    // the requested sizes of the allocations not yet free_completed.
    const label = this.mode === 'st' ? 'in segments' : this.mode === 'pp' ? 'requested or held by private pools' : 'requested';
    if (s === 0) return `before the first trace entry: ${total} ${label}`;
    const t = md.stateTime(s) - this.dev.times[0];
    return `after trace entry ${formatCount(this.dev.entry(s - 1))} (+${formatDuration(t)}): ${total} ${label}`;
  }

  togglePin(id, clear = false) {
    if (clear || id === -1 || id === this.pinned) this.pinned = -1;
    else this.pinned = id;
    this.el.classList.toggle('pinned', this.pinned !== -1);
    if (this.pinned !== -1) this.showDetails(this.pinned);
    else if (this.hover !== -1) this.showDetails(this.hover);
    else this.showIdleDetails();
    this.scheduleOverlay();
  }

  // The peak as the engine's summary counts it (the overview's numbers), and
  // what the bands themselves add up to.
  showIdleDetails() {
    const md = this.model;
    const sum = this.dev.summary;
    const entry = (e) => (e >= 0 ? ` after trace entry ${formatCount(e)}` : ' before the first trace entry');
    let peak;
    if (!sum) {
      peak = ['Nothing recorded on this device. '];
    } else if (this.mode === 'pp') {
      // Private pools count with all they reserve: neither torch counter.
      const at = md.meta.peakEvent >= 0 ? this.dev.entry(md.meta.peakEvent) : -1;
      peak = ['Peak of the bands: ', h('b', null, formatSize(md.meta.peak)), entry(at),
        ' (each private pool with all it reserves, its allocated part darker; the allocations outside ',
        "private pools on top, as requested sizes). The summary's peak allocated: ",
        `${formatSize(sum.peak_allocated, false)}${entry(sum.peak_allocated_event)}. `];
    } else if (this.mode === 'st') {
      peak = ['Peak reserved: ', h('b', null, formatSize(sum.peak_reserved)), entry(sum.peak_reserved_event),
        " (torch's max_memory_reserved). The bands are segments (cudaMalloc calls); ",
        'expandable segments grow by mapping pages, which they do not show. '];
    } else {
      peak = ['Peak allocated: ', h('b', null, formatSize(sum.peak_allocated)), entry(sum.peak_allocated_event),
        " (torch's max_memory_allocated, whole blocks). The bands are requested sizes until free_completed, ",
        `as memory_viz draws them (torch's requested_bytes, peak ${formatSize(sum.peak_requested, false)}). `];
    }
    this.detailsHead.replaceChildren(
      h('div', { class: 'idle' }, peak,
        `${countOf(md.m, this.noun.slice(0, -1), this.noun)}`,
        this.dev.meta.entries ? ` over ${entriesText(this.dev.meta.entries)}. ` : ' from the snapshot\'s state (no trace entries). ',
        'Hover a band for its details, click to pin them. Wheel: zoom; drag: pan; double-click: reset; ',
        'search matches are drawn even below the detail limit.'));
    this.dev.page.showStack(this.detailsStack, null);
  }

  showDetails(id) {
    if (id === SUMMARY_ID) {
      this.detailsHead.replaceChildren(h('div', null,
        `The grey band sums up the ${this.noun} not drawn separately (the smallest ones), ` +
        'to keep drawing fast. Raise Detail to draw more of them.'));
      this.dev.page.showStack(this.detailsStack, null);
      return;
    }
    const d = this.model.describe(id);
    const i = d.info;
    const jump = i.start >= 0 ? i.start : i.end;
    const head = h('div', null,
      this.pinned === id ? h('span', { class: 'badge' }, 'pinned') : null,
      setText(h('span', { class: 'mono' }), d.head),
      this.cats ? h('div', { class: 'kind-line' }, 'Kind: ', this.cats.label(id)) : null);
    const actions = h('div', { class: 'detail-actions' });
    if (jump >= 0) {
      actions.append(h('button', {
        type: 'button', class: 'link',
        onclick: () => this.app.showState(this.dev.index, jump),
      }, `Allocator state at trace entry ${formatCount(this.dev.entry(jump))} →`));
    }
    actions.append(h('button', {
      type: 'button', class: 'link',
      onclick: () => this.zoomToElement(id),
    }, 'Zoom to its lifetime'));
    this.detailsHead.replaceChildren(head, actions);
    this.dev.page.showStack(this.detailsStack, d.frames);
  }

  zoomToElement(id) {
    const [from, to] = this.model.lifetime(id);
    if (this.axis === 'time') {
      const a = this.model.stateTime(from);
      const b = this.model.stateTime(Math.min(this.model.n, to));
      const pad = Math.max(10, (b - a) * 0.1);
      this.panTo(a - pad, b + pad, true);
    } else {
      const pad = Math.max(2, (to - from) * 0.1);
      this.panTo(from - pad, to + pad, true);
    }
  }
}

// "Allocator State History": the event list (virtual: millions of rows stay
// smooth) and, for the selected event, the allocator's segments and blocks
// (drawn by view_state_map.js) and the details of what is selected.

import {
  A, formatCount, formatEvent, formatSize, formatTimestamp, formatUserMetadata,
} from './format.js';
import { annotationModel } from './annotations.js';
import { EventRows } from './event_rows.js';
import { devicePools, poolStreamControls } from './filters.js';
import { blockText, largestFree, layoutState, segmentText } from './state.js';
import { GHOST_TEXT, KIND_LIVE } from './timeline.js';
import { attachStateMapPointer, drawStateMap } from './view_state_map.js';
import { fill, frameScheduler, h, setText } from './ui.js';

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
    this.scheduleMap = frameScheduler(() => drawStateMap(this));
    this.oneStream = app.page.meta.streams.length <= 1;
    this.ooms = [];
    for (let i = 0; i < this.n; i++) if (dev.ev.action[i] === A.OOM) this.ooms.push(i);
    // Which events are listed (range, stream, pool, search) and which map
    // segments are drawn (stream, pool).
    this.list = new EventRows(dev);
    this.filterState = { stream: null, pool: null, onlyMatches: false };
    this.build();
    this.select(this.selected, true);
    if (app.range) app.range.onChange((d) => { if (d === dev) this.refilter(); });
  }

  // Lists the events the filters leave, keeping the selection when it stays.
  refilter() {
    const f = this.filterState;
    this.list.filter({ range: this.app.range ? this.app.range.events(this.dev) : null, ...f });
    this.countLabel.textContent = this.list.count === this.n ? `${formatCount(this.n)} events`
      : `${formatCount(this.list.count)} of ${formatCount(this.n)} events`;
    this.select(this.list.count ? this.list.at(this.list.rowOf(this.selected)) : this.selected, true);
  }

  runSearch() {
    this.list.search(this.searchInput.value);
    this.searchInfo.textContent = this.list.query ? `${formatCount(this.list.matches)} match${this.list.matches === 1 ? '' : 'es'}` : '';
    if (this.filterState.onlyMatches) this.refilter();
    else this.schedule();
    this.scheduleMap();
  }

  jumpMatch(dir) {
    const i = this.list.nextMatch(this.selected, dir);
    if (i >= 0) this.select(i, true);
  }

  // Whether a map segment passes the pool and stream filters.
  keepSegment(seg) {
    const f = this.filterState;
    if (f.stream !== null && seg.stream !== f.stream) return false;
    if (f.pool !== null && devicePools(this.dev).at(seg.addr) !== f.pool) return false;
    return true;
  }

  // Search (with previous / next match and "only matches") and the pool
  // and stream filters, above the event list.
  buildSearchBar() {
    this.searchInput = h('input', {
      type: 'search', class: 'search', placeholder: 'Search address (hex), stack, metadata…',
      'aria-label': 'search the events',
    });
    /** @type {ReturnType<typeof setTimeout> | 0} */
    let timer = 0;
    this.searchInput.addEventListener('input', () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.runSearch(), 180);
    });
    this.searchInput.addEventListener('keydown', (e) => {
      if (e.key === 'Enter') this.jumpMatch(e.shiftKey ? -1 : 1);
    });
    this.searchInfo = h('span', { class: 'search-info' });
    const only = h('input', {
      type: 'checkbox', class: 'only-matches',
      onchange: () => {
        this.filterState.onlyMatches = only.checked;
        this.refilter();
      },
    });
    return h('div', { class: 'st-search' }, this.searchInput, this.searchInfo,
      h('button', { type: 'button', class: 'link prev-match', title: 'previous match (Shift+Enter)', onclick: () => this.jumpMatch(-1) }, '↑'),
      h('button', { type: 'button', class: 'link next-match', title: 'next match (Enter)', onclick: () => this.jumpMatch(1) }, '↓'),
      h('label', { class: 'filter' }, only, ' only matches'),
      poolStreamControls(this.dev, (pool, stream) => {
        this.filterState.pool = pool;
        this.filterState.stream = stream;
        this.refilter();
        this.updateState(this.selected);
      }));
  }

  build() {
    this.rows = h('div', { class: 'ev-rows' });
    this.thumb = h('div', { class: 'ev-thumb' });
    this.scrollbar = h('div', { class: 'ev-scrollbar' }, this.thumb);
    this.listEl = h('div', {
      class: 'ev-list', tabindex: 0, role: 'listbox',
      'aria-label': 'allocator events; up/down select',
    }, this.rows, this.scrollbar);
    const oomButtons = this.ooms.slice(0, 8).map((i) => h('button', {
      type: 'button', class: 'oom-jump', onclick: () => this.select(i, true),
    }, `OOM at entry ${formatCount(this.dev.entry(i))}`));
    this.countLabel = h('span', null, `${formatCount(this.n)} events`);
    const head = h('div', { class: 'ev-head' },
      this.countLabel,
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

    const searchBar = this.buildSearchBar();
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
        h('div', { class: 'st-left' }, searchBar, this.listEl),
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
    this.listEl.focus({ preventScroll: true });
  }

  visibleRows() {
    return Math.max(1, Math.floor(this.rows.clientHeight / ROW));
  }

  // Selects event i (or the nearest listed one) and shows the state after it.
  select(i, center = false) {
    if (!this.n) {
      this.updateState(-1);
      return;
    }
    i = Math.max(0, Math.min(this.n - 1, i));
    const count = this.list.count;
    if (count) i = this.list.at(this.list.rowOf(i));
    this.selected = i;
    const r = count ? this.list.rowOf(i) : 0;
    const vis = this.visibleRows();
    if (center) this.top = r - Math.floor(vis / 2);
    else if (r < this.top) this.top = r;
    else if (r >= this.top + vis) this.top = r - vis + 1;
    this.top = Math.max(0, Math.min(Math.max(0, count - vis), this.top));
    this.schedule();
    this.updateState(i);
  }

  // Moves the selection by d listed rows.
  selectRow(d) {
    if (!this.list.count) return;
    const r = d === -Infinity ? 0 : d === Infinity ? this.list.count - 1 : this.list.rowOf(this.selected) + d;
    this.select(this.list.at(Math.max(0, Math.min(this.list.count - 1, r))));
  }

  renderList() {
    const vis = this.visibleRows() + 1;
    const dev = this.dev;
    const frag = [];
    const match = this.list.match;
    for (let r = 0; r < vis; r++) {
      if (this.top + r >= this.list.count) break;
      const i = this.list.at(this.top + r);
      const e = dev.event(i);
      // One line per event; the stream only when there is more than one.
      if (this.oneStream) e.stream = null;
      const text = formatEvent(e).replace(/\n\s+/, '  ');
      const cls = ['ev-row'];
      if (i === this.selected) cls.push('sel');
      if (e.action === A.OOM) cls.push('oom');
      if (e.action >= A.SEGMENT_ALLOC && e.action <= A.SEGMENT_UNMAP) cls.push('segev');
      if (match && match[i]) cls.push('match');
      frag.push(h('div', {
        class: cls.join(' '), 'data-index': i, role: 'option',
        'aria-selected': i === this.selected ? 'true' : 'false',
      }, h('span', { class: 'ev-idx', title: 'trace entry' }, String(this.dev.entry(i))), h('span', { class: 'ev-text' }, text)));
    }
    fill(this.rows, frag);
    const count = this.list.count;
    const total = Math.max(1, count);
    const frac = Math.min(1, this.visibleRows() / total);
    const trackH = this.scrollbar.clientHeight;
    const thumbH = Math.max(24, frac * trackH);
    const pos = count > vis ? this.top / (count - this.visibleRows()) : 0;
    this.thumb.style.height = `${thumbH}px`;
    this.thumb.style.top = `${pos * (trackH - thumbH)}px`;
    this.thumb.style.display = frac >= 1 ? 'none' : 'block';
  }

  updateState(i) {
    const st = this.model.stateAfter(i);
    const f = this.filterState;
    this.layout = layoutState(this.model, st, 0, f.pool === null && f.stream === null ? null : (seg) => this.keepSegment(seg));
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
    const scopes = this.scopesAt(i);
    if (scopes.length) lines.push(`Inside: ${scopes.join(' › ')}`);
    setText(this.detailsHead, lines.join('\n'));
    this.dev.page.showStack(this.detailsStack, this.dev.page.stack(e.stack));
  }

  // Whether snapshot block k is a ghost block: live in the snapshot's
  // segments with no alloc event in the trace (the memory timeline's
  // elements of that kind).
  isGhost(k) {
    if (!this.ghosts) {
      const tl = this.app.timeline(this.dev, 'tl');
      this.ghosts = new Set();
      for (let e = 0; e < tl.initial; e++) if (tl.kind[e] === KIND_LIVE) this.ghosts.add(~tl.src[e]);
    }
    return this.ghosts.has(k);
  }

  // The annotation scopes (record_function...) event i happened in, outermost first.
  scopesAt(i) {
    const an = annotationModel(this.dev);
    return an.at(i).map((k) => an.name(k));
  }

  attachEvents() {
    this.attachListEvents();
    attachStateMapPointer(this);
    new ResizeObserver(() => {
      this.schedule();
      this.scheduleMap();
    }).observe(this.el);
  }

  // The event list: keys and wheel move the selection and scroll, a click
  // selects, the scrollbar drags or jumps.
  attachListEvents() {
    this.listEl.addEventListener('keydown', (e) => {
      const vis = this.visibleRows();
      const moves = {
        ArrowUp: -1, ArrowDown: 1, PageUp: -vis, PageDown: vis, Home: -Infinity, End: Infinity,
      };
      if (!(e.key in moves)) return;
      e.preventDefault();
      const d = moves[e.key];
      this.selectRow(d);
    });
    this.listEl.addEventListener('wheel', (e) => {
      e.preventDefault();
      const unit = e.deltaMode === 1 ? 1 : e.deltaMode === 2 ? this.visibleRows() : 1 / ROW;
      this.scrollBy(e.deltaY * unit);
    }, { passive: false });
    this.rows.addEventListener('click', (e) => {
      const row = e.target.closest('.ev-row');
      if (row) this.select(+row.dataset.index);
      this.listEl.focus({ preventScroll: true });
    });
    this.thumb.addEventListener('mousedown', (e) => {
      e.preventDefault();
      const y0 = e.clientY;
      const top0 = this.top;
      const trackH = this.scrollbar.clientHeight - this.thumb.offsetHeight;
      const range = Math.max(1, this.list.count - this.visibleRows());
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
      this.top = Math.round((e.clientY - r.top) / r.height * this.list.count - this.visibleRows() / 2);
      this.scrollBy(0);
    });
  }

  scrollBy(rows) {
    const max = Math.max(0, this.list.count - this.visibleRows());
    this.top = Math.max(0, Math.min(max, Math.round(this.top + rows)));
    this.schedule();
  }

  tooltipFor(item) {
    return item.block ? blockText(item.block) : segmentText(item.seg);
  }

  showItemDetails(item) {
    const lines = [this.tooltipFor(item)];
    const b = item.block;
    if (b && b.compileContext && b.compileContext !== 'N/A') lines.push(`Compile context: ${b.compileContext}`);
    const meta = formatUserMetadata((b || item.seg).userMetadata);
    if (meta) lines.push(meta);
    if (b && b.src < 0 && this.isGhost(~b.src)) lines.push(GHOST_TEXT);
    setText(this.detailsHead, lines.join('\n'));
    const stack = item.block ? item.block.stack : item.seg.stack;
    this.dev.page.showStack(this.detailsStack, this.dev.page.stack(stack));
  }
}

// What the views can be narrowed to: a memory pool, a stream, and a range of
// the trace (from one trace entry to another). Pools are known the way torch
// knows them (MemoryViz's find_pool_id): an address belongs to the pool of
// the snapshot segment holding it; addresses whose segment was freed before
// the snapshot have no known pool.

import { formatCount } from './format.js';
import { KIND_LIVE } from './timeline.js';
import { h } from './ui.js';

export const UNKNOWN_POOL = -1;

// "default pool", "private pool (1, 0)", ...: what a pool id is called.
export function poolName(p0, p1) {
  if (!p0 && !p1) return 'default pool';
  return `private pool (${p0}, ${p1})`;
}

// What kind of pool an id is, from how torch makes them: a CUDA graph
// captured without a pool gets (capture id, 0); MemPool() and
// graph_pool_handle() give (0, n).
export function poolKind(p0, p1) {
  if (!p0 && !p1) return 'the caching allocator\'s own pool';
  if (!p1) return 'a CUDA graph\'s own pool';
  if (!p0) return 'a MemPool, or a pool graphs share (graph_pool_handle)';
  return 'a private pool';
}

// The pools of one device's snapshot segments, and the pool of any address.
export class DevicePools {
  constructor(dev) {
    this.dev = dev;
    const S = dev.seg;
    const key = (s) => `${S.pool0[s]},${S.pool1[s]}`;
    const seen = new Map();
    for (let s = 0; s < S.addr.length; s++) if (!seen.has(key(s))) seen.set(key(s), [S.pool0[s], S.pool1[s]]);
    // [{p0, p1, name}]: the default pool first, then by id.
    this.list = [...seen.values()]
      .sort((a, b) => (a[0] || a[1] ? 1 : 0) - (b[0] || b[1] ? 1 : 0) || a[0] - b[0] || a[1] - b[1])
      .map(([p0, p1]) => ({ p0, p1, name: poolName(p0, p1) }));
    const index = new Map(this.list.map((p, i) => [`${p.p0},${p.p1}`, i]));
    this.ofSegment = new Int32Array(S.addr.length);
    for (let s = 0; s < S.addr.length; s++) this.ofSegment[s] = index.get(key(s));
    this.privateCount = this.list.filter((p) => p.p0 || p.p1).length;
  }

  // Index into list of the pool holding addr, or UNKNOWN_POOL.
  at(addr) {
    const s = this.dev.segmentAt(addr);
    return s >= 0 ? this.ofSegment[s] : UNKNOWN_POOL;
  }

  isPrivate(i) { return i >= 0 && (this.list[i].p0 !== 0 || this.list[i].p1 !== 0); }
}

export function devicePools(dev) {
  if (!dev._pools) dev._pools = new DevicePools(dev);
  return dev._pools;
}

// Pool index and stream of every element of a timeline model.
export function elementAttrs(md) {
  if (md._attrs) return md._attrs;
  const dev = md.dev;
  const pools = devicePools(dev);
  const pool = new Int32Array(md.m);
  const stream = new Int32Array(md.m);
  for (let e = 0; e < md.m; e++) {
    const src = md.src[e];
    let addr;
    if (md.kind[e] !== KIND_LIVE) {
      addr = dev.ev.addr[src];
      stream[e] = dev.ev.stream[src];
    } else if (md.segments) {
      addr = dev.seg.addr[~src];
      stream[e] = dev.seg.stream[~src];
    } else {
      addr = dev.blk.addr[~src];
      const s = dev.segmentAt(addr);
      stream[e] = s >= 0 ? dev.seg.stream[s] : 0;
    }
    pool[e] = pools.at(addr);
  }
  md._attrs = { pool, stream };
  return md._attrs;
}

// Streams used by a device's events and segments, ascending.
export function deviceStreams(dev) {
  const seen = new Set(dev.seg.stream);
  const st = dev.ev.stream;
  for (let i = 0; i < st.length; i++) seen.add(st[i]);
  return [...seen].sort((a, b) => a - b);
}

// The pool and stream selects of a view; onChange(pool, stream) gets the
// chosen pool index (null: all, UNKNOWN_POOL: unknown) and stream (null: all).
export function poolStreamControls(dev, onChange) {
  const pools = devicePools(dev);
  const streams = deviceStreams(dev);
  const out = [];
  let pool = null;
  let stream = null;
  const changed = () => onChange(pool, stream);
  if (pools.list.length > 1) {
    const sel = h('select', {
      class: 'pool-filter', 'aria-label': 'pool',
      onchange: () => {
        pool = sel.value === '' ? null : +sel.value;
        changed();
      },
    }, h('option', { value: '' }, 'all pools'),
    pools.list.map((p, i) => h('option', { value: i }, p.name)),
    h('option', { value: UNKNOWN_POOL, title: 'its segment was freed before the snapshot' }, 'pool unknown'));
    out.push(h('label', { class: 'filter' }, 'Pool ', sel));
  }
  if (streams.length > 1) {
    const sel = h('select', {
      class: 'stream-filter', 'aria-label': 'stream',
      onchange: () => {
        stream = sel.value === '' ? null : +sel.value;
        changed();
      },
    }, h('option', { value: '' }, 'all streams'), streams.map((s) => h('option', { value: s }, `stream ${s}`)));
    out.push(h('label', { class: 'filter' }, 'Stream ', sel));
  }
  return out;
}

// The elements of a timeline model in the chosen pool and stream (a
// Uint8Array, 1 = shown), or null when nothing is chosen.
export function elementMask(md, pool, stream) {
  if (pool === null && stream === null) return null;
  const a = elementAttrs(md);
  const mask = new Uint8Array(md.m);
  for (let e = 0; e < md.m; e++) {
    mask[e] = (pool === null || a.pool[e] === pool) && (stream === null || a.stream[e] === stream) ? 1 : 0;
  }
  return mask;
}

// The range of the trace the views are limited to, per device, in events
// [from, to] (both shown). Views ask `events(dev)` and listen for changes.
export class TraceRange {
  constructor() {
    this.byDevice = new Map();
    this.listeners = new Set();
  }

  events(dev) { return this.byDevice.get(dev.index) || null; }

  set(dev, from, to) {
    if (from === null) this.byDevice.delete(dev.index);
    else {
      const a = Math.max(0, Math.min(from, to));
      const b = Math.min(dev.n - 1, Math.max(from, to));
      if (b < a) return;
      this.byDevice.set(dev.index, [a, b]);
    }
    for (const f of this.listeners) f(dev);
  }

  onChange(f) { this.listeners.add(f); }
}

// The header's range control: from/to trace entries, the timeline's current
// window, or everything.
export class RangeControl {
  constructor(app) {
    this.app = app;
    this.button = h('button', {
      type: 'button', class: 'range-btn', title: 'limit the timelines and the allocator state to part of the trace',
      onclick: () => this.toggle(),
    }, 'Range');
    this.from = h('input', { type: 'number', min: 0, class: 'range-from', 'aria-label': 'from trace entry', placeholder: 'from entry' });
    this.to = h('input', { type: 'number', min: 0, class: 'range-to', 'aria-label': 'to trace entry', placeholder: 'to entry' });
    for (const input of [this.from, this.to]) {
      input.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') this.apply();
      });
    }
    this.panel = h('div', { class: 'range-panel', hidden: true },
      h('span', null, 'Show trace entries '), this.from, h('span', null, ' to '), this.to,
      h('button', { type: 'button', class: 'link range-apply', onclick: () => this.apply() }, 'Apply'),
      h('button', { type: 'button', class: 'link', onclick: () => this.fromTimeline() }, 'the memory timeline\'s window'),
      h('button', { type: 'button', class: 'link range-clear', onclick: () => this.clear() }, 'all'),
      h('span', { class: 'hint' }, 'Limits the timelines, the private pools and the allocator state\'s events.'));
    app.range.onChange(() => this.refresh());
  }

  get dev() { return this.app.page.device(this.app.device); }

  toggle() { this.panel.hidden = !this.panel.hidden; }

  apply() {
    const dev = this.dev;
    const a = parseInt(this.from.value, 10);
    const b = parseInt(this.to.value, 10);
    if (!dev.n || (!Number.isFinite(a) && !Number.isFinite(b))) return;
    const lastEntry = dev.entry(dev.n - 1);
    const from = dev.eventOfEntry(Number.isFinite(a) ? a : 0);
    const to = dev.eventOfEntry(Number.isFinite(b) ? b : lastEntry);
    this.app.range.set(dev, from, to);
  }

  fromTimeline() {
    const v = this.app.views.get(`timeline:${this.app.device}`);
    if (!v) return;
    const md = v.model;
    const [x0, x1] = v.axis === 'time' ? [md.stateAtTime(v.x0), md.stateAtTime(v.x1)] : [v.x0, v.x1];
    // States s are "after event s-1".
    this.app.range.set(this.dev, Math.max(0, Math.floor(x0) - 1), Math.max(0, Math.ceil(x1) - 2));
  }

  clear() { this.app.range.set(this.dev, null); }

  refresh() {
    const dev = this.dev;
    const r = this.app.range.events(dev);
    this.button.classList.toggle('on', !!r);
    this.button.textContent = r
      ? `Entries ${formatCount(dev.entry(r[0]))}–${formatCount(dev.entry(r[1]))}`
      : 'Range';
    this.from.value = r ? dev.entry(r[0]) : '';
    this.to.value = r ? dev.entry(r[1]) : '';
  }
}

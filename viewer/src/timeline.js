// The memory timelines: MemoryViz's stacked bands (every live allocation a
// band, stacked in allocation order, the small ones summed in one band on
// top). This is the model: the elements, their kinds and sizes, the live
// bytes in every state, filters, and what the page says about one element;
// timeline_paint.js draws it.
//
// The engine hands over every element in stacking order with the event that
// allocates it (src) and the one that frees it (end), the level-of-detail
// order (largest first) and checkpoints of the live set (live_stack.js
// walks from them).

import { textMatcher } from './data.js';
import { A, TABLEAU10, formatAddr, formatSize, formatTimestamp, parseColor } from './format.js';
import { LiveStack } from './live_stack.js';

export const KIND_ALLOC = 0;
export const KIND_FREE_ONLY = 1;
export const KIND_LIVE = 2;
// The band that sums up the elements beyond the detail limit; ids below it
// are bands a model draws under the elements (pools.js).
export const SUMMARY_ID = -2;

// memory_viz's "ghost block": what the page says about a live block of the
// snapshot that the trace never allocated.
export const GHOST_TEXT = '[Ghost block] Live in the snapshot\'s segments but absent from the trace: allocated ' +
  'before _record_memory_history() began, or its alloc event fell out of the history ring buffer ' +
  '(max_entries). It is still allocated at the snapshot.';

export class TimelineModel {
  constructor(dev, mode) {
    this.dev = dev;
    this.mode = mode;  // 'tl': allocations, 'st': segments
    this.segments = mode === 'st';
    const c = (n) => dev.col(`${mode}.${n}`);
    this.meta = dev.meta[mode];
    this.end = c('end');
    this.bysize = c('bysize');
    this.cpoff = c('cpoff');
    this.cpids = c('cpids');
    this.envmax = c('envmax');
    this.envmin = c('envmin');
    this.m = this.end.length;
    this.n = dev.n;
    this.initial = this.meta.initial;
    this.cpInterval = this.meta.cpInterval;
    this.cpCount = this.cpoff.length - 1;
    this.derive(c('isrc'));

    const m = this.m;
    const n = this.n;
    const size = new Float64Array(m);
    const code = new Int32Array(n);
    const evSize = dev.ev.size;
    for (let e = 0; e < m; e++) {
      const s = this.src[e];
      const k = this.kind[e];
      if (k !== KIND_LIVE) size[e] = evSize[s];
      else size[e] = this.segments ? dev.seg.size[~s] : dev.blk.req[~s];
      if (k === KIND_ALLOC) code[s] = e + 1;
      const end = this.end[e];
      if (end >= 0) code[end] = -(e + 1);
    }
    this.size = size;
    this.code = code;
    // total[s]: bytes live in state s (after s events; state 0 is before any).
    const total = new Float64Array(n + 1);
    let t = 0;
    for (let e = 0; e < this.initial; e++) t += size[e];
    total[0] = t;
    for (let i = 0; i < n; i++) {
      const cc = code[i];
      if (cc > 0) t += size[cc - 1];
      else if (cc < 0) t -= size[-cc - 1];
      total[i + 1] = t;
    }
    this.total = total;
    this.totalAll = total;
    this.include = null;  // Uint8Array over elements (1: shown) while a filter is on
    // Bands drawn below the elements, [id, bytes] in state s, and their
    // colours: set by the pools' view (pools.js), absent here.
    /** @type {((s: number) => [number, number][]) | null} */
    this.underlay = null;
    /** @type {((id: number) => number) | null} */
    this.underlayColor = null;
    this.rank = new Uint32Array(m);
    for (let r = 0; r < m; r++) this.rank[this.bysize[r]] = r;
    this.setColors(null, null);
    this._initialPrefix = null;
  }

  // Colours: `palette` ('#rrggbb' list) and each element's index into it;
  // null for MemoryViz's (Tableau10 by element index).
  setColors(palette, index) {
    this.colors = (palette || TABLEAU10).map(parseColor);
    this.colorOf = index;
  }

  // Kinds, sources and MemoryViz's element indices, from the sources of the
  // initially live elements: element initial+k is allocated by the k-th
  // alloc event; MemoryViz numbers elements in trace order (allocations and
  // frees of unrecorded allocations), then the snapshot's live blocks.
  derive(isrc) {
    const m = this.m;
    const I = this.initial;
    const kind = new Uint8Array(m);
    const src = new Int32Array(m);
    const tidx = new Uint32Array(m);
    const action = this.dev.ev.action;
    const allocAction = this.segments ? A.SEGMENT_ALLOC : A.ALLOC;
    const freeOnlyAt = new Map();
    let live = 0;
    for (let j = 0; j < I; j++) {
      src[j] = isrc[j];
      if (isrc[j] >= 0) {
        kind[j] = KIND_FREE_ONLY;
        freeOnlyAt.set(isrc[j], j);
      } else {
        kind[j] = KIND_LIVE;
        live++;
      }
    }
    let next = I;
    let t = 0;
    for (let i = 0; i < this.n; i++) {
      if (action[i] === allocAction) {
        kind[next] = KIND_ALLOC;
        src[next] = i;
        tidx[next++] = t++;
      } else if (freeOnlyAt.size && freeOnlyAt.has(i)) {
        tidx[freeOnlyAt.get(i)] = t++;
      }
    }
    // Live snapshot blocks come last, in the order MemoryViz collects them
    // (ids count down: the list of initial elements is reversed).
    for (let j = live - 1; j >= 0; j--) tidx[j] = t++;
    this.kind = kind;
    this.src = src;
    this.tidx = tidx;
  }

  get states() { return this.n + 1; }

  // Shows only the elements with include[e] = 1 (a pool or stream filter);
  // null shows all. The totals (y axis, minimap, peaks) follow the filter.
  setFilter(include) {
    this.include = include;
    this._envelope = null;
    if (!include) {
      this.total = this.totalAll;
      return;
    }
    const total = new Float64Array(this.n + 1);
    let t = 0;
    for (let e = 0; e < this.initial; e++) if (include[e]) t += this.size[e];
    total[0] = t;
    const code = this.code;
    for (let i = 0; i < this.n; i++) {
      const c = code[i];
      if (c > 0) {
        if (include[c - 1]) t += this.size[c - 1];
      } else if (c < 0 && include[-c - 1]) t -= this.size[-c - 1];
      total[i + 1] = t;
    }
    this.total = total;
  }

  // The minimap's curve: the engine's maxima per bucket of events when all
  // is shown, else the same from the filtered totals.
  envelope() {
    if (!this.include && !this.underlay) {
      return { env: this.envmax, bucket: this.meta.envBucket, peak: this.meta.peak };
    }
    if (!this._envelope) {
      const bucket = this.meta.envBucket;
      const nb = Math.ceil(this.n / bucket);
      const env = new Float64Array(nb);
      let peak = this.total[0];
      for (let i = 0; i < this.n; i++) {
        const v = this.total[i + 1];
        const b = Math.floor(i / bucket);
        if (v > env[b]) env[b] = v;
        if (v > peak) peak = v;
      }
      this._envelope = { env, bucket, peak };
    }
    return this._envelope;
  }

  // Time of state s in µs (state s begins with event s-1).
  stateTime(s) {
    const t = this.dev.times;
    if (!this.n) return this.dev.meta.t0;
    return t[Math.max(0, Math.min(this.n - 1, s - 1))];
  }

  // First state whose time is >= t.
  stateAtTime(t) {
    const times = this.dev.times;
    let lo = 0;
    let hi = this.n;  // index into events
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (times[mid] < t) lo = mid + 1;
      else hi = mid;
    }
    // Event lo is the first with time >= t; it starts state lo+1. State 0
    // shares event 0's time.
    return lo === 0 ? 0 : lo + 1;
  }

  // For each of `width` columns over [x0, x1) (states, or µs when
  // axis === 'time'), the state drawn there: the one with the most memory
  // among the states visible in the column, -1 where there is none.
  columns(x0, x1, width, axis) {
    const rep = new Int32Array(width).fill(-1);
    const low = new Float64Array(width);  // the least memory among the column's states
    const total = this.total;
    const last = this.n;  // last state
    const dx = (x1 - x0) / width;
    let maxTotal = 0;
    for (let c = 0; c < width; c++) {
      const a = x0 + c * dx;
      const b = a + dx;
      let s0;
      let s1;
      if (axis === 'time') {
        if (!this.n) continue;
        const tFirst = this.dev.times[0];
        const tLast = this.dev.times[this.n - 1];
        if (b <= tFirst || a > tLast) continue;
        const lo = this.stateAtTime(a);
        const hi = this.stateAtTime(b);
        // The state already active at a (or the one starting exactly there).
        s0 = a <= tFirst ? 0 : (lo <= last && this.stateTime(lo) === a ? lo : lo - 1);
        s1 = Math.max(hi, s0 + 1);
      } else {
        if (b <= 0 || a >= last + 1) continue;
        s0 = Math.max(0, Math.floor(a));
        s1 = Math.min(last + 1, Math.max(s0 + 1, Math.ceil(b)));
      }
      s0 = Math.min(s0, last);
      s1 = Math.min(s1, last + 1);
      let best = s0;
      let bestV = total[s0];
      let lowV = bestV;
      for (let s = s0 + 1; s < s1; s++) {
        const v = total[s];
        if (v > bestV) {
          bestV = v;
          best = s;
        } else if (v < lowV) lowV = v;
      }
      rep[c] = best;
      low[c] = lowV;
      if (bestV > maxTotal) maxTotal = bestV;
    }
    return { rep, low, maxTotal };
  }

  // Live bytes after each element's allocation (MemoryViz: "total memory
  // used after allocation").
  totalAfterAlloc(e) {
    if (this.kind[e] === KIND_ALLOC) return this.total[this.src[e] + 1];
    if (!this._initialPrefix) {
      const p = new Float64Array(this.initial);
      let acc = 0;
      for (let i = 0; i < this.initial; i++) {
        acc += this.size[i];
        p[i] = acc;
      }
      this._initialPrefix = p;
    }
    return this._initialPrefix[e];
  }

  // Everything the page says about one element.
  info(e) {
    const dev = this.dev;
    const ev = dev.ev;
    const kind = this.kind[e];
    const src = this.src[e];
    const r = {
      id: e, index: this.tidx[e], kind, size: this.size[e], segment: this.segments,
      start: kind === KIND_ALLOC ? src : -1, end: this.end[e], rank: this.rank[e],
      totalAfter: this.totalAfterAlloc(e), compileContext: '', userMetadata: '', time: 0,
    };
    if (kind !== KIND_LIVE) {
      r.addr = ev.addr[src];
      r.version = ev.version[src];
      r.stream = ev.stream[src];
      r.stack = ev.stack[src];
      r.time = dev.times[src];
      r.compileContext = dev.page.str(ev.cc[src]);
      r.userMetadata = dev.page.str(ev.meta[src]);
    } else if (this.segments) {
      const s = ~src;
      r.addr = dev.seg.addr[s];
      r.version = dev.seg.version[s];
      r.stream = dev.seg.stream[s];
      r.stack = dev.seg.stack[s];
    } else {
      const b = ~src;
      r.addr = dev.blk.addr[b];
      r.version = dev.blk.version[b];
      r.stack = dev.blk.stack[b];
      const s = dev.segmentAt(r.addr);
      r.stream = s >= 0 ? dev.seg.stream[s] : 0;
    }
    r.name = formatAddr(this.segments, r.addr, r.version);
    const s = dev.segmentAt(r.addr);
    r.pool = s >= 0 ? [dev.seg.pool0[s], dev.seg.pool1[s]] : null;
    return r;
  }

  // The details pane: what the element is, its life, and its stack.
  describe(e) {
    const i = this.info(e);
    const dev = this.dev;
    const what = this.segments ? 'segment' : 'allocation';
    const lines = [];
    lines.push(`${i.name}  ${formatSize(i.size)} ${what}  ·  stream ${i.stream}  ·  ` +
      (i.pool ? `pool (${i.pool[0]}, ${i.pool[1]})` : 'pool unknown') + `  ·  element ${i.index}`);
    lines.push(`Total ${this.segments ? 'reserved' : 'allocated'} after this ${what}: ` +
      formatSize(i.totalAfter));
    const life = [];
    if (i.kind === KIND_ALLOC) life.push(`allocated at trace entry ${dev.entry(i.start)} (${formatTimestamp(i.time)})`);
    else if (i.kind === KIND_FREE_ONLY) life.push('allocated before the recorded history');
    else life.push('allocated before the recorded history (a live block of the snapshot)');
    if (i.end >= 0) life.push(`freed at trace entry ${dev.entry(i.end)} (${formatTimestamp(dev.times[i.end])})`);
    else life.push('still live at the snapshot');
    lines.push(life.join(', '));
    if (i.compileContext && i.compileContext !== 'N/A') lines.push(`Compile context: ${i.compileContext}`);
    if (i.userMetadata) lines.push(`User metadata: ${i.userMetadata}`);
    if (i.kind === KIND_FREE_ONLY) lines.push('', 'Its allocation is not in the trace; stack of the free:');
    else if (i.kind === KIND_LIVE && !this.segments) lines.push('', GHOST_TEXT, 'Stack of its allocation, as the snapshot keeps it:');
    else if (i.kind === KIND_LIVE) {
      lines.push('', 'Not in the trace: recorded only in the snapshot\'s state. Stack of its last allocation:');
    }
    return { info: i, head: lines.join('\n'), frames: dev.page.stack(i.stack) };
  }

  // Elements whose address, stack text, user metadata or compile context
  // contains `query` (case-insensitive): a Uint8Array over elements, 1 = match.
  search(query) {
    const q = query.trim().toLowerCase();
    const out = new Uint8Array(this.m);
    if (!q) return out;
    // Stacks, user metadata and compile contexts are the page's tables.
    const match = textMatcher(this.dev.page, q);
    const hexq = q.replace(/^0x/, '').replace(/^[bs](?=[0-9a-f])/, '');
    const ev = this.dev.ev;
    for (let e = 0; e < this.m; e++) {
      const k = this.kind[e];
      const src = this.src[e];
      let addr;
      let st;
      if (k !== KIND_LIVE) {
        addr = ev.addr[src];
        st = ev.stack[src];
      } else if (this.segments) {
        addr = this.dev.seg.addr[~src];
        st = this.dev.seg.stack[~src];
      } else {
        addr = this.dev.blk.addr[~src];
        st = this.dev.blk.stack[~src];
      }
      if ((hexq && /^[0-9a-f_]+$/.test(hexq) && addr.toString(16).includes(hexq.split('_')[0])) ||
          match.stack(st) || (k !== KIND_LIVE && (match.str(ev.meta[src]) || match.str(ev.cc[src])))) out[e] = 1;
    }
    return out;
  }

  // States where the element is live: [from, to).
  lifetime(e) {
    const k = this.kind[e];
    const from = k === KIND_ALLOC ? this.src[e] + 1 : 0;
    const to = this.end[e] >= 0 ? this.end[e] + 1 : this.n + 1;
    return [from, to];
  }

  // Live elements (ids, stacking order) in state s, all of them.
  liveAt(s) {
    const live = new LiveStack(this, this.m);
    live.moveTo(s);
    const out = [];
    for (let j = 0; j < live.len; j++) if (live.ids[j] >= 0) out.push(live.ids[j]);
    return out;
  }
}

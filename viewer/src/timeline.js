// The memory timelines: MemoryViz's stacked bands (every live allocation a
// band, stacked in allocation order, the small ones summed in one band on
// top), drawn column by column at the resolution of the screen.
//
// The engine hands over every element in stacking order with the event that
// allocates it (src) and the one that frees it (end), the level-of-detail
// order (largest first) and checkpoints of the live set. A render walks the
// events of the visible window once from the nearest checkpoint, keeping the
// live drawn elements in stacking order; for each pixel column it picks the
// state with the most memory in that column (so peaks never disappear) and
// turns the stack into pixel spans. Cost: O(events in view + columns x live
// elements), whatever the zoom or the snapshot's size.

import { textMatcher } from './data.js';
import { A, TABLEAU10, formatAddr, formatSize, formatTimestamp } from './format.js';

export const KIND_ALLOC = 0;
export const KIND_FREE_ONLY = 1;
export const KIND_LIVE = 2;
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

  // The stack in each column as pixel spans: for column c, spans
  // [off[c], off[c+1]) of (id, y0, y1) in device pixels from the bottom;
  // id SUMMARY_ID is the band of the elements beyond the detail limit.
  // `force` (optional Uint8Array over elements): drawn whatever the limit.
  spans(rep, detail, pxPerByte, height, force = null) {
    const width = rep.length;
    const off = new Int32Array(width + 1);
    let cap = Math.max(1024, width * 16);
    let ids = new Int32Array(cap);
    let y0s = new Int32Array(cap);
    let y1s = new Int32Array(cap);
    let k = 0;
    // Appends one band of a pixel column, growing the arrays when full.
    const push = (id, y0, y1) => {
      if (k + 2 >= cap) {
        cap *= 2;
        ids = grow(ids, cap);
        y0s = grow(y0s, cap);
        y1s = grow(y1s, cap);
      }
      ids[k] = id;
      y0s[k] = y0;
      y1s[k] = y1;
      k++;
    };
    const live = new LiveStack(this, detail, force);
    const size = this.size;
    const total = this.total;
    for (let c = 0; c < width; c++) {
      off[c] = k;
      const s = rep[c];
      if (s < 0) continue;
      live.moveTo(s);
      const list = live.ids;
      const len = live.len;
      let acc = 0;
      let py = 0;
      // Bands drawn below the elements (the private pools' capacity).
      if (this.underlay) {
        for (const [id, bytes] of this.underlay(s)) {
          acc += bytes;
          const ny = Math.floor(acc * pxPerByte);
          if (ny > py) {
            push(id, py, Math.min(ny, height));
            py = Math.min(ny, height);
          }
        }
      }
      for (let j = 0; j < len; j++) {
        const id = list[j];
        if (id < 0) continue;
        acc += size[id];
        const ny = Math.floor(acc * pxPerByte);
        if (ny > py) {
          push(id, py, Math.min(ny, height));
          py = ny;
          if (py >= height) break;
        }
      }
      const top = Math.floor(total[s] * pxPerByte);
      if (top > py && py < height) push(SUMMARY_ID, py, Math.min(top, height));
    }
    off[width] = k;
    return { off, ids: ids.subarray(0, k), y0: y0s.subarray(0, k), y1: y1s.subarray(0, k) };
  }

  // Paints spans into RGBA pixels (Uint32, little-endian ABGR), row 0 at
  // the top. `dim` (optional Uint8Array over elements): 1 = draw faded.
  // `lightFrom` (optional, per column): pixel height above which the
  // column's memory was not live all the time (it came and went within the
  // column); drawn lighter so that zoomed-out views keep the ups and downs.
  paint(spans, pixels, width, height, dim, lightFrom) {
    const { off, ids, y0, y1 } = spans;
    const colors = this.colors;
    const faded = colors.map((c) => mix(c, 0xffffffff, 0.78));
    const dark = colors.map((c) => mix(c, 0xff000000, 0.25));
    const light = colors.map((c) => mix(c, 0xffffffff, 0.55));
    const summary = parseColor('#c8cdd3');
    const summaryFaded = mix(summary, 0xffffffff, 0.6);
    const summaryLight = mix(summary, 0xffffffff, 0.5);
    const tidx = this.tidx;
    const kind = this.kind;
    const ghosts = !this.segments;
    const colorOf = this.colorOf;
    const n = colors.length;
    for (let c = 0; c < width; c++) {
      const lf = lightFrom ? lightFrom[c] : height;
      for (let k = off[c]; k < off[c + 1]; k++) {
        const id = ids[k];
        let col;
        let edge;
        if (id === SUMMARY_ID) {
          col = edge = dim ? summaryFaded : summary;
        } else if (id < SUMMARY_ID) {
          col = this.underlayColor(id);
          edge = mix(col, 0xff000000, 0.45);
        } else {
          const ci = colorOf ? colorOf[id] % n : tidx[id] % n;
          if (dim && dim[id]) col = edge = faded[ci];
          else {
            col = colors[ci];
            edge = dark[ci];
          }
        }
        const a = y0[k];
        const b = y1[k];
        // A darker top row separates neighbouring bands of the same colour.
        const lc = b <= lf || id < SUMMARY_ID ? col
          : id === SUMMARY_ID ? summaryLight : (dim && dim[id] ? col : light[colorOf ? colorOf[id] % n : tidx[id] % n]);
        let p = (height - b) * width + c;
        let y = b - 1;
        if (b - a >= 4) {
          pixels[p] = y >= lf ? lc : edge;
          p += width;
          y--;
        }
        if (ghosts && id >= 0 && kind[id] === KIND_LIVE) {
          // Ghost blocks (live in the snapshot, never allocated in the
          // trace) are hatched.
          const hatch = mix(col, 0xffffffff, 0.6);
          for (; y >= a; y--, p += width) pixels[p] = ((c + y) & 7) < 3 ? hatch : (y >= lf ? lc : col);
          continue;
        }
        for (; y >= a && y >= lf; y--, p += width) pixels[p] = lc;
        for (; y >= a; y--, p += width) pixels[p] = col;
      }
    }
  }

  // The element at pixel height py (from the bottom) of column c, SUMMARY_ID
  // for the summary band, -1 for nothing.
  hit(spans, c, py) {
    if (c < 0 || c >= spans.off.length - 1) return -1;
    for (let k = spans.off[c]; k < spans.off[c + 1]; k++) {
      if (py >= spans.y0[k] && py < spans.y1[k]) return spans.ids[k];
    }
    return -1;
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

// The live drawn elements in stacking order while walking the events:
// appended on allocation (a new element always stacks on top), tombstoned
// on free, compacted when half dead.
export class LiveStack {
  constructor(model, detail, force = null) {
    this.model = model;
    this.detail = detail;
    this.force = force;
    this.ids = new Int32Array(256);
    this.len = 0;
    this.dead = 0;
    this.pos = new Int32Array(model.m).fill(-1);
    this.state = -1;
  }

  reset(s) {
    const md = this.model;
    for (let j = 0; j < this.len; j++) if (this.ids[j] >= 0) this.pos[this.ids[j]] = -1;
    this.len = 0;
    this.dead = 0;
    // Checkpoint k holds state (k+1)*cpInterval.
    const k = Math.min(md.cpCount, Math.floor(s / md.cpInterval)) - 1;
    if (k >= 0) {
      for (let j = md.cpoff[k]; j < md.cpoff[k + 1]; j++) this.push(md.cpids[j]);
      this.state = (k + 1) * md.cpInterval;
    } else {
      for (let e = 0; e < md.initial; e++) this.push(e);
      this.state = 0;
    }
  }

  push(id) {
    const md = this.model;
    if (md.include && !md.include[id]) return;
    if (md.rank[id] >= this.detail && !(this.force && this.force[id])) return;
    if (this.len === this.ids.length) this.ids = grow(this.ids, this.len * 2);
    this.pos[id] = this.len;
    this.ids[this.len++] = id;
  }

  remove(id) {
    const p = this.pos[id];
    if (p < 0) return;
    this.ids[p] = -1;
    this.pos[id] = -1;
    if (++this.dead > 64 && this.dead * 2 > this.len) this.compact();
  }

  compact() {
    let w = 0;
    for (let j = 0; j < this.len; j++) {
      const id = this.ids[j];
      if (id >= 0) {
        this.pos[id] = w;
        this.ids[w++] = id;
      }
    }
    this.len = w;
    this.dead = 0;
  }

  moveTo(s) {
    const md = this.model;
    if (this.state < 0 || s < this.state) {
      this.reset(s);
    } else {
      // Jump ahead through a checkpoint when one lies between here and s.
      const k = Math.min(md.cpCount, Math.floor(s / md.cpInterval));
      if (k >= 1 && k * md.cpInterval > this.state) this.reset(s);
    }
    const code = md.code;
    for (let i = this.state; i < s; i++) {
      const c = code[i];
      if (c > 0) this.push(c - 1);
      else if (c < 0) this.remove(-c - 1);
    }
    this.state = s;
  }
}

function grow(a, n) {
  const b = new a.constructor(n);
  b.set(a.subarray(0, Math.min(a.length, n)));
  return b;
}

// '#rrggbb' -> 0xAABBGGRR (ImageData's byte order on little-endian machines).
export function parseColor(hexColor) {
  const v = parseInt(hexColor.slice(1), 16);
  return (0xff000000 | ((v & 0xff) << 16) | (v & 0xff00) | ((v >> 16) & 0xff)) >>> 0;
}

export function mix(a, b, t) {
  const ch = (x, s) => (x >>> s) & 0xff;
  const m = (s) => Math.round(ch(a, s) * (1 - t) + ch(b, s) * t) << s;
  return (0xff000000 | m(16) | m(8) | m(0)) >>> 0;
}

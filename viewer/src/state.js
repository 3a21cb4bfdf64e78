// The allocator state after any event (the "Allocator State History"):
// segments and their active blocks, reached from the engine's nearest later
// checkpoint by undoing events, exactly as MemoryViz undoes them from the
// final snapshot state.

import { A, blockColor, countOf, formatAddr, formatPercent, formatSize } from './format.js';

export class AllocatorStateModel {
  constructor(dev) {
    this.dev = dev;
    const c = (n) => dev.col(`sc.${n}`);
    this.interval = dev.meta.sc.interval;
    this.count = dev.meta.sc.count;
    this.soff = c('soff');
    this.saddr = c('saddr');
    this.ssize = c('ssize');
    this.ssrc = c('ssrc');
    this.boff = c('boff');
    this.bsrc = c('bsrc');
    this.bflag = c('bflag');
    this._cache = null;
  }

  // The snapshot's own state: after the last event.
  finalState() {
    const dev = this.dev;
    const segs = new Map();
    const blocks = new Map();
    const S = dev.seg;
    const B = dev.blk;
    for (let s = 0; s < S.addr.length; s++) {
      segs.set(S.addr[s], { addr: S.addr[s], size: S.size[s], src: ~s });
      for (let b = S.bbegin[s]; b < S.bend[s]; b++) {
        const st = B.state[b];
        if (st === 0 || st === 1) blocks.set(B.addr[b], { src: ~b, pending: st === 1 });
      }
    }
    return { after: dev.n - 1, segs, blocks };
  }

  checkpoint(k) {
    const segs = new Map();
    const blocks = new Map();
    for (let j = this.soff[k]; j < this.soff[k + 1]; j++) {
      segs.set(this.saddr[j], { addr: this.saddr[j], size: this.ssize[j], src: this.ssrc[j] });
    }
    const ev = this.dev.ev;
    const B = this.dev.blk;
    for (let j = this.boff[k]; j < this.boff[k + 1]; j++) {
      const src = this.bsrc[j];
      const addr = src >= 0 ? ev.addr[src] : B.addr[~src];
      blocks.set(addr, { src, pending: this.bflag[j] === 1 });
    }
    return { after: (k + 1) * this.interval - 1, segs, blocks };
  }

  // State after event i (-1: before the first event).
  stateAfter(i) {
    const n = this.dev.n;
    i = Math.max(-1, Math.min(n - 1, i));
    let st = this._cache;
    // Undo from the cached state when it is ahead and close; else from the
    // first checkpoint at or after i.
    if (!st || st.after < i || st.after - i > this.interval) {
      const k = Math.ceil((i + 1) / this.interval) - 1;
      st = k >= 0 && k < this.count ? this.checkpoint(k) : (k < 0 && this.count > 0 ? this.checkpoint(0) : this.finalState());
    }
    for (let j = st.after; j > i; j--) this.undo(st, j);
    st.after = i;
    this._cache = st;
    return st;
  }

  undo(st, j) {
    const ev = this.dev.ev;
    const addr = ev.addr[j];
    const size = ev.size[j];
    switch (ev.action[j]) {
      case A.FREE: st.blocks.set(addr, { src: j, pending: false }); break;
      case A.FREE_REQUESTED: {
        const b = st.blocks.get(addr);
        if (b) b.pending = false;
        break;
      }
      case A.FREE_COMPLETED: st.blocks.set(addr, { src: j, pending: true }); break;
      case A.ALLOC: st.blocks.delete(addr); break;
      case A.SEGMENT_FREE: st.segs.set(addr, { addr, size, src: j }); break;
      case A.SEGMENT_ALLOC: st.segs.delete(addr); break;
      case A.SEGMENT_UNMAP: this._unmapUndo(st, addr, size, j); break;
      case A.SEGMENT_MAP: this._mapUndo(st, addr, size); break;
      default: break;
    }
  }

  segStream(seg) {
    return seg.src >= 0 ? this.dev.ev.stream[seg.src] : this.dev.seg.stream[~seg.src];
  }

  // Undoing an unmap maps the range again, joined to same-stream neighbours.
  _unmapUndo(st, addr, size, j) {
    let seg = { addr, size, src: j };
    const stream = this.dev.ev.stream[j];
    const next = st.segs.get(addr + size);
    if (next && this.segStream(next) === stream) {
      seg.size += next.size;
      st.segs.delete(next.addr);
    }
    let prev = null;
    for (const s of st.segs.values()) {
      if (s.addr + s.size === addr && this.segStream(s) === stream) prev = s;
    }
    if (prev) prev.size += seg.size;
    else st.segs.set(addr, seg);
  }

  // Undoing a map cuts the range out of the segment holding it.
  _mapUndo(st, addr, size) {
    for (const s of st.segs.values()) {
      const end = s.addr + s.size;
      if (addr >= s.addr && addr < end) {
        st.segs.delete(s.addr);
        if (addr > s.addr) st.segs.set(s.addr, { addr: s.addr, size: addr - s.addr, src: s.src });
        if (addr + size < end) st.segs.set(addr + size, { addr: addr + size, size: end - addr - size, src: s.src });
        return;
      }
    }
  }

  // A block of a state, resolved: address, sizes, version, stack.
  blockInfo(addr, b) {
    const dev = this.dev;
    if (b.src >= 0) {
      const e = b.src;
      return {
        addr, size: dev.ev.size[e], requested: dev.ev.size[e], version: dev.ev.version[e],
        stack: dev.ev.stack[e], pending: b.pending, userMetadata: dev.page.str(dev.ev.meta[e]),
        compileContext: dev.page.str(dev.ev.cc[e]), src: e,
      };
    }
    const k = ~b.src;
    return {
      addr, size: dev.blk.size[k], requested: dev.blk.req[k], version: dev.blk.version[k],
      stack: dev.blk.stack[k], pending: b.pending, userMetadata: '', compileContext: '', src: b.src,
    };
  }

  segmentInfo(seg) {
    const dev = this.dev;
    if (seg.src >= 0) {
      const e = seg.src;
      return {
        addr: seg.addr, size: seg.size, stream: dev.ev.stream[e], version: dev.ev.version[e],
        stack: dev.ev.stack[e], pool: null, userMetadata: dev.page.str(dev.ev.meta[e]),
      };
    }
    const k = ~seg.src;
    return {
      addr: seg.addr, size: seg.size, stream: dev.seg.stream[k], version: dev.seg.version[k],
      stack: dev.seg.stack[k], pool: [dev.seg.pool0[k], dev.seg.pool1[k]], userMetadata: '',
    };
  }
}

// Segments packed into rows as MemoryViz draws them: sorted by (size,
// address), left to right in rows as wide as the largest segment, with a
// small gap. Blocks sit inside their segment at their offset. `keep`
// (optional) chooses the segments shown; the others and their blocks are
// left out, totals included.
export function layoutState(model, st, gap = 0, keep = null) {
  let segs = [...st.segs.values()].map((s) => model.segmentInfo(s));
  if (keep) segs = segs.filter(keep);
  segs.sort((a, b) => a.size - b.size || a.addr - b.addr);
  const rowWidth = segs.reduce((m, s) => Math.max(m, s.size), 0);
  const byAddr = [...segs].sort((a, b) => a.addr - b.addr);
  let row = 0;
  let x = 0;
  for (const s of segs) {
    if (x > 0 && x + s.size > rowWidth) {
      row++;
      x = 0;
    }
    s.row = row;
    s.x = x;
    s.blocks = [];
    s.requested = 0;
    s.used = 0;
    x += s.size + gap;
  }
  let allocated = 0;
  let reserved = 0;
  for (const s of segs) reserved += s.size;
  const orphans = [];
  for (const [addr, b] of st.blocks) {
    const info = model.blockInfo(addr, b);
    const seg = findSegment(byAddr, addr);
    if (!seg && keep) continue;  // a block of a segment filtered out
    allocated += info.requested;
    if (!seg) {
      orphans.push(info);
      continue;
    }
    info.seg = seg;
    info.x = seg.x + (addr - seg.addr);
    info.color = info.pending ? '#e15759' : blockColor(addr);
    seg.blocks.push(info);
    seg.requested += info.requested;
    seg.used += info.size;
  }
  for (const s of segs) s.blocks.sort((a, b) => a.addr - b.addr);
  return { segs, rows: segs.length ? row + 1 : 0, rowWidth, allocated, reserved, orphans };
}

function findSegment(byAddr, addr) {
  let lo = 0;
  let hi = byAddr.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (byAddr[mid].addr <= addr) lo = mid + 1;
    else hi = mid;
  }
  const s = byAddr[lo - 1];
  return s && addr < s.addr + s.size ? s : null;
}

// Tooltip texts of the state view.
export function segmentText(s) {
  const free = s.size - s.requested;
  const internal = s.used - s.requested;  // rounding inside blocks
  const pct = free > 0 ? ` (${formatPercent(internal / free)} lost to rounding inside blocks)` : '';
  const pool = s.pool && (s.pool[0] || s.pool[1]) ? `, pool (${s.pool[0]}, ${s.pool[1]})` : '';
  return `${formatAddr(true, s.addr, s.version)}: segment of ${formatSize(s.size)}, ` +
    `${formatSize(free)} free${pct}, stream ${s.stream}${pool}, ${countOf(s.blocks.length, 'active block')}`;
}

export function blockText(b) {
  const waiting = b.pending ? ' (freed, waiting for another stream to finish using it: record_stream)' : '';
  const lost = b.size - b.requested;
  const rounding = lost > 0 ? `, ${formatSize(lost)} lost to rounding` : '';
  const stream = b.seg ? `, stream ${b.seg.stream}` : '';
  return `${formatAddr(false, b.addr, b.version)}: ${formatSize(b.requested)} allocation${waiting}` +
    `${rounding}${stream}`;
}

// The largest run of free bytes inside any segment (what a new allocation
// without a new cudaMalloc can get at most).
export function largestFree(layout) {
  let best = 0;
  for (const s of layout.segs) {
    let at = s.addr;
    for (const b of s.blocks) {
      best = Math.max(best, b.addr - at);
      at = Math.max(at, b.addr + b.size);
    }
    best = Math.max(best, s.addr + s.size - at);
  }
  return best;
}

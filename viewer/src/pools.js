// Private memory pools (CUDA graphs, torch.cuda.MemPool): how much each one
// reserves and how much of that is allocated, after every event, and the
// timeline of "Allocated Memory (incl. Private Pools)": memory_viz's view
// where a private pool counts with all it holds, since no other allocation
// can use its free bytes. The pools sit at the bottom as bands of their
// capacity (allocated part darker), the allocations outside them on top.
//
// Pools are known from the snapshot's segments (devicePools); a pool's
// reserved bytes before the trace are its segments at the snapshot minus
// what the trace's segment events added, as MemoryViz computes them.

import { A, TABLEAU10, countOf, formatSize, mix, parseColor, upperBound } from './format.js';
import { devicePools, elementAttrs, elementMask, poolKind } from './filters.js';
import { SUMMARY_ID } from './timeline.js';

// Underlay ids of pool k: its allocated part and its free part.
export const poolBandId = (k, free) => -3 - (2 * k + (free ? 1 : 0));
const bandOf = (id) => ({ pool: Math.floor((-3 - id) / 2), free: ((-3 - id) & 1) === 1 });

// The events that change each private pool (their indices, per pool) and
// what they change in all: reserved bytes (segments) and allocated bytes.
function privatePoolChanges(dev, pools) {
  const P = pools.list.length;
  const ev = dev.ev;
  const deltaR = new Float64Array(P);
  const deltaA = new Float64Array(P);
  const changes = Array.from({ length: P }, () => []);
  for (let i = 0; i < dev.n; i++) {
    const a = ev.action[i];
    let k = -1;
    let dr = 0;
    let da = 0;
    if (a === A.SEGMENT_ALLOC || a === A.SEGMENT_MAP || a === A.SEGMENT_FREE || a === A.SEGMENT_UNMAP) {
      k = pools.at(ev.addr[i]);
      dr = a === A.SEGMENT_ALLOC || a === A.SEGMENT_MAP ? ev.size[i] : -ev.size[i];
    } else if (a === A.ALLOC || a === A.FREE || a === A.FREE_COMPLETED) {
      k = pools.at(ev.addr[i]);
      da = a === A.ALLOC ? ev.size[i] : -ev.size[i];
    }
    if (k >= 0 && pools.isPrivate(k)) {
      deltaR[k] += dr;
      deltaA[k] += da;
      changes[k].push(i);
    }
  }
  return { deltaR, deltaA, changes };
}

// The snapshot's final state per pool: reserved and allocated (requested)
// bytes, segments and live blocks.
function poolsAtSnapshot(dev, pools) {
  const P = pools.list.length;
  const reserved = new Float64Array(P);
  const active = new Float64Array(P);
  const segments = new Int32Array(P);
  const blocks = new Int32Array(P);
  const S = dev.seg;
  const B = dev.blk;
  for (let s = 0; s < S.addr.length; s++) {
    const k = pools.ofSegment[s];
    reserved[k] += S.size[s];
    segments[k]++;
    for (let b = S.bbegin[s]; b < S.bend[s]; b++) {
      if (B.state[b] === 0 || B.state[b] === 1) {  // active_allocated, active_pending_free
        active[k] += B.req[b];
        blocks[k]++;
      }
    }
  }
  return { reserved, active, segments, blocks };
}

// One pool's series: its reserved and allocated bytes from r and ac before
// the events c (its changes, in order), and its peak.
function changePoints(ev, c, r, ac) {
  const at = new Int32Array(c.length + 1);
  const res = new Float64Array(c.length + 1);
  const act = new Float64Array(c.length + 1);
  at[0] = 0;
  res[0] = r;
  act[0] = Math.max(0, ac);
  let peak = Math.max(r, ac);
  let peakState = 0;
  for (let j = 0; j < c.length; j++) {
    const i = c[j];
    const a = ev.action[i];
    if (a === A.SEGMENT_ALLOC || a === A.SEGMENT_MAP) r += ev.size[i];
    else if (a === A.SEGMENT_FREE || a === A.SEGMENT_UNMAP) r -= ev.size[i];
    else if (a === A.ALLOC) ac += ev.size[i];
    else ac -= ev.size[i];
    at[j + 1] = i + 1;
    res[j + 1] = r;
    act[j + 1] = Math.max(0, ac);
    if (Math.max(r, ac) > peak) {
      peak = Math.max(r, ac);
      peakState = i + 1;
    }
  }
  return { at, reserved: res, active: act, peak, peakState, events: c.length };
}

// Reserved and allocated bytes of every private pool after each event, as
// change points: for pool k, at[j] is the first state with values
// reserved[j], active[j].
export class PoolSeries {
  constructor(dev) {
    this.dev = dev;
    this.pools = devicePools(dev);
    const P = this.pools.list.length;
    const { deltaR, deltaA, changes } = privatePoolChanges(dev, this.pools);
    const final = poolsAtSnapshot(dev, this.pools);
    this.segments = final.segments;
    this.blocks = final.blocks;
    this.finalReserved = final.reserved;
    this.finalActive = final.active;
    this.series = [];
    for (let k = 0; k < P; k++) {
      if (!this.pools.isPrivate(k)) {
        this.series.push(null);
        continue;
      }
      // The trace's changes, replayed from the state before the first one.
      this.series.push(changePoints(dev.ev, changes[k], final.reserved[k] - deltaR[k], final.active[k] - deltaA[k]));
    }
    this.private = [];
    for (let k = 0; k < P; k++) if (this.series[k]) this.private.push(k);
  }

  // [reserved, allocated] of pool k in state s.
  valuesAt(k, s) {
    const sr = this.series[k];
    const j = Math.max(0, upperBound(sr.at, s) - 1);
    return [sr.reserved[j], sr.active[j]];
  }

  // A pool's capacity: its reserved bytes, or what its blocks hold when
  // that is more (a trace that began after the pool's segments).
  capacityAt(k, s) {
    const [r, a] = this.valuesAt(k, s);
    return Math.max(r, a);
  }
}

export function poolSeries(dev) {
  if (!dev._poolSeries) dev._poolSeries = new PoolSeries(dev);
  return dev._poolSeries;
}

// Live bytes in every state: the elements outside the private pools
// (outside[e] = 1) plus every private pool's capacity.
function totalsWithPools(base, series, outside) {
  const total = new Float64Array(base.n + 1);
  let t = 0;
  for (let e = 0; e < base.initial; e++) if (outside[e]) t += base.size[e];
  const code = base.code;
  // Pool capacities change only at their own events.
  let pools = 0;
  const capNow = new Float64Array(series.pools.list.length);
  for (const k of series.private) {
    capNow[k] = series.capacityAt(k, 0);
    pools += capNow[k];
  }
  const next = series.private.map(() => 1);
  total[0] = t + pools;
  for (let i = 0; i < base.n; i++) {
    const c = code[i];
    if (c > 0) {
      if (outside[c - 1]) t += base.size[c - 1];
    } else if (c < 0 && outside[-c - 1]) t -= base.size[-c - 1];
    series.private.forEach((k, j) => {
      const sr = series.series[k];
      if (next[j] < sr.at.length && sr.at[next[j]] === i + 1) {
        const cap = Math.max(sr.reserved[next[j]], sr.active[next[j]]);
        pools += cap - capNow[k];
        capNow[k] = cap;
        next[j]++;
      }
    });
    total[i + 1] = t + pools;
  }
  return total;
}

// What the page says about a pool's bands (ids below SUMMARY_ID); the
// elements' own ids go to the memory timeline's model.
function describePoolBands(md, base, series) {
  const poolInfo = (id) => {
    const { pool: k, free } = bandOf(id);
    const p = series.pools.list[k];
    return { k, free, p, name: `${p.name}, ${free ? 'reserved but not allocated' : 'allocated'}` };
  };
  md.info = (id) => {
    if (id >= SUMMARY_ID) return Object.getPrototypeOf(md).info.call(md, id);
    const { k, p, name } = poolInfo(id);
    return { id, name, size: series.series[k].peak, stream: '—', pool: [p.p0, p.p1], start: -1, end: -1 };
  };
  md.describe = (id) => {
    if (id >= SUMMARY_ID) return Object.getPrototypeOf(md).describe.call(md, id);
    const { k, free, p } = poolInfo(id);
    const sr = series.series[k];
    const lines = [
      `${p.name}: ${poolKind(p.p0, p.p1)}`,
      `${free ? 'Reserved by the pool but not allocated' : 'Allocated in the pool'}. ` +
        `Peak capacity ${formatSize(sr.peak)}; at the snapshot ${formatSize(series.finalReserved[k])} reserved in ` +
        `${countOf(series.segments[k], 'segment')}, ` +
        `${formatSize(series.finalActive[k])} allocated in ${countOf(series.blocks[k], 'block')}.`,
      'No other allocation can use a private pool\'s free bytes, so this view counts the pool with all it',
      'reserves. Its allocations one by one: the memory timeline, filtered to this pool.',
    ];
    return { info: md.info(id), head: lines.join('\n'), frames: null };
  };
  md.lifetime = (id) => {
    if (id >= SUMMARY_ID) return Object.getPrototypeOf(md).lifetime.call(md, id);
    const sr = series.series[bandOf(id).pool];
    return [sr.at[0], base.n + 1];
  };
}

// The timeline model of the view: the memory timeline's model seen through
// a filter that leaves the private pools' allocations out of the stack and
// draws the pools' capacity under it (prototype delegation keeps the big
// arrays shared with the memory timeline).
export function poolTimelineModel(base) {
  const series = poolSeries(base.dev);
  const attrs = elementAttrs(base);
  const md = Object.create(base);
  md.title = 'Allocated Memory (incl. Private Pools)';
  md.series = series;
  md._attrs = attrs;
  md._envelope = null;
  const colors = series.pools.list.map((_, k) => parseColor(TABLEAU10[(k + 3) % 10]));
  md.underlay = (s) => {
    const out = [];
    for (const k of series.private) {
      const [r, a] = series.valuesAt(k, s);
      const cap = Math.max(r, a);
      if (cap <= 0) continue;
      out.push([poolBandId(k, false), a], [poolBandId(k, true), cap - a]);
    }
    return out;
  };
  md.underlayColor = (id) => {
    const b = bandOf(id);
    const grey = mix(colors[b.pool], parseColor('#9aa3ad'), 0.55);
    return b.free ? mix(grey, 0xffffffff, 0.55) : grey;
  };
  md.setFilter = (include) => {
    const outside = new Uint8Array(base.m);
    for (let e = 0; e < base.m; e++) {
      outside[e] = series.pools.isPrivate(attrs.pool[e]) || (include && !include[e]) ? 0 : 1;
    }
    md.include = outside;
    md._envelope = null;
    const total = totalsWithPools(base, series, outside);
    md.total = total;
    let peak = 0;
    let peakEvent = -1;
    for (let i = 0; i <= base.n; i++) {
      if (total[i] > peak) {
        peak = total[i];
        peakEvent = i - 1;
      }
    }
    md.meta = Object.assign({}, base.meta, { peak, peakEvent });
  };
  md.setFilter(null);

  describePoolBands(md, base, series);
  md.poolOfBand = (id) => bandOf(id).pool;
  md.elementMask = (pool, stream) => elementMask(base, pool, stream);
  return md;
}

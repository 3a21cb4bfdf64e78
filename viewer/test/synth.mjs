// A small hand-made device whose page data is worked out by hand (see the
// comments), for the timeline and state tests.
import { A } from '../src/format.js';
import { oneDevice, pageFrom, tables } from './helpers.mjs';

const f = (name, filename, line) => ({ name, filename, line });
export const STACKS = [
  [f('forward', '/m/model.py', 12), f('<module>', '/m/train.py', 3)],  // stack 1
  [f('step', '/m/optim.py', 40), f('<module>', '/m/train.py', 5)],     // stack 2
];

// Events (after pairing free_requested+free_completed into "free"):
//  0 segment_alloc 0x1000 4096        5 free_completed 0x1600 20 (never allocated in the trace)
//  1 alloc 0x1000 100  (A)             6 alloc 0x1200 60  (E, version 1)
//  2 alloc 0x1200 50   (B)             7 free_requested 0x1000 100
//  3 alloc 0x1400 30   (C)             8 oom: 5000 requested, 1000 free on the device
//  4 free 0x1200 50    (B ends)
export const EVENTS = [
  [A.SEGMENT_ALLOC, 0x1000, 4096, 1, 0],
  [A.ALLOC, 0x1000, 100, 1, 0],
  [A.ALLOC, 0x1200, 50, 2, 0],
  [A.ALLOC, 0x1400, 30, 1, 0],
  [A.FREE, 0x1200, 50, 2, 0],
  [A.FREE_COMPLETED, 0x1600, 20, 0, 0],
  [A.ALLOC, 0x1200, 60, 2, 1],
  [A.FREE_REQUESTED, 0x1000, 100, 1, 0],
  [A.OOM, 1000, 5000, 0, 0],
];

// Elements in stacking order: G (live block 0x1800 of the snapshot, never
// in the trace) and D (freed in the trace, allocated before it) are live
// from the start, MemoryViz's reversed order; then A, B, C, E.
export const ELEMENTS = {
  names: ['G', 'D', 'A', 'B', 'C', 'E'],
  kind: [2, 1, 0, 0, 0, 0],
  src: [~4, 5, 1, 2, 3, 6],
  end: [-1, 5, -1, 4, -1, -1],
  tidx: [5, 3, 0, 1, 2, 4],
  size: [10, 20, 100, 50, 30, 60],
  bysize: [2, 5, 3, 4, 1, 0],
};
// Live bytes in state s (after s events).
export const TOTALS = [30, 30, 130, 180, 210, 160, 140, 200, 200, 200];

export function synthPage({ interval = 3 } = {}) {
  const t = tables(STACKS);
  const n = EVENTS.length;
  const col = (i) => EVENTS.map((e) => e[i]);
  const d = (k, v) => [`dev.${k}`, v];
  const E = ELEMENTS;
  // Timeline checkpoints: live ids after events 2 and 5 (states 3 and 6).
  const tlcp = interval === 3 ? { off: [0, 4, 7], ids: [0, 1, 2, 3, 0, 2, 4] } : { off: [0], ids: [] };
  // State checkpoints, undoing from the snapshot (see state.test.mjs).
  const sc = interval === 3 ? {
    soff: [0, 1, 2], saddr: [0x1000, 0x1000], ssize: [4096, 4096], ssrc: [~0, ~0],
    boff: [0, 4, 7],
    bsrc: [~0, 4, 5, ~4, ~0, ~2, ~4],
    bflag: [0, 0, 1, 0, 0, 0, 0],
  } : { soff: [0], saddr: [], ssize: [], ssrc: [], boff: [0], bsrc: [], bflag: [] };
  const flameNames = ['all', 'stream_0', 'active_allocated', 'train.py:3:<module>', 'model.py:12:forward',
    'inactive', '<non-python>'].map(t.sid);  // interned before the tables are built
  const columns = Object.fromEntries([
    ...Object.entries(t.columns()),
    d('ev.action', new Uint8Array(col(0))),
    // trace entries: a "free" event (10) stands for two entries
    d('ev.entry', new Uint32Array(EVENTS.reduce((acc, _, i) => {
      acc.push(i ? acc[i - 1] + (EVENTS[i - 1][0] === A.FREE ? 2 : 1) : 0);
      return acc;
    }, []))),
    d('ev.addr', new Float64Array(col(1))),
    d('ev.size', new Uint32Array(col(2))),
    d('ev.stream', { const: 0, count: n }),
    d('ev.stack', new Uint8Array(col(3))),
    d('ev.version', new Uint8Array(col(4))),
    d('ev.dt', new Uint32Array([0, 10, 10, 10, 10, 10, 10, 10, 10])),
    d('ev.cc', { const: 0, count: n }),
    d('ev.meta', { const: 0, count: n }),
    d('ev.other', { const: 0, count: n }),
    d('seg.addr', new Float64Array([0x1000])),
    d('seg.size', new Uint32Array([4096])),
    d('seg.stream', { const: 0, count: 1 }),
    d('seg.version', { const: 0, count: 1 }),
    d('seg.stack', new Uint8Array([1])),
    d('seg.pool0', { const: 0, count: 1 }),
    d('seg.pool1', { const: 0, count: 1 }),
    d('seg.expandable', { const: 0, count: 1 }),
    d('seg.type', { const: 0, count: 1 }),
    d('seg.allocated', new Uint32Array([1536])),
    d('seg.active', new Uint32Array([2048])),
    d('seg.requested', new Uint32Array([200])),
    d('seg.bbegin', new Uint32Array([0])),
    d('seg.bend', new Uint32Array([5])),
    d('blk.addr', new Float64Array([0x1000, 0x1200, 0x1400, 0x1600, 0x1800])),
    d('blk.size', new Uint32Array([512, 512, 512, 2560, 512])),
    d('blk.req', new Uint32Array([100, 60, 30, 20, 10])),
    d('blk.state', new Uint8Array([1, 0, 0, 2, 0])),
    d('blk.sname', { const: 0, count: 5 }),
    d('blk.version', new Uint8Array([0, 1, 0, 1, 0])),
    d('blk.stack', new Uint8Array([1, 2, 1, 0, 0])),
    d('tl.isrc', new Int32Array(E.src.slice(0, 2))),
    d('tl.end', new Int32Array(E.end)),
    d('tl.bysize', new Uint8Array(E.bysize)),
    d('tl.cpoff', new Uint32Array(tlcp.off)),
    d('tl.cpids', new Uint32Array(tlcp.ids)),
    d('tl.envmax', new Float64Array([210, 200])),
    d('tl.envmin', new Float64Array([30, 140])),
    d('st.isrc', { const: 0, count: 0 }),
    d('st.end', new Int32Array([-1])),
    d('st.bysize', new Uint8Array([0])),
    d('st.cpoff', new Uint32Array(interval === 3 ? [0, 1, 2] : [0])),
    d('st.cpids', new Uint32Array(interval === 3 ? [0, 0] : [])),
    d('st.envmax', new Float64Array([4096, 4096])),
    d('st.envmin', new Float64Array([0, 4096])),
    d('sc.soff', new Uint32Array(sc.soff)),
    d('sc.saddr', new Float64Array(sc.saddr)),
    d('sc.ssize', new Float64Array(sc.ssize)),
    d('sc.ssrc', new Int32Array(sc.ssrc)),
    d('sc.boff', new Uint32Array(sc.boff)),
    d('sc.bsrc', new Int32Array(sc.bsrc)),
    d('sc.bflag', new Uint8Array(sc.bflag)),
    // Flamegraph "memory": all > stream_0 > {active_allocated > ..., inactive > <non-python>}
    d('fm.parent', new Int32Array([-1, 0, 1, 2, 3, 1, 5])),
    d('fm.name', new Uint8Array(flameNames)),
    d('fm.value', new Uint32Array([210, 210, 190, 190, 190, 20, 20])),
  ]);
  const tlMeta = {
    elements: 6, initial: 2, cpInterval: interval, envBucket: 5, peak: 210, peakEvent: 3,
    initialTotal: 30, finalTotal: 200,
  };
  const meta = {
    title: 'synthetic', view: 'overview', generator: 'test', sourceName: '', sourceBytes: 0,
    defaultDevice: 0, streams: ['0'], settings: null, summary: null, entries: 10, segments: 1, blocks: 5,
    annotations: 0, strings: 0, frames: 4, stacks: 2, legacy: false, topKeys: ['segments', 'device_traces'],
    devices: [{
      index: 0, events: n, entries: 10, segments: 1, blocks: 5, t0: 1000, hasTime: true, ooms: 1, freeOnly: 1,
      tl: tlMeta,
      st: { ...tlMeta, elements: 1, initial: 0, peak: 4096, peakEvent: 0, initialTotal: 0, finalTotal: 4096 },
      sc: { interval, count: interval === 3 ? 2 : 0 },
    }],
  };
  return pageFrom(meta, oneDevice(columns));
}

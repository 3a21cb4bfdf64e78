import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LiveStack } from '../src/live_stack.js';
import { SUMMARY_ID, TimelineModel } from '../src/timeline.js';
import { paintSpans, spanAt, stackSpans } from '../src/timeline_paint.js';
import { TABLEAU10, parseColor } from '../src/format.js';
import { ELEMENTS, TOTALS, synthPage } from './synth.mjs';

const model = (opts) => new TimelineModel(synthPage(opts).device(0), 'tl');

// Brute force: element e is live in state s when allocated before s events
// (or before the trace) and not yet freed.
function liveBrute(md, s, detail = Infinity) {
  const out = [];
  for (let e = 0; e < md.m; e++) {
    const from = md.kind[e] === 0 ? md.src[e] + 1 : 0;
    const to = md.end[e] >= 0 ? md.end[e] + 1 : Infinity;
    if (s >= from && s < to && md.rank[e] < detail) out.push(e);
  }
  return out;
}
const liveOf = (ls) => [...ls.ids.subarray(0, ls.len)].filter((x) => x >= 0);

test('element kinds, sources, MemoryViz indices, sizes, totals and ranks', () => {
  const md = model();
  assert.deepEqual([...md.kind], ELEMENTS.kind);
  assert.deepEqual([...md.src], ELEMENTS.src);
  assert.deepEqual([...md.tidx], ELEMENTS.tidx);
  assert.deepEqual([...md.size], ELEMENTS.size);
  assert.deepEqual([...md.total], TOTALS);
  assert.deepEqual([...md.rank], [5, 4, 0, 2, 3, 1]);
});

test('replay reaches every state from checkpoints, forwards and backwards', () => {
  for (const interval of [3, 100]) {
    const md = model({ interval });
    for (const detail of [Infinity, 2, 0]) {
      const ls = new LiveStack(md, detail);
      const order = [9, 0, 4, 3, 8, 1, 6, 6, 2, 7, 5, 9, 0];
      for (const s of order) {
        ls.moveTo(s);
        assert.deepEqual(liveOf(ls), liveBrute(md, s, detail), `state ${s} detail ${detail} interval ${interval}`);
      }
    }
  }
});

test('columns pick the state with the most memory', () => {
  const md = model();
  const one = md.columns(0, 10, 10, 'event');
  assert.deepEqual([...one.rep], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  const two = md.columns(0, 10, 2, 'event');
  assert.deepEqual([...two.rep], [4, 7]);
  assert.equal(two.maxTotal, 210);
  const outside = md.columns(-10, 0, 2, 'event');
  assert.deepEqual([...outside.rep], [-1, -1]);
  // Time axis: events are 10µs apart from t0 = 1000; state s starts at event s-1.
  assert.equal(md.stateAtTime(1000), 0);
  assert.equal(md.stateAtTime(1001), 2);
  assert.equal(md.stateAtTime(1080), 9);
  const t = md.columns(1000, 1090, 3, 'time');
  assert.deepEqual([...t.rep], [3, 4, 7]);
});

test('spans stack the live elements bottom up, the rest in the summary band', () => {
  const md = model();
  const rep = new Int32Array([4]);
  const all = stackSpans(md, rep, Infinity, 1, 1000);
  const rows = (sp) => [...sp.ids].map((id, k) => [id, sp.y0[k], sp.y1[k]]);
  // G 10, D 20, A 100, B 50, C 30
  assert.deepEqual(rows(all), [[0, 0, 10], [1, 10, 30], [2, 30, 130], [3, 130, 180], [4, 180, 210]]);
  const two = stackSpans(md, rep, 2, 1, 1000);  // only A and E are drawn separately
  assert.deepEqual(rows(two), [[2, 0, 100], [SUMMARY_ID, 100, 210]]);
  const forced = stackSpans(md, rep, 2, 1, 1000, new Uint8Array([0, 0, 0, 0, 1, 0]));  // a search match
  assert.deepEqual(rows(forced), [[2, 0, 100], [4, 100, 130], [SUMMARY_ID, 130, 210]]);
  assert.equal(spanAt(all, 0, 150), 3);
  assert.equal(spanAt(two, 0, 150), SUMMARY_ID);
  assert.equal(spanAt(all, 0, 500), -1);
  // Clipped to the height.
  assert.deepEqual(rows(stackSpans(md, rep, Infinity, 1, 100)), [[0, 0, 10], [1, 10, 30], [2, 30, 100]]);
  // Sub-pixel elements merge into whoever crosses the next pixel.
  assert.deepEqual(rows(stackSpans(md, rep, Infinity, 0.01, 1000)), [[2, 0, 1], [4, 1, 2]]);
});

test('paint fills columns from the bottom in the elements\' colours', () => {
  const md = model();
  const sp = stackSpans(md, new Int32Array([4, -1]), Infinity, 0.05, 12);
  const px = new Uint32Array(2 * 12);
  paintSpans(md, sp, px, 2, 12, null);
  // bottom row of column 0: G (tidx 5) over 0.5px is skipped; D ends at 1.5px -> row 0 is D (tidx 3)
  assert.equal(px[11 * 2], parseColor(TABLEAU10[3]));
  assert.equal(px[11 * 2 + 1], 0);  // column 1 has no state
  const dim = new Uint8Array(md.m).fill(1);
  paintSpans(md, sp, px, 2, 12, dim);
  assert.notEqual(px[11 * 2], parseColor(TABLEAU10[3]));
});

test('element details: MemoryViz names, lifetime, totals', () => {
  const md = model();
  const names = [0, 1, 2, 3, 4, 5].map((e) => md.info(e).name);
  assert.deepEqual(names, ['b1800_0', 'b1600_0', 'b1000_0', 'b1200_0', 'b1400_0', 'b1200_1']);
  assert.equal(md.totalAfterAlloc(2), 130);
  assert.equal(md.totalAfterAlloc(0), 10);
  assert.equal(md.totalAfterAlloc(1), 30);
  const a = md.describe(2);
  assert.match(a.head, /^b1000_0 {2}100\.0B \(100 bytes\) allocation/);
  assert.match(a.head, /allocated at trace entry 1 \(1970-01-01T00:00:00\.001010Z\)/);
  // events after a free pair are one trace entry further on
  assert.match(md.describe(5).head, /allocated at trace entry 7 /);
  assert.equal(md.dev.eventOfEntry(7), 6);
  assert.equal(md.dev.eventOfEntry(5), 4);  // the pair's second entry: the free event
  assert.match(a.head, /still live at the snapshot/);
  assert.equal(a.frames[0].name, 'forward');
  assert.match(md.describe(1).head, /stack of the free/);
  assert.match(md.describe(0).head, /\[Ghost block\] Live in the snapshot's segments but absent from the trace/);
  assert.deepEqual(md.lifetime(3), [3, 5]);
  assert.deepEqual(md.liveAt(9), [0, 2, 4, 5]);
});

test('search by address and by frame', () => {
  const md = model();
  assert.deepEqual([...md.search('1200')], [0, 0, 0, 1, 0, 1]);
  assert.deepEqual([...md.search('b1400_0')], [0, 0, 0, 0, 1, 0]);
  assert.deepEqual([...md.search('optim.py')], [0, 0, 0, 1, 0, 1]);
  assert.deepEqual([...md.search('MODEL.PY:12')], [0, 0, 1, 0, 1, 0]);
  assert.deepEqual([...md.search('  ')], [0, 0, 0, 0, 0, 0]);
});

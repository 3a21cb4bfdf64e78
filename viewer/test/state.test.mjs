import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AllocatorStateModel, blockText, largestFree, layoutState, segmentText } from '../src/state.js';
import { FlameTree } from '../src/flame.js';
import { synthPage } from './synth.mjs';

const modelOf = (opts) => new AllocatorStateModel(synthPage(opts).device(0));
const view = (st) => ({
  segs: [...st.segs.values()].map((s) => [s.addr, s.size]).sort((a, b) => a[0] - b[0]),
  blocks: [...st.blocks.entries()].map(([a, b]) => [a, b.pending]).sort((a, b) => a[0] - b[0]),
});

// Undoing from the snapshot (blocks 0x1000 pending free, 0x1200, 0x1400, 0x1800):
const EXPECTED = {
  8: { segs: [[0x1000, 4096]], blocks: [[0x1000, true], [0x1200, false], [0x1400, false], [0x1800, false]] },
  6: { segs: [[0x1000, 4096]], blocks: [[0x1000, false], [0x1200, false], [0x1400, false], [0x1800, false]] },
  5: { segs: [[0x1000, 4096]], blocks: [[0x1000, false], [0x1400, false], [0x1800, false]] },
  4: { segs: [[0x1000, 4096]], blocks: [[0x1000, false], [0x1400, false], [0x1600, true], [0x1800, false]] },
  2: { segs: [[0x1000, 4096]], blocks: [[0x1000, false], [0x1200, false], [0x1600, true], [0x1800, false]] },
  0: { segs: [[0x1000, 4096]], blocks: [[0x1600, true], [0x1800, false]] },
  [-1]: { segs: [], blocks: [[0x1600, true], [0x1800, false]] },
};

test('state after each event, from checkpoints or from the snapshot, in any order', () => {
  for (const interval of [3, 100]) {
    const md = modelOf({ interval });
    for (const i of [8, 0, 6, -1, 2, 5, 4, 8, 2, 2]) {
      assert.deepEqual(view(md.stateAfter(i)), EXPECTED[i], `after ${i} (interval ${interval})`);
    }
  }
});

test('undo of segment map/unmap cuts and joins ranges (expandable segments)', () => {
  const md = modelOf();
  const st = { after: 0, segs: new Map([[0, { addr: 0, size: 300, src: ~0 }]]), blocks: new Map() };
  md._mapUndo(st, 100, 100);  // undoing a map of [100, 200) leaves [0,100) and [200,300)
  assert.deepEqual([...st.segs.values()].map((s) => [s.addr, s.size]), [[0, 100], [200, 100]]);
  md._unmapUndo(st, 100, 100, 0);  // and undoing its unmap joins them again
  assert.deepEqual([...st.segs.values()].map((s) => [s.addr, s.size]), [[0, 300]]);
});

test('layout, sums and tooltips', () => {
  const md = modelOf();
  const L = layoutState(md, md.stateAfter(8));
  assert.equal(L.reserved, 4096);
  assert.equal(L.allocated, 100 + 60 + 30 + 10);
  assert.equal(L.rows, 1);
  const seg = L.segs[0];
  assert.deepEqual(seg.blocks.map((b) => b.x), [0, 0x200, 0x400, 0x800]);
  assert.equal(largestFree(L), 4096 - 0x800 - 512);
  assert.match(segmentText(seg), /^s1000_0: segment of 4\.0KiB \(4,096 bytes\), 3\.8KiB \(3,896 bytes\) free/);
  const pending = seg.blocks.find((b) => b.pending);
  assert.match(blockText(pending), /^b1000_0: 100\.0B \(100 bytes\) allocation \(freed, waiting/);
  assert.match(blockText(seg.blocks[1]), /b1200_1: 60\.0B .* 452\.0B \(452 bytes\) lost to rounding, stream 0/);
  // Blocks outside any segment (before the segment existed) are kept aside.
  const early = layoutState(md, md.stateAfter(-1));
  assert.equal(early.orphans.length, 2);
});

test('flamegraph tree: layout, zoom and search', () => {
  const page = synthPage();
  const t = FlameTree.fromDevice(page.device(0), 'fm');
  assert.equal(t.maxDepth, 4);
  const full = t.layout(0);
  const inactive = full.find((r) => t.names[r.id] === 'inactive');
  assert.ok(Math.abs(inactive.x0 - 190 / 210) < 1e-9 && inactive.x1 === 1);
  const zoomed = t.layout(2);
  assert.deepEqual(zoomed.map((r) => [t.names[r.id], r.x0, r.x1]), [
    ['all', 0, 1], ['stream_0', 0, 1], ['active_allocated', 0, 1],
    ['train.py:3:<module>', 0, 1], ['model.py:12:forward', 0, 1]]);
  const r = t.search('PY:');
  assert.equal(r.count, 2);
  assert.equal(r.bytes, 190);  // the nested match is not counted twice
  assert.deepEqual(t.path(4), ['stream_0', 'active_allocated', 'train.py:3:<module>', 'model.py:12:forward']);
  const live = t.without(['inactive']);
  assert.equal(live.n, 5);
  assert.deepEqual([...live.value], [190, 190, 190, 190, 190]);
  assert.ok(!live.names.includes('<non-python>'));
});

// The models behind the annotations, filters, pools, allocator-state search
// and the standalone viewer's plumbing, on tests/data/synthetic_annotated
// (tests/data/make_annotated.py says what it holds; the numbers below are
// worked out from it by hand). Needs a built memsight, like
// reports.test.mjs; skipped without one.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { annotationModel } from '../src/annotations.js';
import { EventRows } from '../src/event_rows.js';
import { UNKNOWN_POOL, devicePools, elementMask, poolKind } from '../src/filters.js';
import { poolSeries, poolTimelineModel } from '../src/pools.js';
import { joinPieces, manyFilesText, routeFor } from '../src/standalone.js';
import { TimelineModel } from '../src/timeline.js';
import { FIXTURES, embeddedPageData, optionalBinary, outDir, report } from '../../tests/browser/reports.mjs';

const binary = optionalBinary();
const dir = binary ? outDir() : null;
after(() => dir && rmSync(dir, { recursive: true, force: true }));

async function device(fixture) {
  const page = await embeddedPageData(report(join(FIXTURES, fixture), dir));
  return page.device(0);
}

const MiB = 1 << 20;
const KiB = 1 << 10;

describe('synthetic_annotated', { skip: !binary && 'no memsight binary' }, () => {
  test('annotations: paired, nested, open at either end, other devices left out', async () => {
    const dev = await device('synthetic_annotated.pickle.gz');
    const an = annotationModel(dev);
    const names = Array.from({ length: an.n }, (_, i) => an.name(i));
    assert.deepEqual(names, ['ProfilerStep#0', 'ProfilerStep#1', '## forward ##', '## forward ##',
      'legacy_scope', 'ProfilerStep#2']);
    assert.deepEqual([...an.openStart], [1, 0, 0, 0, 0, 0]);
    assert.deepEqual([...an.openEnd], [0, 0, 0, 0, 0, 1]);
    // Events inside each range (15 events after pairing frees).
    assert.deepEqual(names.map((_, i) => an.states(i)), [[0, 1], [1, 14], [3, 6], [3, 5], [8, 12], [14, 15]]);
    assert.deepEqual([...an.lane], [0, 0, 1, 2, 1, 0]);
    assert.equal(an.lanes, 3);
    assert.deepEqual(an.at(4).map((k) => names[k]), ['ProfilerStep#1', '## forward ##', '## forward ##']);
    assert.deepEqual(an.span(2, 'event'), [3, 7]);
    assert.match(an.describe(0), /before the recording began/);
    assert.match(an.describe(5), /still open at the snapshot/);
    assert.match(an.describe(2), /3 allocator events: trace entries 3 to 5/);
  });

  test('allocator-state rows: search, stream, pool and range', async () => {
    const dev = await device('synthetic_annotated.pickle.gz');
    assert.equal(dev.n, 15);
    const rows = new EventRows(dev);
    rows.search('phase=backward');
    assert.equal(rows.matches, 4);
    assert.equal(rows.nextMatch(0, 1), 6);
    assert.equal(rows.nextMatch(7, 1), 9);
    assert.equal(rows.nextMatch(10, 1), -1);
    assert.equal(rows.nextMatch(9, -1), 7);
    rows.filter({ onlyMatches: true });
    assert.deepEqual([...rows.rows], [6, 7, 9, 10]);
    rows.search('b7f0002');  // an address, as the page names it
    assert.equal(rows.matches, 4);
    rows.search('model.py:57');  // a frame
    assert.equal(rows.matches, 4);
    rows.search('legacy_scope');  // the old-style annotation entries' frames
    assert.equal(rows.matches, 2);
    rows.search('');
    rows.filter({ stream: 1 });
    assert.deepEqual([...rows.rows], [6, 7, 13, 14]);
    const pools = devicePools(dev);
    assert.deepEqual(pools.list.map((p) => p.name), ['default pool', 'private pool (0, 7)']);
    rows.filter({ pool: 1 });
    assert.deepEqual([...rows.rows], [3, 4, 5, 10]);
    rows.filter({ pool: UNKNOWN_POOL });
    assert.deepEqual([...rows.rows], [8, 12]);
    rows.filter({ range: [3, 5] });
    assert.deepEqual([...rows.rows], [3, 4, 5]);
    assert.equal(rows.rowOf(4), 1);
    rows.filter({});
    assert.equal(rows.rows, null);
    assert.equal(rows.count, 15);
  });

  test('pool and stream filters of the memory timeline', async () => {
    const dev = await device('synthetic_annotated.pickle.gz');
    const md = new TimelineModel(dev, 'tl');
    const end = () => md.total[md.n];
    assert.equal(end(), 9 * MiB + 256 * KiB);  // 4 + 3 + 0.75 + 1 (ghost) + 0.5 (pool)
    md.setFilter(elementMask(md, null, 1));
    assert.equal(end(), 768 * KiB);
    md.setFilter(elementMask(md, 1, null));
    assert.equal(end(), 512 * KiB);
    assert.equal(md.envelope().peak, 768 * KiB);  // both pool blocks, after event 5
    md.setFilter(elementMask(md, 0, null));
    assert.equal(end(), 8 * MiB + 768 * KiB);
    md.setFilter(null);
    assert.equal(end(), 9 * MiB + 256 * KiB);
    assert.equal(md.envelope().peak, md.meta.peak);
  });

  test('private pools: reserved and allocated after each event; the pools timeline', async () => {
    const dev = await device('synthetic_annotated.pickle.gz');
    const s = poolSeries(dev);
    assert.deepEqual(s.private, [1]);
    assert.deepEqual(s.valuesAt(1, 0), [0, 0]);          // the pool's segment is allocated in the trace
    assert.deepEqual(s.valuesAt(1, 4), [2 * MiB, 0]);     // after its segment_alloc (event 3)
    assert.deepEqual(s.valuesAt(1, 6), [2 * MiB, 768 * KiB]);
    assert.deepEqual(s.valuesAt(1, 15), [2 * MiB, 512 * KiB]);
    assert.equal(s.series[1].peak, 2 * MiB);
    assert.equal(s.finalReserved[1], 2 * MiB);
    assert.equal(s.segments[1], 1);
    const base = new TimelineModel(dev, 'tl');
    const md = poolTimelineModel(base);
    assert.equal(md.total[0], 1 * MiB);                    // the ghost block alone
    assert.equal(md.total[6], 7 * MiB + 2 * MiB);          // A, A+4, ghost + the pool's 2 MiB
    assert.equal(md.total[15], 8 * MiB + 768 * KiB + 2 * MiB);
    assert.equal(base.total[15], 9 * MiB + 256 * KiB);     // the memory timeline is untouched
    const under = md.underlay(6);
    assert.deepEqual(under.map(([, b]) => b), [768 * KiB, 2 * MiB - 768 * KiB]);
    assert.match(md.describe(under[1][0]).head, /private pool \(0, 7\): a MemPool/);
    assert.equal(poolKind(1, 0), 'a CUDA graph\'s own pool');
  });
});

test('cuda_graph: the graph\'s own pool', { skip: !binary && 'no memsight binary' }, async () => {
  const dev = await device('cuda_graph.pickle');
  const s = poolSeries(dev);
  assert.equal(s.private.length, 1);
  const k = s.private[0];
  assert.deepEqual([s.pools.list[k].p0, s.pools.list[k].p1], [1, 0]);
  // Its segments are at the snapshot: the series ends there.
  const [r, a] = s.valuesAt(k, dev.n);
  assert.equal(r, s.finalReserved[k]);
  assert.equal(a, s.finalActive[k]);
  assert.ok(r >= a && a > 0);
});

test('standalone viewer: pieces are joined in order; one file opens, two have no route yet', () => {
  const a = new Uint8Array([1, 2, 3]).buffer;
  const b = new Uint8Array([4, 5]).buffer;
  assert.deepEqual([...new Uint8Array(joinPieces([a, b]))], [1, 2, 3, 4, 5]);
  assert.ok(routeFor(1));
  assert.equal(routeFor(2), null);
});

test('standalone viewer: several files at once say what happened and which command compares them', () => {
  const two = manyFilesText(['before.pickle', "it's late.pickle"], 'dropped');
  assert.match(two, /^You dropped 2 files; this viewer opens one snapshot at a time: drop one of them\./);
  assert.match(two, /\n {2}memsight diff before\.pickle 'it'\\''s late\.pickle' -o diff\.html\n/);
  const three = manyFilesText(['r0.pickle', 'r1.pickle', 'r2.pickle'], 'picked');
  assert.match(three, /^You picked 3 files; .*pick one of them\./);
  assert.match(three, /memsight ranks r0\.pickle r1\.pickle r2\.pickle -o ranks\.html$/);
});

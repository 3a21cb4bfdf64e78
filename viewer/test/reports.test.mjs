// The engine's page data for every fixture, checked against the viewer's
// own replay: the timeline checkpoints, totals and envelope, and the
// allocator-state checkpoints must agree with replaying from the start (or
// undoing from the snapshot) in JavaScript. Needs a built memsight
// (MEMSIGHT=/path/to/memsight, else the newest build/*/memsight); skipped
// without one. MEMSIGHT_EXTRA=a.pickle:b.pickle adds snapshots (e.g. the
// 856k-entry benchmark input).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { FlameTree } from '../src/flame.js';
import { AllocatorStateModel, layoutState } from '../src/state.js';
import { LiveStack } from '../src/live_stack.js';
import { TimelineModel } from '../src/timeline.js';
import { CATEGORIES, Categories } from '../src/categories.js';
import {
  ROOT, embeddedPageData, fixtures, optionalBinary, outDir, report,
} from '../../tests/browser/reports.mjs';

const binary = optionalBinary();
const dir = binary ? outDir() : null;
after(() => dir && rmSync(dir, { recursive: true, force: true }));

async function load(file) {
  const page = await embeddedPageData(file);
  assert.ok(page, 'the page embeds its data');
  return page;
}

function checkTimeline(dev, mode) {
  const md = new TimelineModel(dev, mode);
  const meta = dev.meta[mode];
  assert.equal(md.m, meta.elements);
  // Replaying from the start reaches every checkpoint.
  const saved = md.cpCount;
  md.cpCount = 0;
  const ls = new LiveStack(md, Infinity);
  for (let k = 0; k < saved; k++) {
    const s = (k + 1) * md.cpInterval;
    ls.moveTo(s);
    const live = [...ls.ids.subarray(0, ls.len)].filter((x) => x >= 0);
    assert.deepEqual(live, [...md.cpids.subarray(md.cpoff[k], md.cpoff[k + 1])], `${mode} checkpoint ${k}`);
  }
  md.cpCount = saved;
  // Totals, peak and the envelope.
  let peak = md.total[0];
  let peakEvent = -1;
  for (let s = 1; s <= md.n; s++) {
    if (md.total[s] > peak) {
      peak = md.total[s];
      peakEvent = s - 1;
    }
  }
  assert.equal(peak, meta.peak);
  assert.equal(peakEvent, meta.peakEvent);
  assert.equal(md.total[md.n], meta.finalTotal);
  const B = meta.envBucket;
  for (let b = 0; b < md.envmax.length; b++) {
    let hi = -Infinity;
    for (let i = b * B; i < Math.min(md.n, (b + 1) * B); i++) hi = Math.max(hi, md.total[i + 1]);
    assert.equal(md.envmax[b], hi, `${mode} envelope bucket ${b}`);
  }
  // Every element is live somewhere, and ranks are a permutation.
  const seen = new Uint8Array(md.m);
  for (const e of md.bysize) seen[e]++;
  assert.ok(seen.every((x) => x === 1));
  for (let r = 1; r < md.m; r++) assert.ok(md.size[md.bysize[r - 1]] >= md.size[md.bysize[r]]);
  return md;
}

function checkState(dev) {
  const md = new AllocatorStateModel(dev);
  const key = (st) => JSON.stringify({
    segs: [...st.segs.values()].map((s) => [s.addr, s.size, s.src]).sort((a, b) => a[0] - b[0]),
    blocks: [...st.blocks.entries()].map(([a, b]) => [a, b.src, b.pending]).sort((a, b) => a[0] - b[0]),
  });
  // Undo from the snapshot in JS, compare with each engine checkpoint.
  const st = md.finalState();
  for (let k = md.count - 1; k >= 0; k--) {
    const at = (k + 1) * md.interval - 1;
    for (let j = st.after; j > at; j--) md.undo(st, j);
    st.after = at;
    assert.equal(key(st), key(md.checkpoint(k)), `state checkpoint ${k}`);
  }
  return md;
}

// Folded stacks (stack -> bytes, lines of 0 bytes or less left out) of
// `memsight memory` / `segments -o -`, which print what torch prints.
function foldedOf(snap, command) {
  const text = execFileSync(binary, [command, snap, '-o', '-'], { maxBuffer: 1 << 30 }).toString('utf8');
  const out = new Map();
  for (const line of text.split('\n')) {
    if (!line) continue;
    const at = line.lastIndexOf(' ');
    const n = Number(line.slice(at + 1));
    if (n > 0) out.set(line.slice(0, at), (out.get(line.slice(0, at)) || 0) + n);
  }
  return out;
}

// The same from the page's trees: each node's own bytes (its value less
// its children's) under the path of names to it, summed over the devices.
function addTreePaths(tree, into) {
  const path = new Array(tree.n);
  for (let i = 1; i < tree.n; i++) {
    const p = tree.parent[i];
    path[i] = p > 0 ? `${path[p]};${tree.names[i]}` : tree.names[i];
    let own = tree.value[i];
    for (const c of tree.children[i]) own -= tree.value[c];
    if (own > 0) into.set(path[i], (into.get(path[i]) || 0) + own);
  }
}

// The timeline's kinds at the end are the summary's at the snapshot (one
// classifier), in requested bytes, when no block waits on another stream
// (the timeline keeps those until free_completed, the summary does not).
function checkKinds(dev, sd) {
  const cats = new Categories(dev);
  assert.ok(cats.available, 'the page has the kinds');
  const md = new TimelineModel(dev, 'tl');
  for (let e = 0; e < md.m; e++) assert.ok(cats.category(e) < CATEGORIES.length);
  if (sd.active_now !== sd.allocated_now) return;
  const b = cats.breakdown(md, md.n);
  const want = CATEGORIES.map((c) => sd.categories.at_snapshot.by_category[c.key].requested);
  assert.deepEqual([...b.bytes], want);
}

const snapshots = binary ? [...fixtures(), join(ROOT, 'tests/data/synthetic_categories.pickle.gz'), ...(process.env.MEMSIGHT_EXTRA || '').split(':').filter(Boolean)] : [];

describe('engine page data agrees with the viewer\'s replay', { skip: !binary && 'no memsight binary' }, () => {
  for (const snap of snapshots) {
    test(snap.split('/').pop(), async () => {
      const page = await load(report(snap, dir));
      const summary = page.meta.summary;
      const trees = { memory: new Map(), segments: new Map() };
      for (const d of page.meta.devices) {
        if (!d.events && !d.segments) continue;
        const dev = page.device(d.index);
        checkTimeline(dev, 'tl');
        checkTimeline(dev, 'st');
        const sm = checkState(dev);
        // The state at the snapshot adds up to what `memsight summary` says.
        addTreePaths(FlameTree.fromDevice(dev, 'fm'), trees.memory);
        addTreePaths(FlameTree.fromDevice(dev, 'fs'), trees.segments);
        const sd = summary && page.summaryOf(d.index);
        if (sd) {
          const L = layoutState(sm, sm.stateAfter(dev.n - 1));
          // the page lays out requested sizes, as memory_viz does (torch's requested_bytes)
          assert.equal(L.allocated, sd.requested_now);
          assert.equal(L.reserved, sd.reserved_now);
          assert.equal(d.entries, sd.entries);
          checkKinds(dev, sd);
        }
      }
      // The flamegraphs hold torch's folded stacks, name for name.
      for (const command of ['memory', 'segments']) {
        const want = foldedOf(snap, command);
        assert.deepEqual(new Map([...trees[command]].sort()), new Map([...want].sort()), command);
      }
    });
  }
});

describe('empty devices cost bytes', { skip: !binary && 'no memsight binary' }, () => {
  test('a device with data among 3,000 empty ones: only it is packed', async () => {
    const src = fixtures().find((f) => f.endsWith('mlp_train.pickle'));
    const padded = join(dir, 'padded.pickle');
    execFileSync('python3', [join(ROOT, 'tests/browser/make_padded_devices.py'), src, padded, '3000', '1234']);
    const base = report(src, dir);
    const big = report(padded, dir);
    const page = await load(big);
    assert.equal(page.deviceCount, 3000);
    assert.deepEqual(page.meta.devices.map((d) => d.index), [1234]);
    assert.equal(page.meta.defaultDevice, 1234);
    assert.deepEqual(page.meta.summary.devices.map((d) => d.device), [1234]);
    assert.equal(page.deviceMeta(0), undefined);
    // The device reads as it did at index 0.
    const dev = page.device(1234);
    const ref = (await load(base)).device(0);
    assert.equal(dev.n, ref.n);
    assert.deepEqual([...dev.ev.addr], [...ref.ev.addr]);
    checkTimeline(dev, 'tl');
    checkState(dev);
    // Packed, each empty device cost about 280 bytes of the page; now the
    // 2,999 of them may not add a third of a byte each (what differs is the
    // index's digits in the column names, the file name and the summary).
    const grown = statSync(big).size - statSync(base).size;
    assert.ok(grown < 1000, `${grown} bytes more for 2,999 empty devices`);
  });
});

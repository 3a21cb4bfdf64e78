#!/usr/bin/env node
// The page's timelines against memory_viz's own data processing, on the same
// snapshots: pytorch's process_alloc_data.js (the pure part of MemoryViz.js,
// in bench/.data/memoryviz/, never committed) run in node on each snapshot,
// and memsight's page data for the same file. For every device and timeline
// ("Active Memory Timeline", "Active Cached Segment Timeline" and, where the
// device has private pools, "Allocated Memory (incl. Private Pools)") it
// compares the number of elements and the peak (memory_viz's envelope of a
// private pool never shrinks, so there its peak may be higher where a pool
// shrank). Not the final total: memory_viz records a step's total before a
// free takes effect, so its last value misses a trailing free.
//
//   node bench/memoryviz_compare.mjs [SNAPSHOT...]   (default: tests/data/*)
//
// The snapshot reaches process_alloc_data as MemoryViz hands it over: read
// by Python's pickle (python3, no torch needed), as JSON, then annotated as
// MemoryViz's annotate_snapshot does (restated here from its behaviour:
// free_requested + free_completed of one address become one "free", address
// versions, small stream numbers, block addresses).
import { execFileSync } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { poolTimelineModel } from '../viewer/src/pools.js';
import { TimelineModel } from '../viewer/src/timeline.js';
import { FIXTURES, embeddedPageData, memsightBinary, outDir, report } from '../tests/browser/reports.mjs';

const MV = join(FIXTURES, '..', '..', 'bench', '.data', 'memoryviz', 'process_alloc_data.js');
const { process_alloc_data: processAllocData } = await import(pathToFileURL(MV).href);

const TO_JSON = `
import gzip, json, lzma, pickle, sys
p = sys.argv[1]
op = gzip.open if p.endswith('.gz') else lzma.open if p.endswith('.xz') else open
with op(p, 'rb') as f:
    json.dump(pickle.load(f), sys.stdout)
`;

function annotate(snap) {
  const version = () => {
    const v = new Map();
    return (addr, inc) => {
      const r = v.get(addr) || 0;
      if (inc) v.set(addr, r + 1);
      return r;
    };
  };
  const blockV = version();
  const segV = version();
  const streams = new Map([[0, 0]]);
  const stream = (s) => {
    if (!streams.has(s)) streams.set(s, streams.size);
    return streams.get(s);
  };
  snap.categories = [];
  snap.device_traces = snap.device_traces.map((trace) => {
    const out = [];
    for (const t of trace) {
      t.frames = t.frames || [];
      t.stream = stream(t.stream);
      if (t.action === 'free_completed') {
        t.version = blockV(t.addr, true);
        const prev = out[out.length - 1];
        if (prev && prev.action === 'free_requested' && prev.addr === t.addr) {
          prev.action = 'free';
          continue;
        }
      } else if (t.action === 'free_requested' || t.action === 'alloc') t.version = blockV(t.addr, false);
      else if (t.action === 'segment_free' || t.action === 'segment_unmap') t.version = segV(t.addr, true);
      else if (t.action === 'segment_alloc' || t.action === 'segment_map') t.version = segV(t.addr, false);
      out.push(t);
    }
    return out;
  });
  for (const seg of snap.segments) {
    seg.stream = stream(seg.stream);
    seg.version = segV(seg.address, false);
    let addr = seg.address;
    for (const b of seg.blocks) {
      b.addr = addr;
      b.frames = b.frames || [];
      b.version = blockV(addr, false);
      addr += b.size;
    }
  }
  return snap;
}

const files = process.argv.length > 2 ? process.argv.slice(2)
  : readdirSync(FIXTURES).filter((f) => /\.pickle(\.gz)?$/.test(f)).sort().map((f) => join(FIXTURES, f));
memsightBinary();
const dir = outDir();
let differences = 0;
console.log('| snapshot | device | timeline | elements (memory_viz / memsight) | peak (bytes) | |');
console.log('| --- | --- | --- | --- | --- | --- |');
try {
  for (const file of files) {
    const snap = JSON.parse(execFileSync('python3', ['-c', TO_JSON, file], { maxBuffer: 1 << 30 }));
    if (Array.isArray(snap)) continue;  // a bare segment list: no timeline
    annotate(snap);
    const page = await embeddedPageData(report(file, dir));
    for (const dm of page.meta.devices) {
      const d = dm.index;
      if (!(snap.device_traces[d] || []).length && !snap.segments.some((s) => s.device === d)) continue;
      const dev = page.device(d);
      const tl = new TimelineModel(dev, 'tl');
      const kinds = [['tl', tl, false, false], ['st', new TimelineModel(dev, 'st'), true, false]];
      if (snap.segments.some((s) => s.device === d && (s.segment_pool_id[0] || s.segment_pool_id[1]))) {
        kinds.push(['pools', poolTimelineModel(tl), false, true]);
      }
      for (const [name, md, segments, pools] of kinds) {
        const ref = processAllocData(snap, d, segments, Infinity, pools);
        let refPeak = 0;
        for (const v of ref.max_at_time) refPeak = Math.max(refPeak, v);
        let peak = 0;
        for (let s = 0; s <= md.n; s++) peak = Math.max(peak, md.total[s]);
        const same = ref.elements_length === md.m && refPeak === peak;
        if (!same) differences++;
        console.log(`| ${basename(file)} | ${d} | ${name} | ${ref.elements_length} / ${md.m} | ` +
          `${refPeak} / ${peak} | ${same ? 'same' : '**differs**'} |`);
      }
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(`\n${differences} difference(s)`);
process.exitCode = differences ? 1 : 0;

#!/usr/bin/env node
// The standalone viewer (`memsight viewer`) against pytorch.org's
// MemoryViz.js, side by side in Debian's headless Chromium on the same
// snapshot: the time from the file being chosen to the memory timeline
// drawn, and to the allocator state drawn, and the renderer's peak memory.
//
//   node bench/viewer_bench.mjs [--memsight build/release/memsight] [--repeat 3]
//        [--big /tmp/large_x30.pickle] [--memoryviz-repeat 1] [--no-memoryviz]
//        [--input other.pickle]
//
// Inputs: bench/.data/large.pickle (the 856,152-entry fixture, decompressed
// here with xz) and, with --big, a larger copy made by
// ../shared/tools/scale_snapshot.py (30 copies: 2.04 GB). MemoryViz runs from
// bench/.data/memoryviz/ (MemoryViz.js and process_alloc_data.js of pytorch's
// main branch, never committed; d3 7 from npm: see bench/README.md), served
// under a made-up https origin from those files; every other request is
// refused, as the page's own CDN imports of d3 are answered with the local
// copy. Needs tests/browser's node_modules.
//
// Both pages are timed the same way: a capturing listener stamps
// performance.now() when the file input changes; the stop stamp is taken by
// a check run every animation frame until the view is drawn (memsight: the
// timeline view has rendered / the allocator state has selected an event;
// MemoryViz: its SVG holds the timeline's polygons / the state's blocks).
// Memory: the peak resident set (VmHWM) of the page's renderer process, a
// fresh browser for every run. Runs alternate between the two viewers.
import { execFileSync } from 'node:child_process';
import {
  existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import vm from 'node:vm';
import { launch } from '../tests/browser/harness.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DATA = join(ROOT, 'bench', '.data');
const SHARED = resolve(ROOT, '..', 'shared');
const MV = join(DATA, 'memoryviz');

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}
const flag = (name) => process.argv.includes(name);
const memsight = arg('--memsight', join(ROOT, 'build', 'release', 'memsight'));
const repeat = +arg('--repeat', 3);
const mvRepeat = +arg('--memoryviz-repeat', 1);
const big = arg('--big', null);
const input = arg('--input', null);  // instead of the 856k-entry file
const withMemoryViz = !flag('--no-memoryviz');
const TIMEOUT = 1800e3;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mb = (b) => `${(b / 1e6).toFixed(0)} MB`;
const sec = (ms) => `${(ms / 1000).toFixed(2)} s`;

// Peak resident set of the renderer processes this node process started
// (the page's renderer is the largest; Chromium keeps a small spare one).
function rendererPeak() {
  const kids = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = +stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1];
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(+d);
    } catch { /* gone */ }
  }
  let peak = 0;
  const walk = (pid) => {
    for (const k of kids.get(pid) || []) {
      try {
        if (readFileSync(`/proc/${k}/cmdline`, 'utf8').includes('--type=renderer')) {
          const m = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${k}/status`, 'utf8'));
          if (m) peak = Math.max(peak, +m[1] * 1024);
        }
      } catch { /* gone */ }
      walk(k);
    }
  };
  walk(process.pid);
  return peak;
}

// Stamps the moment the file input changes (capturing, before the page's
// own handler runs).
const STAMP = () => {
  document.addEventListener('change', (e) => {
    if (e.target && e.target.type === 'file') window.__t0 = performance.now();
  }, true);
};

async function timed(page, ready) {
  await page.waitForFunction(ready, null, { polling: 'raf', timeout: TIMEOUT });
  return page.evaluate(() => window.__t1 - window.__t0);
}

async function runMemsight(viewerPage, snapshot, view) {
  const { context, close } = await launch();
  try {
    const page = await context.newPage();
    await page.route('**/*', (r) => (r.request().url().startsWith('file://') ? r.continue() : r.abort()));
    await page.addInitScript(STAMP);
    await page.goto(`file://${viewerPage}#${view}`);
    await page.waitForFunction(() => document.body.dataset.viewer === 'idle');
    await page.setInputFiles('input.file-picker', snapshot);
    const ready = view === 'timeline'
      ? () => { const v = document.querySelector('.timeline-view'); if (v && v.dataset.rendered) { window.__t1 = window.__t1 || performance.now(); return true; } return document.body.dataset.viewer === 'error'; }
      : () => { const v = document.querySelector('.state-view'); if (v && v.dataset.selected !== undefined) { window.__t1 = window.__t1 || performance.now(); return true; } return document.body.dataset.viewer === 'error'; };
    const ms = await timed(page, ready);
    const state = await page.evaluate(() => document.body.dataset.viewer);
    if (state !== 'ready') throw new Error(await page.textContent('.open-error'));
    const t = await page.evaluate(() => window.memsight.timing);
    return { ms, engine: t.engine, peak: rendererPeak() };
  } finally {
    await close();
  }
}

// d3 7 as one ES module: its UMD build, then its names exported (the page
// imports d3 and four d3 packages from a CDN; each gets this module).
function d3Module() {
  const out = join(MV, 'd3.esm.js');
  if (!existsSync(out)) {
    const src = readFileSync(join(MV, 'node_modules', 'd3', 'dist', 'd3.min.js'), 'utf8');
    const sandbox = {};
    vm.createContext(sandbox);
    vm.runInContext(src, sandbox);
    const names = Object.keys(sandbox.d3).filter((k) => /^[A-Za-z_$][\w$]*$/.test(k));
    // Local names that cannot shadow globals (d3 exports one called "window").
    writeFileSync(out, `${src}\nconst __d3 = globalThis.d3;\nexport default __d3;\n` +
      names.map((n, i) => `const _${i} = __d3[${JSON.stringify(n)}];`).join('\n') +
      `\nexport { ${names.map((n, i) => `_${i} as ${n}`).join(', ')} };\n`);
  }
  return out;
}

function memoryVizFiles() {
  const need = ['MemoryViz.js', 'process_alloc_data.js'];
  for (const f of need) {
    if (!existsSync(join(MV, f))) throw new Error(`missing ${join(MV, f)}: see bench/README.md`);
  }
  return {
    '/index.html': ['text/html', '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>' +
      '<script type="module">import "./MemoryViz.js";</script></body></html>'],
    '/MemoryViz.js': ['text/javascript', readFileSync(join(MV, 'MemoryViz.js'))],
    '/process_alloc_data.js': ['text/javascript', readFileSync(join(MV, 'process_alloc_data.js'))],
    d3: ['text/javascript', readFileSync(d3Module())],
  };
}

async function runMemoryViz(files, snapshot, view, extraArgs = []) {
  const { context, close } = await launch(extraArgs);
  try {
    const page = await context.newPage();
    const refused = [];
    await page.route('**/*', (r) => {
      const url = new URL(r.request().url());
      const local = url.host === 'memoryviz.bench' ? files[url.pathname]
        : url.host === 'cdn.jsdelivr.net' && /\/npm\/d3(-[a-z]+)?@\d+\/\+esm$/.test(url.pathname) ? files.d3 : null;
      if (!local) {
        refused.push(url.href);
        return r.abort();
      }
      return r.fulfill({ status: 200, contentType: local[0], body: local[1], headers: { 'access-control-allow-origin': '*' } });
    });
    await page.addInitScript(STAMP);
    await page.goto('https://memoryviz.bench/index.html');
    await page.waitForSelector('input[type=file]');
    if (view === 'state') await page.selectOption('select >> nth=1', 'Allocator State History');
    await page.setInputFiles('input[type=file]', snapshot);
    const ready = view === 'timeline'
      ? () => { if (document.querySelector('svg polygon')) { window.__t1 = window.__t1 || performance.now(); return true; } return false; }
      : () => { if (document.querySelector('svg[viewBox="0 0 200 100"] rect')) { window.__t1 = window.__t1 || performance.now(); return true; } return false; };
    let ms;
    const chosen = Date.now();
    try {
      ms = await timed(page, ready);
    } catch (e) {
      const why = /crashed/i.test(e.message) ? 'the renderer crashed' : String(e.message).split('\n')[0];
      return { failed: `${why} after ${((Date.now() - chosen) / 1000).toFixed(0)} s` };
    }
    if (refused.length) throw new Error(`MemoryViz asked for ${refused.join(', ')}`);
    return { ms, peak: rendererPeak() };
  } finally {
    await close();
  }
}

function prepare() {
  if (input) return big ? [input, big] : [input];
  mkdirSync(DATA, { recursive: true });
  const large = join(DATA, 'large.pickle');
  if (!existsSync(large)) {
    execFileSync('sh', ['-c', `xz -dc '${join(SHARED, 'fixtures/large/large.pickle.xz')}' > '${large}'`]);
  }
  return big ? [large, big] : [large];
}

const dir = mkdtempSync(join(tmpdir(), 'memsight-viewer-bench-'));
const viewerPage = join(dir, 'memsight-viewer.html');
execFileSync(memsight, ['viewer', '-o', viewerPage], { stdio: ['ignore', 'ignore', 'inherit'] });
const mvFiles = withMemoryViz ? memoryVizFiles() : null;
const rows = [];
try {
  for (const snapshot of prepare()) {
    const size = statSync(snapshot).size;
    const large = size > 1e9;
    for (const view of ['timeline', 'state']) {
      const ms = [];
      const mv = [];
      const n = large ? 1 : repeat;
      for (let i = 0; i < n; i++) {
        ms.push(await runMemsight(viewerPage, snapshot, view));
        // MemoryViz on a multi-gigabyte file would take the shared machine's
        // memory: its V8 heap is capped at 4 GB there, so that a failure
        // stays a failure of that page.
        if (mvFiles && i < mvRepeat) {
          mv.push(await runMemoryViz(mvFiles, snapshot, view, large ? ['--js-flags=--max-old-space-size=4096'] : []));
        }
      }
      const row = {
        input: snapshot.split('/').pop(), size, view,
        memsight: { ms: median(ms.map((r) => r.ms)), engine: median(ms.map((r) => r.engine)), peak: Math.max(...ms.map((r) => r.peak)), runs: ms.length },
        memoryviz: mv.length ? (mv[0].failed ? { failed: mv[0].failed }
          : { ms: median(mv.map((r) => r.ms)), peak: Math.max(...mv.map((r) => r.peak)), runs: mv.length }) : null,
      };
      rows.push(row);
      console.error(JSON.stringify(row));
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

console.log('| input | size | view | memsight: file chosen -> drawn | of it, the engine (WebAssembly) | memsight renderer peak | / file | MemoryViz: file chosen -> drawn | MemoryViz renderer peak | time ratio |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const r of rows) {
  const m = r.memsight;
  const v = r.memoryviz;
  const mvTime = !v ? 'not run' : v.failed ? `failed: ${v.failed}` : sec(v.ms);
  const ratio = v && !v.failed ? `${(v.ms / m.ms).toFixed(1)}x` : '';
  console.log(`| ${r.input} | ${mb(r.size)} | ${r.view} | ${sec(m.ms)} | ${sec(m.engine)} | ${mb(m.peak)} | ` +
    `${(m.peak / r.size).toFixed(2)} | ${mvTime} | ${v && !v.failed ? mb(v.peak) : ''} | ${ratio} |`);
}

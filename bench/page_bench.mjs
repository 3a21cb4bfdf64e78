#!/usr/bin/env node
// The report page at scale: generation time and file size against the
// snapshot pickle, then time to interactive in Debian's headless Chromium.
//
//   node bench/page_bench.mjs [--memsight build/release/memsight] [--repeat 3] [--scale 10]
//
// Inputs: bench/.data/large.pickle (the 856,152-entry fixture, decompressed
// by bench/engine_bench.py or here with xz) and bench/.data/large_x<scale>.pickle
// (../shared/tools/scale_snapshot.py). Needs tests/browser's node_modules
// (`npm ci` there). For each input it prints one Markdown row:
//   generation: median wall time of `memsight view IN -o OUT --view timeline`;
//   size: the HTML against the pickle;
//   ready: navigation start -> the timeline drawn with its handlers attached
//          (document.body.dataset.ready, stamped with performance.now());
//   hover / zoom: a mouse move over the plot until the tooltip shows, a wheel
//          step until the timeline has redrawn (wall time through the driver).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch, openReport } from '../tests/browser/harness.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DATA = join(ROOT, 'bench', '.data');
const SHARED = resolve(ROOT, '..', 'shared');

function arg(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
}
const memsight = arg('--memsight', join(ROOT, 'build', 'release', 'memsight'));
const repeat = +arg('--repeat', 3);
const scale = +arg('--scale', 10);

function prepare() {
  mkdirSync(DATA, { recursive: true });
  const large = join(DATA, 'large.pickle');
  if (!existsSync(large)) {
    execFileSync('sh', ['-c', `xz -dc '${join(SHARED, 'fixtures/large/large.pickle.xz')}' > '${large}'`]);
  }
  const files = [large];
  if (scale > 1) {
    const scaled = join(DATA, `large_x${scale}.pickle`);
    if (!existsSync(scaled)) {
      execFileSync('python3', [join(SHARED, 'tools/scale_snapshot.py'), large, scaled, String(scale)]);
    }
    files.push(scaled);
  }
  return files;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mb = (b) => `${(b / 1e6).toFixed(1)} MB`;

async function browserRun(file) {
  const { context, close } = await launch();
  try {
    const { page, problems } = await openReport(context, file, { hash: '#timeline/0' });
    const timing = await page.evaluate(() => window.memsight.timing);
    const box = await page.locator('.plot-overlay').boundingBox();
    // Hover the middle of the plot, low enough to be on a band.
    const x = box.x + box.width * 0.5;
    const y = box.y + box.height - 60;
    let t = performance.now();
    await page.mouse.move(x, y);
    await page.waitForFunction(() => document.querySelector('.tooltip').style.display === 'block');
    const hover = performance.now() - t;
    const renders = await page.evaluate(() => +document.querySelector('.timeline-view').dataset.rendered);
    t = performance.now();
    await page.mouse.wheel(0, -400);
    await page.waitForFunction((n) => +document.querySelector('.timeline-view').dataset.rendered > n, renders);
    const zoom = performance.now() - t;
    const renderMs = await page.evaluate(() => window.memsight.app.views.get('timeline:0').renderMs);
    if (problems.requests.length || problems.errors.length) throw new Error(JSON.stringify(problems));
    return { ready: timing.ready, decode: timing.decode, model: timing['model tl'], first: timing.firstRender, hover, zoom, renderMs };
  } finally {
    await close();
  }
}

async function main() {
  const files = prepare();
  const out = mkdtempSync(join(tmpdir(), 'memsight-page-bench-'));
  console.log(`memsight: ${memsight}; repeats: ${repeat}; chromium: ${execFileSync('/usr/bin/chromium', ['--version']).toString().trim()}\n`);
  console.log('| input | entries | generation (median s) | HTML size | pickle size | HTML / pickle | ready after navigation (median ms) | of which decode / model / first draw (ms) | hover (ms) | zoom redraw (ms) |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const f of files) {
    const html = join(out, 'report.html');
    const gen = [];
    for (let i = 0; i < repeat; i++) {
      const t = performance.now();
      execFileSync(memsight, ['view', f, '-o', html, '--view', 'timeline'], { stdio: 'ignore' });
      gen.push((performance.now() - t) / 1000);
    }
    const runs = [];
    for (let i = 0; i < repeat; i++) runs.push(await browserRun(html));
    const m = (k) => median(runs.map((r) => r[k]));
    const entries = f.includes('_x') ? `${(856152 * scale).toLocaleString('en-US')}` : '856,152';
    const hs = statSync(html).size;
    const ps = statSync(f).size;
    console.log(`| ${f.split('/').pop()} | ${entries} | ${median(gen).toFixed(2)} | ${mb(hs)} | ${mb(ps)} | ${(hs / ps * 100).toFixed(1)}% | ` +
      `${m('ready').toFixed(0)} | ${m('decode').toFixed(0)} / ${m('model').toFixed(0)} / ${m('first').toFixed(0)} | ` +
      `${m('hover').toFixed(0)} | ${m('zoom').toFixed(0)} |`);
  }
  rmSync(out, { recursive: true, force: true });
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

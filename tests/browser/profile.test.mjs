// The profiler pages in headless Chromium, offline: `memsight profile -o`
// (memory curves per device, per-step tables) and `memsight profile
// --timeline` (memory by category, the peak explained).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { launch, openReport } from './harness.mjs';
import { ROOT, memsightBinary, outDir } from './reports.mjs';

const SHOTS = process.env.MEMSIGHT_SHOTS;
const PROFILER = join(ROOT, 'tests/data/profiler');
let browser;
let dir;

before(async () => {
  dir = outDir();
  browser = await launch();
  if (SHOTS) mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  await browser.close();
  rmSync(dir, { recursive: true, force: true });
});

function page(args, name) {
  const out = join(dir, name);
  execFileSync(memsightBinary(), ['profile', ...args, '-o', out], { stdio: ['ignore', 'ignore', 'pipe'] });
  return out;
}

async function hoverMiddle(p) {
  const box = await p.locator('canvas.chart').first().boundingBox();
  await p.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5);
  await p.waitForTimeout(50);
  return p.locator('.readout').first().textContent();
}

test('the trace report: a memory curve, steps, tables; hover and zoom', async () => {
  const { page: p, problems } = await openReport(browser.context,
    page([join(PROFILER, 'profiler.pt.trace.json.gz')], 'trace.html'));
  assert.equal(await p.locator('canvas.chart').count(), 1);
  assert.match(await p.locator('main section h2').first().textContent(), /^cuda:0 \(NVIDIA H100/);
  assert.match(await hoverMiddle(p), /^at [\d.]+(µs|ms|s): .* allocated, .* reserved$/);
  const box = await p.locator('canvas.chart').boundingBox();
  await p.mouse.wheel(0, -400);
  await p.mouse.move(box.x + box.width * 0.3, box.y + 40);
  await p.locator('details.step summary').first().click();
  await p.locator('details.step h3').first().waitFor();  // a step's tables are built when it opens
  const text = await p.locator('details.step').first().textContent();
  assert.match(text, /peak 1\.2GiB allocated, 1\.4GiB reserved/);
  assert.match(text, /Kernels by GPU time/);
  if (SHOTS) await p.screenshot({ path: join(SHOTS, 'profile-trace.png'), fullPage: true });
  assert.deepEqual(problems.requests, []);
  assert.deepEqual(problems.errors, []);
  await p.close();
});

test('the memory timeline: stacked categories, the peak explained', async () => {
  const { page: p, problems } = await openReport(browser.context,
    page(['--timeline', join(PROFILER, 'memory_timeline.json.gz')], 'timeline.html'));
  const legend = await p.locator('.legend span').allTextContents();
  assert.deepEqual(legend, ['parameter', 'optimizer state', 'input', 'temporary', 'activation', 'gradient',
    'autograd detail', 'unknown']);
  assert.match(await p.locator('section h2').nth(1).textContent(), /^Peak: [\d.]+[KMG]iB at [\d.]+(µs|ms|s)$/);
  const readout = await hoverMiddle(p);
  assert.match(readout, /^at [\d.]+(µs|ms|s): .* in all\nparameter/);
  if (SHOTS) await p.screenshot({ path: join(SHOTS, 'profile-timeline.png'), fullPage: true });
  assert.deepEqual(problems.requests, []);
  assert.deepEqual(problems.errors, []);
  await p.close();
});

// The pages at sizes real jobs reach, in headless Chromium: a trace of
// 200,000 ProfilerSteps (the page once stopped on "Loading…" with "Maximum
// call stack size exceeded"), traces and snapshots naming 100,000 devices
// (they never finished loading), and names of a mebibyte (cut, the whole
// text one click away). Each page must reach its drawn state with no console
// error; the time to the first picture is printed and only loosely bounded
// here (bench/README.md has the measured numbers).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { openReport } from './harness.mjs';
import { ROOT, memsightBinary, useBrowser } from './reports.mjs';

let browser;
let dir;

useBrowser((b, d) => {
  browser = b;
  dir = d;
});

// Chrome trace JSON written piece by piece (a 200,000-step trace is ~70 MB).
function writeTrace(path, events) {
  writeFileSync(path, `{"traceEvents":[${events.join(',\n')}]}`);
  return path;
}

const memEvent = (ts, device, addr, bytes, total) => JSON.stringify({
  ph: 'i', cat: 'cpu_instant_event', name: '[memory]', pid: 1, tid: 1, ts,
  args: { 'Device Type': 1, 'Device Id': device, Addr: addr, Bytes: bytes, 'Total Allocated': total, 'Total Reserved': 1 << 21 },
});
const span = (cat, name, ts, dur) => JSON.stringify({ ph: 'X', cat, name, pid: 1, tid: 1, ts, dur });

function profilePage(trace, name) {
  const out = join(dir, name);
  execFileSync(memsightBinary(), ['profile', trace, '-o', out], { stdio: ['ignore', 'ignore', 'pipe'] });
  return out;
}

// Opens a page and waits for its drawn state; returns the page, its
// problems and the milliseconds from navigation to that state.
async function firstPicture(file, name) {
  const t0 = Date.now();
  const r = await openReport(browser.context, file);
  const ms = Date.now() - t0;
  const mb = (statSync(file).size / 1e6).toFixed(1);
  console.log(`# ${name}: ${mb} MB page, drawn ${ms} ms after navigation`);
  assert.ok(ms < 60000, `${name}: ${ms} ms to the first picture`);
  return { ...r, ms };
}

function clean(problems) {
  assert.deepEqual(problems.requests, [], 'network requests');
  assert.deepEqual(problems.errors, [], 'console or page errors');
}

test('a trace of 200,000 ProfilerSteps: drawn, paged, sortable', async () => {
  const events = [];
  for (let i = 0; i < 200000; i++) {
    events.push(span('user_annotation', `ProfilerStep#${i}`, i * 10, 9));
    if (i % 10 === 0) events.push(memEvent(i * 10 + 1, 0, 1000 + i, 512, 512 * (1 + (i % 97))));
  }
  const file = profilePage(writeTrace(join(dir, 'steps.json'), events), 'steps.html');
  const { page, problems } = await firstPicture(file, '200,000 steps');
  assert.equal(await page.locator('main section h2').last().textContent(), 'Steps (200,000)');
  assert.equal(await page.locator('details.step').count(), 100);
  assert.equal(await page.locator('.paged-info').first().textContent(), 'steps 1–100 of 200,000');
  await page.locator('.page-btn[title="last page"]').first().click();
  assert.equal(await page.locator('.paged-info').first().textContent(), 'steps 199,901–200,000 of 200,000');
  await page.selectOption('select[aria-label="order of the steps"]', 'peak');
  assert.match(await page.locator('details.step summary').first().textContent(), /^step \d+ — .* 48\.5KiB \/ 2\.0MiB$/);
  await page.fill('input.jump', '123456');
  await page.press('input.jump', 'Enter');
  await page.locator('details.step[open] h3').first().waitFor();
  assert.match(await page.locator('details.step[open] summary').textContent(), /^step 123456 /);
  const box = await page.locator('canvas.chart').boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.wheel(0, -2000);
  clean(problems);
  await page.close();
});

test('a trace naming 100,000 devices: eight charts, the rest one click away', async () => {
  const events = [span('cpu_op', 'aten::empty', 0, 1e6)];
  for (let d = 0; d < 100000; d++) events.push(memEvent(1 + d, d, 1000, 512 + (d === 4242 ? 1 << 20 : 0), 512));
  const file = profilePage(writeTrace(join(dir, 'devices.json'), events), 'devices.html');
  const { page, problems } = await firstPicture(file, '100,000 devices (trace)');
  assert.equal(await page.locator('canvas.chart').count(), 8);
  assert.equal(await page.locator('.more-devices h2').textContent(), '99,992 more devices');
  await page.locator('tr.device-row').first().click();
  assert.equal(await page.locator('canvas.chart').count(), 9);
  const step = page.locator('details.step summary').first();
  assert.match(await step.textContent(), /\+99,996 more devices$/);
  await step.click();  // the step's tables, 20 devices a page
  await page.locator('.paged-info', { hasText: 'devices 1–20 of 100,000' }).waitFor();
  clean(problems);
  await page.close();
});

test('a snapshot of 100,000 devices: the busiest in the page, the rest said', async () => {
  const pickle = join(dir, 'devices.pickle');
  execFileSync('python3', [join(ROOT, 'tests/browser/make_scale_snapshot.py'), 'devices', pickle, '100000']);
  const file = join(dir, 'devices-snapshot.html');
  execFileSync(memsightBinary(), ['view', pickle, '-o', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  const { page, problems } = await firstPicture(file, '100,000 devices (snapshot)');
  assert.equal(await page.locator('.device select option').count(), 64);
  assert.match(await page.locator('.unpacked-note').textContent(), /^99,936 more devices with trace entries or segments are not in this page/);
  for (const v of ['timeline', 'state', 'flamegraph']) await page.click(`.tab[data-view="${v}"]`);
  clean(problems);
  await page.close();
});

test('names of a mebibyte: cut on both pages, the whole text one click away', async () => {
  const pickle = join(dir, 'names.pickle');
  execFileSync('python3', [join(ROOT, 'tests/browser/make_scale_snapshot.py'), 'names', pickle, '1048576']);
  const file = join(dir, 'names-snapshot.html');
  execFileSync(memsightBinary(), ['view', pickle, '-o', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let { page, problems } = await firstPicture(file, '1 MiB frame name (snapshot)');
  const site = page.locator('td.site summary').first();
  assert.match(await site.textContent(), /^model\.py:3:fn_x{186}… \(\+16,\d{3} characters\) show all$/);
  await site.locator('button.show-all').click();
  const whole = await site.textContent();
  // the stack: the name cut once, with its length in the file, then the frames outward
  assert.match(whole.slice(-80), /x… \[cut at 16384 of 1048579 bytes\] <- train\.py:9:step show less$/);
  assert.equal(await page.locator('td.site details[open]').count(), 0, 'show all does not open the stack');
  clean(problems);
  await page.close();

  const name = `aten::${'x'.repeat(1 << 20)}`;
  const trace = writeTrace(join(dir, 'names.json'), [span('cpu_op', name, 0, 10), memEvent(1, 0, 16, 512, 512)]);
  ({ page, problems } = await firstPicture(profilePage(trace, 'names.html'), '1 MiB op name (trace)'));
  await page.locator('details.step summary').first().click();
  const cell = page.locator('details.step td.mono').first();
  assert.match(await cell.textContent(), /^aten::x{194}… \(\+16,\d{3} characters\) show all$/);
  await cell.locator('button.show-all').click();
  assert.match(await cell.textContent(), /x… \[cut at 16384 of 1048582 bytes\] show less$/);
  clean(problems);
  await page.close();
});

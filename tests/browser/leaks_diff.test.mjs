// The Leaks view of the report and the `memsight diff` page in headless
// Chromium, offline: a planted leak (tests/data/make_leaks.py) shows its
// sites, where they were allocated and a curve per site; a survivor's link opens the
// allocator state; the diff page's inline flamegraph zooms.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { launch, openReport } from './harness.mjs';
import { ROOT, memsightBinary, outDir } from './reports.mjs';

const SHOTS = process.env.MEMSIGHT_SHOTS;
let browser;
let dir;
let snap;

before(async () => {
  dir = outDir();
  browser = await launch();
  if (SHOTS) mkdirSync(SHOTS, { recursive: true });
  snap = join(dir, 'graph.pickle');
  execFileSync('python3', ['-c', `
import pickle, sys
sys.path.insert(0, ${JSON.stringify(join(ROOT, 'tests/data'))})
import make_leaks as ml
pickle.dump(ml.loop(steps=30, keep_loss=True, keep_output=True), open(sys.argv[1], 'wb'), protocol=4)
`, snap]);
});

after(async () => {
  await browser.close();
  rmSync(dir, { recursive: true, force: true });
});

function clean(problems) {
  assert.deepEqual(problems.requests, [], 'network requests');
  assert.deepEqual(problems.errors, [], 'console or page errors');
}

function memsight(...args) {
  execFileSync(memsightBinary(), args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

test('the Leaks view shows the leaking sites, where they were allocated and the growth per site', async () => {
  const file = join(dir, 'graph.html');
  memsight('view', snap, '-o', file, '--view', 'leaks');
  const { page, problems } = await openReport(browser.context, file);
  assert.equal(await page.evaluate(() => document.body.dataset.view), 'leaks');
  const head = await page.locator('.leak-head h3').textContent();
  assert.match(head, /^Leak: 1\.0MiB more stays allocated after each iteration/);
  const sites = await page.locator('tr.leak-site summary').allTextContents();
  assert.deepEqual(sites, ['model.py:21:forward', 'train.py:45:train_step']);
  assert.match(await page.locator('.leak-fix').textContent(), /Allocated at: train\.py:45:train_step.*tensor\.detach\(\) does not free them/);
  // one curve per site in the growth chart, each site's own sparkline in the table
  const curves = await page.locator('svg.growth-chart').nth(1).locator('polyline').count();
  const rows = await page.locator('.growth-table tbody tr').count();
  assert.equal(rows, curves + 1);  // and all allocated memory
  assert.equal(await page.locator('.growth-table svg.spark').count(), rows);
  if (SHOTS) await page.screenshot({ path: join(SHOTS, 'leaks.png'), fullPage: true });
  // a survivor's link opens the allocator state at that allocation
  await page.locator('tr.leak-site').first().locator('summary').click();
  await page.locator('tr.leak-site').first().locator('.newest button').first().click();
  await page.waitForFunction(() => document.body.dataset.view === 'state');
  clean(problems);
  await page.close();
});

test('the Leaks view says when there is no leak', async () => {
  const file = join(dir, 'mlp.html');
  memsight('view', join(ROOT, 'tests/data/multistream.pickle'), '-o', file, '--view', 'leaks');
  const { page, problems } = await openReport(browser.context, file);
  assert.match(await page.locator('.leak-head h3').textContent(), /^Leak: 512\.0B more/);
  const plain = join(dir, 'oom.html');
  memsight('view', join(ROOT, 'tests/data/oom.pickle'), '-o', plain, '--view', 'leaks');
  const r = await openReport(browser.context, plain);
  assert.match(await r.page.locator('.leak-verdict').textContent(), /no iterations found/);
  clean(problems);
  clean(r.problems);
  await page.close();
  await r.page.close();
});

test('the diff page opens offline and its flamegraph zooms', async () => {
  const file = join(dir, 'diff.html');
  memsight('diff', snap, '--at-step', '5', '--at-step', '25', '-o', file);
  const { page, problems } = await openReport(browser.context, file, { waitReady: false });
  await page.waitForSelector('svg g.f');
  const groups = await page.locator('tr.group').allTextContents();
  assert.deepEqual(groups, ['grew: 2 sites, +20.0MiB']);
  const frame = page.locator('svg g.f', { hasText: 'model.py:21:forward' }).first();
  await frame.click();
  assert.equal(await page.locator('#unzoom').getAttribute('class'), 'btn');  // shown once zoomed
  if (SHOTS) await page.screenshot({ path: join(SHOTS, 'diff.png'), fullPage: true });
  clean(problems);
  await page.close();
});

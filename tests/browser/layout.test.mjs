// Every page fits a 1440 px and a 1280 px wide window: no element reaches
// past the right edge (the header's device selector and the standalone
// viewer's Open button were off-screen at 1440 px). Checked on each view of
// a report, the diff, ranks and profile pages and the standalone viewer, empty
// and with a snapshot open.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { assertClean, openReport } from './harness.mjs';
import { FIXTURES, memsightBinary, report, useBrowser } from './reports.mjs';

const WIDTHS = [1440, 1280];
let browser;
let dir;

useBrowser((b, d) => {
  browser = b;
  dir = d;
});

const memsight = (...args) => execFileSync(memsightBinary(), args, { stdio: ['ignore', 'ignore', 'pipe'] });

// The visible elements whose right edge is past the window's, and how wide
// the document is.
const overflow = (page) => page.evaluate(() => {
  const width = document.documentElement.clientWidth;
  const past = [];
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > width + 0.5 && getComputedStyle(el).visibility !== 'hidden') {
      past.push(`${el.tagName.toLowerCase()}${[...el.classList].map((c) => `.${c}`).join('')} ends at ${Math.round(r.right)}`);
    }
  }
  return { width, scroll: document.documentElement.scrollWidth, past: past.slice(0, 5) };
});

async function assertFits(page, what) {
  for (const w of WIDTHS) {
    await page.setViewportSize({ width: w, height: 900 });
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const o = await overflow(page);
    assert.deepEqual(o.past, [], `${what} at ${w} px`);
    assert.equal(o.scroll, w, `${what} at ${w} px: the document's width`);
  }
}

test('every view of a report fits 1440 and 1280 px', async () => {
  const { page, problems } = await openReport(browser.context, report(join(FIXTURES, 'oom.pickle'), dir));
  const views = await page.$$eval('.tab[data-view]', (tabs) => tabs.map((t) => t.dataset.view));
  assert.ok(views.length >= 8);
  for (const v of views) {
    await page.click(`.tab[data-view="${v}"]`);
    await page.waitForFunction((want) => document.body.dataset.view === want, v);
    await assertFits(page, `the ${v} view`);
  }
  // the header's controls stay on the page
  assert.ok(await page.locator('.device select').isVisible());
  assertClean(problems);
  await page.close();
});

test('the diff, ranks and profile pages fit 1440 and 1280 px', async () => {
  const diff = join(dir, 'diff.html');
  memsight('diff', join(FIXTURES, 'mlp_train.pickle'), join(FIXTURES, 'oom.pickle'), '-o', diff);
  const ranks = join(dir, 'ranks.html');
  memsight('ranks', join(FIXTURES, 'mlp_train.pickle'), join(FIXTURES, 'oom.pickle'), '-o', ranks);
  const profile = join(dir, 'profile.html');
  memsight('profile', join(FIXTURES, 'profiler/profiler.pt.trace.json.gz'), '-o', profile);
  for (const [file, what, ready] of [[diff, 'the diff page', false], [ranks, 'the ranks page', true],
    [profile, 'the profile page', true]]) {
    const { page, problems } = await openReport(browser.context, file, { waitReady: ready });
    await assertFits(page, what);
    assertClean(problems);
    await page.close();
  }
});

test('the standalone viewer fits 1440 and 1280 px, empty and with a snapshot', async () => {
  const viewer = join(dir, 'viewer.html');
  memsight('viewer', '-o', viewer);
  const { page, problems } = await openReport(browser.context, viewer, { waitReady: false });
  await page.waitForFunction(() => document.body.dataset.viewer === 'idle');
  await assertFits(page, 'the empty viewer');
  await page.setInputFiles('input.file-picker', join(FIXTURES, 'transformer_train.pickle'));
  await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 60000 });
  await assertFits(page, 'the viewer with a snapshot');
  assert.ok(await page.locator('button.open-another').isVisible());
  assertClean(problems);
  await page.close();
});

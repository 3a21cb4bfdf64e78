// Every page memsight writes, from inputs and outputs with hostile names
// (script in a scheme, in markup, in quotes), in headless Chromium: every
// link of every page is clicked (each rank of the ranks page selected in
// turn, and each rank page it links) and nothing runs (no dialog, no page
// error), nothing is fetched, and no navigation leaves file:// (issue 34,
// item 4: links are built only from names the page made, escaped).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { openReport } from './harness.mjs';
import { FIXTURES, memsightBinary, useBrowser } from './reports.mjs';

// File names hold anything but "/": each would run alert() if a page put it
// into a link, an attribute or markup unescaped.
const NAMES = [
  'javascript:alert(1);x',
  '"><img src=x onerror=alert(2)>',
  "'-alert(3)-'",
  '<svg onload=alert(4)>',
  'a b?c=1#d%41',
];

let browser;
let dir;

function memsight(...args) {
  execFileSync(memsightBinary(), args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

useBrowser((b, d) => {
  browser = b;
  dir = d;
});

// Opens `file` and watches it: dialogs (dismissed), and every frame
// navigation's URL. The diff page says nothing when it is drawn: it is
// whole once loaded.
async function watched(file) {
  const { page, problems } = await openReport(browser.context, file, { waitReady: !file.endsWith('.diff.html') });
  const seen = { dialogs: [], urls: [] };
  page.on('dialog', (d) => {
    seen.dialogs.push(d.message());
    d.dismiss().catch(() => {});
  });
  page.on('framenavigated', (f) => seen.urls.push(f.url()));
  return { page, problems, seen };
}

// Clicks every link of the page as it stands; a link that opens another
// file is followed, checked, and the page opened again (`prepare` puts it
// back in the state the links were counted in).
async function clickEveryLink(w, file, prepare = async () => {}) {
  const count = await w.page.locator('a').count();
  for (let i = 0; i < count; i++) {
    const link = w.page.locator('a').nth(i);
    const href = await link.getAttribute('href');
    const before = w.page.url();
    await link.click();
    await w.page.waitForTimeout(100);
    const now = w.page.url();
    assert.ok(now.startsWith('file://'), `link ${href} led to ${now}`);
    if (now.split('#')[0] !== before.split('#')[0]) {
      await w.page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 60000 });
      await w.page.goto(before);
      await w.page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 60000 });
      await prepare();
    }
  }
  return count;
}

function assertNothingRan(w, what) {
  assert.deepEqual(w.seen.dialogs, [], `${what}: script ran`);
  assert.deepEqual(w.problems.requests, [], `${what}: network requests`);
  assert.deepEqual(w.problems.errors, [], `${what}: console or page errors`);
  for (const u of w.seen.urls) assert.ok(u.startsWith('file://') || u === 'about:blank', `${what}: navigated to ${u}`);
}

test('the ranks page and its rank pages, hostile names everywhere', async () => {
  const job = join(dir, NAMES[1]);
  mkdirSync(job);
  NAMES.forEach((n, r) => copyFileSync(join(FIXTURES, r === 2 ? 'oom.pickle' : 'mlp_train.pickle'),
    join(job, `${n}_rank${r}.pickle`)));
  for (const out of [NAMES[0], NAMES[4]]) {
    const page = join(dir, `${out}.html`);
    memsight('ranks', job, '-o', page, '--pages', 'all');
    const w = await watched(page);
    let links = 0;
    const hrefs = [];
    for (let r = 0; r < NAMES.length; r++) {
      const select = async () => w.page.locator(`section.table tbody tr[data-rank="${r}"]`).click();
      await select();
      hrefs.push(await w.page.locator('.details a.open').getAttribute('href'));
      links += await clickEveryLink(w, page, select);
    }
    assert.ok(links >= 2 * NAMES.length, `${links} links clicked`);
    assertNothingRan(w, out);
    for (const href of hrefs) assert.match(href, /^\.\/[A-Za-z0-9%._~-]+\/rank\d\.html$/);
    await w.page.close();
  }
});

test('view, diff and profile pages of hostile names', async () => {
  const pages = [];
  for (const [k, n] of NAMES.entries()) {
    const snap = join(dir, `${n}.pickle`);
    copyFileSync(join(FIXTURES, 'mlp_train.pickle'), snap);
    const out = join(dir, `${n}.view.html`);
    memsight('view', snap, '-o', out);
    pages.push(out);
    if (k === 0 || k === 1) {
      const other = join(dir, `${n}.b.pickle`);
      copyFileSync(join(FIXTURES, 'oom.pickle'), other);
      memsight('diff', snap, other, '-o', join(dir, `${n}.diff.html`));
      pages.push(join(dir, `${n}.diff.html`));
      const trace = join(dir, `${n}.pt.trace.json.gz`);
      copyFileSync(join(FIXTURES, 'profiler/profiler.pt.trace.json.gz'), trace);
      memsight('profile', trace, '-o', join(dir, `${n}.profile.html`));
      pages.push(join(dir, `${n}.profile.html`));
    }
  }
  for (const page of pages) {
    const w = await watched(page);
    await clickEveryLink(w, page);
    assertNothingRan(w, page);
    await w.page.close();
  }
});

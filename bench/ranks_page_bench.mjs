#!/usr/bin/env node
// The ranks page with many ranks, in Debian's headless Chromium (offline):
// ready after navigation (document.body.dataset.ready, stamped with
// performance.now() by the page), then, through the driver, a hover over a
// bar until its readout shows, a click on a bar until that rank's details
// show, and a sort of the table by peak until its first row changes.
//
//   node bench/ranks_page_bench.mjs PAGE.html RANKS [REPEAT]
//
// Run by bench/ranks_bench.py; prints one JSON line (medians). Needs
// tests/browser's node_modules (`npm ci` there).
import { launch, openReport } from '../tests/browser/harness.mjs';

const [page, ranks, repeat = '3'] = process.argv.slice(2);
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)];
const browser = await launch();
const runs = [];
let problems;
let rows = 0;
try {
  for (let k = 0; k < +repeat; k++) {
    const opened = await openReport(browser.context, page);
    const p = opened.page;
    problems = opened.problems;
    const ready = await p.evaluate(() => performance.now());
    const box = await p.locator('canvas.ranks-chart').boundingBox();
    const n = +ranks;
    const w = Math.min(64, (box.width - 84) / n);
    const at = (i) => ({ x: box.x + 72 + (i + 0.5) * w, y: box.y + box.height - 40 });
    const target = (Math.floor(n / 3) + k) % n;  // a different bar each run
    let t = Date.now();
    await p.mouse.move(at(target).x, at(target).y);
    await p.waitForFunction((r) => document.querySelector('.readout').textContent.startsWith(`rank ${r}:`), target);
    const hover = Date.now() - t;
    t = Date.now();
    await p.mouse.click(at(target).x, at(target).y);
    await p.waitForFunction((r) => document.body.dataset.selected === String(r), target);
    const click = Date.now() - t;
    const first = await p.locator('section.table tbody tr').first().getAttribute('data-rank');
    t = Date.now();
    await p.locator('section.table th', { hasText: 'peak allocated' }).click();
    await p.waitForFunction((f) => document.querySelector('section.table tbody tr').dataset.rank !== f, first);
    const sort = Date.now() - t;
    rows = await p.locator('section.table tbody tr').count();
    runs.push({ ready, hover, click, sort });
    await p.close();
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify({
  ready_ms: median(runs.map((r) => r.ready)), hover_ms: median(runs.map((r) => r.hover)),
  click_ms: median(runs.map((r) => r.click)), sort_ms: median(runs.map((r) => r.sort)),
  rows, bars: +ranks, errors: problems.errors.length + problems.requests.length,
}));

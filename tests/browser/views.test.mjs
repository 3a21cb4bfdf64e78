// The views and markers beyond the original report, in headless Chromium
// from file:// with the network off: record_function ranges on every
// timeline, ghost blocks, the pools and settings views, pool and stream
// filters, the trace range, and the allocator state's search. The numbers
// come from tests/data/make_annotated.py, worked out by hand.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertClean as clean, launch, openReport } from './harness.mjs';
import { FIXTURES, outDir, report } from './reports.mjs';

const MiB = 1 << 20;
const KiB = 1 << 10;
let browser;
let dir;
let file;

before(async () => {
  dir = outDir();
  browser = await launch();
  file = report(join(FIXTURES, 'synthetic_annotated.pickle.gz'), dir);
});

after(async () => {
  await browser.close();
  rmSync(dir, { recursive: true, force: true });
});

async function show(page, view) {
  await page.click(`.tab[data-view="${view}"]`);
  await page.waitForFunction((v) => document.body.dataset.view === v, view);
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
}

// The timeline view behind a tab ('timeline', 'segments-timeline', 'pools').
const viewExpr = (tab) => `(() => { const a = window.memsight.app; const v = a.views.get('${tab}:' + a.device); ` +
  `return v.timeline || v; })()`;

describe('annotations, ghost blocks and compile contexts', () => {
  test('every timeline draws the record_function ranges; hover names one, click zooms to it', async () => {
    const { page, problems } = await openReport(browser.context, file, { hash: '#timeline' });
    for (const tab of ['timeline', 'segments-timeline', 'pools']) {
      await show(page, tab);
      const drawn = await page.evaluate(`${viewExpr(tab)}.strip.boxes.length`);
      assert.equal(drawn, 6, `${tab}: ranges drawn`);
    }
    await show(page, 'timeline');
    // The outer "## forward ##" scope: lane 1, events 3-5.
    const box = await page.evaluate(`(() => { const v = ${viewExpr('timeline')}; const b = v.strip.boxes.find((x) => x[0] === 2);
      const r = v.strip.canvas.getBoundingClientRect(); const d = v.g.dpr;
      return { x: r.left + (b[1] + b[3] / 2) / d, y: r.top + (b[2] + b[4] / 2) / d }; })()`);
    await page.mouse.move(box.x, box.y);
    const tip = await page.textContent('.tooltip');
    assert.match(tip, /## forward ##/);
    assert.match(tip, /3 allocator events: trace entries 3 to 5/);
    await page.mouse.click(box.x, box.y);
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(r)));
    const [x0, x1] = await page.evaluate(`(() => { const v = ${viewExpr('timeline')}; return [v.x0, v.x1]; })()`);
    assert.ok(x0 <= 3 && x0 > 0 && x1 >= 7 && x1 < 10, `zoomed to the scope: ${x0}-${x1}`);
    clean(problems);
    await page.close();
  });

  test('a ghost block is hatched and explained; compile context and FX frames beside the stack', async () => {
    const { page, problems } = await openReport(browser.context, file, { hash: '#timeline' });
    await show(page, 'timeline');
    // The ghost block: the timeline's one live-in-the-snapshot element.
    const at = await page.evaluate(`(() => { const v = ${viewExpr('timeline')}; const md = v.model;
      const id = [...md.kind].findIndex((k) => k === 2);
      const { off, ids, y0, y1 } = v.spans; const c = Math.floor(v.g.pw / 2);
      for (let k = off[c]; k < off[c + 1]; k++) if (ids[k] === id) {
        const r = v.overlay.getBoundingClientRect(); const d = v.g.dpr;
        const ctx = v.canvas.getContext('2d');
        const px = ctx.getImageData(v.g.L + c, v.g.T + v.g.ph - y1[k] + 3, 1, y1[k] - y0[k] - 4).data;
        const colours = new Set(); for (let i = 0; i < px.length; i += 4) colours.add(px[i] + ',' + px[i + 1] + ',' + px[i + 2]);
        return { x: r.left + (v.g.L + c) / d, y: r.top + (v.g.T + v.g.ph - (y0[k] + y1[k]) / 2) / d, colours: colours.size };
      } return null; })()`);
    assert.ok(at, 'the ghost block is drawn');
    assert.ok(at.colours >= 2, 'hatched: two colours down one column');
    await page.mouse.move(at.x, at.y);
    assert.match(await page.textContent('.timeline-view .details-head'), /\[Ghost block\] Live in the snapshot's segments/);
    // The block compiled code allocated (trace entry 2).
    await page.fill('.timeline-view input.search', 'Torch-Compiled');
    await page.waitForFunction(() => /1 match\b/.test(document.querySelector('.timeline-view .search-info').textContent));
    await page.evaluate(`(() => { const v = ${viewExpr('timeline')}; v.togglePin(v.model.src.findIndex((s, e) => v.model.kind[e] === 0 && s === 2)); })()`);
    const head = await page.textContent('.timeline-view .details-head');
    assert.match(head, /Compile context: Torch-Compiled Region: 0\/0/);
    assert.match(head, /User metadata: phase=forward/);
    assert.match(await page.textContent('.timeline-view .details .stack'), />> FX: node=mm_1, op=call_function, target=aten\.mm\.default/);
    clean(problems);
    await page.close();
  });
});

describe('pools, settings, filters, range, search', () => {
  test('pools view: the MemPool counts with all it reserves', async () => {
    const { page, problems } = await openReport(browser.context, file, { hash: '#pools' });
    await show(page, 'pools');
    const rows = await page.$$eval('.pool-table tbody tr', (trs) => trs.map((tr) => tr.textContent));
    assert.equal(rows.length, 2);
    assert.match(rows[1], /private pool \(0, 7\)a MemPool/);
    const totals = await page.evaluate(`(() => { const md = ${viewExpr('pools')}.model; return [md.total[0], md.total[6], md.total[md.n]]; })()`);
    assert.deepEqual(totals, [1 * MiB, 9 * MiB, 10 * MiB + 768 * KiB]);
    // Its footer gives the bands' own peak (pools at all they reserve), not
    // the summary's peak allocated, which it names beside it.
    const idle = await page.evaluate(`${viewExpr('pools')}.detailsHead.textContent`);
    const peak = await page.evaluate(`(() => { const md = ${viewExpr('pools')}.model; let p = 0; for (const t of md.total) p = Math.max(p, t); return p; })()`);
    assert.equal(await page.evaluate(`${viewExpr('pools')}.model.meta.peak`), peak);
    assert.equal(peak, 11 * MiB);
    assert.match(idle, /^Peak of the bands: 11\.0MiB \(11,534,336 bytes\) after trace entry \d+ \(each private pool with all it reserves.*The summary's peak allocated: 9\.5MiB after trace entry \d+\. /);
    clean(problems);
    await page.close();
  });

  test('settings view: every setting explained, metadata counted', async () => {
    const { page, problems } = await openReport(browser.context, file, { hash: '#settings' });
    await show(page, 'settings');
    const text = await page.textContent('.settings-view');
    assert.match(text, /trace_alloc_max_entries100000The size of the history ring buffer/);
    assert.match(text, /max_split_size_mb:256,garbage_collection_threshold:0\.8/);
    assert.match(text, /5phase=forward/);
    assert.match(text, /1Torch-Compiled Region: 0\/0/);
    assert.match(text, /2\d[\d.]*ms## forward ##/);  // two scopes of that name, 5.98 ms in all
    clean(problems);
    await page.close();
  });

  test('pool and stream filters narrow the memory timeline and its axis', async () => {
    const { page, problems } = await openReport(browser.context, file, { hash: '#timeline' });
    await show(page, 'timeline');
    const end = () => page.evaluate(`(() => { const md = ${viewExpr('timeline')}.model; return md.total[md.n]; })()`);
    assert.equal(await end(), 9 * MiB + 256 * KiB);
    await page.selectOption('.timeline-view .stream-filter', '1');
    assert.equal(await end(), 768 * KiB);
    await page.selectOption('.timeline-view .stream-filter', '');
    await page.selectOption('.timeline-view .pool-filter', '1');
    assert.equal(await end(), 512 * KiB);
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const yMax = await page.evaluate(`${viewExpr('timeline')}.yMax`);
    assert.ok(yMax >= 768 * KiB && yMax < 2 * MiB, `the y axis follows the filter (${yMax})`);
    clean(problems);
    await page.close();
  });

  test('the trace range limits the timeline and the allocator state', async () => {
    const { page, problems } = await openReport(browser.context, file, { hash: '#state' });
    await show(page, 'state');
    await page.click('.range-btn');
    await page.fill('.range-from', '3');
    await page.fill('.range-to', '5');
    await page.press('.range-to', 'Enter');
    assert.equal(await page.textContent('.range-btn'), 'Entries 3–5');
    assert.match(await page.textContent('.state-view .ev-head'), /3 of 15 events/);
    await show(page, 'timeline');
    const dom = await page.evaluate(`${viewExpr('timeline')}.domain()`);
    assert.deepEqual(dom, [3, 7]);
    await page.click('.range-clear');
    assert.equal(await page.textContent('.range-btn'), 'Range');
    clean(problems);
    await page.close();
  });

  test('allocator state: search, jump to matches, only matches, scopes of the event', async () => {
    const { page, problems } = await openReport(browser.context, file, { hash: '#state' });
    await show(page, 'state');
    await page.fill('.state-view input.search', 'phase=backward');
    await page.waitForFunction(() => document.querySelector('.state-view .search-info').textContent === '4 matches');
    await page.click('.state-view .prev-match');
    assert.equal(await page.evaluate(() => document.querySelector('.state-view').dataset.selected), '10');
    await page.click('.state-view .only-matches');
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const rows = await page.$$eval('.state-view .ev-row', (rs) => rs.map((r) => r.dataset.index));
    assert.deepEqual(rows, ['6', '7', '9', '10']);
    await page.click('.state-view .only-matches');
    await page.fill('.state-view input.search', '');
    await page.fill('.state-view .jump', '4');
    await page.dispatchEvent('.state-view .jump', 'change');
    assert.match(await page.textContent('.state-view .details-head'),
      /Inside: ProfilerStep#1 › ## forward ## › ## forward ##/);
    clean(problems);
    await page.close();
  });

  test('--view pools and --view settings open those views; the CUDA graph\'s pool', async () => {
    for (const view of ['pools', 'settings']) {
      const f = report(join(FIXTURES, 'cuda_graph.pickle'), dir, 'view', ['--view', view]);
      const { page, problems } = await openReport(browser.context, f);
      assert.equal(await page.evaluate(() => document.body.dataset.view), view);
      if (view === 'pools') assert.match(await page.textContent('.pool-table'), /private pool \(1, 0\)a CUDA graph's own pool/);
      clean(problems);
      await page.close();
    }
  });
});

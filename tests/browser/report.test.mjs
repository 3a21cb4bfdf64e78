// The report in a real browser: Debian's headless Chromium loads the pages
// from file:// with every non-file request aborted; any request, console
// error or page error fails the test.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { launch, openReport } from './harness.mjs';
import { ROOT, fixtures, outDir, report } from './reports.mjs';

const SHOTS = process.env.MEMSIGHT_SHOTS;  // directory for screenshots, if wanted
let browser;
let dir;
const pages = [];

before(async () => {
  dir = outDir();
  browser = await launch();
  if (SHOTS) mkdirSync(SHOTS, { recursive: true });
});

after(async () => {
  await browser.close();
  rmSync(dir, { recursive: true, force: true });
});

async function open(file, hash = '') {
  const r = await openReport(browser.context, file, { hash });
  pages.push(r);
  return r;
}

function clean(problems) {
  assert.deepEqual(problems.requests, [], 'network requests');
  assert.deepEqual(problems.errors, [], 'console or page errors');
}

async function shot(page, name) {
  if (SHOTS) await page.screenshot({ path: join(SHOTS, `${name}.png`) });
}

const VIEWS = ['overview', 'timeline', 'segments-timeline', 'state', 'pools', 'flamegraph', 'settings', 'leaks'];

describe('every fixture opens in every view without errors or requests', () => {
  for (const snap of fixtures()) {
    const name = snap.split('/').pop().replace('.pickle', '');
    test(name, async () => {
      const file = report(snap, dir);
      const { page, problems } = await open(file);
      assert.equal(await page.evaluate(() => document.body.dataset.view), 'overview');
      for (const v of VIEWS) {
        await page.click(`.tab[data-view="${v}"]`);
        await page.waitForFunction((want) => document.body.dataset.view === want, v);
        await page.waitForTimeout(50);
        await shot(page, `${name}-${v}`);
      }
      clean(problems);
      await page.close();
    });
  }
});

describe('torch command names open on their view', () => {
  test('trace-plot opens the memory timeline, segment-plot the allocator state', async () => {
    const snap = fixtures().find((f) => f.endsWith('mlp_train.pickle'));
    for (const [cmd, view] of [['trace-plot', 'timeline'], ['segment-plot', 'state']]) {
      const { page, problems } = await open(report(snap, dir, cmd));
      assert.equal(await page.evaluate(() => document.body.dataset.view), view);
      clean(problems);
      await page.close();
    }
  });
});

// Client coordinates of the middle of the largest element's band in the
// column where the timeline's total peaks.
async function peakBand(page) {
  return page.evaluate(() => {
    const v = window.memsight.app.views.get(`timeline:${window.memsight.app.device}`);
    const g = v.g;
    let best = -1;
    let bestH = 0;
    let col = 0;
    for (let c = 0; c < g.pw; c++) {
      for (let k = v.spans.off[c]; k < v.spans.off[c + 1]; k++) {
        const hgt = v.spans.y1[k] - v.spans.y0[k];
        if (v.spans.ids[k] >= 0 && hgt > bestH) {
          bestH = hgt;
          best = k;
          col = c;
        }
      }
    }
    const r = v.overlay.getBoundingClientRect();
    const ymid = (v.spans.y0[best] + v.spans.y1[best]) / 2;
    return {
      x: r.left + (g.L + col + 0.5) / g.dpr,
      y: r.top + (g.T + g.ph - ymid) / g.dpr,
      id: v.spans.ids[best],
      name: v.model.info(v.spans.ids[best]).name,
    };
  });
}

describe('memory timeline', () => {
  test('hover shows name, size, stream and the stack; click pins', async () => {
    const snap = fixtures().find((f) => f.endsWith('oom.pickle'));
    const { page, problems } = await open(report(snap, dir, 'trace-plot'));
    const band = await peakBand(page);
    await page.mouse.move(band.x, band.y);
    const tip = await page.textContent('.tooltip');
    assert.match(tip, new RegExp(`^${band.name} {2}\\d+(\\.\\d)?[KMG]?i?B \\([\\d,]+ bytes\\)\\nstream \\d+\\n`));
    assert.match(band.name, /^b[0-9a-f]+_\d+$/);
    const details = await page.textContent('.timeline-view .details');
    assert.match(details, new RegExp(`${band.name} .* allocation {2}· {2}stream \\d+`));
    assert.match(details, /make_snapshots\.py:\d+:/, 'the stack is shown');
    await page.mouse.click(band.x, band.y);
    assert.equal(await page.isVisible('.timeline-view .badge'), true, 'pinned');
    await page.mouse.move(band.x, band.y - 400);  // away: the pinned details stay
    assert.match(await page.textContent('.timeline-view .details'), new RegExp(band.name));
    await shot(page, 'timeline-pinned');
    clean(problems);
    await page.close();
  });

  test('wheel zooms in around the pointer, double-click resets, the minimap selects', async () => {
    const snap = fixtures().find((f) => f.endsWith('transformer_train.pickle'));
    const { page, problems } = await open(report(snap, dir, 'trace-plot'));
    const win = () => page.evaluate(() => {
      const v = window.memsight.app.views.get('timeline:0');
      return { x0: v.x0, x1: v.x1, renders: +v.el.dataset.rendered };
    });
    const before0 = await win();
    const box = await page.locator('.plot-overlay').boundingBox();
    await page.mouse.move(box.x + box.width * 0.6, box.y + box.height * 0.5);
    for (let i = 0; i < 5; i++) await page.mouse.wheel(0, -300);
    await page.waitForFunction((n) => +document.querySelector('.timeline-view').dataset.rendered > n, before0.renders);
    const zoomed = await win();
    assert.ok(zoomed.x1 - zoomed.x0 < (before0.x1 - before0.x0) / 3, 'zoomed in');
    assert.ok(zoomed.x0 > before0.x0 && zoomed.x1 < before0.x1, 'around the pointer');
    await shot(page, 'timeline-zoomed');
    // Dragging pans.
    await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.3, box.y + box.height * 0.5, { steps: 4 });
    await page.mouse.up();
    await page.waitForTimeout(50);
    const panned = await win();
    assert.ok(panned.x0 > zoomed.x0, 'dragging left moves the window right');
    await page.mouse.dblclick(box.x + box.width * 0.5, box.y + box.height * 0.5);
    await page.waitForTimeout(50);
    assert.deepEqual([(await win()).x0, (await win()).x1], [before0.x0, before0.x1]);
    // Brushing on the minimap selects a window.
    const mm = await page.locator('.minimap').boundingBox();
    await page.mouse.move(mm.x + mm.width * 0.2, mm.y + mm.height / 2);
    await page.mouse.down();
    await page.mouse.move(mm.x + mm.width * 0.4, mm.y + mm.height / 2, { steps: 3 });
    await page.mouse.up();
    await page.waitForTimeout(50);
    const brushed = await win();
    assert.ok(brushed.x1 - brushed.x0 < (before0.x1 - before0.x0) * 0.6);
    // Time axis and the detail control redraw without errors.
    await page.click('.segmented button[data-value="time"]');
    await page.locator('input.detail').fill('300');
    await page.fill('.timeline-view input.search', 'forward');
    await page.waitForFunction(() => document.querySelector('.timeline-view .search-info').textContent.includes('match'));
    await page.waitForTimeout(250);
    await shot(page, 'timeline-time-search');
    clean(problems);
    await page.close();
  });
});

describe('allocator state history', () => {
  test('selecting an event updates the allocator view; OOM highlighted; block hover', async () => {
    const snap = fixtures().find((f) => f.endsWith('oom.pickle'));
    const { page, problems } = await open(report(snap, dir, 'segment-plot'));
    const state = () => page.evaluate(() => ({
      selected: +document.querySelector('.state-view').dataset.selected,
      stats: document.querySelector('.st-stats').textContent,
      details: document.querySelector('.state-view .details-head').textContent,
    }));
    const last = await state();
    assert.match(last.details, /^\(.* allocated \/ .* reserved\)\ntrace entry \d+/);
    const oom = page.locator('.ev-row.oom');
    assert.equal(await oom.count(), 1);
    assert.match(await oom.textContent(), /OOM \(requested 384\.0MiB \(402,653,184 bytes\), Device has .* memory free\)/);
    // MemoryViz starts on the last event; the OOM is the last one here.
    assert.match(last.details, /OOM \(requested/);
    await page.locator('.ev-list').focus();
    for (let i = 0; i < 30; i++) await page.keyboard.press('ArrowUp');
    const earlier = await state();
    assert.equal(earlier.selected, last.selected - 30);
    assert.notEqual(earlier.stats, last.stats, 'the allocator state changed');
    await page.keyboard.press('Home');
    const first = await state();
    assert.equal(first.selected, 0);
    assert.notEqual(first.stats, earlier.stats);
    await page.keyboard.press('End');
    assert.equal((await state()).stats, last.stats);
    // Clicking a row selects it.
    await page.locator('.ev-row').nth(3).click();
    // rows are numbered by trace entry, as `memsight trace` and `summary` do
    const sel = (await state()).selected;
    const entry = await page.evaluate((i) => window.memsight.page.device(0).entry(i), sel);
    // The list redraws on the next animation frame: wait for the selected row.
    await page.waitForFunction((i) => document.querySelector('.ev-row.sel')?.dataset.index === String(i), sel);
    assert.equal(entry, +(await page.locator('.ev-row.sel .ev-idx').textContent()));
    // Hovering a block of the memory map describes it.
    await page.keyboard.press('End');
    const target = await page.evaluate(() => {
      const v = window.memsight.app.views.get('state:0');
      const g = v.mg;
      const seg = v.layout.segs.find((s) => s.blocks.length);
      const b = seg.blocks[0];
      const r = v.canvas.getBoundingClientRect();
      return {
        x: r.left + (g.pad + (b.x + Math.min(b.requested, b.size) / 2) * g.scale) / g.dpr,
        y: r.top + (g.pad + seg.row * g.rowH + g.rowH * 0.4) / g.dpr,
      };
    });
    await page.mouse.move(target.x, target.y);
    assert.match(await page.textContent('.tooltip'), /^b[0-9a-f]+_\d+: .* allocation/);
    assert.match(await page.textContent('.state-view .details'), /make_snapshots\.py|No stack was recorded/);
    await shot(page, 'state-hover');
    clean(problems);
    await page.close();
  });
});

describe('flamegraph', () => {
  test('click zooms, search highlights', async () => {
    const snap = fixtures().find((f) => f.endsWith('mlp_train.pickle'));
    const { page, problems } = await open(report(snap, dir, 'view', ['--view', 'flamegraph']));
    const box = await page.locator('canvas.flame').boundingBox();
    await page.mouse.click(box.x + 20, box.y + 2.5 * 20);  // third row, leftmost node
    assert.ok(await page.locator('.crumb').count() >= 3, 'zoomed into a node');
    await page.fill('.flame-view input.search', 'train');
    assert.match(await page.textContent('.flame-view .search-info'), /^\d+ frames?, /);
    clean(problems);
    await page.close();
  });
});

describe('devices', () => {
  test('the device selector switches every view to that device', async () => {
    const two = join(dir, 'two_devices.pickle');
    execFileSync('python3', [join(ROOT, 'tests/browser/make_two_devices.py'),
      fixtures().find((f) => f.endsWith('mlp_train.pickle')), two]);
    const { page, problems } = await open(report(two, dir, 'trace-plot'));
    const options = await page.locator('.device select option').allTextContents();
    assert.equal(options.length, 2);
    // The longest trace is shown first.
    assert.equal(await page.inputValue('.device select'), '0');
    const count = () => page.evaluate(() => window.memsight.app.views.get(`timeline:${window.memsight.app.device}`).model.n);
    const n0 = await count();
    await page.selectOption('.device select', '1');
    await page.waitForFunction(() => location.hash === '#timeline/1');
    assert.ok(await count() < n0);
    // The new device's timeline lays out its plot when it first renders.
    await page.waitForFunction(() => +window.memsight.app.views.get('timeline:1').el.dataset.rendered > 0);
    const band = await peakBand(page);
    await page.mouse.move(band.x, band.y);
    assert.match(await page.textContent('.tooltip'), /^b8[0-9a-f]{11}_\d+/, 'device 1 addresses (shifted by 2**44)');
    for (const v of VIEWS) {
      await page.click(`.tab[data-view="${v}"]`);
      await page.waitForFunction((want) => location.hash === `#${want}/1`, v);
    }
    clean(problems);
    await page.close();
  });
});

describe('empty devices', () => {
  test('the selector lists the device with data; a link to an empty one shows it', async () => {
    const padded = join(dir, 'padded.pickle');
    execFileSync('python3', [join(ROOT, 'tests/browser/make_padded_devices.py'),
      fixtures().find((f) => f.endsWith('mlp_train.pickle')), padded, '3000', '1234']);
    const file = report(padded, dir);
    // A link to an unpacked device falls back to the default one.
    const { page, problems } = await open(file, '#timeline/7');
    assert.deepEqual(await page.locator('.device select option').evaluateAll((os) => os.map((o) => o.value)), ['1234']);
    assert.equal(await page.inputValue('.device select'), '1234');
    await page.click('.tab[data-view="overview"]');
    await page.waitForFunction(() => location.hash === '#overview/1234');
    assert.match(await page.textContent('.overview-head'), /device 1234 of 3000/);
    assert.match(await page.locator('details > summary', { hasText: 'memsight summary --json' }).textContent(),
      /no trace entries and no segments left out/);
    for (const v of VIEWS) {
      await page.click(`.tab[data-view="${v}"]`);
      await page.waitForFunction((want) => location.hash === `#${want}/1234`, v);
    }
    clean(problems);
    await page.close();
  });

  test('an all-empty snapshot shows its first device', async () => {
    const empty = join(dir, 'all_empty.pickle');
    execFileSync('python3', ['-c', 'import pickle, sys; open(sys.argv[1], "wb").write(pickle.dumps(' +
      '{"segments": [], "device_traces": [[] for _ in range(5000)]}))', empty]);
    const { page, problems } = await open(report(empty, dir));
    assert.deepEqual(await page.locator('.device select option').allTextContents(), ['cuda:0 · 0 trace entries']);
    assert.match(await page.textContent('.overview-head'), /device 0 of 5000/);
    for (const v of VIEWS) {
      await page.click(`.tab[data-view="${v}"]`);
      await page.waitForFunction((want) => location.hash === `#${want}/0`, v);
    }
    clean(problems);
    await page.close();
  });
});

describe('little history', () => {
  test('a state-only snapshot shows its live blocks', async () => {
    const snap = fixtures().find((f) => f.endsWith('state_only.pickle'));
    const { page, problems } = await open(report(snap, dir, 'trace-plot'));
    const text = await page.textContent('.timeline-view');
    assert.match(text, /Detail: 203 of 203 allocations/);
    assert.match(text, /203 allocations over 1 trace entry\. /);
    clean(problems);
    await page.close();
  });
});

describe('answers a user can act on', () => {
  const COUNTERS = join(ROOT, 'tests/data/counters');

  test('sites are the user\'s frames; stacks user-first, all frames on request', async () => {
    const { page, problems } = await open(report(join(COUNTERS, 'default_stacks.pickle'), dir));
    const sites = await page.locator('.site-row td.site').evaluateAll((tds) => tds.map((td) => {
      const s = td.querySelector(':scope > details > summary');
      return (s || td).textContent;
    }));
    assert.match(sites[0], /^record_counters\.py:81:train <- /);
    assert.ok(sites.some((s) => s === 'allocated before recording began'), sites.join('|'));
    assert.ok(!sites.some((s) => s.includes('CUDACachingAllocator')));
    await page.locator('.site-row td.site > details > summary').first().click();
    const shown = await page.locator('.site-row td.site pre.stack').first().textContent();
    assert.match(shown, /^\/.*record_counters\.py:81:train\n/);
    assert.match(shown, /\[\+\d+ Python, \+\d+ native frames hidden\]$/);
    // the header's stack mode: every frame, tagged by kind
    await page.locator('header .frames select').selectOption('all');
    await page.locator('.site-row td.site > details > summary').first().click();
    const all = await page.locator('.site-row td.site pre.stack').first().textContent();
    assert.match(all, /^internal +\?\?:0:torch::unwind::unwind\(\)/);
    await shot(page, 'sites-default-stacks');
    clean(problems);
    await page.close();
  });

  test('a fragmentation OOM names the cause, the remedy and the trace entry', async () => {
    const { page, problems } = await open(report(join(COUNTERS, 'frag_oom.pickle'), dir));
    const oom = page.locator('.oom-panel .oom').first();
    assert.match(await oom.locator('.oom-title b').textContent(), /^OOM at trace entry 361$/);
    assert.deepEqual(await oom.locator('.verdict-tag').allTextContents(), ['fragmentation', 'limit']);
    // the simulated answer first (memsight whatif on this history), then the advice
    assert.match(await oom.locator('ul.remedies li').first().textContent(), /simulated on this history/);
    assert.match(await oom.locator('ul.remedies').textContent(), /max_split_size_mb/);
    assert.match(await oom.locator('.oom-site').textContent(), /record_counters\.py:168:fill/);
    // "Allocator state" opens the same trace entry
    await oom.locator('button.link').click();
    const details = await page.locator('.state-view .details-head').textContent();
    assert.match(details, /\ntrace entry 361 /);
    await shot(page, 'frag-oom');
    clean(problems);
    await page.close();
  });
});

describe('what kind of memory', () => {
  const SYNTH = join(ROOT, 'tests/data/synthetic_categories.pickle.gz');

  test('the overview shows kinds and modules; the timeline colours by kind and breaks down a moment', async () => {
    const { page, problems } = await open(report(SYNTH, dir));
    const panel = page.locator('.kinds-panel');
    assert.match(await panel.locator('p.sub').textContent(), /^17 storages were tagged by memsight\.torch/);
    const peakKinds = await panel.locator('.breakdown').first().locator('.kind-row').evaluateAll(
      (rows) => rows.map((r) => [r.dataset.kind, r.lastChild.textContent]));
    assert.deepEqual(peakKinds.find(([k]) => k === 'optimizer_state'), ['optimizer_state', 'tagged']);
    assert.deepEqual(peakKinds.find(([k]) => k === 'activation'), ['activation', 'inferred']);
    assert.match(await panel.locator('.module-tree').first().textContent(), /layers\.0/);

    await page.click('.tab[data-view="timeline"]');
    await page.waitForFunction(() => document.body.dataset.view === 'timeline');
    const view = '.timeline-view.mode-tl';
    // the peak's breakdown is shown first; the legend only in "By kind"
    assert.match(await page.textContent(`${view} .moment h4`), /^At the allocated peak$/);
    assert.equal(await page.isVisible(`${view} .cat-legend`), false);
    await page.click(`${view} .kind-ctl button[data-value="kind"]`);
    assert.equal(await page.isVisible(`${view} .cat-legend`), true);
    await page.waitForTimeout(50);
    // the band at the peak is painted in its kind's colour
    const band = await peakBand(page);
    const painted = await page.evaluate(({ id }) => {
      const v = window.memsight.app.views.get(`timeline:${window.memsight.app.device}`);
      const kinds = ['#2e7d32', '#1f4fb4', '#d9a21b', '#8d6e63', '#d64541', '#9c84d8', '#5aaedc', '#6f7f8f', '#b9aa98',
        '#2a9d8f'];
      const want = kinds[v.cats.category(id)];
      return { want, colors: v.model.colors.length, index: v.model.colorOf[id], k: v.cats.category(id) };
    }, band);
    assert.equal(painted.colors, 10);  // the kinds, communication included
    assert.equal(painted.index, painted.k);
    await page.mouse.move(band.x, band.y);
    assert.match(await page.textContent('.tooltip'), /\n(parameter|gradient|optimizer state|activation|temporary|autograd-internal) \((tagged|inferred)\)( · [^\n]+)?\n/);
    assert.match(await page.textContent(`${view} .details .kind-line`), /^Kind: /);
    // a click chooses the moment under the pointer
    await page.mouse.click(band.x, band.y);
    assert.match(await page.textContent(`${view} .moment h4`), /^At the chosen moment$/);
    const moment = Number(await page.evaluate(() => document.querySelector('.timeline-view.mode-tl').dataset.moment));
    const sums = await page.evaluate((s) => {
      const v = window.memsight.app.views.get(`timeline:${window.memsight.app.device}`);
      const b = v.cats.breakdown(v.model, s);
      return [b.bytes.reduce((a, x) => a + x, 0), v.model.total[s]];
    }, moment);
    assert.equal(sums[0], sums[1], 'the kinds add up to what the timeline stacks');
    assert.match(await page.textContent(`${view} .moment .module-tree`), /\(model\)/);
    await shot(page, 'kinds-timeline');
    clean(problems);
    await page.close();
  });
});

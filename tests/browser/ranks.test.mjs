// The ranks page (`memsight ranks -o report.html`) in headless Chromium,
// offline: four ranks made of real snapshots (rank 2 the capped OOM), the
// chart's hover and click, the modes, the table's sort, and the link to a
// rank's own page.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { launch, openReport } from './harness.mjs';
import { FIXTURES, ROOT, memsightBinary, outDir } from './reports.mjs';

let browser;
let dir;
let page;

before(async () => {
  dir = outDir();
  const ranks = join(dir, 'ranks');
  mkdirSync(ranks);
  for (const [r, name] of [[0, 'mlp_train'], [1, 'mlp_train'], [2, 'oom'], [3, 'mlp_train']]) {
    copyFileSync(join(FIXTURES, `${name}.pickle`), join(ranks, `rank${r}.pickle`));
  }
  page = join(dir, 'report.html');
  execFileSync(memsightBinary(), ['ranks', ranks, '-o', page], { stdio: ['ignore', 'ignore', 'pipe'] });
  browser = await launch();
});

after(async () => {
  await browser.close();
  rmSync(dir, { recursive: true, force: true });
});

async function barCenter(p, index, count) {
  const box = await p.locator('canvas.ranks-chart').boundingBox();
  const plot = box.width - 72 - 12;
  const w = Math.min(64, plot / count);
  // Above the axis labels and the kinds' legend (two rows since the kinds
  // are ten), low enough to be inside the shortest bar.
  return { x: box.x + 72 + (index + 0.5) * w, y: box.y + box.height - 90 };
}

test('the ranks page: verdict, chart, details, table, rank pages', async () => {
  const { page: p, problems } = await openReport(browser.context, page);
  assert.match(await p.locator('.headline h2').textContent(), /^4 ranks, 1 ran out of memory, 1 differs from the median$/);
  assert.match(await p.locator('.oom-verdict h2').textContent(), /^Rank 2 ran out of memory: limit$/);
  assert.match(await p.locator('.oom-verdict .verdict').textContent(), /^Rank 2 was different: its peak allocated 1\.6GiB/);
  // opens on the OOMed rank, with the link to its full page
  assert.equal(await p.evaluate(() => document.body.dataset.selected), '2');
  assert.equal(await p.locator('.details a.open').getAttribute('href'), './report.ranks/rank2.html');

  const c1 = await barCenter(p, 1, 4);
  await p.mouse.move(c1.x, c1.y);
  assert.match(await p.locator('.readout').textContent(), /^rank 1: peak 546\.2MiB allocated at [\d.]+ s/);
  await p.mouse.click(c1.x, c1.y);
  assert.equal(await p.evaluate(() => document.body.dataset.selected), '1');
  assert.match(await p.locator('.details h2').textContent(), /^Rank 1/);
  // rank 1 has no page of its own (--pages notable): the command that writes one
  assert.match(await p.locator('.details').textContent(), /memsight view .*rank1\.pickle -o rank1\.html/);

  await p.locator('.segmented button', { hasText: 'fragmentation' }).click();
  await p.mouse.move(c1.x, c1.y - 5);
  assert.match(await p.locator('.readout').textContent(), /fragmentation 83\.8%/);

  // sort by peak allocated: largest first, then smallest first
  const head = p.locator('section.table th', { hasText: 'peak allocated' });
  await head.click();
  assert.equal(await p.locator('section.table tbody tr').first().getAttribute('data-rank'), '2');
  await head.click();
  assert.equal(await p.locator('section.table tbody tr').last().getAttribute('data-rank'), '2');
  await p.locator('section.table tbody tr[data-rank="3"]').click();
  assert.equal(await p.evaluate(() => document.body.dataset.selected), '3');

  assert.deepEqual(problems.requests, []);
  assert.deepEqual(problems.errors, []);
  // the typical rank's page opens, offline, as `memsight view` writes it
  await p.locator('section.table tbody tr[data-rank="0"]').click();
  await p.locator('.details a.open').click();
  await p.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 60000 });
  assert.match(await p.title(), /^rank 0 - rank0\.pickle - memsight$/);
  assert.deepEqual(problems.errors, []);
  await p.close();
});

// One file is one rank: nothing to compare. A declared world size of 10^9
// reads as a range, as the text says it (issue 33 item 11, issue 34 item 2).
test('one rank says there is nothing to compare; a huge world size is one range', async () => {
  const one = join(dir, 'one');
  mkdirSync(one);
  execFileSync('/usr/bin/python3', ['-c', `
import pickle, sys
sys.path.insert(0, ${JSON.stringify(join(ROOT, 'tests/cli'))})
from test_ranks_inputs import rank_snapshot
pickle.dump(rank_snapshot(0, world_size=10**9), open(sys.argv[1], 'wb'), protocol=4)
`, join(one, 's_rank0.pickle')]);
  const out = join(dir, 'one.html');
  execFileSync(memsightBinary(), ['ranks', one, '-o', out, '--pages', 'none'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const { page: p, problems } = await openReport(browser.context, out);
  assert.equal(await p.locator('.headline h2').textContent(),
    '1 rank (world size 1,000,000,000), none ran out of memory, nothing to compare it with');
  assert.equal(await p.locator('section.differ h2').textContent(), 'Nothing to compare');
  assert.match(await p.locator('.mismatches').textContent(), /missing: no dump of ranks 1-999,999,999 \(999,999,999 ranks\)/);
  assert.deepEqual(problems.requests, []);
  assert.deepEqual(problems.errors, []);
  await p.close();
});

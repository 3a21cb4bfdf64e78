// MemProfiler's per-rank page in headless Chromium: a real CPU run writes
// it (Debian's python3 with torch); the page loads from file:// with no
// request, no console error and no page error, and shows its tables and chart.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { launch, openReport } from './harness.mjs';
import { ROOT } from './reports.mjs';

const PY = process.env.PYTHON || '/usr/bin/python3';
const SCRIPT = `
import sys, torch
from memsight.torch import MemProfiler
m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
prof = MemProfiler(save_dir=sys.argv[1], collect_funcs={"default": ["step", "evaluate"]},
                   schedule={"warmup_iters": 1, "max_iter": 3}).connect(m)
step = prof.profile(lambda: m(torch.randn(16, 32)).sum().backward(), name="step")
for _ in range(4):
    step()
with prof.memprofile("evaluate"):
    with prof.memprofile("evaluate"):
        pass
prof.finish()
`;

let browser;
let dir;
let hasTorch = true;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'memsight-memprof-'));
  try {
    execFileSync(PY, ['-c', 'import torch'], { stdio: 'ignore' });
  } catch {
    hasTorch = false;
    return;
  }
  execFileSync(PY, ['-c', SCRIPT, dir], { env: { ...process.env, PYTHONPATH: join(ROOT, 'python') } });
  browser = await launch();
});

after(async () => {
  if (browser) await browser.close();
  rmSync(dir, { recursive: true, force: true });
});

test('the MemProfiler page loads offline without errors and shows every call', async (t) => {
  if (!hasTorch) return t.skip('torch is not installed for ' + PY);
  const { page, problems } = await openReport(browser.context, join(dir, 'rank_0_memprofiler.html'), { waitReady: false });
  await page.waitForLoadState('load');
  assert.deepEqual(problems.requests, [], 'network requests');
  assert.deepEqual(problems.errors, [], 'console or page errors');
  const ids = await page.$$eval('h2[id]', (hs) => hs.map((h) => h.id));
  assert.deepEqual(ids, ['0.step.2', '0.step.3', '0.evaluate.2']);
  // the side-by-side table has start, end and change for each of the three calls (the nested evaluate is its second call)
  const sub = await page.$eval('table', (t) => [...t.rows[1].cells].map((c) => c.textContent));
  assert.deepEqual(sub, ['start', 'end', 'Δ', 'start', 'end', 'Δ', 'start', 'end', 'Δ']);
  const bars = await page.$$eval('svg rect', (rs) => rs.filter((r) => Number(r.getAttribute('width')) > 0).length);
  assert.ok(bars >= 4, `chart bars: ${bars}`);
  const width = await page.evaluate(() => document.querySelector('svg').getBoundingClientRect().width);
  assert.ok(width > 300, `chart width ${width}`);
  await page.close();
});

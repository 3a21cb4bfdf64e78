// The standalone viewer (`memsight viewer`) in headless Chromium from
// file:// with the network off: every fixture opened through the file
// picker (and one by drag-and-drop, and as .gz, .zst and .xz) must show
// `memsight summary --json`'s numbers and hold page data byte-identical to
// `memsight view`'s for the same file (the same engine, compiled to
// WebAssembly); a hostile pickle must give the CLI's one-line error.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertClean as clean, launch, openReport } from './harness.mjs';
import { FIXTURES, fixtures, memsightBinary, outDir, report } from './reports.mjs';

let browser;
let dir;
let viewer;

before(async () => {
  dir = outDir();
  viewer = join(dir, 'memsight-viewer.html');
  execFileSync(memsightBinary(), ['viewer', '-o', viewer], { stdio: ['ignore', 'ignore', 'pipe'] });
  browser = await launch();
});

after(async () => {
  await browser.close();
  rmSync(dir, { recursive: true, force: true });
});

async function openViewer() {
  const r = await openReport(browser.context, viewer, { waitReady: false });
  await r.page.waitForFunction(() => document.body.dataset.viewer === 'idle');
  return r;
}

// Waits until the page shows a snapshot (or an error); returns the state.
async function settled(page) {
  await page.waitForFunction(() => document.body.dataset.viewer === 'error' ||
    (document.body.dataset.viewer === 'ready' && document.body.dataset.ready === '1'), null, { timeout: 60000 });
  return page.evaluate(() => document.body.dataset.viewer);
}

// SHA-256 of the page data the open page shows.
const dataDigest = (page) => page.evaluate(async () => {
  const buf = window.memsight.page.col('strings.blob').buffer;
  const d = new Uint8Array(await crypto.subtle.digest('SHA-256', buf));
  return [...d].map((b) => b.toString(16).padStart(2, '0')).join('');
});

const nativeDigests = new Map();
async function nativeDigest(snapshot) {
  if (!nativeDigests.has(snapshot)) {
    const { page, problems } = await openReport(browser.context, report(snapshot, dir));
    nativeDigests.set(snapshot, await dataDigest(page));
    clean(problems);
    await page.close();
  }
  return nativeDigests.get(snapshot);
}

function cliSummary(snapshot) {
  return JSON.parse(execFileSync(memsightBinary(), ['summary', '--json', snapshot], { maxBuffer: 1 << 28 }));
}

async function checkOpened(page, snapshot) {
  // The summary the overview shows is the CLI's, device by device.
  const shown = await page.evaluate(() => window.memsight.page.meta.summary);
  const cli = cliSummary(snapshot);
  assert.ok(shown.devices.length > 0);
  for (const d of shown.devices) {
    assert.deepEqual(d, cli.devices.find((x) => x.device === d.device), `device ${d.device}`);
  }
  assert.equal(shown.total_entries, cli.total_entries);
  // ...and on screen: the overview's peak, as the page formats it.
  const dev = await page.evaluate(() => window.memsight.app.device);
  const peak = cli.devices.find((x) => x.device === dev).peak_allocated;
  const card = await page.textContent('.card');
  assert.ok(card.includes(await page.evaluate((b) => {
    const u = ['', 'Ki', 'Mi', 'Gi', 'Ti'];
    let v = b;
    let i = 0;
    while (Math.abs(v) >= 1024 && i < 4) { v /= 1024; i++; }
    return `${v.toFixed(1)}${u[i]}B`;
  }, peak)), `peak ${peak} on the overview card: ${card}`);
  assert.equal(await dataDigest(page), await nativeDigest(snapshot), 'the same page data as memsight view');
}

describe('every fixture through the file picker', () => {
  // MEMSIGHT_VIEWER_EXTRA=a.pickle:b.pickle adds snapshots (recordings of
  // one's own, the 856k-entry benchmark input).
  const extra = (process.env.MEMSIGHT_VIEWER_EXTRA || '').split(':').filter(Boolean);
  const all = [...fixtures(), join(FIXTURES, 'synthetic_annotated.pickle.gz'),
    join(FIXTURES, 'synthetic_two_devices.pickle.gz'), ...extra];
  for (const snapshot of all) {
    test(basename(snapshot), async () => {
      const { page, problems } = await openViewer();
      await page.setInputFiles('input.file-picker', snapshot);
      assert.equal(await settled(page), 'ready');
      await checkOpened(page, snapshot);
      clean(problems);
      await page.close();
    });
  }
});

describe('compressed, dropped, hostile, several', () => {
  test('.gz, .zst and .xz open and read the same', async () => {
    const plain = join(dir, 'mlp_train.pickle');
    copyFileSync(join(FIXTURES, 'mlp_train.pickle'), plain);
    for (const [tool, ext] of [['gzip', 'gz'], ['zstd', 'zst'], ['xz', 'xz']]) {
      const packed = `${plain}.${ext}`;
      execFileSync(tool, ['-k', '-f', '-q', plain]);
      const { page, problems } = await openViewer();
      await page.setInputFiles('input.file-picker', packed);
      assert.equal(await settled(page), 'ready', ext);
      await checkOpened(page, packed);
      clean(problems);
      await page.close();
    }
  });

  test('a file dropped on the page opens', async () => {
    const snapshot = join(FIXTURES, 'oom.pickle');
    const { page, problems } = await openViewer();
    const bytes = [...readFileSync(snapshot)];
    await page.evaluate((data) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(data)], 'oom.pickle'));
      window.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, bytes);
    assert.equal(await settled(page), 'ready');
    await checkOpened(page, snapshot);
    clean(problems);
    await page.close();
  });

  test('a pickle that would run code: the CLI\'s one-line error, nothing opened', async () => {
    const hostile = join(dir, 'hostile.pickle');
    // PROTO 4, FRAME, 'os', 'system', STACK_GLOBAL, STOP: pickle.load would import os.system.
    writeFileSync(hostile, Buffer.from('80049510000000000000008c026f738c0673797374656d932e', 'hex'));
    const cli = spawnSync(memsightBinary(), ['summary', 'hostile.pickle'], { cwd: dir, encoding: 'utf8' });
    assert.equal(cli.status, 2);
    const line = cli.stderr.trim().replace(/^memsight summary: /, '');
    assert.match(line, /^hostile\.pickle: refusing to run code/);
    const { page, problems } = await openViewer();
    await page.setInputFiles('input.file-picker', hostile);
    assert.equal(await settled(page), 'error');
    assert.equal(await page.textContent('.open-error'), line);
    assert.equal(await page.evaluate(() => window.memsight), undefined);
    clean(problems);
    await page.close();
  });

  test('two files picked: told to pick one, and how memsight diff compares them', async () => {
    const { page, problems } = await openViewer();
    await page.setInputFiles('input.file-picker', [join(FIXTURES, 'oom.pickle'), join(FIXTURES, 'mlp_train.pickle')]);
    assert.equal(await settled(page), 'error');
    assert.equal(await page.textContent('.open-error'),
      'You picked 2 files; this viewer opens one snapshot at a time: pick one of them.\n' +
      'To compare the two, run\n  memsight diff oom.pickle mlp_train.pickle -o diff.html\n' +
      'and open diff.html (what grew and shrank between them, by kind, module and allocation site).');
    clean(problems);
    await page.close();
  });

  test('another file replaces the one shown', async () => {
    const { page, problems } = await openViewer();
    await page.setInputFiles('input.file-picker', join(FIXTURES, 'oom.pickle'));
    assert.equal(await settled(page), 'ready');
    await page.evaluate(() => { document.body.dataset.ready = ''; });
    await page.setInputFiles('input.file-picker', join(FIXTURES, 'multistream.pickle'));
    assert.equal(await settled(page), 'ready');
    assert.equal(await page.evaluate(() => window.memsight.page.meta.sourceName), 'multistream.pickle');
    assert.equal(await page.$$eval('.tooltip', (t) => t.length), 1);
    clean(problems);
    await page.close();
  });
});

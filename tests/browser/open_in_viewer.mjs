// Opens one snapshot in a standalone viewer page (`memsight viewer -o`) in
// headless Chromium, offline, through the file picker, and checks that the
// page shows the snapshot with the numbers of `memsight summary --json` from
// the same installation. Used by scripts/wheel_smoke.sh on an installed
// wheel; prints one line and exits 0, or says what went wrong and exits 1.
//
//   node tests/browser/open_in_viewer.mjs VIEWER.html SNAPSHOT MEMSIGHT_COMMAND
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { assertClean, launch, openReport } from './harness.mjs';

const [viewer, snapshot, memsight] = process.argv.slice(2);
if (!memsight) {
  console.error('usage: node open_in_viewer.mjs VIEWER.html SNAPSHOT MEMSIGHT_COMMAND');
  process.exit(2);
}
const browser = await launch();
try {
  const { page, problems } = await openReport(browser.context, viewer, { waitReady: false });
  await page.waitForFunction(() => document.body.dataset.viewer === 'idle');
  await page.setInputFiles('input.file-picker', snapshot);
  await page.waitForFunction(() => document.body.dataset.viewer === 'error' ||
    (document.body.dataset.viewer === 'ready' && document.body.dataset.ready === '1'), null, { timeout: 60000 });
  assert.equal(await page.evaluate(() => document.body.dataset.viewer), 'ready', 'the viewer opened the file');
  const shown = await page.evaluate(() => window.memsight.page.meta.summary);
  const cli = JSON.parse(execFileSync(memsight, ['summary', '--json', snapshot], { maxBuffer: 1 << 28 }));
  assert.equal(shown.total_entries, cli.total_entries, 'trace entries');
  for (const d of shown.devices) {
    assert.deepEqual(d, cli.devices.find((x) => x.device === d.device), `device ${d.device}`);
  }
  assertClean(problems);
  console.log(`viewer: opened ${snapshot}: ${shown.total_entries} trace entries, ` +
              `${shown.devices.length} device(s), the same summary as the installed CLI`);
} catch (e) {
  console.error(`viewer: ${e.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}

// Finds the memsight binary and writes reports for the test fixtures.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { PageData, decodePayload, parseBlob } from '../../viewer/src/data.js';
import { launch } from './harness.mjs';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const FIXTURES = join(ROOT, 'tests/data');

// $MEMSIGHT, else the most recently built build/*/memsight.
export function memsightBinary() {
  // Resolved now: tests run it from other folders.
  if (process.env.MEMSIGHT) return resolve(process.env.MEMSIGHT);
  const build = join(ROOT, 'build');
  /** @type {[number, string][]} */
  const found = [];  // [mtime, path]
  if (existsSync(build)) {
    for (const d of readdirSync(build)) {
      const p = join(build, d, 'memsight');
      if (existsSync(p)) found.push([statSync(p).mtimeMs, p]);
    }
    if (existsSync(join(build, 'memsight'))) found.push([statSync(join(build, 'memsight')).mtimeMs, join(build, 'memsight')]);
  }
  if (!found.length) throw new Error('no memsight binary: build it or set MEMSIGHT=/path/to/memsight');
  return found.sort((a, b) => b[0] - a[0])[0][1];
}

export function fixtures() {
  return readdirSync(FIXTURES).filter((f) => f.endsWith('.pickle')).sort().map((f) => join(FIXTURES, f));
}

export const outDir = () => mkdtempSync(join(tmpdir(), 'memsight-reports-'));

// A browser and a scratch folder for the tests of one file: made before
// them and handed to `use(browser, dir)`, closed and removed after them.
export function useBrowser(use) {
  /** @type {Awaited<ReturnType<typeof launch>> | undefined} */
  let browser;
  /** @type {string | undefined} */
  let dir;
  before(async () => {
    dir = outDir();
    browser = await launch();
    use(browser, dir);
  });
  after(async () => {
    if (browser) await browser.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
}

// memsight COMMAND SNAPSHOT -o OUT [...args]; returns OUT.
export function report(snapshot, dir, command = 'view', args = []) {
  const out = join(dir, `${basename(snapshot).replace(/\.pickle.*$/, '')}.${command}.html`);
  execFileSync(memsightBinary(), [command, snapshot, '-o', out, ...args], { stdio: /** @type {const} */ (['ignore', 'ignore', 'pipe']) });
  return out;
}

// The memsight binary, or null when none is built (node's viewer tests skip).
export function optionalBinary() {
  try {
    return memsightBinary();
  } catch {
    return null;
  }
}

// The page data a report embeds, decoded as the page decodes it.
export async function embeddedPageData(file) {
  const html = readFileSync(file, 'utf8');
  const m = /<script id="memsight-data" type="application\/octet-stream" data-encoding="(\w+)" data-size="(\d+)">([^<]*)<\/script>/.exec(html);
  if (!m) throw new Error(`${file} embeds no page data`);
  return new PageData(parseBlob(await decodePayload(m[3], m[1], +m[2])));
}

// Shared plumbing of the browser tests and the page benchmark: Debian's
// Chromium, headless, with every request that is not file:// aborted and
// recorded, and every console error or page error recorded.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';

// extraArgs: more Chromium switches (the benchmarks cap V8's heap).
export async function launch(extraArgs = []) {
  const profile = mkdtempSync(join(tmpdir(), 'memsight-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1440, height: 900 },
    deviceScaleFactor: 1,
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-default-apps', '--disable-extensions', '--allow-file-access-from-files',
      ...extraArgs,
    ],
  });
  const close = async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  };
  return { context, close };
}

// Opens a report; returns the page and the lists of problems seen so far
// (they keep filling while the test drives the page).
export async function openReport(context, file, { hash = '', waitReady = true } = {}) {
  const page = await context.newPage();
  const problems = { requests: [], errors: [] };
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('file://')) return route.continue();
    problems.requests.push(url);
    return route.abort();
  });
  page.on('request', (req) => {
    const url = req.url();
    if (!url.startsWith('file://') && !url.startsWith('data:') && !url.startsWith('blob:') &&
        !problems.requests.includes(url)) problems.requests.push(url);
  });
  page.on('console', (msg) => {
    if (msg.type() === 'error' || msg.type() === 'warning') problems.errors.push(`console.${msg.type()}: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.errors.push(`pageerror: ${err.message}`));
  const url = pathToFileURL(file).href + hash;
  await page.goto(url);
  if (waitReady) await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 60000 });
  return { page, problems };
}

// Fails when a page asked the network for anything or logged an error.
export function assertClean(problems) {
  assert.deepEqual(problems.requests, [], 'network requests');
  assert.deepEqual(problems.errors, [], 'console or page errors');
}

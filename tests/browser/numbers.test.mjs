// One page, one set of numbers: on the page of every snapshot in tests/data
// (counters/ and the compressed ones included), every device's overview
// cards, both timelines' footers and the out-of-memory panel show what
// `memsight summary --json` computes, to the byte and the trace entry.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, test } from 'node:test';
import { formatCount, formatSize } from '../../viewer/src/format.js';
import { openReport } from './harness.mjs';
import { FIXTURES, memsightBinary, report, useBrowser } from './reports.mjs';

let browser;
let dir;

useBrowser((b, d) => {
  browser = b;
  dir = d;
});

// Every snapshot under tests/data, plain or compressed.
function snapshots(folder = FIXTURES) {
  const found = [];
  for (const e of readdirSync(folder, { withFileTypes: true })) {
    const p = join(folder, e.name);
    if (e.isDirectory()) found.push(...snapshots(p));
    else if (/\.pickle(\.(gz|zst|xz))?$/.test(e.name)) found.push(p);
  }
  return found.sort();
}

const at = (e) => (e >= 0 ? `after trace entry ${formatCount(e)}` : 'before the first trace entry');

// What the page shows for one device, read from the DOM after each view is drawn.
async function shown(page, device) {
  const out = {};
  out.cards = await page.$$eval('.overview-view .card', (cs) => Object.fromEntries(cs.map((c) => [
    c.querySelector('.card-title').textContent,
    { value: c.querySelector('.card-value').textContent, sub: c.querySelector('.card-sub').textContent },
  ])));
  out.ooms = await page.$$eval('.overview-view .oom-panel .oom', (items) => items.map((o) => ({
    title: o.querySelector('.oom-title b').textContent,
    kv: Object.fromEntries([...o.querySelectorAll('.kv')].map((kv) =>
      [kv.querySelector('.k').textContent, kv.querySelector('.v').textContent])),
  })));
  for (const view of ['timeline', 'segments-timeline']) {
    await page.click(`.tab[data-view="${view}"]`);
    await page.waitForFunction((want) => document.body.dataset.view === want, view);
    out[view] = await page.evaluate((key) => {
      const v = window.memsight.app.views.get(key);
      return { text: v.detailsHead.textContent, drawnPeak: v.model.meta.peak };
    }, `${view}:${device}`);
  }
  out.expandable = await page.evaluate((d) => window.memsight.app.page.device(d).seg.expandable.some((x) => x), device);
  return out;
}

describe('the page shows the numbers of memsight summary --json', () => {
  for (const snap of snapshots()) {
    test(relative(FIXTURES, snap), async () => {
      const summary = JSON.parse(execFileSync(memsightBinary(), ['summary', '--json', snap]));
      const file = report(snap, dir);
      const devices = summary.devices.filter((d) => d.entries || d.segments_now);
      assert.ok(devices.length, 'a device to check');
      for (const s of devices) {
        const { page, problems } = await openReport(browser.context, file, { hash: `#overview/${s.device}` });
        const got = await shown(page, s.device);
        const where = `device ${s.device}`;

        const peakA = got.cards['Peak allocated'];
        assert.equal(peakA.value, formatSize(s.peak_allocated, false), `${where}: overview peak allocated`);
        assert.ok(peakA.sub.startsWith(at(s.peak_allocated_event)), `${where}: ${peakA.sub}`);
        const peakR = got.cards['Peak reserved'];
        assert.equal(peakR.value, formatSize(s.peak_reserved, false), `${where}: overview peak reserved`);
        assert.ok(peakR.sub.startsWith(at(s.peak_reserved_event)), `${where}: ${peakR.sub}`);
        assert.equal(got.cards['At the snapshot'].value,
          `${formatSize(s.allocated_now, false)} / ${formatSize(s.reserved_now, false)}`, `${where}: at the snapshot`);

        assert.ok(got.timeline.text.startsWith(
          `Peak allocated: ${formatSize(s.peak_allocated)} ${at(s.peak_allocated_event)} ` +
          "(torch's max_memory_allocated"),
        `${where}: timeline footer says "${got.timeline.text}", the summary ${s.peak_allocated} bytes ` +
          `${at(s.peak_allocated_event)}`);
        assert.match(got.timeline.text,
          new RegExp(`torch's requested_bytes, peak ${formatSize(s.peak_requested, false).replace('.', '\\.')}\\)`));
        assert.ok(got['segments-timeline'].text.startsWith(
          `Peak reserved: ${formatSize(s.peak_reserved)} ${at(s.peak_reserved_event)} (torch's max_memory_reserved)`),
        `${where}: segment timeline footer says "${got['segments-timeline'].text}", the summary ` +
          `${s.peak_reserved} bytes ${at(s.peak_reserved_event)}`);
        if (s.exact) {
          // The bands themselves add up to torch's counters: requested bytes
          // (memory_viz's timeline), segment bytes (without expandable segments).
          assert.equal(got.timeline.drawnPeak, s.peak_requested, `${where}: highest the memory timeline draws`);
          if (!got.expandable) {
            assert.equal(got['segments-timeline'].drawnPeak, s.peak_reserved,
              `${where}: highest the segment timeline draws`);
          }
        }

        const ooms = s.ooms || [];
        const oomCard = got.cards['Out of memory'].value;
        assert.equal(oomCard, ooms.length ? `${ooms.length} OOM event${ooms.length > 1 ? 's' : ''}` : 'none',
          `${where}: OOM card`);
        assert.equal(got.ooms.length, ooms.length, `${where}: OOM panel items`);
        ooms.forEach((o, i) => {
          const p = got.ooms[i];
          assert.equal(p.title, `OOM at trace entry ${formatCount(o.event)}`);
          assert.deepEqual(
            [p.kv.requested, p.kv['free on the device'], p.kv.allocated, p.kv.reserved, p.kv['free in the cache'],
              p.kv[`largest free block (${o.pool || 'any'} pool)`]],
            [o.requested, o.device_free, o.allocated, o.reserved, o.cached_free, o.largest_free_in_pool ?? o.largest_free]
              .map((b) => formatSize(b)),
            `${where}: OOM at trace entry ${o.event}`);
        });
        assert.deepEqual(problems.requests, [], 'network requests');
        assert.deepEqual(problems.errors, [], 'console or page errors');
        await page.close();
      }
    });
  }
});

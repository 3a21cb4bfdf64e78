// The page and the text agree on every number and count: for each view
// (overview, kinds, timelines, the diff page, the ranks page, leaks, and the
// standalone viewer), the numbers the page shows are read from the DOM and
// compared, as the exact strings, with what the CLI's text report prints for
// the same snapshot. Nothing is normalised but the text's own line wrapping.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { assertClean, openReport } from './harness.mjs';
import { FIXTURES, ROOT, memsightBinary, report, useBrowser } from './reports.mjs';

let browser;
let dir;

useBrowser((b, d) => {
  browser = b;
  dir = d;
});

const cli = (...args) => execFileSync(memsightBinary(), args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

// The first match of re in text, or a failure naming what was looked for.
function grab(text, re, what) {
  const m = re.exec(text);
  assert.ok(m, `the text report has no ${what} (${re})`);
  return m;
}

// `memsight summary`'s block for device d.
function deviceBlock(text, d) {
  const start = text.indexOf(`Device ${d} - `);
  assert.ok(start >= 0, `summary text lists device ${d}`);
  const next = text.indexOf('\nDevice ', start + 1);
  return text.slice(start, next < 0 ? undefined : next);
}

// The lines of a section that starts with `head` and whose rows are indented
// deeper than it.
function section(block, head) {
  const lines = block.split('\n');
  const i = lines.findIndex((l) => l.trimStart().startsWith(head));
  if (i < 0) return [];
  const indent = lines[i].length - lines[i].trimStart().length;
  const out = [];
  for (const l of lines.slice(i + 1)) {
    if (l.length - l.trimStart().length <= indent) break;
    out.push(l.trim());
  }
  return out;
}

// What the overview shows: cards, site rows and kind rows.
const overviewShown = (page) => page.evaluate(() => {
  const cells = (tr) => [...tr.children].map((td) => td.textContent);
  const v = document.querySelector('.view.overview-view');
  return {
    cards: Object.fromEntries([...v.querySelectorAll('.card')].map((c) => [
      c.querySelector('.card-title').textContent,
      { value: c.querySelector('.card-value').textContent, sub: c.querySelector('.card-sub').textContent }])),
    sites: [...v.querySelectorAll('tr.site-row')].map(cells),
    sitesNote: (v.querySelector('tr.site-row')?.closest('section')?.querySelector('p.sub')?.textContent) || '',
    kinds: [...v.querySelectorAll('.kinds-panel .breakdown')].map((b) => [...b.querySelectorAll('tr.kind-row')].map(cells)),
    ooms: [...v.querySelectorAll('.oom-panel .oom')].map((o) => ({
      title: o.querySelector('.oom-title b').textContent,
      kv: Object.fromEntries([...o.querySelectorAll('.kv')].map((kv) =>
        [kv.querySelector('.k').textContent, kv.querySelector('.v').textContent])),
    })),
    facts: Object.fromEntries([...v.querySelectorAll('table.kv-table tr')].map((tr) =>
      [tr.querySelector('th').textContent, tr.querySelector('td').textContent])),
  };
});

// The overview of device d against `memsight summary`'s text of the same file.
async function checkOverview(page, summaryText, d) {
  const block = deviceBlock(summaryText, d);
  const got = await overviewShown(page);
  const where = `device ${d}`;
  const [, entries] = grab(block, /^Device \d+ - ([\d,]+ trace entr(?:y|ies))/, 'trace entries');
  assert.equal(got.cards.History.value, entries, `${where}: History card`);
  for (const [card, key] of [['Peak allocated', 'peak allocated'], ['Peak reserved', 'peak reserved']]) {
    const [, size, at] = grab(block, new RegExp(`${key}\\s+(\\S+), (after trace entry [\\d,]+|before the first trace entry)`), key);
    assert.equal(got.cards[card].value, size, `${where}: ${card}`);
    assert.ok(got.cards[card].sub.startsWith(at), `${where}: ${card} "${got.cards[card].sub}", the text "${at}"`);
  }
  const [, alloc, resv] = grab(block, /at the snapshot (\S+) allocated, \S+ active, (\S+) reserved/, 'at the snapshot');
  assert.equal(got.cards['At the snapshot'].value, `${alloc} / ${resv}`, `${where}: At the snapshot`);
  const cached = /cached free\s+(\S+) in [\d,]+ blocks?, largest \S+ \(fragmentation (\S+)\)/.exec(block);
  if (cached) {
    assert.ok(got.cards['At the snapshot'].sub.includes(`${cached[1]} cached free, ${cached[2]} fragmented`),
      `${where}: "${got.cards['At the snapshot'].sub}", the text ${cached[0]}`);
  }

  // Sites at the peak: bytes and allocation counts, row by row, and how many more.
  const siteLines = section(block, 'live at the allocated peak');
  const textSites = siteLines.map((l) => /^(\S+)\s+([\d,]+) x {2}/.exec(l)).filter(Boolean).map((m) => [m[1], m[2]]);
  assert.deepEqual(got.sites.map((c) => [c[1], c[4]]), textSites, `${where}: sites at the peak (bytes, allocations)`);
  const more = siteLines.map((l) => /^\.\.\. ([\d,]+ more sites?)$/.exec(l)).find(Boolean);
  if (more) {
    assert.ok(got.sitesNote.includes(` ${more[1].replace('more site', 'smaller site')} not shown.`),
      `${where}: "${got.sitesNote}", the text "... ${more[1]}"`);
  }

  // Kinds at the peak: bytes, name and where each came from.
  const kindHead = grab(block, /what kind, at the allocated peak[^\n]*/, 'kinds at the peak')[0];
  const textKinds = section(block, kindHead.trim()).map((l) => /^(\S+) {2}(\S.*?) {2,}(\S.*)$/.exec(l))
    .filter(Boolean).map((m) => [m[1], m[2]]);
  assert.deepEqual((got.kinds[0] || []).map((c) => [c[1], c[0]]), textKinds, `${where}: kinds at the peak`);
  // (A line the text wrapped after a comma goes on at the same indent.)
  const snapKinds = /what kind, at the snapshot: ((?:[^\n]*,\n)*[^\n]*)/.exec(block);
  if (snapKinds) {
    assert.equal((got.kinds[1] || []).map((c) => `${c[0]} ${c[1]}`).join(', '), unwrap([snapKinds[1]]),
      `${where}: kinds at the snapshot`);
  }

  // Each OOM: its trace entry and the sizes its diagnosis opens with.
  const ooms = [...block.matchAll(/OUT OF MEMORY at trace entry ([\d,]+)[^\n]*\n\s+Requested (\S+)/g)];
  assert.equal(got.ooms.length, ooms.length, `${where}: OOMs`);
  ooms.forEach((m, i) => {
    assert.equal(got.ooms[i].title, `OOM at trace entry ${m[1]}`);
    assert.ok(got.ooms[i].kv.requested.startsWith(`${m[2]} (`), `${where}: requested ${got.ooms[i].kv.requested}`);
  });
  const segments = /^Device \d+ - [\d,]+ trace entr(?:y|ies), ([\d,]+) segments?/.exec(block);
  return { entries, segments: segments ? segments[1] : '0' };
}

// A timeline view's footer once it is drawn.
async function footer(page, view, d) {
  await page.click(`.tab[data-view="${view}"]`);
  await page.waitForFunction((want) => document.body.dataset.view === want, view);
  return page.evaluate((key) => window.memsight.app.views.get(key).detailsHead.textContent, `${view}:${d}`);
}

// Both timelines' footers against the summary text: the peak, its trace
// entry and the trace entries the device recorded.
async function checkTimelines(page, summaryText, d) {
  const block = deviceBlock(summaryText, d);
  const [, entries] = grab(block, /^Device \d+ - ([\d,]+ trace entr(?:y|ies))/, 'trace entries');
  for (const [view, key, label] of [['timeline', 'peak allocated', 'Peak allocated'],
    ['segments-timeline', 'peak reserved', 'Peak reserved']]) {
    const [, size, at] = grab(block, new RegExp(`${key}\\s+(\\S+), (after trace entry [\\d,]+|before the first trace entry)`), key);
    const text = await footer(page, view, d);
    assert.match(text, new RegExp(`^${label}: ${size.replace('.', '\\.')} \\([\\d,]+ bytes\\) ${at} `),
      `device ${d} ${view}: "${text}", the text ${key} ${size} ${at}`);
    if (entries !== '0 trace entries') {
      assert.match(text, new RegExp(` over ${entries}\\. `), `device ${d} ${view}: "${text}", the text ${entries}`);
    }
  }
}

describe('the report of each snapshot: overview, kinds, timelines', () => {
  for (const name of ['transformer_train', 'oom', 'multistream', 'two_devices', 'expandable', 'cuda_graph', 'wrapped', 'state_only']) {
    test(name, async () => {
      const snap = join(FIXTURES, `${name}.pickle`);
      const text = cli('summary', snap);
      const devices = [...text.matchAll(/^Device (\d+) - /gm)].map((m) => +m[1]);
      const file = report(snap, dir);
      for (const d of devices) {
        const { page, problems } = await openReport(browser.context, file, { hash: `#overview/${d}` });
        const { entries, segments } = await checkOverview(page, text, d);
        // The device selector names each device by its trace entries.
        const option = await page.$eval(`.device select option[value="${d}"]`, (o) => o.textContent);
        assert.equal(option, `cuda:${d} · ${entries}`);
        if (devices.length === 1) {
          const facts = await overviewShown(page);
          assert.ok(facts.facts['segments / blocks'].startsWith(`${segments} / `),
            `segments: "${facts.facts['segments / blocks']}", the text ${segments}`);
          // the text lists the devices with data: here the one
          assert.match(facts.facts.devices, new RegExp(`^\\d+; with trace entries or segments: device ${d}$`));
        }
        await checkTimelines(page, text, d);
        assertClean(problems);
        await page.close();
      }
    });
  }
});

test('the standalone viewer shows the text report\'s numbers', async () => {
  const viewer = join(dir, 'viewer.html');
  cli('viewer', '-o', viewer);
  const snap = join(FIXTURES, 'oom.pickle');
  const text = cli('summary', snap);
  const { page, problems } = await openReport(browser.context, viewer, { waitReady: false });
  await page.waitForFunction(() => document.body.dataset.viewer === 'idle');
  await page.setInputFiles('input.file-picker', snap);
  await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 60000 });
  await checkOverview(page, text, 0);
  await checkTimelines(page, text, 0);
  assertClean(problems);
  await page.close();
});

// `memsight diff`'s text rows: label -> [before, after, change].
function diffRows(text) {
  const rows = {};
  for (const m of text.matchAll(/^ {2,4}(\S[\w -]*?) {2,}(\S+) +(\S+) +(\S+(?: pt)?)$/gm)) rows[m[1]] = [m[2], m[3], m[4]];
  return rows;
}

test('the diff page shows the diff text\'s numbers', async () => {
  const a = join(FIXTURES, 'mlp_train.pickle');
  const b = join(FIXTURES, 'transformer_train.pickle');
  const text = cli('diff', a, b);
  const file = join(dir, 'diff.html');
  cli('diff', a, b, '-o', file);
  const { page, problems } = await openReport(browser.context, file, { waitReady: false });
  await page.waitForSelector('svg g.f');
  const tables = await page.$$eval('table', (ts) => ts.map((t) => [...t.querySelectorAll('tbody tr')]
    .map((tr) => [...tr.children].map((td) => td.textContent))));
  const want = diffRows(text);
  // The totals (fragmentation's change in points included) and the kinds.
  for (const rows of tables.slice(0, 2)) {
    for (const [label, before, after, change] of rows) {
      assert.deepEqual([before, after, change], want[label], `diff page row "${label}"`);
    }
  }
  assert.ok(tables[0].some((r) => r[0] === 'fragmentation'));
  // Each group of sites: how many and by how much.
  const groups = await page.locator('tr.group').allTextContents();
  const textGroups = [...text.matchAll(/^ {4}(grew|appeared|shrank|vanished)[^:]*: ([\d,]+ sites?), (\S+)$/gm)]
    .map((m) => `${m[1]}: ${m[2]}, ${m[3]}`);
  assert.deepEqual(groups, textGroups);
  // Each site row: change, before, after, allocations.
  const sites = await page.$$eval('tr.site', (rs) => rs.map((r) => [...r.children].map((td) => td.textContent)))
    .then((rs) => rs.map((c) => [c[0], c[2], c[3], c[4].replace(' → ', ' -> ')]));
  const textSites = [...text.matchAll(/^ {8}\s*([+-]\S+) +(\S+) -> (\S+) +([\d,]+ -> [\d,]+) /gm)]
    .map((m) => [m[1], m[2], m[3], m[4]]);
  assert.deepEqual(sites, textSites);
  assertClean(problems);
  await page.close();
});

// The text with its wrapped lines joined (wrap_words breaks at spaces).
const unwrap = (lines) => lines.join(' ').replace(/\s+/g, ' ').trim();

test('the ranks page shows the ranks text\'s numbers', async () => {
  const files = [join(FIXTURES, 'mlp_train.pickle'), join(FIXTURES, 'oom.pickle'), join(FIXTURES, 'mlp_train.pickle')];
  const text = cli('ranks', ...files);
  const file = join(dir, 'ranks.html');
  cli('ranks', ...files, '-o', file);
  const { page, problems } = await openReport(browser.context, file);
  const headline = await page.locator('.headline h2').textContent();
  assert.ok(headline.startsWith(text.split('\n')[0]), `"${headline}", the text "${text.split('\n')[0]}"`);
  // The table: per rank peak allocated, when, peak reserved, at the dump, fragmentation.
  const rows = await page.$$eval('tr.rank-row', (rs) => rs.map((r) => [...r.children].map((td) => td.textContent)));
  for (const m of text.matchAll(/^ +(\d+) +(\S+) (?:at (\S+ s)|(at the start)) +(\S+) +(\S+) \/ (\S+) +(\S+%)/gm)) {
    const row = rows.find((r) => r[0] === m[1]);
    assert.ok(row, `rank ${m[1]} on the page`);
    assert.deepEqual([row[1], row[2], row[4], row[5], row[6], row[7]],
      [m[2], m[3] || 'start', m[5], m[6], m[7], m[8]], `rank ${m[1]}`);
  }
  // The ranks that differ, and by what.
  const lines = section(text, 'Ranks that differ from the median:');
  const differs = [];
  for (const l of lines) {
    if (/^rank \d+: /.test(l)) differs.push([l]);
    else if (differs.length) differs[differs.length - 1].push(l);
  }
  const items = await page.locator('.differs-list li').allTextContents();
  assert.equal(items.length, differs.length);
  differs.forEach((d, i) => {
    // Each delta starts a line of its own in the text; the page joins them with "; ".
    const deltas = [];
    for (const l of d) {
      const s = l.replace(/^rank \d+: /, '');
      if (/^(peak allocated|peak reserved|allocated at the dump|reserved at the dump|fragmentation) /.test(s)) deltas.push([s]);
      else deltas[deltas.length - 1].push(s);
    }
    assert.equal(items[i], `${/^rank \d+: /.exec(d[0])[0]}${deltas.map(unwrap).join('; ')}`);
  });
  assertClean(problems);
  await page.close();
});

test('the leaks view shows the leaks text\'s numbers', async () => {
  const snap = join(dir, 'leak.pickle');
  execFileSync('/usr/bin/python3', ['-c', `
import pickle, sys
sys.path.insert(0, ${JSON.stringify(join(ROOT, 'tests/data'))})
import make_leaks as ml
pickle.dump(ml.loop(steps=30, keep_loss=True, keep_output=True), open(sys.argv[1], 'wb'), protocol=4)
`, snap]);
  const text = cli('leaks', snap);
  const file = join(dir, 'leak.html');
  cli('view', snap, '-o', file, '--view', 'leaks');
  const { page, problems } = await openReport(browser.context, file);
  const [, perIteration] = grab(text, /LEAK: (\S+) more stays allocated after each iteration/, 'the leak');
  assert.equal(await page.locator('.leak-head h3').textContent(),
    `Leak: ${perIteration} more stays allocated after each iteration`);
  const measured = grab(text, /allocations made in the ([\d,]+) iterations\s+checked/, 'iterations checked')[1];
  assert.match(await page.locator('.leak-panel p.sub').textContent(), new RegExp(`in the ${measured} iterations checked`));
  const textSites = [...text.matchAll(/^ +(\S+\/iteration) +in ([\d,]+ of [\d,]+) iterations[^\n]*\n[^\n]*\n +([\d,]+) still live \((\S+)\); the newest made at trace entries ([^\n]*)/gm)]
    .map((m) => [m[1], m[2], `${m[3]} (${m[4]})`,
      [...m[5].matchAll(/([\d,]+) \(step/g)].map((e) => `trace entry ${e[1]}`)]);
  const sites = await page.$$eval('tr.leak-site', (rs) => rs.map((r) => {
    const c = [...r.children].map((td) => td.textContent);
    return [c[0], c[1], c[2], [...r.querySelectorAll('.newest button')].map((b) => b.textContent)];
  }));
  assert.ok(textSites.length >= 2);
  assert.deepEqual(sites, textSites);
  assertClean(problems);
  await page.close();
});

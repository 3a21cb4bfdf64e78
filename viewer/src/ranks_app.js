// The ranks page (`memsight ranks -o report.html`): what does not match,
// each OOM judged against the other ranks, a chart of every rank, the ranks
// that differ from the median and by what, a table of every rank, and the
// selected rank's details with the link to its own full page.

import { countOf, entriesText, fixed, formatCount, formatPercent, formatSize, signedPercent } from './format.js';
import { fill, h, longText, segmented } from './ui.js';
import { CATEGORIES, moduleLabel } from './categories.js';
import { MODES, RankChart, chartModel } from './ranks_chart.js';

const bytes = (v) => formatSize(v, false);
const share = formatPercent;

export const METRIC_NAMES = {
  peak_allocated: 'peak allocated',
  peak_reserved: 'peak reserved',
  allocated_now: 'allocated at the dump',
  reserved_now: 'reserved at the dump',
  fragmentation: 'fragmentation',
};

// Ranges [first, last] as the text report writes them: "0-3, 5, 7-9", "2-99,999,999".
export function rangesText(ranges) {
  return ranges.map(([a, b]) => (a === b ? formatCount(a) : `${formatCount(a)}${b === a + 1 ? ', ' : '-'}${formatCount(b)}`))
    .join(', ');
}

// Rank numbers as ranges: "0-3, 5, 7-9".
export function rankRanges(list) {
  const r = [...new Set(list)].sort((a, b) => a - b);
  const ranges = [];
  for (const k of r) {
    if (ranges.length && ranges[ranges.length - 1][1] + 1 === k) ranges[ranges.length - 1][1] = k;
    else ranges.push([k, k]);
  }
  return rangesText(ranges);
}

// The missing ranks: "missing: no dump of ranks 2-99,999,999 (99,999,998 ranks)".
function missingText(rep) {
  const ranges = rep.missing_ranges || rep.missing.map((k) => [k, k]);
  const n = ranges.reduce((sum, [a, b]) => sum + b - a + 1, 0);
  if (!n) return [];
  return [`missing: no dump of rank${n > 1 ? 's' : ''} ${rangesText(ranges)}` +
    (ranges.length < n ? ` (${formatCount(n)} ranks)` : '')];
}

// A rank page's link as the page writer makes it: "./" and percent-encoded
// names, nothing that could hold a scheme. Anything else is not followed.
export function safeLink(link) {
  return typeof link === 'string' && /^\.\/[A-Za-z0-9%._~/-]+$/.test(link) ? link : '';
}

// Seconds on the report's clock: the ranks' common wall clock, else the rank's own first entry.
export function seconds(rep, r, timeUs) {
  return (timeUs - (rep.job_clock ? rep.time_base_us : r.first_time_us)) / 1e6;
}

function when(rep, r, peak) {
  return peak.event < 0 ? 'at the start' : `at ${fixed(seconds(rep, r, peak.time_us), 3)} s`;
}

const partName = (p) => (p.kind === 'module' ? moduleLabel(p.name) : p.name);
// As the text's deltas: a zero change is "+0.0B" there, as here.
const signed = (v) => `${v >= 0 ? '+' : '-'}${bytes(Math.abs(v))}`;

// One way a rank differs, as the text report says it.
export function deltaText(d) {
  const name = METRIC_NAMES[d.metric] || d.metric;
  if (d.metric === 'fragmentation') return `${name} ${share(d.value)} against the median ${share(d.median)}`;
  const diff = d.value - d.median;
  let out = `${name} ${bytes(d.value)}, ${signed(diff)}` +
    (d.median > 0 ? ` (${signedPercent(diff / d.median)})` : '') +
    ` against the median ${bytes(d.median)}`;
  for (const kind of ['kind', 'module', 'site']) {
    const items = d.by.filter((p) => p.kind === kind).map((p) => `${partName(p)} ${signed(p.delta)}`);
    if (items.length) out += `; by ${kind}: ${items.join(', ')}`;
  }
  return out;
}

function headline(rep) {
  const n = rep.ranks.length;
  const rounds = new Set(rep.ranks.filter((r) => r.origin && r.origin.seq >= 0)
    .map((r) => `${r.origin.tag} round ${r.origin.seq}`));
  const extra = [...(rounds.size === 1 ? rounds : []), ...(rep.world_size > 0 ? [`world size ${formatCount(rep.world_size)}`] : [])];
  const ooms = rep.ooms.length;
  return `${countOf(n, 'rank')}${extra.length ? ` (${extra.join(', ')})` : ''}, ` +
    (ooms ? `${formatCount(ooms)} ran out of memory` : 'none ran out of memory') +
    (n === 1 ? ', nothing to compare it with'
      : `, ${formatCount(rep.differ.length)} differ${rep.differ.length === 1 ? 's' : ''} from the median`);
}

function mismatchSection(rep) {
  const items = [
    ...rep.mismatches.map((m) => `mismatch: ${m}`),
    ...missingText(rep),
    ...rep.manifest_missing.map((m) => `rank ${m.rank} wrote nothing: ${m.why}`),
    ...rep.notes.map((n) => `note: ${n}`),
  ];
  if (!items.length) return null;
  return h('section', { class: 'warn mismatches' }, h('h2', null, 'What does not match'),
    h('ul', null, items.map((t) => h('li', null, t))));
}

function oomSection(rep, select) {
  if (!rep.ooms.length) return null;
  return rep.ooms.map((v) => {
    const i = rep.ranks.findIndex((r) => r.rank === v.rank);
    const r = rep.ranks[i];
    const o = r.ooms[0];
    return h('section', { class: 'oom oom-verdict' },
      h('h2', null, `Rank ${r.rank} ran out of memory: ${o.verdict || 'see its diagnosis'}`),
      h('p', { class: 'verdict' }, h('b', null, v.text)),
      h('p', null, o.explanation),
      o.remedies.length ? h('ul', null, o.remedies.map((t) => h('li', null, t))) : null,
      h('p', null, h('a', { href: '#', onclick: (e) => { e.preventDefault(); select(i); } }, `Show rank ${r.rank}'s details`)));
  });
}

function differSection(rep, select) {
  if (rep.ranks.length === 1) {
    return h('section', { class: 'differ' }, h('h2', null, 'Nothing to compare'),
      h('p', null, 'One file is one rank: give the files of every rank (a folder, a glob such as ',
        h('code', null, "'run/oom_1_rank*.pickle'"), ', or the round\'s manifest) to see them side by side.'));
  }
  const body = rep.differ.length
    ? h('ul', { class: 'differs-list' }, rep.differ.map((o) => {
      const i = rep.ranks.findIndex((r) => r.rank === o.rank);
      return h('li', { onclick: () => select(i) }, h('b', null, `rank ${o.rank}: `), o.deltas.map(deltaText).join('; '));
    }))
    : h('p', null, 'None: every rank is within 5.0% (and 1.0MiB) of the median on every number.');
  return h('section', { class: 'differ' }, h('h2', null, 'Ranks that differ from the median'),
    h('p', { class: 'sub' }, `The median of each number over all ranks; the most typical rank is rank ${rep.typical_rank}.`), body);
}

function kindsTable(r, rep) {
  const rows = CATEGORIES.filter((c) => r.kinds_peak[c.key] || rep.median.kinds_peak[c.key]).map((c) => {
    const d = r.kinds_peak[c.key] - rep.median.kinds_peak[c.key];
    return h('tr', null, h('td', null, h('i', { class: 'swatch', style: { background: c.color, display: 'inline-block', width: '10px', height: '10px', marginRight: '6px' } }), c.name),
      h('td', { class: 'num' }, bytes(r.kinds_peak[c.key])), h('td', { class: 'num' }, bytes(rep.median.kinds_peak[c.key])),
      h('td', { class: `num ${d > 0 ? 'plus' : d < 0 ? 'minus' : ''}` }, d ? signed(d) : ''));
  });
  return h('table', null, h('thead', null, h('tr', null, h('th', null, 'kind (at the peak)'), h('th', { class: 'num' }, 'this rank'),
    h('th', { class: 'num' }, 'median'), h('th', { class: 'num' }, 'difference'))), h('tbody', null, rows));
}

function listTable(title, rows) {
  if (!rows.length) return null;
  return h('div', null, h('h3', null, title), h('table', null, h('tbody', null,
    rows.map(([name, v]) => h('tr', null, h('td', { class: 'num' }, bytes(v)), h('td', { class: 'mono' }, longText(name)))))));
}

function originText(o) {
  if (!o) return null;
  const bits = [];
  if (o.tag) bits.push(`${o.tag} round ${o.seq}`);
  if (o.reason) bits.push(o.reason);
  if (o.host) bits.push(`host ${o.host}, pid ${o.pid}`);
  if (o.torch) bits.push(`torch ${o.torch}`);
  if (o.device_name) bits.push(o.device_name);
  if (o.batch >= 0) bits.push(`batch ${o.batch}`);
  return bits.join(' · ');
}

export function rankDetails(rep, i, link) {
  const r = rep.ranks[i];
  const badges = [];
  if (r.ooms.length) badges.push(h('span', { class: 'badge oom' }, 'OOM'));
  const out = rep.differ.find((o) => o.rank === r.rank);
  if (out) badges.push(h('span', { class: 'badge differs' }, 'differs'));
  if (r.rank === rep.typical_rank) badges.push(h('span', { class: 'badge typical' }, 'typical'));
  link = safeLink(link);
  const open = link
    ? h('a', { class: 'open', href: link }, `Open rank ${r.rank}'s full page (timeline, allocator state, flamegraphs)`)
    : h('p', null, 'No page was written for this rank (--pages all writes one for every rank); write it with ',
      h('code', null, `memsight view ${r.path} -o rank${r.rank}.html`));
  const nums = [
    ['peak allocated', `${bytes(r.peak_allocated.bytes)} ${when(rep, r, r.peak_allocated)} (trace entry ${r.peak_allocated.event})`],
    ['peak active', `${bytes(r.peak_active.bytes)} ${when(rep, r, r.peak_active)}`],
    ['peak reserved', `${bytes(r.peak_reserved.bytes)} ${when(rep, r, r.peak_reserved)}`],
    ['at the dump', `${bytes(r.at_dump.allocated)} allocated, ${bytes(r.at_dump.reserved)} reserved`],
    ['cached free', `${bytes(r.at_dump.free)}, largest block ${bytes(r.at_dump.largest_free)} (fragmentation ${share(r.at_dump.fragmentation)})`],
    ['device', `cuda:${r.device}${r.device_total > 0 ? `, ${bytes(r.device_total)}` : ''}${r.limit > 0 ? `, limit ${bytes(r.limit)}` : ''}; ${entriesText(r.entries)}`],
  ];
  if (!r.exact) nums.push(['peaks', `lower bounds: ${r.exactness}`]);
  const origin = originText(r.origin);
  return h('section', { class: 'details' },
    h('h2', null, `Rank ${r.rank}`, badges),
    h('p', { class: 'sub mono' }, r.path, origin ? ` — ${origin}` : ''),
    open,
    out ? h('ul', null, out.deltas.map((d) => h('li', null, deltaText(d)))) : null,
    h('div', { class: 'cols' },
      h('div', null, h('table', null, h('tbody', null, nums.map(([k, v]) => h('tr', null, h('th', null, k), h('td', null, v)))))),
      h('div', null, kindsTable(r, rep), h('p', { class: 'hint' }, `kinds ${r.kinds_source}`))),
    h('div', { class: 'cols' },
      listTable('made in each module (not its submodules), at the peak', r.modules.slice(0, 10).map((m) => [moduleLabel(m.name), m.bytes])),
      listTable('live at the peak, by allocation site', r.sites.slice(0, 10).map((s) => [`${s.site} (${formatCount(s.count)}x)`, s.bytes]))),
    r.ooms.map((o) => h('div', null, h('h3', null, `Out of memory at trace entry ${o.event}: ${o.verdict}`),
      h('p', null, o.explanation), o.site ? h('p', { class: 'mono' }, 'requested from: ', longText(o.site)) : null,
      h('ul', null, o.remedies.map((t) => h('li', null, t))))));
}

// The table's columns: title, class, a rank's value (rep: the whole report)
// and how the value reads, when not as it is.
/** @type {[string, string, (r: any, rep?: any) => (number | string), ((v: any) => string)?][]} */
const COLUMNS = [
  ['rank', 'rank', (r) => r.rank],
  ['peak allocated', 'num', (r) => r.peak_allocated.bytes, bytes],
  ['when', 'num', (r, rep) => (r.peak_allocated.event < 0 ? -Infinity : seconds(rep, r, r.peak_allocated.time_us)),
    (v) => (v === -Infinity ? 'start' : `${fixed(v, 3)} s`)],
  ['peak active', 'num', (r) => r.peak_active.bytes, bytes],
  ['peak reserved', 'num', (r) => r.peak_reserved.bytes, bytes],
  ['allocated at dump', 'num', (r) => r.at_dump.allocated, bytes],
  ['reserved at dump', 'num', (r) => r.at_dump.reserved, bytes],
  ['fragmentation', 'num', (r) => r.at_dump.fragmentation, share],
  ['OOM', '', (r) => (r.ooms.length ? r.ooms[0].verdict || 'OOM' : '')],
];

function rankTable(rep, select) {
  let sortBy = 0;
  let up = true;
  const tbody = h('tbody');
  const heads = COLUMNS.map(([name, cls], k) => h('th', {
    class: cls === 'num' ? 'num' : '',
    onclick: () => {
      up = sortBy === k ? !up : k === 0;
      sortBy = k;
      sortRows();
    },
  }, name));
  const rows = rep.ranks.map((r, i) => h('tr', { class: 'rank-row', 'data-rank': r.rank, onclick: () => select(i) },
    COLUMNS.map(([, cls, get, fmt]) => {
      const v = get(r, rep);
      return h('td', { class: cls === 'num' ? 'num' : '' }, fmt ? fmt(v) : v);
    })));
  function sortRows() {
    const get = COLUMNS[sortBy][2];
    const order = rep.ranks.map((_, i) => i);
    order.sort((a, b) => {
      const x = get(rep.ranks[a], rep);
      const y = get(rep.ranks[b], rep);
      return (x < y ? -1 : x > y ? 1 : a - b) * (up ? 1 : -1);
    });
    heads.forEach((th, k) => {
      th.classList.toggle('sorted', k === sortBy);
      th.classList.toggle('up', k === sortBy && up);
    });
    fill(tbody, order.map((i) => rows[i]));
  }
  sortRows();
  const el = h('section', { class: 'table' }, h('h2', null, 'Every rank'),
    h('p', { class: 'sub' }, 'Click a heading to sort, a row for the rank\'s details.'),
    h('table', null, h('thead', null, h('tr', null, heads)), tbody));
  el.setSelected = (i) => rows.forEach((row, k) => row.classList.toggle('selected', k === i));
  return el;
}

function hoverText(rep, i) {
  const r = rep.ranks[i];
  const kinds = CATEGORIES.map((c) => [c.name, r.kinds_peak[c.key]]).filter(([, v]) => v > 0)
    .sort((a, b) => b[1] - a[1]).slice(0, 4).map(([n, v]) => `${n} ${bytes(v)}`).join(', ');
  return `rank ${r.rank}: peak ${bytes(r.peak_allocated.bytes)} allocated ${when(rep, r, r.peak_allocated)}` +
    `${kinds ? ` (${kinds})` : ''}, ${bytes(r.peak_reserved.bytes)} reserved\n` +
    `at the dump ${bytes(r.at_dump.allocated)} allocated, ${bytes(r.at_dump.reserved)} reserved, ` +
    `fragmentation ${share(r.at_dump.fragmentation)}${r.ooms.length ? `; OOM: ${r.ooms[0].verdict}` : ''}`;
}

// The rank shown first: the first that ran out of memory, else the first that differs, else the typical one.
export function firstRank(rep) {
  const want = rep.ooms.length ? rep.ooms[0].rank : rep.differ.length ? rep.differ[0].rank : rep.typical_rank;
  return Math.max(0, rep.ranks.findIndex((r) => r.rank === want));
}

export function boot() {
  const data = JSON.parse(document.getElementById('memsight-ranks').textContent);
  const rep = data.report;
  const root = document.getElementById('app');
  const marks = rep.ranks.map((r) => ({
    rank: r.rank, oom: r.ooms.length > 0, differs: rep.differ.some((o) => o.rank === r.rank),
  }));
  const details = h('div');
  let table = null;
  let chart = null;
  const select = (i) => {
    details.replaceChildren(rankDetails(rep, i, data.pages[i]));
    table.setSelected(i);
    chart.setSelected(i);
    document.body.dataset.selected = String(rep.ranks[i].rank);
  };
  const readout = h('div', { class: 'readout' });
  const canvas = h('canvas', { class: 'ranks-chart', 'aria-label': 'memory of every rank' });
  const legend = h('div', { class: 'legend' },
    CATEGORIES.map((c) => h('span', null, h('i', { style: { background: c.color } }), c.name)),
    h('span', null, h('i', { style: { background: '#1d2633', height: '2px' } }), 'reserved'),
    h('span', null, h('i', { style: { background: '#c9302c' } }), 'ran out of memory'),
    h('span', null, h('i', { style: { background: '#e09b16' } }), 'differs from the median'));
  const idle = 'Hover a bar for its numbers; click it for the rank\'s details.';
  let mode = 'peak';
  const modes = segmented(MODES, mode, (v) => {
    mode = v;
    chart.setModel(chartModel(rep, mode));
  });
  table = rankTable(rep, select);
  root.replaceChildren(
    h('header', null, h('b', null, 'memsight ranks'), h('span', null, data.title)),
    h('main', null,
      h('section', { class: 'headline' }, h('h2', null, headline(rep)),
        h('p', { class: 'sub' }, rep.job_clock ? 'Times are seconds after the first trace entry of any rank (the ranks\' clocks).'
          : 'Times are seconds after each rank\'s first trace entry.')),
      mismatchSection(rep),
      oomSection(rep, select),
      h('section', { class: 'chart' }, h('h2', null, 'Rank by rank'),
        h('div', { class: 'toolbar' }, modes), legend, canvas, readout),
      differSection(rep, select),
      details,
      table));
  chart = new RankChart(canvas, {
    marks,
    onHover: (i) => { readout.textContent = i < 0 ? idle : hoverText(rep, i); },
    onSelect: select,
  });
  readout.textContent = idle;
  chart.setModel(chartModel(rep, mode));
  if (rep.ranks.length) select(firstRank(rep));
  document.body.dataset.ready = '1';
}

if (typeof document !== 'undefined' && document.getElementById('memsight-ranks')) boot();

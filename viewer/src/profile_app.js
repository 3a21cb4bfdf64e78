// The profiler pages: `memsight profile -o x.html` (memory per device over
// the trace, steps marked, the per-step tables) and `memsight profile
// --timeline` / TorchProfiler's memory_filename (memory by category over
// time, the peak explained by category).
//
// Built to stay quick at any size: at most MAX_CHARTS device charts (the
// highest peaks; every other device one click away in a paged table), the
// steps a page of them at a time with each step's tables built when it is
// opened, and names cut for display (the whole text one click away).

import { countOf, formatCount, formatDuration, formatPercent, formatSize } from './format.js';
import { TimeChart } from './chart.js';
import { fill, h, longText, pagedList } from './ui.js';

// torch's category colours for the memory timeline, in its order.
export const CATEGORY_COLORS = ['#2e7d32', '#d4a017', '#222222', '#9370db', '#d62728', '#1f3fbf', '#4169e1', '#9e9e9e'];

// Device charts drawn when the page opens; the rest are listed.
export const MAX_CHARTS = 8;
// Devices named in a step's one-line summary.
const SUMMARY_DEVICES = 4;

const size = (v) => formatSize(v, false);
// Times on the charts are in ms; labels in the unit that fits ("850µs", "12.5ms", "3.2s").
const msLabel = (v) => formatDuration(v * 1000);
const HOVER_HINT = 'Hover the chart for the memory at that moment. Wheel: zoom; drag: pan; double-click: reset.';

// What the peak is made of, largest category first: [{name, bytes, share}].
export function peakBreakdown(data) {
  const i = data.peak;
  if (i < 0) return [];
  const total = data.series.reduce((s, c) => s + c[i], 0) || 1;
  return data.categories.map((name, k) => ({ name, bytes: data.series[k][i], share: data.series[k][i] / total }))
    .filter((r) => r.bytes > 0).sort((a, b) => b.bytes - a.bytes);
}

// What the reader dropped or reordered, said once at the top of the page.
function inputNotes(notes) {
  if (!notes || !notes.length) return null;
  return h('section', { class: 'input-notes' }, h('h2', null, 'Input'),
    h('ul', null, notes.map((n) => h('li', null, n.note))));
}

function timelinePage(data) {
  const ts = data.ts.map((us) => us / 1000);
  const readout = h('div', { class: 'readout' });
  const canvas = h('canvas', { class: 'chart', 'aria-label': 'memory by category over time' });
  const parts = peakBreakdown(data);
  const total = parts.reduce((s, r) => s + r.bytes, 0);
  const show = (i) => {
    if (i < 0) {
      readout.textContent = HOVER_HINT;
      return;
    }
    const rows = data.categories.map((c, k) => `${c.padEnd(16)} ${size(data.series[k][i])}`);
    const sum = data.series.reduce((s, c) => s + c[i], 0);
    readout.textContent = `at ${msLabel(ts[i])}: ${size(sum)} in all\n${rows.join('\n')}`;
  };
  new TimeChart(canvas, {
    ts,
    series: data.categories.map((name, k) => ({ name, color: CATEGORY_COLORS[k], values: data.series[k] })),
    stacked: true, peak: data.peak, formatY: size, formatX: msLabel, onHover: show,
  });
  show(-1);
  const legend = h('div', { class: 'legend' },
    data.categories.map((c, k) => h('span', null, h('i', { style: { background: CATEGORY_COLORS[k] } }), c)));
  const peak = parts.length ? h('section', null,
    h('h2', null, `Peak: ${size(total)} at ${msLabel(ts[data.peak])}`),
    h('p', { class: 'sub peak-note' }, parts.slice(0, 3).map((r) => `${r.name} ${formatPercent(r.share)}`).join(', ') +
      (parts[0].name === 'activation' ? ' — activations dominate: activation checkpointing or a smaller batch lowers the peak'
        : parts[0].name === 'optimizer state' ? ' — optimizer state dominates: a sharded or 8-bit optimizer lowers it'
          : parts[0].name === 'parameter' ? ' — parameters dominate: sharding (FSDP) or lower precision lowers them' : '')),
    h('table', null, h('thead', null, h('tr', null, h('th', null, 'category'), h('th', { class: 'num' }, 'bytes'),
      h('th', { class: 'num' }, 'share'))),
    h('tbody', null, parts.map((r) => h('tr', null, h('td', null, r.name), h('td', { class: 'num' }, size(r.bytes)),
      h('td', { class: 'num' }, formatPercent(r.share))))))) : null;
  return [
    inputNotes(data.input_notes),
    h('section', null, h('h2', null, `Memory by category${data.device ? ` on ${data.device}` : ''}`),
      h('p', { class: 'sub' }, 'torch.profiler\'s categorised memory timeline; the dashed line marks the peak.'),
      legend, canvas, readout),
    peak,
  ];
}

function opTable(rows) {
  if (!rows.length) return h('p', { class: 'hint' }, 'none');
  return h('table', null,
    h('thead', null, h('tr', null, h('th', { class: 'num' }, 'bytes'), h('th', { class: 'num' }, 'count'),
      h('th', null, 'op'), h('th', null, 'called from'))),
    h('tbody', null, rows.map((r) => h('tr', null, h('td', { class: 'num' }, size(r.bytes)),
      h('td', { class: 'num' }, r.count || ''), h('td', { class: 'mono' }, longText(r.op)),
      h('td', { class: 'mono' }, r.stack ? longText(r.stack)
        : r.count ? '(no Python stack: e.g. the autograd thread)' : '')))));
}

function timeTable(rows, what) {
  if (!rows.length) return h('p', { class: 'hint' }, 'none');
  return h('table', null,
    h('thead', null, h('tr', null, h('th', { class: 'num' }, what), h('th', { class: 'num' }, 'calls'), h('th', null, 'name'))),
    h('tbody', null, rows.map((r) => h('tr', null, h('td', { class: 'num' }, `${(r.total_us / 1000).toFixed(3)} ms`),
      h('td', { class: 'num' }, formatCount(r.count)), h('td', { class: 'mono' }, longText(r.name))))));
}

// A step of the page's report as profile_json writes it. The page holds
// steps as arrays with names interned (profile_page.cpp, PageReport):
//   [number|null, occurrence, occurrences, ts_us, dur_us, devices, top_ops, top_kernels]
//   device [index, peak_allocated, peak_reserved, allocs, alloc_bytes, frees, free_bytes, live, most]
//   op row [op, stack, bytes, count]; time row [name, total_us, count]
export function expandStep(a, strings) {
  const ops = (rows) => rows.map(([op, stack, bytes, count]) => ({ op: strings[op], stack: strings[stack], bytes, count }));
  const times = (rows) => rows.map(([name, total, count]) => ({ name: strings[name], total_us: total, count }));
  const devices = {};
  for (const d of a[5]) {
    devices[`cuda:${d[0]}`] = {
      peak_allocated: d[1], peak_reserved: d[2], allocs: d[3], alloc_bytes: d[4], frees: d[5], free_bytes: d[6],
      live_at_peak: ops(d[7]), allocated_most: ops(d[8]),
    };
  }
  return {
    step: a[0], occurrence: a[1], occurrences: a[2], ts_us: a[3], dur_us: a[4], devices,
    top_ops: times(a[6]), top_kernels: times(a[7]),
  };
}

// The highest allocated peak of a step as the page holds it, over its devices.
export function compactPeak(a) {
  let best = 0;
  for (const d of a[5]) if (d[1] > best) best = d[1];
  return best;
}

// "step 3", "step 3 (occurrence 2 of 2)" when the trace holds ProfilerStep#3 twice.
export function stepTitle(s) {
  if (s.step === null) return 'whole trace';
  const again = s.occurrences > 1 ? ` (occurrence ${s.occurrence} of ${s.occurrences})` : '';
  return `step ${s.step}${again}`;
}

// "cuda:0 1.2GiB / 1.4GiB · cuda:1 ... · +99,996 more devices" over the first few devices.
export function stepPeakCells(s) {
  const cells = [];
  let n = 0;
  for (const d in s.devices) {
    if (n++ < SUMMARY_DEVICES) cells.push(`${d} ${size(s.devices[d].peak_allocated)} / ${size(s.devices[d].peak_reserved)}`);
  }
  if (n > SUMMARY_DEVICES) cells.push(`+${formatCount(n - SUMMARY_DEVICES)} more devices`);
  return cells.join(' · ');
}

function deviceBlock(d, v) {
  return [
    h('h3', null, `${d}: peak ${size(v.peak_allocated)} allocated, ${size(v.peak_reserved)} reserved; ` +
      `${countOf(v.allocs, 'allocation')} (${size(v.alloc_bytes)}), ${countOf(v.frees, 'free')} (${size(v.free_bytes)})`),
    h('p', { class: 'sub' }, 'Live at the peak, by the op that allocated it:'), opTable(v.live_at_peak),
    h('p', { class: 'sub' }, 'Allocated most during the step:'), opTable(v.allocated_most),
  ];
}

// A step's tables, built the first time it is opened.
function stepDetails(s) {
  const details = h('details', { class: 'step' }, h('summary', null,
    h('b', null, stepTitle(s)), ` — ${formatDuration(s.dur_us)} · ${stepPeakCells(s) || 'no memory events'}`));
  let built = false;
  details.addEventListener('toggle', () => {
    if (built || !details.open) return;
    built = true;
    const devs = Object.keys(s.devices);
    const body = [];
    if (devs.length) {
      body.push(pagedList(devs.length, (from, to) => {
        const out = [];
        for (let i = from; i < to; i++) for (const n of deviceBlock(devs[i], s.devices[devs[i]])) out.push(n);
        return out;
      }, { pageSize: 20, noun: 'devices' }));
    }
    body.push(h('h3', null, 'Ops by CPU time (inclusive)'), timeTable(s.top_ops, 'CPU time'),
      h('h3', null, 'Kernels by GPU time'), timeTable(s.top_kernels, 'GPU time'));
    for (const n of body) details.append(n);
  });
  return details;
}

function stepsSection(rep) {
  const steps = rep.steps;  // arrays (expandStep)
  let order = null;  // step indices in the chosen order (null: time order)
  const at = (k) => (order ? order[k] : k);
  const list = pagedList(steps.length, (from, to) => {
    const out = [];
    for (let k = from; k < to; k++) out.push(stepDetails(expandStep(steps[at(k)], rep.strings)));
    return out;
  }, { pageSize: 100, noun: 'steps' });
  const sortSelect = h('select', {
    'aria-label': 'order of the steps',
    onchange: () => {
      if (sortSelect.value === 'peak' && !order) {
        const peaks = steps.map(compactPeak);
        order = steps.map((_, i) => i).sort((a, b) => peaks[b] - peaks[a] || a - b);
      } else if (sortSelect.value === 'time') {
        order = null;
      }
      list.show(0);
      list.refresh();
    },
  }, h('option', { value: 'time' }, 'in time order'), h('option', { value: 'peak' }, 'highest peak first'));
  const jumpInfo = h('span', { class: 'hint' });
  const jump = h('input', {
    type: 'number', class: 'jump', min: 0, placeholder: 'go to step', 'aria-label': 'go to step',
    onchange: () => {
      const want = Number(jump.value);
      let k = -1;
      for (let i = 0; i < steps.length && k < 0; i++) if (steps[at(i)][0] === want) k = i;
      jumpInfo.textContent = k < 0 ? `no step ${jump.value}` : '';
      if (k < 0) return;
      list.show(k);
      const el = list.querySelectorAll('details.step')[k % 100];
      if (el) {
        el.open = true;
        el.scrollIntoView({ block: 'nearest' });
      }
    },
  });
  const controls = steps.length > 1
    ? h('div', { class: 'step-controls' }, 'Order: ', sortSelect, ' ', jump, ' ', jumpInfo) : null;
  return h('section', { class: 'steps' }, h('h2', null, `Steps (${formatCount(steps.length)})`),
    h('p', { class: 'sub' }, 'Peak allocated / reserved per device; open a step for its tables.'), controls, list);
}

// One device's memory over the trace, as a chart with its hover readout.
function deviceChart(data, c, bands) {
  const name = data.deviceNames[c.device] ? ` (${data.deviceNames[c.device]})` : '';
  const ts = c.ts.map((us) => us / 1000);
  const readout = h('div', { class: 'readout' });
  const canvas = h('canvas', { class: 'chart', 'aria-label': `memory of cuda:${c.device}` });
  const peak = curvePeak(c);
  const show = (i) => {
    readout.textContent = i < 0 ? HOVER_HINT
      : `at ${msLabel(ts[i])}: ${size(c.allocated[i])} allocated, ${size(c.reserved[i])} reserved`;
  };
  new TimeChart(canvas, {
    ts, stacked: false, bands, peak, formatY: size, formatX: msLabel, onHover: show,
    series: [{ name: 'reserved', color: '#7a8ca3', values: c.reserved }, { name: 'allocated', color: '#d62728', values: c.allocated }],
  });
  show(-1);
  return h('section', { class: 'device-chart' }, h('h2', null, longText(`cuda:${c.device}${name}`)),
    h('p', { class: 'sub' }, `Allocated and reserved memory after each allocation and free the profiler saw; peak ${size(c.allocated[peak] || 0)} (dashed).`),
    h('div', { class: 'legend' }, h('span', null, h('i', { style: { background: '#d62728' } }), 'allocated'),
      h('span', null, h('i', { style: { background: '#7a8ca3' } }), 'reserved')),
    canvas, readout);
}

// The index of a curve's highest allocated point.
export function curvePeak(c) {
  let peak = 0;
  for (let i = 1; i < c.allocated.length; i++) if (c.allocated[i] > c.allocated[peak]) peak = i;
  return peak;
}

// The devices beyond the charted ones: a paged table, highest peak first;
// a click on a row draws that device's chart above the table.
function moreDevices(data, curves, bands) {
  const slot = h('div', { class: 'more-chart' });
  const row = (c) => h('tr', {
    class: 'device-row', tabindex: 0, title: 'show this device\'s chart',
    onclick: () => fill(slot, [deviceChart(data, c, bands)]),
  }, h('td', { class: 'mono' }, `cuda:${c.device}`), h('td', { class: 'num' }, size(c.allocated[curvePeak(c)] || 0)),
  h('td', { class: 'num' }, size(maxOf(c.reserved))));
  const list = pagedList(curves.length, (from, to) => {
    const rows = [];
    for (let i = from; i < to; i++) rows.push(row(curves[i]));
    return [h('table', null, h('thead', null, h('tr', null, h('th', null, 'device'), h('th', { class: 'num' }, 'peak allocated'),
      h('th', { class: 'num' }, 'peak reserved'))), fill(h('tbody'), rows))];
  }, { pageSize: 100, noun: 'devices' });
  return h('section', { class: 'more-devices' }, h('h2', null, `${formatCount(curves.length)} more devices`),
    h('p', { class: 'sub' }, `The charts above are the ${MAX_CHARTS} devices with the highest peaks; click a device for its chart.`),
    slot, list);
}

function maxOf(values) {
  let m = 0;
  for (const v of values) if (v > m) m = v;
  return m;
}

function profilePage(data) {
  const rep = data.report;
  const out = [inputNotes(rep.input_notes)];
  const bands = [];
  for (const [step, , , ts, dur] of rep.steps) {
    if (step === null) continue;
    bands.push({ x0: (ts - data.t0) / 1000, x1: (ts + dur - data.t0) / 1000, label: `step ${step}` });
  }
  let charted = data.curves;
  let rest = [];
  if (data.curves.length > MAX_CHARTS) {
    const peaks = data.curves.map((c) => c.allocated[curvePeak(c)] || 0);
    const byPeak = data.curves.map((_, i) => i).sort((a, b) => peaks[b] - peaks[a] || a - b);
    charted = byPeak.slice(0, MAX_CHARTS).sort((a, b) => a - b).map((i) => data.curves[i]);
    rest = byPeak.slice(MAX_CHARTS).map((i) => data.curves[i]);
  }
  for (const c of charted) out.push(deviceChart(data, c, bands));
  if (rest.length) out.push(moreDevices(data, rest, bands));
  if (!rep.has_memory) out.push(h('section', null, h('p', null, 'This trace has no [memory] events: profile with profile_memory=True to see memory per step.')));
  out.push(stepsSection(rep));
  return out;
}

export function boot() {
  const el = document.getElementById('memsight-profile');
  const data = JSON.parse(el.textContent);
  el.remove();  // the text is parsed: let it go
  const root = document.getElementById('app');
  const body = data.kind === 'timeline' ? timelinePage(data) : profilePage(data);
  root.replaceChildren(h('header', null, h('b', null, 'memsight'), h('span', null, data.title)),
    fill(h('main'), body));
  // Ready once the first picture has painted.
  requestAnimationFrame(() => requestAnimationFrame(() => {
    document.body.dataset.ready = '1';
  }));
}

if (typeof document !== 'undefined' && document.getElementById('memsight-profile')) boot();

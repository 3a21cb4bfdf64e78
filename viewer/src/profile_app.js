// The profiler pages: `memsight profile -o x.html` (memory per device over
// the trace, steps marked, the per-step tables) and `memsight profile
// --timeline` / TorchProfiler's memory_filename (memory by category over
// time, the peak explained by category).

import { formatSize } from './format.js';
import { TimeChart } from './chart.js';
import { h } from './ui.js';

// torch's category colours for the memory timeline, in its order.
export const CATEGORY_COLORS = ['#2e7d32', '#d4a017', '#222222', '#9370db', '#d62728', '#1f3fbf', '#4169e1', '#9e9e9e'];

const size = (v) => formatSize(v, false);
const msLabel = (v) => `${v.toFixed(v >= 100 ? 0 : 1)} ms`;

// What the peak is made of, largest category first: [{name, bytes, share}].
export function peakBreakdown(data) {
  const i = data.peak;
  if (i < 0) return [];
  const total = data.series.reduce((s, c) => s + c[i], 0) || 1;
  return data.categories.map((name, k) => ({ name, bytes: data.series[k][i], share: data.series[k][i] / total }))
    .filter((r) => r.bytes > 0).sort((a, b) => b.bytes - a.bytes);
}

function timelinePage(data) {
  const ts = data.ts.map((us) => us / 1000);
  const readout = h('div', { class: 'readout' });
  const canvas = h('canvas', { class: 'chart', 'aria-label': 'memory by category over time' });
  const parts = peakBreakdown(data);
  const total = parts.reduce((s, r) => s + r.bytes, 0);
  const show = (i) => {
    if (i < 0) {
      readout.textContent = 'Hover the chart for the memory at that moment. Wheel: zoom; drag: pan; double-click: reset.';
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
    h('p', { class: 'sub peak-note' }, parts.slice(0, 3).map((r) => `${r.name} ${(r.share * 100).toFixed(0)}%`).join(', ') +
      (parts[0].name === 'activation' ? ' — activations dominate: activation checkpointing or a smaller batch lowers the peak'
        : parts[0].name === 'optimizer state' ? ' — optimizer state dominates: a sharded or 8-bit optimizer lowers it'
          : parts[0].name === 'parameter' ? ' — parameters dominate: sharding (FSDP) or lower precision lowers them' : '')),
    h('table', null, h('thead', null, h('tr', null, h('th', null, 'category'), h('th', { class: 'num' }, 'bytes'),
      h('th', { class: 'num' }, 'share'))),
    h('tbody', null, parts.map((r) => h('tr', null, h('td', null, r.name), h('td', { class: 'num' }, size(r.bytes)),
      h('td', { class: 'num' }, `${(r.share * 100).toFixed(1)}%`)))))) : null;
  return [
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
      h('td', { class: 'num' }, r.count || ''), h('td', { class: 'mono' }, r.op),
      h('td', { class: 'mono' }, r.stack || (r.count ? '(no Python stack: e.g. the autograd thread)' : ''))))));
}

function timeTable(rows, what) {
  if (!rows.length) return h('p', { class: 'hint' }, 'none');
  return h('table', null,
    h('thead', null, h('tr', null, h('th', { class: 'num' }, what), h('th', { class: 'num' }, 'calls'), h('th', null, 'name'))),
    h('tbody', null, rows.map((r) => h('tr', null, h('td', { class: 'num' }, `${(r.total_us / 1000).toFixed(3)} ms`),
      h('td', { class: 'num' }, r.count), h('td', { class: 'mono' }, r.name)))));
}

function profilePage(data) {
  const rep = data.report;
  const out = [];
  const bands = rep.steps.filter((s) => s.step !== null).map((s) => ({
    x0: (s.ts_us - data.t0) / 1000, x1: (s.ts_us + s.dur_us - data.t0) / 1000, label: `step ${s.step}`,
  }));
  for (const c of data.curves) {
    const name = data.deviceNames[c.device] ? ` (${data.deviceNames[c.device]})` : '';
    const ts = c.ts.map((us) => us / 1000);
    const readout = h('div', { class: 'readout' });
    const canvas = h('canvas', { class: 'chart', 'aria-label': `memory of cuda:${c.device}` });
    let peak = 0;
    c.allocated.forEach((v, i) => { if (v > c.allocated[peak]) peak = i; });
    const show = (i) => {
      readout.textContent = i < 0
        ? 'Hover the chart for the memory at that moment. Wheel: zoom; drag: pan; double-click: reset.'
        : `at ${msLabel(ts[i])}: ${size(c.allocated[i])} allocated, ${size(c.reserved[i])} reserved`;
    };
    new TimeChart(canvas, {
      ts, stacked: false, bands, peak, formatY: size, formatX: msLabel, onHover: show,
      series: [{ name: 'reserved', color: '#7a8ca3', values: c.reserved }, { name: 'allocated', color: '#d62728', values: c.allocated }],
    });
    show(-1);
    out.push(h('section', null, h('h2', null, `cuda:${c.device}${name}`),
      h('p', { class: 'sub' }, `Allocated and reserved memory after each allocation and free the profiler saw; peak ${size(c.allocated[peak] || 0)} (dashed).`),
      h('div', { class: 'legend' }, h('span', null, h('i', { style: { background: '#d62728' } }), 'allocated'),
        h('span', null, h('i', { style: { background: '#7a8ca3' } }), 'reserved')),
      canvas, readout));
  }
  if (!rep.has_memory) out.push(h('section', null, h('p', null, 'This trace has no [memory] events: profile with profile_memory=True to see memory per step.')));
  const rows = [];
  for (const s of rep.steps) {
    const devs = Object.entries(s.devices);
    const title = s.step === null ? 'whole trace' : `step ${s.step}`;
    const body = [];
    for (const [d, v] of devs) {
      body.push(h('h3', null, `${d}: peak ${size(v.peak_allocated)} allocated, ${size(v.peak_reserved)} reserved; ` +
        `${v.allocs} allocations (${size(v.alloc_bytes)}), ${v.frees} frees (${size(v.free_bytes)})`),
      h('p', { class: 'sub' }, 'Live at the peak, by the op that allocated it:'), opTable(v.live_at_peak),
      h('p', { class: 'sub' }, 'Allocated most during the step:'), opTable(v.allocated_most));
    }
    body.push(h('h3', null, 'Ops by CPU time (inclusive)'), timeTable(s.top_ops, 'CPU time'),
      h('h3', null, 'Kernels by GPU time'), timeTable(s.top_kernels, 'GPU time'));
    const peakCells = devs.map(([d, v]) => `${d} ${size(v.peak_allocated)} / ${size(v.peak_reserved)}`).join(' · ');
    rows.push(h('details', { class: 'step' }, h('summary', null,
      h('b', null, title), ` — ${(s.dur_us / 1000).toFixed(2)} ms · ${peakCells || 'no memory events'}`), ...body));
  }
  out.push(h('section', null, h('h2', null, `Steps (${rep.steps.length})`),
    h('p', { class: 'sub' }, 'Peak allocated / reserved per device; open a step for its tables.'), ...rows));
  return out;
}

export function boot() {
  const el = document.getElementById('memsight-profile');
  const data = JSON.parse(el.textContent);
  const root = document.getElementById('app');
  const body = data.kind === 'timeline' ? timelinePage(data) : profilePage(data);
  root.replaceChildren(h('header', null, h('b', null, 'memsight'), h('span', null, data.title)),
    h('main', null, ...body.filter(Boolean)));
  document.body.dataset.ready = '1';
}

if (typeof document !== 'undefined' && document.getElementById('memsight-profile')) boot();

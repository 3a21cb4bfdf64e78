// Leaks: memory that grows from iteration to iteration, as `memsight leaks`
// finds it (the engine embeds its JSON as meta.leaks): live memory at the
// start of each iteration, all of it and per site, and the sites that leave
// memory behind in every part of the run, where it was allocated and what to look for.

import { TABLEAU10, entryOfDevice, formatCount, formatSize } from './format.js';
import { fill, h, longText, stackLines } from './ui.js';

const LEAK_COLORS = ['#c9302c', '#e8743b', '#b5179e', '#8f2d56', '#d1495b', '#ff7f50', '#9e2a2b', '#e63946'];

// This device's part of `memsight leaks --json` (alike devices share one), or null.
export function leaksOfDevice(leaks, device) {
  return entryOfDevice(leaks && leaks.devices, device);
}

// Polylines of series over iterations in a w x h box: x by iteration index,
// y from 0 to the largest value. Returns { max, lines: [[x, y], ...] per series }.
export function chartGeometry(series, w, h, pad = 4) {
  let max = 0;
  let n = 0;
  for (const s of series) {
    n = Math.max(n, s.length);
    for (const v of s) max = Math.max(max, v);
  }
  const x = (i) => pad + (n > 1 ? (i * (w - 2 * pad)) / (n - 1) : (w - 2 * pad) / 2);
  const y = (v) => h - pad - (max > 0 ? (v * (h - 2 * pad)) / max : 0);
  return { max, lines: series.map((s) => s.map((v, i) => [x(i), y(v)])) };
}

// SVG's namespace, as the HTML parser gives it (the page holds no URL).
let svgNamespace = null;

function svg(tag, attrs, ...children) {
  if (!svgNamespace) {
    const probe = document.createElement('div');
    probe.innerHTML = '<svg></svg>';
    svgNamespace = probe.firstElementChild.namespaceURI;
  }
  const el = document.createElementNS(svgNamespace, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const c of children) if (c) el.append(c);
  return el;
}

export class LeaksView {
  constructor(app, dev) {
    this.app = app;
    this.dev = dev;
    this.el = h('div', { class: 'view leaks-view' });
    this.build();
  }

  activate() {}

  build() {
    const r = leaksOfDevice(this.app.page.meta.leaks, this.dev.index);
    if (!r) {
      this.el.replaceChildren(h('section', { class: 'panel' }, h('h3', null, 'Leaks'),
        h('p', { class: 'sub' }, 'No leak report for this device (nothing was recorded on it).')));
      return;
    }
    const it = r.iterations;
    const head = h('section', { class: 'panel leak-head' },
      h('h3', null, r.verdict === 'leak'
        ? `Leak: ${formatSize(r.bytes_per_iteration, false)} more stays allocated after each iteration`
        : 'Leaks'),
      h('p', { class: 'sub' }, `Iterations: ${it.description}.`),
      r.verdict === 'leak' ? null : h('p', { class: `verdict leak-verdict ${r.verdict.replace(/ /g, '-')}` }, r.message),
      r.verdict === 'none' ? h('p', { class: 'sub' },
        'Memory made once and kept (weights, optimizer state, a cache that fills up and then stays) and memory ' +
        'one iteration keeps for the next are not leaks.') : null);
    const sections = [head];
    if (r.verdict === 'leak') sections.push(this.sitesSection(r));
    if ((r.growth || []).length && r.growth[0].live.length >= 2) sections.push(this.growthSection(r));
    fill(this.el, sections);
  }

  sitesSection(r) {
    const page = this.app.page;
    const dev = this.dev;
    const rows = r.sites.map((s) => h('tr', { class: 'leak-site' },
      h('td', { class: 'num' }, `${formatSize(s.bytes_per_iteration, false)}/iteration`),
      h('td', { class: 'num' }, `${formatCount(s.iterations_grown)} of ${formatCount(r.measured)}`),
      h('td', { class: 'num' }, `${formatCount(s.surviving_count)} (${formatSize(s.surviving_bytes, false)})`),
      h('td', null, s.category.replace(/_/g, ' ') + (s.made_in ? `, made ${s.made_in.startsWith('outside') ? '' : 'in the '}${s.made_in}` : '') +
        (s.module ? ` (${s.module})` : '')),
      h('td', { class: 'mono site' },
        h('details', null, h('summary', null, longText(s.site)), stackLines(page.formatStack(
          s.frames.map((f) => ({ ...f, baseKind: f.kind })))),
        h('div', { class: 'newest' }, 'newest still live: ', s.newest.flatMap((v, k) => [k ? ', ' : '',
          h('button', {
            type: 'button', class: 'link', title: 'show the allocator state after this allocation',
            onclick: () => this.app.showState(dev.index, dev.eventOfEntry(v.event)),
          }, `trace entry ${formatCount(v.event)}`)]))))));
    // The engine's advice (leaks --json "advice"): the page says what the text says.
    const fix = r.allocated_at ? h('p', { class: 'verdict leak-fix' }, h('b', null, 'Allocated at: '),
      longText(r.allocated_at.stack), '. ' + r.advice) : null;
    return h('section', { class: 'panel leak-panel' },
      h('h3', null, 'What keeps memory from iteration to iteration'),
      h('p', { class: 'sub' }, `Allocations made in the ${formatCount(r.measured)} iterations checked that are still ` +
        'live at the end of the trace, from every part of the run, by allocation site (the innermost frame of your code).'),
      h('table', { class: 'table' },
        h('thead', null, h('tr', null, h('th', { class: 'num' }, 'grows by'), h('th', { class: 'num' }, 'iterations'),
          h('th', { class: 'num' }, 'still live'), h('th', null, 'kind'), h('th', null, 'site'))),
        h('tbody', null, rows)),
      fix);
  }

  growthSection(r) {
    const growth = r.growth;
    const numbers = r.iterations.numbers || [];
    const label = (i) => (r.iterations.source === 'memsight steps' || r.iterations.source === 'profiler steps'
      ? `step ${numbers[i]}` : `iteration ${i}`);
    const sites = growth.slice(1);
    let other = 0;
    const colors = sites.map((s) => (s.leak ? LEAK_COLORS[sites.indexOf(s) % LEAK_COLORS.length] : TABLEAU10[other++ % 10]));
    const chart = (series, cols, w, hgt, title) => {
      const g = chartGeometry(series.map((s) => s.live), w, hgt);
      const root = svg('svg', {
        class: 'growth-chart', viewBox: `0 0 ${w} ${hgt}`, width: '100%', height: hgt, role: 'img', preserveAspectRatio: 'none',
      },
        svg('title', {}, document.createTextNode(title)));
      series.forEach((s, k) => {
        const line = svg('polyline', {
          points: g.lines[k].map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' '),
          fill: 'none', stroke: cols[k], 'stroke-width': s.leak ? 2.5 : 1.5, 'data-site': s.site,
          'vector-effect': 'non-scaling-stroke',
        });
        line.append(svg('title', {}, document.createTextNode(`${s.site || 'all allocated memory'}: ` +
          `${formatSize(s.live[0], false)} at ${label(0)}, ${formatSize(s.live[s.live.length - 1], false)} at ` +
          `${label(s.live.length - 1)}`)));
        root.append(line);
      });
      return h('div', { class: 'growth' }, h('div', { class: 'growth-max' }, `0 to ${formatSize(g.max, false)}`), root);
    };
    const legend = h('div', { class: 'legend growth-legend' }, sites.map((s, k) => h('span', { class: s.leak ? 'leak' : '' },
      h('i', { class: 'swatch', style: { background: colors[k] } }), longText(s.site),
      ` ${formatSize(s.live[0], false)} → ${formatSize(s.live[s.live.length - 1], false)}`)));
    // Each row's own scale: a leak of a few bytes a step shows as plainly as one of megabytes.
    const spark = (s, color) => {
      const g = chartGeometry([s.live], 160, 24, 2);
      return svg('svg', { class: 'spark', viewBox: '0 0 160 24', width: 160, height: 24 },
        svg('polyline', {
          points: g.lines[0].map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(' '),
          fill: 'none', stroke: color, 'stroke-width': 1.5,
        }));
    };
    const table = h('table', { class: 'table growth-table' },
      h('thead', null, h('tr', null, h('th', null, 'site'), h('th', null, 'from 0 to its largest'),
        [0, Math.floor((growth[0].live.length - 1) / 2), growth[0].live.length - 1].map((i) => h('th', { class: 'num' }, label(i))))),
      h('tbody', null, growth.map((s, k) => {
        const n = s.live.length;
        return h('tr', { class: s.leak ? 'leak' : '' }, h('td', { class: 'mono site' }, s.site ? longText(s.site) : 'all allocated memory'),
          h('td', null, spark(s, k ? colors[k - 1] : '#6f7f8f')),
          [0, Math.floor((n - 1) / 2), n - 1].map((i) => h('td', { class: 'num' }, formatSize(s.live[i], false))));
      })));
    return h('section', { class: 'panel' },
      h('h3', null, 'Growth per site over the iterations'),
      h('p', { class: 'sub' }, `Live memory at the start of each of the ${formatCount(growth[0].live.length)} iterations: ` +
        'all of it, then the leaking sites (thick) and the largest ones.'),
      chart([growth[0]], ['#6f7f8f'], 900, 90, 'all allocated memory at the start of each iteration'),
      sites.length ? chart(sites, colors, 900, 220, 'live memory per site at the start of each iteration') : null,
      legend, table);
  }
}

// Boot: decode the embedded data, build the shell (tabs, device selector)
// and show the first view. Views are built on first use and kept.

import { AllocatorStateModel } from './state.js';
import { PageData, decodePayload, parseBlob } from './data.js';
import { RangeControl, TraceRange } from './filters.js';
import { TimelineModel } from './timeline.js';
import { Tooltip, h } from './ui.js';
import { entriesText } from './format.js';
import { FlameView } from './view_flame.js';
import { LeaksView } from './view_leaks.js';
import { OverviewView } from './view_overview.js';
import { PoolsView } from './view_pools.js';
import { SettingsView } from './view_settings.js';
import { StateView } from './view_state.js';
import { TimelineView } from './view_timeline.js';

const VIEWS = [
  ['overview', 'Overview'],
  ['timeline', 'Memory timeline'],
  ['segments-timeline', 'Segment timeline'],
  ['state', 'Allocator state'],
  ['pools', 'Pools'],
  ['flamegraph', 'Flamegraph'],
  ['settings', 'Settings'],
  ['leaks', 'Leaks'],
];

class App {
  constructor(page) {
    this.page = page;
    this.tooltip = new Tooltip();
    this.views = new Map();
    this.device = page.meta.defaultDevice;
    this.current = null;
    this.timing = {};
    this.range = new TraceRange();
  }

  timeline(dev, mode) {
    const key = `tl:${mode}`;
    if (!dev._timelines[key]) {
      const t0 = performance.now();
      dev._timelines[key] = new TimelineModel(dev, mode);
      this.timing[`model ${mode}`] = performance.now() - t0;
    }
    return dev._timelines[key];
  }

  stateModel(dev) {
    if (!dev._stateModel) dev._stateModel = new AllocatorStateModel(dev);
    return dev._stateModel;
  }

  start(root) {
    const meta = this.page.meta;
    this.tabs = VIEWS.map(([name, label]) => h('button', {
      type: 'button', class: 'tab', 'data-view': name, role: 'tab', onclick: () => this.show(name),
    }, label));
    const usable = meta.devices.filter((d) => d.events || d.segments);
    this.deviceSelect = h('select', {
      'aria-label': 'device',
      onchange: () => {
        this.device = +this.deviceSelect.value;
        this.rangeControl.refresh();
        this.show(this.current);
      },
    }, (usable.length ? usable : meta.devices).map((d) => h('option', { value: d.index },
      `cuda:${d.index} · ${entriesText(d.entries)}`)));
    this.deviceSelect.value = String(this.device);
    // How stacks are shown everywhere: the user's frames first (torch,
    // interpreter and allocator frames counted, not listed) or every frame;
    // and what counts as the user's code beyond the engine's rule.
    const applyFrames = () => {
      const pats = this.userCodeInput.value.split(',').map((p) => p.trim()).filter(Boolean);
      this.page.setFrameRule(pats, this.framesSelect.value === 'all');
      const ov = this.views.get(`overview:${this.device}`);
      if (ov && ov.refreshStacks) ov.refreshStacks();
    };
    this.framesSelect = h('select', { 'aria-label': 'stack frames', onchange: applyFrames },
      h('option', { value: 'user' }, 'your code first'), h('option', { value: 'all' }, 'all frames'));
    this.userCodeInput = h('input', {
      type: 'text', class: 'user-code', 'aria-label': 'what counts as your code',
      placeholder: 'your code also: torch/nn/, !vendor/',
      title: 'Comma-separated filename substrings that count as your code (e.g. torch/nn/ when debugging ' +
        'torch); !PATTERN takes matching files out. Sites in the overview were grouped by memsight summary ' +
        '(its --user-code option regroups them).',
      onchange: applyFrames,
    });
    this.host = h('main', { class: 'host' });
    this.rangeControl = new RangeControl(this);
    root.replaceChildren(
      h('header', { class: 'top' },
        h('div', { class: 'brand' }, h('span', { class: 'logo' }, '▤'), 'memsight'),
        h('div', { class: 'doc-title', title: meta.title }, meta.sourceName || meta.title),
        h('nav', { class: 'tabs', role: 'tablist' }, this.tabs),
        // One group, so that a narrow window moves the controls to a
        // second row together instead of pushing them off the page.
        h('div', { class: 'header-controls' },
          h('label', { class: 'frames' }, 'Stacks ', this.framesSelect, ' ', this.userCodeInput),
          this.rangeControl.button,
          h('label', { class: 'device' }, 'Device ', this.deviceSelect))),
      this.rangeControl.panel,
      this.host);
    root.classList.remove('loading');
    const fromHash = this.parseHash();
    if (fromHash && fromHash.device !== undefined && this.page.deviceMeta(fromHash.device)) {
      this.device = fromHash.device;
      this.deviceSelect.value = String(this.device);
    }
    this.show(fromHash ? fromHash.view : meta.view);
    this.onHash = () => {
      const hsh = this.parseHash();
      if (hsh && (hsh.view !== this.current || (hsh.device ?? this.device) !== this.device)) {
        if (hsh.device !== undefined && this.page.deviceMeta(hsh.device)) this.device = hsh.device;
        this.deviceSelect.value = String(this.device);
        this.show(hsh.view);
      }
    };
    window.addEventListener('hashchange', this.onHash);
  }

  // Lets go of the page (the standalone viewer opening another file).
  dispose() {
    window.removeEventListener('hashchange', this.onHash);
    this.tooltip.el.remove();
  }

  parseHash() {
    const m = /^#([a-z-]+)(?:\/(\d+))?$/.exec(location.hash);
    if (!m || !VIEWS.some(([v]) => v === m[1])) return null;
    return { view: m[1], device: m[2] !== undefined ? +m[2] : undefined };
  }

  view(name) {
    const key = `${name}:${this.device}`;
    let v = this.views.get(key);
    if (!v) {
      const dev = this.page.device(this.device);
      if (name === 'timeline') v = new TimelineView(this, dev, 'tl');
      else if (name === 'segments-timeline') v = new TimelineView(this, dev, 'st');
      else if (name === 'state') v = new StateView(this, dev);
      else if (name === 'flamegraph') v = new FlameView(this, dev);
      else if (name === 'pools') v = new PoolsView(this, dev);
      else if (name === 'settings') v = new SettingsView(this, dev);
      else if (name === 'leaks') v = new LeaksView(this, dev);
      else v = new OverviewView(this, dev);
      this.views.set(key, v);
    }
    return v;
  }

  show(name) {
    if (!VIEWS.some(([v]) => v === name)) name = 'overview';
    this.current = name;
    this.tooltip.hide();
    for (const t of this.tabs) t.classList.toggle('on', t.dataset.view === name);
    const v = this.view(name);
    this.host.replaceChildren(v.el);
    v.activate();
    const hash = `#${name}/${this.device}`;
    if (location.hash !== hash) history.replaceState(null, '', hash);
    document.body.dataset.view = name;
    return v;
  }

  showState(device, event) {
    this.device = device;
    this.deviceSelect.value = String(device);
    const v = this.show('state');
    v.select(event, true);
  }
}

// Shows the page for one blob of page data (docs/formats.md) in root:
// `memsight view` embeds the blob, the standalone viewer's engine computes
// it from a dropped file. Returns the app; the page is ready once the first
// view has painted (document.body.dataset.ready).
export function startApp(buffer, root, timing = {}) {
  const t1 = performance.now();
  const page = new PageData(parseBlob(buffer));
  const app = new App(page);
  app.start(root);
  Object.assign(app.timing, timing);
  app.timing.start = performance.now() - t1;
  window.memsight = { app, page, timing: app.timing };
  requestAnimationFrame(() => requestAnimationFrame(() => {
    app.timing.ready = performance.now();
    document.body.dataset.ready = '1';
  }));
  return app;
}

async function boot() {
  // The standalone viewer has no data until a file is opened (and node's
  // tests, which import the modules, no document).
  const el = typeof document !== 'undefined' && document.getElementById('memsight-data');
  if (!el) return;
  const t0 = performance.now();
  const root = document.getElementById('app');
  try {
    const buffer = await decodePayload(el.textContent, el.dataset.encoding, +el.dataset.size);
    el.remove();  // the text is no longer needed; let it go
    startApp(buffer, root, { decode: performance.now() - t0 });
  } catch (err) {
    root.classList.remove('loading');
    root.replaceChildren(h('div', { class: 'fatal' },
      h('h1', null, 'This report could not be opened'),
      h('pre', null, String(err && err.stack ? err.stack : err))));
    console.error(err);
  }
}

boot();

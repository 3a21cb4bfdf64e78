// What kind of memory, and whose: the engine's classifier
// (include/memsight/categories.h) for each element of the memory timeline,
// the colours of the kinds, and a moment broken down by kind and by module.

import { countOf, formatCount, formatPercent, formatSize } from './format.js';
import { h } from './ui.js';

// In the engine's order (Category); the colours follow torch's memory
// timeline where it has the kind.
export const CATEGORIES = [
  { key: 'parameter', name: 'parameter', color: '#2e7d32' },
  { key: 'gradient', name: 'gradient', color: '#1f4fb4' },
  { key: 'optimizer_state', name: 'optimizer state', color: '#d9a21b' },
  { key: 'buffer', name: 'buffer', color: '#8d6e63' },
  { key: 'activation', name: 'activation', color: '#d64541' },
  { key: 'temporary', name: 'temporary', color: '#9c84d8' },
  { key: 'autograd_internal', name: 'autograd-internal', color: '#5aaedc' },
  { key: 'before_recording', name: 'before-recording', color: '#6f7f8f' },
  { key: 'unknown', name: 'unknown', color: '#b9aa98' },
  { key: 'communication', name: 'communication', color: '#2a9d8f' },
];
export const KIND_COLORS = CATEGORIES.map((c) => c.color);

// "(model)" for the model itself.
export function moduleLabel(name) { return name === '' ? '(model)' : name; }

// Nesting shown (as the engine's module trees): a deeper name hangs under
// its MAX_DEPTH-th enclosing module.
const MAX_DEPTH = 64;

// The enclosing modules of a name, outermost first, without the model ('').
function modulePath(name) {
  const parts = name.split('.');
  const out = [];
  for (let i = 1; i < Math.min(parts.length, MAX_DEPTH); i++) out.push(parts.slice(0, i).join('.'));
  out.push(name);
  return out;
}

function moduleParent(name) {
  const path = modulePath(name);
  return path.length > 1 ? path[path.length - 2] : '';
}

export class Categories {
  constructor(dev) {
    this.dev = dev;
    this.meta = dev.meta.cat || null;
    // Every packed device has the column when the page has the kinds.
    this.available = !!this.meta && dev.page.has('dev.tl.cat');
    if (!this.available) return;
    this.cat = dev.col('tl.cat');
    this.mod = dev.col('tl.mod');
    this._index = null;
  }

  category(e) { return this.cat[e] & 0x7f; }

  tagged(e) { return (this.cat[e] & 0x80) !== 0; }

  // The element's module ('' is the model), or null.
  module(e) {
    const m = this.mod[e];
    return m ? this.meta.modules[m - 1] : null;
  }

  // The palette index of every element (its kind), for the timeline.
  colorIndex() {
    if (!this._index) this._index = this.cat.map((c) => c & 0x7f);
    return this._index;
  }

  // "activation (inferred) · made in layers.3" — what hover and details say.
  label(e) {
    const c = CATEGORIES[this.category(e)];
    const m = this.module(e);
    return `${c ? c.name : 'unknown'} (${this.tagged(e) ? 'tagged' : 'inferred'})` +
      (m !== null ? ` · ${moduleLabel(m)}` : '');
  }

  // The elements live in state s of `model`, by kind and by module (each
  // module with its submodules), in the timeline's bytes (requested sizes).
  breakdown(model, s) {
    const n = CATEGORIES.length;
    const bytes = new Float64Array(n);
    const tagged = new Float64Array(n);
    const modules = new Map();
    let outside = 0;
    const add = (name, k, v) => {
      let m = modules.get(name);
      if (!m) modules.set(name, (m = new Float64Array(n)));
      m[k] += v;
    };
    for (const e of model.liveAt(s)) {
      const k = this.category(e);
      const v = model.size[e];
      bytes[k] += v;
      if (this.tagged(e)) tagged[k] += v;
      const m = this.module(e);
      if (m === null) {
        outside += v;
        continue;
      }
      add('', k, v);
      if (m === '') continue;
      for (const p of modulePath(m)) add(p, k, v);
    }
    return { state: s, bytes, tagged, modules, outside };
  }
}

function total(arr) {
  let t = 0;
  for (const v of arr) t += v;
  return t;
}

function swatch(k) {
  return h('i', { class: 'swatch', style: { background: CATEGORIES[k].color } });
}

// The kinds in colour, for the timeline's "By kind" switch.
export function categoryLegend() {
  return h('div', { class: 'cat-legend' },
    CATEGORIES.map((c, k) => h('span', null, swatch(k), c.name)));
}

// The top kinds of a module's bytes: "activation 2.0MiB, parameter 1.0MiB".
function split(arr, limit = 3) {
  const order = [...arr.keys()].filter((k) => arr[k] > 0).sort((a, b) => arr[b] - arr[a]);
  const parts = order.slice(0, limit).map((k) => `${CATEGORIES[k].name} ${formatSize(arr[k], false)}`);
  return parts.join(', ') + (order.length > limit ? ', …' : '');
}

// Kinds as rows: colour, name, bytes, share, tagged or inferred.
function kindRows(bytes, tagged) {
  const all = total(bytes) || 1;
  const order = [...bytes.keys()].filter((k) => bytes[k] > 0).sort((a, b) => bytes[b] - bytes[a]);
  return order.map((k) => h('tr', { class: 'kind-row', 'data-kind': CATEGORIES[k].key },
    h('td', null, swatch(k), CATEGORIES[k].name),
    h('td', { class: 'num' }, formatSize(bytes[k], false)),
    h('td', { class: 'num' }, formatPercent(bytes[k] / all)),
    h('td', null, tagged[k] === bytes[k] ? 'tagged' : tagged[k] ? `${formatSize(tagged[k], false)} tagged` : 'inferred')));
}

// Modules as a tree, largest first, the biggest opened.
function moduleTree(modules, outside) {
  const names = [...modules.keys()];
  if (!names.length) return null;
  const children = new Map();
  for (const name of names) {
    if (name === '') continue;
    const parent = moduleParent(name);
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(name);
  }
  const SHOWN = 200;  // submodules listed under one module; the rest summed
  const size = (name) => total(modules.get(name));
  // Built with a stack, not recursion: a model can nest modules deeply.
  const build = (name) => {
    const kids = (children.get(name) || []).sort((x, y) => size(y) - size(x));
    const line = [h('span', { class: 'num' }, formatSize(size(name), false)), ' ',
      h('span', { class: 'mod-name mono' }, moduleLabel(name)), ' ', h('span', { class: 'sub' }, split(modules.get(name)))];
    if (!kids.length) return { li: h('li', { class: 'mod-leaf' }, line), kids };
    const ul = h('ul', null);
    const d = h('details', { class: 'mod' }, h('summary', null, line), ul);
    return { li: h('li', null, d), d, ul, kids };
  };
  const root = build('');
  let open = 0;
  const stack = [{ n: root, depth: 0 }];
  while (stack.length) {
    const { n, depth } = stack.pop();
    if (!n.d) continue;
    if (depth < 2 && open++ < 6) n.d.open = true;  // the biggest, in the order they are listed
    const shown = n.kids.slice(0, SHOWN).map(build);
    for (const c of shown) n.ul.appendChild(c.li);
    if (n.kids.length > SHOWN) {
      const rest = n.kids.slice(SHOWN).reduce((acc, k) => acc + size(k), 0);
      n.ul.appendChild(h('li', { class: 'mod-leaf' }, h('span', { class: 'num' }, formatSize(rest, false)),
        ' ', h('span', { class: 'sub' }, `(${n.kids.length - SHOWN} more submodules)`)));
    }
    for (let i = shown.length - 1; i >= 0; i--) stack.push({ n: shown[i], depth: depth + 1 });
  }
  return h('ul', { class: 'module-tree' }, root.li,
    outside ? h('li', { class: 'mod-leaf' }, h('span', { class: 'num' }, formatSize(outside, false)), ' ',
      h('span', { class: 'sub' }, '(outside any module, or not known)')) : null);
}

// One moment: its kinds and its module tree.
// b: {bytes, tagged (per kind), modules (name -> bytes per kind), outside}.
export function breakdownView(title, note, b) {
  const rows = kindRows(b.bytes, b.tagged);
  return h('div', { class: 'breakdown' },
    h('h4', null, title),
    note ? h('p', { class: 'sub' }, note) : null,
    rows.length ? h('table', { class: 'table kinds' }, h('tbody', null, rows)) : h('p', null, 'Nothing allocated.'),
    moduleTree(b.modules, b.outside));
}

// The summary's view of a moment (memsight summary --json) in the same form.
function fromSummary(view) {
  const n = CATEGORIES.length;
  const bytes = new Float64Array(n);
  const tagged = new Float64Array(n);
  CATEGORIES.forEach((c, k) => {
    const v = (view.by_category || {})[c.key] || {};
    bytes[k] = v.bytes || 0;
    tagged[k] = v.tagged || 0;
  });
  const modules = new Map();
  for (const m of view.modules || []) {
    modules.set(m.name, Float64Array.from(CATEGORIES, (c) => (m.by_category || {})[c.key] || 0));
  }
  return { bytes, tagged, modules, outside: view.unattributed || 0 };
}

// The overview's panel: what kind of memory, at the peak and at the snapshot.
export function kindsSection(sum) {
  const c = sum.categories;
  if (!c || !c.at_peak || !(c.at_peak.total || c.at_snapshot.total)) return null;
  const src = c.sources || {};
  const how = src.tags_matched
    ? `${src.tags_matched === 1 ? '1 storage was' : `${formatCount(src.tags_matched)} storages were`} tagged by memsight.torch; the rest is inferred`
    : 'Inferred: no memsight.torch tags in this snapshot (record with model= and optimizer= for exact ones)';
  const phases = src.allocs ? `; the phase of ${formatCount(src.phase_allocs)} of ${countOf(src.allocs, 'allocation')} is known` +
    (src.phase_allocs ? ` (from ${src.phases})` : '') : '';
  return h('section', { class: 'panel kinds-panel' },
    h('h3', null, 'What kind of memory'),
    h('p', { class: 'sub' }, `${how}${phases}. Block bytes, as torch's allocated memory counts them. ` +
      'The memory timeline colours allocations by kind ("By kind"), and a click there shows any moment.'),
    h('div', { class: 'two-col' },
      breakdownView('At the allocated peak', null, fromSummary(c.at_peak)),
      breakdownView('At the snapshot', null, fromSummary(c.at_snapshot))));
}

// An OOM's kinds, one line ("By kind: ...").
export function oomKinds(o) {
  if (!o.categories || !o.categories.total) return null;
  const { bytes } = fromSummary(o.categories);
  return h('p', { class: 'oom-kinds' }, 'By kind: ', split(bytes, 6));
}

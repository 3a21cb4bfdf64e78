// "Allocator settings": the caching allocator's settings the snapshot
// recorded (memory_viz's Allocator Settings tab, with what each one does),
// and what the recording attached to the events: user metadata, compile
// contexts and record_function scopes, with how often each appears.

import { formatCount, formatDuration } from './format.js';
import { annotationModel } from './annotations.js';
import { h } from './ui.js';

// What each setting does, in the allocator's terms (torch's
// PYTORCH_CUDA_ALLOC_CONF documentation and c10's AllocatorConfig).
const MEANING = {
  PYTORCH_CUDA_ALLOC_CONF: 'The settings string in force (the environment variable or ' +
    'torch.cuda.memory._set_allocator_settings); empty: the defaults.',
  max_split_size: 'Blocks of at least this size are never split to serve a smaller request ' +
    '(-1: no limit). Lowering it trades reuse for less fragmentation of large blocks.',
  garbage_collection_threshold: 'When usage passes this fraction of the allowed memory, cached ' +
    'blocks that are not in use are given back to CUDA before a new cudaMalloc (0: off).',
  expandable_segments: 'Segments grow in place by mapping more pages (segment_map events) ' +
    'instead of a new cudaMalloc each, which avoids most fragmentation between segments.',
  roundup_power2_divisions: 'How request sizes are rounded up, per power-of-two size range: N ' +
    'divisions rounds to the nearest 1/N step of the range (0: the default 512-byte rounding).',
  pinned_num_register_threads: 'Threads that register pinned host memory (pinned_use_cuda_host_register).',
  pinned_use_cuda_host_register: 'Pinned host memory is malloc\'ed then registered with ' +
    'cudaHostRegister instead of allocated with cudaHostAlloc.',
  release_lock_on_cudamalloc: 'The allocator releases its lock while it calls cudaMalloc, so ' +
    'other threads can allocate meanwhile.',
  graph_capture_record_stream_reuse: 'During CUDA graph capture, blocks freed with record_stream ' +
    'can be reused once the graph is done with them.',
  trace_alloc_max_entries: 'The size of the history ring buffer (max_entries of ' +
    '_record_memory_history): older events are overwritten past it.',
  trace_alloc_overflowed: 'True when the ring buffer wrapped: the trace begins after the ' +
    'recording did, and earlier allocations appear without their alloc event.',
};

export class SettingsView {
  constructor(app, dev) {
    this.app = app;
    this.dev = dev;
    this.el = h('div', { class: 'view settings-view' });
    this.build();
  }

  activate() {}

  build() {
    this.el.replaceChildren(h('div', { class: 'settings-body' },
      this.settingsSection(), this.valuesSection('User metadata', 'meta',
        'The string torch.cuda.memory._set_memory_metadata() set on the thread that made each ' +
        'event (torch 2.10 and later).'),
      this.valuesSection('Compile contexts', 'cc',
        'The torch.compile region each event happened in (recorded with compile_context=True); ' +
        '"N/A" outside compiled code.'),
      this.annotationsSection(), this.fileSection()));
  }

  settingsSection() {
    const s = this.app.page.meta.settings;
    const title = h('h2', null, 'Caching allocator settings');
    if (!s) {
      return h('section', { class: 'panel' }, title,
        h('p', null, 'No allocator settings found: the snapshot was recorded before torch 2.3, which ' +
          'added them.'));
    }
    const rows = Object.entries(s).map(([k, v]) => h('tr', null,
      h('td', { class: 'mono' }, k), h('td', { class: 'mono' }, valueText(k, v)),
      h('td', { class: 'meaning' }, MEANING[k] || '')));
    return h('section', { class: 'panel' }, title,
      h('table', { class: 'settings-table' },
        h('thead', null, h('tr', null, h('th', null, 'setting'), h('th', null, 'value'), h('th', null, 'what it does'))),
        h('tbody', null, rows)),
      h('details', null, h('summary', null, 'as recorded (JSON)'),
        h('pre', { class: 'settings-json' }, JSON.stringify(s, null, 2))));
  }

  // Distinct values of the event column ev.<col> with their counts.
  valuesSection(title, col, what) {
    const dev = this.dev;
    const ids = dev.ev[col];
    const counts = new Map();
    for (let i = 0; i < dev.n; i++) counts.set(ids[i], (counts.get(ids[i]) || 0) + 1);
    const rows = [...counts].map(([id, c]) => [dev.page.str(id), c])
      .filter(([text]) => text !== '' || counts.size > 1)
      .sort((a, b) => b[1] - a[1]);
    const body = rows.length
      ? h('table', { class: 'values-table' }, h('tbody', null, rows.slice(0, 50).map(([text, c]) => h('tr', null,
        h('td', { class: 'num' }, formatCount(c)), h('td', { class: 'mono' }, text === '' ? '(none)' : text)))))
      : h('p', { class: 'sub' }, 'None in this device\'s events.');
    return h('section', { class: 'panel' }, h('h2', null, title), h('p', { class: 'sub' }, what), body,
      rows.length > 50 ? h('p', { class: 'sub' }, `and ${formatCount(rows.length - 50)} more`) : null,
      rows.length ? h('p', { class: 'hint' }, 'The timelines\' search finds the events of any of these.') : null);
  }

  annotationsSection() {
    const an = annotationModel(this.dev);
    const byName = new Map();
    for (let i = 0; i < an.n; i++) {
      const k = an.name(i);
      const e = byName.get(k) || { count: 0, time: 0, open: 0 };
      e.count++;
      if (an.openStart[i] || an.openEnd[i]) e.open++;
      else e.time += an.t1[i] - an.t0[i];
      byName.set(k, e);
    }
    const rows = [...byName].sort((a, b) => b[1].time - a[1].time || b[1].count - a[1].count);
    const body = rows.length
      ? h('table', { class: 'values-table' }, h('thead', null, h('tr', null, h('th', null, 'times'),
        h('th', null, 'total time'), h('th', null, 'scope'))), h('tbody', null, rows.slice(0, 50).map(([k, e]) =>
        h('tr', null, h('td', { class: 'num' }, formatCount(e.count)),
          h('td', { class: 'num' }, formatDuration(e.time) + (e.open ? ` (+${e.open} open)` : '')),
          h('td', { class: 'mono' }, k)))))
      : h('p', { class: 'sub' }, 'None for this device.');
    return h('section', { class: 'panel' }, h('h2', null, 'record_function scopes and other annotations'),
      h('p', { class: 'sub' }, 'The snapshot\'s external_annotations (torch.profiler.record_function, ' +
        'profiler steps, optimizer steps...), drawn as labelled ranges above every timeline.'), body);
  }

  fileSection() {
    const meta = this.app.page.meta;
    return h('section', { class: 'panel' }, h('h2', null, 'The file'),
      h('p', { class: 'sub' }, 'Top-level keys, in order: ', h('span', { class: 'mono' }, (meta.topKeys || []).join(', ') || '(a bare list of segments)')));
  }
}

function valueText(k, v) {
  if (k === 'roundup_power2_divisions' && v && typeof v === 'object') {
    const set = Object.entries(v).filter(([, d]) => d);
    return set.length ? set.map(([sz, d]) => `${sz}MiB: ${d}`).join(', ') : 'none set';
  }
  if (typeof v === 'string') return v === '' ? '(empty)' : v;
  return JSON.stringify(v);
}

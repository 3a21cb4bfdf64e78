// "Private pools": every pool of the device (the default one and the private
// pools of CUDA graphs and MemPools) with what it reserves and holds, and
// memory_viz's "Allocated Memory (incl. Private Pools)" timeline.

import { formatCount, formatSize } from './format.js';
import { poolKind } from './filters.js';
import { poolSeries, poolTimelineModel } from './pools.js';
import { h } from './ui.js';
import { TimelineView } from './view_timeline.js';

export class PoolsView {
  constructor(app, dev) {
    this.app = app;
    this.dev = dev;
    this.series = poolSeries(dev);
    this.timeline = null;
    this.el = h('div', { class: 'view pools-view' });
    this.build();
  }

  build() {
    const s = this.series;
    const rows = s.pools.list.map((p, k) => {
      const sr = s.series[k];
      return h('tr', { 'data-pool': k },
        h('td', null, p.name), h('td', null, poolKind(p.p0, p.p1)),
        h('td', { class: 'num' }, formatCount(s.segments[k])),
        h('td', { class: 'num' }, formatSize(s.finalReserved[k], false)),
        h('td', { class: 'num' }, formatSize(s.finalActive[k], false)),
        h('td', { class: 'num' }, formatCount(s.blocks[k])),
        h('td', { class: 'num' }, sr ? formatSize(sr.peak, false) : '—'),
        h('td', { class: 'num' }, sr ? formatCount(sr.events) : '—'));
    });
    const table = h('table', { class: 'pool-table' },
      h('thead', null, h('tr', null, ['pool', 'what it is', 'segments', 'reserved', 'allocated', 'blocks',
        'peak capacity', 'events'].map((t) => h('th', null, t)))),
      h('tbody', null, rows));
    const note = s.private.length
      ? h('p', { class: 'hint' },
        'A private pool serves only its CUDA graph or MemPool: its free bytes are lost to every other ',
        'allocation, so the timeline below counts each pool with all it reserves (a band per pool at the ',
        'bottom, its allocated part darker) and the other allocations on top. The pool of an address is the ',
        'pool of the snapshot segment holding it, as in torch; segments freed before the snapshot have none. ',
        'Filter the memory timeline by pool to see a pool\'s allocations one by one.')
      : h('p', { class: 'hint' },
        'No private pools in this device\'s snapshot: every segment belongs to the caching allocator\'s own ',
        'pool. CUDA graphs and torch.cuda.MemPool allocate from private pools, which a pool must still be ',
        'alive for torch.cuda.memory._snapshot() to list.');
    const head = h('div', { class: 'pools-head' }, h('h2', null, 'Memory pools'), table, note);
    this.el.replaceChildren(head);
    if (s.private.length) {
      this.timeline = new TimelineView(this.app, this.dev, 'pp', poolTimelineModel(this.app.timeline(this.dev, 'tl')));
      this.el.append(this.timeline.el);
    }
  }

  activate() {
    if (this.timeline) this.timeline.activate();
  }
}

// The rows of the allocator state's event list: every event, or those in
// the page's trace range, of a stream, of a pool, or matching the search.
// Rows map to event indices; the search marks its matches whether or not
// only those are listed.

import { textMatcher } from './data.js';
import { ACTION_NAMES, A } from './format.js';
import { devicePools } from './filters.js';

export class EventRows {
  constructor(dev) {
    this.dev = dev;
    this.rows = null;  // Int32Array of event indices, or null for all
    this.count = dev.n;
    this.match = null;  // Uint8Array over events while a search is on
    this.matches = 0;
    this.query = '';
    this.blockMatches = null;
  }

  at(r) { return this.rows ? this.rows[r] : r; }

  // The row of event i, or of the first listed event after it (the last
  // row when none is).
  rowOf(i) {
    if (!this.rows) return Math.max(0, Math.min(this.count - 1, i));
    let lo = 0;
    let hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.rows[mid] < i) lo = mid + 1;
      else hi = mid;
    }
    return Math.min(lo, this.count - 1);
  }

  // Marks the events whose address (hex), action, stack text, user
  // metadata or compile context contains `query` (case-insensitive).
  search(query) {
    const q = query.trim().toLowerCase();
    this.query = q;
    if (!q) {
      this.match = null;
      this.matches = 0;
      this.blockMatches = null;
      return;
    }
    const dev = this.dev;
    const ev = dev.ev;
    const hexq = q.replace(/^0x/, '').replace(/^[bs](?=[0-9a-f])/, '').split('_')[0];
    const isHex = /^[0-9a-f]+$/.test(hexq);
    const actions = ACTION_NAMES.map((name) => name.includes(q));
    const { str: text, stack } = textMatcher(dev.page, q);
    // A block of the map (state.js's blockInfo) matches the same way.
    this.blockMatches = (b) => (isHex && b.addr.toString(16).includes(hexq)) || stack(b.stack) ||
      (b.userMetadata && b.userMetadata.toLowerCase().includes(q));
    const match = new Uint8Array(dev.n);
    let count = 0;
    for (let i = 0; i < dev.n; i++) {
      const a = ev.action[i];
      const hit = (isHex && a !== A.OOM && ev.addr[i].toString(16).includes(hexq)) || actions[a] ||
        (a === A.OTHER && text(ev.other[i])) || text(ev.meta[i]) || text(ev.cc[i]) || stack(ev.stack[i]);
      if (hit) {
        match[i] = 1;
        count++;
      }
    }
    this.match = match;
    this.matches = count;
  }

  // Lists the events in [range] (or all), of `stream` and `pool` (null:
  // any), and only the search's matches when `onlyMatches`.
  filter({ range = null, stream = null, pool = null, onlyMatches = false }) {
    const dev = this.dev;
    const only = onlyMatches && this.match;
    if (!range && stream === null && pool === null && !only) {
      this.rows = null;
      this.count = dev.n;
      return;
    }
    const [a, b] = range || [0, dev.n - 1];
    const pools = pool !== null ? devicePools(dev) : null;
    const rows = new Int32Array(Math.max(0, b - a + 1));
    let k = 0;
    const ev = dev.ev;
    for (let i = a; i <= b; i++) {
      if (stream !== null && ev.stream[i] !== stream) continue;
      if (pools && (ev.action[i] === A.OOM || ev.action[i] === A.SNAPSHOT || pools.at(ev.addr[i]) !== pool)) continue;
      if (only && !this.match[i]) continue;
      rows[k++] = i;
    }
    this.rows = rows.subarray(0, k);
    this.count = k;
  }

  // The next (dir 1) or previous (dir -1) listed match from event i, or -1.
  nextMatch(i, dir) {
    if (!this.match || !this.count) return -1;
    let r = this.rowOf(i);  // the first listed event at or after i
    if (dir > 0 ? this.at(r) <= i : this.at(r) >= i) r += dir;
    for (; r >= 0 && r < this.count; r += dir) if (this.match[this.at(r)]) return this.at(r);
    return -1;
  }
}

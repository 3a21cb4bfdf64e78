// Flamegraphs of the snapshot's state (torch's `memory` and `segments`
// folded stacks) as an icicle: root on top, children below, widths in bytes.

export class FlameTree {
  // parent: Int array (depth-first order, -1 for the root), names: string
  // per node, value: bytes per node (including descendants).
  constructor(parent, names, value) {
    const n = parent.length;
    this.n = n;
    this.parent = parent;
    this.names = names;
    this.value = value;
    this.depth = new Int32Array(n);
    this.x = new Float64Array(n);  // bytes from the left edge of the root
    this.children = Array.from({ length: n }, () => []);
    let maxDepth = 0;
    const next = new Float64Array(n);  // next free x inside each node
    for (let i = 0; i < n; i++) {
      const p = parent[i];
      if (p >= 0) {
        this.depth[i] = this.depth[p] + 1;
        this.x[i] = this.x[p] + next[p];
        next[p] += value[i];
        this.children[p].push(i);
        if (this.depth[i] > maxDepth) maxDepth = this.depth[i];
      }
    }
    this.maxDepth = maxDepth;
  }

  static fromDevice(dev, which) {
    const parent = dev.col(`${which}.parent`);
    const nameIds = dev.col(`${which}.name`);
    const value = dev.col(`${which}.value`);
    // A name is a text's id, or -1 - a frame's id (labelled here, once per frame).
    const names = Array.from(nameIds, (id) => (id >= 0 ? dev.page.str(id) : dev.page.foldedLabel(-1 - id)));
    return new FlameTree(parent, names, value);
  }

  // The tree without the subtrees whose root name is in `names` (e.g. the
  // "inactive" blocks: memory cached but not allocated); ancestors shrink.
  without(names) {
    const n = this.n;
    const drop = new Uint8Array(n);
    const cut = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const p = this.parent[i];
      if ((p >= 0 && drop[p]) || (i > 0 && names.includes(this.names[i]))) {
        drop[i] = 1;
        if (p >= 0 && !drop[p]) for (let a = p; a >= 0; a = this.parent[a]) cut[a] += this.value[i];
      }
    }
    const map = new Int32Array(n).fill(-1);
    const parent = [];
    const nm = [];
    const value = [];
    for (let i = 0; i < n; i++) {
      if (drop[i] || (i > 0 && this.value[i] - cut[i] <= 0)) continue;
      map[i] = parent.length;
      parent.push(i === 0 ? -1 : map[this.parent[i]]);
      nm.push(this.names[i]);
      value.push(this.value[i] - cut[i]);
    }
    return new FlameTree(Int32Array.from(parent), nm, Float64Array.from(value));
  }

  // Nodes visible when `focus` fills the width: its subtree plus its
  // ancestors (drawn full width above it).
  visible(focus) {
    const out = [];
    for (let a = this.parent[focus]; a >= 0; a = this.parent[a]) out.push(a);
    out.reverse();
    const stack = [focus];
    while (stack.length) {
      const i = stack.pop();
      out.push(i);
      for (const c of this.children[i]) stack.push(c);
    }
    return out;
  }

  // Rectangles in [0,1] x units for a focus node: {id, x0, x1, depth}.
  layout(focus, minWidth = 0) {
    const fx = this.x[focus];
    const fw = this.value[focus] || 1;
    const rects = [];
    for (const i of this.visible(focus)) {
      let x0;
      let x1;
      if (this.isAncestor(i, focus) && i !== focus) {
        x0 = 0;
        x1 = 1;
      } else {
        x0 = (this.x[i] - fx) / fw;
        x1 = x0 + this.value[i] / fw;
      }
      if (x1 - x0 < minWidth) continue;
      rects.push({ id: i, x0, x1, depth: this.depth[i] });
    }
    return rects;
  }

  isAncestor(a, b) {
    for (let p = b; p >= 0; p = this.parent[p]) if (p === a) return true;
    return false;
  }

  path(i) {
    const names = [];
    for (let p = i; p > 0; p = this.parent[p]) names.push(this.names[p]);
    return names.reverse();
  }

  // Nodes whose name contains the query, and the bytes they cover (nested
  // matches counted once).
  search(query) {
    const q = query.trim().toLowerCase();
    const match = new Uint8Array(this.n);
    if (!q) return { match, bytes: 0, count: 0 };
    let bytes = 0;
    let count = 0;
    const covered = new Uint8Array(this.n);
    for (let i = 0; i < this.n; i++) {
      const p = this.parent[i];
      if (p >= 0 && covered[p]) covered[i] = 1;
      if (this.names[i].toLowerCase().includes(q)) {
        match[i] = 1;
        count++;
        if (!covered[i]) bytes += this.value[i];
        covered[i] = 1;
      }
    }
    return { match, bytes, count };
  }
}

// Warm flamegraph colours, stable per name (a hash, not random).
export function flameColor(name) {
  if (name.startsWith('stream_') || name.startsWith('seg_') || name === 'all') return '#d9dde3';
  if (name === 'active_allocated' || name === 'active_pending_free' || name === 'inactive') {
    return name === 'inactive' ? '#c9d6e8' : name === 'active_pending_free' ? '#f4a3a3' : '#b9dcb0';
  }
  if (name === '<gaps>') return '#eeeeee';
  if (name === '<non-python>') return '#dddddd';
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) | 0;
  const u = (h >>> 0) / 4294967296;
  const r = 205 + Math.round(50 * u);
  const g = Math.round(80 + 150 * ((u * 7.3) % 1));
  const b = Math.round(40 + 50 * ((u * 3.1) % 1));
  return `rgb(${r},${g},${b})`;
}

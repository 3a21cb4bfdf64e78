// The timeline's live drawn elements in some state, found by walking the
// events from the nearest checkpoint of the live set the engine hands over
// (docs/formats.md, cpoff/cpids): the walk costs the events between the
// checkpoint and the state, whatever the snapshot's size.

// The live drawn elements in stacking order while walking the events:
// appended on allocation (a new element always stacks on top), tombstoned
// on free, compacted when half dead.
export class LiveStack {
  constructor(model, detail, force = null) {
    this.model = model;
    this.detail = detail;
    this.force = force;
    this.ids = new Int32Array(256);
    this.len = 0;
    this.dead = 0;
    this.pos = new Int32Array(model.m).fill(-1);
    this.state = -1;
  }

  reset(s) {
    const md = this.model;
    for (let j = 0; j < this.len; j++) if (this.ids[j] >= 0) this.pos[this.ids[j]] = -1;
    this.len = 0;
    this.dead = 0;
    // Checkpoint k holds state (k+1)*cpInterval.
    const k = Math.min(md.cpCount, Math.floor(s / md.cpInterval)) - 1;
    if (k >= 0) {
      for (let j = md.cpoff[k]; j < md.cpoff[k + 1]; j++) this.push(md.cpids[j]);
      this.state = (k + 1) * md.cpInterval;
    } else {
      for (let e = 0; e < md.initial; e++) this.push(e);
      this.state = 0;
    }
  }

  push(id) {
    const md = this.model;
    if (md.include && !md.include[id]) return;
    if (md.rank[id] >= this.detail && !(this.force && this.force[id])) return;
    if (this.len === this.ids.length) this.ids = grow(this.ids, this.len * 2);
    this.pos[id] = this.len;
    this.ids[this.len++] = id;
  }

  remove(id) {
    const p = this.pos[id];
    if (p < 0) return;
    this.ids[p] = -1;
    this.pos[id] = -1;
    if (++this.dead > 64 && this.dead * 2 > this.len) this.compact();
  }

  compact() {
    let w = 0;
    for (let j = 0; j < this.len; j++) {
      const id = this.ids[j];
      if (id >= 0) {
        this.pos[id] = w;
        this.ids[w++] = id;
      }
    }
    this.len = w;
    this.dead = 0;
  }

  moveTo(s) {
    const md = this.model;
    if (this.state < 0 || s < this.state) {
      this.reset(s);
    } else {
      // Jump ahead through a checkpoint when one lies between here and s.
      const k = Math.min(md.cpCount, Math.floor(s / md.cpInterval));
      if (k >= 1 && k * md.cpInterval > this.state) this.reset(s);
    }
    const code = md.code;
    for (let i = this.state; i < s; i++) {
      const c = code[i];
      if (c > 0) this.push(c - 1);
      else if (c < 0) this.remove(-c - 1);
    }
    this.state = s;
  }
}

// Typed array `a` copied into a new one of length n (cut or zero-filled).
export function grow(a, n) {
  const b = new a.constructor(n);
  b.set(a.subarray(0, Math.min(a.length, n)));
  return b;
}

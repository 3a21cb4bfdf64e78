// The embedded page data: base64 text -> (deflate) -> one blob of typed
// columns (format: docs/formats.md). Decoding copies nothing it need not:
// columns are typed-array views on the decompressed buffer.

import { A, FRAME_KINDS, entryOfDevice, formatAddr, formatFrames, isSegmentAction, upperBound } from './format.js';
import { setText } from './ui.js';

const B64 = new Uint8Array(256).fill(255);
'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
  .split('').forEach((c, i) => { B64[c.charCodeAt(0)] = i; });

// Base64 to bytes; the browser's own decoder when it has one.
export function decodeBase64(text) {
  if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(text);
  let n = text.length;
  while (n > 0 && text.charCodeAt(n - 1) === 61) n--;  // '='
  const out = new Uint8Array((n * 3) >> 2);
  let o = 0;
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const v = (B64[text.charCodeAt(i)] << 18) | (B64[text.charCodeAt(i + 1)] << 12) |
      (B64[text.charCodeAt(i + 2)] << 6) | B64[text.charCodeAt(i + 3)];
    out[o++] = v >> 16;
    out[o++] = (v >> 8) & 255;
    out[o++] = v & 255;
  }
  if (n - i >= 2) {
    const v = (B64[text.charCodeAt(i)] << 18) | (B64[text.charCodeAt(i + 1)] << 12) |
      ((n - i > 2 ? B64[text.charCodeAt(i + 2)] : 0) << 6);
    out[o++] = v >> 16;
    if (n - i > 2) out[o++] = (v >> 8) & 255;
  }
  return out;
}

async function inflate(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// The payload of <script id="memsight-data">: base64 pieces joined by '.',
// each compressed separately (so the engine compresses them in parallel).
export async function decodePayload(text, encoding, size) {
  const pieces = text.trim().split('.');
  const decoded = await Promise.all(pieces.map(async (p) => {
    const bytes = decodeBase64(p);
    return encoding === 'deflate' ? inflate(bytes) : bytes;
  }));
  if (decoded.length === 1 && decoded[0].byteOffset === 0) return decoded[0].buffer;
  const out = new Uint8Array(size || decoded.reduce((s, d) => s + d.length, 0));
  let o = 0;
  for (const d of decoded) {
    out.set(d, o);
    o += d.length;
  }
  return out.buffer;
}

const TYPES = {
  u8: Uint8Array, i8: Int8Array, u16: Uint16Array, i16: Int16Array,
  u32: Uint32Array, i32: Int32Array, f64: Float64Array,
};

function constArray(count, value) {
  /** @type {Float64ArrayConstructor | Int32ArrayConstructor | Uint8ArrayConstructor} */
  let T = Float64Array;
  if (Number.isInteger(value)) {
    if (value >= 0 && value < 256) T = Uint8Array;
    else if (value >= -(2 ** 31) && value < 2 ** 31) T = Int32Array;
  }
  const a = new T(count);
  if (value !== 0) a.fill(value);
  return a;
}

// Parses the blob: "MSV1", header length (u32 LE), header JSON, columns.
// Plain columns are views on the buffer; dictionary and exception-coded
// columns (see docs/formats.md) are expanded on first use.
export function parseBlob(buffer) {
  const bytes = new Uint8Array(buffer);
  const magic = String.fromCharCode(bytes[0], bytes[1], bytes[2], bytes[3]);
  if (magic !== 'MSV1') throw new Error(`not memsight page data (magic ${JSON.stringify(magic)})`);
  const headerLen = new DataView(buffer).getUint32(4, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLen)));
  const base = 8 + headerLen;
  const view = (name, type, offset, count) => {
    const T = TYPES[type];
    if (!T) throw new Error(`column ${name}: unknown type ${type}`);
    return new T(buffer, base + offset, count);
  };
  const columns = new Map();
  for (const [name, spec] of Object.entries(header.columns)) {
    const kind = spec[0];
    if (kind === 'const') {
      columns.set(name, { const: true, count: spec[1], value: spec[2] });
    } else if (kind === 'dict') {
      const [, n, itype, ioff, vtype, voff, nv] = spec;
      columns.set(name, {
        expand: () => {
          const index = view(name, itype, ioff, n);
          const values = view(name, vtype, voff, nv);
          const out = new values.constructor(n);
          for (let i = 0; i < n; i++) out[i] = values[index[i]];
          return out;
        },
      });
    } else if (kind === 'exc') {
      const [, n, type, off, itype, ioff, vtype, voff, nx] = spec;
      columns.set(name, {
        expand: () => {
          const small = view(name, type, off, n);
          const at = view(name, itype, ioff, nx);
          const values = view(name, vtype, voff, nx);
          let wide = false;
          for (let k = 0; k < nx; k++) if (values[k] > 0xffffffff) wide = true;
          const out = wide ? new Float64Array(n) : new Uint32Array(n);
          out.set(small);
          for (let k = 0; k < nx; k++) out[at[k]] = values[k];
          return out;
        },
      });
    } else {
      columns.set(name, { array: view(name, kind, spec[1], spec[2]) });
    }
  }
  return { meta: header.meta, columns };
}

export class PageData {
  constructor({ meta, columns }) {
    this.meta = meta;
    this._columns = columns;
    const blob = this.col('strings.blob');
    const off = this.col('strings.off');
    this._strBlob = blob;
    this._strOff = off;
    this._strings = new Array(Math.max(0, off.length - 1));
    this._decoder = new TextDecoder();
    this._frames = {
      name: this.col('frames.name'), file: this.col('frames.file'),
      line: this.col('frames.line'), fx: this.col('frames.fx'),
      kind: this.has('frames.kind') ? this.col('frames.kind') : null,
    };
    // What counts as user code beyond the engine's rule (filename
    // substrings; "!PAT" takes matches out), and how stacks are shown.
    this.userCode = [];
    this.allFrames = false;
    this._stackPanes = new Set();
    this._stackOff = this.col('stacks.off');
    this._stackFrames = this.col('stacks.frames');
    this._stackCache = new Map();
    this._foldedLabels = new Map();
    this._devices = new Map();
    // The engine packs only devices with events or segments (and the
    // default one): meta.devices is a list of those, not indexed by device.
    this._deviceMeta = new Map(this.meta.devices.map((m) => [m.index, m]));
    // Their columns are concatenated: column NAME of all of them is
    // "dev.NAME", and "dev.len.NAME" holds each device's part's length, in
    // the order of meta.devices (a device's slot).
    this._deviceSlot = new Map(this.meta.devices.map((m, s) => [m.index, s]));
    this._deviceStarts = new Map();  // NAME -> where each slot's part starts
  }

  // Devices the snapshot lists, packed or not.
  get deviceCount() { return this.meta.deviceCount ?? this.meta.devices.length; }

  // Device d's part of the embedded `memsight summary --json`, or null.
  summaryOf(d) {
    const s = this.meta.summary;
    return s && Array.isArray(s.devices) ? entryOfDevice(s.devices, d) : null;
  }

  // The metadata of a packed device, or undefined.
  deviceMeta(d) { return this._deviceMeta.get(d); }

  has(name) { return this._columns.has(name); }

  // Column NAME of packed device d: a view on its part of "dev.NAME".
  deviceCol(d, name) {
    const s = this._deviceSlot.get(d);
    if (s === undefined || !this.has(`dev.${name}`)) throw new Error(`page data lacks column ${name} of device ${d}`);
    let start = this._deviceStarts.get(name);
    if (!start) {
      const len = this.col(`dev.len.${name}`);
      start = new Float64Array(len.length + 1);
      for (let i = 0; i < len.length; i++) start[i + 1] = start[i] + len[i];
      this._deviceStarts.set(name, start);
    }
    return this.col(`dev.${name}`).subarray(start[s], start[s + 1]);
  }

  // A column as a typed array (const columns are materialised once).
  col(name) {
    const c = this._columns.get(name);
    if (!c) throw new Error(`page data lacks column ${name}`);
    if (!c.array) c.array = c.expand ? c.expand() : constArray(c.count, c.value);
    return c.array;
  }

  str(i) {
    let s = this._strings[i];
    if (s === undefined) {
      s = this._decoder.decode(this._strBlob.subarray(this._strOff[i], this._strOff[i + 1]));
      this._strings[i] = s;
    }
    return s;
  }

  // A frame's label as torch's folded stacks write it, "file.py:12:name"
  // (the file's base name after its last '/'): the flamegraphs' names.
  foldedLabel(fr) {
    let s = this._foldedLabels.get(fr);
    if (s === undefined) {
      const f = this._frames;
      const file = this.str(f.file[fr]);
      s = `${file.slice(file.lastIndexOf('/') + 1)}:${f.line[fr]}:${this.str(f.name[fr])}`;
      this._foldedLabels.set(fr, s);
    }
    return s;
  }

  // A frame's kind ('user', 'library', 'internal', 'native'): the engine's
  // rule, then the page's user-code patterns (later ones win).
  frameKind(f) {
    let k = f.baseKind;
    for (const p of this.userCode) {
      const narrow = p.startsWith('!');
      const pat = narrow ? p.slice(1) : p;
      if (!pat || !f.filename.includes(pat)) continue;
      if (narrow && k === 'user') k = 'library';
      if (!narrow) k = 'user';
    }
    return k;
  }

  // A stack as text in the page's current mode (user-first or all frames).
  formatStack(frames) {
    return formatFrames(frames, { all: this.allFrames, kindOf: (f) => this.frameKind(f) });
  }

  // Shows a stack in a details pane, and again whenever the user changes
  // what counts as their code or how stacks are shown.
  showStack(pane, frames) {
    pane._frames = frames;
    setText(pane, frames ? this.formatStack(frames) : '');
    this._stackPanes.add(pane);
  }

  setFrameRule(userCode, allFrames) {
    this.userCode = userCode;
    this.allFrames = allFrames;
    for (const pane of this._stackPanes) {
      if (!pane.isConnected && !pane._frames) this._stackPanes.delete(pane);
      else if (pane._frames) setText(pane, this.formatStack(pane._frames));
    }
  }

  // Frames of a stack, innermost first: [{name, filename, line, fx, baseKind}].
  stack(id) {
    let frames = this._stackCache.get(id);
    if (frames) return frames;
    frames = [];
    const f = this._frames;
    for (let k = this._stackOff[id]; k < this._stackOff[id + 1]; k++) {
      const fr = this._stackFrames[k];
      frames.push({
        name: this.str(f.name[fr]), filename: this.str(f.file[fr]),
        line: f.line[fr], fx: f.fx[fr] ? this.str(f.fx[fr]) : '',
        baseKind: f.kind ? FRAME_KINDS[f.kind[fr]] || 'native' : 'user',
      });
    }
    this._stackCache.set(id, frames);
    return frames;
  }

  get stackCount() { return this._stackOff.length - 1; }

  device(d) {
    let dev = this._devices.get(d);
    if (!dev) {
      dev = new DeviceData(this, d);
      this._devices.set(d, dev);
    }
    return dev;
  }

  streamName(i) { return i; }
}

// One device's events, snapshot segments/blocks and derived helpers.
export class DeviceData {
  constructor(page, d) {
    const t0 = performance.now();
    this.page = page;
    this.index = d;
    this.meta = page.deviceMeta(d);
    if (!this.meta) throw new Error(`page data lacks device ${d}`);
    const c = (n) => page.deviceCol(d, n);
    this.col = c;
    this.n = this.meta.events;
    this.ev = {
      entry: c('ev.entry'),
      action: c('ev.action'), addr: c('ev.addr'), size: c('ev.size'), stream: c('ev.stream'),
      stack: c('ev.stack'), version: c('ev.version'), dt: c('ev.dt'), cc: c('ev.cc'),
      meta: c('ev.meta'), other: c('ev.other'),
    };
    this.seg = {
      addr: c('seg.addr'), size: c('seg.size'), stream: c('seg.stream'), version: c('seg.version'),
      stack: c('seg.stack'), pool0: c('seg.pool0'), pool1: c('seg.pool1'),
      expandable: c('seg.expandable'), type: c('seg.type'), allocated: c('seg.allocated'),
      active: c('seg.active'), requested: c('seg.requested'), bbegin: c('seg.bbegin'),
      bend: c('seg.bend'),
    };
    this.blk = {
      addr: c('blk.addr'), size: c('blk.size'), req: c('blk.req'), state: c('blk.state'),
      sname: c('blk.sname'), version: c('blk.version'), stack: c('blk.stack'),
    };
    this._times = null;
    this._timelines = {};
    this.loadMs = performance.now() - t0;
  }

  // This device's part of `memsight summary --json` as the engine embedded
  // it (null for a device with no trace entries and no segments): every
  // peak, current value and OOM the page states comes from here.
  get summary() { return this.page.summaryOf(this.index); }

  // Event times in µs since the epoch (non-decreasing: the page's clock).
  get times() {
    if (!this._times) {
      const t = new Float64Array(this.n);
      const dt = this.ev.dt;
      let now = this.meta.t0;
      for (let i = 0; i < this.n; i++) {
        now += dt[i];
        t[i] = now;
      }
      this._times = t;
    }
    return this._times;
  }

  event(i) {
    const e = this.ev;
    const action = e.action[i];
    return {
      index: i, action, addr: e.addr[i], size: e.size[i], stream: e.stream[i],
      version: e.version[i], stack: e.stack[i], name: action === A.OTHER ? this.page.str(e.other[i]) : '',
      compileContext: this.page.str(e.cc[i]), userMetadata: this.page.str(e.meta[i]),
      time: this.times[i],
    };
  }

  // The trace entry index of event i (-1 stays -1: before the first).
  entry(i) { return i < 0 ? i : this.ev.entry[i]; }

  // The event holding trace entry `e` (the last event at or before it).
  eventOfEntry(e) {
    if (e < 0) return e;
    return Math.max(0, upperBound(this.ev.entry, e, this.n) - 1);
  }

  eventName(i) {
    const a = this.ev.action[i];
    return formatAddr(isSegmentAction(a), this.ev.addr[i], this.ev.version[i]);
  }

  // Index of the snapshot segment holding addr (segments are address-sorted), or -1.
  segmentAt(addr) {
    const a = this.seg.addr;
    const s = upperBound(a, addr) - 1;
    return s >= 0 && addr < a[s] + this.seg.size[s] ? s : -1;
  }

  segmentFrames(s) { return this.page.stack(this.seg.stack[s]); }
}

// Case-insensitive substring tests of the page's strings and stacks (by
// id), cached: the searches ask the same ids many times.
export function textMatcher(page, q) {
  const strHit = new Map();
  const stackHit = new Map();
  return {
    str(id) {
      if (!id) return false;
      let v = strHit.get(id);
      if (v === undefined) {
        v = page.str(id).toLowerCase().includes(q);
        strHit.set(id, v);
      }
      return v;
    },
    stack(st) {
      let v = stackHit.get(st);
      if (v === undefined) {
        v = page.stack(st).some((f) => `${f.filename}:${f.line}:${f.name}`.toLowerCase().includes(q));
        stackHit.set(st, v);
      }
      return v;
    },
  };
}

// Builds page data the way the engine lays it out (docs/formats.md), from
// plain JS values, for tests that need no engine.
import { PageData, parseBlob } from '../src/data.js';

/** @typedef {Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array | Float64Array} TypedArray */
/** @typedef {Record<string, TypedArray | {const: number, count: number}>} Columns */

const TYPE_NAMES = new Map(/** @type {[Function, string][]} */ ([
  [Uint8Array, 'u8'], [Int8Array, 'i8'], [Uint16Array, 'u16'], [Int16Array, 'i16'],
  [Uint32Array, 'u32'], [Int32Array, 'i32'], [Float64Array, 'f64'],
]));

// columns: {name: TypedArray | {const: value, count}}; returns an ArrayBuffer.
/** @param {object} meta @param {Columns} columns */
export function makeBlob(meta, columns) {
  const entries = {};
  /** @type {[number, Uint8Array][]} */
  const parts = [];
  let offset = 0;
  for (const [name, v] of Object.entries(columns)) {
    if (!ArrayBuffer.isView(v)) {
      entries[name] = ['const', v.count, v.const];
      continue;
    }
    const bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    entries[name] = [TYPE_NAMES.get(v.constructor), offset, v.length];
    parts.push([offset, bytes]);
    offset += (bytes.length + 7) & ~7;
  }
  let header = JSON.stringify({ v: 1, columns: entries, meta });
  while ((8 + header.length) % 8) header += ' ';
  const head = new TextEncoder().encode(header);
  const buf = new ArrayBuffer(8 + head.length + offset);
  const u8 = new Uint8Array(buf);
  u8.set([77, 83, 86, 49], 0);  // "MSV1"
  new DataView(buf).setUint32(4, head.length, true);
  u8.set(head, 8);
  for (const [o, bytes] of parts) u8.set(bytes, 8 + head.length + o);
  return buf;
}

// String, frame and stack tables from a list of stacks (arrays of
// {name, filename, line}); stack 0 is the empty stack.
export function tables(stacks) {
  const strings = [''];
  const sid = (s) => {
    let i = strings.indexOf(s);
    if (i < 0) {
      i = strings.length;
      strings.push(s);
    }
    return i;
  };
  const frames = [];
  const stackOff = [0, 0];
  const stackFrames = [];
  for (const st of stacks) {
    for (const f of st) {
      frames.push([sid(f.name), sid(f.filename), f.line]);
      stackFrames.push(frames.length - 1);
    }
    stackOff.push(stackFrames.length);
  }
  return {
    sid,
    columns: () => {
      const enc = new TextEncoder();
      const parts = strings.map((x) => enc.encode(x));
      const off = [0];
      for (const b of parts) off.push(off[off.length - 1] + b.length);
      const blob = new Uint8Array(off[off.length - 1]);
      parts.forEach((b, i) => blob.set(b, off[i]));
      return {
        'strings.blob': blob.length ? blob : new Uint8Array(1),
        'strings.off': new Uint32Array(off),
        'frames.name': new Uint32Array(frames.map((f) => f[0])),
        'frames.file': new Uint32Array(frames.map((f) => f[1])),
        'frames.line': new Int32Array(frames.map((f) => f[2])),
        'frames.fx': new Uint32Array(frames.length),
        'stacks.off': new Uint32Array(stackOff),
        'stacks.frames': new Uint32Array(stackFrames),
      };
    },
  };
}

// The "dev.len.*" columns of a page whose one device's columns are the
// "dev.*" ones (docs/formats.md); returns the columns.
/** @param {Columns} columns */
export function oneDevice(columns) {
  const names = Object.keys(columns).filter((k) => k.startsWith('dev.')).map((k) => k.slice(4));
  /** @param {Columns[string]} v */
  const count = (v) => (ArrayBuffer.isView(v) ? v.length : v.count);
  const lengths = Object.fromEntries(names.map((n) => [`dev.len.${n}`, new Uint32Array([count(columns[`dev.${n}`])])]));
  return { ...columns, ...lengths };
}

export function pageFrom(meta, columns) {
  return new PageData(parseBlob(makeBlob(meta, columns)));
}

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deflateSync } from 'node:zlib';
import { decodeBase64, decodePayload, parseBlob } from '../src/data.js';
import { makeBlob } from './helpers.mjs';

test('base64 decoding (the fallback decoder)', () => {
  const saved = Uint8Array.fromBase64;
  Uint8Array.fromBase64 = undefined;
  try {
    for (const n of [0, 1, 2, 3, 4, 5, 255, 1000]) {
      const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 37 + 11) & 255);
      const b64 = Buffer.from(bytes).toString('base64');
      assert.deepEqual(decodeBase64(b64), bytes);
    }
  } finally {
    Uint8Array.fromBase64 = saved;
  }
});

test('columns: types, alignment, constants', () => {
  const buf = makeBlob({ hello: 'world' }, {
    a: new Uint8Array([1, 2, 3]),
    b: new Float64Array([1.5, 2 ** 50]),
    c: { const: 7, count: 4 },
    d: new Int32Array([-1, 5]),
  });
  const { meta, columns } = parseBlob(buf);
  assert.deepEqual(meta, { hello: 'world' });
  assert.deepEqual([...columns.get('a').array], [1, 2, 3]);
  assert.deepEqual([...columns.get('b').array], [1.5, 2 ** 50]);
  assert.equal(columns.get('b').array.byteOffset % 8, 0);
  assert.deepEqual(columns.get('c'), { const: true, count: 4, value: 7 });
  assert.deepEqual([...columns.get('d').array], [-1, 5]);
  assert.throws(() => parseBlob(new ArrayBuffer(16)), /not memsight page data/);
});

test('payload: deflate pieces joined by "." decode to one buffer', async () => {
  const raw = new Uint8Array(makeBlob({ n: 1 }, { x: new Uint32Array(5000).map((_, i) => i) }));
  const cut = 1234;
  const pieces = [raw.subarray(0, cut), raw.subarray(cut)]
    .map((p) => deflateSync(p).toString('base64')).join('.');
  const buf = await decodePayload(pieces, 'deflate', raw.length);
  assert.deepEqual(new Uint8Array(buf), raw);
  const plain = await decodePayload(Buffer.from(raw).toString('base64'), 'none', raw.length);
  assert.deepEqual(new Uint8Array(plain), raw);
  const { columns } = parseBlob(buf);
  assert.equal(columns.get('x').array[4999], 4999);
});

test('dictionary and exception-coded columns expand to plain arrays', () => {
  // Hand-built header: the engine's encodings (docs/formats.md).
  const index = new Uint8Array([2, 0, 1, 1, 0, 0, 0, 0]);
  const values = new Float64Array([139689994485760, 7, 2 ** 40]);
  const small = new Uint8Array([1, 255, 3, 255, 0, 0, 0, 0]);
  const at = new Uint32Array([1, 3]);
  const big = new Float64Array([300, 2 ** 33]);
  const parts = [index, values, small, at, big];
  const offsets = [];
  let off = 0;
  for (const p of parts) {
    offsets.push(off);
    off += (p.byteLength + 7) & ~7;
  }
  let header = JSON.stringify({
    v: 1, meta: {},
    columns: {
      a: ['dict', 4, 'u8', offsets[0], 'f64', offsets[1], 3],
      t: ['exc', 4, 'u8', offsets[2], 'u32', offsets[3], 'f64', offsets[4], 2],
    },
  });
  while ((8 + header.length) % 8) header += ' ';
  const buf = new ArrayBuffer(8 + header.length + off);
  const u8 = new Uint8Array(buf);
  u8.set([77, 83, 86, 49]);
  new DataView(buf).setUint32(4, header.length, true);
  u8.set(new TextEncoder().encode(header), 8);
  parts.forEach((p, k) => u8.set(new Uint8Array(p.buffer), 8 + header.length + offsets[k]));
  const page = { columns: parseBlob(buf).columns };
  const a = page.columns.get('a').expand();
  assert.deepEqual([...a], [2 ** 40, 139689994485760, 7, 7]);
  const t = page.columns.get('t').expand();
  assert.ok(t instanceof Float64Array);
  assert.deepEqual([...t], [1, 300, 3, 2 ** 33]);
});

// The timeline drawn column by column at the resolution of the screen. A
// render walks the events of the visible window once from the nearest
// checkpoint (live_stack.js), keeping the live drawn elements in stacking
// order; for each pixel column the model picks the state with the most
// memory in that column (TimelineModel.columns, so peaks never disappear)
// and here the stack turns into pixel spans, then pixels. Cost: O(events in
// view + columns x live elements), whatever the zoom or the snapshot's size.

import { mix, parseColor } from './format.js';
import { LiveStack, grow } from './live_stack.js';
import { KIND_LIVE, SUMMARY_ID } from './timeline.js';

// The stack in each column as pixel spans: for column c, spans
// [off[c], off[c+1]) of (id, y0, y1) in device pixels from the bottom;
// id SUMMARY_ID is the band of the elements beyond the detail limit.
// `force` (optional Uint8Array over elements): drawn whatever the limit.
export function stackSpans(md, rep, detail, pxPerByte, height, force = null) {
  const width = rep.length;
  const off = new Int32Array(width + 1);
  let cap = Math.max(1024, width * 16);
  let ids = new Int32Array(cap);
  let y0s = new Int32Array(cap);
  let y1s = new Int32Array(cap);
  let k = 0;
  // Appends one band of a pixel column, growing the arrays when full.
  const push = (id, y0, y1) => {
    if (k + 2 >= cap) {
      cap *= 2;
      ids = grow(ids, cap);
      y0s = grow(y0s, cap);
      y1s = grow(y1s, cap);
    }
    ids[k] = id;
    y0s[k] = y0;
    y1s[k] = y1;
    k++;
  };
  const live = new LiveStack(md, detail, force);
  const size = md.size;
  const total = md.total;
  for (let c = 0; c < width; c++) {
    off[c] = k;
    const s = rep[c];
    if (s < 0) continue;
    live.moveTo(s);
    const list = live.ids;
    const len = live.len;
    let acc = 0;
    let py = 0;
    // Bands drawn below the elements (the private pools' capacity).
    if (md.underlay) {
      for (const [id, bytes] of md.underlay(s)) {
        acc += bytes;
        const ny = Math.floor(acc * pxPerByte);
        if (ny > py) {
          push(id, py, Math.min(ny, height));
          py = Math.min(ny, height);
        }
      }
    }
    for (let j = 0; j < len; j++) {
      const id = list[j];
      if (id < 0) continue;
      acc += size[id];
      const ny = Math.floor(acc * pxPerByte);
      if (ny > py) {
        push(id, py, Math.min(ny, height));
        py = ny;
        if (py >= height) break;
      }
    }
    const top = Math.floor(total[s] * pxPerByte);
    if (top > py && py < height) push(SUMMARY_ID, py, Math.min(top, height));
  }
  off[width] = k;
  return { off, ids: ids.subarray(0, k), y0: y0s.subarray(0, k), y1: y1s.subarray(0, k) };
}

// Paints spans into RGBA pixels (Uint32, little-endian ABGR), row 0 at
// the top. `dim` (optional Uint8Array over elements): 1 = draw faded.
// `lightFrom` (optional, per column): pixel height above which the
// column's memory was not live all the time (it came and went within the
// column); drawn lighter so that zoomed-out views keep the ups and downs.
export function paintSpans(md, spans, pixels, width, height, dim, lightFrom) {
  const { off, ids, y0, y1 } = spans;
  const colors = md.colors;
  const faded = colors.map((c) => mix(c, 0xffffffff, 0.78));
  const dark = colors.map((c) => mix(c, 0xff000000, 0.25));
  const light = colors.map((c) => mix(c, 0xffffffff, 0.55));
  const summary = parseColor('#c8cdd3');
  const summaryFaded = mix(summary, 0xffffffff, 0.6);
  const summaryLight = mix(summary, 0xffffffff, 0.5);
  const tidx = md.tidx;
  const kind = md.kind;
  const ghosts = !md.segments;
  const colorOf = md.colorOf;
  const n = colors.length;
  for (let c = 0; c < width; c++) {
    const lf = lightFrom ? lightFrom[c] : height;
    for (let k = off[c]; k < off[c + 1]; k++) {
      const id = ids[k];
      let col;
      let edge;
      if (id === SUMMARY_ID) {
        col = edge = dim ? summaryFaded : summary;
      } else if (id < SUMMARY_ID) {
        col = md.underlayColor(id);
        edge = mix(col, 0xff000000, 0.45);
      } else {
        const ci = colorOf ? colorOf[id] % n : tidx[id] % n;
        if (dim && dim[id]) col = edge = faded[ci];
        else {
          col = colors[ci];
          edge = dark[ci];
        }
      }
      const a = y0[k];
      const b = y1[k];
      // A darker top row separates neighbouring bands of the same colour.
      const lc = b <= lf || id < SUMMARY_ID ? col
        : id === SUMMARY_ID ? summaryLight : (dim && dim[id] ? col : light[colorOf ? colorOf[id] % n : tidx[id] % n]);
      let p = (height - b) * width + c;
      let y = b - 1;
      if (b - a >= 4) {
        pixels[p] = y >= lf ? lc : edge;
        p += width;
        y--;
      }
      if (ghosts && id >= 0 && kind[id] === KIND_LIVE) {
        // Ghost blocks (live in the snapshot, never allocated in the
        // trace) are hatched.
        const hatch = mix(col, 0xffffffff, 0.6);
        for (; y >= a; y--, p += width) pixels[p] = ((c + y) & 7) < 3 ? hatch : (y >= lf ? lc : col);
        continue;
      }
      for (; y >= a && y >= lf; y--, p += width) pixels[p] = lc;
      for (; y >= a; y--, p += width) pixels[p] = col;
    }
  }
}

// The element at pixel height py (from the bottom) of column c, SUMMARY_ID
// for the summary band, -1 for nothing.
export function spanAt(spans, c, py) {
  if (c < 0 || c >= spans.off.length - 1) return -1;
  for (let k = spans.off[c]; k < spans.off[c + 1]; k++) {
    if (py >= spans.y0[k] && py < spans.y1[k]) return spans.ids[k];
  }
  return -1;
}

// Text the page shows, in the words and number formats of pytorch.org/memory_viz
// (MemoryViz.js), so people can match what they see in either tool.

// Event codes of the embedded data (src/report/page_data.h, PageAction).
export const ACTION_NAMES = [
  'alloc', 'free_requested', 'free_completed', 'segment_alloc', 'segment_free',
  'segment_map', 'segment_unmap', 'snapshot', 'oom', 'other', 'free',
];
export const A = Object.freeze({
  ALLOC: 0, FREE_REQUESTED: 1, FREE_COMPLETED: 2, SEGMENT_ALLOC: 3, SEGMENT_FREE: 4,
  SEGMENT_MAP: 5, SEGMENT_UNMAP: 6, SNAPSHOT: 7, OOM: 8, OTHER: 9, FREE: 10,
});
export const isSegmentAction = (a) => a >= A.SEGMENT_ALLOC && a <= A.SEGMENT_UNMAP;

// d3's Tableau10, which MemoryViz colours elements with.
export const TABLEAU10 = [
  '#4e79a7', '#f28e2c', '#e15759', '#76b7b2', '#59a14f',
  '#edc949', '#af7aa1', '#ff9da7', '#9c755f', '#bab0ab',
];

// '#rrggbb' -> 0xAABBGGRR (ImageData's byte order on little-endian machines).
export function parseColor(hexColor) {
  const v = parseInt(hexColor.slice(1), 16);
  return (0xff000000 | ((v & 0xff) << 16) | (v & 0xff00) | ((v >> 16) & 0xff)) >>> 0;
}

// Colour a moved a fraction t of the way to colour b (both as parseColor
// gives them), opaque.
export function mix(a, b, t) {
  const ch = (x, s) => (x >>> s) & 0xff;
  const m = (s) => Math.round(ch(a, s) * (1 - t) + ch(b, s) * t) << s;
  return (0xff000000 | m(16) | m(8) | m(0)) >>> 0;
}

const UNITS = ['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei', 'Zi'];

// v with `digits` decimals, exactly as C's printf("%.Nf") writes it, which
// the text reports use (src/util/text_format.cpp): toFixed rounds a value
// lying exactly halfway away from zero, printf to the even digit (2304 bytes,
// 2.25 KiB, is "2.2KiB" in both; 0.0625 s is "0.062 s").
export function fixed(v, digits) {
  const s = v.toFixed(digits);
  // The exact decimal expansion (toFixed is exact): halfway is a 5 and zeros.
  const exact = Math.abs(v).toFixed(Math.min(100, digits + 40));
  const rest = exact.slice(exact.length - 40);
  if (!/^50*$/.test(rest) || !isFinite(v) || Math.abs(v) >= 1e21) return s;
  const kept = exact.slice(0, exact.length - 40).replace(/\.$/, '');
  const last = kept.charCodeAt(kept.length - 1) - 48;
  if (last % 2 !== 0) return s;  // toFixed went up, to the even digit
  return `${v < 0 ? '-' : ''}${kept}`;  // stays at the even digit
}

// One decimal as printf's "%.1f" (fixed).
export const fixed1 = (v) => fixed(v, 1);

// One decimal, and "0.0" (no sign) for what rounds to zero, as
// text_format.cpp's one_decimal; `sign` adds "+" to a positive value.
function oneDecimal(v, sign = false) {
  if (Math.abs(v) < 0.05) return '0.0';
  return `${sign && v > 0 ? '+' : ''}${fixed1(v)}`;
}

// A size as the text reports write it (format_bytes): "976.6KiB", "2.2KiB",
// the unit chosen after rounding so that one value never reads both
// "1.0TiB" and "1024.0GiB" (MemoryViz prints the latter for 1023.96 GiB).
// showBytes adds the exact count, as MemoryViz does: "1.9MiB (2,000,000 bytes)".
export function formatSize(bytes, showBytes = true) {
  let v = bytes;
  let text = null;
  for (const unit of UNITS) {
    if (Math.abs(v) < 1023.95) {
      text = `${fixed1(v)}${unit}B`;
      break;
    }
    v /= 1024;
  }
  if (text === null) text = `${fixed1(v)}YiB`;
  return showBytes ? `${text} (${formatCount(bytes)} bytes)` : text;
}

// A change in size: "+1.5MiB", "-976.6KiB", "0" for none (signed_bytes).
export function signedSize(delta) {
  if (delta === 0) return '0';
  return (delta > 0 ? '+' : '-') + formatSize(Math.abs(delta), false);
}

// A share as a percent with one decimal: 0.1234 -> "12.3%" (percent).
export function formatPercent(share) {
  return `${oneDecimal(100 * share)}%`;
}

// A relative change with its sign: 0.05 -> "+5.0%" (signed_percent).
export function signedPercent(change) {
  return `${oneDecimal(100 * change, true)}%`;
}

// A change between two shares in percentage points: "-7.0 pt", "0" for none
// (percent_points).
export function percentPoints(change) {
  return change === 0 ? '0' : `${oneDecimal(100 * change, true)} pt`;
}

// "1 trace entry", "856,152 trace entries": what the text reports count
// (the page's events join a free_requested and its free_completed).
export function entriesText(n) {
  return countOf(n, 'trace entry', 'trace entries');
}

// An integer with thousands separators: "856,152" (count_text).
export function formatCount(n) {
  const r = Math.round(n);
  const digits = String(Math.abs(r));
  return (r < 0 ? '-' : '') + digits.replace(/\B(?=(\d{3})+$)/g, ',');
}

// A count and its noun: "1 block", "2 blocks", "1,024 trace entries"
// (count_of): the plural is the singular with an "s" unless given.
export function countOf(n, singular, plural = `${singular}s`) {
  return `${formatCount(n)} ${n === 1 ? singular : plural}`;
}

// How many characters of a name the pages show before cutting it (the full
// text stays one click away: ui.js longText). Names the engine cut when it
// read them end in "… [cut at N of M bytes]".
export const DISPLAY_CUT = 200;

// Lines of a stack or a description longer than this are cut for display.
export const LINE_CUT = 400;

// text with each line longer than `max` cut (cutText); `cut` counts them.
export function cutLines(text, max = LINE_CUT) {
  let cut = 0;
  const lines = String(text).split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].length > max) {
      lines[i] = cutText(lines[i], max);
      cut++;
    }
  }
  return { text: lines.join('\n'), cut };
}

// s when it has at most `max` characters (or a few more: the note would not
// shorten it), else its start and how much more there is:
// "aten::xxxx… (+1,234 characters)". A surrogate pair is not split.
export function cutText(s, max = DISPLAY_CUT) {
  const text = String(s);
  if (text.length <= max + 30) return text;
  let end = max;
  const c = text.charCodeAt(end - 1);
  if (c >= 0xd800 && c < 0xdc00) end--;
  return `${text.slice(0, end)}… (+${formatCount(text.length - end)} characters)`;
}

export function hex(addr) {
  return typeof addr === 'bigint' ? addr.toString(16) : Math.round(addr).toString(16);
}

// The names MemoryViz gives blocks and segments: b<hex address>_<reuse count>.
export function formatAddr(isSegment, addr, version) {
  return `${isSegment ? 's' : 'b'}${hex(addr)}_${version}`;
}

// One event as MemoryViz's event list prints it. `e` has action (code),
// name (for 'other'), addr, size, version and stream (null hides it).
export function formatEvent(e) {
  if (e.action === A.OOM) {
    return `OOM (requested ${formatSize(e.size)}, Device has ${formatSize(e.addr)} memory free)`;
  }
  if (e.action === A.SNAPSHOT) return 'snapshot';
  const name = e.action === A.OTHER ? (e.name || 'other') : ACTION_NAMES[e.action];
  const addr = formatAddr(isSegmentAction(e.action), e.addr, e.version);
  let s = `${name.padEnd(14)} ${addr.padEnd(18)} ${formatSize(e.size)}`;
  if (e.stream !== null && e.stream !== undefined) s += `\n              (stream ${e.stream})`;
  return s;
}

// torch's frame filter: allocator, unwinder and interpreter plumbing that
// says nothing about the user's code.
const SKIP_NAMES = [
  'unwind::unwind', 'CapturedTraceback::gather', 'gather_with_cpp', '_start',
  '__libc_start_main', 'PyEval_', 'PyObject_', 'PyFunction_',
];
const SKIP_FILES = [
  'core/boxing', '/Register', '/Redispatch', 'pythonrun.c', 'Modules/main.c',
  'Objects/call.c', 'Objects/methodobject.c', 'pycore_ceval.h', 'ceval.c',
  'cpython/abstract.h',
];
export function keepFrame(name, filename) {
  for (const s of SKIP_NAMES) if (name.includes(s)) return false;
  for (const s of SKIP_FILES) if (filename.includes(s)) return false;
  return true;
}

// Runs of three or more equal lines shrink to the line and a repeat count.
export function elideRepeats(lines) {
  const out = [];
  for (let i = 0; i < lines.length;) {
    let j = i + 1;
    while (j < lines.length && lines[j] === lines[i]) j++;
    const run = j - i;
    if (run >= 3) out.push(lines[i], `<repeats ${run - 1} times>`);
    else for (let k = i; k < j; k++) out.push(lines[k]);
    i = j;
  }
  return out;
}

export const NO_FRAMES_TEXT = [
  'No stack was recorded for this block. Possible reasons:',
  '  - it was allocated before memory history recording started;',
  '  - recording ran with context or stacks settings that leave this action out;',
  '  - it was allocated in the backward pass, which has Python stacks only when C++ stacks are recorded;',
  '  - it comes from the snapshot\'s segment state, which keeps no history for it;',
  '  - its allocation fell out of the history ring buffer (max_entries).',
].join('\n');

// How many of the first n values of the ascending array a are <= x.
export function upperBound(a, x, n = a.length) {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (a[mid] <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// Frame kinds by the engine's number (page column frames.kind).
// Device d's entry of an engine report listed per device (`memsight
// summary`, `leaks`), or null. Alike devices share one entry, which lists
// them as "alike": [[first, last], ...].
export function entryOfDevice(entries, d) {
  return (entries || []).find((x) => x.device === d ||
    (Array.isArray(x.alike) && x.alike.some(([a, b]) => a <= d && d <= b))) || null;
}

export const FRAME_KINDS = ['user', 'library', 'internal', 'native'];

// The frame that stands for a stack (innermost first): the innermost user
// frame, else library Python, else other native code; -1 for none.
export function siteIndex(kinds) {
  for (const want of ['user', 'library', 'native']) {
    const i = kinds.indexOf(want);
    if (i >= 0) return i;
  }
  return -1;
}

const frameLine = (f) => `${f.filename}:${f.line}:${f.name}${f.fx || ''}`;

// frames: [{name, filename, line, fx}], innermost first (as recorded).
// By default the user's frames first, from the site outward, with the
// hidden frames counted; {all: true}: every frame, tagged with its kind.
// kindOf(frame) gives a frame's kind (PageData.frameKind).
export function formatFrames(frames, { all = false, kindOf = (f) => f.baseKind || 'user' } = {}) {
  if (!frames.length) return NO_FRAMES_TEXT;
  const kinds = frames.map(kindOf);
  if (all) return frames.map((f, i) => `${kinds[i].padEnd(9)}${frameLine(f)}`).join('\n');
  const site = siteIndex(kinds);
  if (site < 0) {
    return `${countOf(frames.length, 'frame')} of allocator and interpreter plumbing ` +
      '(no code of yours): choose "all frames" to see them';
  }
  const sk = kinds[site];
  const shows = (k) => k === sk || (sk !== 'user' && k === 'user') || (sk === 'native' && k === 'library');
  const lines = [];
  let python = 0;
  let native = 0;
  frames.forEach((f, i) => {
    if (i >= site && shows(kinds[i])) lines.push(frameLine(f));
    else if (kinds[i] === 'user' || kinds[i] === 'library') python++;
    else native++;
  });
  const out = elideRepeats(lines);
  if (python + native) {
    const parts = [python ? `${python} Python` : '', native ? `${native} native` : ''].filter(Boolean);
    out.push(`[+${parts.join(', +')} ${python + native === 1 ? 'frame' : 'frames'} hidden]`);
  }
  return out.join('\n');
}

export function formatUserMetadata(m) {
  return m ? `User Metadata:\n  ${m}` : '';
}

// Java's String.hashCode over the decimal address: the state view's block colours.
export function hashCode(s) {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = ((h << 5) - h + s.charCodeAt(i)) | 0;
  return h;
}
export function blockColor(addr) {
  return TABLEAU10[Math.abs(hashCode(String(addr))) % 10];
}

// Durations in microseconds, as compact axis labels: "850µs", "12.5ms", "3.2s", "4m05s".
export function formatDuration(us) {
  const a = Math.abs(us);
  const sign = us < 0 ? '-' : '';
  if (a < 1000) return `${sign}${Math.round(a)}µs`;
  if (a < 1e6) return `${sign}${+(a / 1000).toFixed(a < 1e4 ? 2 : 1)}ms`;
  if (a < 60e6) return `${sign}${+(a / 1e6).toFixed(a < 1e7 ? 2 : 1)}s`;
  const m = Math.floor(a / 60e6);
  const s = Math.floor((a - m * 60e6) / 1e6);
  return `${sign}${m}m${String(s).padStart(2, '0')}s`;
}

// An axis label for a duration: the unit fits the largest label on the axis
// (`maxUs`), the decimals the tick step.
export function formatDurationTick(us, stepUs, maxUs = us) {
  const m = Math.abs(maxUs);
  const unit = m < 1000 ? 1 : m < 1e6 ? 1000 : 1e6;
  const name = unit === 1 ? 'µs' : unit === 1000 ? 'ms' : 's';
  const decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(stepUs / unit) + 1e-9)));
  return `${(us / unit).toFixed(decimals)}${name}`;
}

// Microseconds since the Unix epoch as an ISO time with microseconds (UTC).
export function formatTimestamp(us) {
  if (!us) return 'unknown';
  const ms = Math.floor(us / 1000);
  const iso = new Date(ms).toISOString();
  const micro = String(Math.round(us - ms * 1000)).padStart(3, '0');
  return `${iso.slice(0, 23)}${micro}Z`;
}

export function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', '\'': '&#39;',
  })[c]);
}

// Axis steps for byte values: 1, 2 or 5 times a power of 1024 times a power of 10... kept binary
// so labels read "256.0MiB", "512.0MiB", "768.0MiB".
export function niceByteStep(range, targetTicks) {
  const raw = range / Math.max(1, targetTicks);
  if (raw <= 0 || !isFinite(raw)) return 1;
  const unit = 1024 ** Math.max(0, Math.floor(Math.log(raw) / Math.log(1024)));
  const r = raw / unit;
  const steps = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
  for (const s of steps) if (r <= s) return s * unit;
  return 1024 * unit;
}

// Decimal steps (1, 2, 5 x 10^k) for counts and durations.
export function niceStep(range, targetTicks) {
  const raw = range / Math.max(1, targetTicks);
  if (raw <= 0 || !isFinite(raw)) return 1;
  const p = 10 ** Math.floor(Math.log10(raw));
  const r = raw / p;
  return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * p;
}

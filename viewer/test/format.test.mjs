import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  A, elideRepeats, formatAddr, formatDuration, formatEvent, formatFrames, formatSize,
  formatDurationTick, formatTimestamp, hashCode, blockColor, keepFrame, niceByteStep, NO_FRAMES_TEXT, TABLEAU10,
  siteIndex, formatCount, formatPercent, signedPercent, percentPoints, signedSize, countOf, fixed,
} from '../src/format.js';
import { readFileSync } from 'node:fs';

// The cases the C++ text helpers are tested on (tests/unit/text_format_test.cpp
// reads the same file): the page prints every value as the text reports do.
test('the page formats sizes, percents and counts as the text reports', () => {
  const file = new URL('../../tests/data/text_formats.tsv', import.meta.url);
  const fns = {
    bytes: (v) => formatSize(v, false), signed_bytes: signedSize, percent: formatPercent,
    signed_percent: signedPercent, percent_points: percentPoints, count: formatCount,
  };
  let n = 0;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const [fn, arg, want] = line.split('\t');
    assert.ok(fns[fn], `unknown function ${fn}`);
    assert.equal(fns[fn](Number(arg)), want, `${fn}(${arg})`);
    n++;
  }
  assert.ok(n > 30);
  assert.equal(countOf(1, 'trace entry', 'trace entries'), '1 trace entry');
  assert.equal(countOf(1000, 'block'), '1,000 blocks');
  assert.equal(countOf(0, 'block'), '0 blocks');
});

test('fixed rounds as printf: a value exactly halfway goes to the even digit', () => {
  // printf("%.Nf") of each, as the C++ text prints it
  for (const [v, d, want] of [[2.25, 1, '2.2'], [2.75, 1, '2.8'], [-2.25, 1, '-2.2'], [0.0625, 3, '0.062'],
    [0.0635, 3, '0.064'], [1.5, 0, '2'], [2.5, 0, '2'], [12.35, 1, '12.3'], [28226.871, 3, '28226.871']]) {
    assert.equal(fixed(v, d), want, `${v} to ${d}`);
  }
});

test('formatSize writes sizes as the text reports do, the byte count as MemoryViz', () => {
  assert.equal(formatSize(0), '0.0B (0 bytes)');
  assert.equal(formatSize(400), '400.0B (400 bytes)');
  assert.equal(formatSize(2000000), '1.9MiB (2,000,000 bytes)');
  assert.equal(formatSize(1000000), '976.6KiB (1,000,000 bytes)');
  assert.equal(formatSize(2097152, false), '2.0MiB');
  assert.equal(formatSize(2304, false), '2.2KiB');  // a tie rounds to even, as printf (toFixed: 2.3KiB)
  assert.equal(formatSize(4e13, false), '36.4TiB');
  assert.equal(formatSize(1023, false), '1023.0B');
  assert.equal(formatSize(-2048, false), '-2.0KiB');
  assert.equal(formatSize(2 ** 90, false), '1024.0YiB');
});

test('addresses are named b<hex>_<version> and s<hex>_<version>', () => {
  assert.equal(formatAddr(false, 0x7f064c000000, 0), 'b7f064c000000_0');
  assert.equal(formatAddr(true, 0x7f064c000000, 12), 's7f064c000000_12');
});

test('formatEvent pads like the event list of memory_viz', () => {
  const e = { action: A.ALLOC, addr: 0x7f0000000200, size: 2000000, version: 3, stream: 0 };
  assert.equal(formatEvent(e),
    'alloc          b7f0000000200_3    1.9MiB (2,000,000 bytes)\n              (stream 0)');
  assert.equal(formatEvent({ ...e, stream: null }),
    'alloc          b7f0000000200_3    1.9MiB (2,000,000 bytes)');
  assert.equal(formatEvent({ ...e, action: A.SEGMENT_ALLOC, stream: 2 }).split('\n')[0],
    'segment_alloc  s7f0000000200_3    1.9MiB (2,000,000 bytes)');
  assert.equal(formatEvent({ ...e, action: A.FREE }).slice(0, 15), 'free           ');
  assert.equal(formatEvent({ action: A.OOM, addr: 1024, size: 2097152, stream: 0 }),
    'OOM (requested 2.0MiB (2,097,152 bytes), Device has 1.0KiB (1,024 bytes) memory free)');
  assert.equal(formatEvent({ action: A.SNAPSHOT, addr: 0, size: 5, stream: 0 }), 'snapshot');
  assert.equal(formatEvent({ ...e, action: A.OTHER, name: 'annotate', stream: null }).slice(0, 8), 'annotate');
});

test('frames: user code first, the rest counted; all frames on request', () => {
  const f = (name, filename, line, baseKind) => ({ name, filename, line, fx: '', baseKind });
  const frames = [
    f('torch::unwind::unwind()', '??', 0, 'internal'),
    f('linear', '/t/functional.py', 5, 'library'),
    f('forward', '/m/model.py', 12, 'user'),
    f('_call_impl', '/t/module.py', 1, 'library'), f('_call_impl', '/t/module.py', 1, 'library'),
    f('PyEval_EvalFrame', '??', 0, 'internal'),
    f('step', '/m/train.py', 7, 'user'), f('step', '/m/train.py', 7, 'user'), f('step', '/m/train.py', 7, 'user'),
    f('<module>', '/m/train.py', 3, 'user'),
  ];
  assert.equal(formatFrames(frames),
    '/m/model.py:12:forward\n/m/train.py:7:step\n<repeats 2 times>\n/m/train.py:3:<module>\n' +
    '[+3 Python, +2 native frames hidden]');
  const all = formatFrames(frames, { all: true }).split('\n');
  assert.equal(all.length, frames.length);
  assert.equal(all[0], 'internal ??:0:torch::unwind::unwind()');
  // a wider rule: torch's functional.py counts as user code
  const kindOf = (fr) => (fr.filename.includes('/t/functional') ? 'user' : fr.baseKind);
  assert.ok(formatFrames(frames, { kindOf }).startsWith('/t/functional.py:5:linear\n'));
  // no user frame: the innermost library frame stands for the stack
  const lib = frames.filter((fr) => fr.baseKind !== 'user');
  assert.ok(formatFrames(lib).startsWith('/t/functional.py:5:linear\n/t/module.py:1:_call_impl'));
  assert.match(formatFrames([frames[0], frames[5]]), /^2 frames of allocator and interpreter plumbing/);
  assert.equal(siteIndex(['internal', 'library', 'user']), 2);
  assert.equal(siteIndex(['internal', 'native', 'library']), 2);
  assert.equal(siteIndex(['internal', 'native']), 1);
  assert.equal(siteIndex(['internal']), -1);
  assert.equal(formatFrames([]), NO_FRAMES_TEXT);
  assert.ok(!keepFrame('foo_start_bar', 'x.py'));  // plain substring test, as torch does
  assert.ok(keepFrame('train', 'x.py'));
  assert.deepEqual(elideRepeats(['a', 'a', 'b', 'b', 'b', 'b']), ['a', 'a', 'b', '<repeats 3 times>']);
});

test('block colours hash the decimal address as Java String.hashCode does', () => {
  assert.equal(hashCode('0'), 48);
  assert.equal(hashCode('123'), 48690);
  assert.equal(hashCode('139689994485760'), javaHash('139689994485760'));
  assert.equal(blockColor(123), TABLEAU10[48690 % 10]);
});

function javaHash(s) {
  let h = 0n;
  for (const c of s) h = (h * 31n + BigInt(c.charCodeAt(0))) & 0xffffffffn;
  return Number(BigInt.asIntN(32, h));
}

test('axis steps and durations', () => {
  assert.equal(niceByteStep(600 * 2 ** 20, 5), 128 * 2 ** 20);
  assert.equal(niceByteStep(3000, 5), 1024);
  assert.equal(formatDuration(850), '850µs');
  assert.equal(formatDuration(12500), '12.5ms');
  assert.equal(formatDuration(3.2e6), '3.2s');
  assert.equal(formatDuration(245e6), '4m05s');
  assert.equal(formatTimestamp(1795278926459154), '2026-11-21T16:35:26.459154Z');
  assert.equal(formatTimestamp(0), 'unknown');
  assert.equal(formatDurationTick(1545000, 5000), '1.545s');
  assert.equal(formatDurationTick(1550000, 10000), '1.55s');
  assert.equal(formatDurationTick(2000000, 1000000), '2s');
  assert.equal(formatDurationTick(2500, 500), '2.5ms');
  assert.equal(formatDurationTick(0, 500, 9000), '0.0ms');
  assert.equal(formatDurationTick(40, 20), '40µs');
});

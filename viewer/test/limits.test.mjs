// What the pages do with long names and large counts: one size rule shared
// with the engine's reports, names cut with the whole text one click away
// (ui.js), steps and devices summarised without walking all of them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cutLines, cutText, DISPLAY_CUT, formatSize } from '../src/format.js';
import { compactPeak, curvePeak, expandStep, stepPeakCells, stepTitle } from '../src/profile_app.js';

test('sizes choose the unit after rounding, as format_bytes does', () => {
  const almostTiB = 1023.96 * 2 ** 30;
  assert.equal(formatSize(almostTiB, false), '1.0TiB');  // MemoryViz: "1024.0GiB"
  assert.equal(formatSize(2 ** 40, false), '1.0TiB');
  assert.equal(formatSize(1023.9 * 1024, false), '1023.9KiB');
  assert.equal(formatSize(1023.95 * 1024, false), '1.0MiB');
});

test('cutText keeps short text and says how much it cut', () => {
  assert.equal(cutText('aten::mm'), 'aten::mm');
  const long = 'x'.repeat(1_000_000);
  assert.equal(cutText(long), `${'x'.repeat(DISPLAY_CUT)}… (+999,800 characters)`);
  assert.equal(cutText(long, 10), 'xxxxxxxxxx… (+999,990 characters)');
  // a surrogate pair is not split
  const emoji = '😀'.repeat(40);
  assert.equal(cutText(emoji, 5), '😀😀… (+76 characters)');
  // within the note's length of the limit: whole
  assert.equal(cutText('y'.repeat(230)), 'y'.repeat(230));
});

test('cutLines cuts only the long lines of a stack', () => {
  const text = `train.py:3:main\n${'y'.repeat(1000)}\nmodel.py:9:forward`;
  const { text: shown, cut } = cutLines(text, 100);
  assert.equal(cut, 1);
  assert.deepEqual(shown.split('\n').map((l) => l.length), [15, 100 + '… (+900 characters)'.length, 18]);
  assert.deepEqual(cutLines('a\nb'), { text: 'a\nb', cut: 0 });
});

test('a step is titled by its occurrence when its number repeats', () => {
  assert.equal(stepTitle({ step: null }), 'whole trace');
  assert.equal(stepTitle({ step: 3, occurrence: 1, occurrences: 1 }), 'step 3');
  assert.equal(stepTitle({ step: 3, occurrence: 2, occurrences: 2 }), 'step 3 (occurrence 2 of 2)');
});

test('a step of 100,000 devices is summed up by its first four', () => {
  const devices = {};
  for (let d = 0; d < 100_000; d++) devices[`cuda:${d}`] = { peak_allocated: d, peak_reserved: 2 * d };
  const s = { devices };
  assert.equal(stepPeakCells(s), 'cuda:0 0.0B / 0.0B · cuda:1 1.0B / 2.0B · cuda:2 2.0B / 4.0B · ' +
    'cuda:3 3.0B / 6.0B · +99,996 more devices');
  assert.equal(stepPeakCells({ devices: {} }), '');
});

test('a curve of 1,000,000 points finds its peak without spreading', () => {
  const allocated = new Float64Array(1_000_000);
  allocated[777_777] = 5;
  assert.equal(curvePeak({ allocated }), 777_777);
});

test('a step as the page holds it reads back as the report writes it', () => {
  const strings = ['', 'aten::mm', 'train.py:3:step', 'gemm'];
  const a = [7, 2, 3, 100.5, 20, [[0, 4096, 8192, 2, 3000, 1, 1000, [[1, 2, 2048, 1]], [[1, 0, 3000, 2]]]],
    [[1, 12.5, 2]], [[3, 4, 1]]];
  assert.deepEqual(expandStep(a, strings), {
    step: 7, occurrence: 2, occurrences: 3, ts_us: 100.5, dur_us: 20,
    devices: {
      'cuda:0': {
        peak_allocated: 4096, peak_reserved: 8192, allocs: 2, alloc_bytes: 3000, frees: 1, free_bytes: 1000,
        live_at_peak: [{ op: 'aten::mm', stack: 'train.py:3:step', bytes: 2048, count: 1 }],
        allocated_most: [{ op: 'aten::mm', stack: '', bytes: 3000, count: 2 }],
      },
    },
    top_ops: [{ name: 'aten::mm', total_us: 12.5, count: 2 }],
    top_kernels: [{ name: 'gemm', total_us: 4, count: 1 }],
  });
  assert.equal(compactPeak(a), 4096);
  assert.equal(compactPeak([null, 1, 1, 0, 1, [], [], []]), 0);
});

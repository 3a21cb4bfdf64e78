import assert from 'node:assert/strict';
import { test } from 'node:test';
import { byteTicks, indexAt, stackSeries, ticks } from '../src/chart.js';
import { peakBreakdown } from '../src/profile_app.js';

test('stacking adds the series bottom first', () => {
  const s = stackSeries([[1, 2, 3], [10, 0, 5]]);
  assert.deepEqual([...s[0]], [1, 2, 3]);
  assert.deepEqual([...s[1]], [11, 2, 8]);
});

test('indexAt finds the last point at or before x', () => {
  const ts = [0, 10, 20, 30];
  assert.equal(indexAt(ts, -5), 0);
  assert.equal(indexAt(ts, 0), 0);
  assert.equal(indexAt(ts, 19.9), 1);
  assert.equal(indexAt(ts, 20), 2);
  assert.equal(indexAt(ts, 99), 3);
});

test('ticks are round and cover the range', () => {
  assert.deepEqual(ticks(0, 100, 5), [0, 20, 40, 60, 80, 100]);
  assert.deepEqual(ticks(3, 7, 4), [3, 4, 5, 6, 7]);
  assert.deepEqual(byteTicks(3 * 2 ** 30, 3), [0, 2 ** 30, 2 * 2 ** 30, 3 * 2 ** 30]);
  assert.deepEqual(byteTicks(0, 5), [0]);
});

test('the peak is explained by category, largest first', () => {
  const data = {
    categories: ['parameter', 'optimizer state', 'activation'],
    series: [[5, 5], [0, 10], [1, 35]],
    peak: 1,
  };
  assert.deepEqual(peakBreakdown(data).map((r) => [r.name, r.bytes]),
    [['activation', 35], ['optimizer state', 10], ['parameter', 5]]);
  assert.equal(peakBreakdown({ ...data, peak: -1 }).length, 0);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chartGeometry, leaksOfDevice } from '../src/view_leaks.js';

test('a device\'s leak report is found by its number', () => {
  const leaks = { devices: [{ device: 0, verdict: 'none' }, { device: 3, verdict: 'leak' }] };
  assert.equal(leaksOfDevice(leaks, 3).verdict, 'leak');
  assert.equal(leaksOfDevice(leaks, 1), null);
  assert.equal(leaksOfDevice(undefined, 0), null);
});

test('alike devices share one report, found by any of their numbers', () => {
  const leaks = { devices: [{ device: 0, verdict: 'leak' },
    { device: 1, verdict: 'no iterations', alike: [[1, 4], [9, 9]] }] };
  for (const d of [1, 2, 4, 9]) assert.equal(leaksOfDevice(leaks, d).device, 1);
  assert.equal(leaksOfDevice(leaks, 0).verdict, 'leak');
  assert.equal(leaksOfDevice(leaks, 5), null);
  assert.equal(leaksOfDevice(leaks, 10), null);
});

test('series share one scale from 0 to the largest value', () => {
  const g = chartGeometry([[0, 5, 10], [10, 10, 10]], 104, 54, 2);
  assert.equal(g.max, 10);
  assert.deepEqual(g.lines[0], [[2, 52], [52, 27], [102, 2]]);
  assert.deepEqual(g.lines[1].map(([, y]) => y), [2, 2, 2]);
});

test('one point sits in the middle; all zeros lie on the floor', () => {
  const g = chartGeometry([[7]], 100, 50, 0);
  assert.deepEqual(g.lines[0], [[50, 0]]);
  const z = chartGeometry([[0, 0]], 100, 50, 0);
  assert.equal(z.max, 0);
  assert.deepEqual(z.lines[0], [[0, 50], [100, 50]]);
});

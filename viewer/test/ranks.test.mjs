// The ranks page's pure parts: the chart's bars by mode, rank ranges, the
// difference text, and which rank the page opens on.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chartModel, labelStride } from '../src/ranks_chart.js';
import { deltaText, firstRank, rankRanges, rangesText, safeLink } from '../src/ranks_app.js';

const MiB = 1 << 20;
const kinds = (o) => ({ parameter: 0, gradient: 0, optimizer_state: 0, buffer: 0, activation: 0, temporary: 0,
  autograd_internal: 0, before_recording: 0, unknown: 0, ...o });
const rank = (r, peak, { frag = 0.1, oom = false } = {}) => ({
  rank: r, peak_allocated: { bytes: peak, event: 3, time_us: 0 }, peak_reserved: { bytes: peak + 8 * MiB },
  at_dump: { allocated: peak / 2, reserved: peak, fragmentation: frag },
  kinds_peak: kinds({ parameter: peak / 2, activation: peak / 4 }), kinds_now: kinds({ parameter: peak / 2 }),
  ooms: oom ? [{ verdict: 'demand' }] : [],
});
const report = (ranks, extra = {}) => ({
  ranks, median: { peak_allocated: 100 * MiB, allocated_now: 50 * MiB, fragmentation: 0.1 },
  ooms: [], differ: [], typical_rank: ranks[0].rank, ...extra,
});

test('bars stack the kinds, the rest is not classified, ticks are the reserved memory', () => {
  const m = chartModel(report([rank(0, 100 * MiB), rank(1, 200 * MiB)]), 'peak');
  assert.deepEqual(m.bars[1].parts.map((p) => [p.name, p.value / MiB]),
    [['parameter', 100], ['activation', 50], ['not classified', 50]]);
  assert.equal(m.bars[1].total, 200 * MiB);
  assert.equal(m.bars[1].tick, 208 * MiB);
  assert.equal(m.max, 208 * MiB);
  assert.equal(m.median, 100 * MiB);
  const dump = chartModel(report([rank(0, 100 * MiB)]), 'dump');
  assert.deepEqual(dump.bars[0].parts.map((p) => p.name), ['parameter']);  // the dump's 50 MiB are all parameters
  assert.equal(dump.bars[0].tick, 100 * MiB);
  const frag = chartModel(report([rank(0, MiB, { frag: 0.4 })]), 'fragmentation');
  assert.equal(frag.percent, true);
  assert.equal(frag.bars[0].total, 0.4);
  assert.equal(frag.bars[0].tick, null);
});

test('rank labels stay apart however many ranks', () => {
  assert.equal(labelStride(8, 800), 1);
  assert.equal(labelStride(1024, 1300), 50);
  assert.ok(labelStride(1024, 1300) * (1300 / 1024) >= 34);
});

test('rank ranges and differences read as the text report writes them', () => {
  assert.equal(rankRanges([7, 0, 1, 2, 3, 5, 8, 9]), '0-3, 5, 7-9');
  assert.equal(rankRanges([4, 5]), '4, 5');
  assert.equal(rangesText([[0, 0], [2, 99999999]]), '0, 2-99,999,999');  // a declared world size, as ranges
  assert.equal(deltaText({
    metric: 'peak_allocated', value: 300 * MiB, median: 200 * MiB,
    by: [{ kind: 'kind', name: 'activation', delta: 120 * MiB }, { kind: 'module', name: '', delta: 100 * MiB },
      { kind: 'kind', name: 'gradient', delta: -20 * MiB }],
  }), 'peak allocated 300.0MiB, +100.0MiB (+50.0%) against the median 200.0MiB; by kind: activation +120.0MiB, ' +
    'gradient -20.0MiB; by module: (model) +100.0MiB');
  assert.equal(deltaText({ metric: 'fragmentation', value: 0.5, median: 0.05, by: [] }),
    'fragmentation 50.0% against the median 5.0%');
});

test('the page opens on the OOMed rank, else the first that differs, else the typical one', () => {
  const ranks = [rank(0, MiB), rank(1, MiB), rank(2, MiB)];
  assert.equal(firstRank(report(ranks, { ooms: [{ rank: 2 }], differ: [{ rank: 1 }] })), 2);
  assert.equal(firstRank(report(ranks, { differ: [{ rank: 1 }] })), 1);
  assert.equal(firstRank(report(ranks, { typical_rank: 2 })), 2);
});

test('a rank page link is followed only as the page writer makes it: relative, percent-encoded', () => {
  assert.equal(safeLink('./report.ranks/rank2.html'), './report.ranks/rank2.html');
  assert.equal(safeLink('./javascript%3Avoid%28alert%281%29%29.ranks/rank2.html'),
    './javascript%3Avoid%28alert%281%29%29.ranks/rank2.html');
  for (const bad of ['javascript:alert(1)', 'report.ranks/rank2.html', './a b.html', 'data:text/html,x', './x?y', '', null]) {
    assert.equal(safeLink(bad), '', String(bad));
  }
});

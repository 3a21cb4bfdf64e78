#!/usr/bin/env node
// The pages at hostile sizes: a trace of 200,000 ProfilerSteps, traces and
// snapshots naming 100,000 devices, and 100 MB op / frame names. For each:
// the command's wall time and peak memory (GNU time), the page's size, and
// the time from navigation to the first picture in Debian's headless
// Chromium (document.body.dataset.ready, set two animation frames after the
// page was built), median of --repeat runs.
//
//   node bench/page_scale_bench.mjs [--memsight build/release/memsight] [--repeat 3] [--only NAME]
//
// Inputs are written to bench/.data/scale/ (about 700 MB; kept between runs).
import { execFileSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch, openReport } from '../tests/browser/harness.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DATA = join(ROOT, 'bench', '.data', 'scale');
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : fallback;
};
const memsight = arg('--memsight', join(ROOT, 'build', 'release', 'memsight'));
const repeat = +arg('--repeat', 3);
const only = arg('--only', null);

const span = (cat, name, ts, dur) => JSON.stringify({ ph: 'X', cat, name, pid: 1, tid: 1, ts, dur });
const memEvent = (ts, device, addr, bytes, total) => JSON.stringify({
  ph: 'i', cat: 'cpu_instant_event', name: '[memory]', pid: 1, tid: 1, ts,
  args: { 'Device Type': 1, 'Device Id': device, Addr: addr, Bytes: bytes, 'Total Allocated': total, 'Total Reserved': 1 << 21 },
});

// Writes a trace event by event (a 100 MB name does not fit a JS string twice).
async function writeTrace(path, events) {
  const out = createWriteStream(path);
  const put = (s) => new Promise((ok) => (out.write(s) ? ok() : out.once('drain', ok)));
  await put('{"traceEvents":[');
  let first = true;
  for (const e of events()) {
    await put(first ? e : `,\n${e}`);
    first = false;
  }
  await put(']}');
  await new Promise((ok) => out.end(ok));
}

const CASES = {
  'steps-200k': {
    what: 'trace, 200,000 ProfilerSteps, one allocation each',
    async make(path) {
      await writeTrace(path, function* gen() {
        for (let i = 0; i < 200000; i++) {
          yield span('user_annotation', `ProfilerStep#${i}`, i * 10, 9);
          yield span('cpu_op', 'aten::empty', i * 10 + 1, 2);
          yield memEvent(i * 10 + 1.5, 0, 1000 + i, 512, 512 * (1 + (i % 7)));
        }
      });
    },
    command: (f, o) => ['profile', f, '-o', o],
  },
  'devices-100k': {
    what: 'trace, 100,000 devices, one allocation each',
    async make(path) {
      await writeTrace(path, function* gen() {
        yield span('cpu_op', 'aten::empty', 0, 1e6);
        for (let d = 0; d < 100000; d++) yield memEvent(1 + d, d, 1000, 512, 512);
      });
    },
    command: (f, o) => ['profile', f, '-o', o],
  },
  'names-100mb': {
    what: 'trace, 100 MB op, Python function and kernel names',
    async make(path) {
      const big = (c) => c.repeat(100 << 20);
      await writeTrace(path, function* gen() {
        yield span('cpu_op', `aten::${big('x')}`, 0, 10);
        yield JSON.stringify({ ph: 'X', cat: 'python_function', name: `f.py(1): ${big('y')}`, pid: 1, tid: 1, ts: 0, dur: 10, args: { 'Python id': 1 } });
        yield memEvent(1, 0, 16, 512, 512);
        yield JSON.stringify({ ph: 'X', cat: 'kernel', name: `k${big('z')}`, pid: 1, tid: 1, ts: 2, dur: 3, args: { device: 0, correlation: 5 } });
      });
    },
    command: (f, o) => ['profile', f, '-o', o],
  },
  'snapshot-devices-100k': {
    what: 'snapshot, 100,000 devices, one allocation each',
    make: (path) => execFileSync('python3', [join(ROOT, 'tests/browser/make_scale_snapshot.py'), 'devices', path, '100000']),
    command: (f, o) => ['view', f, '-o', o],
  },
  'snapshot-names-100mb': {
    what: 'snapshot, one 100 MB frame name',
    make: (path) => execFileSync('python3', [join(ROOT, 'tests/browser/make_scale_snapshot.py'), 'names', path, String(100 << 20)]),
    command: (f, o) => ['view', f, '-o', o],
  },
};

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  mkdirSync(DATA, { recursive: true });
  const out = mkdtempSync(join(tmpdir(), 'memsight-scale-bench-'));
  const { context, close } = await launch();
  console.log(`memsight: ${memsight}; repeats: ${repeat}; chromium: ${execFileSync('/usr/bin/chromium', ['--version']).toString().trim()}\n`);
  console.log('| input | input size | command (median s) | command peak RSS | page size | first picture (median ms) |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  try {
    for (const [name, c] of Object.entries(CASES)) {
      if (only && name !== only) continue;
      const input = join(DATA, name + (name.startsWith('snapshot') ? '.pickle' : '.json'));
      if (!existsSync(input)) await c.make(input);
      const html = join(out, `${name}.html`);
      const times = [];
      const rss = [];
      for (let i = 0; i < repeat; i++) {
        const stat = join(out, 'time.txt');
        execFileSync('/usr/bin/time', ['-f', '%e %M', '-o', stat, memsight, ...c.command(input, html)], { stdio: 'ignore' });
        const [s, kb] = readFileSync(stat, 'utf8').trim().split(/\s+/).slice(-2).map(Number);
        times.push(s);
        rss.push(kb);
      }
      const pictures = [];
      for (let i = 0; i < repeat; i++) {
        const t = performance.now();
        const { page, problems } = await openReport(context, html);
        pictures.push(performance.now() - t);
        if (problems.errors.length || problems.requests.length) throw new Error(`${name}: ${JSON.stringify(problems)}`);
        await page.close();
      }
      const mb = (b) => `${(b / 1e6).toFixed(1)} MB`;
      console.log(`| ${c.what} | ${mb(statSync(input).size)} | ${median(times).toFixed(2)} | ${(median(rss) / 1024).toFixed(0)} MiB | ` +
        `${mb(statSync(html).size)} | ${median(pictures).toFixed(0)} |`);
    }
  } finally {
    await close();
    rmSync(out, { recursive: true, force: true });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

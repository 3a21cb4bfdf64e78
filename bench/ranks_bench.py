#!/usr/bin/env python3
"""`memsight ranks`: many ranks merged in bounded memory, and a page that
stays usable with a thousand ranks.

    bench/ranks_bench.py [--memsight build/release/memsight] [--ranks 1,8,64] [--small 1024]

Part 1, big ranks: ../shared/fixtures/large/large.pickle.xz (856,152 trace
entries, 73.5 MB) is decompressed once into --data (default
/tmp/memsight-ranks-bench); N ranks are N symbolic links to that one file
(rank0.pickle ... each read in full, from the page cache). For each N, the
wall time and peak RSS (wait4) of `memsight ranks DIR --json` and of the page
(`-o report.html --pages none`), the per-rank cost against pickle.load of the
same file (what every torch tool starts with), and whether memory grows with
N: it must not, beyond the per-rank summaries (a few KB each).

Part 2, many small ranks: --small synthetic ranks from
tests/data/make_categories.py (a scripted training loop on a simulated
caching allocator; activation sizes vary a little by rank, a few ranks hold
three times as much, one runs out of memory), merged into a page; then
bench/ranks_page_bench.mjs opens it in headless Chromium (offline) and
times it: ready after navigation, a hover's readout, a click on a bar, a
sort of the table.
"""
from __future__ import annotations

import argparse
import json
import lzma
import os
import pathlib
import pickle
import random
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from engine_bench import run_rss, warm  # noqa: E402  (wall time and peak RSS by wait4)
SHARED = ROOT.parent / "shared"
MiB = 1 << 20


def median_run(cmd: list[str], repeat: int) -> tuple[float, int]:
    runs = [run_rss(cmd) for _ in range(repeat)]
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs)


def large_fixture(data: pathlib.Path, source: pathlib.Path) -> pathlib.Path:
    data.mkdir(parents=True, exist_ok=True)
    large = data / "large.pickle"
    if not large.exists():
        with lzma.open(source) as f, open(large, "wb") as out:
            shutil.copyfileobj(f, out)
    warm(large)
    return large


def big_ranks(args, data: pathlib.Path) -> None:
    large = large_fixture(data, args.large)
    size = large.stat().st_size
    print(f"## {size / 1e6:.1f} MB snapshot per rank ({large}), N ranks = N symbolic links to it\n")
    code = f"import pickle,sys; pickle.load(open({str(large)!r},'rb'))"
    t_pickle, rss_pickle = median_run([args.python, "-c", code], args.repeat)
    print(f"pickle.load of one rank's file: {t_pickle:.2f} s, peak RSS {rss_pickle / 1e6:.0f} MB\n")
    print("| ranks | jobs | `ranks --json` (s) | per rank (s) | pickle.load per rank / memsight per rank | "
          "peak RSS (MB) | RSS / one file | `-o report.html` (s) | page RSS (MB) | page size (KB) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in args.ranks:
        d = data / f"ranks{n}"
        if not d.exists():
            d.mkdir()
            for r in range(n):
                os.symlink(large, d / f"rank{r}.pickle")
        for jobs in args.jobs:
            base = [args.memsight, "ranks", str(d)] + (["--jobs", str(jobs)] if jobs else [])
            t, rss = median_run(base + ["--json"], args.repeat)
            page = data / f"report{n}.html"
            tp, rssp = median_run(base + ["-o", str(page), "--pages", "none"], args.repeat)
            print(f"| {n} | {jobs or 'default'} | {t:.2f} | {t / n:.3f} | {t_pickle / (t / n):.1f}x | "
                  f"{rss / 1e6:.0f} | {rss / size:.2f} | {tp:.2f} | {rssp / 1e6:.0f} | "
                  f"{page.stat().st_size / 1e3:.0f} |", flush=True)
    print()


def small_ranks(args, data: pathlib.Path) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "data"))
    import make_categories as mc

    d = data / f"small{args.small}"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    rng = random.Random(21)
    t0 = time.perf_counter()
    total = 0
    for r in range(args.small):
        act = 2 * MiB + rng.randrange(0, 8) * 16 * 1024
        if r % 97 == 5:
            act *= 3  # a few ranks hold three times the activations
        snap = mc.train(mc.Sim("marks", tags=True), steps=2, layers=4, act=act,
                        oom_at_step=1 if r == args.small // 2 else None)
        snap["memsight_rank"] = {"rank": r, "world_size": args.small, "seq": 1, "tag": "oom",
                                 "origin_rank": args.small // 2, "torch": "2.5.1",
                                 "device_name": "NVIDIA H100 80GB HBM3", "device_total": 80 << 30}
        raw = pickle.dumps(snap, protocol=4)
        total += len(raw)
        (d / f"oom_1_rank{r}.pickle").write_bytes(raw)
    print(f"## {args.small} synthetic ranks ({total / args.small / 1e3:.1f} KB each, made in "
          f"{time.perf_counter() - t0:.1f} s)\n")
    page = data / "small.html"
    t, rss = median_run([args.memsight, "ranks", str(d), "-o", str(page), "--pages", "none"], args.repeat)
    tj, rssj = median_run([args.memsight, "ranks", str(d), "--json"], args.repeat)
    print("| what | wall (s) | peak RSS (MB) | output |")
    print("| --- | --- | --- | --- |")
    print(f"| `ranks DIR --json` | {tj:.2f} | {rssj / 1e6:.0f} | |")
    print(f"| `ranks DIR -o report.html` | {t:.2f} | {rss / 1e6:.0f} | {page.stat().st_size / 1e6:.2f} MB |")
    if args.no_browser:
        return
    node = subprocess.run(["node", str(ROOT / "bench" / "ranks_page_bench.mjs"), str(page),
                           str(args.small), str(args.repeat)], capture_output=True, text=True, cwd=ROOT)
    if node.returncode != 0:
        sys.exit(f"ranks_page_bench.mjs failed: {node.stderr[-2000:]}")
    res = json.loads(node.stdout.strip().splitlines()[-1])
    print(f"\nIn headless Chromium (median of {args.repeat}): ready {res['ready_ms']:.0f} ms after "
          f"navigation, hover readout {res['hover_ms']:.0f} ms, click to details {res['click_ms']:.0f} ms, "
          f"table sort {res['sort_ms']:.0f} ms; {res['rows']} table rows, {res['bars']} bars; "
          f"console errors: {res['errors']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memsight", default=str(ROOT / "build" / "release" / "memsight"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--data", type=pathlib.Path, default=pathlib.Path("/tmp/memsight-ranks-bench"))
    ap.add_argument("--large", type=pathlib.Path, default=SHARED / "fixtures" / "large" / "large.pickle.xz")
    ap.add_argument("--ranks", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 64])
    ap.add_argument("--jobs", type=lambda s: [int(x) for x in s.split(",")], default=[0],
                    help="--jobs values to run (0: the default)")
    ap.add_argument("--small", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-big", action="store_true")
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cpus; memsight: {args.memsight}; repeats: {args.repeat}; "
          f"{time.strftime('%Y-%m-%d')}\n")
    if not args.skip_big:
        big_ranks(args, args.data)
    if args.small:
        small_ranks(args, args.data)


if __name__ == "__main__":
    main()

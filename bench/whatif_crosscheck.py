#!/usr/bin/env python3
"""`memsight whatif` predictions against real runs, off the GPU.

    bench/whatif_crosscheck.py DIR [--memsight build/release/memsight] [--jobs N]

DIR holds recordings made by tests/gpu/whatif_workloads.py (kept by
tests/gpu/test_whatif_gpu.py with MEMSIGHT_GPU_OUT set, in
whatif_runs.tar.gz): WORKLOAD-TAG.pickle, the snapshot of one run under
the allocator settings TAG names, and WORKLOAD-TAG.json, that run's real
max_memory_reserved(), OOM, device memory and memory fraction. Every
workload's history recorded under each setting is simulated under each
other setting, exactly as test_whatif_gpu.py does, and checked the same
way: within 1% of the target run's real max_memory_reserved() and its OOM
or survival exactly. Prints the Markdown table, then the pass count; exits
1 when any prediction misses.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def gpu_test():
    """test_whatif_gpu.py itself, for its settings and verdict (one definition
    of how a prediction is made and judged)."""
    os.environ["MEMSIGHT_BIN"] = ARGS.memsight
    spec = importlib.util.spec_from_file_location("test_whatif_gpu", ROOT / "tests/gpu/test_whatif_gpu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    t = gpu_test()
    runs = {}
    for js in sorted(Path(ARGS.dir).glob("*.json")):
        name, _, tag = js.stem.rpartition("-")
        if tag in t.SETTINGS and js.with_suffix(".pickle").exists():
            info = json.loads(js.read_text())
            info["snapshot"] = str(js.with_suffix(".pickle"))
            runs[name, tag] = info
    workloads = sorted({n for n, _ in runs}, key=lambda n: (t.WORKLOADS + [n]).index(n))
    jobs = [(w, s, d) for w in workloads for s in t.SETTINGS for d in t.SETTINGS
            if s != d and (w, s) in runs and (w, d) in runs]
    if not jobs:
        print(f"no WORKLOAD-TAG.pickle/.json pairs in {ARGS.dir}", file=sys.stderr)
        return 2

    def one(job):
        name, src, dst = job
        try:
            dev = t.simulate(runs[name, src], dst)
        except Exception as e:  # a failed run is a miss, shown as such
            return job, None, str(e).splitlines()[0] if str(e) else type(e).__name__
        (res,) = dev["results"]
        return job, (dev, res), None

    with ThreadPoolExecutor(max_workers=ARGS.jobs) as pool:
        done = list(pool.map(one, jobs))

    print("| workload | history recorded with | simulated under | predicted peak reserved (MiB) "
          "| real max_memory_reserved (MiB) | error | predicted | real | |")
    print("| --- | --- | --- | ---: | ---: | ---: | --- | --- | --- |")
    passed = 0
    for (name, src, dst), out, err in done:
        target = runs[name, dst]
        want = target["max_memory_reserved"]
        real = "OOM" if target["oom"] else "ok"
        if out is None:
            print(f"| {name} | {src} | {dst} | - | {want / t.MiB:.1f} | - | failed: {err} | {real} | NO |")
            continue
        dev, res = out
        got = res["peak_reserved"]
        rel = (got - want) / want if want else 0.0
        oom = t.predicted_oom(dev, res)
        ok = abs(rel) <= 0.01 and oom == target["oom"]
        passed += ok
        print(f"| {name} | {src} | {dst} | {got / t.MiB:.1f} | {want / t.MiB:.1f} | {100 * rel:+.2f}% "
              f"| {'OOM' if oom else 'ok'} | {real} | {'yes' if ok else 'NO'} |")
    print(f"\n{passed} of {len(done)} predictions within 1% with the OOM verdict right")
    return 0 if passed == len(done) else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="folder of WORKLOAD-TAG.pickle and WORKLOAD-TAG.json recordings")
    ap.add_argument("--memsight", default=str(ROOT / "build/release/memsight"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ARGS = ap.parse_args()
    sys.exit(main())

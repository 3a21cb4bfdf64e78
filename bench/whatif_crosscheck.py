#!/usr/bin/env python3
"""`memsight whatif` predictions against real runs, off the GPU.

    bench/whatif_crosscheck.py DIR [--memsight build/release/memsight] [--jobs N]

DIR holds recordings made by tests/gpu/whatif_workloads.py (kept by
tests/gpu/test_whatif_gpu.py with MEMSIGHT_GPU_OUT set, in
whatif_runs.tar.gz, in eager/ and lazy/ by CUDA_MODULE_LOADING, or one
such folder): WORKLOAD-TAG.pickle, the snapshot of one run under
the allocator settings TAG names, and WORKLOAD-TAG.json, that run's real
max_memory_reserved(), OOM, device memory and memory fraction. Every
workload's history recorded under each setting is simulated under each
other setting, exactly as test_whatif_gpu.py does, and checked the same
way: within 1% of the target run's real max_memory_reserved() and its OOM
or survival exactly (under lazy loading, a history with no cudaMalloc
address may miss the 1%: the prediction says its layout is unanchored).
Prints the pass count and the Markdown table of each folder; exits 1 when
a prediction misses where the GPU test would fail.
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


def recordings(folder: Path, t) -> dict:
    runs = {}
    for js in sorted(folder.glob("*.json")):
        name, _, tag = js.stem.rpartition("-")
        if tag in t.SETTINGS and js.with_suffix(".pickle").exists():
            info = json.loads(js.read_text())
            info["snapshot"] = str(js.with_suffix(".pickle"))
            runs[name, tag] = info
    return runs


def main() -> int:
    t = gpu_test()
    root = Path(ARGS.dir)
    # The GPU test keeps eager/ and lazy/ (CUDA_MODULE_LOADING); an older
    # archive holds one folder of lazy-loading runs.
    folders = [(ld, root / ld) for ld in t.LOADINGS if (root / ld).is_dir()] or [("lazy", root)]
    missed = 0
    for loading, folder in folders:
        runs = recordings(folder, t)
        workloads = sorted({n for n, _ in runs}, key=lambda n: (t.WORKLOADS + [n]).index(n))
        jobs = [(w, s, d) for w in workloads for s in t.SETTINGS for d in t.SETTINGS
                if s != d and (w, s) in runs and (w, d) in runs]
        if not jobs:
            print(f"no WORKLOAD-TAG.pickle/.json pairs in {folder}", file=sys.stderr)
            return 2
        def one(job):
            name, src, dst = job
            try:
                return t.judge(runs[name, src], runs[name, dst], dst)
            except Exception as e:  # a simulation that failed is a miss, shown as such
                return f"{loading} {name}: {src} under {dst}: failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}"

        with ThreadPoolExecutor(max_workers=ARGS.jobs) as pool:
            done = list(pool.map(one, jobs))
        for failed in (d for d in done if isinstance(d, str)):
            print(failed, file=sys.stderr)
        judged = [d for d in done if not isinstance(d, str)]
        rows = [j[0] for j in judged]
        # Judged as the GPU test judges (its fails()).
        missed += len(done) - len(judged) + sum(t.fails(loading, j) for j in judged)
        print(f"CUDA_MODULE_LOADING={loading.upper()}: {sum(r[-1] for r in rows)} of {len(done)} "
              f"predictions within 1% with the OOM verdict right\n")
        print(t.table(rows) + "\n")
    return 1 if missed else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="folder of WORKLOAD-TAG.pickle and WORKLOAD-TAG.json recordings")
    ap.add_argument("--memsight", default=str(ROOT / "build/release/memsight"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ARGS = ap.parse_args()
    sys.exit(main())

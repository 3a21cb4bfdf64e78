"""The estimate against the real run, per workload (issue 36), on a GPU machine.

    python3 bench/estimate_check.py all --out DIR [--workloads a,b] [--steps 3]

For each workload of tests/gpu/estimate_workloads.py, in fresh processes:
`real` runs the steps on the GPU with torch's allocator history (C++ and
Python stacks) and writes DIR/W.real.pickle and DIR/W.real.json (torch's
max_memory_allocated / max_memory_reserved); `fake` runs the same steps
under fake tensors (memsight.torch.fit.trace_step) and writes the
requests-only snapshot DIR/W.fake.pickle with its time. `compare DIR`
lists, per workload, the real allocations the fake run has no request of
the same size for (what fake tensors cannot see), grouped by the C++ frame
that made them.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "gpu"))
sys.path.insert(0, str(HERE.parent / "python"))


def real(name: str, batch: int, steps: int, out: Path) -> None:
    import torch
    from estimate_workloads import WORKLOADS

    w = WORKLOADS[name]
    torch.manual_seed(0)
    model = w.model().cuda()
    opt = w.optimizer(model.parameters())
    torch.cuda.memory._record_memory_history(max_entries=2_000_000, context="all", stacks="all")
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for i in range(steps):
        w.step(model, opt, w.inputs(batch, i))
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    (out / f"{name}.real.pickle").write_bytes(pickle.dumps(snap))
    (out / f"{name}.real.json").write_text(json.dumps({
        "max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved(),
        "seconds": dt, "batch": batch, "steps": steps, "torch": torch.__version__}))


def fake(name: str, batch: int, steps: int, out: Path) -> None:
    import torch
    from estimate_workloads import WORKLOADS

    from memsight.torch.fit import trace_step

    w = WORKLOADS[name]
    t0 = time.perf_counter()
    snap = trace_step(w.step, w.model, w.optimizer, lambda i: w.inputs(batch, i), steps=steps)
    dt = time.perf_counter() - t0
    (out / f"{name}.fake.pickle").write_bytes(pickle.dumps(snap))
    info = {"seconds": dt, "entries": sum(len(t) for t in snap["device_traces"]),
            "gpu_allocated_after": torch.cuda.memory_allocated() if torch.cuda.is_available() else 0}
    (out / f"{name}.fake.json").write_text(json.dumps(info))


def compare(out: Path, names: list[str]) -> None:
    for name in names:
        rp, fp = out / f"{name}.real.pickle", out / f"{name}.fake.pickle"
        if not rp.exists() or not fp.exists():
            print(f"{name}: missing {rp.name if not rp.exists() else fp.name}")
            continue
        r = pickle.loads(rp.read_bytes())
        f = pickle.loads(fp.read_bytes())
        rt = [e for e in r["device_traces"][0] if e["action"] == "alloc"]
        ft = [e for e in f["device_traces"][0] if e["action"] == "alloc"]
        left = collections.Counter(e["size"] for e in ft)
        unseen: dict[str, list[int]] = collections.defaultdict(list)
        for e in rt:
            if left[e["size"]] > 0:
                left[e["size"]] -= 1
                continue
            names_ = [fr["name"] for fr in e.get("frames", []) if not fr["filename"].endswith(".py")]
            key = next((n for n in names_ if any(k in n.lower() for k in
                                                 ("cublas", "cudnn", "workspace", "flash", "efficient", "attention",
                                                  "conv", "autograd", "engine"))), names_[0] if names_ else "?")
            unseen[key[:120]].append(e["size"])
        extra = sum(left.values())
        print(f"== {name}: real allocs {len(rt)}, fake allocs {len(ft)}, fake-only requests {extra}")
        for k, sizes in sorted(unseen.items(), key=lambda kv: -sum(kv[1])):
            print(f"   {len(sizes):5d} x  max {max(sizes):>12,d}  sum {sum(sizes):>14,d}  {k}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["real", "fake", "all", "compare"])
    ap.add_argument("--workload", default="")
    ap.add_argument("--workloads", default="")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    from estimate_workloads import WORKLOADS

    names = [n for n in a.workloads.split(",") if n] or list(WORKLOADS)
    if a.what in ("real", "fake"):
        w = WORKLOADS[a.workload]
        (real if a.what == "real" else fake)(a.workload, a.batch or w.batch, a.steps, a.out)
        return
    if a.what == "all":
        for name in names:
            for what in ("real", "fake"):
                t0 = time.time()
                env = dict(os.environ)
                p = subprocess.run([sys.executable, __file__, what, "--workload", name, "--steps", str(a.steps),
                                    "--out", str(a.out)] + (["--batch", str(a.batch)] if a.batch else []),
                                   env=env, capture_output=True, text=True)
                status = "ok" if p.returncode == 0 else f"FAILED rc={p.returncode}"
                print(f"{name} {what}: {status} in {time.time() - t0:.1f} s", flush=True)
                if p.returncode:
                    print(p.stderr[-3000:], flush=True)
    compare(a.out, names)


if __name__ == "__main__":
    main()

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
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "gpu"))
sys.path.insert(0, str(HERE.parent / "python"))


def torchrun_rank() -> int | None:
    """This process's rank when torchrun started it (a real NCCL job), else None."""
    return int(os.environ["RANK"]) if "LOCAL_RANK" in os.environ else None


def build_real(w: Any) -> Any:
    """The workload's model on the GPU. A rank of a distributed job runs as
    rank 0 under torch's fake process group (its collectives move no data),
    or, started by torchrun, as its rank of a real NCCL job on its own GPU."""
    import torch

    if not w.world_size:
        return w.model().cuda()
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if torchrun_rank() is None:
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=w.world_size)
    else:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group("nccl")
    mesh = init_device_mesh("cuda", (w.world_size,))
    with torch.device("cuda"):
        return w.model(mesh)


def real(name: str, batch: int, steps: int, out: Path, fraction: float = 0.0, record: bool = True) -> None:
    """The steps on the GPU. Without recording, under a memory fraction:
    exit status 3 when the job runs out of memory (the bisection's probe)."""
    import torch
    from estimate_workloads import ALL as WORKLOADS

    w = WORKLOADS[name]
    torch.manual_seed(0)
    if fraction:
        torch.cuda.set_per_process_memory_fraction(fraction)
    def outside() -> int:  # device memory in use that torch's allocator does not hold
        free, total = torch.cuda.mem_get_info()
        return total - free - torch.cuda.memory_reserved()

    try:
        model = build_real(w)
        opt = w.optimizer(model.parameters())
        before = outside()
        if record:
            torch.cuda.memory._record_memory_history(max_entries=2_000_000, context="all", stacks="all")
        torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        for i in range(steps):
            w.step(model, opt, w.inputs(batch, i))
        torch.cuda.synchronize()
    except torch.OutOfMemoryError:
        sys.exit(3)
    dt = time.perf_counter() - t0
    if not record:
        return
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    rank = torchrun_rank()
    stem = f"{name}.real" if rank is None else f"{name}.nccl{rank}"  # a real NCCL job: one file per rank
    (out / f"{stem}.pickle").write_bytes(pickle.dumps(snap))
    (out / f"{stem}.json").write_text(json.dumps({
        "max_allocated": torch.cuda.max_memory_allocated(), "max_reserved": torch.cuda.max_memory_reserved(),
        "outside_allocator_before": before, "outside_allocator_after": outside(),
        "seconds": dt, "batch": batch, "steps": steps, "torch": torch.__version__}))


def fake(name: str, batch: int, steps: int, out: Path) -> None:
    import torch
    from estimate_workloads import ALL as WORKLOADS

    from memsight.torch.fit import trace_step

    w = WORKLOADS[name]
    t0 = time.perf_counter()
    snap = trace_step(w.step, w.model, w.optimizer, lambda i: w.inputs(batch, i), steps=steps,
                      world_size=w.world_size or None)
    dt = time.perf_counter() - t0
    (out / f"{name}.fake.pickle").write_bytes(pickle.dumps(snap))
    import resource

    info = {"seconds": dt, "entries": sum(len(t) for t in snap["device_traces"]),
            "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "foreach": any("_multi_tensor" in fr["name"] for e in snap["device_traces"][0] for fr in e["frames"]),
            "gpu_allocated_after": torch.cuda.memory_allocated() if torch.cuda.is_available() else 0}
    (out / f"{name}.fake.json").write_text(json.dumps(info))


def memtracker(name: str, batch: int, steps: int, out: Path) -> None:
    """torch's MemTracker on the same steps under fake tensors: its peak."""
    import torch
    from estimate_workloads import ALL as WORKLOADS
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker

    from memsight.torch.fit.step_trace import _build_model

    w = WORKLOADS[name]
    if w.world_size:
        fsdp_memtracker(name, batch, steps, out)
        return
    t0 = time.perf_counter()
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = _build_model(w.model, "cuda:0")
        opt = w.optimizer(model.parameters())
        mt = MemTracker()
        mt.track_external(model, opt)
        with mt:
            for i in range(steps):
                if i:  # MemTracker refuses a module run twice without this; the peak stays
                    mt.reset_mod_stats()
                w.step(model, opt, w.inputs(batch, i))
        peak = mt.get_tracker_snapshot("peak")
    total = max((v.get("Total", 0) for d, v in peak.items() if torch.device(d).type == "cuda"), default=0)
    (out / f"{name}.memtracker.json").write_text(json.dumps({"peak": total, "seconds": time.perf_counter() - t0}))


def fsdp_memtracker(name: str, batch: int, steps: int, out: Path) -> None:
    """torch's FSDP tracker (FSDPMemTracker, which bypasses the collectives
    under fake tensors itself) on one rank of the sharded workload, under
    the same fake process group and CUDA stand-ins as memsight's estimate."""
    import torch
    from estimate_workloads import ALL as WORKLOADS
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

    from memsight.torch.fit.fake_cuda import fake_cuda
    from memsight.torch.fit.fake_dist import fake_ranks

    w = WORKLOADS[name]
    t0 = time.perf_counter()
    with fake_cuda(), fake_ranks(w.world_size, 0) as mesh, FakeTensorMode(allow_non_fake_inputs=True):
        with torch.device("cuda"):
            model = w.model(mesh)
        opt = w.optimizer(model.parameters())
        mt = FSDPMemTracker(model, opt)
        with mt:
            for i in range(steps):
                if i:  # as for MemTracker: a module run again needs this; the peak stays
                    mt.reset_mod_stats()
                w.step(model, opt, w.inputs(batch, i))
        peak = mt.get_tracker_snapshot("peak")
    total = max((v.get("Total", 0) for d, v in peak.items() if torch.device(d).type == "cuda"), default=0)
    (out / f"{name}.memtracker.json").write_text(json.dumps({"peak": total, "seconds": time.perf_counter() - t0,
                                                             "tracker": "FSDPMemTracker"}))


def _probe(name: str, batch: int, steps: int, fraction: float) -> bool:
    p = subprocess.run([sys.executable, __file__, "probe", "--workload", name, "--batch", str(batch),
                        "--steps", str(steps), "--fraction", str(fraction), "--out", "/tmp"],
                       capture_output=True, text=True)
    if p.returncode not in (0, 3):
        raise RuntimeError(f"{name} batch {batch}: {p.stderr[-2000:]}")
    return p.returncode == 0


def limit(name: str, steps: int, fraction: float, out: Path, high: int) -> None:
    """The largest batch that runs on the GPU under the fraction: bisection,
    each probe in a fresh process."""
    lo, hi = 0, high + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _probe(name, mid, steps, fraction):
            lo = mid
        else:
            hi = mid
    (out / f"{name}.limit.json").write_text(json.dumps({"limit": lo, "fraction": fraction, "high": high}))


def maxbatch(name: str, steps: int, fraction: float, out: Path, high: int) -> None:
    """memsight.torch.max_batch under the same cap, and the estimate's verdict
    at the real limit and one above it."""
    import torch
    from estimate_workloads import ALL as WORKLOADS

    import memsight.torch as mt

    w = WORKLOADS[name]
    total = torch.cuda.mem_get_info()[1]
    t0 = time.perf_counter()
    best, tried = mt.max_batch(w.inputs, w.step, w.model, w.optimizer, device_memory=total,
                               memory_fraction=fraction, high=high, steps=steps,
                               world_size=w.world_size or None)
    info: dict = {"max_batch": best, "estimates": len(tried), "seconds": time.perf_counter() - t0,
                  "tried": [(n, e.fits, e.peak_reserved_unbounded) for n, e in tried]}
    lp = out / f"{name}.limit.json"
    if lp.exists():
        real_limit = json.loads(lp.read_text())["limit"]
        verdicts = {}
        for n in (real_limit, real_limit + 1):
            e = mt.estimate(w.step, w.model, w.optimizer, lambda i, n=n: w.inputs(n, i), device_memory=total,
                            memory_fraction=fraction, steps=steps, stacks=False,
                            world_size=w.world_size or None)
            verdicts[str(n)] = e.fits
        info["verdicts"] = verdicts
    (out / f"{name}.maxbatch.json").write_text(json.dumps(info))


def peaks(out: Path, name: str) -> dict:
    """The estimate's peaks (the fake trace through the simulation) beside torch's."""
    import memsight

    f = pickle.loads((out / f"{name}.fake.pickle").read_bytes())
    r = memsight.from_dict(f).whatif("defaults").devices[0].results[0]
    real_ = json.loads((out / f"{name}.real.json").read_text())
    return {"alloc": int(r.peak_allocated), "reserved": int(r.peak_reserved),
            "real_alloc": real_["max_allocated"], "real_reserved": real_["max_reserved"]}


def table(out: Path, names: list[str]) -> None:
    """The markdown table of docs/estimate.md and bench/README.md."""
    def load(n: str, kind: str) -> dict:
        p = out / f"{n}.{kind}.json"
        return json.loads(p.read_text()) if p.exists() else {}

    def pct(a: float, b: float) -> str:
        return f"{100 * (a / b - 1):+.1f}%" if b else "?"

    print("| workload | torch peak allocated | estimate | error | torch peak reserved | estimate | error "
          "| MemTracker peak | its error | real largest batch | max_batch | verdict at it / +1 | estimate s |")
    print("| --- " * 13 + "|")
    mib = 1 << 20
    for n in names:
        try:
            p = peaks(out, n)
        except (OSError, KeyError) as e:
            print(f"| {n} | missing: {e} |")
            continue
        mtk, lim, mb, fk = load(n, "memtracker"), load(n, "limit"), load(n, "maxbatch"), load(n, "fake")
        v = mb.get("verdicts", {})
        vtext = " / ".join("fits" if v[k] else "OOM" for k in sorted(v, key=int)) if v else "-"
        print(f"| {n} | {p['real_alloc'] / mib:,.0f} MiB | {p['alloc'] / mib:,.0f} MiB | "
              f"{pct(p['alloc'], p['real_alloc'])} | {p['real_reserved'] / mib:,.0f} MiB | "
              f"{p['reserved'] / mib:,.0f} MiB | {pct(p['reserved'], p['real_reserved'])} | "
              f"{mtk.get('peak', 0) / mib:,.0f} MiB | {pct(mtk.get('peak', 0), p['real_alloc'])} | "
              f"{lim.get('limit', '-')} | {mb.get('max_batch', '-')} ({mb.get('estimates', '-')} estimates) | "
              f"{vtext} | {fk.get('seconds', 0):.1f} |")


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
            # the innermost frames below the allocator and torch's unwinder
            own = [n for n in names_ if not any(k in n for k in ("unwind", "CapturedTraceback", "Allocator",
                                                                 "c10::cuda", "torch::cuda"))]
            inner = " < ".join(n.split("(")[0][-60:] for n in own[:3])
            unseen[f"{key[:100]}\n              innermost: {inner}"].append(e["size"])
        extra = sum(left.values())
        print(f"== {name}: real allocs {len(rt)}, fake allocs {len(ft)}, fake-only requests {extra}")
        for k, sizes in sorted(unseen.items(), key=lambda kv: -sum(kv[1])):
            print(f"   {len(sizes):5d} x  max {max(sizes):>12,d}  sum {sum(sizes):>14,d}  {k}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["real", "fake", "memtracker", "probe", "limit", "maxbatch", "all", "compare",
                                     "table"])
    ap.add_argument("--fraction", type=float, default=0.0,
                    help="torch.cuda.set_per_process_memory_fraction for probe, limit and maxbatch")
    ap.add_argument("--high", type=int, default=128, help="the largest batch the bisections try")
    ap.add_argument("--workload", default="")
    ap.add_argument("--workloads", default="")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    from estimate_workloads import ALL as WORKLOADS

    from estimate_workloads import WORKLOADS as DEFAULT

    names = [n for n in a.workloads.split(",") if n] or list(DEFAULT)
    if a.what in ("real", "fake", "memtracker", "probe"):
        w = WORKLOADS[a.workload]
        if a.what == "probe":
            real(a.workload, a.batch or w.batch, a.steps, a.out, fraction=a.fraction, record=False)
        else:
            {"real": real, "fake": fake, "memtracker": memtracker}[a.what](a.workload, a.batch or w.batch,
                                                                          a.steps, a.out)
        return
    if a.what in ("limit", "maxbatch"):
        (limit if a.what == "limit" else maxbatch)(a.workload, a.steps, a.fraction, a.out, a.high)
        return
    if a.what == "table":
        table(a.out, names)
        return
    if a.what == "all":
        for name in names:
            for what in ("real", "fake", "memtracker"):
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

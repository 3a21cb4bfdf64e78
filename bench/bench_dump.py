"""Snapshot dumps on a GPU: where torch's time goes, and memsight's native path.

    python3 bench/bench_dump.py all [--json OUT]   # every measurement below, each in a fresh process

1. The probe: where the time of torch's memory-snapshot dump goes, phase by phase.

A probe, compiled on first use against the installed torch's headers, times
the phases of `torch.cuda.memory._snapshot()` one by one:

  state      c10's CUDACachingAllocator::snapshot(): copying segments, blocks
             and the trace out of the allocator under its lock
  gather     walking that copy for the captured tracebacks (unique ones)
  symbolize  torch::symbolize(): Python frames, and native frames (by
             TORCH_SYMBOLIZE_MODE) for stacks="all"
and, from Python, the whole `_snapshot()` (the above plus Python objects) and
`pickle.dumps` of its result.

Scenarios:
  oom     ~1,000 live blocks in a fragmented cache, history with Python stacks,
          then an allocation that fails under a memory cap; the phases timed
          inside the OOM observer and again after the exception
  all-N   stacks="all" histories of N entries (10k, 100k, 1M): the phases,
          `_snapshot()` and `_dump_snapshot()` of the same state

    python3 bench/bench_dump.py probe-oom
    TORCH_SYMBOLIZE_MODE=fast python3 bench/bench_dump.py probe-all 100000

2. OOM to files: OOMObserver in the fragmented state of `probe-oom`, the time
   from the failing allocation to all six files written, through the native
   dumper and through torch's `_snapshot()` (MEMSIGHT_NATIVE_DUMP=0).

    python3 bench/bench_dump.py oom-files native|torch

3. Dumps of stacks="all" histories of N entries: torch's `_dump_snapshot`,
   the first in the process (what an OOM dump pays) and a second one, against
   `memsight.torch.dump()` through the native dumper (built, checked and
   warmed beforehand by `prepare`, as recording does in the background).

    python3 bench/bench_dump.py history N torch|native
"""

from __future__ import annotations

import gc
import json
import os
import pickle
import sys
import tempfile
import time

import torch

PROBE_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <chrono>
#include <unordered_set>

namespace A = c10::cuda::CUDACachingAllocator;
static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
static torch::CapturedTraceback* tb(const std::shared_ptr<c10::GatheredContext>& c) {
  return c ? dynamic_cast<torch::CapturedTraceback*>(c.get()) : nullptr;
}
py::dict phases(bool do_symbolize) {
  py::dict r;
  double t0 = now();
  A::SnapshotInfo snap;
  {
    py::gil_scoped_release nogil;
    snap = A::snapshot();
  }
  double t1 = now();
  std::vector<torch::CapturedTraceback*> all;
  size_t blocks = 0, entries = 0;
  for (auto& s : snap.segments) {
    if (auto* t = tb(s.context_when_allocated)) all.push_back(t);
    for (auto& b : s.blocks) {
      ++blocks;
      if (auto* t = tb(b.context_when_allocated)) all.push_back(t);
    }
  }
  for (auto& dev : snap.device_traces)
    for (auto& e : dev) {
      ++entries;
      if (auto* t = tb(e.context_)) all.push_back(t);
    }
  std::unordered_set<torch::CapturedTraceback*> seen;
  std::vector<torch::CapturedTraceback*> unique;
  for (auto* t : all)
    if (seen.insert(t).second) unique.push_back(t);
  double t2 = now();
  size_t frames = 0, uframes = 0;
  if (do_symbolize) {
    auto s = torch::symbolize(unique);
    uframes = s.all_frames.size();
    for (auto& t : s.tracebacks) frames += t.size();
  }
  double t3 = now();
  r["segments"] = snap.segments.size();
  r["blocks"] = blocks;
  r["entries"] = entries;
  r["contexts"] = all.size();
  r["unique_contexts"] = unique.size();
  r["frames"] = frames;
  r["unique_frames"] = uframes;
  r["state_s"] = t1 - t0;
  r["gather_s"] = t2 - t1;
  r["symbolize_s"] = t3 - t2;
  return r;
}
"""

_probe = None


def probe():
    global _probe
    if _probe is None:
        from torch.utils.cpp_extension import load_inline

        t = time.perf_counter()
        _probe = load_inline("memsight_dump_probe", PROBE_SRC, functions=["phases"], with_cuda=True,
                             extra_cflags=["-O2"], verbose=False)
        print(f"# probe built in {time.perf_counter() - t:.1f} s", flush=True)
    return _probe


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def measure(label: str, do_pickle: bool = True) -> dict:
    ph = dict(probe().phases(True))
    snap, t_snap = timed(torch.cuda.memory._snapshot)
    row = {"where": label, **ph, "torch_snapshot_s": t_snap}
    if do_pickle:
        raw, t_pickle = timed(lambda: pickle.dumps(snap, protocol=4))
        row.update(pickle_s=t_pickle, pickle_bytes=len(raw))
    del snap
    print(json.dumps(row), flush=True)
    return row


def deep(fn, depth, *a, **kw):
    return fn(*a, **kw) if depth == 0 else deep(fn, depth - 1, *a, **kw)


def scenario_oom() -> list[dict]:
    rows: list[dict] = []
    probe()
    torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="python")
    # A model-like workload first, so the history holds realistic stacks.
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(8)]).cuda()
    opt = torch.optim.AdamW(model.parameters())
    for _ in range(20):
        loss = model(torch.randn(256, 2048, device="cuda")).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
    # ~1,000 live blocks with holes between them: a fragmented cache.
    live = [deep(torch.empty, 12, (1 << 20) + 4096 * (i % 7), dtype=torch.uint8, device="cuda")
            for i in range(2000)]
    live = live[::2]
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    cap = (torch.cuda.memory_reserved() + (64 << 20)) / total
    torch.cuda.set_per_process_memory_fraction(cap)

    def observer(device, alloc, device_alloc, device_free):
        rows.append(measure("in observer"))
        gc_was = gc.isenabled()
        gc.disable()
        _, t = timed(torch.cuda.memory._snapshot)
        if gc_was:
            gc.enable()
        print(json.dumps({"where": "in observer, gc disabled", "torch_snapshot_s": t}), flush=True)

    torch._C._cuda_attach_out_of_memory_observer(observer)
    try:
        deep(torch.empty, 12, 1 << 30, dtype=torch.uint8, device="cuda")
    except torch.cuda.OutOfMemoryError:
        pass
    rows.append(measure("after the exception"))
    del live
    return rows


def scenario_all(n: int) -> list[dict]:
    rows = []
    probe()
    torch.cuda.memory._record_memory_history(max_entries=n, stacks="all")
    keep = []
    sizes = [512, 4096, 65536, 1 << 20]
    i = 0
    t = time.perf_counter()
    while i * 2 < n:
        x = deep(torch.empty, 6, sizes[i % 4] // 4, device="cuda")
        if i % 50 == 0 and len(keep) < 2000:
            keep.append(x)
        i += 1
    torch.cuda.synchronize()
    print(f"# recorded {i} allocations in {time.perf_counter() - t:.1f} s", flush=True)
    rows.append(measure(f"stacks=all, {n} entries", do_pickle=n <= 100_000))
    with tempfile.TemporaryDirectory() as d:
        _, t_dump = timed(lambda: torch.cuda.memory._dump_snapshot(os.path.join(d, "s.pickle")))
        size = os.path.getsize(os.path.join(d, "s.pickle"))
    print(json.dumps({"where": f"stacks=all, {n} entries", "torch_dump_snapshot_s": t_dump,
                      "file_bytes": size}), flush=True)
    return rows


def fragment(model_steps: int = 20) -> list:
    """A model's history, then ~1,000 live blocks with holes between them; returns them."""
    # Plain SGD by hand: torch.optim would import torch's compiler stack, which
    # hides what the first snapshot of a process costs when nothing has.
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(8)]).cuda()
    for _ in range(model_steps):
        loss = model(torch.randn(256, 2048, device="cuda")).sum()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 1e-4 * p.grad
                p.grad = None
    live = [deep(torch.empty, 12, (1 << 20) + 4096 * (i % 7), dtype=torch.uint8, device="cuda")
            for i in range(2000)]
    torch.cuda.synchronize()
    return [model, live[::2]]


def oom_files(path: str) -> dict:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    from memsight.torch import OOMObserver
    from memsight.torch.capture import _native_dump

    with tempfile.TemporaryDirectory() as d:
        obs = OOMObserver(folder=d, remote_file_name=None).arm()
        if path == "native":
            _native_dump.prepare(wait=True)
        keep = fragment()
        total = torch.cuda.mem_get_info()[1]
        torch.cuda.set_per_process_memory_fraction((torch.cuda.memory_reserved() + (64 << 20)) / total)
        entries = sum(len(t) for t in torch.cuda.memory._snapshot()["device_traces"]) if path == "torch" else None
        t0 = time.perf_counter()
        try:
            deep(torch.empty, 12, 1 << 30, dtype=torch.uint8, device="cuda")
        except torch.cuda.OutOfMemoryError:
            pass
        row = {"what": "oom-files", "path": obs.last_path, "seconds": time.perf_counter() - t0,
               "observer_seconds": obs.last_duration, "timings": obs.last_timings,
               "files": len(obs.last_files), "entries": entries,
               "native": _native_dump.status() if path == "native" else None}
        obs.close()
        del keep
    print(json.dumps(row), flush=True)
    return row


def history(n: int, path: str) -> dict:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import memsight.torch as mt
    from memsight.torch.capture import _native_dump

    torch.cuda.memory._record_memory_history(max_entries=n, stacks="all")
    keep = []
    sizes = [512, 4096, 65536, 1 << 20]
    i = 0
    while i * 2 < n:
        x = deep(torch.empty, 6, sizes[i % 4] // 4, device="cuda")
        if i % 50 == 0 and len(keep) < 2000:
            keep.append(x)
        i += 1
    torch.cuda.synchronize()
    row: dict = {"what": "history", "entries": n, "path": path}
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "s.pickle")
        if path == "torch":
            _, row["first_s"] = timed(lambda: torch.cuda.memory._dump_snapshot(f))
            _, row["second_s"] = timed(lambda: torch.cuda.memory._dump_snapshot(f))
        else:
            _native_dump.prepare(wait=True)
            _native_dump.wait_warm(120)  # a job's OOM comes long after recording began
            row["prepare"] = _native_dump.status()
            _, row["first_s"] = timed(lambda: mt.dump(f))
            row["first_phases"] = _native_dump.status()["last_dump"]
            _, row["second_s"] = timed(lambda: mt.dump(f))
            row["second_phases"] = _native_dump.status()["last_dump"]
        row["file_bytes"] = os.path.getsize(f)
    print(json.dumps(row), flush=True)
    return row


def probe_first() -> dict:
    """A fresh process with no optimizer (nothing has imported torch's compiler stack):
    the first _snapshot() against the second, and what the first imported."""
    torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="python")
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).cuda()
    for _ in range(5):
        model(torch.randn(64, 1024, device="cuda")).sum().backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 1e-3 * p.grad
    before = "torch._inductor" in sys.modules
    _, first = timed(torch.cuda.memory._snapshot)
    _, second = timed(torch.cuda.memory._snapshot)
    row = {"what": "first-snapshot", "inductor_imported_before": before,
           "inductor_imported_after": "torch._inductor" in sys.modules, "first_s": first, "second_s": second}
    print(json.dumps(row), flush=True)
    return row


def record_cost() -> dict:
    """What recording costs per allocation+free, by stack mode, on the same loop."""
    def loop(n: int = 20_000) -> float:
        torch.cuda.synchronize()
        t = time.perf_counter()
        for i in range(n):
            deep(torch.empty, 6, 1024, device="cuda")
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / n

    row: dict = {"what": "record-cost"}
    for mode in ("off", "python", "all"):
        if mode != "off":
            torch.cuda.memory._record_memory_history(max_entries=100_000, stacks=mode)
        loop(2000)  # warm
        row[f"{mode}_us"] = sorted(loop() for _ in range(3))[1] * 1e6
        torch.cuda.memory._record_memory_history(enabled=None)
    print(json.dumps(row), flush=True)
    return row


def run_all(out: str | None) -> None:
    import subprocess

    rows = []

    def sub(*args: str, env: dict | None = None) -> None:
        r = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, timeout=400,
                           env={**os.environ, **(env or {})})
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        if r.returncode or not lines:
            print(f"# {' '.join(args)} failed ({r.returncode}): {r.stderr[-2000:]}", flush=True)
            return
        rows.append(json.loads(lines[-1]))
        print(lines[-1], flush=True)

    sub("probe-first")
    sub("record-cost")
    sub("oom-files", "native")  # the first run builds the dumper into the cache
    for _ in range(2):
        sub("oom-files", "torch", env={"MEMSIGHT_NATIVE_DUMP": "0"})
        sub("oom-files", "native")
    for n in (10_000, 100_000, 1_000_000):
        sub("history", str(n), "torch")
        sub("history", str(n), "native")
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"TORCH_SYMBOLIZE_MODE={os.environ.get('TORCH_SYMBOLIZE_MODE', '(unset)')}", flush=True)
    cmd = sys.argv[1]
    if cmd == "probe-oom":
        scenario_oom()
    elif cmd == "probe-all":
        scenario_all(int(sys.argv[2]))
    elif cmd == "record-cost":
        record_cost()
    elif cmd == "probe-first":
        probe_first()
    elif cmd == "oom-files":
        oom_files(sys.argv[2])
    elif cmd == "history":
        history(int(sys.argv[2]), sys.argv[3])
    elif cmd == "all":
        run_all(sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--json" else None)
    else:
        sys.exit(f"unknown command {cmd!r} (see the docstring)")

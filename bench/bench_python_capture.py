"""Capture-side benchmarks of memsight.torch, run on a GPU machine:

1. OOM -> files: the time from a failing allocation to all outputs written
   (snapshot pickle, two pages, two flamegraphs, diagnosis) for a 100k-entry
   allocator history, with where the time went; next to it, what torch's own
   tools take for the parts of Composer's OOMObserver that work offline
   (pickle.dump + _memory_viz.trace_plot + segment_plot; its flamegraphs need
   flamegraph.pl from the network).
2. MemoryMonitor: per-step overhead on a real training step.
3. Recording with stacks="python" (context="all"): per-step overhead on the
   same step, and per recorded event.

    python3 bench/bench_python_capture.py [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

try:
    import memsight  # noqa: F401
    import memsight._core  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import memsight.torch as mt  # noqa: E402
from memsight.torch import MemoryMonitor, OOMObserver, TrainState  # noqa: E402


def _deep(fn, depth, *a, **kw):
    return fn(*a, **kw) if depth == 0 else _deep(fn, depth - 1, *a, **kw)


def fill_history(n_events: int) -> list:
    """Allocations and frees with ~12-frame Python stacks until the history
    holds n_events; keeps a few thousand tensors alive."""
    live = []
    sizes = [512, 4096, 65536, 1 << 20, 3 << 20, 8 << 20]
    i = 0
    while i * 3 < n_events:
        t = _deep(torch.empty, 10, sizes[i % len(sizes)] // 4, device="cuda")
        if i % 7 == 0 and len(live) < 3000:
            live.append(t)
        i += 1
    torch.cuda.synchronize()
    return live


def bench_oom(tmp: str) -> dict:
    obs = OOMObserver(max_entries=100_000, folder=os.path.join(tmp, "oom"), remote_file_name=None)
    obs.fit_start(TrainState(run_name="bench"))
    keep = fill_history(110_000)
    entries = len(torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()])
    t0 = time.perf_counter()
    try:
        torch.empty(1 << 42, dtype=torch.uint8, device="cuda")
    except torch.cuda.OutOfMemoryError:
        pass
    total = time.perf_counter() - t0
    sizes = {os.path.basename(p)[len("rank0_oom"):]: os.path.getsize(p) for p in obs.last_files}
    # torch's tools on the same snapshot (what Composer's OOMObserver runs, minus flamegraph.pl)
    from torch.cuda import _memory_viz

    snap = torch.cuda.memory._snapshot()
    t1 = time.perf_counter()
    with open(os.path.join(tmp, "torch.pickle"), "wb") as f:
        pickle.dump(snap, f)
    t_pickle = time.perf_counter() - t1
    t2 = time.perf_counter()
    with open(os.path.join(tmp, "torch_trace.html"), "w") as f:
        f.write(_memory_viz.trace_plot(snap))
    with open(os.path.join(tmp, "torch_segment.html"), "w") as f:
        f.write(_memory_viz.segment_plot(snap))
    t_html = time.perf_counter() - t2
    t3 = time.perf_counter()
    _memory_viz.segments(snap, format_flamegraph=lambda s: s)  # folded text only
    _memory_viz.memory(snap, format_flamegraph=lambda s: s)
    t_folded = time.perf_counter() - t3
    obs.close()
    del keep
    torch.cuda.empty_cache()
    return {
        "history_entries": entries,
        "oom_to_files_s": round(total, 3),
        "observer_s": round(obs.last_duration or 0, 3),
        "observer_breakdown_s": obs.last_timings,
        "files": len(obs.last_files),
        "file_bytes": sizes,
        "torch_snapshot_pickle_s": round(obs.last_timings.get("snapshot", 0), 3),
        "torch_tools_pickle_dump_s": round(t_pickle, 3),
        "torch_tools_trace_plus_segment_plot_s": round(t_html, 3),
        "torch_tools_folded_text_s": round(t_folded, 3),
    }


def make_step(width=2048, depth=8, batch=256):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, width, device="cuda")

    def step():
        loss = model(x).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def time_steps(step, n, before=None, after=None) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        if before:
            before()
        step()
        if after:
            after()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n


def bench_step_overheads(width, depth, batch, n=100, rounds=7) -> dict:
    step = make_step(width, depth, batch)
    for _ in range(20):
        step()
    mon = MemoryMonitor()
    mon.fit_start(TrainState(run_name="bench"))
    base, with_mon, with_rec = [], [], []
    events = 0.0
    dev = torch.cuda.current_device()
    for _ in range(rounds):  # interleaved, so drifts hit all three alike
        base.append(time_steps(step, n))
        with_mon.append(time_steps(step, n, mon.batch_start, mon.batch_end))
        with mt.record(max_entries=100_000, context="all", stacks="python"):
            before = len(torch.cuda.memory._snapshot()["device_traces"][dev])
            with_rec.append(time_steps(step, n))
            after = len(torch.cuda.memory._snapshot()["device_traces"][dev])
            events = (after - before - 1) / n  # the snapshot call itself adds one entry
    b, m, r = statistics.median(base), statistics.median(with_mon), statistics.median(with_rec)
    return {
        "model": f"MLP {depth}x{width}, batch {batch}, AdamW",
        "step_ms": round(b * 1e3, 3),
        "memory_monitor_step_ms": round(m * 1e3, 3),
        "memory_monitor_overhead_us_per_step": round((m - b) * 1e6, 1),
        "memory_monitor_overhead_pct": round((m - b) / b * 100, 2),
        "record_python_step_ms": round(r * 1e3, 3),
        "record_python_overhead_ms_per_step": round((r - b) * 1e3, 3),
        "record_python_overhead_pct": round((r - b) / b * 100, 1),
        "events_per_step": round(events, 1),
        "record_python_us_per_event": round((r - b) / max(events, 1) * 1e6, 2),
    }


def bench_monitor_call(calls=5000) -> float:
    """MemoryMonitor.batch_end alone: its CPU cost per batch, in microseconds."""
    mon = MemoryMonitor()
    st = TrainState(run_name="bench")
    mon.fit_start(st)
    t0 = time.perf_counter()
    for _ in range(calls):
        mon.batch_end(st)
    return round((time.perf_counter() - t0) / calls * 1e6, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        out["oom"] = bench_oom(tmp)
    # A GPU-bound step (CPU work hides behind the kernel queue) and a
    # launch-bound one (every CPU microsecond shows).
    out["gpu_bound_step"] = bench_step_overheads(width=2048, depth=8, batch=256)
    out["launch_bound_step"] = bench_step_overheads(width=256, depth=8, batch=32)
    out["memory_monitor_call_us"] = bench_monitor_call()
    print(json.dumps(out, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

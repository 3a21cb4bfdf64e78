"""MemoryWatch on a real GPU (docs/python.md, "MemoryWatch").

A loop keeps a 64 MiB tensor every step (and makes a few MiB of
temporaries), under a memory fraction set so that step TARGET's tensor is
the first that does not fit. The watch, sampling every step with the limit
read from the device, must name that step (within a few) long before it
comes, and warn once; the loop then really dies there.

The second test measures what a sample costs (printed, and written to
$OUT/memory_watch_cost.json when $OUT is set) for bench/README.md.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

LEAK = 64 << 20
TARGET = 60


def test_the_projected_step_is_the_step_that_runs_out():
    import torch

    from memsight.torch import MemoryWatch

    dev = torch.cuda.current_device()
    torch.cuda.empty_cache()
    work = torch.randn(1024, 1024, device="cuda")
    kept: list = []

    def step():
        kept.append(torch.empty(LEAK // 4, device="cuda"))  # the leak
        (work @ work).sum()  # temporaries, cached after the first step

    step()  # warm: cuBLAS's workspace, the temporaries' blocks
    torch.cuda.synchronize()
    total = torch.cuda.mem_get_info(dev)[1]
    reserved0 = torch.cuda.memory_reserved(dev)
    # room for TARGET - 1 more tensors and half of one: step TARGET's does not fit
    torch.cuda.set_per_process_memory_fraction((reserved0 + (TARGET - 0.5) * LEAK) / total, dev)
    warned: list[str] = []
    watch = MemoryWatch(every=1, window=10, total_steps=200, warn_fn=warned.append)
    projected: dict[int, int] = {}
    real = None
    try:
        for s in range(1, 200):
            try:
                step()
            except torch.cuda.OutOfMemoryError:
                real = s
                break
            watch.observe(s)
            if watch.projection is not None:
                projected[s] = watch.projection.run_out_step
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, dev)
        kept.clear()
        torch.cuda.empty_cache()
    print(f"\nran out at step {real}; projected at steps 5, 20, 40: "
          f"{[projected.get(s) for s in (5, 20, 40)]}; warning: {warned[:1]}")
    assert real is not None and abs(real - TARGET) <= 1
    for s in (5, 20, 40):
        assert abs(projected[s] - real) <= 3, (s, projected[s], real)
    # The first warning names the step; later ones come only as the steps
    # left halve (55, 27, 13, ...): a handful, never one a step.
    assert f"at about step {projected[5]}," in warned[0]
    assert 1 <= len(warned) <= 7, warned
    assert "(the run ends at step 200)" in warned[0]


def _per_call_us(fn, n: int = 2000) -> float:
    for _ in range(50):
        fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def test_what_a_sample_costs():
    import torch

    from memsight.torch import MemoryWatch
    from memsight.torch.callbacks.memory_watch import device_limit

    kept = [torch.empty(1 << 20, device="cuda") for _ in range(200)]  # a few hundred blocks to count
    torch.cuda.memory._record_memory_history(None)
    step = iter(range(10**9))
    flat = MemoryWatch(every=1, window=20, limit_bytes=1 << 40)
    cost = {
        "memory_stats_us": _per_call_us(torch.cuda.memory_stats),
        "memory_stats_as_nested_dict_us": _per_call_us(torch.cuda.memory_stats_as_nested_dict),
        "traceless_snapshot_us": _per_call_us(torch.cuda.memory._snapshot, 200),
        "mem_get_info_us": _per_call_us(torch.cuda.mem_get_info),
        "device_limit_us": _per_call_us(lambda: device_limit(0)),
        # a sample with its read and a 20-sample window (flat: no projection)
        "observe_us": _per_call_us(lambda: flat.observe(next(step))),
    }
    rising = MemoryWatch(every=1, window=20, limit_bytes=1 << 40, horizon=0)
    fake = iter(range(10**9))

    def rising_sample():
        n = next(fake)
        rising.observe(n, {"allocated_bytes.all.current": n << 20, "reserved_bytes.all.current": n << 20})

    cost["observe_projecting_us"] = _per_call_us(rising_sample)
    cost.update(device=torch.cuda.get_device_name(), torch=torch.__version__, blocks=len(kept))
    print("\n" + json.dumps(cost, indent=1))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "memory_watch_cost.json").write_text(json.dumps(cost, indent=1))
    assert cost["observe_us"] < 1000

"""Records CUDA memory snapshots of kinds the bundled fixtures do not cover.

    python3 record_workloads.py OUTDIR [WORKLOAD ...]

Each workload writes OUTDIR/NAME.pickle with torch's own _dump_snapshot.
`expandable` must run in a process of its own (the allocator reads
PYTORCH_CUDA_ALLOC_CONF before its first allocation); the caller sets it.
"""

from __future__ import annotations

import gc
import os
import sys

import torch

mem = torch.cuda.memory
OUT = sys.argv[1]


def fresh():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def dump(name: str) -> None:
    mem._dump_snapshot(os.path.join(OUT, name + ".pickle"))


def mlp(device="cuda", width=512):
    return torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(),
                               torch.nn.Linear(2 * width, width)).to(device)


def steps(model, n=3, device="cuda", width=512, batch=128):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(n):
        loss = model(torch.randn(batch, width, device=device)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def record(**kw):
    mem._record_memory_history(**kw)


def stop():
    mem._record_memory_history(enabled=None)


def w_cpp_stacks():
    # C++ frames besides the Python ones.
    fresh()
    record(enabled="all", context="all", stacks="all", max_entries=20000)
    steps(mlp(), 2)
    dump("cpp_stacks")
    stop()


def w_wrapped():
    # A history buffer far too small: it wraps, and frees of blocks whose
    # allocation fell out of the buffer appear.
    fresh()
    record(enabled="all", context="all", stacks="python", max_entries=100)
    steps(mlp(), 4)
    dump("wrapped")
    stop()


def w_alloc_context():
    # Stacks of allocations only.
    fresh()
    record(enabled="all", context="alloc", stacks="python", max_entries=20000)
    steps(mlp(), 2)
    dump("alloc_context")
    stop()


def w_empty_cache():
    # Segments freed and allocated again mid-history.
    fresh()
    record(enabled="all", context="all", stacks="python", max_entries=20000)
    m = mlp()
    steps(m, 2)
    del m
    fresh()
    steps(mlp(width=256), 2, width=256)
    dump("empty_cache")
    stop()


def w_cuda_graph():
    # A captured graph allocates from a private pool.
    fresh()
    record(enabled="all", context="all", stacks="python", max_entries=20000)
    m = mlp()
    x = torch.randn(64, 512, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            m(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = m(x)
    g.replay()
    torch.cuda.synchronize()
    dump("cuda_graph")
    stop()
    del g, y


def w_two_devices():
    if torch.cuda.device_count() < 2:
        return
    fresh()
    record(enabled="all", context="all", stacks="python", max_entries=20000)
    steps(mlp("cuda:0"), 2, device="cuda:0")
    steps(mlp("cuda:1", width=256), 2, device="cuda:1", width=256)
    dump("two_devices")
    stop()


def w_oom():
    fresh()
    record(enabled="all", context="all", stacks="python", max_entries=50000)
    torch.cuda.set_per_process_memory_fraction(
        (torch.cuda.memory_reserved() + 256 * 2**20) / torch.cuda.get_device_properties(0).total_memory)

    def observer(device, alloc, device_alloc, device_free):
        dump("oom_observer")

    torch._C._cuda_attach_out_of_memory_observer(observer)
    keep = []
    try:
        for _ in range(1000):
            keep.append(torch.empty(24 * 2**20, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError:
        pass
    del keep
    stop()
    torch.cuda.set_per_process_memory_fraction(1.0)


def w_expandable():
    assert "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    record(enabled="all", context="all", stacks="python", max_entries=20000)
    m = mlp()
    steps(m, 2)
    del m
    fresh()  # unmaps pages of the expandable segment
    steps(mlp(width=256), 1, width=256)
    dump("expandable")
    stop()


if __name__ == "__main__":
    names = sys.argv[2:] or [n[2:] for n in list(globals()) if n.startswith("w_") and n != "w_expandable"]
    for n in names:
        globals()["w_" + n]()

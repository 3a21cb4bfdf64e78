"""Records workloads with torch's own memory counters beside each snapshot.

    python3 record_counters.py OUTDIR [WORKLOAD ...]
    torchrun --nproc_per_node=2 record_counters.py OUTDIR fsdp2

Each workload resets torch's peak counters as its recording starts (so the
history is complete and began with the peaks reset), then writes
OUTDIR/NAME.pickle with torch's `_dump_snapshot` and OUTDIR/NAME.stats.json
with `torch.cuda.memory_stats()` of every device taken right after the
dump (or inside the OOM observer, at the moment of the OOM), plus the
device's total memory and the allocator's limit where one was set.
memsight's `summary` must report the same allocated / active / reserved
peaks and current values. `env_*` workloads need their own process (the
allocator reads PYTORCH_CUDA_ALLOC_CONF once); the caller sets it.
"""

from __future__ import annotations

import gc
import json
import os
import sys

import torch

mem = torch.cuda.memory
OUT = sys.argv[1]
MiB = 2**20


def fresh() -> None:
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def begin(**kw) -> None:
    fresh()
    mem._record_memory_history(**kw)
    torch.cuda.reset_peak_memory_stats()


def stats(limit: int | None = None) -> dict:
    devs = {}
    for d in [torch.cuda.current_device()]:
        devs[str(d)] = {"memory_stats": dict(torch.cuda.memory_stats(d)),
                        "total": torch.cuda.get_device_properties(d).total_memory}
    return {"devices": devs, "limit": limit}


def finish(name: str, limit: int | None = None) -> None:
    torch.cuda.synchronize()
    mem._dump_snapshot(os.path.join(OUT, name + ".pickle"))
    with open(os.path.join(OUT, name + ".stats.json"), "w") as f:
        json.dump(stats(limit), f)
    mem._record_memory_history(enabled=None)


class Block(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        h = self.up(self.norm(x))
        return x + self.down(torch.nn.functional.gelu(h))


def model(width: int = 512, depth: int = 3, device: str = "cuda"):
    return torch.nn.Sequential(*[Block(width) for _ in range(depth)]).to(device)


def train(m, steps: int = 3, width: int = 512, batch: int = 256, device: str = "cuda"):
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    for _ in range(steps):
        x = torch.randn(batch, width, device=device)
        loss = m(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return opt


def w_default_stacks():
    # torch's defaults (stacks="all": C++ frames first); the weights exist
    # before the recording starts.
    m = model()
    fresh()
    mem._record_memory_history()
    torch.cuda.reset_peak_memory_stats()
    opt = train(m)
    finish("default_stacks")
    del m, opt


def w_python_stacks():
    m = model()
    fresh()
    mem._record_memory_history(stacks="python")
    torch.cuda.reset_peak_memory_stats()
    opt = train(m)
    finish("python_stacks")
    del m, opt


def w_record_stream():
    # Blocks used on a side stream and freed while it still works: torch
    # counts them allocated until the free, active until the stream is done.
    begin(stacks="python")
    side = torch.cuda.Stream()
    keep = []
    for i in range(6):
        x = torch.randn(1024 + 64 * i, 1024, device="cuda")
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000_000)
            y = x * 2
        x.record_stream(side)
        y.record_stream(side)
        keep.append(y.sum())
        del x, y
        torch.empty(3 * MiB + 512 * i, dtype=torch.uint8, device="cuda")  # freed at once
    side.synchronize()
    torch.cuda.synchronize()
    z = torch.empty(5 * MiB, device="cuda")
    finish("record_stream")
    del keep, z


def _capped_oom(name: str, headroom: int, fill) -> None:
    begin(stacks="python")
    total = torch.cuda.get_device_properties(0).total_memory
    limit = torch.cuda.memory_reserved() + headroom
    torch.cuda.set_per_process_memory_fraction(limit / total)
    done = []

    def observer(device, alloc, device_limit, device_free):
        if not done:
            done.append(1)
            torch.cuda.memory._dump_snapshot(os.path.join(OUT, name + ".pickle"))
            s = stats(int(device_limit))
            s["observer"] = {"alloc": alloc, "limit_or_total": device_limit, "device_free": device_free}
            with open(os.path.join(OUT, name + ".stats.json"), "w") as f:
                json.dump(s, f)

    torch._C._cuda_attach_out_of_memory_observer(observer)
    keep: list = []
    try:
        fill(keep)
    except torch.OutOfMemoryError:
        pass
    del keep
    mem._record_memory_history(enabled=None)
    torch.cuda.set_per_process_memory_fraction(1.0)
    fresh()


def w_frag_oom():
    # Small-pool segments each pinned by one live tensor, the rest of them
    # free; then a 7 MiB request needs a new 20 MiB segment and the cap
    # refuses it, with ~70 MiB free in the cache in 1 MiB pieces.
    def fill(keep):
        pieces = [torch.empty(MiB - 4096, dtype=torch.uint8, device="cuda") for _ in range(144)]
        keep.extend(pieces[::2])
        del pieces
        keep.append(torch.empty(7 * MiB, dtype=torch.uint8, device="cuda"))

    _capped_oom("frag_oom", 160 * MiB, fill)


def w_capped_oom():
    # Live tensors fill the cap: true demand under a limit.
    def fill(keep):
        for _ in range(100):
            keep.append(torch.empty(24 * MiB, dtype=torch.uint8, device="cuda"))

    _capped_oom("capped_oom", 256 * MiB, fill)


def w_graph_tree():
    # torch.compile's CUDA graph trees (private pools, replays), inference.
    begin(stacks="python")
    m = model(256, 2)
    f = torch.compile(m, mode="reduce-overhead")
    keep = []
    with torch.no_grad():
        for _ in range(5):
            torch.compiler.cudagraph_mark_step_begin()
            keep.append(f(torch.randn(64, 256, device="cuda")).clone())
    finish("graph_tree")
    del m, f, keep


def w_env_expandable():
    assert "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    begin(stacks="python")
    m = model()
    train(m, 2)
    del m
    fresh()
    train(model(256), 1, width=256)
    finish("expandable_counters")


def w_env_rounding():
    assert "roundup_power2_divisions" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    begin(stacks="python")
    keep = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in
            (1500, 70_000, 1_100_000, 3_000_000, 9_000_000, 33_000_000, 50_000_000, 130_000_000)]
    train(model(), 2)
    del keep[::2]
    keep.append(torch.empty(20_000_000, dtype=torch.uint8, device="cuda"))
    finish("rounding")


def w_fsdp2():
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    m = model(1024, 4, device="cuda")
    for blk in m:
        fully_shard(blk)
    fully_shard(m)
    begin(stacks="python")
    opt = train(m, 3, width=1024, batch=512)
    torch.cuda.synchronize()
    mem._dump_snapshot(os.path.join(OUT, f"fsdp2_rank{rank}.pickle"))
    s = stats()
    with open(os.path.join(OUT, f"fsdp2_rank{rank}.stats.json"), "w") as f:
        json.dump(s, f)
    mem._record_memory_history(enabled=None)
    dist.barrier()
    dist.destroy_process_group()
    del opt


if __name__ == "__main__":
    names = sys.argv[2:] or [n[2:] for n in list(globals())
                             if n.startswith("w_") and not n.startswith(("w_env_", "w_fsdp2"))]
    failed = []
    for n in names:
        try:
            globals()["w_" + n]()
        except Exception as e:  # record the others; say which failed
            failed.append(f"{n}: {type(e).__name__}: {e}")
            print(f"workload {n} failed: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1 if failed else 0)

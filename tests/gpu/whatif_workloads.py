"""Workloads for test_whatif_gpu.py: each runs in a process of its own under the
allocator settings in PYTORCH_CUDA_ALLOC_CONF (the allocator reads them once).

    python3 whatif_workloads.py OUTDIR WORKLOAD TAG

Records the allocator's history from before the first allocation (so the
history is complete), caps the process with set_per_process_memory_fraction,
runs WORKLOAD, stops at the first out-of-memory error as a job would, and
writes OUTDIR/WORKLOAD-TAG.pickle (torch's _dump_snapshot) and
OUTDIR/WORKLOAD-TAG.json: max_memory_reserved(), whether it ran out of
memory, the fraction and the device's memory (torch.cuda.mem_get_info()'s
total, of which the fraction is taken). Every workload makes the same
requests whatever the settings, until an OOM ends it.
"""

from __future__ import annotations

import json
import os
import sys

import torch

MiB = 2**20
# Each workload's cap (bytes), set before its first allocation.
CAPS = {"frag_oom": 206 * MiB, "varlen": 3072 * MiB, "side_streams": 1024 * MiB, "churn": 640 * MiB}


def empty(nbytes: int, **kw) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8, device="cuda", **kw)


def frag_oom():
    # Ten 20 MiB segments, each holding two 9 MiB blocks; every first one is
    # freed, so 110 MiB sit cached in 9 and 2 MiB pieces between live
    # blocks. The last request (12 MiB) needs a new segment that the cap
    # refuses: a fragmentation OOM. Expandable segments pack the blocks
    # into one growing segment and leave room for it.
    pairs = [(empty(9 * MiB), empty(9 * MiB)) for _ in range(10)]
    firsts = [p[0] for p in pairs]
    seconds = [p[1] for p in pairs]
    del pairs, firsts
    last = empty(12 * MiB)
    del last, seconds


def varlen():
    # Attention and MLP blocks trained on batches of varying sequence length:
    # the activations change size every step.
    torch.manual_seed(0)
    d, heads = 512, 8
    layers = torch.nn.ModuleList(
        torch.nn.ModuleDict({"qkv": torch.nn.Linear(d, 3 * d), "out": torch.nn.Linear(d, d),
                             "up": torch.nn.Linear(d, 4 * d), "down": torch.nn.Linear(4 * d, d),
                             "norm": torch.nn.LayerNorm(d)}) for _ in range(4)).cuda()
    opt = torch.optim.AdamW(layers.parameters(), lr=1e-4)
    batch = 8
    for seq in (96, 384, 160, 448, 224, 512, 288, 128, 352):
        x = torch.randn(batch, seq, d, device="cuda")
        for blk in layers:
            h = blk["norm"](x)
            q, k, v = blk["qkv"](h).view(batch, seq, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-1, -2) / (d // heads) ** 0.5, dim=-1)
            x = x + blk["out"]((att @ v).transpose(1, 2).reshape(batch, seq, d))
            x = x + blk["down"](torch.nn.functional.gelu(blk["up"](blk["norm"](x))))
        x.square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def side_streams():
    # Blocks used on a side stream and freed while it still works
    # (record_stream): their memory returns only once the side stream is
    # done. The side stream sleeps long enough that every one of them is
    # still waiting when the main stream asks for more, until the
    # synchronize: the same order of events in every run.
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    outs = []
    for i in range(8):
        x = empty((3 + i % 3) * MiB + 4096 * i)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            torch.cuda._sleep(20_000_000)
            outs.append(x[: x.numel() // 2] + 1)  # allocated on the side stream
        x.record_stream(side)
        del x
        t = empty(2 * MiB + 512 * i)
        del t
    side.synchronize()
    torch.cuda.synchronize()
    more = [empty((4 + i) * MiB) for i in range(6)]  # can reuse the freed blocks now
    del more, outs


def churn():
    # Tensors of 24 to 95 MiB, four alive at a time, under a cap: cached
    # segments pile up until the cap, when torch frees cached blocks and
    # retries; garbage collection frees them earlier, max_split_size keeps
    # the large ones whole.
    keep = []
    for i in range(48):
        keep.append(empty((24 + (i * 29) % 72) * MiB))
        if len(keep) > 4:
            keep.pop(0)
    del keep


def main() -> None:
    out, name, tag = sys.argv[1], sys.argv[2], sys.argv[3]
    torch.cuda.memory._record_memory_history(max_entries=1_000_000, stacks="python")
    total = torch.cuda.mem_get_info()[1]
    fraction = CAPS[name] / total
    torch.cuda.set_per_process_memory_fraction(fraction)
    torch.cuda.reset_peak_memory_stats()
    oom = False
    try:
        globals()[name]()
    except torch.OutOfMemoryError:
        oom = True
    torch.cuda.synchronize()
    stem = os.path.join(out, f"{name}-{tag}")
    torch.cuda.memory._dump_snapshot(stem + ".pickle")
    with open(stem + ".json", "w") as f:
        json.dump({"workload": name, "tag": tag, "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                   "fraction": fraction, "total": total, "oom": oom,
                   "max_memory_reserved": torch.cuda.max_memory_reserved()}, f)


if __name__ == "__main__":
    main()

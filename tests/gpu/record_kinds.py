"""Records the kinds of jobs whose memory kinds are inferred from stacks alone
(issue 33): each with torch's own recording and nothing handed to memsight,
so the kinds come from the stacks. Writes OUT/NAME.pickle.

    python3 tests/gpu/record_kinds.py OUT vit_sgd
    torchrun --nproc_per_node 2 tests/gpu/record_kinds.py OUT ddp
    torchrun --nproc_per_node 2 tests/gpu/record_kinds.py OUT fsdp2
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn as nn

mem = torch.cuda.memory


def record() -> None:
    mem._record_memory_history(enabled="all", context="all", stacks="python", max_entries=200_000)


def dump(out: str, name: str) -> None:
    torch.cuda.synchronize()
    path = os.path.join(out, name + ".pickle")
    mem._dump_snapshot(path)
    mem._record_memory_history(enabled=None)
    print(f"wrote {path} ({os.path.getsize(path)} bytes)", flush=True)


def vit_sgd(out: str) -> None:
    import timm

    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10)
    record()
    model = model.cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(3):
        x = torch.randn(16, 3, 224, 224, device="cuda")
        y = torch.randint(0, 10, (16,), device="cuda")
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    dump(out, "vit_sgd")


def block(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))


def distributed(out: str, how: str) -> None:
    import torch.distributed as dist

    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    width = 1024
    model = nn.Sequential(*[block(width) for _ in range(4)])
    record()
    model = model.cuda()
    if how == "ddp":
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local])
    else:
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            fully_shard(layer)
        fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(64, width, device="cuda")
        model(x).float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    dump(out, f"{how}_rank{rank}")
    dist.destroy_process_group()


if __name__ == "__main__":
    out, name = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    if name == "vit_sgd":
        vit_sgd(out)
    else:
        distributed(out, name)

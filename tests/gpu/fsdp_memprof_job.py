"""A 2-rank FSDP2 training job with MemProfiler tracking FSDP memory (run
by test_memprofiler_gpu.py through torchrun); it writes what it saw to
OUT/result{rank}.json and its files under OUT/prof."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from gpu_helpers import finish_rank  # noqa: E402
from memsight.torch import MemProfiler  # noqa: E402

WIDTH = 1024


def main(out: str) -> None:
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(WIDTH, 16)).cuda()
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    prof = MemProfiler(
        save_dir=os.path.join(out, "prof"),
        collect_funcs={"default": ["train_step"]},
        track_fsdp_mem=True,
        fsdp_mem_track_module_depth=2,
        fsdp_mem_tracker_units="MiB",
        schedule={"warmup_iters": 1, "max_iter": 2},
    ).connect(model, opt)

    @prof.profile(name="train_step")
    def step() -> None:
        x = torch.randn(32, WIDTH, device="cuda")
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    prof.finish()
    finish_rank(out, {"rank": rank, "param_bytes": param_bytes, "fsdp_failed": prof._fsdp_failed,
                      "files": prof.written, "counter_source": prof.counter_source})


if __name__ == "__main__":
    main(sys.argv[1])

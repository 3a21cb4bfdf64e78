"""A 2-rank DDP training job (run by test_torchrun_gpu.py through torchrun):
each rank trains with OOMObserver, MemorySnapshot and MemoryMonitor, then
dies of OOM; it writes what it saw to OUT/result{rank}.json."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from gpu_helpers import finish_rank, make_model, oom_step, train_step  # noqa: E402
from memsight.torch import Callbacks, MemoryMonitor, MemorySnapshot, OOMObserver  # noqa: E402


def main(out: str) -> None:
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    model, opt = make_model(width=512)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    remote = "file://" + os.path.join(out, "remote", "{run_name}", "oom", "rank{rank}")
    obs = OOMObserver(folder=os.path.join(out, "{run_name}", "torch_traces"), remote_file_name=remote)
    ms = MemorySnapshot(skip_batches=0, interval=2, folder=os.path.join(out, "{run_name}", "torch_traces"),
                        remote_file_name=None)
    mon = MemoryMonitor(dist_aggregate_batch_interval=1)
    cbs = Callbacks(obs, ms, mon)
    cbs.fit_start()
    dist.barrier()
    extra = torch.empty(1 << 30, dtype=torch.uint8, device="cuda") if rank == 1 else None  # rank 1 holds 1 GB more
    for _ in range(3):
        cbs.batch_start()
        train_step(ddp, opt, width=512)
        cbs.batch_end(samples=64)
    del extra
    raised = False
    cbs.batch_start()
    try:
        oom_step(model, width=512)
    except torch.cuda.OutOfMemoryError:
        raised = True
    cbs.close()
    result = {"rank": rank, "world_size": dist.get_world_size(), "oom_raised": raised,
              "run_name": cbs.state.run_name, "oom_files": obs.last_files, "snapshot_files": ms.written,
              "metrics": mon.latest}
    finish_rank(out, result)


if __name__ == "__main__":
    main(sys.argv[1])

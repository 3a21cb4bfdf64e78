"""Two ranks sharing one GPU (run by test_ranks_gpu.py through torchrun): the
process group is gloo (NCCL cannot put two ranks on one GPU reliably), the
tensors are CUDA. Both train the same model; rank 1 runs under a memory cap
(set_per_process_memory_fraction) and runs out of memory while rank 0 waits
for it in a collective, as ranks of a real job do. Each rank's OOMObserver
coordinates through torchrun's store; each rank writes OUT/result{rank}.json.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from gpu_helpers import make_model, train_step  # noqa: E402
from memsight.torch import OOMObserver, TrainState  # noqa: E402
from memsight.torch.capture import rank_dumps  # noqa: E402

CAP = 2 << 30  # rank 1's allocator limit


def main(out: str) -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    rank = dist.get_rank()
    torch.cuda.set_device(0)
    total = torch.cuda.get_device_properties(0).total_memory
    if rank == 1:
        torch.cuda.set_per_process_memory_fraction(CAP / total, 0)
    model, opt = make_model(width=1024)
    obs = OOMObserver(folder=os.path.join(out, "rank{rank}"), remote_file_name=None, ranks_timeout=30.0,
                      model=model, optimizer=opt)
    obs.arm(TrainState(run_name="ranks-gpu"))
    result = {"rank": rank, "watching": rank_dumps.shared_watcher() is not None, "oom_raised": False}
    dist.barrier()
    for _ in range(3):
        obs.batch_start()
        train_step(model, opt)
        obs.batch_end()
    t0 = time.monotonic()
    if rank == 1:
        try:
            torch.empty(2 * CAP, dtype=torch.uint8, device="cuda")  # more than the cap allows
        except torch.cuda.OutOfMemoryError:
            result["oom_raised"] = True
        rnd = obs.last_round
        result.update(oom_seconds=time.monotonic() - t0, files=obs.last_files, timings=obs.last_timings,
                      round={"seq": rnd.seq, "files": {str(k): v for k, v in rnd.files.items()},
                             "missing": {str(k): v for k, v in rnd.missing.items()}, "waited": rnd.waited,
                             "manifest": rnd.manifest} if rnd else None)
    dist.barrier()  # rank 0 waits here for rank 1 (its watcher thread answers meanwhile)
    result["barrier_seconds"] = time.monotonic() - t0
    result["native_dump"] = __import__("memsight.torch.capture._native_dump", fromlist=["status"]).status()["ready"]
    obs.close()
    with open(os.path.join(out, f"result{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])

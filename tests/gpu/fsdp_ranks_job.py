"""A 2-rank FSDP2 job on two GPUs with NCCL, or sharing one GPU through
gloo (run by test_two_gpus_gpu.py through torchrun). Each rank arms an OOMObserver with its model and
optimizer; rank 1 runs under a memory cap and runs out of memory while rank
0 waits for it in an NCCL barrier; both ranks write the snapshot of that
moment through torchrun's store. Then rank 1 stops dead (SIGSTOP: the
process stays, so torchrun does not end the job, but it answers nothing),
rank 0 asks for a round of dumps and must get its answer within the round's
timeout, and wakes rank 1 again. Each rank writes OUT/result{rank}.json with
what it saw and the sharded sizes the categories must show.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from memsight.torch import OOMObserver, TrainState  # noqa: E402
from memsight.torch.capture import rank_dumps  # noqa: E402

WIDTH = 1024
CAP = 3 << 30  # rank 1's allocator limit
STOPPED_TIMEOUT = 5.0  # the round asked while rank 1 is stopped waits this long


def shard_bytes(shape: tuple[int, ...], itemsize: int, rank: int, world: int) -> int:
    """The bytes of `rank`'s shard of a parameter: FSDP2 splits dim 0 as torch.chunk does."""
    rows = shape[0]
    per = -(-rows // world)
    mine = max(0, min(per, rows - per * rank))
    rest = 1
    for d in shape[1:]:
        rest *= d
    return mine * rest * itemsize


def local_storages(tensors) -> dict[int, int]:
    """{data_ptr: nbytes} of the CUDA storages behind tensors (a DTensor's local shard)."""
    out: dict[int, int] = {}
    for t in tensors:
        t = getattr(t, "_local_tensor", t)
        if isinstance(t, torch.Tensor) and t.is_cuda:
            st = t.untyped_storage()
            out.setdefault(st.data_ptr(), st.nbytes())
    return out


def main(out: str) -> None:
    # A rank per GPU with NCCL; where there are fewer GPUs than ranks, the
    # ranks share GPU 0 and talk through gloo (NCCL refuses two ranks on one GPU).
    local = int(os.environ["LOCAL_RANK"])
    shared = torch.cuda.device_count() < int(os.environ["LOCAL_WORLD_SIZE"])
    if shared:
        local = 0
        torch.cuda.set_device(0)
        dist.init_process_group("gloo", timeout=timedelta(seconds=180))
    else:
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", timeout=timedelta(seconds=180), device_id=torch.device("cuda", local))
    rank, world = dist.get_rank(), dist.get_world_size()
    store = rank_dumps.default_store()
    store.set(f"test/pid{rank}", str(os.getpid()))
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(WIDTH, 16)).cuda()
    expected = sum(shard_bytes(tuple(p.shape), p.element_size(), rank, world) for p in model.parameters())
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if rank == 1:
        total = torch.cuda.get_device_properties(local).total_memory
        torch.cuda.set_per_process_memory_fraction(CAP / total, local)
    obs = OOMObserver(folder=os.path.join(out, "rank{rank}"), remote_file_name=None, ranks_timeout=60.0,
                      model=model, optimizer=opt)
    obs.arm(TrainState(run_name="fsdp2-ranks"))
    result: dict = {"rank": rank, "device": local, "backend": dist.get_backend(), "watching": rank_dumps.shared_watcher() is not None,
                    "oom_raised": False, "expected_shard_bytes": expected}
    for _ in range(3):
        obs.batch_start()
        opt.zero_grad(set_to_none=True)  # the gradients of the last step stay, sharded
        model(torch.randn(64, WIDTH, device="cuda")).square().mean().backward()
        opt.step()
        obs.batch_end()
    torch.cuda.synchronize()
    params = list(model.parameters())
    result["truth"] = {  # what this rank holds, found from the tensors themselves
        "parameter": sum(local_storages(params).values()),
        "gradient": sum(local_storages(p.grad for p in params if p.grad is not None).values()),
        "optimizer_state": sum(local_storages(v for s in opt.state.values() for v in s.values()).values()),
    }
    dist.barrier()
    if rank == 1:
        t0 = time.monotonic()
        try:
            torch.empty(2 * CAP, dtype=torch.uint8, device="cuda")  # more than the cap allows
        except torch.cuda.OutOfMemoryError:
            result["oom_raised"] = True
        rnd = obs.last_round
        result.update(oom_seconds=time.monotonic() - t0, files=obs.last_files,
                      round={"seq": rnd.seq, "files": {str(k): v for k, v in rnd.files.items()},
                             "missing": {str(k): v for k, v in rnd.missing.items()}, "waited": rnd.waited,
                             "manifest": rnd.manifest} if rnd else None)
    dist.barrier()  # rank 0 waits here for rank 1; its watcher thread answers meanwhile

    # A rank that stops answering: rank 1 stops itself, rank 0 asks for a round.
    if rank == 1:
        store.set("test/stopping", "1")
        os.kill(os.getpid(), signal.SIGSTOP)  # rank 0 sends SIGCONT after its round
        result["resumed"] = True
    else:
        store.wait(["test/stopping"], timedelta(seconds=60))
        time.sleep(0.5)  # let it stop
        t0 = time.monotonic()
        rnd = rank_dumps.dump_all_ranks("stopped", reason="rank 1 stopped", timeout=STOPPED_TIMEOUT)
        result["stopped_round"] = {"seconds": time.monotonic() - t0, "seq": rnd.seq,
                                   "files": sorted(rnd.files), "missing": sorted(rnd.missing),
                                   "manifest": rnd.manifest, "timeout": STOPPED_TIMEOUT}
        os.kill(int(store.get("test/pid1")), signal.SIGCONT)
    obs.close()
    with open(os.path.join(out, f"result{rank}.json"), "w") as f:
        json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])

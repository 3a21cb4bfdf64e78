"""A 3-rank CPU job (gloo) for test_rank_dumps_torchrun.py: coordinated dumps
through torchrun's own store, with a stand-in CUDA allocator (the
FakeAllocator of the CPU tests) patched into the real torch.

rank 1 runs out of memory (its OOMObserver's path, driven as torch would);
rank 0 trains on and answers from its watcher thread, then asks for a round
of its own (dump_all_ranks); rank 2 hangs (SIGSTOP) for the whole job and is
killed by rank 0 at the end. Each rank writes OUT/result{rank}.json.

    python3 -m torch.distributed.run --standalone --nproc_per_node=3 rank_dumps_job.py OUT
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import time
from datetime import timedelta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from memsight_testlib import DATA, FakeAllocator  # noqa: E402


def fake_cuda(name: str) -> FakeAllocator:
    with open(DATA / f"{name}.pickle", "rb") as f:
        alloc = FakeAllocator(pickle.load(f))
    torch.cuda.is_available = lambda: True
    torch.cuda.init = lambda: None
    torch.cuda.memory._record_memory_history = alloc.record_memory_history
    torch.cuda.memory._snapshot = alloc.memory_snapshot
    torch._C._cuda_isHistoryEnabled = lambda: alloc.enabled is not None
    torch._C._cuda_attach_out_of_memory_observer = alloc.observers.append
    return alloc


def done_round(rnd) -> dict:
    return {"seq": rnd.seq, "origin": rnd.origin_rank, "files": {str(k): v for k, v in rnd.files.items()},
            "missing": {str(k): v for k, v in rnd.missing.items()}, "waited": rnd.waited,
            "manifest": rnd.manifest}


def main(out: str) -> None:
    if os.environ.get("JOB_DEBUG"):
        import logging
        logging.basicConfig(level=logging.INFO, format=f"%(asctime)s r{os.environ.get('RANK')} %(message)s")
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank = dist.get_rank()
    store = dist.distributed_c10d._get_default_store()
    alloc = fake_cuda("oom" if rank == 1 else "mlp_train")
    if rank == 2:
        with open(os.path.join(out, "pid2"), "w") as f:
            f.write(str(os.getpid()))
        dist.barrier()
        os.kill(os.getpid(), signal.SIGSTOP)  # hung from here on: never answers
        os._exit(0)

    import memsight.torch as mt

    obs = mt.OOMObserver(folder=os.path.join(out, "rank{rank}"), remote_file_name=None, ranks_timeout=3.0)
    obs.arm(mt.TrainState(run_name="job"))
    dist.barrier()
    result: dict = {"rank": rank, "watching": mt.capture.rank_dumps.shared_watcher() is not None}
    if rank == 1:
        time.sleep(0.2)
        t0 = time.monotonic()
        alloc.oom(device=0, alloc=1 << 30, free=1 << 20)  # torch raises OutOfMemoryError after this
        result.update(oom_seconds=time.monotonic() - t0, oom=done_round(obs.last_round), files=obs.last_files)
        with open(os.path.join(out, "result1.json.tmp"), "w") as f:
            json.dump(result, f)
        os.replace(os.path.join(out, "result1.json.tmp"), os.path.join(out, "result1.json"))
        store.wait(["test/done"], timedelta(seconds=60))  # answers rank 0's round meanwhile
        os._exit(0)
    # rank 0: training steps until its watcher has answered the OOM round
    deadline = time.monotonic() + 30
    mine = os.path.join(out, "rank0", "oom_1_rank0.pickle")
    while not os.path.exists(mine) and time.monotonic() < deadline:
        obs.batch_start()
        time.sleep(0.05)
        obs.batch_end()
    t0 = time.monotonic()
    rnd = mt.dump_all_ranks("manual", reason="asked by rank 0", timeout=2.0)
    result.update(manual_seconds=time.monotonic() - t0, manual=done_round(rnd))
    deadline = time.monotonic() + 30  # rank 1 is through its OOM round (it waits for rank 2)
    while not os.path.exists(os.path.join(out, "result1.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    with open(os.path.join(out, "result0.json"), "w") as f:
        json.dump(result, f)
    store.set("test/done", "1")
    with open(os.path.join(out, "pid2")) as f:
        os.kill(int(f.read()), signal.SIGKILL)
    time.sleep(0.5)  # rank 1 reads test/done before this rank, which holds the store, exits
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])

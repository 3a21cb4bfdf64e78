"""Coordinated dumps on a GPU: two ranks share one GPU under torchrun (gloo
for the process group, CUDA for the tensors); rank 1 runs out of memory
under a memory cap while rank 0 waits for it in a barrier; both ranks write
their snapshot of that moment, and `memsight ranks` merges them into one
report (ranks_job.py)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path


def test_two_ranks_one_gpu_one_oom_both_dump_one_report(tmp_path):
    import torch

    import memsight

    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(memsight.__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    job = Path(__file__).with_name("ranks_job.py")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(job),
           str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    r0, r1 = (json.loads((tmp_path / f"result{r}.json").read_text()) for r in (0, 1))
    assert r0["watching"] and r1["watching"]
    assert r1["oom_raised"] and not r0["oom_raised"]  # the OOM is raised as ever, after the dumps
    rnd = r1["round"]
    assert rnd["seq"] == 1 and rnd["missing"] == {}
    assert sorted(rnd["files"]) == ["0", "1"]
    assert rnd["waited"] < 10, rnd  # rank 0 answered from its watcher thread while blocked in a barrier
    # rank 0's snapshot is of the moment: taken while it waited, with its model's memory live
    with open(rnd["files"]["0"], "rb") as f:
        snap0 = pickle.load(f)
    meta = snap0["memsight_rank"]
    assert (meta["rank"], meta["seq"], meta["tag"], meta["origin_rank"]) == (0, 1, "oom", 1)
    assert meta["device_name"] == torch.cuda.get_device_name(0) and meta["torch"] == torch.__version__
    assert any(b["state"] == "active_allocated" for s in snap0["segments"] for b in s["blocks"])
    assert memsight.load(rnd["files"]["1"]).trace_entry_count > 0

    rep = memsight.ranks(rnd["manifest"])
    assert [r.rank for r in rep.ranks] == [0, 1] and rep.world_size == 2 and rep.missing == []
    assert rep.mismatches == []  # one GPU, one torch
    assert [v.rank for v in rep.ooms] == [1]
    oom = rep.rank(1).ooms[0]
    assert oom.verdict == "limit" and oom.requested >= 4 << 30
    assert "what differs is its device: a memory cap" in rep.ooms[0].text
    diagnosis = next(f for f in r1["files"] if f.endswith("_oom_diagnosis.txt"))
    text = Path(diagnosis).read_text()
    assert "Every rank at this moment (dump round 1: 2 of 2 ranks wrote a snapshot, 2 of them here" in text
    assert "2 ranks (oom round 1, world size 2), 1 ran out of memory" in text
    out = tmp_path / "ranks.html"
    rep.write_html(out)
    assert out.stat().st_size > 0 and (tmp_path / "ranks.ranks" / "rank1.html").exists()
    print(f"\nOOM round: rank 1 waited {rnd['waited']:.2f} s for rank 0; OOM handled in "
          f"{r1['oom_seconds']:.2f} s (timings {r1['timings']}); native dumper ready: "
          f"{r0['native_dump']}/{r1['native_dump']}")

"""Everything on a 2-rank torchrun job: per-rank files, one run name, rank
aggregation of the memory metrics, per-rank uploads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_helpers import check_oom_outputs


def test_two_rank_torchrun_job(tmp_path):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    import memsight

    env = dict(os.environ)
    pkg_parent = str(Path(memsight.__file__).resolve().parents[1])
    env["PYTHONPATH"] = pkg_parent + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("RUN_NAME", None)
    job = Path(__file__).with_name("ddp_job.py")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(job), str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=420,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = [json.loads((tmp_path / f"result{r}.json").read_text()) for r in (0, 1)]
    assert [r["rank"] for r in results] == [0, 1] and all(r["world_size"] == 2 for r in results)
    assert all(r["oom_raised"] for r in results)
    run = results[0]["run_name"]
    assert results[1]["run_name"] == run  # one run name for the whole job
    folder = tmp_path / run / "torch_traces"
    names = sorted(os.listdir(folder))
    for r in (0, 1):
        check_oom_outputs(str(folder / f"rank{r}_oom"))
        assert f"rank{r}.2.memory_snapshot.pickle" in names and f"rank{r}.2.memory_snapshot.html" in names
        uploaded = sorted(os.listdir(tmp_path / "remote" / run / "oom" / f"rank{r}"))
        assert uploaded == sorted(os.path.basename(p) for p in results[r]["oom_files"])
    # Both ranks dumped the OOM's moment together as round 1 (all_ranks=True,
    # OOMObserver's default): a snapshot each and the manifest.
    assert {"oom_1_manifest.json", "oom_1_rank0.pickle", "oom_1_rank1.pickle"} <= set(names)
    assert len(names) == 2 * 6 + 2 * 2 + 3
    m0, m1 = results[0]["metrics"], results[1]["metrics"]
    # rank 1 held 1 GB more: the max over ranks is rank 1's peak, above rank 0's own
    assert m0["memory/peak_allocated_mem_max"] > m0["memory/peak_allocated_mem"] + 0.9
    assert round(m1["memory/peak_allocated_mem_max"], 2) == round(m1["memory/peak_allocated_mem"], 2)
    assert m0["memory/peak_allocated_mem_max"] == m1["memory/peak_allocated_mem_max"]

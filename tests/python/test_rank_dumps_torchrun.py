"""Coordinated dumps in a real torchrun job on CPU (gloo, torchrun's own
TCPStore): one rank runs out of memory, every live rank writes its snapshot
of the round, a hung rank is named missing after the timeout and delays no
one longer; then a round asked for on demand. See rank_dumps_job.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

HERE = Path(__file__).resolve().parent


def test_one_rank_runs_out_of_memory_every_rank_dumps(tmp_path, core):
    import memsight

    env = dict(os.environ, PYTHONPATH=str(HERE.parents[1] / "python"), MEMSIGHT_NATIVE_DUMP="0",
               OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    # --redirects/--tee: Debian's torch 1.13 torchrun fails on Python 3.11 without them
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=3",
           "--redirects", "1", "--tee", "1", "--log_dir", str(tmp_path / "logs"), "--monitor_interval", "1",
           str(HERE / "rank_dumps_job.py"), str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    # rank 2 was killed, so torchrun reports a failure; the others' results tell the rest
    log = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "result0.json").exists() and (tmp_path / "result1.json").exists(), log
    r0 = json.loads((tmp_path / "result0.json").read_text())
    r1 = json.loads((tmp_path / "result1.json").read_text())
    assert r0["watching"] and r1["watching"]

    oom = r1["oom"]
    assert oom["seq"] == 1 and oom["origin"] == 1
    assert sorted(oom["files"]) == ["0", "1"]
    assert oom["missing"] == {"2": "did not answer within 3 s"}
    assert 2.9 <= oom["waited"] < 8, oom  # the hung rank cost the timeout, no more
    assert Path(oom["files"]["0"]) == tmp_path / "rank0" / "oom_1_rank0.pickle"
    assert Path(oom["files"]["1"]) == tmp_path / "rank1" / "oom_1_rank1.pickle"
    diagnosis = next(f for f in r1["files"] if f.endswith("_oom_diagnosis.txt"))
    text = Path(diagnosis).read_text()
    assert "CUDA out of memory (rank 1 of 3, device 0;" in text
    assert "Every rank at this moment (dump round 1: 2 of 3 ranks wrote a snapshot" in text
    assert "rank 2: no snapshot (did not answer within 3 s)" in text

    manual = r0["manual"]
    assert manual["seq"] == 2 and manual["origin"] == 0
    assert sorted(manual["files"]) == ["0", "1"] and list(manual["missing"]) == ["2"]
    assert r0["manual_seconds"] < 6

    # the merged report of the OOM round, from its manifest: each rank wrote
    # into its own folder beside the others, so the manifest names the
    # others' files by absolute paths into those sibling folders: read there
    rep = memsight.ranks(oom["manifest"])
    assert [r.rank for r in rep.ranks] == [0, 1]
    assert {r.origin.seq for r in rep.ranks} == {1}
    assert rep.world_size == 3 and rep.missing == [2]
    assert rep.manifest_missing == [{"rank": 2, "why": "did not answer within 3 s"}]
    assert [v.rank for v in rep.ooms] == [1]

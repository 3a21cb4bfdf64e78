"""What only two GPUs show: a 2-rank FSDP2 job on two devices whose rank 1
runs out of memory (coordinated dumps, the merged report, the categories of
each rank's shards, a rank that stops answering), and the line profiler
watching device 1. MemProfiler's FSDP2 run on two ranks is
test_memprofiler_gpu.py::test_fsdp2_two_ranks_with_the_tracker. Every run
leaves NVLink multicast off (NCCL_NVLS_ENABLE=0)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from test_line_profiler_gpu import MIB, peaks, reference_peaks

CAP = 3 << 30  # as fsdp_ranks_job.py


def _two_gpus():
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")


def test_fsdp2_two_devices_oom_dumps_report_and_categories(tmp_path):
    _two_gpus()
    fsdp2_ranks(tmp_path, devices=(0, 1), backend="nccl")


def test_fsdp2_two_ranks_sharing_one_gpu(tmp_path):
    """The same job where only one GPU is lent: both ranks on GPU 0, gloo."""
    fsdp2_ranks(tmp_path, devices=(0, 0), backend="gloo", visible="0")


def fsdp2_ranks(tmp_path, devices, backend, visible=None):
    import memsight

    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    env["PYTHONPATH"] = str(Path(memsight.__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    job = Path(__file__).with_name("fsdp_ranks_job.py")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(job), str(tmp_path)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    r0, r1 = (json.loads((tmp_path / f"result{r}.json").read_text()) for r in (0, 1))
    assert (r0["device"], r1["device"]) == devices and r0["backend"] == backend
    assert r0["watching"] and r1["watching"]
    assert r1["oom_raised"] and not r0["oom_raised"]

    # 1. both ranks wrote the OOM's moment, rank 0 from its watcher while blocked in NCCL
    rnd = r1["round"]
    assert rnd["seq"] == 1 and rnd["missing"] == {} and sorted(rnd["files"]) == ["0", "1"]
    assert rnd["waited"] < 10, rnd
    for r in (0, 1):
        with open(rnd["files"][str(r)], "rb") as f:
            meta = pickle.load(f)["memsight_rank"]
        assert (meta["rank"], meta["seq"], meta["tag"], meta["origin_rank"]) == (r, 1, "oom", 1)
    rep = memsight.ranks(rnd["manifest"])
    assert [r.rank for r in rep.ranks] == [0, 1] and rep.world_size == 2 and rep.missing == []
    assert [v.rank for v in rep.ooms] == [1]
    oom = rep.rank(1).ooms[0]
    assert oom.verdict == "limit" and oom.requested == 2 * CAP
    text = rep.ooms[0].text
    assert "memory cap" in text, text

    # 4. categories on each rank: its shards of the parameters, gradients and AdamW's moments
    for r, res in ((0, r0), (1, r1)):
        want = res["expected_shard_bytes"]
        truth = res["truth"]
        assert truth["parameter"] == want and truth["gradient"] == want, (r, truth, want)
        assert truth["optimizer_state"] == 2 * want, (r, truth, want)  # exp_avg, exp_avg_sq
        summary = memsight.load(rnd["files"][str(r)]).summary().devices[devices[r]]
        at = summary.categories.at_snapshot.by_category
        for kind in ("parameter", "gradient", "optimizer_state"):
            got = at[kind]
            assert got.requested == truth[kind], (r, kind, got.requested, truth[kind])
            assert got.tagged == got.bytes, (r, kind, got.tagged, got.bytes)
        print(f"\nrank {r} on cuda:{devices[r]} ({backend}): parameters {at['parameter'].requested} B, gradients "
              f"{at['gradient'].requested} B, optimizer state {at['optimizer_state'].requested} B "
              f"(sharded: {want} B each, 2x for the moments)")

    # a rank stopped dead costs the asking rank the round's timeout, no more
    stopped = r0["stopped_round"]
    assert stopped["files"] == [0] and stopped["missing"] == [1], stopped
    assert stopped["timeout"] <= stopped["seconds"] < stopped["timeout"] + 5, stopped
    manifest = json.loads(Path(stopped["manifest"]).read_text())
    assert "1" in json.dumps(manifest.get("missing", manifest)), manifest
    assert r1["resumed"]
    print(f"OOM round: rank 1 waited {rnd['waited']:.2f} s for rank 0, OOM handled in {r1['oom_seconds']:.2f} s; "
          f"the round with rank 1 stopped returned in {stopped['seconds']:.2f} s (timeout {stopped['timeout']} s)")


def on_device_1():
    import torch

    a = torch.empty(MIB, device="cuda:1")  # 4 MiB
    b = torch.empty(4 * MIB, device="cuda:1")  # 16 MiB
    del a
    c = torch.empty(2 * MIB, device="cuda:1")  # 8 MiB
    del b, c
    return 0


def test_line_profiler_target_gpu_1_native_equals_reference(tmp_path, monkeypatch):
    _two_gpus()
    import gc

    import torch

    from memsight.torch import LineProfiler

    monkeypatch.setenv("MEMSIGHT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MEMSIGHT_NATIVE_COUNTERS", "1")
    keep0 = torch.empty(16 * MIB, device="cuda:0")  # device 0 busy: its counters must not leak in
    gc.collect()
    torch.cuda.empty_cache()
    gc.disable()
    try:
        expected = reference_peaks(on_device_1, 1)
        prof = LineProfiler(on_device_1)
        prof.set_target_gpu(1)
        with prof:
            assert prof.counter_source == "c10 DeviceStats (native)" and prof.hook.native
            on_device_1()
    finally:
        gc.enable()
    got = {k: v for k, v in peaks(prof, on_device_1).items() if v is not None}
    assert got == expected
    assert got[3] - got[1] == 4 * MIB and got[4] - got[1] == 20 * MIB, got
    del keep0
    print(f"\nline profiler on cuda:1 (native counters): {len(got)} lines equal to the pure-Python reference")

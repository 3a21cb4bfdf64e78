"""MemProfiler on a real GPU: a training run with every kind of data on, an
OOM inside a collected call, and FSDP2 on 2 GPUs under torchrun."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_helpers import make_model, oom_step, train_step

WIDTH, BATCH = 1024, 64
KEEP = 8 << 20  # bytes each profiled step keeps alive, at a line of this file


def _profiler(tmp_path, max_iter=3):
    from memsight.torch import MemProfiler

    return MemProfiler(
        save_dir=str(tmp_path / "prof"),
        collect_funcs={"default": ["train_step"]},
        cuda_allocator_history=True,
        cuda_allocator_history_options={"max_entries": 50_000},
        schedule={"warmup_iters": 1, "max_iter": max_iter},
        dump_memorystats_pickle=True,
    )


def test_training_run_collects_every_angle(tmp_path):
    import torch
    import yaml

    import memsight

    model, opt = make_model(width=WIDTH)
    prof = _profiler(tmp_path).connect(model, opt)
    kept = []

    @prof.profile(name="train_step")
    def step():
        kept.append(torch.empty(KEEP, dtype=torch.uint8, device="cuda"))  # the user site that grows
        train_step(model, opt, batch=BATCH, width=WIDTH)

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    # allocator history was recorded only while profiling: it is off again
    assert not torch._C._cuda_isHistoryEnabled()
    prof.finish()
    stats = prof.memory_stats
    assert sorted(stats) == [f"0.train_step.{i}.{c}" for i in (2, 3) for c in ("end", "start")]
    # the statistics come through the native counter reader, with torch's names in torch's order
    assert prof.counter_source == "c10 DeviceStats (native)"
    now = prof._cuda_stats(torch)
    assert list(now) == list(torch.cuda.memory_stats()) and now == dict(torch.cuda.memory_stats())
    assert [k for k in stats["0.train_step.2.end"] if k in now] == list(now)
    start, end = stats["0.train_step.2.start"], stats["0.train_step.2.end"]
    # torch's statistics at both ends: the kept buffer is the net growth
    grown = end["allocated_bytes.all.current"] - start["allocated_bytes.all.current"]
    assert KEEP <= grown <= KEEP + (2 << 20), grown  # a cached block may be a little larger
    assert end["rss"] > 0 and end["vms"] >= end["rss"]
    # module hooks: each Linear's forward allocates its output (batch x width floats)
    fwd = end["module_forward"]
    assert fwd["0"]["calls"] == 1 and fwd["0"]["cuda_delta"] >= BATCH * WIDTH * 4
    # saved tensors: the first ReLU saves its output
    assert end["saved_tensors"]["1"] == {"bytes": BATCH * WIDTH * 4, "tensors": 1}
    assert end["saved_tensors_bytes"] == sum(r["bytes"] for r in end["saved_tensors"].values())
    # what grew, by user site: the line of `step` above holding KEEP bytes
    top = end["grew_by_site"][0]
    assert top["site"].startswith("test_memprofiler_gpu.py:") and top["site"].endswith(":step"), top
    assert KEEP <= top["bytes"] <= KEEP + (2 << 20) and top["blocks"] == 1
    folder = tmp_path / "prof"
    names = sorted(os.listdir(folder))
    for it in (2, 3):
        for ctx in ("start", "end"):
            assert f"cuda_alloc_rank_0.train_step.{it}.{ctx}.pickle" in names
    assert not any(".train_step.1." in n or ".train_step.4." in n for n in names)
    snap = memsight.load(str(folder / "cuda_alloc_rank_0.train_step.2.end.pickle"))
    assert snap.segment_count > 0 and snap.trace_entry_count > 0  # the engine reads it
    with open(folder / "cuda_alloc_rank_0.train_step.2.end.pickle", "rb") as f:
        raw = pickle.load(f)
    assert raw["segments"] and raw["device_traces"]
    assert yaml.safe_load((folder / "rank_0_memory_stats.yaml").read_text()) == stats
    page = (folder / "rank_0_memprofiler.html").read_text()
    assert 'href="cuda_alloc_rank_0.train_step.3.start.pickle"' in page and top["site"] in page
    assert "<script" not in page


def test_oom_in_a_collected_call_loses_nothing(tmp_path):
    import torch
    import yaml

    model, opt = make_model(width=WIDTH)
    prof = _profiler(tmp_path, max_iter=4).connect(model, opt)
    fn = prof.profile(name="train_step")(lambda i: oom_step(model, WIDTH) if i == 3 else train_step(model, opt))
    raised = False
    for i in range(1, 6):
        try:
            fn(i)
        except torch.cuda.OutOfMemoryError:
            raised = True
            break
    assert raised
    folder = tmp_path / "prof"
    data = yaml.safe_load((folder / "rank_0_memory_stats.yaml").read_text())
    assert sorted(data) == [f"0.train_step.{i}.{c}" for i in (2, 3) for c in ("end", "start")]
    assert data["0.train_step.3.end"]["error"].startswith("OutOfMemoryError")
    assert (folder / "cuda_alloc_rank_0.train_step.3.end.pickle").exists()
    prof.finish()
    assert not torch._C._cuda_isHistoryEnabled()


def test_fsdp2_two_ranks_with_the_tracker(tmp_path):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    import memsight

    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(memsight.__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    job = Path(__file__).with_name("fsdp_memprof_job.py")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(job), str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    import yaml

    for r in (0, 1):
        result = json.loads((tmp_path / f"result{r}.json").read_text())
        assert result["fsdp_failed"] is False
        assert result["counter_source"] == "c10 DeviceStats (native)"
        log = (tmp_path / "prof" / f"fsdp_mem_rank_{r}_train_step_2.log").read_text()
        assert "Iteration 2 train_step Peak FSDP memory stats:" in log
        assert "Modulewise FSDP memory stats:" in log and "Sharded Param" in log
        assert not (tmp_path / "prof" / f"fsdp_mem_rank_{r}_train_step_1.log").exists()
        stats = yaml.safe_load((tmp_path / "prof" / f"rank_{r}_memory_stats.yaml").read_text())
        peak = stats[f"{r}.train_step.2.end"]["fsdp_peak"]
        cats = peak[f"cuda:{r}"]
        assert cats["Total"] > 0 and cats["Sharded Param"] > 0
        # each rank holds half of the parameters, sharded
        assert abs(cats["Sharded Param"] - result["param_bytes"] / 2) <= 0.1 * result["param_bytes"]
        assert (tmp_path / "prof" / f"rank_{r}_memprofiler.html").exists()


def test_lightning_callback_in_a_fit(tmp_path):
    import torch
    import yaml

    from test_lightning_gpu import _lightning, _setup, _trainer

    L = _lightning()
    from memsight.torch.lightning import MemProfilerCallback

    cb = MemProfilerCallback(save_dir=str(tmp_path / "prof"), cuda_allocator_history=True,
                             schedule={"warmup_iters": 1, "max_iter": 2})
    assert isinstance(cb, L.Callback)
    module, loader = _setup(L)  # Linear(128, 512), ReLU, Linear(512, 10); batches of 32
    _trainer(L, tmp_path, [cb], steps=4).fit(module, loader)
    assert not torch._C._cuda_isHistoryEnabled()
    stats = yaml.safe_load((tmp_path / "prof" / "rank_0_memory_stats.yaml").read_text())
    assert sorted(stats) == ["0.training_step.2.end", "0.training_step.2.start"]
    end = stats["0.training_step.2.end"]
    assert end["saved_tensors"]["net.1"] == {"bytes": 32 * 512 * 4, "tensors": 1}
    assert end["allocated_bytes.all.peak"] > 0 and end["module_forward"]["net.0"]["calls"] == 1
    names = os.listdir(tmp_path / "prof")
    assert "cuda_alloc_rank_0.training_step.2.end.pickle" in names and "rank_0_memprofiler.html" in names

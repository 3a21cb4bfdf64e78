"""A real OOM in a small training loop, and MemorySnapshot next to an armed
OOMObserver."""

from __future__ import annotations

import os
import pickle

import pytest

from gpu_helpers import SUFFIXES, check_oom_outputs, make_model, oom_step, train_step


def test_real_oom_writes_five_files_and_the_diagnosis(tmp_path):
    import torch

    from memsight.torch import Callbacks, OOMObserver

    obs = OOMObserver(folder=str(tmp_path / "{run_name}" / "torch_traces"), remote_file_name=None)
    model, opt = make_model()
    runner = Callbacks(obs, run_name="gpu-oom")
    runner.fit_start()
    assert torch._C._cuda_isHistoryEnabled()
    with pytest.raises(torch.cuda.OutOfMemoryError):  # memsight never swallows the OOM
        for step in range(5):
            runner.batch_start()
            if step == 3:
                oom_step(model)
            train_step(model, opt)
            runner.batch_end()
    prefix = str(tmp_path / "gpu-oom" / "torch_traces" / "rank0_oom")
    assert obs.last_files == [prefix + s for s in SUFFIXES]
    snap = check_oom_outputs(prefix)
    # The history covers the training steps before the OOM (many allocs), and
    # the trace's last entry is the OOM itself.
    trace = snap["device_traces"][torch.cuda.current_device()]
    assert sum(e["action"] == "alloc" for e in trace) > 50
    assert trace[-1]["action"] == "oom" and trace[-1]["size"] >= 1 << 40
    assert any(f["filename"].endswith("gpu_helpers.py") for e in trace if e["action"] == "alloc" for f in e.get("frames", []))
    print(f"\nOOM files written in {obs.last_duration:.3f}s; timings {obs.last_timings}")
    runner.close()
    assert not torch._C._cuda_isHistoryEnabled()


def test_memory_snapshot_window_then_oom_still_fires(tmp_path):
    import torch

    from memsight.torch import Callbacks, MemorySnapshot, OOMObserver

    oom = OOMObserver(folder=str(tmp_path / "oom"), remote_file_name=None)
    ms = MemorySnapshot(skip_batches=0, interval=2, folder=str(tmp_path / "ms"), remote_file_name=None)
    model, opt = make_model()
    runner = Callbacks(oom, ms, run_name="r")
    runner.fit_start()
    for _ in range(3):
        runner.batch_start()
        train_step(model, opt)
        runner.batch_end()
    assert ms.done
    assert sorted(os.listdir(tmp_path / "ms")) == ["rank0.2.memory_snapshot.html", "rank0.2.memory_snapshot.pickle"]
    with open(tmp_path / "ms" / "rank0.2.memory_snapshot.pickle", "rb") as f:
        window = pickle.load(f)
    window_allocs = sum(e["action"] == "alloc" for t in window["device_traces"] for e in t)
    assert window_allocs > 20
    with open(tmp_path / "ms" / "rank0.2.memory_snapshot.html", encoding="utf-8") as f:
        assert "<script" in f.read()
    # The window closed, but the OOM observer's recording is still on...
    assert torch._C._cuda_isHistoryEnabled()
    runner.batch_start()
    with pytest.raises(torch.cuda.OutOfMemoryError):
        oom_step(model)
    # ...so the OOM is captured, with the history of the window kept.
    snap = check_oom_outputs(str(tmp_path / "oom" / "rank0_oom"))
    allocs = sum(e["action"] == "alloc" for t in snap["device_traces"] for e in t)
    assert allocs > window_allocs
    runner.close()
    assert not torch._C._cuda_isHistoryEnabled()


def test_uploads_of_a_real_oom_to_a_file_destination(tmp_path):
    import torch

    from memsight.torch import OOMObserver

    obs = OOMObserver(folder=str(tmp_path / "local"), remote_file_name=(tmp_path / "remote").as_uri() + "/{run_name}")
    obs.fit_start()
    model, _ = make_model(width=256, depth=1)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        oom_step(model, width=256)
    obs.close()  # flushes the uploads
    run = obs.state.run_name
    assert sorted(os.listdir(tmp_path / "remote" / run)) == sorted(os.path.basename(p) for p in obs.last_files)

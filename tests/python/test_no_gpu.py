"""Without torch, or with a torch that has no CUDA: everything imports and
constructs; GPU-only parts warn once and turn themselves off."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import warnings

import pytest

from memsight_testlib import PYTHON_DIR, FakeAllocator, make_fake_torch


def test_import_never_imports_torch():
    code = (
        "import sys; import memsight, memsight.torch, memsight.torch.capture.recording, "
        "memsight.torch.callbacks.oom, memsight.torch.callbacks.uploads, "
        "memsight.torch.callbacks.memory_monitor, memsight.torch.callbacks.memory_snapshot; "
        "o = memsight.torch.OOMObserver(); s = memsight.torch.MemorySnapshot(); "
        "m = memsight.torch.MemoryMonitor(); "
        "print('torch' in sys.modules)"
    )
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("torch_kind", ["absent", "cpu-only"])
def test_gpu_only_callbacks_warn_once_and_disable(torch_kind, monkeypatch, no_torch, tmp_path):
    if torch_kind == "cpu-only":
        torch = make_fake_torch(FakeAllocator({"segments": [], "device_traces": []}), cuda=False)
        monkeypatch.setitem(sys.modules, "torch", torch)
    from memsight.torch import Callbacks, MemoryMonitor, MemorySnapshot, OOMObserver

    cbs = [OOMObserver(), MemorySnapshot(skip_batches=0, interval=1), MemoryMonitor()]
    runner = Callbacks(*cbs, run_name="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with runner:
            for _ in range(3):
                runner.batch_start()
                runner.batch_end()
            runner.epoch_end()
        runner.fit_start()  # a second fit: no second warning
    messages = [str(w.message) for w in caught]
    assert len(messages) == 3, messages
    assert any("OOMObserver" in m and "CUDA" in m for m in messages)
    assert any("MemorySnapshot" in m for m in messages)
    assert any("MemoryMonitor" in m for m in messages)
    assert all(not cb.enabled for cb in cbs)
    assert not os.path.exists(tmp_path / "cpu")  # no folder made, no file written
    assert cbs[2].history == []


def test_model_not_on_cuda_disables(fake_torch, tmp_path):
    from memsight.torch import OOMObserver, TrainState

    obs = OOMObserver(folder=str(tmp_path / "o"))
    with pytest.warns(UserWarning, match="model on CUDA, but it is on cpu"):
        obs.fit_start(TrainState(run_name="r", device="cpu"))
    assert not obs.enabled and not obs.armed
    assert fake_torch.observers == [] and fake_torch.enabled is None


def test_record_and_snapshot_without_cuda(no_torch, tmp_path):
    import memsight.torch as mt
    from memsight.torch._util import cuda as _cuda

    _cuda._warned.discard("record")
    _cuda._warned.discard("snapshot")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with mt.record() as rec:
            assert not rec.active
        with mt.record():
            pass
        snap = mt.snapshot()
        mt.snapshot()
    assert [str(w.message).split(";")[0] for w in caught] == [
        "memsight: CUDA is not available, so there is no allocator history to record",
        "memsight: CUDA is not available",
    ]
    assert snap == {"segments": [], "device_traces": []}
    path = mt.dump(tmp_path / "empty.pickle")
    with open(path, "rb") as f:
        assert pickle.load(f) == snap


def test_memory_monitor_report_without_torch_needs_stats(no_torch):
    from memsight.torch import memory_report

    with pytest.raises(ImportError, match="needs PyTorch"):
        memory_report()

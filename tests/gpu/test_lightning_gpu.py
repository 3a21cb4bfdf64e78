"""The Lightning adapters in real Lightning fits: one that ends, one that dies of OOM."""

from __future__ import annotations

import os
import pickle

import pytest

from gpu_helpers import check_oom_outputs


def _lightning():
    try:
        import lightning.pytorch as L
    except ImportError:
        L = pytest.importorskip("pytorch_lightning")
    return L


def _setup(L, oom_at=None):
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))

        def training_step(self, batch, idx):
            x, y = batch
            if oom_at is not None and idx == oom_at:
                x = torch.empty((1 << 41) // (4 * 128), 128, device=self.device)  # ~2 TiB: OOM
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    data = TensorDataset(torch.randn(256, 128), torch.randint(0, 10, (256,)))
    return Module(), DataLoader(data, batch_size=32)


def _trainer(L, tmp_path, callbacks, steps=5):
    return L.Trainer(accelerator="gpu", devices=1, max_steps=steps, logger=False, enable_checkpointing=False,
                     enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks,
                     default_root_dir=str(tmp_path))


def test_adapters_in_a_fit(tmp_path):
    import torch

    L = _lightning()
    from memsight.torch.lightning import MemoryMonitorCallback, MemorySnapshotCallback, OOMObserverCallback

    oom = OOMObserverCallback(folder=str(tmp_path / "oom"), remote_file_name=None, run_name="lit")
    ms = MemorySnapshotCallback(skip_batches=1, interval=2, folder=str(tmp_path / "ms"), remote_file_name=None,
                                run_name="lit")
    mon = MemoryMonitorCallback(run_name="lit")
    assert isinstance(oom, L.Callback)
    module, loader = _setup(L)
    _trainer(L, tmp_path, [oom, ms, mon]).fit(module, loader)
    assert sorted(os.listdir(tmp_path / "ms")) == ["rank0.3.memory_snapshot.html", "rank0.3.memory_snapshot.pickle"]
    # the adapters hand the LightningModule and its optimizer over: tagged kinds
    with open(tmp_path / "ms" / "rank0.3.memory_snapshot.pickle", "rb") as f:
        tags = {t["name"]: t["category"] for t in pickle.load(f)["memsight_tags"]["storages"]}
    assert tags["net.0.weight"] == "parameter" and tags["optimizer.state[net.2.bias].exp_avg"] == "optimizer_state"
    assert [b for b, _ in mon.callback.history] == [1, 2, 3, 4, 5]
    assert mon.callback.latest["memory/peak_allocated_mem"] > 0
    assert oom.callback.enabled and not oom.callback.armed  # armed for the fit, closed at teardown
    assert os.listdir(tmp_path / "oom") == []  # no OOM, no files
    assert not torch._C._cuda_isHistoryEnabled()
    assert oom.state.batch == 5 and oom.state.sample == 5 * 32


def test_adapter_captures_an_oom_in_a_fit(tmp_path):
    import torch

    L = _lightning()
    from memsight.torch.lightning import OOMObserverCallback

    oom = OOMObserverCallback(folder=str(tmp_path / "oom"), filename="rank{rank}_ba{batch}_oom",
                              remote_file_name=None, run_name="lit-oom")
    module, loader = _setup(L, oom_at=2)
    with pytest.raises(torch.cuda.OutOfMemoryError):
        _trainer(L, tmp_path, [oom]).fit(module, loader)
    snap = check_oom_outputs(str(tmp_path / "oom" / "rank0_ba2_oom"))
    assert {t["name"] for t in snap["memsight_tags"]["storages"]} >= {"net.0.weight", "net.2.bias"}
    with open(tmp_path / "oom" / "rank0_ba2_oom_oom_diagnosis.txt") as f:
        assert "By kind: " in f.read()
    assert not torch._C._cuda_isHistoryEnabled()

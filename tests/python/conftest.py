"""Shared fixtures of the CPU tests (tests/python).

The tests import the package from this checkout's python/ folder, so they
run without installing anything; the compiled engine (memsight._core) is
built there by `cmake --build build/py --target _core`. Tests that need it
skip where it is not built; everything else is pure Python.
"""

from __future__ import annotations

import os
import pickle
import sys
from pathlib import Path

import pytest

# The stand-in CUDA of these tests must not start building the native snapshot
# dumper against the CPU torch installed here (tests/python/test_native_dump.py
# and tests/gpu exercise it).
os.environ["MEMSIGHT_NATIVE_DUMP"] = "0"

from memsight_testlib import DATA, FakeAllocator, make_fake_torch


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def core():
    """The compiled engine; skips where it is not built."""
    return pytest.importorskip("memsight._core", reason="memsight._core is not built")


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    """No distributed or upload settings leak in from the environment; files
    land in a temporary working directory."""
    for var in (
        "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK",
        "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID",
        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "RUN_NAME", "MEMSIGHT_RUN_NAME",
        "TORCHELASTIC_RUN_ID", "MEMSIGHT_UPLOAD_URI", "S3_ENDPOINT_URL", "AWS_ENDPOINT_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    import memsight.torch.callbacks.uploads as uploads

    monkeypatch.setattr(uploads, "_default_destination", None)
    yield


@pytest.fixture
def fake_torch(fake_torch_with, data_dir):
    """Installs a fake ``torch`` whose allocator history holds tests/data/oom.pickle."""
    with open(data_dir / "oom.pickle", "rb") as f:
        return fake_torch_with(pickle.load(f))


@pytest.fixture
def fake_torch_with(monkeypatch):
    """``fake_torch_with(snapshot_dict)`` installs a fake ``torch`` whose
    allocator history holds that snapshot; returns its allocator."""
    return lambda snap: _install_fake_torch(monkeypatch, snap)


def _install_fake_torch(monkeypatch, snap):
    alloc = FakeAllocator(snap)
    torch = make_fake_torch(alloc)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.cuda", torch.cuda)
    monkeypatch.setitem(sys.modules, "torch.cuda.memory", torch.cuda.memory)
    # memsight's process-wide state starts fresh for every test.
    import memsight.torch.callbacks.oom as oom
    import memsight.torch.capture.recording as recording

    monkeypatch.setattr(oom, "_attached", False)
    monkeypatch.setattr(oom, "_armed", [])
    monkeypatch.setattr(recording, "recorder", recording._Recorder())
    monkeypatch.setattr(recording, "_started", [])
    return alloc


@pytest.fixture
def no_torch(monkeypatch):
    """Makes ``import torch`` fail, whether or not torch is installed."""
    for name in list(sys.modules):
        if name == "torch" or name.startswith("torch."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "torch", None)
    yield

"""GPU tests: run on a machine with CUDA, with one command:

    python3 -m pytest tests/gpu

Everything here is skipped cleanly where torch or CUDA is missing. memsight
is imported as installed (`pip install .`), else from this checkout's
python/ folder (with _core built by CMake).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

try:
    import memsight._core  # noqa: F401  (installed)
except ImportError:
    sys.path.insert(0, str(REPO / "python"))
    for name in [m for m in sys.modules if m == "memsight" or m.startswith("memsight.")]:
        del sys.modules[name]


def _cuda_ok() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "CUDA is not available"
    return None


def pytest_collection_modifyitems(config, items):
    why = _cuda_ok()
    for item in items:
        item.add_marker(pytest.mark.gpu)
        if why:
            item.add_marker(pytest.mark.skip(reason=why))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU")


@pytest.fixture(autouse=True)
def _clean_gpu_state(monkeypatch, tmp_path):
    """Each test starts with recording off, memory released, in a temp dir."""
    if _cuda_ok():
        yield
        return
    import torch

    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "RUN_NAME", "MEMSIGHT_UPLOAD_URI", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    torch.cuda.memory._record_memory_history(None)
    yield
    torch.cuda.memory._record_memory_history(None)
    torch.cuda.empty_cache()


@pytest.fixture
def repo() -> Path:
    return REPO


os.environ.setdefault("PYTHONUNBUFFERED", "1")

"""Helpers shared by the CPU tests (a uniquely named module, so that other
test folders' conftest.py files cannot shadow it)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
PYTHON_DIR = REPO / "python"
MEMSIGHT = os.environ.get("MEMSIGHT_BIN", str(REPO / "build" / "release" / "memsight"))


def cli(*args: Any) -> bytes:
    """What the memsight executable prints (it must exit 0)."""
    r = subprocess.run([MEMSIGHT, *map(str, args)], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout
if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


# -- a stand-in for torch's CUDA allocator API ------------------------------------------
# The GPU tests (tests/gpu) run the real thing; these let the CPU tests drive
# memsight's own logic (the recorder's bookkeeping, the OOM path, the window
# of MemorySnapshot) through the same torch functions memsight calls.


class FakeAllocator:
    """Recording state and OOM observers as torch keeps them, plus a call log."""

    def __init__(self, snapshot_data: dict[str, Any]) -> None:
        self.enabled: str | None = None
        self.options: dict[str, Any] = {}
        self.calls: list[tuple[Any, dict[str, Any]]] = []
        self.observers: list[Any] = []
        self.snapshot_data = snapshot_data
        self.snapshots_taken = 0

    def record_memory_history(self, enabled="all", context="all", stacks="all", max_entries=2**63 - 1,
                              device=None, clear_history=False, compile_context=False,
                              global_record_annotations=False, skip_actions=None):
        kwargs = dict(context=context, stacks=stacks, max_entries=max_entries)
        self.calls.append((enabled, kwargs))
        if enabled is None:
            self.enabled, self.options = None, {}
        else:
            self.enabled, self.options = enabled, kwargs

    def memory_snapshot(self):
        self.snapshots_taken += 1
        data = pickle.loads(pickle.dumps(self.snapshot_data))
        if self.enabled is None:
            data["device_traces"] = [[] for _ in data.get("device_traces", [])]
        return data

    def oom(self, device=0, alloc=1 << 40, total=80 << 30, free=1 << 20):
        for fn in list(self.observers):
            fn(device, alloc, total, free)


def make_fake_torch(alloc: FakeAllocator, cuda: bool = True) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.__dict__["__memsight_fake__"] = True
    cuda_mod = types.ModuleType("torch.cuda")
    memory = types.ModuleType("torch.cuda.memory")
    memory._record_memory_history = alloc.record_memory_history
    memory._snapshot = alloc.memory_snapshot
    cuda_mod.memory = memory
    cuda_mod.is_available = lambda: cuda
    cuda_mod.init = lambda: None
    cuda_mod.memory_stats_as_nested_dict = lambda device=None: {
        "allocated_bytes": {"all": {"current": 1_234_567_890, "peak": 2_000_000_000}},
        "reserved_bytes": {"all": {"current": 3 * 10**9, "peak": 4 * 10**9}},
        "num_alloc_retries": 2,
    }
    C = types.SimpleNamespace(
        _cuda_isHistoryEnabled=lambda: alloc.enabled is not None,
        _cuda_attach_out_of_memory_observer=alloc.observers.append,
    )
    torch.cuda = cuda_mod
    torch._C = C
    torch.distributed = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: False)
    return torch

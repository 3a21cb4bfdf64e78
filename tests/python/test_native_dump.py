"""The native dumper's Python side, without a GPU: the comparison with torch's
snapshot it is checked by, and that nothing starts where CUDA is missing.
(tests/gpu/test_dump_gpu.py runs the dumper itself against torch's snapshot.)"""

from __future__ import annotations

import copy
import sys
import types

import pytest

from memsight.torch.capture import _native_dump


def entry(action: str, t: int, **kw) -> dict:
    return {"action": action, "addr": 1, "size": 512, "stream": 0, "time_us": t, **kw}


def snapshot(*entries: dict) -> dict:
    return {"segments": [{"address": 1, "blocks": []}], "device_traces": [list(entries)],
            "allocator_settings": {"max_split_size": -1}}


def test_torchs_own_snapshot_entry_is_the_only_difference_allowed() -> None:
    ours = snapshot(entry("alloc", 1), entry("snapshot", 2))
    theirs = snapshot(entry("alloc", 1), entry("snapshot", 2), entry("snapshot", 3))
    assert _native_dump.same_as_torch(ours, theirs) is None
    theirs["device_traces"][0].append(entry("alloc", 4))
    assert "more" in _native_dump.same_as_torch(ours, theirs)
    # ... unless allocations went on in between: then only the shared history counts
    assert _native_dump.same_as_torch(ours, theirs, quiet=False) is None


def test_a_full_ring_shifts_by_torchs_entry() -> None:
    ours = snapshot(entry("alloc", 1), entry("free_requested", 2), entry("snapshot", 3))
    theirs = snapshot(entry("free_requested", 2), entry("snapshot", 3), entry("snapshot", 4))
    assert _native_dump.same_as_torch(ours, theirs) is None
    theirs["device_traces"][0][0]["action"] = "free_completed"
    assert "free_completed" in _native_dump.same_as_torch(ours, theirs)


def test_values_types_key_order_and_times() -> None:
    ours = snapshot(entry("alloc", 10, frames=[{"name": "f", "filename": "a.py", "line": 3}]))
    theirs = copy.deepcopy(ours)
    assert _native_dump.same_as_torch(ours, theirs) is None
    theirs["device_traces"][0][0]["frames"][0]["line"] = 4
    assert "['line']" in _native_dump.same_as_torch(ours, theirs)
    theirs = copy.deepcopy(ours)
    theirs["device_traces"][0][0]["time_us"] = 12
    assert "time_us" in _native_dump.same_as_torch(ours, theirs)
    assert _native_dump.same_as_torch(ours, theirs, time_slack=2) is None
    theirs = copy.deepcopy(ours)
    e = theirs["device_traces"][0][0]
    theirs["device_traces"][0][0] = {"addr": e.pop("addr"), **e}
    assert "keys" in _native_dump.same_as_torch(ours, theirs)
    theirs = copy.deepcopy(ours)
    theirs["allocator_settings"]["max_split_size"] = -1.0  # same value, other type
    assert "max_split_size" in _native_dump.same_as_torch(ours, theirs)
    # memsight's own key beside torch's is not a difference
    ours["memsight_device_memory"] = [{"device": 0, "total": 1, "limit": None}]
    assert _native_dump.same_as_torch(ours, copy.deepcopy(ours) | {"memsight_device_memory": 0}) is not None
    assert _native_dump.same_as_torch(ours, {k: v for k, v in ours.items() if k != "memsight_device_memory"}) is None


def test_unwinder_is_safe_only_once_inductor_is_fully_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch._inductor", raising=False)
    assert not _native_dump._unwinder_safe()
    m = types.ModuleType("torch._inductor")
    m.__spec__ = types.SimpleNamespace(_initializing=True)
    monkeypatch.setitem(sys.modules, "torch._inductor", m)
    assert not _native_dump._unwinder_safe()
    m.__spec__._initializing = False
    assert _native_dump._unwinder_safe()


def test_nothing_starts_without_cuda_or_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_native_dump, "_state", _native_dump._State())
    monkeypatch.setenv("MEMSIGHT_NATIVE_DUMP", "1")
    monkeypatch.setattr(_native_dump, "cuda_available", lambda: False)
    _native_dump.prepare(wait=True)  # returns at once: no thread, no build
    assert _native_dump._state.thread is None and _native_dump.take() is None
    monkeypatch.setattr(_native_dump, "cuda_available", lambda: True)
    monkeypatch.setenv("MEMSIGHT_NATIVE_DUMP", "0")
    _native_dump.prepare(wait=True)
    assert _native_dump._state.thread is None
    assert _native_dump.status()["ready"] is False


class _Warmer:
    """A dumper whose warm-up finds stacks once `stacks_at` allocations were made."""

    def __init__(self, counts: list[int | None], stacks_at: int | None) -> None:
        self.counts, self.stacks_at, self.tries, self.now = counts, stacks_at, [], None

    def allocations(self) -> int | None:
        self.now = self.counts.pop(0) if len(self.counts) > 1 else self.counts[0]
        return self.now

    def warm(self) -> int:
        self.tries.append(self.now)
        return 4 if self.now is not None and self.stacks_at is not None and self.now >= self.stacks_at else 0


def test_the_warm_up_asks_torch_again_only_after_new_allocations(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each try is a torch snapshot, which leaves a "snapshot" entry in every
    # device's trace: none while the job allocates nothing.
    import time

    monkeypatch.setattr(_native_dump, "_state", _native_dump._State())
    w = _Warmer([5, 5, 5, 6, 6, 6, 9, 9], stacks_at=9)
    _native_dump._warm_symbolizer(w, time.monotonic() + 10, w.allocations, pause=0)
    assert w.tries == [5, 6, 9]
    assert _native_dump._state.warmed == 4 and "warm" in _native_dump._state.seconds
    # Never any stacks: one try, then none until the deadline.
    w = _Warmer([3], stacks_at=None)
    _native_dump._warm_symbolizer(w, time.monotonic() + 0.05, w.allocations, pause=0.001)
    assert w.tries == [3]
    # The count unknown: every pause is a try.
    w = _Warmer([None], stacks_at=None)
    _native_dump._warm_symbolizer(w, time.monotonic() + 0.05, w.allocations, pause=0.001)
    assert len(w.tries) > 3

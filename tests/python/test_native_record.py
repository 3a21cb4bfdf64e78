"""The native recorder's Python side, without a GPU: when its unwinder answers
(only while memsight records, once built and checked), the fallback with one
warning, MEMSIGHT_NATIVE_RECORD=0, and that nothing starts without CUDA.
(tests/python/test_python_unwinder.py tests the unwinder's frame walk;
tests/gpu/test_native_record_gpu.py compares it with torch's recording.)"""

from __future__ import annotations

import logging
import traceback
from typing import Any

import pytest

from memsight._errors import MemsightError
from memsight.torch.capture import _native_dump, _native_record


class FakeUnwinder:
    path = type("P", (), {"name": "python_unwinder-test.so"})()

    def __init__(self) -> None:
        self.enabled: list[bool] = []
        self.compacted: list[bool] = []
        self.checked = 0

    def enable(self, on: bool = True) -> None:
        self.enabled.append(on)

    def compact(self, on: bool = True) -> None:
        self.compacted.append(on)

    def check_here(self) -> int:  # the caller's depth, as the real one counts frames
        self.checked += 1
        return len(traceback.extract_stack()) - 1

    def check_thread(self) -> None:
        self.checked += 1

    def counts(self) -> dict[str, int]:
        return {"gathered": 0, "distinct_stacks": 0, "stacks_held": 0}


@pytest.fixture
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> Any:
    state = _native_record._State()
    monkeypatch.setattr(_native_record, "_state", state)
    monkeypatch.setattr(_native_record, "cuda_available", lambda: True)
    monkeypatch.setattr(_native_record, "torch_module", lambda: object())
    monkeypatch.setattr(_native_dump, "_unwinder_safe", lambda: True)
    monkeypatch.delenv("MEMSIGHT_NATIVE_RECORD", raising=False)
    return state


def test_answers_only_while_memsight_records_once_checked(fresh_state: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeUnwinder()
    monkeypatch.setattr(_native_record, "build_unwinder", lambda torch: fake)
    _native_record.set_recording(True)  # recording starts before the unwinder is ready
    _native_record.prepare(wait=True)
    assert fake.checked >= 4  # shallow, deep, generator, comprehension, thread
    assert fake.enabled == [True]  # ready while recording: answers at once
    assert _native_record.status()["answering"]
    _native_record.set_recording(False)
    assert fake.enabled[-1] is False and not _native_record.status()["answering"]
    monkeypatch.setenv("MEMSIGHT_NATIVE_RECORD", "0")
    _native_record.set_recording(True)  # turned off: never answers
    assert fake.enabled[-1] is False


def test_stack_ids_by_default_unless_turned_off_and_never_with_cpp_frames(fresh_state: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeUnwinder()
    monkeypatch.setattr(_native_record, "build_unwinder", lambda torch: fake)
    monkeypatch.delenv("MEMSIGHT_NATIVE_STACK_IDS", raising=False)
    _native_record.prepare(wait=True)
    assert fake.compacted[:3] == [False, True, False]  # checked both ways
    _native_record.set_recording(True)
    assert fake.compacted[-1] is True and _native_record.status()["stack_ids"] is True  # on by default
    monkeypatch.setenv("MEMSIGHT_NATIVE_STACK_IDS", "0")
    _native_record.set_recording(True)
    assert fake.compacted[-1] is False and _native_record.status()["stack_ids"] is False  # turned off
    monkeypatch.setenv("MEMSIGHT_NATIVE_STACK_IDS", "1")
    _native_record.set_recording(True, cpp_frames=True)  # torch interleaves C++ frames one by one
    assert fake.compacted[-1] is False and _native_record.status()["stack_ids"] is False


def test_a_failed_build_warns_once_and_leaves_torchs_unwinder(fresh_state: Any, monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    def fail(torch: Any) -> Any:
        raise MemsightError("no C++ compiler found (set CXX)")

    monkeypatch.setattr(_native_record, "build_unwinder", fail)
    with caplog.at_level(logging.WARNING, logger="memsight.torch"):
        _native_record.prepare(wait=True)
        _native_record.prepare(wait=True)  # once per process
    warnings = [r for r in caplog.records if "native recorder is not available" in r.getMessage()]
    assert len(warnings) == 1 and "no C++ compiler" in warnings[0].getMessage()
    assert _native_record.ready() is None and "no C++ compiler" in _native_record.status()["error"]
    _native_record.set_recording(True)  # nothing to enable; no error


def test_a_check_that_differs_is_never_enabled(fresh_state: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeUnwinder()

    def differs() -> int:
        raise MemsightError("the native unwinder differs from torch's: frame 0: f a.py:3 against torch's f a.py:4")

    fake.check_here = differs  # type: ignore[method-assign]
    monkeypatch.setattr(_native_record, "build_unwinder", lambda torch: fake)
    _native_record.set_recording(True)
    _native_record.prepare(wait=True)
    assert _native_record.ready() is None and fake.enabled == []
    assert "differs" in _native_record.status()["error"]


def test_nothing_starts_without_cuda_or_when_turned_off(fresh_state: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_native_record, "build_unwinder", lambda torch: pytest.fail("built"))
    monkeypatch.setenv("MEMSIGHT_NATIVE_RECORD", "0")
    _native_record.prepare(wait=True)
    monkeypatch.delenv("MEMSIGHT_NATIVE_RECORD")
    monkeypatch.setattr(_native_record, "cuda_available", lambda: False)
    _native_record.prepare(wait=True)
    assert fresh_state.thread is None


def test_native_record_says_why_it_cannot_record(fresh_state: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import memsight.torch as mt
    from memsight.torch.capture import recording

    monkeypatch.setenv("MEMSIGHT_NATIVE_RECORD", "0")
    with pytest.raises(MemsightError, match="turned off"):
        mt.native_record()
    monkeypatch.delenv("MEMSIGHT_NATIVE_RECORD")
    monkeypatch.setattr(recording, "cuda_available", lambda: False)
    with pytest.raises(MemsightError, match="needs CUDA"):
        mt.native_record()


def test_the_native_builds_share_torchs_flags(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from memsight.torch.capture import _native_counters as build

    root = tmp_path / "torch"
    (root / "include" / "torch" / "csrc").mkdir(parents=True)
    (root / "include" / "c10").mkdir()
    fake = types.SimpleNamespace(__file__=str(root / "__init__.py"), __version__="2.11.0",
                                 _C=types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True))
    flags = build.torch_flags(fake, needs="torch/csrc")
    assert f"-I{root / 'include'}" in flags and "-D_GLIBCXX_USE_CXX11_ABI=1" in flags
    assert f"-Wl,-rpath,{root / 'lib'}" in flags and '-DMEMSIGHT_TORCH_VERSION="2.11.0"' in flags
    with pytest.raises(MemsightError, match="C\\+\\+ headers are not installed"):
        build.torch_flags(fake, needs="no/such")
    monkeypatch.setenv("MEMSIGHT_NATIVE_RECORD", "off")
    assert not build.switched_on("MEMSIGHT_NATIVE_RECORD") and build.switched_on("MEMSIGHT_UNSET_SWITCH")

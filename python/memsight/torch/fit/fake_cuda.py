"""CUDA streams, events and devices with no GPU behind them, for the estimate.

Under fake tensors a step's operators need no GPU, but the code around
them may still ask CUDA for a stream, an event or the current device (FSDP2
makes its own streams for the all-gathers and reduce-scatters), and a
machine without a GPU answers with an error. While an estimate runs,
``fake_cuda()`` answers instead: streams and events that do nothing, and
the current stream of each thread, so that every request is recorded on
the stream it is made on (torch's allocator keeps a pool per stream).

It changes ``torch.cuda``'s functions for the estimate's duration, so CUDA
work on other threads of the same process would see them too: run an
estimate where no real CUDA work runs beside it.

Where torch was built without CUDA (a CPU-only wheel, a distribution's
package), torch has no CUDA device guard and aborts the process when an
operator sets the current CUDA device; ``native/cuda_guard.cpp`` gives it
one that does nothing (compiled once against the installed torch, like the
native dumper).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from typing import Any

_ids = itertools.count(1)


class _Runtime:
    def __init__(self, device: int) -> None:
        self.device = device
        self.local = threading.local()
        self.defaults: dict[int, FakeStream] = {}

    def default(self, device: Any = None) -> FakeStream:
        d = _index(device, self.device)
        s = self.defaults.get(d)
        if s is None:
            s = self.defaults[d] = FakeStream(device=d, _id=0)
        return s

    def current(self, device: Any = None) -> FakeStream:
        return getattr(self.local, "stream", None) or self.default(device)

    def stream_id(self) -> int:
        s = getattr(self.local, "stream", None)
        return 0 if s is None else s.stream_id


_runtime: _Runtime | None = None


def _index(device: Any, default: int) -> int:
    if device is None:
        return default
    if isinstance(device, int):
        return device
    idx = getattr(device, "index", None)
    if idx is None and isinstance(device, str):
        idx = int(device.split(":")[1]) if ":" in device else None
    return default if idx is None else int(idx)


class FakeEvent:
    """A CUDA event that is always complete."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.stream: FakeStream | None = None

    def record(self, stream: FakeStream | None = None) -> None:
        self.stream = stream

    def wait(self, stream: FakeStream | None = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end_event: FakeEvent) -> float:
        return 0.0


class FakeStream:
    """A CUDA stream with no work: an id for the allocator's per-stream
    pools (0 is the default stream, as in torch's snapshots)."""

    def __init__(self, device: Any = None, priority: int = 0, _id: int | None = None, **_: Any) -> None:
        self.device_index = _index(device, _runtime.device if _runtime else 0)
        self.priority = priority
        self.stream_id = next(_ids) * 0x100 if _id is None else _id

    @property
    def cuda_stream(self) -> int:
        return self.stream_id

    @property
    def device(self) -> Any:
        import torch

        return torch.device("cuda", self.device_index)

    def wait_stream(self, stream: FakeStream) -> None:
        pass

    def wait_event(self, event: FakeEvent) -> None:
        pass

    def record_event(self, event: FakeEvent | None = None) -> FakeEvent:
        event = event or FakeEvent()
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def __enter__(self) -> FakeStream:
        self._outer = _set(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _set(self._outer)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FakeStream) and other.stream_id == self.stream_id

    def __hash__(self) -> int:
        return hash(("fake-stream", self.stream_id))

    def __repr__(self) -> str:
        return f"FakeStream(device=cuda:{self.device_index} stream_id={self.stream_id:#x})"


def _set(stream: FakeStream | None) -> FakeStream | None:
    assert _runtime is not None
    outer = getattr(_runtime.local, "stream", None)
    _runtime.local.stream = stream
    return outer


@contextlib.contextmanager
def _stream(stream: FakeStream | None) -> Iterator[None]:
    if stream is None:
        yield
        return
    outer = _set(stream)
    try:
        yield
    finally:
        _set(outer)


_guard: Any = None  # the loaded stand-in device guard (kept: torch points at it)


def _cuda_built(torch: Any) -> bool:
    return bool(getattr(torch._C, "_has_cuda", False) or getattr(torch.version, "hip", None))


def ensure_cuda_guard(torch: Any) -> None:
    """A torch without CUDA gets the no-op CUDA device guard (once)."""
    global _guard
    if _guard is not None or _cuda_built(torch):
        return
    import ctypes

    from ..._errors import MemsightError
    from ..capture._native_counters import NATIVE_DIR, build_library, torch_flags

    try:
        path = build_library("cuda_guard", NATIVE_DIR / "cuda_guard.cpp", torch_flags(torch) + ["-lc10"])
        lib = ctypes.CDLL(str(path))
        lib.memsight_fake_cuda_guard()
    except (MemsightError, OSError, AttributeError) as e:
        raise MemsightError("this torch was built without CUDA, and the stand-in CUDA device guard an "
                            f"estimate needs could not be built: {e}") from e
    _guard = lib


def gpu_visible(torch: Any) -> bool:
    """Whether a GPU answers torch's questions (which kernel, whether bfloat16
    is supported); where none does, the estimate answers them as one would."""
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken CUDA install answers nothing
        return False


def current_stream_id() -> int:
    """The stream the calling thread's requests go to (0 outside an estimate)."""
    return _runtime.stream_id() if _runtime is not None else 0


@contextlib.contextmanager
def fake_cuda(device: int = 0) -> Iterator[None]:
    """torch.cuda's streams, events and devices answered without a GPU
    while the block runs (not re-entrant: one estimate at a time)."""
    global _runtime, _ids
    import torch

    ensure_cuda_guard(torch)
    cuda = torch.cuda
    rt = _Runtime(device)

    def set_device(d: Any) -> None:
        rt.device = _index(d, rt.device)

    patches = {
        "Stream": FakeStream, "Event": FakeEvent,
        "current_stream": rt.current, "default_stream": rt.default,
        "stream": _stream, "set_stream": lambda s: _set(s),
        "current_device": lambda: rt.device, "set_device": set_device,
        "synchronize": lambda device=None: None,
    }
    amp: dict[str, Any] = {}
    if not gpu_visible(torch):
        # No device to count: the estimate's device exists. (Where GPUs
        # exist, torch's own count stays: its first CUDA call checks each.)
        patches["device_count"] = lambda: rt.device + 1
        # autocast("cuda") turns itself off where CUDA is not available, and
        # refuses bfloat16 where it cannot ask the device: the step would run
        # in float32. The device an estimate stands for has both.
        patches["is_bf16_supported"] = lambda *a, **k: True
        common = getattr(getattr(cuda, "amp", None), "common", None)
        if common is not None and hasattr(common, "amp_definitely_not_available"):
            amp["amp_definitely_not_available"] = lambda: False
    if _runtime is not None:
        raise RuntimeError("memsight: an estimate is already running in this process")
    saved = {k: getattr(cuda, k) for k in patches if hasattr(cuda, k)}
    saved_amp = {k: getattr(cuda.amp.common, k) for k in amp}
    _runtime, _ids = rt, itertools.count(1)  # the same stream ids in every estimate
    for k, v in patches.items():
        setattr(cuda, k, v)
    for k, v in amp.items():
        setattr(cuda.amp.common, k, v)
    try:
        yield
    finally:
        for k in patches:
            if k in saved:
                setattr(cuda, k, saved[k])
            else:
                delattr(cuda, k)
        for k, v in saved_amp.items():
            setattr(cuda.amp.common, k, v)
        _runtime = None

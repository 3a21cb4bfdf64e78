"""Recording the allocator's history with Python stacks at a fraction of torch's cost.

torch records a Python stack for every allocator event through the Python
unwinders registered with ``torch::CapturedTraceback``; its own takes the GIL
each time and walks the frames through the C API (bench/recording_overhead.py:
~4-5 us of host time an event, docs/dumps.md). ``native/python_unwinder.cpp``
is an unwinder registered ahead of torch's that reads the calling thread's
frames without the GIL and resolves each distinct stack once. Everything
else is torch's recording, unchanged: the ring buffer, the blocks' stacks,
CUDA graphs, expandable segments, C++ frames, the snapshot.

:func:`prepare` builds it (once per torch and Python, cached like the native
dumper), checks it against torch's unwinder on live stacks (several depths,
a generator, a thread that never ran Python) and then lets it answer while
memsight records; all on a background thread, so recording starts at once
with torch's unwinder and turns cheap when the check has passed. Where it
cannot be built or the check differs, one warning says why and torch's
unwinder stays. ``MEMSIGHT_NATIVE_RECORD=0`` turns it off.

Stack ids (on by default; ``MEMSIGHT_NATIVE_STACK_IDS=0`` turns them off)
make each event's stack one frame that stands for the whole distinct stack, expanded when the snapshot is taken:
torch then stores 16 bytes an event instead of every frame. Only for
Python-only stacks: with C++ frames (``stacks="all"``) torch places each
Python frame at an interpreter frame of the C++ stack, which needs them one
by one.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any

from ..._errors import MemsightError
from .._util.cuda import cuda_available, torch_module
from . import _native_counters as build
from . import _native_dump

log = logging.getLogger("memsight.torch")
ABI = 3  # memsight_unwinder_abi() in native/python_unwinder.cpp (3: compact stacks)


class NativeUnwinder:
    """The loaded unwinder: ``enable``/``disable``, ``check``, ``counts``."""

    def __init__(self, path: Path) -> None:
        lib = ctypes.CDLL(str(path))  # CDLL: calls run without the GIL, as the check needs
        lib.memsight_unwinder_abi.restype = ctypes.c_int
        lib.memsight_unwinder_enable.argtypes = [ctypes.c_int]
        lib.memsight_unwinder_compact.argtypes = [ctypes.c_int]
        lib.memsight_unwinder_check.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_int]
        lib.memsight_unwinder_check_thread.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.memsight_unwinder_counts.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
        if lib.memsight_unwinder_abi() != ABI:
            raise MemsightError(f"{path} is not a Python unwinder of ABI {ABI}")
        self.path = path
        self._lib = lib

    def enable(self, on: bool = True) -> None:
        self._lib.memsight_unwinder_enable(1 if on else 0)

    def compact(self, on: bool = True) -> None:
        """Each event's stack as one frame standing for the whole stack."""
        self._lib.memsight_unwinder_compact(1 if on else 0)

    def check_here(self) -> int:
        """Compares this unwinder with torch's on the calling thread's stack; returns the
        number of frames. Raises MemsightError where they differ."""
        frames, err = ctypes.c_int(0), ctypes.create_string_buffer(512)
        if self._lib.memsight_unwinder_check(ctypes.byref(frames), err, len(err)) != 0:
            raise MemsightError("the native unwinder differs from torch's: " + err.value.decode(errors="replace"))
        return frames.value

    def check_thread(self) -> None:
        """The same on a new thread that never ran Python (as autograd's allocate)."""
        err = ctypes.create_string_buffer(512)
        if self._lib.memsight_unwinder_check_thread(err, len(err)) != 0:
            raise MemsightError("the native unwinder differs from torch's on a thread without Python: "
                                + err.value.decode(errors="replace"))

    def counts(self) -> dict[str, int]:
        out = (ctypes.c_uint64 * 4)()
        self._lib.memsight_unwinder_counts(out)
        return {"gathered": out[0], "distinct_stacks": out[1], "stacks_held": out[2],
                "code_deaths_watched": bool(out[3])}


def check(unwinder: NativeUnwinder) -> None:
    """The unwinder against torch's on several shapes of stack. Raises MemsightError."""
    def deep(k: int) -> int:
        return unwinder.check_here() if k == 0 else deep(k - 1)

    def generator() -> Any:
        yield unwinder.check_here()

    for compact in (False, True):  # each event's frames, and one frame for the whole stack
        unwinder.compact(compact)
        shallow = unwinder.check_here()
        if deep(12) != shallow + 13:  # deep(12) .. deep(0)
            raise MemsightError("the native unwinder's depth does not follow the stack")
        next(generator())
        [unwinder.check_here() for _ in range(1)]  # noqa: C416 - a comprehension's own frame
        unwinder.check_thread()
    unwinder.compact(False)


def build_unwinder(torch: Any) -> NativeUnwinder:
    """Builds (or finds in the cache) the unwinder for the installed torch and Python."""
    flags = build.torch_flags(torch, needs="torch/csrc")
    py_include = Path(sysconfig.get_paths()["include"])
    if not (py_include / "internal" / "pycore_frame.h").is_file():
        raise MemsightError(f"Python's internal headers are not installed (no {py_include / 'internal'})")
    args = [*flags, f"-I{py_include}", *[f"-I{d}" for d in build._cuda_include_dirs()],
            "-ltorch_cpu", "-lc10", "-lpthread"]
    return NativeUnwinder(build.build_library("python_unwinder", build.NATIVE_DIR / "python_unwinder.cpp", args))


def wanted() -> bool:
    return build.switched_on("MEMSIGHT_NATIVE_RECORD")


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.settled = threading.Event()
        self.unwinder: NativeUnwinder | None = None
        self.error: str | None = None
        self.seconds: dict[str, float] = {}
        self.recording = False  # memsight is recording: the unwinder answers once checked
        self.cpp_frames = False  # the recording takes C++ frames too (stacks="all")


_state = _State()


def _prepare() -> None:
    t0 = time.perf_counter()
    try:
        torch = torch_module()
        unwinder = build_unwinder(torch)
        # torch's unwinder, which the check compares with, imports torch._inductor
        # the first time it names frames: not while the job's thread imports it.
        while not _native_dump._unwinder_safe():
            time.sleep(0.5)
        t1 = time.perf_counter()
        check(unwinder)
        _state.seconds.update(build=t1 - t0, check=time.perf_counter() - t1)
    except Exception as e:  # no compiler, no headers, another Python: torch's unwinder
        _state.error = f"{type(e).__name__}: {e}"
        log.warning("memsight: the native recorder is not available (%s); recording uses torch's "
                    "Python unwinder", _state.error)
        _state.settled.set()
        return
    with _state.lock:
        _state.unwinder = unwinder
        _answer()
    atexit.register(unwinder.enable, False)  # torch's unwinder for whatever is freed at exit
    _state.settled.set()
    log.info("memsight: native recorder ready (%s), built in %.1f s, checked in %.2f s",
             unwinder.path.name, _state.seconds["build"], _state.seconds["check"])


def prepare(wait: bool = False) -> None:
    """Builds and checks the unwinder on a background thread (once per process).
    ``wait``: block until it is ready or has failed."""
    if not wanted() or not cuda_available():
        return
    with _state.lock:
        if _state.thread is None:
            if not _native_dump._unwinder_safe() and threading.current_thread() is threading.main_thread():
                _native_dump._load_python_unwinder()  # see there: the check names frames with torch's
            _state.thread = threading.Thread(target=_prepare, name="memsight-native-record", daemon=True)
            _state.thread.start()
    if wait:
        _state.settled.wait()


def stack_ids_wanted() -> bool:
    return os.environ.get("MEMSIGHT_NATIVE_STACK_IDS", "") != "0"


def set_recording(on: bool, cpp_frames: bool = False) -> None:
    """memsight's recording started (True) or stopped: the unwinder answers only
    while memsight records, once it is ready. ``cpp_frames``: the recording takes
    C++ frames too (``stacks="all"``), so stacks are given frame by frame."""
    with _state.lock:
        _state.recording, _state.cpp_frames = on, cpp_frames
        _answer()


def _answer() -> None:
    """Applies the recording state to the unwinder, if it is ready (lock held)."""
    u = _state.unwinder
    if u is not None:
        u.compact(stack_ids_wanted() and not _state.cpp_frames)
        u.enable(_state.recording and wanted())


def ready() -> NativeUnwinder | None:
    return _state.unwinder


def status() -> dict[str, Any]:
    """Whether the native recorder is ready or why not, the seconds its build and check
    took, and its counters (stacks gathered, distinct stacks)."""
    u = _state.unwinder
    answering = bool(u is not None and _state.recording and wanted())
    return {"ready": u is not None, "error": _state.error, "seconds": dict(_state.seconds),
            "answering": answering,
            "stack_ids": answering and stack_ids_wanted() and not _state.cpp_frames,
            "counts": u.counts() if u is not None else {}}

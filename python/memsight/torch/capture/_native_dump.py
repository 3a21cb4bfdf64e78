"""The allocator's snapshot taken natively, for dumps that never stall a job.

``torch.cuda.memory._snapshot()`` turns the allocator's state and history
into Python dicts (about 2 us an entry) and, the first time a process meets
native frames (``stacks="all"``), loads the symbol tables of torch's
libraries (seconds): at an OOM, the job waits for both. ``native/
snapshot_dump.cpp`` takes the same snapshot from c10's allocator in C++,
symbolizes each unique stack once with torch's own symbolizer, and hands
flat arrays to the engine, which writes torch's pickle; no Python object is
made per entry. docs/dumps.md has the measurements.

:func:`prepare` builds it (once per torch, cached like the line profiler's
counter reader), checks it against ``_snapshot()`` and warms the symbolizer,
all on a background thread; until that is done, or wherever it fails (no
compiler, no headers, another layout), :func:`take` returns None and callers
use torch's own path. ``MEMSIGHT_NATIVE_DUMP=0`` turns it off.
"""

from __future__ import annotations

import ctypes
import logging
import pickle
import threading
import time
from pathlib import Path
from typing import Any

from ..._errors import MemsightError
from . import _native_counters as build
from .._util.cuda import cuda_available, torch_module

log = logging.getLogger("memsight.torch")
ABI = 1  # MEMSIGHT_RAW_SNAPSHOT_ABI in native/raw_snapshot.h
# Each snapshot converts the allocator's cycle-counter times to microseconds
# anew, so two snapshots of one history may disagree slightly on them.
TIME_SLACK_US = 1000


class NativeDumper:
    """A loaded dumper library: ``take`` returns the engine's model of the snapshot."""

    def __init__(self, path: Path) -> None:
        lib = ctypes.CDLL(str(path))  # CDLL: calls run without the GIL
        lib.memsight_dump_abi.restype = ctypes.c_int
        lib.memsight_dump_take.restype = ctypes.c_void_p
        lib.memsight_dump_take.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.memsight_dump_free.argtypes = [ctypes.c_void_p]
        lib.memsight_dump_warm.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                           ctypes.c_char_p, ctypes.c_int]
        lib.memsight_dump_timings.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_double)]
        if lib.memsight_dump_abi() != ABI:
            raise MemsightError(f"{path} is not a snapshot dumper of ABI {ABI}")
        self.path = path
        self._lib = lib
        self.last_timings: dict[str, float] = {}

    def take(self, extra: dict[str, Any] | None = None) -> Any:
        """The snapshot now, as a ``memsight._core.Snapshot``, with ``extra``'s keys (plain
        data: memsight_tags, memsight_device_memory) beside torch's. Raises MemsightError."""
        from ..._engine import core

        # The engine reads them through its safe reader, as it would from a file.
        extra_pickle = pickle.dumps({"segments": [], **extra}, protocol=4) if extra else b""

        err = ctypes.create_string_buffer(512)
        t0 = time.perf_counter()
        raw = self._lib.memsight_dump_take(1, err, len(err))
        if not raw:
            raise MemsightError("the native snapshot failed: " + err.value.decode(errors="replace"))
        try:
            t1 = time.perf_counter()
            snap = core().snapshot_from_raw(raw, extra_pickle)
            phases = (ctypes.c_double * 4)()
            self._lib.memsight_dump_timings(raw, phases)
        finally:
            self._lib.memsight_dump_free(raw)
        self.last_timings = {
            "state": phases[0], "gather": phases[1], "symbolize": phases[2], "arrays": phases[3],
            "take": t1 - t0, "model": time.perf_counter() - t1,
        }
        return snap

    def warm(self, max_stacks: int = 256) -> int:
        """Symbolizes up to ``max_stacks`` stacks of live blocks; returns how many."""
        err = ctypes.create_string_buffer(512)
        n = ctypes.c_int(0)
        if self._lib.memsight_dump_warm(max_stacks, ctypes.byref(n), err, len(err)) != 0:
            raise MemsightError("warming the symbolizer failed: " + err.value.decode(errors="replace"))
        return n.value


def build_dumper(torch: Any) -> NativeDumper:
    """Builds (or finds in the cache) the dumper for the installed torch and loads it."""
    flags = build.torch_flags(torch, needs="torch/csrc")
    cuda = build._cuda_include_dirs()
    if not cuda:
        raise MemsightError("the CUDA runtime's headers (cuda_runtime_api.h) were not found")
    args = [*flags, *[f"-I{d}" for d in cuda], "-ltorch_cpu", "-lc10_cuda", "-lc10"]
    return NativeDumper(build.build_library("snapshot_dump", build.NATIVE_DIR / "snapshot_dump.cpp", args))


def _plain(snap: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in snap.items() if k != "memsight_device_memory"}


def _first_difference(a: Any, b: Any, where: str, time_slack: int) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            return f"{where}: keys {list(a)} against torch's {list(b)}"
        for k in a:
            if k in ("time_us",) and isinstance(a[k], int) and isinstance(b[k], int):
                if abs(a[k] - b[k]) > time_slack:
                    return f"{where}['time_us']: {a[k]} against torch's {b[k]}"
                continue
            d = _first_difference(a[k], b[k], f"{where}[{k!r}]", time_slack)
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and type(a) is type(b):
        if len(a) != len(b):
            return f"{where}: {len(a)} items against torch's {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _first_difference(x, y, f"{where}[{i}]", time_slack)
            if d:
                return d
        return None
    return None if a == b and type(a) is type(b) else f"{where}: {a!r:.80} against torch's {b!r:.80}"


def _trace_difference(mine: list[Any], torchs: list[Any], where: str, quiet: bool,
                      time_slack: int) -> str | None:
    extra = [e.get("action") for e in torchs[len(mine):]]
    if quiet and extra != ["snapshot"] * len(extra):
        return f"{where}: torch's has {extra[:3]} more"
    return _first_difference(mine, torchs[: len(mine)], where, time_slack)


def same_as_torch(ours: dict[str, Any], theirs: dict[str, Any], quiet: bool = True,
                  time_slack: int = 0) -> str | None:
    """Where ``ours`` (taken first) and torch's ``_snapshot()`` taken right after differ,
    or None. Each snapshot call adds a ``snapshot`` entry to the history, so torch's
    trace is ours plus that entry. ``quiet``: nothing else was allocated in between, so
    everything else must be equal too (else only the history both hold and the settings).
    ``time_slack``: how many microseconds a ``time_us`` may differ (each snapshot converts
    the allocator's cycle-counter times anew)."""
    ours = {k: v for k, v in ours.items() if k != "memsight_device_memory"}
    a, b = ours.get("device_traces", []), theirs.get("device_traces", [])
    if len(a) != len(b):
        return f"device_traces: {len(a)} devices against torch's {len(b)}"
    for d, (mine, torchs) in enumerate(zip(a, b)):
        diff = _trace_difference(mine, torchs, f"device_traces[{d}]", quiet, time_slack)
        # A full history is a ring: torch's own entry may have pushed out the oldest.
        shift = len(mine) + 1 - len(torchs)
        if diff and quiet and 0 < shift < len(mine):
            if _trace_difference(mine[shift:], torchs, "", quiet, time_slack) is None:
                diff = None
        if diff:
            return diff
    rest_a = {k: v for k, v in ours.items() if k != "device_traces" and (quiet or k == "allocator_settings")}
    rest_b = {k: v for k, v in theirs.items() if k != "device_traces" and (quiet or k == "allocator_settings")}
    return _first_difference(rest_a, rest_b, "snapshot", time_slack)


def check_against_torch(dumper: NativeDumper, torch: Any, attempts: int = 5) -> None:
    """The native snapshot equals ``torch.cuda.memory._snapshot()`` taken right after it:
    on everything when nothing else was allocated in between; while other threads
    allocate, on the history both hold and the settings. Raises MemsightError."""
    for attempt in range(attempts):
        ours = pickle.loads(dumper.take().pickle())
        theirs = torch.cuda.memory._snapshot()
        # Quiet: torch's trace ends in its own snapshot entry, right after ours.
        quiet = all(not t or (t[-1].get("action") == "snapshot" and len(t) <= len(o) + 1)
                    for o, t in zip(ours.get("device_traces", []), theirs.get("device_traces", [])))
        if quiet or attempt == attempts - 1:
            where = same_as_torch(ours, theirs, quiet, time_slack=TIME_SLACK_US)
            if where:
                raise MemsightError(f"the native snapshot differs from torch's in {where}")
            return
        time.sleep(0.2)


def wanted() -> bool:
    return build.switched_on("MEMSIGHT_NATIVE_DUMP")


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.settled = threading.Event()  # built and checked, or failed
        self.warm_done = threading.Event()  # the warming has ended, however
        self.dumper: NativeDumper | None = None
        self.error: str | None = None
        self.warmed = 0
        self.seconds: dict[str, float] = {}


_state = _State()


def _prepare(warm_for: float) -> None:
    try:
        _build_check_warm(warm_for)
    finally:
        _state.settled.set()
        _state.warm_done.set()


def _build_check_warm(warm_for: float) -> None:
    torch = torch_module()
    t0 = time.perf_counter()
    try:
        dumper = build_dumper(torch)
        # torch's Python unwinder (the check names frames) must find torch._inductor
        # imported: this thread must not import it while the job's thread imports.
        while not _unwinder_safe():
            time.sleep(0.5)
        t1 = time.perf_counter()
        check_against_torch(dumper, torch)
        _state.seconds.update(build=t1 - t0, check=time.perf_counter() - t1)
    except Exception as e:  # no compiler, no headers, another layout: torch's path
        _state.error = f"{type(e).__name__}: {e}"
        log.warning("memsight: the native snapshot dumper is not available (%s); dumps use "
                    "torch.cuda.memory._snapshot()", _state.error)
        return
    _state.dumper = dumper
    _state.settled.set()
    log.info("memsight: native snapshot dumper ready (%s), built in %.1f s, checked in %.2f s",
             dumper.path.name, _state.seconds["build"], _state.seconds["check"])
    _warm_symbolizer(dumper, time.monotonic() + warm_for, _allocations)


def _warm_symbolizer(dumper: Any, deadline: float, allocations: Any, pause: float = 1.0) -> None:
    """Warms torch's symbolizer on the stacks of live blocks, off the job's path (the
    first symbolization of native frames loads torch's symbol tables), once there are
    some. Each try asks torch for a snapshot, and torch marks every device's trace
    with a "snapshot" entry for it; a stack is recorded when a block is allocated, so
    a try is made only when ``allocations()`` (None: unknown) has moved since the last."""
    last = None
    while time.monotonic() < deadline:
        count = allocations()
        if count is None or count != last:
            last = count
            try:
                t = time.perf_counter()
                n = dumper.warm()
            except Exception as e:
                log.warning("memsight: %s", e)
                return
            if n:
                _state.warmed = n
                _state.seconds["warm"] = time.perf_counter() - t
                return
        time.sleep(pause)


def _allocations() -> int | None:
    """Blocks torch's allocator has handed out so far on every device (its
    cumulative counter, which marks nothing in the trace); None if unknown."""
    try:
        torch = torch_module()
        return sum(int(torch.cuda.memory_stats(d).get("allocation.all.allocated", 0))
                   for d in range(torch.cuda.device_count()))
    except Exception:  # noqa: BLE001 - then every try warms
        return None


def _unwinder_safe() -> bool:
    """Whether torch's Python unwinder can name frames without importing anything:
    torch._inductor, which it looks up, is imported and done importing."""
    import sys

    m = sys.modules.get("torch._inductor")
    return m is not None and not getattr(getattr(m, "__spec__", None), "_initializing", False)


def _load_python_unwinder() -> None:
    """Names one Python stack with torch's symbolizer, here, on the calling thread.

    torch's Python unwinder imports ``torch._inductor`` the first time it names
    frames (4-6 s on an H100 host with torch 2.11). Done by the background thread
    while the job's thread imports torch's compiler stack, the two imports race
    and the job's fails ("partially initialized module"); done at the first
    snapshot, it is most of that dump's time. So the main thread does it when
    recording starts, unless something (an optimizer, torch.compile) already has.
    """
    torch = torch_module()
    t = time.perf_counter()
    try:
        prof = torch._C._profiler
        prof.symbolize_tracebacks([prof.gather_traceback(python=True, script=False, cpp=False)])
    except Exception as e:
        log.debug("memsight: could not name a Python stack ahead of time: %s", e)
    _state.seconds["python_unwinder"] = time.perf_counter() - t


def prepare(warm_for: float = 120.0, wait: bool = False) -> None:
    """Builds, checks and warms the dumper on a background thread (once per process).

    ``warm_for``: how long to wait for recorded stacks to warm the symbolizer on.
    ``wait``: block until the dumper is built and checked, or has failed (tests,
    benchmarks); the warming goes on in the background.
    """
    if not wanted() or not cuda_available():
        return
    with _state.lock:
        if _state.thread is None:
            if not _unwinder_safe() and threading.current_thread() is threading.main_thread():
                _load_python_unwinder()
            _state.thread = threading.Thread(target=_prepare, args=(warm_for,),
                                             name="memsight-native-dump", daemon=True)
            _state.thread.start()
    if wait:
        _state.settled.wait()


def wait_warm(timeout: float | None = None) -> bool:
    """Blocks until the background warming has ended; False on timeout (benchmarks)."""
    return _state.warm_done.wait(timeout)


def ready() -> NativeDumper | None:
    """The dumper, once built and checked; None before, or where it is not available."""
    return _state.dumper


def status() -> dict[str, Any]:
    """What the native path did: ready or why not, and the seconds each step took."""
    return {"ready": _state.dumper is not None, "error": _state.error, "warmed_stacks": _state.warmed,
            "seconds": dict(_state.seconds),
            "last_dump": dict(_state.dumper.last_timings) if _state.dumper else {}}


def take(extra: dict[str, Any] | None = None) -> Any:
    """A ``memsight.Snapshot`` of the allocator now through the native path, with
    ``extra``'s top-level keys, or None when it is not ready (the caller then uses
    torch's ``_snapshot()``). The storages handed over (``model=``) are tagged unless
    ``extra`` says otherwise."""
    dumper = _state.dumper
    if dumper is None:
        return None
    try:
        from .tags import tags_top_level

        core_snap = dumper.take({**tags_top_level(), **(extra or {})})
    except Exception as e:
        log.warning("memsight: %s; using torch.cuda.memory._snapshot()", e)
        return None
    from ...snapshot import Snapshot

    return Snapshot(core_snap)

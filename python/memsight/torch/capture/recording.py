"""Recording torch's allocator history, shared by everything in memsight.

torch has one recording state per process and no getter for its options, so
a tool that turns recording off when it is done also turns it off for
everyone else (Composer's MemorySnapshot does that to its OOMObserver).
memsight keeps one reference-counted recorder instead: each user
(:func:`record`, OOMObserver, MemorySnapshot) holds a *request*; torch
records with the union of the live requests (the widest context and stacks,
the most entries); when the last request ends, the state from before the
first one comes back.

Limitation: recording that was started outside memsight (a direct
``torch.cuda.memory._record_memory_history`` call) cannot be read back. If
it was on when memsight started, memsight switches to its own options
while it records and leaves recording on, with those options, when it is
done; it never turns off a recording it did not start.
"""

from __future__ import annotations

import gzip
import inspect
import logging
import lzma
import os
import pickle
import sys
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from . import _native_dump, _native_record
from . import holders as _holders
from . import tags as _tags
from .._util.atomic import write_atomic
from .._util.cuda import cuda_available, history_enabled, torch_module, warn_once

log = logging.getLogger("memsight")

_CONTEXTS: tuple[str | None, ...] = (None, "state", "alloc", "all")
_STACKS = ("python", "all")
_ENABLED = ("state", "all")


@dataclass(frozen=True)
class RecordOptions:
    """What to record; the arguments of ``torch.cuda.memory._record_memory_history``."""

    enabled: str = "all"
    context: str | None = "all"
    stacks: str = "python"
    max_entries: int = 100_000
    compile_context: bool = False
    global_record_annotations: bool = False
    skip_actions: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if self.enabled not in _ENABLED:
            raise ValueError(f"enabled must be 'state' or 'all', not {self.enabled!r}")
        if self.context not in _CONTEXTS:
            raise ValueError(f"context must be None, 'state', 'alloc' or 'all', not {self.context!r}")
        if self.stacks not in _STACKS:
            raise ValueError(f"stacks must be 'python' or 'all', not {self.stacks!r}")
        if int(self.max_entries) < 1:
            raise ValueError(f"max_entries must be at least 1, not {self.max_entries!r}")
        object.__setattr__(self, "max_entries", int(self.max_entries))
        object.__setattr__(self, "skip_actions", frozenset(self.skip_actions or ()))


def merge_options(options: list[RecordOptions]) -> RecordOptions:
    """The union of several requests: whatever any of them needs is recorded."""
    if not options:
        raise ValueError("no options to merge")
    skip = frozenset.intersection(*(o.skip_actions for o in options))
    return RecordOptions(
        enabled="all" if any(o.enabled == "all" for o in options) else "state",
        context=max((o.context for o in options), key=_CONTEXTS.index),
        stacks="all" if any(o.stacks == "all" for o in options) else "python",
        max_entries=max(o.max_entries for o in options),
        compile_context=any(o.compile_context for o in options),
        global_record_annotations=any(o.global_record_annotations for o in options),
        skip_actions=skip,
    )


def _apply(options: RecordOptions | None) -> None:
    """Sets torch's recording state: ``options``, or off for None."""
    torch = torch_module()
    fn = torch.cuda.memory._record_memory_history
    params = inspect.signature(fn).parameters
    if options is None:
        fn(None) if "context" in params else fn(False)
        return
    if "context" in params:  # torch >= 2.1: enabled/context/stacks/max_entries
        kwargs: dict[str, Any] = {
            "context": options.context,
            "stacks": options.stacks,
            "max_entries": options.max_entries,
        }
        optional = {
            "compile_context": options.compile_context,
            "global_record_annotations": options.global_record_annotations,
            "skip_actions": sorted(options.skip_actions) or None,
        }
        for name, value in optional.items():
            if name in params and value:
                kwargs[name] = value
        fn(options.enabled, **kwargs)
    else:  # torch 2.0's boolean form
        fn(
            True,
            record_context=options.context is not None,
            trace_alloc_max_entries=options.max_entries if options.enabled == "all" else 1,
            trace_alloc_record_context=options.context in ("alloc", "all"),
        )


class _Recorder:
    """The process-wide registry of recording requests."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._requests: dict[int, tuple[str, RecordOptions]] = {}
        self._next = 1
        self._baseline_on: bool | None = None  # recording state before our first request
        self._applied: RecordOptions | None = None
        self._native_cpp: bool | None = None  # what the native unwinder was last told (None: not recording)

    def acquire(self, options: RecordOptions, owner: str = "") -> int:
        with self._lock:
            if not self._requests:
                self._baseline_on = bool(history_enabled())
                if self._baseline_on:
                    log.info(
                        "memsight: allocator history was already being recorded outside memsight; "
                        "memsight records with its own options now and leaves recording on afterwards"
                    )
            token = self._next
            self._next += 1
            self._requests[token] = (owner, options)
            self._reapply()
            return token

    def release(self, token: int) -> None:
        with self._lock:
            if self._requests.pop(token, None) is None:
                return
            if self._requests:
                self._reapply()
                return
            _native_record.set_recording(False)
            self._native_cpp = None
            if not self._baseline_on:
                try:
                    _apply(None)
                except Exception:
                    log.exception("memsight: could not stop allocator-history recording")
            self._applied = None
            self._baseline_on = None

    def _reapply(self) -> None:
        merged = merge_options([o for _, o in self._requests.values()])
        if merged != self._applied:
            _apply(merged)
            self._applied = merged
        cpp = merged.stacks == "all"
        if cpp != self._native_cpp:
            _native_record.set_recording(True, cpp_frames=cpp)
            self._native_cpp = cpp

    def active_options(self) -> RecordOptions | None:
        with self._lock:
            return self._applied

    def owners(self) -> list[str]:
        with self._lock:
            return [owner for owner, _ in self._requests.values()]


recorder = _Recorder()


class Recording:
    """Allocator-history recording, as a context manager or by hand.

    ::

        with memsight.torch.record(max_entries=100_000):
            train_step()
            memsight.torch.dump("step.pickle")

        rec = memsight.torch.start_recording(stacks="all")
        ...
        rec.stop()

    Recording requests nest and combine (see the module docs); stopping
    restores the state from before. Without CUDA this warns once and records
    nothing.

    ``model=`` / ``optimizer=``: while recording, their phases are marked in
    the history and every snapshot memsight.torch takes tags their storages
    (parameters, gradients, optimizer state, buffers), so that memsight
    tells what kind of memory each block is exactly (docs/summary.md).

    ``holders=``: whether its dumps name the Python objects that hold the
    live tensors (``memsight_holders``, capture/holders.py); None follows
    ``MEMSIGHT_HOLDERS`` (on unless it is 0).
    """

    def __init__(
        self,
        max_entries: int = 100_000,
        context: str | None = "all",
        stacks: str = "python",
        *,
        enabled: str = "all",
        compile_context: bool = False,
        global_record_annotations: bool = False,
        skip_actions: Any = None,
        owner: str = "record",
        model: Any = None,
        optimizer: Any = None,
        holders: bool | None = None,
    ) -> None:
        self.options = RecordOptions(
            enabled=enabled,
            context=context,
            stacks=stacks,
            max_entries=max_entries,
            compile_context=compile_context,
            global_record_annotations=global_record_annotations,
            skip_actions=frozenset(skip_actions or ()),
        )
        self.owner = owner
        self.model = model
        self.optimizer = optimizer
        self._token: int | None = None
        self._tagged: tuple[int, int] | None = None
        #: name who holds the live tensors in its dumps (None: MEMSIGHT_HOLDERS, on by default)
        self.holders = holders
        self._holders_token: int | None = None

    @property
    def active(self) -> bool:
        return self._token is not None

    def start(self) -> Recording:
        if self._token is not None:
            return self
        if not cuda_available():
            warn_once(
                "record",
                "memsight: CUDA is not available, so there is no allocator history to record; "
                "recording is off",
            )
            return self
        self._tagged = _tags.acquire(self.model, self.optimizer)
        self._holders_token = _holders.acquire_setting(self.holders)
        options = self.options
        if _tags.marker_kind() == "annotations" and not options.global_record_annotations:
            # the autograd engine's threads mark the backward: record them all
            options = replace(options, global_record_annotations=True)
        self._token = recorder.acquire(options, self.owner)
        # Dumps of this history take the native path once it is built and warm;
        # its stacks, the native unwinder's once it is built and checked.
        _native_dump.prepare()
        _native_record.prepare()
        return self

    def stop(self) -> None:
        token, self._token = self._token, None
        if token is not None:
            recorder.release(token)
        tagged, self._tagged = self._tagged, None
        _tags.release(tagged)
        token, self._holders_token = self._holders_token, None
        _holders.release_setting(token)

    def hand_over(self, model: Any = None, optimizer: Any = None) -> None:
        """Sets the model and optimizer (those not given stay); a running
        recording takes them from now on."""
        new = (model if model is not None else self.model, optimizer if optimizer is not None else self.optimizer)
        if new[0] is self.model and new[1] is self.optimizer:
            return
        self.model, self.optimizer = new
        if self._token is not None:
            old, self._tagged = self._tagged, _tags.acquire(self.model, self.optimizer)
            _tags.release(old)

    def __enter__(self) -> Recording:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def with_options(self, **changes: Any) -> Recording:
        """A new, stopped Recording with some options changed."""
        r = Recording(owner=self.owner, model=self.model, optimizer=self.optimizer, holders=self.holders)
        r.options = replace(self.options, **changes)
        return r


record = Recording


def native_record(max_entries: int = 100_000, context: str | None = "all", stacks: str = "python",
                  **kwargs: Any) -> Recording:
    """:func:`record` that waits until the native recorder is built and checked, and
    raises MemsightError saying why where it cannot be (benchmarks and tests; ``record``
    itself starts at once and turns native when the recorder is ready)."""
    from ..._errors import MemsightError

    if not _native_record.wanted():
        raise MemsightError("the native recorder is turned off (MEMSIGHT_NATIVE_RECORD=0)")
    if not cuda_available():
        raise MemsightError("the native recorder needs CUDA")
    _native_record.prepare(wait=True)
    if _native_record.ready() is None:
        raise MemsightError(f"the native recorder is not available: {_native_record.status()['error']}")
    return Recording(max_entries, context, stacks, **kwargs)

_started: list[Recording] = []
_started_lock = threading.Lock()


def start_recording(
    max_entries: int = 100_000, context: str | None = "all", stacks: str = "python", **kwargs: Any
) -> Recording:
    """Starts recording and returns the handle; :func:`stop_recording` ends it."""
    rec = Recording(max_entries, context, stacks, **kwargs).start()
    with _started_lock:
        _started.append(rec)
    return rec


def stop_recording(recording: Recording | None = None) -> None:
    """Stops ``recording``, or the latest one :func:`start_recording` started."""
    with _started_lock:
        if recording is None:
            if not _started:
                return
            recording = _started.pop()
        elif recording in _started:
            _started.remove(recording)
    recording.stop()


def record_memory_history(
    enabled: str | None = "all",
    context: str | None = "all",
    stacks: str = "all",
    max_entries: int = sys.maxsize,
    device: Any = None,
    clear_history: bool = False,
    compile_context: bool = False,
    global_record_annotations: bool = False,
    skip_actions: Any = None,
    *,
    model: Any = None,
    optimizer: Any = None,
) -> Recording | None:
    """``torch.cuda.memory._record_memory_history`` with torch's arguments
    and defaults, through memsight's shared recorder, plus ``model=`` and
    ``optimizer=`` (see :class:`Recording`). ``enabled=None`` stops the
    latest recording started here. Returns the recording."""
    del device  # torch ignores it too: recording covers every device
    if enabled is None:
        stop_recording()
        return None
    if clear_history:
        log.info("memsight: clear_history is not applied: the history is shared with memsight's other recordings")
    return start_recording(
        max_entries, context, stacks, enabled=enabled, compile_context=compile_context,
        global_record_annotations=global_record_annotations, skip_actions=skip_actions,
        owner="record_memory_history", model=model, optimizer=optimizer,
    )


_EMPTY_SNAPSHOT: dict[str, Any] = {"segments": [], "device_traces": []}


def snapshot() -> dict[str, Any]:
    """``torch.cuda.memory._snapshot()``: segments, device traces and the
    rest, and the tags of the models and optimizers handed over (top-level
    ``memsight_tags``; see :class:`Recording`).

    Without CUDA: a warning (once) and an empty snapshot.
    """
    if not cuda_available():
        warn_once("snapshot", "memsight: CUDA is not available; the snapshot is empty")
        return {k: list(v) for k, v in _EMPTY_SNAPSHOT.items()}
    return _tags.add_tags(torch_module().cuda.memory._snapshot())


def _compress(path: str, data: bytes) -> bytes:
    name = path.lower()
    if name.endswith(".gz"):
        return gzip.compress(data, compresslevel=6, mtime=0)
    if name.endswith(".xz"):
        return lzma.compress(data)
    if name.endswith((".zst", ".zstd")):
        try:
            import zstandard  # type: ignore[import-not-found]

            return zstandard.ZstdCompressor(level=3).compress(data)
        except ImportError:
            return b""  # signals: let the engine write it
    return data




def dump(path: str | os.PathLike[str], data: Any = None, *, extra: dict[str, Any] | None = None) -> str:
    """Writes a torch-compatible snapshot pickle (protocol 4) of ``data``
    (default: the allocator's state now, through the native dumper when it is
    ready, else :func:`snapshot`). ``.gz`` / ``.zst`` / ``.zstd`` / ``.xz``
    names are compressed. ``data`` may also be a :class:`memsight.Snapshot`.
    ``extra``: top-level keys (plain data) written beside torch's into a
    snapshot taken here or given as a dict. Returns the path.
    """
    p = os.fspath(path)
    if data is None:
        data = _native_dump.take(extra) or {**snapshot(), **(extra or {})}
    elif extra and isinstance(data, dict):
        data = {**data, **extra}
    if hasattr(data, "to_pickle") and not isinstance(data, dict):
        os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
        return data.to_pickle(p)
    raw = pickle.dumps(data, protocol=4)
    packed = _compress(p, raw)
    if packed == b"" and raw:
        from ..._engine import core

        os.makedirs(os.path.dirname(os.path.abspath(p)), exist_ok=True)
        core().loads(raw).write(p)  # the engine writes zstd
        return p
    write_atomic(p, packed)
    return p

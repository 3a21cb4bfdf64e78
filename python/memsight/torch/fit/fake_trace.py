"""The requests of a training step, recorded without a GPU.

The step runs under torch's fake tensors (``FakeTensorMode``): every CUDA
tensor has a shape, a dtype and a storage size but no memory, and every
operator still runs its shape logic, autograd still builds and frees its
graph, and the optimizer still makes its state. A dispatch mode above the
fake mode sees each operator's outputs; every new CUDA storage among them
is an allocation (its size in bytes, as torch's allocator is asked for it),
and a weak reference on the storage says when it dies: a free, in the order
CPython releases it, which is the order the real run frees it in.

What fake tensors cannot see (library workspaces, the CUDA context) is not
here: ``terms.py`` adds it.

The result is the list of trace entries torch's allocator history would
hold (``alloc``, ``free_requested``, ``free_completed``), each with its
Python stack and the phase mark of its thread, on fake addresses that the
engine's allocator simulation replaces (``memsight estimate``).
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

# Fake addresses: unique while a block lives, never reused. The simulation
# puts every block where torch's allocator would.
_BASE = 0x10000000000
_ALIGN = 512

# Frames of the machinery between the user's code and an allocation.
_SKIP = ("/torch/_subclasses/", "/torch/utils/_python_dispatch.py", "/torch/_ops.py", "/torch/utils/_device.py",
         "/memsight/torch/fit/", "/torch/utils/_stats.py", "/torch/_prims_common/",
         "/torch/_refs/", "/torch/_decomp/", "/torch/_meta_registrations.py")


class FakeTrace:
    """The recorded entries, per device. Thread-safe: autograd's backward
    runs on its own threads."""

    def __init__(self, stacks: bool = True, max_frames: int = 64) -> None:
        self.entries: dict[int, list[dict[str, Any]]] = {}
        self.annotations: list[dict[str, Any]] = []
        self.live: dict[int, tuple[int, int, int]] = {}  # storage key -> (device, addr, size)
        self.mark: Callable[[], str] = lambda: ""
        # The calling thread's current stream (fake_cuda.current_stream_id).
        self.stream: Callable[[], int] = lambda: 0
        self.stacks = stacks
        self.max_frames = max_frames
        # Called after each operator's outputs are recorded: (op, args, output).
        self.hooks: list[Callable[[Any, Any, Any], None]] = []
        self.before: list[Callable[[Any, Any], None]] = []  # (func, args) before an operator runs
        self._lock = threading.RLock()
        self._next_addr = _BASE
        self._clock = 0
        self._frames: dict[tuple[Any, int], dict[str, Any]] = {}
        self._refs: dict[int, Any] = {}
        self._streams: dict[int, int] = {}  # live fake address -> its stream
        # Runs a c10d collective on fake tensors (fake_dist.run_collective),
        # set for a rank of a distributed job.
        self.collective: Callable[[Any, Any, Any], Any] | None = None

    # -- time and stacks -------------------------------------------------------------
    def tick(self) -> int:
        self._clock += 1
        return self._clock

    def stack(self) -> list[dict[str, Any]]:
        if not self.stacks:
            return []
        out: list[dict[str, Any]] = []
        f: FrameType | None = sys._getframe(2)
        while f is not None and len(out) < self.max_frames:
            code = f.f_code
            name = code.co_filename
            if not any(s in name for s in _SKIP):
                key = (code, f.f_lineno)
                frame = self._frames.get(key)
                if frame is None:
                    frame = self._frames[key] = {"name": code.co_name, "filename": name, "line": f.f_lineno}
                out.append(frame)
            f = f.f_back
        return out

    # -- entries ---------------------------------------------------------------------
    def _entry(self, action: str, device: int, addr: int, size: int, stream: int,
               frames: list[dict[str, Any]]) -> None:
        self.entries.setdefault(device, []).append(
            {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": self.tick(),
             "frames": frames, "user_metadata": self.mark()})

    def alloc(self, device: int, size: int, frames: list[dict[str, Any]] | None = None,
              stream: int | None = None) -> int:
        """A request of ``size`` bytes on ``stream`` (the calling thread's
        current stream by default); its fake address."""
        with self._lock:
            addr = self._next_addr
            self._next_addr += max(_ALIGN, -(-size // _ALIGN) * _ALIGN)
            s = self.stream() if stream is None else stream
            self._streams[addr] = s
            self._entry("alloc", device, addr, size, s, self.stack() if frames is None else frames)
            return addr

    def free(self, device: int, addr: int, size: int) -> None:
        """The block at ``addr`` goes back to the pool of the stream it was
        allocated on, as torch's allocator returns it."""
        with self._lock:
            frames: list[dict[str, Any]] = []
            s = self._streams.pop(addr, 0)
            self._entry("free_requested", device, addr, size, s, frames)
            self._entry("free_completed", device, addr, size, s, frames)

    def annotate(self, name: str, device: int = 0) -> None:
        """A record_function-style mark (START and END at one moment)."""
        with self._lock:
            t = self.tick()
            for stage in ("START", "END"):
                self.annotations.append({"stage": stage, "name": name, "device": device, "time_us": t})

    # -- storages --------------------------------------------------------------------
    def track(self, storage: Any, device: int) -> None:
        """A CUDA storage seen in an operator's output: an allocation the
        first time, a reallocation when its size changed (resize_; FSDP2
        gives and takes back its unsharded parameters' memory so, and
        ``fsdp_storage_hooks`` calls this at each)."""
        key = storage._cdata
        size = int(storage.nbytes())
        with self._lock:
            old = self.live.get(key)
            if old is not None:
                if old[2] == size:
                    return
                # torch's resize_ allocates the new block, copies, then frees the old one.
                addr = self.alloc(device, size) if size else 0
                self.free(old[0], old[1], old[2])
                if size:
                    self.live[key] = (device, addr, size)
                else:
                    del self.live[key]
                return
            if size == 0:
                return
            addr = self.alloc(device, size)
            self.live[key] = (device, addr, size)
            self._refs[key] = weakref.ref(storage, functools.partial(self._died, key))

    def _died(self, key: int, _ref: Any = None) -> None:
        with self._lock:
            self._refs.pop(key, None)
            old = self.live.pop(key, None)
            if old is not None:
                self.free(*old)

    def address_of(self, storage: Any) -> int:
        """The fake address of a live storage (0: not a tracked one)."""
        old = self.live.get(storage._cdata)
        return old[1] if old is not None else 0

    def snapshot_traces(self) -> list[list[dict[str, Any]]]:
        n = max(self.entries, default=-1) + 1
        return [self.entries.get(d, []) for d in range(n)]


def dispatch_mode(trace: FakeTrace) -> Any:
    """The dispatch mode that records every CUDA storage an operator makes."""
    import torch
    from torch.utils import _python_dispatch as pd
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    is_wrapper = getattr(pd, "is_traceable_wrapper_subclass", lambda t: False)

    def holders(t: Any) -> Any:
        """The tensors that hold memory: a wrapper subclass (DTensor, as
        FSDP2's parameters are) holds none itself, only its inner tensors."""
        if is_wrapper(t):
            for name in t.__tensor_flatten__()[0]:
                yield from holders(getattr(t, name))
        else:
            yield t

    class _Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if trace.collective is not None and func.namespace == "c10d":
                return trace.collective(func, args, kwargs)
            for early in trace.before:
                early(func, args)
            out = func(*args, **(kwargs or {}))
            for leaf in tree_leaves(out):
                if not isinstance(leaf, torch.Tensor):
                    continue
                for t in holders(leaf):
                    if t.device.type == "cuda":
                        trace.track(t.untyped_storage(), t.device.index or 0)
            # An in-place resize keeps its output's storage: checked above too.
            for hook in trace.hooks:
                hook(func, args, out)
            return out

    return _Recorder()

"""Lend the GPU to someone else for a while: move every CUDA tensor to host memory and back.

    courtesy = Courtesy()
    courtesy.yield_memory()      # tensors now live in host memory; the cache is emptied
    ...                          # another job uses the GPU
    courtesy.restore()           # the same tensor objects are back on their devices

    with Courtesy():             # the same, as a block
        ...

Each storage is copied once and every tensor on it is re-pointed at the copy
with its own offset, sizes and strides, so views stay views and tensors that
shared a storage still share one. Tensors that cannot be moved (subclasses
without a storage of their own, sparse tensors, tensors freed meanwhile) are
listed in ``not_moved`` and logged.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from ._tensors import reachable_tensors, shape_text, untyped_storage

log = logging.getLogger("memsight.torch")


class Courtesy:
    """Moves the CUDA tensors reachable from Python to host memory, and back."""

    def __init__(self, device_type: str = "cuda") -> None:
        import torch

        self._torch = torch
        self.device_type = device_type
        # (weak tensor, original device, moved storage key)
        self._moved: list[tuple[Any, Any, int]] = []
        self._storages: dict[int, Any] = {}  # key -> host storage
        self.not_moved: list[str] = []

    def _movable(self, t: Any) -> str | None:
        torch = self._torch
        if t.device.type != self.device_type:
            return "elsewhere"
        if type(t) not in (torch.Tensor, torch.nn.Parameter):
            return f"a {type(t).__name__} (tensor subclass)"
        if t.layout != torch.strided:
            return f"a {t.layout} tensor"
        return None

    def _repoint(self, t: Any, storage: Any) -> None:
        torch = self._torch
        with torch.no_grad():
            fresh = torch.empty(0, dtype=t.dtype, device=storage.device)
            fresh.set_(storage, t.storage_offset(), t.size(), t.stride())
            t.data = fresh

    def yield_memory(self, tensors: Any = None) -> int:
        """Move the tensors (all reachable ones, or only these); returns the bytes moved."""
        torch = self._torch
        host_device = torch.device("cpu")
        if self._moved:
            raise RuntimeError("yield_memory() was called twice without restore()")
        self.not_moved = []
        copies: dict[tuple[str, int], tuple[int, Any]] = {}
        moved_bytes = 0
        for t in reachable_tensors(torch) if tensors is None else list(tensors):
            why = self._movable(t)
            if why == "elsewhere":
                continue
            if why is not None:
                self.not_moved.append(f"{why} {shape_text(t)}")
                continue
            try:
                st = untyped_storage(t)
                key = (str(t.device), st.data_ptr())
                if key not in copies:
                    host = _copy_storage(st, host_device)
                    copies[key] = (len(copies), host)
                    moved_bytes += int(st.nbytes())
                index, host = copies[key]
                device = t.device
                self._repoint(t, host)
                self._moved.append((weakref.ref(t), device, index))
            except Exception as e:  # noqa: BLE001 - leave this tensor where it is
                self.not_moved.append(f"a tensor {shape_text(t)}: {e}")
        self._storages = {index: host for index, host in copies.values()}
        if self.not_moved:
            log.warning("memsight Courtesy could not move %d tensor(s): %s", len(self.not_moved),
                        "; ".join(self.not_moved[:5]))
        if self.device_type == "cuda" and torch.cuda.is_available():
            torch.cuda.empty_cache()
        return moved_bytes

    def restore(self) -> int:
        """Bring the moved tensors back to their devices; returns how many were restored."""
        back: dict[tuple[int, str], Any] = {}
        restored = 0
        for ref, device, index in self._moved:
            t = ref()
            if t is None:
                continue
            key = (index, str(device))
            if key not in back:
                back[key] = _copy_storage(self._storages[index], device)
            self._repoint(t, back[key])
            restored += 1
        self._moved = []
        self._storages = {}
        return restored

    def __enter__(self) -> Courtesy:
        self.yield_memory()
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()


def _copy_storage(st: Any, device: Any) -> Any:
    """A copy of an untyped storage on ``device`` (a new one even on the same device)."""
    if device.type == "cuda":
        return st.cuda(device.index)
    if device.type == "cpu" and st.device.type != "cpu":
        return st.cpu()
    copy = st.clone()
    return copy if device.type == "cpu" else copy.to(device=device)

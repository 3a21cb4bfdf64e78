"""The live tensors among the garbage collector's objects and the storages
they view, for holders.py: both by C-level iteration (compress/map over
the heap, map over torch's own methods), as a Python call per object or
per tensor is what a walk over 100,000s of objects would spend its time on.
"""

from __future__ import annotations

from itertools import compress
from typing import Any

from .sole_holders import _subclasses


def _storage_at(t: Any) -> tuple[int, int] | None:
    """(device index, address) of a tensor's storage, from the tensor alone:
    building the storage object costs ten times more; None without one."""
    try:
        addr = t.data_ptr() - t.storage_offset() * t.element_size()
    except Exception:  # meta, sparse, a tensor subclass without storage
        return None
    return ((t.device.index or 0), addr) if addr else None


def _storage_keys(tensors: list[Any]) -> list[tuple[int, int] | None]:
    """_storage_at of each tensor, by C-level maps over torch's own methods
    (a Python call per tensor costs more than the rest of a small walk);
    one by one where some tensor has no storage to ask."""
    import torch

    T = torch.Tensor
    try:
        ptrs = list(map(T.data_ptr, tensors))
        offsets = list(map(T.storage_offset, tensors))
        devices = list(map(T.get_device, tensors))  # -1 on the CPU
    except Exception:  # meta, sparse, a subclass without storage
        return [_storage_at(t) for t in tensors]
    for i in compress(range(len(offsets)), offsets):  # views into a storage: few
        ptrs[i] -= offsets[i] * tensors[i].element_size()
    return [((d if d > 0 else 0), p) if p else None for d, p in zip(devices, ptrs)]


def _storage_size(t: Any) -> int:
    try:
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        return int(st.nbytes() if hasattr(st, "nbytes") else st.size() * st.element_size())
    except Exception:
        return 0


def live_tensors(objs: list[Any], device_type: str | None, kinds: list[type] | None = None) -> list[Any]:
    """The tensors among the gc's objects, on ``device_type`` (None: any);
    ``kinds``: their types, where the caller has them. Selected by C-level
    iteration (compress/map): a Python loop over a heap of 100,000s of
    objects is what would cost."""
    import torch

    tensor_types = _subclasses(torch.Tensor)
    out = list(compress(objs, map(tensor_types.__contains__, map(type, objs) if kinds is None else kinds)))
    if device_type == "cuda":
        out = [t for t in out if t.is_cuda]
    elif device_type is not None:
        out = [t for t in out if t.device.type == device_type]
    return out

"""The live tensors among the garbage collector's objects and the storages
they view, for holders.py: both by C-level iteration (compress/map over
the heap, map over torch's own methods), as a Python call per object or
per tensor is what a walk over 100,000s of objects would spend its time on.
"""

from __future__ import annotations

from itertools import compress, repeat
from operator import methodcaller, not_
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
    keys: list[tuple[int, int] | None] = list(zip(map(max, devices, repeat(0)), ptrs))
    if 0 in ptrs:  # no storage (empty tensors): few
        for i in compress(range(len(ptrs)), map(not_, ptrs)):
            keys[i] = None
    return keys


def _storage_size(t: Any) -> int:
    try:
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        return int(st.nbytes() if hasattr(st, "nbytes") else st.size() * st.element_size())
    except Exception:
        return 0


def _storage_sizes(tensors: list[Any]) -> list[int]:
    """_storage_size of each tensor, by C-level maps over torch's own methods;
    one by one where some tensor has no storage to ask."""
    import torch

    storage = getattr(torch.Tensor, "untyped_storage", None) or getattr(torch.Tensor, "_storage", None)
    try:
        return list(map(int, map(methodcaller("nbytes"), map(storage, tensors))))  # type: ignore[arg-type]
    except Exception:  # meta, sparse, a subclass without storage, a torch without these methods
        return list(map(_storage_size, tensors))


def live_tensors(objs: list[Any], device_type: str | None, kinds: list[type] | None = None) -> list[Any]:
    """The tensors among the gc's objects, on ``device_type`` (None: any);
    ``kinds``: their types, where the caller has them. Selected by C-level
    iteration (compress/map): a Python loop over a heap of 100,000s of
    objects is what would cost."""
    import torch

    tensor_types = _subclasses(torch.Tensor)
    out = list(compress(objs, map(tensor_types.__contains__, map(type, objs) if kinds is None else kinds)))
    return _on_device(out, device_type)


def tensors_and_modules(objs: list[Any], device_type: str | None) -> tuple[list[Any], list[Any]]:
    """live_tensors(objs, device_type), and the ``nn.Module`` objects among
    ``objs``: one pass over the heap for both (each pass costs milliseconds)."""
    import torch

    tensor_types = _subclasses(torch.Tensor)
    module_types = _subclasses(torch.nn.Module)
    picked = list(compress(objs, map((tensor_types | module_types).__contains__, map(type, objs))))
    kinds = list(map(type, picked))
    tensors = list(compress(picked, map(tensor_types.__contains__, kinds)))
    return _on_device(tensors, device_type), list(compress(picked, map(module_types.__contains__, kinds)))


def _on_device(tensors: list[Any], device_type: str | None) -> list[Any]:
    if device_type == "cuda":
        return [t for t in tensors if t.is_cuda]
    if device_type is not None:
        return [t for t in tensors if t.device.type == device_type]
    return tensors

"""Finding the tensors reachable from Python, and their storages, defensively.

Shared by MemReporter and Courtesy. Nothing here may raise on odd objects:
dead weak proxies, tensor subclasses without storage (DTensor, FakeTensor),
meta tensors, sparse tensors and symbolic sizes are all reported or skipped.
"""

from __future__ import annotations

import gc
from typing import Any, Iterator


def is_tensor(obj: Any, tensor_type: type) -> bool:
    """Whether obj is a tensor, judged by its real type without touching obj.

    isinstance() would ask an object that is not a tensor for its __class__,
    and some objects answer attribute reads with a warning (torch's deprecated
    ``torch.distributed.reduce_op`` warns on every one) or an error (a dead
    weakref.proxy): a scan of every object the garbage collector knows must
    not make them speak. type() reads no attribute.
    """
    return issubclass(type(obj), tensor_type)


def reachable_tensors(torch: Any, collect: bool = False) -> list[Any]:
    """Every tensor the garbage collector knows of, each once."""
    if collect:
        gc.collect()
    seen: set[int] = set()
    out = []
    for obj in gc.get_objects():
        if is_tensor(obj, torch.Tensor) and id(obj) not in seen:
            seen.add(id(obj))
            out.append(obj)
    return out


def untyped_storage(t: Any) -> Any:
    """The tensor's untyped storage (torch 2.x; TypedStorage.untyped() before)."""
    get = getattr(t, "untyped_storage", None)
    if get is not None:
        return get()
    return t.storage().untyped()


def storage_parts(torch: Any, t: Any) -> Iterator[Any]:
    """The dense tensors holding a tensor's bytes: itself, or a sparse tensor's components."""
    layout = t.layout
    if layout == torch.sparse_coo:
        yield t._indices()
        yield t._values()
    elif layout in (getattr(torch, "sparse_csr", None), getattr(torch, "sparse_bsr", None)):
        yield t.crow_indices()
        yield t.col_indices()
        yield t.values()
    elif layout in (getattr(torch, "sparse_csc", None), getattr(torch, "sparse_bsc", None)):
        yield t.ccol_indices()
        yield t.row_indices()
        yield t.values()
    else:
        yield t


def as_int(x: Any) -> int | None:
    """An int from an int or a SymInt with a concrete value; None when symbolic."""
    try:
        return int(x)
    except Exception:  # noqa: BLE001 - unbacked symbolic sizes raise
        return None


def shape_text(t: Any) -> str:
    try:
        size = tuple(t.size())
    except Exception:  # noqa: BLE001
        return "(?)"
    return str(size if size else (1,))

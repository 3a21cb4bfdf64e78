"""One rank of a distributed job, estimated alone.

A rank's memory depends on the job only through what its collectives
allocate and free, and those are the rank's own calls: the data that
crosses the wire does not change a single request. So a rank is estimated
in one process, under fake tensors, with torch's fake process group
(every collective succeeds at once and moves nothing) standing for the
job's ``world_size`` ranks.

FSDP2 (``fully_shard``) gives its unsharded parameters memory and takes it
back by resizing their storages in place (``alloc_storage`` and
``free_storage``); no operator sees that, so those two are followed here
as an allocation and a free of the same storage.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

from .fake_trace import FakeTrace

# Where FSDP2's storage resizes live (torch >= 2.6; 2.4-2.5).
_FSDP_PARAM = ("torch.distributed.fsdp._fully_shard._fsdp_param",
               "torch.distributed._composable.fsdp._fsdp_param")
_FSDP_MESH = ("torch.distributed.fsdp._fully_shard._fully_shard",
              "torch.distributed._composable.fsdp.fully_shard")


def _modules(names: tuple[str, ...]) -> list[Any]:
    out = []
    for n in names:
        try:
            out.append(importlib.import_module(n))
        except ImportError:
            continue
    return out


def run_collective(func: Any, args: Any, kwargs: Any) -> Any:
    """A c10d collective (``torch.ops.c10d.*``) on fake tensors: the fake
    process group moves nothing, so the collective runs on empty real
    tensors standing for the fake ones, and its result names the fake ones
    again (c10d's collectives write into the tensors they are given and
    return them, with a Work). It allocates nothing: neither does the real
    one in torch's allocator (NCCL's buffers are its own)."""
    import torch
    from torch.utils._python_dispatch import _disable_current_modes
    from torch.utils._pytree import tree_map

    stand_ins: dict[int, Any] = {}

    def stand_in(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        real = torch.empty(0, dtype=t.dtype)
        stand_ins[id(real)] = t
        return real

    with _disable_current_modes():
        real_args, real_kwargs = tree_map(stand_in, (args, kwargs or {}))
        out = func(*real_args, **real_kwargs)
    return tree_map(lambda t: stand_ins.get(id(t), t) if isinstance(t, torch.Tensor) else t, out)


@contextlib.contextmanager
def fsdp_storage_hooks(trace: FakeTrace) -> Iterator[None]:
    """FSDP2's in-place storage resizes recorded as requests while the block runs."""
    saved: list[tuple[Any, str, Any]] = []

    def follow(orig: Any) -> Any:
        def resized(tensor: Any) -> None:
            orig(tensor)
            if tensor.device.type == "cuda":
                trace.track(tensor.untyped_storage(), tensor.device.index or 0)

        return resized

    for mod in _modules(_FSDP_PARAM):
        for name in ("alloc_storage", "free_storage"):
            f = getattr(mod, name, None)
            if f is not None:
                saved.append((mod, name, f))
                setattr(mod, name, follow(f))
    try:
        yield
    finally:
        for mod, name, f in saved:
            setattr(mod, name, f)


@contextlib.contextmanager
def fake_ranks(world_size: int | None, rank: int) -> Iterator[Any]:
    """A fake process group of ``world_size`` ranks in which this process is
    ``rank``, and its one-dimensional CUDA device mesh (yielded; also the
    mesh ``fully_shard`` takes when given none). ``world_size`` None: no
    process group (yields None)."""
    if world_size is None:
        yield None
        return
    import torch.distributed as dist

    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size): rank {rank}, world_size {world_size}")
    if not dist.is_available():
        raise RuntimeError("this torch has no torch.distributed: a rank cannot be estimated")
    if dist.is_initialized():
        raise RuntimeError("a process group is already initialized here: estimate a rank before "
                           "init_process_group, or in a process of its own")
    try:
        from torch.testing._internal.distributed.fake_pg import FakeStore
    except ImportError as e:  # pragma: no cover - every torch >= 2.1 has it
        raise RuntimeError(f"this torch has no fake process group ({e})") from e
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)
    saved: list[tuple[Any, Any]] = []
    try:
        mesh = init_device_mesh("cuda", (world_size,))
        for mod in _modules(_FSDP_MESH):
            f = getattr(mod, "_init_default_fully_shard_mesh", None)
            if f is not None:
                saved.append((mod, f))
                mod._init_default_fully_shard_mesh = lambda: mesh
        yield mesh
    finally:
        for mod, f in saved:
            mod._init_default_fully_shard_mesh = f
        dist.destroy_process_group()

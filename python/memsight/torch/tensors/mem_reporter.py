"""Which tensors are in memory right now: a tensor census by device.

The layout follows pytorch_memlab's ``MemReporter``; the numbers are the
storages' real byte sizes (not numel × element size), each storage counted
once, rounded up to the allocator's 512-byte blocks. Names come from the
model's parameters and buffers, their ``.grad`` and the optimizer's state.

    reporter = MemReporter(model)
    reporter.add_optimizer(optimizer)
    reporter.report()                  # every device
    reporter.report(device=torch.device("cuda:0"), verbose=True)
"""

from __future__ import annotations

import logging
import sys
import weakref
from collections import defaultdict
from dataclasses import dataclass
from typing import IO, Any

from ..profilers._line_format import readable_size
from ._tensors import as_int, is_tensor, reachable_tensors, shape_text, storage_parts, untyped_storage

log = logging.getLogger("memsight.torch")
LEN = 79
MIN_BLOCK = 512  # the CUDA caching allocator's smallest block
_ROW = "{:<40s}{:>20s}{:>10s}"


@dataclass
class TensorStat:
    name: str
    shape: str
    numel: int
    nbytes: int  # counted bytes: 0 for a storage already counted
    shared_with: str | None = None  # the name of the tensor that counted the storage
    note: str = ""  # why a tensor has no storage (subclass, meta)


def _rounded(n: int) -> int:
    return -(-n // MIN_BLOCK) * MIN_BLOCK


class MemReporter:
    """A census of the tensors reachable from Python, by device."""

    def __init__(self, model: Any = None, pre_collect: bool = False) -> None:
        import torch

        self._torch = torch
        self.pre_collect = pre_collect
        # id -> (weak reference, name): an id is trusted only while its tensor lives.
        self._names: dict[int, tuple[Any, str]] = {}
        self._counter = 0
        self.device_tensor_stat: dict[Any, list[TensorStat]] = {}
        if model is not None:
            if not isinstance(model, torch.nn.Module):
                raise ValueError(f"model must be a torch.nn.Module, not {type(model).__name__}")
            self._name_module(model)

    def _lookup(self, t: Any) -> str | None:
        entry = self._names.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def _name(self, t: Any, name: str, join: bool = True) -> None:
        old = self._lookup(t)
        try:
            ref = weakref.ref(t)
        except TypeError:
            return
        self._names[id(t)] = (ref, f"{old}+{name}" if old and join else name)

    def _name_module(self, model: Any) -> None:
        # Walk the modules with duplicates so a tied weight gets every name it has.
        try:
            modules = model.named_modules(remove_duplicate=False)
        except TypeError:  # older torch
            modules = model.named_modules()
        for prefix, mod in modules:
            for kind in (mod._parameters, mod._buffers):
                for name, t in kind.items():
                    if t is not None:
                        self._name(t, f"{prefix}.{name}" if prefix else name)

    def add_optimizer(self, optimizer: Any) -> None:
        """Name the optimizer's state tensors ``{Optimizer}.{param}.{key}``."""
        kind = type(optimizer).__name__
        for group in optimizer.param_groups:
            for p in group["params"]:
                pname = self._lookup(p) or self._tensor_name(p)
                for key, value in optimizer.state.get(p, {}).items():
                    if is_tensor(value, self._torch.Tensor):
                        self._name(value, f"{kind}.{pname}.{key}", join=False)

    def _tensor_name(self, t: Any) -> str:
        name = self._lookup(t)
        if name is None:
            name = f"{type(t).__name__}{self._counter}"
            self._counter += 1
            self._name(t, name)
        return name

    def _named_tensors(self) -> list[Any]:
        live = [entry[0]() for entry in self._names.values()]
        return [t for t in live if t is not None]

    def _storage_bytes(self, t: Any) -> tuple[list[tuple[int, int]], str]:
        """[(storage data_ptr, nbytes)] of a tensor, or a note why it has none."""
        torch = self._torch
        if t.device.type == "meta":
            return [], "meta"
        if type(t) is not torch.Tensor and type(t) is not torch.nn.Parameter:
            # Wrapper subclasses (DTensor, FakeTensor) may have no real storage of their own.
            try:
                st = untyped_storage(t)
                if st.data_ptr() == 0 and st.nbytes() > 0:
                    return [], type(t).__name__
            except Exception:  # noqa: BLE001
                return [], type(t).__name__
        out = []
        try:
            for part in storage_parts(torch, t):
                st = untyped_storage(part)
                out.append((st.data_ptr(), int(st.nbytes())))
        except Exception as e:  # noqa: BLE001
            return [], f"no storage: {type(e).__name__}"
        return out, ""

    def collect(self) -> None:
        """Take the census (it keeps no reference to the tensors afterwards)."""
        torch = self._torch
        found = reachable_tensors(torch, self.pre_collect)
        named = self._named_tensors()
        grads = [g for t in found + named if isinstance(t, torch.nn.Parameter)
                 for g in [getattr(t, "grad", None)] if g is not None]
        ordered: list[Any] = []
        seen: set[int] = set()
        for t in named + found + grads:
            if id(t) not in seen:
                seen.add(id(t))
                ordered.append(t)
        for t in ordered:
            g = getattr(t, "grad", None) if isinstance(t, torch.nn.Parameter) else None
            if g is not None and self._lookup(g) is None:
                self._name(g, f"{self._tensor_name(t)}.grad")
        by_device: dict[Any, list[TensorStat]] = defaultdict(list)
        counted: dict[tuple[str, int], str] = {}
        for t in ordered:
            try:
                stat = self._stat(t, counted)
            except Exception as e:  # noqa: BLE001 - one odd tensor must not stop the census
                log.debug("memsight MemReporter skipped a %s: %s", type(t).__name__, e)
                continue
            if stat is not None:
                by_device[t.device].append(stat)
        self.device_tensor_stat = dict(by_device)
        del found, named, grads, ordered

    def _stat(self, t: Any, counted: dict[tuple[str, int], str]) -> TensorStat | None:
        numel = as_int(t.numel())
        if numel == 0:
            return None
        name = self._tensor_name(t)
        storages, note = self._storage_bytes(t)
        total, shared = 0, None
        for ptr, nbytes in storages:
            key = (str(t.device), ptr)
            if ptr != 0 and key in counted:
                shared = shared or counted[key]
                continue
            if ptr != 0:
                counted[key] = name
            total += _rounded(nbytes)
        return TensorStat(name, shape_text(t), numel or 0, total, shared, note)

    def allocated(self, device: Any) -> int | None:
        if device.type != "cuda":
            return None
        try:
            return int(self._torch.cuda.memory_allocated(device))
        except Exception:  # noqa: BLE001 - e.g. fake CUDA tensors on a machine without CUDA
            return None

    def report(self, verbose: bool = False, device: Any = None, stream: IO[str] | None = None) -> None:
        """Print the census; ``verbose`` shows shared storages as ``name(->owner)``."""
        self.collect()
        out = stream or sys.stdout
        out.write(_ROW.format("Element type", "Size", "Used MEM") + "\n")
        for dev, stats in self.device_tensor_stat.items():
            if device is not None and str(dev) != str(self._torch.device(device)):
                continue
            out.write("-" * LEN + "\n")
            out.write(f"Storage on {dev}\n")
            total, numel = 0, 0
            for s in stats:
                name = s.name
                if verbose and s.shared_with is not None:
                    name = f"{name}(->{s.shared_with})"
                if s.note:
                    name = f"{name} [{s.note}]"
                out.write(_ROW.format(name, s.shape, readable_size(s.nbytes)) + "\n")
                total += s.nbytes
                numel += s.numel
            out.write("-" * LEN + "\n")
            out.write(f"Total Tensors: {numel} \tUsed Memory: {readable_size(total)}\n")
            allocated = self.allocated(dev)
            if allocated is not None:
                out.write(f"The allocated memory on {dev}: {readable_size(allocated)}\n")
                if allocated != total:
                    out.write("Memory differs due to the matrix alignment or invisible gradient buffer tensors\n")
                    out.write(difference_reason(allocated, total) + "\n")
            out.write("-" * LEN + "\n")


def difference_reason(allocated: int, counted: int) -> str:
    diff = allocated - counted
    if diff > 0:
        return (f"  {readable_size(diff)} more allocated than counted: tensors not reachable from Python "
                "(saved for backward, held by C++ or by a CUDA graph), or freed ones not yet released")
    return (f"  {readable_size(-diff)} more counted than allocated: tensors viewing memory the "
            "allocator does not own (from_blob, DLPack, IPC) or the 512-byte rounding of small storages")

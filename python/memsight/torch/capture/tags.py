"""Tags: what each storage of a model and its optimizer is, written beside
the snapshot so that memsight knows parameters, gradients, optimizer state
and buffers exactly instead of inferring them.

A snapshot memsight.torch takes while a model is handed over (``record(...,
model=, optimizer=)``, ``record_memory_history``, OOMObserver,
MemorySnapshot, TorchProfiler, MemProfiler, the Lightning adapters) gets one
more top-level key, ``memsight_tags`` (docs/formats.md)::

    {"version": 1, "time_us": ..., "storages": [
        {"device": 0, "addr": 139..., "size": 4194304, "category": "parameter",
         "name": "encoder.layers.3.attn.q_proj.weight", "module": "encoder.layers.3.attn.q_proj"},
        {..., "category": "gradient", "name": "encoder.layers.3.attn.q_proj.weight.grad", ...},
        {..., "category": "optimizer_state",
         "name": "optimizer.state[encoder.layers.3.attn.q_proj.weight].exp_avg", ...},
        {..., "category": "buffer", "name": "encoder.norm.running_mean", ...}]}

Plain dicts, lists, str and int only: torch's ``_memory_viz`` and
pytorch.org/memory_viz read past it. A storage shared by several tensors
(tied weights) is tagged once, by the first name, as what it is first:
parameter, buffer, gradient, optimizer state.

While a model is handed over, its phases are marked too (phase_marks.py).
Nothing here raises into training: a failure is logged and the snapshot is
written without (some) tags.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from .holders import holders_top_level
from .phase_marks import PhaseMarks, clean_name, unwrap

log = logging.getLogger("memsight")

TAGS_KEY = "memsight_tags"
_PRIORITY = {"parameter": 0, "buffer": 1, "gradient": 2, "optimizer_state": 3}


def _module_of(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else ""


def _storage(t: Any, address_of: Callable[[Any], int] | None = None) -> tuple[str, int, int, int]:
    """(device type, device index, address, bytes) of a tensor's storage;
    ``address_of``: the storage's address where it has no real one (fake
    tensors)."""
    local = getattr(t, "_local_tensor", None)  # a DTensor's shard on this rank
    if local is not None:
        t = local
    dev = t.device
    st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
    size = st.nbytes() if hasattr(st, "nbytes") else st.size() * st.element_size()
    addr = address_of(st) if address_of is not None else st.data_ptr()
    return dev.type, (dev.index or 0), int(addr), int(size)


def storage_tags(model: Any = None, optimizer: Any = None, device_type: str | None = "cuda",
                 storage_of: Callable[[Any], int] | None = None) -> list[dict[str, Any]]:
    """The tags of every storage of ``model`` (parameters, their gradients,
    buffers) and ``optimizer`` (its state), on ``device_type`` devices
    (None: all). One per storage; see the module docs. ``storage_of``: a
    storage's address where tensors have none (the estimate's fake ones)."""
    out: dict[tuple[str, int, int], dict[str, Any]] = {}
    skipped = 0

    def add(t: Any, category: str, name: str, module: str) -> None:
        nonlocal skipped
        if t is None or not hasattr(t, "device"):
            return
        try:
            dtype, index, addr, size = _storage(t, storage_of)
        except Exception:  # meta tensors, sparse layouts, ...: nothing in the allocator
            skipped += 1
            return
        if (device_type is not None and dtype != device_type) or addr == 0 or size == 0:
            return
        key = (dtype, index, addr)
        old = out.get(key)
        if old is not None and _PRIORITY[old["category"]] <= _PRIORITY[category]:
            return
        out[key] = {"device": index, "addr": addr, "size": size, "category": category, "name": name,
                    "module": module}

    names: dict[int, str] = {}
    if model is not None:
        root = unwrap(model)
        for raw, p in root.named_parameters():
            name = clean_name(raw)
            names[id(p)] = name
            add(p, "parameter", name, _module_of(name))
        for raw, b in root.named_buffers():
            name = clean_name(raw)
            add(b, "buffer", name, _module_of(name))
        for raw, p in root.named_parameters():
            name = clean_name(raw)
            add(getattr(p, "grad", None), "gradient", name + ".grad", _module_of(name))
    if optimizer is not None:
        state = getattr(optimizer, "state", {}) or {}
        for g, group in enumerate(getattr(optimizer, "param_groups", []) or []):
            for i, p in enumerate(group.get("params", [])):
                pname = names.get(id(p))
                label = pname if pname is not None else f"param_groups[{g}][{i}]"
                if pname is None:  # a parameter the model does not name: its gradient too
                    add(getattr(p, "grad", None), "gradient", label + ".grad", "")
                for key, v in (state.get(p) or {}).items():
                    add(v, "optimizer_state", f"optimizer.state[{label}].{key}",
                        _module_of(pname) if pname is not None else "")
    if skipped:
        log.debug("memsight: %d tensors had no storage to tag", skipped)
    return list(out.values())


def marks_detail() -> str:
    """MEMSIGHT_PHASE_MARKS: "blocks" (the default), "modules" (every module:
    finer names, more cost) or "off" (kinds inferred from stacks)."""
    value = os.environ.get("MEMSIGHT_PHASE_MARKS", "blocks").strip().lower() or "blocks"
    if value not in ("blocks", "modules", "off"):
        log.warning("memsight: MEMSIGHT_PHASE_MARKS=%s is not blocks, modules or off; using blocks", value)
        return "blocks"
    return value


class _Handed:
    """One model/optimizer pair handed over, with its phase marks."""

    def __init__(self, model: Any, optimizer: Any, marks: bool) -> None:
        self.model = model
        self.optimizer = optimizer
        self.refs = 0
        self.marks: PhaseMarks | None = None
        detail = marks_detail()
        if marks and detail != "off" and (model is not None or optimizer is not None):
            try:
                self.marks = PhaseMarks(model, optimizer, detail=detail).install()
            except Exception:
                log.exception("memsight: could not mark phases; memory kinds will be inferred")


_handed: dict[tuple[int, int], _Handed] = {}
_lock = threading.Lock()


def acquire(model: Any = None, optimizer: Any = None, marks: bool = True) -> tuple[int, int] | None:
    """Hands a model and/or optimizer over until :func:`release`: their
    storages are tagged in every snapshot memsight.torch takes, and their
    phases marked. Calls for the same pair share one set of hooks."""
    if model is None and optimizer is None:
        return None
    key = (id(model), id(optimizer))
    with _lock:
        h = _handed.get(key)
        if h is None:
            h = _handed[key] = _Handed(model, optimizer, marks)
        h.refs += 1
    return key


def release(key: tuple[int, int] | None) -> None:
    if key is None:
        return
    with _lock:
        h = _handed.get(key)
        if h is None:
            return
        h.refs -= 1
        if h.refs > 0:
            return
        del _handed[key]
    if h.marks is not None:
        h.marks.remove()


def marker_kind() -> str | None:
    """How phases are marked now ("metadata", "annotations"), None if not."""
    with _lock:
        for h in _handed.values():
            if h.marks is not None and h.marks.handles:
                return h.marks.marker.kind
    return None


def tags_value() -> dict[str, Any] | None:
    """The ``memsight_tags`` value for a snapshot taken now, None when
    nothing is handed over."""
    with _lock:
        pairs = [(h.model, h.optimizer) for h in _handed.values()]
    if not pairs:
        return None
    seen: dict[tuple[int, int], dict[str, Any]] = {}
    for model, optimizer in pairs:
        for t in storage_tags(model, optimizer):
            key = (t["device"], t["addr"])
            old = seen.get(key)
            if old is None or _PRIORITY[t["category"]] < _PRIORITY[old["category"]]:
                seen[key] = t
    value: dict[str, Any] = {"version": 1, "time_us": int(time.time() * 1e6), "storages": list(seen.values())}
    components = _torch_components()
    if components:
        value["torch_components"] = components
        _check_components(components, value["storages"])
    return value


def tags_top_level() -> dict[str, Any]:
    """The keys memsight adds to every snapshot it dumps (every dump path goes
    through here): ``memsight_tags`` (what each storage of the models and
    optimizers handed over is) and ``memsight_holders`` (who holds the other
    live storages, holders.py). ``{}`` where neither applies; a failure is
    logged and leaves its key out."""
    out: dict[str, Any] = {}
    try:
        value = tags_value()
    except Exception:
        log.exception("memsight: could not tag the snapshot's storages; its memory kinds will be inferred")
        value = None
    if value is not None:
        out[TAGS_KEY] = value
    tagged = {(t["device"], t["addr"]) for t in value["storages"]} if value else set()
    out.update(holders_top_level(skip=tagged))
    return out


def add_tags(snapshot: Any) -> Any:
    """Adds ``memsight_tags`` to a snapshot dict taken just now (if a model or
    optimizer is handed over); logs and leaves it as it is on failure."""
    if isinstance(snapshot, dict):
        snapshot.update(tags_top_level())
    return snapshot


def _torch_components() -> dict[str, int]:
    """torch's own per-component counters, where the installed torch keeps
    them (``component_bytes.<kind>.current`` in memory_stats)."""
    try:
        import torch

        stats = torch.cuda.memory_stats()
    except Exception:
        return {}
    prefix, suffix = "component_bytes.", ".current"
    return {k[len(prefix):-len(suffix)]: int(v) for k, v in stats.items()
            if k.startswith(prefix) and k.endswith(suffix)}


def _check_components(components: dict[str, int], storages: list[dict[str, Any]]) -> None:
    """Logs where torch's counters and the tags disagree (the tags count
    storage bytes; torch counts its own way)."""
    try:
        import torch

        device = torch.cuda.current_device()
    except Exception:
        return
    for kind in ("parameter", "gradient", "optimizer_state", "buffer"):
        if kind not in components:
            continue
        tagged = sum(t["size"] for t in storages if t["category"] == kind and t["device"] == device)
        if tagged != components[kind]:
            log.info("memsight: torch counts %d bytes of %s, memsight's tags %d", components[kind], kind, tagged)

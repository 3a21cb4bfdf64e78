"""The configuration of :class:`~memsight.torch.MemProfiler`.

The field names follow finetuning-scheduler's ``MemProfilerCfg`` so that a
config written for it reads here; nested dicts (from YAML) are accepted
wherever a nested config is expected::

    MemProfilerCfg(enabled=True, collect_funcs={"cuda": ["validation_step"]},
                   schedule={"warmup_iters": 2, "max_iter": 4})
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any

log = logging.getLogger("memsight")

#: The module attributes memsight's own forward hooks keep up to date; the
#: root module's values are read into every collected entry.
DEFAULT_HOOK_ATTRS: tuple[str, ...] = (
    "rss_pre_forward",
    "rss_post_forward",
    "rss_diff",
    "npp_pre_forward",
    "npp_post_forward",
    "npp_diff",
)

_UNITS = ("B", "KiB", "MiB", "GiB")
_KINDS = ("cpu", "cuda", "cuda_allocator_history", "fsdp")


def _name_set(value: Any, what: str) -> set[str]:
    if value is None:
        return set()
    if isinstance(value, str):
        return {value}
    try:
        items = set(value)
    except TypeError:
        raise ValueError(f"{what} must be a list of function names, not {value!r}") from None
    bad = [v for v in items if not isinstance(v, str) or not v]
    if bad:
        raise ValueError(f"{what} must hold function names (strings), not {bad[0]!r}")
    return items


def resolve_callable(spec: str | Callable[..., Any], what: str) -> Callable[..., Any]:
    """A callable, or one named by a dotted path (``"pkg.module.func"``);
    ``"identity_lambda"`` is the identity."""
    if callable(spec):
        return spec
    if spec == "identity_lambda":
        return _identity
    if not isinstance(spec, str) or "." not in spec:
        raise ValueError(f"{what}: {spec!r} is neither a callable nor a dotted path 'module.function'")
    module_name, _, attr = spec.rpartition(".")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{what}: cannot import {spec!r} ({type(e).__name__}: {e})") from None
    if not callable(obj):
        raise ValueError(f"{what}: {spec!r} is not callable")
    return obj


def _identity(x: Any) -> Any:
    return x


@dataclass
class MemProfilerHooks:
    """Extra forward hooks, run on every submodule of the connected module
    during collected calls after memsight's own: ``pre(module, args)``,
    ``post(module, args, output)``; reset hooks run at the end of each
    collected call as ``hook(module, save_hook_attrs)``."""

    pre_forward_hooks: list[Any] = field(default_factory=list)
    post_forward_hooks: list[Any] = field(default_factory=list)
    reset_state_hooks: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        for f in fields(self):
            specs = getattr(self, f.name) or []
            if isinstance(specs, (str, bytes)) or callable(specs):
                specs = [specs]
            setattr(self, f.name, [resolve_callable(s, f"memory_hooks.{f.name}") for s in specs])


@dataclass
class MemProfilerFuncs:
    """Names of the functions to collect, per kind of data; ``default`` is
    added to every other kind."""

    default: set[str] = field(default_factory=lambda: {"training_step"})
    cpu: set[str] = field(default_factory=set)
    cuda: set[str] = field(default_factory=set)
    cuda_allocator_history: set[str] = field(default_factory=set)
    fsdp: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.default = _name_set(self.default, "collect_funcs.default")
        for kind in _KINDS:
            setattr(self, kind, _name_set(getattr(self, kind), f"collect_funcs.{kind}") | self.default)

    def all(self) -> set[str]:
        out: set[str] = set(self.default)
        for kind in _KINDS:
            out |= getattr(self, kind)
        return out


@dataclass
class MemProfilerSchedule:
    """Calls ``warmup_iters < i <= max_iter`` of each function are collected
    (``i`` counts from 1); ``max_iter`` None means ``warmup_iters + 1``."""

    warmup_iters: int = 1
    max_iter: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.warmup_iters, int) or self.warmup_iters < 0:
            raise ValueError(f"schedule.warmup_iters must be an integer >= 0, not {self.warmup_iters!r}")
        if self.max_iter is None:
            self.max_iter = self.warmup_iters + 1
        if not isinstance(self.max_iter, int) or self.max_iter <= self.warmup_iters:
            raise ValueError(
                f"schedule.max_iter must be an integer above warmup_iters ({self.warmup_iters}), "
                f"not {self.max_iter!r}"
            )

    def collects(self, iter_idx: int) -> bool:
        assert self.max_iter is not None
        return self.warmup_iters < iter_idx <= self.max_iter


@dataclass
class CudaAllocatorHistoryOptions:
    """How the allocator history is recorded while profiling (bounded:
    the oldest entries are dropped past ``max_entries``)."""

    max_entries: int = 100_000
    context: str | None = "all"
    stacks: str = "python"

    def __post_init__(self) -> None:
        from ..capture.recording import RecordOptions

        RecordOptions(context=self.context, stacks=self.stacks, max_entries=self.max_entries)  # validates


def _nested(value: Any, cls: type, what: str) -> Any:
    if isinstance(value, cls):
        return value
    if value is None:
        return cls()
    if isinstance(value, dict):
        try:
            return cls(**value)
        except TypeError as e:
            raise ValueError(f"{what}: {e}") from None
    raise ValueError(f"{what} must be a {cls.__name__} or a mapping, not {type(value).__name__}")


@dataclass
class MemProfilerCfg:
    """Everything :class:`~memsight.torch.MemProfiler` does; see docs/memprofiler.md."""

    enabled: bool = False
    collect_funcs: MemProfilerFuncs = field(default_factory=MemProfilerFuncs)
    cuda_allocator_history: bool = False
    cuda_allocator_history_options: CudaAllocatorHistoryOptions = field(
        default_factory=CudaAllocatorHistoryOptions
    )
    track_fsdp_mem: bool = False
    fsdp_mem_track_module_depth: int = 2
    fsdp_mem_tracker_tabulate: bool = False
    fsdp_mem_tracker_units: str = "MiB"
    fsdp_mem_tracker_root_module: str = ""
    dump_memorystats_pickle: bool = False
    dump_memorystats_yaml: bool = True
    schedule: MemProfilerSchedule = field(default_factory=MemProfilerSchedule)
    save_dir: str | None = None
    enable_memory_hooks: bool = True
    enable_saved_tensors_hooks: bool = True
    memory_hooks: MemProfilerHooks = field(default_factory=MemProfilerHooks)
    #: ``(pack, unpack)`` run after memsight's own accounting; None: identity.
    saved_tensors_funcs: list[Any] | None = None
    save_hook_attrs: list[str] = field(default_factory=lambda: list(DEFAULT_HOOK_ATTRS))
    retain_hooks_for_funcs: set[str] = field(default_factory=lambda: {"training_step"})
    #: Also write the per-rank memsight page (rank_{rank}_memprofiler.html).
    write_page: bool = True

    def __post_init__(self) -> None:
        self.collect_funcs = _nested(self.collect_funcs, MemProfilerFuncs, "collect_funcs")
        self.schedule = _nested(self.schedule, MemProfilerSchedule, "schedule")
        self.memory_hooks = _nested(self.memory_hooks, MemProfilerHooks, "memory_hooks")
        self.cuda_allocator_history_options = _nested(
            self.cuda_allocator_history_options, CudaAllocatorHistoryOptions, "cuda_allocator_history_options"
        )
        self.retain_hooks_for_funcs = _name_set(self.retain_hooks_for_funcs, "retain_hooks_for_funcs")
        if self.fsdp_mem_tracker_units not in _UNITS:
            raise ValueError(f"fsdp_mem_tracker_units must be one of {', '.join(_UNITS)}, "
                             f"not {self.fsdp_mem_tracker_units!r}")
        if not isinstance(self.fsdp_mem_track_module_depth, int) or self.fsdp_mem_track_module_depth < 1:
            raise ValueError(f"fsdp_mem_track_module_depth must be an integer >= 1, "
                             f"not {self.fsdp_mem_track_module_depth!r}")
        if isinstance(self.save_hook_attrs, str) or not all(isinstance(a, str) for a in self.save_hook_attrs):
            raise ValueError("save_hook_attrs must be a list of attribute names")
        self.save_hook_attrs = list(self.save_hook_attrs)
        if self.saved_tensors_funcs is not None:
            funcs = list(self.saved_tensors_funcs)
            if len(funcs) != 2:
                raise ValueError("saved_tensors_funcs must be a pair [pack, unpack]")
            self.saved_tensors_funcs = [resolve_callable(f, "saved_tensors_funcs") for f in funcs]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemProfilerCfg:
        """From a plain mapping (a YAML config); unknown keys are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"MemProfilerCfg has no option {unknown[0]!r}")
        return cls(**data)

    def without_cuda(self) -> list[str]:
        """Drops what needs CUDA (device statistics, allocator history, FSDP
        tracking); returns what the user had asked for explicitly."""
        asked = [k for k in ("cuda", "cuda_allocator_history", "fsdp")
                 if getattr(self.collect_funcs, k) - self.collect_funcs.default]
        asked += [k for k in ("cuda_allocator_history", "track_fsdp_mem") if getattr(self, k)]
        for kind in ("cuda", "cuda_allocator_history", "fsdp"):
            setattr(self.collect_funcs, kind, set())
        self.cuda_allocator_history = False
        self.track_fsdp_mem = False
        return sorted(set(asked))


def collected_names(cfg: MemProfilerCfg) -> Iterable[str]:
    """Every function name some kind of data is collected for."""
    names = set(cfg.collect_funcs.cpu) | cfg.collect_funcs.cuda
    if cfg.cuda_allocator_history:
        names |= cfg.collect_funcs.cuda_allocator_history
    if cfg.track_fsdp_mem:
        names |= cfg.collect_funcs.fsdp
    return sorted(names)

"""Per-phase memory profiling: memory at the start and end of chosen calls
of chosen functions, from every angle at once.

::

    prof = MemProfiler(collect_funcs={"default": ["train_step"]}, schedule={"warmup_iters": 1, "max_iter": 3})
    prof.connect(model, optimizer)

    @prof.profile
    def train_step(batch): ...

    for batch in loader:
        train_step(batch)
    prof.finish()

Calls are counted per function from 1; calls ``warmup_iters < i <=
max_iter`` are collected under the keys ``"{rank}.{fn}.{i}.start"`` and
``".end"``. Past ``max_iter`` a function is done; hooks are removed once
every retained function is done and allocator history stops once every
function that records it is done. Statistics are written after every
collected call, at exit and when a collected call raises (an OOM), so
nothing collected is lost. A failure inside the profiler is logged, never
raised into the training loop.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .._util.atomic import write_atomic
from .._util.cuda import cuda_available, torch_module, warn_once
from .._util.dist import global_rank
from .memprofiler_config import MemProfilerCfg, collected_names
from .memprofiler_hooks import CallHooks, host_memory, reset_module_attrs
from .memprofiler_output import (
    fsdp_log_path,
    fsdp_peak,
    fsdp_report,
    fsdp_tracker,
    growth_by_site,
    history_path,
    site_totals,
    write_stats,
)
from ..capture import _native_counters, _native_dump
from ..capture.recording import Recording, dump, snapshot

log = logging.getLogger("memsight")

F = TypeVar("F", bound=Callable[..., Any])



def _history_now() -> tuple[dict[str, Any], Any]:
    """The allocator's state now: (its segments as dicts, what to write to the history
    file). Through the native dumper when it is ready (the trace is never turned into
    Python objects), else torch's ``_snapshot()``."""
    msnap = _native_dump.take()
    if msnap is not None:
        # Our own pickle of plain data: loading it runs no code.
        return {"segments": pickle.loads(msnap._snap.segments_pickle())}, msnap
    snap = snapshot()
    return snap, snap

@dataclass
class _Call:
    """One collected call in progress."""

    fn: str
    iter_idx: int
    outermost: bool
    saved_ctx: Any = None
    tracker: Any = None
    start_sites: dict[str, list[int]] | None = None
    files: list[str] = field(default_factory=list)


class MemProfiler:
    """Collects memory at the start and end of chosen calls; see the module docs.

    ``MemProfiler(cfg)`` takes a :class:`MemProfilerCfg` (or a mapping);
    ``MemProfiler(**options)`` builds one from keyword options with
    ``enabled=True``.
    """

    def __init__(self, cfg: MemProfilerCfg | dict[str, Any] | None = None, *, model: Any = None,
                 optimizer: Any = None, **options: Any) -> None:
        if cfg is None:
            cfg = MemProfilerCfg.from_dict({"enabled": True, **options})
        elif options:
            raise ValueError("pass either a MemProfilerCfg or keyword options, not both")
        elif isinstance(cfg, dict):
            cfg = MemProfilerCfg.from_dict(cfg)
        if not isinstance(cfg, MemProfilerCfg):
            raise ValueError(f"cfg must be a MemProfilerCfg or a mapping, not {type(cfg).__name__}")
        self.cfg = cfg
        if cfg.enabled and not cuda_available():
            asked = cfg.without_cuda()
            if asked:
                warn_once(
                    "memprofiler-cuda",
                    "memsight: MemProfiler has no CUDA device, so it collects host memory and module "
                    f"hooks only ({', '.join(asked)} turned off)",
                )
        #: ``{"{rank}.{fn}.{iter}.{start|end}": {statistic: value}}``, plain mappings.
        self.memory_stats: dict[str, dict[str, Any]] = {}
        #: ``{"{rank}.{fn}.{iter}": {device: {category: bytes}}}``: the FSDP tracker's peaks.
        self.fsdp_memory_stats: dict[str, dict[str, dict[str, int]]] = {}
        #: Every file written, in order.
        self.written: list[str] = []
        self.module: Any = None
        self.optimizer: Any = None
        self.memprof_log_dir: str | None = None
        self._iters: dict[str, int] = {}
        self._done: set[str] = set()
        self._names = set(collected_names(cfg))
        # hooks stay until the retained functions that are collected are done
        # (every collected function when none of them is)
        self._retained = (set(cfg.retain_hooks_for_funcs) & self._names) or set(self._names)
        self._history_fns = set(cfg.collect_funcs.cuda_allocator_history) if cfg.cuda_allocator_history else set()
        self._recording: Recording | None = None
        self._hooks: CallHooks | None = None
        self._hooks_removed = False
        self._depth = 0
        self._atexit = False
        self._finished = False
        self._fsdp_failed = False
        self._counters: Any = None  # the native counter reader; False: torch's dict
        if model is not None or optimizer is not None:
            self.connect(model, optimizer)

    @property
    def enabled(self) -> bool:
        return bool(self.cfg.enabled) and not self._finished

    @property
    def schedule(self) -> Any:
        return self.cfg.schedule

    @property
    def rank(self) -> int:
        return global_rank()

    # -- set-up ----------------------------------------------------------------------
    def connect(self, module: Any, optimizer: Any = None) -> MemProfiler:
        """The module whose submodules get the hooks (and whose
        ``fsdp_mem_tracker_root_module`` is tracked), and the optimizer the
        FSDP tracker accounts for. Hooks are attached at the first profiled call.
        The allocator-history snapshots tag their storages and mark their
        phases (memsight.torch.record's model=, optimizer=)."""
        self.module = module
        if optimizer is not None:
            self.optimizer = optimizer
        return self

    def init_memprof_log_dir(self, base: str | None = None) -> str:
        """``save_dir``, else ``{base}/memprofiler``, else ``./memprofiler``."""
        if self.memprof_log_dir is None:
            folder = self.cfg.save_dir or os.path.join(base or os.getcwd(), "memprofiler")
            os.makedirs(folder, exist_ok=True)
            self.memprof_log_dir = folder
        return self.memprof_log_dir

    def fsdp_mem_tracker_root_module(self) -> Any:
        """The module the FSDP tracker follows; ValueError if it is missing or not FSDP2."""
        if self.module is None:
            raise ValueError("MemProfiler: track_fsdp_mem needs a connected module (MemProfiler.connect)")
        path = self.cfg.fsdp_mem_tracker_root_module
        try:
            root = self.module.get_submodule(path) if path else self.module
        except AttributeError:
            raise ValueError(f"MemProfiler: fsdp_mem_tracker_root_module {path!r} is not a submodule") from None
        from torch.distributed.fsdp import FSDPModule

        if not isinstance(root, FSDPModule):
            raise ValueError(
                f"MemProfiler: fsdp_mem_tracker_root_module {path or '(the connected module)'!r} "
                "has no fully_shard applied"
            )
        return root

    def _set_up(self) -> None:
        """At the first profiled call: hooks, allocator history, exit handler."""
        cfg = self.cfg
        wanted = cfg.enable_memory_hooks or cfg.enable_saved_tensors_hooks
        if self._hooks is None and not self._hooks_removed and wanted:
            pack, unpack = cfg.saved_tensors_funcs or (None, None)
            self._hooks = CallHooks(cfg.memory_hooks.pre_forward_hooks, cfg.memory_hooks.post_forward_hooks,
                                    pack, unpack)
            if cfg.enable_memory_hooks and self.module is not None:
                self._hooks.attach(self.module)
        if self._history_fns and self._recording is None and not (self._history_fns <= self._done):
            o = cfg.cuda_allocator_history_options
            self._recording = Recording(o.max_entries, o.context, o.stacks, owner="MemProfiler",
                                        model=self.module, optimizer=self.optimizer).start()
        elif self._recording is not None and hasattr(self._recording, "hand_over"):
            self._recording.hand_over(self.module, self.optimizer)  # connected, or the optimizer set, later
        if not self._atexit:
            atexit.register(self._at_exit)
            self._atexit = True

    # -- the profiled call -------------------------------------------------------------
    @contextlib.contextmanager
    def memprofile(self, fn_name: str) -> Iterator[None]:
        """Profiles the block as one call of ``fn_name``."""
        call = None
        if self.enabled:
            try:
                call = self._begin(fn_name)
            except Exception:
                log.exception("memsight: MemProfiler could not start collecting %s (training continues)", fn_name)
        if call is None:
            yield
            return
        try:
            yield
        except BaseException as e:
            self._guarded(self._finish, call, e)
            raise
        self._guarded(self._finish, call, None)

    memprofile_ctx = memprofile

    def profile(self, fn: F | None = None, *, name: str | None = None) -> Any:
        """Decorator: every call of ``fn`` is a profiled call (named ``fn.__name__``)."""

        def wrap(f: F) -> F:
            label = name or f.__name__

            @functools.wraps(f)
            def inner(*args: Any, **kwargs: Any) -> Any:
                with self.memprofile(label):
                    return f(*args, **kwargs)

            return inner  # type: ignore[return-value]

        return wrap(fn) if fn is not None else wrap

    def _guarded(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("memsight: MemProfiler.%s failed (training continues)", fn.__name__.lstrip("_"))

    def _begin(self, fn: str) -> _Call | None:
        self._set_up()
        idx = self._iters[fn] = self._iters.get(fn, 0) + 1
        if fn not in self._names or fn in self._done:
            return None
        if idx > self.schedule.max_iter:
            self.teardown_prof(fn)
            return None
        if not self.schedule.collects(idx):
            return None
        self.init_memprof_log_dir()
        call = _Call(fn, idx, outermost=self._depth == 0)
        self.snap(fn, idx, "start")
        self._depth += 1
        cfg = self.cfg
        if fn in self._history_fns:
            try:
                live, snap = _history_now()
                call.start_sites = site_totals(live)
                call.files.append(self._dump_history(fn, idx, "start", snap))
            except Exception:
                log.exception("memsight: MemProfiler could not dump the allocator history of %s", fn)
        if call.outermost and self._hooks is not None:
            if self.module is not None:
                reset_module_attrs(self.module, cfg.save_hook_attrs, cfg.memory_hooks.reset_state_hooks)
            self._hooks.begin()
            if cfg.enable_saved_tensors_hooks:
                call.saved_ctx = self._hooks.saved_tensors_context()
                call.saved_ctx.__enter__()
        if cfg.track_fsdp_mem and fn in cfg.collect_funcs.fsdp and not self._fsdp_failed:
            try:
                call.tracker = fsdp_tracker(self.fsdp_mem_tracker_root_module(), self.optimizer)
                call.tracker.__enter__()
            except Exception as e:
                self._fsdp_failed = True
                call.tracker = None
                log.error("memsight: MemProfiler turns FSDP tracking off: %s: %s", type(e).__name__, e)
        return call

    def _finish(self, call: _Call, error: BaseException | None) -> None:
        self._depth = max(0, self._depth - 1)
        cfg, fn, idx = self.cfg, call.fn, call.iter_idx
        extra: dict[str, Any] = {}
        try:
            if call.tracker is not None:
                self._finish_tracker(call, extra)
        finally:  # whatever failed, the hooks of this call end here
            if call.saved_ctx is not None:
                call.saved_ctx.__exit__(None, None, None)
            if call.outermost and self._hooks is not None:
                extra.update(self._hooks.end())
        if error is not None:
            first_line = str(error).splitlines()[0] if str(error) else ""
            extra["error"] = f"{type(error).__name__}: {first_line}".strip().rstrip(":")
        entry = self.snap(fn, idx, "end", extra)
        if call.start_sites is not None:
            try:
                live, snap = _history_now()
                entry["grew_by_site"] = growth_by_site(call.start_sites, live)
                call.files.append(self._dump_history(fn, idx, "end", snap))
            except Exception:
                log.exception("memsight: MemProfiler could not dump the allocator history of %s", fn)
        entry["files"] = [os.path.basename(p) for p in call.files if p]
        if call.outermost and self._hooks is not None and self.module is not None:
            reset_module_attrs(self.module, cfg.save_hook_attrs, cfg.memory_hooks.reset_state_hooks)
        if idx >= self.schedule.max_iter and error is None:
            self.teardown_prof(fn)
        self.dump_memory_stats()

    def _finish_tracker(self, call: _Call, extra: dict[str, Any]) -> None:
        cfg, tracker = self.cfg, call.tracker
        call.tracker = None
        tracker.__exit__(None, None, None)
        key = f"{self.rank}.{call.fn}.{call.iter_idx}"
        try:
            self.fsdp_memory_stats[key] = fsdp_peak(tracker)
            extra["fsdp_peak"] = self.fsdp_memory_stats[key]
            text = fsdp_report(tracker, call.fn, call.iter_idx, cfg.fsdp_mem_track_module_depth,
                               cfg.fsdp_mem_tracker_units, cfg.fsdp_mem_tracker_tabulate)
            path = fsdp_log_path(self.init_memprof_log_dir(), self.rank, call.fn, call.iter_idx)
            write_atomic(path, text.encode("utf-8"))
            self.written.append(path)
            call.files.append(path)
        except Exception:
            log.exception("memsight: MemProfiler could not write the FSDP report of %s", key)

    # -- collection ----------------------------------------------------------------------
    def gen_snap_key(self, fn: str, iter_idx: int, ctx: str) -> str:
        return f"{self.rank}.{fn}.{iter_idx}.{ctx}"

    def snap(self, fn: str, iter_idx: int, ctx: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """Collects the statistics of one moment into ``memory_stats``."""
        cfg = self.cfg
        entry: dict[str, Any] = {}
        if self.module is not None and cfg.enable_memory_hooks:
            for attr in cfg.save_hook_attrs:
                entry[attr] = getattr(self.module, attr, None)
        if fn in cfg.collect_funcs.cpu:
            entry["rss"], entry["vms"] = host_memory()
        if fn in cfg.collect_funcs.cuda and cuda_available():
            torch = torch_module()
            entry.update(self._cuda_stats(torch))
        if extra:
            entry.update(extra)
        self.memory_stats[self.gen_snap_key(fn, iter_idx, ctx)] = entry
        return entry

    @property
    def counter_source(self) -> str:
        """Where the CUDA statistics are read: 'c10 DeviceStats (native)' (the line
        profiler's reader, checked against torch when it loads), or
        'torch.cuda.memory_stats()' (no compiler or headers, or MEMSIGHT_NATIVE_COUNTERS=0)."""
        return "c10 DeviceStats (native)" if self._counters else "torch.cuda.memory_stats()"

    def _cuda_stats(self, torch: Any) -> dict[str, int]:
        """``torch.cuda.memory_stats()`` of the current device, in its order (by name),
        read through the native counter reader when it loads."""
        if self._counters is None:
            self._counters = False
            if _native_counters.wanted():
                try:
                    self._counters = _native_counters.load_torch_counters(torch, torch.cuda.current_device())
                except Exception as e:  # noqa: BLE001 - torch's dict still works
                    log.warning("memsight: MemProfiler reads torch.cuda.memory_stats(): the native "
                                "counter reader is unavailable: %s", e)
        if self._counters:
            try:
                values = _native_counters.read(self._counters, torch.cuda.current_device())
                return {k: values[k] for k in sorted(values)}
            except Exception as e:  # noqa: BLE001
                log.warning("memsight: the native counter reader failed, back to torch's: %s", e)
                self._counters = False
        return dict(torch.cuda.memory_stats())

    def _dump_history(self, fn: str, iter_idx: int, ctx: str, snap: Any) -> str:
        path = history_path(self.init_memprof_log_dir(), self.rank, fn, iter_idx, ctx)
        dump(path, snap)
        self.written.append(path)
        return path

    # -- ending ----------------------------------------------------------------------------
    def teardown_prof(self, fn: str) -> None:
        """Marks ``fn`` done; removes hooks and stops history when nothing needs them."""
        self._done.add(fn)
        if self._retained <= self._done:
            self.remove_memprofiler_hooks()
        if self._recording is not None and self._history_fns <= self._done:
            self._recording.stop()
            self._recording = None

    def remove_memprofiler_hooks(self) -> None:
        if self._hooks is not None:
            self._hooks.detach()
            self._hooks = None
        self._hooks_removed = True

    def dump_memory_stats(self) -> list[str]:
        """Writes the statistics (YAML, optional pickle) and the page; returns the paths."""
        if not self.memory_stats:
            return []
        folder = self.init_memprof_log_dir()
        rank = self.rank
        out = write_stats(folder, rank, self.memory_stats, self.cfg.dump_memorystats_yaml,
                          self.cfg.dump_memorystats_pickle)
        if self.cfg.write_page:
            from .memprofiler_page import write_page

            out.append(write_page(folder, rank, self.memory_stats))
        for p in out:
            if p not in self.written:
                self.written.append(p)
        return out

    def finish(self) -> None:
        """Ends profiling: hooks off, history stopped, files written. Idempotent."""
        if self._finished:
            return
        self._guarded(self._end_all)
        self._finished = True

    def _end_all(self) -> None:
        for fn in sorted(self._names | self._retained):
            self.teardown_prof(fn)
        self.remove_memprofiler_hooks()
        self.dump_memory_stats()

    def _at_exit(self) -> None:
        if not self._finished:
            self.finish()


def memprofilable(fn: F | None = None, *, name: str | None = None) -> Any:
    """Decorator for methods: profiled through ``self.memprofiler`` when the
    object has one (a :class:`MemProfiler`), plain calls otherwise."""

    def wrap(f: F) -> F:
        label = name or f.__name__

        @functools.wraps(f)
        def inner(self: Any, *args: Any, **kwargs: Any) -> Any:
            prof = getattr(self, "memprofiler", None)
            if prof is None or not prof.enabled:
                return f(self, *args, **kwargs)
            with prof.memprofile(label):
                return f(self, *args, **kwargs)

        return inner  # type: ignore[return-value]

    return wrap(fn) if fn is not None else wrap


MemProfiler.memprofilable = staticmethod(memprofilable)  # type: ignore[attr-defined]

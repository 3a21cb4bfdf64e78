"""Which line of a function took the GPU memory: a line-by-line profiler.

The API and the printed text follow pytorch_memlab's ``LineProfiler``; the
work per line is native (``memsight._linehook``): one read of the CUDA
allocator's counters and a reset of the peaks, attributed to the line that
just ran, kept in C++. Only the profiled functions' lines are sampled.

    with LineProfiler(train_step) as prof:
        train_step(batch)
    prof.print_stats()

    @profile                      # statistics over all calls, printed at exit
    def forward(...): ...

    @profile_every(10)            # printed every 10th call
    def step(...): ...
"""

from __future__ import annotations

import atexit
import functools
import inspect
import logging
import sys
from types import CodeType
from typing import IO, Any, Callable, Iterable, Sequence, TypeVar

from ..._errors import MemsightError
from . import _line_backend as backend
from ._line_format import FunctionTable, format_allocations, format_html, format_text

log = logging.getLogger("memsight.torch")
DEFAULT_COLUMNS = ("active_bytes.all.peak", "reserved_bytes.all.peak")
F = TypeVar("F", bound=Callable[..., Any])


def _code_of(func: Any) -> CodeType | None:
    func = getattr(func, "__func__", func)  # bound methods
    func = getattr(func, "_memsight_profiled", func)  # a profile_every wrapper
    code = getattr(func, "__code__", None)
    return code if isinstance(code, CodeType) else None


class LineRecords:
    """What ``display()`` returns: text in a terminal, an HTML table in Jupyter."""

    def __init__(self, tables: list[FunctionTable], columns: list[str]) -> None:
        self.tables = tables
        self.columns = columns

    def __repr__(self) -> str:
        return format_text(self.tables, self.columns)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return format_html(self.tables, self.columns)


class LineProfiler:
    """Per-line CUDA memory statistics of the given functions.

    ``sampler`` (a callable taking the device index and returning the
    counters as a dict, nested or flat) and ``resetters`` replace torch's
    CUDA allocator statistics, for other devices or for tests.
    """

    def __init__(self, *functions: Callable[..., Any], target_gpu: Any = 0, sampler: Any = None,
                 resetters: Sequence[Any] = (), backend_name: str = "auto") -> None:
        self._mod = backend.load_hook_module()
        self._backend = backend.choose_backend(backend_name)
        self._custom = sampler is not None
        self._sampler = sampler
        self._resetters = tuple(resetters)
        self.target_gpu = backend.device_index(target_gpu)
        self._hook: Any = None
        self._native: Any = None
        self._counter_source = "custom sampler" if self._custom else "not started"
        self._attachment: backend.Attachment | None = None
        self._functions: dict[CodeType, Callable[..., Any]] = {}
        self.enabled = False
        self._warned = False
        for f in functions:
            self.add_function(f)

    @property
    def backend(self) -> str:
        """'monitoring' (sys.monitoring, Python 3.12+) or 'settrace' (a C trace function)."""
        return self._backend

    @property
    def hook(self) -> Any:
        if self._hook is None:
            native = None
            if not self._custom:
                found = backend.cuda_counters(self.target_gpu)
                if found is None:
                    raise RuntimeError("CUDA is not available")
                self._sampler, self._resetters, native = found.sampler, found.resetters, found.native
                self._counter_source = found.source
            hook = self._mod.Hook(self._sampler, self._resetters, self.target_gpu)
            if native is not None:
                hook.use_counters(native.address)
                self._native = native  # keeps the library loaded
            for code in self._functions:
                hook.add_code(code)
            self._hook = hook
        return self._hook

    @property
    def counter_source(self) -> str:
        """Where the counters are read: 'c10 DeviceStats (native)', 'torch._C._cuda_memoryStats'
        (no compiler or torch headers: see the log), or 'custom sampler'."""
        return self._counter_source

    def add_function(self, func: Callable[..., Any]) -> None:
        """Profile this function's lines too (a function, a method or a bound method)."""
        code = _code_of(func)
        if code is None:
            raise ValueError(f"cannot profile {func!r}: it has no Python code object")
        if code in self._functions:
            return
        func = getattr(func, "__func__", func)
        self._functions[code] = getattr(func, "_memsight_profiled", func)
        if self._hook is not None:
            self._hook.add_code(code)
        if self._attachment is not None:
            self._attachment.add_code(code)

    def set_target_gpu(self, target: Any) -> None:
        self.target_gpu = backend.device_index(target)
        if self._hook is not None:
            self._hook.device = self.target_gpu

    def enable(self) -> None:
        """Start recording. Without CUDA (and no sampler given) it logs a warning and stays off."""
        if self.enabled:
            return
        try:
            hook = self.hook
            for reset in self._resetters:
                reset(self.target_gpu)
            if not self._custom:
                import torch

                torch.cuda.empty_cache()
            self._attachment = backend.Attachment(hook, self._backend)
            self._attachment.attach(list(self._functions))
        except Exception as e:  # noqa: BLE001 - profiling must never break the job
            if not self._warned:
                log.warning("memsight LineProfiler is off: %s", e)
                self._warned = True
            self._attachment = None
            return
        self.enabled = True

    def disable(self) -> None:
        """Stop recording; a tracer that was installed before is put back, none is switched off."""
        if not self.enabled or self._attachment is None:
            return
        self._attachment.detach()
        if self._attachment.replaced:
            log.info("memsight LineProfiler: another tracer replaced ours; it is left in place")
        self._attachment = None
        self.enabled = False
        self._log_error()

    def _log_error(self) -> None:
        err = self._hook.error if self._hook is not None else None
        if err:
            log.warning("memsight LineProfiler stopped sampling: %s", err)

    def __enter__(self) -> LineProfiler:
        self.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disable()

    def clear(self) -> None:
        """Forget the functions and the records."""
        if self._hook is not None:
            self._hook.clear(codes=True)
        self._functions.clear()

    # ---- results -------------------------------------------------------------------------

    def keys(self) -> list[str]:
        """The counter names recorded (those of ``torch.cuda.memory_stats()``)."""
        return list(self._hook.keys()) if self._hook is not None else []

    def _selected(self, func: Any) -> list[CodeType]:
        if func is None:
            return list(self._functions)
        names = [func] if isinstance(func, str) else list(func) if isinstance(func, (list, tuple)) else None
        if names is None:
            code = _code_of(func)
            return [code] if code in self._functions else []
        return [c for c, f in self._functions.items() if f.__qualname__ in names]

    def _check_columns(self, columns: Iterable[str]) -> list[str]:
        cols = list(columns)
        if not all(len(c.split(".")) == 3 for c in cols):
            raise ValueError("Each column name should have three dot-separated parts")
        keys = self.keys()
        if keys and not all(c in keys for c in cols):
            options = ", ".join(k for k in keys if len(k.split(".")) == 3)
            raise ValueError("The column names should be fields of torch.cuda.memory_stat(). "
                             "Options are: " + options)
        return cols

    def tables(self, func: Any = None, columns: Iterable[str] = DEFAULT_COLUMNS) -> list[FunctionTable]:
        cols = self._check_columns(columns)
        keys = self.keys()
        if not keys:  # nothing sampled yet
            return []
        index = [keys.index(c) for c in cols]
        per_code: dict[CodeType, dict[int, tuple[int, ...]]] = {}
        for code, line, _hits, values in self._hook.records():
            per_code.setdefault(code, {})[line] = values
        out = []
        for code in self._selected(func):
            recs = per_code.get(code)
            if not recs:
                continue
            src, start = inspect.getsourcelines(code)
            t = FunctionTable(self._functions[code].__qualname__, code_width=max(map(len, src), default=0))
            for n, text in enumerate(src):
                v = recs.get(start + n)
                vals = {c: (v[i] if v is not None else None) for c, i in zip(cols, index)}
                t.rows.append((start + n, text.rstrip("\n\r"), vals))
            out.append(t)
        return out

    def display(self, func: Any = None, columns: Iterable[str] = DEFAULT_COLUMNS) -> LineRecords:
        """The records (of one function, a qualname or a list of them): text, or HTML in Jupyter.

        ``columns``: any ``torch.cuda.memory_stats()`` keys of three parts.
        """
        cols = list(columns)
        return LineRecords(self.tables(func, cols), cols)

    def print_stats(self, func: Any = None, columns: Iterable[str] = DEFAULT_COLUMNS,
                    stream: IO[str] | None = None) -> None:
        (stream or sys.stdout).write(str(self.display(func, columns)))

    def allocations(self, snapshot: dict[str, Any] | None = None) -> dict[tuple[str, int], list[int]]:
        """Each profiled line's allocations, in bytes, from the allocator's history.

        ``snapshot`` defaults to ``torch.cuda.memory._snapshot()``; it needs history recorded
        with Python stacks (``memsight.torch.record(stacks="python")`` or torch's
        ``_record_memory_history()``) while the profiled code ran.
        """
        if snapshot is None:
            import torch

            snapshot = torch.cuda.memory._snapshot()
        spans = {}
        for code, f in self._functions.items():
            lines = [ln for _, _, ln in code.co_lines() if ln is not None] if hasattr(code, "co_lines") else []
            spans[code] = (code.co_filename, code.co_firstlineno, max(lines, default=code.co_firstlineno),
                           f.__qualname__)
        traces = snapshot.get("device_traces") or []
        events = traces[self.target_gpu] if self.target_gpu < len(traces) else []
        out: dict[tuple[str, int], list[int]] = {}
        for ev in events:
            if ev.get("action") != "alloc":
                continue
            for fr in ev.get("frames") or []:
                hit = next((s for s in spans.values()
                            if fr.get("filename") == s[0] and s[1] <= fr.get("line", -1) <= s[2]), None)
                if hit is not None:
                    out.setdefault((hit[3], fr["line"]), []).append(int(ev.get("size", 0)))
                    break
        return out

    def print_allocations(self, snapshot: dict[str, Any] | None = None, stream: IO[str] | None = None) -> None:
        allocs = self.allocations(snapshot)
        sources = {}
        for code, f in self._functions.items():
            try:
                src, start = inspect.getsourcelines(code)
            except OSError:
                continue
            for n, text in enumerate(src):
                sources[(f.__qualname__, start + n)] = text
        (stream or sys.stdout).write(format_allocations(allocs, sources))


# ---- the global profiler behind @profile and @profile_every -----------------------------------

_global: LineProfiler | None = None


def global_line_profiler() -> LineProfiler | None:
    """The profiler behind the decorators; None (logged) when memsight._linehook is not built."""
    global _global
    if _global is None:
        try:
            _global = LineProfiler()
        except MemsightError as e:
            log.error("memsight: @profile does nothing: %s", e)
            return None
    return _global


def _print_at_exit(func: Callable[..., Any], columns: Sequence[str]) -> None:
    prof = _global
    if prof is None:
        return
    try:
        prof.print_stats(func, columns)
    except Exception as e:  # noqa: BLE001 - never fail the interpreter's exit
        log.warning("memsight: cannot print line statistics of %s: %s", getattr(func, "__qualname__", func), e)


def profile(func: F | None = None, *, columns: Sequence[str] = DEFAULT_COLUMNS) -> Any:
    """Profile ``func`` with the global profiler; its statistics (max over all calls) print at exit.

    Returns ``func`` unchanged, so methods (of ``nn.Module`` too) can be decorated.
    ``@profile`` and ``@profile(columns=[...])`` both work.
    """
    if func is None:
        return functools.partial(profile, columns=columns)
    prof = global_line_profiler()
    if prof is None:
        return func
    prof.add_function(func)
    prof.enable()
    atexit.register(_print_at_exit, func, tuple(columns))
    return func


def profile_every(output_interval: int = 1, enable: bool = True,
                  columns: Sequence[str] = DEFAULT_COLUMNS) -> Callable[[F], F]:
    """Print ``func``'s statistics (max over all calls so far) after every N-th call."""
    if output_interval < 1:
        raise ValueError(f"output_interval must be >= 1, not {output_interval}")

    def decorate(func: F) -> F:
        prof = global_line_profiler() if enable else None
        if prof is None:
            return func
        prof.add_function(func)
        prof.enable()
        calls = 0

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            try:
                return func(*args, **kwargs)
            finally:
                calls += 1
                if calls % output_interval == 0:
                    _print_at_exit(func, tuple(columns))

        wrapper._memsight_profiled = func  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


def set_target_gpu(gpu_id: Any) -> None:
    """Switch the global profiler's device (an index or a torch.device), also while it runs."""
    prof = global_line_profiler()
    if prof is not None:
        prof.set_target_gpu(gpu_id)


def clear_global_line_profiler() -> None:
    """Forget the global profiler's functions and records (it stays enabled)."""
    if _global is not None:
        _global.clear()

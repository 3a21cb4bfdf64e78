"""Wires memsight._linehook into the interpreter.

Two ways, the same bookkeeping:

* ``monitoring`` (Python 3.12+): ``sys.monitoring`` local events on the
  profiled code objects only, under a free tool id; other code runs at full
  speed and ``sys.settrace`` users (debuggers, coverage) are untouched.
* ``settrace`` (any version): a C trace function on the current thread. It
  chains to the tracer that was installed before it and on stop puts that
  tracer back (leaving any tracer installed since in place).

``MEMSIGHT_LINE_BACKEND=settrace`` forces the second on 3.12+.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from types import CodeType
from typing import Any

from ..._errors import MemsightError
from ..capture import _native_counters as native_counters

log = logging.getLogger("memsight.torch")

# Tool ids tried in turn: the two unassigned ones first, then the profiler's and the optimizer's.
_TOOL_IDS = (3, 4, 2, 5)


def load_hook_module() -> Any:
    try:
        from ... import _linehook  # type: ignore[attr-defined]
    except ImportError as e:
        raise MemsightError(
            "memsight._linehook is not built: build it with "
            "`cmake -S . -B build/py -DMEMSIGHT_TESTS=OFF && cmake --build build/py --target _linehook` "
            f"or `pip install .` ({e})"
        ) from None
    return _linehook


def choose_backend(requested: str = "auto") -> str:
    requested = os.environ.get("MEMSIGHT_LINE_BACKEND", requested) or "auto"
    if requested not in ("auto", "monitoring", "settrace"):
        raise ValueError(f"backend must be 'auto', 'monitoring' or 'settrace', not {requested!r}")
    has_monitoring = hasattr(sys, "monitoring")
    if requested == "monitoring" and not has_monitoring:
        raise ValueError("the 'monitoring' backend needs Python 3.12 or newer")
    if requested == "auto":
        return "monitoring" if has_monitoring else "settrace"
    return requested


class Attachment:
    """The hook attached to the interpreter one way or the other; detach() undoes it."""

    def __init__(self, hook: Any, backend: str) -> None:
        self.hook = hook
        self.backend = backend
        self.tool: int | None = None
        self.replaced = False  # settrace: another tracer was installed over ours
        self.local_codes: list[CodeType] = []

    def attach(self, codes: list[CodeType]) -> None:
        if self.backend == "settrace":
            self.hook.start_trace()
            return
        mon = sys.monitoring  # type: ignore[attr-defined]
        tool = next((t for t in _TOOL_IDS if mon.get_tool(t) is None), None)
        if tool is None:
            raise MemsightError("every sys.monitoring tool id is taken; set MEMSIGHT_LINE_BACKEND=settrace")
        mon.use_tool_id(tool, "memsight")
        ev = mon.events
        h = self.hook
        for event, callback in ((ev.PY_START, h.on_start), (ev.PY_RESUME, h.on_start),
                                (ev.LINE, h.on_line), (ev.PY_RETURN, h.on_leave),
                                (ev.PY_YIELD, h.on_leave), (ev.PY_UNWIND, h.on_leave)):
            mon.register_callback(tool, event, callback)
        mon.set_events(tool, ev.PY_UNWIND)  # a global-only event; the hook ignores other frames
        self.tool = tool
        for code in codes:
            self.add_code(code)
        h.enabled = True

    def add_code(self, code: CodeType) -> None:
        if self.tool is not None:
            ev = sys.monitoring.events  # type: ignore[attr-defined]
            local = ev.PY_START | ev.PY_RESUME | ev.LINE | ev.PY_RETURN | ev.PY_YIELD
            sys.monitoring.set_local_events(self.tool, code, local)  # type: ignore[attr-defined]
            self.local_codes.append(code)

    def detach(self) -> None:
        if self.backend == "settrace":
            self.replaced = not self.hook.stop_trace()
            return
        self.hook.enabled = False
        if self.tool is None:
            return
        mon = sys.monitoring  # type: ignore[attr-defined]
        mon.set_events(self.tool, 0)
        for code in self.local_codes:
            mon.set_local_events(self.tool, code, 0)
        self.local_codes.clear()
        for event in (mon.events.PY_START, mon.events.PY_RESUME, mon.events.LINE,
                      mon.events.PY_RETURN, mon.events.PY_YIELD, mon.events.PY_UNWIND):
            mon.register_callback(self.tool, event, None)
        mon.free_tool_id(self.tool)
        self.tool = None


@dataclass
class CudaCounters:
    """Where the CUDA allocator's counters come from: torch's functions (they take a device
    index), and the native reader when it could be built (then used instead of them)."""

    sampler: Any
    resetters: tuple[Any, ...]
    native: Any = None  # a _native_counters.NativeCounters
    why_not_native: str = ""

    @property
    def source(self) -> str:
        return "c10 DeviceStats (native)" if self.native is not None else "torch._C._cuda_memoryStats"


def cuda_counters(device: int) -> CudaCounters | None:
    """The counters of CUDA ``device``, or None without CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.cuda.init()  # the counters of every device exist once CUDA is initialised
    c = torch._C
    found = CudaCounters(c._cuda_memoryStats, (c._cuda_resetPeakMemoryStats, c._cuda_resetAccumulatedMemoryStats))
    if not native_counters.wanted():
        found.why_not_native = "MEMSIGHT_NATIVE_COUNTERS is off"
        return found
    try:
        found.native = native_counters.load_torch_counters(torch, device)
    except Exception as e:  # noqa: BLE001 - the dict path still works
        found.why_not_native = str(e)
        log.warning("memsight LineProfiler reads torch.cuda.memory_stats() at every line "
                    "(slower): the native counter reader is unavailable: %s", e)
    return found


def device_index(target: Any) -> int:
    """An int, a 'cuda:N' string or a torch.device, as a device index."""
    if isinstance(target, bool):
        raise ValueError(f"target_gpu must be a device index, not {target!r}")
    if isinstance(target, int):
        if target < 0:
            raise ValueError(f"target_gpu must be >= 0, not {target}")
        return target
    index = getattr(target, "index", None)
    if getattr(target, "type", None) == "cuda":
        return int(index or 0)
    if isinstance(target, str) and (target == "cuda" or target.startswith("cuda:")):
        rest = target[5:]
        if rest == "" or rest.isdigit():
            return int(rest or 0)
    raise ValueError(f"target_gpu must be a CUDA device index or device, not {target!r}")

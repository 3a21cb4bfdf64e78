"""MemoryWatch: the allocator's counters every N steps, with no history
recorded, and a warning when their growth would run the job out of memory
before it ends.

Each sample is three of ``torch.cuda.memory_stats()``'s counters (the same
read MemoryMonitor makes, so inside it the watch costs nothing more):
allocated bytes, reserved bytes and the inactive bytes of split blocks.
``reserved - allocated`` is the memory the allocator holds but no tensor
uses (cache and fragmentation); the split blocks' share of it is the part
that cannot serve a large request without freeing.

Growth is the Theil-Sen slope (the median of the slopes between every two
samples) of allocated bytes over the last ``window`` samples: one odd step
(an evaluation pass, a long batch) moves it little, and flat usage gives 0.
Jitter around a flat level can still give a small positive slope, so growth
counts only where it is steady: Kendall's tau of the samples (the share of
rising pairs minus the share of falling ones) must be at least
``min_trend``.
Allocated memory, sampled at the same point of every step, is what a leak
moves smoothly; reserved memory follows it in whole segments. The job runs
out when the allocator's reservation would pass its limit (the device's
memory times the process's memory fraction, or what the device has free
beside this process if that is less), so the projection starts from the
reservation and grows it at the allocated slope::

    run_out_step = step + floor((limit - reserved) / growth) + 1

the first step whose growth would not fit. It is early by at most the
cached slack divided by the growth, never late for a steady leak.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._util.cuda import torch_module
from .callback import Callback
from .state import TrainState

log = logging.getLogger("memsight")

_KEYS = {
    "allocated": "allocated_bytes.all.current",
    "reserved": "reserved_bytes.all.current",
    "inactive_split": "inactive_split_bytes.all.current",
}


def size_text(n: float) -> str:
    """Bytes in binary units, 1 decimal (``64.0 MiB``)."""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(v) < 1024:
            return f"{v:.0f} B" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} TiB"


def robust_slope(points: list[tuple[int, int]]) -> float:
    """The Theil-Sen slope of ``(x, y)`` points: the median of the slopes
    of every pair with distinct x (0.0 for fewer than two such points)."""
    slopes = [(y2 - y1) / (x2 - x1) for i, (x1, y1) in enumerate(points) for x2, y2 in points[i + 1:] if x2 != x1]
    return statistics.median(slopes) if slopes else 0.0


def kendall_tau(points: list[tuple[int, int]]) -> float:
    """Rising pairs minus falling pairs, over the pairs with distinct x
    (1.0: every later sample higher; 0.0 for fewer than two points)."""
    signs = [(x2 - x1) * (y2 - y1) for i, (x1, y1) in enumerate(points) for x2, y2 in points[i + 1:] if x2 != x1]
    return sum((d > 0) - (d < 0) for d in signs) / len(signs) if signs else 0.0


def _stat(stats: Mapping[str, Any], key: str) -> int:
    """A counter from a flat ``memory_stats()`` dict or the nested one (0 if absent)."""
    if key in stats:
        return int(stats[key])
    node: Any = stats
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return 0
        node = node[part]
    return int(node)


@dataclass(frozen=True)
class MemorySample:
    """The allocator's counters at the end of a step, in bytes."""

    step: int
    allocated: int
    reserved: int
    inactive_split: int

    @property
    def fragmentation(self) -> int:
        """Reserved but not allocated: the cache, split blocks included."""
        return self.reserved - self.allocated

    @classmethod
    def from_stats(cls, step: int, stats: Mapping[str, Any]) -> MemorySample:
        return cls(step, *(_stat(stats, key) for key in _KEYS.values()))


@dataclass(frozen=True)
class MemoryProjection:
    """Where the growth leads: the step at which the job runs out."""

    sample: MemorySample
    #: bytes a step: the robust slope of allocated and of reserved memory
    growth: float
    reserved_growth: float
    #: bytes the allocator may reserve
    limit: int
    run_out_step: int
    #: the run's last step, when known
    end_step: int | None
    #: the steps of the window the slope was taken over
    first_step: int

    @property
    def steps_left(self) -> int:
        return self.run_out_step - self.sample.step

    def message(self) -> str:
        s = self.sample
        end = f" (the run ends at step {self.end_step})" if self.end_step is not None else ""
        return (
            f"memsight: allocated GPU memory grows by {size_text(self.growth)} a step (steps "
            f"{self.first_step}-{s.step}); at this rate the job runs out of its {size_text(self.limit)} "
            f"at about step {self.run_out_step}, {self.steps_left} steps from now{end}. Now: "
            f"{size_text(s.allocated)} allocated, {size_text(s.reserved)} reserved, "
            f"{size_text(s.fragmentation)} reserved but unallocated ({size_text(s.inactive_split)} "
            f"of it in split blocks)"
        )


def device_limit(reserved: int, device: Any = None) -> int:
    """Bytes the allocator may reserve on ``device``: total memory times the
    process's memory fraction, or what it holds plus what the device has free
    if that is less (other processes share the device)."""
    cuda = torch_module().cuda
    free, total = cuda.mem_get_info(device)
    fraction_of = getattr(cuda, "get_per_process_memory_fraction", None)
    fraction = float(fraction_of(device)) if fraction_of is not None else 1.0
    return min(int(total * fraction), reserved + int(free))


class MemoryWatch(Callback):
    """Samples the allocator every ``every`` steps and warns when its growth
    would run the job out of memory before the run ends.

    Args:
        every: steps between samples.
        window: samples the slope is taken over.
        min_samples: samples needed before any projection.
        min_trend: how steady the growth must be (Kendall's tau of the
            window's allocated bytes, -1 to 1) to count.
        total_steps: the run's last step (else the driver's, when it knows:
            Lightning's ``max_steps``, the Trainer's ``state.max_steps``).
        horizon: without a known end, warn for a run-out within this many steps.
        closer: warn again only once the steps left shrink to this fraction
            of those at the last warning.
        limit_bytes: what the allocator may reserve (default: from the device).
        device: the CUDA device (default: the current one).
        warn_fn: called with each warning's text (default: the ``memsight`` logger).

    ``observe(step, stats)`` is the whole work; it never raises. ``samples``
    holds the window, ``projection`` the latest projection (None while usage
    is flat), ``warnings`` every warning's text.
    """

    def __init__(
        self,
        every: int = 10,
        window: int = 20,
        *,
        min_samples: int = 5,
        min_trend: float = 0.5,
        total_steps: int | None = None,
        horizon: int = 10_000,
        closer: float = 0.5,
        limit_bytes: int | None = None,
        device: Any = None,
        warn_fn: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__()
        if every < 1 or window < 2 or not 2 <= min_samples <= window:
            raise ValueError(f"MemoryWatch needs every >= 1 and 2 <= min_samples <= window, "
                             f"not every={every}, window={window}, min_samples={min_samples}")
        self.every, self.min_samples, self.min_trend, self.total_steps = every, min_samples, min_trend, total_steps
        self.horizon, self.closer, self.limit_bytes, self.device = horizon, closer, limit_bytes, device
        self.warn_fn = warn_fn
        self.samples: deque[MemorySample] = deque(maxlen=window)
        self.projection: MemoryProjection | None = None
        self.warnings: list[str] = []
        self._warned_left: int | None = None
        self._failed = 0

    # -- the work ------------------------------------------------------------
    def observe(self, step: int, stats: Mapping[str, Any] | None = None,
                total_steps: int | None = None) -> MemoryProjection | None:
        """Takes a sample when ``step`` is due (reading ``stats``, else torch's);
        returns the projection when it warned, else None. Never raises."""
        try:
            if step % self.every or (self.samples and step <= self.samples[-1].step):
                return None
            if stats is None:
                stats = torch_module().cuda.memory_stats_as_nested_dict(self.device)
            self.samples.append(MemorySample.from_stats(step, stats))
            return self._project(total_steps if self.total_steps is None else self.total_steps)
        except Exception:
            self._failed += 1
            if self._failed == 1:
                log.exception("memsight: MemoryWatch could not sample the allocator at step %s "
                              "(training continues)", step)
            else:
                log.debug("memsight: MemoryWatch failed again at step %s", step, exc_info=True)
            return None

    def _project(self, end: int | None) -> MemoryProjection | None:
        if len(self.samples) < self.min_samples:
            return None
        allocated = [(s.step, s.allocated) for s in self.samples]
        growth = robust_slope(allocated)
        if growth <= 0 or kendall_tau(allocated) < self.min_trend:
            self.projection = None
            return None
        last = self.samples[-1]
        limit = self.limit_bytes if self.limit_bytes is not None else device_limit(last.reserved, self.device)
        left = max(0, math.floor((limit - last.reserved) / growth)) + 1
        p = MemoryProjection(last, growth, robust_slope([(s.step, s.reserved) for s in self.samples]), int(limit),
                       last.step + left, end, self.samples[0].step)
        self.projection = p
        inside = p.run_out_step <= end if end is not None else left <= self.horizon
        again = self._warned_left is None or left <= self._warned_left * self.closer
        if not (inside and again):
            return None
        self._warned_left = left
        text = p.message()
        self.warnings.append(text)
        (self.warn_fn or log.warning)(text)
        return p

    # -- as a callback ---------------------------------------------------------
    def _on_fit_start(self, state: TrainState) -> None:
        self._require_cuda(state, "it watches nothing")

    def _on_batch_end(self, state: TrainState) -> None:
        self.observe(state.batch, total_steps=state.max_batches)

"""MemoryMonitor: the allocator's counters after every training batch, under
Composer's metric names (``memory/current_allocated_mem``, ...).

It writes no files and records no history, so it never touches the
recording state of OOMObserver or MemorySnapshot. Metrics go to
``log_fn(metrics, batch)``, a TensorBoard ``SummaryWriter`` and a Weights &
Biases run when given (loggers.py; a Lightning adapter also logs them through
``pl_module.log_dict``), and are kept in ``latest`` and ``history``.

The same counters feed a :class:`~memsight.torch.MemoryWatch` (``watch``,
on by default), which warns when their growth would run the job out of
memory before it ends.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from .._util.cuda import torch_module
from .callback import Callback
from .loggers import send, sinks
from .memory_watch import MemoryWatch
from .state import TrainState

log = logging.getLogger("memsight")

#: ``torch.cuda.memory_stats()`` key → metric name (Composer's defaults).
MEMORY_KEYS: dict[str, str] = {
    "allocated_bytes.all.current": "current_allocated_mem",
    "active_bytes.all.current": "current_active_mem",
    "inactive_split_bytes.all.current": "current_inactive_mem",
    "reserved_bytes.all.current": "current_reserved_mem",
    "allocated_bytes.all.peak": "peak_allocated_mem",
    "active_bytes.all.peak": "peak_active_mem",
    "inactive_split_bytes.all.peak": "peak_inactive_mem",
    "reserved_bytes.all.peak": "peak_reserved_mem",
    "num_alloc_retries": "alloc_retries",
}

_REDUCE_OPS = ("mean", "avg", "sum", "min", "max")


def to_gigabytes(n: float) -> float:
    """Bytes → decimal GB, kept to 5 significant digits (0 stays 0)."""
    gb = n / 1e9
    if gb == 0:
        return 0
    digits = 4 - int(math.floor(math.log10(abs(gb))))
    return round(gb, digits)


def _lookup(nested: Mapping[str, Any], key: str) -> Any:
    node: Any = nested
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def memory_report(
    memory_keys: Mapping[str, str] | None = None, stats: Mapping[str, Any] | None = None, device: Any = None
) -> dict[str, float | int]:
    """The metrics for the current allocator state (names without ``memory/``).

    ``stats`` may be a flat ``memory_stats()`` dict or the nested one; by
    default it is read from torch. Byte counters become decimal GB and a
    ``bytes`` in a metric name becomes ``gigabytes``; counts stay integers.
    """
    keys = MEMORY_KEYS if memory_keys is None else memory_keys
    if stats is None:
        stats = torch_module().cuda.memory_stats_as_nested_dict(device)
    report: dict[str, float | int] = {}
    for torch_key, name in keys.items():
        value = stats.get(torch_key) if torch_key in stats else _lookup(stats, torch_key)
        if value is None:
            continue
        if "bytes" in torch_key:
            report[name.replace("bytes", "gigabytes")] = to_gigabytes(value)
        else:
            report[name] = value
    return report


def reduce_values(values: list[float], reduce_op: str = "mean") -> list[float]:
    """All-reduces ``values`` across ranks (every rank must call this)."""
    if reduce_op not in _REDUCE_OPS:
        raise ValueError(f"reduce_op must be one of {', '.join(_REDUCE_OPS)}, not {reduce_op!r}")
    torch = torch_module()
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return list(values)
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor(values, dtype=torch.float64, device=device)
    op = {"mean": dist.ReduceOp.SUM, "avg": dist.ReduceOp.SUM, "sum": dist.ReduceOp.SUM,
          "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX}[reduce_op]
    dist.all_reduce(t, op=op)
    if reduce_op in ("mean", "avg"):
        t /= dist.get_world_size()
    return [float(x) for x in t.tolist()]


class MemoryMonitor(Callback):
    """Logs ``memory/{name}`` after every batch.

    Args:
        memory_keys: ``memory_stats()`` key → metric name (default
            :data:`MEMORY_KEYS`).
        dist_aggregate_batch_interval: every that many batches, also
            ``memory/{name}_avg``, ``_min`` and ``_max`` over ranks (a
            collective: every rank must run the monitor).
        log_fn: called as ``log_fn(metrics, batch)``.
        keep_history: keep every batch's metrics in ``history``.
        tensorboard: a ``torch.utils.tensorboard.SummaryWriter`` (or anything
            with ``add_scalar(name, value, step)``): each metric, at the batch.
        wandb: a Weights & Biases run (``wandb.init()``): the metrics, with
            ``memory/step`` as their x axis.
        watch: a :class:`MemoryWatch` fed the same counters (True: one with
            its defaults; False or None: none).
    """

    def __init__(
        self,
        memory_keys: dict[str, str] | None = None,
        dist_aggregate_batch_interval: int | None = None,
        *,
        log_fn: Callable[[dict[str, float | int], int], None] | None = None,
        keep_history: bool = True,
        tensorboard: Any = None,
        wandb: Any = None,
        watch: MemoryWatch | bool | None = True,
    ) -> None:
        super().__init__()
        self.memory_keys = dict(memory_keys) if memory_keys is not None else None
        if dist_aggregate_batch_interval is not None and dist_aggregate_batch_interval < 1:
            raise ValueError("dist_aggregate_batch_interval must be a positive number of batches or None")
        self.dist_aggregate_batch_interval = dist_aggregate_batch_interval
        self.log_fn = log_fn
        self._sinks = sinks(log_fn, tensorboard, wandb)
        self.keep_history = keep_history
        self.latest: dict[str, float | int] = {}
        self.history: list[tuple[int, dict[str, float | int]]] = []
        self._checked = False
        self.watch: MemoryWatch | None = MemoryWatch() if watch is True else (watch or None)

    def _on_fit_start(self, state: TrainState) -> None:
        self._checked = True
        if not self.enabled:
            return
        self._require_cuda(state, "it logs nothing")

    def _on_batch_end(self, state: TrainState) -> None:
        if not self._checked:  # hooks called without fit_start
            self._on_fit_start(state)
            if not self.enabled:
                return
        stats = torch_module().cuda.memory_stats_as_nested_dict()
        report = memory_report(self.memory_keys, stats=stats)
        if self.watch is not None:
            self.watch.observe(state.batch, stats, total_steps=state.max_batches)
        metrics: dict[str, float | int] = {f"memory/{k}": v for k, v in report.items()}
        every = self.dist_aggregate_batch_interval
        if every and state.batch % every == 0:
            names = list(report)
            values = [float(report[n]) for n in names]
            for op in ("avg", "min", "max"):
                for name, v in zip(names, reduce_values(values, op)):
                    metrics[f"memory/{name}_{op}"] = v
        self.latest = metrics
        if self.keep_history:
            self.history.append((state.batch, metrics))
        send(self._sinks, metrics, state.batch)

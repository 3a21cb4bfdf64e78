"""Training progress as the callbacks see it: run name, counters, wall clock.

A :class:`TrainState` is advanced by whoever drives the loop: the
:class:`~memsight.torch.Callbacks` runner, a Lightning adapter, or a callback
that was given no state (it then keeps and advances its own).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .._util.dist import dist_info

log = logging.getLogger("memsight")

_TIME_KEYS = (
    "epoch",
    "batch",
    "batch_in_epoch",
    "sample",
    "sample_in_epoch",
    "token",
    "token_in_epoch",
    "total_wct",
    "epoch_wct",
    "batch_wct",
)


def default_run_name() -> str:
    """A run name every rank of a job agrees on.

    ``$RUN_NAME`` (as Composer reads it) or ``$MEMSIGHT_RUN_NAME``; else
    torchrun's ``$TORCHELASTIC_RUN_ID``; else, in an initialised process
    group of several ranks, rank 0's generated name (one broadcast); else
    ``memsight-YYYYmmdd-HHMMSS`` (UTC).
    """
    for var in ("MEMSIGHT_RUN_NAME", "RUN_NAME"):
        if os.environ.get(var):
            return os.environ[var]
    run_id = os.environ.get("TORCHELASTIC_RUN_ID")
    if run_id and run_id != "none":
        return f"memsight-{run_id}"
    name = datetime.now(timezone.utc).strftime("memsight-%Y%m%d-%H%M%S")
    info = dist_info()
    if info.get("world_size", 1) > 1:
        import sys

        dist = sys.modules.get("torch.distributed")
        try:
            if dist is not None and dist.is_initialized():
                holder = [name]
                dist.broadcast_object_list(holder, src=0)
                name = str(holder[0])
        except Exception as e:  # never fail a job over a name
            log.warning("memsight: could not agree on a run name across ranks (%s); using %s", e, name)
    return name


@dataclass
class TrainState:
    """Counters and clocks of a training run.

    ``epoch``/``batch``/``sample``/``token`` count completed units since the
    fit started (``*_in_epoch`` since the epoch started); ``total_wct`` and
    ``epoch_wct`` are seconds of training so far, ``batch_wct`` the seconds
    the last batch took (from the previous batch's end, data loading
    included). ``device`` is the model's device type when known
    (``"cuda"``, ``"cpu"``, ``"meta"``): GPU-only callbacks turn themselves
    off for a model that is not on CUDA.
    """

    run_name: str | None = None
    epoch: int = 0
    batch: int = 0
    batch_in_epoch: int = 0
    sample: int = 0
    sample_in_epoch: int = 0
    token: int = 0
    token_in_epoch: int = 0
    total_wct: float = 0.0
    epoch_wct: float = 0.0
    batch_wct: float = 0.0
    device: str | None = None
    #: Batches in an epoch, when the driver knows (the profiler schedule saves
    #: the epoch's last batch).
    dataloader_len: int | None = None
    #: The batch the fit ends at, when the driver knows (Lightning's
    #: ``max_steps``): MemoryWatch warns of a run-out before it.
    max_batches: int | None = None
    _last_mark: float | None = field(default=None, repr=False, compare=False)

    def template_vars(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _TIME_KEYS}

    def ensure_run_name(self) -> str:
        if not self.run_name:
            self.run_name = default_run_name()
        return self.run_name

    # The driver calls these; callbacks only read the state.
    def start_fit(self) -> None:
        self.ensure_run_name()
        self._last_mark = time.perf_counter()

    def start_batch(self) -> None:
        if self._last_mark is None:
            self._last_mark = time.perf_counter()

    def end_batch(self, samples: int = 0, tokens: int = 0) -> None:
        now = time.perf_counter()
        took = 0.0 if self._last_mark is None else now - self._last_mark
        self._last_mark = now
        self.batch += 1
        self.batch_in_epoch += 1
        self.sample += int(samples)
        self.sample_in_epoch += int(samples)
        self.token += int(tokens)
        self.token_in_epoch += int(tokens)
        self.batch_wct = took
        self.total_wct += took
        self.epoch_wct += took

    def end_epoch(self) -> None:
        self.epoch += 1
        self.batch_in_epoch = 0
        self.sample_in_epoch = 0
        self.token_in_epoch = 0
        self.epoch_wct = 0.0

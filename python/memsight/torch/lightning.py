"""PyTorch Lightning adapters: memsight's callbacks as Lightning ``Callback``s.

::

    from memsight.torch.lightning import OOMObserverCallback, MemoryMonitorCallback
    trainer = L.Trainer(callbacks=[OOMObserverCallback(), MemoryMonitorCallback()])

``MemProfilerCallback`` profiles training and validation batches (see
docs/memprofiler.md).

Built on ``lightning.pytorch`` when it is installed, else on
``pytorch_lightning``; :func:`adapters_for` builds them for the other one.
Importing this module without Lightning raises ImportError.
"""

from __future__ import annotations

import importlib
import logging
from types import ModuleType, SimpleNamespace
from typing import Any

from .callbacks.callback import Callback as MemsightCallback
from .callbacks.memory_monitor import MemoryMonitor
from .callbacks.memory_snapshot import MemorySnapshot
from .profilers.memprofiler_mixin import memprofiler_callback_for
from .callbacks.oom import OOMObserver
from .profilers.torch_profiler import TorchProfiler
from .callbacks.state import TrainState

log = logging.getLogger("memsight")


def _import_lightning() -> ModuleType:
    for name in ("lightning.pytorch", "pytorch_lightning"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(
        "memsight.torch.lightning needs PyTorch Lightning (the lightning or pytorch-lightning package)"
    )


def _batch_size(batch: Any) -> int:
    """Samples in a batch: the length of its first tensor, else 0."""
    try:
        if hasattr(batch, "shape") and len(batch.shape) > 0:
            return int(batch.shape[0])
        if isinstance(batch, (list, tuple)) and batch:
            return _batch_size(batch[0])
        if isinstance(batch, dict) and batch:
            return _batch_size(next(iter(batch.values())))
    except Exception:
        pass
    return 0


def _max_batches(trainer: Any) -> int | None:
    """The batch the fit ends at: ``max_steps`` (optimizer steps, times the
    batches each accumulates), else ``max_epochs`` whole epochs; None if unbounded."""
    steps = getattr(trainer, "max_steps", None)
    if isinstance(steps, int) and steps > 0:
        accumulate = getattr(trainer, "accumulate_grad_batches", 1)
        return steps * (accumulate if isinstance(accumulate, int) and accumulate > 0 else 1)
    epochs, per_epoch = getattr(trainer, "max_epochs", None), getattr(trainer, "num_training_batches", None)
    if isinstance(epochs, int) and epochs > 0 and isinstance(per_epoch, int):
        return epochs * per_epoch
    return None


def adapters_for(pl: ModuleType) -> SimpleNamespace:
    """The adapter classes built on ``pl.Callback`` (``pl`` is
    ``lightning.pytorch`` or ``pytorch_lightning``)."""

    class LightningAdapter(pl.Callback):  # type: ignore[misc, name-defined]
        """Runs a memsight callback from Lightning's hooks, with its own
        :class:`TrainState` (run name, counters, clocks, the model's device)."""

        def __init__(self, callback: MemsightCallback, run_name: str | None = None) -> None:
            super().__init__()
            self.callback = callback
            self.state = TrainState(run_name=run_name)

        @property
        def state_key(self) -> str:
            return f"memsight.{type(self.callback).__name__}"

        def _hand_over(self, trainer: Any, pl_module: Any) -> None:
            """The module and its first optimizer, for the memory kinds."""
            attach = getattr(self.callback, "attach_model", None)
            if attach is None:
                return
            try:
                optimizers = list(getattr(trainer, "optimizers", None) or [])
                attach(pl_module, optimizers[0] if optimizers else None)
            except Exception:
                log.exception("memsight: could not hand the module over to %s", type(self.callback).__name__)

        def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
            device = getattr(pl_module, "device", None)
            self.state.device = getattr(device, "type", None)
            self._hand_over(trainer, pl_module)
            self.state.start_fit()
            self.callback.fit_start(self.state)

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            self._hand_over(trainer, pl_module)  # the optimizers exist by now
            self.state.max_batches = _max_batches(trainer)  # and the epoch's length

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            self.state.start_batch()
            self.callback.batch_start(self.state)

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            self.state.end_batch(samples=_batch_size(batch))
            self.callback.batch_end(self.state)
            self._after_batch(pl_module)

        def _after_batch(self, pl_module: Any) -> None:
            pass

        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            self.state.end_epoch()
            self.callback.epoch_end(self.state)

        def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
            self.callback.fit_end(self.state)

        def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
            if stage == "fit":
                self.callback.close()

        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            self.callback.close()

    class OOMObserverCallback(LightningAdapter):
        """:class:`~memsight.torch.OOMObserver` as a Lightning callback."""

        def __init__(self, *args: Any, run_name: str | None = None, **kwargs: Any) -> None:
            super().__init__(OOMObserver(*args, **kwargs), run_name=run_name)

    class MemorySnapshotCallback(LightningAdapter):
        """:class:`~memsight.torch.MemorySnapshot` as a Lightning callback."""

        def __init__(self, *args: Any, run_name: str | None = None, **kwargs: Any) -> None:
            super().__init__(MemorySnapshot(*args, **kwargs), run_name=run_name)

    class MemoryMonitorCallback(LightningAdapter):
        """:class:`~memsight.torch.MemoryMonitor` as a Lightning callback; the
        metrics also go to Lightning's loggers (``pl_module.log_dict``)."""

        callback: MemoryMonitor

        def __init__(self, *args: Any, run_name: str | None = None, log_to_lightning: bool = True, **kwargs: Any) -> None:
            super().__init__(MemoryMonitor(*args, **kwargs), run_name=run_name)
            self.log_to_lightning = log_to_lightning

        def _after_batch(self, pl_module: Any) -> None:
            metrics = self.callback.latest
            if not (self.log_to_lightning and metrics and self.callback.enabled):
                return
            try:
                pl_module.log_dict(
                    {k: float(v) for k, v in metrics.items()},
                    on_step=True, on_epoch=False, logger=True, batch_size=1,
                )
            except Exception as e:
                log.warning("memsight: could not log memory metrics to Lightning: %s", e)

    class TorchProfilerCallback(LightningAdapter):
        """:class:`~memsight.torch.TorchProfiler` as a Lightning callback: the
        schedule counts Lightning's batches (``batch_in_epoch`` from its
        ``batch_idx``; the epoch's length from the trainer, so its last batch
        is saved when recorded)."""

        def __init__(self, *args: Any, run_name: str | None = None, **kwargs: Any) -> None:
            super().__init__(TorchProfiler(*args, **kwargs), run_name=run_name)

        def on_train_batch_end(
            self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
        ) -> None:
            n = getattr(trainer, "num_training_batches", None)
            self.state.dataloader_len = int(n) if isinstance(n, int) else None
            super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    return SimpleNamespace(
        LightningAdapter=LightningAdapter,
        TorchProfilerCallback=TorchProfilerCallback,
        OOMObserverCallback=OOMObserverCallback,
        MemorySnapshotCallback=MemorySnapshotCallback,
        MemoryMonitorCallback=MemoryMonitorCallback,
    )


_pl = _import_lightning()
_adapters = adapters_for(_pl)
MemProfilerCallback = memprofiler_callback_for(_pl)
LightningAdapter = _adapters.LightningAdapter
OOMObserverCallback = _adapters.OOMObserverCallback
MemorySnapshotCallback = _adapters.MemorySnapshotCallback
MemoryMonitorCallback = _adapters.MemoryMonitorCallback
TorchProfilerCallback = _adapters.TorchProfilerCallback

__all__ = [
    "LightningAdapter",
    "TorchProfilerCallback",
    "MemProfilerCallback",
    "MemoryMonitorCallback",
    "MemorySnapshotCallback",
    "OOMObserverCallback",
    "adapters_for",
]

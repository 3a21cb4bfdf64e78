"""MemProfiler in PyTorch Lightning: a module mixin, or a callback.

The mixin profiles the methods marked ``@memprofilable``::

    class Model(MemProfilerMixin, L.LightningModule):
        def __init__(self):
            super().__init__(memprofiler_cfg=MemProfilerCfg(enabled=True))

        @memprofilable
        def training_step(self, batch, batch_idx): ...

The callback (``memsight.torch.lightning.MemProfilerCallback``) needs no
change to the module: each training batch (step, backward, optimizer step)
is one call of ``training_step`` and each validation batch one call of
``validation_step``.

Both build the profiler, connect it to the module, put the files under
``trainer.log_dir/memprofiler`` (or ``save_dir``), hand the FSDP tracker
the first optimizer, and write everything at the end of training. Neither
imports Lightning.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

from .memprofiler import MemProfiler
from .memprofiler_config import MemProfilerCfg

log = logging.getLogger("memsight")


class MemProfilerMixin:
    """Gives a LightningModule a ``memprofiler`` (None unless the config is enabled)."""

    memprofiler: MemProfiler | None

    def __init__(self, *args: Any, memprofiler_cfg: MemProfilerCfg | dict[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cfg = MemProfilerCfg.from_dict(memprofiler_cfg) if isinstance(memprofiler_cfg, dict) else memprofiler_cfg
        self.memprofiler = MemProfiler(cfg).connect(self) if cfg is not None and cfg.enabled else None

    def _memprofiler_trainer(self) -> Any:
        return getattr(self, "_trainer", None)

    def setup(self, stage: str | None = None) -> None:
        parent = getattr(super(), "setup", None)
        if parent is not None:
            parent(stage)
        if self.memprofiler is None:
            return
        trainer = self._memprofiler_trainer()
        base = getattr(trainer, "log_dir", None) or getattr(trainer, "default_root_dir", None)
        try:
            self.memprofiler.init_memprof_log_dir(base)
        except OSError as e:
            log.error("memsight: MemProfiler cannot create its folder: %s", e)

    def on_train_start(self) -> None:
        parent = getattr(super(), "on_train_start", None)
        if parent is not None:
            parent()
        trainer = self._memprofiler_trainer()
        optimizers = getattr(trainer, "optimizers", None) or []
        if self.memprofiler is not None and optimizers and self.memprofiler.optimizer is None:
            self.memprofiler.optimizer = optimizers[0]

    def on_train_end(self) -> None:
        parent = getattr(super(), "on_train_end", None)
        if parent is not None:
            parent()
        if self.memprofiler is not None:
            self.memprofiler.finish()


def _log_dir(trainer: Any) -> str | None:
    return getattr(trainer, "log_dir", None) or getattr(trainer, "default_root_dir", None)


def memprofiler_callback_for(pl: ModuleType | Any) -> type:
    """The MemProfiler callback class built on ``pl.Callback``."""

    class MemProfilerCallback(pl.Callback):  # type: ignore[misc, name-defined]
        """Profiles training and validation batches with a :class:`MemProfiler`
        (``MemProfilerCallback(cfg)`` or ``MemProfilerCallback(**options)``)."""

        def __init__(self, cfg: MemProfilerCfg | dict[str, Any] | None = None, **options: Any) -> None:
            super().__init__()
            self.profiler = MemProfiler(cfg, **options)
            self._open: list[Any] = []

        def setup(self, trainer: Any, pl_module: Any, stage: str | None = None) -> None:
            self.profiler.connect(pl_module)
            try:
                self.profiler.init_memprof_log_dir(_log_dir(trainer))
            except OSError as e:
                log.error("memsight: MemProfiler cannot create its folder: %s", e)

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            optimizers = getattr(trainer, "optimizers", None) or []
            if optimizers and self.profiler.optimizer is None:
                self.profiler.optimizer = optimizers[0]

        def _enter(self, name: str) -> None:
            self._close(None)  # a batch whose end hook never ran
            ctx = self.profiler.memprofile(name)
            ctx.__enter__()
            self._open.append(ctx)

        def _close(self, exception: BaseException | None) -> None:
            while self._open:
                ctx = self._open.pop()
                if exception is None:
                    ctx.__exit__(None, None, None)
                else:
                    ctx.__exit__(type(exception), exception, exception.__traceback__)

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            self._enter("training_step")

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                               batch_idx: int) -> None:
            self._close(None)

        def on_validation_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int,
                                      dataloader_idx: int = 0) -> None:
            self._enter("validation_step")

        def on_validation_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                                    batch_idx: int, dataloader_idx: int = 0) -> None:
            self._close(None)

        def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
            self._close(exception)
            self.profiler.finish()

        def on_train_end(self, trainer: Any, pl_module: Any) -> None:
            self._close(None)
            self.profiler.finish()

    return MemProfilerCallback

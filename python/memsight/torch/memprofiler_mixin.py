"""MemProfiler in a PyTorch Lightning module, as a mixin::

    class Model(MemProfilerMixin, L.LightningModule):
        def __init__(self):
            super().__init__(memprofiler_cfg=MemProfilerCfg(enabled=True))

        @memprofilable
        def training_step(self, batch, batch_idx): ...

It needs nothing from Lightning to import: it builds the profiler, connects
it to the module, puts the files under ``trainer.log_dir/memprofiler`` (or
``save_dir``), hands the FSDP tracker the first optimizer, and writes
everything at the end of training.
"""

from __future__ import annotations

import logging
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

"""Hugging Face transformers (and accelerate): memsight in a ``Trainer``.

::

    from memsight.torch.hf import MemsightCallback
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[MemsightCallback()])
    trainer.train()

One callback does what the plain-loop callbacks do, fed from the Trainer's
events:

- at ``on_train_begin`` it arms an :class:`~memsight.torch.OOMObserver` for
  the Trainer's model and optimizer (their storages tagged, their phases
  marked), which in a distributed job (torchrun, accelerate launch) makes
  every rank write its snapshot of the OOM's moment;
- every optimizer step is marked in the allocation history
  (:func:`~memsight.torch.mark_step`, numbered by ``state.global_step``), for
  ``memsight leaks`` and ``memsight diff --at-step``;
- ``snapshot_every=N`` / ``snapshot_steps=[...]`` write the history at those
  global steps (each rank its own file);
- at ``on_log`` the allocator's counters and the memory by kind are added to
  the logs dict, so that every ``report_to`` integration (TensorBoard,
  Weights & Biases, MLflow, ...) and ``state.log_history`` carry them;
- every ``watch.every`` steps a :class:`~memsight.torch.MemoryWatch` samples
  the allocator and warns when its growth would run out before
  ``state.max_steps``.

The callback never breaks training: a failure in it is logged to the
``memsight`` logger and training goes on, while the job's own exceptions
(an out-of-memory error among them) reach the caller as usual.

transformers is imported when ``MemsightCallback`` is first used; without it
that raises ImportError. :func:`callback_class` builds the class on another
``TrainerCallback`` base.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable
from typing import Any

from ._util.cuda import cuda_available, torch_module
from .callbacks.kind_metrics import kind_report
from .callbacks.loggers import send, sinks
from .callbacks.memory_monitor import _lookup, memory_report
from .callbacks.memory_watch import MemoryWatch
from .callbacks.oom import OOMObserver
from .callbacks.state import TrainState
from .callbacks.templates import format_name_with_dist, format_name_with_dist_and_time
from .capture.phase_marks import mark_step
from .capture.recording import Recording, dump

log = logging.getLogger("memsight")

_NEEDS = "memsight.torch.hf needs Hugging Face transformers: pip install transformers (or memsight[hf])"


def trainer_callback_base() -> type:
    """transformers' ``TrainerCallback``, with a clear error where it is missing."""
    try:
        from transformers import TrainerCallback
    except ImportError as e:
        raise ImportError(_NEEDS) from e
    return TrainerCallback  # type: ignore[no-any-return]


def _optimizer(optimizer: Any) -> Any:
    """The torch optimizer inside accelerate's ``AcceleratedOptimizer``."""
    inner = getattr(optimizer, "optimizer", None)
    return inner if inner is not None and hasattr(inner, "param_groups") else optimizer


def _device_type(model: Any) -> str | None:
    try:
        return str(next(iter(model.parameters())).device.type)
    except Exception:
        return None


def _steps(every: int | None, steps: Iterable[int]) -> tuple[int | None, frozenset[int]]:
    if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        raise ValueError(f"snapshot_every must be a positive number of steps or None, not {every!r}")
    return every, frozenset(int(s) for s in steps)


class MemsightHooks:
    """The callback's logic on the Trainer's event names; :func:`callback_class`
    puts it over a ``TrainerCallback``.

    Args:
        folder: where the files go (templates as OOMObserver's; ``{output_dir}``
            is the Trainer's ``args.output_dir``).
        oom: arm the OOM observer.
        snapshot_every: write the allocation history every that many global steps.
        snapshot_steps: write it at these global steps.
        snapshot_filename: the snapshots' names (``.pickle`` added; ``{batch}``
            is the global step).
        metrics: add the allocator's counters to the logs.
        kinds: add the memory by kind too (parameters, gradients, optimizer
            state, buffers, the rest).
        memory_keys: ``memory_stats()`` key -> metric name (MemoryMonitor's).
        tensorboard, wandb: also send the metrics there (see MemoryMonitor).
        max_entries, stacks: what the allocation history keeps.
        all_ranks, ranks_timeout, overwrite, remote_file_name: OOMObserver's.
        run_name: the run's name (default as the plain-loop callbacks name it).
        watch: a :class:`MemoryWatch` run at every step end (True: one with its
            defaults; False or None: none).
    """

    def __init__(
        self,
        folder: str = "{output_dir}/memsight/{run_name}",
        *,
        oom: bool = True,
        snapshot_every: int | None = None,
        snapshot_steps: Iterable[int] = (),
        snapshot_filename: str = "rank{rank}_step{batch}",
        metrics: bool = True,
        kinds: bool = True,
        memory_keys: dict[str, str] | None = None,
        tensorboard: Any = None,
        wandb: Any = None,
        max_entries: int = 100_000,
        stacks: str = "python",
        all_ranks: bool = True,
        ranks_timeout: float = 30.0,
        overwrite: bool = False,
        remote_file_name: str | None = None,
        run_name: str | None = None,
        watch: MemoryWatch | bool | None = True,
    ) -> None:
        self.folder = folder
        self.watch: MemoryWatch | None = MemoryWatch() if watch is True else (watch or None)
        self._watching = False
        self.snapshot_every, self.snapshot_steps = _steps(snapshot_every, snapshot_steps)
        self.snapshot_filename = snapshot_filename
        self.oom: OOMObserver | None = None
        if oom:
            self.oom = OOMObserver(max_entries, folder=folder, remote_file_name=remote_file_name,
                                   overwrite=overwrite, stacks=stacks, all_ranks=all_ranks,
                                   ranks_timeout=ranks_timeout)
        self._recording = Recording(max_entries, "alloc", stacks, owner="MemsightCallback")
        self.metrics = metrics
        self.kinds = kinds
        self.memory_keys = memory_keys
        self._sinks = sinks(None, tensorboard, wandb)
        self.state = TrainState(run_name=run_name)
        self.model: Any = None
        self.optimizer: Any = None
        self.folder_name: str | None = None
        #: The snapshots written on the schedule, in order.
        self.snapshots: list[str] = []
        #: The metrics added to the last logs.
        self.last_metrics: dict[str, float | int] = {}
        self._said_no_cuda = False

    # -- the Trainer's events ---------------------------------------------------
    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, optimizer: Any = None,
                       **kwargs: Any) -> None:
        self._guarded("on_train_begin", self._train_begin, args, state, model, optimizer)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._guarded("on_step_begin", self._step_begin, state)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._guarded("on_step_end", self._step_end, state)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        self._guarded("on_log", self._log, state, logs)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._guarded("on_epoch_end", self.state.end_epoch)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._guarded("on_train_end", self._train_end)

    def close(self) -> None:
        """Disarms the observer and stops recording (``on_train_end`` does it;
        after a training that raised, call it to stop recording by hand)."""
        if self.oom is not None:
            self.oom.close()
        self._recording.stop()

    # -- what they do ------------------------------------------------------------
    def _guarded(self, hook: str, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("memsight: MemsightCallback.%s failed (training continues)", hook)

    def _train_begin(self, args: Any, hf_state: Any, model: Any, optimizer: Any) -> None:
        self._run_first()
        self.model, self.optimizer = model, _optimizer(optimizer)
        self.state.device = _device_type(model)
        self.state.batch = int(getattr(hf_state, "global_step", 0) or 0)
        self.state.start_fit()
        self.folder_name = format_name_with_dist(
            self.folder.replace("{output_dir}", str(getattr(args, "output_dir", None) or ".")),
            self.state.ensure_run_name())
        if self.oom is not None:
            self.oom.folder = self.folder_name
            self.oom.attach_model(model, self.optimizer)
            try:
                self.oom.fit_start(self.state)
            except Exception as e:  # a folder it refuses, say: the training goes on without it
                log.error("memsight: the OOM observer is off: %s: %s", type(e).__name__, e)
                self.oom.enabled = False
        self._watching = self.watch is not None and cuda_available() and self.state.device in (None, "cuda", "meta")
        if self.snapshot_every or self.snapshot_steps:
            if cuda_available() and self.state.device in (None, "cuda", "meta"):
                self._recording.hand_over(model, self.optimizer)
                self._recording.start()
            else:
                log.warning("memsight: no CUDA model, so MemsightCallback writes no snapshots")

    def _run_first(self) -> None:
        """Moves this callback to the front of the Trainer's list, so its
        ``on_log`` fills the logs before the ``report_to`` integrations (which
        the Trainer puts before the user's callbacks) read them. The handler
        is the caller of this event; elsewhere (a test, another driver) the
        order stays."""
        frame = sys._getframe(1)
        for _ in range(8):
            frame = frame.f_back  # type: ignore[assignment]
            if frame is None:
                return
            cbs = getattr(frame.f_locals.get("self"), "callbacks", None)
            if isinstance(cbs, list) and any(cb is self for cb in cbs):
                # Removing at k and inserting at 0 leaves every later index as it
                # was, so the loop over the list that called us goes on unchanged.
                cbs.remove(self)
                cbs.insert(0, self)
                return

    def _step_begin(self, hf_state: Any) -> None:
        self.state.batch = int(getattr(hf_state, "global_step", self.state.batch) or 0)
        self.state.start_batch()
        if self.oom is not None and self.oom.armed:
            self.oom.batch_start(self.state)  # marks the step itself
        elif self._recording.active:
            mark_step(self.state.batch)

    def _step_end(self, hf_state: Any) -> None:
        self.state.end_batch()
        step = int(getattr(hf_state, "global_step", self.state.batch) or 0)
        self.state.batch = step
        if self.oom is not None:
            self.oom.batch_end(self.state)
        if self._watching and self.watch is not None:
            end = getattr(hf_state, "max_steps", None)
            self.watch.observe(step, total_steps=end if isinstance(end, int) and end > 0 else None)
        due = (self.snapshot_every and step % self.snapshot_every == 0) or step in self.snapshot_steps
        if due and self._recording.active:
            self._snapshot()

    def _snapshot(self) -> None:
        name = format_name_with_dist_and_time(self.snapshot_filename, self.state.ensure_run_name(), self.state)
        path = os.path.join(self.folder_name or ".", name + ".pickle")
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.snapshots.append(dump(path))
        log.info("memsight: wrote %s", path)

    def _log(self, hf_state: Any, logs: dict[str, Any] | None) -> None:
        if logs is None or not self.metrics:
            return
        metrics = self._metrics()
        if not metrics:
            return
        history = getattr(hf_state, "log_history", None)
        if history and isinstance(history[-1], dict) and all(history[-1].get(k) == v for k, v in logs.items()):
            history[-1].update(metrics)  # the Trainer keeps a copy, made before on_log
        logs.update(metrics)
        self.last_metrics = metrics
        send(self._sinks, metrics, int(getattr(hf_state, "global_step", 0) or 0))

    def _metrics(self) -> dict[str, float | int]:
        """``memory/{name}``: MemoryMonitor's counters and the memory by kind."""
        if not cuda_available():
            if not self._said_no_cuda:
                self._said_no_cuda = True
                log.warning("memsight: CUDA is not available, so MemsightCallback adds no memory metrics")
            return {}
        stats = torch_module().cuda.memory_stats_as_nested_dict()
        report: dict[str, float | int] = dict(memory_report(self.memory_keys, stats=stats))
        if self.kinds and self.model is not None:
            report.update(kind_report(self.model, self.optimizer, _lookup(stats, "allocated_bytes.all.current")))
        return {f"memory/{k}": v for k, v in report.items()}

    def _train_end(self) -> None:
        if self.oom is not None:
            self.oom.fit_end(self.state)
        if self._recording.active and self.snapshots:
            log.info("memsight: %d snapshot(s) in %s", len(self.snapshots), self.folder_name)
        self.close()

    def __repr__(self) -> str:
        return (f"MemsightCallback(oom={self.oom is not None}, snapshot_every={self.snapshot_every}, "
                f"metrics={self.metrics}, kinds={self.kinds})")


def callback_class(base: type) -> type:
    """``MemsightCallback`` built on ``base`` (transformers' ``TrainerCallback``
    or a stand-in with the same events)."""
    return type("MemsightCallback", (MemsightHooks, base), {"__module__": __name__, "__doc__": MemsightHooks.__doc__})


def __getattr__(name: str) -> Any:
    if name == "MemsightCallback":
        cls = callback_class(trainer_callback_base())
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["MemsightCallback", "MemsightHooks", "callback_class", "trainer_callback_base"]  # noqa: F822 - built on first use

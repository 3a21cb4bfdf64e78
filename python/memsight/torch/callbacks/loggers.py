"""Where memory metrics go besides a ``log_fn``: TensorBoard and Weights & Biases.

::

    from torch.utils.tensorboard import SummaryWriter
    MemoryMonitor(tensorboard=SummaryWriter("runs/exp1"), wandb=wandb.run)

TensorBoard gets one ``add_scalar(name, value, step)`` per metric. Weights &
Biases gets one ``run.log({...metrics, "memory/step": step})`` per call, with
``memory/step`` declared as the x axis of ``memory/*`` (``define_metric``),
so memsight's calls never move the run's own step that the training loop's
``wandb.log`` calls use.

Nothing here imports TensorBoard or wandb: the caller hands over the objects.
A sink that fails logs the failure to the ``memsight`` logger and training
goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Dict, Union

log = logging.getLogger("memsight")

Metrics = Dict[str, Union[float, int]]
Sink = Callable[[Metrics, int], None]

#: The x axis of memsight's charts in Weights & Biases.
WANDB_STEP = "memory/step"


def tensorboard_sink(writer: Any) -> Sink:
    """Writes each metric with ``writer.add_scalar(name, value, step)``
    (a ``torch.utils.tensorboard.SummaryWriter`` or anything alike)."""

    def sink(metrics: Metrics, step: int) -> None:
        for name, value in metrics.items():
            writer.add_scalar(name, value, step)

    return sink


def wandb_sink(run: Any) -> Sink:
    """Logs the metrics to a Weights & Biases run (``wandb.init()``'s result)."""
    declared = False

    def sink(metrics: Metrics, step: int) -> None:
        nonlocal declared
        if not declared:
            declared = True
            try:
                run.define_metric(WANDB_STEP)
                run.define_metric("memory/*", step_metric=WANDB_STEP)
            except Exception as e:  # an older wandb: the run's own step is the x axis
                log.debug("memsight: wandb define_metric failed: %s", e)
        data: dict[str, Any] = {**metrics, WANDB_STEP: step}
        run.log(data)

    return sink


def sinks(log_fn: Sink | None = None, tensorboard: Any = None, wandb: Any = None) -> list[tuple[str, Sink]]:
    """The named sinks for the given destinations (those not None)."""
    out: list[tuple[str, Sink]] = []
    if log_fn is not None:
        out.append(("log_fn", log_fn))
    if tensorboard is not None:
        out.append(("TensorBoard", tensorboard_sink(tensorboard)))
    if wandb is not None:
        out.append(("Weights & Biases", wandb_sink(wandb)))
    return out


def send(targets: list[tuple[str, Sink]], metrics: Metrics, step: int) -> None:
    """Hands the metrics to every sink; one that fails is logged and skipped."""
    for name, sink in targets:
        try:
            sink(metrics, step)
        except Exception as e:
            log.warning("memsight: could not log memory metrics to %s: %s: %s", name, type(e).__name__, e)

"""Memory metrics to TensorBoard and Weights & Biases, through stand-ins that
record the calls a SummaryWriter and a wandb run receive."""

from __future__ import annotations

import logging

from memsight.torch import Callbacks, MemoryMonitor
from memsight.torch.callbacks.loggers import WANDB_STEP, send, sinks


class Writer:
    def __init__(self):
        self.scalars = []

    def add_scalar(self, name, value, step):
        self.scalars.append((name, value, step))


class Run:
    def __init__(self):
        self.defined, self.logged = [], []

    def define_metric(self, name, step_metric=None):
        self.defined.append((name, step_metric))

    def log(self, data):
        self.logged.append(data)


def test_monitor_metrics_go_to_tensorboard_and_wandb(fake_torch):
    writer, run = Writer(), Run()
    mon = MemoryMonitor(tensorboard=writer, wandb=run)
    with Callbacks(mon, run_name="r") as runner:
        for _ in range(2):
            runner.batch_start()
            runner.batch_end()
    assert ("memory/current_allocated_mem", 1.2346, 1) in writer.scalars
    assert ("memory/peak_reserved_mem", 4.0, 2) in writer.scalars
    assert ("memory/alloc_retries", 2, 2) in writer.scalars
    assert run.defined == [(WANDB_STEP, None), ("memory/*", WANDB_STEP)]
    assert [d[WANDB_STEP] for d in run.logged] == [1, 2]
    assert run.logged[0]["memory/peak_allocated_mem"] == 2.0


def test_a_failing_logger_is_logged_and_the_others_still_get_the_metrics(caplog):
    class Broken:
        def add_scalar(self, *a):
            raise OSError("disk full")

    run = Run()
    with caplog.at_level(logging.WARNING, logger="memsight"):
        send(sinks(None, Broken(), run), {"memory/x": 1.0}, 7)
    assert "could not log memory metrics to TensorBoard: OSError: disk full" in caplog.text
    assert run.logged == [{"memory/x": 1.0, WANDB_STEP: 7}]


def test_an_older_wandb_without_define_metric_still_logs():
    class OldRun:
        def __init__(self):
            self.logged = []

        def log(self, data):
            self.logged.append(data)

    run = OldRun()
    send(sinks(wandb=run), {"memory/x": 1.0}, 3)
    assert run.logged == [{"memory/x": 1.0, WANDB_STEP: 3}]

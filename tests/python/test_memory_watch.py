"""MemoryWatch: the robust slope, the run-out projection and its warning,
driven by synthetic allocator counters on a stand-in torch.cuda."""

from __future__ import annotations

import importlib
import logging
import sys
from types import SimpleNamespace

import pytest

from memsight.torch import Callbacks, MemoryMonitor, MemoryWatch, TrainState
from memsight.torch.callbacks.memory_watch import device_limit, kendall_tau, robust_slope

MIB = 1 << 20
GIB = 1 << 30


def stats(allocated: int, reserved: int, split: int = 0) -> dict:
    return {"allocated_bytes": {"all": {"current": allocated}}, "reserved_bytes": {"all": {"current": reserved}},
            "inactive_split_bytes": {"all": {"current": split}}}


def leak(step: int, base: int = GIB, per_step: int = 64 * MIB) -> dict:
    """A job that keeps 64 MiB more every step, over 256 MiB of cache (8 MiB in split blocks)."""
    return stats(base + step * per_step, base + step * per_step + 256 * MIB, 8 * MIB)


def test_robust_slope_ignores_an_outlier_and_flat_is_zero():
    pts = [(s, 100 + 5 * s) for s in range(10)]
    pts[4] = (4, 10_000)  # an evaluation pass's spike
    assert robust_slope(pts) == 5.0
    assert robust_slope([(s, 7) for s in range(10)]) == 0.0
    assert robust_slope([(3, 1)]) == 0.0
    assert kendall_tau(pts) > 0.7 and kendall_tau([(s, 7) for s in range(10)]) == 0.0
    jitter = [(s, (2 * s) % 5) for s in range(8)]  # comes and goes
    assert robust_slope(jitter) > 0 and kendall_tau(jitter) < 0.5


def test_projection_numbers_and_warning_text_for_a_steady_leak():
    warned = []
    watch = MemoryWatch(every=2, window=8, min_samples=4, limit_bytes=8 * GIB, warn_fn=warned.append)
    for step in range(0, 21):
        watch.observe(step, leak(step), total_steps=1000)
    p = watch.projection
    assert p is not None and p.growth == 64 * MIB and p.reserved_growth == 64 * MIB
    # at step 20: reserved = 1 GiB + 20 * 64 MiB + 256 MiB = 2.5 GiB; (8 - 2.5) GiB / 64 MiB = 88 steps fit
    assert p.sample.reserved == 2560 * MIB and p.sample.fragmentation == 256 * MIB
    assert p.run_out_step == 20 + 88 + 1 and p.steps_left == 89
    assert [s.step for s in watch.samples] == [6, 8, 10, 12, 14, 16, 18, 20]
    # warned once, at the first projection (step 6), not again while it only creeps closer
    assert len(warned) == 1 and watch.warnings == warned
    assert warned[0] == (
        "memsight: allocated GPU memory grows by 64.0 MiB a step (steps 0-6); at this rate the job runs "
        "out of its 8.0 GiB at about step 109, 103 steps from now (the run ends at step 1000). Now: "
        "1.4 GiB allocated, 1.6 GiB reserved, 256.0 MiB reserved but unallocated (8.0 MiB of it in "
        "split blocks)")


def test_warns_again_only_when_much_closer():
    warned = []
    watch = MemoryWatch(every=1, window=5, min_samples=3, limit_bytes=8 * GIB, warn_fn=warned.append)
    for step in range(0, 80):
        watch.observe(step, leak(step), total_steps=1000)
    # first at step 2 (107 steps left), then at <= 53 left (step 56), then at <= 26 (step 83: not reached)
    assert [w.split("about step ")[1].split(",")[0] for w in warned] == ["109", "109"]
    assert "107 steps from now" in warned[0] and "53 steps from now" in warned[1]


def test_no_warning_when_the_run_ends_first_or_usage_is_flat():
    warned = []
    short = MemoryWatch(every=1, window=8, min_samples=4, limit_bytes=8 * GIB, warn_fn=warned.append)
    for step in range(30):
        short.observe(step, leak(step), total_steps=100)  # runs out at ~109: after the end
    assert short.projection is not None and short.projection.run_out_step > 100 and warned == []
    flat = MemoryWatch(every=1, window=8, min_samples=4, limit_bytes=GIB, warn_fn=warned.append)
    for step in range(50):
        jitter = (2 * step % 5) * MIB  # temporaries come and go; nothing grows
        flat.observe(step, stats(900 * MIB + jitter, 1000 * MIB))
    assert flat.projection is None and warned == []


def test_without_an_end_the_horizon_decides():
    warned = []
    watch = MemoryWatch(every=1, window=8, min_samples=4, limit_bytes=8 * GIB, horizon=50, warn_fn=warned.append)
    for step in range(60):
        watch.observe(step, leak(step))
    assert len(warned) == 1 and "about step 109, 50 steps from now." in warned[0]


def test_a_failure_is_logged_once_and_training_goes_on(caplog):
    calls = []

    def broken(text):
        calls.append(text)
        raise RuntimeError("the sink is down")

    watch = MemoryWatch(every=1, window=4, min_samples=2, limit_bytes=GIB, warn_fn=broken)
    with caplog.at_level(logging.DEBUG, logger="memsight"):
        for step in range(6):
            assert watch.observe(step, leak(step, base=0, per_step=100 * MIB)) is None
        watch.observe(6, {"allocated_bytes": "garbage"})
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "MemoryWatch could not sample the allocator at step 1" in errors[0].getMessage()
    assert "the sink is down" in caplog.text and len(calls) >= 2


def test_the_limit_is_the_memory_fraction_or_what_is_free(monkeypatch):
    cuda = SimpleNamespace(mem_get_info=lambda device=None: (30 * GIB, 80 * GIB),
                           get_per_process_memory_fraction=lambda device=None: 0.25)
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    assert device_limit(reserved=2 * GIB) == 20 * GIB
    cuda.get_per_process_memory_fraction = lambda device=None: 1.0
    assert device_limit(reserved=2 * GIB) == 32 * GIB  # other processes hold the rest
    del cuda.get_per_process_memory_fraction  # older torch: no fraction getter
    assert device_limit(reserved=60 * GIB) == 80 * GIB


def test_arguments_are_checked():
    for bad in (dict(every=0), dict(window=1), dict(min_samples=30)):
        with pytest.raises(ValueError, match="MemoryWatch needs"):
            MemoryWatch(**bad)


def test_memory_monitor_feeds_its_watch_the_counters_it_read(fake_torch, monkeypatch):
    step = {"n": 0}
    monkeypatch.setattr(sys.modules["torch"].cuda, "memory_stats_as_nested_dict",
                        lambda device=None: leak(step["n"]))
    warned = []
    mon = MemoryMonitor(watch=MemoryWatch(every=1, window=6, min_samples=3, limit_bytes=8 * GIB,
                                          warn_fn=warned.append))
    with Callbacks(mon, state=TrainState(run_name="r", max_batches=200)) as runner:
        for _ in range(10):
            runner.batch_start()
            step["n"] += 1
            runner.batch_end()
    assert mon.history[-1][1]["memory/current_allocated_mem"] == round((GIB + 10 * 64 * MIB) / 1e9, 4)
    assert mon.watch is not None and mon.watch.samples[-1].step == 10
    assert len(warned) == 1 and "(the run ends at step 200)" in warned[0]
    assert MemoryMonitor(watch=False).watch is None


def test_a_watch_on_its_own_in_a_plain_loop(fake_torch, monkeypatch):
    step = {"n": 0}
    monkeypatch.setattr(sys.modules["torch"].cuda, "memory_stats_as_nested_dict",
                        lambda device=None: leak(step["n"]))
    warned = []
    watch = MemoryWatch(every=2, window=4, min_samples=3, limit_bytes=4 * GIB, warn_fn=warned.append,
                        total_steps=100)
    watch.fit_start()
    for _ in range(8):
        watch.batch_start()
        step["n"] += 1
        watch.batch_end()
    assert [s.step for s in watch.samples] == [2, 4, 6, 8] and len(warned) == 1


def test_the_trainer_callback_watches_up_to_max_steps(fake_torch, monkeypatch, tmp_path):
    import memsight.torch.hf as hf

    class Base:
        pass

    step = {"n": 0}
    monkeypatch.setattr(sys.modules["torch"].cuda, "memory_stats_as_nested_dict",
                        lambda device=None: leak(step["n"]))
    warned = []
    cb = hf.callback_class(Base)(oom=False, metrics=False, kinds=False,
                                 watch=MemoryWatch(every=1, window=6, min_samples=3, limit_bytes=8 * GIB,
                                                   warn_fn=warned.append))
    args, state = SimpleNamespace(output_dir=str(tmp_path)), SimpleNamespace(global_step=0, max_steps=500)
    cb.on_train_begin(args, state, None)
    for _ in range(6):
        cb.on_step_begin(args, state, None)
        state.global_step = step["n"] = state.global_step + 1
        cb.on_step_end(args, state, None)
    assert [s.step for s in cb.watch.samples] == [1, 2, 3, 4, 5, 6]
    assert len(warned) == 1 and "(the run ends at step 500)" in warned[0]


def test_lightning_adapters_tell_the_watch_where_the_fit_ends(monkeypatch):
    import types

    pl = types.ModuleType("lightning.pytorch")
    pl.Callback = object
    package = types.ModuleType("lightning")
    package.pytorch = pl
    monkeypatch.setitem(sys.modules, "lightning", package)
    monkeypatch.setitem(sys.modules, "lightning.pytorch", pl)
    saved = sys.modules.pop("memsight.torch.lightning", None)
    try:
        check_lightning_adapters(importlib.import_module("memsight.torch.lightning"))
    finally:  # the module built on the stand-in goes
        sys.modules.pop("memsight.torch.lightning", None)
        if saved is not None:
            sys.modules["memsight.torch.lightning"] = saved


def check_lightning_adapters(lightning):
    def trainer(**kw):
        return SimpleNamespace(**{"max_steps": -1, "max_epochs": None, "num_training_batches": float("inf"),
                                  "accumulate_grad_batches": 1, "optimizers": [], **kw})

    assert lightning._max_batches(trainer(max_steps=300, accumulate_grad_batches=4)) == 1200
    assert lightning._max_batches(trainer(max_epochs=3, num_training_batches=50)) == 150
    assert lightning._max_batches(trainer()) is None
    cb = lightning.MemoryMonitorCallback(log_to_lightning=False)
    cb.on_train_start(trainer(max_steps=10), SimpleNamespace())
    assert cb.state.max_batches == 10 and isinstance(cb.callback.watch, MemoryWatch)

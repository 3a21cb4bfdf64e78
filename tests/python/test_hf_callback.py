"""MemsightCallback for transformers' Trainer, driven on CPU by stand-ins for
TrainerCallback, TrainerState, TrainingArguments and the Trainer's callback
handler (tests/gpu/test_hf_gpu.py runs a real Trainer)."""

from __future__ import annotations

import logging
import os
import sys
from types import SimpleNamespace

import pytest

import memsight.torch.hf as hf


class StandInCallback:
    """transformers' TrainerCallback: every event a no-op."""

    def on_train_begin(self, args, state, control, **kwargs): pass
    def on_step_begin(self, args, state, control, **kwargs): pass
    def on_step_end(self, args, state, control, **kwargs): pass
    def on_log(self, args, state, control, logs=None, **kwargs): pass
    def on_epoch_end(self, args, state, control, **kwargs): pass
    def on_train_end(self, args, state, control, **kwargs): pass


class Integration(StandInCallback):
    """A report_to integration: it reads the logs it is given."""

    def __init__(self):
        self.seen = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.seen.append(dict(logs))


class Handler:
    """The Trainer's CallbackHandler: integrations first, the user's after."""

    def __init__(self, callbacks):
        self.callbacks = list(callbacks)

    def call_event(self, event, args, state, control, **kwargs):
        for callback in self.callbacks:
            getattr(callback, event)(args, state, control, **kwargs)


def train(handler, args, steps=4, log_every=2, model=None, optimizer=None, fail_at=None):
    """The Trainer's order of events, with its log: the history's copy is made before on_log."""
    state = SimpleNamespace(global_step=0, log_history=[], epoch=0.0)
    handler.call_event("on_train_begin", args, state, None, model=model, optimizer=optimizer)
    for _ in range(steps):
        handler.call_event("on_step_begin", args, state, None)
        if fail_at == state.global_step:
            raise RuntimeError("CUDA out of memory (the job's own)")
        state.global_step += 1
        handler.call_event("on_step_end", args, state, None)
        if state.global_step % log_every == 0:
            logs = {"loss": 1.0 / state.global_step, "learning_rate": 1e-3}
            state.log_history.append({**logs, "step": state.global_step})
            handler.call_event("on_log", args, state, None, logs=logs)
    handler.call_event("on_epoch_end", args, state, None)
    handler.call_event("on_train_end", args, state, None)
    return state


MemsightCallback = hf.callback_class(StandInCallback)


@pytest.fixture
def args(tmp_path):
    return SimpleNamespace(output_dir=str(tmp_path / "out"))


def test_without_transformers_the_import_error_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    monkeypatch.delitem(vars(hf), "MemsightCallback", raising=False)
    with pytest.raises(ImportError, match="needs Hugging Face transformers"):
        from memsight.torch.hf import MemsightCallback  # noqa: F401


def test_metrics_reach_the_integrations_and_the_history(fake_torch, args, monkeypatch):
    monkeypatch.setattr(hf, "kind_report", lambda model, opt, allocated: {
        "parameter_mem": 0.5, "other_mem": allocated / 1e9 - 0.5})
    written = []
    tb = SimpleNamespace(add_scalar=lambda *a: written.append(a))
    cb = MemsightCallback(run_name="r", tensorboard=tb)
    integration = Integration()
    handler = Handler([integration, cb])
    state = train(handler, args, model=object())
    assert handler.callbacks[0] is cb  # moved before the integrations
    assert integration.seen[0]["memory/current_allocated_mem"] == 1.2346
    assert integration.seen[0]["memory/parameter_mem"] == 0.5
    assert integration.seen[0]["loss"] == 0.5
    entry = state.log_history[0]
    assert entry["step"] == 2 and entry["memory/peak_reserved_mem"] == 4.0 and entry["memory/alloc_retries"] == 2
    assert ("memory/current_allocated_mem", 1.2346, 4) in written


def test_oom_observer_is_armed_and_writes_its_files(fake_torch, args):
    cb = MemsightCallback(run_name="r")
    state = SimpleNamespace(global_step=0, log_history=[])
    Handler([cb]).call_event("on_train_begin", args, state, None, model=None, optimizer=None)
    assert cb.oom.armed and cb.folder_name == os.path.join(args.output_dir, "memsight", "r")
    fake_torch.oom()
    names = sorted(os.path.basename(p) for p in cb.oom.last_files)
    assert "rank0_oom_snapshot.pickle" in names and "rank0_oom_trace_plot.html" in names
    cb.close()
    assert not cb.oom.armed


def test_the_jobs_exception_reaches_the_caller(fake_torch, args):
    cb = MemsightCallback(run_name="r")
    with pytest.raises(RuntimeError, match="the job's own"):
        train(Handler([cb]), args, fail_at=1)


def test_snapshots_on_a_schedule(fake_torch, args):
    cb = MemsightCallback(run_name="r", snapshot_every=2, snapshot_steps=[3], oom=False)
    train(Handler([cb]), args, steps=4, log_every=100)
    assert [os.path.basename(p) for p in cb.snapshots] == [
        "rank0_step2.pickle", "rank0_step3.pickle", "rank0_step4.pickle"]
    assert all(os.path.getsize(p) > 0 for p in cb.snapshots)
    assert not cb._recording.active  # stopped at on_train_end


def test_a_failure_inside_is_logged_not_raised(fake_torch, args, caplog, monkeypatch):
    def broken(device=None):
        raise RuntimeError("counters unreadable")

    monkeypatch.setattr(fake_torch_module(), "memory_stats_as_nested_dict", broken)
    cb = MemsightCallback(run_name="r", kinds=False)
    with caplog.at_level(logging.ERROR, logger="memsight"):
        state = train(Handler([cb]), args)
    assert "MemsightCallback.on_log failed" in caplog.text and "counters unreadable" in caplog.text
    assert "memory/current_allocated_mem" not in state.log_history[0]


def test_without_cuda_it_says_so_and_adds_nothing(fake_torch, args, caplog, monkeypatch):
    monkeypatch.setattr(fake_torch_module(), "is_available", lambda: False)
    cb = MemsightCallback(run_name="r")
    with caplog.at_level(logging.WARNING, logger="memsight"), pytest.warns(UserWarning, match="CUDA"):
        state = train(Handler([cb]), args)
    assert "adds no memory metrics" in caplog.text
    assert state.log_history[0] == {"loss": 0.5, "learning_rate": 1e-3, "step": 2}


def test_a_bad_schedule_is_refused():
    with pytest.raises(ValueError, match="snapshot_every"):
        MemsightCallback(snapshot_every=0)


def test_kinds_from_a_real_model_and_optimizer():
    torch = pytest.importorskip("torch")
    from memsight.torch.callbacks.kind_metrics import kind_report

    model = torch.nn.Linear(1000, 1000)  # 4,004,000 bytes of parameters
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 1000)).sum().backward()
    opt.step()
    r = kind_report(model, opt, allocated=20_000_000, device_type="cpu")
    assert r["parameter_mem"] == 0.004004 and r["gradient_mem"] == 0.004004
    assert r["optimizer_state_mem"] >= 0.008008 and r["buffer_mem"] == 0
    assert r["other_mem"] == pytest.approx(0.02 - 0.004004 * 2 - r["optimizer_state_mem"], abs=1e-4)


def test_a_real_trainer_callback_subclass():
    pytest.importorskip("transformers")
    from transformers import TrainerCallback

    from memsight.torch.hf import MemsightCallback as Real

    assert isinstance(Real(), TrainerCallback)


def fake_torch_module():
    return sys.modules["torch"].cuda

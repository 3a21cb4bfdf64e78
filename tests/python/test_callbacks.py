"""The callback protocol: state handling, error isolation, idempotent close."""

from __future__ import annotations

import logging

import pytest

from memsight.torch import Callback, CallbackProtocol, Callbacks, MemoryMonitor, MemorySnapshot, OOMObserver, TrainState


class Tracer(Callback):
    def __init__(self, fail_in: str = "") -> None:
        super().__init__()
        self.events: list[tuple[str, int, int]] = []
        self.fail_in = fail_in

    def _log(self, name, st):
        self.events.append((name, st.epoch, st.batch))
        if name == self.fail_in:
            raise RuntimeError(f"boom in {name}")

    def _on_fit_start(self, st): self._log("fit_start", st)
    def _on_batch_start(self, st): self._log("batch_start", st)
    def _on_batch_end(self, st): self._log("batch_end", st)
    def _on_epoch_end(self, st): self._log("epoch_end", st)
    def _on_fit_end(self, st): self._log("fit_end", st)
    def _on_close(self): self.events.append(("close", -1, -1))


def test_classes_implement_the_protocol():
    for cls in (OOMObserver, MemorySnapshot, MemoryMonitor, Tracer):
        assert isinstance(cls(), CallbackProtocol)


def test_runner_advances_one_shared_state_before_the_hooks():
    a, b = Tracer(), Tracer()
    runner = Callbacks(a, [b], run_name="shared")
    with runner:
        for _ in range(2):
            for _ in range(2):
                runner.batch_start()
                runner.batch_end(samples=3)
            runner.epoch_end()
    expected = [("fit_start", 0, 0),
                ("batch_start", 0, 0), ("batch_end", 0, 1), ("batch_start", 0, 1), ("batch_end", 0, 2),
                ("epoch_end", 1, 2),
                ("batch_start", 1, 2), ("batch_end", 1, 3), ("batch_start", 1, 3), ("batch_end", 1, 4),
                ("epoch_end", 2, 4), ("fit_end", 2, 4), ("close", -1, -1)]
    assert a.events == expected and b.events == expected
    assert runner.state.sample == 12 and runner.state.run_name == "shared"


def test_callback_without_a_state_keeps_its_own():
    t = Tracer()
    t.fit_start()
    t.batch_start(); t.batch_end()
    t.batch_start(); t.batch_end()
    t.epoch_end()
    assert t.events[-1] == ("epoch_end", 1, 2)
    assert t._own_state is not None and t._own_state.run_name


def test_given_state_is_read_not_advanced():
    st = TrainState(run_name="r")
    t = Tracer()
    t.batch_end(st)
    t.epoch_end(st)
    assert (st.batch, st.epoch) == (0, 0)


def test_hook_failures_are_logged_not_raised(caplog):
    t = Tracer(fail_in="batch_end")
    with caplog.at_level(logging.ERROR, logger="memsight"):
        t.fit_start()
        t.batch_start()
        t.batch_end()  # raises inside: must not escape
        t.batch_start()
    assert [e[0] for e in t.events] == ["fit_start", "batch_start", "batch_end", "batch_start"]
    assert "Tracer.batch_end failed" in caplog.text and "boom in batch_end" in caplog.text


def test_set_up_errors_do_raise():
    t = Tracer(fail_in="fit_start")
    with pytest.raises(RuntimeError, match="boom in fit_start"):
        t.fit_start()


def test_close_is_idempotent_and_exception_skips_fit_end():
    t = Tracer()
    runner = Callbacks(t)
    with pytest.raises(KeyError):
        with runner:
            runner.batch_start()
            raise KeyError("training died")
    assert [e[0] for e in t.events] == ["fit_start", "batch_start", "close"]
    t.close()
    t.close()
    assert [e[0] for e in t.events].count("close") == 1

"""The GPU-memory gate on a GPU: pytester runs passing and failing tests
(peak, reserved, a leak) and the --gpu-memory-peak option."""

from __future__ import annotations

import os
from importlib import metadata

pytest_plugins = ["pytester"]

TESTS = '''
import pytest
import torch
import memsight.torch as mt

@pytest.mark.gpu_memory(peak="256 MiB")
def test_small():
    x = torch.empty(16 << 20, dtype=torch.uint8, device="cuda")
    del x

@pytest.mark.gpu_memory(peak="64 MiB", leak=True)
def test_too_big():
    x = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    del x

kept = []

@pytest.mark.gpu_memory(peak="1 GiB")
def test_leaks():
    for step in range(12):
        mt.mark_step()
        kept.append(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))  # the leaking line
        tmp = torch.empty(4 << 20, dtype=torch.uint8, device="cuda")
        del tmp

def test_plain():
    x = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
    del x
'''


def _plugin_args() -> list[str]:
    """-p for the plugin unless it is installed (its entry point loads it then)."""
    try:
        installed = any(ep.value == "memsight.pytest_plugin" for ep in metadata.entry_points(group="pytest11"))
    except TypeError:  # Python 3.9's entry_points() takes no group
        installed = any(ep.value == "memsight.pytest_plugin"
                        for ep in metadata.entry_points().get("pytest11", []))  # type: ignore[attr-defined]
    return [] if installed else ["-p", "memsight.pytest_plugin"]


def _run(pytester, monkeypatch, *args):
    import memsight

    pytester.makepyfile(test_budgets=TESTS)
    pythonpath = os.path.dirname(os.path.dirname(memsight.__file__))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([pythonpath, os.environ.get("PYTHONPATH", "")]))
    return pytester.runpytest_subprocess(*_plugin_args(), "--gpu-memory-dir", str(pytester.path / "snaps"), *args)


def test_passing_and_failing_tests(pytester, monkeypatch):
    r = _run(pytester, monkeypatch)
    r.assert_outcomes(passed=2, failed=2)
    out = r.stdout.str()
    assert "peak allocated CUDA memory 128.0MiB is over the budget of 64.0MiB" in out
    assert "By kind at the peak: " in out and "test_budgets.py:" in out  # the site of the peak
    assert "memory grows from iteration to iteration (none allowed)" in out
    assert "/iteration" in out and "test_budgets.py:" in out  # the growth and its line
    assert "PluggyTeardownRaisedWarning" not in out
    snaps = sorted(os.listdir(pytester.path / "snaps"))
    assert snaps == ["test_budgets.py_test_leaks.pickle", "test_budgets.py_test_too_big.pickle"]


def test_the_option_gates_every_test(pytester, monkeypatch):
    r = _run(pytester, monkeypatch, "--gpu-memory-peak=100M", "-k", "plain or small")
    r.assert_outcomes(passed=1, failed=1)
    assert "test_plain" in r.stdout.str() and "over the budget of 100.0MiB" in r.stdout.str()

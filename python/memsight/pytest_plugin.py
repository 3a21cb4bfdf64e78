"""A GPU-memory gate for tests (pytest plugin, entry point ``pytest11``).

::

    @pytest.mark.gpu_memory(peak="2 GiB", leak=False, reserved=None)
    def test_train_step(model, batch): ...

    pytest --gpu-memory-peak="20 GiB"        # every test: a mark's own peak wins

A marked test (or, with ``--gpu-memory-peak``, every test) runs while
memsight records the CUDA allocator. It fails when its peak of allocated
memory (torch's ``max_memory_allocated``, the most of any device, memory
live when it started included) is over ``peak``, its peak of reserved memory
over ``reserved`` (the cache is emptied before such a test), or, with
``leak=False``, when ``memsight leaks`` finds memory growing from iteration
to iteration (``leak="64 MiB"``: growing by more than that per iteration;
``leak=True``: not checked; unmarked tests are not checked). The failure
shows the summary of the peak (its sites, its kinds) and, for a leak, the
growth per iteration and its line, and leaves the snapshot in
``--gpu-memory-dir`` (default ``.memsight/pytest`` under the rootdir).
Without CUDA the gated tests are skipped with the reason.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import pytest

from ._sizes import parse_size

MARK = "gpu_memory"


@dataclass(frozen=True)
class Budget:
    peak: int | None = None
    reserved: int | None = None
    leak: bool | int = True  # True: not checked; False: none allowed; bytes: allowed per iteration


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("memsight", "GPU-memory gate (memsight)")
    group.addoption("--gpu-memory-peak", metavar="SIZE", default=None,
                    help="fail every test whose peak of allocated CUDA memory is over SIZE ('20 GiB', '512M'); "
                         "a gpu_memory mark's own peak wins")
    group.addoption("--gpu-memory-dir", metavar="DIR", default=None,
                    help="where the snapshots of tests over budget go (default .memsight/pytest in the rootdir)")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", f"{MARK}(peak=None, leak=False, reserved=None): fail the test when its CUDA memory "
        "goes over peak (allocated) or reserved, or grows from iteration to iteration (memsight)")
    text = config.getoption("--gpu-memory-peak")
    try:
        peak = None if text is None else parse_size(text, "--gpu-memory-peak")
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    folder = config.getoption("--gpu-memory-dir") or os.path.join(str(config.rootpath), ".memsight", "pytest")
    config.pluginmanager.register(Gate(peak, folder), "memsight-gpu-memory-gate")


def budget_of(item: Any, default_peak: int | None) -> Budget | None:
    """The item's budget: its mark's, else ``--gpu-memory-peak``'s; None for none.
    ValueError for a mark with arguments it does not take."""
    mark = item.get_closest_marker(MARK)
    if mark is None:
        return None if default_peak is None else Budget(peak=default_peak)
    kwargs = dict(mark.kwargs)
    if len(mark.args) > 1 or (mark.args and "peak" in kwargs):
        raise ValueError(f"{MARK}: takes one positional argument (peak), got {mark.args!r}")
    if mark.args:
        kwargs["peak"] = mark.args[0]
    unknown = sorted(set(kwargs) - {"peak", "leak", "reserved"})
    if unknown:
        raise ValueError(f"{MARK}: unknown argument(s) {', '.join(unknown)}: it takes peak, leak and reserved")
    peak = kwargs.get("peak", default_peak)
    reserved = kwargs.get("reserved")
    leak = kwargs.get("leak", False)
    if not isinstance(leak, bool):
        leak = parse_size(leak, f"{MARK}(leak=...)")
    return Budget(peak=None if peak is None else parse_size(peak, f"{MARK}(peak=...)"),
                  reserved=None if reserved is None else parse_size(reserved, f"{MARK}(reserved=...)"),
                  leak=leak)


class Gate:
    """The plugin's state: the default peak, the snapshot folder, what was written."""

    def __init__(self, default_peak: int | None, folder: str) -> None:
        self.default_peak = default_peak
        self.folder = folder
        self.written: list[str] = []
        self.budgets: dict[str, Budget | None] = {}
        self.problems: dict[str, str] = {}  # nodeid -> why it failed its budget

    def pytest_runtest_setup(self, item: Any) -> None:
        try:
            budget = budget_of(item, self.default_peak)
        except ValueError as e:
            pytest.fail(str(e), pytrace=False)
        self.budgets[item.nodeid] = budget
        if budget is None:
            return
        from .torch._util.cuda import cuda_available

        if not cuda_available():
            pytest.skip(f"{MARK}: CUDA is not available, so the test's GPU memory cannot be measured")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: Any) -> Any:
        budget = self.budgets.get(item.nodeid)
        if budget is None:
            yield
            return
        from .torch._util.cuda import torch_module
        from .torch.capture.recording import Recording

        torch = torch_module()
        # The allocator has no per-device state (and refuses to reset a peak)
        # until CUDA has started: the first gated test of a run may be first.
        torch.cuda.init()
        if budget.reserved is not None:
            torch.cuda.empty_cache()
        devices = range(torch.cuda.device_count())
        for d in devices:
            torch.cuda.reset_peak_memory_stats(d)
        recording = Recording(100_000, "all", "python", owner="pytest gpu_memory").start()
        problems = ""
        try:
            outcome = yield
            if outcome.excinfo is None:
                problems = self._check(torch, devices, budget, item)
        finally:
            recording.stop()
        if outcome.excinfo is None and problems:
            self.problems[item.nodeid] = problems

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Any:
        """A test over its budget fails in its own report: raising from the
        call's wrapper would be reported as the plugin's error instead."""
        outcome = yield
        report = outcome.get_result()
        problems = self.problems.pop(item.nodeid, "") if call.when == "call" else ""
        if problems and report.passed:
            report.outcome = "failed"
            report.longrepr = problems

    def _check(self, torch: Any, devices: range, budget: Budget, item: Any) -> str:
        """'' when the test kept its budget; else the failure's text (the snapshot written)."""
        from ._engine import core
        from .snapshot import from_dict
        from .torch.capture.recording import dump, snapshot

        size = core().format_bytes
        problems = []
        peak = max((int(torch.cuda.max_memory_allocated(d)) for d in devices), default=0)
        reserved = max((int(torch.cuda.max_memory_reserved(d)) for d in devices), default=0)
        if budget.peak is not None and peak > budget.peak:
            problems.append(f"peak allocated CUDA memory {size(peak)} is over the budget of {size(budget.peak)}")
        if budget.reserved is not None and reserved > budget.reserved:
            problems.append(f"peak reserved CUDA memory {size(reserved)} is over the budget of "
                            f"{size(budget.reserved)}")
        if not problems and budget.leak is True:
            return ""
        data = snapshot()
        snap = from_dict(data)
        if budget.leak is not True:
            leaks = snap.leaks()
            grown = [d for d in leaks["devices"] if d.get("verdict") == "leak"
                     and (budget.leak is False or d.get("bytes_per_iteration", 0) > budget.leak)]
            if grown:
                allowed = "none allowed" if budget.leak is False else f"{size(budget.leak)} allowed"
                problems.append(f"memory grows from iteration to iteration ({allowed}):\n{leaks.text}")
        if not problems:
            return ""
        path = os.path.join(self.folder, re.sub(r"[^\w.-]+", "_", item.nodeid).strip("_") + ".pickle")
        os.makedirs(self.folder, exist_ok=True)
        dump(path, data)
        self.written.append(path)
        return ("\n".join(problems) + "\n\n" + _kinds_line(snap, size) + snap.summary_text()
                + f"\nsnapshot: {path} (memsight view {path})")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.written:
            terminalreporter.section("memsight: snapshots of tests over their GPU-memory budget")
            for path in self.written:
                terminalreporter.write_line(path)


def _kinds_line(snap: Any, size: Any) -> str:
    """What kind of memory was live at the peak, largest first."""
    try:
        by = snap.categories("peak")["by_category"]
        parts = sorted(((v["bytes"], k) for k, v in by.items() if v["bytes"] > 0), reverse=True)
        return "By kind at the peak: " + ", ".join(f"{k.replace('_', ' ')} {size(n)}" for n, k in parts) + "\n\n"
    except Exception:
        return ""

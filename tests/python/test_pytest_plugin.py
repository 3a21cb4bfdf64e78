"""The pytest plugin (memsight.pytest_plugin) under pytest's own pytester:
registration, option parsing, skipping without CUDA, and the gate itself over
a stand-in CUDA (tests/gpu/test_pytest_plugin_gpu.py runs it on a GPU)."""

from __future__ import annotations

import os
import textwrap

import pytest

from memsight_testlib import DATA, PYTHON_DIR

pytest_plugins = ["pytester"]
PLUGIN = ["-p", "memsight.pytest_plugin"]


def test_the_mark_and_the_options_are_registered(pytester):
    assert "gpu_memory(peak=None, leak=False, reserved=None)" in pytester.runpytest(*PLUGIN, "--markers").stdout.str()
    help_text = pytester.runpytest(*PLUGIN, "--help").stdout.str()
    assert "--gpu-memory-peak=SIZE" in help_text and "--gpu-memory-dir=DIR" in help_text


def test_a_bad_size_is_a_usage_error(pytester, core):
    pytester.makepyfile("def test_a(): pass")
    r = pytester.runpytest(*PLUGIN, "--gpu-memory-peak=2 gigs")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "--gpu-memory-peak: '2 gigs' is not a size" in r.stderr.str()


def test_without_cuda_gated_tests_skip_with_the_reason(pytester, no_torch, core):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.gpu_memory(peak="2 GiB")
        def test_marked(): pass

        def test_plain(): pass
    """)
    r = pytester.runpytest(*PLUGIN, "-rs")
    r.assert_outcomes(passed=1, skipped=1)
    assert "gpu_memory: CUDA is not available" in r.stdout.str()
    r = pytester.runpytest(*PLUGIN, "-rs", "--gpu-memory-peak=1G")
    r.assert_outcomes(skipped=2)


def test_a_mark_with_unknown_arguments_errors(pytester, no_torch, core):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.gpu_memory(peek="2 GiB")
        def test_typo(): pass
    """)
    r = pytester.runpytest(*PLUGIN)
    r.assert_outcomes(errors=1)
    assert "gpu_memory: unknown argument(s) peek" in r.stdout.str()


# A stand-in CUDA in the test run: the allocator's history is tests/data/oom.pickle
# (1.6 GiB at its peak), and torch's peak counter says the same.
FAKE_CUDA = f"""
import pickle, sys
sys.path.insert(0, {str(PYTHON_DIR.parent / 'tests' / 'python')!r})
from memsight_testlib import FakeAllocator, make_fake_torch

with open({str(DATA / 'oom.pickle')!r}, "rb") as f:
    alloc = FakeAllocator(pickle.load(f))
torch = make_fake_torch(alloc)
torch.cuda.device_count = lambda: 1
torch.cuda.init = lambda: None
torch.cuda.reset_peak_memory_stats = lambda device=None: None
torch.cuda.empty_cache = lambda: None
torch.cuda.max_memory_allocated = lambda device=None: 1_700_000_000
torch.cuda.max_memory_reserved = lambda device=None: 1_800_000_000
for name, mod in (("torch", torch), ("torch.cuda", torch.cuda), ("torch.cuda.memory", torch.cuda.memory)):
    sys.modules[name] = mod
"""


def test_the_gate_over_a_stand_in_cuda(pytester, monkeypatch, core):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(PYTHON_DIR), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("MEMSIGHT_NATIVE_DUMP", "0")
    pytester.makeconftest(FAKE_CUDA)
    pytester.makepyfile(textwrap.dedent("""
        import pytest

        @pytest.mark.gpu_memory(peak="2 GiB", leak=True)
        def test_within(): pass

        @pytest.mark.gpu_memory("1 GiB", leak=True)
        def test_over(): pass

        @pytest.mark.gpu_memory(peak="2 GiB", reserved="1 GiB", leak=True)
        def test_reserved_over(): pass
    """))
    r = pytester.runpytest_subprocess(*PLUGIN, "--gpu-memory-dir", str(pytester.path / "snaps"))
    r.assert_outcomes(passed=1, failed=2)
    out = r.stdout.str()
    assert "peak allocated CUDA memory 1.6GiB is over the budget of 1.0GiB" in out
    assert "peak reserved CUDA memory 1.7GiB is over the budget of 1.0GiB" in out
    assert "By kind at the peak: " in out and "live at the allocated peak, by allocation site" in out
    snap = pytester.path / "snaps" / "test_the_gate_over_a_stand_in_cuda.py_test_over.pickle"
    assert f"snapshot: {snap}" in out and snap.is_file()
    assert "memsight: snapshots of tests over their GPU-memory budget" in out

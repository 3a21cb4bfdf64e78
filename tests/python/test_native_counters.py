"""The native counter reader on CPU: memsight's real native/counters.cpp built
against a stand-in for torch's c10 header (tests/python/fake_c10), loaded,
checked against a fake torch.cuda.memory_stats(), and driving the line hook.
On the GPU, tests/gpu/test_line_profiler_gpu.py checks it against torch."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("memsight._linehook", reason="memsight._linehook is not built")
if shutil.which("c++") is None:
    pytest.skip("no C++ compiler", allow_module_level=True)

from memsight import MemsightError  # noqa: E402
from memsight import _linehook  # noqa: E402
from memsight.torch.capture import _native_counters as nc  # noqa: E402
from memsight.torch.profilers import line_profiler as lp  # noqa: E402

HERE = Path(__file__).parent
ARRAYS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
          "active_bytes", "inactive_split_bytes", "requested_bytes")
FIELDS = ("current", "peak", "allocated", "freed")


def c10_names() -> list[str]:
    """torch.cuda.memory_stats()'s names in the fake DeviceStats' field order."""
    names = [f"{a}.{pool}.{f}" for a in ARRAYS for pool in ("all", "small_pool", "large_pool") for f in FIELDS]
    names += ["num_alloc_retries", "num_ooms"]
    names += [f"oversize_{w}.{f}" for w in ("allocations", "segments") for f in FIELDS]
    names += ["num_sync_all_streams", "num_device_alloc", "num_device_free", "max_split_size"]
    return names


def fake_stats(device: int, resets: int = 0) -> dict[str, int]:
    """What the fake allocator holds (see fake_c10/CachingDeviceAllocator.h)."""
    return {name: device * 100000 + 10 * k + resets for k, name in enumerate(c10_names())}


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("MEMSIGHT_CACHE_DIR", str(d))
    return d


@pytest.fixture(scope="module")
def fake_torch_root(tmp_path_factory) -> Path:
    """A directory laid out as torch's wheel: include/c10/core/..., lib/libc10.so."""
    root = tmp_path_factory.mktemp("torch")
    (root / "include" / "c10" / "core").mkdir(parents=True)
    shutil.copy(HERE / "fake_c10" / "CachingDeviceAllocator.h", root / "include" / "c10" / "core")
    (root / "lib").mkdir()
    empty = root / "empty.cpp"
    empty.write_text("")
    subprocess.run(["c++", "-shared", "-fPIC", "-o", str(root / "lib" / "libc10.so"), str(empty)], check=True)
    (root / "__init__.py").write_text("")
    return root


def fake_torch(root: Path, stats=fake_stats) -> SimpleNamespace:
    return SimpleNamespace(__file__=str(root / "__init__.py"), __version__="0.0+fake",
                           _C=SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True),
                           cuda=SimpleNamespace(memory_stats=stats))


def test_real_source_reads_every_field_under_torchs_name(fake_torch_root, cache):
    counters = nc.load_torch_counters(fake_torch(fake_torch_root), 1)
    assert sorted(counters.names) == sorted(c10_names())
    assert len(counters.names) == 122
    # Each name reads its own field: the distinct values would show a mix-up.
    assert nc.read(counters, 2) == fake_stats(2)
    assert counters.path.parent == cache and counters.path.suffix == ".so"


def test_a_reader_that_disagrees_with_torch_is_refused(fake_torch_root, cache):
    def off_by_one(device):
        s = fake_stats(device)
        s["active_bytes.all.peak"] += 1
        return s

    with pytest.raises(MemsightError, match="disagrees with torch on active_bytes.all.peak"):
        nc.load_torch_counters(fake_torch(fake_torch_root, off_by_one), 0)

    def extra(device):
        return {**fake_stats(device), "num_new_thing": 0}

    with pytest.raises(MemsightError, match="lacks: num_new_thing"):
        nc.load_torch_counters(fake_torch(fake_torch_root, extra), 0)


def test_torch_without_headers_is_said(tmp_path, cache):
    (tmp_path / "__init__.py").write_text("")
    with pytest.raises(MemsightError, match="C\\+\\+ headers are not installed"):
        nc.load_torch_counters(fake_torch(tmp_path), 0)


def profiled(n):
    a = n + 1
    b = a * 2
    return b


def traced(hook, n):
    """profiled(n) with the hook's C trace function on."""
    hook.add_code(profiled.__code__)
    hook.start_trace()
    try:
        return profiled(n)
    finally:
        hook.stop_trace()


def test_the_hook_reads_natively_and_resets_after_each_line(fake_torch_root, cache):
    counters = nc.load_torch_counters(fake_torch(fake_torch_root), 0)
    before = nc.read(counters, 1)["allocation.all.current"] - 100000  # resets so far (shared library)
    hook = _linehook.Hook(lambda d: pytest.fail("the Python sampler was called"), (), 1)
    hook.use_counters(counters.address)
    assert hook.native
    assert hook.keys() == list(counters.names)
    traced(hook, 3)
    assert hook.error is None
    first = profiled.__code__.co_firstlineno
    rows = {line - first: dict(zip(hook.keys(), vals)) for _, line, _, vals in hook.records()}
    assert sorted(rows) == [0, 1, 2, 3]  # the def line (entry) and the body's three lines
    # Line i was sampled after i resets (one per sample, from the native reset).
    for i, line in enumerate(sorted(rows)):
        assert rows[line] == fake_stats(1, before + i), line


def test_a_failing_read_is_recorded_and_the_code_still_runs(fake_torch_root, cache):
    counters = nc.load_torch_counters(fake_torch(fake_torch_root), 0)
    hook = _linehook.Hook(lambda d: {}, (), 7)  # the fake allocator knows devices 0-3
    hook.use_counters(counters.address)
    assert traced(hook, 1) == 4
    assert "reading the memory counters failed" in hook.error
    assert "invalid device index" in hook.error


def test_use_counters_checks_its_table_and_its_moment(fake_torch_root, cache):
    counters = nc.load_torch_counters(fake_torch(fake_torch_root), 0)
    bad = (ctypes.c_int32 * 8)(2, 5)  # ABI 2
    hook = _linehook.Hook(lambda d: {"x": {"all": {"peak": 1}}}, (), 0)
    with pytest.raises(ValueError, match="ABI 1"):
        hook.use_counters(ctypes.addressof(bad))
    assert not hook.native
    with pytest.raises(TypeError, match="must be an int"):
        _linehook.Hook(lambda d: {}, (), "cuda:0").use_counters(counters.address)
    hook.use_counters(counters.address)
    with pytest.raises(TypeError, match="must be an int"):
        hook.device = "cuda:1"
    hook.use_counters(0)  # back to the Python sampler
    assert not hook.native
    traced(hook, 0)
    assert hook.keys() == ["x.all.peak"]
    with pytest.raises(RuntimeError, match="before the first sample"):
        hook.use_counters(counters.address)


def test_a_failed_build_is_remembered(tmp_path, cache, monkeypatch):
    calls = tmp_path / "calls"
    cxx = tmp_path / "fake-cxx"
    cxx.write_text(f"#!/bin/sh\necho x >> {calls}\necho 'thing.cpp:1: error: no such header' >&2\nexit 1\n")
    cxx.chmod(0o755)
    monkeypatch.setenv("CXX", str(cxx))
    src = tmp_path / "thing.cpp"
    src.write_text("int x;\n")
    for _ in range(2):
        with pytest.raises(MemsightError, match="no such header"):
            nc.build_library("thing", src, [])
    assert calls.read_text().count("x") == 1  # the second call read the .failed file
    (failed,) = cache.glob("thing-*.failed")
    assert "no such header" in failed.read_text()
    assert not list(cache.glob("*.so")) and not list(cache.glob(".*.tmp"))
    # Changed flags are another build.
    with pytest.raises(MemsightError):
        nc.build_library("thing", src, ["-DX"])
    assert calls.read_text().count("x") == 2


def test_a_built_library_is_reused(tmp_path, cache):
    src = tmp_path / "thing.cpp"
    src.write_text('extern "C" __attribute__((visibility("default"))) int forty_two() { return 42; }\n')
    first = nc.build_library("thing", src, [])
    mtime = first.stat().st_mtime_ns
    assert nc.build_library("thing", src, []) == first
    assert first.stat().st_mtime_ns == mtime
    assert ctypes.CDLL(str(first)).forty_two() == 42
    src.write_text(src.read_text() + "// changed\n")
    assert nc.build_library("thing", src, []) != first


def test_off_switch(monkeypatch):
    for off in ("0", "off", "False"):
        monkeypatch.setenv("MEMSIGHT_NATIVE_COUNTERS", off)
        assert not nc.wanted()
    monkeypatch.delenv("MEMSIGHT_NATIVE_COUNTERS")
    assert nc.wanted()


def test_profiler_with_a_custom_sampler_says_so():
    prof = lp.LineProfiler(profiled, sampler=lambda d: {"a": {"all": {"peak": 0}}})
    assert prof.counter_source == "custom sampler"


@pytest.mark.skipif(sys.platform != "linux", reason="the cache path is Linux's")
def test_cache_dir_defaults(monkeypatch):
    monkeypatch.delenv("MEMSIGHT_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/x/cache")
    assert nc.cache_dir() == Path("/x/cache/memsight")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert nc.cache_dir() == Path(os.path.expanduser("~")) / ".cache" / "memsight"

"""The line profiler, MemReporter and Courtesy against the real CUDA allocator."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

MIB = 1 << 20
BACKENDS = ["settrace"] + (["monitoring"] if sys.version_info >= (3, 12) else [])


def two_steps():
    import torch

    a = torch.empty(MIB, device="cuda")  # 4 MiB
    b = torch.empty(2 * MIB, device="cuda")  # 8 MiB
    del a, b
    return 0


def child():
    import torch

    c = torch.empty(4 * MIB, device="cuda")  # 16 MiB
    del c


def parent():
    child()
    return 1


def peaks(prof, func, column="active_bytes.all.peak"):
    (table,) = prof.tables(func, [column])
    first = func.__code__.co_firstlineno
    return {line - first: v[column] for line, _, v in table.rows}


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_per_line_peaks_and_nesting(backend, monkeypatch):
    from memsight.torch import LineProfiler

    monkeypatch.setenv("MEMSIGHT_LINE_BACKEND", backend)
    with LineProfiler(two_steps, parent, child) as prof:
        assert prof.backend == backend
        two_steps()
        parent()
    p = peaks(prof, two_steps)
    # line 3 ran with `a` alive: 4 MiB more than the `import` line; line 4 adds 8 MiB
    assert p[3] - p[1] == 4 * MIB and p[4] - p[1] == 12 * MIB and p[2] is None
    assert prof.hook.error is None
    # the nested call's 16 MiB peak is folded into the caller's line
    assert peaks(prof, parent)[1] >= 16 * MIB and peaks(prof, child)[3] >= 16 * MIB
    text = str(prof.display(two_steps))
    assert text.startswith("## two_steps\n\nactive_bytes reserved_bytes line code")
    print(f"\nline profiler backend {backend} on Python {sys.version.split()[0]}: ok")


def test_native_counters_are_torchs_numbers(tmp_path, monkeypatch):
    import torch

    from memsight.torch import LineProfiler
    from memsight.torch.capture import _native_counters as nc

    monkeypatch.setenv("MEMSIGHT_CACHE_DIR", str(tmp_path / "cache"))
    keep = torch.empty(3 * MIB, device="cuda")  # nonzero counters to compare
    t0 = time.perf_counter()
    prof = LineProfiler(two_steps)
    prof.hook  # builds the reader: the cache is empty
    built_s = time.perf_counter() - t0
    with prof:
        assert prof.counter_source == "c10 DeviceStats (native)", prof.counter_source
        two_steps()
    assert prof.hook.native and prof.hook.error is None
    # Every counter of torch's dict, by name and value; no other names.
    ours = nc.read(prof._native, 0)
    theirs = torch.cuda.memory_stats(0)
    assert set(ours) == set(theirs)
    assert {k: ours[k] for k in theirs} == dict(theirs)
    assert prof.keys() == list(prof._native.names)
    print(f"\nnative counter reader: {prof._native.path.name} built and checked in {built_s:.1f} s, "
          f"{len(ours)} counters equal to torch's")
    # Built once: a second profiler loads the cached library.
    assert len(list((tmp_path / "cache").glob("counters-*.so"))) == 1
    del keep


def test_native_and_dict_counters_give_the_same_tables(tmp_path, monkeypatch):
    from memsight.torch import LineProfiler

    monkeypatch.setenv("MEMSIGHT_CACHE_DIR", str(tmp_path / "cache"))
    columns = ["active_bytes.all.peak", "allocated_bytes.all.allocated", "allocation.all.allocated",
               "requested_bytes.all.peak", "active_bytes.all.freed"]
    tables = {}
    for native in ("1", "0"):
        monkeypatch.setenv("MEMSIGHT_NATIVE_COUNTERS", native)
        with LineProfiler(two_steps, parent, child) as prof:
            two_steps()
            parent()
        assert prof.hook.native == (native == "1")
        tables[native] = {f.__name__: [(line, vals) for line, _, vals in prof.tables(f, columns)[0].rows]
                          for f in (two_steps, parent, child)}
    assert tables["1"] == tables["0"]
    assert tables["1"]["two_steps"][4][1]["allocated_bytes.all.allocated"] == 8 * MIB


def reference_peaks(func, device=None):
    """pytorch_memlab's way, in pure Python: settrace, memory_stats(device) at every line, reset."""
    import torch

    code, out = func.__code__, {}
    prev = [code.co_firstlineno]

    def trace(frame, event, arg):
        if event == "call":
            return trace
        if frame.f_code is code and event in ("line", "return"):
            peak = torch.cuda.memory_stats(device)["active_bytes.all.peak"]
            out[prev[0]] = max(out.get(prev[0], 0), peak)
            torch.cuda.reset_peak_memory_stats(device)
            prev[0] = frame.f_lineno if event == "line" else code.co_firstlineno
        return trace

    torch.cuda.reset_peak_memory_stats(device)
    sys.settrace(trace)
    try:
        func()
    finally:
        sys.settrace(None)
    return {line - code.co_firstlineno: v for line, v in out.items()}


def test_same_numbers_as_the_pure_python_reference():
    import gc

    from memsight.torch import LineProfiler

    # Memory of earlier tests released between the two runs (16.5 KiB, once,
    # on the H100) shifts every peak of one run: blocks in cycles of garbage,
    # or blocks whose frees wait on stream events, which the profiler's
    # enable() releases with empty_cache(). Release both first, and let no
    # collection happen in between.
    import torch

    gc.collect()
    torch.cuda.empty_cache()
    gc.disable()
    try:
        expected = reference_peaks(two_steps)
        with LineProfiler(two_steps) as prof:
            two_steps()
    finally:
        gc.enable()
    got = {k: v for k, v in peaks(prof, two_steps).items() if v is not None}
    assert got == expected


def test_allocations_per_line_with_history():
    import torch

    from memsight.torch import LineProfiler

    torch.cuda.memory._record_memory_history(max_entries=10000)
    with LineProfiler(two_steps) as prof:
        two_steps()
    allocs = prof.allocations()
    first = two_steps.__code__.co_firstlineno
    assert allocs[("two_steps", first + 3)] == [4 * MIB]
    assert allocs[("two_steps", first + 4)] == [8 * MIB]
    out = io.StringIO()
    prof.print_allocations(stream=out)
    assert "8.00M" in out.getvalue()


def _script(body: str, tmp_path: Path) -> subprocess.CompletedProcess:
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=120)


def test_profile_every_and_profile_on_a_module_and_keyboard_interrupt(tmp_path):
    res = _script("""\
        import torch
        from memsight.torch import profile, profile_every

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(1024, 1024)

            @profile
            def forward(self, x):
                h = self.lin(x)
                return h.relu()

        @profile_every(2)
        def step(net):
            x = torch.randn(256, 1024, device="cuda")
            return net(x).sum().item()

        net = Net().cuda()
        for _ in range(4):
            step(net)
        print("STEPS DONE", flush=True)
        raise KeyboardInterrupt
        """, tmp_path)
    assert "KeyboardInterrupt" in res.stderr
    before, after = res.stdout.split("STEPS DONE")
    assert before.count("## step") == 2  # calls 2 and 4
    assert "## Net.forward" in after  # printed at exit, after the interrupt
    assert "x = torch.randn(256, 1024" in before


def test_set_target_gpu_on_two_gpus():
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    from memsight.torch import LineProfiler

    def on_one():
        x = torch.empty(8 * MIB, device="cuda:1")  # 32 MiB on GPU 1
        del x

    with LineProfiler(on_one, target_gpu=0) as prof:
        on_one()
    assert peaks(prof, on_one)[1] < 32 * MIB + peaks(prof, on_one)[0]
    with LineProfiler(on_one, target_gpu=torch.device("cuda:1")) as prof1:
        on_one()
    p = peaks(prof1, on_one)
    assert p[1] - p[0] == 32 * MIB


def test_mem_reporter_on_cuda():
    import torch

    from memsight.torch import MemReporter

    model = torch.nn.Linear(1024, 1024).cuda()
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(8, 1024, device="cuda")).sum().backward()
    opt.step()
    reporter = MemReporter(model)
    reporter.add_optimizer(opt)
    out = io.StringIO()
    reporter.report(device=torch.device("cuda:0"), stream=out)
    text = out.getvalue()
    assert "Storage on cuda:0" in text and "Storage on cpu" not in text
    for name in ("weight", "weight.grad", "Adam.weight.exp_avg", "bias"):
        assert any(ln.split()[:1] == [name] for ln in text.splitlines()), name
    assert "The allocated memory on cuda:0: " in text


def test_courtesy_moves_cuda_tensors_out_and_back():
    import torch

    from memsight.torch import Courtesy

    base = torch.arange(4 * MIB, device="cuda", dtype=torch.float32)  # 16 MiB
    view = base[10:20]
    before = torch.cuda.memory_allocated()
    with Courtesy() as c:
        assert base.device.type == "cpu" and view.device.type == "cpu"
        assert torch.cuda.memory_allocated() <= before - 16 * MIB
        base[10] = -1.0
    assert c.not_moved == [] or all("subclass" in m or "sparse" in m for m in c.not_moved)
    assert base.device.type == "cuda" and view.device.type == "cuda"
    assert view[0].item() == -1.0 and view.data_ptr() == base.data_ptr() + 40
    assert torch.equal(base[20:30].cpu(), torch.arange(20, 30, dtype=torch.float32))


def test_reporter_and_courtesy_make_torch_warn_nothing():
    # torch.distributed.reduce_op warns (FutureWarning) on every attribute
    # read; a census of the garbage collector's objects meets it.
    import gc
    import warnings

    import torch
    import torch.distributed as dist

    from memsight.torch import Courtesy, MemReporter

    assert dist.is_available()
    assert any(type(o).__name__ == "_reduce_op" for o in gc.get_objects()), "the scan must meet it"
    x = torch.ones(MIB, device="cuda")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        MemReporter().report(stream=io.StringIO())
        with Courtesy():
            assert x.device.type == "cpu"
    assert [f"{w.category.__name__}: {w.message}" for w in seen] == []
    assert x.device.type == "cuda"

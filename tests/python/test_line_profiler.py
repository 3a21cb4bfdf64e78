"""memsight.torch.LineProfiler on CPU: the native hook's bookkeeping driven by a
fake allocator's counters, the text and HTML tables, the decorators, and
living next to other tracers."""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import textwrap

import pytest

from memsight_testlib import PYTHON_DIR

pytest.importorskip("memsight._linehook", reason="memsight._linehook is not built")

from memsight.torch.profilers import line_profiler as lp  # noqa: E402
from memsight.torch.profilers._line_format import readable_size  # noqa: E402


class Counters:
    """A caching allocator's counters, as torch._C._cuda_memoryStats returns them."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.allocated = 0
        self.devices: list[int] = []

    def alloc(self, n: int) -> None:
        self.active += n
        self.peak = max(self.peak, self.active)
        if n > 0:
            self.allocated += n

    def sample(self, device: int) -> dict:
        self.devices.append(device)
        return {
            "num_ooms": 0,
            "active_bytes": {"all": {"current": self.active, "peak": self.peak, "allocated": self.allocated}},
            "reserved_bytes": {"all": {"current": 2 << 20, "peak": 2 << 20}},
        }

    def reset(self, device: int) -> None:
        self.peak = self.active
        self.allocated = 0

    def profiler(self, *funcs, **kw) -> lp.LineProfiler:
        return lp.LineProfiler(*funcs, sampler=self.sample, resetters=[self.reset], **kw)


mem = Counters()


def inner():
    mem.alloc(40 << 10)
    mem.alloc(-(40 << 10))


def outer():
    mem.alloc(1 << 10)
    mem.alloc(1 << 20)
    inner()
    return 1


@pytest.fixture(autouse=True)
def _fresh_counters():
    global mem
    mem = Counters()
    yield


def values(prof, func, column="active_bytes.all.peak"):
    (table,) = prof.tables(func, [column])
    return {line - func.__code__.co_firstlineno: v[column] for line, _, v in table.rows}


def test_readable_size_is_binary_with_two_decimals():
    assert [readable_size(n) for n in (0, 1023, 1024, 1536, 4198400, 1 << 30, int(1.5 * (1 << 40)))] == [
        "0.00B", "1023.00B", "1.00K", "1.50K", "4.00M", "1.00G", "1.50T"]
    assert readable_size(-(4 << 20)) == "-4.00M"
    assert readable_size(float("nan")) == ""


def test_each_line_gets_what_happened_while_it_ran_and_nested_calls_fold_into_the_caller():
    with mem.profiler(outer, inner) as prof:
        outer()
    assert values(prof, outer) == {0: 0, 1: 1 << 10, 2: (1 << 20) + (1 << 10), 3: (1 << 20) + (1 << 10) + (40 << 10),
                                   4: (1 << 20) + (1 << 10)}
    assert values(prof, inner) == {0: (1 << 20) + (1 << 10), 1: (1 << 20) + (1 << 10) + (40 << 10),
                                   2: (1 << 20) + (1 << 10) + (40 << 10)}
    # allocated bytes are summed over the nested function's lines
    assert values(prof, outer, "active_bytes.all.allocated")[3] == 40 << 10


def test_the_maximum_over_calls_is_kept():
    def grow(n):
        mem.alloc(n)
        mem.alloc(-n)

    with mem.profiler(grow) as prof:
        grow(1 << 20)
        grow(1 << 10)
    assert values(prof, grow)[1] == 1 << 20


def test_text_is_pytorch_memlabs_layout():
    with mem.profiler(outer, inner) as prof:
        outer()
    out = io.StringIO()
    prof.print_stats(inner, stream=out)
    first = inner.__code__.co_firstlineno
    expected = textwrap.dedent(f"""\
        ## inner

        active_bytes reserved_bytes line code
                 all            all
                peak           peak
               1.00M          2.00M   {first} def inner():
               1.04M          2.00M   {first + 1}     mem.alloc(40 << 10)
               1.04M          2.00M   {first + 2}     mem.alloc(-(40 << 10))
        """)
    got = out.getvalue()
    assert "\n".join(ln.rstrip() for ln in got.split("\n")) == expected
    # like pandas, every row of the table is padded to the same width
    table = got.splitlines()[2:]
    assert len({len(ln) for ln in table}) == 1
    text = str(prof.display())
    assert text.startswith("## outer\n\n") and "\n\n\n## inner\n\n" in text


def test_shared_header_labels_are_shown_once_and_lines_that_never_ran_are_blank():
    def branch(flag):
        if flag:
            mem.alloc(1 << 10)
        return 0

    with mem.profiler(branch) as prof:
        branch(False)
    text = str(prof.display(columns=["active_bytes.all.peak", "active_bytes.all.current"]))
    lines = text.splitlines()
    assert lines[2].split() == ["active_bytes", "line", "code"]
    assert lines[4].split() == ["peak", "current"]
    never_ran = next(ln for ln in lines if "mem.alloc(1 << 10)" in ln)
    assert never_ran.split()[0] == str(branch.__code__.co_firstlineno + 2)


def test_columns_are_validated_like_pytorch_memlab():
    with mem.profiler(outer) as prof:
        outer()
    with pytest.raises(ValueError, match="three dot-separated parts"):
        prof.display(columns=["active_bytes.peak"])
    with pytest.raises(ValueError, match="Options are: .*active_bytes.all.current"):
        prof.display(columns=["active_bytes.all.nope"])


def test_no_data_and_html():
    prof = mem.profiler(outer)
    assert str(prof.display()) == "No data collected\n"
    assert prof.display()._repr_html_() == "<p>No data collected</p>"
    with prof:
        outer()
    page = prof.display()._repr_html_()
    assert '<h3><span style="font-family: monospace">outer</span></h3>' in page
    assert "linear-gradient(90deg, #4878d0" in page and "white-space: pre" in page


def test_leaving_a_profiler_puts_the_previous_tracer_back_and_it_keeps_seeing_lines():
    if lp.backend.choose_backend() != "settrace":
        pytest.skip("sys.monitoring leaves sys.settrace alone altogether")
    seen = []

    def tracer(frame, event, arg):
        if frame.f_code is inner.__code__:
            seen.append(event)
        return tracer

    sys.settrace(tracer)
    try:
        with mem.profiler(inner) as prof:
            inner()
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(None)
    assert seen.count("line") == 2 and prof.tables()


def test_an_inner_profiler_does_not_switch_off_an_outer_one():
    with mem.profiler(outer) as a:
        with mem.profiler(inner) as b:
            inner()
        outer()
    assert a.tables() and b.tables()
    assert values(a, outer)[2] > 0


def test_profilers_left_out_of_order_leave_no_tracer_behind():
    if lp.backend.choose_backend() != "settrace":
        pytest.skip("sys.monitoring leaves sys.settrace alone altogether")

    def tracer(frame, event, arg):
        return None

    sys.settrace(tracer)
    try:
        a = mem.profiler(outer)
        b = mem.profiler(inner)
        a.enable()
        b.enable()
        a.disable()  # not on top: it stops recording and leaves the chain when b does
        outer()
        b.disable()
        assert sys.gettrace() is tracer
        assert not a.tables() and b.tables()
    finally:
        sys.settrace(None)


def test_a_debugger_attached_while_profiling_sees_every_line():
    seen = []

    def debugger(frame, event, arg):
        seen.append((event, frame.f_lineno))
        return debugger

    def stops_here():
        sys.settrace(debugger)  # what breakpoint() does
        sys._getframe().f_trace = debugger
        a = 1
        b = a + 1
        return b

    try:
        with mem.profiler(inner):
            stops_here()
    finally:
        sys.settrace(None)
    first = stops_here.__code__.co_firstlineno
    assert ("line", first + 3) in seen and ("line", first + 4) in seen


def test_only_the_profiled_functions_lines_are_sampled():
    def busy():
        total = 0
        for i in range(2000):
            total += i
        return total

    with mem.profiler(inner) as prof:
        busy()
        inner()
    assert prof.hook.samples == 3
    assert prof.hook.depth == 0


def test_a_failing_sampler_is_logged_and_the_job_goes_on(caplog):
    def bad(device):
        raise RuntimeError("no allocator")

    prof = lp.LineProfiler(outer, sampler=bad)
    with caplog.at_level(logging.WARNING, logger="memsight.torch"), prof:
        assert outer() == 1
    assert "no allocator" in caplog.text


def test_keyboard_interrupt_from_the_sampler_is_not_swallowed():
    def interrupt(device):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), lp.LineProfiler(outer, sampler=interrupt):
        outer()


def test_methods_and_set_target_gpu():
    class Model:
        def forward(self, n):
            mem.alloc(n)
            lp.set_target_gpu(1) if n else None
            return n

    m = Model()
    with mem.profiler(m.forward, target_gpu=0) as prof:
        m.forward(0)
        prof.set_target_gpu(1)
        m.forward(0)
    assert prof.tables(Model.forward) and set(mem.devices) == {0, 1}
    with pytest.raises(ValueError):
        prof.set_target_gpu(-1)
    with pytest.raises(ValueError):
        prof.add_function(len)


def test_allocations_per_line_from_the_allocator_history():
    with mem.profiler(outer) as prof:
        outer()
    code = outer.__code__
    frame = {"filename": code.co_filename, "line": code.co_firstlineno + 2, "name": "outer"}
    snap = {"device_traces": [[
        {"action": "alloc", "size": 1 << 20, "frames": [{"filename": "x.py", "line": 1}, frame]},
        {"action": "free_requested", "size": 1 << 20, "frames": [frame]},
        {"action": "alloc", "size": 512, "frames": [{"filename": "elsewhere.py", "line": 3}]},
    ]]}
    assert prof.allocations(snap) == {("outer", code.co_firstlineno + 2): [1 << 20]}
    out = io.StringIO()
    prof.print_allocations(snap, stream=out)
    assert "## outer" in out.getvalue() and "1.00M" in out.getvalue()


def _run_script(body: str, tmp_path) -> subprocess.CompletedProcess:
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(body))
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)


_GLOBAL_FAKE = """\
    from memsight.torch.profilers import line_profiler as lp
    state = {"n": 0}
    def sample(d):
        return {"active_bytes": {"all": {"peak": state["n"]}}, "reserved_bytes": {"all": {"peak": 0}}}
    lp._global = lp.LineProfiler(sampler=sample)
"""


def test_profile_prints_at_exit_even_after_keyboard_interrupt(tmp_path):
    res = _run_script(_GLOBAL_FAKE + """\
    @lp.profile
    def work():
        state["n"] += 4096
        raise KeyboardInterrupt
    work()
    """, tmp_path)
    assert "KeyboardInterrupt" in res.stderr
    assert "## work" in res.stdout and "4.00K" in res.stdout


def test_profile_every_prints_every_nth_call_and_mixes_with_profile(tmp_path):
    res = _run_script(_GLOBAL_FAKE + """\
    @lp.profile_every(2)
    def step():
        state["n"] += 1024
        return state["n"]
    @lp.profile
    def other():
        state["n"] += 1
    for _ in range(5):
        step()
    other()
    print("done")
    lp.clear_global_line_profiler()
    """, tmp_path)
    assert res.returncode == 0, res.stderr
    before, after = res.stdout.split("done")
    assert before.count("## step") == 2 and "## other" not in before
    assert "4.00K" in before  # the second print shows the fourth call
    assert after.strip() == "No data collected"  # cleared before exit


def test_importing_the_new_modules_does_not_import_torch():
    code = ("import sys; import memsight, memsight._magics, memsight.torch.profilers.line_profiler, "
            "memsight.torch.tensors.mem_reporter, memsight.torch.tensors.courtesy; assert 'torch' not in sys.modules")
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)


def test_decorators_pass_functions_through_when_the_hook_is_not_built(monkeypatch, caplog):
    def missing(*a, **k):
        raise lp.MemsightError("memsight._linehook is not built")

    monkeypatch.setattr(lp, "_global", None)
    monkeypatch.setattr(lp.backend, "load_hook_module", missing)

    def f():
        return 7

    with caplog.at_level(logging.ERROR, logger="memsight.torch"):
        assert lp.profile(f) is f and lp.profile_every(2)(f) is f and f() == 7
    assert "not built" in caplog.text


def test_profile_decorates_an_nn_module_method(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(lp, "_global", mem.profiler())
    monkeypatch.setattr(lp.atexit, "register", lambda *a: None)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        @lp.profile
        def forward(self, x):
            mem.alloc(2048)
            return self.lin(x)

    Net()(torch.ones(1, 4))
    prof = lp._global
    prof.disable()
    text = str(prof.display(Net.forward))
    assert text.startswith("## test_profile_decorates_an_nn_module_method.<locals>.Net.forward\n")
    assert "2.00K" in text

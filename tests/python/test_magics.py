"""%mlrun / %%mlrun: parsing, each flag's effect, and registration with IPython."""

from __future__ import annotations

import pytest

from memsight._magics import MagicUsageError, parse_mlrun, run_mlrun

DEFAULTS = ["active_bytes.all.peak", "reserved_bytes.all.peak"]


def test_parse_keeps_the_statement_verbatim():
    a = parse_mlrun('-f foo -f bar -c active_bytes.all.current -g 1 -q -T "out dir/p.txt" x = foo("a  b") -c z')
    assert a.function == ["foo", "bar"] and a.gpu == 1 and a.quiet and not a.return_profiler
    assert a.dump_profile == "out dir/p.txt"
    assert a.statement == 'x = foo("a  b") -c z'
    assert a.columns == DEFAULTS + ["active_bytes.all.current"]


def test_parse_flags():
    a = parse_mlrun("-D -c active_bytes.all.current -r")
    assert a.columns == ["active_bytes.all.current"] and a.return_profiler and a.statement == ""
    assert parse_mlrun("-- -x").statement == "-x"
    assert parse_mlrun("--gpu=2 f()").gpu == 2


@pytest.mark.parametrize("line, message", [
    ("-D f()", "no columns"),
    ("-g x f()", "invalid int"),
    ("-g -1 f()", ">= 0"),
    ("-Z f()", "unrecognized"),
])
def test_parse_errors_are_one_line(line, message):
    with pytest.raises(MagicUsageError, match=message):
        parse_mlrun(line)


class FakeProfiler:
    made: list[FakeProfiler] = []

    def __init__(self, *funcs, target_gpu=0):
        self.funcs, self.target_gpu, self.active = funcs, target_gpu, False
        self.ran_inside = None
        FakeProfiler.made.append(self)

    def __enter__(self):
        self.active = True
        return self

    def __exit__(self, *exc):
        self.active = False

    def print_stats(self, columns, stream):
        stream.write("columns=" + ",".join(columns))

    def display(self, columns):
        return ("display", tuple(columns))


def run(line, cell=None, ns=None):
    ns = {} if ns is None else ns
    return run_mlrun(line, cell, ns, None, profiler_factory=FakeProfiler), ns


def test_each_flag_is_honoured(tmp_path):
    def f():
        return FakeProfiler.made[-1].active

    ns = {"f": f}
    out, ns = run("-f f -g 3 ok = f()", ns=ns)
    prof = FakeProfiler.made[-1]
    assert prof.funcs == (f,) and prof.target_gpu == 3 and ns["ok"] is True
    assert out == ("display", tuple(DEFAULTS))
    assert run("-q x = 1")[0] is None  # -q: nothing shown
    assert run("-r -q x = 1")[0] is FakeProfiler.made[-1]  # -r returns the profiler
    target = tmp_path / "p.txt"
    run(f"-q -D -c active_bytes.all.current -T {target} x = 1")
    assert target.read_text() == "columns=active_bytes.all.current"  # -T honours -c and -D
    out, ns = run("-c a.b.c", cell="y = 2\nz = y * 3\n")
    assert ns["z"] == 6 and out == ("display", tuple(DEFAULTS + ["a.b.c"]))


def test_unknown_function_and_empty_statement():
    with pytest.raises(MagicUsageError, match="could not find function 'nope'"):
        run("-f nope f()")
    with pytest.raises(MagicUsageError, match="nothing to run"):
        run("-f len")


def test_load_ext_registers_line_and_cell_magics():
    pytest.importorskip("IPython")
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "memsight")
    magics = shell.magics_manager.magics
    assert "mlrun" in magics["line"] and "mlrun" in magics["cell"]
    # Without CUDA the profiler logs that it is off; the statement still runs.
    shell.run_cell("%mlrun -q answer = 6 * 7")
    assert shell.user_ns["answer"] == 42
    shell.run_cell("%%mlrun -q\ncell_answer = answer + 1\n")
    assert shell.user_ns["cell_answer"] == 43
    with pytest.raises(UsageError, match="could not find function"):
        shell.run_line_magic("mlrun", "-f missing answer = 1")

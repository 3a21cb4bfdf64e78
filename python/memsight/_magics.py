"""IPython magics: ``%load_ext memsight`` registers ``%mlrun`` and ``%%mlrun``
(the line profiler, here) and ``%%memsight`` (recording a cell, _record_magic.py).

    %mlrun -f train_step train_step(batch)
    %%mlrun -f forward -c active_bytes.all.allocated -g 1
    loss = forward(batch)

Flags: ``-f FUNC`` (repeatable) functions to profile; ``-c COL`` (repeatable)
extra ``memory_stats()`` columns; ``-D`` drop the default columns; ``-r``
return the LineProfiler; ``-g GPU`` the device index; ``-q`` print nothing;
``-T FILE`` also write the text table (with the same columns) to FILE.
"""

from __future__ import annotations

import argparse
import re
import shlex
from typing import Any

_VALUED = {"-f", "--function", "-c", "--column", "-g", "--gpu", "-T", "--dump-profile"}


class MagicUsageError(ValueError):
    """A bad %mlrun command line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise MagicUsageError(f"%mlrun: {message}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%mlrun", add_help=False)
    p.add_argument("-f", "--function", action="append", default=[], metavar="FUNC")
    p.add_argument("-c", "--column", action="append", default=[], metavar="COL")
    p.add_argument("-D", "--no_default_columns", action="store_true")
    p.add_argument("-r", "--return-profiler", action="store_true")
    p.add_argument("-g", "--gpu", type=int, default=0, metavar="GPU_ID")
    p.add_argument("-q", "--quiet", action="store_true")
    p.add_argument("-T", "--dump-profile", metavar="OUTPUT")
    return p


def _split(line: str) -> tuple[list[str], str]:
    """The option words at the start of the line, and the statement after them, verbatim."""
    words: list[str] = []
    rest = line
    expect_value = False
    while True:
        rest = rest.lstrip()
        m = re.match(r"(\"[^\"]*\"|'[^']*'|\S+)", rest)
        if m is None:
            break
        word = m.group(1)
        if not expect_value and not word.startswith("-"):
            break
        rest = rest[m.end():]
        if not expect_value and word == "--":
            break
        words.append(word)
        expect_value = not expect_value and word in _VALUED
    return words, rest.strip()


def parse_mlrun(line: str) -> argparse.Namespace:
    """The options of a %mlrun line; ``columns`` holds the resulting column list."""
    words, statement = _split(line)
    try:
        words = [w for word in words for w in shlex.split(word)]
    except ValueError as e:
        raise MagicUsageError(f"%mlrun: {e}") from None
    args = _parser().parse_args(words)
    args.statement = statement
    if args.gpu < 0:
        raise MagicUsageError("%mlrun: -g needs a device index >= 0")
    from .torch.profilers.line_profiler import DEFAULT_COLUMNS

    args.columns = ([] if args.no_default_columns else list(DEFAULT_COLUMNS)) + args.column
    if not args.columns:
        raise MagicUsageError("%mlrun: -D leaves no columns; add some with -c")
    return args


def run_mlrun(line: str, cell: str | None, global_ns: dict[str, Any], local_ns: dict[str, Any] | None,
              profiler_factory: Any = None) -> Any:
    """Run a statement or cell under a LineProfiler, as %mlrun does."""
    args = parse_mlrun(line)
    ns = local_ns if local_ns is not None else global_ns
    funcs = []
    for name in args.function:
        try:
            funcs.append(eval(name, global_ns, ns))  # noqa: S307 - names typed by the user
        except Exception as e:  # noqa: BLE001
            raise MagicUsageError(f"%mlrun: could not find function {name!r} ({type(e).__name__}: {e})") from None
    code = cell if cell is not None else args.statement
    if not code.strip():
        raise MagicUsageError("%mlrun: nothing to run; give a statement, or use %%mlrun on a cell")
    if profiler_factory is None:
        from .torch.profilers.line_profiler import LineProfiler as profiler_factory
    prof = profiler_factory(*funcs, target_gpu=args.gpu)
    with prof:
        exec(compile(code, "<mlrun>", "exec"), global_ns, ns)  # noqa: S102
    if args.dump_profile:
        with open(args.dump_profile, "w", encoding="utf-8") as f:
            prof.print_stats(columns=args.columns, stream=f)
    if args.return_profiler:
        return prof
    if args.quiet:
        return None
    return prof.display(columns=args.columns)


def load_ipython_extension(ipython: Any) -> None:
    from IPython.core.error import UsageError
    from IPython.core.magic import Magics, cell_magic, line_cell_magic, magics_class, needs_local_scope
    from IPython.display import HTML, display

    from ._record_magic import run_memsight

    @magics_class
    class MemsightMagics(Magics):
        @line_cell_magic
        @needs_local_scope
        def mlrun(self, line: str = "", cell: str | None = None, local_ns: Any = None) -> Any:
            """Run a statement (or the cell) under memsight's line profiler. See memsight._magics."""
            try:
                return run_mlrun(line, cell, self.shell.user_global_ns, local_ns)
            except MagicUsageError as e:
                raise UsageError(str(e)) from None

        @cell_magic
        @needs_local_scope
        def memsight(self, line: str = "", cell: str = "", local_ns: Any = None) -> Any:
            """Record the CUDA allocator while the cell runs; show the summary and the page.
            See memsight._record_magic."""
            try:
                run_memsight(line, cell, self.shell.user_global_ns, local_ns,
                             show=lambda snap: display(HTML(snap._repr_html_())))
            except MagicUsageError as e:
                raise UsageError(str(e)) from None

    ipython.register_magics(MemsightMagics)

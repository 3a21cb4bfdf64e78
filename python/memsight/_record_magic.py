"""``%%memsight``: record the CUDA allocator while a cell runs, then show the
summary and the page (``%load_ext memsight``).

    %%memsight -o snap
    loss = model(batch).sum(); loss.backward()

Flags: ``-o NAME`` keeps the Snapshot in that variable (default ``_memsight``);
``-n N`` history entries kept (default 100,000); ``-q`` the summary only, no
page. An exception of the cell (an out-of-memory error, say) is raised as
usual, after what was recorded up to it is shown. Without CUDA the cell runs
as usual and the magic says that there was nothing to record.
"""

from __future__ import annotations

import argparse
import logging
import shlex
from collections.abc import Callable
from typing import Any

from ._magics import MagicUsageError

log = logging.getLogger("memsight")

NO_CUDA = ("memsight: CUDA is not available, so %%memsight has no allocator to record; "
           "the cell ran without it")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise MagicUsageError(f"%%memsight: {message}")


def parse(line: str) -> argparse.Namespace:
    p = _Parser(prog="%%memsight", add_help=False)
    p.add_argument("-o", "--output", default="_memsight", metavar="NAME")
    p.add_argument("-n", "--max-entries", type=int, default=100_000, metavar="N")
    p.add_argument("-q", "--quiet", action="store_true")
    try:
        args = p.parse_args(shlex.split(line))
    except ValueError as e:
        raise MagicUsageError(f"%%memsight: {e}") from None
    if not args.output.isidentifier():
        raise MagicUsageError(f"%%memsight: -o needs a variable name, not {args.output!r}")
    if args.max_entries < 1:
        raise MagicUsageError(f"%%memsight: -n needs a positive number of entries, not {args.max_entries}")
    return args


def run_memsight(line: str, cell: str, global_ns: dict[str, Any], local_ns: dict[str, Any] | None,
                 show: Callable[[Any], None], say: Callable[[str], None] = print) -> Any:
    """Runs the cell under a recording and shows what it did; returns the Snapshot."""
    args = parse(line)
    ns = local_ns if local_ns is not None else global_ns
    code = compile(cell, "<memsight cell>", "exec")
    from .torch._util.cuda import cuda_available

    if not cuda_available():
        say(NO_CUDA)
        exec(code, global_ns, ns)  # noqa: S102 - the user's cell
        return None
    from .torch.capture.recording import Recording, snapshot

    snap = None
    with Recording(args.max_entries, "all", "python", owner="%%memsight"):
        try:
            exec(code, global_ns, ns)  # noqa: S102 - the user's cell
        finally:  # shown on the way out of an exception too, which then goes on
            snap = _show(snapshot, args, ns, show, say)
    return snap


def _show(take: Callable[[], Any], args: argparse.Namespace, ns: dict[str, Any],
          show: Callable[[Any], None], say: Callable[[str], None]) -> Any:
    from .snapshot import from_dict

    try:
        snap = from_dict(take())
        ns[args.output] = snap
        say(snap.summary_text())
        if not args.quiet:
            show(snap)
        return snap
    except Exception as e:  # never hide the cell's own outcome behind ours
        log.exception("memsight: %%memsight could not show the recording")
        say(f"memsight: could not show the recording: {type(e).__name__}: {e}")
        return None

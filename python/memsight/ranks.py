"""Many ranks, one picture: ``memsight ranks`` from Python.

    >>> rep = memsight.ranks("run/torch_traces/oom_3_rank*.pickle")
    >>> rep.typical_rank, [o.rank for o in rep.differ]
    >>> print(rep.text)                       # the text report
    >>> rep.ranks[5].peak_allocated.bytes     # every number of every rank
    >>> rep.write_html("ranks.html")          # the page, and the notable ranks' pages beside it

The engine reads the files a few at a time, summarising each and dropping
its snapshot, so memory holds a few snapshots and a summary per rank.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from ._engine import core
from ._frames import _user_code
from ._paths import PathLike
from .snapshot import Summary

__all__ = ["Ranks", "ranks"]


class Ranks(Summary):
    """``memsight ranks --json`` as a dict with attribute access (``ranks``,
    ``median``, ``typical_rank``, ``differ``, ``ooms``, ``mismatches``,
    ``notes``, ``missing``, ...; docs/ranks.md); ``text`` is the text report."""

    def __init__(self, report: Any, user_code: str = "", max_expanded: int = 0) -> None:
        super().__init__(json.loads(report.json()), report.text())
        self._report = report
        self._user_code = user_code
        self._max_expanded = max_expanded

    def rank(self, number: int) -> Summary:
        """The summary of rank ``number``."""
        for r in self["ranks"]:
            if r["rank"] == number:
                return r
        raise KeyError(f"no rank {number} among {len(self['ranks'])} ranks")

    def write_html(self, out: PathLike, pages: str = "notable", jobs: int = 0, *,
                   force: bool = False) -> str:
        """Writes the page to ``out`` (atomically) and, as for ``memsight ranks
        --pages``, the full page of the ``"notable"`` ranks (the OOMed, the
        typical and the differing ones, at most 16), ``"all"`` or ``"none"`` in
        ``<out without .html>.ranks/``. Read-only files are replaced only with
        ``force=True`` (``--force``). Returns ``out``."""
        p = os.fspath(out)
        self._report.write_html(p, pages, self._user_code, int(jobs), int(self._max_expanded),
                                bool(force))
        return p


def ranks(paths: PathLike | Iterable[PathLike], *, user_code: str | list[str] | None = None,
          jobs: int = 0, max_expanded: int = 0, allow_absolute: bool = False) -> Ranks:
    """``memsight ranks``: the snapshots of a job's ranks side by side.

    ``paths``: snapshot files, directories, glob patterns (``"run/oom_3_rank*.pickle"``)
    or a dump round's manifest (``*_manifest.json``), one or a list. ``jobs``:
    files read at once (0: up to 4). A manifest's absolute paths are read
    beside it; ``allow_absolute=True`` reads them where they point
    (``--allow-absolute``). Raises ``memsight.MemsightError`` (a
    ValueError) naming the file that cannot be read.
    """
    if isinstance(paths, (str, os.PathLike)):
        inputs = [os.fspath(paths)]
    else:
        inputs = [os.fspath(p) for p in paths]
    uc = _user_code(user_code)
    return Ranks(core().ranks(inputs, uc, int(jobs), int(max_expanded), bool(allow_absolute)), uc,
                 max_expanded)

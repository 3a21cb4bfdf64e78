"""torch.profiler outputs, read by the engine: a Chrome trace's per-step
memory and time report, and torch's categorised memory timeline as a page.

    >>> rep = memsight.profile_report("rank0.pt.trace.json.gz")
    >>> rep.steps[0].devices["cuda:0"].peak_allocated
    >>> memsight.profile_html("rank0.pt.trace.json.gz", "report.html")
    >>> memsight.profile_timeline_html("memory.json.gz", out="timeline.html")

The trace is read as a stream (never as a whole document), so a trace of
gigabytes takes memory for the events' numbers only.
"""

from __future__ import annotations

import json
import os

from ._engine import core
from ._frames import _user_code
from ._paths import PathLike, _fspath, _write_text
from .snapshot import Summary

__all__ = ["profile_report", "profile_html", "profile_timeline_html"]


def _existing(path: PathLike) -> str:
    p = _fspath(path)
    if p != "-" and not os.path.exists(p):
        raise FileNotFoundError(2, "No such file or directory", p)
    return p


def profile_report(path: PathLike, user_code: str | list[str] | None = None) -> Summary:
    """``memsight profile --json``: per profiler step, ``steps[i].devices["cuda:0"]``
    with ``peak_allocated``, ``peak_reserved``, allocation and free counts and
    bytes, ``live_at_peak`` and ``allocated_most`` (by op, with the calling
    site), and ``top_ops`` / ``top_kernels``. ``.text`` is the text report."""
    text, js, _ = core().profile_report(_existing(path), _user_code(user_code), "")
    return Summary(json.loads(js), text)


def profile_html(path: PathLike, out: PathLike | None = None, title: str | None = None,
                 user_code: str | list[str] | None = None, *, force: bool = False) -> str:
    """``memsight profile -o``: the self-contained page (memory curves per
    device with the steps marked, and the tables). Returns the HTML, or
    writes it to ``out`` (atomically) and returns that path. A read-only
    ``out`` is replaced only with ``force=True`` (``--force``)."""
    p = _existing(path)
    page = core().profile_report(p, _user_code(user_code), title or os.path.basename(p) + " - memsight profile")[2]
    return _write_text(out, page, force) if out is not None else page


def profile_timeline_html(source: PathLike | bytes, title: str | None = None, out: PathLike | None = None, *,
                          force: bool = False) -> str:
    """torch's categorised memory timeline (``export_memory_timeline``'s
    ``.json``, ``.json.gz`` or ``.raw.json.gz``; a path or the bytes) as an
    interactive page: memory by category over time, hover, zoom and pan, the
    peak explained by category. Returns the HTML, or writes it to ``out``
    (a read-only one only with ``force=True``)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        page = core().timeline_html(bytes(source), title or "memory timeline")
    else:
        p = _existing(source)
        page = core().timeline_html(p, title or os.path.basename(p) + " - memory timeline")
    return _write_text(out, page, force) if out is not None else page

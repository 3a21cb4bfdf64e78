"""memsight: where CUDA memory goes, why a job ran out of it, offline.

Reading and analysing snapshots (no torch needed)::

    import memsight
    snap = memsight.load("rank0_oom_snapshot.pickle")
    print(snap.summary_text())          # peaks, top sites, OOM diagnosis
    print(snap.stats())                 # torch's `_memory_viz stats` text
    for frames, nbytes in snap.memory():  # folded stacks as Python objects
        ...
    snap.to_html("oom.html")            # the interactive page, works offline
    snap.to_svg("segments.svg", "segments")
    print(snap.leaks())                 # memory that grows from step to step
    print(memsight.diff("a.pickle", "b.pickle"))  # what changed, by site, kind, module

Capturing from training jobs: :mod:`memsight.torch` (imports torch lazily).
"""

from __future__ import annotations

from ._errors import EngineNotBuiltError, MemsightError
from ._version import __version__
from .diff import Diff, diff
from .profile import profile_html, profile_report, profile_timeline_html
from .ranks import Ranks, ranks
from .snapshot import (
    Comparison,
    FoldedStacks,
    Snapshot,
    Summary,
    compare,
    frame_kinds,
    frame_site,
    from_dict,
    load,
    loads,
)



def load_ipython_extension(ipython: object) -> None:
    """``%load_ext memsight``: registers the ``%mlrun`` / ``%%mlrun`` line-profiler
    magics and ``%%memsight`` (records a cell, shows the summary and the page)."""
    from ._magics import load_ipython_extension as load

    load(ipython)


__all__ = [
    "Comparison",
    "Diff",
    "EngineNotBuiltError",
    "FoldedStacks",
    "MemsightError",
    "Ranks",
    "Snapshot",
    "Summary",
    "__version__",
    "compare",
    "diff",
    "frame_kinds",
    "frame_site",
    "from_dict",
    "load",
    "loads",
    "profile_html",
    "profile_report",
    "profile_timeline_html",
    "ranks",
]

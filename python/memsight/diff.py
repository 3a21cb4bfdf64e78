"""What changed between two snapshots, or two moments of one: ``memsight diff``
from Python (docs/diff.md)::

    import memsight
    d = memsight.diff("before.pickle", "after.pickle")
    print(d)                               # the text `memsight diff` prints
    for site in d.data.sites[:5]:          # largest change first
        print(site.status, site.change, site.site)
    d.to_html("diff.html")                 # tables and the difference flamegraph
    memsight.diff(snap, at_step=(10, 20))  # two moments of one snapshot
"""

from __future__ import annotations

import json
import os
from typing import Any, Union

from ._engine import core
from ._errors import MemsightError
from ._frames import _user_code
from ._paths import PathLike, _fspath, _write_text
from .snapshot import Snapshot, Summary, load

Moment = Union[str, int]


class Diff:
    """The comparison: ``text`` (as the CLI prints it), ``data`` (its JSON as a
    dict with attribute access: ``before``, ``after``, ``change``,
    ``by_category``, ``modules``, ``sites``), ``svg()`` (the flamegraph of the
    difference, growth red and shrinkage blue), ``html()`` and ``folded()``."""

    __slots__ = ("_diff", "_data", "_text")

    def __init__(self, core_diff: Any) -> None:
        self._diff = core_diff
        self._data: Summary | None = None
        self._text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self._diff.text()
        return self._text

    @property
    def data(self) -> Summary:
        if self._data is None:
            self._data = Summary(json.loads(self._diff.json()), self.text)
        return self._data

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        c = self.data["change"]["allocated"]
        return f"<memsight.Diff allocated {'+' if c >= 0 else ''}{c} bytes, {len(self.data['sites'])} sites>"

    def svg(self) -> str:
        return self._diff.svg()

    def to_svg(self, path: PathLike, *, force: bool = False) -> str:
        return _write_text(path, self.svg(), force)

    def html(self, title: str | None = None) -> str:
        b, a = self.data["before"]["file"], self.data["after"]["file"]
        return self._diff.html(title or (b if a == b else f"{b} -> {a}"))

    def to_html(self, path: PathLike, title: str | None = None, *, force: bool = False) -> str:
        return _write_text(path, self.html(title), force)

    def folded(self) -> str:
        """Folded stacks of the difference: ``grew;STACK BYTES`` / ``shrank;STACK BYTES``."""
        return self._diff.folded()


def _pair(value: Any, what: str, kind: type | tuple[type, ...]) -> list[Any]:
    if value is None:
        return []
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not 1 <= len(items) <= 2 or any(isinstance(v, bool) or not isinstance(v, kind) for v in items):
        raise ValueError(f"{what} takes one moment or two (BEFORE's, AFTER's), not {value!r}")
    return items


def _snapshot(x: Snapshot | PathLike) -> tuple[Snapshot, str]:
    if isinstance(x, Snapshot):
        return x, x.source or "snapshot"
    p = _fspath(x)
    return load(p), p


def diff(
    before: Snapshot | PathLike,
    after: Snapshot | PathLike | None = None,
    *,
    at: Moment | tuple[Moment, Moment] | None = None,
    at_step: int | tuple[int, int] | None = None,
    device: int | tuple[int, int] | None = None,
    allow_mismatch: bool = False,
    user_code: str | list[str] | None = None,
) -> Diff:
    """``memsight diff``: what changed from ``before`` to ``after`` (snapshots or
    paths; a path is read, measured and let go before the other is read).

    ``at``: a moment, or BEFORE's and AFTER's (``"peak"``, ``"snapshot"``,
    ``"oom"``, ``"oom:K"``, ``"step:N"`` or a trace entry index); ``at_step``:
    the start of step N, or two steps. With one snapshot, AFTER defaults to
    its end; with two, one moment is both snapshots'. ``device``: the device
    of both, or a pair. Snapshots of different devices, or of different ranks
    (by their files' names, ``rank3_*.pickle``), raise
    :class:`memsight.MemsightError` unless ``allow_mismatch``.
    """
    if at is not None and at_step is not None:
        raise ValueError("give at= or at_step=, not both (at='step:N' names a step too)")
    moments = [str(m) for m in _pair(at, "at", (str, int))] + [
        f"step:{n}" for n in _pair(at_step, "at_step", int)]
    devices = _pair(device, "device", int)
    if any(d < 0 for d in devices):
        raise ValueError(f"device must be a device number, not {device!r}")
    two = after is not None
    try:
        at_before, at_after = core().diff_plan(two, moments)
    except MemsightError as e:
        raise MemsightError(f"{e} (at=, at_step=)") from None
    uc = _user_code(user_code)

    def measure(snap: Snapshot, name: str, at_list: list[str], i: int) -> list[Any]:
        snap._need_trace("diff()")
        dev = devices[min(i, len(devices) - 1)] if devices else snap._snap.default_device()
        return core().measure_moments(snap._snap, os.fspath(name), dev, at_list, uc)

    snap, name = _snapshot(before)
    if after is not None:  # two: one snapshot at a time: the first is let go (if read here) before the second is read
        sides = measure(snap, name, [at_before], 0)
        del snap
        snap, name = _snapshot(after)
        sides += measure(snap, name, [at_after], 1)
    elif len(set(devices)) <= 1:  # both moments from one replay
        sides = measure(snap, name, [at_before, at_after], 0)
    else:
        sides = measure(snap, name, [at_before], 0) + measure(snap, name, [at_after], 1)
    why = core().diff_mismatch(sides[0], sides[1])
    if why and not allow_mismatch:
        raise MemsightError(f"{why}; pass allow_mismatch=True to compare them anyway")
    return Diff(core().diff_moments(sides[0], sides[1]))

"""The values the analyses of a snapshot return: folded stacks (and their
flamegraphs), the summary as a dict with attribute access, and the comparison
of two snapshots."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ._engine import core
from ._errors import MemsightError
from ._paths import PathLike, _write_text

# Flamegraph kinds: which folded stacks they draw and their default titles.
SVG_KINDS: dict[str, str] = {
    "segments": "Segment flamegraph (cached memory by segment and allocation site)",
    "memory": "Memory flamegraph (allocated memory by allocation site)",
}

_TRAILING_SPACE = " \t\r\v\f"


def _folded_lines(text: str) -> Iterator[str]:
    """The lines of folded text as the engine's parser reads them: split at
    "\n" only (``str.splitlines`` also breaks at "\r", "\x0b", "\x1c",
    "\u2028", ..., which a frame name may hold), trailing white space
    dropped (so CRLF reads too), blank lines skipped."""
    for line in text.split("\n"):
        line = line.rstrip(_TRAILING_SPACE)
        if line:
            yield line


def _split_folded_line(line: str) -> tuple[str, str]:
    """(stack, count text) of one line: split at its last space or tab."""
    at = max(line.rfind(" "), line.rfind("\t"))
    return line[:at].rstrip(_TRAILING_SPACE) if at >= 0 else "", line[at + 1:]


@dataclass(frozen=True)
class FoldedStacks:
    """Folded stacks, one ``frame;frame;frame bytes`` line per entry, as torch's
    ``_memory_viz.segments`` / ``memory`` write them (outermost frame first).

    Iterating yields ``(frames, bytes)`` pairs; ``text`` is the torch-identical
    text; ``to_svg`` renders the flamegraph.

    torch writes frame names as they are, so a name with a newline makes the
    text ambiguous. Stacks from a snapshot (``Snapshot.memory()``,
    ``segments()``, ``compare()``) keep the engine's stacks as data beside the
    text, and iterating, ``len``, ``total`` and ``svg`` use those: any frame
    name works but one with ";", which separates frames in the folded format
    itself. Stacks made from text alone are read from its lines, split at
    "\n" only: there a newline inside a frame name does split the line.
    """

    text: str
    kind: str = "memory"
    # the engine's snapshot whose frames colour the SVG by kind (user code warm)
    _kinds_of: Any = field(default=None, repr=False, compare=False)
    # the engine's ("frame;frame", count) per line of ``text``, when it made the text
    _stacks: Any = field(default=None, repr=False, compare=False)

    def _pairs(self) -> Iterator[tuple[str, int]]:
        if self._stacks is not None:
            yield from self._stacks
            return
        for line in _folded_lines(self.text):
            stack, count = _split_folded_line(line)
            yield stack, int(count)

    def __iter__(self) -> Iterator[tuple[tuple[str, ...], int]]:
        for stack, count in self._pairs():
            yield tuple(stack.split(";")), count

    def __len__(self) -> int:
        if self._stacks is not None:
            return len(self._stacks)
        return sum(1 for _ in _folded_lines(self.text))

    def __str__(self) -> str:
        return self.text

    @property
    def total(self) -> int:
        """Sum of the bytes of every line."""
        return sum(n for _, n in self._pairs())

    def svg(self, title: str | None = None, width: int = 1200) -> str:
        """The flamegraph as a self-contained SVG document."""
        title = title or SVG_KINDS.get(self.kind, "Flame Graph")
        if self._stacks is not None:
            # Drawn from the stacks as data; counts of 0 or less are left out.
            return core().render_flamegraph_svg_stacks(self._stacks, title=title, width=width,
                                                       kinds_of=self._kinds_of)
        try:
            return core().render_flamegraph_svg(self.text, title=title, width=width, kinds_of=self._kinds_of)
        except MemsightError:
            # torch's folded text can hold negative counts (requested-size
            # accounting); flamegraph.pl skips lines it cannot read, so draw
            # the readable ones rather than nothing.
            lines = list(_folded_lines(self.text))
            kept = [ln for ln in lines if _split_folded_line(ln)[1].isdigit()]
            if len(kept) == len(lines):
                raise
            return core().render_flamegraph_svg("\n".join(kept) + "\n", title=title, width=width,
                                                kinds_of=self._kinds_of)

    def to_svg(self, path: PathLike, title: str | None = None, width: int = 1200, *,
               force: bool = False) -> str:
        return _write_text(path, self.svg(title=title, width=width), force)

    def _repr_svg_(self) -> str | None:
        """A notebook's form: the flamegraph (nothing for no stacks: the text shows)."""
        return self.svg() if len(self) else None


class Summary(dict):
    """The engine's summary (peaks, top allocation sites, OOM diagnosis, ...)
    as a dict with attribute access; ``text`` is the plain-text report."""

    def __init__(self, data: dict[str, Any], text: str | None = None) -> None:
        super().__init__(data)
        if text is not None:  # else a "text" key of the data (a rank's OOM text) stays readable
            self.text = text

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            if name == "text":
                return ""
            raise AttributeError(name) from None

    def __getitem__(self, key: Any) -> Any:  # nested dicts have attribute access too
        return _wrap(super().__getitem__(key))

    def __str__(self) -> str:
        return self.text or json.dumps(self, indent=2)


def _wrap(value: Any) -> Any:
    if isinstance(value, dict) and not isinstance(value, Summary):
        return Summary(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


@dataclass(frozen=True)
class Comparison:
    """``memsight compare``: segments only in the snapshot before / after.

    ``only_before`` / ``only_after`` are segment addresses, in torch's printed
    order; ``folded`` holds the stacks of those segments.
    """

    text: str
    folded: FoldedStacks
    only_before: list[int] = field(default_factory=list)
    only_after: list[int] = field(default_factory=list)

    def __str__(self) -> str:
        return self.text


def _parse_comparison(text: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for line in text.splitlines():
        name, sep, value = line.partition(" = ")
        if sep and name in ("only_before", "only_after"):
            try:
                out[name] = [int(x) for x in ast.literal_eval(value)]
            except (ValueError, SyntaxError):
                out[name] = []
    return out

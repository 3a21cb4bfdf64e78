"""Checks that a value is plain data before it is pickled for the engine.

``from_dict`` pickles what it is given and lets the engine read it back.
When that fails, :func:`explain` finds why, without recursion (any depth is
walked) and names the place: a value of an unsupported type, a container
that contains itself, or nesting deeper than the engine reads.
"""

from __future__ import annotations

from typing import Any, cast

from ._errors import MemsightError

MAX_DEPTH = 1000  # the engine's limit on nested values
# Exact types: a subclass (an OrderedDict, an IntEnum) pickles as a call to
# its class, which the engine refuses to run, so it is named as its type.
_SCALARS = (type(None), bool, int, float, str, bytes)
_CONTAINERS = (dict, list, tuple)


def _where(chain: list[tuple[object, ...]], at: int) -> str:
    """A readable path like data['device_traces'][0][3]['frames']."""
    parts: list[str] = []
    node: int | None = at
    while node is not None:
        parent, key = chain[node][0], chain[node][1]
        if parent is not None:
            parts.append(f"[{key!r}]")
        node = parent  # type: ignore[assignment]
    parts.reverse()
    if len(parts) > 12:
        parts = [*parts[:6], f"...({len(parts) - 9} more)...", *parts[-3:]]
    return "data" + "".join(parts)


def explain(data: Any) -> MemsightError | None:
    """The error for the first value the engine cannot take, or None."""
    # chain[i] = (parent index or None, key): paths are built only on error.
    chain: list[tuple[object, ...]] = [(None, None)]
    on_path: set[int] = set()
    # (value, chain index, depth); None pops the innermost container.
    todo: list[tuple[Any, int, int] | tuple[None, int, int]] = [(data, 0, 0)]
    exits: list[int] = []
    while todo:
        value, at, depth = todo.pop()
        if value is None and at < 0:
            on_path.discard(exits.pop())
            continue
        if type(value) is str:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as e:
                return MemsightError(
                    f"{_where(chain, at)} is a str with a lone surrogate at index {e.start}: "
                    "a snapshot's text must be valid Unicode")
            continue
        if type(value) in _SCALARS:
            continue
        if type(value) not in _CONTAINERS:
            return MemsightError(
                f"{_where(chain, at)} is of type {type(value).__name__}: a snapshot holds only "
                "dicts, lists, tuples, str, bytes, int, float, bool and None, not subclasses of them")
        if id(value) in on_path:
            return MemsightError(f"{_where(chain, at)} contains itself: a snapshot is a tree")
        if depth >= MAX_DEPTH:
            return MemsightError(
                f"{_where(chain, at)} is nested deeper than {MAX_DEPTH} levels")
        on_path.add(id(value))
        exits.append(id(value))
        todo.append((None, -1, depth))
        items = value.items() if isinstance(value, dict) else enumerate(cast("list[Any]", value))
        for key, item in items:
            if type(value) is dict and type(key) not in _SCALARS:
                return MemsightError(
                    f"{_where(chain, at)} has a key of type {type(key).__name__}")
            chain.append((at, key))
            todo.append((item, len(chain) - 1, depth + 1))
            if type(value) is dict and type(key) is str:
                chain.append((at, key))
                todo.append((key, len(chain) - 1, depth + 1))
    return None

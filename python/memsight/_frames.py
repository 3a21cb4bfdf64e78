"""The frames of a torch stack as ``memsight summary`` classifies them: each
frame's kind and the stack's site."""

from __future__ import annotations

from typing import Any

from ._engine import core


def _user_code(user_code: str | list[str] | tuple[str, ...] | None) -> str:
    if user_code is None:
        return ""
    if isinstance(user_code, str):
        return user_code
    return ",".join(str(p) for p in user_code)


def frame_kinds(frames: Any, user_code: str | list[str] | None = None) -> list[str]:
    """The kind of each frame of a torch stack (``[{"name", "filename",
    "line"}, ...]``, innermost first): ``"user"``, ``"library"`` (torch,
    the standard library, installed packages), ``"internal"`` (allocator,
    dispatcher and interpreter plumbing) or ``"native"``."""
    return core().frame_kinds(_frame_pairs(frames), _user_code(user_code))[0]


def frame_site(frames: Any, user_code: str | list[str] | None = None) -> str:
    """The site of a torch stack, as ``memsight summary`` groups allocations:
    ``"train.py:42:forward"`` for the innermost frame of the user's own
    code, else of library Python, else of other native code; ``""`` when
    the stack has none of them."""
    pairs = _frame_pairs(frames)
    _, i = core().frame_kinds(pairs, _user_code(user_code))
    if i < 0:
        return ""
    f = frames[i]
    name, filename = pairs[i]
    line = f.get("line", 0) if isinstance(f, dict) else getattr(f, "line", 0)
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{base}:{line}:{name}"


def _frame_pairs(frames: Any) -> list[tuple[str, str]]:
    pairs = []
    for f in frames:
        if isinstance(f, dict):
            pairs.append((str(f.get("name", "")), str(f.get("filename", ""))))
        else:
            pairs.append((str(getattr(f, "name", "")), str(getattr(f, "filename", ""))))
    return pairs

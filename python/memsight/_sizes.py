"""Sizes as users type them, read by the engine's one size parser (the CLI's)."""

from __future__ import annotations

import re

from ._engine import core


def parse_size(value: int | str, what: str = "size") -> int:
    """Bytes from an int or a size with an optional binary unit: ``"2 GiB"``,
    ``"512M"``, ``"80GiB"``, ``"4096"`` (spaces between the number and its
    unit are allowed). ValueError naming ``what`` and the value otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{what}: {value!r} is not a size")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"{what}: {value!r} is not a size: it must be positive")
        return value
    if not isinstance(value, str):
        raise ValueError(f"{what}: {value!r} is not a size such as '2 GiB'")
    try:
        return int(core().parse_size(re.sub(r"^(\d+)\s+", r"\1", value.strip())))
    except ValueError:
        raise ValueError(f"{what}: {value!r} is not a size: digits and an optional unit "
                         "(512M, 8G, '2 GiB', 4096)") from None

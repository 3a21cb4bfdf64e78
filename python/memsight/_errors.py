"""Exception types shared by the package and the compiled engine."""

from __future__ import annotations


class MemsightError(ValueError):
    """A snapshot could not be read, written or rendered.

    The message is one line that says what went wrong and where, for example
    ``truncated pickle at byte 1834: expected 8 more bytes``. The compiled
    engine's ``memsight._core.Error`` derives from this class.
    """


class EngineNotBuiltError(ImportError):
    """memsight._core (the compiled engine) is not importable."""

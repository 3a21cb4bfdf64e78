"""Lazy access to the compiled engine, so that ``import memsight`` (and the
pure-Python parts of ``memsight.torch``) work where ``_core`` is not built."""

from __future__ import annotations

from types import ModuleType

from ._errors import EngineNotBuiltError

_core: ModuleType | None = None


def core() -> ModuleType:
    """Returns ``memsight._core``, or raises EngineNotBuiltError saying how to build it."""
    global _core
    if _core is None:
        try:
            from . import _core as mod  # type: ignore[attr-defined]
        except ImportError as e:
            raise EngineNotBuiltError(
                "memsight._core (the compiled engine) is not built: run `pip install .` in the "
                "memsight checkout, or `cmake -S . -B build/py -G Ninja -DMEMSIGHT_TESTS=OFF && "
                f"cmake --build build/py --target _core` ({e})"
            ) from e
        _core = mod
    return _core


def available() -> bool:
    """True when the compiled engine can be imported."""
    try:
        core()
    except EngineNotBuiltError:
        return False
    return True

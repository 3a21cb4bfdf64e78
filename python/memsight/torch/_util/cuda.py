"""torch, imported only when needed, and the checks GPU-only code makes."""

from __future__ import annotations

import logging
import threading
import warnings
from types import ModuleType

log = logging.getLogger("memsight")

_warned: set[str] = set()
_warned_lock = threading.Lock()


def torch_module() -> ModuleType:
    """``import torch``, with a message that says what needs it."""
    try:
        import torch
    except ImportError as e:
        raise ImportError(
            "memsight.torch needs PyTorch: install torch (memsight itself reads and renders "
            "snapshots without it)"
        ) from e
    return torch


def cuda_available() -> bool:
    """True when torch is installed, built with CUDA, and sees a GPU."""
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def warn_once(key: str, message: str, stacklevel: int = 3) -> None:
    """A UserWarning (and a log line) the first time ``key`` is seen in this process."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, UserWarning, stacklevel=stacklevel)
    log.info("memsight: %s", message)


def history_enabled() -> bool | None:
    """Whether some allocator-history recording is on (None if torch cannot tell)."""
    try:
        import torch

        fn = getattr(torch._C, "_cuda_isHistoryEnabled", None)
        return None if fn is None else bool(fn())
    except Exception:
        return None

"""Paths as the Python package takes them, and text files written whole."""

from __future__ import annotations

import os
from typing import Union

from ._engine import core

PathLike = Union[str, "os.PathLike[str]"]


def _fspath(path: PathLike) -> str:
    return os.fspath(path)


def _write_text(path: PathLike, text: str, force: bool = False) -> str:
    """Writes ``text`` whole or not at all; a read-only file is replaced only
    with ``force`` (the CLI's ``--force``)."""
    p = _fspath(path)
    # Undecodable bytes of the snapshot's strings come back as they were read.
    core().write_file_atomic(p, text.encode("utf-8", "surrogateescape"), bool(force))
    return p

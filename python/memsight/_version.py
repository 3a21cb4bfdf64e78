"""memsight's release, written once: the VERSION file at the source root.

From a source checkout (``PYTHONPATH=python``) the file itself is read, so the
number is the checkout's even when another memsight is installed; an installed
package has no such file and reads its own metadata, which pyproject.toml took
from the same file when the wheel was built.
"""

from __future__ import annotations

from pathlib import Path


def _read_version() -> str:
    root = Path(__file__).resolve().parents[2]
    # VERSION beside pyproject.toml: a source checkout, not a stray file
    # above site-packages.
    if (root / "pyproject.toml").is_file():
        try:
            return (root / "VERSION").read_text(encoding="utf-8").strip()
        except OSError:
            pass
    # Imported here: importlib.metadata costs milliseconds a checkout need not pay.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memsight")
    except PackageNotFoundError:
        return "0+unknown"


__version__ = _read_version()

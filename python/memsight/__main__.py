"""``python -m memsight``: the memsight command line.

Runs the engine's CLI in-process through ``memsight._core.cli_main`` (the
wheel's ``memsight`` command is this entry point: the engine ships once);
without the compiled module (a source checkout that built only the
executable) runs the ``memsight`` executable: the one ``$MEMSIGHT_EXE`` (or
``$MEMSIGHT_BIN``) names, or the first on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

# Set while we run an executable from PATH, so that a `memsight` on PATH that
# is itself a wrapper around `python -m memsight` cannot loop forever.
_GUARD = "_MEMSIGHT_VIA_PYTHON"


def find_executable() -> str | None:
    """The memsight CLI executable to run, or None."""
    env = os.environ.get("MEMSIGHT_EXE") or os.environ.get("MEMSIGHT_BIN")
    if env:
        return env
    if os.environ.get(_GUARD):
        return None
    return shutil.which("memsight")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        from ._core import cli_main
    except ImportError:
        pass
    else:
        sys.stdout.flush()
        sys.stderr.flush()
        return int(cli_main(args))
    exe = find_executable()
    if exe is None:
        print(
            "memsight: the CLI is not available: memsight._core has no cli_main and no "
            "`memsight` executable was found (set MEMSIGHT_EXE to its path)",
            file=sys.stderr,
        )
        return 2
    env = dict(os.environ)
    env[_GUARD] = "1"
    try:
        rc = subprocess.call([exe, *args], env=env)
    except OSError as e:
        print(f"memsight: cannot run {exe}: {e}", file=sys.stderr)
        return 2
    # A child killed by a signal (SIGPIPE when the reader of a pipe has
    # gone) ends this process with the shell's status for it, 128 + N.
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    sys.exit(main())

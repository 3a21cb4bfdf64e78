"""Files appear whole or not at all: written beside their final name, then
renamed over it (used for every snapshot, page and upload memsight writes).

As the engine's writer does: the temporary is ``.NAME.memsight-tmp-PID-TAG``,
a replaced file keeps its permissions and a new one gets the umask's, and the
temporaries of the same name left by a killed process are removed."""

from __future__ import annotations

import errno
import os
import secrets
import stat


def _remove_stale(folder: str, prefix: str) -> None:
    """Removes ``prefix`` temporaries whose writer (the PID in the name) is gone."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        pid, dash, _ = name[len(prefix):].partition("-")
        if not dash or not pid.isdigit() or int(pid) in (0, os.getpid()):
            continue
        try:
            os.kill(int(pid), 0)
            continue  # still running
        except OSError as e:
            if e.errno != errno.ESRCH:
                continue
        try:
            os.unlink(os.path.join(folder, name))
        except OSError:
            pass


def write_atomic(path: str, data: bytes) -> None:
    """Writes ``data`` to a temporary file beside ``path``, then renames it."""
    path = os.path.realpath(path) if os.path.islink(path) else path
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = None
    prefix = "." + os.path.basename(path)[:200] + ".memsight-tmp-"
    _remove_stale(folder, prefix)
    tmp = os.path.join(folder, f"{prefix}{os.getpid()}-{secrets.token_hex(3)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

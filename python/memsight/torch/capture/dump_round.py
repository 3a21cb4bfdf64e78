"""One round of rank dumps and its files: the round itself (who wrote what,
who did not answer), the files' names, and the manifest that the asking rank
writes at its end. The protocol that fills a round is rank_dumps."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass, field

from .._util.atomic import write_atomic

log = logging.getLogger("memsight")

FILE_NAME = "{tag}_{seq}_rank{rank}.pickle"
MANIFEST_NAME = "{tag}_{seq}_manifest.json"


def _safe_tag(tag: str) -> str:
    """The tag as a file name's part: letters, digits, "_", "." and "-"."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(tag)).strip("-.") or "dump"


@dataclass
class DumpRound:
    """One round of dumps: its number, why, and who wrote what."""

    seq: int
    tag: str
    reason: str = ""
    origin_rank: int = 0
    world_size: int = 1
    #: rank -> the file it wrote (as that rank named it)
    files: dict[int, str] = field(default_factory=dict)
    #: rank -> why it wrote nothing ("did not answer within 30 s", its error)
    missing: dict[int, str] = field(default_factory=dict)
    manifest: str | None = None
    #: seconds from the request until every rank answered or the timeout
    waited: float = 0.0

    def local_files(self) -> list[str]:
        """The files of this round that exist here, by rank."""
        return [f for _, f in sorted(self.files.items()) if os.path.isfile(f)]


def write_manifest(rnd: DumpRound, folder: str, limit: float) -> str | None:
    """Writes the round's manifest into ``folder``: who wrote what, who did not
    answer. Returns its path, or None (logged) when it could not be written."""
    path = os.path.join(folder, MANIFEST_NAME.format(tag=rnd.tag, seq=rnd.seq))
    here = os.path.abspath(folder)

    def rel(f: str) -> str:
        # A file inside the manifest's folder is named relative to it (the
        # reader follows those); another node's folder stays absolute, which
        # `memsight ranks` reads beside the manifest or with --allow-absolute.
        f = os.path.abspath(f)
        return os.path.relpath(f, here) if os.path.commonpath([f, here]) == here else f

    manifest = {
        "schema": 1, "memsight_rank_dumps": 1, "seq": rnd.seq, "tag": rnd.tag, "reason": rnd.reason,
        "origin_rank": rnd.origin_rank, "world_size": rnd.world_size, "timeout_s": limit,
        "waited_s": rnd.waited, "written_at": time.time(),
        "ranks": [{"rank": r, "file": rel(f)} for r, f in sorted(rnd.files.items())],
        "missing": [{"rank": r, "why": why} for r, why in sorted(rnd.missing.items())],
    }
    try:
        write_atomic(path, (json.dumps(manifest, indent=1) + "\n").encode())
        return path
    except Exception as e:
        log.error("memsight: could not write the dump manifest %s: %s", path, e)
        return None


def _link_or_copy(src: str, dst: str) -> None:
    """``dst`` as a second name of ``src`` (a file already written, such as the
    OOM snapshot): a hard link where the file system has them, else a copy."""
    if os.path.abspath(src) == os.path.abspath(dst):
        return
    os.makedirs(os.path.dirname(os.path.abspath(dst)), exist_ok=True)
    tmp = dst + ".tmp-link"
    try:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.link(src, tmp)
        os.replace(tmp, dst)
    except OSError:
        with open(src, "rb") as f:
            write_atomic(dst, f.read())

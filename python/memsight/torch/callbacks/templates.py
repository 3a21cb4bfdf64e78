"""File-name templates, rendered the way Composer renders them.

Variables: ``{run_name}``, the distributed ones (``{rank}``, ``{local_rank}``,
``{world_size}``, ``{local_world_size}``, ``{node_rank}``) and the time ones
(``{epoch}``, ``{batch}``, ``{batch_in_epoch}``, ``{sample}``,
``{sample_in_epoch}``, ``{token}``, ``{token_in_epoch}`` as integers;
``{total_wct}``, ``{epoch_wct}``, ``{batch_wct}`` as float seconds). Format
specs work (``{rank:03d}``). A key that is not known is kept literally, as is
a positional ``{}`` with nothing to fill it.
"""

from __future__ import annotations

import os
import string
from typing import Any
from urllib.parse import unquote, urlsplit

from .._util.dist import dist_info

_FORMATTER = string.Formatter()


def partial_format(template: str, *args: Any, **kwargs: Any) -> str:
    """``template.format(*args, **kwargs)``, except that fields it cannot fill
    (unknown names, missing positions, bad attributes) stay as written."""
    out: list[str] = []
    auto = 0
    for literal, field, spec, conversion in _FORMATTER.parse(template):
        out.append(literal)
        if field is None:
            continue
        original = "{" + field + ("!" + conversion if conversion else "") + (":" + spec if spec else "") + "}"
        name = field
        if field == "":
            name = str(auto)
            auto += 1
        rewritten = "{" + name + ("!" + conversion if conversion else "") + (":" + spec if spec else "") + "}"
        try:
            out.append(_FORMATTER.vformat(rewritten, args, kwargs))
        except (KeyError, IndexError, AttributeError, TypeError, ValueError):
            out.append(original)
    return "".join(out)


def format_name_with_dist(template: str, run_name: str, **extra: Any) -> str:
    """Fills ``{run_name}`` and the distributed variables (and ``extra``)."""
    return partial_format(template, run_name=run_name, **{**dist_info(), **extra})


def format_name_with_dist_and_time(template: str, run_name: str, timestamp: Any, **extra: Any) -> str:
    """Also fills the time variables from ``timestamp`` (a :class:`TrainState`
    or anything with ``template_vars()`` returning them)."""
    time_vars = timestamp.template_vars() if hasattr(timestamp, "template_vars") else dict(timestamp)
    return partial_format(template, run_name=run_name, **{**dist_info(), **time_vars, **extra})


def ensure_folder_is_empty(folder: str | os.PathLike[str]) -> None:
    """Raises FileExistsError if ``folder`` holds a file, at any depth, that is
    not hidden; hidden files and everything under hidden folders are ignored,
    and so are empty folders."""
    root = os.fspath(folder)
    if not os.path.isdir(root):
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        visible = sorted(f for f in filenames if not f.startswith("."))
        if visible:
            found = os.path.join(dirpath, visible[0])
            raise FileExistsError(
                f"memsight will not write into {root}: it already holds {found}. "
                "Pass overwrite=True to write there anyway, or choose another folder "
                "(a new run_name gives a new default folder)."
            )


def parse_uri(uri: str) -> tuple[str, str, str]:
    """``(scheme, bucket, path)`` of a remote name.

    ``s3://bucket/a/b`` gives ``('s3', 'bucket', 'a/b')`` (leading '/' of the
    path dropped when there is a scheme); ``bucket@namespace`` gives
    ``bucket``; ``file:///tmp/x`` gives ``('file', '', '/tmp/x')``; a name with
    no scheme gives ``('', '', name)``.
    """
    parts = urlsplit(uri)
    if not parts.scheme or len(parts.scheme) == 1:  # no scheme (or a Windows drive letter)
        return "", "", uri
    scheme = parts.scheme.lower()
    if scheme == "file":
        path = unquote(parts.path)
        return "file", "", path if parts.netloc in ("", "localhost") else "//" + parts.netloc + path
    bucket = parts.netloc.split("@", 1)[0]
    return scheme, bucket, parts.path.lstrip("/")

"""How snapshots show in a notebook: the page inline, sandboxed in an iframe
(its scripts run, but it cannot reach the notebook, its cookies or other
origins), or a note where the page is too big to keep in a notebook; and the
summary's text as the plain-text form."""

from __future__ import annotations

import html
import logging
import os
from typing import Any

log = logging.getLogger("memsight")

#: The largest page shown inline (bytes); ``$MEMSIGHT_INLINE_PAGE_LIMIT`` sets
#: another (a size such as "32M"). A notebook keeps every output it shows.
INLINE_PAGE_LIMIT = 8 << 20
PAGE_HEIGHT = 640


def page_limit() -> int:
    text = os.environ.get("MEMSIGHT_INLINE_PAGE_LIMIT", "").strip()
    if not text:
        return INLINE_PAGE_LIMIT
    from ._sizes import parse_size

    try:
        return parse_size(text, "MEMSIGHT_INLINE_PAGE_LIMIT")
    except ValueError as e:
        log.warning("memsight: %s; using %d bytes", e, INLINE_PAGE_LIMIT)
        return INLINE_PAGE_LIMIT


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def page_html(snap: Any) -> str | None:
    """The ``text/html`` form of a Snapshot (None without a trace: the text shows)."""
    if not snap.has_trace:
        return None
    page = snap.html()
    size, limit = len(page.encode("utf-8")), page_limit()
    if size > limit:
        where = f'{os.path.basename(snap.source)}.html' if snap.source else "snapshot.html"
        return (
            f"<div><p>memsight: the page of this snapshot is {_mib(size)}, over the {_mib(limit)} shown "
            f"inline ($MEMSIGHT_INLINE_PAGE_LIMIT sets another); open it with "
            f"<code>snap.to_html({html.escape(repr(where))})</code>.</p>"
            f"<pre>{html.escape(snap.summary_text())}</pre></div>"
        )
    return (
        f'<iframe srcdoc="{html.escape(page, quote=True)}" sandbox="allow-scripts" title="memsight" '
        f'style="width:100%;height:{PAGE_HEIGHT}px;border:1px solid #ccc"></iframe>'
    )


def pretty_text(snap: Any) -> str:
    """The summary's text, or the repr where there is none."""
    if not snap.has_trace:
        return repr(snap)
    try:
        return str(snap.summary_text())
    except Exception as e:  # a summary that fails must not hide the object
        log.debug("memsight: no summary for the repr: %s", e)
        return repr(snap)

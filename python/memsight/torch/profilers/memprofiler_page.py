"""MemProfiler's page: one self-contained HTML file per rank
(``rank_{rank}_memprofiler.html``) showing every collected call side by
side: start and end of each statistic, per-module forward deltas and bytes
saved for backward (table and chart), what grew by user site, and links to
the call's allocator snapshots. No script, no network, inline CSS."""

from __future__ import annotations

import html
import os
import re
from typing import Any

from .._util.atomic import write_atomic

#: Statistics shown first (the rest are under "all statistics").
HEADLINE = (
    "allocated_bytes.all.current",
    "allocated_bytes.all.peak",
    "active_bytes.all.current",
    "reserved_bytes.all.current",
    "reserved_bytes.all.peak",
    "inactive_split_bytes.all.current",
    "num_alloc_retries",
    "num_ooms",
    "rss",
    "vms",
    "saved_tensors_bytes",
    "saved_tensors_unique_bytes",
)

_KEY = re.compile(r"^(?P<rank>\d+)\.(?P<fn>.+)\.(?P<iter>\d+)\.(?P<ctx>start|end)$")

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#1d232b;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d7dde4}
h3{font-size:15px;margin:18px 0 6px}.muted{color:#5b6673}
table{border-collapse:collapse;margin:6px 0 12px;font-variant-numeric:tabular-nums}
th,td{border:1px solid #d7dde4;padding:3px 8px;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}th{background:#f1f4f7}
td.up{color:#b3261e}td.down{color:#1b7f3b}.err{color:#b3261e;font-weight:600}
svg text{font:12px system-ui,sans-serif;fill:#1d232b}details{margin:6px 0}
.scroll{overflow-x:auto}
"""


def page_path(folder: str, rank: int) -> str:
    return os.path.join(folder, f"rank_{rank}_memprofiler.html")


def fmt_bytes(n: Any, signed: bool = False) -> str:
    if not isinstance(n, (int, float)) or isinstance(n, bool):
        return "" if n is None else html.escape(str(n))
    sign = ("+" if n > 0 else "-" if n < 0 else "") if signed else ("-" if n < 0 else "")
    v = abs(float(n))
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{sign}{v:.0f} {unit}" if unit == "B" else f"{sign}{v:.2f} {unit}"
        v /= 1024
    return str(n)


def _is_bytes(stat: str) -> bool:
    return "bytes" in stat or stat in ("rss", "vms") or stat.startswith(("rss_", "npp_"))


def _cell(stat: str, v: Any, signed: bool = False) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        text = fmt_bytes(v, signed) if _is_bytes(stat) else (f"{v:+,}" if signed else f"{v:,}")
    else:
        text = "" if v is None else html.escape(str(v))
    cls = ""
    if signed and isinstance(v, (int, float)) and v:
        cls = ' class="up"' if v > 0 else ' class="down"'
    return f"<td{cls}>{text}</td>"


def calls_of(stats: dict[str, Any]) -> list[tuple[str, int, str]]:
    """``(fn, iter, key prefix)`` of every collected call, in order of collection."""
    seen: list[tuple[str, int, str]] = []
    for key in stats:
        m = _KEY.match(key)
        if m and m["ctx"] == "start":
            seen.append((m["fn"], int(m["iter"]), key[: -len(".start")]))
    return seen


def _numeric(entry: dict[str, Any]) -> dict[str, float]:
    return {k: v for k, v in entry.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _side_by_side(stats: dict[str, Any], calls: list[tuple[str, int, str]], names: list[str]) -> str:
    head = "".join(f'<th colspan="3">{html.escape(fn)} #{it}</th>' for fn, it, _ in calls)
    sub = "<th>start</th><th>end</th><th>Δ</th>" * len(calls)
    rows = []
    for stat in names:
        cells = []
        for _, _, prefix in calls:
            s = stats.get(prefix + ".start", {}).get(stat)
            e = stats.get(prefix + ".end", {}).get(stat)
            d = e - s if isinstance(s, (int, float)) and isinstance(e, (int, float)) else None
            cells.append(_cell(stat, s) + _cell(stat, e) + _cell(stat, d, signed=True))
        rows.append(f"<tr><td>{html.escape(stat)}</td>{''.join(cells)}</tr>")
    return (f'<div class="scroll"><table><tr><th rowspan="2">statistic</th>{head}</tr><tr>{sub}</tr>'
            f"{''.join(rows)}</table></div>")


def _bar_chart(rows: list[tuple[str, float, float]], labels: tuple[str, str]) -> str:
    """Horizontal bars, two series per row (blue, orange), scaled to the largest |value|."""
    if not rows:
        return ""
    top = max(max(abs(a), abs(b)) for _, a, b in rows) or 1.0
    label_w, bar_w, row_h = 260, 420, 26
    height = row_h * len(rows) + 30
    parts = [f'<svg width="{label_w + bar_w + 120}" height="{height}" '
             f'role="img" aria-label="{html.escape(labels[0])} and {html.escape(labels[1])} per module">']
    for i, (name, a, b) in enumerate(rows):
        y = 20 + i * row_h
        short = name if len(name) <= 38 else "…" + name[-37:]
        parts.append(f'<text x="0" y="{y + 12}">{html.escape(short)}</text>')
        for j, (v, color) in enumerate(((a, "#3b6fb6"), (b, "#d9822b"))):
            w = max(1.0, abs(v) / top * bar_w) if v else 0.0
            parts.append(f'<rect x="{label_w}" y="{y + j * 10}" width="{w:.1f}" height="9" fill="{color}">'
                         f"<title>{html.escape(labels[j])}: {fmt_bytes(v, True)}</title></rect>")
    parts.append(f'<rect x="{label_w}" y="2" width="10" height="9" fill="#3b6fb6"/>'
                 f'<text x="{label_w + 14}" y="11">{html.escape(labels[0])}</text>'
                 f'<rect x="{label_w + 200}" y="2" width="10" height="9" fill="#d9822b"/>'
                 f'<text x="{label_w + 214}" y="11">{html.escape(labels[1])}</text></svg>')
    return "".join(parts)


def _modules(end: dict[str, Any]) -> str:
    fwd = end.get("module_forward") or {}
    saved = end.get("saved_tensors") or {}
    if not fwd and not saved:
        return '<p class="muted">No module hooks ran in this call.</p>'
    names = list(fwd) + [n for n in saved if n not in fwd]
    cuda_label = "forward CUDA Δ" if any(r.get("cuda_delta") for r in fwd.values()) else "forward RSS Δ"
    cuda_key = "cuda_delta" if cuda_label == "forward CUDA Δ" else "rss_delta"
    rows, chart = [], []
    for n in names:
        f = fwd.get(n, {})
        s = saved.get(n, {})
        rows.append(
            f"<tr><td>{html.escape(n)}</td><td>{f.get('calls', '')}</td>"
            + _cell("cuda_bytes", f.get("cuda_delta"), True) + _cell("rss", f.get("rss_delta"), True)
            + _cell("bytes", s.get("bytes")) + f"<td>{s.get('tensors', '')}</td>"
            + _cell("bytes", f.get("saved_bytes")) + "</tr>"
        )
        chart.append((n, float(f.get(cuda_key, 0) or 0), float(s.get("bytes", 0) or 0)))
    chart.sort(key=lambda r: -(abs(r[1]) + abs(r[2])))
    table = ("<table><tr><th>module</th><th>forward calls</th><th>forward CUDA Δ</th><th>forward RSS Δ</th>"
             "<th>saved for backward (own)</th><th>tensors saved</th><th>saved incl. children</th></tr>"
             + "".join(rows) + "</table>")
    return table + _bar_chart(chart[:30], (cuda_label, "saved for backward"))


def _growth(end: dict[str, Any]) -> str:
    rows = end.get("grew_by_site")
    if rows is None:
        return ""
    if not rows:
        return ('<h3>What grew, by user site</h3><p class="muted">No site holds more at the end '
                "than at the start.</p>")
    body = "".join(f"<tr><td>{html.escape(str(r.get('site')))}</td>{_cell('bytes', r.get('bytes'))}"
                   f"<td>{r.get('blocks', '')}</td></tr>" for r in rows)
    return ("<h3>What grew, by user site</h3><p class=\"muted\">Allocated bytes per site at the end snapshot minus "
            "at the start snapshot, where positive.</p>"
            "<table><tr><th>site</th><th>bytes</th><th>blocks</th></tr>" + body + "</table>")


def _fsdp(end: dict[str, Any]) -> str:
    peak = end.get("fsdp_peak")
    if not peak:
        return ""
    cats = sorted({c for d in peak.values() for c in d})
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cats)
    body = "".join(f"<tr><td>{html.escape(dev)}</td>" + "".join(_cell("bytes", d.get(c)) for c in cats) + "</tr>"
                   for dev, d in peak.items())
    return f"<h3>FSDP peak by category</h3><table><tr><th>device</th>{head}</tr>{body}</table>"


def render(rank: int, stats: dict[str, Any]) -> str:
    calls = calls_of(stats)
    numeric: set[str] = set()
    for entry in stats.values():
        numeric |= set(_numeric(entry))
    headline = [s for s in HEADLINE if s in numeric]
    rest = sorted(numeric - set(headline))
    sections = []
    for fn, it, prefix in calls:
        end = stats.get(prefix + ".end", {})
        files = end.get("files") or []
        links = " ".join(f'<a href="{html.escape(f)}">{html.escape(f)}</a>' for f in files)
        err = f'<p class="err">{html.escape(str(end["error"]))}</p>' if end.get("error") else ""
        if not end:
            err += '<p class="err">The call has no end entry: the run stopped inside it.</p>'
        title = f'{html.escape(fn)} #{it} <span class="muted">({html.escape(prefix)})</span>'
        sections.append(
            f'<h2 id="{html.escape(prefix)}">{title}</h2>{err}' + (f"<p>Files: {links}</p>" if links else "")
            + "<h3>Modules</h3>" + _modules(end) + _growth(end) + _fsdp(end)
        )
    overview = _side_by_side(stats, calls, headline) if calls else "<p>No call was collected.</p>"
    more = (f"<details><summary>All statistics ({len(rest)})</summary>{_side_by_side(stats, calls, rest)}</details>"
            if rest and calls else "")
    return (
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>memsight MemProfiler, rank {rank}</title><style>{_CSS}</style></head><body>"
        f"<h1>MemProfiler, rank {rank}</h1><p class=\"muted\">{len(calls)} collected call(s); "
        "Δ is end minus start.</p><h2>Start and end of each call</h2>"
        f"{overview}{more}{''.join(sections)}</body></html>\n"
    )


def write_page(folder: str, rank: int, stats: dict[str, Any]) -> str:
    path = page_path(folder, rank)
    write_atomic(path, render(rank, stats).encode("utf-8"))
    return path

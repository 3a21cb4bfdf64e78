"""Text and HTML tables of the line profiler's records.

The text is laid out as pytorch_memlab prints it: one ``## qualname`` block
per function, the column names split on ``.`` over three header rows, then
``line`` and the source (left-aligned), every cell right-aligned in a column
one character wider than its widest value. Byte columns use binary units with
two decimals (``40.00K``); lines that never ran have blank cells.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

NO_DATA_TEXT = "No data collected\n"
NO_DATA_HTML = "<p>No data collected</p>"
# Bar colours, one per column, in turn.
COLORS = ("#4878d0", "#ee854a", "#6acc64", "#d65f5f", "#956cb4",
          "#8c613c", "#dc7ec0", "#797979", "#d5bb67", "#82c6e2")
_UNITS = ("K", "M", "G", "T", "P")


def readable_size(num_bytes: float) -> str:
    """Binary units, two decimals, no space: 0.00B, 1023.00B, 1.50K, -4.00M; NaN is blank."""
    if isinstance(num_bytes, float) and math.isnan(num_bytes):
        return ""
    value, unit = float(num_bytes), "B"
    for u in _UNITS:
        if abs(value) < 1024:
            break
        value, unit = value / 1024, u
    return f"{value:.2f}{unit}"


@dataclass
class FunctionTable:
    """One function's rows: (line, source, {column: value or None})."""

    qualname: str
    rows: list[tuple[int, str, dict[str, int | None]]] = field(default_factory=list)


def _cell(column: str, value: int | None) -> str:
    if value is None:
        return ""
    return readable_size(value) if "byte" in column.split(".")[0] else str(value)


def _header_rows(columns: list[str]) -> list[list[str]]:
    """Three header rows; a label repeated from the column before (with its parents) is blank."""
    parts = [(c.split(".") + ["", "", ""])[:3] for c in columns]
    rows: list[list[str]] = [[], [], []]
    for i, p in enumerate(parts):
        for level in range(3):
            same = i > 0 and parts[i - 1][: level + 1] == p[: level + 1]
            rows[level].append("" if same else p[level])
    return rows


def format_text(tables: list[FunctionTable], columns: list[str]) -> str:
    if not tables:
        return NO_DATA_TEXT
    blocks = []
    heads = _header_rows(columns)
    for t in tables:
        code_width = max((len(src) for _, src, _ in t.rows), default=0)
        cols: list[tuple[list[str], list[str]]] = []
        for i, c in enumerate(columns):
            cells = [_cell(c, vals.get(c)) for _, _, vals in t.rows]
            cols.append(([heads[0][i], heads[1][i], heads[2][i]], cells))
        cols.append((["line", "", ""], [str(line) for line, _, _ in t.rows]))
        cols.append((["code".ljust(code_width), "", ""], [src.ljust(code_width) for _, src, _ in t.rows]))
        widths = [max([len(h) for h in head] + [len(v) + 1 for v in cells]) for head, cells in cols]
        lines = [" ".join(head[r].rjust(w) for (head, _), w in zip(cols, widths)) for r in range(3)]
        for n in range(len(t.rows)):
            lines.append(" ".join(cells[n].rjust(w) for (_, cells), w in zip(cols, widths)))
        blocks.append(f"## {t.qualname}\n\n" + "\n".join(lines) + "\n")
    return "\n\n".join(blocks)


def format_html(tables: list[FunctionTable], columns: list[str]) -> str:
    """A table per function, each stat cell with a bar scaled to the column's maximum."""
    if not tables:
        return NO_DATA_HTML
    maxes = {c: 0 for c in columns}
    for t in tables:
        for _, _, vals in t.rows:
            for c in columns:
                v = vals.get(c)
                if v is not None:
                    maxes[c] = max(maxes[c], v)
    out = []
    th = '<th style="text-align: left">{}</th>'
    for t in tables:
        head = "".join(th.format(html.escape(c)) for c in columns) + th.format("line") + th.format("code")
        body = []
        for line, src, vals in t.rows:
            tds = []
            for i, c in enumerate(columns):
                v = vals.get(c)
                style = ""
                if v is not None and maxes[c] > 0 and v > 0:
                    pct = min(99.0, 99.0 * v / maxes[c])
                    color = COLORS[i % len(COLORS)]
                    style = (f' style="background: linear-gradient(90deg, {color} {pct:.1f}%,'
                             f' transparent {pct:.1f}%)"')
                tds.append(f"<td{style}>{html.escape(_cell(c, v))}</td>")
            tds.append(f"<td>{line}</td>")
            tds.append('<td style="text-align: left; white-space: pre; font-family: monospace">'
                       f"{html.escape(src)}</td>")
            body.append("<tr>" + "".join(tds) + "</tr>")
        table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        out.append(f'<h3><span style="font-family: monospace">{html.escape(t.qualname)}</span></h3>'
                   f"<div>{table}</div>")
    return "\n".join(out)


def format_allocations(allocs: dict[tuple[str, int], list[int]], sources: dict[tuple[str, int], str]) -> str:
    """Per line, the allocations made while it ran: count, total and each size."""
    if not allocs:
        return "No allocations recorded (is allocator history on?)\n"
    out = []
    current = None
    for (qual, line), sizes in sorted(allocs.items()):
        if qual != current:
            out.append(f"{'' if current is None else chr(10)}## {qual}\n")
            current = qual
        shown = ", ".join(readable_size(s) for s in sizes[:8]) + (", ..." if len(sizes) > 8 else "")
        src = sources.get((qual, line), "").strip()
        out.append(f"{line:>6} {len(sizes):>5} x {readable_size(sum(sizes)):>9}  {src}  [{shown}]")
    return "\n".join(out) + "\n"

"""Text and HTML tables of the line profiler's records.

The text is what pytorch_memlab prints: its table is pandas'
``DataFrame.to_string(index=False)`` (pandas 1.x and 2.x alike), so this
module lays it out by pandas' rules, which tests/python/test_line_format.py
checks against pandas itself:

* one ``## qualname`` block per function; the column names split on ``.``
  over three header rows, a label repeated from the column before (with the
  same labels above it) left blank, except on the last row;
* every column as wide as its widest label or cell, everything
  right-aligned, columns joined by one space;
* byte columns (first part containing ``byte``) in binary units with two
  decimals (``40.00K``), blank where the line never ran;
* count columns as integers, unless a line never ran: then pandas holds the
  column as floats, shown as ``3.0`` and ``NaN``;
* ``line``, then the source, left-aligned and padded to the longest source
  line plus one (its newline), trailing spaces included.
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
    """One function's rows: (line, source without its newline, {column: value or None}).

    ``code_width`` is the longest source line with its line ending (what the
    code column is padded to); by default the longest row plus one.
    """

    qualname: str
    rows: list[tuple[int, str, dict[str, int | None]]] = field(default_factory=list)
    code_width: int | None = None


def _is_bytes(column: str) -> bool:
    return "byte" in column.split(".")[0]


def _float_cells(values: list[int | None]) -> list[str]:
    """pandas' fixed-width float column: '%.6f', trailing zeros trimmed alike from every
    number down to one decimal; scientific when that is wider than 12 and a value
    is above 1e6; NaN for a missing value."""
    cells = [None if v is None else f"{float(v):.6f}" for v in values]
    while any(c is not None for c in cells) and all(c.endswith("0") for c in cells if c is not None):
        cells = [None if c is None else c[:-1] for c in cells]
    cells = [None if c is None else c + "0" if c.endswith(".") else c for c in cells]
    widest = max(len(c) for c in cells if c is not None)
    if widest > 12 and any(abs(float(v)) > 1e6 for v in values if v is not None):
        cells = [None if v is None else f"{float(v):.6e}" for v in values]
    return ["NaN" if c is None else c for c in cells]


def _cell(column: str, value: int | None) -> str:
    """One HTML cell: sizes in binary units, counts as integers, blank where the line never ran."""
    if value is None:
        return ""
    return readable_size(value) if _is_bytes(column) else str(value)


def _column_cells(column: str, values: list[int | None]) -> list[str]:
    if _is_bytes(column):
        return ["" if v is None else readable_size(v) for v in values]
    if any(v is None for v in values):
        return _float_cells(values)
    return [str(v) for v in values]


def _header_rows(columns: list[str]) -> list[list[str]]:
    """Three header rows; a label equal to the column before's, as are the labels above it,
    is blank (never on the last row)."""
    parts = [(c.split(".") + ["", "", ""])[:3] for c in columns]
    rows: list[list[str]] = [[], [], []]
    for i, p in enumerate(parts):
        for level in range(3):
            same = level < 2 and i > 0 and parts[i - 1][: level + 1] == p[: level + 1]
            rows[level].append("" if same else p[level])
    return rows


def format_text(tables: list[FunctionTable], columns: list[str]) -> str:
    if not tables:
        return NO_DATA_TEXT
    blocks = []
    heads = _header_rows(columns + ["line", "code"])
    for t in tables:
        code_width = t.code_width if t.code_width else max((len(src) + 1 for _, src, _ in t.rows), default=0)
        cols: list[list[str]] = []
        for c in columns:
            cols.append(_column_cells(c, [vals.get(c) for _, _, vals in t.rows]))
        cols.append([str(line) for line, _, _ in t.rows])
        cols.append([src.ljust(code_width) for _, src, _ in t.rows])
        head = [list(level) for level in heads]
        head[0][-1] = "code".ljust(code_width)
        widths = [max([len(h[i]) for h in head] + [len(v) for v in cells]) for i, cells in enumerate(cols)]
        lines = [" ".join(h[i].rjust(w) for i, w in enumerate(widths)) for h in head]
        for n in range(len(t.rows)):
            lines.append(" ".join(cells[n].rjust(w) for cells, w in zip(cols, widths)))
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

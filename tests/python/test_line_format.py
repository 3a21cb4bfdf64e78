"""The line profiler's text against pandas itself.

pytorch_memlab prints its tables with pandas (``to_string(index=False)`` of
the records merged with the source lines); memsight lays them out without
pandas. Here random tables go through both: the pandas side repeats
pytorch_memlab's steps (the merge that leaves lines that never ran as NaN,
sizes formatted, the code column padded) and must give the same text."""

from __future__ import annotations

import random

import pytest

from memsight.torch.profilers._line_format import FunctionTable, format_text, readable_size

try:
    import pandas as pd
except ImportError:  # the literal-text test below still runs
    pd = None
needs_pandas = pytest.mark.skipif(pd is None, reason="pandas is the reference")

STATS = ["active_bytes.all.peak", "reserved_bytes.all.peak", "allocated_bytes.all.allocated",
         "allocated_bytes.small_pool.freed", "allocation.all.current", "allocation.all.allocated",
         "segment.large_pool.allocated", "inactive_split.all.peak", "requested_bytes.all.current",
         "oversize_allocations.x.current"]


def pandas_text(qualname: str, raw_lines: list[str], start: int, records: dict[int, dict[str, int]],
                columns: list[str]) -> str:
    """A function's block as pytorch_memlab makes it with pandas."""
    recorded = sorted(records)
    stats = pd.DataFrame([[records[ln][c] for c in columns] for ln in recorded], index=recorded,
                         columns=pd.MultiIndex.from_tuples([tuple(c.split(".")) for c in columns]))
    lines = pd.DataFrame.from_dict({"line": range(start, start + len(raw_lines)), "code": raw_lines})
    lines.columns = pd.MultiIndex.from_product([lines.columns, [""], [""]])
    merged = pd.merge(stats, lines, right_on="line", left_index=True, how="right")
    byte_cols = stats.columns[stats.columns.get_level_values(0).str.contains("byte")]
    width = max(len(c) for c in merged.code)
    merged[byte_cols] = merged[byte_cols].applymap(
        lambda v: "" if v != v else readable_size(v))  # v != v: NaN
    merged[("code".ljust(width), "", "")] = merged["code"].apply(lambda s: s.rstrip("\n\r").ljust(width))
    merged = merged.drop("code", axis=1, level=0)
    return f"## {qualname}\n\n{merged.to_string(index=False)}\n"


def memsight_text(qualname, raw_lines, start, records, columns):
    t = FunctionTable(qualname, code_width=max(map(len, raw_lines)))
    for n, src in enumerate(raw_lines):
        rec = records.get(start + n)
        t.rows.append((start + n, src.rstrip("\n\r"), {c: None if rec is None else rec[c] for c in columns}))
    return format_text([t], columns)


def random_case(rng: random.Random):
    columns = rng.sample(STATS, rng.randint(1, 5))
    n = rng.randint(1, 12)
    raw = []
    for i in range(n):
        body = "    " * rng.randint(0, 3) + "x" * rng.choice([0, 1, 5, 30, 90])
        raw.append(f"def f{i}():" if i == 0 else body)
    raw = [s + "\n" for s in raw]
    if rng.random() < 0.2:
        raw[-1] = raw[-1].rstrip("\n")  # a file without a final newline
    start = rng.randint(1, 5000)
    scale = rng.choice([10, 1000, 1 << 20, 1 << 40, 10 ** 13])
    ran = [ln for ln in range(start, start + n) if rng.random() < 0.7] or [start]
    if rng.random() < 0.3:
        ran = list(range(start, start + n))  # every line ran: counts stay integers
    records = {ln: {c: rng.randint(-scale // 10, scale) if rng.random() < 0.9 else 0 for c in columns}
               for ln in ran}
    return columns, raw, start, records


@needs_pandas
def test_matches_pandas_on_random_tables():
    rng = random.Random(12)
    for case in range(400):
        columns, raw, start, records = random_case(rng)
        expected = pandas_text("Net.forward", raw, start, records, columns)
        got = memsight_text("Net.forward", raw, start, records, columns)
        assert got == expected, (case, columns, records)


@needs_pandas
@pytest.mark.parametrize("values, cells", [
    ([3, None, 12], ["3.0", "NaN", "12.0"]),
    ([0, None], ["0.0", "NaN"]),
    ([-5, None, 7], ["-5.0", "NaN", "7.0"]),
    ([12345678901, None], ["1.234568e+10", "NaN"]),   # wider than 12 and above 1e6
    ([1234567890, None], ["1234567890.0", "NaN"]),     # 12 wide: still fixed
])
def test_count_columns_with_lines_that_never_ran_are_floats(values, cells):
    raw = ["def f():\n"] + [f"    x{i}\n" for i in range(len(values) - 1)]
    records = {10 + i: {"allocation.all.current": v} for i, v in enumerate(values) if v is not None}
    text = memsight_text("f", raw, 10, records, ["allocation.all.current"])
    got = [ln.split()[0] for ln in text.splitlines()[5:]]
    assert got == cells
    assert text == pandas_text("f", raw, 10, records, ["allocation.all.current"])


def test_the_readme_shape():
    raw = ["def outer():\n", "    linear = torch.nn.Linear(100, 100).cuda()\n"]
    records = {7: {"active_bytes.all.peak": 0, "reserved_bytes.all.peak": 0},
               8: {"active_bytes.all.peak": 40 << 10, "reserved_bytes.all.peak": 2 << 20}}
    text = memsight_text("outer", raw, 7, records, ["active_bytes.all.peak", "reserved_bytes.all.peak"])
    # No pandas here: the literal text, padded as pandas pads it.
    assert text.splitlines() == [
        "## outer",
        "",
        "active_bytes reserved_bytes line " + "code".ljust(46),
        "         all            all      " + " " * 46,
        "        peak           peak      " + " " * 46,
        "       0.00B          0.00B    7 " + "def outer():".ljust(46),
        "      40.00K          2.00M    8 " + "    linear = torch.nn.Linear(100, 100).cuda()".ljust(46),
    ]

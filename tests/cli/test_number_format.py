"""One number and plural format in every human-readable report (issue 33,
item 12): counts carry thousands separators and agree with their noun, as
src/util/text_format's count_of writes them; torch's own text is left as
torch writes it."""
from __future__ import annotations

import re
from pathlib import Path

DATA = Path(__file__).parents[1] / "data"


def test_diff_notes_count_with_separators_and_plurals(run):
    out = run("diff", DATA / "synthetic_annotated.pickle.gz", "--at", "peak").stdout.decode()
    assert "1 block size could not be replayed exactly and is estimated" in out, out
    out = run("diff", DATA / "synthetic_two_devices.pickle.gz", "--at", "peak").stdout.decode()
    assert re.search(r"note \(BEFORE\): \d{1,3}(,\d{3})+ blocks were freed", out), out


def test_whatif_self_check_counts_with_separators(run):
    out = run("whatif", DATA / "synthetic_two_devices.pickle.gz").stdout.decode()
    assert re.search(r"the trace frees \d{1,3},\d{3} blocks it never saw", out), out


def test_no_bare_four_digit_count_before_a_noun(run):
    nouns = r"(blocks?|entries|trace entries|events?|frees?|steps?|iterations?|allocations?)"
    for args in (["summary"], ["leaks"], ["whatif"], ["diff", "--at", "peak"]):
        for snap in DATA.glob("synthetic_*.pickle.gz"):
            text = run(args[0], snap, *args[1:]).stdout.decode()
            assert not re.search(rf"(?<![\d,.x])\d{{4,}} {nouns}\b", text), (args, snap)

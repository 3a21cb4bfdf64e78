"""Regression tests for what fuzzing found (tests/fuzz/README.md)."""
from __future__ import annotations

import pickle
from pathlib import Path

FUZZ = Path(__file__).parents[1] / "fuzz" / "corpus" / "snapshot"


def test_absent_size_does_not_leak_from_an_entry_given_up_half_way(run):
    # fuzz_roundtrip: the fast path read an entry's size, gave the entry up
    # to the generic path (its frames were a memo read of another list), and
    # the next entry it took, which has no size, got that size.
    f = FUZZ / "row-size-leak.pickle"
    last = pickle.loads(f.read_bytes())["device_traces"][0][-1]
    assert "size" not in last
    r = run("trace", f)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines()[-2:] == [
        f"c = MEM[{last['addr']}:0.0B]", "TOTAL MEM: 2.0B"]


def test_str_that_is_not_utf8_is_refused(run, tmp_path):
    # fuzz_roundtrip: such a str was kept and written back where pickle.loads
    # refuses it. Python's pickle never writes one (a lone surrogate, which
    # it writes as three bytes, still reads).
    good = pickle.dumps({"segments": [], "device_traces": [], "x": "abc"}, protocol=4)
    bad = good.replace(b"\x8c\x03abc", b"\x8c\x03a\xffc")
    assert bad != good
    f = tmp_path / "s.pickle"
    f.write_bytes(bad)
    r = run("summary", f)
    assert r.returncode == 2
    assert r.stderr.decode() == f"memsight summary: {f}: corrupted pickle: a str is not valid UTF-8\n"

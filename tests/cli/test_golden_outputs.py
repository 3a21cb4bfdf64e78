"""Every command's text and JSON on every fixture, as pinned in tests/golden
(tests/golden/cases.py says how the files were made and how to make them anew
when an output is meant to change)."""
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests" / "golden"))
import cases  # noqa: E402

CASES = cases.cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_is_pinned(name, memsight_bin, monkeypatch):
    monkeypatch.setenv("MEMSIGHT_BIN", memsight_bin)
    want = cases.golden_path(name)
    assert want.exists(), f"no golden file for {name}: run tests/golden/cases.py --update"
    got = cases.run_case(CASES[name])
    if got != want.read_bytes():
        # The first differing line, so that the failure says what moved.
        for i, (a, b) in enumerate(zip(got.splitlines(), want.read_bytes().splitlines())):
            if a != b:
                pytest.fail(f"{name}, line {i + 1}:\n  got  {a[:300]!r}\n  want {b[:300]!r}")
        pytest.fail(f"{name}: lengths differ ({len(got)} bytes, golden {len(want.read_bytes())})")

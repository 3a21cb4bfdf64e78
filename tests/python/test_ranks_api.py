"""memsight.ranks(): `memsight ranks` from Python, on real snapshots
(tests/data) standing in for four ranks; rank 2 the capped OOM."""

from __future__ import annotations

import json
import os
import shutil

import pytest

import memsight


@pytest.fixture
def four_ranks(tmp_path, data_dir):
    d = tmp_path / "ranks"
    d.mkdir()
    for r, name in enumerate(["mlp_train", "mlp_train", "oom", "mlp_train"]):
        shutil.copy(data_dir / f"{name}.pickle", d / f"rank{r}.pickle")
    return d


def test_the_report_as_python_objects(four_ranks, core):
    rep = memsight.ranks(four_ranks)
    assert isinstance(rep, memsight.Ranks)
    assert [r.rank for r in rep.ranks] == [0, 1, 2, 3]
    assert all(r.rank_from == "file name" for r in rep.ranks)
    two = rep.rank(2)
    assert two.ooms[0].verdict == "limit"
    # the same numbers as the CLI's JSON and summary's
    assert two.peak_allocated.bytes == memsight.load(four_ranks / "rank2.pickle").summary()["devices"][0][
        "peak_allocated"]
    assert rep.typical_rank == 0 and [o.rank for o in rep.differ] == [2]
    # a "text" of the report's own data reads as an attribute too (the OOM's explanation)
    assert rep.ooms[0].text == rep["ooms"][0]["text"] and rep.ooms[0].text.startswith("Rank 2 was different")
    assert rep.text.startswith("4 ranks, 1 ran out of memory\n")
    with pytest.raises(KeyError):
        rep.rank(7)
    # a list, in any order, and a pattern name the same ranks
    listed = memsight.ranks([four_ranks / f"rank{r}.pickle" for r in (3, 1, 0, 2)])
    assert json.dumps(listed["median"]) == json.dumps(rep["median"])
    assert [r.rank for r in memsight.ranks(str(four_ranks / "rank[01].pickle")).ranks] == [0, 1]


def test_the_page_and_the_rank_pages(four_ranks, tmp_path, core):
    out = memsight.ranks(four_ranks).write_html(tmp_path / "r.html")
    assert out == str(tmp_path / "r.html") and os.path.getsize(out) > 0
    assert sorted(os.listdir(tmp_path / "r.ranks")) == ["rank0.html", "rank2.html"]
    memsight.ranks(four_ranks).write_html(tmp_path / "all.html", pages="all")
    assert len(os.listdir(tmp_path / "all.ranks")) == 4
    with pytest.raises(memsight.MemsightError, match="pages: notable, all or none"):
        memsight.ranks(four_ranks).write_html(tmp_path / "x.html", pages="some")
    assert not (tmp_path / "x.html").exists()


def test_errors_name_the_file(four_ranks, core):
    (four_ranks / "rank9.pickle").write_text("not a snapshot\n")
    with pytest.raises(memsight.MemsightError, match=r"rank9\.pickle: text, not a memory snapshot"):
        memsight.ranks(four_ranks)
    with pytest.raises(memsight.MemsightError, match="no file matches"):
        memsight.ranks(str(four_ranks / "nothing_*.pickle"))

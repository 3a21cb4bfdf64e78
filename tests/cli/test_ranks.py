"""`memsight ranks` on synthetic per-rank snapshots (tests/data/make_categories.py:
a simulated caching allocator under a scripted training loop, whose every
block's kind is known): eight ranks alike but rank 5, whose activations are
three times larger, and rank 3, which runs out of memory."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import pickle
import re
import sys

import pytest

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
sys.path.insert(0, str(DATA))
import make_categories as mc  # noqa: E402

MiB = 1 << 20


def simulate(rank: int):
    act = 6 * MiB if rank == 5 else 2 * MiB
    sim = mc.Sim("marks", tags=True)
    snap = mc.train(sim, steps=2, layers=4, act=act, oom_at_step=1 if rank == 3 else None)
    return sim, snap


def meta(rank: int, **kw) -> dict:
    m = {"rank": rank, "world_size": 8, "seq": 4, "tag": "oom", "origin_rank": 3, "torch": "2.5.1",
         "device_name": "NVIDIA H100 80GB HBM3", "device_total": 80 << 30}
    m.update(kw)
    return m


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """OUT/oom_4_rank{r}.pickle for 8 ranks, and each rank's simulation."""
    out = tmp_path_factory.mktemp("job")
    sims = {}
    for r in range(8):
        sim, snap = simulate(r)
        snap["memsight_rank"] = meta(r)
        (out / f"oom_4_rank{r}.pickle").write_bytes(pickle.dumps(snap, protocol=4))
        sims[r] = sim
    return out, sims


def ranks_json(run, *args):
    r = run("ranks", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def kind_bytes(truth: dict, kind: str) -> int:
    return truth.get(kind, [0, 0])[0]


def test_every_rank_side_by_side_and_the_one_that_differs(run, job):
    out, sims = job
    rep = ranks_json(run, out)
    assert [r["rank"] for r in rep["ranks"]] == list(range(8))
    assert all(r["rank_from"] == "memsight_rank" and r["origin"]["seq"] == 4 for r in rep["ranks"])
    assert rep["world_size"] == 8 and rep["missing"] == [] and rep["mismatches"] == []
    # each rank's numbers are `memsight summary`'s (torch's counters, replayed)
    for r in (0, 3, 5):
        s = json.loads(run("summary", out / f"oom_4_rank{r}.pickle", "--json").stdout)["devices"][0]
        got = rep["ranks"][r]
        assert got["peak_allocated"] == {"bytes": s["peak_allocated"], "event": s["peak_allocated_event"],
                                         "time_us": s["peak_allocated_time_us"]}
        assert got["peak_reserved"]["bytes"] == s["peak_reserved"]
        assert got["at_dump"]["allocated"] == s["allocated_now"]
    # six ranks are alike: the median is theirs, and rank 0 is the typical one
    assert rep["median"]["peak_allocated"] == rep["ranks"][0]["peak_allocated"]["bytes"]
    assert rep["typical_rank"] == 0
    assert [d["rank"] for d in rep["differ"]] == [3, 5]
    five = rep["differ"][1]["deltas"][0]
    assert five["metric"] == "peak_allocated"
    assert five["value"] - five["median"] == rep["ranks"][5]["peak_allocated"]["bytes"] - rep["ranks"][0][
        "peak_allocated"]["bytes"] > 0
    # by kind, against the truth of the simulation at each rank's peak
    ev5, ev0 = rep["ranks"][5]["peak_allocated"]["event"], rep["ranks"][0]["peak_allocated"]["event"]
    act = next(p for p in five["by"] if p["kind"] == "kind" and p["name"] == "activation")
    assert act["delta"] == kind_bytes(sims[5].expected(ev5), "activation") - kind_bytes(
        sims[0].expected(ev0), "activation")
    assert act["delta"] > 0 and act == five["by"][0]  # the largest part
    assert any(p["kind"] == "module" and p["name"].startswith("layers.") for p in five["by"])
    # rank 3 ran out of memory holding what every rank holds: not different, only first
    assert [o["rank"] for o in rep["ooms"]] == [3]
    assert rep["ooms"][0]["different"] is False
    assert rep["ranks"][3]["ooms"][0]["verdict"] == "demand"


def test_the_text_report(run, job):
    out, _ = job
    r = run("ranks", out)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert text.startswith("8 ranks (oom round 4, world size 8), 1 ran out of memory\n")
    assert "OUT OF MEMORY on rank 3, trace entry" in text and ": demand" in text
    assert "Rank 3 was not different, only the one that failed" in text
    flat = " ".join(text.split())  # the report wraps at 100 columns
    assert "rank 5: peak allocated" in flat and "by kind: activation +" in flat
    assert "(typical: rank 0)" in text


def test_a_directory_a_glob_a_list_and_a_manifest_name_the_same_files(run, job, tmp_path):
    out, _ = job
    files = [str(out / f"oom_4_rank{r}.pickle") for r in range(8)]
    whole = ranks_json(run, out)
    assert ranks_json(run, str(out / "oom_4_rank*.pickle")) == whole
    listed = ranks_json(run, *reversed(files))
    assert [r["rank"] for r in listed["ranks"]] == list(range(8))
    assert listed["median"] == whole["median"] and listed["differ"] == whole["differ"]
    manifest = tmp_path / "oom_4_manifest.json"
    manifest.write_text(json.dumps({
        "memsight_rank_dumps": 1, "seq": 4, "tag": "oom", "world_size": 8,
        "ranks": [{"rank": r, "file": f} for r, f in enumerate(files[:7])],
        "missing": [{"rank": 7, "why": "did not answer within 30 s"}]}))
    rep = ranks_json(run, manifest, "--allow-absolute")  # absolute paths elsewhere: read there
    assert [r["rank"] for r in rep["ranks"]] == list(range(7))
    assert rep["missing"] == [7] and rep["missing_ranges"] == [[7, 7]] and rep["missing_cut"] is False
    assert rep["manifest_missing"] == [{"rank": 7, "why": "did not answer within 30 s"}]
    text = run("ranks", manifest, "--allow-absolute").stdout.decode()
    assert "missing: no dump of rank 7" in text and "rank 7 wrote nothing: did not answer within 30 s" in text


def test_mismatched_versions_devices_and_rounds_are_named(run, tmp_path):
    for r in range(4):
        _, snap = simulate(0)
        snap["memsight_rank"] = meta(r, world_size=4, torch="2.4.0" if r == 3 else "2.5.1",
                                     device_name="NVIDIA A100-SXM4-40GB" if r == 0 else "NVIDIA H100 80GB HBM3",
                                     seq=5 if r == 2 else 4)
        (tmp_path / f"r{r}.pickle").write_bytes(pickle.dumps(snap, protocol=4))
    rep = ranks_json(run, tmp_path)
    assert rep["mismatches"] == [
        "torch versions differ: 2.4.0 (rank 3), 2.5.1 (ranks 0-2)",
        "devices differ: NVIDIA A100-SXM4-40GB, 80.0GiB (rank 0), NVIDIA H100 80GB HBM3, 80.0GiB (ranks 1-3)",
        "the dumps come from different rounds: oom round 4 (ranks 0, 1, 3), oom round 5 (rank 2)",
    ]
    assert rep["differ"] == []


def test_many_ranks_the_text_lists_the_notable_ones(run, tmp_path):
    _, same = simulate(0)
    _, big = simulate(5)
    (tmp_path / "same.pickle").write_bytes(pickle.dumps(same, protocol=4))
    (tmp_path / "big.pickle").write_bytes(pickle.dumps(big, protocol=4))
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for r in range(40):  # hard links: 40 inputs, two files
        os.link(tmp_path / ("big.pickle" if r == 17 else "same.pickle"), ranks / f"snap_rank{r}.pickle")
    r = run("ranks", ranks)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    rows = [line for line in text.splitlines() if line[:6].strip().isdigit()]
    assert [int(line.split()[0]) for line in rows] == [0, 17]  # the typical rank and the outlier
    assert "... 38 more ranks (--json or the page lists every rank)" in text
    rep = ranks_json(run, ranks)
    assert [x["rank"] for x in rep["ranks"]] == list(range(40))
    assert all(x["rank_from"] == "file name" for x in rep["ranks"])
    assert [d["rank"] for d in rep["differ"]] == [17]


def test_the_page_and_the_notable_ranks_pages(run, job, tmp_path):
    out, _ = job
    page = tmp_path / "report.html"
    r = run("ranks", out, "-o", page)
    assert r.returncode == 0, r.stderr
    folder = tmp_path / "report.ranks"
    assert sorted(os.listdir(folder)) == ["rank0.html", "rank3.html", "rank5.html"]
    assert r.stderr.decode() == f"wrote {page} and 3 rank pages in {folder}/\n"
    html = page.read_text()
    data = json.loads(html.split('id="memsight-ranks" type="application/json">')[1].split("</script>")[0])
    assert data["kind"] == "ranks" and len(data["report"]["ranks"]) == 8
    assert data["pages"] == ["./report.ranks/rank0.html", "", "", "./report.ranks/rank3.html", "",
                             "./report.ranks/rank5.html", "", ""]
    assert "<title>rank 3 - oom_4_rank3.pickle - memsight</title>" in (folder / "rank3.html").read_text()
    none = tmp_path / "none.html"
    assert run("ranks", out, "-o", none, "--pages", "none").returncode == 0
    assert not (tmp_path / "none.ranks").exists()
    every = tmp_path / "every.html"
    assert run("ranks", out, "-o", every, "--pages", "all").returncode == 0
    assert len(os.listdir(tmp_path / "every.ranks")) == 8


@pytest.mark.parametrize("args, message", [
    (["nope.pickle"], "memsight ranks: nope.pickle: No such file or directory"),
    (["empty"], "memsight ranks: empty: no snapshot files (*.pickle, *.pkl, compressed or not) in this directory"),
    (["none_*.pickle"], "memsight ranks: none_*.pickle: no file matches"),
    (["text.pickle"], "memsight ranks: text.pickle: text, not a memory snapshot"),
    (["a.pickle", "--pages", "all"], "memsight ranks: --pages writes rank pages beside a page: name one with -o NAME.html"),
    (["a.pickle", "-o", "x.svg"], "memsight ranks: -o x.svg names an SVG flamegraph (.svg), which `memsight ranks` does not"),
    (["a.pickle", "--jobs", "0"], "memsight ranks: --jobs takes a number of files to read at once, 1 to 256, not '0'"),
    (["a.pickle", "b.pickle"], "memsight ranks: rank 0 appears twice: a.pickle and b.pickle; give the files of "
                               "one dump round (e.g. oom_5_manifest.json or 'oom_5_rank*.pickle')"),
    (["bad_manifest.json"], "memsight ranks: bad_manifest.json: not a memsight dump manifest"),
    (["a.pickle", "c.pickle.gz", "--max-expanded", "4K"],  # the limit holds on every reading thread
     "memsight ranks: c.pickle.gz: gzip: the input expands past 4096 bytes (4.0 KiB), the --max-expanded limit"),
    (["empty_manifest.json"], "memsight ranks: empty_manifest.json: the manifest lists no snapshot file"),
    (["odd_manifest.json"], "memsight ranks: odd_manifest.json: malformed JSON at byte 34: expected '{'"),
])
def test_bad_input_is_one_line_and_status_2(run, tmp_path, args, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "text.pickle").write_text("hello\n")
    _, snap = simulate(0)
    for name, seq in (("a.pickle", 4), ("b.pickle", 5)):  # rank 0 of two rounds
        snap["memsight_rank"] = meta(0, seq=seq)
        (tmp_path / name).write_bytes(pickle.dumps(snap, protocol=4))
    (tmp_path / "c.pickle.gz").write_bytes(gzip.compress((tmp_path / "a.pickle").read_bytes()))
    (tmp_path / "bad_manifest.json").write_text('{"ranks": []}')
    (tmp_path / "empty_manifest.json").write_text('{"memsight_rank_dumps": 1, "ranks": []}')
    (tmp_path / "odd_manifest.json").write_text('{"memsight_rank_dumps":1,"ranks":[5]}')
    r = run("ranks", *args, cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1, err
    assert err.startswith(message), err
    assert not (tmp_path / "x.svg").exists()


def test_the_page_cuts_long_frame_names(run, tmp_path):
    from test_input_limits import alloc, segment, snapshot

    name = "fn_" + "x" * (1 << 20)
    frames = [{"name": name, "filename": "train.py", "line": 3}]
    (tmp_path / "job").mkdir()
    for rank in range(2):
        snap = snapshot([[alloc(1 << 40, 2 << 20, 1, name=name)]], [segment(2 << 20, frames)])
        (tmp_path / "job" / f"s_rank{rank}.pickle").write_bytes(pickle.dumps(snap, protocol=4))
    page = tmp_path / "r.html"
    assert run("ranks", tmp_path / "job", "-o", page, "--pages", "none").returncode == 0
    html = page.read_text()
    assert "x" * 20000 not in html and len(html) < 1_000_000
    assert re.search(r"\[cut at 16384 of \d+ bytes\]", html)
    # the JSON report cuts names as summary --json does, saying how long they were
    report = json.dumps(ranks_json(run, tmp_path / "job"), ensure_ascii=False)
    assert name not in report and f"[cut at 16384 of {len(name)} bytes]" in report


def test_a_rank_of_alike_and_empty_devices(run, tmp_path):
    # Alike devices are summarised as one group: a rank still counts each
    # device with something on it, leaves the empty ones out, and summarises
    # its busiest device by its number.
    from test_input_limits import alloc, snapshot

    (tmp_path / "job").mkdir()
    for rank in range(2):
        one = [alloc(1 << 20, 512, 1)]  # devices 0-3, alike
        busy = [alloc(1 << 20, 512, 1), alloc(2 << 20, 4 * MiB, 2)]
        traces = [one] * 4 + [busy if rank == 1 else one] + [[]] * 3  # 5-7 empty
        (tmp_path / "job" / f"s_rank{rank}.pickle").write_bytes(pickle.dumps(snapshot(traces), protocol=4))
    j = ranks_json(run, tmp_path / "job")
    r0, r1 = sorted(j["ranks"], key=lambda r: r["rank"])
    assert r0["devices"] == 5 and r1["devices"] == 5
    assert r0["device"] == 0 and r1["device"] == 4
    assert r1["peak_allocated"]["bytes"] == 4 * MiB + 512 and r0["peak_allocated"]["bytes"] == 512
    assert any("ranks 0, 1 used several devices" in n for n in j["notes"])

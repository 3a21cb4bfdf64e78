"""`memsight diff`: its numbers are summary's (torch's counters, replayed)
at the same moments, the sites' changes add up to the change in allocated
memory, planted growth is found where it was planted, and snapshots of
different devices or ranks are refused unless asked."""

from __future__ import annotations

import json
import pathlib
import pickle
import shutil
import sys
import xml.etree.ElementTree as ET

import pytest

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
sys.path.insert(0, str(DATA))
import make_leaks as ml  # noqa: E402

FIXTURES = sorted(p.stem for p in DATA.glob("*.pickle"))
MiB = 1 << 20


def diff_json(run, *args) -> dict:
    r = run("diff", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def ml_snapshot(path) -> dict:
    with open(path, "rb") as fh:
        return pickle.load(fh)


def summary_of(run, path, device=0) -> dict:
    r = run("summary", "--json", path)
    assert r.returncode == 0, r.stderr
    return next(d for d in json.loads(r.stdout)["devices"] if d["device"] == device)


@pytest.mark.parametrize("name", FIXTURES)
def test_numbers_are_summarys_and_the_sites_add_up(run, name):
    f = DATA / f"{name}.pickle"
    d = diff_json(run, f, "--at", "peak")
    s = summary_of(run, f, d["before"]["device"])
    b, a = d["before"], d["after"]
    assert b["event"] == s["peak_allocated_event"] and a["event"] == s["entries"] - 1
    assert b["allocated"] == s["peak_allocated"]
    if s["exact"]:  # the replay agrees with the snapshot's blocks
        assert a["allocated"] == s["allocated_now"] and a["active"] == s["active_now"]
    if s["exact"]:  # both leave graph pools' free blocks out
        assert a["free"] == s["free_now"] and a["largest_free"] == s["largest_free_now"]
        assert a["fragmentation"] == pytest.approx(s["fragmentation"], abs=1e-6)
        assert a.get("graph_pool_free", 0) == s["graph_pools"]["free"]
    assert a["reserved"] == s["reserved_now"]
    assert sum(x["change"] for x in d["sites"]) == d["change"]["allocated"] == a["allocated"] - b["allocated"]
    assert sum(x["after"] for x in d["sites"]) == a["allocated"]
    assert sum(x["before"] for x in d["sites"]) == b["allocated"]
    assert sum(c["after"] for c in d["by_category"].values()) == a["allocated"]
    at_snapshot = s["categories"]["at_snapshot"]["by_category"]
    assert {k: v["after"] for k, v in d["by_category"].items()} == {k: v["bytes"] for k, v in at_snapshot.items()}


def test_the_same_snapshot_twice_changes_nothing(run):
    d = diff_json(run, DATA / "transformer_train.pickle", DATA / "transformer_train.pickle")
    assert d["change"] == {"allocated": 0, "active": 0, "reserved": 0, "free": 0}
    assert {x["status"] for x in d["sites"]} == {"same"}


def test_planted_growth_between_two_snapshots(run, tmp_path):
    early, late = tmp_path / "early.pickle", tmp_path / "late.pickle"
    early.write_bytes(pickle.dumps(ml.loop(steps=10, keep_output=True), protocol=4))
    late.write_bytes(pickle.dumps(ml.loop(steps=20, keep_output=True), protocol=4))
    d = diff_json(run, early, late)
    top = d["sites"][0]
    assert (top["site"], top["status"], top["change"]) == (ml.OUTPUT_SITE, "grew", 10 * MiB)
    assert (top["before_count"], top["after_count"]) == (10, 20)
    assert d["change"]["allocated"] == 10 * MiB
    assert [x for x in d["sites"] if x["status"] != "same"] == [top]


def test_two_moments_of_one_snapshot_by_step(run, tmp_path):
    f = tmp_path / "graph.pickle"
    f.write_bytes(pickle.dumps(ml.loop(steps=30, keep_loss=True, keep_output=True), protocol=4))
    d = diff_json(run, f, "--at-step", "5", "--at-step", "25")
    assert d["before"]["at"] == "step:5" and d["after"]["at"] == "step:25"
    changed = {x["site"]: x["change"] for x in d["sites"] if x["change"]}
    assert changed == {ml.OUTPUT_SITE: 20 * MiB, ml.LOSS_SITE: 20 * 512}
    assert d["by_category"]["unknown"]["after"] - d["by_category"]["unknown"]["before"] == 20 * MiB + 20 * 512
    # --at step:N is the same moment; one moment means "to the end"
    same = diff_json(run, f, "--at", "step:5", "--at", "step:25")
    assert same == d
    to_end = diff_json(run, f, "--at-step", "5")
    assert to_end["after"]["at"] == "snapshot"
    text = run("diff", f, "--at-step", "5", "--at-step", "25").stdout.decode()
    assert "at the start of step 5 (before trace entry" in text
    assert "grew: 2 sites, +20.0MiB" in text
    assert "the sites' changes add up to +20.0MiB, the change in allocated memory" in text


def test_outputs_by_name(run, tmp_path):
    f = tmp_path / "graph.pickle"
    f.write_bytes(pickle.dumps(ml.loop(steps=12, keep_output=True, cache_steps=0), protocol=4))
    svg = tmp_path / "d.svg"
    r = run("diff", f, "--at-step", "2", "-o", svg)
    assert r.returncode == 0, r.stderr
    # The outputs kept from step 2 on: 10 more blocks, whose sizes the
    # snapshot holds (a 1 MiB request takes a whole 2 MiB free block when
    # splitting it would leave no more than 1 MiB).
    top = diff_json(run, f, "--at-step", "2")["sites"][0]
    assert (top["site"], top["before_count"], top["after_count"]) == (ml.OUTPUT_SITE, 2, 12)
    snap = ml_snapshot(f)
    outputs = {e["addr"] for e in snap["device_traces"][0]
               if e["action"] == "alloc" and e["frames"] and e["frames"][0] == ml.OUTPUT}
    kept = [b for s in snap["segments"] for b in s["blocks"]
            if b["state"] == "active_allocated" and b["address"] in outputs]
    assert top["after"] == sum(b["size"] for b in kept) and len(kept) == 12
    root = ET.parse(svg).getroot()
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert any(t.startswith("grew (") for t in titles)
    assert any(t.startswith("model.py:21:forward (") and f"{top['change']:,} bytes" in t for t in titles)
    assert 'fill="rgb(215,60,60)"' in svg.read_text()  # "grew" is red
    folded = tmp_path / "d.folded"
    assert run("diff", f, "--at-step", "2", "-o", folded).returncode == 0
    lines = folded.read_text().splitlines()
    assert all(ln.startswith(("grew;", "shrank;")) for ln in lines)
    page = tmp_path / "d.html"
    assert run("diff", f, "--at-step", "2", "-o", page).returncode == 0
    html = page.read_text()
    assert "<svg" in html and "<?xml" not in html and "model.py:21:forward" in html
    assert "http://" not in html and "https://" not in html  # nothing that could be fetched
    assert 'data-status="grew"' in html


def test_refusals_are_one_line(run, tmp_path):
    r0, r1 = tmp_path / "rank0_oom.pickle", tmp_path / "rank1_oom.pickle"
    shutil.copy(DATA / "oom.pickle", r0)
    shutil.copy(DATA / "oom.pickle", r1)
    empty = tmp_path / "empty.pickle"
    empty.write_bytes(pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=4))
    cases = [
        ((r0, r1), b"snapshots of different ranks; pass --allow-mismatch"),
        ((DATA / "two_devices.pickle", DATA / "oom.pickle", "--device", "1,0"), b"moments of different GPUs"),
        ((DATA / "oom.pickle",), b"one snapshot needs a moment to compare with its end"),
        ((DATA / "oom.pickle", "--at", "1", "--at", "2", "--at", "3"), b"at most two moments"),
        ((DATA / "oom.pickle", "--at", "99999"),
         b"trace entry 99999 is not in device 0's trace (entries 0 to 146, or -1 for before the first)"),
        ((empty, "--at", "0"), b"trace entry 0 is not in device 0's trace (it has no entries: -1 is the state "
                               b"before the first)"),
        ((DATA / "oom.pickle", "--at", "later"), b"'later' is not a moment"),
        ((DATA / "oom.pickle", "--at-step", "x"), b"--at-step takes a step number"),
        ((DATA / "oom.pickle", "--at-step", "3"), b"no iterations to name by step"),
        ((DATA / "oom.pickle", DATA / "oom.pickle", "--device", "7"), b"the snapshot has no device 7"),
        ((DATA / "oom.pickle", DATA / "oom.pickle", "-o", tmp_path / "x.pickle"), b"does not write"),
        ((DATA / "oom.pickle", DATA / "oom.pickle", "--json", "-o", tmp_path / "x.svg"), b"--json writes JSON"),
    ]
    for args, message in cases:
        r = run("diff", *args)
        assert r.returncode == 2, (args, r.stdout)
        assert r.stderr.startswith(b"memsight diff: ") and r.stderr.count(b"\n") == 1, r.stderr
        assert message in r.stderr, r.stderr
    assert not list(tmp_path.glob("x.*"))
    assert run("diff", r0, r1, "--allow-mismatch").returncode == 0
    d = diff_json(run, DATA / "two_devices.pickle", DATA / "oom.pickle", "--device", "1,0", "--allow-mismatch")
    assert (d["before"]["device"], d["after"]["device"]) == (1, 0)

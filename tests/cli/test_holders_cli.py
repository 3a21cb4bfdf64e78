"""Who holds a leak (issue 33, "Who holds it"): the snapshot's
memsight_holders laid over the leaking sites, in leaks' text and JSON."""

from __future__ import annotations

import json
import pathlib
import pickle
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "data"))
import make_holders as mh  # noqa: E402
import make_leaks as ml  # noqa: E402


def leaks_of(run, tmp_path, snap: dict, *args: str):
    f = tmp_path / "held.pickle"
    f.write_bytes(pickle.dumps(snap, protocol=4))
    r = run("leaks", f, *args)
    assert r.returncode == 0, r.stderr
    return r.stdout.decode()


def test_the_leak_names_the_list_that_holds_it_and_its_line(run, tmp_path):
    snap = mh.held(ml.loop(steps=30, keep_output=True), ml.OUTPUT, "__main__.kept")
    text = leaks_of(run, tmp_path, snap)
    flat = " ".join(text.split())
    assert "blocks of 1.0MiB, one per step, held by the list `kept` (train.py, `__main__`)" in flat
    assert "Who keeps it (named by memsight.torch at the dump): the list `kept` (train.py, `__main__`), " \
           "assigned at train.py:12" in flat


def test_the_json_gives_the_holder_of_each_leaking_site(run, tmp_path):
    snap = mh.held(ml.loop(steps=30, keep_output=True, keep_loss=True), ml.OUTPUT, "train:cache",
                   kind="dict", module="__main__", line=40)
    (dev,) = json.loads(leaks_of(run, tmp_path, snap, "--json"))["devices"]
    by_site = {s["site"]: s for s in dev["sites"]}
    held = by_site[ml.OUTPUT_SITE]["held_by"]
    assert (held["path"], held["type"], held["line"], held["of_newest"]) == ("train:cache", "dict", 40, 5)
    assert "held_by" not in by_site[ml.LOSS_SITE]  # nothing names the losses


def test_a_frame_local_holder_is_named_with_its_function(run, tmp_path):
    snap = mh.held(ml.loop(steps=30, keep_output=True), ml.OUTPUT, "train:cache", kind="dict")
    flat = " ".join(leaks_of(run, tmp_path, snap).split())
    assert "held by the dict `cache` (train.py, in `train()`)" in flat


def test_storages_inside_a_block_and_graphs_are_matched(run, tmp_path):
    snap = mh.held(ml.loop(steps=30, keep_output=True), ml.OUTPUT, "evaluate:outputs", suffix=".grad_fn",
                   offset=512)
    flat = " ".join(leaks_of(run, tmp_path, snap).split())
    assert "kept by the autograd graphs of the tensors held by the list `outputs`" in flat
    assert "torch.no_grad()" in flat


def test_without_holders_or_with_a_broken_value_nothing_is_said(run, tmp_path):
    snap = ml.loop(steps=30, keep_output=True)
    assert "held by" not in leaks_of(run, tmp_path, snap)
    for broken in ({"holders": "x"}, {"holders": [{"path": "k"}], "storages": [{"device": 0, "addr": "1",
                                                                                "holder": 0}]},
                   {"holders": [], "storages": [{"device": 0, "addr": 1, "holder": 3}]}, []):
        snap["memsight_holders"] = broken
        assert "held by" not in leaks_of(run, tmp_path, snap)


def test_summary_says_what_each_holder_keeps_at_the_dump(run, tmp_path):
    snap = mh.held(ml.loop(steps=30, keep_output=True, keep_loss=True), ml.OUTPUT, "__main__.kept")
    snap = mh.held(snap, ml.LOSS, "train:losses", line=44)
    f = tmp_path / "held.pickle"
    f.write_bytes(pickle.dumps(snap, protocol=4))
    r = run("summary", f)
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.decode().split())
    assert ("Held at the dump (named by memsight.torch): the list `kept` (train.py, `__main__`) 30 blocks, "
            "31.0MiB; the list `losses` (train.py, in `train()`) 30 blocks, 15.0KiB.") in flat
    del snap["memsight_holders"]
    f.write_bytes(pickle.dumps(snap, protocol=4))
    assert "Held at the dump" not in run("summary", f).stdout.decode()


def test_diff_gives_each_holder_before_and_after_at_the_dumps(run, tmp_path):
    a, b = tmp_path / "a.pickle", tmp_path / "b.pickle"
    a.write_bytes(pickle.dumps(mh.held(ml.loop(steps=10, keep_output=True), ml.OUTPUT, "__main__.kept"), protocol=4))
    b.write_bytes(pickle.dumps(mh.held(ml.loop(steps=30, keep_output=True), ml.OUTPUT, "__main__.kept"), protocol=4))
    r = run("diff", a, b)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert ("by holder (named by memsight.torch at each dump), largest change first:\n"
            "    the list `kept` (train.py, `__main__`): 11.0MiB -> 31.0MiB (+20.0MiB, +20 blocks)\n") in text
    # two moments before the dump: the holders were named at the dump only
    r = run("diff", b, "--at", "step:3", "--at", "step:20")
    assert r.returncode == 0 and "by holder" not in r.stdout.decode()
    r = run("diff", b, "--at", "step:3")  # step 3 against the dump: one side has no holders
    assert r.returncode == 0 and "by holder" not in r.stdout.decode()


def test_the_key_round_trips_through_convert(run, tmp_path):
    snap = mh.held(ml.loop(steps=5, keep_output=True), ml.OUTPUT, "__main__.kept")
    f, out = tmp_path / "held.pickle", tmp_path / "again.pickle"
    f.write_bytes(pickle.dumps(snap, protocol=4))
    r = run("convert", f, "-o", out)
    assert r.returncode == 0, r.stderr
    assert pickle.loads(out.read_bytes())["memsight_holders"] == snap["memsight_holders"]


def test_summary_and_diff_json_give_the_holders_at_the_dump(run, tmp_path):
    snap = mh.held(ml.loop(steps=30, keep_output=True, keep_loss=True), ml.OUTPUT, "__main__.kept")
    snap = mh.held(snap, ml.LOSS, "train:losses", line=44)
    f = tmp_path / "held.pickle"
    f.write_bytes(pickle.dumps(snap, protocol=4))
    (dev,) = json.loads(run("summary", f, "--json").stdout)["devices"]
    rows = [(h["path"], h["type"], h["module"], h["line"], h["blocks"]) for h in dev["holders"]]
    assert rows == [("__main__.kept", "list", "__main__", 12, 30), ("train:losses", "list", "__main__", 44, 30)]
    assert dev["holders"][0]["bytes"] == 32_505_344  # the text's "31.0MiB"
    a = tmp_path / "a.pickle"
    a.write_bytes(pickle.dumps(mh.held(ml.loop(steps=10, keep_output=True), ml.OUTPUT, "__main__.kept"), protocol=4))
    d = json.loads(run("diff", a, f, "--json").stdout)
    assert [h["path"] for h in d["before"]["holders"]] == ["__main__.kept"]
    assert d["before"]["holders"][0]["blocks"] == 10
    assert [h["path"] for h in d["after"]["holders"]] == ["__main__.kept", "train:losses"]
    # a moment inside the history is not a dump: no holders there
    assert "holders" not in json.loads(run("diff", f, "--at", "step:3", "--json").stdout)["before"]
    del snap["memsight_holders"]
    f.write_bytes(pickle.dumps(snap, protocol=4))
    assert "holders" not in json.loads(run("summary", f, "--json").stdout)["devices"][0]

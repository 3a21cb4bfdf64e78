"""The tags key in the file: torch's tools and the web viewer still read a
tagged snapshot (memsight's torch-identical text tools give torch's golden
outputs byte for byte; the key pickles with only the opcodes MemoryViz's
unpickler reads), convert keeps it, and summary reports by kind."""

from __future__ import annotations

import gzip
import json
import pathlib
import pickle
import pickletools

import pytest

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
GOLDEN = ["mlp_train", "transformer_train", "oom", "two_devices", "expandable", "wrapped"]

# The opcodes torch/utils/viz/MemoryViz.js unpickles (and PROTO, FRAME).
MEMORY_VIZ_OPCODES = {
    "PROTO", "FRAME", "MEMOIZE", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET", "MARK",
    "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "DICT", "LIST", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
    "APPEND", "APPENDS", "SETITEM", "SETITEMS", "BININT", "BININT1", "BININT2", "LONG1",
    "SHORT_BINUNICODE", "BINUNICODE", "BINFLOAT", "NONE", "NEWTRUE", "NEWFALSE", "STOP",
}


def tag_live_blocks(snap: dict) -> dict:
    """memsight_tags as memsight.torch writes them, over the snapshot's live blocks."""
    kinds = ["parameter", "gradient", "optimizer_state", "buffer"]
    storages = []
    for s in snap["segments"]:
        for i, b in enumerate(x for x in s["blocks"] if x["state"] == "active_allocated"):
            storages.append({"device": s["device"], "addr": b["address"], "size": b["requested_size"],
                             "category": kinds[i % 4], "name": f"layers.{i}.weight", "module": f"layers.{i}"})
    snap["memsight_tags"] = {"version": 1, "time_us": 1_795_000_000_000_000, "storages": storages}
    return snap


@pytest.mark.parametrize("name", GOLDEN)
def test_text_tools_are_torchs_on_a_tagged_snapshot(run, tmp_path, name):
    snap = tag_live_blocks(pickle.load(open(DATA / f"{name}.pickle", "rb")))
    assert snap["memsight_tags"]["storages"]
    f = tmp_path / "tagged.pickle"
    f.write_bytes(pickle.dumps(snap, protocol=4))
    # torch's CLI print()s the text tools' strings: one more newline
    for cmd, golden, nl in [("stats", "stats.txt", b"\n"), ("trace", "trace.txt", b"\n"),
                            ("segments", "segments.folded", b""), ("memory", "memory.folded", b"")]:
        args = [cmd, f] + (["-o", "-"] if cmd in ("segments", "memory") else [])
        r = run(*args)
        assert r.returncode == 0, r.stderr
        assert r.stdout == (DATA / f"{name}.{golden}").read_bytes() + nl, f"{name}: {cmd}"


def test_the_key_pickles_with_what_memory_viz_reads():
    snap = tag_live_blocks(pickle.load(open(DATA / "transformer_train.pickle", "rb")))
    data = pickle.dumps({"memsight_tags": snap["memsight_tags"]}, protocol=4)
    used = {op.name for op, _, _ in pickletools.genops(data)}
    assert used <= MEMORY_VIZ_OPCODES, used - MEMORY_VIZ_OPCODES
    assert "LONG1" in used  # the addresses: MemoryViz reads them as numbers


def test_convert_keeps_the_tags_and_summary_reads_them(run, tmp_path):
    src = DATA / "synthetic_categories.pickle.gz"
    snap = pickle.loads(gzip.decompress(src.read_bytes()))
    out = tmp_path / "copy.pickle"
    assert run("convert", src, "-o", out).returncode == 0
    assert pickle.loads(out.read_bytes())["memsight_tags"] == snap["memsight_tags"]
    j = json.loads(run("summary", "--json", out).stdout)["devices"][0]["categories"]
    assert j["sources"]["tags_matched"] == len(snap["memsight_tags"]["storages"])
    now = j["at_snapshot"]["by_category"]
    mib = 1 << 20
    # 4 layers: weights, gradients and two Adam states of 4 MiB each
    assert [now[k]["tagged"] for k in ("parameter", "gradient", "optimizer_state")] == \
        [16 * mib, 16 * mib, 32 * mib]
    names = {m["name"] for m in j["at_peak"]["modules"]}
    assert {"", "layers", "layers.0", "layers.3"} <= names
    text = run("summary", src).stdout.decode()
    assert "what kind, at the allocated peak (tagged: 17 storages memsight.torch recorded" in text
    assert "\n    by module" not in text and "by module at the allocated peak" in text

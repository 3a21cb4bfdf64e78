"""from_dict refuses what is not plain data with one MemsightError, and text
the engine cannot encode comes out as the same bytes in Python and the CLI."""
from __future__ import annotations

import os
import pickle
import subprocess
from pathlib import Path
from typing import Any

import pytest

import memsight

BASE: dict[str, Any] = {"segments": [], "device_traces": []}


def with_extra(value: Any) -> dict[str, Any]:
    return {**BASE, "x": value}


def self_containing() -> dict[str, Any]:
    d: dict[str, Any] = {}
    d["x"] = d
    return d


def deep_list(n: int) -> list[Any]:
    v: list[Any] = []
    for _ in range(n):
        v = [v]
    return v


def generator() -> Any:
    yield 1


class RaisingReduce:
    def __reduce__(self) -> Any:
        raise ValueError("not today")


class DictSubclass(dict):  # type: ignore[type-arg]
    pass


class IntSubclass(int):
    pass


@pytest.mark.parametrize("value, needle", [
    (self_containing(), "data['x']['x'] contains itself"),
    (object(), "data['x'] is of type object"),
    (generator(), "data['x'] is of type generator"),
    ({1, 2}, "data['x'] is of type set"),
    # Issue 34, item 9: an object whose __reduce__ raises (pickle's own
    # ValueError came out raw), and subclasses of plain types, which pickle
    # writes as a call to their class (the engine's "refusing to run code:
    # ... STACK_GLOBAL" came out).
    ([0, RaisingReduce()], "data['x'][1] is of type RaisingReduce"),
    ({"k": DictSubclass(a=1)}, "data['x']['k'] is of type DictSubclass"),
    ((IntSubclass(3),), "data['x'][0] is of type IntSubclass"),
    ({IntSubclass(3): 1}, "data['x'] has a key of type IntSubclass"),
    (deep_list(200_000), "is nested deeper than 1000 levels"),
    ([1, "f\udc80"], "data['x'][1] is a str with a lone surrogate at index 1"),
    ({"k\udcff": 1}, "is a str with a lone surrogate at index 1"),
])
def test_from_dict_errors(core, value, needle):
    with pytest.raises(memsight.MemsightError) as e:
        memsight.from_dict(with_extra(value))
    assert needle in str(e.value)
    assert "\n" not in str(e.value)
    # Raised from the check, not chained to pickle's RecursionError or TypeError.
    assert e.value.__suppress_context__ or e.value.__context__ is None


def test_from_dict_plain_values_pass(core):
    value = [None, True, 1 << 80, -2.5, b"\x00", "é", ("t", {"k": [1]}), "\ud7ff\ue000"]
    snap = memsight.from_dict(with_extra(value))
    assert snap.to_dict()["x"] == value


def surrogate_snapshot(tmp_path: Path) -> Path:
    frame = {"name": "f\udc80", "filename": "a.py", "line": 1}
    block = {"address": 0, "size": 512, "requested_size": 512, "state": "active_allocated",
             "frames": [frame]}
    seg = {"device": 0, "address": 0, "total_size": 4096, "allocated_size": 512,
           "active_size": 512, "requested_size": 512, "stream": 0, "segment_type": "small",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": [block]}
    entry = {"action": "alloc", "addr": 0, "size": 512, "stream": 0, "frames": [frame]}
    f = tmp_path / "surrogate.pickle"
    f.write_bytes(pickle.dumps({"segments": [seg], "device_traces": [[entry]]}, protocol=4))
    return f


def test_lone_surrogate_in_a_file_reads_and_reports(core, tmp_path):
    snap = memsight.load(surrogate_snapshot(tmp_path))
    for text in (str(snap.memory()), str(snap.segments()), snap.summary_text(),
                 snap.summary_json(), snap.svg(), snap.trace()):
        assert isinstance(text, str)
    # The name comes back as Python's pickle wrote it, byte for byte.
    assert snap.to_dict()["segments"][0]["blocks"][0]["frames"][0]["name"] == "f\udc80"
    out = tmp_path / "m.svg"
    snap.to_svg(out)
    assert out.read_bytes().startswith(b"<?xml") or b"<svg" in out.read_bytes()


def test_lone_surrogate_same_bytes_as_the_cli(core, tmp_path):
    binary = os.environ.get("MEMSIGHT_BIN")
    if not binary:
        pytest.skip("MEMSIGHT_BIN is not set")
    f = surrogate_snapshot(tmp_path)
    cli = subprocess.run([binary, "memory", "-o", "-", str(f)], capture_output=True, check=True)
    py = str(memsight.load(f).memory()).encode("utf-8", "surrogateescape")
    assert py == cli.stdout


def test_svg_with_a_newline_in_a_frame_name(core, tmp_path):
    import xml.dom.minidom
    f = surrogate_snapshot(tmp_path)
    d = pickle.loads(f.read_bytes())
    d["segments"][0]["blocks"][0]["frames"][0]["name"] = "two\nlines"
    snap = memsight.from_dict(d)
    for kind in ("memory", "segments"):
        svg = snap.svg(kind)
        xml.dom.minidom.parseString(svg)
        assert "two" in svg and "lines" in svg


def test_lone_surrogate_in_json_is_its_escape(core, tmp_path):
    import json
    snap = memsight.load(surrogate_snapshot(tmp_path))
    text = snap.summary_json()
    assert "\\udc80" in text  # JSON's own escape, so the output is valid UTF-8
    assert "f\udc80" in json.dumps(json.loads(text), ensure_ascii=False)
    text.encode("utf-8")  # nothing left that needs surrogateescape


def test_max_expanded_in_python(core, tmp_path):
    import gzip
    data = pickle.dumps({"segments": [], "device_traces": [[]], "blob": b"\0" * (8 << 20)},
                        protocol=4)
    gz = gzip.compress(data)
    f = tmp_path / "s.pickle.gz"
    f.write_bytes(gz)
    with pytest.raises(memsight.MemsightError, match="the --max-expanded limit"):
        memsight.loads(gz, max_expanded=1 << 20)
    with pytest.raises(memsight.MemsightError, match="the --max-expanded limit"):
        memsight.load(f, max_expanded=1 << 20)
    # The limit was for that read only.
    assert memsight.loads(gz).to_dict()["blob"] == b"\0" * (8 << 20)
    assert memsight.load(f, max_expanded=16 << 20).to_dict()["blob"] == b"\0" * (8 << 20)
    with pytest.raises(ValueError, match="max_expanded must be a positive number"):
        memsight.loads(gz, max_expanded=0)

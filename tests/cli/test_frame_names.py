"""Any frame name draws: the SVG writer takes stacks as data, not text."""
from __future__ import annotations

import pickle
import xml.dom.minidom

import pytest


def snapshot_with_frame(name: str) -> bytes:
    frame = {"name": name, "filename": "/x/train.py", "line": 7}
    block = {"address": 0, "size": 512, "requested_size": 512, "state": "active_allocated",
             "frames": [frame]}
    seg = {"device": 0, "address": 0, "total_size": 2 << 20, "allocated_size": 512,
           "active_size": 512, "requested_size": 512, "stream": 0, "segment_type": "small",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": [block]}
    return pickle.dumps({"segments": [seg], "device_traces": [[]]}, protocol=4)


@pytest.mark.parametrize("name", ["two\nlines", "tab\tand space 12", "trailing 5\r\n", "<&>"])
@pytest.mark.parametrize("cmd", ["memory", "segments"])
def test_svg_with_odd_frame_names(run, tmp_path, name, cmd):
    f = tmp_path / "s.pickle"
    f.write_bytes(snapshot_with_frame(name))
    out = tmp_path / "x.svg"
    r = run(cmd, f, "-o", out)
    assert r.returncode == 0, r.stderr
    svg = out.read_text()
    xml.dom.minidom.parseString(svg)  # well-formed
    assert "512" in svg or "512.0B" in svg
    # The folded text keeps torch's bytes (the name as it is).
    folded = run(cmd, f, "-o", "-").stdout.decode()
    assert name in folded

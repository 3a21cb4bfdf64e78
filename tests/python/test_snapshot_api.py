"""memsight.load / loads and the CLI's analyses from Python, checked against
torch's own outputs in tests/data (the golden files of the CLI tests)."""

from __future__ import annotations

import gzip
import json
import pickle
import xml.etree.ElementTree as ET

import pytest

import memsight

FIXTURES = ["mlp_train", "multistream", "oom", "state_only", "transformer_train"]


def _golden(data_dir, name, ext):
    return (data_dir / f"{name}.{ext}").read_text()


@pytest.mark.parametrize("name", FIXTURES)
def test_text_tools_match_torch(core, data_dir, name):
    snap = memsight.load(data_dir / f"{name}.pickle")
    # The files hold what torch's functions return (its CLI adds one newline).
    assert snap.stats() == _golden(data_dir, name, "stats.txt")
    assert snap.trace() == _golden(data_dir, name, "trace.txt")
    assert snap.memory().text == _golden(data_dir, name, "memory.folded")
    assert snap.segments().text == _golden(data_dir, name, "segments.folded")


@pytest.mark.parametrize("name", FIXTURES)
def test_round_trip_to_python_objects(core, data_dir, name):
    path = data_dir / f"{name}.pickle"
    with open(path, "rb") as f:
        expected = pickle.load(f)
    snap = memsight.load(path)
    assert snap.to_dict() == expected
    assert memsight.loads(path.read_bytes()).to_dict() == expected
    assert memsight.from_dict(expected).to_dict() == expected
    assert snap.trace_entry_count == sum(len(t) for t in expected.get("device_traces", []))
    assert snap.segment_count == len(expected["segments"])


def test_folded_stacks_as_objects(core, data_dir):
    folded = memsight.load(data_dir / "mlp_train.pickle").memory()
    rows = list(folded)
    assert len(rows) == len(folded) == len(folded.text.splitlines())
    for (frames, n), line in zip(rows, folded.text.splitlines()):
        assert line == ";".join(frames) + " " + str(n)
    assert folded.total == sum(n for _, n in rows) > 0


def test_svg_rendering(core, data_dir, tmp_path):
    snap = memsight.load(data_dir / "oom.pickle")
    for kind in ("segments", "memory"):
        path = snap.to_svg(tmp_path / f"{kind}.svg", kind)
        assert ET.parse(path).getroot().tag.endswith("svg")
    with pytest.raises(ValueError, match="unknown flamegraph kind"):
        snap.svg("bogus")


def test_compare(core, data_dir):
    cmp = memsight.compare(data_dir / "mlp_train.pickle", data_dir / "oom.pickle")
    assert cmp.text.startswith("only_before = [")
    assert cmp.only_before and cmp.only_after
    assert all(isinstance(a, int) for a in cmp.only_before + cmp.only_after)
    tops = {frames[0] for frames, _ in cmp.folded}
    assert tops == {"only_before", "only_after"}
    same = memsight.compare(data_dir / "oom.pickle", data_dir / "oom.pickle")
    assert same.only_before == [] and same.only_after == [] and len(same.folded) == 0


def test_compressed_outputs_load_back(core, data_dir, tmp_path):
    snap = memsight.load(data_dir / "mlp_train.pickle")
    expected = snap.to_dict()
    gz = snap.to_pickle(tmp_path / "s.pickle.gz")
    with gzip.open(gz, "rb") as f:
        assert pickle.load(f) == expected
    zst = snap.to_pickle(tmp_path / "s.pickle.zst")
    assert memsight.load(zst).to_dict() == expected


def test_a_read_only_target_is_replaced_only_with_force(core, data_dir, tmp_path):
    # As the CLI's --force: every writer of the package refuses a read-only
    # file with one line naming it, and force=True replaces it (mode kept).
    import os

    snap = memsight.load(data_dir / "mlp_train.pickle")
    ranks = memsight.ranks(data_dir / "mlp_train.pickle")
    writers = {
        "s.html": lambda p, **kw: snap.to_html(p, **kw),
        "s.svg": lambda p, **kw: snap.to_svg(p, **kw),
        "s.pickle": lambda p, **kw: snap.to_pickle(p, **kw),
        "d.html": lambda p, **kw: memsight.diff(snap, snap).to_html(p, **kw),
        "r.html": lambda p, **kw: ranks.write_html(p, pages="none", **kw),
    }
    for name, write in writers.items():
        p = tmp_path / name
        p.write_text("kept")
        p.chmod(0o444)
        with pytest.raises(memsight.MemsightError, match=f"{name}: the file is read-only"):
            write(p)
        assert p.read_text() == "kept"
        assert write(p, force=True) == str(p)
        assert p.read_bytes() != b"kept" and (os.stat(p).st_mode & 0o777) == 0o444


def test_bad_input_gives_one_line_errors(core, tmp_path):
    with pytest.raises(memsight.MemsightError, match="^text, not a memory snapshot"):
        memsight.loads(b"definitely not a pickle")
    with pytest.raises(memsight.MemsightError, match="not a pickle"):
        memsight.loads(b"\x00\x01 binary, not a pickle")
    bad = tmp_path / "list.pickle"
    bad.write_bytes(pickle.dumps({"no": "segments"}))
    with pytest.raises(memsight.MemsightError) as e:
        memsight.load(bad)
    assert "\n" not in str(e.value)
    with pytest.raises(FileNotFoundError):
        memsight.load(tmp_path / "missing.pickle")
    with pytest.raises(ValueError):  # MemsightError is a ValueError
        memsight.loads(b"\x80\x04")


def test_summary_as_object_and_text(core, data_dir):
    snap = memsight.load(data_dir / "oom.pickle")
    s = snap.summary()
    assert isinstance(s, dict) and s == json.loads(snap._snap.summarize().json())
    assert s.text == snap.summary_text() and s.text.strip()
    dev = s.devices[0]  # attribute access all the way down
    assert dev.peak_allocated >= dev.allocated_now > 0
    assert dev.ooms and dev.ooms[0].requested > 0
    assert "OUT OF MEMORY" in s.text


def test_html_pages(core, data_dir, tmp_path):
    snap = memsight.load(data_dir / "oom.pickle")
    a = snap.to_html(tmp_path / "trace.html", "trace_plot")
    b = snap.to_html(tmp_path / "seg.html", "segment_plot")
    for p in (a, b):
        text = open(p, encoding="utf-8").read()
        assert text.lstrip().lower().startswith("<!doctype html") and "<script" in text
        assert "cdn.jsdelivr" not in text  # works offline
    assert open(a).read() != open(b).read()  # a different start view
    # memory_viz's names of the pools and settings views open those views
    pools = snap.html("Allocated Memory (incl. Private Pools)")
    settings = snap.html("Allocator Settings")
    assert pools == snap.html("pools") and settings == snap.html("settings")
    assert pools != settings


def test_html_leaves_empty_devices_out(core):
    # The summary keeps every device; the page, as `memsight view`, only
    # those with data, so 20,000 empty devices cost it next to nothing.
    def empty(n):
        return memsight.loads(pickle.dumps({"segments": [], "device_traces": [[] for _ in range(n)]}))

    many = empty(20_000)
    assert len(many.summary()["devices"]) == 20_000
    assert len(many.html()) < len(empty(1).html()) + 1000


def test_engine_missing_message(monkeypatch):
    from memsight import _engine

    monkeypatch.setattr(_engine, "_core", None)
    import builtins

    real_import = builtins.__import__

    def no_core(name, globals=None, locals=None, fromlist=(), level=0):
        if fromlist and "_core" in fromlist:
            raise ImportError("simulated: not built")
        return real_import(name, globals, locals, fromlist, level)

    monkeypatch.setattr(builtins, "__import__", no_core)
    with pytest.raises(memsight.EngineNotBuiltError, match="pip install"):
        memsight.loads(b"x")


def test_flamegraph_skips_lines_it_cannot_read(core):
    # torch's folded text can carry negative counts; flamegraph.pl skips such
    # lines, and so does memsight rather than lose the whole flamegraph.
    folded = memsight.FoldedStacks("a;b 100\na;c -14848\nd 50\n", "memory")
    svg = folded.svg()
    assert "a" in svg and ET.fromstring(svg).tag.endswith("svg")
    assert ET.fromstring(memsight.FoldedStacks("only bad -1\n").svg()).tag.endswith("svg")


@pytest.mark.parametrize("name", FIXTURES)
def test_load_without_the_trace(core, data_dir, name):
    """trace=False: the segment reports equal torch's; what needs the trace
    says so in a MemsightError instead of answering from an empty trace."""
    snap = memsight.load(data_dir / f"{name}.pickle", trace=False)
    assert not snap.has_trace
    assert "trace not read" in repr(snap)
    assert snap.stats() == _golden(data_dir, name, "stats.txt")
    assert snap.memory().text == _golden(data_dir, name, "memory.folded")
    assert snap.segments().text == _golden(data_dir, name, "segments.folded")
    assert repr(snap).endswith(f"{snap.segment_count} segments, trace not read>")
    for call in (snap.trace, snap.summary_text, snap.html, snap.pickle, lambda: snap.trace_entry_count,
                 lambda: snap.device_count):
        with pytest.raises(memsight.MemsightError, match="trace=False"):
            call()
    assert memsight.load(data_dir / f"{name}.pickle").has_trace


def test_load_without_the_trace_reports_bad_input(core, data_dir, tmp_path):
    bad = tmp_path / "cut.pickle"
    bad.write_bytes((data_dir / "oom.pickle").read_bytes()[:20000])
    with pytest.raises(memsight.MemsightError, match="truncated pickle at byte"):
        memsight.load(bad, trace=False)


# Characters str.splitlines breaks at, in frame names: torch writes them into
# the folded text as they are.
ODD_NAMES = ["fwd\nline2", "a\rb", "c\x0bd", "e\x1cf", "g\u2028h", "i\x85j", "plain name"]


def _snapshot_with_frame_names(names, base=0x7F0000000000):
    blocks = [
        {"address": base + i * 1024, "size": 1024, "requested_size": 1024, "state": "active_allocated",
         "frames": [{"name": n, "filename": "model.py", "line": i + 1},
                    {"name": "main", "filename": "train.py", "line": 9}]}
        for i, n in enumerate(names)
    ]
    used = len(names) * 1024
    blocks.append({"address": base + used, "size": (2 << 20) - used, "requested_size": 0,
                   "state": "inactive", "frames": []})
    seg = {"device": 0, "address": base, "total_size": 2 << 20, "allocated_size": used,
           "active_size": used, "requested_size": used, "stream": 0, "segment_type": "large",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}
    return memsight.loads(pickle.dumps({"segments": [seg], "device_traces": [[]]}, protocol=4))


def test_folded_stacks_keep_frame_names_with_line_breaks(core):
    snap = _snapshot_with_frame_names(ODD_NAMES)
    for folded, prefix in ((snap.memory(), ("stream_0",)),
                           (snap.segments(), ("stream_0", f"seg_{0x7F0000000000}"))):
        rows = list(folded)
        want = [prefix + ("active_allocated", "train.py:9:main", f"model.py:{i + 1}:{n}")
                for i, n in enumerate(ODD_NAMES)]
        assert [frames for frames, _ in rows if frames[-1].startswith("model.py:")] == want
        assert all(n == 1024 for frames, n in rows if frames[-1].startswith("model.py:"))
        # One stack per torch line: the text has one more "\n" than it has lines.
        assert len(folded) == len(rows) == folded.text.count("\n") - 1
        assert folded.total == sum(n for _, n in rows) == 2 << 20
        titles = [t.text for t in ET.fromstring(folded.svg()).iter("{http://www.w3.org/2000/svg}title")]
        assert any(t.startswith("model.py:7:plain name ") for t in titles)
        assert sum(t.startswith("model.py:") for t in titles) == len(ODD_NAMES)

    # compare() keeps its stacks as data too (segments by address: all differ).
    cmp = memsight.compare(_snapshot_with_frame_names(["x"], base=0x7E0000000000), snap)
    assert ("active_allocated", "train.py:9:main", "model.py:1:fwd\nline2") in \
        {frames[-3:] for frames, _ in cmp.folded}


def test_folded_text_splits_only_at_newlines(core):
    # Stacks made from text alone: split at "\n" only, CRLF read, blank lines skipped.
    text = "x;a\rb 100\r\nx;c\x0bd\x1ce\u2028f\x85g 7\n\nx;h i -5\n"
    folded = memsight.FoldedStacks(text, "memory")
    assert list(folded) == [(("x", "a\rb"), 100), (("x", "c\x0bd\x1ce\u2028f\x85g"), 7), (("x", "h i"), -5)]
    assert len(folded) == 3 and folded.total == 102
    # The SVG fallback (a negative count) keeps the lines with those characters.
    titles = [t.text for t in ET.fromstring(folded.svg()).iter("{http://www.w3.org/2000/svg}title")]
    assert titles[0].startswith("all (107.0B")

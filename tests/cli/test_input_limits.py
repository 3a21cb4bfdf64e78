"""One rule for the numbers and names memsight reads (memsight/input_limits.h):
values out of range drop their record (or, in a snapshot, are counted), each
output says so once; names are cut with their length said; pages stay small
at 100,000 devices; one size formatter for memsight's own reports."""

import base64
import json
import pickle
import re
import struct
import zlib
from pathlib import Path

import pytest
from test_profile import ev, mem

ROOT = Path(__file__).resolve().parents[2]


def profile_page_data(html: str) -> dict:
    m = re.search(r'<script id="memsight-profile" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


def snapshot_page_meta(html: str) -> tuple[dict, bytes]:
    """The page's header (meta and columns) and its whole data blob."""
    m = re.search(r'<script id="memsight-data"[^>]*>([^<]*)</script>', html)
    raw = b"".join(zlib.decompress(base64.b64decode(p)) for p in m.group(1).strip().split("."))
    (n,) = struct.unpack("<I", raw[4:8])
    return json.loads(raw[8:8 + n]), raw


def hostile_trace():
    """Two spans named ProfilerStep#1, one step number past int64, and
    events whose numbers are out of range: 1e300 and negative durations,
    2^64 and 2^63-1 byte counts, a negative total, a device id of 2^40, an
    address of 2^70."""
    return {"traceEvents": [
        ev("ProfilerStep#1", "user_annotation", 100, 100),
        ev("ProfilerStep#1", "user_annotation", 300, 100),
        ev("ProfilerStep#99999999999999999999999", "user_annotation", 500, 10),
        ev("aten::empty", "cpu_op", 110, 5),
        ev("aten::slow", "cpu_op", 120, 1e300),
        ev("aten::neg", "cpu_op", 120, -5),
        mem(111, 512, 16, 512, 2048),
        mem(112, 2**64, 32, 2**64, 2**64),
        mem(113, 2**63 - 1, 48, 2**63 - 1, 2**63 - 1),
        mem(114, 100, 64, -5, 2048),
        mem(115, 100, 80, 612, 2048, device=2**40),
        mem(310, 256, 96, 768, 2**40),
        mem(311, 100, 2**70, 868, 2**40),
    ]}


EXPECTED_NOTES = [
    (2, "events dropped: a duration (dur)"),
    (3, "[memory] events dropped: a byte count"),
    (1, "[memory] event dropped: a CUDA device id"),
    (1, "[memory] event dropped: an address (Addr)"),
    (1, "ProfilerStep annotation ignored: no step number"),
]


def test_profile_numbers_out_of_range_are_dropped_and_said_once(run, tmp_path):
    f = tmp_path / "t.json"
    f.write_text(json.dumps(hostile_trace()))
    j = json.loads(run("profile", "--json", f).stdout)
    assert [(n["count"], n["note"].split(" ", 1)[1][:len(w)]) for n, (_, w) in
            zip(j["input_notes"], EXPECTED_NOTES)] == EXPECTED_NOTES
    text = run("profile", f).stdout.decode()
    notes = [ln for ln in text.splitlines() if ln.startswith("  input: ")]
    assert notes == ["  input: " + n["note"] for n in j["input_notes"]]
    assert "  input: 3 [memory] events dropped" in text  # the 2^63-1 event is not a "peak 0.0B"
    # The second step's peak is the real one: 768 bytes, 1 TiB reserved.
    s1, s2 = j["steps"]
    assert s2["devices"]["cuda:0"]["peak_allocated"] == 768
    assert s2["devices"]["cuda:0"]["peak_reserved"] == 2**40
    assert "peak reserved 1.0TiB" in text
    # No number without its unit, no 300-digit duration.
    assert all(len(w) < 30 for w in re.findall(r"\d[\d.]*", text))
    out = tmp_path / "p.html"
    assert run("profile", f, "-o", out).returncode == 0
    assert profile_page_data(out.read_text())["report"]["input_notes"] == j["input_notes"]


def test_a_repeated_step_number_is_labelled_by_occurrence(run, tmp_path):
    f = tmp_path / "t.json"
    f.write_text(json.dumps(hostile_trace()))
    j = json.loads(run("profile", "--json", f).stdout)
    assert [(s["step"], s["occurrence"], s["occurrences"]) for s in j["steps"]] == [(1, 1, 2), (1, 2, 2)]
    text = run("profile", f).stdout.decode()
    assert "\nStep 1 (ProfilerStep#1, occurrence 1 of 2): " in text
    assert "\nStep 1 (ProfilerStep#1, occurrence 2 of 2): " in text
    # A number seen once keeps the plain title.
    g = tmp_path / "g.json"
    g.write_text(json.dumps({"traceEvents": [ev("ProfilerStep#4", "user_annotation", 0, 10)]}))
    assert "\nStep 4 (ProfilerStep#4): " in run("profile", g).stdout.decode()


def test_long_names_are_cut_with_their_length_said(run, tmp_path):
    op, fn, kernel = "aten::" + "x" * (1 << 20), "f.py(1): " + "y" * (1 << 20), "k" + "z" * (1 << 20)
    trace = {"traceEvents": [
        ev(op, "cpu_op", 0, 10),
        ev(fn, "python_function", 0, 10, **{"Python id": 1, "Python parent id": -1}),
        mem(1, 512, 16, 512, 2048),
        ev("cudaLaunchKernel", "cuda_runtime", 2, 1, correlation=5),
        ev(kernel, "kernel", 3, 3, device=0, correlation=5),
    ]}
    f = tmp_path / "t.json"
    f.write_text(json.dumps(trace))
    for args in (["--json"], []):
        out = run("profile", *args, f).stdout.decode()
        assert len(out) < 250_000, len(out)  # a 16 KiB cut in each of a few rows
        assert "x" * 20000 not in out and "y" * 20000 not in out and "z" * 20000 not in out
        assert f"[cut at 16384 of {len(op)} bytes]" in out
        assert f"[cut at 16384 of {len(fn)} bytes]" in out  # the Python function, in the stack
    text = run("profile", f).stdout.decode()
    assert f"[cut at 120 of {len(kernel)} bytes]" in text  # a kernel's row: one line
    page = tmp_path / "p.html"
    assert run("profile", f, "-o", page).returncode == 0
    assert page.stat().st_size < 300_000


def test_many_steps_stay_linear(run, tmp_path):
    """5,000 steps, each allocating and never freeing: every step's live rows
    add up to its peak (the rows past seven folded into one)."""
    events = []
    for i in range(5000):
        events += [ev(f"ProfilerStep#{i}", "user_annotation", i * 10, 9),
                   ev(f"aten::op{i % 13}", "cpu_op", i * 10 + 1, 2),
                   mem(i * 10 + 1.5, 512, 1000 + i, 512 * (i + 1), 1 << 30)]
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"traceEvents": events}))
    j = json.loads(run("profile", "--json", f).stdout)
    assert len(j["steps"]) == 5000
    for s in j["steps"][::499]:
        d = s["devices"]["cuda:0"]
        assert sum(r["bytes"] for r in d["live_at_peak"]) == d["peak_allocated"]
    last = j["steps"][-1]["devices"]["cuda:0"]["live_at_peak"]
    assert [r["op"] for r in last][-1] == "(6 more ops)" and len(last) == 8


def write_gz(path, value):
    import gzip
    path.write_bytes(gzip.compress(json.dumps(value).encode()))
    return path


def test_timeline_forms_are_checked_alike(run, tmp_path):
    # raw: [t_ns, action, bytes, category]; 2^64 bytes, category 9, a 1e300
    # time, and a record out of time order
    raw = [[-1, 1, 1000, 0], [5000, 2, 2**64, 4], [3000, 2, 500, 4], [2000, 2, 300, 3],
           [4000, 2, 100, 9], [1e300, 2, 5, 1], [6000, 4, -500, 4]]
    r = run("profile", "--timeline", write_gz(tmp_path / "m.raw.json.gz", raw), "-o", tmp_path / "r.html")
    assert r.returncode == 0, r.stderr
    data = profile_page_data((tmp_path / "r.html").read_text())
    notes = [n["note"] for n in data["input_notes"]]
    assert notes == ["1 record dropped: a byte count that is not an integer of magnitude below 2^53",
                     "1 record dropped: a category that is not one of 0..7",
                     "1 record dropped: a time that is not a number of magnitude below 2^53 µs",
                     "1 record out of time order in the file: put in order"]
    assert r.stderr.decode().splitlines()[:-1] == ["note: " + n for n in notes]
    assert data["ts"] == sorted(data["ts"])
    assert all(0 <= v < 2**53 for s in data["series"] for v in s)  # no -2^63 in the page
    # coalesced: [times, sizes]; 2^64 and a negative size, times out of order
    times = [10, 30, 20, 40]
    sizes = [[0, 1, 2, 3, 4, 5, 6, 7, 8], [0, -1] + [0] * 7, [0, 2**64] + [0] * 7, [0] + [5] * 8]
    r = run("profile", "--timeline", write_gz(tmp_path / "m.json.gz", [times, sizes]), "-o", tmp_path / "c.html")
    assert r.returncode == 0, r.stderr
    data = profile_page_data((tmp_path / "c.html").read_text())
    assert [n["note"] for n in data["input_notes"]] == [
        "2 time points dropped: a category size that is not an integer in 0..2^53 (8 PiB)"]
    assert data["ts"] == [0.0, 30.0] and data["series"][0] == [1, 5]
    # unsorted times: put in order, and said
    r = run("profile", "--timeline", write_gz(tmp_path / "u.json.gz", [[30, 10], [[0] * 9, [0, 7] + [0] * 7]]),
            "-o", tmp_path / "u.html")
    data = profile_page_data((tmp_path / "u.html").read_text())
    assert data["series"][0] == [7, 0]
    assert [n["note"] for n in data["input_notes"]] == ["1 time point out of time order in the file: put in order"]


def snapshot(traces, segments=()):
    return {"segments": list(segments), "device_traces": traces}


def alloc(addr, size, t, name="f"):
    return {"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": t,
            "frames": [{"name": name, "filename": "train.py", "line": 3}]}


@pytest.mark.parametrize("size", [-512, 2**53, 2**63 - 1, 2**64])
def test_snapshot_sizes_out_of_range_are_said_once(run, tmp_path, size):
    f = tmp_path / "s.pickle"
    f.write_bytes(pickle.dumps(snapshot([[alloc(1 << 20, size, 1), alloc(2 << 20, 1024, 2)]]), protocol=4))
    text = run("summary", f).stdout.decode()
    notes = [ln for ln in text.splitlines() if ln.startswith("input: ")]
    assert len(notes) == 1 and notes[0].startswith("input: 1 trace entry with a size outside 0..2^53 bytes")
    j = json.loads(run("summary", "--json", f).stdout)
    assert [n["count"] for n in j["input_notes"]] == [1]
    out = tmp_path / "s.html"
    assert run("view", f, "-o", out).returncode == 0
    meta, _ = snapshot_page_meta(out.read_text())
    assert meta["meta"]["summary"]["input_notes"] == j["input_notes"]


def test_snapshot_times_that_go_back_are_said(run, tmp_path):
    f = tmp_path / "s.pickle"
    f.write_bytes(pickle.dumps(snapshot([[alloc(1 << 20, 512, 50), alloc(2 << 20, 512, 20),
                                          alloc(3 << 20, 512, 90)]]), protocol=4))
    j = json.loads(run("summary", "--json", f).stdout)
    assert [n["note"] for n in j["input_notes"]] == [
        "1 trace entry with a time earlier than an entry before: the page's clock does not go back for them"]
    # real snapshots say nothing

    for fixture in sorted((ROOT / "tests" / "data").glob("*.pickle")):
        assert json.loads(run("summary", "--json", fixture).stdout)["input_notes"] == [], fixture


def test_view_device_out_of_range_is_one_line(run, tmp_path):
    f = tmp_path / "s.pickle"
    f.write_bytes(pickle.dumps(snapshot([[alloc(1 << 20, 512, 1)], []]), protocol=4))
    out = tmp_path / "v.html"
    for device, said in [("99", "memsight view: device 99 is not in the snapshot: it lists devices 0 to 1"),
                         ("-1", "memsight view: --device needs a device number (0, 1, ...), not '-1'"),
                         ("x", "memsight view: --device needs a device number (0, 1, ...), not 'x'")]:
        r = run("view", f, "--device", device, "-o", out)
        assert r.returncode == 2 and r.stderr.decode() == said + "\n"
        assert not out.exists()
    assert run("view", f, "--device", "1", "-o", out).returncode == 0


def test_a_page_of_thousands_of_devices_holds_the_busiest(run, tmp_path):
    n = 3000
    traces = [[alloc(1 << 20, 512, 1)] * (1 + (d % 7 == 0)) for d in range(n)]
    f = tmp_path / "s.pickle"
    f.write_bytes(pickle.dumps(snapshot(traces), protocol=4))
    out = tmp_path / "v.html"
    assert run("view", f, "-o", out).returncode == 0
    meta, raw = snapshot_page_meta(out.read_text())
    m = meta["meta"]
    assert m["deviceCount"] == n and m["devicesWithData"] == n
    held = [d["index"] for d in m["devices"]]
    assert len(held) == 64 and all(d % 7 == 0 for d in held)  # the busiest: two entries each
    # the summary and the leaks of those devices (alike ones once, listed in "alike")
    for report in ("summary", "leaks"):
        devices = sorted(i for d in m[report]["devices"]
                         for a, b in d.get("alike", [[d["device"], d["device"]]]) for i in range(a, b + 1))
        assert devices == sorted(held), report
    assert len(m["leaks"]["devices"]) == 1
    assert len(raw) < 2_000_000
    # --device opens a page on a device past the 64 busiest
    assert run("view", f, "--device", "2999", "-o", out).returncode == 0
    meta, _ = snapshot_page_meta(out.read_text())
    assert meta["meta"]["defaultDevice"] == 2999 and 2999 in [d["index"] for d in meta["meta"]["devices"]]


def segment(size, frames=()):
    return {"device": 0, "address": 1 << 40, "total_size": size, "allocated_size": size, "active_size": size,
            "requested_size": size, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
            "is_expandable": False, "frames": list(frames),
            "blocks": [{"address": 1 << 40, "size": size, "requested_size": size, "state": "active_allocated",
                        "frames": list(frames)}]}


def test_a_page_cuts_long_frame_names(run, tmp_path):
    name = "fn_" + "x" * (1 << 20)
    module = "m" * (1 << 20)  # a module named by memsight's mark (a category's module tree)
    frames = [{"name": name, "filename": "train.py", "line": 3}]
    f = tmp_path / "s.pickle"
    entry = dict(alloc(1 << 40, 2 << 20, 1, name=name), user_metadata=f"memsight:fwd:{module}")
    f.write_bytes(pickle.dumps(snapshot([[entry]], [segment(2 << 20, frames)]), protocol=4))
    out = tmp_path / "v.html"
    assert run("view", f, "-o", out).returncode == 0
    meta, raw = snapshot_page_meta(out.read_text())
    assert b"x" * 20000 not in raw and b"m" * 20000 not in raw and len(raw) < 1_000_000
    assert f"[cut at 16384 of {len(name)} bytes]".encode() in raw
    assert f"[cut at 16384 of {len(module)} bytes]".encode() in raw
    # Each cut, in the page's summary too, says how long the name was in the
    # file: a site (a cut name and its file and line) is not cut again.
    summary = json.dumps(meta["meta"]["summary"])
    cuts = set(re.findall(r"\[cut at (\d+) of (\d+) bytes\]", summary))
    assert cuts == {("16384", str(len(name))), ("16384", str(len(module)))}, cuts
    # summary's text and JSON cut both names alike
    for args in ([], ["--json"]):
        text = run("summary", *args, f).stdout.decode()
        assert len(text) < 200_000 and "x" * 20000 not in text and "m" * 20000 not in text
        assert f"[cut at 16384 of {len(name)} bytes]" in text
        assert f"[cut at 16384 of {len(module)} bytes]" in text
    # the text tools still print what torch prints: the whole name
    assert name in run("memory", f, "-o", "-").stdout.decode()


def test_memsights_reports_use_one_size_unit_rule(run, tmp_path):
    """A segment of 1023.96 GiB reads "1.0TiB" in the summary, as 1 TiB does;
    torch's text tools keep torch's "1024.0GiB"."""
    size = int(1023.96 * 2**30) // 512 * 512
    f = tmp_path / "s.pickle"
    f.write_bytes(pickle.dumps(snapshot([[]], [segment(size)]), protocol=4))
    text = run("summary", f).stdout.decode()
    assert "1.0TiB" in text and "1024.0GiB" not in text
    assert "1024.0GiB" in run("stats", f).stdout.decode()


def test_the_profile_page_holds_the_report_compactly(run, tmp_path):
    """The page's steps (arrays, names interned) read back as --json writes
    them, less what the page does not show (site, peak time)."""

    trace = ROOT / "tests" / "data" / "profiler" / "profiler.pt.trace.json.gz"
    j = json.loads(run("profile", "--json", trace).stdout)
    out = tmp_path / "p.html"
    assert run("profile", trace, "-o", out).returncode == 0
    rep = profile_page_data(out.read_text())["report"]
    strings = rep["strings"]

    def ops(rows):
        return [{"op": strings[o], "stack": strings[s], "bytes": b, "count": c} for o, s, b, c in rows]

    def times(rows):
        return [{"name": strings[n], "total_us": t, "count": c} for n, t, c in rows]

    for page_step, step in zip(rep["steps"], j["steps"], strict=True):
        number, occ, occs, ts, dur, devices, top_ops, top_kernels = page_step
        assert (number, occ, occs) == (step["step"], step["occurrence"], step["occurrences"])
        assert ts == pytest.approx(step["ts_us"], abs=1e-3) and dur == pytest.approx(step["dur_us"], abs=1e-3)
        assert times(top_ops) == [dict(r, total_us=pytest.approx(r["total_us"], abs=1e-3)) for r in step["top_ops"]]
        assert times(top_kernels) == [dict(r, total_us=pytest.approx(r["total_us"], abs=1e-3)) for r in step["top_kernels"]]
        for d in devices:
            want = step["devices"][f"cuda:{d[0]}"]
            assert d[1:7] == [want[k] for k in ("peak_allocated", "peak_reserved", "allocs", "alloc_bytes", "frees",
                                                "free_bytes")]
            assert ops(d[7]) == [{k: r[k] for k in ("op", "stack", "bytes", "count")} for r in want["live_at_peak"]]
            assert ops(d[8]) == [{k: r[k] for k in ("op", "stack", "bytes", "count")} for r in want["allocated_most"]]
        assert len(devices) == len(step["devices"])

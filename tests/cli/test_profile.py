"""memsight profile: torch.profiler Chrome traces and memory timelines."""

import gzip
import json
import re

import pytest

from conftest import ROOT

PROF = ROOT / "tests" / "data" / "profiler"
TRACE = PROF / "profiler.pt.trace.json.gz"
TIMELINE = PROF / "memory_timeline.json.gz"


def page_data(html: str) -> dict:
    m = re.search(r'<script id="memsight-profile" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


def test_real_trace_numbers_match_a_python_reading(run):
    """On the real H100 trace: peak allocated / reserved and the allocation
    counts equal what json.load of the same file gives."""
    ev = json.loads(gzip.decompress(TRACE.read_bytes()))["traceEvents"]
    mem = [e["args"] for e in ev if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    j = json.loads(run("profile", "--json", TRACE).stdout)
    assert j["events"] == len(ev)
    (step,) = j["steps"]
    assert step["step"] is None  # the fixture has no ProfilerStep#N
    d = step["devices"]["cuda:0"]
    assert d["peak_allocated"] == max(a["Total Allocated"] for a in mem)
    assert d["peak_reserved"] == max(a["Total Reserved"] for a in mem)
    assert d["allocs"] == sum(1 for a in mem if a["Bytes"] > 0)
    assert d["alloc_bytes"] == sum(a["Bytes"] for a in mem if a["Bytes"] > 0)
    assert d["free_bytes"] == -sum(a["Bytes"] for a in mem if a["Bytes"] < 0)
    live = d["live_at_peak"]
    assert sum(r["bytes"] for r in live) == d["peak_allocated"]
    assert any(r["site"].startswith("make_snapshots.py:") for r in live)
    assert step["top_kernels"] and step["top_ops"][0]["total_us"] >= step["top_ops"][-1]["total_us"]
    text = run("profile", TRACE).stdout.decode()
    assert "peak allocated 1.2GiB, peak reserved 1.4GiB" in text
    assert "kernels by GPU time:" in text


def ev(name, cat, ts, dur=None, tid=1, **args):
    e = {"ph": "X" if dur is not None else "i", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts}
    if dur is not None:
        e["dur"] = dur
    if args:
        e["args"] = args
    return e


def mem(ts, nbytes, addr, total, reserved, tid=1, device=0):
    return ev("[memory]", "cpu_instant_event", ts, tid=tid, **{
        "Total Reserved": reserved, "Total Allocated": total, "Bytes": nbytes, "Device Id": device,
        "Device Type": 1, "Addr": addr})


def synthetic_trace():
    """Two steps. 50 bytes exist before the profile; 100 more are allocated
    before the first step, outside any op. Step 1: a user line calls
    aten::empty (1000 bytes) and frees it; step 2 starts with 150 live and
    peaks at 650 (aten::mm, 500 bytes, on the autograd thread: no Python)."""
    return {
        "deviceProperties": [{"id": 0, "name": "Test GPU"}],
        "with_stack": 1,
        "traceEvents": [
            ev("ProfilerStep#1", "user_annotation", 100, 100),
            ev("ProfilerStep#2", "user_annotation", 200, 100),
            ev("train.py(10): <module>", "python_function", 90, 300, **{"Python id": 1, "Python parent id": None}),
            ev("model/net.py(42): forward", "python_function", 110, 20, **{"Python id": 2, "Python parent id": 1}),
            ev("torch/nn/functional.py(7): linear", "python_function", 112, 10,
               **{"Python id": 3, "Python parent id": 2}),
            ev("aten::empty", "cpu_op", 113, 5),
            mem(50, 100, 0x10, 150, 2048),
            mem(114, 1000, 0x20, 1150, 4096),
            mem(150, -1000, 0x20, 150, 4096),
            ev("aten::mm", "cpu_op", 220, 10, tid=2),
            mem(221, 500, 0x30, 650, 4096, tid=2),
            mem(250, -500, 0x30, 150, 4096, tid=2),
            ev("cudaLaunchKernel", "cuda_runtime", 222, 1, tid=2, correlation=7),
            ev("gemm_kernel", "kernel", 400, 30, device=0, correlation=7),  # runs later on the GPU
        ],
    }


def test_per_step_peaks_sites_and_kernels(run, tmp_path):
    f = tmp_path / "t.json"
    f.write_text(json.dumps(synthetic_trace()))
    j = json.loads(run("profile", "--json", f).stdout)
    s1, s2 = j["steps"]
    assert (s1["step"], s2["step"]) == (1, 2)
    d1, d2 = s1["devices"]["cuda:0"], s2["devices"]["cuda:0"]
    assert d1["peak_allocated"] == 1150 and d1["allocs"] == 1 and d1["frees"] == 1
    assert d2["peak_allocated"] == 650 and d2["peak_reserved"] == 4096
    top = d1["live_at_peak"][0]
    assert top["op"] == "aten::empty" and top["bytes"] == 1000
    assert top["site"] == "net.py:42:forward"  # the user's line, not torch's functional.py
    rows = {r["op"]: r["bytes"] for r in d1["live_at_peak"]}
    assert rows["(allocated before the profile began)"] == 50
    assert rows["(no op: allocated outside any recorded op)"] == 100
    assert sum(rows.values()) == d1["peak_allocated"]
    assert d2["allocated_most"][0]["op"] == "aten::mm" and d2["allocated_most"][0]["site"] == ""
    assert s2["top_kernels"] == [{"name": "gemm_kernel", "total_us": 30.0, "count": 1}]
    assert s1["top_kernels"] == []
    # --user-code widens what counts as the user's code
    wide = json.loads(run("profile", "--json", "--user-code", "torch/nn", f).stdout)
    assert wide["steps"][0]["devices"]["cuda:0"]["live_at_peak"][0]["site"] == "functional.py:7:linear"
    # a bare list of events is a valid Chrome trace; gzip and stdin work too
    g = tmp_path / "t.json.gz"
    g.write_bytes(gzip.compress(json.dumps(synthetic_trace()["traceEvents"]).encode()))
    bare = json.loads(run("profile", "--json", g).stdout)
    assert bare["steps"][1]["devices"] == j["steps"][1]["devices"]
    assert json.loads(run("profile", "--json", "-", input=f.read_bytes()).stdout) == j


def test_page_of_a_trace(run, tmp_path):
    out = tmp_path / "p.html"
    r = run("profile", TRACE, "-o", out)
    assert r.returncode == 0, r.stderr
    html = out.read_text()
    assert "http://" not in html and "https://" not in html
    data = page_data(html)
    assert data["kind"] == "profile" and data["curves"][0]["device"] == 0
    j = json.loads(run("profile", "--json", TRACE).stdout)
    assert max(data["curves"][0]["allocated"]) == j["steps"][0]["devices"]["cuda:0"]["peak_allocated"]


def test_timeline_page_from_every_torch_format(run, tmp_path):
    times, sizes = json.loads(gzip.decompress(TIMELINE.read_bytes()))
    out = tmp_path / "tl.html"
    assert run("profile", "--timeline", TIMELINE, "-o", out).returncode == 0
    data = page_data(out.read_text())
    assert data["kind"] == "timeline" and len(data["series"]) == 8
    peak_total = max(sum(row[1:]) for row in sizes)
    assert sum(s[data["peak"]] for s in data["series"]) == peak_total
    # plain .json too
    plain = tmp_path / "tl.json"
    plain.write_text(json.dumps([times, sizes]))
    assert run("profile", "--timeline", plain, "-o", tmp_path / "p.html").returncode == 0
    assert page_data((tmp_path / "p.html").read_text())["series"] == data["series"]
    # .raw.json.gz: [t_ns, action, +-bytes, category]; preexisting (t = -1) counts from the start
    raw = [[-1, 1, 1000, 0], [5000, 2, 300, 4], [5000, 2, 200, 3], [9000, 4, -300, 4]]
    rf = tmp_path / "x.raw.json.gz"
    rf.write_bytes(gzip.compress(json.dumps(raw).encode()))
    assert run("profile", "--timeline", rf, "-o", tmp_path / "r.html").returncode == 0
    d = page_data((tmp_path / "r.html").read_text())
    assert d["ts"] == [0.0, 4.0]  # ms from the first time: 5 us and 9 us
    assert [s[0] for s in d["series"]][:5] == [1000, 0, 0, 200, 300]
    assert [s[1] for s in d["series"]][:5] == [1000, 0, 0, 200, 0]


@pytest.mark.parametrize("content,needle", [
    (b"", "the input is empty (0 bytes), not a torch.profiler trace"),
    (b"hello", "malformed JSON at byte 0"),
    (b'{"traceEvents": [{"name": "a\xff\xfeb"}]}', "malformed JSON at byte 26: the string there is not valid UTF-8"),
    (b'{"traceEvents": [{"name": "a\\n\xc3"}]}', "malformed JSON at byte 26: the string there is not valid UTF-8"),
    (b'{"traceEvents": [{"cat": "cpu_op", "name": "\xed\xa0\x80", "ph": "X", "dur": 1}]}',
     "malformed JSON at byte 43: the string there is not valid UTF-8"),
    (b'{"traceEvents": [{"ph": "X", "ts": 1', "truncated JSON"),
    (b'{"schemaVersion": 1}', "no traceEvents"),
    (b'{"traceEvents": 5}', "traceEvents is not a list"),
    (b'{"traceEvents": []} x', "unexpected data after the end"),
    (b'{"traceEvents": [{"ts": 1e999999}]}', "bad number"),
    (b'{"traceEvents": [{"name": "a\\u12"}]}', "bad \\u escape"),
])
def test_bad_traces_one_line_and_exit_2(run, tmp_path, content, needle):
    f = tmp_path / "bad.json"
    f.write_bytes(content)
    out = tmp_path / "x.html"
    for args in (("profile", f), ("profile", f, "-o", out), ("profile", "--timeline", f, "-o", out)):
        r = run(*args)
        err = r.stderr.decode()
        assert r.returncode == 2 and err.count("\n") == 1, (args, err)
        assert err.startswith(f"memsight profile: {f}: "), (args, err)  # names the file
        assert not out.exists()
    assert needle in run("profile", f).stderr.decode()


def test_timeline_needs_an_html_output(run):
    r = run("profile", "--timeline", TIMELINE)
    assert r.returncode == 2 and b"-o NAME.html" in r.stderr


def test_numbers_out_of_range_are_not_taken_as_ints(run, tmp_path):
    """Found by fuzz_profile: an id or size of 1e308 does not overflow an
    integer: the event that holds it is dropped, and counted."""
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"deviceProperties": [{"id": 1e308, "name": "x"}], "traceEvents": [
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "tid": 1, "ts": 5,
         "args": {"Total Allocated": 1e308, "Bytes": -1e308, "Addr": 1e300, "Device Type": 1, "Device Id": 0}}]}))
    r = run("profile", "--json", f)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["steps"][0]["devices"] == {}
    assert [n["count"] for n in j["input_notes"]] == [1]

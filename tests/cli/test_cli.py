"""The memsight command end to end: torch-identical text, outputs, errors."""
import gzip
import html
import json
import lzma
import os
import pathlib
import pickle
import re
import subprocess
import xml.etree.ElementTree as ET

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
FIXTURES = sorted(p.stem for p in DATA.glob("*.pickle"))


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("cmd,suffix", [("stats", "stats.txt"), ("trace", "trace.txt")])
def test_text_matches_torch_cli(run, name, cmd, suffix):
    # torch's CLI print()s the function's string: one more newline.
    r = run(cmd, DATA / f"{name}.pickle")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (DATA / f"{name}.{suffix}").read_bytes() + b"\n"


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("cmd", ["segments", "memory"])
def test_folded_matches_torch(run, name, cmd, tmp_path):
    r = run(cmd, DATA / f"{name}.pickle", "-o", "-")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (DATA / f"{name}.{cmd}.folded").read_bytes()
    out = tmp_path / "x.folded"
    assert run(cmd, DATA / f"{name}.pickle", "-o", out).returncode == 0
    assert out.read_bytes() == r.stdout


def test_svg_is_wellformed_and_default_name(run, tmp_path):
    r = run("segments", DATA / "oom.pickle", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    svg = (tmp_path / "output.svg").read_text()
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert "http://" not in svg.replace("http://www.w3.org/2000/svg", "").replace(
        "http://www.w3.org/1999/xlink", "")


def test_compressed_inputs(run, tmp_path):
    raw = (DATA / "mlp_train.pickle").read_bytes()
    expected = run("stats", DATA / "mlp_train.pickle").stdout
    (tmp_path / "a.pickle.gz").write_bytes(gzip.compress(raw))
    (tmp_path / "a.pickle.xz").write_bytes(lzma.compress(raw))
    for f in ("a.pickle.gz", "a.pickle.xz"):
        r = run("stats", tmp_path / f)
        assert r.returncode == 0, r.stderr
        assert r.stdout == expected
    r = run("stats", "-", input=raw)
    assert r.stdout == expected


def py_compare(before, after):
    """torch's compare() printing, evaluated by the real CPython."""
    b = pickle.load(open(before, "rb"))["segments"]
    a = pickle.load(open(after, "rb"))["segments"]
    bs = {(s["address"], s["total_size"]) for s in b}
    as_ = {(s["address"], s["total_size"]) for s in a}
    return (f"only_before = {[x for x, _ in (bs - as_)]}\n"
            f"only_after = {[x for x, _ in (as_ - bs)]}\n")


@pytest.mark.parametrize("before,after", [("mlp_train", "transformer_train"),
                                          ("oom", "state_only"), ("multistream", "mlp_train")])
def test_compare_prints_cpython_set_order(run, before, after, tmp_path):
    r = run("compare", DATA / f"{before}.pickle", DATA / f"{after}.pickle", "-o", tmp_path / "c.svg")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == py_compare(DATA / f"{before}.pickle", DATA / f"{after}.pickle")
    ET.parse(tmp_path / "c.svg")


def test_compare_folded_prefixes(run):
    r = run("compare", DATA / "mlp_train.pickle", DATA / "oom.pickle", "-o", "-")
    lines = r.stdout.decode().splitlines()
    assert lines and all(l.startswith(("only_before;stream_", "only_after;stream_")) for l in lines)


def test_convert_roundtrip_is_same_data(run, tmp_path):
    for name in FIXTURES:
        for ext in (".pickle", ".pickle.gz", ".pickle.zst"):
            out = tmp_path / (name + ext)
            r = run("convert", DATA / f"{name}.pickle", "-o", out)
            assert r.returncode == 0, r.stderr
            if ext == ".pickle":
                assert pickle.load(open(out, "rb")) == pickle.load(open(DATA / f"{name}.pickle", "rb"))
            elif ext == ".pickle.gz":
                assert pickle.loads(gzip.decompress(out.read_bytes())) == pickle.load(
                    open(DATA / f"{name}.pickle", "rb"))
            assert run("stats", out).stdout == run("stats", DATA / f"{name}.pickle").stdout


def test_summary_oom_diagnosis(run):
    r = run("summary", DATA / "oom.pickle")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert "OUT OF MEMORY at trace entry 146" in text
    assert "384.0MiB" in text
    j = json.loads(run("summary", "--json", DATA / "oom.pickle").stdout)
    dev = j["devices"][0]
    (oom,) = dev["ooms"]
    assert oom["requested"] == 402653184
    # The fixture ran under a 2 GiB cap with the GPU nearly empty.
    assert oom["verdict"] == "limit"
    assert dev["peak_allocated"] >= oom["allocated"]
    assert 1 <= len(dev["top_sites"]) <= 10
    assert dev["top_sites"][0]["bytes"] >= dev["top_sites"][-1]["bytes"]


def test_summary_requested_peak_is_consistent_with_python_replay(run):
    """Recompute torch's requested_bytes peak independently from the raw pickle
    (requested sizes count from alloc to free_completed)."""
    data = pickle.load(open(DATA / "transformer_train.pickle", "rb"))
    trace = data["device_traces"][0]
    final = sum(b["requested_size"] for s in data["segments"] for b in s["blocks"]
                if b["state"] in ("active_allocated", "active_pending_free"))
    net = sum(e["size"] if e["action"] == "alloc" else -e["size"]
              for e in trace if e["action"] in ("alloc", "free_completed"))
    cur = peak = final - net
    for e in trace:
        if e["action"] == "alloc":
            cur += e["size"]
        elif e["action"] == "free_completed":
            cur -= e["size"]
        peak = max(peak, cur)
    j = json.loads(run("summary", "--json", DATA / "transformer_train.pickle").stdout)
    assert j["devices"][0]["peak_requested"] == peak
    assert j["devices"][0]["requested_now"] == final
    # block sizes are whole 512-byte units of at least the request
    assert j["devices"][0]["peak_allocated"] >= peak


COUNTERS = DATA / "counters"
RECORDED = sorted(p.name[: -len(".stats.json")] for p in COUNTERS.glob("*.stats.json"))
TORCH_COUNTERS = [("peak_allocated", "allocated_bytes.all.peak"), ("allocated_now", "allocated_bytes.all.current"),
                  ("peak_active", "active_bytes.all.peak"), ("active_now", "active_bytes.all.current"),
                  ("peak_reserved", "reserved_bytes.all.peak"), ("reserved_now", "reserved_bytes.all.current"),
                  ("peak_requested", "requested_bytes.all.peak"), ("requested_now", "requested_bytes.all.current")]


@pytest.mark.parametrize("name", RECORDED)
def test_summary_numbers_are_torchs_counters(run, name):
    """Recorded with torch 2.11 on a GPU after reset_peak_memory_stats(), with
    torch.cuda.memory_stats() saved beside each snapshot (at the dump, or
    inside the OOM observer): every peak and current value is torch's."""
    stats = json.loads((COUNTERS / f"{name}.stats.json").read_text())
    j = json.loads(run("summary", "--json", COUNTERS / f"{name}.pickle").stdout)
    for d, v in stats["devices"].items():
        dev = j["devices"][int(d)]
        assert dev["exact"] and dev["exactness"] == ""
        got = {ours: dev[ours] for ours, _ in TORCH_COUNTERS}
        want = {ours: v["memory_stats"][theirs] for ours, theirs in TORCH_COUNTERS}
        assert got == want


def test_recorded_workloads_cover_the_hard_cases():
    assert {"default_stacks", "python_stacks", "record_stream", "frag_oom", "capped_oom", "rounding", "graph_tree",
            "expandable_counters", "fsdp2_rank0", "fsdp2_rank1"} <= set(RECORDED)
    # record_stream: a block waiting on the side stream is active, not allocated
    m = json.loads((COUNTERS / "record_stream.stats.json").read_text())["devices"]["0"]["memory_stats"]
    assert m["active_bytes.all.peak"] > m["allocated_bytes.all.peak"]


def test_top_site_is_user_code_with_default_stacks(run):
    """torch's default recording (stacks="all") puts allocator frames first:
    the site is still the user's line, and the hidden frames are counted."""
    j = json.loads(run("summary", "--json", COUNTERS / "default_stacks.pickle").stdout)
    top = j["devices"][0]["top_sites"][0]
    assert top["site"] == "record_counters.py:81:train" and top["site_kind"] == "user"
    assert "native frames]" in top["stack"]
    kinds = {f["kind"] for f in top["frames"]}
    assert kinds == {"user", "library", "internal"}
    # backward-pass blocks (no Python frames) are named by their autograd node
    assert any(s["site"].startswith("<backward: ") for s in j["devices"][0]["top_sites"])
    text = run("summary", COUNTERS / "default_stacks.pickle").stdout.decode()
    assert "CUDACachingAllocator" not in text
    assert "allocated before recording began" in text
    allf = run("summary", "--frames", "all", COUNTERS / "default_stacks.pickle").stdout.decode()
    assert "internal CUDACachingAllocator.cpp:0:" in allf.replace("  ", " ")


def test_user_code_option_widens_and_narrows(run):
    f = COUNTERS / "default_stacks.pickle"
    wide = json.loads(run("summary", "--json", "--user-code", "torch/optim", f).stdout)
    assert any(s["site"].startswith("adam.py:") for s in wide["devices"][0]["top_sites"])
    assert wide["user_code"] == ["torch/optim"]
    narrow = json.loads(run("summary", "--json", "--user-code", "!record_counters", f).stdout)
    # no user code left: sites fall back to the innermost library Python frame
    assert {s["site_kind"] for s in narrow["devices"][0]["top_sites"]} <= {"library", "internal"}
    assert any(s["site"].startswith(("linear.py:", "functional.py:", "adam.py:"))
               for s in narrow["devices"][0]["top_sites"])
    r = run("summary", "--frames", "some", f)
    assert r.returncode == 2 and b"--frames" in r.stderr and r.stderr.count(b"\n") == 1


def test_memory_from_before_recording_is_one_group(run):
    j = json.loads(run("summary", "--json", COUNTERS / "default_stacks.pickle").stdout)
    dev = j["devices"][0]
    # the model's weights: 3 blocks of (LayerNorm + 2 Linear) parameters
    assert dev["before_recording"]["count"] == 18 and dev["before_recording"]["bytes"] > 20 * 2**20
    assert not any("no stack recorded" in s["site"] for s in dev["top_sites"])
    assert sum(s["bytes"] for s in dev["top_sites"]) + dev["before_recording"]["bytes_at_peak"] == dev["peak_allocated"]


def test_fragmentation_oom_is_called_fragmentation(run):
    j = json.loads(run("summary", "--json", COUNTERS / "frag_oom.pickle").stdout)
    (oom,) = j["devices"][0]["ooms"]
    assert oom["verdict"] == "fragmentation" and oom["causes"] == ["fragmentation", "limit"]
    assert oom["pool"] == "large" and oom["largest_free_in_pool"] < oom["requested"] <= oom["cached_free"]
    # the simulation (memsight whatif) answers in place of the generic hint:
    # the 1 MiB pieces pin the small pool whatever the settings
    assert oom["remedies"][0].startswith("no allocator setting alone saves it")
    assert oom["simulated"].startswith("Simulated on this history: none of the standard")
    assert oom["site"].startswith("record_counters.py:168:fill")


def test_capped_oom_is_a_limit_with_demand(run):
    j = json.loads(run("summary", "--json", COUNTERS / "capped_oom.pickle").stdout)
    (oom,) = j["devices"][0]["ooms"]
    assert oom["verdict"] == "limit" and oom["causes"] == ["limit", "demand"]
    assert oom["cached_free"] < oom["requested"]
    assert any("checkpoint" in r for r in oom["remedies"])
    text = run("summary", COUNTERS / "capped_oom.pickle").stdout.decode()
    assert "OUT OF MEMORY at trace entry %d: limit (with demand)" % oom["event"] in text


# --- bad input: one line on stderr, exit 2, no output file -------------------

def assert_user_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stderr)
    err = r.stderr.decode()
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, err


def test_missing_file(run):
    assert_user_error(run("stats", "/nonexistent.pickle"), "No such file")


def test_not_a_pickle(run, tmp_path):
    f = tmp_path / "x.pickle"
    f.write_text("hello, I am text\n")
    assert_user_error(run("stats", f), f"{f}: text, not a memory snapshot")
    f.write_bytes(b"\x01\x02binary")
    assert_user_error(run("stats", f), f"{f}: not a pickle (starts with byte 0x01)")


def test_empty_file(run, tmp_path):
    f = tmp_path / "empty.pickle"
    f.write_bytes(b"")
    assert_user_error(run("stats", f), f"{f}: the input is empty (0 bytes), not a memory snapshot")


@pytest.mark.parametrize("cut", [1, 2, 100, 5000, 20000])
def test_truncated(run, tmp_path, cut):
    f = tmp_path / "t.pickle"
    f.write_bytes((DATA / "oom.pickle").read_bytes()[:cut])
    assert_user_error(run("trace", f), "truncated pickle at byte")


def test_corrupted_memo(run, tmp_path):
    f = tmp_path / "c.pickle"
    f.write_bytes(b"\x80\x04}\x94(\x8c\x08segments\x94j\xff\xff\xff\x00u.")
    assert_user_error(run("stats", f), "corrupted pickle at byte", "memo")


class Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def test_code_running_pickle_refused(run, tmp_path):
    f = tmp_path / "evil.pickle"
    f.write_bytes(pickle.dumps({"segments": [Evil()], "device_traces": []}, protocol=4))
    r = run("stats", f)
    assert_user_error(r, "refusing to run code", "STACK_GLOBAL", "at byte")
    assert b"pwned" not in r.stdout
    f.write_bytes(pickle.dumps({"segments": [Evil()]}, protocol=2))
    assert_user_error(run("stats", f), "GLOBAL")


@pytest.mark.parametrize("obj,needle", [
    ([1, 2, 3], "segments[0] is an int"),
    ({"a": 1}, "no 'segments' key (top-level keys: a)"),
    (42, "holds an int"),
    ({"segments": [], "device_traces": "x"}, "'device_traces' is a str"),
])
def test_not_a_snapshot(run, tmp_path, obj, needle):
    f = tmp_path / "n.pickle"
    f.write_bytes(pickle.dumps(obj, protocol=4))
    assert_user_error(run("summary", f), "not a memory snapshot", needle)


def test_no_partial_output_on_error(run, tmp_path):
    bad = tmp_path / "bad.pickle"
    bad.write_bytes((DATA / "oom.pickle").read_bytes()[:3000])
    out = tmp_path / "out.svg"
    assert_user_error(run("segments", bad, "-o", out))
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [bad]


def test_usage_errors(run):
    assert_user_error(run("stats"), "missing argument")
    assert_user_error(run("frobnicate", "x"), "unknown command")
    assert_user_error(run("stats", DATA / "oom.pickle", "--bogus"), "unknown option --bogus")
    r = run("stats", "--help")
    assert r.returncode == 0 and b"usage: memsight stats" in r.stdout
    r = run("--help")
    assert r.returncode == 0 and b"summary" in r.stdout


def test_output_to_a_device_is_written_in_place(run, tmp_path):
    # Renaming a temp file over /dev/null would replace the device with a file.
    import os
    import stat
    r = run("memory", DATA / "oom.pickle", "-o", "/dev/null")
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not [p for p in os.listdir("/dev") if p.startswith(".null")]
    fifo = tmp_path / "fifo.folded"
    os.mkfifo(fifo)
    import threading
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("data", open(fifo, "rb").read()))
    t.start()
    assert run("memory", DATA / "oom.pickle", "-o", fifo).returncode == 0
    t.join(10)
    assert got["data"] == (DATA / "oom.memory.folded").read_bytes()


@pytest.mark.parametrize("name", FIXTURES)
def test_live_sites_at_peak_match_python_replay(run, name):
    """Sites at the peak add up to exactly the allocations live then."""
    data = pickle.load(open(DATA / f"{name}.pickle", "rb"))
    j = json.loads(run("summary", "--json", DATA / f"{name}.pickle").stdout)
    for d, trace in enumerate(data.get("device_traces", [])):
        dev = j["devices"][d]
        if len(dev["top_sites"]) >= 10:
            continue  # truncated list: totals cannot be compared
        # allocated (torch's allocated_bytes): from alloc until free_requested
        live = {b["address"]: b["requested_size"] for s in data["segments"] if s["device"] == d
                for b in s["blocks"] if b["state"] == "active_allocated"}
        for e in reversed(trace[dev["peak_allocated_event"] + 1:]):
            if e["action"] == "alloc":
                live.pop(e["addr"], None)
            elif e["action"] == "free_requested":
                live[e["addr"]] = e["size"]
        before = dev["before_recording"]["count_at_peak"]
        assert sum(s["count"] for s in dev["top_sites"]) + before == len(live)
        # sites count block sizes (allocated_bytes), the trace requested sizes
        site_bytes = sum(s["bytes"] for s in dev["top_sites"]) + dev["before_recording"]["bytes_at_peak"]
        assert site_bytes == dev["peak_allocated"] >= sum(live.values())


LARGE_XZ = ROOT.parent / "shared" / "fixtures" / "large" / "large.pickle.xz"


@pytest.mark.skipif(not LARGE_XZ.exists(), reason="../shared is not beside the checkout")
def test_thread_count_changes_nothing_but_speed(memsight_bin, tmp_path):
    # The 856k-entry file is decoded in shares on several threads; the
    # output must not depend on how many (MEMSIGHT_THREADS; junk is ignored).
    big = tmp_path / "large.pickle"
    big.write_bytes(lzma.decompress(LARGE_XZ.read_bytes()))
    outputs = set()
    for threads in ["1", "2", "5", "junk", ""]:
        env = dict(os.environ, MEMSIGHT_THREADS=threads)
        for cmd in (["summary", "--json", big], ["stats", big]):
            r = subprocess.run([memsight_bin, *map(str, cmd)], capture_output=True, env=env, timeout=120)
            assert r.returncode == 0, r.stderr
            outputs.add((cmd[0], r.stdout))
    assert len(outputs) == 2


def test_svg_colours_frames_by_kind(run, tmp_path):
    """The flamegraph keeps torch's folded text but colours frames by the
    frame rule: user code warm, library Python muted, plumbing grey."""
    out = tmp_path / "m.svg"
    assert run("memory", DATA / "counters" / "default_stacks.pickle", "-o", out).returncode == 0
    fills = {}
    for m in re.finditer(r'<title>([^<]*?) \([^<]*</title><rect [^>]*fill="rgb\((\d+),(\d+),(\d+)\)"',
                         out.read_text()):
        fills[html.unescape(m.group(1))] = tuple(map(int, m.groups()[1:]))
    user = fills["record_counters.py:81:train"]
    lib = fills["adam.py:238:step"]
    grey = next(v for k, v in fills.items() if k.startswith("CUDACachingAllocator.cpp:0:"))
    assert user[0] >= 205 and user[2] <= 75          # warm
    assert lib[0] >= 225 and lib[2] >= 150           # muted tan
    assert abs(grey[0] - grey[1]) <= 1 and grey[0] < 215  # grey

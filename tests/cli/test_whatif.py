"""`memsight whatif`: the recorded requests through the simulated allocator.

The self-check runs on every recording in tests/data (torch 2.11, real
GPUs); a hand-built fragmentation OOM has outcomes worked out by hand from
torch's rules; a recording altered on purpose must fail the self-check and
say so first.
"""

from __future__ import annotations

import json
import pathlib
import pickle

import pytest

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
RECORDINGS = sorted(p for p in [*DATA.glob("*.pickle"), *(DATA / "counters").glob("*.pickle")]
                    if p.stem not in ("wrapped", "state_only"))
MiB = 2**20
GiB = 2**30


def whatif(run, *args):
    r = run("whatif", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_self_check_reproduces_every_recording(run, path):
    """Under the recorded settings the simulation makes every recorded
    segment event (size, order, the request it served), puts every block at
    its recorded address, and reaches torch's reserved peak."""
    j = whatif(run, path)
    assert j["devices"], "no device with a history"
    for dev in j["devices"]:
        c = dev["self_check"]
        assert c["ok"], c
        assert c["matching_events"] == c["segment_events"] and c["misplaced"] == 0
        assert c["peak_reserved_simulated"] == c["peak_reserved_recorded"]
        assert c["ooms_simulated"] == dev["recorded_ooms"]
        (rec,) = [r for r in dev["results"] if r["recorded"]]
        assert rec["peak_reserved"] == c["peak_reserved_recorded"]


# The counters recordings carry torch's own memory_stats().
@pytest.mark.parametrize("name", ["frag_oom", "capped_oom", "expandable_counters", "rounding", "record_stream"])
def test_reserved_peak_is_torchs(run, name):
    stats = json.loads((DATA / "counters" / f"{name}.stats.json").read_text())
    j = whatif(run, DATA / "counters" / f"{name}.pickle")
    (dev,) = j["devices"]
    want = stats["devices"][str(dev["device"])]["memory_stats"]["reserved_bytes.all.peak"]
    assert dev["self_check"]["peak_reserved_simulated"] == want


def test_table_sorted_by_peak_reserved(run):
    j = whatif(run, DATA / "mlp_train.pickle")
    (dev,) = j["devices"]
    labels = [r["settings"] for r in dev["results"]]
    assert "recorded" in labels and "expandable_segments:True" in labels
    assert {"max_split_size_mb:64", "garbage_collection_threshold:0.8", "roundup_power2_divisions:4"} <= set(labels)
    peaks = [r["peak_reserved"] for r in dev["results"]]
    assert peaks == sorted(peaks)
    gc = [r for r in dev["results"] if r["settings"].startswith("garbage")]
    assert all("set_per_process_memory_fraction" in r["note"] for r in gc)  # no cap: no effect
    text = run("whatif", DATA / "mlp_train.pickle").stdout.decode()
    assert text.index("self-check") < text.index("peak reserved")
    assert "torch's 556.0MiB reserved" in text


def frag_recording(tmp_path: pathlib.Path) -> pathlib.Path:
    """What torch 2.11 records for whatif_workloads.frag_oom with the default
    settings under a 206 MiB cap: ten 20 MiB segments holding a 9 MiB block
    twice, the first ones freed, then a 12 MiB request that needs a segment
    of its own and fails (200 MiB reserved + 12 > 206), and the unwinding."""
    base, trace = 0x7F0000000000, []

    def e(action, addr, size, **kw):
        trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                      "time_us": len(trace), "frames": [], **kw})

    for i in range(10):
        seg = base + i * 32 * MiB
        e("segment_alloc", seg, 20 * MiB)
        e("alloc", seg, 9 * MiB)
        e("alloc", seg + 9 * MiB, 9 * MiB)
    for i in range(10):
        e("free_requested", base + i * 32 * MiB, 9 * MiB)
        e("free_completed", base + i * 32 * MiB, 9 * MiB)
    trace.append({"action": "oom", "device_free": 79 * GiB, "size": 12 * MiB, "stream": 0,
                  "time_us": len(trace), "frames": []})
    for i in range(10):
        e("free_requested", base + i * 32 * MiB + 9 * MiB, 9 * MiB)
        e("free_completed", base + i * 32 * MiB + 9 * MiB, 9 * MiB)
    segments = [{"device": 0, "address": base + i * 32 * MiB, "total_size": 20 * MiB, "allocated_size": 0,
                 "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
                 "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
                 "blocks": [{"address": base + i * 32 * MiB, "size": 20 * MiB, "requested_size": 0,
                             "state": "inactive", "frames": []}]} for i in range(10)]
    f = tmp_path / "frag.pickle"
    f.write_bytes(pickle.dumps({"segments": segments, "device_traces": [trace]}, protocol=4))
    return f


def test_fragmentation_oom_by_hand(run, tmp_path):
    f = frag_recording(tmp_path)
    total = 80 * GiB
    cap = ["--device-memory", str(total), "--memory-fraction", repr(206 * MiB / total)]
    (dev,) = whatif(run, f, *cap)["devices"]
    assert dev["self_check"]["ok"] and dev["recorded_ooms"] == [50]
    assert dev["memory"]["limit"] == int(206 * MiB / total * total)
    by = {r["settings"]: r for r in dev["results"]}
    # Expandable segments pack the pairs into 180 MiB of 20 MiB pages; the
    # 12 MiB request maps one more page: it fits, at 200 MiB reserved.
    exp = by["expandable_segments:True"]
    assert exp["recorded_ooms_avoided"] == [50] and exp["peak_reserved"] == 200 * MiB
    assert exp["segments_created"] == 10 and exp["ooms"] == []
    # Rounding to quarters of powers of two makes each 9 MiB request 10 MiB,
    # a segment of its own (10 MiB or more: rounded to 2 MiB, not packed in
    # 20): the freed ones are whole segments, which torch frees and retries.
    rnd = by["roundup_power2_divisions:4"]
    assert rnd["recorded_ooms_avoided"] == [50] and rnd["peak_reserved"] == 200 * MiB
    assert rnd["segments_created"] == 21
    # The others keep the 9 MiB holes between live blocks, in segments that
    # cannot be freed, and fail.
    for name in ("recorded", "max_split_size_mb:64", "garbage_collection_threshold:0.6"):
        assert by[name]["recorded_ooms_avoided"] == [] and by[name]["peak_reserved"] == 200 * MiB, name
        assert by[name]["ooms"][0]["cause"] == "limit", name
    # Without the fraction the cap is inferred from the OOM: at least the
    # 200 MiB the run reached, less than 212 MiB.
    (dev,) = whatif(run, f)["devices"]
    m = dev["memory"]
    assert m["limit_inferred"] and m["limit"] == 200 * MiB and m["limit_at_most"] == 212 * MiB - 1
    # One setting asked for: only its result.
    (dev,) = whatif(run, f, *cap, "--set", "expandable_segments:True")["devices"]
    assert [r["settings"] for r in dev["results"]] == ["expandable_segments:True"]
    text = run("whatif", f, *cap, "--set", "expandable_segments:True").stdout.decode()
    assert "the recorded OOM at trace entry 50 (12.0MiB) is avoided: the request fits" in text


def layout_recording(tmp_path: pathlib.Path, rounded: bool) -> pathlib.Path:
    """One history of requests recorded twice: with the default settings
    and with roundup_power2_divisions:4, which rounds only the first request
    (30 MiB) differently. The segments sit where the driver puts them
    (top-down: each new one below the others). A 20 MiB request then finds
    two free 32 MiB blocks and takes the lower one: S2, the newer segment,
    so that S1 is whole again once x is freed and holds the 64 MiB request;
    in S1 it would have cost a new 64 MiB segment."""
    top, trace, segments = 0x7F0000000000, [], []
    p_seg = 32 * MiB if rounded else 30 * MiB
    s0, s1, s2 = top, top - 64 * MiB, top - 96 * MiB

    def e(action, addr, size):
        trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                      "time_us": len(trace), "frames": []})

    def free(addr, size):
        e("free_requested", addr, size)
        e("free_completed", addr, size)

    for seg, seg_size, size in ((s0, p_seg, 30 * MiB), (s1, 64 * MiB, 64 * MiB), (s2, 32 * MiB, 32 * MiB)):
        e("segment_alloc", seg, seg_size)  # p, q, w: a segment each
        e("alloc", seg, size)
    free(s1, 64 * MiB)
    e("alloc", s1, 32 * MiB)  # x: S1 split
    free(s2, 32 * MiB)
    e("alloc", s2, 20 * MiB)  # r: the lower of two free 32 MiB blocks
    free(s1, 32 * MiB)
    e("alloc", s1, 64 * MiB)  # S1 whole again
    for addr, size in ((s1, 64 * MiB), (s2, 20 * MiB), (s0, 30 * MiB)):
        free(addr, size)
    for addr, size in ((s2, 32 * MiB), (s1, 64 * MiB), (s0, p_seg)):
        segments.append({"device": 0, "address": addr, "total_size": size, "allocated_size": 0,
                         "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
                         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
                         "blocks": [{"address": addr, "size": size, "requested_size": 0,
                                     "state": "inactive", "frames": []}]})
    divisions = {str(2**i): 4 if rounded else 0 for i in range(16)}
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "roundup_power2_divisions:4" if rounded else "",
                "max_split_size": -1, "garbage_collection_threshold": 0.0, "expandable_segments": False,
                "roundup_power2_divisions": divisions}
    f = tmp_path / f"layout-{'round_4' if rounded else 'default'}.pickle"
    f.write_bytes(pickle.dumps({"segments": segments, "device_traces": [trace],
                                "allocator_settings": settings}, protocol=4))
    return f


def test_same_requests_same_settings_same_prediction(run, tmp_path):
    """The prediction depends on the requests and the settings, not on the
    recording's own segments: simulated under rounding, the default run's
    history must predict what the rounded run recorded. Its segment sizes
    part from the recording at the first request, so every segment's
    address is the simulation's own; placed above the recorded ones they
    put the newer segment higher, r went into S1 and the 64 MiB request
    needed a fourth segment (192 MiB reserved instead of 128)."""
    default, rounded = layout_recording(tmp_path, False), layout_recording(tmp_path, True)
    rnd = ["--set", "defaults,roundup_power2_divisions:4"]
    (own,) = whatif(run, rounded, *rnd)["devices"]
    assert own["self_check"]["ok"] and own["self_check"]["peak_reserved_recorded"] == 128 * MiB
    assert own["results"][0]["peak_reserved"] == 128 * MiB
    (dev,) = whatif(run, default, *rnd)["devices"]
    assert dev["self_check"]["ok"] and dev["self_check"]["peak_reserved_recorded"] == 126 * MiB
    (res,) = dev["results"]
    assert res["peak_reserved"] == 128 * MiB and res["segments_created"] == 3


def test_summary_cites_the_simulation(run, tmp_path):
    f = frag_recording(tmp_path)
    (oom,) = json.loads(run("summary", "--json", f).stdout)["devices"][0]["ooms"]
    assert oom["verdict"] == "fragmentation"
    assert oom["simulated"].startswith("Simulated on this history: with expandable_segments:True this "
                                       "request fits")
    assert oom["remedies"][0].startswith("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (simulated")
    text = run("summary", f).stdout.decode()
    assert "- set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (simulated on this history" in text
    # A recording where no setting helps says so, in place of the generic hint.
    (oom,) = json.loads(run("summary", "--json", DATA / "counters" / "capped_oom.pickle").stdout)["devices"][0]["ooms"]
    assert "none of the standard allocator settings" in oom["simulated"]
    assert not any(r.startswith("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") for r in oom["remedies"])


def test_a_recording_the_simulation_cannot_reproduce_says_so_first(run, tmp_path):
    d = pickle.loads((DATA / "counters" / "frag_oom.pickle").read_bytes())
    trace = d["device_traces"][0]
    k = next(i for i, e in enumerate(trace) if e["action"] == "segment_alloc" and i > 100)
    trace[k]["size"] += 2 * MiB  # torch "made" a larger segment than its rules say
    f = tmp_path / "altered.pickle"
    f.write_bytes(pickle.dumps(d, protocol=4))
    (dev,) = whatif(run, f)["devices"]
    c = dev["self_check"]
    assert not c["ok"] and c["first_difference"]["recorded"]["size"] == trace[k]["size"]
    assert c["first_difference"]["simulated"]["size"] == trace[k]["size"] - 2 * MiB
    text = run("whatif", f).stdout.decode()
    first = text.splitlines()[1]
    assert "DIFFERS from the recording" in first
    assert text.index("DIFFERS") < text.index("peak reserved")
    assert "then torch made a 4.0MiB segment_alloc" in text


def test_incomplete_histories_are_named(run, tmp_path):
    (dev,) = whatif(run, DATA / "wrapped.pickle")["devices"]
    assert not dev["self_check"]["ok"] and "estimated" in dev["self_check"]["incomplete"]
    text = run("whatif", DATA / "wrapped.pickle").stdout.decode()
    assert "self-check  not possible: the trace frees" in text
    f = tmp_path / "none.pickle"
    f.write_bytes(pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=4))
    text = run("whatif", f).stdout.decode()
    assert text.startswith("The snapshot has no allocation history to simulate: what-if needs")
    assert "_record_memory_history()" in text


def test_one_entry_is_counted_in_the_singular(run):
    for cmd, rest in (("whatif", "; recorded settings:"), ("summary", ", 38 segments"),
                      ("leaks", "; no iterations")):
        text = run(cmd, DATA / "state_only.pickle").stdout.decode()
        assert text.startswith("Device 0 - 1 trace entry" + rest), (cmd, text[:80])


@pytest.mark.parametrize("args,needle", [
    (["--set", "max_split_size_mb:10"], "at least 20"),
    (["--set", "expandable_segments:yes"], "True or False"),
    (["--set", "bogus:1"], "unknown allocator setting 'bogus'"),
    (["--set", "per_process_memory_fraction:0.5"], "--device-memory"),
    (["--memory-fraction", "2"], "option --memory-fraction 2: a memory fraction is in (0.0, 1.0]"),
    (["--memory-fraction", "1.5"], "option --memory-fraction 1.5:"),
    (["--memory-fraction", "NaN"], "option --memory-fraction needs a number in (0.0, 1.0] such as 0.5, got 'NaN'"),
    (["--set", "garbage_collection_threshold:0"], "garbage_collection_threshold:0: it must be in (0.0, 1.0)"),
    (["--set", "defaults:0"], "'defaults' takes no value"),
    (["--set", ":0"], "expected KEY:VALUE, found ':' without a key"),
    (["--device-memory", "lots"], "--device-memory needs a size"),
    (["--device-memory", "80"], "--device-memory 80 is 80 bytes, less than any GPU has: give its unit"),
    (["--set"], "--set needs a value"),
])
def test_bad_options_are_one_line_errors(run, args, needle):
    r = run("whatif", DATA / "oom.pickle", *args)
    assert r.returncode == 2 and r.stdout == b""
    err = r.stderr.decode()
    assert err.count("\n") == 1 and needle in err, err


def test_output_file_and_help(run, tmp_path):
    out = tmp_path / "w.json"
    assert run("whatif", "--json", "-o", out, DATA / "oom.pickle").returncode == 0
    assert json.loads(out.read_text())["devices"][0]["recorded_ooms"] == [146]
    h = run("whatif", "--help").stdout.decode()
    assert "--set KEY:VALUE" in h and "--device-memory" in h and "--memory-fraction" in h


def test_an_inferred_cap_is_simulated_at_both_ends(run):
    """oom.pickle ran under a 2 GiB cap the snapshot does not record: the OOM
    bounds it (at least the 1.7 GiB reached, less than 1.7 GiB + the 384 MiB
    segment). Expandable segments reach entry 145 with more reserved: under
    the lowest cap that request fails, under the highest the run goes on to
    fail at 146 as recorded."""
    (dev,) = whatif(run, DATA / "oom.pickle")["devices"]
    m = dev["memory"]
    assert m["limit_inferred"] and m["limit"] == dev["self_check"]["peak_reserved_recorded"]
    assert m["limit_at_most"] == m["limit"] + 384 * MiB - 1
    exp = next(r for r in dev["results"] if r["settings"] == "expandable_segments:True")
    assert exp["stopped_at"] == 145 and exp["at_cap_high"]["stopped_at"] == -1
    assert exp["at_cap_high"]["limit"] == m["limit_at_most"] and exp["at_cap_high"]["recorded_ooms_avoided"] == []
    assert "new OOM at entry 145; cap 2.0GiB: still happens" in run("whatif", DATA / "oom.pickle").stdout.decode()


def test_layout_from_a_history_without_cudamalloc_addresses_is_flagged(run):
    """A history recorded with expandable segments has no cudaMalloc address
    to start a layout from: a prediction under settings without them says
    that its segments were placed by the model, in the text and the JSON;
    one that starts from recorded addresses does not."""
    (dev,) = whatif(run, DATA / "expandable.pickle", "--set", "expandable_segments:False")["devices"]
    (res,) = dev["results"]
    assert res["segments_placed_unanchored"] == res["segments_created"] > 0
    text = run("whatif", DATA / "expandable.pickle", "--set", "expandable_segments:False").stdout.decode()
    assert "holds no cudaMalloc address" in text and "model of the driver" in text
    table = run("whatif", DATA / "expandable.pickle").stdout.decode()
    assert "addresses: settings without expandable segments" in table
    for r in whatif(run, DATA / "expandable.pickle")["devices"][0]["results"]:
        assert (r["segments_placed_unanchored"] > 0) == ("expandable_segments:True" not in r["conf"]), r
    (dev,) = whatif(run, DATA / "mlp_train.pickle", "--set", "expandable_segments:False")["devices"]
    assert dev["results"][0]["segments_placed_unanchored"] == 0
    assert b"model of the driver" not in run("whatif", DATA / "mlp_train.pickle").stdout


def test_alike_devices_are_simulated_into_one_report(run, tmp_path):
    """Devices with the same history read the same: one report stands for
    all of them (summary's rule), in the text and the JSON, so the output is
    bounded by what differs, not by how many devices the snapshot names."""
    snap = pickle.loads((DATA / "mlp_train.pickle").read_bytes())
    (trace,) = [t for t in snap["device_traces"] if t]
    other = [dict(e, size=e["size"] * 2) if e["action"] == "alloc" else e for e in trace]
    n, odd = 40, 7
    traces = [other if d == odd else trace for d in range(n)]
    segments = [dict(s, device=d) for d in range(n) for s in snap["segments"] if d != odd]
    f = tmp_path / "devices.pickle"
    f.write_bytes(pickle.dumps(dict(snap, segments=segments, device_traces=traces), protocol=4))

    devs = whatif(run, f)["devices"]
    assert [(d["device"], d.get("alike")) for d in devs] == [(0, [[0, 6], [8, 39]]), (odd, None)]
    alone = whatif(run, DATA / "mlp_train.pickle")["devices"][0]
    assert {k: v for k, v in devs[0].items() if k != "alike"} == dict(alone, device=0)
    text = run("whatif", f).stdout.decode()
    heads = [line.split(" - ")[0] for line in text.splitlines() if line.startswith("Device")]
    assert heads == ["Devices 0-6, 8-39 (39 alike)", "Device 7"]


def test_output_name_chooses_the_format(run, tmp_path):
    # As for every report: .json writes JSON, .txt text, a page's name is
    # refused before anything is read, and --json with a text name too.
    snap = DATA / "mlp_train.pickle"
    out = tmp_path / "w.json"
    assert run("whatif", snap, "-o", out).returncode == 0
    assert json.loads(out.read_text())["schema"] == 1
    txt = tmp_path / "w.txt"
    assert run("whatif", snap, "-o", txt).returncode == 0
    assert txt.read_text() == run("whatif", snap).stdout.decode()
    for args in (["-o", tmp_path / "w.html"], ["--json", "-o", tmp_path / "e.txt"]):
        r = run("whatif", snap, *args)
        assert r.returncode == 2 and len(r.stderr.decode().splitlines()) == 1, r.stderr
        assert not (tmp_path / "w.html").exists() and not (tmp_path / "e.txt").exists()
    assert "-o FILE" in run("whatif", "--help").stdout.decode()


def test_self_check_runs_under_the_recorded_conditions(run):
    """A smaller --device-memory is a hypothetical: the self-check still
    reproduces the recording on the device as recorded (issue 33, item 3)."""
    (dev,) = whatif(run, DATA / "oom.pickle", "--device-memory", "1G")["devices"]
    assert dev["self_check"]["ok"] and dev["self_check_on_recorded_device"]
    assert dev["memory"]["total"] == 2**30
    rec = next(r for r in dev["results"] if r["recorded"])
    assert rec["stopped_at"] >= 0  # the recorded settings on 1 GiB die earlier
    text = run("whatif", DATA / "oom.pickle", "--device-memory", "1G").stdout.decode()
    assert "DIFFERS" not in text and "On the device as recorded" in text
    (dev,) = whatif(run, DATA / "oom.pickle")["devices"]
    assert not dev["self_check_on_recorded_device"]


def climbing_recording(tmp_path: pathlib.Path, segments: int = 20) -> pathlib.Path:
    """A job that dies of an OOM while memory still climbs: each 20 MiB
    segment takes two 9 MiB blocks that stay (2 MiB left over in each), then
    a 12 MiB request fails under the cap, and the recording ends there (the
    unwinding frees only). Expandable segments pack the blocks and let the
    request fit, but the climb goes on past what the recording holds."""
    base, trace = 0x7F0000000000, []

    def e(action, addr, size):
        trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                      "time_us": len(trace), "frames": []})

    for i in range(segments):
        seg = base + i * 32 * MiB
        e("segment_alloc", seg, 20 * MiB)
        e("alloc", seg, 9 * MiB)
        e("alloc", seg + 9 * MiB, 9 * MiB)
    trace.append({"action": "oom", "device_free": 79 * GiB, "size": 12 * MiB, "stream": 0,
                  "time_us": len(trace), "frames": []})
    for i in range(segments):
        for off in (0, 9 * MiB):
            e("free_requested", base + i * 32 * MiB + off, 9 * MiB)
            e("free_completed", base + i * 32 * MiB + off, 9 * MiB)
    segs = [{"device": 0, "address": base + i * 32 * MiB, "total_size": 20 * MiB, "allocated_size": 0,
             "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
             "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
             "blocks": [{"address": base + i * 32 * MiB, "size": 20 * MiB, "requested_size": 0,
                         "state": "inactive", "frames": []}]} for i in range(segments)]
    f = tmp_path / "climbing.pickle"
    f.write_bytes(pickle.dumps({"segments": segs, "device_traces": [trace]}, protocol=4))
    return f


def test_a_history_that_ends_at_an_oom_says_what_it_covers(run, tmp_path):
    """Issue 33, item 4: the prediction is for the recorded part, and a
    steady climb says the setting only postpones the OOM."""
    f = climbing_recording(tmp_path)
    (dev,) = whatif(run, f)["devices"]
    assert dev["self_check"]["ok"] and dev["recorded_ooms"] == [60]
    t = dev["truncation"]
    assert t["ends_at_oom"] == 60 and t["steady"] and t["growth"] > 0 and t["unit"] == "entries"
    exp = next(r for r in dev["results"] if r["settings"] == "expandable_segments:True")
    assert exp["recorded_ooms_avoided"] == [60] and exp["postponed_by"] > 0
    rec = next(r for r in dev["results"] if r["recorded"])
    assert rec["postponed_by"] == -1
    text = run("whatif", f).stdout.decode()
    assert "history     ends at the recorded OOM (trace entry 60)" in text
    assert "up to trace entry 60, where the recording ends" in text
    assert f"postponed about {exp['postponed_by']} entries" in text
    one = run("whatif", f, "--set", "expandable_segments:True").stdout.decode()
    assert "of the recorded part only, up to trace entry 60" in " ".join(one.split())
    assert "the setting postpones the OOM rather than saves the job" in " ".join(one.split())
    (oom,) = json.loads(run("summary", "--json", f).stdout)["devices"][0]["ooms"]
    assert "The recording ends at this OOM" in oom["simulated"]
    assert f"postpones the OOM by about {exp['postponed_by']} entries" in oom["simulated"]
    assert "only postpones it" in oom["remedies"][0]
    # A job that caught the OOM and went on: its history is not cut short there.
    d = pickle.loads(f.read_bytes())
    for action in ("alloc", "free_requested", "free_completed"):
        d["device_traces"][0].append({"action": action, "addr": 0x7F0000000000, "size": 9 * MiB,
                                      "stream": 0, "time_us": 999, "frames": []})
    f.write_bytes(pickle.dumps(d, protocol=4))
    (dev,) = whatif(run, f)["devices"]
    assert dev["recorded_ooms"] == [60] and dev["truncation"]["ends_at_oom"] == -1
    assert "recording ends" not in run("whatif", f).stdout.decode()


def test_a_state_only_snapshot_has_no_history_to_simulate(run):
    """Issue 33, item 5: no table of identical rows; what it lacks and how to
    record it, in whatif and in leaks."""
    (dev,) = whatif(run, DATA / "state_only.pickle")["devices"]
    assert dev["state_only"] and dev["results"] == [] and not dev["self_check"]["ok"]
    text = run("whatif", DATA / "state_only.pickle").stdout.decode()
    assert "trace entry -1" not in text and "settings   " not in text
    assert "no history" in text and "_record_memory_history()" in text
    (lk,) = json.loads(run("leaks", "--json", DATA / "state_only.pickle").stdout)["devices"]
    assert lk["verdict"] == "no trace" and "no allocation history" in lk["message"]
    assert "_record_memory_history()" in lk["message"]


def capped_recording(tmp_path: pathlib.Path, settings: dict | None = None) -> pathlib.Path:
    """One 1534 MiB block in its own segment, then a 20 MiB request refused
    by a cap: the cap lies between 1534 MiB and 1554 MiB."""
    base = 0x7F0000000000
    trace = [{"action": "segment_alloc", "addr": base, "size": 1534 * MiB, "stream": 0, "time_us": 0, "frames": []},
             {"action": "alloc", "addr": base, "size": 1534 * MiB, "stream": 0, "time_us": 1, "frames": []},
             {"action": "oom", "device_free": 79 * GiB, "size": 20 * MiB, "stream": 0, "time_us": 2, "frames": []}]
    segs = [{"device": 0, "address": base, "total_size": 1534 * MiB, "allocated_size": 1534 * MiB,
             "active_size": 1534 * MiB, "requested_size": 1534 * MiB, "stream": 0, "segment_type": "large",
             "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
             "blocks": [{"address": base, "size": 1534 * MiB, "requested_size": 1534 * MiB,
                         "state": "active_allocated", "frames": []}]}]
    d = {"segments": segs, "device_traces": [trace]}
    if settings is not None:
        d["allocator_settings"] = settings
    f = tmp_path / "capped.pickle"
    f.write_bytes(pickle.dumps(d, protocol=4))
    return f


def test_words_that_say_what_they_mean(run, tmp_path):
    """Issue 33, item 6: bounds that read apart, --set defaults named as
    torch's defaults, and one reserved peak entry in summary and whatif."""
    text = run("whatif", capped_recording(tmp_path)).stdout.decode()
    assert "a memory cap between 1534.0MiB and 1554.0MiB" in text, text
    one = run("whatif", DATA / "mlp_train.pickle", "--set", "defaults").stdout.decode()
    assert "with torch's defaults (in place of the recorded settings):" in one
    assert "defaults (over the recorded settings)" not in one
    both = run("whatif", DATA / "mlp_train.pickle", "--set", "defaults,max_split_size_mb:64").stdout.decode()
    assert "with defaults,max_split_size_mb:64 (over torch's defaults):" in both
    for name in ("mlp_train.pickle", "oom.pickle", "transformer_train.pickle"):
        (s,) = json.loads(run("summary", "--json", DATA / name).stdout)["devices"]
        (w,) = whatif(run, DATA / name)["devices"]
        rec = next(r for r in w["results"] if r["recorded"])
        assert s["peak_reserved_event"] == rec["peak_reserved_event"], name


def test_recorded_settings_are_range_checked(run, tmp_path):
    """Issue 34, item 9: a recorded value torch could not run with is
    ignored and said to be; a recorded threshold marks only the rows that set
    one as without effect."""
    bad = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -7, "garbage_collection_threshold": float("inf"),
           "expandable_segments": False, "roundup_power2_divisions": {"1": -4, "2": 0}}
    (dev,) = whatif(run, capped_recording(tmp_path, bad))["devices"]
    assert dev["recorded_settings"] == ""
    assert [w.split(":")[0] for w in dev["ignored_settings"]] == [
        "max_split_size -7", "garbage_collection_threshold inf", "roundup_power2_divisions[1] -4"]
    text = run("whatif", capped_recording(tmp_path, bad)).stdout.decode()
    assert "ignored     the recorded garbage_collection_threshold inf: not in (0.0, 1.0)" in text
    assert "inf" not in text.splitlines()[0]
    gc = dict(bad, max_split_size=-1, garbage_collection_threshold=0.8, roundup_power2_divisions={})
    snap = pickle.loads((DATA / "mlp_train.pickle").read_bytes())
    snap["allocator_settings"] = gc
    f = tmp_path / "gc.pickle"
    f.write_bytes(pickle.dumps(snap, protocol=4))
    (dev,) = whatif(run, f)["devices"]
    for r in dev["results"]:
        marked = bool(r["note"])
        assert marked == (r["recorded"] or r["settings"].startswith("garbage_collection_threshold")), r


def test_a_device_the_snapshot_lacks_is_named_with_what_it_lists(run, tmp_path):
    f = tmp_path / "none.pickle"
    f.write_bytes(pickle.dumps({"segments": [], "device_traces": []}, protocol=4))
    r = run("diff", "--at", "0", f)
    assert r.returncode == 2 and b"(it lists 0)" not in r.stderr
    assert b"it lists no device at all" in r.stderr
    r = run("diff", "--device", "3", DATA / "oom.pickle", DATA / "oom.pickle")
    assert b"the snapshot has no device 3: it lists only device 0" in r.stderr


def test_unused_at_peak_is_never_negative(run, tmp_path):
    """Issue 34, item 9: a block live when the trace began, in a segment the
    snapshot does not record, is allocated outside the reserved memory the
    simulation knows; unused at the peak read "-10.0MiB -500.0%". It counts
    the recorded segments only, and says what lay outside them."""
    def e(i, action, addr, size):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": i,
                "frames": []}
    trace = [e(0, "segment_alloc", 0x20000000, 2 * MiB), e(1, "alloc", 0x20000000, MiB),
             e(2, "free_requested", 0x10000000, 11 * MiB),
             e(3, "free_completed", 0x10000000, 11 * MiB)]
    f = tmp_path / "outside.pickle"
    f.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace]}, protocol=4))
    (dev,) = whatif(run, f)["devices"]
    for r in dev["results"]:
        assert r["unused_at_peak"] == MiB, r
        assert r["allocated_outside_segments_at_peak"] == 11 * MiB, r
    table = run("whatif", f).stdout.decode()
    one = run("whatif", f, "--set", "expandable_segments:True").stdout.decode()
    for text in (table, one):
        assert "-10.0MiB" not in text and "-500.0%" not in text, text
        words = " ".join(text.split())
        assert "11.0MiB was allocated then in blocks live when the trace began" in words, text
    assert "1.0MiB 50.0%" in table

"""`memsight estimate`: a requests-only snapshot (tests/cli/requests_only.py,
the shape memsight.torch.estimate writes) completed by the allocator
simulation. The completed snapshot must read as a recording of what the
simulation did: whatif's self-check on it passes, its segment events and
peaks are whatif's under the same settings, and summary, the kinds and the
OOM diagnosis work on it unchanged."""

from __future__ import annotations

import json
import pickle

import pytest
import requests_only

DATA_MiB = 1 << 20


@pytest.fixture
def requests(tmp_path):
    path = tmp_path / "requests.pickle"
    data = requests_only.write(path)
    return path, data


def estimate(run, src, out, *args):
    r = run("estimate", src, "-o", out, "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def js(run, *args):
    r = run(*args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def segment_events(trace):
    return [(e["action"], e["addr"], e["size"]) for e in trace if e["action"].startswith("segment_")]


@pytest.mark.parametrize("settings", [[], ["--set", "expandable_segments:True"],
                                      ["--set", "roundup_power2_divisions:4"],
                                      ["--set", "max_split_size_mb:64"]])
def test_completed_snapshot_is_whatifs_run(run, requests, tmp_path, settings):
    """Peak reserved as whatif simulates the same requests under the same
    settings; the completed snapshot through whatif reproduces itself (every
    segment event, every block address, the peak); summary reads the same
    peaks from it."""
    src, data = requests
    out = tmp_path / "done.pickle"
    answer = estimate(run, src, out, *settings)
    (dev,) = answer["devices"]
    want = js(run, "whatif", src, *settings)["devices"][0]
    (alt,) = [r for r in want["results"] if r["recorded"] != bool(settings)]
    assert dev["peak_reserved"] == alt["peak_reserved"] and dev["unused_at_peak"] == alt["unused_at_peak"]
    assert dev["oom"] is None and dev["fits"] is None  # no device memory: no bound

    again = js(run, "whatif", out)["devices"][0]
    check = again["self_check"]
    assert check["ok"], check
    assert check["segment_events"] > 0 and check["peak_reserved_recorded"] == dev["peak_reserved"]

    done = pickle.loads(out.read_bytes())
    trace = done["device_traces"][0]
    # Every request of the input, in order; segment events only between them.
    requests_kept = [(e["action"], e["size"]) for e in trace if not e["action"].startswith("segment_")]
    assert requests_kept == [(e["action"], e["size"]) for e in data["device_traces"][0]]
    assert done["segments"] and segment_events(trace)
    # Each segment event comes right before the request that took it.
    for i, e in enumerate(trace):
        if e["action"] in ("segment_alloc", "segment_map"):
            nxt = next(x for x in trace[i:] if not x["action"].startswith("segment_"))
            assert nxt["action"] == "alloc" and nxt["time_us"] == e["time_us"]
    # Blocks live at the end sit where their alloc entry says.
    live = {}
    for e in trace:
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
        elif e["action"] == "free_completed":
            live.pop(e["addr"])
    blocks = {b["address"]: b for s in done["segments"] for b in s["blocks"]
              if b["state"] == "active_allocated"}
    assert set(blocks) == set(live)
    assert all(blocks[a]["requested_size"] == live[a] and blocks[a]["frames"] for a in live)

    s = js(run, "summary", out)["devices"][0]
    assert s["peak_reserved"] == dev["peak_reserved"] and s["peak_allocated"] == dev["peak_allocated"]
    assert s["exact"], s["exactness"]
    # Requested bytes: the running sum of the request sizes, at its peak.
    total = peak = 0
    for e in data["device_traces"][0]:
        total += e["size"] if e["action"] == "alloc" else -e["size"] if e["action"] == "free_completed" else 0
        peak = max(peak, total)
    assert s["peak_requested"] == peak <= s["peak_allocated"]


def test_summary_says_estimate_and_kinds_follow_tags(run, requests, tmp_path):
    src, data = requests
    out = tmp_path / "done.pickle"
    estimate(run, src, out)
    text = run("summary", out).stdout.decode()
    assert text.startswith("ESTIMATE, not a recording: produced by tests/cli/requests_only.py, completed by memsight")
    assert "cuBLAS workspace 8.0MiB" in text.splitlines()[1]
    j = js(run, "summary", out)
    assert j["estimate"]["terms"] == [{"name": "cuBLAS workspace", "bytes": 8 * DATA_MiB}]
    cats = j["devices"][0]["categories"]
    tags = data["memsight_tags"]["storages"]
    assert cats["sources"]["tags_matched"] == len(tags)
    param = cats["at_snapshot"]["by_category"]["parameter"]
    assert param["tagged"] == param["bytes"] and param["requested"] == sum(t["size"] for t in tags)
    # The tags moved with their blocks to the simulated addresses.
    done = pickle.loads(out.read_bytes())
    moved = {t["addr"] for t in done["memsight_tags"]["storages"]}
    assert moved and not moved & {t["addr"] for t in tags}
    est = done["memsight_estimate"]
    assert est["terms"] == data["memsight_estimate"]["terms"]
    assert est["completed"]["devices"][0]["peak_reserved"] == j["devices"][0]["peak_reserved"]
    # A recording's summary JSON has no such key.
    assert "estimate" not in js(run, "summary", requests_only.DATA / "mlp_train.pickle")


def test_out_of_memory_ends_the_history(run, requests, tmp_path):
    """Under a small device the job runs out: the completed history ends with
    torch's oom entry at that request, summary diagnoses it and whatif on
    the completed snapshot reproduces it."""
    src, _ = requests
    out = tmp_path / "oom.pickle"
    answer = estimate(run, src, out, "--device-memory", "200M")
    (dev,) = answer["devices"]
    assert dev["fits"] is False and dev["oom"]["entry"] >= 0
    table = answer["whatif"]["devices"][0]
    (rec,) = [r for r in table["results"] if r["recorded"]]
    assert rec["stopped_at"] == dev["oom"]["entry"]
    done = pickle.loads(out.read_bytes())
    trace = done["device_traces"][0]
    assert trace[-1]["action"] == "oom" and len(trace) == dev["oom"]["completed_entry"] + 1
    assert trace[-1]["device_free"] == dev["oom"]["device_free"] == 200 * DATA_MiB - dev["oom"]["reserved"]
    assert done["memsight_device_memory"] == [{"device": 0, "total": 200 * DATA_MiB, "limit": None}]
    (oom,) = js(run, "summary", out)["devices"][0]["ooms"]
    assert oom["event"] == dev["oom"]["completed_entry"]
    text = run("estimate", src, "-o", out, "--device-memory", "200M").stdout.decode()
    assert "RUNS OUT OF MEMORY at trace entry" in text
    assert js(run, "whatif", out)["devices"][0]["self_check"]["ok"]


def test_whatif_on_requests_only_says_estimated(run, requests):
    src, _ = requests
    text = run("whatif", src).stdout.decode()
    assert "self-check  estimated history: nothing recorded to check against." in text
    check = js(run, "whatif", src)["devices"][0]["self_check"]
    assert check["incomplete"] == "estimated history: nothing recorded to check against"


def test_refuses_a_recording(run, tmp_path):
    rec = requests_only.DATA / "mlp_train.pickle"
    r = run("estimate", rec, "-o", tmp_path / "x.pickle")
    assert r.returncode == 2 and not (tmp_path / "x.pickle").exists()
    (line,) = r.stderr.decode().strip().splitlines()
    assert "not a requests-only snapshot" in line


def test_bad_input_and_help(run, requests, tmp_path):
    src, _ = requests
    r = run("estimate", src)
    assert r.returncode == 2 and b"-o OUT.pickle" in r.stderr
    r = run("estimate", src, "-o", tmp_path / "x.pickle", "--set", "expandable_segments:Maybe")
    assert r.returncode == 2 and not (tmp_path / "x.pickle").exists()
    h = run("estimate", "--help")
    assert h.returncode == 0
    assert b"requests-only snapshot" in h.stdout and b"--device-memory SIZE" in h.stdout
    assert b"estimate SNAP -o OUT" in run("--help").stdout

"""`memsight leaks` on simulated training loops whose truth is known
(tests/data/make_leaks.py): a planted leak is found with its site, rate and
line to fix however the iterations are marked; a loop that does not grow,
noise, and a cache that fills up and then stays are not leaks; too few
iterations are said to be too few."""

from __future__ import annotations

import json
import pathlib
import pickle
import sys

import pytest

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
sys.path.insert(0, str(DATA))
import make_leaks as ml  # noqa: E402
from test_bounded_memory import run_measured  # noqa: E402
from test_input_limits import snapshot_page_meta  # noqa: E402


def kept_sizes(snap: dict, frame: dict) -> list[int]:
    """The sizes of the blocks `frame` allocated that are still live at the
    end, in allocation order: the truth a growth curve adds up. A block can
    be larger than its request (a free block is split only when more than
    1 MiB would be left), so the sizes come from the snapshot's blocks."""
    live = {b["address"]: b["size"] for seg in snap["segments"] for b in seg["blocks"]
            if b["state"] == "active_allocated"}
    made = [e["addr"] for e in snap["device_traces"][0]
            if e["action"] == "alloc" and e["frames"] and e["frames"][0] == frame]
    return [live[a] for a in made if a in live]


def rising(sizes: list[int], n: int) -> list[int]:
    """Live bytes at the start of each of n iterations when iteration i keeps sizes[i]."""
    out, total = [], 0
    for i in range(n):
        out.append(total)
        total += sizes[i] if i < len(sizes) else 0
    return out


@pytest.fixture
def leaks(run, tmp_path):
    def _leaks(snap: dict, *args: str) -> dict:
        f = tmp_path / "loop.pickle"
        f.write_bytes(pickle.dumps(snap, protocol=4))
        r = run("leaks", "--json", f, *args)
        assert r.returncode == 0, r.stderr
        (dev,) = json.loads(r.stdout)["devices"]
        return dev
    return _leaks


@pytest.mark.parametrize("marks,source", [("memsight", "memsight steps"), ("profiler", "profiler steps"),
                                          ("optimizer", "optimizer steps"), ("none", "repeating allocations")])
def test_a_kept_loss_is_found_with_its_site_and_rate(leaks, marks, source):
    snap = ml.loop(steps=30, marks=marks, keep_loss=True)
    d = leaks(snap)
    assert d["iterations"]["source"] == source
    assert d["iterations"]["count"] == 30
    assert d["verdict"] == "leak"
    assert d["measured"] == 28  # every complete iteration but the last
    (site,) = d["sites"]
    assert site["site"] == ml.LOSS_SITE
    assert site["bytes_per_iteration"] == 512
    assert site["iterations_grown"] == 28
    # the losses of the 28 iterations checked, by their blocks' sizes
    assert site["surviving_count"] == 28
    assert site["surviving_bytes"] == sum(kept_sizes(snap, ml.LOSS)[:28])
    assert d["bytes_per_iteration"] == 512
    assert d["allocated_at"]["site"] == ml.LOSS_SITE
    if marks in ("memsight", "profiler"):
        assert d["iterations"]["numbers"] == list(range(30))


def test_a_kept_graph_names_its_root_as_the_line_to_fix(leaks):
    # The model's output (1 MiB, made first) and the loss made from it are kept
    # every step: both sites grow; the loss, newest, holds the rest.
    d = leaks(ml.loop(steps=30, keep_loss=True, keep_output=True))
    assert d["verdict"] == "leak"
    assert [(s["site"], s["bytes_per_iteration"]) for s in d["sites"]] == [
        (ml.OUTPUT_SITE, 1 << 20), (ml.LOSS_SITE, 512)]
    assert d["bytes_per_iteration"] == (1 << 20) + 512
    assert d["allocated_at"]["site"] == ml.LOSS_SITE
    assert d["message"] == "leak: 1.0MiB more stays allocated after each iteration, at 2 sites; " \
                           "allocated at " + ml.LOSS_SITE
    assert d["sites"][0]["made_in"] == "forward"
    # the newest survivors, newest first, each in its own step
    newest = d["sites"][1]["newest"]
    assert [v["iteration"] for v in newest] == [27, 26, 25, 24, 23]
    assert all(v["bytes"] == 512 and v["requested"] == 512 for v in newest)


@pytest.mark.parametrize("keep,phase,holders", [
    ({"keep_output": True}, "Blocks allocated in the forward survive", "an evaluation loop without torch.no_grad()"),
    ({"keep_loss": True}, "Blocks allocated outside the forward, backward and optimizer step survive",
     "a loss appended to a list")])
def test_the_advice_names_where_it_was_allocated_and_fits_how(leaks, run, tmp_path, keep, phase, holders):
    # The history says where a block was allocated, never what keeps it: the
    # site is cited as "allocated at", the holders suggested are those that
    # fit the phase the blocks were made in, and detach() (which keeps the
    # same bytes) is never the advice.
    snap = ml.loop(steps=30, **keep)
    d = leaks(snap)
    assert "fix" not in d
    site = ml.OUTPUT_SITE if "keep_output" in keep else ml.LOSS_SITE
    assert d["allocated_at"]["site"] == site and d["message"].endswith("; allocated at " + site)
    advice = d["advice"]
    assert advice.startswith("The snapshot records where these blocks were allocated, not what keeps them alive.")
    assert phase in advice and holders in advice
    assert "tensor.detach() does not free them: it shares the same memory" in advice
    assert "or tensor.detach() instead" not in advice and "gc.get_referrers()" in advice
    f = tmp_path / "kept.pickle"
    f.write_bytes(pickle.dumps(snap, protocol=4))
    text = " ".join(run("leaks", f).stdout.decode().split())
    assert "line to fix" not in text and "keep loss.item() or tensor.detach()" not in text
    assert f"Allocated at: {site}" in text and " ".join(advice.split()) in text
    # A snapshot carrying memsight.torch's holders record points there instead.
    snap["memsight_holders"] = {"version": 1}
    assert "(memsight_holders)" in leaks(snap)["advice"]


@pytest.mark.parametrize("kwargs", [{}, {"noise": 7}, {"noise": 11, "marks": "none"}, {"cache_steps": 4},
                                    {"cache_steps": 15}])
def test_no_leak_in_a_loop_that_does_not_grow(leaks, kwargs):
    d = leaks(ml.loop(steps=30, **kwargs))
    assert d["verdict"] == "none", d["sites"]
    assert d["sites"] == [] and d["allocated_at"] is None and d["bytes_per_iteration"] == 0


@pytest.mark.parametrize("seed", range(5))
def test_a_leak_among_noise_is_found_and_the_noise_is_not(leaks, seed):
    d = leaks(ml.loop(steps=24, noise=seed + 1, keep_loss=True, marks="none"))
    assert d["verdict"] == "leak"
    assert [s["site"] for s in d["sites"]] == [ml.LOSS_SITE]
    assert d["sites"][0]["bytes_per_iteration"] == 512


def test_a_cache_that_plateaus_grows_then_stays_in_the_growth_curve(leaks):
    snap = ml.loop(steps=30, cache_steps=4)
    d = leaks(snap)
    cache = next(g for g in d["growth"] if g["site"] == ml.CACHE_SITE)
    assert not cache["leak"]
    sizes = kept_sizes(snap, ml.CACHE)
    assert len(sizes) == 4 and all(n >= 1 << 20 for n in sizes)
    assert cache["live"] == rising(sizes, 30)
    assert set(cache["live"][4:]) == {sum(sizes)}


def test_the_growth_curve_of_a_leak_rises_by_the_rate(leaks):
    snap = ml.loop(steps=30, keep_output=True)
    d = leaks(snap)
    total, site = d["growth"][0], d["growth"][1]
    assert total["site"] == "" and site["site"] == ml.OUTPUT_SITE and site["leak"]
    sizes = kept_sizes(snap, ml.OUTPUT)
    assert len(sizes) == 30 and all(n >= 1 << 20 for n in sizes)
    assert site["live"] == rising(sizes, 30)
    # After the first step (optimizer state, ...) only the leak grows: the
    # rest stays within the extra an unsplit block holds (at most 1 MiB + 512 B
    # here, as the same request lands in a block of another size).
    rest = [t - n for t, n in zip(total["live"], site["live"])][1:]
    assert max(rest) - min(rest) <= (1 << 20) + 512


def test_too_few_iterations_are_said_to_be_too_few(leaks, run, tmp_path):
    d = leaks(ml.loop(steps=5, keep_loss=True))  # 4 complete iterations
    assert d["verdict"] == "too few iterations"
    assert "4 complete iterations" in d["message"] and "at least 5" in d["message"]
    assert d["sites"] == []
    f = tmp_path / "few.pickle"
    f.write_bytes(pickle.dumps(ml.loop(steps=6, keep_loss=True), protocol=4))
    r = run("leaks", f)
    assert r.returncode == 0 and b"LEAK" in r.stdout  # 5 complete: enough


def test_no_iterations_without_marks_or_a_pattern(leaks):
    snap = ml.loop(steps=1, marks="none")
    d = leaks(snap)
    assert d["verdict"] == "no iterations"
    assert "no iterations found" in d["message"]


def test_the_text_names_the_leak_the_rate_and_the_line(run, tmp_path):
    f = tmp_path / "leak.pickle"
    f.write_bytes(pickle.dumps(ml.loop(steps=30, keep_loss=True, keep_output=True), protocol=4))
    r = run("leaks", f)
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert "30 steps marked by memsight.torch.mark_step(), steps 0 to 29" in text
    assert "LEAK: 1.0MiB more stays allocated after each iteration" in text
    assert "1.0MiB/iteration  in 28 of 28 iterations  unknown, made in the forward" in text
    assert "512.0B/iteration  in 28 of 28 iterations" in text
    assert "Allocated at: train.py:45:train_step." in text
    out = tmp_path / "leaks.json"
    assert run("leaks", f, "-o", out).returncode == 0
    assert json.loads(out.read_text())["devices"][0]["verdict"] == "leak"


def test_the_page_cuts_a_leaking_sites_long_name(run, tmp_path):
    # The page embeds `leaks --json` with names cut as in its other tables
    # (kNameLimit, 16 KiB); the text report cuts it by the same rule as
    # summary's, saying how long it was.
    snap = ml.loop(steps=30, keep_loss=True)
    name = "loss_" + "x" * (1 << 20)
    long_loss = [dict(ml.LOSS, name=name)]
    for e in snap["device_traces"][0]:
        if e["frames"] and e["frames"][0] == ml.LOSS:
            e["frames"] = long_loss
    f = tmp_path / "long.pickle"
    f.write_bytes(pickle.dumps(snap, protocol=4))
    out = tmp_path / "v.html"
    assert run("view", f, "-o", out).returncode == 0
    meta, raw = snapshot_page_meta(out.read_text())
    (dev,) = meta["meta"]["leaks"]["devices"]
    assert dev["verdict"] == "leak" and dev["sites"][0]["site"].startswith("train.py:45:loss_xxx")
    assert "[cut at 16384 of " in dev["sites"][0]["site"]
    assert b"x" * 20000 not in raw and len(raw) < 1_000_000
    text = run("leaks", f).stdout.decode()
    assert name not in text and f"loss_{'x' * 16379}\u2026 [cut at 16384 of {len(name)} bytes]" in text


def test_no_leak_text_and_the_real_training_run(run):
    r = run("leaks", DATA / "mlp_train.pickle")
    assert r.returncode == 0, r.stderr
    assert b"Device 0 - 531 trace entries" in r.stdout


def test_bad_input_is_one_line_and_exit_2(run, tmp_path):
    f = tmp_path / "x.pickle"
    f.write_bytes(b"not a pickle")
    r = run("leaks", f)
    assert r.returncode == 2 and r.stderr.count(b"\n") == 1 and r.stderr.startswith(b"memsight leaks: ")
    r = run("leaks", "--json", f, "-o", tmp_path / "x.txt")
    assert r.returncode == 2 and b"--json writes JSON" in r.stderr
    legacy = tmp_path / "legacy.pickle"
    legacy.write_bytes(pickle.dumps([], protocol=2))
    r = run("leaks", legacy)
    assert r.returncode == 2 and b"needs the allocation history" in r.stderr


def test_a_real_recording_with_a_list_of_sums(run):
    # tests/data/multistream.pickle (torch 2.11, ../shared/tools/make_snapshots.py
    # w_multistream): 20 iterations of `xs.append(c.sum())` at line 166, no
    # step annotations: the loop is found from its allocations, the kept sums
    # (512-byte blocks) at the line that makes them.
    r = run("leaks", "--json", DATA / "multistream.pickle")
    assert r.returncode == 0, r.stderr
    (d,) = json.loads(r.stdout)["devices"]
    assert d["iterations"]["source"] == "repeating allocations" and d["iterations"]["count"] == 20
    assert d["verdict"] == "leak"
    (site,) = d["sites"]
    assert site["site"] == "make_snapshots.py:166:w_multistream"
    assert (site["bytes_per_iteration"], site["iterations_grown"], d["measured"]) == (512, 18, 18)
    assert d["allocated_at"]["site"] == "make_snapshots.py:166:w_multistream"


def test_memory_stays_small_with_many_steps_and_sites(memsight_bin, tmp_path):
    # 20,000 steps, each leaving one block at a site of its own: what is kept
    # per site grows with its survivors, not with the number of steps.
    trace, annotations = [], []
    for step in range(20_000):
        annotations.append({"stage": "START", "name": f"ProfilerStep#{step}", "device": 0, "time_us": 2 * step})
        trace.append({"action": "alloc", "addr": 0x7F0000000000 + 512 * step, "size": 512, "stream": 0,
                      "time_us": 2 * step + 1,
                      "frames": [{"name": "step", "filename": "/work/train.py", "line": step + 1}]})
    blocks = [{"address": e["addr"], "size": 512, "requested_size": 512, "state": "active_allocated",
               "frames": e["frames"]} for e in trace]
    segment = {"device": 0, "address": 0x7F0000000000, "total_size": 512 * len(blocks),
               "allocated_size": 512 * len(blocks), "active_size": 512 * len(blocks),
               "requested_size": 512 * len(blocks), "stream": 0, "segment_type": "large",
               "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks}
    f = tmp_path / "many.pickle"
    f.write_bytes(pickle.dumps({"segments": [segment], "device_traces": [trace],
                                "external_annotations": annotations}, protocol=4))
    rc, err, peak = run_measured(memsight_bin, "leaks", "--json", f, tmp=tmp_path)
    assert rc == 0, err
    d = json.loads((tmp_path / "out").read_text())["devices"][0]
    assert d["iterations"]["count"] == 20_000 and d["verdict"] == "none"  # each site grew once
    assert peak < 200 << 20, peak  # dense per-site rows would take gigabytes


def alike_ranges(d: dict) -> list[int]:
    """The devices a report stands for: its "alike" ranges, or its own device."""
    return [i for a, b in d.get("alike", [[d["device"], d["device"]]]) for i in range(a, b + 1)]


def test_alike_devices_are_reported_once(run, tmp_path):
    # 200 devices recording the same leaking loop, and device 100 a loop that
    # does not grow: two reports, as summary groups them, in text, JSON and
    # the page. Each device was reported in full (2 KB a device here; 400
    # bytes each for 100,000 devices of one allocation: 40 MB of JSON).
    leaking, plain = ml.loop(steps=12, marks="none", keep_loss=True), ml.loop(steps=12, marks="none")
    n, odd = 200, 100
    traces = [plain["device_traces"][0] if d == odd else leaking["device_traces"][0] for d in range(n)]
    segments = [dict(s, device=d) for d in range(n) for s in (plain if d == odd else leaking)["segments"]]
    f = tmp_path / "devices.pickle"
    f.write_bytes(pickle.dumps({"segments": segments, "device_traces": traces,
                                "external_annotations": []}, protocol=4))
    one = tmp_path / "one.pickle"
    one.write_bytes(pickle.dumps(leaking, protocol=4))

    r = run("leaks", "--json", f)
    assert r.returncode == 0, r.stderr
    grouped = json.loads(r.stdout)["devices"]
    assert [(d["device"], d["verdict"], d.get("alike")) for d in grouped] == [
        (0, "leak", [[0, 99], [101, 199]]), (odd, "none", None)]
    alone = json.loads(run("leaks", "--json", one).stdout)["devices"][0]
    assert {k: v for k, v in grouped[0].items() if k != "alike"} == alone
    # bounded by the distinct reports, not by the devices
    assert len(r.stdout) < 2 * len(json.dumps(alone)) + 1000

    text = run("leaks", f).stdout.decode()
    heads = [line for line in text.splitlines() if line.startswith("Device")]
    assert [h.split(" - ")[0] for h in heads] == ["Devices 0-99, 101-199 (199 alike)", "Device 100"]
    assert text.count("LEAK:") == 1
    assert len(text) < 2 * len(run("leaks", one).stdout) + 1000

    # The page holds the 64 busiest devices (the odd one among them) and the
    # leak reports of those, alike ones once.
    page = tmp_path / "v.html"
    assert run("view", f, "--device", str(odd), "-o", page).returncode == 0
    meta, _ = snapshot_page_meta(page.read_text())
    held = sorted(d["index"] for d in meta["meta"]["devices"])
    reports = meta["meta"]["leaks"]["devices"]
    assert len(reports) == 2 and odd in held
    assert sorted(i for d in reports for i in alike_ranges(d)) == held

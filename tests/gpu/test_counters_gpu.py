"""memsight's numbers against torch's own counters, recorded here and now.

record_counters.py runs real workloads (torch's default stacks="all",
python stacks, record_stream on a side stream, a fragmentation OOM and a
capped OOM, CUDA graph trees, expandable segments, rounding settings, and
FSDP2 on two ranks), each after reset_peak_memory_stats(), and saves
torch.cuda.memory_stats() beside every snapshot. `memsight summary` must
report the same allocated / active / reserved / requested peaks and
current values, name user frames as sites and the right OOM causes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RECORDER = HERE / "record_counters.py"
PAIRS = [("peak_allocated", "allocated_bytes.all.peak"), ("allocated_now", "allocated_bytes.all.current"),
         ("peak_active", "active_bytes.all.peak"), ("active_now", "active_bytes.all.current"),
         ("peak_reserved", "reserved_bytes.all.peak"), ("reserved_now", "reserved_bytes.all.current"),
         ("peak_requested", "requested_bytes.all.peak"), ("requested_now", "requested_bytes.all.current")]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    import torch

    out = tmp_path_factory.mktemp("counters")
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    # Workloads whose recording must not see frees of earlier ones' memory
    # (torch.compile's graph trees) get a process of their own.
    runs = [([sys.executable, str(RECORDER), str(out), "default_stacks", "python_stacks", "record_stream",
              "frag_oom", "capped_oom"], {}),
            ([sys.executable, str(RECORDER), str(out), "graph_tree"], {}),
            ([sys.executable, str(RECORDER), str(out), "env_expandable"],
             {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
            ([sys.executable, str(RECORDER), str(out), "env_rounding"],
             {"PYTORCH_CUDA_ALLOC_CONF": "roundup_power2_divisions:4,max_split_size_mb:32"})]
    if torch.cuda.device_count() >= 2:
        runs.append(([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                      str(RECORDER), str(out), "fsdp2"], {}))
    logs = []
    for cmd, extra in runs:  # a workload that fails is missing below, with its error
        r = subprocess.run(cmd, env={**env, **extra}, capture_output=True, text=True, timeout=400)
        if r.returncode:
            logs.append(r.stdout[-2000:] + r.stderr[-3000:])
    keep = os.environ.get("MEMSIGHT_KEEP_RECORDINGS")  # copy them out, to add to tests/data
    if keep:
        import shutil

        os.makedirs(keep, exist_ok=True)
        for f in out.iterdir():
            shutil.copy(f, keep)
    out.joinpath("recording-errors.log").write_text("\n".join(logs))
    return out


def summary(path: Path, *args: str) -> dict:
    exe = os.environ.get("MEMSIGHT_BIN", "memsight")
    r = subprocess.run([exe, "summary", "--json", *args, str(path)], capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def test_every_number_is_torchs(recorded):
    names = sorted(p.name[: -len(".stats.json")] for p in recorded.glob("*.stats.json"))
    import torch

    want = {"default_stacks", "python_stacks", "record_stream", "frag_oom", "capped_oom", "graph_tree",
            "expandable_counters", "rounding"}
    if torch.cuda.device_count() >= 2:
        want |= {"fsdp2_rank0", "fsdp2_rank1"}
    assert want <= set(names), (sorted(want - set(names)), (recorded / "recording-errors.log").read_text())
    report = []
    for name in names:
        stats = json.loads((recorded / f"{name}.stats.json").read_text())
        j = summary(recorded / f"{name}.pickle")
        for d, v in stats["devices"].items():
            dev = j["devices"][int(d)]
            got = {a: dev[a] for a, _ in PAIRS}
            exp = {a: v["memory_stats"][b] for a, b in PAIRS}
            report.append((name, d, dev["exact"], got == exp))
            assert dev["exact"], (name, dev["exactness"])
            assert got == exp, (name, {k: (got[k], exp[k]) for k in got if got[k] != exp[k]})
    print("\n".join(f"{n} cuda:{d} exact={e} equal={q}" for n, d, e, q in report))


def test_sites_are_user_frames_and_ooms_name_the_cause(recorded):
    j = summary(recorded / "default_stacks.pickle")
    top = j["devices"][0]["top_sites"][0]
    assert top["site_kind"] == "user" and top["site"].startswith("record_counters.py:")
    assert j["devices"][0]["before_recording"]["count"] > 0
    frag = summary(recorded / "frag_oom.pickle")["devices"][0]["ooms"][0]
    assert frag["verdict"] == "fragmentation" and "limit" in frag["causes"]
    # the first remedy is the allocator simulated on this history under other settings
    assert frag["simulated"] and "simulated on this history" in frag["remedies"][0], frag["remedies"]
    assert frag["site"].startswith("record_counters.py:")
    capped = summary(recorded / "capped_oom.pickle")["devices"][0]["ooms"][0]
    assert capped["verdict"] == "limit" and "demand" in capped["causes"]
    if (recorded / "fsdp2_rank0.pickle").exists():
        sites = summary(recorded / "fsdp2_rank0.pickle")["devices"][0]["top_sites"]
        assert sites[0]["site_kind"] == "user"


def test_oom_beside_another_process_names_it(tmp_path):
    """Another process holds nearly all of the device: the OOM's cause is
    memory outside this process's allocator, not a cap."""
    import torch

    from memsight.torch import Callbacks, OOMObserver

    free, total = torch.cuda.mem_get_info(0)
    hog = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, torch; x = torch.empty(int(sys.argv[1]), dtype=torch.uint8, device='cuda'); "
         "print('ready', flush=True); sys.stdin.read()", str(free - 3 * 2**30)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert hog.stdout.readline().strip() == "ready"
        obs = OOMObserver(folder=str(tmp_path), filename="crowded", remote_file_name=None)
        cbs = Callbacks(obs, run_name="crowded")
        keep = []
        try:
            cbs.fit_start()
            cbs.batch_start()
            with pytest.raises(torch.OutOfMemoryError):
                for _ in range(64):
                    keep.append(torch.empty(512 * 2**20, dtype=torch.uint8, device="cuda"))
        finally:
            del keep
            cbs.close()
            torch.cuda.empty_cache()
    finally:
        hog.stdin.close()
        hog.wait(60)
    import memsight

    oom = memsight.load(tmp_path / "crowded_snapshot.pickle").summary().devices[0].ooms[-1]
    assert oom.verdict == "other processes", (oom.causes, oom.explanation)
    assert oom.device_total == total
    print(oom.explanation)


def test_observer_under_a_cap_names_limit_free_and_total(tmp_path):
    """A real OOM under set_per_process_memory_fraction, caught by memsight's
    OOMObserver: the header and the engine name the limit, the device's free
    memory and its total correctly, and the cause is the cap."""
    import torch

    from memsight.torch import Callbacks, OOMObserver

    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.empty_cache()
    limit = torch.cuda.memory_reserved() + 512 * 2**20
    torch.cuda.set_per_process_memory_fraction(limit / total)
    obs = OOMObserver(folder=str(tmp_path), filename="cap", remote_file_name=None)
    cbs = Callbacks(obs, run_name="cap")
    keep = []
    try:
        cbs.fit_start()
        cbs.batch_start()
        with pytest.raises(torch.OutOfMemoryError):
            for _ in range(100):
                keep.append(torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda"))
    finally:
        del keep
        torch.cuda.set_per_process_memory_fraction(1.0)
        cbs.close()
        torch.cuda.empty_cache()
    text = (tmp_path / "cap_oom_diagnosis.txt").read_text()
    head = text.splitlines()[1]
    assert f"of {_size(total)}" in head and "limit is" in head, head
    import memsight

    (oom,) = memsight.load(tmp_path / "cap_snapshot.pickle").summary().devices[0].ooms
    # The cap is a cause; the verdict may be fragmentation where earlier tests
    # of this process left partly used segments behind.
    assert oom.limit > 0 and oom.device_total == total and "limit" in oom.causes, (oom.verdict, oom.causes)
    print(head)


def _size(n: int) -> str:
    import memsight._core as core

    return core.format_bytes(float(n))  # the observer writes sizes as memsight's reports do

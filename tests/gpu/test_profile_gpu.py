"""`memsight profile` on traces recorded here and now: its per-step peaks
equal torch.cuda.max_memory_allocated() measured per step in the same run,
and torch's memory timeline of the same run becomes a page."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import warnings


def memsight(*args) -> bytes:
    r = subprocess.run([os.environ.get("MEMSIGHT_BIN", "memsight"), *map(str, args)], capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def test_per_step_peaks_are_torchs(tmp_path):
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    trace = tmp_path / "t.pt.trace.json"
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    peaks = {}
    with torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=1, warmup=1, active=4),
                                profile_memory=True, record_shapes=True, with_stack=True,
                                on_trace_ready=lambda p: p.export_chrome_trace(str(trace))) as prof:
        for i in range(6):
            torch.cuda.reset_peak_memory_stats()
            batch = 2048 * (1 + i % 3)  # steps of different sizes: activations set different peaks
            model(torch.randn(batch, 1024, device="cuda")).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            peaks[prof.step_num] = torch.cuda.max_memory_allocated()
            prof.step()
    j = json.loads(memsight("profile", "--json", trace))
    got = {s["step"]: s["devices"]["cuda:0"]["peak_allocated"] for s in j["steps"]}
    assert sorted(got) == [2, 3, 4, 5], got
    assert got == {n: peaks[n] for n in got}, (got, peaks)
    assert len(set(got.values())) > 1  # the check is not trivially equal values
    # the step's allocations are attributed to ops, and the user's lines found
    live = j["steps"][0]["devices"]["cuda:0"]["live_at_peak"]
    assert any(r["site"].startswith("test_profile_gpu.py:") for r in live), live
    keep = os.environ.get("MEMSIGHT_KEEP_PAGES")
    if keep:
        os.makedirs(keep, exist_ok=True)
        memsight("profile", trace, "-o", os.path.join(keep, "gpu_profile.html"))
    print("per-step peaks (memsight = torch):", got)


def test_timeline_page_from_this_run(tmp_path):
    import torch

    model = torch.nn.Linear(2048, 2048).cuda()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
                                profile_memory=True, record_shapes=True, with_stack=True) as prof:
        for _ in range(3):
            model(torch.randn(512, 2048, device="cuda")).sum().backward()
    out = tmp_path / "timeline.json.gz"
    with warnings.catch_warnings():  # torch 2.11 marks it deprecated
        warnings.simplefilter("ignore")
        prof.export_memory_timeline(str(out), device="cuda:0")
    page = tmp_path / "timeline.html"
    memsight("profile", "--timeline", out, "-o", page)
    html = page.read_text()
    assert '"kind":"timeline"' in html and "https://" not in html
    keep = os.environ.get("MEMSIGHT_KEEP_PAGES")
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(page, os.path.join(keep, "gpu_timeline.html"))


def test_torch_profiler_in_a_cuda_loop(tmp_path):
    """TorchProfiler on a real CUDA loop: traces named per rank and batch,
    gzip, saved_traces, retention, the memory page, and memsight profile's
    per-step peaks equal to max_memory_allocated measured in the same run."""
    import torch

    from memsight.torch import Callbacks, TorchProfiler, cyclic_schedule

    os.chdir(tmp_path)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    prof = TorchProfiler(schedule=cyclic_schedule(wait=1, warmup=1, active=2, repeat=2), use_gzip=True,
                         remote_file_name=None, memory_filename="rank{rank}.{batch}.memory.html",
                         record_shapes=True, with_stack=True, num_traces_to_keep=1)
    peaks = {}
    with Callbacks(prof, run_name="loop") as cbs:
        for i in range(8):
            cbs.batch_start()
            torch.cuda.reset_peak_memory_stats()
            model(torch.randn(256 * (1 + i % 2), 1024, device="cuda")).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            peaks[i] = torch.cuda.max_memory_allocated()
            cbs.batch_end()
    saves = list(prof.saved_traces.items())
    assert [t.batch for t, _ in saves] == [4, 8]
    first, last = saves[0][1], saves[1][1]
    assert [os.path.basename(f) for f in last] == ["rank0.8.pt.trace.json.gz", "rank0.8.memory.html"]
    assert not any(os.path.exists(f) for f in first) and all(os.path.exists(f) for f in last)  # kept 1
    j = json.loads(memsight("profile", "--json", last[0]))
    got = {s["step"]: s["devices"]["cuda:0"]["peak_allocated"] for s in j["steps"]}
    assert got == {6: peaks[6], 7: peaks[7]}, (got, peaks)
    assert "cuda_time_total" in prof.op_tables
    keep = os.environ.get("MEMSIGHT_KEEP_PAGES")
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(last[1], os.path.join(keep, "torch_profiler_memory.html"))
    print("TorchProfiler per-step peaks (memsight = torch):", got)


def test_torch_profiler_in_a_lightning_fit(tmp_path):
    from test_lightning_gpu import _lightning, _setup, _trainer

    from memsight.torch.lightning import TorchProfilerCallback

    L = _lightning()
    module, data = _setup(L)
    cb = TorchProfilerCallback(folder=str(tmp_path / "traces"), remote_file_name=None, run_name="fit")
    _trainer(L, tmp_path, [cb], steps=5).fit(module, data)
    names = sorted(os.listdir(tmp_path / "traces"))
    # the default cycle: warm-up at batch 0, batches 1-4 recorded, saved after batch 4 (5 completed)
    assert names == ["rank0.5.pt.trace.json"], names
    assert [t.batch for t in cb.callback.saved_traces] == [5]
    j = json.loads(memsight("profile", "--json", tmp_path / "traces" / names[0]))
    assert len(j["steps"]) == 4 and all("cuda:0" in s["devices"] for s in j["steps"])

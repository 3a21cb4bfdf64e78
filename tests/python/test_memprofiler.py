"""MemProfiler on CPU with Debian's torch: config, schedule and keys, module
and saved-tensor hooks, host memory, safe YAML, the page, failure paths."""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import pytest

from memsight.torch import MemProfiler, MemProfilerCfg, MemProfilerMixin, memprofilable
from memsight.torch.profilers.memprofiler_config import MemProfilerFuncs, MemProfilerSchedule

torch = pytest.importorskip("torch")

B, IN, HID, OUT = 128, 64, 256, 8


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(IN, HID), torch.nn.ReLU(), torch.nn.Linear(HID, OUT))


def run_steps(prof, model, n, fn_name="step", before=None):
    @prof.profile(name=fn_name)
    def step(x):
        if before is not None:
            before()
        model(x).sum().backward()

    for _ in range(n):
        step(torch.randn(B, IN))


# -- config --------------------------------------------------------------------------
def test_config_defaults_follow_the_reference_semantics():
    cfg = MemProfilerCfg(enabled=True)
    assert cfg.schedule.max_iter == 2 and cfg.schedule.warmup_iters == 1
    for kind in ("cpu", "cuda", "cuda_allocator_history", "fsdp"):
        assert getattr(cfg.collect_funcs, kind) == {"training_step"}
    funcs = MemProfilerFuncs(default=["a"], cuda=["b"])
    assert funcs.cuda == {"a", "b"} and funcs.cpu == {"a"}
    assert [i for i in range(1, 8) if MemProfilerSchedule(2, 4).collects(i)] == [3, 4]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"schedule": {"warmup_iters": 3, "max_iter": 3}}, "max_iter must be an integer above warmup_iters"),
        ({"schedule": {"warmup_iters": -1}}, "warmup_iters must be an integer >= 0"),
        ({"fsdp_mem_tracker_units": "MB"}, "fsdp_mem_tracker_units must be one of"),
        ({"saved_tensors_funcs": ["no_such_module_xyz.pack", "identity_lambda"]}, "cannot import"),
        ({"saved_tensors_funcs": ["identity_lambda"]}, "must be a pair"),
        ({"memory_hooks": {"pre_forward_hooks": ["nodots"]}}, "neither a callable nor a dotted path"),
        ({"collect_funcs": {"cpu": [3]}}, "must hold function names"),
        ({"no_such_option": 1}, "has no option 'no_such_option'"),
    ],
)
def test_bad_config_is_a_one_line_value_error(kwargs, message):
    with pytest.raises(ValueError, match=message) as e:
        MemProfilerCfg.from_dict({"enabled": True, **kwargs})
    assert "\n" not in str(e.value)


def test_dotted_paths_resolve():
    cfg = MemProfilerCfg(enabled=True, saved_tensors_funcs=["os.path.basename", "identity_lambda"])
    assert cfg.saved_tensors_funcs[0] is os.path.basename and cfg.saved_tensors_funcs[1](5) == 5


def test_without_cuda_the_cuda_kinds_are_dropped_with_a_warning():
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine")
    with pytest.warns(UserWarning, match="no CUDA device"):
        prof = MemProfiler(cuda_allocator_history=True, collect_funcs={"default": ["s"], "cuda": ["t"]})
    assert prof.cfg.collect_funcs.cuda == set() and not prof.cfg.cuda_allocator_history
    assert prof.cfg.collect_funcs.cpu == {"s"}


# -- schedule, keys, hooks ------------------------------------------------------------
def test_keys_schedule_and_hook_removal(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    model = make_model()
    prof = MemProfiler(save_dir=str(tmp_path), collect_funcs={"default": ["step"]},
                       schedule={"warmup_iters": 2, "max_iter": 4}).connect(model)
    seen_hooks = []
    run_steps(prof, model, 6, before=lambda: seen_hooks.append(len(model[0]._forward_hooks)))
    assert sorted(prof.memory_stats) == [f"3.step.{i}.{c}" for i in (3, 4) for c in ("end", "start")]
    # hooks are on from the first call until the last collected one, then removed
    assert seen_hooks == [1, 1, 1, 1, 0, 0] and len(model[0]._forward_pre_hooks) == 0
    assert prof._iters["step"] == 6
    assert (tmp_path / "rank_3_memory_stats.yaml").exists() and (tmp_path / "rank_3_memprofiler.html").exists()


def test_module_deltas_and_saved_tensor_bytes_per_module(tmp_path):
    model = make_model()
    prof = MemProfiler(save_dir=str(tmp_path), collect_funcs={"default": ["step"]}).connect(model)
    run_steps(prof, model, 3)
    end = prof.memory_stats["0.step.2.end"]
    fwd, saved = end["module_forward"], end["saved_tensors"]
    assert set(fwd) == {"Sequential", "0", "1", "2"} and all(r["calls"] == 1 for r in fwd.values())
    # ReLU saves its output; the first Linear its input (the batch needs no grad, so not the weight)
    assert saved["1"] == {"bytes": B * HID * 4, "tensors": 1}
    assert saved["0"] == {"bytes": B * IN * 4, "tensors": 1}
    # the second Linear saves its input and the transposed weight (a view, not a Parameter)
    assert saved["2"]["bytes"] == B * HID * 4 + HID * OUT * 4
    total = sum(r["bytes"] for r in saved.values())
    assert end["saved_tensors_bytes"] == total == fwd["Sequential"]["saved_bytes"]
    # ReLU's output and the second Linear's input share one storage
    assert end["saved_tensors_unique_bytes"] == total - B * HID * 4
    # the root module's hook attributes are read into the entry, reset at the start
    assert end["npp_diff"] == total and prof.memory_stats["0.step.2.start"]["npp_diff"] in (0, None)
    assert model[1].npp_diff == 0  # reset after the collected call


def test_rss_grows_with_what_the_call_keeps(tmp_path):
    keep = []
    model = make_model()
    prof = MemProfiler(save_dir=str(tmp_path), collect_funcs={"default": ["step"]}).connect(model)
    n = 64 << 20
    run_steps(prof, model, 2, before=lambda: keep.append(torch.ones(n // 4)))
    start, end = prof.memory_stats["0.step.2.start"], prof.memory_stats["0.step.2.end"]
    assert end["rss"] - start["rss"] >= 0.9 * n
    assert end["vms"] >= end["rss"] > 0


def test_saved_tensor_hooks_off_and_user_pack_unpack(tmp_path):
    packed = []

    def pack(t):
        packed.append(t.shape)
        return t

    model = make_model()
    prof = MemProfiler(save_dir=str(tmp_path), collect_funcs={"default": ["step"]},
                       saved_tensors_funcs=[pack, "identity_lambda"]).connect(model)
    run_steps(prof, model, 2)
    assert len(packed) == 4 and prof.memory_stats["0.step.2.end"]["saved_tensors_bytes"] > 0
    # without module hooks, saved bytes are not attributed to modules
    prof2 = MemProfiler(save_dir=str(tmp_path / "b"), collect_funcs={"default": ["step"]},
                        enable_memory_hooks=False).connect(model)
    run_steps(prof2, model, 2)
    end = prof2.memory_stats["0.step.2.end"]
    assert end["module_forward"] == {} and "npp_diff" not in end
    assert list(end["saved_tensors"]) == ["(outside modules)"]
    assert end["saved_tensors"]["(outside modules)"]["bytes"] == end["saved_tensors_bytes"] > 0
    prof3 = MemProfiler(save_dir=str(tmp_path / "c"), collect_funcs={"default": ["step"]},
                        enable_saved_tensors_hooks=False, enable_memory_hooks=False).connect(model)
    run_steps(prof3, model, 2)
    end = prof3.memory_stats["0.step.2.end"]
    assert "saved_tensors" not in end and "module_forward" not in end and end["rss"] > 0


# -- files ------------------------------------------------------------------------------
def test_yaml_is_safe_and_pickle_matches(tmp_path):
    yaml = pytest.importorskip("yaml")
    model = make_model()
    prof = MemProfiler(save_dir=str(tmp_path), collect_funcs={"default": ["step"]},
                       dump_memorystats_pickle=True).connect(model)
    run_steps(prof, model, 3)
    prof.finish()
    text = (tmp_path / "rank_0_memory_stats.yaml").read_text()
    assert "!!python" not in text
    data = yaml.safe_load(text)
    assert data == prof.memory_stats
    with open(tmp_path / "rank_0_memory_stats.pickle", "rb") as f:
        assert pickle.load(f) == data


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.ids: list[str] = []
        self.text: list[str] = []
        self.attrs_seen: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs_seen += [str(v) for _, v in attrs]
        self.ids += [v for k, v in attrs if k == "id"]

    def handle_data(self, data):
        self.text.append(data)


def test_page_shows_every_call_and_needs_nothing_outside(tmp_path):
    model = make_model()
    prof = MemProfiler(save_dir=str(tmp_path), collect_funcs={"default": ["step", "evaluate"]},
                       schedule={"warmup_iters": 0, "max_iter": 2}).connect(model)
    run_steps(prof, model, 3)
    run_steps(prof, model, 1, fn_name="evaluate")
    page = (tmp_path / "rank_0_memprofiler.html").read_text()
    p = _Page()
    p.feed(page)
    assert p.ids == ["0.step.1", "0.step.2", "0.evaluate.1"]
    assert "script" not in p.tags and "link" not in p.tags and "svg" in p.tags and "rect" in p.tags
    assert not any(a.startswith(("http:", "https:", "//")) for a in p.attrs_seen)
    text = " ".join(p.text)
    assert "saved for backward" in text and "128.00 KiB" in text  # ReLU's saved output
    assert text.count("rss") >= 1


def test_growth_by_site_of_two_snapshots(monkeypatch):
    from memsight.torch.profilers.memprofiler_output import _fallback_site, active_blocks, growth_by_site, site_totals

    torch_frame = {"filename": "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", "line": 114,
                   "name": "forward"}

    def blk(addr, size, line, state="active_allocated"):
        return {"address": addr, "size": size, "state": state,
                "frames": [torch_frame, {"filename": "/home/u/train.py", "line": line, "name": "step"}]}

    start = {"segments": [{"address": 0, "blocks": [blk(0, 512, 10), blk(512, 512, 10, "inactive")]}]}
    end = {"segments": [{"address": 0, "blocks": [blk(0, 512, 10), blk(512, 256, 42), blk(768, 256, 42)]},
                        {"address": 4096, "blocks": [blk(4096, 1024, 7)]}]}
    assert set(active_blocks(start)) == {(0, 512)}
    assert _fallback_site(blk(0, 1, 5)["frames"]) == "train.py:5:step"
    rows = growth_by_site(site_totals(start), end)
    assert rows == [{"site": "train.py:7:step", "bytes": 1024, "blocks": 1},
                    {"site": "train.py:42:step", "bytes": 512, "blocks": 2}]
    # without the compiled engine the small fallback rule gives the same sites here
    import memsight.snapshot

    def no_engine(*a, **k):
        raise ImportError("no engine")

    monkeypatch.setattr(memsight.snapshot, "frame_site", no_engine)
    assert growth_by_site(site_totals(start), end) == rows
    # a site whose blocks were freed and allocated again at other addresses did not grow
    moved = {"segments": [{"address": 0, "blocks": [blk(2048, 512, 10)]}]}
    assert growth_by_site(site_totals(start), moved) == []


def test_allocator_history_path_with_a_stand_in_device(tmp_path, monkeypatch):
    """The history path on CPU: snapshots and recording are stood in for,
    everything else (keys, files, growth, the page, stopping) is real."""
    import memsight.torch.profilers.memprofiler as mp

    held: list[dict] = []
    frames = [{"filename": "/home/u/train.py", "line": 9, "name": "step"}]
    state = {"recording": 0, "stopped": 0}

    class FakeRecording:
        def __init__(self, max_entries, context, stacks, owner, model=None, optimizer=None):
            assert max_entries == 500
            state["recording"] += 1
            self.model, self.optimizer = model, optimizer  # handed over for the memory kinds

        def start(self):
            return self

        def stop(self):
            state["stopped"] += 1

    def fake_snapshot():
        blocks = [{"address": 1000 * i, "size": b["size"], "state": "active_allocated", "frames": frames}
                  for i, b in enumerate(held)]
        return {"segments": [{"address": 0, "blocks": blocks}], "device_traces": [[]]}

    monkeypatch.setattr(mp, "cuda_available", lambda: True)
    monkeypatch.setattr(mp, "Recording", FakeRecording)
    monkeypatch.setattr(mp, "snapshot", fake_snapshot)
    model = make_model()
    prof = MemProfiler(save_dir=str(tmp_path), cuda_allocator_history=True,
                       cuda_allocator_history_options={"max_entries": 500},
                       collect_funcs={"default": [], "cuda_allocator_history": ["step"]},
                       schedule={"warmup_iters": 1, "max_iter": 2}).connect(model)
    run_steps(prof, model, 4, before=lambda: held.append({"size": 2048}))
    assert state == {"recording": 1, "stopped": 1}
    names = sorted(os.listdir(tmp_path))
    assert [n for n in names if n.startswith("cuda_alloc")] == [
        "cuda_alloc_rank_0.step.2.end.pickle", "cuda_alloc_rank_0.step.2.start.pickle"]
    with open(tmp_path / "cuda_alloc_rank_0.step.2.end.pickle", "rb") as f:
        assert len(pickle.load(f)["segments"][0]["blocks"]) == 2
    end = prof.memory_stats["0.step.2.end"]
    assert end["grew_by_site"] == [{"site": "train.py:9:step", "bytes": 2048, "blocks": 1}]
    page = (tmp_path / "rank_0_memprofiler.html").read_text()
    assert 'href="cuda_alloc_rank_0.step.2.start.pickle"' in page and "train.py:9:step" in page


# -- failure paths -------------------------------------------------------------------------
def test_a_failing_user_hook_never_breaks_training(tmp_path, caplog):
    def bad(*args):
        raise RuntimeError("hook bug")

    model = make_model()
    prof = MemProfiler(save_dir=str(tmp_path), collect_funcs={"default": ["step"]},
                       memory_hooks={"pre_forward_hooks": [bad], "reset_state_hooks": [bad]}).connect(model)
    with caplog.at_level(logging.ERROR, logger="memsight"):
        run_steps(prof, model, 3)
    assert "0.step.2.end" in prof.memory_stats
    assert "hook bug" in caplog.text


def test_an_error_in_a_collected_call_writes_everything_collected(tmp_path):
    script = textwrap.dedent(f"""
        import torch
        from memsight.torch import MemProfiler
        model = torch.nn.Linear(8, 8)
        prof = MemProfiler(save_dir={str(tmp_path)!r}, collect_funcs={{"default": ["step"]}},
                           schedule={{"warmup_iters": 1, "max_iter": 5}}).connect(model)
        @prof.profile
        def step(i):
            model(torch.randn(4, 8)).sum().backward()
            if i == 3:
                raise MemoryError("out of memory in step 3")
        for i in range(1, 10):
            step(i)
    """)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "python"))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "out of memory in step 3" in proc.stderr
    import yaml

    data = yaml.safe_load((tmp_path / "rank_0_memory_stats.yaml").read_text())
    assert sorted(data) == ["0.step.2.end", "0.step.2.start", "0.step.3.end", "0.step.3.start"]
    assert data["0.step.3.end"]["error"] == "MemoryError: out of memory in step 3"
    assert "out of memory in step 3" in (tmp_path / "rank_0_memprofiler.html").read_text()


def test_disabled_config_collects_nothing(tmp_path):
    prof = MemProfiler(MemProfilerCfg(enabled=False, save_dir=str(tmp_path)))
    run_steps(prof, make_model(), 3)
    assert prof.memory_stats == {} and os.listdir(tmp_path) == []


# -- integrations ---------------------------------------------------------------------------
class Base(torch.nn.Module):
    def setup(self, stage=None):
        self.setup_called = stage


class LitLike(MemProfilerMixin, Base):
    def __init__(self, cfg):
        super().__init__(memprofiler_cfg=cfg)
        self.net = make_model()

    @memprofilable
    def training_step(self, x):
        loss = self.net(x).sum()
        loss.backward()
        return loss


def test_mixin_and_decorator_in_a_lightning_like_loop(tmp_path):
    class Trainer:
        log_dir = str(tmp_path / "logs")
        optimizers = ["opt"]

    model = LitLike({"enabled": True})
    model._trainer = Trainer()
    model.setup("fit")
    model.on_train_start()
    for _ in range(3):
        model.training_step(torch.randn(B, IN))
    model.on_train_end()
    assert model.setup_called == "fit" and model.memprofiler.optimizer == "opt"
    folder = tmp_path / "logs" / "memprofiler"
    assert sorted(os.listdir(folder)) == ["rank_0_memory_stats.yaml", "rank_0_memprofiler.html"]
    assert set(model.memprofiler.memory_stats["0.training_step.2.end"]["module_forward"]) == {
        "net", "net.0", "net.1", "net.2"}  # LitLike itself is never called
    plain = LitLike(None)
    assert plain.memprofiler is None and plain.training_step(torch.randn(2, IN)).ndim == 0


def test_context_manager_and_nested_profiled_calls(tmp_path):
    model = make_model()
    prof = MemProfiler(save_dir=str(tmp_path), collect_funcs={"default": ["outer", "inner"]},
                       schedule={"warmup_iters": 0, "max_iter": 1}).connect(model)
    with prof.memprofile("outer"):
        with prof.memprofile("inner"):
            model(torch.randn(B, IN)).sum().backward()
    assert sorted(prof.memory_stats) == ["0.inner.1.end", "0.inner.1.start", "0.outer.1.end", "0.outer.1.start"]
    # the module tables belong to the outermost collected call
    assert prof.memory_stats["0.outer.1.end"]["module_forward"]["1"]["calls"] == 1
    assert "module_forward" not in prof.memory_stats["0.inner.1.end"]


def test_importing_memsight_torch_does_not_import_torch():
    code = "import sys, memsight.torch; print('torch' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2] / "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def test_device_side_failures_are_logged_and_profiling_goes_on(tmp_path, monkeypatch, caplog):
    """Allocator snapshots that fail and an FSDP root without fully_shard:
    each is logged once, the calls run, the rest is collected."""
    import memsight.torch.profilers.memprofiler as mp

    def broken_snapshot():
        raise RuntimeError("snapshot failed")

    monkeypatch.setattr(mp, "cuda_available", lambda: True)
    class NoRecording:
        def __init__(self, *args, **kwargs): ...
        def start(self): return self
        def stop(self): ...

    monkeypatch.setattr(mp, "Recording", NoRecording)
    monkeypatch.setattr(mp, "snapshot", broken_snapshot)
    model = make_model()
    prof = MemProfiler(save_dir=str(tmp_path), cuda_allocator_history=True, track_fsdp_mem=True,
                       collect_funcs={"default": ["step"]}).connect(model)
    with caplog.at_level(logging.ERROR, logger="memsight"):
        run_steps(prof, model, 3)
    end = prof.memory_stats["0.step.2.end"]
    assert end["saved_tensors_bytes"] > 0 and "grew_by_site" not in end and end["files"] == []
    assert "snapshot failed" in caplog.text and "turns FSDP tracking off" in caplog.text
    assert prof._fsdp_failed and not any(n.startswith(("cuda_alloc", "fsdp_mem")) for n in os.listdir(tmp_path))


def test_lightning_callback_profiles_batches_without_touching_the_module(tmp_path):
    from types import SimpleNamespace

    from memsight.torch.profilers.memprofiler_mixin import memprofiler_callback_for

    class Trainer:
        log_dir = str(tmp_path / "logs")
        optimizers = ["opt"]

    cls = memprofiler_callback_for(SimpleNamespace(Callback=object))
    cb = cls(collect_funcs={"default": ["training_step", "validation_step"]},
             schedule={"warmup_iters": 1, "max_iter": 3})
    module, trainer = make_model(), Trainer()
    cb.setup(trainer, module, "fit")
    cb.on_train_start(trainer, module)
    cb.on_validation_batch_start(trainer, module, None, 0)
    cb.on_validation_batch_end(trainer, module, None, None, 0)
    for i in range(3):
        cb.on_train_batch_start(trainer, module, None, i)
        module(torch.randn(B, IN)).sum().backward()
        if i == 2:
            cb.on_exception(trainer, module, RuntimeError("CUDA out of memory (simulated)"))
            break
        cb.on_train_batch_end(trainer, module, None, None, i)
    stats = cb.profiler.memory_stats
    assert sorted(stats) == ["0.training_step.2.end", "0.training_step.2.start",
                             "0.training_step.3.end", "0.training_step.3.start"]
    assert stats["0.training_step.3.end"]["error"] == "RuntimeError: CUDA out of memory (simulated)"
    assert stats["0.training_step.2.end"]["saved_tensors"]["1"]["bytes"] == B * HID * 4
    assert cb.profiler.optimizer == "opt" and not cb.profiler.enabled  # finished on the exception
    assert sorted(os.listdir(tmp_path / "logs" / "memprofiler")) == ["rank_0_memory_stats.yaml",
                                                                     "rank_0_memprofiler.html"]


def test_host_memory_without_psutil_reads_proc(monkeypatch):
    import memsight.torch.profilers.memprofiler_hooks as hooks

    with_psutil = hooks.host_memory()
    monkeypatch.setattr(hooks, "_process", False)  # as when psutil is not installed
    rss, vms = hooks.host_memory()
    assert 0 < rss <= vms
    assert abs(rss - with_psutil[0]) < 64 << 20 and abs(vms - with_psutil[1]) < 256 << 20


def test_cuda_statistics_fall_back_to_torchs_dict(monkeypatch, caplog):
    """Without the native counter reader (turned off, or failing to load) the
    statistics are torch.cuda.memory_stats()'s, and the profiler says so."""
    from types import SimpleNamespace

    from memsight.torch.capture import _native_counters

    stats = {"allocated_bytes.all.current": 5, "active_bytes.all.peak": 9}
    fake = SimpleNamespace(cuda=SimpleNamespace(current_device=lambda: 0, memory_stats=lambda: dict(stats)))
    monkeypatch.setenv("MEMSIGHT_NATIVE_COUNTERS", "0")
    prof = MemProfiler(collect_funcs={"default": ["step"]})
    assert prof._cuda_stats(fake) == stats and prof.counter_source == "torch.cuda.memory_stats()"

    def broken(torch, device):
        raise OSError("no compiler")

    monkeypatch.setenv("MEMSIGHT_NATIVE_COUNTERS", "1")
    monkeypatch.setattr(_native_counters, "load_torch_counters", broken)
    prof = MemProfiler(collect_funcs={"default": ["step"]})
    with caplog.at_level(logging.WARNING, logger="memsight"):
        assert prof._cuda_stats(fake) == stats and prof._cuda_stats(fake) == stats
    assert [r.getMessage() for r in caplog.records if "native" in r.getMessage()] == [
        "memsight: MemProfiler reads torch.cuda.memory_stats(): the native counter reader is unavailable: "
        "no compiler"]  # once, not at every step
    assert prof.counter_source == "torch.cuda.memory_stats()"

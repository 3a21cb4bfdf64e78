"""memsight.torch's tags and phase marks on the CPU: which storage is what
(real torch modules and optimizers), the marks its hooks write during a
forward, a backward, activation checkpointing and an optimizer step, that a
failing hook never reaches training, and that every snapshot the
integrations write carries the tags (a stand-in allocator)."""

from __future__ import annotations

import logging
import pickle
import threading
import types

import pytest

torch = pytest.importorskip("torch")

from memsight.torch.capture import phase_marks, tags  # noqa: E402


class Recorder(phase_marks.Marker):
    """Keeps every mark set, per thread, as torch's metadata would."""

    kind = "test"

    def __init__(self) -> None:
        self.local = threading.local()
        self.log: list[str] = []

    def get(self) -> str:
        return getattr(self.local, "mark", "")

    def set(self, mark: str) -> None:
        self.local.mark = mark
        self.log.append(mark)


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        self.norm = torch.nn.BatchNorm1d(2)

    def forward(self, x):
        return self.norm(self.layers(x))


def by_name(entries):
    return {e["name"]: e for e in entries}


# -- tags ------------------------------------------------------------------------------------
def test_storage_tags_name_every_storage():
    net = Net()
    opt = torch.optim.AdamW(net.parameters())
    net(torch.randn(3, 4)).sum().backward()
    opt.step()
    t = by_name(tags.storage_tags(net, opt, device_type=None))
    w = net.layers[0].weight
    assert t["layers.0.weight"]["category"] == "parameter"
    assert t["layers.0.weight"]["module"] == "layers.0"
    assert t["layers.0.weight"]["addr"] == w.storage().data_ptr()
    assert t["layers.0.weight"]["size"] == w.numel() * 4
    assert t["layers.0.weight.grad"]["category"] == "gradient"
    assert t["layers.0.weight.grad"]["addr"] == w.grad.storage().data_ptr()
    assert t["norm.running_mean"]["category"] == "buffer"
    assert t["optimizer.state[layers.2.bias].exp_avg_sq"]["category"] == "optimizer_state"
    assert t["optimizer.state[layers.2.bias].exp_avg_sq"]["module"] == "layers.2"
    params = sum(1 for _ in net.parameters())
    # weights, gradients, exp_avg, exp_avg_sq, step per parameter; three buffers
    assert len(t) == 5 * params + 3
    assert tags.storage_tags(net, opt) == []  # only CUDA storages by default
    # plain data only: what torch's tools and the web viewer read
    pickle.loads(pickle.dumps(t))
    assert all(set(e) == {"device", "addr", "size", "category", "name", "module"} for e in t.values())


def test_a_shared_storage_is_tagged_once_by_what_it_is_first():
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight  # tied
    model = torch.nn.ModuleDict({"emb": emb, "head": head})
    view_state = types.SimpleNamespace(param_groups=[{"params": [emb.weight]}],
                                       state={emb.weight: {"alias": emb.weight[:2]}})
    t = tags.storage_tags(model, view_state, device_type=None)
    assert [(e["name"], e["category"]) for e in t] == [("emb.weight", "parameter")]


def test_wrapper_names_are_the_users():
    assert phase_marks.clean_name("_orig_mod.layers.0._checkpoint_wrapped_module.attn") == "layers.0.attn"
    net = Net()
    ddp_like = type("DistributedDataParallel", (torch.nn.Module,), {})()
    ddp_like.module = net
    assert by_name(tags.storage_tags(ddp_like, device_type=None)).keys() >= {"layers.0.weight"}


def test_a_parameter_the_model_does_not_name():
    net = Net()
    extra = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.SGD(list(net.parameters()) + [extra], lr=0.1, momentum=0.9)
    (net(torch.randn(3, 4)).sum() + extra.sum()).backward()
    opt.step()
    t = by_name(tags.storage_tags(net, opt, device_type=None))
    assert t["param_groups[0][6].grad"]["category"] == "gradient"
    assert t["optimizer.state[param_groups[0][6]].momentum_buffer"]["module"] == ""


# -- phase marks -----------------------------------------------------------------------------
def marks_of(model, optimizer=None):
    rec = Recorder()
    pm = phase_marks.PhaseMarks(model, optimizer, marker=rec).install()
    return pm, rec


def test_forward_marks_nest_and_restore():
    net = Net()
    pm, rec = marks_of(net)
    rec.set("users own")  # the user's metadata comes back afterwards
    rec.log.clear()
    net(torch.randn(3, 4))
    assert rec.log == [
        "memsight:fwd:", "memsight:fwd:layers", "memsight:fwd:layers.0", "memsight:fwd:layers",
        "memsight:fwd:layers.1", "memsight:fwd:layers", "memsight:fwd:layers.2", "memsight:fwd:layers",
        "memsight:fwd:", "memsight:fwd:norm", "memsight:fwd:", "users own"]
    pm.remove()
    rec.log.clear()
    net(torch.randn(3, 4))
    assert rec.log == []


def test_backward_marks_each_module_as_its_gradient_arrives():
    net = Net()
    pm, rec = marks_of(net)
    out = net(torch.randn(3, 4))
    rec.log.clear()
    out.sum().backward()
    bwd = [m for m in rec.log if m.startswith("memsight:bwd")]
    # outer modules' gradients arrive first; each module's before its inputs';
    # the model returns norm's output as it is, and the Sequential layers.2's:
    # those gradients are the innermost module's
    order = [m for m in bwd if m != "memsight:bwd"]
    assert order == ["memsight:bwd:norm", "memsight:bwd:layers.2", "memsight:bwd:layers.1",
                     "memsight:bwd:layers.0"]
    assert bwd[-1] == "memsight:bwd"  # the end of the backward ends the last module's mark
    assert bwd.count("memsight:bwd") == 1
    rec.log.clear()
    net(torch.randn(3, 4)).sum().backward()  # and so in every backward
    assert [m for m in rec.log if m.startswith("memsight:bwd")] == bwd
    # no hooks on outputs that need no gradient
    rec.log.clear()
    with torch.no_grad():
        net(torch.randn(3, 4))
    assert not any(m.startswith("memsight:bwd") for m in rec.log)


class StepHooks:
    """An optimizer with torch 2's step hooks (torch 1.13 has none)."""

    def __init__(self, closure_model=None) -> None:
        self.pre, self.post = [], []
        self.model = closure_model

    def register_step_pre_hook(self, fn):
        self.pre.append(fn)
        return types.SimpleNamespace(remove=lambda: self.pre.remove(fn))

    def register_step_post_hook(self, fn):
        self.post.append(fn)
        return types.SimpleNamespace(remove=lambda: self.post.remove(fn))

    def step(self, closure=None):
        for fn in self.pre:
            fn(self, (), {})
        if closure:
            closure()
        for fn in self.post:
            fn(self, (), {})


def test_optimizer_step_is_marked_and_a_closure_forward_is_not_part_of_it():
    net = Net()
    opt = StepHooks()
    pm, rec = marks_of(net, opt)
    rec.log.clear()
    opt.step()
    assert rec.log == ["memsight:opt", ""]
    rec.log.clear()
    opt.step(closure=lambda: net(torch.randn(3, 4)))
    assert rec.log[0] == "memsight:opt" and rec.log[-1] == ""
    # the forward inside the step restores "" (not the step's mark) when it ends
    assert rec.log[-2] == ""


def test_an_exception_in_forward_does_not_leave_marks_behind():
    net = Net()
    pm, rec = marks_of(net)

    def boom(module, args):
        raise RuntimeError("user error")

    h = net.layers[2].register_forward_pre_hook(boom)
    with pytest.raises(RuntimeError, match="user error"):
        net(torch.randn(3, 4))
    h.remove()
    net(torch.randn(3, 4))
    assert rec.get() == ""  # balanced again after the next forward


def test_a_failing_mark_turns_marks_off_and_never_raises(caplog):
    class Broken(Recorder):
        def set(self, mark):
            if mark.startswith("memsight:fwd:layers.1"):
                raise ValueError("metadata refused")
            super().set(mark)

    net = Net()
    rec = Broken()
    pm = phase_marks.PhaseMarks(net, marker=rec).install()
    with caplog.at_level(logging.ERROR, logger="memsight"):
        out = net(torch.randn(3, 4))
        out.sum().backward()
        net(torch.randn(3, 4))
    assert pm.failed
    assert "a phase-mark hook failed" in caplog.text and caplog.text.count("Traceback") == 1
    assert rec.get() == ""


@pytest.mark.skipif(not hasattr(torch._C, "_current_graph_task_id"), reason="torch has no graph task id")
def test_a_forward_rerun_in_backward_is_recompute():
    import torch.utils.checkpoint

    net = Net()
    pm, rec = marks_of(net)
    x = torch.randn(3, 4, requires_grad=True)
    out = torch.utils.checkpoint.checkpoint(net.layers, x, use_reentrant=False)
    rec.log.clear()
    out.sum().backward()
    assert "memsight:rec:layers.0" in rec.log


def test_choose_marker_follows_the_installed_torch():
    mem = types.SimpleNamespace(_set_memory_metadata=lambda s: None, _get_memory_metadata=lambda: "",
                                _record_memory_history=lambda enabled="all": None)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(memory=mem))
    assert phase_marks.choose_marker(fake).kind == "metadata"

    def history(enabled="all", global_record_annotations=False):
        pass

    fake.cuda.memory = types.SimpleNamespace(_record_memory_history=history)
    fake.autograd = torch.autograd
    assert phase_marks.choose_marker(fake).kind == "annotations"
    fake.cuda.memory = types.SimpleNamespace(_record_memory_history=lambda enabled="all": None)
    assert phase_marks.choose_marker(fake).kind == "none"


def test_annotation_marker_emits_record_function_ranges():
    m = phase_marks.AnnotationMarker(torch)
    with torch.autograd.profiler.profile() as prof:
        m.set("memsight:fwd:layers.0")
        m.set("")
    names = [e.name for e in prof.function_events if e.name.startswith("memsight")]
    assert names == ["memsight:fwd:layers.0", "memsight:none"]
    assert m.get() == ""


# -- every snapshot the integrations write carries the tags ------------------------------------
# Three blocks of tests/data/oom.pickle (the stand-in allocator's history)
# live since before recording began: here they are a model's weights.
WEIGHTS = [(140215482056704, 33554432), (140215605788672, 1048576), (140216018927616, 33554432)]


def cuda_tensor(addr: int, size: int):
    st = types.SimpleNamespace(data_ptr=lambda: addr, nbytes=lambda: size)
    return types.SimpleNamespace(device=types.SimpleNamespace(type="cuda", index=0),
                                 untyped_storage=lambda: st, grad=None)


class CudaModel:
    def __init__(self):
        self.ps = [(f"layers.{i}.weight", cuda_tensor(a, n)) for i, (a, n) in enumerate(WEIGHTS)]

    def named_parameters(self):
        return list(self.ps)

    def named_buffers(self):
        return []


def test_observer_snapshot_carries_the_tags(fake_torch, tmp_path, core):
    from memsight.torch import OOMObserver

    obs = OOMObserver(folder=str(tmp_path), remote_file_name=None, overwrite=True, model=CudaModel())
    obs.arm()
    fake_torch.oom()
    obs.close()
    with open(obs.last_files[0], "rb") as f:
        saved = pickle.load(f)
    st = saved["memsight_tags"]["storages"]
    assert sorted((t["addr"], t["size"]) for t in st) == WEIGHTS
    assert {t["category"] for t in st} == {"parameter"}
    import memsight

    oom = memsight.load(obs.last_files[0]).summary().devices[0].ooms[0]
    p = oom.categories.by_category.parameter
    # the weights tagged; the rest of the model's, made by .cuda() while
    # recording, inferred
    assert p.tagged == sum(n for _, n in WEIGHTS) and p.bytes > p.tagged
    assert oom.categories.by_category.before_recording.bytes == 0
    with open(obs.last_files[-1]) as f:
        assert "parameter 331.3MiB (65.0MiB tagged)" in f.read()
    assert tags.tags_value() is None  # released with the observer


def test_record_and_snapshot_and_record_memory_history(fake_torch):
    import memsight.torch as mt

    model = CudaModel()
    assert "memsight_tags" not in mt.snapshot()
    with mt.record(model=model):
        s = mt.snapshot()
        assert len(s["memsight_tags"]["storages"]) == 3
    assert "memsight_tags" not in mt.snapshot()
    rec = mt.record_memory_history(model=model, max_entries=1000)
    assert rec.active and fake_torch.options["stacks"] == "all"  # torch's default
    assert "memsight_tags" in mt.snapshot()
    assert mt.record_memory_history(enabled=None) is None
    assert not rec.active and fake_torch.enabled is None and tags.tags_value() is None


def test_memory_snapshot_and_attach_model(fake_torch, tmp_path, core):
    from memsight.torch import Callbacks, MemorySnapshot

    cb = MemorySnapshot(skip_batches=0, interval=1, folder=str(tmp_path), remote_file_name=None, overwrite=True)
    cb.attach_model(CudaModel())  # as the Lightning adapter does
    with Callbacks(cb, run_name="r") as runner:
        runner.batch_start()
        runner.batch_end()
    pickles = [p for p in cb.written if p.endswith(".pickle")]
    with open(pickles[0], "rb") as f:
        assert len(pickle.load(f)["memsight_tags"]["storages"]) == 3


def test_torch_profiler_snapshot_names():
    from memsight.torch.profilers.torch_profiler import snapshot_path

    assert snapshot_path("a/rank0.3.pt.trace.json.gz") == "a/rank0.3.memory_snapshot.pickle"
    assert snapshot_path("rank0.3.pt.trace.json") == "rank0.3.memory_snapshot.pickle"
    assert snapshot_path("t.json") == "t.memory_snapshot.pickle"


def test_marks_go_on_the_blocks_unless_every_module_is_asked_for():
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.Linear(4, 4)
            self.mlp = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4))

        def forward(self, x):
            return x + self.mlp(self.attn(x))

    class Inner(nn.Module):  # a language model's body: embedding, layers, norm
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(4, 4)
            self.layers = nn.ModuleList(Block() for _ in range(2))
            self.norm = nn.LayerNorm(4)

        def forward(self, x):
            x = self.embed(x)
            for b in self.layers:
                x = b(x)
            return self.norm(x)

    class Causal(nn.Module):  # and the head around it
        def __init__(self):
            super().__init__()
            self.model = Inner()
            self.head = nn.Linear(4, 3)

        def forward(self, x):
            return self.head(self.model(x))

    lm = Causal()
    names = [n for n, _ in phase_marks.marked_modules(lm)]
    assert names == ["", "model", "model.layers.0", "model.layers.1", "head"]
    every = [n for n, _ in phase_marks.marked_modules(lm, "modules")]
    assert "model.layers.0.mlp.2" in every and "model.layers" not in every  # a ModuleList is never called
    resnet_like = nn.Sequential(nn.Conv2d(3, 4, 1), nn.Sequential(Block(), Block()), nn.Flatten())
    assert [n for n, _ in phase_marks.marked_modules(resnet_like)] == ["", "0", "1", "1.0", "1.1", "2"]
    with pytest.raises(ValueError, match="detail"):
        phase_marks.marked_modules(lm, "leaves")

    rec = Recorder()
    pm = phase_marks.PhaseMarks(lm, marker=rec).install()
    rec.log.clear()
    lm(torch.randn(2, 4)).sum().backward()
    assert [m for m in rec.log if m.startswith("memsight:bwd")] == [
        "memsight:bwd:head", "memsight:bwd:model", "memsight:bwd:model.layers.1", "memsight:bwd:model.layers.0",
        "memsight:bwd"]
    assert len(pm.handles) == 2 * len(names)
    pm.remove()
    rec = Recorder()
    pm = phase_marks.PhaseMarks(lm, marker=rec, detail="modules").install()
    rec.log.clear()
    lm(torch.randn(2, 4))
    assert "memsight:fwd:model.layers.1.mlp.0" in rec.log
    pm.remove()


def test_a_backward_that_fails_does_not_stop_the_next_ones_from_ending():
    net = Net()
    pm, rec = marks_of(net)

    def boom(grad):
        raise RuntimeError("user hook")

    x = torch.randn(3, 4, requires_grad=True)
    x.register_hook(boom)  # fails last, after the marks' first hook asked for the end
    with pytest.raises(RuntimeError, match="user hook"):
        net(x).sum().backward()
    assert pm._queued
    rec.log.clear()
    net(torch.randn(3, 4)).sum().backward()
    assert rec.log[-1] == "memsight:bwd" and not pm.failed


def test_the_detail_of_marks_comes_from_the_environment(monkeypatch, caplog):
    assert tags.marks_detail() == "blocks"
    monkeypatch.setenv("MEMSIGHT_PHASE_MARKS", "Modules")
    assert tags.marks_detail() == "modules"
    monkeypatch.setenv("MEMSIGHT_PHASE_MARKS", "off")
    net = Net()
    assert tags._Handed(net, None, marks=True).marks is None
    monkeypatch.setenv("MEMSIGHT_PHASE_MARKS", "leaves")
    with caplog.at_level(logging.WARNING, logger="memsight"):
        assert tags.marks_detail() == "blocks"
    assert "MEMSIGHT_PHASE_MARKS=leaves" in caplog.text

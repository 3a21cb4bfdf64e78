"""MemReporter and Courtesy on CPU tensors (Debian's torch, no CUDA)."""

from __future__ import annotations

import gc
import io
import warnings
import weakref

import pytest

torch = pytest.importorskip("torch")

from memsight.torch import Courtesy, MemReporter  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(10, 20)
        self.b = torch.nn.Linear(20, 10)
        self.register_buffer("steps", torch.zeros(300))


def report(reporter: MemReporter, **kw) -> list[str]:
    out = io.StringIO()
    reporter.report(stream=out, **kw)
    return out.getvalue().splitlines()


def row(lines: list[str], name: str) -> list[str]:
    found = [ln for ln in lines if ln.split()[0] == name]
    assert found, f"{name} not in report:\n" + "\n".join(lines)
    return found[0].split()


def test_names_from_the_model_grads_and_optimizer_state():
    net = Net()
    opt = torch.optim.Adam(net.parameters())
    net.b(net.a(torch.randn(2, 10))).sum().backward()
    opt.step()
    reporter = MemReporter(net)
    reporter.add_optimizer(opt)
    lines = report(reporter)
    assert lines[0] == "{:<40s}{:>20s}{:>10s}".format("Element type", "Size", "Used MEM")
    assert lines[1] == "-" * 79 and lines[2] == "Storage on cpu"
    assert row(lines, "a.weight") == ["a.weight", "(20,", "10)", "1.00K"]
    assert row(lines, "steps")[-1] == "1.50K"  # 1200 bytes round up to 3 × 512
    assert row(lines, "a.weight.grad")[-1] == "1.00K"
    assert row(lines, "Adam.b.weight.exp_avg_sq")[-1] == "1.00K"
    total = next(ln for ln in lines if ln.startswith("Total Tensors:"))
    assert "\tUsed Memory: " in total


def test_sized_by_storage_and_shared_storage_counted_once():
    base = torch.zeros(1000)  # 4000 bytes
    view = base[:10]
    keep = torch.empty(0).set_(torch.empty(2000).storage(), 0, (10,), (1,))  # holds all 8000 bytes
    reporter = MemReporter()
    lines = report(reporter, verbose=True)
    sizes = {s.name: s for s in reporter.device_tensor_stat[torch.device("cpu")]}
    assert sizes[reporter._lookup(keep)].nbytes == 8192
    base_name, view_name = reporter._lookup(base), reporter._lookup(view)
    assert sizes[base_name].nbytes == 4096
    assert sizes[view_name].nbytes == 0 and sizes[view_name].shared_with == base_name
    assert any(f"{view_name}(->{base_name})" in ln for ln in lines)
    assert not any("(->" in ln for ln in report(MemReporter(), verbose=False))


def test_tied_weights_are_one_tensor_with_both_names():
    net = Net()
    tied = torch.nn.Linear(10, 10)
    net.c = tied
    net.d = tied
    lines = report(MemReporter(net))
    assert row(lines, "c.weight+d.weight")[-1] == "512.00B"


def test_sparse_meta_empty_scalars_and_weak_proxies_do_not_break_the_census():
    sparse = torch.sparse_coo_tensor(torch.tensor([[0, 3]]), torch.tensor([1.0, 2.0]), (5,))
    meta = torch.empty(1 << 30, device="meta")
    empty = torch.empty(0)
    scalar = torch.tensor(3.0)
    proxy = weakref.proxy(torch.ones(3))  # dead at once; gc may still list it
    gc.collect()
    reporter = MemReporter()
    lines = report(reporter)
    stats = {s.name: s for dev in reporter.device_tensor_stat.values() for s in dev}
    assert stats[reporter._lookup(sparse)].nbytes == 1024  # indices and values, 512 each
    assert stats[reporter._lookup(meta)].nbytes == 0 and stats[reporter._lookup(meta)].note == "meta"
    assert reporter._lookup(empty) is None or reporter._lookup(empty) not in stats
    assert stats[reporter._lookup(scalar)].shape == "(1,)"
    assert "Storage on meta" in lines
    del proxy


def test_device_filter_and_bad_model():
    on_meta, on_cpu = torch.empty(10, device="meta"), torch.ones(3)
    lines = report(MemReporter(), device="cpu")
    assert "Storage on cpu" in lines and "Storage on meta" not in lines
    assert "Storage on meta" in report(MemReporter())
    del on_meta, on_cpu
    with pytest.raises(ValueError, match="torch.nn.Module"):
        MemReporter(model=42)


def test_reporter_keeps_no_tensor_alive():
    t = torch.ones(10)
    ref = weakref.ref(t)
    reporter = MemReporter()
    report(reporter)
    del t
    gc.collect()
    assert ref() is None


def test_courtesy_moves_storages_once_and_keeps_views_and_sharing():
    base = torch.arange(12.0)
    view = base[2:8].view(2, 3)
    p = torch.nn.Parameter(torch.ones(4))
    p.grad = torch.full((4,), 2.0)
    sparse = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.tensor([1.0]), (2,))
    before = base.data_ptr()
    c = Courtesy(device_type="cpu")  # host to host: the same mechanics as CUDA to host
    moved = c.yield_memory([base, view, p, p.grad, sparse])
    assert moved == 48 + 16 + 16
    assert base.data_ptr() != before and view.data_ptr() == base.data_ptr() + 8
    base[3] = 100.0
    assert view[0, 1].item() == 100.0  # still a view of base
    assert isinstance(p, torch.nn.Parameter) and p.requires_grad
    assert len(c.not_moved) == 1 and "sparse" in c.not_moved[0]
    with pytest.raises(RuntimeError, match="twice"):
        c.yield_memory([base])
    assert c.restore() == 4
    assert view[0, 1].item() == 100.0 and p.grad.tolist() == [2.0] * 4


def test_courtesy_without_cuda_tensors_moves_nothing():
    with Courtesy() as c:
        pass
    assert c.not_moved == []


class Wrapper(torch.Tensor):
    """A wrapper subclass with no storage of its own, as DTensor and FakeTensor are."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.size(), dtype=inner.dtype, device=inner.device)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(str(func))


def test_wrapper_subclasses_are_listed_with_no_bytes_and_their_inner_tensor_counted():
    w = Wrapper(torch.ones(1000))
    reporter = MemReporter()
    lines = report(reporter)
    stats = {s.name: s for s in reporter.device_tensor_stat[torch.device("cpu")]}
    mine = stats[reporter._lookup(w)]
    assert mine.nbytes == 0 and mine.note == "Wrapper"
    assert stats[reporter._lookup(w.inner)].nbytes == 4096
    assert any("[Wrapper]" in ln for ln in lines)


def test_fake_tensors_are_listed_without_bytes():
    fake_tensor = pytest.importorskip("torch._subclasses.fake_tensor")
    mode = fake_tensor.FakeTensorMode()
    fake = mode.from_tensor(torch.ones(1000))
    reporter = MemReporter()
    report(reporter)
    stat = next(s for dev in reporter.device_tensor_stat.values() for s in dev if s.name == reporter._lookup(fake))
    assert stat.nbytes == 0 and stat.note == "FakeTensor"


class WarnsOnEveryRead:
    """An object that warns whenever an attribute is read, as torch's
    deprecated torch.distributed.reduce_op does (FutureWarning in torch 2.x)."""

    def __getattribute__(self, name):
        warnings.warn(f"reading {name} of a deprecated object", FutureWarning, stacklevel=2)
        return object.__getattribute__(self, name)


def test_scanning_the_garbage_collector_makes_no_object_warn():
    planted = WarnsOnEveryRead()
    assert any(o is planted for o in gc.get_objects()), "the scan must meet it"
    t = torch.ones(3)
    # Every warning is recorded, none filtered out: an error filter would not
    # do, as a scan that catches exceptions would swallow the raised warning.
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        reporter = MemReporter()
        lines = report(reporter)
        with Courtesy() as c:
            pass
        report(MemReporter(pre_collect=True))
    assert [str(w.message) for w in seen] == []
    assert reporter._lookup(t) is not None and "Storage on cpu" in lines
    assert c.not_moved == []
    del planted

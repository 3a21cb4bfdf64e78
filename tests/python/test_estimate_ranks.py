"""A step's requests per CUDA stream, with no GPU, and one rank of a
sharded (FSDP2) job estimated alone (fit/fake_cuda.py, fit/fake_dist.py).
The FSDP2 cases need torch >= 2.6 (fully_shard) and skip on older ones."""

from __future__ import annotations

import collections

import pytest

from memsight.torch.fit import fake_cuda as fc
from memsight.torch.fit.fake_trace import FakeTrace


def test_each_request_is_on_its_stream_and_freed_to_the_pool_it_came_from():
    tr = FakeTrace(stacks=False)
    current = [0]
    tr.stream = lambda: current[0]
    a = tr.alloc(0, 1000)
    current[0] = 0x300
    b = tr.alloc(0, 2000)
    tr.free(0, a, 1000)  # freed while another stream is current: back to stream 0's pool
    current[0] = 0
    tr.free(0, b, 2000)
    got = [(e["action"], e["size"], e["stream"]) for e in tr.entries[0]]
    assert got == [("alloc", 1000, 0), ("alloc", 2000, 0x300),
                   ("free_requested", 1000, 0), ("free_completed", 1000, 0),
                   ("free_requested", 2000, 0x300), ("free_completed", 2000, 0x300)]


@pytest.fixture
def no_guard(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(fc, "ensure_cuda_guard", lambda torch: None)
    return torch


def test_fake_cuda_answers_streams_events_and_devices_and_puts_torch_back(no_guard):
    torch = no_guard
    before = {k: getattr(torch.cuda, k) for k in ("Stream", "Event", "current_stream", "stream", "current_device")}
    with fc.fake_cuda(device=1):
        assert torch.cuda.current_device() == 1
        s = torch.cuda.Stream(priority=-1)
        assert fc.current_stream_id() == 0 and torch.cuda.current_stream() == torch.cuda.default_stream()
        with torch.cuda.stream(s):
            assert fc.current_stream_id() == s.stream_id != 0
            e = s.record_event()
            torch.cuda.current_stream().wait_event(e)
            assert e.query() and torch.cuda.current_stream() is s
        with s:  # a stream is its own context too
            assert fc.current_stream_id() == s.stream_id
        assert fc.current_stream_id() == 0
        t = torch.cuda.Stream()
        assert t.stream_id not in (0, s.stream_id) and t != s
    assert fc.current_stream_id() == 0
    assert {k: getattr(torch.cuda, k) for k in before} == before


def test_fake_cuda_is_not_reentrant(no_guard):
    with fc.fake_cuda():
        with pytest.raises(RuntimeError, match="already running"):
            with fc.fake_cuda():
                pass


def _fsdp2_torch():
    torch = pytest.importorskip("torch")
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
        from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: F401
    except (ImportError, ValueError):  # ValueError: torch 1.13's distributed modules on Python 3.11
        pytest.skip("this torch has no FSDP2 (fully_shard) or fake process group")
    return torch


def _sharded(mesh):
    import torch.nn as nn
    from torch.distributed.fsdp import fully_shard

    m = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
    for layer in m:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    return m


def _step(m, opt, x):
    m(x).sum().backward()
    opt.step()
    opt.zero_grad()


def test_a_rank_of_an_fsdp2_job_holds_its_shard_and_unshards_one_layer_at_a_time():
    torch = _fsdp2_torch()
    from memsight.torch.fit.step_trace import trace_step

    full = 256 * 512 * 4  # one Linear's weight, fp32
    snaps = {ws: trace_step(_step, _sharded, lambda p: torch.optim.AdamW(p), torch.randn(8, 256),
                            world_size=ws, rank=ws - 1, stacks=True, terms=False) for ws in (2, 4)}
    for ws, snap in snaps.items():
        est = snap["memsight_estimate"]
        assert (est["world_size"], est["rank"]) == (ws, ws - 1)
        assert f"rank {ws - 1} of {ws}" in est["produced_by"]
        entries = snap["device_traces"][0]
        # The all-gathers' outputs are on a stream of FSDP2's own, not the default one.
        streams = collections.Counter(e["stream"] for e in entries if e["action"] == "alloc")
        assert len(streams) >= 2 and streams[0] > 0
        # The unsharded weights come and go by storage resizes: FSDP2's
        # all-gather gives each layer's full weight memory before it runs and
        # takes it back after (reshard after forward), in forward and backward.
        unshards = [e for e in entries if e["action"] == "alloc" and e["size"] == full
                    and any(f["filename"].endswith("_fsdp_param.py") for f in e["frames"])]
        resharded_in_forward = [e for e in entries if e["action"] == "free_completed" and e["size"] == full
                                and e["user_metadata"].startswith("memsight:fwd")]
        assert len(unshards) >= 8 and len(resharded_in_forward) >= 2, (len(unshards), len(resharded_in_forward))
        assert torch.distributed.is_initialized() is False  # the fake group is gone again
    # A rank of four holds half the optimizer state of a rank of two.
    def adam_state(snap):
        return sum(e["size"] for e in snap["device_traces"][0] if e["action"] == "alloc"
                   and any(f["name"] in ("_init_group", "_init_state") for f in e["frames"]))
    assert adam_state(snaps[4]) * 2 == pytest.approx(adam_state(snaps[2]), rel=0.02)


def test_a_rank_estimate_refuses_a_live_process_group_and_a_bad_rank():
    _fsdp2_torch()
    from memsight.torch.fit.fake_dist import fake_ranks

    with pytest.raises(ValueError, match="rank must be in"):
        with fake_ranks(2, 2):
            pass
    with fake_ranks(2, 0):
        with pytest.raises(RuntimeError, match="already initialized"):
            with fake_ranks(2, 1):
                pass


def test_batchnorm_buffers_are_traced_at_their_sizes():
    torch = pytest.importorskip("torch")
    if tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 4):
        pytest.skip("fake CUDA steps need torch >= 2.4")
    import torch.nn as nn

    from memsight.torch.fit.step_trace import trace_step

    snap = trace_step(_step, lambda: nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()),
                      lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), torch.randn(4, 3, 32, 32),
                      stacks=False, terms=False)
    sizes = [e["size"] for e in snap["device_traces"][0] if e["action"] == "alloc"]
    # weight, bias, BatchNorm's weight, bias, running mean and variance, its step counter
    assert sizes[:7] == [8 * 3 * 3 * 3 * 4, 32, 32, 32, 32, 32, 8]


def _no_gpu_torch():
    torch = pytest.importorskip("torch")
    if tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 4):
        pytest.skip("fake CUDA steps need torch >= 2.4")
    return torch


def test_autocast_keeps_half_precision_with_or_without_a_gpu():
    # autocast("cuda") turned itself off where CUDA is not available: the
    # estimate then saw every activation in float32, twice its size.
    torch = _no_gpu_torch()
    import torch.nn as nn

    from memsight.torch.fit.step_trace import trace_step

    def step(m, opt, x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = m(x)
        y.sum().backward()

    snap = trace_step(step, lambda: nn.Linear(1000, 3000, bias=False), None, torch.randn(100, 1000),
                      stacks=False, terms=False, steps=1)
    sizes = {e["size"] for e in snap["device_traces"][0] if e["action"] == "alloc"}
    assert 3000 * 1000 * 2 in sizes  # autocast's bf16 copy of the weight
    assert 100 * 3000 * 2 in sizes and 100 * 3000 * 4 not in sizes  # the output in bf16, never in fp32


def _attention(torch, b, h, t, d, attend):
    """A module projecting its input to q, k and v in one matrix product (so
    the three share a storage) and returning ``attend(q, k, v)``."""
    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(d * h, 3 * d * h)

        def forward(self, x):
            return attend(*self.qkv(x).view(b, t, 3, h, d).permute(2, 0, 3, 1, 4))

    return Attn


def test_attention_runs_a_fused_kernel_with_or_without_a_gpu():
    # Without a GPU to choose the kernel, torch fell back to the math one,
    # which holds the batch x heads x T x T attention matrix for the backward.
    torch = _no_gpu_torch()
    import torch.nn.functional as F

    from memsight.torch.fit.step_trace import trace_step

    b, h, t, d = 2, 4, 512, 64
    Attn = _attention(torch, b, h, t, d, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))

    for dtype in (torch.bfloat16, torch.float32):  # flash, then memory-efficient attention
        def step(m, opt, x, dtype=dtype):
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype != torch.float32):
                m(x).float().sum().backward()

        snap = trace_step(step, Attn, None, torch.randn(b, t, d * h), stacks=False, terms=False, steps=1)
        matrix = b * h * t * t * (2 if dtype == torch.bfloat16 else 4)
        sizes = [e["size"] for e in snap["device_traces"][0] if e["action"] == "alloc"]
        assert not [s for s in sizes if s >= matrix], (dtype, sorted(sizes)[-3:])


@pytest.mark.parametrize("layout", ["tokens_first", "batch_first"])
def test_the_efficient_attention_backwards_temporaries_are_added(layout):
    # torch's memory-efficient backward makes grad_out contiguous (when the
    # gradient arrives in another order, as torchvision's attention sends it)
    # and, for float32, two temporaries for the softmax's row sums; its fake
    # kernel makes none of them (ViT-B/16 on the H200: 37 MiB short at the peak).
    torch = _no_gpu_torch()
    import torch.nn.functional as F

    from memsight.torch.fit.step_trace import trace_step

    b, h, t, d = 2, 4, 256, 64

    def attend(q, k, v):
        out = F.scaled_dot_product_attention(q, k, v)  # float32: the memory-efficient kernel
        if layout == "tokens_first":  # as torchvision: (tokens, batch, heads, dim), contiguous
            return out.permute(2, 0, 1, 3).contiguous()
        return out.transpose(1, 2).contiguous()

    Attn = _attention(torch, b, h, t, d, attend)

    def step(m, opt, x):
        m(x).square().sum().backward()  # a dense gradient in the output's order (sum alone gives a broadcast)

    snap = trace_step(step, Attn, None, torch.randn(b, t, d * h), stacks=False, steps=1)
    terms = {x["name"]: x["bytes"] for x in snap["memsight_estimate"]["terms"]}
    copy = b * h * t * d * 4 if layout == "tokens_first" else 0
    sums = b * t * h * d * 4 + b * t * h * 4 + b * h * t * 4
    assert terms["memory-efficient attention backward's temporaries (the largest)"] == copy + sums
    made = [e for e in snap["device_traces"][0] if any("softmax row sums" in f["name"] or "made contiguous"
                                                         in f["name"] for f in e["frames"])]
    assert sorted(e["size"] for e in made if e["action"] == "alloc") == sorted(
        ([copy] if copy else []) + [b * t * h * d * 4, b * t * h * 4, b * h * t * 4])
    freed = {e["addr"] for e in snap["device_traces"][0] if e["action"] == "free_completed"}
    assert {e["addr"] for e in made} <= freed  # each lives for the kernel only


def test_kernel_temporaries_of_a_bias_gradient_and_a_layer_norm_are_added():
    # On the H200 the real run of ViT-B/16 held 38 MiB at its peak that the
    # fake step had no request for: the reduction kernel's staging buffer
    # for a bias gradient; and layer norm copies a transposed gradient.
    torch = _no_gpu_torch()
    from memsight.torch.fit import terms
    from memsight.torch.fit.step_trace import trace_step

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(768)
            self.fc = torch.nn.Linear(768, 3072)

        def forward(self, x):  # x: (tokens, batch, 768), as attention hands it back
            return self.fc(self.ln(x.transpose(0, 1)))

    def step(m, opt, x):
        m(x).square().sum().backward()

    snap = trace_step(step, Block, None, torch.randn(197, 32, 768), stacks=False, steps=1)
    applied = {x["name"]: x["bytes"] for x in snap["memsight_estimate"]["terms"]}
    buffer, semaphores = terms.reduction_buffers([6304, 3072], [3072, 1], [0], 4, terms.SMS)
    assert (buffer, semaphores) == (138_412_032, 96)  # 4 B x 3072 outputs x 88 blocks x 32 x 4 lanes
    assert applied["reductions' staging buffers (the largest)"] == buffer + semaphores
    # the transposed input, copied in the forward and again in the backward
    assert applied["layer norm's contiguous copies (the largest)"] == 197 * 32 * 768 * 4
    entries = snap["device_traces"][0]
    made = {e["addr"] for e in entries if any("staging buffer" in f["name"] for f in e["frames"])}
    assert made and made <= {e["addr"] for e in entries if e["action"] == "free_completed"}  # the kernel's only


def test_the_report_names_the_cudnn_workspaces_the_step_would_take():
    # cuDNN picks its convolution and attention workspaces on the device:
    # not added, but named with the sizes measured, where the step runs them.
    torch = _no_gpu_torch()
    from memsight.torch.fit import terms
    from memsight.torch.fit.step_trace import trace_step

    def step(m, opt, x):
        m(x).sum().backward()

    conv = trace_step(step, lambda: torch.nn.Conv2d(3, 8, 3), None, torch.randn(2, 3, 16, 16), stacks=False,
                      steps=1)
    assert conv["memsight_estimate"]["notes"] == [terms.NOT_ADDED["conv"]]
    linear = trace_step(step, lambda: torch.nn.Linear(8, 8), None, torch.randn(2, 8), stacks=False, steps=1)
    assert linear["memsight_estimate"]["notes"] == []

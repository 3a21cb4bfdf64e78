"""memsight.torch.estimate / max_batch on CPU: the fake-tensor trace is
replaced by a synthetic one (torch 2.x's fake tensors are checked on the
GPU machine, tests/gpu/test_estimate_gpu.py); the allocator simulation, the
verdict, the report and max_batch's search are the real ones."""

from __future__ import annotations

import gc
import pickle

import pytest

import memsight
from memsight.torch.fit import api, terms
from memsight.torch.fit.fake_trace import FakeTrace
from memsight.torch.fit.terms import cublas_workspace_bytes, cublaslt_workspace_bytes

MiB = 1 << 20


def synthetic_step(batch: int, steps: int = 2) -> dict:
    """Weights of 100 MiB, then per step activations of 10 MiB a sample,
    kept to the end of the step, and 100 MiB of optimizer state from the
    first step on."""
    tr = FakeTrace(stacks=False)
    weights = tr.alloc(0, 100 * MiB, [{"name": "build", "filename": "train.py", "line": 1}])
    state = None
    for s in range(steps):
        tr.annotate(f"memsight:step:{s}")
        acts = [tr.alloc(0, 10 * MiB, [{"name": "forward", "filename": "train.py", "line": 5}])
                for _ in range(batch)]
        if state is None:
            state = tr.alloc(0, 100 * MiB, [{"name": "step", "filename": "train.py", "line": 9}])
        for a in acts:
            tr.free(0, a, 10 * MiB)
    assert weights and state
    return {"segments": [], "device_traces": tr.snapshot_traces(), "external_annotations": tr.annotations,
            "memsight_estimate": {"version": 1, "produced_by": "test", "terms": [{"name": "cuBLAS workspace",
                                                                                  "bytes": 32 * MiB}],
                                  "notes": ["nothing else"]}}


@pytest.fixture
def fake_trace(monkeypatch):
    """The synthetic trace, on devices whose whole memory torch's allocator
    may take (nothing held outside it; the tests of that say so)."""
    monkeypatch.setattr(terms, "CUDA_CONTEXT_BYTES", 0)
    monkeypatch.setattr(terms, "NCCL_BYTES", 0)
    calls = []

    def trace_step(step, model, optimizer, inputs, steps=2, stacks=True, world_size=None, rank=0):
        batch = inputs(0)
        calls.append(batch)
        return synthetic_step(batch, steps)

    monkeypatch.setattr(api, "trace_step", trace_step)
    return calls


def test_the_estimate_is_the_simulated_allocator_on_the_trace(fake_trace):
    est = api.estimate(None, None, inputs=lambda i: 8, device_memory="1GiB")
    assert est.peak_allocated == (100 + 100 + 80) * MiB
    assert est.peak_reserved >= est.peak_allocated and est.fits
    assert est.limit == 1 << 30
    d = est.to_dict()
    assert d["fits"] and d["peak_reserved"] == est.peak_reserved and d["terms"][0]["bytes"] == 32 * MiB
    text = str(est)
    assert "peak allocated  280.0MiB" in text
    assert "fits in 1.0GiB" in text and "included: cuBLAS workspace 32.0MiB" in text
    assert "not included: nothing else" in text
    assert "at the allocated peak: unknown 200.0MiB, temporary 80.0MiB" in text
    assert "(rank" not in text and d["world_size"] is None


def test_a_ranks_estimate_says_which_rank_it_is(fake_trace, monkeypatch):
    def rank_step(step, model, optimizer, inputs, steps=2, stacks=True, world_size=None, rank=0):
        snap = synthetic_step(inputs(0), steps)
        snap["memsight_estimate"].update(world_size=world_size, rank=rank)
        return snap

    monkeypatch.setattr(api, "trace_step", rank_step)
    est = api.estimate(None, None, inputs=lambda i: 2, device_memory="1GiB", world_size=8, rank=3)
    assert str(est).startswith("memsight estimate: one training step (rank 3 of 8) under fake tensors")
    assert (est.to_dict()["world_size"], est.to_dict()["rank"]) == (8, 3)


def test_memory_held_outside_the_allocator_is_taken_from_the_device(fake_trace, monkeypatch):
    monkeypatch.setattr(terms, "CUDA_CONTEXT_BYTES", 500 * MiB)
    monkeypatch.setattr(terms, "NCCL_BYTES", 300 * MiB)
    one = api.estimate(None, None, inputs=lambda i: 8, device_memory="4GiB")
    assert one.limit == 4096 * MiB - 500 * MiB
    assert "taken from the device's memory: CUDA context and kernels (outside torch's allocator) 500.0MiB" \
        in str(one)
    assert [t["bytes"] for t in one.to_dict()["outside_allocator"]] == [500 * MiB]

    def rank_step(step, model, optimizer, inputs, steps=2, stacks=True, world_size=None, rank=0):
        snap = synthetic_step(inputs(0), steps)
        snap["memsight_estimate"].update(world_size=world_size, rank=rank)
        return snap

    monkeypatch.setattr(api, "trace_step", rank_step)
    rank = api.estimate(None, None, inputs=lambda i: 8, device_memory="4GiB", world_size=2)
    assert rank.limit == 4096 * MiB - 800 * MiB and "NCCL buffers" in str(rank)
    # A batch that fits the whole device runs out of what is left of it.
    assert api.estimate(None, None, inputs=lambda i: 370, device_memory="4GiB", outside_memory=0).fits
    assert not api.estimate(None, None, inputs=lambda i: 370, device_memory="4GiB").fits


def test_the_lower_of_a_memory_fraction_and_the_memory_left_is_the_limit(fake_trace, monkeypatch):
    monkeypatch.setattr(terms, "CUDA_CONTEXT_BYTES", 500 * MiB)
    assert api.estimate(None, None, inputs=lambda i: 8, device_memory="4GiB", memory_fraction=0.25).limit == 1 << 30
    assert api.estimate(None, None, inputs=lambda i: 8, device_memory="4GiB",
                        memory_fraction=0.99).limit == 4096 * MiB - 500 * MiB
    given = api.estimate(None, None, inputs=lambda i: 8, device_memory="4GiB", outside_memory="1GiB")
    assert given.limit == 3 << 30 and "(as given) 1.0GiB" in str(given)
    with pytest.raises(ValueError, match="leaves nothing for torch's allocator"):
        api.estimate(None, None, inputs=lambda i: 8, device_memory="400MiB")
    with pytest.raises(ValueError, match="outside_memory"):
        api.estimate(None, None, inputs=lambda i: 8, device_memory="4GiB", outside_memory=-1)


def test_a_step_over_the_device_runs_out_and_says_what_to_try(fake_trace):
    est = api.estimate(None, None, inputs=lambda i: 100, device_memory="1GiB")
    assert not est.fits and est.oom is not None
    assert est.peak_reserved_unbounded > 1 << 30
    text = str(est)
    assert "runs out of 1.0GiB" in text and "max_batch" in text


def test_a_memory_fraction_caps_the_device(fake_trace):
    fits = api.estimate(None, None, inputs=lambda i: 8, device_memory="4GiB", memory_fraction=0.25)
    over = api.estimate(None, None, inputs=lambda i: 90, device_memory="4GiB", memory_fraction=0.25)
    assert fits.limit == 1 << 30 and fits.fits and not over.fits


def test_max_batch_is_the_largest_batch_the_simulation_fits_in_few_estimates(fake_trace):
    truth = max(n for n in range(1, 120)
                if api.estimate(None, None, inputs=lambda i, n=n: n, device_memory="1GiB").fits)
    fake_trace.clear()
    best, tried = api.max_batch(lambda n, i: n, None, None, device_memory="1GiB")
    assert best == truth
    assert len(tried) == len(fake_trace) <= 10
    assert all(e.fits == (n <= truth) for n, e in tried)


def test_max_batch_with_a_margin_leaves_it_free(fake_trace):
    best, _ = api.max_batch(lambda n, i: n, None, None, device_memory="1GiB", margin=0.2)
    e = api.estimate(None, None, inputs=lambda i: best, device_memory="1GiB")
    e1 = api.estimate(None, None, inputs=lambda i: best + 1, device_memory="1GiB")
    assert e.peak_reserved <= 0.8 * (1 << 30) < e1.peak_reserved


def test_max_batch_when_nothing_fits_and_without_a_device(fake_trace, monkeypatch):
    best, tried = api.max_batch(lambda n, i: 200, None, None, device_memory="1GiB")
    assert best == 0 and len(tried) == 1
    monkeypatch.setattr(api, "_device_total", lambda _: None)
    with pytest.raises(ValueError, match="device_memory"):
        api.max_batch(lambda n, i: n, None, None)


def test_the_synthetic_snapshot_is_saved_and_read_back(fake_trace, tmp_path):
    est = api.estimate(None, None, inputs=lambda i: 4, device_memory="1GiB")
    out = tmp_path / "step.pickle"
    est.save(out)
    back = memsight.load(out)
    assert back.whatif("defaults").devices[0].results[0].peak_allocated == est.peak_allocated
    assert "memsight_estimate" in pickle.loads(out.read_bytes())


def test_the_fake_trace_frees_a_storage_when_it_dies_and_reallocates_on_resize():
    class Storage:  # stands for a fake UntypedStorage: an identity and a size
        def __init__(self, n):
            self._cdata, self.n = id(self), n

        def nbytes(self):
            return self.n

    tr = FakeTrace(stacks=False)
    a, b = Storage(1000), Storage(0)
    tr.track(a, 0)
    tr.track(a, 0)  # seen again (a view): nothing new
    tr.track(b, 0)  # empty: torch allocates nothing
    a.n = 4096
    tr.track(a, 0)  # resized: the new block, then the old one freed
    del a
    gc.collect()
    acts = [(e["action"], e["size"]) for e in tr.entries[0]]
    assert acts == [("alloc", 1000), ("alloc", 4096), ("free_requested", 1000), ("free_completed", 1000),
                    ("free_requested", 4096), ("free_completed", 4096)]
    times = [e["time_us"] for e in tr.entries[0]]
    assert times == sorted(times) and len(set(times)) == len(times)


def test_workspace_sizes_follow_torchs_variables():
    assert cublas_workspace_bytes({}) == 32 * MiB
    assert cublas_workspace_bytes({"CUBLAS_WORKSPACE_CONFIG": ":4096:2:16:8"}) == 8 * MiB + 128 * 1024
    assert cublas_workspace_bytes({"CUBLAS_WORKSPACE_CONFIG": "junk"}) == 32 * MiB
    assert cublaslt_workspace_bytes({}) == MiB
    assert cublaslt_workspace_bytes({"TORCH_CUBLASLT_WORKSPACE_SIZE": "4096"}) == 4 * MiB


@pytest.mark.parametrize("per_sample", [1, 3, 7, 20])
def test_max_batch_finds_the_edge_for_any_slope(monkeypatch, per_sample):
    def trace_step(step, model, optimizer, inputs, steps=2, stacks=True, world_size=None, rank=0):
        tr = FakeTrace(stacks=False)
        tr.alloc(0, 50 * MiB, [])
        acts = [tr.alloc(0, per_sample * MiB + 4096, []) for _ in range(inputs(0))]
        for a in acts:
            tr.free(0, a, per_sample * MiB + 4096)
        return {"segments": [], "device_traces": tr.snapshot_traces()}

    monkeypatch.setattr(api, "trace_step", trace_step)
    best, tried = api.max_batch(lambda n, i: n, None, None, device_memory="1GiB", high=2000)
    assert len(tried) <= 10, [(n, e.fits) for n, e in tried]

    def fits(n):
        return api.estimate(None, None, inputs=lambda i: n, device_memory="1GiB").fits

    # The edge: best fits, and nothing just above it does.
    assert fits(best) and not any(fits(n) for n in range(best + 1, best + 6)), [(n, e.fits) for n, e in tried]


def _recording(batch: int) -> dict:
    """A recorded step at ``batch``: weights live before the recording
    began, activations of 3 MiB a sample plus a 1 MiB workspace, each freed."""
    frames = [{"name": "forward", "filename": "train.py", "line": 5}]
    weights = {"address": 1 << 30, "size": 64 * MiB, "requested_size": 64 * MiB, "state": "active_allocated",
               "frames": [{"name": "build", "filename": "train.py", "line": 1}]}
    trace, addr = [], 2 << 30
    for s in range(2):
        for size in (3 * MiB * batch + 512, MiB):
            trace.append({"action": "alloc", "addr": addr, "size": size, "stream": 0, "time_us": len(trace),
                          "frames": frames, "user_metadata": "memsight:fwd:layers.0"})
            trace.append({"action": "free_requested", "addr": addr, "size": size, "stream": 0,
                          "time_us": len(trace), "frames": frames})
            trace.append({"action": "free_completed", "addr": addr, "size": size, "stream": 0,
                          "time_us": len(trace), "frames": frames})
            addr += 64 * MiB
    seg = {"device": 0, "address": 1 << 30, "total_size": 64 * MiB, "allocated_size": 64 * MiB,
           "active_size": 64 * MiB, "requested_size": 64 * MiB, "stream": 0, "segment_type": "large",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": [weights]}
    return {"segments": [seg], "device_traces": [trace]}


def test_calibrate_draws_each_request_as_a_line_in_the_batch():
    from memsight.torch.fit.calibrate import calibrate

    req = calibrate(_recording(2), 2, _recording(4), 4, 10)
    allocs = [e for e in req["device_traces"][0] if e["action"] == "alloc"]
    assert [e["size"] for e in allocs] == [64 * MiB] + [30 * MiB + 512, MiB] * 2  # weights first
    assert allocs[1]["user_metadata"] == "memsight:fwd:layers.0"
    est = api.Estimate.from_requests(req, device_memory="1GiB")
    assert est.peak_allocated >= 64 * MiB + 30 * MiB + 512 and est.fits
    assert est.snapshot.summary().devices[0].peak_allocated == est.peak_allocated


def test_calibrate_refuses_recordings_of_other_steps():
    from memsight.torch.fit.calibrate import calibrate

    other = _recording(4)
    for e in other["device_traces"][0][6:]:
        e["frames"] = [{"name": "other", "filename": "eval.py", "line": 9}]
    with pytest.raises(ValueError, match=r"6 of 12 and 12 requests match; the first apart is alloc at train.py:5"):
        calibrate(_recording(2), 2, other, 4, 8)
    with pytest.raises(ValueError, match="two different batch sizes"):
        calibrate(_recording(2), 2, _recording(2), 2, 8)
    with pytest.raises(ValueError, match="no allocation history"):
        calibrate({"segments": [], "device_traces": []}, 2, _recording(4), 4, 8)


def test_calibrate_takes_a_request_one_recording_lacks_as_growing_from_zero():
    from memsight.torch.fit.calibrate import calibrate

    small, large = _recording(2), _recording(4)
    # At batch 2 the library needed no workspace (no request at all): drop
    # the small recording's second step's 1 MiB request.
    del small["device_traces"][0][9:12]
    req = calibrate(small, 2, large, 4, 6)
    sizes = [e["size"] for e in req["device_traces"][0] if e["action"] == "alloc"]
    assert sizes == [64 * MiB, 18 * MiB + 512, MiB, 18 * MiB + 512, 2 * MiB]
    frees = [e for e in req["device_traces"][0] if e["action"] == "free_completed"]
    assert len(frees) == 4  # every request freed once


def test_the_estimate_saves_the_completed_snapshot(fake_trace, tmp_path):
    est = api.estimate(None, None, inputs=lambda i: 4, device_memory="1GiB")
    out = est.save(tmp_path / "step.pickle.gz")
    done = memsight.load(out)
    assert done.summary().devices[0].peak_reserved == est.peak_reserved
    assert "<html" in est.html()[:200].lower()


def test_max_batch_finds_the_edge_when_the_need_bends_upward(monkeypatch):
    # A step whose memory a sample grows with the batch (as ViT-B/16's did
    # on the H200: 48 MB a sample between batch 1 and 4, 136 MB at 32): the
    # line through two small batches lands far past the edge.
    def trace_step(step, model, optimizer, inputs, steps=2, stacks=True, world_size=None, rank=0):
        tr = FakeTrace(stacks=False)
        tr.alloc(0, 50 * MiB, [])
        n = inputs(0)
        size = (n // 8 + 1) * MiB + 4096
        acts = [tr.alloc(0, size, []) for _ in range(n)]
        for a in acts:
            tr.free(0, a, size)
        return {"segments": [], "device_traces": tr.snapshot_traces()}

    monkeypatch.setattr(api, "trace_step", trace_step)
    best, tried = api.max_batch(lambda n, i: n, None, None, device_memory="1GiB", high=200)

    def fits(n):
        return api.estimate(None, None, inputs=lambda i: n, device_memory="1GiB").fits

    assert fits(best) and not any(fits(n) for n in range(best + 1, best + 6)), [(n, e.fits) for n, e in tried]
    assert len(tried) <= 9, [(n, e.fits) for n, e in tried]  # one of them past the edge


def test_max_batch_looks_past_an_uneven_edge(fake_trace, monkeypatch):
    # Near a cap one batch can run out where the next fits (the FSDP2 rank
    # on the H200: 14 fits, 15 runs out, 16 fits, 17 runs out).
    def trace_step(step, model, optimizer, inputs, steps=2, stacks=True, world_size=None, rank=0):
        n = inputs(0)  # 82 needs what 95 would; 83 what 80 would
        return synthetic_step({82: 95, 83: 80}.get(n, n), steps)

    monkeypatch.setattr(api, "trace_step", trace_step)
    best, tried = api.max_batch(lambda n, i: n, None, None, device_memory="1GiB")
    verdicts = dict((n, e.fits) for n, e in tried)
    assert verdicts.get(82) is False and best == 83, verdicts
    assert api.estimate(None, None, inputs=lambda i: best, device_memory="1GiB").fits
    assert not api.estimate(None, None, inputs=lambda i: best + 1, device_memory="1GiB").fits
    assert len(tried) <= 10

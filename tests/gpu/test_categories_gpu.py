"""What kind of memory, checked against truth on real training loops.

Each loop runs one step before recording (so the optimizer state, the
gradients kept across steps and cuBLAS's workspaces exist), then records two
steps with the model and optimizer handed over (memsight.torch.record's
model=, optimizer=) and takes a snapshot. Then:

  - at the snapshot, parameter, gradient, optimizer-state and buffer bytes
    equal what the test sums from model.parameters(), p.grad, optimizer.state
    and model.buffers() by storage, to the byte: requested bytes against the
    storages' sizes, block bytes against torch's own blocks of those storages;
  - memsight's peak is torch's max_memory_allocated(), its kinds at the peak
    add up to it, and what the recorded steps made (activations, temporaries,
    gradients flowing through the backward, and gradients where zero_grad
    frees them) equals the rest of max_memory_allocated() once what was live
    before recording (torch's memory_snapshot()) is taken away.

Loops: a transformer with AdamW under bf16 autocast; a conv net (BatchNorm
buffers) with SGD momentum and zero_grad(set_to_none=True); the transformer
with activation checkpointing; the transformer under torch.compile. The
transformer also runs under torch.profiler with its memory timeline, and
the two answers at the peak are written to OUT/categories_vs_profiler.md
(docs/summary.md quotes them).
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import pathlib

import pytest

KINDS = ["parameter", "gradient", "optimizer_state", "buffer", "activation", "temporary",
         "autograd_internal", "before_recording", "unknown", "communication"]
MADE_IN_A_STEP = ["activation", "temporary", "autograd_internal"]


def out_dir(tmp_path) -> pathlib.Path:
    d = pathlib.Path(os.environ.get("OUT") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


# -- the models ---------------------------------------------------------------------------------
def transformer(layers=4, d=512, heads=8, vocab=4096, checkpoint=False):
    import torch
    import torch.utils.checkpoint
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.ln2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.layers = nn.ModuleList(Block() for _ in range(layers))
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, ids):
            x = self.embed(ids)
            for block in self.layers:
                if checkpoint:
                    x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
                else:
                    x = block(x)
            return self.head(self.norm(x))

    return GPT().cuda()


def convnet():
    from torch import nn

    def stage(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.MaxPool2d(2))

    return nn.Sequential(stage(3, 32), stage(32, 64), stage(64, 128), nn.Flatten(),
                         nn.Linear(128 * 8 * 8, 10)).cuda()


def lm_step(model, opt, set_to_none, batch=8, seq=256, vocab=4096, amp=True):
    import torch

    opt.zero_grad(set_to_none=set_to_none)
    ids = torch.randint(0, vocab, (batch, seq), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), ids.flatten())
    loss.backward()
    opt.step()


def conv_step(model, opt, set_to_none):
    import torch

    x = torch.randn(32, 3, 64, 64, device="cuda")
    y = torch.randint(0, 10, (32,), device="cuda")
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    if set_to_none:
        opt.zero_grad(set_to_none=True)


# -- truth ----------------------------------------------------------------------------------------
def storages(model, opt):
    """{kind: {data_ptr: nbytes}} of the CUDA storages, as the test finds them."""
    out = {k: {} for k in ("parameter", "gradient", "optimizer_state", "buffer")}

    def add(kind, t):
        if t is None or not t.is_cuda:
            return
        st = t.untyped_storage()
        out[kind].setdefault(st.data_ptr(), st.nbytes())

    params = list(model.parameters())
    for p in params:
        add("parameter", p)
    for b in model.buffers():
        add("buffer", b)
    for p in params:
        add("gradient", p.grad)
    for group in opt.param_groups:
        for p in group["params"]:
            for v in opt.state.get(p, {}).values():
                if hasattr(v, "untyped_storage"):
                    add("optimizer_state", v)
    return out


def torch_block_sizes(snap):
    """{address: size} of torch's allocated blocks in a snapshot."""
    return {b["address"]: b["size"] for s in snap["segments"] for b in s["blocks"]
            if b["state"] == "active_allocated"}


# -- one loop, recorded ---------------------------------------------------------------------------
def record_loop(model, opt, step, hand_over=None, steps=2):
    """One step before recording, `steps` recorded; returns what the checks need."""
    import torch

    import memsight
    import memsight.torch as mt

    step()
    torch.cuda.synchronize()
    gc.collect()
    before = torch.cuda.memory_snapshot()
    before_bytes = sum(torch_block_sizes({"segments": before}).values())
    assert before_bytes == torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    hand = hand_over if hand_over is not None else model
    with mt.record(max_entries=2_000_000, stacks="python", model=hand, optimizer=opt):
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        raw = mt.snapshot()
    peak = torch.cuda.max_memory_allocated()
    assert "memsight_tags" in raw
    s = memsight.from_dict(raw)
    d = torch.cuda.current_device()
    summary = s.summary().devices[d]
    return {"raw": raw, "snap": s, "summary": summary, "peak": peak, "before": before_bytes,
            "truth": storages(model, opt)}


def check_snapshot_kinds(r):
    """Tagged kinds at the snapshot against the model's own storages, to the byte."""
    at = r["summary"].categories.at_snapshot.by_category
    blocks = torch_block_sizes(r["raw"])
    for kind, found in r["truth"].items():
        want_requested = sum(found.values())
        want_blocks = sum(blocks[ptr] for ptr in found)
        got = at[kind]
        assert got.requested == want_requested, f"{kind}: requested {got.requested} != storages {want_requested}"
        assert got.bytes == want_blocks, f"{kind}: {got.bytes} block bytes != torch's {want_blocks}"
        assert got.tagged == got.bytes, f"{kind}: {got.tagged} of {got.bytes} tagged"
        assert got.count == len(found), kind


def check_peak_kinds(r, made=MADE_IN_A_STEP):
    """The kinds at the peak add up to max_memory_allocated(); what the
    recorded steps made is the rest of it after what existed before."""
    summ = r["summary"]
    at = summ.categories.at_peak
    assert summ.peak_allocated == r["peak"], "the replayed peak is torch's max_memory_allocated()"
    assert at.total == r["peak"]
    made_bytes = sum(at.by_category[k].bytes for k in made)
    rest = r["peak"] - r["before"]
    by = {k: at.by_category[k].bytes for k in KINDS if at.by_category[k].bytes}
    assert made_bytes == rest, f"made in the steps {made_bytes} != max_memory_allocated() - before {rest}: {by}"
    assert at.by_category.unknown.bytes == 0, by
    return by


def test_transformer_adamw_bf16(tmp_path):
    import torch

    model = transformer()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    r = record_loop(model, opt, lambda: lm_step(model, opt, set_to_none=False))
    check_snapshot_kinds(r)
    by = check_peak_kinds(r)
    assert by.get("activation", 0) > 0 and by.get("optimizer_state", 0) > 0
    # modules: every layer (a block: the marks' default) holds activations at the peak
    mods = {m.name for m in r["summary"].categories.at_peak.modules}
    assert {"layers.0", "layers.3"} <= mods, sorted(mods)[:20]
    meta = {e["user_metadata"] for t in r["raw"]["device_traces"] for e in t}
    assert any(m.startswith("memsight:fwd:layers.") for m in meta) or not hasattr(torch.cuda.memory,
                                                                                  "_set_memory_metadata")
    _write(tmp_path, "transformer", r)


def test_convnet_sgd_momentum(tmp_path):
    import torch

    model = convnet()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    steps = iter(range(3))

    def step():  # gradients freed after every step but the last (the snapshot sees them)
        conv_step(model, opt, set_to_none=next(steps) < 2)

    r = record_loop(model, opt, step)
    check_snapshot_kinds(r)
    assert r["truth"]["buffer"], "BatchNorm's running statistics"
    check_peak_kinds(r, MADE_IN_A_STEP + ["gradient"])
    _write(tmp_path, "convnet", r)


def test_activation_checkpointing(tmp_path):
    import torch

    model = transformer(checkpoint=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    r = record_loop(model, opt, lambda: lm_step(model, opt, set_to_none=False))
    check_snapshot_kinds(r)
    check_peak_kinds(r)
    if hasattr(torch.cuda.memory, "_set_memory_metadata"):
        meta = [e["user_metadata"] for t in r["raw"]["device_traces"] for e in t if e["action"] == "alloc"]
        assert any(m.startswith("memsight:rec:layers.") for m in meta), "the re-run forward is marked"
    _write(tmp_path, "checkpointing", r)


def test_torch_compile(tmp_path):
    import torch

    model = transformer(layers=2)
    compiled = torch.compile(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lm_step(compiled, opt, set_to_none=False)  # compile outside the measurement
    r = record_loop(model, opt, lambda: lm_step(compiled, opt, set_to_none=False), hand_over=compiled)
    check_snapshot_kinds(r)
    check_peak_kinds(r)
    names = {t["name"] for t in r["raw"]["memsight_tags"]["storages"]}
    assert "layers.0.mlp.0.weight" in names, "names without torch.compile's _orig_mod"
    _write(tmp_path, "compile", r)


def test_torch_profiler_memory_timeline_on_the_same_run(tmp_path):
    """torch.profiler's categorised timeline and memsight's kinds over the
    same two steps; the answers at each one's peak go to OUT (docs/summary.md)."""
    import warnings

    import torch

    import memsight
    import memsight.torch as mt

    model = transformer()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lm_step(model, opt, set_to_none=True)
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.reset_peak_memory_stats()
    timeline = tmp_path / "timeline.raw.json.gz"
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with mt.record(max_entries=2_000_000, stacks="python", model=model, optimizer=opt):
        with torch.profiler.profile(activities=acts, profile_memory=True, record_shapes=True,
                                    with_stack=True) as prof:
            for _ in range(2):
                lm_step(model, opt, set_to_none=True)
            torch.cuda.synchronize()
        raw = mt.snapshot()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prof.export_memory_timeline(str(timeline), device=f"cuda:{torch.cuda.current_device()}")
    records = json.loads(gzip.decompress(timeline.read_bytes()))
    assert records, "torch wrote a memory timeline"
    # torch's categories in _memory_profiler's index order; None is "unknown"
    torch_kinds = ["parameter", "optimizer state", "input", "temporary", "activation", "gradient",
                   "autograd detail", "unknown"]
    live = [0] * 8
    best, best_total = list(live), -1
    for _, _, nbytes, cat in sorted(records, key=lambda r: (r[0], r[1])):
        live[cat] += nbytes
        if sum(live) > best_total:
            best_total, best = sum(live), list(live)
    s = memsight.from_dict(raw)
    summ = s.summary().devices[torch.cuda.current_device()]
    assert summ.peak_allocated == torch.cuda.max_memory_allocated()
    mine = summ.categories.at_peak.by_category
    lines = [
        "| kind | torch.profiler memory timeline, at its peak | memsight, at the allocated peak (requested bytes) |",
        "| --- | --- | --- |",
    ]
    rows = [("parameter", "parameter", "parameter"), ("optimizer state", "optimizer state", "optimizer_state"),
            ("gradient", "gradient", "gradient"), ("activation", "activation", "activation"),
            ("input", "input", None), ("temporary", "temporary", "temporary"),
            ("autograd detail / autograd-internal", "autograd detail", "autograd_internal"),
            ("buffer", None, "buffer"), ("before-recording", None, "before_recording"),
            ("unknown", "unknown", "unknown")]
    for label, theirs, key in rows:
        t = best[torch_kinds.index(theirs)] if theirs else None
        m = mine[key].requested if key else None
        lines.append(f"| {label} | {_mib(t)} | {_mib(m)} |")
    lines.append(f"| total | {_mib(best_total)} | {_mib(summ.categories.at_peak.total)} (block bytes) |")
    text = "\n".join(lines) + "\n"
    (out_dir(tmp_path) / "categories_vs_profiler.md").write_text(text)
    print("\n" + text)


def _mib(v):
    return "-" if v is None else f"{v / 2**20:.1f} MiB"


def _write(tmp_path, name, r):
    """What the test saw, for the record: kinds at the peak and at the snapshot."""
    c = r["summary"].categories
    doc = {"peak": r["peak"], "before": r["before"],
           "at_peak": {k: c.at_peak.by_category[k].bytes for k in KINDS},
           "at_snapshot": {k: c.at_snapshot.by_category[k].bytes for k in KINDS},
           "sources": dict(c.sources)}
    (out_dir(tmp_path) / f"categories_{name}.json").write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    pytest.main([__file__, "-q", "-s"])


def test_torch_profiler_writes_a_tagged_snapshot_per_saved_window(tmp_path):
    import torch

    import memsight
    from memsight.torch import Callbacks, TorchProfiler, cyclic_schedule

    model = transformer(layers=2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    prof = TorchProfiler(folder=str(tmp_path / "{run_name}"), remote_file_name=None,
                         schedule=cyclic_schedule(wait=1, warmup=1, active=2, repeat=1),
                         model=model, optimizer=opt)
    with Callbacks(prof, run_name="p") as cbs:
        for _ in range(5):
            cbs.batch_start()
            lm_step(model, opt, set_to_none=True)
            cbs.batch_end()
    (files,) = prof.saved_traces.values()
    snap = [f for f in files if f.endswith(".memory_snapshot.pickle")]
    assert snap and snap[0].startswith(str(tmp_path / "p" / "rank0.4"))
    s = memsight.load(snap[0])
    c = s.summary().devices[torch.cuda.current_device()].categories
    assert c.sources.tags_matched > 0 and c.at_snapshot.by_category.parameter.tagged > 0
    assert not torch._C._cuda_isHistoryEnabled()  # recording followed the profiler's window

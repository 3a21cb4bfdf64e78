"""What the page shows beyond allocations, on a snapshot recorded here and now:
record_function scopes, user metadata, a MemPool and a CUDA graph's private
pools. Checks that torch wrote them where the page reads them and that the
page's data carries them; with MEMSIGHT_GPU_OUT=DIR the snapshot is kept
there, for the comparisons that need a browser or MemoryViz.js (run where
node and Chromium are):

    node bench/memoryviz_compare.mjs DIR/viewer_gpu.pickle
    MEMSIGHT_VIEWER_EXTRA=DIR/viewer_gpu.pickle node --test tests/browser/standalone.test.mjs
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import shutil
import zlib

import pytest


def _record(path):
    import torch

    mem = torch.cuda.memory
    try:
        mem._record_memory_history(max_entries=100_000, compile_context=True)
    except TypeError:  # torch before compile_context
        mem._record_memory_history(max_entries=100_000)
    set_meta = getattr(mem, "_set_memory_metadata", None)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    x = torch.randn(256, 1024, device="cuda")
    if set_meta:
        set_meta("phase=forward")
    with torch.profiler.record_function("## forward ##"):
        y = model(x)
    if set_meta:
        set_meta("phase=backward")
    with torch.profiler.record_function("## backward ##"):
        y.sum().backward()
    if set_meta:
        set_meta("")
    keep = []
    if hasattr(torch.cuda, "MemPool"):
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            keep.append(torch.empty(8 << 20, dtype=torch.uint8, device="cuda"))
        keep.append(pool)
    # A CUDA graph captured without a pool gets its own private pool.
    static_x = torch.randn(64, 1024, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(2):
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_y = model(static_x)
    graph.replay()
    keep += [graph, static_y]
    torch.cuda.synchronize()
    mem._dump_snapshot(str(path))
    mem._record_memory_history(enabled=None)
    return keep


def _page_header(html: str) -> dict:
    payload = re.search(r'data-encoding="deflate"[^>]*>([^<]*)<', html).group(1)
    raw = b"".join(zlib.decompress(base64.b64decode(p)) for p in payload.strip().split("."))
    return json.loads(raw[8:8 + int.from_bytes(raw[4:8], "little")])


def test_annotations_pools_and_metadata_reach_the_page(tmp_path):
    import torch

    import memsight

    path = tmp_path / "viewer_gpu.pickle"
    keep = _record(path)
    with open(path, "rb") as f:
        snap = pickle.load(f)
    names = {a["name"] for a in snap.get("external_annotations", []) if a.get("stage") == "START"}
    assert {"## forward ##", "## backward ##"} <= names, names
    pools = {tuple(s["segment_pool_id"]) for s in snap["segments"]}
    graph_pools = {p for p in pools if p[0] and not p[1]}
    assert graph_pools, f"no CUDA graph pool among {pools}"
    if hasattr(torch.cuda, "MemPool"):
        assert any(not p[0] and p[1] for p in pools), f"no MemPool among {pools}"
    metas = {e.get("user_metadata") for e in snap["device_traces"][torch.cuda.current_device()]}
    if hasattr(torch.cuda.memory, "_set_memory_metadata"):
        assert {"phase=forward", "phase=backward"} <= metas, metas

    page = memsight.load(path).html("pools")
    head = _page_header(page)
    meta = head["meta"]
    assert meta["view"] == "pools"
    dev = next(d for d in meta["devices"] if d["index"] == torch.cuda.current_device())
    # A range for every START of this device (and any END without one).
    starts = sum(1 for a in snap["external_annotations"]
                 if a.get("stage") == "START" and a.get("device") == dev["index"])
    assert dev["annotations"] >= starts >= 2
    # Packed devices' columns are concatenated as "dev.NAME", each device's
    # length in "dev.len.NAME".
    for col in ("an.name", "an.start", "an.end", "seg.pool0", "seg.pool1"):
        assert {f"dev.{col}", f"dev.len.{col}"} <= head["columns"].keys(), col
    out = os.environ.get("MEMSIGHT_GPU_OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        shutil.copy(path, os.path.join(out, path.name))
        print(f"kept {os.path.join(out, path.name)}: {len(snap['external_annotations'])} annotations, "
              f"pools {sorted(pools)}")
    del keep

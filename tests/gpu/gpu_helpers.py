"""A small model and checks shared by the GPU tests and the torchrun job."""

from __future__ import annotations

import html.parser
import os
import pickle
import xml.etree.ElementTree as ET

SUFFIXES = ["_snapshot.pickle", "_trace_plot.html", "_segment_plot.html",
            "_segment_flamegraph.svg", "_memory_flamegraph.svg", "_oom_diagnosis.txt"]


def make_model(width: int = 1024, depth: int = 4):
    import torch

    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, opt


def train_step(model, opt, batch: int = 64, width: int = 1024):
    import torch

    x = torch.randn(batch, width, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def oom_step(model, width: int = 1024):
    """A training step whose activations cannot fit: raises torch.cuda.OutOfMemoryError."""
    import torch

    rows = (1 << 41) // (4 * width)  # ~2 TiB of float32 input
    x = torch.empty(rows, width, device="cuda")
    return model(x)


class _Tags(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.srcs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href") and v and "://" in v:
                self.srcs.append(v)


def check_oom_outputs(prefix: str) -> dict:
    """Each of the six files exists and opens; returns the snapshot dict."""
    import memsight

    missing = [prefix + s for s in SUFFIXES if not os.path.isfile(prefix + s)]
    assert not missing, f"missing outputs: {missing}"
    with open(prefix + "_snapshot.pickle", "rb") as f:
        snap = pickle.load(f)
    assert any(e["action"] == "oom" for t in snap["device_traces"] for e in t), "no oom entry in the trace"
    ms = memsight.load(prefix + "_snapshot.pickle")
    assert ms.trace_entry_count == sum(len(t) for t in snap["device_traces"]) > 0
    for kind in ("segment", "memory"):
        assert ET.parse(prefix + f"_{kind}_flamegraph.svg").getroot().tag.endswith("svg")
    for kind in ("trace", "segment"):
        with open(prefix + f"_{kind}_plot.html", encoding="utf-8") as f:
            page = f.read()
        p = _Tags()
        p.feed(page)
        p.close()
        assert "html" in p.tags and "script" in p.tags
        assert not p.srcs, f"the page loads from the network: {p.srcs}"
    with open(prefix + "_oom_diagnosis.txt", encoding="utf-8") as f:
        text = f.read()
    assert text.startswith("CUDA out of memory") and "engine's diagnosis is unavailable" not in text
    return snap


def finish_rank(out: str, result: dict) -> None:
    """A torchrun job's last words: OUT/result{rank}.json, then leave the group together."""
    import json

    import torch.distributed as dist

    with open(os.path.join(out, f"result{result['rank']}.json"), "w") as f:
        json.dump(result, f)
    dist.barrier()
    dist.destroy_process_group()

"""How long an estimate of a 1.1-billion-parameter decoder's step takes, and
how much memory it needs, on this machine with no GPU (issue 36's target:
at most 30 s on the 2-core VM).

    python3 bench/estimate_speed.py [--rounds 3] [--model plain|transformers] [--json OUT]

The model has TinyLlama's shape (22 layers, 2048 wide, MLP 5632, 32 heads of
which 4 key/value heads, vocabulary 32,000: 1.1 billion parameters), AdamW,
bf16 autocast, 4 x 2048 tokens, two steps, as the GPU bench's `llama_1b`.
`plain` builds it in plain torch (RMSNorm, rotary embeddings, grouped-query
attention through scaled_dot_product_attention, SwiGLU), so it runs where
transformers is not installed; `transformers` is LlamaForCausalLM from a
config. Each round is a fresh process (the first estimate of a process
also imports and warms torch's fake tensors): its wall time for
memsight.torch.estimate (the fake step and the allocator simulation) and
the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHAPE = dict(vocab=32000, hidden=2048, intermediate=5632, layers=22, heads=32, kv_heads=4, batch=4, seq=2048)


def plain_decoder() -> Any:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    s = SHAPE
    head = s["hidden"] // s["heads"]

    class RMSNorm(nn.Module):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))

        def forward(self, x: Any) -> Any:
            x32 = x.float()
            return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype) * self.weight

    def rotate(x: Any, cos: Any, sin: Any) -> Any:
        a, b = x.chunk(2, dim=-1)
        return x * cos + torch.cat((-b, a), dim=-1) * sin

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            h, kv = s["hidden"], s["kv_heads"] * head
            self.norm1, self.norm2 = RMSNorm(h), RMSNorm(h)
            self.q, self.k, self.v, self.o = (nn.Linear(h, h, bias=False), nn.Linear(h, kv, bias=False),
                                              nn.Linear(h, kv, bias=False), nn.Linear(h, h, bias=False))
            self.gate = nn.Linear(h, s["intermediate"], bias=False)
            self.up = nn.Linear(h, s["intermediate"], bias=False)
            self.down = nn.Linear(s["intermediate"], h, bias=False)

        def forward(self, x: Any, cos: Any, sin: Any) -> Any:
            b, t, _ = x.shape
            y = self.norm1(x)
            q = self.q(y).view(b, t, s["heads"], head).transpose(1, 2)
            k = self.k(y).view(b, t, s["kv_heads"], head).transpose(1, 2)
            v = self.v(y).view(b, t, s["kv_heads"], head).transpose(1, 2)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            rep = s["heads"] // s["kv_heads"]
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, t, -1))
            y = self.norm2(x)
            return x + self.down(F.silu(self.gate(y)) * self.up(y))

    class Decoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(s["vocab"], s["hidden"])
            self.layers = nn.ModuleList(Layer() for _ in range(s["layers"]))
            self.norm = RMSNorm(s["hidden"])
            self.lm_head = nn.Linear(s["hidden"], s["vocab"], bias=False)

        def forward(self, input_ids: Any, labels: Any) -> Any:
            t = input_ids.shape[1]
            pos = torch.arange(t, device=input_ids.device, dtype=torch.float32)
            inv = 1.0 / (10000 ** (torch.arange(0, head, 2, device=input_ids.device, dtype=torch.float32) / head))
            ang = torch.outer(pos, inv)
            ang = torch.cat((ang, ang), dim=-1)
            cos, sin = ang.cos(), ang.sin()
            x = self.embed(input_ids)
            for layer in self.layers:
                x = layer(x, cos, sin)
            logits = self.lm_head(self.norm(x)).float()
            return F.cross_entropy(logits[:, :-1].reshape(-1, s["vocab"]), labels[:, 1:].reshape(-1))

    return Decoder()


def transformers_decoder() -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    s = SHAPE
    cfg = LlamaConfig(hidden_size=s["hidden"], intermediate_size=s["intermediate"], num_hidden_layers=s["layers"],
                      num_attention_heads=s["heads"], num_key_value_heads=s["kv_heads"], vocab_size=s["vocab"],
                      max_position_embeddings=s["seq"], attn_implementation="sdpa")
    return LlamaForCausalLM(cfg)


def child(model: str) -> dict[str, Any]:
    try:
        import memsight._core  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(ROOT / "python"))
    import torch

    import memsight.torch as mt

    make = plain_decoder if model == "plain" else transformers_decoder

    def inputs(i: int) -> Any:
        ids = torch.randint(0, SHAPE["vocab"], (SHAPE["batch"], SHAPE["seq"]))
        return {"input_ids": ids, "labels": ids}

    def step(m: Any, opt: Any, batch: Any) -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = m(**batch)
        loss = out if isinstance(out, torch.Tensor) else out.loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t0 = time.perf_counter()
    est = mt.estimate(step, make, lambda p: torch.optim.AdamW(p, lr=1e-4), inputs, device_memory="80GiB")
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "peak_allocated": est.peak_allocated, "peak_reserved": est.peak_reserved, "fits": est.fits,
            "torch": torch.__version__, "python": sys.version.split()[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes (default 3)")
    ap.add_argument("--model", choices=["plain", "transformers"], default="plain")
    ap.add_argument("--json", help="write the rounds and medians here")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.model)))
        return 0
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    runs = []
    for r in range(a.rounds):
        p = subprocess.run([sys.executable, __file__, "--child", "--model", a.model], capture_output=True, text=True,
                           env=dict(os.environ))
        if p.returncode != 0:
            print(f"estimate_speed.py: round {r + 1} failed:\n{p.stderr[-3000:]}", file=sys.stderr)
            return 1
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
        print(f"round {r + 1}/{a.rounds}: {runs[-1]['seconds']:.1f} s, peak RSS {runs[-1]['max_rss'] / 2**30:.2f} GiB",
              flush=True)
    med = statistics.median(x["seconds"] for x in runs)
    rss = max(x["max_rss"] for x in runs)
    r0 = runs[0]
    print(f"{a.model} decoder, 1.1B parameters, 4 x 2048 tokens, AdamW, bf16, two steps "
          f"(torch {r0['torch']}, Python {r0['python']}, {os.cpu_count()} cores): "
          f"median {med:.1f} s, peak RSS {rss / 2**30:.2f} GiB; estimate: peak allocated "
          f"{r0['peak_allocated'] / 2**30:.1f} GiB, reserved {r0['peak_reserved'] / 2**30:.1f} GiB")
    if a.json:
        Path(a.json).write_text(json.dumps({"model": a.model, "runs": runs, "median_s": med, "max_rss": rss}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

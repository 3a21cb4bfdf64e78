"""The worked example of docs/estimate.md, as it runs (GPU machine: the
step is estimated under fake tensors, then its synthetic snapshot is read
by `memsight summary`)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
import memsight.torch  # noqa: E402


def make_model():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8,
                      num_key_value_heads=8, vocab_size=16000, attn_implementation="sdpa")
    return LlamaForCausalLM(cfg)


def make_batch(n, step_index):
    ids = torch.randint(0, 16000, (n, 1024), device="cuda")
    return {"input_ids": ids, "labels": ids}


def step(model, optimizer, batch):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def adamw(params):
    return torch.optim.AdamW(params, lr=1e-4)


est = memsight.torch.estimate(step, model=make_model, optimizer=adamw, inputs=lambda i: make_batch(8, i),
                              device_memory="80GiB")
print(est)
est.save(sys.argv[1] if len(sys.argv) > 1 else "llama_step.pickle")
best, tried = memsight.torch.max_batch(make_batch, step, make_model, adamw, device_memory="80GiB")
limit = memsight.torch.fit.api.format_size(tried[0][1].limit)
print(f"largest batch that fits in 80GiB ({limit} for torch's allocator): {best} ({len(tried)} estimates)")

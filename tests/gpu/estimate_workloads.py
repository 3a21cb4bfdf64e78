"""The training steps the estimate is checked on (issue 36): each a model
factory, an optimizer factory, inputs for a batch size and the step, the
same code under fake tensors and on the GPU. Sizes are small enough that
a real run takes seconds on an H200."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class Workload:
    name: str
    model: Callable[[], Any]
    optimizer: Callable[[Any], Any]
    inputs: Callable[[int, int], Any]  # (batch, step index) -> the step's inputs
    step: Callable[[Any, Any, Any], Any]
    batch: int
    # A rank of a job of this many ranks (the model factory takes the device
    # mesh and applies fully_shard); 0: one process, no process group.
    world_size: int = 0


def _llama(checkpointing: bool = False, layers: int = 4, billion: bool = False) -> Callable[[], Any]:
    def make() -> Any:
        from transformers import LlamaConfig, LlamaForCausalLM

        if billion:  # 1.1 billion parameters, as TinyLlama
            cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                              num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                              max_position_embeddings=2048, attn_implementation="sdpa")
        else:
            cfg = LlamaConfig(hidden_size=512, intermediate_size=1536, num_hidden_layers=layers,
                              num_attention_heads=8, num_key_value_heads=8, vocab_size=16000,
                              max_position_embeddings=2048, attn_implementation="sdpa")
        m = LlamaForCausalLM(cfg)
        if checkpointing:
            m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        m.train()
        return m
    return make


def _llama_fsdp2(mesh: Any) -> Any:
    """The Llama of _llama(), each decoder layer and the whole model sharded
    with FSDP2 (fully_shard) over ``mesh``; built on the current device."""
    from torch.distributed.fsdp import fully_shard

    m = _llama()()
    for layer in m.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(m, mesh=mesh)
    return m


def _lm_inputs(seq: Callable[[int], int]) -> Callable[[int, int], Any]:
    def make(batch: int, i: int) -> Any:
        ids = torch.randint(0, 16000, (batch, seq(i)), device="cuda")
        return {"input_ids": ids, "labels": ids}
    return make


def _lm_step(model: Any, opt: Any, batch: Any) -> None:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(**batch).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _adamw(params: Any) -> Any:
    return torch.optim.AdamW(params, lr=1e-4)


def _sgd(params: Any) -> Any:
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def _image_inputs(size: int, classes: int) -> Callable[[int, int], Any]:
    def make(batch: int, i: int) -> Any:
        return (torch.randn(batch, 3, size, size, device="cuda"), torch.randint(0, classes, (batch,), device="cuda"))
    return make


def _image_step(model: Any, opt: Any, batch: Any) -> None:
    x, y = batch
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _vit() -> Any:
    import torchvision

    return torchvision.models.vit_b_16(weights=None, num_classes=100)


def _resnet50() -> Any:
    import torchvision

    return torchvision.models.resnet50(weights=None, num_classes=100)


# The estimate's speed on a 1-billion-parameter decoder (bench only: not run for real).
LLAMA_1B = Workload("llama_1b", _llama(billion=True), _adamw, _lm_inputs(lambda i: 2048), _lm_step, 4)

WORKLOADS = {
    "llama_adamw_bf16": Workload("llama_adamw_bf16", _llama(), _adamw, _lm_inputs(lambda i: 1024), _lm_step, 8),
    "llama_checkpointing": Workload("llama_checkpointing", _llama(checkpointing=True), _adamw,
                                    _lm_inputs(lambda i: 1024), _lm_step, 8),
    "llama_varlen": Workload("llama_varlen", _llama(), _adamw, _lm_inputs(lambda i: (384, 1024, 640)[i % 3]),
                             _lm_step, 8),
    "vit_b16_sgd": Workload("vit_b16_sgd", _vit, _sgd, _image_inputs(224, 100), _image_step, 32),
    "resnet50_sgd": Workload("resnet50_sgd", _resnet50, _sgd, _image_inputs(224, 100), _image_step, 32),
    "llama_fsdp2_rank": Workload("llama_fsdp2_rank", _llama_fsdp2, _adamw, _lm_inputs(lambda i: 1024), _lm_step, 8,
                                 world_size=2),
}
ALL = {**WORKLOADS, "llama_1b": LLAMA_1B}

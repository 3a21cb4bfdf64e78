"""One workload recorded through memsight's recording, with torch's Python
unwinder or memsight's native one; torch's own _dump_snapshot writes it.

    python3 native_record_job.py MODE WORKLOAD OUT.pickle

MODE: torch (MEMSIGHT_NATIVE_RECORD=0, set by the caller) or native
(memsight.torch.native_record). test_native_record_gpu.py runs each workload
in both modes, each in a fresh process, and compares the snapshots. Prints a
RESULT line with the native recorder's counters.
"""

from __future__ import annotations

import json
import sys

import torch

import memsight.torch as mt
from memsight.torch.capture import _native_record

MODE, WORKLOAD, OUT = sys.argv[1:4]


def mlp_steps(n: int = 3, width: int = 512, batch: int = 128) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(),
                                torch.nn.Linear(2 * width, width)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(n):
        loss = model(torch.randn(batch, width, device="cuda")).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def graph() -> None:
    model = torch.nn.Linear(256, 256).cuda()
    x = torch.randn(64, 256, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            model(x).relu().sum()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = model(x).relu()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    del y


def llama() -> None:
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=688,
                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                                   max_position_embeddings=128)
    model = transformers.LlamaForCausalLM(cfg).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 1000, (4, 128), device="cuda")
    for _ in range(2):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


# workload -> (what runs, recording options)
WORKLOADS = {
    "mlp": (mlp_steps, {}),
    "cpp_stacks": (mlp_steps, {"stacks": "all"}),
    "alloc_context": (mlp_steps, {"context": "alloc"}),
    "wrapped": (mlp_steps, {"max_entries": 300}),
    "cuda_graph": (graph, {}),
    "expandable": (mlp_steps, {}),  # the caller sets PYTORCH_CUDA_ALLOC_CONF
    "llama": (llama, {}),
}


def main() -> None:
    torch.manual_seed(0)
    torch.cuda.init()
    fn, opts = WORKLOADS[WORKLOAD]
    rec = mt.native_record(**opts) if MODE.startswith("native") else mt.record(**opts)
    with rec:
        fn()
        torch.cuda.memory._dump_snapshot(OUT)
        status = _native_record.status()
    print("RESULT " + json.dumps({"mode": MODE, "status": status}), flush=True)


if __name__ == "__main__":
    main()

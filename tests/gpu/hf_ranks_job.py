"""A 2-rank transformers Trainer job under torchrun (run by test_hf_gpu.py):
MemsightCallback on every rank, an OOM at the same step on both; each rank
writes OUT/result{rank}.json with what it saw."""

from __future__ import annotations

import json
import os
import sys

import torch
import transformers

from memsight.torch.hf import MemsightCallback

VOCAB, SEQ = 128, 32


class RandomIds(torch.utils.data.Dataset):
    def __init__(self, n: int = 64) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class OOMTrainer(transformers.Trainer):
    def compute_loss(self, model, inputs, *args, **kwargs):
        if self.state.global_step == 2:
            torch.empty((1 << 41) // 4, device="cuda")  # ~2 TiB on every rank: OOM
        return super().compute_loss(model, inputs, *args, **kwargs)


def main(out: str) -> None:
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                                      max_position_embeddings=SEQ)
    model = transformers.LlamaForCausalLM(config)
    args = transformers.TrainingArguments(
        output_dir=os.path.join(out, "trainer"), max_steps=5, per_device_train_batch_size=8, logging_steps=1,
        report_to=[], save_strategy="no", disable_tqdm=True, learning_rate=1e-3)
    cb = MemsightCallback(folder=os.path.join(out, "ms"), run_name="hf-ranks")
    trainer = OOMTrainer(model=model, args=args, train_dataset=RandomIds(), callbacks=[cb])
    rank = int(os.environ.get("RANK", "0"))
    raised = False
    try:
        trainer.train()
    except torch.cuda.OutOfMemoryError:
        raised = True
    cb.close()
    with open(os.path.join(out, f"result{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world_size": int(os.environ.get("WORLD_SIZE", "1")), "oom_raised": raised,
                   "history_off": not torch._C._cuda_isHistoryEnabled()}, f)


if __name__ == "__main__":
    main(sys.argv[1])

"""MemsightCallback in real transformers Trainer.train() runs: one that ends
(metrics in the logged history, snapshots with step marks), one that dies of
OOM (every OOM file, and the job's exception reaches the caller)."""

from __future__ import annotations

import os

import pytest

from gpu_helpers import check_oom_outputs

VOCAB, SEQ = 128, 32


def _model():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                                      max_position_embeddings=SEQ)
    return transformers, transformers.LlamaForCausalLM(config)


class _RandomIds:
    """A tiny dataset of random token ids (labels = inputs, as causal LM training takes them)."""

    def __init__(self, n: int = 64):
        import torch

        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, VOCAB, (n, SEQ), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _args(transformers, tmp_path, steps):
    return transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=steps, per_device_train_batch_size=8, logging_steps=1,
        report_to=[], save_strategy="no", disable_tqdm=True, learning_rate=1e-3)


def test_metrics_in_the_logged_history_and_snapshots_with_steps(tmp_path):
    import torch

    import memsight
    transformers, model = _model()
    from memsight.torch.hf import MemsightCallback

    cb = MemsightCallback(folder=str(tmp_path / "ms"), snapshot_steps=[6], run_name="hf")
    assert isinstance(cb, transformers.TrainerCallback)
    trainer = transformers.Trainer(model=model, args=_args(transformers, tmp_path, 6), train_dataset=_RandomIds(),
                                   callbacks=[cb])
    trainer.train()
    train_logs = [e for e in trainer.state.log_history if "loss" in e]
    assert len(train_logs) == 6
    last = train_logs[-1]
    for name in ("current_allocated_mem", "peak_allocated_mem", "current_reserved_mem", "peak_reserved_mem",
                 "alloc_retries", "parameter_mem", "gradient_mem", "optimizer_state_mem", "buffer_mem", "other_mem"):
        assert f"memory/{name}" in last, (name, last)
    assert last["memory/parameter_mem"] > 0 and last["memory/optimizer_state_mem"] > 0
    assert last["memory/current_allocated_mem"] >= last["memory/parameter_mem"]
    assert cb.oom.enabled and not cb.oom.armed  # armed for the run, closed at its end
    assert sorted(os.listdir(tmp_path / "ms")) == ["rank0_step6.pickle"]
    snap = memsight.load(tmp_path / "ms" / "rank0_step6.pickle")
    assert snap.trace_entry_count > 0
    assert snap.leaks()["devices"][0]["iterations"]["source"] == "memsight steps"
    assert not torch._C._cuda_isHistoryEnabled()


def test_an_oom_inside_training_writes_every_file_and_reaches_the_caller(tmp_path):
    import torch

    transformers, model = _model()
    from memsight.torch.hf import MemsightCallback

    class OOMTrainer(transformers.Trainer):
        def compute_loss(self, model, inputs, *args, **kwargs):
            if self.state.global_step == 2:
                torch.empty((1 << 41) // 4, device="cuda")  # ~2 TiB: OOM
            return super().compute_loss(model, inputs, *args, **kwargs)

    cb = MemsightCallback(folder=str(tmp_path / "ms"), run_name="hf-oom")
    trainer = OOMTrainer(model=model, args=_args(transformers, tmp_path, 5), train_dataset=_RandomIds(),
                         callbacks=[cb])
    with pytest.raises(torch.cuda.OutOfMemoryError):
        trainer.train()
    snap = check_oom_outputs(str(tmp_path / "ms" / "rank0_oom"))
    names = {t["name"] for t in snap["memsight_tags"]["storages"]}
    assert any(n.endswith("embed_tokens.weight") for n in names)
    assert any(n.startswith("optimizer.state[") for n in names)
    with open(tmp_path / "ms" / "rank0_oom_oom_diagnosis.txt") as f:
        assert "By kind: " in f.read()
    cb.close()
    assert not torch._C._cuda_isHistoryEnabled()


def test_an_oom_on_every_rank_of_a_torchrun_trainer_job_writes_every_rank_s_files(tmp_path):
    """Two ranks under torchrun (the Trainer runs DDP): each rank's OOM files,
    and each rank's own OutOfMemoryError reaches its caller."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    import torch

    pytest.importorskip("transformers")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    import memsight

    env = dict(os.environ, NCCL_NVLS_ENABLE="0")
    env["PYTHONPATH"] = str(Path(memsight.__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    job = Path(__file__).with_name("hf_ranks_job.py")
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(job), str(tmp_path)], env=env, capture_output=True, text=True, timeout=420)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = [json.loads((tmp_path / f"result{r}.json").read_text()) for r in (0, 1)]
    assert all(r["oom_raised"] and r["world_size"] == 2 and r["history_off"] for r in results), results
    for r in (0, 1):
        snap = check_oom_outputs(str(tmp_path / "ms" / f"rank{r}_oom"))
        assert snap["memsight_tags"]["storages"], f"rank {r}: no kinds tagged"

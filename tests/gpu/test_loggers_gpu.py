"""Memory metrics reach a real TensorBoard event file (issue 35, item 7):
MemoryMonitor on a GPU loop writes through torch.utils.tensorboard's
SummaryWriter, and TensorBoard's own reader finds every metric at every
step, with torch's values (gigabytes, as docs/python.md says)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tensorboard")
if not torch.cuda.is_available():
    pytest.skip("needs CUDA", allow_module_level=True)

from memsight.torch import Callbacks, MemoryMonitor  # noqa: E402


def test_monitor_metrics_are_in_the_tensorboard_event_file(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "tb"))
    keep = []
    peaks = []
    with Callbacks(MemoryMonitor(tensorboard=writer), run_name="tb") as runner:
        for _ in range(3):
            runner.batch_start()
            keep.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
            runner.batch_end()
            peaks.append(torch.cuda.max_memory_allocated())
    writer.close()
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    print("TensorBoard scalars:", sorted(tags))
    for name in ("memory/current_allocated_mem", "memory/peak_allocated_mem", "memory/peak_reserved_mem",
                 "memory/alloc_retries"):
        assert name in tags, name
    got = [(e.step, e.value) for e in acc.Scalars("memory/peak_allocated_mem")]
    assert [s for s, _ in got] == [1, 2, 3]
    for (_, value), peak in zip(got, peaks):
        assert value == pytest.approx(peak / 1e9, abs=1e-3)

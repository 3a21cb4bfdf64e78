"""MemoryMonitor's metrics: Composer's names, decimal GB, 5 significant digits."""

from __future__ import annotations

import pytest

from memsight.torch import MEMORY_KEYS, Callbacks, MemoryMonitor, memory_report
from memsight.torch.callbacks.memory_monitor import reduce_values, to_gigabytes


@pytest.mark.parametrize("n, gb", [(0, 0), (1_234_567_890, 1.2346), (123_456, 0.00012346),
                                   (98_765_432_100_000, 98765.0), (-2_500_000_000, -2.5)])
def test_to_gigabytes_keeps_five_significant_digits(n, gb):
    assert to_gigabytes(n) == gb


def test_report_from_flat_stats_uses_composer_names():
    flat = {k: 10**9 for k in MEMORY_KEYS if "bytes" in k}
    flat["num_alloc_retries"] = 3
    flat["unrelated.key"] = 1
    report = memory_report(stats=flat)
    assert set(report) == set(MEMORY_KEYS.values())
    assert report["peak_reserved_mem"] == 1.0 and report["alloc_retries"] == 3


def test_custom_keys_rename_bytes_to_gigabytes():
    stats = {"requested_bytes": {"all": {"current": 5 * 10**9}}, "num_ooms": 1}
    report = memory_report({"requested_bytes.all.current": "requested_bytes", "num_ooms": "ooms",
                            "missing.key": "missing"}, stats=stats)
    assert report == {"requested_gigabytes": 5.0, "ooms": 1}


def test_monitor_logs_every_batch(fake_torch):
    logged = []
    mon = MemoryMonitor(log_fn=lambda metrics, batch: logged.append((batch, metrics)))
    with Callbacks(mon, run_name="r") as runner:
        for _ in range(3):
            runner.batch_start()
            runner.batch_end()
    assert [b for b, _ in logged] == [1, 2, 3] and len(mon.history) == 3
    m = logged[0][1]
    assert m["memory/current_allocated_mem"] == 1.2346
    assert m["memory/peak_reserved_mem"] == 4.0 and m["memory/alloc_retries"] == 2
    assert fake_torch.enabled is None and fake_torch.calls == []  # never touches recording


def test_aggregation_interval_and_reduce_ops(fake_torch):
    mon = MemoryMonitor(dist_aggregate_batch_interval=2)
    with Callbacks(mon, run_name="r") as runner:
        for _ in range(2):
            runner.batch_start()
            runner.batch_end()
    first, second = mon.history[0][1], mon.history[1][1]
    assert "memory/peak_allocated_mem_max" not in first
    # Not distributed: avg/min/max of one rank are the value itself.
    assert second["memory/peak_allocated_mem_max"] == second["memory/peak_allocated_mem"] == 2.0
    with pytest.raises(ValueError, match="reduce_op"):
        reduce_values([1.0], "median")
    with pytest.raises(ValueError):
        MemoryMonitor(dist_aggregate_batch_interval=0)

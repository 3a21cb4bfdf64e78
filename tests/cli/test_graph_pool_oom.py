"""Free memory inside a CUDA graph's private pool at an OOM and in diff
(issue 33, item 9 "CUDA graph pools ... kept out of fragmentation"), and
the OOM diagnosis naming who held the live memory ("Who holds it"). The
recording is built here: its truth is known by construction."""

from __future__ import annotations

import json
import pickle

MiB = 1 << 20
SEG = 0x7F0000000000  # the default pool's segment, allocated while recording
POOL = 0x7F8000000000  # a graph's private pool, from before the recording


def graph_pool_oom(holders: bool = False) -> dict:
    """20 MiB of the default pool, 18 MiB of it live; a 32 MiB private pool
    (1, 0) with 8 MiB live, 8 free, 8 live, 8 free; then a 12 MiB request
    fails. Outside the graph pool 2 MiB is free: true demand. Counted with
    the pool's 16 MiB it would look like 18 MiB in 8 MiB pieces."""
    trace = []

    def e(action, addr, size, **kw):
        trace.append({"action": action, "addr": addr, "size": size, "stream": 0,
                      "time_us": len(trace), "frames": [], **kw})

    e("segment_alloc", SEG, 20 * MiB)
    e("alloc", SEG, 18 * MiB)
    trace.append({"action": "oom", "device_free": 0, "size": 12 * MiB, "stream": 0,
                  "time_us": len(trace), "frames": []})

    def block(addr, size, live):
        return {"address": addr, "size": size, "requested_size": size if live else 0,
                "state": "active_allocated" if live else "inactive", "frames": []}

    def segment(addr, total, live, pool, blocks):
        return {"device": 0, "address": addr, "total_size": total, "allocated_size": live,
                "active_size": live, "requested_size": live, "stream": 0, "segment_type": "large",
                "segment_pool_id": pool, "is_expandable": False, "frames": [], "blocks": blocks}

    segments = [segment(SEG, 20 * MiB, 18 * MiB, (0, 0), [block(SEG, 18 * MiB, True),
                                                        block(SEG + 18 * MiB, 2 * MiB, False)]),
                segment(POOL, 32 * MiB, 16 * MiB, (1, 0),
                        [block(POOL + i * 8 * MiB, 8 * MiB, i % 2 == 0) for i in range(4)])]
    snap = {"segments": segments, "device_traces": [trace], "allocator_settings": {}}
    if holders:
        where = {"module": "__main__", "file": "/work/project/train.py", "line": 30}
        snap["memsight_holders"] = {
            "version": 1, "elapsed_ms": 1.0, "complete": True, "tensors": 3,
            "holders": [{"path": "__main__.model.layers.3.cache", "type": "dict", **where},
                        {"path": "__main__.graph_out", "type": "list", **where}],
            "storages": [{"device": 0, "addr": SEG, "size": 18 * MiB, "holder": 0,
                          "path": "__main__.model.layers.3.cache[7]"}] +
                        [{"device": 0, "addr": POOL + i * 16 * MiB, "size": 8 * MiB, "holder": 1,
                          "path": f"__main__.graph_out[{i}]"} for i in range(2)]}
    return snap


def write(tmp_path, snap):
    f = tmp_path / "graph_oom.pickle"
    f.write_bytes(pickle.dumps(snap, protocol=4))
    return f


def test_the_oom_diagnosis_keeps_graph_pools_out_of_the_cache(run, tmp_path):
    f = write(tmp_path, graph_pool_oom())
    r = run("summary", f, "--json")
    assert r.returncode == 0, r.stderr
    (oom,) = json.loads(r.stdout)["devices"][0]["ooms"]
    assert oom["verdict"] == "demand", oom["explanation"]
    assert (oom["cached_free"], oom["graph_pool_free"]) == (2 * MiB, 16 * MiB)
    assert (oom["largest_free"], oom["largest_free_in_pool"]) == (2 * MiB, 2 * MiB)
    assert "held_by" not in oom
    flat = " ".join(run("summary", f).stdout.decode().split())
    assert "16.0MiB more free inside CUDA graphs' private pools, which only their graphs use" in flat
    assert "Fragmentation:" not in flat


def test_diff_keeps_graph_pools_out_of_free_and_fragmentation(run, tmp_path):
    f = write(tmp_path, graph_pool_oom())
    r = run("diff", f, "--at", "-1", "--at", "oom", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    before, after = d["before"], d["after"]
    # before the recording only the graph pool exists: none of its free is the cache
    assert (before["free"], before["largest_free"], before["graph_pool_free"]) == (0, 0, 16 * MiB)
    assert (after["free"], after["free_blocks"], after["largest_free"]) == (2 * MiB, 1, 2 * MiB)
    assert (after["fragmentation"], after["graph_pool_free"]) == (0, 16 * MiB)
    text = run("diff", f, "--at", "-1", "--at", "oom").stdout.decode()
    rows = {line.split("  ")[1].strip(): line.split()[-3:] for line in text.splitlines()[4:11]}
    assert rows["fragmentation"] == ["0.0%", "0.0%", "0"]
    assert rows["graph pools free"] == ["16.0MiB", "16.0MiB", "0"]


def test_the_oom_diagnosis_names_who_held_the_most(run, tmp_path):
    f = write(tmp_path, graph_pool_oom(holders=True))
    (oom,) = json.loads(run("summary", f, "--json").stdout)["devices"][0]["ooms"]
    held = oom["held_by"]
    assert (held["path"], held["type"], held["blocks"], held["bytes"]) == \
        ("__main__.model.layers.3.cache", "dict", 1, 18 * MiB)
    flat = " ".join(run("summary", f).stdout.decode().split())
    assert ("The most live memory then was held by the dict `model.layers.3.cache` (train.py, `__main__`): "
            "1 block, 18.0MiB (named by memsight.torch at the dump).") in flat

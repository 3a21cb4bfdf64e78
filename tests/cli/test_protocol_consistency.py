"""The same data reads the same at every pickle protocol, in every command."""
from __future__ import annotations

import pickle

import pytest

ENTRY = {"action": "alloc", "addr": 1, "size": 2, "stream": 0, "time_us": 1, "frames": []}


@pytest.mark.parametrize("n", [1, 3000])
@pytest.mark.parametrize("stray", [7, None, [1], "x"])
def test_non_dict_trace_entry_is_refused_at_every_protocol(run, tmp_path, n, stray):
    results = set()
    for protocol in (2, 3, 4, 5):
        trace = [dict(ENTRY) for _ in range(n)] + [stray]
        f = tmp_path / f"p{protocol}.pickle"
        f.write_bytes(pickle.dumps({"segments": [], "device_traces": [trace]}, protocol=protocol))
        for cmd in ("stats", "trace"):
            r = run(cmd, f)
            results.add((cmd, r.returncode, r.stderr.decode().split(": ", 2)[-1]))
    assert len(results) == 2, results  # one outcome per command, whatever the protocol
    assert all(rc == 2 and f"device_traces[0][{n}]" in err for _, rc, err in results), results

"""The model keeps what torch wrote: unknown keys, legacy layouts, odd values,
and prints entries it has no line for exactly as Python's repr() would."""
import pathlib
import pickle

import pytest

FRAME = {"name": "f", "filename": "/x/a.py", "line": 3}
FX_FRAME = {"name": "g", "filename": "/x/b.py", "line": 4, "fx_node_op": "call_function",
            "fx_node_name": "add", "fx_node_target": "aten.add", "fx_original_trace": "x + y"}


def entry(action, addr=1 << 40, size=512, **extra):
    e = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": 1795278914825349,
         "compile_context": "N/A", "user_metadata": "", "frames": [FRAME]}
    e.update(extra)
    return e


def rich_snapshot(with_bytes=True):
    block = {"address": 1 << 40, "size": 1024, "requested_size": 1000, "state": "active_allocated",
             "frames": [FRAME, FX_FRAME], "forward_frames": ["  File x, line 1\n"]}
    seg = {"device": 0, "address": 1 << 40, "total_size": 2097152, "allocated_size": 1024,
           "active_size": 1024, "requested_size": 1000, "stream": 0, "segment_type": "small",
           "segment_pool_id": (0, 0), "is_expandable": True, "frames": [],
           "blocks": [block, {"address": (1 << 40) + 1024, "size": 2096128, "requested_size": 0,
                              "state": "inactive", "frames": []}],
           "registration_counter": 7}
    odd = {"q'uote": 'd"q', "tab\t": "ünï\u2028\x01", "f": [1.5, 1e16, 1e-05, -0.0, float("inf")],
           "t": (1,), "n": None, "big": 1 << 70, "neg": -(1 << 65)}
    if with_bytes:  # protocol 2 pickles bytes through a GLOBAL, which memsight refuses
        odd["b"] = b"\x00'"
    return {
        "segments": [seg],
        "device_traces": [[
            entry("segment_alloc", size=2097152),
            entry("alloc", size=1000),
            entry("segment_map", size=2097152, pool_id=(1, 2)),
            entry("snapshot", addr=0, size=1000),
            entry("annotate", user_metadata="step 3", odd=odd),
            {"action": "oom", "device_free": 123, "size": 4096, "stream": 0, "time_us": 5,
             "compile_context": "N/A", "user_metadata": ""},
            entry("user_defined", frames=[{"name": "START", "filename": "fwd", "line": 0}]),
        ], []],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                               "max_split_size": -1, "garbage_collection_threshold": 0.0,
                               "roundup_power2_divisions": {"1": 0}},
        "external_annotations": [{"stage": "START", "name": "fwd", "device": 0, "time_us": 1}],
        "host_segments": [], "host_traces": [[]], "something_new": {"x": [1, 2]},
    }


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_roundtrip_keeps_everything(run, tmp_path, protocol):
    snap = rich_snapshot(with_bytes=protocol >= 3)
    src = tmp_path / "in.pickle"
    src.write_bytes(pickle.dumps(snap, protocol=protocol))
    out = tmp_path / "out.pickle"
    r = run("convert", src, "-o", out)
    assert r.returncode == 0, r.stderr
    back = pickle.load(open(out, "rb"))
    assert back == snap
    # Key order too: it decides repr() and torch's trace text.
    assert [list(e) for e in back["device_traces"][0]] == [list(e) for e in snap["device_traces"][0]]
    assert list(back) == list(snap)
    assert list(back["segments"][0]) == list(snap["segments"][0])


def test_trace_prints_python_repr_for_other_actions(run, tmp_path):
    snap = rich_snapshot()
    src = tmp_path / "in.pickle"
    src.write_bytes(pickle.dumps(snap, protocol=4))
    r = run("trace", src)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.decode("utf-8").split("\n")
    for e in snap["device_traces"][0]:
        if e["action"] in ("segment_map", "snapshot", "annotate", "user_defined"):
            assert repr(e) in lines, repr(e)
    assert "raise OutOfMemoryError # 4.0KiB requested, 123.0B free in CUDA" in lines


def test_legacy_formats(run, tmp_path):
    # torch 2.0 blocks (history, no address) and a bare list of segments.
    seg = {"device": 0, "address": 4096, "total_size": 2048, "allocated_size": 1024,
           "active_size": 1024, "stream": 0, "segment_type": "small",
           "blocks": [{"size": 1024, "requested_size": 1000, "state": "active_allocated",
                       "history": [{"addr": 4096, "real_size": 1000, "frames": [FRAME]}]},
                      {"size": 1024, "requested_size": 0, "state": "inactive"}]}
    f = tmp_path / "legacy.pickle"
    f.write_bytes(pickle.dumps([seg], protocol=4))
    r = run("memory", f, "-o", "-")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == ("stream_0;active_allocated;a.py:3:f 1000\n"
                                 "stream_0;active_allocated;<gaps> 24\n"
                                 "stream_0;inactive;<non-python> 0\n"
                                 "stream_0;inactive;<gaps> 1024\n")
    out = tmp_path / "back.pickle"
    assert run("convert", f, "-o", out).returncode == 0
    assert pickle.load(open(out, "rb")) == [seg]

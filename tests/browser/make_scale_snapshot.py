"""Writes a snapshot for the scale tests. Stdlib only.

usage: make_scale_snapshot.py devices DST COUNT   COUNT devices, one allocation each
       make_scale_snapshot.py names DST LENGTH    one allocation whose frame is named
                                                  "fn_" + LENGTH x's
"""
import pickle
import sys

kind, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
frames = [{"name": "step", "filename": "train.py", "line": 9}]
if kind == "devices":
    # one allocation per device, every seventh device a second one: the busiest
    alloc = {"action": "alloc", "addr": 1 << 20, "size": 512, "stream": 0, "frames": frames, "time_us": 1}
    snap = {"segments": [], "device_traces": [[alloc] * (1 + (d % 7 == 0)) for d in range(n)]}
else:
    frames = [{"name": "fn_" + "x" * n, "filename": "model.py", "line": 3}] + frames
    snap = {"segments": [], "device_traces": [[
        {"action": "alloc", "addr": 1 << 20, "size": 512, "stream": 0, "frames": frames, "time_us": 1}]]}
with open(dst, "wb") as f:
    pickle.dump(snap, f, protocol=4)

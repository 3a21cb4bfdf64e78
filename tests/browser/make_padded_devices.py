"""Writes a snapshot whose one device (a fixture's device 0) sits at index AT
among COUNT devices, every other one an empty device trace: the page must
pack only the device with data. Stdlib only.

usage: make_padded_devices.py SRC DST COUNT AT
"""
import pickle
import sys

src, dst, count, at = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with open(src, "rb") as f:
    snap = pickle.load(f)
traces = [[] for _ in range(count)]
traces[at] = snap["device_traces"][0]
snap["device_traces"] = traces
snap["segments"] = [dict(seg, device=at) for seg in snap["segments"]]
with open(dst, "wb") as f:
    pickle.dump(snap, f, protocol=4)

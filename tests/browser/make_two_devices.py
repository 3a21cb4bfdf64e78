"""Writes a two-device snapshot made of one fixture twice (device 1's
addresses shifted by 2**44), for the device selector test. Stdlib only."""
import pickle
import sys

src, dst = sys.argv[1], sys.argv[2]
with open(src, "rb") as f:
    snap = pickle.load(f)
SHIFT = 1 << 44
trace = snap["device_traces"][0]
second = [dict(e, addr=e["addr"] + SHIFT) if e.get("action") != "oom" else dict(e) for e in trace[: len(trace) // 2]]
segments = list(snap["segments"])
for seg in snap["segments"]:
    s2 = dict(seg, device=1, address=seg["address"] + SHIFT)
    s2["blocks"] = [dict(b, address=b["address"] + SHIFT) for b in seg["blocks"]]
    segments.append(s2)
snap["segments"] = segments
snap["device_traces"] = [trace, second]
with open(dst, "wb") as f:
    pickle.dump(snap, f, protocol=4)

"""Writes synthetic_annotated.pickle.gz: a small snapshot, shaped as torch
2.11 writes them, with what the page shows beyond the allocations and that
the recorded fixtures lack or hold little of:

- record_function scopes in `external_annotations`: nested ones, one whose
  START was before the recording, one still open at the snapshot, one of
  another device, and an older-style `user_defined` trace entry;
- `user_metadata` and `compile_context` on trace entries, and a frame with
  torch.fx annotations;
- a MemPool (private pool (0, 7)) next to the default pool, on two streams;
- a ghost block: live in the snapshot's segments, absent from the trace;
- `allocator_settings` with the newest keys (trace_alloc_max_entries,
  trace_alloc_overflowed).

    python3 tests/data/make_annotated.py
"""
import gzip
import pathlib
import pickle

MB = 1 << 20
T0 = 1_795_000_000_000_000
SIDE = 94_000_000  # a side stream's cudaStream_t

user_frame = {"name": "forward", "filename": "/work/model.py", "line": 42}
loss_frame = {"name": "loss", "filename": "/work/model.py", "line": 57}
fx_frame = {"name": "forward", "filename": "/tmp/torchinductor/fx_graph_code.py", "line": 9,
            "fx_node_op": "call_function", "fx_node_name": "mm_1",
            "fx_node_target": "aten.mm.default",
            "fx_original_trace": "y = self.proj(x)\n    return y.relu()"}
main_frame = {"name": "<module>", "filename": "/work/train.py", "line": 12}
fwd_stack = [user_frame, main_frame]
loss_stack = [loss_frame, main_frame]
fx_stack = [fx_frame, user_frame, main_frame]

A = 0x7F0000000000  # default pool, stream 0: 20 MiB
P = 0x7F0002000000  # MemPool (0, 7), stream 0: 2 MiB
S = 0x7F0004000000  # default pool, side stream: 2 MiB
G = 0x7F0006000000  # default pool, stream 0, from before the recording: 2 MiB

trace = []
clock = [T0]


def ev(action, addr, size, stream=0, meta="", ctx="N/A", frames=None, key="addr"):
    clock[0] += 1000
    e = {"action": action, key: addr, "size": size, "stream": stream, "time_us": clock[0],
         "compile_context": ctx, "user_metadata": meta}
    if frames is not None:
        e["frames"] = frames
    trace.append(e)
    return clock[0]


def free(addr, size, stream=0, meta=""):
    ev("free_requested", addr, size, stream, meta, frames=fwd_stack)
    ev("free_completed", addr, size, stream, meta, frames=fwd_stack)


t_start = ev("segment_alloc", A, 20 * MB, frames=fwd_stack)
ev("alloc", A, 4 * MB, meta="phase=forward", frames=fwd_stack)
ev("alloc", A + 4 * MB, 2 * MB, meta="phase=forward", ctx="Torch-Compiled Region: 0/0",
   frames=fx_stack)
t_fwd_start = clock[0] + 1
ev("segment_alloc", P, 2 * MB, meta="phase=forward", frames=fwd_stack)
ev("alloc", P, 512 * 1024, meta="phase=forward", frames=fwd_stack)
ev("alloc", P + 512 * 1024, 256 * 1024, meta="phase=forward", frames=fwd_stack)
t_fwd_end = clock[0] + 1
ev("segment_alloc", S, 2 * MB, stream=SIDE, meta="phase=backward", frames=loss_stack)
ev("alloc", S, 1 * MB, stream=SIDE, meta="phase=backward", frames=loss_stack)
# The old style of annotation: a trace entry of its own.
ev("user_defined", 0, 0, frames=[{"name": "START", "filename": "legacy_scope", "line": 0}])
free(A + 4 * MB, 2 * MB, meta="phase=backward")
free(P + 512 * 1024, 256 * 1024, meta="phase=backward")
ev("alloc", A + 4 * MB, 3 * MB, meta="phase=optimizer", frames=loss_stack)
ev("user_defined", 0, 0, frames=[{"name": "END", "filename": "legacy_scope", "line": 0}])
free(S, 1 * MB, stream=SIDE, meta="phase=optimizer")
t_last = ev("alloc", S, 768 * 1024, stream=SIDE, meta="phase=optimizer", frames=loss_stack)


def seg(addr, total, stream, pool, blocks, frames, kind="large"):
    allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    requested = sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated")
    s = {"device": 0, "address": addr, "total_size": total, "allocated_size": allocated,
         "active_size": allocated, "requested_size": requested, "stream": stream,
         "segment_type": kind, "segment_pool_id": pool, "is_expandable": False,
         "frames": frames, "blocks": blocks}
    return s


def blk(addr, size, requested, state, frames):
    return {"address": addr, "size": size, "requested_size": requested, "state": state,
            "frames": frames}


segments = [
    seg(A, 20 * MB, 0, (0, 0), [
        blk(A, 4 * MB, 4 * MB, "active_allocated", fwd_stack),
        blk(A + 4 * MB, 4 * MB, 3 * MB, "active_allocated", loss_stack),
        blk(A + 8 * MB, 12 * MB, 0, "inactive", [])], fwd_stack),
    seg(P, 2 * MB, 0, (0, 7), [
        blk(P, 512 * 1024, 512 * 1024, "active_allocated", fwd_stack),
        blk(P + 512 * 1024, 1536 * 1024, 256 * 1024, "inactive", [])], fwd_stack, "small"),
    seg(S, 2 * MB, SIDE, (0, 0), [
        blk(S, 768 * 1024, 768 * 1024, "active_allocated", loss_stack),
        blk(S + 768 * 1024, 1280 * 1024, 1024 * 1024, "inactive", [])], loss_stack, "small"),
    # Allocated before recording began: a ghost block.
    seg(G, 2 * MB, 0, (0, 0), [
        blk(G, 1 * MB, 1 * MB, "active_allocated", []),
        blk(G + 1 * MB, 1 * MB, 0, "inactive", [])], [], "small"),
]


def ann(stage, name, t, device=0):
    return {"stage": stage, "name": name, "device": device, "time_us": t}


annotations = [
    ann("END", "ProfilerStep#0", t_start + 500),  # began before the recording
    ann("START", "ProfilerStep#1", t_start + 600),
    ann("START", "## forward ##", t_fwd_start),
    ann("START", "## forward ##", t_fwd_start + 10),  # the same name, nested
    ann("END", "## forward ##", t_fwd_end - 10),
    ann("END", "## forward ##", t_fwd_end),
    ann("START", "ProfilerStep#1", T0, device=1),  # another device
    ann("END", "ProfilerStep#1", t_last - 500),
    ann("START", "ProfilerStep#2", t_last - 400),  # still open at the snapshot
]

settings = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:256,garbage_collection_threshold:0.8",
            "max_split_size": 256 * MB, "garbage_collection_threshold": 0.8,
            "expandable_segments": False, "pinned_num_register_threads": 1,
            "release_lock_on_cudamalloc": False, "pinned_use_cuda_host_register": False,
            "graph_capture_record_stream_reuse": False,
            "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)},
            "trace_alloc_max_entries": 100000, "trace_alloc_overflowed": False}

snapshot = {"segments": segments, "device_traces": [trace, []], "allocator_settings": settings,
            "external_annotations": annotations}
out = pathlib.Path(__file__).with_name("synthetic_annotated.pickle.gz")
with gzip.GzipFile(out, "wb", mtime=0) as f:
    pickle.dump(snapshot, f, protocol=4)
print(out, len(trace), "trace entries")

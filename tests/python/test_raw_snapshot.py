"""The native dumper's hand-over (native/raw_snapshot.h) on real snapshots.

The dumper itself runs only against a CUDA torch (tests/gpu/test_dump_gpu.py
compares its files with torch's own snapshot of the same state). Here every
snapshot torch 2.11 recorded for the tests is turned into the raw arrays the
dumper would hand over, and the engine must write back the very dicts torch
wrote, key order included.
"""

from __future__ import annotations

import ctypes
import pickle
from pathlib import Path
from typing import Any

import pytest

from memsight._engine import core

DATA = Path(__file__).resolve().parents[1] / "data"
RECORDED = sorted(p for p in DATA.glob("*.pickle") if not p.name.startswith("synthetic"))


class Frame(ctypes.Structure):
    _fields_ = [("name", ctypes.c_uint32), ("filename", ctypes.c_uint32), ("line", ctypes.c_int64)]


class Segment(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in ("device", "address", "total_size", "allocated_size",
                                             "active_size", "requested_size", "stream")] + [
        ("pool_id", ctypes.c_uint64 * 2), ("stack", ctypes.c_uint32), ("block_begin", ctypes.c_uint32),
        ("block_end", ctypes.c_uint32), ("is_large", ctypes.c_uint8), ("is_expandable", ctypes.c_uint8),
        ("has_context", ctypes.c_uint8), ("reserved", ctypes.c_uint8)]


class Block(ctypes.Structure):
    _fields_ = [("size", ctypes.c_int64), ("requested_size", ctypes.c_int64), ("stack", ctypes.c_uint32),
                ("state", ctypes.c_uint8), ("has_context", ctypes.c_uint8), ("reserved", ctypes.c_uint8 * 2)]


class Entry(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in ("addr", "size", "stream", "time_us")] + [
        ("stack", ctypes.c_uint32), ("compile_context", ctypes.c_uint32), ("user_metadata", ctypes.c_uint32),
        ("action", ctypes.c_uint8), ("has_context", ctypes.c_uint8), ("reserved", ctypes.c_uint8 * 2)]


class Annotation(ctypes.Structure):
    _fields_ = [("device", ctypes.c_int64), ("time_us", ctypes.c_int64), ("kv_begin", ctypes.c_uint32),
                ("kv_end", ctypes.c_uint32)]


class Settings(ctypes.Structure):
    _fields_ = [("alloc_conf", ctypes.c_uint32), ("n_divisions", ctypes.c_uint32),
                ("divisions", ctypes.POINTER(ctypes.c_int64)), ("garbage_collection_threshold", ctypes.c_double),
                ("max_split_size", ctypes.c_int64), ("pinned_num_register_threads", ctypes.c_int64),
                ("expandable_segments", ctypes.c_uint8), ("release_lock_on_cudamalloc", ctypes.c_uint8),
                ("pinned_use_cuda_host_register", ctypes.c_uint8),
                ("graph_capture_record_stream_reuse", ctypes.c_uint8)]


P = ctypes.POINTER


class Raw(ctypes.Structure):
    _fields_ = [("abi", ctypes.c_int32), ("n_strings", ctypes.c_uint32), ("string_offsets", P(ctypes.c_uint64)),
                ("string_bytes", ctypes.c_char_p), ("n_frames", ctypes.c_uint32), ("frames", P(Frame)),
                ("n_stacks", ctypes.c_uint32), ("stack_offsets", P(ctypes.c_uint32)),
                ("stack_frames", P(ctypes.c_uint32)), ("n_segments", ctypes.c_uint32),
                ("n_blocks", ctypes.c_uint32), ("segments", P(Segment)), ("blocks", P(Block)),
                ("n_devices", ctypes.c_uint32), ("device_offsets", P(ctypes.c_uint64)), ("entries", P(Entry)),
                ("n_annotations", ctypes.c_uint32), ("annotations", P(Annotation)),
                ("annotation_kv", P(ctypes.c_uint32)), ("settings", Settings),
                ("has_compile_context", ctypes.c_uint8), ("has_user_metadata", ctypes.c_uint8),
                ("has_annotations", ctypes.c_uint8), ("has_graph_capture_record_stream_reuse", ctypes.c_uint8),
                ("seconds", ctypes.c_double * 4)]


ACTIONS = ["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "snapshot", "oom"]
STATES = ["active_allocated", "active_pending_free", "inactive"]


def arr(ctype: Any, items: list[Any]) -> Any:
    return (ctype * max(1, len(items)))(*items)


class RawBuilder:
    """A torch snapshot dict -> the arrays the native dumper hands over."""

    def __init__(self) -> None:
        self.strings: dict[str, int] = {"": 0}
        self.frames: dict[tuple[int, int, int], int] = {}
        self.stacks: dict[tuple[int, ...], int] = {(): 0}
        self.keep: list[Any] = []

    def s(self, text: str) -> int:
        return self.strings.setdefault(text, len(self.strings))

    def stack(self, frames: list[dict[str, Any]]) -> int:
        ids = tuple(self.frames.setdefault((self.s(f["name"]), self.s(f["filename"]), f["line"]), len(self.frames))
                    for f in frames)
        return self.stacks.setdefault(ids, len(self.stacks))

    def build(self, snap: dict[str, Any]) -> Raw:
        segs, blocks = [], []
        for seg in snap["segments"]:
            keys = list(seg)
            b0 = len(blocks)
            for b in seg["blocks"]:
                blocks.append(Block(b["size"], b["requested_size"], self.stack(b["frames"]), STATES.index(b["state"]), 1))
            segs.append(Segment(seg["device"], seg["address"], seg["total_size"], seg["allocated_size"],
                                seg["active_size"], seg["requested_size"], seg["stream"],
                                (ctypes.c_uint64 * 2)(*seg["segment_pool_id"]), self.stack(seg["frames"]), b0,
                                len(blocks), seg["segment_type"] == "large", seg["is_expandable"],
                                keys.index("blocks") < keys.index("frames")))
        entries, offsets = [], [0]
        for dev in snap["device_traces"]:
            for e in dev:
                action = ACTIONS.index(e["action"])
                entries.append(Entry(e["device_free"] if action == 8 else e["addr"], e["size"], e["stream"],
                                     e["time_us"], self.stack(e.get("frames", [])), self.s(e["compile_context"]),
                                     self.s(e["user_metadata"]), action, "frames" in e))
            offsets.append(len(entries))
        anns, kv = [], []
        for a in snap["external_annotations"]:
            begin = len(kv) // 2
            for k, v in a.items():
                if k not in ("device", "time_us"):
                    kv += [self.s(k), self.s(v)]
            anns.append(Annotation(a["device"], a["time_us"], begin, len(kv) // 2))
        cfg = snap["allocator_settings"]
        divisions = arr(ctypes.c_int64, list(cfg["roundup_power2_divisions"].values()))
        settings = Settings(self.s(cfg["PYTORCH_CUDA_ALLOC_CONF"]), len(cfg["roundup_power2_divisions"]), divisions,
                            cfg["garbage_collection_threshold"], cfg["max_split_size"],
                            cfg["pinned_num_register_threads"], cfg["expandable_segments"],
                            cfg["release_lock_on_cudamalloc"], cfg["pinned_use_cuda_host_register"],
                            cfg["graph_capture_record_stream_reuse"])
        blob, str_offsets = b"", [0]
        for text in self.strings:  # in id order
            blob += text.encode("utf-8", "surrogatepass")
            str_offsets.append(len(blob))
        stack_offsets, stack_frames = [0], []
        for ids in self.stacks:
            stack_frames += ids
            stack_offsets.append(len(stack_frames))
        parts = dict(
            string_offsets=arr(ctypes.c_uint64, str_offsets), string_bytes=blob,
            frames=arr(Frame, [Frame(*k) for k in self.frames]),
            stack_offsets=arr(ctypes.c_uint32, stack_offsets), stack_frames=arr(ctypes.c_uint32, stack_frames),
            segments=arr(Segment, segs), blocks=arr(Block, blocks), device_offsets=arr(ctypes.c_uint64, offsets),
            entries=arr(Entry, entries), annotations=arr(Annotation, anns), annotation_kv=arr(ctypes.c_uint32, kv),
        )
        self.keep += [divisions, *parts.values()]
        return Raw(abi=1, n_strings=len(self.strings), n_frames=len(self.frames), n_stacks=len(self.stacks),
                   n_segments=len(segs), n_blocks=len(blocks), n_devices=len(offsets) - 1,
                   n_annotations=len(anns), settings=settings, has_compile_context=1, has_user_metadata=1,
                   has_annotations=1, has_graph_capture_record_stream_reuse=1,
                   **parts)


def key_orders(v: Any) -> Any:
    if isinstance(v, dict):
        return [(k, key_orders(x)) for k, x in v.items()]
    if isinstance(v, (list, tuple)):
        return [key_orders(x) for x in v]
    return None


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.stem)
def test_raw_arrays_give_back_torchs_snapshot(path: Path) -> None:
    with open(path, "rb") as f:
        original = pickle.load(f)
    builder = RawBuilder()
    raw = builder.build(original)
    snap = core().snapshot_from_raw(ctypes.addressof(raw))
    again = pickle.loads(snap.pickle())
    assert again == original
    assert key_orders(again) == key_orders(original)


def test_memsights_keys_beside_torchs() -> None:
    with open(DATA / "oom.pickle", "rb") as f:
        original = pickle.load(f)
    raw = RawBuilder().build(original)
    memory = [{"device": 0, "total": 85_000_000_000, "limit": 2 << 30}, {"device": 1, "total": 80, "limit": None}]
    extra = {"segments": [], "memsight_device_memory": memory, "memsight_tags": {"version": 1, "storages": []}}
    snap = core().snapshot_from_raw(ctypes.addressof(raw), pickle.dumps(extra, protocol=4))
    again = pickle.loads(snap.pickle())
    assert list(again)[-2:] == ["memsight_device_memory", "memsight_tags"]
    assert again.pop("memsight_device_memory") == memory
    assert again.pop("memsight_tags") == {"version": 1, "storages": []}
    assert again == original


@pytest.mark.parametrize("damage", ["stack", "frame", "string", "blocks", "action", "abi"])
def test_inconsistent_arrays_are_an_error_not_a_crash(damage: str) -> None:
    with open(DATA / "mlp_train.pickle", "rb") as f:
        original = pickle.load(f)
    raw = RawBuilder().build(original)
    if damage == "stack":
        raw.entries[0].stack = raw.n_stacks
    elif damage == "frame":
        raw.stack_frames[0] = raw.n_frames + 5
    elif damage == "string":
        raw.entries[0].compile_context = raw.n_strings
    elif damage == "blocks":
        raw.segments[0].block_end = raw.n_blocks + 1
    elif damage == "action":
        raw.entries[0].action = 9
    else:
        raw.abi = 2
    with pytest.raises(ValueError, match="raw snapshot"):
        core().snapshot_from_raw(ctypes.addressof(raw))


@pytest.mark.parametrize("path", RECORDED[:4], ids=lambda p: p.stem)
def test_segments_alone_for_live_blocks(path: Path) -> None:
    """What MemProfiler reads the live blocks' sites from without the trace."""
    with open(path, "rb") as f:
        original = pickle.load(f)
    snap = core().load(str(path))
    assert pickle.loads(snap.segments_pickle()) == original["segments"]

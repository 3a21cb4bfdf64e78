"""Valid pickles that change a list or dict after a memo read of it
(issue 34, item 7). Python's pickler never writes these: it fills each
container before any memo read. They are assembled opcode by opcode at
protocol 4; pickle.loads shows every change to every holder."""
from __future__ import annotations

MEMO = b"\x94"


def s(text: str) -> bytes:
    b = text.encode()
    return b"\x8c" + bytes([len(b)]) + b


def i(n: int) -> bytes:
    return b"J" + n.to_bytes(4, "little", signed=True)


def get(slot: int) -> bytes:
    return b"h" + bytes([slot])


def frame(name: str, line: int, order: tuple[str, ...] = ("name", "filename", "line")) -> bytes:
    fields = {"name": s(name), "filename": s("a.py"), "line": i(line)}
    return b"}" + MEMO + b"(" + b"".join(s(k) + fields[k] for k in order) + b"u"


def entry(frames: bytes, size: int = 512) -> bytes:
    return (b"}" + MEMO + b"(" + s("action") + s("alloc") + s("addr") + i(4096) + s("size")
            + i(size) + s("stream") + i(0) + s("frames") + frames + b"u")


def snapshot(body: bytes) -> bytes:
    # slot 0: the top dict; slot 1: the segments list.
    return b"\x80\x04}" + MEMO + b"(" + s("segments") + b"]" + MEMO + body + b"u."


def frames_list_appended_after_use(order: tuple[str, ...] = ("name", "filename", "line")) -> bytes:
    """A frames list (slot 2, under the key 'a') that a trace entry reads
    through the memo, and to which a frame is appended afterwards."""
    return snapshot(
        s("a") + b"]" + MEMO + frame("first", 1, order) + b"a"
        + s("device_traces") + b"]" + MEMO + b"]" + MEMO + entry(get(2)) + b"aa"
        + s("b") + get(2) + frame("second", 2, order) + b"a")


def entry_changed_after_use() -> bytes:
    """A trace entry (slot 4) whose size is set anew through the memo after
    it was appended to its device's list."""
    return snapshot(
        s("device_traces") + b"]" + MEMO + b"]" + MEMO
        + entry(b"]" + MEMO + frame("f", 1) + b"a") + b"aa"
        + s("c") + get(4) + s("size") + i(1024) + b"s")


def frame_changed_after_use() -> bytes:
    """A frame dict (slot 6) whose line is set anew after its entry was read."""
    return snapshot(
        s("device_traces") + b"]" + MEMO + b"]" + MEMO
        + entry(b"]" + MEMO + frame("f", 1) + b"a") + b"aa"
        + s("c") + get(6) + s("line") + i(7) + b"s")


def entry_changed_through_dup() -> bytes:
    """A trace entry held twice on the stack (DUP): filled through the top
    copy, which is then dropped, and given a new size through the other."""
    items = (s("action") + s("alloc") + s("addr") + i(4096) + s("size") + i(512) + s("stream")
             + i(0) + s("frames") + b"]")
    return snapshot(
        s("device_traces") + b"]" + MEMO + b"]" + MEMO
        + b"}2(" + items + b"u0(" + s("size") + i(1024) + b"u" + b"aa")


ALL = {
    "frames-list-appended-after-use": frames_list_appended_after_use(),
    "frames-list-of-unordered-frames-appended-after-use":
        frames_list_appended_after_use(("filename", "name", "line")),
    "entry-changed-after-use": entry_changed_after_use(),
    "frame-changed-after-use": frame_changed_after_use(),
    "entry-changed-through-dup": entry_changed_through_dup(),
}

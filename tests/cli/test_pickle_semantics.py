"""A pickle that changes a list or dict after a memo read of it reads as
pickle.loads reads it (issue 34, item 7): the reader's conversions as the
pickle streams in give way to a read that converts only at the end."""
from __future__ import annotations

import pickle
import subprocess

import pytest

from memo_changes import ALL


@pytest.mark.parametrize("name", sorted(ALL))
def test_changed_after_use_reads_as_pickle_loads(run, tmp_path, name):
    data = ALL[name]
    f, out = tmp_path / "in.pickle", tmp_path / "out.pickle"
    f.write_bytes(data)
    r = run("convert", f, "-o", out)
    assert r.returncode == 0, r.stderr
    assert pickle.loads(out.read_bytes()) == pickle.loads(data)
    # What the writer wrote is plain: read and written again, the same bytes.
    again = tmp_path / "again.pickle"
    assert run("convert", out, "-o", again).returncode == 0
    assert again.read_bytes() == out.read_bytes()


def test_changed_after_use_on_standard_input_is_refused_plainly(memsight_bin):
    # Standard input cannot be read a second time.
    r = subprocess.run([memsight_bin, "trace", "-"], input=ALL["entry-changed-after-use"],
                       capture_output=True)
    assert r.returncode == 2
    assert r.stderr.decode() == (
        "memsight trace: standard input: this pickle changes a list or dict after using it, "
        "which memsight reads only from a file (it reads such a pickle twice): save it to a "
        "file first\n")


def _s(text: str) -> bytes:  # SHORT_BINUNICODE
    return b"\x8c" + bytes([len(text)]) + text.encode()


# MARK then SETITEMS on a list, MARK then APPENDS on a dict: pickle.loads does
# nothing for an empty mark whatever is under it (no type check), so the
# snapshot reads as if they were not there (fuzz_pickle_python, 2026-11-28).
EMPTY_MARKS = (b"\x80\x04}(" + _s("segments") + b"](u" + _s("device_traces") + b"]]a"
               + _s("extra") + b"}(eu.")


def test_an_empty_setitems_or_appends_does_nothing_as_in_pickle_loads(run, tmp_path):
    assert pickle.loads(EMPTY_MARKS) == {"segments": [], "device_traces": [[]], "extra": {}}
    f, out = tmp_path / "in.pickle", tmp_path / "out.pickle"
    f.write_bytes(EMPTY_MARKS)
    r = run("convert", f, "-o", out)
    assert r.returncode == 0, r.stderr
    assert pickle.loads(out.read_bytes()) == pickle.loads(EMPTY_MARKS)


# A frame dict stored in a memo slot past the dense ones (BINPUT 42 first),
# filled, then read back through that slot: the reader made it an interned
# frame and recycled the dict, but the slot still pointed at the dict, so the
# read-back value was empty, or another dict that took the recycled place
# (fuzz_pickle_python, 2026-11-28: an entry read as another entry).
# The fuzzer's input, minimised (86 bytes): pickle.loads returns the list on
# top of the stack and leaves the rest.
SPARSE_FRAME = (b"\x80\x02X\x04\x00\x00\x00nameq\x13X\x08\x00\x00\x00filenameq\x15X\x04\x00\x00\x00lineq\x17"
                b"}q*(h\x13X\x02\x00\x00\x00n+h\x15X\x01\x00\x00\x00,h\x17K\x13u"
                b"}](}(X\x06\x00\x00\x00h*ue.\nh*ue.")


def test_a_frame_dict_in_a_sparse_memo_slot_reads_back_as_itself(run, tmp_path):
    want = [{"h*ue.\n": {"name": "n+", "filename": ",", "line": 19}}]
    assert pickle.loads(SPARSE_FRAME) == want
    f, out = tmp_path / "in.pickle", tmp_path / "out.pickle"
    f.write_bytes(SPARSE_FRAME)
    r = run("convert", f, "-o", out)
    assert r.returncode == 0, r.stderr
    assert pickle.loads(out.read_bytes()) == want


# A segment or block dict whose keys look like a frame's (name, filename,
# line) or a trace entry's (action first) was converted into one as the
# pickle streamed in, then refused as "segments[1] is a dict, expected a
# dict" (fuzz_roundtrip in the fresh-clone CI of 2026-11-29: its written
# copy of a fuzzed file failed so). Such a segment reads as a segment of
# unknown keys, kept verbatim, as pickle.loads reads it; a trace entry
# without 'action' is refused saying so.
_FRAME = {"name": "f", "filename": "a.py", "line": 3}
_ENTRY = {"action": "alloc", "addr": 1, "size": 512, "stream": 0, "time_us": 5, "frames": []}
_SEGMENT = {"device": 0, "address": 4096, "total_size": 2097152, "allocated_size": 0, "active_size": 0,
            "requested_size": 0, "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
            "is_expandable": False, "frames": [],
            "blocks": [{"address": 4096, "size": 2097152, "requested_size": 0, "state": "inactive", "frames": []}]}


@pytest.mark.parametrize("protocol", [2, 4])
@pytest.mark.parametrize("value", [
    {"segments": [_SEGMENT, _FRAME], "device_traces": [[]]},
    {"segments": [_SEGMENT, _ENTRY], "device_traces": [[]]},
    {"segments": [dict(_SEGMENT, blocks=[_FRAME])], "device_traces": [[]]},
], ids=["segment-like-a-frame", "segment-like-an-entry", "block-like-a-frame"])
def test_a_segment_or_block_shaped_like_a_frame_or_entry_reads_as_pickle_loads(run, tmp_path, value, protocol):
    f, out = tmp_path / "in.pickle", tmp_path / "out.pickle"
    f.write_bytes(pickle.dumps(value, protocol=protocol))
    r = run("convert", f, "-o", out)
    assert r.returncode == 0, r.stderr
    assert pickle.loads(out.read_bytes()) == value
    r = run("summary", out)  # the written copy reads too
    assert r.returncode == 0, r.stderr


def test_a_trace_entry_shaped_like_a_frame_is_refused_saying_why(run, tmp_path):
    f = tmp_path / "in.pickle"
    f.write_bytes(pickle.dumps({"segments": [_SEGMENT], "device_traces": [[_ENTRY, _FRAME]]}))
    r = run("summary", f)
    assert r.returncode == 2 and b"no 'action' key" in r.stderr and b"expected a dict" not in r.stderr, r.stderr

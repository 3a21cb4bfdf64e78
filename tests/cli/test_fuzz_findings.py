"""Regression tests for what fuzzing found (tests/fuzz/README.md)."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest

MiB = 1 << 20
FUZZ = Path(__file__).parents[1] / "fuzz" / "corpus" / "snapshot"


def test_absent_size_does_not_leak_from_an_entry_given_up_half_way(run):
    # fuzz_roundtrip: the fast path read an entry's size, gave the entry up
    # to the generic path (its frames were a memo read of another list), and
    # the next entry it took, which has no size, got that size.
    f = FUZZ / "row-size-leak.pickle"
    last = pickle.loads(f.read_bytes())["device_traces"][0][-1]
    assert "size" not in last
    r = run("trace", f)
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines()[-2:] == [
        f"c = MEM[{last['addr']}:0.0B]", "TOTAL MEM: 2.0B"]


def test_str_that_is_not_utf8_is_refused(run, tmp_path):
    # fuzz_roundtrip: such a str was kept and written back where pickle.loads
    # refuses it. Python's pickle never writes one (a lone surrogate, which
    # it writes as three bytes, still reads).
    good = pickle.dumps({"segments": [], "device_traces": [], "x": "abc"}, protocol=4)
    bad = good.replace(b"\x8c\x03abc", b"\x8c\x03a\xffc")
    assert bad != good
    f = tmp_path / "s.pickle"
    f.write_bytes(bad)
    r = run("summary", f)
    assert r.returncode == 2
    err = r.stderr.decode()
    assert err == f"memsight summary: {f}: corrupted pickle: a str is not valid UTF-8\n"


def test_duplicate_key_in_an_entry_reads_as_python_reads_it(run, tmp_path):
    # fuzz_roundtrip: a key written twice in a trace entry. pickle.loads
    # keeps the last value; memsight kept the first as the entry's frames and
    # the second as an extra, so a written-back file could read differently.
    first = {"name": "first_site", "filename": "/x/a.py", "line": 1}
    last = {"name": "last_site", "filename": "/x/b.py", "line": 2}
    entry = {"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "frames": [first],
             "zzzzzz": [last]}
    seg = {"device": 0, "address": 0, "total_size": 2 * MiB, "allocated_size": 512,
           "active_size": 512, "requested_size": 512, "stream": 0, "segment_type": "small",
           "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
           "blocks": [{"address": 4096, "size": 512, "requested_size": 512,
                       "state": "active_allocated", "frames": []}]}
    data = pickle.dumps({"segments": [seg], "device_traces": [[entry]]}, protocol=4)
    data = data.replace(b"\x8c\x06zzzzzz", b"\x8c\x06frames")
    assert pickle.loads(data)["device_traces"][0][0]["frames"] == [last]
    f = tmp_path / "dup.pickle"
    f.write_bytes(data)
    # Written back, the entry holds what Python holds: one frames key, the
    # last value; and writing that again gives the same bytes.
    once, twice = tmp_path / "once.pickle", tmp_path / "twice.pickle"
    assert run("convert", f, "-o", once).returncode == 0
    assert run("convert", once, "-o", twice).returncode == 0
    written = once.read_bytes()
    assert b"last_site" in written and b"first_site" not in written
    assert pickle.loads(written)["device_traces"][0][0]["frames"] == [last]
    assert twice.read_bytes() == written


def test_segments_only_read_reports_the_full_reads_error(run):
    # fuzz_snapshot: the trace walk met a str that is not UTF-8 and reported
    # it, where the full read fails earlier with another error.
    f = FUZZ / "skip-bad-str-then-stop.pickle"
    stats, trace = run("stats", f), run("trace", f)
    assert stats.returncode == trace.returncode == 2
    assert stats.stderr.decode().split(": ", 1)[1] == trace.stderr.decode().split(": ", 1)[1]


def test_a_trace_that_changes_a_blocks_frames_is_read_in_full(run):
    # fuzz_snapshot: the trace appended a frame to a list that a block also
    # holds (a memo read of it). pickle.loads sees the block with both
    # frames; the segments-only read, which walks the trace without building
    # it, kept the block's first frame only, so `memory` and `summary`
    # disagreed. Such a trace now sends the read to a full one.
    f = FUZZ / "trace-appends-to-block-frames.pickle"
    snap = pickle.loads(f.read_bytes())
    block = snap["segments"][0]["blocks"][0]
    assert block["frames"] is snap["device_traces"][0][0]["frames"] and len(block["frames"]) == 2
    r = run("memory", f, "-o", "-")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode() == (
        "stream_0;active_allocated;a.py:1:shared_site;a.py:1:shared_site 512\n")


def test_a_frame_longer_than_the_data_is_truncated(run, tmp_path):
    # fuzz_pickle_python: a FRAME declaring 2^32 bytes more than follow was
    # read (the reader skipped frame lengths); pickle.loads refuses it as
    # truncated, and so does memsight now.
    data = bytearray(pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=4))
    assert data[2] == 0x95  # FRAME, its length in the next 8 bytes
    data[3:11] = (int.from_bytes(data[3:11], "little") + (1 << 32)).to_bytes(8, "little")
    f = tmp_path / "long-frame.pickle"
    f.write_bytes(bytes(data))
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(bytes(data))
    r = run("stats", f)
    assert r.returncode == 2 and b"truncated pickle" in r.stderr, r.stderr


def _s(text: str) -> bytes:
    return b"X" + len(text).to_bytes(4, "little") + text.encode()  # BINUNICODE


_SEGS, _TRACES = _s("segments"), _s("device_traces")
# A whole snapshot (protocol 2, no frames) for the shapes below to break:
# {"segments": [], "device_traces": []}.
_TAIL = _TRACES + b"]s."  # EMPTY_LIST SETITEM STOP
# Each takes a value from below the last MARK, which pickle.loads refuses
# ("unpickling stack underflow" / "unexpected MARK found"); without the
# mark the same bytes would leave a snapshot.
_BELOW_A_MARK = {
    "SETITEM": b"\x80\x02}" + _SEGS + b"(]s" + _TAIL,
    "APPEND": b"\x80\x02}" + _SEGS + b"]s" + _TRACES + b"](]as.",
    "APPENDS": b"\x80\x02}" + _SEGS + b"]s" + _TRACES + b"]((]es.",
    "SETITEMS": b"\x80\x02}((" + _SEGS + b"]u" + _TAIL,
    "TUPLE1": b"\x80\x02}" + _SEGS + b"]s" + _s("x") + b"(\x85Ns" + _TAIL,
    "DUP": b"\x80\x02}(20" + _SEGS + b"]s" + _TAIL,
    "BINPUT": b"\x80\x02}(q\x001" + _SEGS + b"]s" + _TAIL,
    "STOP": b"\x80\x02}" + _SEGS + b"]s" + _TRACES + b"]s(.",
}


@pytest.mark.parametrize("op", sorted(_BELOW_A_MARK))
def test_a_value_below_a_mark_is_never_taken(run, tmp_path, op):
    # fuzz_pickle_python (finding 9): an opcode that took a value from below
    # the last MARK was read, where pickle.loads refuses the pickle.
    data = _BELOW_A_MARK[op]
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(data)
    f = tmp_path / f"{op}.pickle"
    f.write_bytes(data)
    for command in ("stats", "trace"):  # the segments-only read, and the full one
        r = run(command, f)
        assert r.returncode == 2, (command, r.stdout)
        assert b"corrupted pickle" in r.stderr and b"below a MARK" in r.stderr, r.stderr


def test_the_shapes_below_a_mark_are_snapshots_without_it(run, tmp_path):
    # The control of the test above: the same shapes with their values above
    # the mark read, in Python and here.
    good = b"\x80\x02}(" + _SEGS + b"]" + _TRACES + b"](]eu."
    assert pickle.loads(good) == {"segments": [], "device_traces": [[]]}
    f = tmp_path / "good.pickle"
    f.write_bytes(good)
    assert run("stats", f).returncode == 0


def test_a_memo_slot_never_stored_is_no_value(run, tmp_path):
    # fuzz_pickle_python: BINPUT 9 after slots 0-2 filled the slots between
    # with None, so a read of slot 5 gave None where pickle.loads refuses it
    # ("Memo value not found"), and MEMOIZE then numbered from 10, not from
    # the 4 slots stored. Now the slot skipped is no value, and MEMOIZE
    # numbers what is stored, as in Python.
    head = b"\x80\x04}q\x00(" + _SEGS + b"]q\x01" + _TRACES + b"]q\x02"
    gap = head + b"Nq\x09\x940" + _s("x") + b"h\x05u."  # reads slot 5: never stored
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(gap)
    f = tmp_path / "gap.pickle"
    f.write_bytes(gap)
    r = run("stats", f)
    assert r.returncode == 2 and b"memo key 5 was never stored" in r.stderr, r.stderr
    # MEMOIZE after BINPUT 9 stores slot 4 (four slots stored): a read of 4
    # is the value memoised.
    numbered = head + b"Nq\x090" + _s("x") + _s("memoised") + b"\x94" + _s("y") + b"h\x04u."
    assert pickle.loads(numbered)["x"] == "memoised"
    f.write_bytes(numbered)
    r = run("convert", f, "-o", tmp_path / "out.pickle")
    assert r.returncode == 0, r.stderr
    assert pickle.loads((tmp_path / "out.pickle").read_bytes())["y"] == "memoised"


def test_a_long_frame_is_truncated_whatever_frames_follow(run, tmp_path):
    # fuzz_pickle_python: only the last FRAME's end was checked, so a frame
    # declaring more than the data, followed by one that fits, was read;
    # pickle.loads refuses the first at once.
    data = bytearray(pickle.dumps({"segments": [], "device_traces": [[]]}, protocol=4))
    assert data[2] == 0x95 and data[-1:] == b"."
    data[3:11] = (int.from_bytes(data[3:11], "little") + (1 << 32)).to_bytes(8, "little")
    data[-1:] = b"\x95" + (1).to_bytes(8, "little") + b"."  # a frame of the STOP alone
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(bytes(data))
    f = tmp_path / "long-then-short.pickle"
    f.write_bytes(bytes(data))
    for command in ("stats", "trace"):
        r = run(command, f)
        assert r.returncode == 2 and b"truncated pickle" in r.stderr, r.stderr


def test_a_blocks_frames_read_through_another_segment_are_kept(run, tmp_path):
    # fuzz_pickle_python (finding 13): a segment's 'frames' is another
    # segment's blocks list. Reading the first segment turned a block's
    # frames list into a stack and recycled its node, as if the block were
    # its only holder; the second segment's value then showed it empty.
    frame = {"name": "f", "filename": "a.py", "line": 1}
    blocks = [{"address": 4096, "size": 512, "requested_size": 512, "state": "active_allocated",
               "frames": [frame, dict(frame, line=2)]}]
    def seg(address, frames, blocks):
        return {"device": 0, "address": address, "total_size": 2 * MiB, "allocated_size": 512,
                "active_size": 512, "requested_size": 512, "stream": 0, "segment_type": "small",
                "segment_pool_id": (0, 0), "is_expandable": False, "frames": frames,
                "blocks": blocks}
    snap = {"segments": [seg(4096, [], blocks), seg(8 * MiB, blocks, [])], "device_traces": [[]]}
    f, out = tmp_path / "s.pickle", tmp_path / "out.pickle"
    f.write_bytes(pickle.dumps(snap, protocol=4))
    r = run("convert", f, "-o", out)
    assert r.returncode == 0, r.stderr
    got = pickle.loads(out.read_bytes())
    assert got["segments"][1]["frames"][0]["frames"] == blocks[0]["frames"]
    assert got == snap

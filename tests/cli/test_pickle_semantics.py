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

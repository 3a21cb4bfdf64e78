"""Snapshot.estimate() is `memsight estimate`: the same completed snapshot
and the same answer, and the same refusal of a recording."""

from __future__ import annotations

import json
import pickle
import sys

import pytest

import memsight
from memsight_testlib import DATA, cli

sys.path.insert(0, str(DATA.parent / "cli"))
import requests_only  # noqa: E402  (the generator the CLI tests share)

pytestmark = pytest.mark.usefixtures("core")


def test_estimate_is_the_clis(tmp_path):
    src, out = tmp_path / "requests.pickle", tmp_path / "done.pickle"
    requests_only.write(src)
    done = memsight.load(src).estimate("expandable_segments:True", device_memory="200M")
    answer = json.loads(cli("estimate", src, "-o", out, "--json", "--set", "expandable_segments:True",
                            "--device-memory", "200M"))
    assert done.estimate_answer == answer
    assert pickle.loads(done.pickle()) == pickle.loads(out.read_bytes())
    assert done.whatif().devices[0].self_check.ok
    assert memsight.load(src).estimate_answer is None


def test_a_recording_is_refused():
    with pytest.raises(memsight.MemsightError, match="not a requests-only snapshot"):
        memsight.load(DATA / "mlp_train.pickle").estimate()
    with pytest.raises(ValueError):
        memsight.load(DATA / "mlp_train.pickle").estimate(memory_fraction=2)

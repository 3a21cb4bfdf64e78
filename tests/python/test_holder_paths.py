"""Who holds it (issue 33): the paths of the holders walk, built lazily from
each holder's (holder_paths.py). What they name must be what tidy() makes of
the walk's raw paths, shortest first, as when every path was built whole."""

from __future__ import annotations

import sys
import types

import pytest

torch = pytest.importorskip("torch")

from memsight.torch.capture import holder_paths as P  # noqa: E402
from memsight.torch.capture import holders as H  # noqa: E402

PREFIXES = [
    "f:x", "m.kept", "f:cache[7]", "f:d['k']", "f:m.__dict__", "f:m.__dict__['_modules']",
    "f:m.__dict__['_parameters']", "f:m._buffers", "f:m._modules['_parameters']", "f:m._parameters",
    "f:m._forward_hooks[0]<closure a|kept>", "f:m._forward_hooks[0]<closure a|kept>[1]", "f:d[\"a'b\"]",
    "f:d['a\\\\b']", "f:o.__dict__['__dict__']", "f:s[<Parameter>]", "f:l[-1]", "<lambda>:x", "f:d[None]",
    "f:x.__dict__['_modules']['0'].__dict__", "f:d['._modules']", "f:t{<Tensor>}", "f:o.attr",
    "f:l[2].__dict__", "f:l[2].__dict__['_parameters']", "f:l[2].o.__dict__", "f:d{<T>}._buffers",
]
LABELS = ["[3]", "[-1]", "['x']", "['_modules']", "['_parameters']", "['0']", "['']", "[<Parameter>]",
          ".__dict__", "['a.b']", "[\"a'b\"]", "[None]", "[1.5]", ".attr", "<list>", "{<Tensor>}", "",
          "['__dict__']", "['x y']", "[('t', 1)]"]


def test_an_items_tidy_path_follows_from_its_holders_only_where_tidy_agrees():
    followed = 0
    for raw in PREFIXES:
        text = P.tidy(raw)
        how = P._how_items_follow(raw, text)
        for label in LABELS:
            got = P._follow(text, how, label)
            if got is None:
                continue
            followed += 1
            assert got == P.tidy(raw + label), (raw, label)
            if label.startswith("[") and got == text + label:  # the holder of any item, found once
                assert P.holder_of(got) == P.holder_of(text + "[0]"), (raw, label)
            names = P.Names({}, {}, False, str)
            if P._ATTRIBUTE_ITEM.fullmatch(label) and got.endswith("." + label[2:-2]):  # an attribute's
                prefix = got[: -len(label[2:-2])]
                assert names._attribute_holder(prefix, got) == P.holder_of(got), (raw, label)
                assert names._attribute_holder(prefix, prefix + "other") == P.holder_of(prefix + "other")
    assert followed > 100  # most items follow; the rest are tidied whole


class _Box:
    pass


def test_parameters_buffers_and_optimizer_state_keep_their_paths():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    model.extra = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(1)) for _ in range(2)])
    state = {p: {"exp_avg": torch.zeros_like(p), "step": 3} for p in model.parameters()}
    boxes = [_Box()]
    boxes[0].weights = torch.zeros(3)  # an attribute of an object a list holds
    v = H.holders_value(None, budget_s=5.0)
    paths = {s["path"]: v["holders"][s["holder"]] for s in v["storages"]}
    me = "test_parameters_buffers_and_optimizer_state_keep_their_paths:"
    for name in ("0.weight", "0.bias", "1.weight", "1.bias", "extra.0", "extra.1"):
        h = paths[me + "model." + name]
        assert (h["path"], h["type"]) == (me + "model." + name, "Parameter")
    for name in ("1.running_mean", "1.running_var", "1.num_batches_tracked"):
        assert paths[me + "model." + name]["type"] == "Tensor"
    state_paths = [p for p in paths if p.startswith(me + "state")]
    assert sorted(set(state_paths)) == [me + "state[<Parameter>]['exp_avg']"]
    assert all(paths[p]["path"] == me + "state" and paths[p]["type"] == "dict" for p in state_paths)
    assert (paths[me + "boxes[0].weights"]["path"], paths[me + "boxes[0].weights"]["type"]) == (me + "boxes", "list")
    assert state and boxes


def test_of_two_holders_found_by_heap_passes_the_shorter_path_names_it():
    # A module no frame runs: its globals are found by the gc's referrers,
    # which give the tensor two holders, so a breadth-first walk chooses.
    fake = types.ModuleType("memsight_test_fake")
    sys.modules[fake.__name__] = fake
    try:
        t = torch.zeros(5)
        fake.deep = [[_Box()]]
        fake.deep[0][0].t = t
        fake.near = [0, t]
        mine = H._storage_at(t)
        del t
        v = H.holders_value(None, budget_s=5.0)
        (s,) = [s for s in v["storages"] if (s["device"], s["addr"]) == mine]
        assert s["path"] == "memsight_test_fake.near[1]"
        assert v["holders"][s["holder"]]["path"] == "memsight_test_fake.near"
    finally:
        del sys.modules[fake.__name__]

"""The classifier of memory kinds against synthetic training runs whose every
block knows what it is (tests/data/make_categories.py): at every trace entry
memsight's bytes per kind, how many of them were tagged, and the module
tree must equal the truth, whichever way the phases were recorded."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from memsight_testlib import DATA

spec = importlib.util.spec_from_file_location("make_categories", DATA / "make_categories.py")
mc = importlib.util.module_from_spec(spec)
sys.modules["make_categories"] = mc  # dataclasses look their module up
spec.loader.exec_module(mc)

KINDS = ["parameter", "gradient", "optimizer_state", "buffer", "activation", "temporary",
         "autograd_internal", "before_recording", "unknown", "communication"]


@pytest.fixture
def memsight(core):
    import memsight

    return memsight


def check_every_entry(memsight, sim: mc.Sim, snap: dict) -> None:
    s = memsight.from_dict(snap)
    n = len(snap["device_traces"][0])
    for event in range(-1, n):
        got = s.categories(at=event)
        want = sim.expected(event)
        where = f"after trace entry {event} ({sim.mode}, tags={sim.tags})"
        assert got.event == event
        for k in KINDS:
            b, tagged = want.get(k, [0, 0])
            assert got.by_category[k].bytes == b, f"{k} {where}: {dict(got.by_category[k])} != {b}"
            assert got.by_category[k].tagged == tagged, f"{k} tagged {where}"
        assert got.total == sum(v[0] for v in want.values())
        check_modules(got, sim.live_at(event), where)


def check_modules(got, live, where) -> None:
    want: dict[str, dict[str, int]] = {}
    outside = 0
    for t in live:
        if t.module is None:
            outside += t.size
            continue
        parts = t.module.split(".")
        for name in [""] + [".".join(parts[:i]) for i in range(1, len(parts) + 1)]:
            d = want.setdefault(name, {})
            d[t.kind] = d.get(t.kind, 0) + t.size
    got_modules = {m.name: dict(m.by_category) for m in got.modules}
    assert got_modules == want, where
    assert got.unattributed == outside, where
    for m in got.modules:  # inclusive totals, parents listed before children
        assert m.total == sum(m.by_category.values())
        if m.parent >= 0:
            assert got.modules[m.parent].name == ".".join(m.name.split(".")[:-1]) or m.name.count(".") == 0


@pytest.mark.parametrize("mode", ["marks", "annotations", "stacks"])
@pytest.mark.parametrize("tags", [True, False])
def test_training_loop_every_moment(memsight, mode, tags):
    sim = mc.Sim(mode, tags=tags)
    snap = mc.train(sim, steps=3, layers=3)
    check_every_entry(memsight, sim, snap)


@pytest.mark.parametrize("mode", ["marks", "stacks"])
def test_activation_checkpointing(memsight, mode):
    sim = mc.Sim(mode, tags=True)
    snap = mc.train(sim, steps=2, layers=3, checkpoint=True)
    check_every_entry(memsight, sim, snap)
    # the re-run forward's outputs are activations, its scratch temporaries
    kinds = {t.kind for t in sim.truth}
    assert {"activation", "temporary", "autograd_internal", "gradient"} <= kinds


def test_tagged_snapshot_and_sources(memsight):
    sim = mc.Sim("marks", tags=True)
    snap = mc.train(sim, steps=2, layers=2)
    j = memsight.from_dict(snap).summary().devices[0].categories
    assert j.sources.tags == len(snap["memsight_tags"]["storages"])
    assert j.sources.tags_matched == j.sources.tags
    assert j.sources.phases == "memsight marks"
    at = j.at_snapshot.by_category
    mib = mc.MiB
    # 2 weights, 2 gradients, 4 Adam states of 4 MiB requested (blocks can be
    # larger: the allocator hands out a whole free block when the rest is small)
    req = (at.parameter.requested, at.gradient.requested, at.optimizer_state.requested)
    assert req == (8 * mib, 8 * mib, 16 * mib)
    truth = sim.expected(len(snap["device_traces"][0]) - 1)
    assert [at[k].bytes for k in ("parameter", "gradient", "optimizer_state", "buffer")] == \
        [truth[k][0] for k in ("parameter", "gradient", "optimizer_state", "buffer")]
    assert at.parameter.tagged == at.parameter.bytes and at.buffer.requested == 64 * 1024
    # a storage on another device, and one in no live block, match nothing
    snap["memsight_tags"]["storages"] += [
        {"device": 1, "addr": mc.BASE, "size": 512, "category": "gradient", "name": "x", "module": ""},
        {"device": 0, "addr": mc.BASE + mc.SEGMENT - 4096, "size": 512, "category": "gradient",
         "name": "y", "module": ""},
        {"device": 0, "addr": mc.BASE, "size": 512, "category": "no such kind"},
        "not a dict",
    ]
    j2 = memsight.from_dict(snap).summary().devices[0].categories
    assert (j2.sources.tags, j2.sources.tags_matched) == (j.sources.tags + 1, j.sources.tags)
    assert j2.at_snapshot == j.at_snapshot


def test_oom_diagnosis_names_the_kind_and_the_layers(memsight):
    sim = mc.Sim("marks", tags=True)
    snap = mc.train(sim, steps=1, layers=6, oom_at_step=0, act=16 * mc.MiB)
    s = memsight.from_dict(snap)
    o = s.summary().devices[0].ooms[0]
    assert o.verdict == "demand"
    act = o.categories.by_category.activation.bytes
    assert act == sum(t.size for t in sim.live_at(o.event) if t.kind == "activation")
    # the activations of layers 0-4 and the input: the first remedy says so
    assert o.remedies[0].startswith("activation ")
    assert "(most in layers.0-4)" in o.remedies[0] and "checkpoint those modules" in o.remedies[0]
    text = s.summary_text()
    assert "By kind: activation " in text and "in layers.0-4" in text
    assert s.categories("oom") == o.categories
    with pytest.raises(memsight.MemsightError, match="no OOM 1"):
        s.categories("oom:1")


def test_text_shows_kinds_and_modules(memsight):
    sim = mc.Sim("marks", tags=True)
    snap = mc.train(sim, steps=2, layers=2)
    text = memsight.from_dict(snap).summary_text()
    assert "what kind, at the allocated peak (tagged: " in text
    assert "by module at the allocated peak (each with its submodules):" in text
    assert "(model)" in text and "layers.0" in text
    assert "what kind, at the snapshot: " in text


def test_moments_are_checked(memsight):
    s = memsight.from_dict(mc.train(mc.Sim("marks"), steps=1, layers=1))
    n = len(s.to_dict()["device_traces"][0])
    for bad, msg in [("soon", "not a moment"), (n, "not in device 0's trace"), (-2, "not in device 0"),
                     ("oom", "no OOM 0"), ("oom:-1", "not a moment")]:
        with pytest.raises(memsight.MemsightError, match=msg):
            s.categories(at=bad)
    with pytest.raises(memsight.MemsightError, match="no device 3"):
        s.categories(device=3)
    with pytest.raises(ValueError):
        s.categories(at=1.5)
    assert s.categories("snapshot") == s.categories(n - 1)


def test_real_fixture_kinds_add_up_to_the_model(memsight):
    # default_stacks (tests/gpu/record_counters.py): three blocks of
    # LayerNorm(512), Linear(512, 2048), Linear(2048, 512), made before the
    # recording; three AdamW steps; the snapshot after
    # zero_grad(set_to_none=True). Inferred from stacks alone, the kinds are
    # the model's sizes to the byte.
    weights = 3 * 4 * (2 * 512 + 512 * 2048 + 2048 + 2048 * 512 + 512)
    s = memsight.load(DATA / "counters" / "default_stacks.pickle")
    j = s.summary().devices[0]
    now = j.categories.at_snapshot.by_category
    assert now.before_recording.bytes == weights and now.before_recording.count == 18
    assert now.optimizer_state.bytes == 2 * weights  # exp_avg, exp_avg_sq (step is on the CPU)
    assert now.gradient.bytes == 0
    peak = j.categories.at_peak.by_category
    assert peak.gradient.bytes == weights and peak.gradient.count == 18
    assert j.categories.at_peak.total == j.peak_allocated
    assert j.categories.sources.phases == "stacks"


def test_hostile_tags_and_marks(memsight):
    """Whatever a file holds in tags and marks: no crash, no hang, a report."""
    sim = mc.Sim("marks", tags=True)
    snap = mc.train(sim, steps=1, layers=2)
    deep = ".".join(["m"] * 20000)
    snap["memsight_tags"]["storages"] += [
        {"device": 0, "addr": 2**63 - 1, "size": 2**63 - 1, "category": "parameter", "name": "x", "module": deep},
        {"device": -5, "addr": -(2**63), "size": -1, "category": "buffer", "name": "", "module": "a..b."},
    ] + [{"device": 0, "addr": mc.BASE + i, "size": 1, "category": "gradient", "name": str(i), "module": deep}
         for i in range(0, 4096, 512)]
    for e in snap["device_traces"][0][:20]:
        e["user_metadata"] = "memsight:fwd:" + deep if e["action"] == "alloc" else "memsight:"
    s = memsight.from_dict(snap)
    j = json.loads(s.summary_json())
    mods = j["devices"][0]["categories"]["at_snapshot"]["modules"]
    # the deep name, hung at depth 64, cut as every name memsight shows (its length said)
    deepest = max((m["name"] for m in mods), key=len)
    assert deepest == deep[:16384] + f"\u2026 [cut at 16384 of {len(deep)} bytes]"
    assert len([m for m in mods if m["name"].startswith("m")]) == 64
    assert "by module" in s.summary_text()
    s.html()  # the page packs them too

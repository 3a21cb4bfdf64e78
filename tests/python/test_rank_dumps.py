"""Coordinated dumps through a torch.distributed store, in one process: each
"rank" is a RankDumps with its own number over one shared HashStore (the
protocol is the same over torchrun's TCPStore: test_rank_dumps_torchrun.py
runs it there). Snapshots are small real ones from tests/data."""

from __future__ import annotations

import json
import os
import pickle
import threading
import time

import pytest

from memsight.torch.capture import rank_dumps
from memsight.torch.capture.rank_dumps import RankDumps

dist = pytest.importorskip("torch.distributed", reason="torch is not installed")
if not dist.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)
HashStore = dist.HashStore


@pytest.fixture
def snapshots(data_dir):
    """rank -> the snapshot dict that rank "holds" (rank 1 the OOM)."""
    out = {}
    for rank, name in enumerate(["mlp_train", "oom", "mlp_train"]):
        with open(data_dir / f"{name}.pickle", "rb") as f:
            out[rank] = pickle.load(f)
    return out


@pytest.fixture(autouse=True)
def _fresh_rounds(monkeypatch):
    monkeypatch.setattr(rank_dumps, "_own_rounds", set())
    monkeypatch.setattr(rank_dumps, "_answered_rounds", set())


def make_rank(store, rank, folder, snapshots, **kw):
    os.makedirs(folder, exist_ok=True)
    return RankDumps(str(folder), store=store, rank=rank, world_size=3, interval=0.05,
                     snapshot=lambda extra, r=rank: snapshots[r], **kw)


def loaded(path):
    with open(path, "rb") as f:
        return pickle.load(f)


def test_every_rank_writes_its_snapshot_of_the_round(tmp_path, snapshots):
    store = HashStore()
    r0 = make_rank(store, 0, tmp_path / "n0", snapshots).start()
    r2 = make_rank(store, 2, tmp_path / "n2", snapshots).start()
    r1 = make_rank(store, 1, tmp_path / "n1", snapshots)
    try:
        rnd = r1.request("manual", "asked by a test", timeout=10)
    finally:
        r0.stop()
        r2.stop()
    assert rnd.seq == 1 and rnd.missing == {}
    assert sorted(rnd.files) == [0, 1, 2]
    for rank in range(3):
        path = rnd.files[rank]
        assert os.path.basename(path) == f"manual_1_rank{rank}.pickle"
        assert os.path.dirname(path) == str(tmp_path / f"n{rank}")
        snap = loaded(path)
        meta = snap.pop("memsight_rank")
        assert (meta["rank"], meta["seq"], meta["tag"], meta["origin_rank"]) == (rank, 1, "manual", 1)
        assert meta["world_size"] == 3 and meta["reason"] == "asked by a test"
        assert snap == snapshots[rank]  # torch's keys as they were, memsight's beside them
    manifest = json.loads(open(rnd.manifest).read())
    assert os.path.basename(rnd.manifest) == "manual_1_manifest.json"
    assert next(iter(manifest)) == "schema" and manifest["schema"] == 1
    assert manifest["memsight_rank_dumps"] == 1 and manifest["seq"] == 1 and manifest["world_size"] == 3
    assert [(e["rank"], os.path.basename(e["file"])) for e in manifest["ranks"]] == [
        (0, "manual_1_rank0.pickle"), (1, "manual_1_rank1.pickle"), (2, "manual_1_rank2.pickle")]
    assert manifest["missing"] == []
    # the rounds go on numbering, job-wide
    assert r0.rounds[-1].seq == 1
    rnd2 = make_rank(store, 2, tmp_path / "n2", snapshots).request("again", timeout=0.2)
    assert rnd2.seq == 2


def test_a_hung_rank_costs_the_asking_rank_its_timeout_and_no_more(tmp_path, snapshots):
    store = HashStore()
    r0 = make_rank(store, 0, tmp_path, snapshots).start()
    r1 = make_rank(store, 1, tmp_path, snapshots)
    # rank 2 never watches: hung, or killed
    try:
        t0 = time.monotonic()
        rnd = r1.request("manual", timeout=0.6)
        took = time.monotonic() - t0
    finally:
        r0.stop()
    assert 0.55 <= took < 3.0
    assert sorted(rnd.files) == [0, 1]
    assert rnd.missing == {2: "did not answer within 0.6 s"}
    manifest = json.loads(open(rnd.manifest).read())
    assert manifest["missing"] == [{"rank": 2, "why": "did not answer within 0.6 s"}]


class FrozenStore:
    """A store whose server stopped answering: every call blocks."""

    def __init__(self):
        self.release = threading.Event()

    def __getattr__(self, name):
        def blocked(*a, **k):
            self.release.wait(30)
            raise RuntimeError("store gone")
        return blocked


def test_a_store_that_stops_answering_never_holds_the_asking_rank(tmp_path, snapshots, caplog):
    store = FrozenStore()
    r1 = RankDumps(str(tmp_path), store=store, rank=1, world_size=3, timeout=0.5,
                   snapshot=lambda extra: snapshots[1])
    try:
        t0 = time.monotonic()
        rnd = r1.request("manual")
        took = time.monotonic() - t0
    finally:
        store.release.set()
    assert took < 3.0
    # the round is this rank's alone: its own snapshot and manifest are written anyway
    assert rnd.world_size == 1 and list(rnd.files) == [1]
    assert os.path.isfile(rnd.manifest)
    assert "could not ask the other ranks" in caplog.text


def test_ranks_that_run_out_of_memory_together_make_one_round(tmp_path, snapshots):
    store = HashStore()
    ranks = [make_rank(store, r, tmp_path, snapshots) for r in range(3)]
    rounds = [None] * 3
    go = threading.Barrier(3)

    def oom(r):
        go.wait()
        rounds[r] = ranks[r].announce("oom", f"rank {r} OOM", join_within=30)

    threads = [threading.Thread(target=oom, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {rnd.seq for rnd in rounds} == {1}
    assert store.add(rank_dumps.PREFIX + "seq", 0) == 1
    origin = rounds[0].origin_rank
    assert all(rnd.origin_rank == origin for rnd in rounds)
    # a later OOM, past the window, is a round of its own
    late = ranks[0].announce("oom", "later", join_within=0.0)
    assert late.seq == 2


class SlowRequestStore:
    """A store over which a round's request arrives a moment after its number."""

    def __init__(self, store, delay):
        self.store, self.delay = store, delay

    def set(self, key, value):
        if key.endswith("/request"):
            time.sleep(self.delay)
        return self.store.set(key, value)

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_a_rank_that_asks_while_a_round_is_being_numbered_joins_it(tmp_path, snapshots):
    store = HashStore()
    first = make_rank(SlowRequestStore(store, 0.5), 0, tmp_path, snapshots)
    second = make_rank(store, 1, tmp_path, snapshots)
    rounds = {}
    t = threading.Thread(target=lambda: rounds.setdefault(0, first.announce("oom", "rank 0 OOM", join_within=30)))
    t.start()
    deadline = time.monotonic() + 10
    while store.add(rank_dumps.PREFIX + "seq", 0) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    # round 1 is numbered and its request not yet written
    rounds[1] = second.announce("oom", "rank 1 OOM", join_within=30)
    t.join()
    assert rounds[0].seq == rounds[1].seq == 1
    assert rounds[1].origin_rank == 0 and rounds[1].reason == "rank 0 OOM"
    assert store.add(rank_dumps.PREFIX + "seq", 0) == 1


def test_the_step_boundary_check_is_rate_limited_and_answers(tmp_path, snapshots):
    store = HashStore()
    calls = []

    class Counting:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(store, name)

    r0 = make_rank(Counting(), 0, tmp_path, snapshots, thread=False)
    r0.interval = 60.0
    r0.start()
    assert r0.poll(force=True) == []  # nothing asked yet
    n = len(calls)
    assert r0.poll() == []  # within the interval: no store call at all
    assert len(calls) == n
    rnd = make_rank(store, 1, tmp_path, snapshots).announce("manual")
    answered = r0.poll(force=True)
    assert [a.seq for a in answered] == [rnd.seq]
    assert os.path.isfile(tmp_path / f"manual_{rnd.seq}_rank0.pickle")
    assert store.add(rank_dumps.PREFIX + f"{rnd.seq}/done", 0) == 1
    assert r0.poll(force=True) == []  # answered once


def test_without_a_store_a_dump_is_this_process_alone(tmp_path, snapshots):
    w = RankDumps(str(tmp_path), store=None, rank=0, world_size=1, snapshot=lambda extra: snapshots[0])
    a = w.request("manual")
    b = w.request("manual")
    assert a.seq < b.seq and a.world_size == 1 and list(a.files) == [0]
    assert os.path.isfile(a.files[0]) and os.path.isfile(b.files[0]) and a.files[0] != b.files[0]


def test_the_merged_report_reads_a_round(tmp_path, snapshots, core):
    import memsight

    store = HashStore()
    r0 = make_rank(store, 0, tmp_path, snapshots).start()
    r2 = make_rank(store, 2, tmp_path, snapshots).start()
    try:
        rnd = make_rank(store, 1, tmp_path, snapshots).request("manual", timeout=10)
    finally:
        r0.stop()
        r2.stop()
    rep = memsight.ranks(rnd.manifest)
    assert [r.rank for r in rep.ranks] == [0, 1, 2]
    assert all(r.rank_from == "memsight_rank" and r.origin.seq == 1 for r in rep.ranks)
    assert rep.world_size == 3 and rep.missing == [] and rep.mismatches == []
    assert [v.rank for v in rep.ooms] == [1]  # oom.pickle holds an OOM
    assert rep.ooms[0].different


def test_an_oom_asks_every_rank_and_the_diagnosis_compares_them(fake_torch, tmp_path, snapshots, core,
                                                                  monkeypatch):
    from memsight.torch import OOMObserver, TrainState
    from memsight.torch.callbacks import oom as oom_mod

    store = HashStore()
    rank1 = lambda env=None: {"rank": 1, "world_size": 3, "local_rank": 1}  # noqa: E731
    monkeypatch.setattr(rank_dumps, "default_store", lambda: store)
    monkeypatch.setattr(rank_dumps, "dist_info", rank1)
    monkeypatch.setattr(oom_mod, "dist_info", rank1)
    monkeypatch.setattr(rank_dumps, "_shared", None)
    monkeypatch.setattr(rank_dumps, "_users", 0)
    r0 = make_rank(store, 0, tmp_path / "rank0", snapshots).start()  # rank 2 is hung
    obs = OOMObserver(folder=str(tmp_path / "rank1"), remote_file_name=None, ranks_timeout=1.0)
    obs.arm(TrainState(run_name="r"))
    assert rank_dumps.shared_watcher() is not None and rank_dumps.shared_watcher().rank == 1
    try:
        fake_torch.oom(device=0, alloc=1 << 30, free=1 << 20)
    finally:
        r0.stop()
        obs.close()
    assert rank_dumps.shared_watcher() is None  # close stops the watcher
    rnd = obs.last_round
    assert rnd.seq == 1 and rnd.origin_rank == 1 and sorted(rnd.files) == [0, 1]
    assert rnd.missing == {2: "did not answer within 1 s"}
    assert "CUDA out of memory on rank 1, device 0: 1.0GiB requested" in rnd.reason
    # the OOM snapshot is the round's file too (one file, two names), and says which rank it is
    own = tmp_path / "rank1" / "oom_1_rank1.pickle"
    assert os.path.samefile(own, tmp_path / "rank1" / "rank0_oom_snapshot.pickle")
    assert loaded(own)["memsight_rank"]["rank"] == 1
    assert loaded(rnd.files[0])["memsight_rank"]["reason"] == rnd.reason
    text = open(tmp_path / "rank1" / "rank0_oom_oom_diagnosis.txt").read()
    assert "Every rank at this moment (dump round 1: 2 of 3 ranks wrote a snapshot, 2 of them here" in text
    assert "rank 2: no snapshot (did not answer within 1 s)" in text
    assert "2 ranks (oom round 1, world size 3), 1 ran out of memory" in text
    assert "missing: no dump of rank 2" in text
    assert "Rank 1 was different: its peak allocated 1.6GiB" in text
    # the OOMed rank's folder holds its snapshot under two names: read once
    import memsight

    here = memsight.ranks(str(tmp_path / "rank1"))
    assert [r.rank for r in here.ranks] == [1]
    assert here.notes[0].startswith("the same dump under two names, read once")
    assert here.missing == [0, 2]  # the manifest beside them: rank 0 wrote elsewhere, rank 2 not at all


def test_the_manifest_names_files_inside_its_folder_relative_to_it(tmp_path):
    # `memsight ranks` reads a manifest's relative paths inside its folder and
    # its absolute ones only beside it (or with --allow-absolute): a rank's
    # file in a folder below the manifest's is named relative, so the
    # manifest reads as it is; another folder's stays absolute.
    from memsight.torch.capture.dump_round import DumpRound, write_manifest

    (tmp_path / "sub").mkdir()
    elsewhere = tmp_path.parent / "elsewhere.pickle"
    rnd = DumpRound(seq=1, tag="oom", world_size=3, files={
        0: str(tmp_path / "oom_1_rank0.pickle"), 1: str(tmp_path / "sub" / "oom_1_rank1.pickle"),
        2: str(elsewhere)})
    m = json.loads(open(write_manifest(rnd, str(tmp_path), 3.0)).read())
    assert [e["file"] for e in m["ranks"]] == [
        "oom_1_rank0.pickle", os.path.join("sub", "oom_1_rank1.pickle"), str(elsewhere)]

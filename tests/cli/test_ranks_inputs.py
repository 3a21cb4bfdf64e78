"""`memsight ranks` on inputs that lie, or that are not one job: declared
world sizes (a range, never an entry per missing rank), links in a folder
that lead nowhere, manifest paths that climb out of their folder, one file,
files of different jobs, and ranks whose other devices hold nothing
(issue 34, items 2 and 8; issue 33, item 11). Every input is made here, a
few hundred bytes each."""

from __future__ import annotations

import json
import os
import pickle

import pytest
from test_bounded_memory import run_measured

MiB = 1 << 20
T0 = 1_795_000_000_000_000  # torch's time_us: microseconds since the epoch
HOUR = 3_600_000_000


def entry(addr: int, size: int, t: int, action: str = "alloc") -> dict:
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
            "frames": [{"name": "step", "filename": "train.py", "line": 3}]}


def rank_snapshot(rank: int | None = None, t0: int = T0, mib: int = 4, devices: int = 1,
                  mine: int = 0, **meta: object) -> dict:
    """A rank's snapshot: two allocations on device `mine`; every other of
    `devices` devices holds only a trace entry that holds no memory (torch's
    "snapshot" mark), as a one-GPU-per-rank process lists its node's GPUs."""
    traces = [[entry(0, 0, t0, "snapshot")] for _ in range(devices)]
    traces[mine] = [entry(1 << 30, mib * MiB, t0 + 10), entry(2 << 30, MiB, t0 + 20)]
    snap: dict = {"segments": [], "device_traces": traces}
    if rank is not None:
        snap["memsight_rank"] = {"rank": rank, **meta}
    return snap


def write(path, snap: dict):
    path.write_bytes(pickle.dumps(snap, protocol=4))
    return path


def ranks_json(run, *args, cwd=None) -> dict:
    r = run("ranks", *args, "--json", cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def one_line_error(run, *args, cwd=None) -> str:
    r = run("ranks", *args, cwd=cwd)
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1, err
    return err


# --- item 34.2: a declared world size is a range ---------------------------

@pytest.mark.parametrize("world", [10**8, 10**9])
def test_a_declared_world_size_is_a_range_not_entries(memsight_bin, run, tmp_path, world):
    for r in (0, 1):
        write(tmp_path / f"s_rank{r}.pickle", rank_snapshot(r, world_size=world))
    last = f"{world - 1:,}"
    for args, limit in (([], 64 * MiB), (["--json"], 64 * MiB), (["-o", tmp_path / "r.html"], 160 * MiB)):
        rc, err, rss = run_measured(memsight_bin, "ranks", tmp_path, *args, tmp=tmp_path)
        assert rc == 0, err
        assert rss < limit, f"{args}: {rss / MiB:.0f} MiB"
    assert os.path.getsize(tmp_path / "out") < 100_000  # the JSON of the last run but one
    text = run("ranks", tmp_path).stdout.decode()
    assert f"  missing: no dump of ranks 2-{last} ({world - 2:,} ranks)\n" in text
    rep = ranks_json(run, tmp_path)
    assert rep["world_size"] == world and rep["missing_ranges"] == [[2, world - 1]]
    assert rep["missing_cut"] is True and rep["missing"] == list(range(2, 1002))
    html = (tmp_path / "r.html").read_text()
    assert os.path.getsize(tmp_path / "r.html") < 2 * MiB and '"missing_ranges":[[2,' in html


def test_a_manifest_world_size_is_a_range_too(memsight_bin, run, tmp_path):
    write(tmp_path / "oom_1_rank0.pickle", rank_snapshot())
    m = tmp_path / "oom_1_manifest.json"
    m.write_text(json.dumps({"memsight_rank_dumps": 1, "world_size": 10**9,
                             "ranks": [{"rank": 0, "file": "oom_1_rank0.pickle"}]}))
    rc, err, rss = run_measured(memsight_bin, "ranks", m, "--json", tmp=tmp_path)
    assert rc == 0 and rss < 64 * MiB, (err, rss)
    rep = json.loads((tmp_path / "out").read_text())
    assert rep["missing_ranges"] == [[1, 999_999_999]]


@pytest.mark.parametrize("meta, said", [
    ({"world_size": 0}, "world_size 0, outside 1 to 2,147,483,647"),
    ({"world_size": -3}, "world_size -3, outside 1 to 2,147,483,647"),
    ({"world_size": 2**31}, "world_size 2147483648, outside 1 to 2,147,483,647"),
    ({"world_size": 2**70}, "world_size past 2^63, outside 1 to 2,147,483,647"),
    ({"world_size": 4, "rank_": 4}, "rank 4, outside 0 to 3"),
])
def test_a_world_size_out_of_range_names_the_file(run, tmp_path, meta, said):
    rank = meta.pop("rank_", 0)
    write(tmp_path / "w_rank0.pickle", rank_snapshot(rank, **meta))
    err = one_line_error(run, "w_rank0.pickle", cwd=tmp_path)
    assert err == f"memsight ranks: w_rank0.pickle: memsight_rank says {said}\n"


@pytest.mark.parametrize("value, said", [("0", "0"), ("1e300", "1e+300"), ("2.5", "2.5"),
                                         ("-1", "-1")])
def test_a_manifest_world_size_out_of_range_names_the_manifest(run, tmp_path, value, said):
    write(tmp_path / "r0.pickle", rank_snapshot())
    (tmp_path / "x_manifest.json").write_text(
        '{"memsight_rank_dumps": 1, "world_size": %s, "ranks": [{"rank": 0, "file": "r0.pickle"}]}' % value)
    err = one_line_error(run, "x_manifest.json", cwd=tmp_path)
    assert err == f"memsight ranks: x_manifest.json: world_size {said} is outside 1 to 2,147,483,647\n"


# --- item 34.8: folders, links and manifest paths --------------------------

def eight_ranks(folder):
    folder.mkdir()
    for r in range(8):
        write(folder / f"s_rank{r}.pickle", rank_snapshot(r, world_size=9))


@pytest.mark.parametrize("name", ["a.pickle", "s_rank4x.pickle", "zz.pickle"])  # first, middle, last
def test_a_link_that_leads_nowhere_is_skipped_by_its_name(run, tmp_path, name):
    job = tmp_path / "job"
    eight_ranks(job)
    os.symlink("gone/rank8.pickle", job / name)
    rep = ranks_json(run, job)
    assert [r["rank"] for r in rep["ranks"]] == list(range(8)) and rep["missing"] == [8]
    assert rep["notes"][0] == f"skipped {job}/{name}: a symbolic link to 'gone/rank8.pickle', which does not exist"
    assert ranks_json(run, str(job / "*.pickle"))["notes"][0] == rep["notes"][0]  # a glob the same


def test_a_link_loop_is_named_by_its_entry(run, tmp_path):
    job = tmp_path / "job"
    eight_ranks(job)
    os.symlink("loop.pickle", job / "loop.pickle")
    rep = ranks_json(run, job)
    assert len(rep["ranks"]) == 8
    assert rep["notes"][0] == f"skipped {job}/loop.pickle: a loop of symbolic links"


def test_a_folder_of_broken_links_only_is_an_error_naming_one(run, tmp_path):
    (tmp_path / "job").mkdir()
    os.symlink("nowhere.pickle", tmp_path / "job" / "r0.pickle")
    err = one_line_error(run, "job", cwd=tmp_path)
    assert err == ("memsight ranks: job: no snapshot file to read (skipped job/r0.pickle: a symbolic link "
                   "to 'nowhere.pickle', which does not exist)\n")


def manifest(folder, files, name="oom_1_manifest.json"):
    m = folder / name
    m.write_text(json.dumps({"memsight_rank_dumps": 1, "world_size": len(files),
                             "ranks": [{"rank": r, "file": f} for r, f in enumerate(files)]}))
    return m


@pytest.mark.parametrize("path", ["../../etc/passwd", "../outside.pickle", "a/../../outside.pickle"])
def test_a_manifest_path_stays_in_its_folder(run, tmp_path, path):
    job = tmp_path / "job"
    job.mkdir()
    write(tmp_path / "outside.pickle", rank_snapshot())
    write(job / "r1.pickle", rank_snapshot(1))
    manifest(job, [path, "r1.pickle"])
    err = one_line_error(run, "job/oom_1_manifest.json", cwd=tmp_path)
    assert err == (f"memsight ranks: job/oom_1_manifest.json: rank 0's file '{path}' is outside the "
                   "manifest's folder; a manifest's relative paths are read inside its folder\n")


def test_a_manifest_path_inside_its_folder_is_read(run, tmp_path):
    job = tmp_path / "job"
    (job / "sub").mkdir(parents=True)
    write(job / "sub" / "r0.pickle", rank_snapshot(0, world_size=2))
    write(job / "r1.pickle", rank_snapshot(1, world_size=2))
    manifest(job, ["sub/../sub/r0.pickle", "./r1.pickle"])
    assert [r["rank"] for r in ranks_json(run, job / "oom_1_manifest.json")["ranks"]] == [0, 1]


def test_an_absolute_manifest_path_is_read_beside_it_else_only_when_allowed(run, tmp_path):
    elsewhere = tmp_path / "shared" / "node3"  # not a folder beside the job's
    elsewhere.mkdir(parents=True)
    far = write(elsewhere / "oom_1_rank1.pickle", rank_snapshot(1, world_size=2))
    job = tmp_path / "job"
    job.mkdir()
    write(job / "oom_1_rank0.pickle", rank_snapshot(0, world_size=2))
    m = manifest(job, ["oom_1_rank0.pickle", str(far)])  # another node's folder
    # Not beside the manifest: followed only when the user says so.
    assert one_line_error(run, m) == (
        f"memsight ranks: {m}: rank 1's file '{far}' is outside the manifest's folder and the folders "
        "beside it; --allow-absolute reads a manifest's absolute paths\n")
    assert [r["path"] for r in ranks_json(run, m, "--allow-absolute")["ranks"]] == [
        str(job / "oom_1_rank0.pickle"), str(far)]
    os.link(far, job / "oom_1_rank1.pickle")  # gathered: read beside the manifest
    assert ranks_json(run, m)["ranks"][1]["path"] == str(job / "oom_1_rank1.pickle")
    (tmp_path / "rank1").mkdir()
    beside = write(tmp_path / "rank1" / "oom_1_rank1.pickle", rank_snapshot(1, world_size=2))
    m = manifest(job, ["oom_1_rank0.pickle", str(beside)])  # one node, a folder per rank
    os.unlink(job / "oom_1_rank1.pickle")
    assert ranks_json(run, m)["ranks"][1]["path"] == str(beside)
    for path in ("/etc/passwd", str(elsewhere)):
        m = manifest(job, ["oom_1_rank0.pickle", path])
        assert one_line_error(run, m, "--allow-absolute") == (
            f"memsight ranks: {m}: rank 1's file '{path}' is outside the manifest's folder and names no "
            "snapshot file (*.pickle or *.pkl, compressed or not)\n")


# --- item 33.11: one file, files of different jobs, devices really used -----

def test_one_file_is_one_rank_and_nothing_to_compare(run, tmp_path):
    write(tmp_path / "s.pickle", rank_snapshot())
    text = run("ranks", tmp_path / "s.pickle").stdout.decode()
    assert "note: one rank given: one file is one rank, so there is nothing to compare it with" in text
    assert "median" not in text and "within 5.0%" not in text and "differ" not in text
    assert "What kind, at the peak: " in text


def job_of(folder, world, t0, **meta):
    folder.mkdir(exist_ok=True)
    for r in range(world):
        write(folder / f"{meta.get('job', 'j')}_{t0}_rank{r}.pickle", rank_snapshot(r, t0=t0, world_size=world, **meta))


def test_files_of_two_jobs_hours_apart_are_named(run, tmp_path):
    job_of(tmp_path / "a", 4, T0)
    for r in range(4, 8):  # "ranks 4-7" of a job of 8, three hours later
        write(tmp_path / "a" / f"late_rank{r}.pickle", rank_snapshot(r, t0=T0 + 3 * HOUR, world_size=8))
    rep = ranks_json(run, tmp_path / "a")
    assert rep["mismatches"][0] == (
        "these files look like more than one job (world sizes differ, recordings 3.0 h apart): the numbers below "
        "compare ranks of different runs; give the files of one job, such as one dump round's manifest")
    assert "world sizes differ: 4 (ranks 0-3), 8 (ranks 4-7)" in rep["mismatches"]
    assert ("recorded at different times: ranks 0-3 from 2026-11-18 11:06:40 to 11:06:40 UTC; "
            "ranks 4-7 from 2026-11-18 14:06:40 to 14:06:40 UTC") in rep["mismatches"]
    text = run("ranks", tmp_path / "a").stdout.decode()
    assert "  mismatch: these files look like more than one job" in text


def test_job_ids_and_one_local_rank_twice_are_named(run, tmp_path):
    for r in range(4):
        write(tmp_path / f"s_rank{r}.pickle",
              rank_snapshot(r, world_size=4, job="run-a" if r < 2 else "run-b", host="node1", local_rank=r % 2,
                            pid=1000 + r))
    rep = ranks_json(run, tmp_path)
    assert rep["mismatches"][0].startswith(
        "these files look like more than one job (job ids differ, one host's local rank twice)")
    assert "job ids differ: run-a (ranks 0, 1), run-b (ranks 2, 3)" in rep["mismatches"]
    assert "one place, two ranks: ranks 0 and 2 both ran as local rank 0 on host node1" in rep["mismatches"]
    for r in range(4):  # one process holding every rank (a simulation): not two jobs
        write(tmp_path / f"s_rank{r}.pickle", rank_snapshot(r, world_size=4, host="node1", local_rank=0, pid=7))
    assert ranks_json(run, tmp_path)["mismatches"] == []


def test_one_job_says_none_of_it(run, tmp_path):
    for r in range(4):  # two nodes, dumps a minute apart: one job
        write(tmp_path / f"s_rank{r}.pickle", rank_snapshot(r, t0=T0 + r * 60_000_000, world_size=4,
                                                            host=f"node{r // 2}", local_rank=r % 2, job="run-a"))
    rep = ranks_json(run, tmp_path)
    assert rep["mismatches"] == []
    assert not any("several devices" in n or "one rank" in n for n in rep["notes"])


def test_the_device_note_only_where_a_rank_held_memory_on_several(run, tmp_path):
    ddp = tmp_path / "ddp"
    ddp.mkdir()
    for r in range(2):  # one GPU per rank; each process lists both GPUs
        write(ddp / f"s_rank{r}.pickle", rank_snapshot(r, devices=2, mine=r))
    rep = ranks_json(run, ddp)
    assert [r["devices"] for r in rep["ranks"]] == [1, 1] and [r["device"] for r in rep["ranks"]] == [0, 1]
    assert not any("several devices" in n for n in rep["notes"])
    snap = rank_snapshot(1, devices=2, mine=1)  # rank 1 also allocated on GPU 0
    snap["device_traces"][0] = [entry(3 << 30, MiB, T0 + 5)]
    write(ddp / "s_rank1.pickle", snap)
    assert "rank 1 used several devices; each rank's busiest device is summarised" in ranks_json(run, ddp)["notes"]

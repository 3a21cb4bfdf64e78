"""Files given to the wrong command, and outputs whose names ask for a format:
every command tells what a file is and which command reads it, and writes
the format its -o name asks for or refuses it before reading anything."""

from __future__ import annotations

import bz2
import gzip
import lzma
import pickle
import zipfile
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"
SNAP = DATA / "oom.pickle"
TRACE = DATA / "profiler" / "profiler.pt.trace.json.gz"
TIMELINE = DATA / "profiler" / "memory_timeline.json.gz"
TORCH_TIMELINE_HTML = (  # what export_memory_timeline writes for a .html name
    "<html>\n<head><meta charset=\"utf-8\" /><title>GPU Memory Timeline HTML</title></head>\n"
    "<body>\n  <img src='data:image/png;base64,iVBORw0KGgo='>\n</body>\n</html>")


def one_line_error(r) -> str:
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, (r.returncode, err)
    return err.rstrip("\n")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("kinds")
    f = {"snapshot": SNAP, "trace": TRACE, "timeline": TIMELINE}
    f["raw timeline"] = d / "memory.raw.json"
    f["raw timeline"].write_text("[[-1, 0, 4096, 0], [1000, 0, 512, 3], [2000, 2, 512, 3]]")
    f["timeline picture"] = d / "memory.html"
    f["timeline picture"].write_text(TORCH_TIMELINE_HTML)
    f["event list"] = d / "events.json"
    f["event list"].write_text('[{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]')
    f["json"] = d / "config.json"
    f["json"].write_text('{"lr": 0.1}')
    f["svg"] = d / "flame.svg"
    f["svg"].write_text('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg"></svg>')
    f["bz2"] = d / "oom.pickle.bz2"
    f["bz2"].write_bytes(bz2.compress(SNAP.read_bytes()))
    f["text"] = d / "trace.txt"  # memsight trace's output, in a UTF-8 file
    f["text"].write_text("# 𝛼 allocations\n" + "b7f = alloc(1024)  # é\n" * 300, encoding="utf-8")
    f["empty"] = d / "empty.pickle"
    f["empty"].write_bytes(b"")
    f["torch.save"] = d / "model.pt"  # torch.save's zip layout, written by hand
    with zipfile.ZipFile(f["torch.save"], "w") as z:
        z.writestr("model/data.pkl", pickle.dumps({"w": 1}, protocol=2))
        z.writestr("model/version", "3\n")
    f["gzip trace in a .pickle name"] = d / "renamed.pickle"
    f["gzip trace in a .pickle name"].write_bytes(TRACE.read_bytes())
    return f


SNAPSHOT_COMMANDS = [("summary",), ("stats",), ("trace",), ("segments", "-o", "-"), ("memory", "-o", "-"),
                     ("view", "-o", "x.html"), ("trace-plot", "-o", "x.html")]


@pytest.mark.parametrize("command", SNAPSHOT_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("kind,says", [
    ("trace", "a torch.profiler trace (Chrome trace JSON), not a memory snapshot: read it with "
              "`memsight profile {path}`"),
    ("gzip trace in a .pickle name", "a torch.profiler trace (Chrome trace JSON), not a memory snapshot: "
                                     "read it with `memsight profile {path}`"),
    ("event list", "a torch.profiler trace (Chrome trace JSON), not a memory snapshot"),
    ("timeline", "torch's memory timeline (export_memory_timeline's JSON), not a memory snapshot: "
                 "read it with `memsight profile --timeline {path} -o timeline.html`"),
    ("raw timeline", "torch's memory timeline (export_memory_timeline's JSON), not a memory snapshot"),
    ("timeline picture", "torch's memory timeline drawn as a picture (export_memory_timeline to .html), "
                         "without its data: export it as .json, .json.gz or .raw.json.gz"),
    ("json", "JSON, not a memory snapshot: a memory snapshot is the pickle "
             "torch.cuda.memory._dump_snapshot(path) writes"),
    ("svg", "an SVG image, not a memory snapshot: open it in a browser"),
    ("text", "text, not a memory snapshot: a memory snapshot is the pickle "
             "torch.cuda.memory._dump_snapshot(path) writes"),
    ("bz2", "bzip2-compressed, not a memory snapshot: memsight reads gzip, zstd and xz: decompress it first"),
    ("empty", "the input is empty (0 bytes), not a memory snapshot"),
    ("torch.save", "a file torch.save wrote (tensors or a checkpoint), not a memory snapshot"),
])
def test_snapshot_commands_name_what_they_were_given(run, files, tmp_path, command, kind, says):
    path = files[kind]
    err = one_line_error(run(command[0], path, *command[1:], cwd=tmp_path))
    assert err.startswith(f"memsight {command[0]}: {path}: " + says.format(path=path)), err
    assert list(tmp_path.iterdir()) == [], "nothing written"


@pytest.mark.parametrize("args,kind,says", [
    ((), "snapshot", "a torch memory snapshot (the pickle torch.cuda.memory._dump_snapshot writes), "
                     "not a torch.profiler trace: read it with `memsight summary {path}` (or view, stats, trace)"),
    ((), "timeline", "torch's memory timeline (export_memory_timeline's JSON), not a torch.profiler trace: "
                     "read it with `memsight profile --timeline {path} -o timeline.html`"),
    ((), "raw timeline", "torch's memory timeline (export_memory_timeline's JSON), not a torch.profiler trace"),
    ((), "timeline picture", "torch's memory timeline drawn as a picture"),
    ((), "svg", "an SVG image, not a torch.profiler trace"),
    ((), "text", "malformed JSON at byte 0: unexpected character"),
    ((), "bz2", "bzip2-compressed, not a torch.profiler trace"),
    ((), "torch.save", "a file torch.save wrote (tensors or a checkpoint), not a torch.profiler trace"),
    (("--timeline", "-o", "t.html"), "trace", "a torch.profiler trace (Chrome trace JSON), not a memory "
                                             "timeline: read it with `memsight profile {path}`"),
    (("--timeline", "-o", "t.html"), "snapshot", "a torch memory snapshot (the pickle "
                                                 "torch.cuda.memory._dump_snapshot writes), not a memory timeline"),
    (("--timeline", "-o", "t.html"), "timeline picture", "torch's memory timeline drawn as a picture"),
])
def test_profile_names_what_it_was_given(run, files, tmp_path, args, kind, says):
    path = files[kind]
    err = one_line_error(run("profile", path, *args, cwd=tmp_path))
    assert err.startswith(f"memsight profile: {path}: " + says.format(path=path)), err
    assert list(tmp_path.iterdir()) == [], "nothing written"


@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy"])
def test_a_real_torch_save_file_is_named(run, tmp_path, zipped):
    torch = pytest.importorskip("torch")
    f = tmp_path / "weights.pt"
    torch.save({"w": torch.ones(3)}, f, _use_new_zipfile_serialization=zipped)
    err = one_line_error(run("summary", f))
    assert err == (f"memsight summary: {f}: a file torch.save wrote (tensors or a checkpoint), not a memory "
                   "snapshot: a memory snapshot is what torch.cuda.memory._dump_snapshot(path) writes"), err


def test_standard_input_is_named_and_suggested_as_dash(run):
    err = one_line_error(run("profile", "-", input=SNAP.read_bytes()))
    assert err.startswith("memsight profile: standard input: a torch memory snapshot"), err
    assert "`memsight summary -`" in err
    err = one_line_error(run("summary", "-", input=TRACE.read_bytes()))
    assert err.endswith("not a memory snapshot: read it with `memsight profile -`"), err


def test_a_page_memsight_wrote_is_named(run, tmp_path):
    page = tmp_path / "oom.html"
    assert run("view", SNAP, "-o", page).returncode == 0
    assert one_line_error(run("summary", page)) == \
        f"memsight summary: {page}: a page memsight wrote, not a memory snapshot: open it in a browser"
    assert "a page memsight wrote, not a torch.profiler trace" in one_line_error(run("profile", page))


def test_suggested_paths_are_quoted_for_the_shell(run, tmp_path):
    f = tmp_path / "my trace's.json.gz"
    f.write_bytes(TRACE.read_bytes())
    err = one_line_error(run("summary", f))
    assert err.endswith(f"read it with `memsight profile '{str(f)[:-len(f.name)]}my trace'\\''s.json.gz'`"), err


def test_the_readers_still_take_what_they_read(run, files, tmp_path):
    assert run("summary", SNAP).returncode == 0
    assert run("profile", TRACE).returncode == 0
    assert run("profile", files["event list"]).returncode == 0
    for t in (TIMELINE, files["raw timeline"]):
        r = run("profile", "--timeline", t, "-o", tmp_path / "t.html")
        assert r.returncode == 0, r.stderr


def test_python_load_names_a_trace_too(files):
    memsight = pytest.importorskip("memsight")
    with pytest.raises(memsight.MemsightError, match=r"not a memory snapshot: read it with `memsight profile "):
        memsight.load(TRACE)
    with pytest.raises(memsight.MemsightError, match=r"^torch's memory timeline .*not a memory snapshot"):
        memsight.loads(TIMELINE.read_bytes())


# -- outputs ------------------------------------------------------------------

def test_convert_writes_xz_for_an_xz_name(run, tmp_path):
    plain, packed = tmp_path / "a.pickle", tmp_path / "a.pickle.xz"
    assert run("convert", SNAP, "-o", plain).returncode == 0
    r = run("convert", SNAP, "-o", packed)
    assert r.returncode == 0, r.stderr
    data = packed.read_bytes()
    assert data.startswith(b"\xfd7zXZ\x00")
    assert lzma.decompress(data) == plain.read_bytes()
    assert pickle.loads(lzma.decompress(data)) == pickle.loads(SNAP.read_bytes())
    assert run("summary", packed).stdout == run("summary", SNAP).stdout
    for name, magic in (("a.pickle.gz", b"\x1f\x8b"), ("a.pickle.zst", b"\x28\xb5\x2f\xfd")):
        assert run("convert", SNAP, "-o", tmp_path / name).returncode == 0
        assert (tmp_path / name).read_bytes().startswith(magic), name
    assert gzip.decompress((tmp_path / "a.pickle.gz").read_bytes()) == plain.read_bytes()


@pytest.mark.parametrize("name", ["a.pickle.bz2", "a.pickle.lz4", "a.pickle.zip", "a.pickle.7z",
                                  "a.pickle.br", "a.pickle.lzma", "a.pickle.Z"])
def test_convert_refuses_compressions_it_does_not_write_before_reading(run, tmp_path, name):
    ext = name.rsplit(".", 1)[1]
    # The input does not exist: the name is refused first, and nothing is written.
    err = one_line_error(run("convert", tmp_path / "missing.pickle", "-o", tmp_path / name))
    assert err == (f"memsight convert: {tmp_path / name}: memsight does not write {ext} files; "
                   "name it .gz, .zst or .xz to compress, or leave the suffix out"), err
    assert list(tmp_path.iterdir()) == []


def test_python_to_pickle_follows_the_name_or_refuses(tmp_path):
    memsight = pytest.importorskip("memsight")
    snap = memsight.load(SNAP)
    snap.to_pickle(tmp_path / "s.pickle.xz")
    assert lzma.decompress((tmp_path / "s.pickle.xz").read_bytes()) == snap.pickle()
    with pytest.raises(memsight.MemsightError, match="memsight does not write bz2 files"):
        snap.to_pickle(tmp_path / "s.pickle.bz2")
    assert not (tmp_path / "s.pickle.bz2").exists()


@pytest.mark.parametrize("args,says", [
    (("convert", SNAP, "-o", "x.json"), "-o x.json names JSON (.json), which `memsight convert` does not "
                                        "write: it writes a snapshot pickle (.pickle); `memsight summary --json`"),
    (("convert", SNAP, "-o", "x.html"), "-o x.html names an HTML page (.html), which `memsight convert` does "
                                        "not write: it writes a snapshot pickle (.pickle); `memsight view`"),
    (("summary", SNAP, "-o", "x.html"), "-o x.html names an HTML page (.html), which `memsight summary` does "
                                        "not write: it writes text (.txt) or JSON (.json); `memsight view`"),
    (("summary", "--json", SNAP, "-o", "x.txt"), "--json writes JSON (.json), but -o x.txt names text (.txt)"),
    (("summary", SNAP, "-o", "x.json.gz"), "-o x.json.gz: only `memsight convert` writes compressed files"),
    (("stats", SNAP, "-o", "x.svg"), "-o x.svg names an SVG flamegraph (.svg), which `memsight stats` does "
                                     "not write: it writes text (.txt); `memsight memory` and `segments`"),
    (("trace", SNAP, "-o", "x.json"), "-o x.json names JSON (.json), which `memsight trace` does not write"),
    (("segments", SNAP, "-o", "x.html"), "-o x.html names an HTML page (.html), which `memsight segments` "
                                         "does not write"),
    (("memory", SNAP, "-o", "x.svg.gz"), "-o x.svg.gz: only `memsight convert` writes compressed files"),
    (("compare", SNAP, SNAP, "-o", "x.json"), "-o x.json names JSON (.json), which `memsight compare`"),
    (("view", SNAP, "-o", "x.svg"), "-o x.svg names an SVG flamegraph (.svg), which `memsight view` does "
                                    "not write: it writes an HTML page (.html)"),
    (("view", SNAP, "-o", "x.HTML.bz2"), "-o x.HTML.bz2: only `memsight convert` writes compressed files"),
    (("profile", TRACE, "--json", "-o", "x.html"), "--json writes JSON (.json), but -o x.html names an HTML "
                                                   "page (.html)"),
    (("profile", TRACE, "-o", "x.pickle"), "-o x.pickle names a snapshot pickle (.pickle), which `memsight "
                                           "profile` does not write"),
    (("profile", "--timeline", TIMELINE, "-o", "x.html.gz"), "-o x.html.gz: only `memsight convert` writes "
                                                             "compressed files"),
])
def test_an_output_name_asking_for_another_format_is_refused_first(run, tmp_path, args, says):
    # Run where the output would land: nothing may appear there.
    err = one_line_error(run(*args, cwd=tmp_path))
    assert err.startswith(f"memsight {args[0]}: {says}"), err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args,starts", [
    (("summary", SNAP, "-o", "s.json"), b"{"),            # the name asks for JSON
    (("summary", "--json", SNAP, "-o", "s.JSON"), b"{"),
    (("summary", SNAP, "-o", "s.txt"), b"Device 0"),
    (("summary", SNAP, "-o", "s.log"), b"Device 0"),      # a name memsight does not know: the default
    (("profile", TRACE, "-o", "p.json"), b"{"),
    (("profile", TRACE, "-o", "p.htm"), b"<!DOCTYPE html>"),
    (("memory", SNAP, "-o", "m.txt"), b"stream_0;"),
    (("memory", SNAP, "-o", "m.folded"), b"stream_0;"),
    (("memory", SNAP, "-o", "m"), b"<?xml"),              # torch writes SVG whatever the name
    (("view", SNAP, "-o", "v.report"), b"<!DOCTYPE html>"),
])
def test_the_output_format_follows_the_name(run, tmp_path, args, starts):
    r = run(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / args[-1]).read_bytes().startswith(starts)

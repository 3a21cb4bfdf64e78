"""Every write is checked: a full standard output is one line and exit 2."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data"
SNAP = DATA / "alloc_context.pickle"


def run_to_full(memsight_bin: str, *args: object) -> tuple[int, str]:
    import subprocess
    with open("/dev/full", "wb") as full:
        p = subprocess.run([memsight_bin, *map(str, args)], stdout=full, stderr=subprocess.PIPE,
                           timeout=120)
    return p.returncode, p.stderr.decode()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("args", [
    ["trace", SNAP], ["stats", SNAP], ["summary", SNAP], ["summary", "--json", SNAP],
    ["memory", "-o", "-", SNAP], ["segments", "-o", "-", SNAP],
    ["compare", SNAP, DATA / "cpp_stacks.pickle", "-o", "-"], ["--help"], ["stats", "--help"],
])
def test_full_stdout_is_an_error(memsight_bin, args):
    rc, err = run_to_full(memsight_bin, *args)
    assert rc == 2, err
    lines = err.splitlines()
    if args[0] == "compare":  # with -o -, its set lines go to stderr first
        lines = lines[2:]
    assert len(lines) == 1, err
    assert "standard output: write failed: No space left on device" in lines[0], err


def test_error_names_the_path_once(run):
    r = run("stats", "/nonexistent")
    assert r.returncode == 2
    assert r.stderr.decode() == "memsight stats: /nonexistent: No such file or directory\n"


def test_directory_named_once(run, tmp_path):
    r = run("summary", tmp_path)
    assert r.stderr.decode().count(str(tmp_path)) == 1, r.stderr


def test_help_says_fifos_wait_for_their_writer(run):
    out = run("--help").stdout.decode()
    assert "FIFO" in out and "--max-expanded" in out


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("cmd", [["trace"], ["stats"], ["memory"], ["segments"], ["view"],
                                 ["summary", "--json"], ["convert"]])
def test_full_output_file_is_an_error(run, cmd):
    r = run(*cmd, SNAP, "-o", "/dev/full")
    assert r.returncode == 2, r.stderr
    expected = f"memsight {cmd[0]}: /dev/full: write failed: No space left on device\n"
    assert r.stderr.decode() == expected


def closed_pipe_run(cmd: list[str], **kw) -> tuple[int, str]:
    """Runs `cmd` with standard output into a pipe whose reader has gone."""
    import subprocess
    read, write = os.pipe()
    os.close(read)
    try:
        p = subprocess.run(cmd, stdout=write, stderr=subprocess.PIPE, timeout=120, **kw)
    finally:
        os.close(write)
    return p.returncode, p.stderr.decode()


@pytest.mark.parametrize("args", [["trace", SNAP], ["summary", "--json", SNAP], ["--help"]])
def test_closed_pipe_ends_quietly(memsight_bin, args):
    # The executable dies of SIGPIPE, as `cat` would: no message.
    rc, err = closed_pipe_run([memsight_bin, *map(str, args)])
    assert rc == -13 and err == ""


@pytest.mark.parametrize("args", [["trace", SNAP], ["--help"]])
def test_closed_pipe_through_python_ends_quietly(memsight_bin, args):
    # `python -m memsight` runs the CLI in-process, where the interpreter
    # ignores SIGPIPE: the write fails with EPIPE, and the command still
    # ends without a word, with the shell's status for a SIGPIPE (141).
    import sys
    root = Path(__file__).parents[2]
    env = dict(os.environ, PYTHONPATH=str(root / "python"), MEMSIGHT_EXE=memsight_bin)
    rc, err = closed_pipe_run([sys.executable, "-m", "memsight", *map(str, args)], env=env)
    assert (rc, err) == (141, "")


# Files written whole keep what the user set (issue 34, item 5).

def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_a_replaced_file_keeps_its_mode(run, tmp_path):
    out = tmp_path / "s.txt"
    out.write_text("old")
    out.chmod(0o600)
    assert run("summary", SNAP, "-o", out).returncode == 0
    assert out.stat().st_mode & 0o7777 == 0o600
    assert out.read_text().startswith("Device 0")


def test_a_new_file_gets_the_umasks_mode(memsight_bin, tmp_path):
    import subprocess
    out = tmp_path / "s.txt"
    subprocess.run([memsight_bin, "summary", str(SNAP), "-o", str(out)], check=True,
                   preexec_fn=lambda: os.umask(0o002), capture_output=True)
    assert out.stat().st_mode & 0o7777 == 0o664


def test_a_read_only_file_is_refused_unless_forced(run, tmp_path):
    out = tmp_path / "s.txt"
    out.write_text("kept")
    out.chmod(0o444)
    r = run("summary", SNAP, "-o", out)
    assert r.returncode == 2
    assert r.stderr.decode() == (f"memsight summary: {out}: the file is read-only (mode 0444); "
                                 "--force replaces it\n")
    assert out.read_text() == "kept" and hidden(tmp_path) == []
    r = run("summary", SNAP, "-o", out, "--force")
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("Device 0") and out.stat().st_mode & 0o7777 == 0o444


def test_a_link_is_written_through(run, tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    assert run("stats", SNAP, "-o", link).returncode == 0
    assert link.is_symlink() and target.read_text().startswith("Summary of segments")


def test_temporaries_of_a_killed_run_are_removed(memsight_bin, run, tmp_path):
    import subprocess
    gone = subprocess.Popen(["true"])
    gone.wait()  # a process id that no longer runs
    stale = tmp_path / f".s.txt.memsight-tmp-{gone.pid}-0a1b2c"
    stale.write_bytes(b"x" * 1000)
    live = tmp_path / f".s.txt.memsight-tmp-{os.getpid()}-0a1b2c"  # a writer still running
    live.write_bytes(b"x")
    other = tmp_path / f".t.txt.memsight-tmp-{gone.pid}-0a1b2c"  # another file's
    other.write_bytes(b"x")
    assert run("summary", SNAP, "-o", tmp_path / "s.txt").returncode == 0
    assert hidden(tmp_path) == sorted([live.name, other.name])


def test_a_write_that_fails_midway_leaves_no_temporary(memsight_bin, tmp_path):
    import resource
    import signal
    import subprocess
    out = tmp_path / "s.html"
    out.write_text("old")

    def small_files():  # writes past 64 KiB fail with EFBIG instead of killing the process
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))
    p = subprocess.run([memsight_bin, "view", str(SNAP), "-o", str(out)], preexec_fn=small_files,
                       capture_output=True)
    assert p.returncode == 2 and "File too large" in p.stderr.decode(), p.stderr
    assert out.read_text() == "old" and hidden(tmp_path) == []


@pytest.mark.parametrize("cmd", ["stats", "trace", "memory", "summary", "leaks", "whatif", "view",
                                 "convert", "ranks", "diff", "viewer"])
def test_every_command_takes_force(run, cmd):
    out = run(cmd, "--help").stdout.decode()
    assert "--force" in out and "read-only" in out, out


# One output-name rule for every command (issue 33, item 12): a name of a
# kind of file no command writes is refused before anything is read.
@pytest.mark.parametrize("cmd", [["summary"], ["leaks"], ["whatif"], ["diff", SNAP],
                                 ["ranks"], ["stats"], ["memory"], ["view"], ["convert"]])
@pytest.mark.parametrize("name", ["x.png", "x.PDF", "x.csv"])
def test_a_name_no_command_writes_is_refused(run, tmp_path, cmd, name):
    r = run(*cmd, SNAP, "-o", name, cwd=tmp_path)
    assert r.returncode == 2
    err = r.stderr.decode()
    assert err.startswith(f"memsight {cmd[0]}: -o {name} names ") and "does not write: it writes" in err
    assert len(err.splitlines()) == 1 and list(tmp_path.iterdir()) == []


def test_view_help_lists_device(run):
    assert "--device N" in run("view", "--help").stdout.decode()


def test_the_python_writer_keeps_modes_and_removes_stale_temporaries(tmp_path):
    # memsight.torch writes snapshots and pages through its own writer (no
    # compiled engine needed): the same rules as the engine's.
    import subprocess
    import sys
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / f".s.pickle.memsight-tmp-{gone.pid}-0a1b2c").write_bytes(b"x")
    code = (
        "import os, sys\n"
        "from memsight.torch._util.atomic import write_atomic\n"
        "os.umask(0o022)\n"
        "new, old = sys.argv[1] + '/n.pickle', sys.argv[1] + '/s.pickle'\n"
        "write_atomic(new, b'x')\n"
        "open(old, 'wb').close(); os.chmod(old, 0o640)\n"
        "write_atomic(old, b'y')\n"
        "print(oct(os.stat(new).st_mode & 0o777), oct(os.stat(old).st_mode & 0o777))\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2] / "python"))
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode().split() == ["0o644", "0o640"]
    assert hidden(tmp_path) == []

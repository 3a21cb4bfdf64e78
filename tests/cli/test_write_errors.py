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

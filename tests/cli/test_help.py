"""Help and version: one table of commands (src/cli/commands.cpp), one VERSION."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
COMMANDS = ["stats", "trace", "segments", "memory", "compare", "summary", "diff", "leaks",
            "whatif", "estimate", "view", "trace-plot", "segment-plot", "viewer", "convert", "ranks",
            "profile"]


def test_overview_lists_every_command(run):
    out = run("--help").stdout.decode()
    listed = re.findall(r"^  ([a-z][a-z-]*) ", out, re.M)
    assert sorted(set(listed)) == sorted(COMMANDS)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help_command_is_its_help(run, cmd):
    r = run("help", cmd)
    assert r.returncode == 0 and r.stdout.startswith(b"usage: memsight ")
    assert r.stdout == run(cmd, "--help").stdout


def test_help_alone_and_unknown(run):
    assert run("help").stdout == run("--help").stdout == run("help", "--help").stdout
    r = run("help", "frobnicate")
    assert r.returncode == 2 and b"unknown command 'frobnicate'" in r.stderr


def test_version_comes_from_the_version_file(run):
    version = (ROOT / "VERSION").read_text().strip()
    for flag in ("-V", "--version"):
        r = run(flag)
        assert r.returncode == 0 and r.stdout.decode() == f"memsight {version}\n"


def test_usage_errors_quote_the_help(run):
    r = run("leaks")
    assert r.returncode == 2
    usage = run("leaks", "--help").stdout.decode().splitlines()[0].removeprefix("usage: ")
    assert r.stderr.decode() == f"memsight leaks: missing argument; usage: {usage}\n"


def test_repeated_options(run):
    # --set repeats (its values join); --at and --at-step keep their order.
    r = run("whatif", "estimate", ROOT / "tests/data/oom.pickle", "--set", "expandable_segments:True",
            "--set=")
    assert r.returncode == 2 and b"--set needs a value such as" in r.stderr
    r = run("diff", ROOT / "tests/data/oom.pickle", "--at-step", "x")
    assert r.returncode == 2 and b"--at-step takes a step number, not 'x'" in r.stderr

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def memsight_bin():
    path = pathlib.Path(os.environ.get("MEMSIGHT_BIN", ROOT / "build" / "release" / "memsight"))
    if not path.exists():
        pytest.fail(f"memsight binary not built: {path} (run scripts/test.sh)")
    return str(path)


@pytest.fixture
def run(memsight_bin):
    def _run(*args, input=None, cwd=None):
        return subprocess.run([memsight_bin, *map(str, args)], capture_output=True, input=input,
                              cwd=cwd, timeout=120)
    return _run

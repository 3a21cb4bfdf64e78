"""`python -m memsight` and packaging odds and ends."""

from __future__ import annotations

import glob
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memsight_testlib import DATA, PYTHON_DIR, REPO


def _run(args, env_extra=None, timeout=60):
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    for var in ("_MEMSIGHT_VIA_PYTHON", "MEMSIGHT_BIN", "MEMSIGHT_EXE"):
        env.pop(var, None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "memsight", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def _cli_binary() -> str | None:
    for var in ("MEMSIGHT_EXE", "MEMSIGHT_BIN"):
        if os.environ.get(var) and os.access(os.environ[var], os.X_OK):
            return os.environ[var]
    for cand in sorted(glob.glob(str(REPO / "build" / "*" / "memsight"))):
        if os.access(cand, os.X_OK) and os.path.isfile(cand):
            return cand
    return None


def _has_cli_main() -> bool:
    try:
        from memsight import _core
    except ImportError:
        return False
    return hasattr(_core, "cli_main")


def test_python_m_memsight_runs_the_cli():
    exe = _cli_binary()
    if exe is None and not _has_cli_main():
        pytest.skip("neither memsight._core.cli_main nor a built memsight executable")
    env = {"MEMSIGHT_EXE": exe} if exe else {}
    out = _run(["stats", str(DATA / "mlp_train.pickle")], env)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (DATA / "mlp_train.stats.txt").read_text() + "\n"  # print() adds one
    bad = _run(["stats", str(DATA / "no-such-file.pickle")], env)
    assert bad.returncode == 2 and "no-such-file.pickle" in bad.stderr


def test_python_m_memsight_delegates_arguments_and_exit_code(tmp_path):
    if _has_cli_main():
        pytest.skip("the in-process CLI is used")
    fake = tmp_path / "memsight"
    fake.write_text("#!/bin/sh\necho \"args: $*\"\nexit 7\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    out = _run(["stats", "x y.pickle"], {"MEMSIGHT_EXE": str(fake)})
    assert out.returncode == 7 and out.stdout == "args: stats x y.pickle\n"


def test_python_m_memsight_without_a_cli_says_so(tmp_path):
    if _has_cli_main():
        pytest.skip("the in-process CLI is used")
    out = _run(["stats"], {"MEMSIGHT_EXE": "", "PATH": str(tmp_path)})
    assert out.returncode == 2 and "MEMSIGHT_EXE" in out.stderr


def test_path_wrapper_cannot_loop(tmp_path):
    if _has_cli_main():
        pytest.skip("the in-process CLI is used")
    wrapper = tmp_path / "memsight"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m memsight \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    out = _run(["stats"], {"MEMSIGHT_EXE": "", "PATH": f"{tmp_path}:/usr/bin:/bin"}, timeout=30)
    assert out.returncode == 2  # the wrapper ran once, then memsight refused to recurse


def test_pyproject_builds_the_cmake_module():
    import tomllib

    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert cfg["build-system"]["build-backend"] == "scikit_build_core.build"
    assert cfg["tool"]["scikit-build"]["wheel"]["packages"] == ["python/memsight"]
    # The wheel compiles the compression libraries in and ships the engine
    # once: the module, whose CLI the entry point runs (no bin/memsight).
    assert cfg["tool"]["scikit-build"]["cmake"]["define"]["MEMSIGHT_BUNDLED_COMPRESSION"] == "ON"
    assert cfg["project"]["scripts"]["memsight"] == "memsight.__main__:main"
    cmake = (REPO / "CMakeLists.txt").read_text()
    assert "python/src/core_module.cpp" in cmake and "memsight/bin" not in cmake
    assert Path(PYTHON_DIR / "memsight" / "__main__.py").exists()

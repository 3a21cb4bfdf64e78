"""memsight/_core.pyi matches the built module (scripts/core_stubs.py)."""

import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def test_stubs_match_the_built_module():
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "core_stubs.py"), "--check"],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_every_public_name_has_a_stub():
    from memsight import _core

    with open(os.path.join(ROOT, "python", "memsight", "_core.pyi")) as f:
        stubs = f.read()
    for name in dir(_core):
        if not name.startswith("_"):
            assert f"def {name}(" in stubs or f"class {name}" in stubs, name

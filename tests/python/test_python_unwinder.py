"""The native recorder's Python unwinder (memsight/torch/native/python_unwinder.cpp)
against a reference that reads frames through CPython's C API with the GIL held, as
torch's unwinder does. torch's C++ headers are not needed: native_stub/ stands in for
the part of torch's interface the unwinder uses (the GPU suite checks it against torch's
own unwinder: tests/gpu/test_native_record_gpu.py)."""

from __future__ import annotations

import asyncio
import ctypes
import shutil
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "python" / "memsight" / "torch" / "native" / "python_unwinder.cpp"
STUB = Path(__file__).parent / "native_stub"
INCLUDE = Path(sysconfig.get_paths()["include"])

pytestmark = pytest.mark.skipif(
    not ((3, 11) <= sys.version_info[:2] <= (3, 12)) or shutil.which("g++") is None
    or not (INCLUDE / "internal" / "pycore_frame.h").is_file(),
    reason="the unwinder reads CPython 3.11/3.12 frames; needs g++ and Python's internal headers")


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    out = tmp_path_factory.mktemp("unwinder") / "unwinder.so"
    cmd = ["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
           "-fvisibility=hidden", f"-I{STUB}", f"-I{INCLUDE}", str(SOURCE),
           str(STUB / "unwinder_harness.cpp"), "-o", str(out), "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    lib = ctypes.CDLL(str(out))  # CDLL releases the GIL, as torch's allocator runs
    lib.memsight_unwinder_counts.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
    lib.memsight_unwinder_compact.argtypes = [ctypes.c_int]
    return lib


@pytest.fixture(params=["frames", "stack ids"], autouse=True)
def compact(request: pytest.FixtureRequest, lib: ctypes.CDLL) -> object:
    # Every test runs twice: each event's frames, and one frame standing for
    # the whole stack, expanded when symbolised (MEMSIGHT_NATIVE_STACK_IDS).
    lib.memsight_unwinder_compact(1 if request.param == "stack ids" else 0)
    yield request.param
    lib.memsight_unwinder_compact(0)


def check(lib: ctypes.CDLL) -> int:
    frames, err = ctypes.c_int(0), ctypes.create_string_buffer(512)
    rc = lib.memsight_unwinder_check(ctypes.byref(frames), err, len(err))
    assert rc == 0, err.value.decode()
    return frames.value


def counts(lib: ctypes.CDLL) -> list[int]:
    out = (ctypes.c_uint64 * 4)()
    lib.memsight_unwinder_counts(out)
    return list(out)


def test_equal_to_the_reference_at_every_depth(lib: ctypes.CDLL) -> None:
    def deep(k: int) -> int:
        return check(lib) if k == 0 else deep(k - 1)

    base = check(lib)
    assert base >= 2  # check() and this test, at least
    for k in (1, 5, 40):
        assert deep(k) == base + k + 1


def test_generators_comprehensions_classes_lambdas_handlers(lib: ctypes.CDLL) -> None:
    def gen():  # noqa: ANN202
        yield check(lib)

    assert next(gen()) >= 3
    assert [check(lib) for _ in range(2)][0] >= 2

    class Body:
        frames = check(lib)

    assert Body.frames >= 2
    assert (lambda: check(lib))() >= 2
    try:
        raise ValueError("x")
    except ValueError:
        assert check(lib) >= 2

    async def coroutine() -> int:
        return check(lib)

    assert asyncio.run(coroutine()) >= 2


def test_non_ascii_names(lib: ctypes.CDLL) -> None:
    ns: dict = {"check": check, "lib": lib}
    exec(compile("def ñandú_测试():\n    return check(lib)\n", "módulo_é.py", "exec"), ns)
    assert ns["ñandú_测试"]() >= 3


def test_other_threads_and_threads_without_python(lib: ctypes.CDLL) -> None:
    out: list[int] = []
    t = threading.Thread(target=lambda: out.append(check(lib)))
    t.start()
    t.join()
    assert out and out[0] >= 2
    err = ctypes.create_string_buffer(512)
    assert lib.memsight_unwinder_check_thread(err, len(err)) == 0, err.value.decode()


def test_each_distinct_stack_is_resolved_once(lib: ctypes.CDLL) -> None:
    def same_place() -> None:
        check(lib)

    seen = []
    for _ in range(51):
        same_place()
        seen.append(counts(lib))
    assert seen[-1][0] - seen[0][0] >= 50  # gathered every time
    assert seen[-1][1] == seen[0][1]  # nothing resolved after the first: one stack, already known


def test_a_code_object_born_where_another_died_is_not_mistaken_for_it(lib: ctypes.CDLL) -> None:
    # Fresh code objects, compiled and dropped one after another, often reuse an
    # address: each must still be named by its own file, name and lines.
    for i in range(30):
        ns: dict = {"check": check, "lib": lib}
        src = "\n" * i + f"def fn_{i}():\n    return check(lib)\n"
        exec(compile(src, f"generated_{i}.py", "exec"), ns)
        assert ns[f"fn_{i}"]() >= 3
        del ns


def test_code_deaths_are_watched_where_python_tells_them(lib: ctypes.CDLL) -> None:
    # From 3.12 a code object's death is told to watchers, and a stack found
    # is then valid without reading its code objects at each event; 3.11
    # checks them at each hit instead. The test above covers both ways.
    check(lib)
    assert counts(lib)[3] == (1 if sys.version_info >= (3, 12) else 0)

"""The CUDA allocator's counters read natively: built on first use, cached.

``native/counters.cpp`` reads c10's ``DeviceStats`` into an int64 array, so
the line profiler samples without building torch's 122-number dict at every
line. It is compiled once per torch installation with the C++ compiler on the
PATH (``$CXX``, else ``c++``, ``g++``, ``clang++``) against the headers that
torch's wheel ships, into ``$MEMSIGHT_CACHE_DIR`` (default
``~/.cache/memsight``). A failed build is remembered there (a ``.failed``
file saying why) and not tried again for that torch; without a compiler or
headers the profiler reads ``torch._C._cuda_memoryStats`` as before.
``MEMSIGHT_NATIVE_COUNTERS=0`` turns the native reader off.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..._errors import MemsightError

log = logging.getLogger("memsight.torch")
NATIVE_DIR = Path(__file__).parent.parent / "native"  # memsight/torch/native
ABI = 1  # MEMSIGHT_COUNTERS_ABI in native/counters_abi.h


class _Table(ctypes.Structure):
    _fields_ = [("abi", ctypes.c_int32), ("count", ctypes.c_int32),
                ("names", ctypes.POINTER(ctypes.c_char_p)),
                ("read", ctypes.c_void_p), ("reset", ctypes.c_void_p)]


@dataclass
class NativeCounters:
    """A loaded counter reader: ``address`` is what ``Hook.use_counters`` takes."""

    path: Path
    address: int
    names: tuple[str, ...]
    library: Any  # the ctypes handle, kept so the library stays loaded


def cache_dir() -> Path:
    env = os.environ.get("MEMSIGHT_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "memsight"


def find_compiler() -> str | None:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return name
    return None


def build_library(name: str, source: Path, args: list[str]) -> Path:
    """Compiles ``source`` into a shared library in the cache, once per content and flags.

    Raises MemsightError when there is no compiler or the build fails; a failure is
    remembered beside the library and raised again without compiling.
    """
    cxx = find_compiler()
    if cxx is None:
        raise MemsightError("no C++ compiler found (set CXX)")
    digest = hashlib.sha256()
    headers = [h.read_bytes() for h in sorted(NATIVE_DIR.glob("*.h"))]
    for part in (source.read_bytes(), *headers,
                 cxx.encode(), "\0".join(args).encode(), sysconfig.get_platform().encode()):
        digest.update(part)
        digest.update(b"\0")
    out = cache_dir() / f"{name}-{digest.hexdigest()[:16]}.so"
    failed = out.with_suffix(".failed")
    if out.exists():
        return out
    if failed.exists():
        raise MemsightError(f"an earlier build failed ({failed}): "
                            + failed.read_text(errors="replace").strip().splitlines()[-1])
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    cmd = [cxx, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-I", str(NATIVE_DIR),
           "-o", str(tmp), str(source), *args]
    log.info("memsight: building %s (once): %s", out.name, " ".join(cmd))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        r = subprocess.CompletedProcess(cmd, 1, "", str(e))
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        lines = [ln for ln in (r.stderr or r.stdout).splitlines() if "error" in ln] or \
            (r.stderr or r.stdout).strip().splitlines()[-1:] or ["exit status %d" % r.returncode]
        failed.write_text(" ".join(cmd) + "\n" + "\n".join(lines[:20]) + "\n")
        raise MemsightError(f"building {source.name} failed: {lines[0].strip()}")
    os.replace(tmp, out)  # atomic: a concurrent process sees the old state or the whole library
    return out


def load_library(path: Path) -> NativeCounters:
    lib = ctypes.CDLL(str(path))
    fn = lib.memsight_counters
    fn.restype = ctypes.POINTER(_Table)
    table = fn().contents
    if table.abi != ABI or table.count <= 0:
        raise MemsightError(f"{path} is not a counter reader of ABI {ABI}")
    names = tuple(table.names[i].decode() for i in range(table.count))
    return NativeCounters(path, ctypes.addressof(table), names, lib)


def _cuda_include_dirs() -> list[str]:
    """Where the CUDA runtime's headers may be: the toolkit, or NVIDIA's pip wheels."""
    dirs = [os.path.join(os.environ[v], "include") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    dirs.append("/usr/local/cuda/include")
    for entry in sys.path:
        nvidia = Path(entry or ".") / "nvidia"
        if nvidia.is_dir():
            dirs += [str(p.parent) for p in nvidia.glob("*/include/cuda_runtime_api.h")]
    return [d for d in dict.fromkeys(dirs) if os.path.exists(os.path.join(d, "cuda_runtime_api.h"))]


def switched_on(variable: str) -> bool:
    """A native path's switch: on unless ``variable`` says 0, false, no or off."""
    return os.environ.get(variable, "1").strip().lower() not in ("0", "false", "no", "off")


def torch_flags(torch: Any, needs: str = "c10") -> list[str]:
    """The compiler flags every native build against the installed torch shares: its
    headers, its C++ ABI, its libraries' folder. ``needs``: the header folder (under
    torch's include/) whose absence means torch's C++ headers are not installed."""
    root = Path(torch.__file__).parent
    include, lib = root / "include", root / "lib"
    if not (include / needs).is_dir():
        raise MemsightError(f"torch's C++ headers are not installed (no {include / needs})")
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    return [f"-I{include}", f"-I{include / 'torch' / 'csrc' / 'api' / 'include'}",
            f"-D_GLIBCXX_USE_CXX11_ABI={abi}", f"-L{lib}", f"-Wl,-rpath,{lib}", "-std=c++17",
            f"-DMEMSIGHT_TORCH_VERSION=\"{torch.__version__}\""]


def torch_build_variants(torch: Any) -> list[tuple[str, list[str]]]:
    """Compiler flags for the installed torch: c10's device-generic interface, then c10/cuda."""
    common = torch_flags(torch)
    variants = [("device_allocator", common + ["-lc10"])]
    cuda = _cuda_include_dirs()
    if cuda:
        variants.append(("cuda_headers", common + [f"-I{d}" for d in cuda]
                         + ["-DMEMSIGHT_VIA_CUDA_HEADERS", "-lc10_cuda", "-lc10"]))
    return variants


def load_torch_counters(torch: Any, device: int) -> NativeCounters:
    """The native reader for this torch, checked against ``torch.cuda.memory_stats(device)``."""
    errors = []
    for variant, args in torch_build_variants(torch):
        try:
            counters = load_library(build_library("counters", NATIVE_DIR / "counters.cpp", args))
            break
        except (MemsightError, OSError, AttributeError) as e:
            errors.append(f"{variant}: {e}")
    else:
        raise MemsightError("; ".join(errors))
    check_against_torch(counters, torch, device)
    return counters


_READ_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64),
                            ctypes.c_char_p, ctypes.c_int)
_read_fns: dict[int, Any] = {}  # table address -> its read function, made once


def read(counters: NativeCounters, device: int) -> dict[str, int]:
    """One read through the native table, as a flat dict (checks and MemProfiler's
    per-call reads; the line profiler reads the table natively)."""
    fn = _read_fns.get(counters.address)
    if fn is None:
        table = _Table.from_address(counters.address)
        fn = _read_fns.setdefault(counters.address, _READ_FN(table.read))
    out = (ctypes.c_int64 * len(counters.names))()
    err = ctypes.create_string_buffer(256)
    if fn(device, out, err, len(err)) != 0:
        raise MemsightError(f"reading the counters failed: {err.value.decode(errors='replace')}")
    return dict(zip(counters.names, out))


def check_against_torch(counters: NativeCounters, torch: Any, device: int) -> None:
    """Every counter torch names is read natively, with torch's value (one retry, in case
    another thread allocated in between)."""
    for _ in range(2):
        ours = read(counters, device)
        theirs = {k: int(v) for k, v in torch.cuda.memory_stats(device).items()}
        missing = sorted(set(theirs) - set(ours))
        if missing:
            raise MemsightError(f"torch has counters the native reader lacks: {', '.join(missing[:5])}")
        differ = sorted(k for k, v in theirs.items() if ours[k] != v)
        if not differ:
            return
    raise MemsightError(f"the native reader disagrees with torch on {', '.join(differ[:5])}")


def wanted() -> bool:
    return switched_on("MEMSIGHT_NATIVE_COUNTERS")

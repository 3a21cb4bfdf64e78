#!/usr/bin/env python3
"""Give a freshly built memsight wheel the manylinux tag it really meets.

A wheel built by scikit-build-core is tagged ``linux_x86_64``, which an index
refuses and pip installs only on the machine that built it. The manylinux
rule (PEP 600) is about what the compiled files need from the system: only
the libraries every glibc-based Linux has, and no symbol newer than glibc
2.N; such a wheel may be tagged ``manylinux_2_N_<arch>``. This script reads
every ELF file in the wheel with ``readelf`` (binutils), checks the first
part, takes N from the newest ``GLIBC_2.N`` symbol version they reference,
and rewrites the wheel with that tag (its WHEEL file, RECORD and name). It
refuses, naming the file and the library, a wheel that needs anything else
(a system libstdc++, zstd, ...): such a wheel would fail on other machines.

On a machine with a package index, ``auditwheel repair`` does the same and
can also copy the missing libraries in; memsight's wheel needs none (its
CMake build links the C++ runtime and the compression libraries in).

    scripts/wheel_tag.py dist/memsight-*.whl   # prints the new wheel's path
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile

# The libraries a manylinux wheel may leave to the system (PEP 600 points at
# the manylinux policies, which list these for every glibc-based tag).
SYSTEM_LIBRARIES = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
    "libutil.so.1", "libgcc_s.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
}


def readelf(args: list[str], path: str) -> str:
    return subprocess.run(["readelf", "-W", *args, path], check=True, capture_output=True,
                          text=True).stdout


def is_elf(data: bytes) -> bool:
    return data[:4] == b"\x7fELF"


def needs(path: str) -> tuple[list[str], tuple[int, int]]:
    """(the libraries it needs, the newest glibc version it references)."""
    libs = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", readelf(["-d"], path))
    newest = (2, 0)
    for major, minor in re.findall(r"GLIBC_(\d+)\.(\d+)", readelf(["-V"], path)):
        newest = max(newest, (int(major), int(minor)))
    return libs, newest


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def retag(wheel: str) -> str:
    with zipfile.ZipFile(wheel) as z:
        entries = [(info, z.read(info)) for info in z.infolist()]
    newest = (2, 5)  # the oldest manylinux_2_N tag
    arch = None
    with tempfile.TemporaryDirectory() as tmp:
        for info, data in entries:
            if not is_elf(data):
                continue
            path = os.path.join(tmp, "elf")
            with open(path, "wb") as f:
                f.write(data)
            libs, glibc = needs(path)
            foreign = [lib for lib in libs if lib not in SYSTEM_LIBRARIES]
            if foreign:
                raise SystemExit(f"wheel_tag: {info.filename} needs {', '.join(foreign)}, which a "
                                 "manylinux wheel may not leave to the system")
            newest = max(newest, glibc)
            machine = re.search(r"Machine:\s+(.+)", readelf(["-h"], path))
            arch = "x86_64" if machine and "X86-64" in machine.group(1) else arch or "aarch64"
    if arch is None:
        raise SystemExit(f"wheel_tag: {wheel} holds no compiled file")
    platform = f"manylinux_{newest[0]}_{newest[1]}_{arch}"
    name = os.path.basename(wheel)
    parts = name[: -len(".whl")].split("-")
    if not parts[-1].startswith("linux_"):
        raise SystemExit(f"wheel_tag: {name} is not a plain linux_* wheel")
    parts[-1] = platform
    out = os.path.join(os.path.dirname(wheel), "-".join(parts) + ".whl")
    records = []
    rewritten = []
    for info, data in entries:
        if info.filename.endswith(".dist-info/WHEEL"):
            text = data.decode()
            text = re.sub(r"^(Tag: [^-\n]+-[^-\n]+-)linux_\w+$", rf"\g<1>{platform}", text,
                          flags=re.M)
            data = text.encode()
        if info.filename.endswith(".dist-info/RECORD"):
            record_name = info.filename
            continue
        records.append(record_line(info.filename, data))
        rewritten.append((info, data))
    records.append(f"{record_name},,")
    with zipfile.ZipFile(out + ".tmp", "w", zipfile.ZIP_DEFLATED) as z:
        for info, data in rewritten:
            z.writestr(info, data)
        z.writestr(record_name, "\n".join(records) + "\n")
    os.replace(out + ".tmp", out)
    if out != wheel:
        os.remove(wheel)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    print(retag(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

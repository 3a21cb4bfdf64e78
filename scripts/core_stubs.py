#!/usr/bin/env python3
"""Write python/memsight/_core.pyi, the type stubs of the compiled module.

The signatures come from the built module itself: pybind11 puts each
function's signature on the first line of its docstring, in Python's own
notation. The stubs give type checkers and editors what the module's
functions take and return; tests/python/test_core_stubs.py fails when they
no longer match the module (run this script again after changing a binding).

    PYTHONPATH=python scripts/core_stubs.py          # rewrite the stubs
    PYTHONPATH=python scripts/core_stubs.py --check  # exit 1 if stale
"""

from __future__ import annotations

import inspect
import os
import re
import sys

HEADER = '''"""Type stubs of memsight._core (written by scripts/core_stubs.py from the
built module: do not edit by hand)."""

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

'''
IMPORTS: set[str] = set()  # the module's own Python classes the stubs name
STUBS = os.path.join(os.path.dirname(__file__), "..", "python", "memsight", "_core.pyi")


def clean(sig: str) -> str:
    sig = sig.replace("memsight._core.", "")
    # pybind11 prints a default it cannot spell as `<object at 0x...>`.
    sig = re.sub(r"= <[^>]*>", "= ...", sig)
    sig = re.sub(r"= (-?\d+(\.\d+)?|'[^']*'|\"[^\"]*\"|True|False|None|b'')", "= ...", sig)
    # pybind11's name for "anything with the buffer protocol" (bytes, memoryview, ...).
    return re.sub(r"\bbuffer\b", "Any", sig)


def signatures(obj: object) -> list[str]:
    """The signature lines of a pybind11 function (overloads give several)."""
    doc = getattr(obj, "__doc__", None) or ""
    name = getattr(obj, "__name__", "")
    found = re.findall(rf"^(?:\d+\. )?{re.escape(name)}(\(.*\) -> .*)$", doc, flags=re.M)
    return [clean(s) for s in found]


def function_stub(name: str, obj: object, indent: str = "") -> list[str]:
    sigs = signatures(obj)
    if not sigs:
        return [f"{indent}def {name}(*args: Any, **kwargs: Any) -> Any: ..."]
    deco = [f"{indent}@overload"] if len(sigs) > 1 else []
    out = []
    for s in sigs:
        out += deco + [f"{indent}def {name}{s}: ..."]
    return out


def property_stub(name: str, prop: property) -> list[str]:
    sigs = signatures(prop.fget) if prop.fget else []
    ret = sigs[0].rsplit("-> ", 1)[1] if sigs else "Any"
    return ["    @property", f"    def {name}(self) -> {ret}: ..."]


def class_stub(name: str, cls: type) -> list[str]:
    if issubclass(cls, BaseException):
        base = cls.__mro__[1]
        if base.__module__.startswith("memsight."):
            IMPORTS.add(f"from {base.__module__.replace('memsight.', '.', 1)} import {base.__name__}")
        return [f"class {name}({base.__name__}): ..."]
    out = [f"class {name}:"]
    body = []
    for attr, value in sorted(vars(cls).items()):
        # Classes made only by the module have no constructor to stub.
        if attr.startswith("__") and not (attr == "__init__" and signatures(value)):
            continue
        if isinstance(value, property):
            body += property_stub(attr, value)
        elif callable(value):
            body += function_stub(attr, value, "    ")
    return out + (body or ["    ..."])


def stubs(module: object) -> str:
    lines: list[str] = []
    for name, value in sorted(vars(module).items()):
        if name.startswith("_"):
            continue
        if inspect.isclass(value):
            lines += class_stub(name, value) + [""]
        elif callable(value):
            lines += function_stub(name, value)
        elif isinstance(value, (int, str, float)):
            lines.append(f"{name}: {type(value).__name__}")
    imports = "".join(line + "\n" for line in sorted(IMPORTS))
    text = HEADER + imports + ("\n" if imports else "") + "\n".join(lines).rstrip() + "\n"
    if "@overload" in text:
        text = text.replace("from typing import Any,", "from typing import overload, Any,")
    return text


def main(argv: list[str]) -> int:
    from memsight import _core

    text = stubs(_core)
    path = os.path.normpath(STUBS)
    if argv == ["--check"]:
        with open(path) as f:
            if f.read() != text:
                print(f"{path} does not match the built module: run scripts/core_stubs.py",
                      file=sys.stderr)
                return 1
        return 0
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

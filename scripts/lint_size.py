#!/usr/bin/env python3
"""The size rule of the code standards: no source file over 500 lines, no
function over 80 lines unless it is one idea (an opcode switch, a per-entry
switch, one table of data) named in scripts/lint_size_allow.txt with its
reason.

Looks at the tracked C++, Python and JavaScript files under src/, include/,
python/ and viewer/src. Functions are found by a brace scan for C++ and
JavaScript (comments, strings and preprocessor lines blanked first; good
enough for this code base, not a parser) and by ast for Python. A function's
length runs from the line that names it to the line that closes it, nested
functions included.

    scripts/lint_size.py            # exits 1 and lists what is over
    scripts/lint_size.py --list     # every function over, allowed or not

Allow-list lines: ``PATH:NAME: reason`` (NAME as this script prints it:
``Class::method`` for C++, ``Class.method`` for Python).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
ROOT = Path(__file__).resolve().parents[1]
ALLOW = ROOT / "scripts" / "lint_size_allow.txt"
ROOTS = ("src/", "include/", "python/", "viewer/src/")
CPP = (".cpp", ".cc", ".h", ".hpp", ".c")
JS = (".js", ".mjs")
PY = (".py",)


@dataclass
class Function:
    name: str
    line: int
    lines: int


def blank(match: re.Match[str]) -> str:
    """A comment or literal as spaces, its newlines kept (lines stay put)."""
    return re.sub(r"[^\n]", " ", match.group(0))


# ---- C++ ------------------------------------------------------------------

CPP_NOISE = re.compile(
    r"//[^\n]*"
    r"|/\*.*?\*/"
    r'|R"(?P<d>[^(\s]{0,16})\(.*?\)(?P=d)"'
    r'|"(?:\\.|[^"\\\n])*"'
    r"|(?<![0-9A-Fa-f_])'(?:\\.|[^'\\\n]){1,8}'"  # not a digit separator
    r"|^[ \t]*#(?:\\\n|[^\n])*",
    re.S | re.M,
)
CPP_NOT_NAMES = {
    "if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "decltype",
    "static_assert", "noexcept", "throw", "requires", "alignas", "__attribute__", "defined",
}  # fmt: skip
CPP_TAIL = re.compile(
    r"\s*(?:(?:const|volatile|override|final|mutable|&&?|noexcept(?:\s*\([^()]*\))?"
    r"|->[^{;=]*?|requires\b[^{;]*?)\s*)*$"
)
ACCESS = re.compile(r"^\s*(?:(?:public|private|protected)\s*:(?!:)\s*)+")


def paren_groups(h: str) -> list[tuple[int, int]]:
    """The top-level (...) of a header, as (open, close) positions."""
    groups, depth, start = [], 0, 0
    for i, c in enumerate(h):
        if c == "(":
            if depth == 0:
                start = i
            depth += 1
        elif c == ")" and depth > 0:
            depth -= 1
            if depth == 0:
                groups.append((start, i))
    return groups


def cpp_name_before(text: str) -> str | None:
    """The (qualified) function name a parameter list follows, or None."""
    text = re.sub(r"<[^<>()]*>\s*$", "", text.rstrip()).rstrip()  # f<T>(
    m = re.search(r"((?:~?\w+\s*::\s*)*)(operator\s*(?:\(\s*\)|\[\s*\]|[^\s\w(]+|\s\w[\w:]*)|~?\w+)$", text)
    if not m or m.group(2) in CPP_NOT_NAMES or m.group(2)[0].isdigit():
        return None
    return re.sub(r"\s+", "", m.group(0)) if "operator" not in m.group(2) else m.group(0).strip()


def cpp_function_name(h: str) -> str | None:
    """The name of the function whose body the '{' after header h opens."""
    groups = paren_groups(h)
    if not groups:
        return None
    # A constructor's initializer list: the parameters come before its ':'.
    colon = re.search(r"(?<!:):(?!:)", h[groups[0][1] :])
    if colon:
        cut = groups[0][1] + colon.start()
        groups = [g for g in groups if g[1] < cut]
    for open_, close in reversed(groups):
        name = cpp_name_before(h[:open_])
        if name is None:
            continue
        if "=" in re.sub(r"operator\s*\S+", "", h[:open_]):
            return None  # an initialized variable, not a definition
        tail = h[close + 1 : cut] if colon else h[close + 1 :]
        return name if CPP_TAIL.fullmatch(tail) else None
    return None


def cpp_brace_kind(h: str) -> tuple[str, str]:
    """What a '{' at namespace or class level opens, from the text before it."""
    h = ACCESS.sub("", h).strip()
    h = re.sub(r"^template\s*<.*?>\s*(?=[a-z])", "", h, flags=re.S)
    if re.match(r"(namespace|extern)\b", h):
        return "scope", ""
    m = re.match(r"(?:class|struct|union)\s+(?:\[\[.*?\]\]\s*)?(\w+)", h)
    if m and not h.endswith(")"):
        return "scope", m.group(1)
    if re.match(r"enum\b", h):
        return "other", ""
    name = cpp_function_name(h)
    if name is not None:
        # `: a_{x}, b_(y) {`: a member's braces inside an initializer list.
        if re.search(r"\)\s*:(?!:)", h) and re.search(r"[\w>]$", h):
            return "init", ""
        return "function", name
    return "other", ""


def cpp_functions(text: str) -> list[Function]:
    code = CPP_NOISE.sub(blank, text)
    out: list[Function] = []
    # Each open brace: (kind, name, where its header started, line of the name).
    stack: list[tuple[str, str, int, int]] = []
    header = 0
    for m in re.finditer(r"[{};]", code):
        c, pos = m.group(0), m.start()
        in_body = any(k in ("function", "other") for k, *_ in stack)
        if c == ";":
            if not in_body:
                header = pos + 1
            continue
        if c == "{":
            if in_body:
                stack.append(("block", "", header, 0))
                continue
            kind, name = cpp_brace_kind(code[header:pos])
            if kind == "function":
                classes = [n for k, n, *_ in stack if k == "scope" and n]
                if "::" not in name and classes:
                    name = "::".join(classes + [name])
                at = code.rfind(name.split("::")[-1], header, pos)
                line = code.count("\n", 0, at if at >= 0 else pos) + 1
                stack.append((kind, name, header, line))
            else:
                stack.append((kind, name, header, 0))
            if kind != "init":
                header = pos + 1
            continue
        if not stack:
            continue  # unbalanced: a brace the blanking missed
        kind, name, start, line = stack.pop()
        if kind == "init":
            header = start  # the initializer list goes on
            continue
        if kind == "function":
            end = code.count("\n", 0, pos) + 1
            out.append(Function(name, line, end - line + 1))
        if not any(k in ("function", "other") for k, *_ in stack):
            header = pos + 1
    return out


# ---- JavaScript -----------------------------------------------------------

JS_NOISE = re.compile(
    r"//[^\n]*"
    r"|/\*.*?\*/"
    r'|"(?:\\.|[^"\\\n])*"'
    r"|'(?:\\.|[^'\\\n])*'"
    r"|`(?:\\.|[^`\\])*`"
    r"|(?<=[(,=:\[!&|?{};])\s*/(?![/*])(?:\\.|\[(?:\\.|[^\]\\\n])*\]|[^/\\\n\[])+/[a-z]*",
    re.S,
)
JS_NOT_NAMES = {"if", "for", "while", "switch", "catch", "with", "function", "return"}


def js_function_name(h: str, outer: str) -> str | None:
    h = h.strip()
    if h.endswith("=>"):
        m = re.search(r"([\w$]+)\s*[:=]\s*(?:async\s*)?(?:\([^()]*\)|[\w$]+)\s*=>$", h)
        return m.group(1) if m else f"{outer or '<module>'}/<arrow>"
    if not h.endswith(")"):
        return None
    groups = paren_groups(h)
    if not groups:
        return None
    before = h[: groups[-1][0]].rstrip()
    m = re.search(r"([\w$#]+)\s*\*?$", before)
    if not m or m.group(1) in JS_NOT_NAMES - {"function"}:
        return None
    if m.group(1) == "function":  # `x = function (` or `f(function (`
        n = re.search(r"([\w$]+)\s*[:=]\s*(?:async\s+)?function\s*\*?$", before)
        return n.group(1) if n else f"{outer or '<module>'}/<function>"
    if re.search(r"[.\w$]\s*$", before[: m.start()]) and not re.search(
        r"(?:^|[\s;{},])(?:async|static|get|set|function)\s*\*?\s*$", before[: m.start()]
    ):
        return None  # `a.b(x) {` is no definition
    return m.group(1)


def js_functions(text: str) -> list[Function]:
    code = JS_NOISE.sub(blank, text)
    out: list[Function] = []
    stack: list[tuple[str, int]] = []  # (function name or "", line)
    header = 0
    for m in re.finditer(r"[{};]", code):
        c, pos = m.group(0), m.start()
        if c == ";":
            header = pos + 1
        elif c == "{":
            outer = next((n for n, _ in reversed(stack) if n), "")
            name = js_function_name(code[header:pos], outer)
            line = code.count("\n", 0, pos) + 1
            stack.append((name or "", line))
            header = pos + 1
        else:
            if stack:
                name, line = stack.pop()
                if name:
                    end = code.count("\n", 0, pos) + 1
                    out.append(Function(name, line, end - line + 1))
            header = pos + 1
    return out


# ---- Python ---------------------------------------------------------------


def py_functions(text: str) -> list[Function]:
    out: list[Function] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                end = child.end_lineno or child.lineno
                out.append(Function(name, child.lineno, end - child.lineno + 1))
                walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            else:
                walk(child, prefix)

    walk(ast.parse(text), "")
    return out


# ---- the rule -------------------------------------------------------------


def read_allow() -> tuple[dict[tuple[str, str], str], list[str]]:
    allowed: dict[tuple[str, str], str] = {}
    errors = []
    for n, raw in enumerate(ALLOW.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        path, _, rest = line.partition(":")
        name, _, reason = rest.partition(": ")
        if not path or not name or not reason.strip():
            errors.append(f"{ALLOW.name}:{n}: want PATH:NAME: reason, got {line!r}")
            continue
        allowed[(path, name)] = reason.strip()
    return allowed, errors


def main() -> int:
    list_all = "--list" in sys.argv[1:]
    files = subprocess.run(
        ["git", "ls-files", "--", *ROOTS], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    allowed, problems = read_allow()
    used: set[tuple[str, str]] = set()
    checked = 0
    for path in files:
        if not path.endswith(CPP + JS + PY) or not (ROOT / path).is_file():
            continue
        text = (ROOT / path).read_text(encoding="utf-8", errors="replace")
        lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if lines > MAX_FILE_LINES:
            problems.append(f"{path}: {lines} lines (over {MAX_FILE_LINES}): split it by idea")
        if path.endswith(PY):
            try:
                functions = py_functions(text)
            except SyntaxError as e:
                problems.append(f"{path}:{e.lineno}: cannot parse: {e.msg}")
                continue
        else:
            functions = cpp_functions(text) if path.endswith(CPP) else js_functions(text)
        checked += len(functions)
        for f in functions:
            if f.lines <= MAX_FUNCTION_LINES:
                continue
            key = (path, f.name)
            where = f"{path}:{f.line}: {f.name} is {f.lines} lines (over {MAX_FUNCTION_LINES})"
            if key in allowed:
                used.add(key)
                if list_all:
                    print(f"{where}, allowed: {allowed[key]}")
            else:
                problems.append(f"{where}: split it by idea, or allow it in {ALLOW.name}")
    for path, name in sorted(set(allowed) - used):
        print(f"lint (sizes): note: {ALLOW.name} allows {path}:{name}, no longer over", file=sys.stderr)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"lint (sizes): {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"lint (sizes): {checked} functions clean, {len(used)} allowed by {ALLOW.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Who holds it: for the live storages at a dump, the Python names that keep
them alive, written beside the snapshot as the top-level key
``memsight_holders`` (docs/formats.md)::

    {"version": 1, "elapsed_ms": 12.5, "complete": true, "tensors": 1042,
     "holders": [{"path": "__main__.kept", "type": "list", "module": "__main__",
                  "file": "train.py", "line": 12}],
     "storages": [{"device": 0, "addr": 139..., "size": 1048576, "holder": 0,
                   "path": "__main__.kept[11]"}]}

How: the live tensors are the garbage collector's objects of a tensor type
(one pass over its lists); their referrers are found level by level upward
until a root names them: a module's globals (``module.name``), a running
frame's locals (``function:name``). An object only one other holds (a
module's attributes and children, a closure's cells: sole_holders.py)
climbs to it directly, and so does an item of a list, tuple or dict that a
running frame's local or a global of ``__main__`` (or of a running frame's
module) names (``losses[3]``, ``kept[11]``); the others cost a pass over the heap per level (the
gc's own ``get_referrers`` when few objects are looked for). The shortest path from a root
down to each tensor names it. The walk stops at a depth and a time budget;
whatever it did not name is simply absent. A tensor that an autograd graph
keeps (saved for backward) is named through the graph's output that a name
holds: ``evaluate:outputs[3].grad_fn``.

Off by default: on with ``MEMSIGHT_HOLDERS=1`` or ``holders=True`` to
``record``, OOMObserver or MemorySnapshot (an argument wins over the
variable). It lists the heap once and passes over it again only for
holders it cannot climb directly: 86-110 ms for 10,000 tensors of a
128,000-object heap (bench/holders_bench.py, bench/README.md), more than an
OOM dump's tens of milliseconds, so it waits for the user to ask. Nothing here raises into training: a failure is logged
and the snapshot is written without holders.
"""

from __future__ import annotations

import gc
import linecache
import logging
import os
import re
import sys
import threading
import time
import types
import weakref
from collections import deque
from functools import partial
from itertools import compress
from operator import not_
from typing import Any

from .live_storages import _storage_at, _storage_keys, _storage_size, live_tensors
from .sole_holders import SoleHolders, _key_text, root_containers, sole_holders

log = logging.getLogger("memsight")

HOLDERS_KEY = "memsight_holders"
MAX_DEPTH = 12
BUDGET_S = 0.25
_GRAPH_NODES = 20_000  # autograd nodes visited at most, over all graphs
_CHUNK = 512  # objects whose referents a heap pass asks for at once
_FEW = 16  # at most this many objects per level: the gc's get_referrers, else one pass
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Objects of these types hold no tensor a person would name (code, classes,
# descriptors, weak references); skipping them makes a pass over the heap cheaper.
_NEVER = {types.FunctionType, types.CodeType, type, types.ModuleType, types.BuiltinFunctionType,
          types.MethodDescriptorType, types.WrapperDescriptorType, types.GetSetDescriptorType,
          types.MemberDescriptorType, types.MethodWrapperType, property, staticmethod, classmethod,
          weakref.ReferenceType, weakref.ProxyType, weakref.CallableProxyType}

_settings: dict[int, bool] = {}
_next = [0]
_lock = threading.Lock()


def acquire_setting(enabled: bool | None) -> int | None:
    """An explicit on/off (``holders=`` of record and the callbacks) until
    :func:`release_setting`; the latest one wins. None sets nothing."""
    if enabled is None:
        return None
    with _lock:
        _next[0] += 1
        _settings[_next[0]] = bool(enabled)
        return _next[0]


def release_setting(token: int | None) -> None:
    if token is not None:
        with _lock:
            _settings.pop(token, None)


def enabled() -> bool:
    """The latest explicit setting, else MEMSIGHT_HOLDERS (1/on/true: on), else off."""
    with _lock:
        if _settings:
            return _settings[max(_settings)]
    return os.environ.get("MEMSIGHT_HOLDERS", "0").strip().lower() in ("1", "on", "true", "yes")


class _Graph:
    """The referrer edges found so far: child id -> [(parent id, label)]."""

    def __init__(self) -> None:
        self.objs: dict[int, Any] = {}
        self.parents: dict[int, list[tuple[int, str]]] = {}
        self.roots: dict[int, tuple[str, dict[str, Any]]] = {}  # id -> (root path, where)


def _edge_labels(parent: Any, wanted: set[int]) -> list[tuple[int, str]]:
    """How ``parent`` refers to the objects of ``wanted`` (ids), in one pass
    over it: (child id, "[3]" | "['key']" | ".attr" | ...)."""
    if isinstance(parent, dict):
        out = [(id(v), f"[{_key_text(k)}]") for k, v in parent.items() if id(v) in wanted]
        return out + [(id(k), f"{{{_key_text(k)}}}") for k in parent if id(k) in wanted]
    if isinstance(parent, (list, tuple, deque)):
        return [(id(v), f"[{i}]") for i, v in enumerate(parent) if id(v) in wanted]
    if isinstance(parent, types.CellType):
        return [(id(parent.cell_contents), "")]
    if isinstance(parent, types.FunctionType):
        # its closure is a tuple of cells; tidy() turns "<closure a|b>[1]" into " \u2192 b"
        cells = parent.__closure__
        return [(id(cells), f"<closure {'|'.join(parent.__code__.co_freevars)}>")] if id(cells) in wanted else []
    out = []
    d = getattr(parent, "__dict__", None)
    if isinstance(d, dict):
        if id(d) in wanted:
            out.append((id(d), ".__dict__"))
        out += [(id(v), f".{k}") for k, v in d.items() if id(v) in wanted]
    if isinstance(parent, types.MethodType) and id(parent.__self__) in wanted:
        out.append((id(parent.__self__), ".__self__"))
    named = {c for c, _ in out}
    return out + [(id(r), f"<{type(parent).__name__}>") for r in gc.get_referents(parent)
                  if id(r) in wanted and id(r) not in named]


def _module_roots() -> dict[int, str]:
    # a module known by two names (torch's __mp_main__ for __main__) by its own
    return {id(vars(m)): getattr(m, "__name__", name) for name, m in list(sys.modules.items())
            if m is not None and hasattr(m, "__dict__")}


def _frames() -> list[types.FrameType]:
    """The running frames of every thread but memsight's own."""
    out = []
    for top in sys._current_frames().values():
        f: types.FrameType | None = top
        while f is not None:
            if not f.f_code.co_filename.startswith(_PACKAGE) and f.f_locals is not f.f_globals:
                out.append(f)
            f = f.f_back
    return out


def _assignment_line(filename: str, name: str, first: int = 1) -> int:
    """The first line at or after ``first`` that assigns ``name``; 0 if none."""
    pat = re.compile(rf"^\s*{re.escape(name)}\s*(:[^=]*)?=(?!=)")
    for i, text in enumerate(linecache.getlines(filename)[first - 1:], start=first):
        if pat.match(text):
            return i
    return 0


def _root_of_frame_local(f: types.FrameType, name: str) -> tuple[str, dict[str, Any]]:
    code = f.f_code
    where = {"module": f.f_globals.get("__name__", ""), "file": code.co_filename,
             "line": _assignment_line(code.co_filename, name, code.co_firstlineno) or f.f_lineno}
    return f"{code.co_name}:{name}", where


def _root_of_global(module: str, name: str) -> tuple[str, dict[str, Any]]:
    mod = sys.modules.get(module)
    file = getattr(mod, "__file__", None) or ""
    line = _assignment_line(file, name) if file else 0
    return f"{module}.{name}", {"module": module, "file": file, "line": line}


class _Walk:
    """One upward walk from a set of tensors, bounded by depth and time."""

    def __init__(self, heap: list[Any], deadline: float, max_depth: int, kinds: list[type],
                 sole: SoleHolders) -> None:
        self.heap = heap
        self.kinds = kinds  # type of each object of heap
        self.sole = sole
        self.deadline = deadline
        self.max_depth = max_depth
        self.g = _Graph()
        self.modules = _module_roots()
        self.locals: dict[int, list[tuple[types.FrameType, str]]] = {}
        frames = _frames()
        for f in frames:
            for name, v in f.f_locals.items():
                self.locals.setdefault(id(v), []).append((f, name))
        self.global_names = root_containers(self.sole, frames)
        self.own = {id(self.g.objs), id(self.heap), id(self.g.parents), id(self.locals), id(kinds),
                    id(sole.parent), id(sole.objs)}
        self.complete = True

    def _referrers(self, frontier: list[Any]) -> list[Any]:
        """The gc's objects that refer to any of ``frontier``."""
        if len(frontier) <= _FEW:
            args = tuple(frontier)
            # a tuple handed to f(*args) is the call's argument tuple itself: one of the referrers
            return [r for r in gc.get_referrers(*args) if r is not args]
        ids = {id(o) for o in frontier}
        heap = list(compress(self.heap, map(not_, map(_NEVER.__contains__, self.kinds))))
        self.own.add(id(heap))
        out: list[Any] = []
        # A chunk's referents at once first (one call, one list): the few
        # chunks that hold any of `ids` are then asked object by object.
        # C-level: for each object, is any of its referents one of `ids`?
        for i in range(0, len(heap), _CHUNK):
            chunk = heap[i:i + _CHUNK]
            if not ids.isdisjoint(map(id, gc.get_referents(*chunk))):
                hits = map(not_, map(ids.isdisjoint, map(partial(map, id), map(gc.get_referents, chunk))))
                out.extend(compress(chunk, hits))
        return out

    def _name_roots(self, obj: Any) -> bool:
        """Records ``obj`` as a root if a frame local names it; True if so."""
        named = self.locals.get(id(obj))
        if not named:
            where = self.global_names.get(id(obj))
            if where is None:
                return False
            self.g.roots[id(obj)] = _root_of_global(*where)
            return True
        f, name = named[0]
        self.g.roots[id(obj)] = _root_of_frame_local(f, name)
        return True

    def _reached(self, r: Any, nxt: list[Any]) -> None:
        """``r`` holds something on a path: climb on from it, unless a frame
        local names it or it was reached already."""
        if id(r) not in self.g.objs:
            self.g.objs[id(r)] = r
            if not self._name_roots(r):
                nxt.append(r)

    def _climb_sole(self, frontier: list[Any]) -> list[Any]:
        """Climbs from ``frontier`` through the objects one other object
        holds, as far as they go (no level counted: it costs no heap
        pass); returns the objects reached that need the gc's referrers."""
        rest = []
        while frontier:
            self.sole.climb_closures(frontier)
            more: list[Any] = []
            for o in frontier:
                up = self.sole.up(o)
                if up is None:
                    rest.append(o)
                else:
                    self.g.parents.setdefault(id(o), []).append(up)
                    self._reached(self.sole.objs[up[0]], more)
            frontier = more
        return rest

    def run(self, tensors: list[Any]) -> None:
        g = self.g
        nxt: list[Any] = []
        for t in tensors:
            self._reached(t, nxt)
        frontier = nxt
        own_frames = {id(sys._getframe())}
        for _ in range(self.max_depth):
            if not frontier:
                return
            if time.perf_counter() > self.deadline:
                self.complete = False
                return
            nxt = []
            frontier = self._climb_sole(frontier)
            wanted = {id(o) for o in frontier}
            for r in self._referrers(frontier) if frontier else ():
                rid = id(r)
                if rid in self.own or rid in own_frames or r is frontier or r is wanted:
                    continue
                if isinstance(r, types.FrameType) and r.f_code.co_filename.startswith(_PACKAGE):
                    continue
                module = self.modules.get(rid)
                if module is not None:  # a module's global names them
                    for k, v in r.items():
                        if id(v) in wanted and id(v) not in g.roots:
                            g.roots[id(v)] = _root_of_global(module, str(k))
                elif isinstance(r, types.FrameType):  # a suspended frame (generator, traceback)
                    for k, v in r.f_locals.items():
                        if id(v) in wanted and id(v) not in g.roots:
                            g.roots[id(v)] = _root_of_frame_local(r, k)
                else:
                    for cid, label in _edge_labels(r, wanted):
                        g.parents.setdefault(cid, []).append((rid, label))
                    self._reached(r, nxt)
            frontier = nxt
        if frontier:
            self.complete = False

    def paths(self) -> dict[int, tuple[str, int, int]]:
        """id -> (path from its nearest root, id of that root, id of the
        object above it on the path; 0 at a root), shortest first."""
        g = self.g
        children: dict[int, list[tuple[int, str]]] = {}
        for c, ps in g.parents.items():
            for p, label in ps:
                children.setdefault(p, []).append((c, label))
        out: dict[int, tuple[str, int, int]] = {}
        queue: deque[int] = deque()
        for rid, (path, _) in g.roots.items():
            out[rid] = (path, rid, 0)
            queue.append(rid)
        while queue:
            n = queue.popleft()
            path, root, _ = out[n]
            for c, label in children.get(n, ()):
                if c not in out:
                    out[c] = (path + label, root, n)
                    queue.append(c)
        return out


_CLOSURE = re.compile(r"<closure ([^>]*)>\[(\d+)\]")
_ATTRIBUTE = re.compile(r"\.__dict__\['([A-Za-z_][A-Za-z0-9_]*)'\]")
_MODULE_DICTS = re.compile(r"\._(?:modules|parameters|buffers)\['([^']*)'\]")


def tidy(path: str) -> str:
    """A path as a person writes it: ``.__dict__['x']`` -> ``.x``, a module's
    ``._modules['1']`` -> ``.1``."""
    if "<closure " in path:
        path = _CLOSURE.sub(lambda m: " \u2192 " + m.group(1).split("|")[int(m.group(2))], path)
    if ".__dict__[" in path:
        path = _ATTRIBUTE.sub(r".\1", path)
    return _MODULE_DICTS.sub(r".\1", path) if "._" in path else path


_LAST_INDEXES = re.compile(r"(\[[^\[\]]*\]|\{[^{}]*\})+(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def holder_of(path: str) -> str:
    """The container a path goes through last: ``kept[11]`` -> ``kept``,
    ``cache[7][0]`` -> ``cache``, ``h[3].loss`` -> ``h``; a path without an
    index is its own holder."""
    m = _LAST_INDEXES.search(path)
    return path[: m.start()] if m and m.start() > 0 else path


def _graph_saved(tensors: list[Any], deadline: float) -> dict[int, list[Any]]:
    """For each tensor with an autograd graph: the tensors its graph saved
    for backward (id of the output -> saved tensors), bounded in nodes and time."""
    out: dict[int, list[Any]] = {}
    seen: set[int] = set()
    # The Python objects of a graph's nodes are made when asked for and die when
    # dropped, and a new one may take a dead one's id: kept here until the end.
    alive: list[Any] = []
    attrs: dict[type, list[str]] = {}
    for t in tensors:
        fn = getattr(t, "grad_fn", None)
        if fn is None or len(seen) >= _GRAPH_NODES or time.perf_counter() > deadline:
            continue
        saved: list[Any] = []
        stack = [fn]
        while stack and len(seen) < _GRAPH_NODES:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            alive.append(node)
            names = attrs.get(type(node))
            if names is None:
                names = attrs[type(node)] = [a for a in dir(node) if a.startswith("_saved_")]
            for a in names:
                try:
                    v = getattr(node, a)
                except Exception:  # freed by a backward already
                    continue
                for x in v if isinstance(v, (tuple, list)) else (v,):
                    if hasattr(x, "untyped_storage") or hasattr(x, "storage"):
                        saved.append(x)
            stack.extend(n for n, _ in getattr(node, "next_functions", ()))
        if saved:
            out[id(t)] = saved
    return out


def holders_value(device_type: str | None = "cuda", skip: Any = (), budget_s: float = BUDGET_S,
                  max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """The ``memsight_holders`` value now: who holds each live storage on
    ``device_type`` devices (None: any) but those in ``skip`` ((device,
    address) pairs, the tagged ones)."""
    start = time.perf_counter()
    deadline = start + budget_s
    heap = gc.get_objects()
    kinds = list(map(type, heap))
    tensors = live_tensors(heap, device_type, kinds)
    by_storage: dict[tuple[int, int], list[Any]] = {}
    skip = set(skip)
    for t, k in zip(tensors, _storage_keys(tensors)):
        if k is not None and k not in skip:
            by_storage.setdefault(k, []).append(t)
    n_tensors = len(tensors)
    del tensors
    # the last fifth of the budget (at most 50 ms) is kept for the autograd graphs
    reserve = min(0.05, budget_s / 5)
    walk = _Walk(heap, deadline - reserve, max_depth, kinds, sole_holders(heap, kinds))
    roots = [t for ts in by_storage.values() for t in ts]
    walk.own.update({id(by_storage), id(roots), *map(id, by_storage.values())})
    walk.run(roots)
    paths = walk.paths()
    held = [t for t in roots if id(t) in paths and t.requires_grad]
    # The graphs get their reserve however long the heap's passes took: in a
    # large process those can use the whole budget, and then a loss kept with
    # its graph would be named without what the graph keeps (most of the memory).
    saved = _graph_saved(held, max(deadline, time.perf_counter() + reserve))
    found: dict[tuple[int, int], tuple[str, int, int]] = {}
    first: dict[tuple[int, int], Any] = {}  # a tensor of each storage found
    for key, ts in by_storage.items():
        hits = [(paths[id(t)][:2] + (id(t),), t) for t in ts if id(t) in paths]
        if hits:
            found[key], first[key] = min(hits, key=lambda h: h[0])
    for t in held:  # what their autograd graphs saved, where nothing names it
        for s in saved.get(id(t), ()):
            sk = _storage_at(s)
            if sk is not None and sk not in found and sk not in skip:
                path, root = paths[id(t)][:2]
                found[sk], first[sk] = (path + ".grad_fn", root, id(t)), s
    del roots, held, saved
    holders: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    storages = []
    for key, (raw, root, tid) in sorted(found.items()):
        path = tidy(raw)
        holder = holder_of(path.removesuffix(".grad_fn"))
        h = index.get(holder)
        if h is None:
            h = index[holder] = len(holders)
            holders.append({"path": holder, "type": _type_at(walk, paths, tid, holder),
                            **walk.g.roots[root][1]})
        storages.append({"device": key[0], "addr": key[1], "size": _storage_size(first[key]), "holder": h,
                         "path": path})
    # the heap list and the graph hold every object: empty them now rather
    # than leave them to the next collection (the next dump would walk them)
    heap_list = walk.heap
    walk.heap = []
    heap_list.clear()
    walk.g = _Graph()
    walk.locals.clear()
    walk.kinds = []
    kinds.clear()
    walk.sole = SoleHolders()
    return {"version": 1, "elapsed_ms": round((time.perf_counter() - start) * 1e3, 3),
            "complete": walk.complete, "tensors": n_tensors, "holders": holders, "storages": storages}


def _type_at(walk: _Walk, paths: dict[int, tuple[str, int, int]], oid: int, holder: str) -> str:
    """The type name of the object on ``oid``'s path whose path is ``holder``."""
    while oid:
        path, _, up = paths[oid]
        if tidy(path) == holder:
            obj = walk.g.objs.get(oid)
            return type(obj).__name__ if obj is not None else ""
        oid = up
    return ""


def holders_top_level(skip: Any = (), device_type: str | None = "cuda") -> dict[str, Any]:
    """``{"memsight_holders": ...}`` for a dump now, or ``{}`` (switched off,
    nothing found, or it failed: logged)."""
    if not enabled():
        return {}
    # The walk makes many containers, which would start the collector: it
    # would free cyclic garbage (CUDA blocks among it) inside the dump, so
    # the snapshot would show frees the job never made there.
    collecting = gc.isenabled()
    gc.disable()
    try:
        value = holders_value(device_type, skip)
    except Exception:
        log.exception("memsight: could not find who holds the live tensors; the snapshot has no holders")
        return {}
    finally:
        if collecting:
            gc.enable()
    return {HOLDERS_KEY: value} if value["storages"] else {}

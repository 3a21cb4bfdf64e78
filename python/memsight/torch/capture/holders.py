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
holders it cannot climb directly; paths are built per holder
(holder_paths.py): 43-64 ms for the 2,500 untagged of 10,000 tensors of a
128,000-object heap, 89-102 ms for all 10,000 (bench/holders_bench.py,
bench/README.md), more than an OOM dump's tens of milliseconds, so it
waits for the user to ask. Nothing here raises into training: a failure is logged
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
from itertools import compress, filterfalse, repeat
from operator import attrgetter, itemgetter, not_
from typing import Any

from .holder_paths import Names, holder_of, tidy
from .live_storages import _storage_at, _storage_keys, _storage_sizes, live_tensors, tensors_and_modules
from .sole_holders import SoleHolders, _key_text, root_containers, sole_holders

__all__ = ["HOLDERS_KEY", "acquire_setting", "enabled", "holder_of", "holders_top_level", "holders_value", "live_tensors",
           "release_setting", "tidy"]

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
    """The referrer edges found so far: child id -> (parent id, key), the one
    edge known without a heap pass (SoleHolders.label formats it when a path
    goes through it), or [(parent id, label)], the edges heap passes found."""

    def __init__(self) -> None:
        self.objs: dict[int, Any] = {}
        self.parents: dict[int, Any] = {}
        self.roots: dict[int, tuple[str, dict[str, Any]]] = {}  # id -> (root path, where)
        self.several = False  # whether some object has more than one edge

    def add_edge(self, child: int, parent: int, label: str, sole: SoleHolders) -> None:
        edges = self.parents.get(child)
        if edges is None:
            self.parents[child] = [(parent, label)]
            return
        if type(edges) is tuple:  # not seen: what a heap pass asks for had no known holder
            edges = self.parents[child] = [(edges[0], sole.label(*edges))]
        edges.append((parent, label))
        self.several = True


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

    def __init__(self, heap: list[Any], deadline: float, max_depth: int, sole: SoleHolders) -> None:
        self.heap = heap
        self.passable: list[Any] | None = None
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
        self.own = {id(self.g.objs), id(self.heap), id(self.g.parents), id(self.locals),
                    id(sole.parent), id(sole.objs)}
        self.complete = True

    def _referrers(self, frontier: list[Any]) -> list[Any]:
        """The gc's objects that refer to any of ``frontier``."""
        if len(frontier) <= _FEW:
            args = tuple(frontier)
            # a tuple handed to f(*args) is the call's argument tuple itself: one of the referrers
            return [r for r in gc.get_referrers(*args) if r is not args]
        ids = {id(o) for o in frontier}
        if self.passable is None:  # the heap but what holds no tensor, once for every pass
            self.passable = list(compress(self.heap, map(not_, map(_NEVER.__contains__, map(type, self.heap)))))
            self.own.add(id(self.passable))
        heap = self.passable
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

    def _reach(self, objs: Any) -> list[Any]:
        """Records the objects of ``objs`` not reached yet, in order (those a
        frame local or a global names as roots); returns the others, to climb
        on from. By C-level maps: it meets every tensor and every holder."""
        g = self.g
        fresh = dict(zip(map(id, objs), objs))
        new = list(filterfalse(g.objs.__contains__, fresh))
        g.objs.update(zip(new, map(fresh.__getitem__, new)))
        named = self.locals.keys() & new | self.global_names.keys() & new
        if named:
            for oid in compress(new, map(named.__contains__, new)):
                local = self.locals.get(oid)
                g.roots[oid] = _root_of_frame_local(*local[0]) if local else _root_of_global(*self.global_names[oid])
            new = list(filterfalse(named.__contains__, new))
        return list(map(fresh.__getitem__, new))

    def _climb_sole(self, frontier: list[Any]) -> list[Any]:
        """Climbs from ``frontier`` through the objects one other object
        holds, as far as they go (no level counted: it costs no heap
        pass); returns the objects reached that need the gc's referrers."""
        rest: list[Any] = []
        parent, holders = self.sole.parent, self.sole.objs
        while frontier:
            self.sole.climb_closures(frontier)
            ups = list(map(parent.get, map(id, frontier)))
            rest += compress(frontier, map(not_, ups))
            self.g.parents.update(zip(map(id, compress(frontier, ups)), compress(ups, ups)))
            frontier = self._reach(list(map(holders.__getitem__, map(itemgetter(0), filter(None, ups)))))
        return rest

    def run(self, tensors: list[Any]) -> None:
        g = self.g
        frontier = self._reach(tensors)
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
                        g.add_edge(cid, rid, label, self.sole)
                    nxt += self._reach((r,))
            frontier = nxt
        if frontier:
            self.complete = False

    def names(self) -> Names:
        return Names(self.g.parents, {r: path for r, (path, _) in self.g.roots.items()}, self.g.several,
                     self.sole.label)


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
    tensors, modules = tensors_and_modules(heap, device_type)
    n_tensors = len(tensors)
    skip = set(skip) | {None}  # None: a tensor without storage
    by_storage, several, roots = _by_storage(tensors, skip)
    del tensors
    # the last fifth of the budget (at most 50 ms) is kept for the autograd graphs
    reserve = min(0.05, budget_s / 5)
    walk = _Walk(heap, deadline - reserve, max_depth, sole_holders(heap, modules))
    del modules
    walk.own.update({id(by_storage), id(several), id(roots), *map(id, several.values())})
    walk.run(roots)
    names = walk.names()
    held = list(compress(roots, map(attrgetter("requires_grad"), roots)))
    held = list(compress(held, names.named_all(list(map(id, held)))))
    del roots
    # The graphs get their reserve however long the heap's passes took: in a
    # large process those can use the whole budget, and then a loss kept with
    # its graph would be named without what the graph keeps (most of the memory).
    saved = _graph_saved(held, max(deadline, time.perf_counter() + reserve))
    found = _found(by_storage, several, names)
    for t in held:  # what their autograd graphs saved, where nothing names it
        for s in saved.get(id(t), ()):
            sk = _storage_at(s)
            if sk is not None and sk not in found and sk not in skip:
                found[sk] = (names.named(id(t)), id(t), ".grad_fn", s)  # type: ignore[assignment]
    del held, saved
    holders, storages = _listed(sorted(found.items()), names, walk.g)
    # the heap lists and the graph hold every object: empty them now rather
    # than leave them to the next collection (the next dump would walk them)
    for objs in (walk.heap, walk.passable or []):
        objs.clear()
    walk.g = _Graph()
    walk.locals.clear()
    walk.sole = SoleHolders()
    return {"version": 1, "elapsed_ms": round((time.perf_counter() - start) * 1e3, 3),
            "complete": walk.complete, "tensors": n_tensors, "holders": holders, "storages": storages}


def _by_storage(tensors: list[Any], skip: set[Any]) -> tuple[dict[Any, Any], dict[Any, list[Any]], list[Any]]:
    """The tensors by storage, those of ``skip`` left out: storage -> a
    tensor of it; the storages several tensors view -> those tensors; and
    the tensors, grouped by storage. By C-level maps where, as mostly, each
    storage has one tensor."""
    keys = _storage_keys(tensors)
    kept = list(compress(zip(keys, tensors), map(not_, map(skip.__contains__, keys))))
    by_storage = dict(kept)
    if len(by_storage) == len(kept):
        return by_storage, {}, list(map(itemgetter(1), kept))
    grouped: dict[Any, list[Any]] = {}
    for k, t in kept:
        grouped.setdefault(k, []).append(t)
    return by_storage, {k: ts for k, ts in grouped.items() if len(ts) > 1}, [t for ts in grouped.values() for t in ts]


def _found(by_storage: dict[Any, Any], several: dict[Any, list[Any]], names: Names) -> dict[Any, tuple[Any, ...]]:
    """storage -> (its tensor's (tidy path, holder, root id), that tensor's
    id, "", the tensor) for the storages a root reaches; of several tensors,
    the first path's (by raw path, then root, then id)."""
    keys = [k for k in by_storage if k not in several] if several else list(by_storage)
    tensors = list(map(by_storage.__getitem__, keys))
    hits = names.named_all(list(map(id, tensors)))
    found = dict(compress(zip(keys, zip(hits, map(id, tensors), repeat(""), tensors)), hits))
    for key, ts in several.items():
        ranked = []
        for t in ts:
            node = names.raw(id(t))
            if node is not None:
                ranked.append(((node[0], node[1], id(t)), t))
        if ranked:
            (_, _, tid), t = min(ranked, key=itemgetter(0))
            found[key] = (names.named(tid), tid, "", t)
    return found


def _listed(found: list[tuple[Any, tuple[Any, ...]]], names: Names,
            g: _Graph) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The value's holders and storages from the storages found (_found),
    in order: each storage's tidy path, and its holder (the container its
    path goes through last: its type, and where its root is named)."""
    holders: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    storages = []
    sizes = _storage_sizes([f[3] for _, f in found])
    for (key, ((text, holder, root), tid, suffix, _)), size in zip(found, sizes):
        path = text + suffix
        if path.endswith(".grad_fn"):  # a graph's: named by the output that holds the graph
            holder = holder_of(path.removesuffix(".grad_fn"))
        h = index.get(holder)
        if h is None:
            h = index[holder] = len(holders)
            obj = g.objs.get(names.object_at(tid, text, holder))
            holders.append({"path": holder, "type": type(obj).__name__ if obj is not None else "", **g.roots[root][1]})
        storages.append({"device": key[0], "addr": key[1], "size": size, "holder": h, "path": path})
    return holders, storages


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

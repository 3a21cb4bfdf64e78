"""The objects that only one other object holds, known without a heap pass:
an ``nn.Module``'s ``__dict__`` (held by the module), what its attributes
are (``_modules``, ``_parameters``, ``_forward_hooks``, a user's
``self.cache``: held by that dict), a child module (held by its parent's
``_modules``), its parameters and buffers, a closure's tuple and cells
(held by its function) and a hook's closure's containers; and the items of
the lists, tuples and dicts under a root (root_containers: a running
frame's local, a script's global), which others may hold too but which
name them as a person would. The walk of holders.py climbs these edges
directly: the garbage collector's
referrers cost a pass over the whole heap per level, and a module tree or a
hook's closure is most of the levels between a tensor and the name that
holds it (a list kept by a forward hook is ten levels below the local
``model``). Built with C-level iteration (zip/map into dict.update): a
Python loop per attribute of every module would cost as much as a pass.
"""

from __future__ import annotations

import sys
import types
from collections import OrderedDict, defaultdict, deque
from functools import partial
from itertools import compress, count, filterfalse, repeat
from operator import attrgetter, is_, not_
from typing import Any

_DICT = object()  # the edge from an object to its __dict__
_CLOSURE = object()  # the edge from a function to its closure's tuple
_CELL = object()  # the edge from a cell to what it holds
# A module's dicts whose values it holds: its children and hooks (it alone), its
# parameters and buffers (an optimizer may hold them too: the module names them).
_HELD_IN_DICTS = ("_modules", "_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                  "_backward_pre_hooks", "_parameters", "_buffers")
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
CONTAINERS = {list, tuple, dict, deque, defaultdict, OrderedDict}
_ROOT_ITEMS = 100_000  # items of the containers roots name, indexed at most
_ROOT_LEVELS = 3  # levels of containers below a root indexed (cache[7][0], state[p]["exp_avg"])


def _key_text(k: Any) -> str:
    """A dict key as a path shows it: str, int and the like by repr; others
    (tensors, modules as keys) by type, as their repr can cost a lot."""
    return repr(k) if isinstance(k, (str, int, float, bytes, bool, type(None))) else f"<{type(k).__name__}>"


class SoleHolders:
    """``parent``: child id -> (holder id, key) of an object one other object
    holds; ``label(holder id, key)``: how the path shows that edge."""

    def __init__(self) -> None:
        self.parent: dict[int, tuple[int, Any]] = {}  # child id -> (holder id, key)
        self.objs: dict[int, Any] = {}  # holder id -> holder
        self.functions: Any = None  # the heap's functions, when called (climb_closures)

    def label(self, holder: int, key: Any) -> str:
        if key is _DICT:
            return ".__dict__"
        if key is _CLOSURE:
            return f"<closure {'|'.join(self.objs[holder].__code__.co_freevars)}>"
        if key is _CELL:
            return ""
        return f"[{_key_text(key)}]"

    def _held_by(self, holder: Any, children: Any, keys: Any) -> None:
        self.parent.update(zip(map(id, children), zip(repeat(id(holder)), keys)))
        self.objs[id(holder)] = holder

    def add_modules(self, modules: list[Any]) -> None:
        for m in modules:
            try:
                d = m.__dict__
                self._held_by(m, (d,), (_DICT,))
                self._held_by(d, d.values(), d.keys())
                for name in _HELD_IN_DICTS:  # children, hooks, parameters, where a module has any
                    inner = d.get(name)
                    if inner and isinstance(inner, dict):
                        self._held_by(inner, inner.values(), inner.keys())
                for name in _HOOKS:  # a hook's closure, and the containers in its cells
                    for hook in (d.get(name) or {}).values():
                        self.add_closure(hook)
            except Exception:  # changed by another thread meanwhile, an odd proxy: the gc's referrers find it
                continue

    def add_items(self, containers: list[Any]) -> None:
        """The items of these lists, tuples and dicts, each held by the first
        that holds it (by its last key there), where nothing else is known
        to hold it (a module's attribute keeps its edge)."""
        new: dict[int, tuple[int, Any]] = {}
        for c in reversed(containers):  # the first container's edges written last
            if isinstance(c, dict):
                new.update(zip(map(id, c.values()), zip(repeat(id(c)), c.keys())))
            else:
                new.update(zip(map(id, c), zip(repeat(id(c)), count())))
        fresh = list(filterfalse(self.parent.__contains__, new))
        self.parent.update(zip(fresh, map(new.__getitem__, fresh)))
        self.objs.update(zip(map(id, containers), containers))

    def add_closure(self, f: Any) -> None:
        """A function's closure, and the lists, tuples and dicts its cells hold
        (a forward hook's ``seen.append(...)``), without a heap pass."""
        cells = getattr(f, "__closure__", None)
        if not cells or not isinstance(f, types.FunctionType):
            return
        self._held_by(f, (cells,), (_CLOSURE,))
        self._held_by(cells, cells, count())
        for cell in cells:
            try:
                v = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if type(v) in CONTAINERS:
                self.parent.setdefault(id(v), (id(cell), _CELL))
                self.objs[id(cell)] = cell
                self.add_items([v])

    def add_closures(self, functions: Any) -> None:
        for f in compress(functions, map(attrgetter("__closure__"), functions)):
            cells = f.__closure__
            self._held_by(f, (cells,), (_CLOSURE,))
            self._held_by(cells, cells, count())

    def climb_closures(self, frontier: list[Any]) -> None:
        """Adds the closures' edges the first time a cell whose function is not
        known yet (a hook's is) is to be climbed from: most walks meet none, and
        finding them costs a heap pass."""
        if self.functions is not None and types.CellType in set(map(type, frontier)) and any(
                type(o) is types.CellType and id(o) not in self.parent for o in frontier):
            functions, self.functions = self.functions, None
            self.add_closures(functions())


def sole_holders(heap: list[Any], modules: list[Any]) -> SoleHolders:
    """The sole holders among the gc's objects ``heap``, whose ``nn.Module``
    objects are ``modules`` (the caller picks them in its pass over the heap)."""
    out = SoleHolders()
    out.add_modules(modules)
    out.functions = lambda: list(compress(heap, map(partial(is_, types.FunctionType), map(type, heap))))
    return out


def _subclasses(base: type) -> set[type]:
    out, todo = {base}, [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in out:
                out.add(sub)
                todo.append(sub)
    return out


def root_containers(sole: SoleHolders, frames: list[types.FrameType]) -> dict[int, tuple[str, str]]:
    """The lists, tuples and dicts that a running frame's local or a global of
    ``__main__`` (or of a running frame's module) names hold their items: edges
    known without a heap pass, as a loop's ``losses.append(...)`` or a script's
    ``kept`` are one level below their names, and so on for _ROOT_LEVELS levels.
    Returns the globals' names (id -> (module, name)); at most _ROOT_ITEMS items
    are indexed."""
    containers: list[Any] = []
    names: dict[int, tuple[str, str]] = {}
    for f in frames:
        containers += [v for v in f.f_locals.values() if type(v) in CONTAINERS]
    modules = {str(f.f_globals.get("__name__", "")) for f in frames} | {"__main__"}
    for module in modules:
        d = getattr(sys.modules.get(module), "__dict__", None)
        for name, v in (d or {}).items():
            if type(v) in CONTAINERS and not str(name).startswith("__"):
                containers.append(v)
                names.setdefault(id(v), (module, str(name)))
    budget, seen = _ROOT_ITEMS, set(map(id, containers))
    for _ in range(_ROOT_LEVELS):
        level: list[Any] = []
        for c in containers:
            cost = len(c) + 16  # a container costs a call besides its items
            if cost > budget:  # a large container is left to the heap passes
                continue
            budget -= cost
            level.append(c)
        sole.add_items(level)
        inner: list[Any] = []
        for c in level:
            values = c.values() if isinstance(c, dict) else c
            inner += compress(values, map(CONTAINERS.__contains__, map(type, values)))
        containers = list(compress(inner, map(not_, map(seen.__contains__, map(id, inner)))))
        seen.update(map(id, containers))
    return names

"""The paths of holders.py's walk: from the referrer edges it found (child
id -> its holder), each object's path from its nearest root, as the walk
writes it (``main:model.__dict__['_modules']['0']``) and as a person reads
it (``main:model.0``, :func:`tidy`).

Built lazily, object by object, and only for the objects asked about: a
dump asks for its tensors' paths, whose holders are far fewer (a list
holds thousands of items, a module's parameters dict a few), so each
holder's path is made and tidied once and its items' paths extend it.
Where an object has one holder (every edge known without a heap pass, and
most of the others) its path is its holder's path and the edge's label,
which is what a breadth-first walk from the roots would give; where some
object has several, a breadth-first walk from the roots chooses, shortest
first, as before.
"""

from __future__ import annotations

import re
from collections import deque
from itertools import filterfalse
from typing import Any, Callable

_CLOSURE = re.compile(r"<closure ([^>]*)>\[(\d+)\]")
_ATTRIBUTE = re.compile(r"\.__dict__\['([A-Za-z_][A-Za-z0-9_]*)'\]")
_MODULE_DICTS = re.compile(r"\._(?:modules|parameters|buffers)\['([^']*)'\]")
_LAST_INDEXES = re.compile(r"(\[[^\[\]]*\]|\{[^{}]*\})+(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# An item's label that tidy() leaves as it is, whatever follows or precedes:
# an int index, a plain str key or a type's (no character any of tidy's patterns needs).
_PLAIN_ITEM = re.compile(r"\[(?:-?\d+|'[^'\"\\.<>\[\]{}]*'|<[A-Za-z_][A-Za-z0-9_]*>)\]")
_ATTRIBUTE_ITEM = re.compile(r"\['[A-Za-z_][A-Za-z0-9_]*'\]")
_MODULE_DICT_ENDS = ("._modules", "._parameters", "._buffers", ".__dict__['_modules']",
                     ".__dict__['_parameters']", ".__dict__['_buffers']")
# How tidy(raw + label) follows from text = tidy(raw), by how raw ends (_follow)
_PLAIN, _MODULE_DICT, _ATTRIBUTES, _TIDY = 0, 1, 2, 3


def tidy(path: str) -> str:
    """A path as a person writes it: ``.__dict__['x']`` -> ``.x``, a module's
    ``._modules['1']`` -> ``.1``."""
    if "<closure " in path:
        path = _CLOSURE.sub(lambda m: " \u2192 " + m.group(1).split("|")[int(m.group(2))], path)
    if ".__dict__[" in path:
        path = _ATTRIBUTE.sub(r".\1", path)
    return _MODULE_DICTS.sub(r".\1", path) if "._" in path else path


def holder_of(path: str) -> str:
    """The container a path goes through last: ``kept[11]`` -> ``kept``,
    ``cache[7][0]`` -> ``cache``, ``h[3].loss`` -> ``h``; a path without an
    index is its own holder."""
    m = _LAST_INDEXES.search(path)
    return path[: m.start()] if m and m.start() > 0 else path


def _how_items_follow(raw: str, text: str) -> int:
    """How the tidy paths of what ``raw`` holds follow from text = tidy(raw):
    _PLAIN (text + label), _MODULE_DICT (a module's dict's ``['x']`` is
    ``.x``), _ATTRIBUTES (an object's ``.__dict__``: ``['x']`` is ``x``), or
    _TIDY: tidy() must see the whole path (after a closure's tuple, or an
    odd key's quotes)."""
    if raw.endswith(">") or '"' in raw or "\\" in raw:  # a closure's tuple; a key's repr with escapes: whole
        return _TIDY
    if raw.endswith(".__dict__"):
        return _ATTRIBUTES if text.endswith(".__dict__") else _TIDY
    if raw.endswith(_MODULE_DICT_ENDS):
        return _MODULE_DICT if text.endswith(("._modules", "._parameters", "._buffers")) else _TIDY
    return _PLAIN


def _follow(above: str, how: int, label: str) -> str | None:
    """tidy(raw + label) from above = tidy(raw) and _how_items_follow(raw);
    None where tidy() must see the whole path. A label none of tidy's
    patterns can start or end in leaves the rest as it was."""
    if how == _PLAIN:
        return above + label if label == ".__dict__" or _PLAIN_ITEM.fullmatch(label) else None
    if how == _MODULE_DICT and _PLAIN_ITEM.fullmatch(label):
        return above + label if label[1] != "'" else above[: above.rindex("._") + 1] + label[2:-2]
    if how == _ATTRIBUTES and _ATTRIBUTE_ITEM.fullmatch(label):
        return above[: -len("__dict__")] + label[2:-2]
    return None


class Names:
    """Paths from the walk's graph. ``edges``: child id -> (holder id, key)
    for an edge known without a heap pass (``label`` formats the key) or a
    list of (holder id, label) found by heap passes; ``roots``: id -> its
    root path; ``several``: whether some object has more than one edge."""

    def __init__(self, edges: dict[int, Any], roots: dict[int, str], several: bool,
                 label: Callable[[int, Any], str]) -> None:
        self.edges = edges
        self.label = label
        # id -> (raw path, root id, id of the object above it (0 at a root), tidy
        # path, how its items' follow); None where no root reaches it
        self.known: dict[int, tuple[str, int, int, str, int] | None] = {}
        for r, path in roots.items():
            text = tidy(path)
            self.known[r] = (path, r, 0, text, _how_items_follow(path, text))
        self.chosen: dict[int, tuple[int, str]] | None = self._breadth_first(roots) if several else None
        self.item_holders: dict[str, str] = {}  # a holder's tidy path -> holder_of its items'
        self.attr_holders: dict[str, str] = {}  # "x." -> holder_of("x.a")
        self.done: dict[int, tuple[str, str, int] | None] = {}  # id -> named(id)

    def _edge(self, oid: int) -> tuple[int, str] | None:
        """The edge above ``oid`` on its path: (holder id, label)."""
        if self.chosen is not None:
            return self.chosen.get(oid)
        e = self.edges.get(oid)
        if e is None:
            return None
        return e[0] if type(e) is list else (e[0], self._label(e[0], e[1]))

    def _label(self, holder: int, key: Any) -> str:
        t = type(key)
        return f"[{key}]" if t is int else f"[{key!r}]" if t is str else self.label(holder, key)

    def _breadth_first(self, roots: dict[int, str]) -> dict[int, tuple[int, str]]:
        """Each reached object's edge on a shortest path from the roots (in
        their order; a holder's items in the order their edges were found)."""
        children: dict[int, list[tuple[int, Any]]] = {}
        for c, e in self.edges.items():
            if type(e) is list:
                for p, label in e:
                    children.setdefault(p, []).append((c, label))
            else:
                children.setdefault(e[0], []).append((c, e))
        chosen: dict[int, tuple[int, str]] = {}
        seen = set(roots)
        queue = deque(roots)
        while queue:
            n = queue.popleft()
            for c, label in children.get(n, ()):
                if c not in seen:
                    seen.add(c)
                    chosen[c] = (n, label if type(label) is str else self._label(n, label[1]))
                    queue.append(c)
        return chosen

    def raw(self, oid: int) -> tuple[str, int, int, str, int] | None:
        """(raw path, root id, id above, tidy path, how its items' follow) of
        ``oid``, or None where no root reaches it; its holders' first, by a
        loop (a module tree can be deep)."""
        known = self.known
        if oid in known:
            return known[oid]
        chain: list[tuple[int, int, str]] = []
        on_chain: set[int] = set()
        n, top = oid, None
        while True:
            e = self._edge(n)
            if e is None or n in on_chain:  # no holder known, or a cycle no root reaches
                break
            on_chain.add(n)
            chain.append((n, e[0], e[1]))
            if e[0] in known:
                top = known[e[0]]
                break
            n = e[0]
        for n, up, label in reversed(chain):
            if top is not None:
                raw = top[0] + label
                text = _follow(top[3], top[4], label) or tidy(raw)
                top = (raw, top[1], up, text, _how_items_follow(raw, text))
            known[n] = top
        return known.setdefault(oid, None)

    def named_all(self, ids: list[int]) -> list[tuple[str, str, int] | None]:
        """named() of each of ``ids``, in one loop: an item of a holder whose
        items' paths follow from its own, by an int index or a plain str key
        (most tensors: ``kept[3]``, ``state[<Parameter>]['exp_avg']``,
        ``model.0.weight``), costs a concatenation, and no raw path."""
        done, known, edges, holders = self.done, self.known, self.edges, self.item_holders
        plain = _PLAIN_ITEM.fullmatch
        for oid in ids if self.chosen is None else ():
            e = edges.get(oid)
            if type(e) is not tuple or oid in done or oid in known:  # not an item known without a heap pass
                continue
            up, key = e
            above = known[up] if up in known else self.raw(up)
            if above is None:
                done[oid] = None
                continue
            t = type(key)
            label = f"[{key}]" if t is int else f"[{key!r}]" if t is str else ""
            if not label or (t is str and not plain(label)):
                continue
            if above[4] == _PLAIN or (above[4] == _MODULE_DICT and t is int):
                holder = holders.get(above[3]) or self._items_holder(above[3])
                done[oid] = (above[3] + label, holder, above[1])
            else:
                text = _follow(above[3], above[4], label)
                if text is not None:
                    done[oid] = (text, self._holder(above[3], label, text), above[1])
        for oid in filterfalse(done.__contains__, ids):  # the others: their raw paths
            self.named(oid)
        return list(map(done.__getitem__, ids))

    def named(self, oid: int) -> tuple[str, str, int] | None:
        """(tidy path, holder_of it, root id) of ``oid``; None where no root reaches it."""
        done = self.done
        if oid in done:
            return done[oid]
        node = self.raw(oid)
        if node is None:
            done[oid] = None
            return None
        up = node[2]
        if up:
            above = self.known[up]
            holder = self._holder(above[3], node[0][len(above[0]):], node[3])  # type: ignore[index]
        done[oid] = out = (node[3], holder if up else holder_of(node[3]), node[1])
        return out

    def _items_holder(self, above: str) -> str:
        """holder_of(above + "[0]"): of every item one bracket more than ``above``."""
        holder = self.item_holders[above] = holder_of(above + "[0]")
        return holder

    def _holder(self, above: str, label: str, text: str) -> str:
        """holder_of(text), the tidy path of the item ``label`` of a holder
        whose tidy path is ``above``, found once for all its items where the
        answer is theirs too: an item one bracket more than its holder
        (``kept[3]``), an attribute (``model.0.weight``, ``box.t``)."""
        if label[0] != "[":
            return holder_of(text)
        if len(text) == len(above) + len(label) and text.startswith(above):
            return self.item_holders.get(above) or self._items_holder(above)
        name = label[2:-2]
        if _ATTRIBUTE_ITEM.fullmatch(label) and text.endswith("." + name):
            return self._attribute_holder(text[: -len(name)], text)
        return holder_of(text)

    def _attribute_holder(self, prefix: str, text: str) -> str:
        """holder_of(text), text = prefix + an identifier: the holder of
        prefix + any identifier (``model.0.`` + ``weight``), found once."""
        attr = self.attr_holders.get(prefix)
        if attr is None:
            attr = self.attr_holders[prefix] = holder_of(prefix + "a")
        return text if attr == prefix + "a" else attr

    def object_at(self, oid: int, text: str, holder: str) -> int:
        """The id of the object on ``oid``'s path (``text``: its tidy path)
        whose tidy path is ``holder``; 0 if none."""
        if text == holder:
            return oid
        up = self.known[oid][2] if oid in self.known else self._edge(oid)[0]  # type: ignore[index]
        while up:
            node = self.known[up]
            if node[3] == holder:  # type: ignore[index]
                return up
            up = node[2]  # type: ignore[index]
        return 0

"""Differential test: random data-only pickles written by Python's pickle at
protocols 2-5 read back in memsight, and the pickle memsight writes back
loads into an equal object. Values ride in an extra top-level key, which the
reader keeps as data."""
from __future__ import annotations

import math
import pickle
import random
from typing import Any

import pytest

import memsight


def random_value(rng: random.Random, depth: int, shared: list[Any], protocol: int) -> Any:
    kind = rng.randrange(12 if depth < 5 else 7)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randint(-(1 << 70), 1 << 70) if rng.random() < 0.3 else rng.randint(-300, 300)
    if kind == 2:
        return rng.choice([0.0, -0.0, 1.5, -1e308, 5e-324, math.inf, -math.inf,
                           rng.uniform(-1e6, 1e6)])
    if kind == 3:
        if protocol < 3:  # protocol 2 writes bytes as a call to _codecs.encode
            return None
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
    if kind == 4:
        # Text with non-ASCII and 4-byte characters (lone surrogates are
        # checked in test_plain_data.py: the engine refuses to encode them).
        alphabet = "ab\u00e9\u4e2d\U0001f600\n\"'\\"
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
    if kind == 5 and shared:
        return rng.choice(shared)  # a memo reference to an earlier container
    if kind == 6:
        return 1 << rng.randrange(0, 200)
    n = rng.randrange(0, 6)
    if kind in (7, 8):
        v: Any = [random_value(rng, depth + 1, shared, protocol) for _ in range(n)]
    elif kind in (9, 10):
        v = {f"k{rng.randrange(50)}": random_value(rng, depth + 1, shared, protocol)
             for _ in range(n)}
    else:
        v = tuple(random_value(rng, depth + 1, shared, protocol) for _ in range(n))
    shared.append(v)
    return v


def same(a: Any, b: Any) -> bool:
    """Equality that tells -0.0 from 0.0 and nan from nan the way pickle keeps them."""
    if isinstance(a, float) and isinstance(b, float):
        return math.copysign(1, a) == math.copysign(1, b) and (a == b or (a != a and b != b))
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_random_values_round_trip(core, protocol):
    rng = random.Random(1000 + protocol)
    for _ in range(150):
        value = random_value(rng, 0, [], protocol)
        data = pickle.dumps({"segments": [], "device_traces": [], "x": value}, protocol=protocol)
        snap = memsight.loads(data)
        back = pickle.loads(snap.pickle())["x"]
        assert same(back, value), (value, back)


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_recursive_values_are_refused_plainly(core, protocol):
    rec: list[Any] = [1]
    rec.append(rec)
    data = pickle.dumps({"segments": [], "device_traces": [], "x": rec}, protocol=protocol)
    with pytest.raises(memsight.MemsightError, match="nested deeper than 1000 levels"):
        memsight.loads(data)


def test_unhashable_dict_keys_are_refused_as_python_refuses_them(core):
    # A list, a dict, or a tuple holding a list as a dict key: pickle.loads
    # raises TypeError (unhashable type); so must memsight.
    for body in (b"]N", b"}N", b"]\x85N", b"N]\x86N"):
        data = b"\x80\x04}" + body + b"s."
        with pytest.raises(TypeError, match="unhashable"):
            pickle.loads(data)
        with pytest.raises(memsight.MemsightError, match="a dict key is a list or a dict"):
            memsight.loads(data)
    # A tuple of scalars is a key Python takes: so does memsight, past the
    # key check (it is not a snapshot).
    data = b"\x80\x04}N\x85Ns."
    assert pickle.loads(data) == {(None,): None}
    with pytest.raises(memsight.MemsightError) as e:
        memsight.loads(data)
    assert "dict key" not in str(e.value)

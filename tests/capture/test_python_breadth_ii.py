"""Python-language breadth II (issue #32, "Python still refused"): ``match``
statements, frozensets and set algebra, dict views, the rest of ``itertools``, string
joins and formatting over values made in the frame, ``functools.wraps`` and
attribute writes on functions made in the frame.  One row per construct: captured
whole under ``fullgraph=True``, compared with eager on two input sets, graph and op
counts asserted (``capture_harness.run_case``)."""
from __future__ import annotations

import collections
import dataclasses
import enum

import torch

from .capture_harness import Case, I, parametrize, run_case


def x1(r):
    return (r.randn(3, 4),)


def xy(r):
    return r.randn(3, 4), r.randn(3, 4)


# -- match statements -----------------------------------------------------------------------
class Point:
    __match_args__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b


@dataclasses.dataclass
class Box:
    lo: object
    hi: object = 0


class Color(enum.Enum):
    RED = 1
    BLUE = 2


Pair = collections.namedtuple("Pair", "left right")


class Table(dict):
    def get(self, key, default=None):          # MATCH_KEYS asks the subject's own get
        lowered = {k.lower(): v for k, v in self.items()}
        return lowered.get(key.lower(), default)


def mt_mapping(x, d):
    match d:
        case {"scale": s, "shift": t, **rest}:
            return x * s + t, rest, len(rest)
        case {"scale": s}:
            return x * s
        case _:
            return x


def mt_mapping_missing_key(x):
    out = []
    for d in ({"a": 1}, {"b": x}, {}, [1, 2], "ab"):
        match d:
            case {"a": v}:
                out.append(v)
            case {"b": v, **rest}:
                out.append(v * 2)
                out.append(rest)
            case {}:
                out.append("empty mapping")
            case _:
                out.append(None)
    return out


def mt_mapping_own_get(x):
    t = Table(key=x)
    match t:
        case {"KEY": v}:
            return v + 1
    return x


def mt_sequence(x, y):
    out = []
    for s in ([x, y, x + y, 3], (x,), [x, y], "xy", range(3), (), {"a": 1}):
        match s:
            case [a, b, *rest]:
                out.append((a - b, rest))
            case (a,):
                out.append(a * 2)
            case []:
                out.append("empty")
            case _:
                out.append("other")
    return out


def mt_sequence_wildcard_star(x, y):
    match [x, y, x * 2, y * 2]:
        case [first, *_, last]:
            return first + last
    return x


def mt_nested(x, y):
    cmds = [("move", (1, 2)), ("scale", {"by": 3}), ("stop",), ("move", [x, y])]
    out = []
    for cmd in cmds:
        match cmd:
            case ("move", (int(dx), int(dy))):
                out.append(x + dx - dy)
            case ("move", [a, b]):
                out.append(a * b)
            case ("scale", {"by": k}) if k > 2:
                out.append(y * k)
            case ("stop",):
                out.append("stopped")
    return out


def mt_class(x, y):
    out = []
    for obj in (Point(x, 2), Point(y, 3), Box(x), Box(y, hi=5), Pair(x, y), 7, "s", 2.5, True):
        match obj:
            case Point(a, b=2):
                out.append(a * 2)
            case Point(a=aa, b=bb):
                out.append(aa + bb)
            case Box(lo, hi=0):
                out.append(lo - 1)
            case Box(hi=h):
                out.append(h)
            case Pair(l, r):
                out.append(l * r)
            case bool(b):
                out.append(("bool", b))
            case int(n) if n > 5:
                out.append(x * n)
            case str() | float():
                out.append(type(obj).__name__)
    return out


def mt_tensor_subject(x, y):
    out = []
    for t in (x, x.sum(), [x, y]):
        match t:
            case [a, b]:
                out.append(a + b)
            case torch.Tensor(ndim=2, shape=(rows, _)):
                out.append(x * rows)
            case torch.Tensor(ndim=0):
                out.append(t + 1)
    return out


def mt_values_and_literals(x):
    out = []
    for v in (1, 2, "s", None, Color.RED, Color.BLUE, 9, (1, 2), 0):
        match v:
            case 1 | 2:
                out.append(x + v)
            case "s":
                out.append("str")
            case None:
                out.append("none")
            case Color.RED:
                out.append(x * 3)
            case Color():
                out.append(v.name)
            case (1, y) as whole:
                out.append((y, whole))
            case n if n > 5:
                out.append(n)
            case _:
                out.append("default")
    return out


class BadArgs:
    __match_args__ = ["a"]
    a = 1


class TwoNames:
    __match_args__ = ("a", "a")
    a = 1


class NoArgs:
    pass


def mt_class_errors(x):
    """A pattern CPython refuses raises its TypeError, word for word."""
    out = []
    for cls, subject in ((BadArgs, BadArgs()), (TwoNames, TwoNames()), (NoArgs, NoArgs()), (int, 3)):
        try:
            match subject:
                case cls(p, q):
                    out.append((p, q))
        except TypeError as e:
            out.append(str(e))
    return x + len(out), out


def mt_not_a_class(x):
    k = 3
    try:
        match x:
            case k():
                return x
    except TypeError as e:
        return x + 1, str(e)


def mt_mapping_duplicate_key(x):
    try:
        match {1: x, 2: x}:
            case {Color.RED.value: a, 1: b}:       # the same key twice, found at run time
                return a
    except ValueError as e:
        return x - 1, str(e)


def mt_input_shapes(x, spec):
    match spec:
        case {"kind": "affine", "w": w, "b": b}:
            return x * w + b
        case {"kind": "relu"}:
            return x.relu()


MATCH = [
    Case("mt_mapping", mt_mapping, lambda r: I(r.randn(3), {"scale": r.randn(3), "shift": 2.0, "z": 1}), 1, 2),
    Case("mt_mapping_missing_key", mt_mapping_missing_key, x1, 1, 1),
    Case("mt_mapping_own_get", mt_mapping_own_get, x1, 1, 1),
    Case("mt_sequence", mt_sequence, xy, 1, 4),
    Case("mt_sequence_wildcard_star", mt_sequence_wildcard_star, xy, 1, 3),
    Case("mt_nested", mt_nested, xy, 1, 4),
    Case("mt_class", mt_class, xy, 1, 5),
    Case("mt_tensor_subject", mt_tensor_subject, xy, 1, 4),
    Case("mt_values_and_literals", mt_values_and_literals, x1, 1, 3),
    Case("mt_class_errors", mt_class_errors, x1, 1, 1),
    Case("mt_not_a_class", mt_not_a_class, x1, 1, 1),
    Case("mt_mapping_duplicate_key", mt_mapping_duplicate_key, x1, 1, 1),
    Case("mt_input_shapes", mt_input_shapes, lambda r: I(r.randn(3), {"kind": "affine", "w": r.randn(3), "b": 1.5}),
         1, 2),
]


@parametrize(MATCH)
def test_capture(case):
    run_case(case)

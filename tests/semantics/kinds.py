"""The value kinds the semantics oracle applies every construct to.

Each kind makes a fresh value from a seed (0 and 1 give two different values of the
same kind, the two inputs every case is called on), so a case never sees a value that
an earlier run mutated.  ``inside`` says whether the maker is also run inside the
compiled frame (the value is then made while tracing, not read from a guarded input):
for kinds whose values only exist outside (classes, modules, functions) it is False.
"""
from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import math
from dataclasses import dataclass

import torch


class Plain:
    def __init__(self, s):
        self.a = s


class WithCall:
    def __init__(self, s):
        self.a = s

    def __call__(self, x=1):
        return self.a + x


class WithLen:
    def __init__(self, s):
        self.a = s

    def __len__(self):
        return self.a + 1


class WithBool:
    def __init__(self, s):
        self.a = s

    def __bool__(self):
        return self.a == 0


class WithEq:
    def __init__(self, s):
        self.a = s

    def __eq__(self, other):
        return isinstance(other, WithEq) and other.a == self.a

    def __hash__(self):
        return hash(self.a)


class WithGetattr:
    def __init__(self, s):
        self.a = s

    def __getattr__(self, name):
        if name == "shape":
            return (self.a,)
        raise AttributeError(name)


class WithGetattribute:
    def __init__(self, s):
        self.a = s

    def __getattribute__(self, name):
        if name == "shape":
            return (7,)
        return object.__getattribute__(self, name)


class WithProperty:
    def __init__(self, s):
        self.a = s

    @property
    def shape(self):
        return (self.a, 2)


class Twice:
    """A non-data descriptor: reads the instance's ``a`` doubled."""

    def __get__(self, obj, objtype=None):
        return self if obj is None else obj.a * 2


class WithDescriptor:
    shape = Twice()

    def __init__(self, s):
        self.a = s


class WithSlots:
    __slots__ = ("a",)

    def __init__(self, s):
        self.a = s


Pair = collections.namedtuple("Pair", ["x", "y"])


@dataclass
class Point:
    x: int
    y: int


@dataclass
class Holder:
    """A dataclass holding a tensor: made in the frame, Kiln builds it on fake tensors."""
    n: int
    t: object = None


class Color(enum.Enum):
    RED = 1
    GREEN = 2


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x)


def _gen(s):
    yield s
    yield s + 1


def _double(x):
    return x * 2


_MODULE_A = Small()
_MODULE_B = Small()
_BOUND_A, _BOUND_B = Plain(0), Plain(1)


@dataclass(frozen=True)
class Kind:
    name: str
    make: object          # seed -> a fresh value
    inside: bool = True   # also made inside the compiled frame

    def __repr__(self):
        return self.name


KINDS = [
    Kind("int", lambda s: 3 + s),
    Kind("float", lambda s: 1.5 + s),
    Kind("bool", lambda s: s == 0),
    Kind("complex", lambda s: complex(1, s + 1)),
    Kind("str", lambda s: "ab" + str(s)),
    Kind("bytes", lambda s: b"xy" if s == 0 else b"xyz"),
    Kind("None", lambda s: None),
    Kind("Ellipsis", lambda s: ...),
    Kind("list", lambda s: [s, s + 1, 2]),
    Kind("list_empty", lambda s: []),
    Kind("tuple", lambda s: (s, 2, s + 4)),
    Kind("dict", lambda s: {"a": s, "b": 2}),
    Kind("set", lambda s: {s, 5}),
    Kind("frozenset", lambda s: frozenset({s, 7})),
    Kind("deque", lambda s: collections.deque([s, 1, 2])),
    Kind("dict_keys", lambda s: {"a": s, "c": 1}.keys()),
    Kind("dict_values", lambda s: {"a": s, "c": 1}.values()),
    Kind("dict_items", lambda s: {"a": s, "c": 1}.items()),
    Kind("range", lambda s: range(s, s + 3)),
    Kind("slice", lambda s: slice(s, 4)),
    Kind("list_iterator", lambda s: iter([s, 9])),
    Kind("generator", lambda s: _gen(s)),
    Kind("namedtuple", lambda s: Pair(s, 2)),
    Kind("dataclass", lambda s: Point(s, 3)),
    Kind("dataclass_tensor", lambda s: Holder(s, torch.tensor([1.0 + s]))),
    Kind("enum", lambda s: Color.RED if s == 0 else Color.GREEN),
    Kind("tensor", lambda s: torch.tensor([1.0 + s, 2.0])),
    Kind("tensor_int", lambda s: torch.tensor([3, 4 + s])),
    Kind("size", lambda s: torch.Size([2, 3 + s])),
    Kind("dtype", lambda s: torch.float32 if s == 0 else torch.int64),
    Kind("device", lambda s: torch.device("cpu"), inside=False),
    Kind("plain_obj", lambda s: Plain(s)),
    Kind("obj_call", lambda s: WithCall(s)),
    Kind("obj_len", lambda s: WithLen(s)),
    Kind("obj_bool", lambda s: WithBool(s)),
    Kind("obj_eq_hash", lambda s: WithEq(s)),
    Kind("obj_getattr", lambda s: WithGetattr(s)),
    Kind("obj_getattribute", lambda s: WithGetattribute(s)),
    Kind("obj_property", lambda s: WithProperty(s)),
    Kind("obj_descriptor", lambda s: WithDescriptor(s)),
    Kind("obj_slots", lambda s: WithSlots(s)),
    Kind("class", lambda s: Plain if s == 0 else WithCall, inside=False),
    Kind("function", lambda s: _double if s == 0 else _gen, inside=False),
    Kind("lambda", lambda s: (lambda x: x + s), inside=False),
    Kind("bound_method", lambda s: (_BOUND_A if s == 0 else _BOUND_B).__init__, inside=False),
    Kind("partial", lambda s: functools.partial(_double, s), inside=False),
    Kind("builtin", lambda s: len if s == 0 else abs, inside=False),
    Kind("module", lambda s: math if s == 0 else collections, inside=False),
    Kind("nn_module", lambda s: _MODULE_A if s == 0 else _MODULE_B, inside=False),
]

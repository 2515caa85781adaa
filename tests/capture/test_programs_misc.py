"""Grad-mode blocks, dataclasses and named tuples, exceptions caught inside traced code,
user context managers, user classes with operator / container protocols, enums,
and ``torch.compiler.is_compiling()``."""
from __future__ import annotations

import contextlib
import dataclasses
import enum
import typing
from collections import namedtuple

import torch

from .capture_harness import Case, I, parametrize, run_case


def x1(r):
    return (r.randn(3, 4),)


def xg(r):
    return (r.randn(3, 4, requires_grad=True),)


# -- grad modes ------------------------------------------------------------------------------------
def no_grad_block(x):
    with torch.no_grad():
        y = x * 2
    z = x + 1
    return y, z, y.requires_grad


def enable_grad_inside(x):
    with torch.enable_grad():
        y = x * 2
    return y, x + 1


def nested_grad_modes(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
        c = x * 4
    return a, b, c


def set_grad_enabled_forms(x):
    with torch.set_grad_enabled(False):
        a = x + 1
    torch.set_grad_enabled(False)
    b = x + 2
    torch.set_grad_enabled(True)
    return a, b, x + 3


@torch.no_grad()
def _no_grad_helper(t):
    return t * 5


def no_grad_decorated_call(x):
    return _no_grad_helper(x), x * 5


def grad_mode_queries(x):
    with torch.no_grad():
        off = torch.is_grad_enabled()
    return x * (1 + off * 10 + torch.is_grad_enabled() * 100), x.requires_grad, x.is_leaf


def detach_and_requires_grad(x):
    y = x * 2
    return y.detach(), y.requires_grad, y.detach().requires_grad, torch.zeros(2, requires_grad=True) + 1


GRAD = [
    Case("no_grad_block", no_grad_block, xg, 1, 4),
    Case("enable_grad_inside_no_grad_call", enable_grad_inside, xg, 1, 4, grad_mode=False),
    Case("nested_grad_modes", nested_grad_modes, xg, 1, 7),
    Case("set_grad_enabled_forms", set_grad_enabled_forms, xg, 1, 7),
    Case("no_grad_decorated_call", no_grad_decorated_call, xg, 1, 4),
    Case("grad_mode_queries", grad_mode_queries, xg, 1, 3),
    Case("detach_and_requires_grad", detach_and_requires_grad, xg, 1, 5),
    Case("called_under_no_grad", lambda x: x * 2 + 1, xg, 1, 2, grad_mode=False),
]


# -- dataclasses and named tuples ------------------------------------------------------------------
@dataclasses.dataclass
class Batch:
    x: torch.Tensor
    y: torch.Tensor
    scale: float = 1.0
    tags: list = dataclasses.field(default_factory=list)

    def combined(self):
        return self.x * self.scale + self.y


@dataclasses.dataclass
class Output:
    loss: torch.Tensor
    logits: torch.Tensor
    extra: typing.Optional[torch.Tensor] = None


Pair = namedtuple("Pair", ["first", "second"])


class Stats(typing.NamedTuple):
    mean: torch.Tensor
    std: torch.Tensor
    n: int = 0


def dataclass_input(b):
    return b.combined(), b.scale, len(b.tags), dataclasses.fields(b)[0].name


def dataclass_output(x, y):
    logits = x @ y.T
    return Output(loss=logits.mean(), logits=logits)


def dataclass_roundtrip(b):
    out = Output(b.x.sum(), b.y * 2, extra=b.x)
    return out.loss + out.logits.sum(), out, dataclasses.is_dataclass(out)


def namedtuple_io(p):
    first, second = p
    q = Pair(second, first * 2)
    return q, q.first + p[1], p._fields, len(q)


def typed_namedtuple(x):
    s = Stats(x.mean(0), x.std(0))
    t = Stats(*s[:2], n=x.shape[0])
    return s, t, t.n, isinstance(t, tuple), t.mean - s.std


def structseq_results(x):
    m = torch.max(x, dim=0)
    v, i = torch.min(x, 1)
    return m.values + v[:1], m.indices, i


STRUCTS = [
    Case("dataclass_input", dataclass_input, lambda r: (Batch(r.randn(3), r.randn(3), 2.0, ["a"]),), 1, 2),
    Case("dataclass_output", dataclass_output, lambda r: (r.randn(2, 3), r.randn(4, 3)), 1, 3),
    Case("dataclass_roundtrip", dataclass_roundtrip, lambda r: (Batch(r.randn(3), r.randn(3)),), 1, 4),
    Case("namedtuple_io", namedtuple_io, lambda r: (Pair(r.randn(2), r.randn(2)),), 1, 2),
    Case("typed_namedtuple", typed_namedtuple, x1, 1, 3),
    Case("structseq_results", structseq_results, x1, 1, 8),
]


# -- exceptions raised and caught inside traced code -------------------------------------------------
def catch_key_error(x, d):
    try:
        scale = d["scale"]
    except KeyError:
        scale = 2.0
    return x * scale


def catch_index_error(xs):
    try:
        extra = xs[5]
    except IndexError as e:
        extra = xs[0] * len(e.args)
    return xs[1] + extra


def _validate(t, limit):
    if t.dim() > limit:
        raise ValueError(f"too many dims: {t.dim()}")
    return t


def _outer(t, limit):
    return _validate(t, limit) * 2


def catch_from_inlined(x):
    try:
        y = _outer(x, 1)
    except ValueError as e:
        y = x - 1
        msg = e.args[0]
    else:
        msg = "ok"
    finally:
        y = y + 10
    return y, msg


def try_finally_return(x):
    log = []
    try:
        log.append("try")
        return x + 1, log
    finally:
        log.append("finally")


def except_tuple_and_reraise(x, key):
    d = {"a": x}
    try:
        try:
            return d[key]
        except KeyError:
            raise LookupError("missing " + key)
    except (LookupError, TypeError) as e:
        return x * 0 + len(str(e.args[0]))


def stop_iteration_caught(xs):
    it = iter(xs)
    out = []
    while True:
        try:
            out.append(next(it) * 2)
        except StopIteration:
            break
    return out


class Empty:
    pass


def catch_attribute_error(x, obj):
    try:
        v = obj.missing
    except AttributeError:
        v = 3
    return x * v


EXCEPTIONS = [
    Case("catch_key_error", catch_key_error, lambda r: I(r.randn(2), {"bias": 1}), 1, 1),
    Case("catch_index_error", catch_index_error, lambda r: ([r.randn(2), r.randn(2)],), 1, 2),
    Case("catch_from_inlined", catch_from_inlined, x1, 1, 2),
    Case("try_finally_return", try_finally_return, x1, 1, 1),
    Case("except_tuple_and_reraise", except_tuple_and_reraise, lambda r: I(r.randn(2), "zz"), 1, 2),
    Case("stop_iteration_caught", stop_iteration_caught, lambda r: ([r.randn(2) for _ in range(3)],), 1, 3),
    Case("catch_attribute_error", catch_attribute_error, lambda r: I(r.randn(2), Empty()), 1, 1),
]


# -- user context managers ---------------------------------------------------------------------------
class Recorder:
    def __init__(self):
        self.events = []
        self.depth = 0

    def __enter__(self):
        self.depth += 1
        self.events.append("enter")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.depth -= 1
        self.events.append("exit" if exc_type is None else "exit:" + exc_type.__name__)
        return exc_type is KeyError    # swallow KeyErrors only


def with_user_ctx(x, rec):
    with rec as r:
        y = x * r.depth
    return y, rec.depth


def with_new_ctx(x):
    rec = Recorder()
    with rec:
        y = x + 1
        with rec:
            y = y * rec.depth
    return y, rec.events


def with_swallows_exception(x):
    rec = Recorder()
    y = x
    with rec:
        y = x * 2
        {}["nope"]
        y = x * 100
    return y, rec.events


@contextlib.contextmanager
def _scaled(holder, k):
    holder.append(k)
    yield k * 2
    holder.append(-k)


def with_contextmanager_generator(x):
    log = []
    with _scaled(log, 3) as k:
        y = x * k
        log.append(len(log))
    return y, log


@contextlib.contextmanager
def _frozen():
    with torch.no_grad():
        yield


def with_contextmanager_grad(x):
    with _frozen():
        y = x * 2
    return y, x * 3


def with_nullcontext(x):
    with contextlib.nullcontext(5) as k:
        return x + k


CONTEXTS = [
    Case("with_user_ctx", with_user_ctx, lambda r: I(r.randn(2), Recorder()), 1, 1),
    Case("with_new_ctx", with_new_ctx, x1, 1, 2),
    Case("with_swallows_exception", with_swallows_exception, x1, 1, 1),
    Case("with_contextmanager_generator", with_contextmanager_generator, x1, 1, 1),
    Case("with_contextmanager_grad", with_contextmanager_grad, xg, 1, 4),
    Case("with_nullcontext", with_nullcontext, x1, 1, 1),
]


# -- user classes with protocols; enums ---------------------------------------------------------------
class Vec:
    def __init__(self, data):
        self.data = data

    def __add__(self, other):
        return Vec(self.data + other.data)

    def __mul__(self, k):
        return Vec(self.data * k)

    def __neg__(self):
        return Vec(-self.data)

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, i):
        return self.data[i]


class Registry:
    def __init__(self, items):
        self._items = dict(items)

    def __getitem__(self, k):
        return self._items[k]

    def __contains__(self, k):
        return k in self._items

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(sorted(self._items))

    def __bool__(self):
        return bool(self._items)


class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


def vec_operators(x, y):
    v = Vec(x) + Vec(y) * 2
    w = -v
    return w.data, len(w), w[0]


def registry_protocols(x, reg):
    out = x
    for name in reg:
        out = out + reg[name]
    return out, len(reg), "a" in reg, "zz" in reg, bool(reg)


def new_object_truthiness(x):
    reg = Registry({"a": 1})
    empty = Registry({})
    return x * (bool(reg) + (2 if not empty else 0) + len(reg))


def enum_branch(x, mode):
    if mode is Mode.FAST:
        return x * 2, mode.value
    return x, mode.name


CLASSES = [
    Case("vec_operators", vec_operators, lambda r: (r.randn(3), r.randn(3)), 1, 4),
    Case("registry_protocols", registry_protocols, lambda r: I(r.randn(2), Registry({"b": r.randn(2), "a": 1.0})),
         1, 2),
    Case("new_object_truthiness", new_object_truthiness, x1, 1, 1),
    Case("enum_branch", enum_branch, lambda r: I(r.randn(2), Mode.FAST), 1, 1),
]


# -- torch.compiler.is_compiling() is True inside, False in eager ----------------------------------------
def compiling_switch(x):
    if torch.compiler.is_compiling():
        return x + 1
    return x - 1


COMPILING = [
    Case("is_compiling_true_inside", compiling_switch, x1, 1, 1, reference=lambda x: x + 1),
]

CASES = GRAD + STRUCTS + EXCEPTIONS + CONTEXTS + CLASSES + COMPILING


@parametrize(CASES)
def test_program(case):
    run_case(case)

"""Common builtins, ``math`` and ``operator`` / ``functools`` / ``itertools`` helpers."""
from __future__ import annotations

import functools
import itertools
import math
import operator

import torch
import torch.nn as nn

from .capture_harness import Case, I, parametrize, run_case


def x1(r):
    return (r.randn(3, 4),)


def xy(r):
    return r.randn(3, 4), r.randn(3, 4)


def xs3(r):
    return ([r.randn(2, 3) for _ in range(3)],)


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


class Point3(Point):
    pass


# -- isinstance / issubclass / type / callable ----------------------------------------------------
def isinstance_checks(x, items, obj, mod):
    flags = (isinstance(x, torch.Tensor), isinstance(items, list), isinstance(items, (tuple, dict)),
             isinstance(obj, Point), isinstance(obj, Point3), isinstance(mod, nn.Module),
             isinstance(mod, (nn.Linear, nn.Conv2d)), isinstance(3, int), isinstance(2.5, (int, float)),
             isinstance(True, int), isinstance(None, type(None)), isinstance(x, nn.Parameter))
    return x * sum(flags), flags


def type_checks(x, n, s):
    return x + (type(n) is int) + (type(s) is str) * 2 + (type(x) is torch.Tensor) * 4, type(n).__name__, \
        issubclass(Point3, Point), issubclass(bool, (str, int))


def callable_checks(x, fn):
    return x * (callable(fn) + callable(torch.relu) * 2 + callable(len) * 4 + callable(3) * 8 + callable(Point) * 16)


ISINSTANCE = [
    Case("isinstance_checks", isinstance_checks,
         lambda r: I(r.randn(2), [1], Point(1, 2), nn.Linear(2, 2)), 1, 1),
    Case("type_checks", type_checks, lambda r: I(r.randn(2), 3, "s"), 1, 3),
    Case("callable_checks", callable_checks, lambda r: I(r.randn(2), abs), 1, 1),
]


# -- attributes via builtins ----------------------------------------------------------------------
def attr_builtins(p, x):
    has = (hasattr(p, "x"), hasattr(p, "z"), hasattr(x, "shape"), hasattr(x, "no_such_attr"))
    z = getattr(p, "z", 10)
    y = getattr(p, "y")
    return x * y + z, has


def setattr_on_new(x):
    p = Point(x, 2)
    setattr(p, "y", 5)
    setattr(p, "x", p.x * p.y)
    return p.x, getattr(p, "y"), hasattr(p, "x")


def setattr_on_input(p, x):
    setattr(p, "x", x + p.y)
    return getattr(p, "x") * 2


ATTRS = [
    Case("attr_builtins", attr_builtins, lambda r: I(Point(1, 3), r.randn(2)), 1, 2),
    Case("setattr_on_new", setattr_on_new, x1, 1, 1),
    Case("setattr_on_input", setattr_on_input, lambda r: I(Point(r.randn(2), 3), r.randn(2)), 1, 2),
]


# -- min / max / abs / sum / all / any / round / pow / divmod ---------------------------------------
def minmax_numbers(x, sizes):
    return x * (min(sizes) + max(sizes) * 10 + max(3, 7, 5) + min(sizes, key=lambda s: -s) + max([], default=4))


def minmax_tensors(x, y):
    # one item: nothing is compared, so tensors are fine (two tensors would branch on data)
    return max([x]) + min((y,)), max(x.shape), min(x.size()), max(x.shape, key=lambda d: -d)


def abs_sum_numbers(x, n):
    return x * (abs(n) + abs(-2.5) + sum([1, 2, 3]) + sum((0.5, 0.25), 10))


def sum_tensors(xs):
    return sum(xs), sum(xs, torch.ones(2, 3)), sum(t.sum() for t in xs)


def all_any(x, xs):
    shapes_ok = all(t.shape == xs[0].shape for t in xs)
    any_big = any(t.dim() > 2 for t in xs)
    return x * (shapes_ok + 2 * any_big + 4 * all([]) + 8 * any([0, 0.0, "x"])), shapes_ok, any_big


def round_pow_divmod(x, f):
    return x * round(f) + round(f, 1) + pow(2, 3) + pow(2, 5, 7) + divmod(17, 5)[1], pow(x, 2), abs(-x)


def conversions(x, n, f):
    return x * int("12") + float(n) + int(f) + bool([]) + float("1.5"), str(n), repr(f), bool(n)


NUMERIC = [
    Case("minmax_numbers", minmax_numbers, lambda r: I(r.randn(2), [4, 1, 9]), 1, 1),
    Case("minmax_tensors", minmax_tensors, xy, 1, 1),
    Case("abs_sum_numbers", abs_sum_numbers, lambda r: I(r.randn(2), -3), 1, 1),
    Case("sum_tensors", sum_tensors, xs3, 1, 13),
    Case("all_any", all_any, lambda r: I(r.randn(2), xs3(r)[0]), 1, 1),
    Case("round_pow_divmod", round_pow_divmod, lambda r: I(r.randn(2), 2.26), 1, 8),
    Case("conversions", conversions, lambda r: I(r.randn(2), 3, 2.7), 1, 5),
]


# -- range, map, filter, sorted, reversed, zip, enumerate ------------------------------------------
def range_len_index(xs):
    out = []
    for i in range(len(xs)):
        out.append(xs[i] * i)
    return out, list(range(1, 8, 3)), range(4)[-1], len(range(0, 10, 4))


def map_filter(xs):
    doubled = list(map(lambda t: t * 2, xs))
    big = list(filter(lambda t: t.shape[0] > 1, xs))
    names = list(map(str.upper, ["a", "b"]))
    pairs = list(map(operator.add, [1, 2], [10, 20]))
    return doubled, big, names, pairs, list(filter(None, [0, 1, "", "y"]))


def sorted_reversed(x, d):
    keys = sorted(d, reverse=True)
    vals = [d[k] for k in reversed(sorted(d))]
    return x * keys.index("b"), vals, sorted([3, 1, 2]), list(reversed((1, 2, 3)))


def dict_from_zip(x, names):
    table = dict(zip(names, range(len(names))))
    inv = {v: k for k, v in table.items()}
    return x * table["c"], inv, list(enumerate(names, 2))


ITERATION = [
    Case("range_len_index", range_len_index, xs3, 1, 3),
    Case("map_filter", map_filter, lambda r: ([r.randn(1, 2), r.randn(3, 2)],), 1, 2),
    Case("sorted_reversed", sorted_reversed, lambda r: I(r.randn(2), {"a": 1, "c": 3, "b": 2}), 1, 1),
    Case("dict_from_zip", dict_from_zip, lambda r: I(r.randn(2), ["a", "b", "c"]), 1, 1),
]


# -- math ------------------------------------------------------------------------------------------
def attention_scale(q, k):
    d = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)
    return scores.softmax(-1) * math.pi


def math_functions(x, n):
    numel = math.prod(x.shape)
    return x * math.log(n) + math.ceil(n / 3) - math.floor(2.7) + math.exp(0.5) + numel, \
        math.isclose(0.1 + 0.2, 0.3), math.gcd(12, 18), math.inf > 1e300, math.isfinite(math.e)


def math_trig(x):
    return x * math.cos(math.pi / 3) + math.tanh(0.5) + math.atan2(1.0, 1.0) + math.hypot(3, 4)


MATH = [
    Case("attention_scale", attention_scale, lambda r: (r.randn(2, 3, 4), r.randn(2, 3, 4)), 1, 5),
    Case("math_functions", math_functions, lambda r: I(r.randn(2, 3), 5), 1, 5),
    Case("math_trig", math_trig, x1, 1, 4),
]


# -- operator / functools / itertools ----------------------------------------------------------------
def operator_functions(x, y):
    a = operator.add(x, y)
    b = operator.mul(a, 2)
    c = operator.truediv(operator.sub(b, x), 3)
    d = operator.neg(operator.matmul(x, y.T))
    e = operator.getitem(x, 0)
    return a, c, d, e, operator.lt(x, y), operator.not_(0), operator.truth([1]), operator.is_(None, None), \
        operator.contains([1, 2], 2), operator.index(7)


def operator_inplace(x, y):
    z = x.clone()
    z = operator.iadd(z, y)
    z = operator.imul(z, 2)
    lst = [1]
    lst = operator.iadd(lst, [2])
    operator.setitem(lst, 0, 5)
    return z, lst


def functools_reduce(xs):
    total = functools.reduce(operator.add, xs)
    prod = functools.reduce(lambda a, b: a * b, [1, 2, 3, 4], 1)
    return total * prod


def itertools_helpers(xs, x):
    chained = [t * 2 for t in itertools.chain(xs[:1], [x])]
    grid = [(i, j) for i, j in itertools.product(range(2), "ab")]
    firsts = list(itertools.islice(xs, 2))
    return chained, grid, firsts


TOOLS = [
    Case("operator_functions", operator_functions, xy, 1, 9),
    Case("operator_inplace", operator_inplace, xy, 1, 3),
    Case("functools_reduce", functools_reduce, xs3, 1, 3),
    Case("itertools_helpers", itertools_helpers, lambda r: (xs3(r)[0], r.randn(2, 3)), 1, 2),
]

CASES = ISINSTANCE + ATTRS + NUMERIC + ITERATION + MATH + TOOLS


@parametrize(CASES)
def test_program(case):
    run_case(case)

"""The opcode families CPython 3.12 introduced, one program each.

The programs are plain Python that every supported version compiles; on 3.12+ they
produce the new opcodes (named per case), on 3.11 the older ones, so each runs on every
version with the same graph and op counts: ``fullgraph=True``, compiled against eager on
two input sets (``capture_harness.run_case``).
"""
from __future__ import annotations

import dis

import torch
import torch.nn as nn

from ..capture.capture_harness import Case, I, parametrize, run_case


def x1(r):
    return (r.randn(3, 4),)


# -- LOAD_SUPER_ATTR: zero- and two-argument super() in module code ---------------------------
class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0

    def forward(self, x):
        return x * self.scale

    def shift(self, x):
        return x + 1


class ZeroArg(Base):
    def forward(self, x):
        return super().forward(x).relu() + super().shift(x)


class TwoArg(Base):
    def forward(self, x):
        return super(TwoArg, self).forward(x).tanh() + super(TwoArg, self).shift(x)


class SuperAttr(Base):
    def forward(self, x):
        m = super().shift     # the attribute form (no method bit)
        return m(x) * 3


# -- BINARY_SLICE / STORE_SLICE ---------------------------------------------------------------
def slices(x, items):
    head = x[1:3]
    tail = items[1:]
    items[0:1] = [x.sum()]
    y = x.clone()
    y[:, 1:3] = 0.0
    return head * 2, tail, items, y


# -- LOAD_FAST_CHECK (a name that may be unbound), RETURN_CONST, POP_JUMP_IF_* --------------
def maybe_bound(x, flag):
    if flag:
        y = x + 1
    if flag is not None and flag:
        return y * 2
    return x


def returns_const(x, out):
    out.append(x.cos())
    if out:
        return None
    return 1


# -- END_FOR, LOAD_FAST_AND_CLEAR (a comprehension shadowing an outer name) -------------------
def loops(x):
    t = x
    acc = x
    for t in [x, x * 2]:       # END_FOR at the loop's end
        acc = acc + t
    squares = [t * t for t in (acc, x)]   # 3.12 saves and restores the outer ``t``
    return acc, squares, t


# -- CALL_INTRINSIC_1: *args to a tuple, unary +, StopIteration in a generator ------------------
def takes(*args):
    return sum(args)


def intrinsics(x, xs):
    a = takes(*[x, x * 2])
    b = +x
    return a, b, takes(*xs)


def gen(x):
    yield x * 2
    yield x + 1


def delegating(x):
    yield from gen(x)     # SEND / END_SEND in 3.12


def generators(x):
    return list(gen(x)), list(delegating(x)), next(iter(gen(x)))


# -- LOAD_ATTR's method bit --------------------------------------------------------------------
class Holder:
    def __init__(self, w):
        self.w = w

    def apply(self, x):
        return x @ self.w


def methods(x, h):
    return h.apply(x).relu(), x.sum(dim=0).abs()


CASES = [
    Case("super_zero_arg", ZeroArg(), x1, 1, 4),
    Case("super_two_arg", TwoArg(), x1, 1, 4),
    Case("super_attr", SuperAttr(), x1, 1, 2),
    Case("slices", slices, lambda r: I(r.randn(4, 4), [1, 2, 3]), 1, 5),
    Case("maybe_bound_true", maybe_bound, lambda r: I(r.randn(3), True), 1, 2),
    Case("maybe_bound_false", maybe_bound, lambda r: I(r.randn(3), False), 0, 0),
    Case("returns_const", returns_const, lambda r: I(r.randn(3), []), 1, 1),
    Case("loops", loops, x1, 1, 5),
    Case("intrinsics", intrinsics, lambda r: I(r.randn(3), (r.randn(3), r.randn(3))), 1, 6),
    Case("generators", generators, x1, 1, 5),
    Case("methods", methods, lambda r: I(r.randn(3, 4), Holder(r.randn(4, 2))), 1, 4),
]


@parametrize(CASES)
def test_opcode_family(case):
    run_case(case)


def test_the_cases_use_the_new_opcodes_where_the_version_has_them():
    """On 3.12+ the programs above really contain the opcodes they are named for."""
    have = set(dis.opmap)
    used = set()
    for fn in (ZeroArg.forward, TwoArg.forward, slices, maybe_bound, returns_const, loops, intrinsics,
               delegating, methods):
        used |= {i.opname for i in dis.get_instructions(fn)}
    wanted = {"LOAD_SUPER_ATTR", "BINARY_SLICE", "STORE_SLICE", "LOAD_FAST_CHECK", "RETURN_CONST", "END_FOR",
              "LOAD_FAST_AND_CLEAR", "CALL_INTRINSIC_1", "END_SEND", "POP_JUMP_IF_FALSE"} & have
    assert wanted <= used, sorted(wanted - used)

"""A graph break inside a comprehension.

From 3.12 a comprehension is code inside its enclosing frame (PEP 709: no function of
its own; the frame's stack holds the list being built, the iterator and any outer name
the comprehension shadows, saved by LOAD_FAST_AND_CLEAR).  A break in its body then
breaks *there*: the step runs the breaking instruction, and the continuation resumes
inside the loop with that stack, so the tensor work before and after the comprehension
stays in graphs.  On 3.11 the comprehension is a nested function whose frame breaks
on its own; either way nothing runs eagerly and results match eager.
"""
from __future__ import annotations

import sys

import torch

import kiln

from ..breaks.harness import check, randn

INLINED = sys.version_info >= (3, 12)


def _graph_codes(counter):
    return [g.code for g in counter.graphs]


def test_break_inside_a_list_comprehension_resumes_there():
    def f(x):
        y = x * 2
        parts = [(print("part", i), t.cos())[1] for i, t in enumerate(y.unbind(0))]
        return torch.stack(parts).sum() + y.sin().sum()

    inputs = [(randn(0, 3, 2),), (randn(1, 3, 2),)]
    # 3.12+: the frame (y, unbind); each of the 3 prints breaks inside the loop; the body's
    # continuation (cos) is captured for the first iteration and again for the second (the
    # list it receives has grown: one recompile, as for the same loop written out with
    # append), the last iteration resumes in the loop-exit copy (cos, stack, sin).
    # 3.11: the <listcomp> function runs as Python (a callee given no tensors), one break.
    _, counter = check(f, inputs, graphs=4 if INLINED else 2, breaks=3 if INLINED else 1, min_prints=3)
    codes = _graph_codes(counter)
    assert "mul" in codes[0], codes[0]          # before the comprehension: compiled
    assert any("sin" in c for c in codes[1:])   # after it: compiled
    assert kiln.metrics.eager_fallbacks == 0


def test_break_inside_a_comprehension_that_shadows_a_local():
    def f(x, t):
        w = t * 3
        squares = [(print(k), k * t)[1] for t in (x, x + 1) for k in (1, 2)]
        return w + sum(squares), t   # ``t`` is the argument again after the comprehension

    inputs = [(randn(0, 3), randn(1, 3)), (randn(2, 3), randn(3, 3))]
    # 3.12+: the frame (w, x + 1), the inner loop's body three times (a recompile as
    # above, and the inner loop's exit into the outer loop's next item), the exit copy
    _, counter = check(f, inputs, graphs=5 if INLINED else 2, breaks=4 if INLINED else 1, min_prints=4)
    codes = _graph_codes(counter)
    assert "mul" in codes[0] and "add" in codes[-1]
    assert kiln.metrics.eager_fallbacks == 0


def test_break_inside_a_dict_comprehension():
    def f(x):
        d = {i: (print(i), x[i] * 2)[1] for i in range(2)}
        return d[0] + d[1].relu()

    inputs = [(randn(0, 2, 3),), (randn(1, 2, 3),)]
    # 3.12+: the frame has no tensor work before the first print; the body's continuation
    # (x[0] * 2) and the exit copy (x[1] * 2, relu, add)
    check(f, inputs, graphs=2 if INLINED else 1, breaks=2 if INLINED else 1, min_prints=2)

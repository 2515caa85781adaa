"""What a version offers that Kiln does not trace is a graph break with a reason that
names the construct and the user's line: results stay eager's, the tensor work around
it stays compiled."""
from __future__ import annotations

import sys
import types

import pytest
import torch

import kiln

from ..breaks.harness import check, randn


def _reasons():
    return [(b.reason, b.source_line) for b in kiln.metrics.breaks]


class _HasScale(type):
    def __instancecheck__(cls, obj):           # decides by the object: Kiln cannot ask the type
        return hasattr(obj, "scale")


class _Scaled(metaclass=_HasScale):
    __match_args__ = ("scale",)


def test_match_class_pattern_kiln_cannot_decide_breaks_once_naming_the_line():
    """``match`` is traced (handlers/patterns.py); a class pattern whose isinstance Kiln
    cannot answer breaks at that one test, which runs as Python, and the graph resumes."""
    def f(x, spec):
        y = x * 2
        match spec:
            case _Scaled(s):
                y = y * s
            case [a, b]:
                y = y + a - b
        return y.relu()

    ns = types.SimpleNamespace
    inputs = [(randn(0, 3), ns(scale=3.0)), (randn(1, 3), ns(scale=0.5))]
    check(f, inputs, graphs=2, breaks=1)
    reason, line = _reasons()[0]
    assert "whose metaclass decides by the object" in reason and "case" in line, _reasons()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 695 type parameter syntax is Python 3.12+")
def test_type_parameters_break_naming_the_line():
    namespace = {"torch": torch}
    exec(compile("def f(x):\n"
                 "    y = x + 1\n"
                 "    def ident[T](a: T) -> T:\n"
                 "        return a\n"
                 "    return ident(y).cos()\n", "<pep695>", "exec"), namespace)
    f = namespace["f"]
    inputs = [(randn(0, 3),), (randn(1, 3),)]
    check(f, inputs, graphs=2, breaks=1)
    reason, _line = _reasons()[0]
    assert "typing constructs" in reason, _reasons()
    assert kiln.metrics.breaks[0].location.startswith("<pep695>:3")


def test_locals_runs_the_frame_as_python():
    """``locals()`` (a snapshot since 3.13, PEP 667) reads the frame: called from a step
    function it would see the step's locals, so the frame runs eagerly, naming the line."""
    def f(x):
        y = x * 2
        names = sorted(locals())
        return y + 1, names

    inputs = [(randn(0, 3),), (randn(1, 3),)]
    check(f, inputs, graphs=0, breaks=1, fallbacks=1)
    assert "locals() reads the frame's locals" in kiln.metrics.breaks[0].reason
    assert "locals()" in kiln.metrics.breaks[0].source_line

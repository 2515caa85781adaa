"""Graph breaks at prints and explicit break markers: position in the frame, several in
a row, values printed, fullgraph errors, and the cache on a second call."""
from __future__ import annotations

import sys

import pytest
import torch

import kiln
from kiln.testing import CompileCounter

from .harness import check, log, randn, seeds, shout


def one(shape=(3, 4)):
    return lambda s: (randn(s, *shape),)


def test_print_at_start():
    def f(x):
        print("start")
        return x.sin() + 1

    check(f, seeds(one()), graphs=1, breaks=1)


def test_print_in_middle():
    def f(x):
        y = x.cos()
        print("middle")
        return y * 2

    check(f, seeds(one()), graphs=2, breaks=1)


def test_print_at_end():
    def f(x):
        y = x.relu() - 1
        print("end")
        return y

    check(f, seeds(one()), graphs=1, breaks=1)


def test_print_of_a_computed_tensor():
    def f(x):
        y = x * 3
        print("y is", y)
        return y + x

    check(f, seeds(one((2, 2))), graphs=2, breaks=1)


def test_print_of_shape_and_python_values():
    def f(x, n):
        print("shape", x.shape, "n", n, "dims", x.dim(), [n, n + 1], {"k": n})
        return x.sum(0) * n

    check(f, [(randn(0, 3, 2), 2), (randn(1, 3, 2), 2)], graphs=1, breaks=1)


def test_several_prints_in_a_row():
    def f(x):
        x = x + 1
        print("one")
        print("two")
        print("three")
        return x * x

    # every print is its own break; the continuations between them have no tensor work
    check(f, seeds(one()), graphs=2, breaks=3)


def test_prints_between_tensor_ops():
    def f(x):
        a = x + 1
        print("a")
        b = a * 2
        print("b")
        c = b - x
        print("c")
        return c.sum()

    check(f, seeds(one()), graphs=4, breaks=3)


def test_stdout_write_and_a_user_logger():
    class Logger:
        def __init__(self):
            self.lines = 0

        def info(self, msg, value):
            self.lines += 1
            sys.stdout.write(f"[info {self.lines}] {msg}={value}\n")

    logger = Logger()

    def f(x):
        y = x.exp()
        logger.info("mean", round(float(y.mean()), 3))
        return y / 2

    # float() is in the graph; round() of it needs its value in Python (a break), and so
    # does the logger call (info() gets no tensor, so it runs as plain Python).  The float
    # is never specialised, so the second input set reuses every entry.
    check(f, seeds(one()), graphs=2, breaks=2, setup=lambda: setattr(logger, "lines", 0),
          state=lambda: logger.lines)


def test_print_with_log_before_and_after():
    def f(x):
        log("before")
        y = x + 1
        print("between")
        log("after", 1)
        return y

    check(f, seeds(one()), graphs=1, breaks=1)


def test_kiln_graph_break():
    def f(x):
        y = x * 2
        kiln.graph_break()
        return y + 1

    check(f, seeds(one()), graphs=2, breaks=1)


def test_torch_dynamo_graph_break():
    import torch._dynamo  # only the test imports it; Kiln recognises the marker once loaded

    def f(x):
        y = x * 2
        torch._dynamo.graph_break()
        y = y.sin()
        torch._dynamo.graph_break()
        return y + 1

    check(f, seeds(one()), graphs=3, breaks=2)


def test_explicit_breaks_and_prints_mixed():
    def f(x):
        print("p0")
        x = x + 1
        kiln.graph_break()
        print("p1", x.shape)
        x = x * 3
        return x

    check(f, seeds(one()), graphs=2, breaks=3)


def test_value_through_shout():
    def f(x):
        y = shout(x + 1, "y")
        return y * 2

    # the break inside shout() breaks f at the call, and shout() breaks as its own frame
    check(f, seeds(one()), graphs=2, breaks=1)


def test_same_shapes_again_compile_nothing():
    def f(x):
        y = x + 1
        print("hi")
        return y * 2

    cf, counter = check(f, seeds(one()), graphs=2, breaks=1)
    for s in range(5):
        cf(randn(10 + s, 3, 4))
    assert counter.frame_count == 2 and kiln.metrics.recompiles == 0


def test_new_shape_recompiles_every_piece():
    def f(x):
        y = x + 1
        print("hi")
        return y * 2

    # a new shape fails the guards of the frame and of its continuation
    check(f, [(randn(0, 3),), (randn(1, 5),)], graphs=2, total_graphs=4, breaks=1, total_breaks=2)
    assert kiln.metrics.recompiles == 2


def _breaking_line(fn, text):
    lines, first = __import__("inspect").getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("kind", ["print", "tolist", "explicit"])
def test_fullgraph_names_the_breaking_line(kind):
    def f(x):
        y = x + 1
        if kind == "print":
            print("no")
        elif kind == "tolist":
            y = y * y.sum().tolist()   # (item() is captured: tests/capture/test_data_dependent.py)
        else:
            kiln.graph_break()
        return y

    text = {"print": 'print("no")', "tolist": "y.sum().tolist()", "explicit": "kiln.graph_break()"}[kind]
    cf = kiln.compile(f, backend=CompileCounter(), fullgraph=True)
    with pytest.raises(kiln.Unsupported) as info:
        cf(randn(0, 3))
    where = f"{__file__}:{_breaking_line(f, text)}"
    assert info.value.location == where
    assert where in str(info.value) and text in str(info.value)

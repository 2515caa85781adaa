"""Breaks that come from reading tensor data: .tolist() feeding Python, Python that
needs a number read with .item() (a branch, ``round``, ``print``), branches on tensor
values, data-dependent while loops, and loops with a break in the body.

A number read with ``.item()`` / ``int(t)`` stays in the graph (an unbacked symbol, see
tests/capture/test_data_dependent.py): only Python that needs its value breaks, and it
never becomes a guard, so a new value does not recompile.  Numbers that reach a
continuation as Python numbers are guarded where the continuation uses one as a
constant, so a new value recompiles the continuation; the counts below say so where it
matters.

Loops with a break in the body resume in one cached continuation per resume point
(built from the original code), so later iterations compile nothing new.  The loop's
iterator reaches the continuation as a real ``tuple_iterator``, which Kiln does not
iterate: FOR_ITER breaks once as well (a gap: the ideal is one break per loop).
"""
from __future__ import annotations

import numpy as np
import torch

import kiln

from .harness import check, log, randn, seeds, shout


def test_item_used_in_python_arithmetic():
    def f(x):
        s = x.sum().item()
        scale = s * 2 + 1
        return x * scale

    # one graph: the float read with item() and the Python arithmetic on it are in the
    # graph (an unbacked float), so no break, and a new value is no recompile
    check(f, seeds(lambda s: (randn(s, 4),)), graphs=1, breaks=0)


def test_item_same_value_reuses_the_continuation():
    def f(x):
        n = int(x.max().item())
        return x[:n] * n

    # the slice by a number read from data is in the graph (an unbacked size)
    inputs = [(torch.tensor([3.0, 1.0, 2.0, 0.5]),), (torch.tensor([0.5, 3.0, 1.0, 2.5]),)]
    check(f, inputs, graphs=1, breaks=0)


def test_tolist_used_in_python():
    def f(x):
        values = x.round().tolist()
        total = sum(values)
        log("values", values)
        return x + total, len(values)

    check(f, seeds(lambda s: (randn(s, 3),)), graphs=2, total_graphs=3, breaks=1)


def test_item_then_print():
    def f(x):
        m = x.abs().max().item()
        print("max is", round(m, 4))
        return x / m

    # round(m, 4) needs m's value in Python: a break there (the graph hands it the float),
    # then the print; the continuation takes m as a 0-d tensor input (not specialised), so
    # the second value reuses every entry
    check(f, seeds(lambda s: (randn(s, 5),)), graphs=2, breaks=2)


def _signed(s):
    x = randn(s, 3, 3).abs() + 0.1
    return (x if s == 0 else -x,)


def test_branch_on_tensor_value_both_directions():
    def f(x):
        y = x * 2
        if y.sum() > 0:
            y = y + 10
        else:
            y = y - 10
        return y.cos()

    # first call takes the true branch: frame graph + that continuation; the second
    # takes the false branch, whose continuation compiles then (graph 3)
    check(f, seeds(_signed), graphs=2, total_graphs=3, breaks=1)


def test_branch_only_taken_side_compiles():
    def f(x):
        if (x > 0).all():
            log("positive")
            return x.sqrt()
        log("not positive")
        return x.abs().sqrt() * -1

    positive = [(randn(s, 3, 3).abs() + 0.1,) for s in (2, 3)]
    _, counter = check(f, positive, graphs=2, breaks=1)
    assert counter.frame_count == 2


def test_branch_with_and_or():
    def f(x, y):
        if x.mean() > 0 and y.mean() > 0:
            return x + y
        return x - y

    inputs = [(randn(0, 4).abs(), randn(1, 4).abs()), (randn(0, 4).abs(), -randn(1, 4).abs()),
              (-randn(2, 4).abs(), randn(3, 4))]
    # each `and` operand is its own break.  Input 1 takes the second test's false exit
    # (graph 4); input 2 the first test's false exit, the same resume point: reused
    check(f, inputs, graphs=3, total_graphs=4, breaks=2)


def test_branch_on_bool_of_tensor_in_expression():
    def f(x):
        y = x + 1
        z = y * 2 if bool(y.max() > 1.5) else y / 2
        return z - x

    check(f, [(randn(0, 4).abs() + 1,), (randn(1, 4).abs() * 0.1,)], graphs=2, total_graphs=3, breaks=1)


def test_while_loop_data_dependent():
    def f(x):
        steps = 0
        while x.norm() > 1:
            x = x / 2
            steps += 1
        return x, steps

    # the first test breaks in the frame; the body + test is one continuation reused by
    # every iteration (`steps` is not specialised); the exit has no tensor work.
    # 3 and 5 iterations: nothing new for the second input set
    inputs = [(torch.full((4,), 3.0),), (torch.full((4,), 10.0),)]
    check(f, inputs, graphs=2, breaks=2)


def test_while_loop_with_print():
    def f(x):
        i = 0
        while x.sum() < 20:
            print("iteration", i)
            x = x * 2
            i += 1
        return x

    inputs = [(torch.ones(3),), (torch.full((3,), 2.0),)]
    # breaks: the first test (frame), the print (after the test), the test after
    # `x * 2`; graphs: the first test, `x * 2` + test; all reused by later iterations
    check(f, inputs, graphs=2, breaks=3, min_prints=5)


def test_for_loop_with_print_in_body():
    def f(x):
        for i in range(4):
            print(i)
            x = x * 2
        return x + 1

    # breaks: the print in the frame, the print in the loop-body continuation (which
    # reads the carried range iterator itself); graphs: `x * 2`, the tail `x + 1`.  The
    # other iterations reuse them
    check(f, seeds(lambda s: (randn(s, 3),)), graphs=2, breaks=2, min_prints=8)


def test_for_loop_over_list_with_log_and_break():
    def f(x, items):
        acc = x
        for k in items:
            log("item", k)
            kiln.graph_break()
            acc = acc + k
        return acc

    # graph_break in the frame, graph_break in the body continuation; log() appends to
    # a global list, which the glue writes back whole and so guards by length: the body
    # continuation (`acc + k`, the next item, log) recompiles for the third item
    check(f, [(randn(0, 2), [1, 2, 3]), (randn(1, 2), [1, 2, 3])], graphs=3, breaks=3)


def test_for_loop_accumulating_items():
    def f(x):
        total = 0.0
        for row in x:
            total += row.sum().item()
        return total, x.mean()

    # every item() is in the one graph and `total` is a float it computes: no break
    check(f, [(torch.ones(3, 2),), (torch.arange(6.0).reshape(3, 2),)], graphs=1, breaks=0)


def test_item_in_nested_condition_and_index():
    def f(x, table):
        k = int(x.argmax().item())
        if table[k] > 1:
            return x * table[k]
        return x + k

    table = [0, 5, 2, 7]
    check(f, [(torch.tensor([0.0, 3.0, 1.0, 2.0]), table), (torch.tensor([4.0, 1.0, 1.0, 2.0]), table)],
          graphs=2, total_graphs=3, breaks=1)


def test_loop_over_module_list_with_print():
    torch.manual_seed(0)
    layers = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(3)])

    def f(x):
        for i, layer in enumerate(layers):
            x = layer(x)
            print("layer", i)
        return x

    # print in the frame, print in the body continuation (the layers are guarded by
    # type, so one entry serves all three)
    check(f, seeds(lambda s: (randn(s, 2, 3),)), graphs=2, breaks=2)


def test_comprehension_with_print():
    def f(x):
        ys = [shout(t, "row") for t in x]
        return torch.stack(ys) * 2

    # the comprehension is a function made in the frame: f breaks at its call and it
    # runs as plain Python; the rows come from the first graph
    check(f, seeds(lambda s: (randn(s, 2, 3),)), graphs=2, breaks=1)


def test_loop_with_data_dependent_branch():
    def f(x):
        y = x
        for _ in range(3):
            if y.sum() > 0:
                y = y - 1
            else:
                y = y + 2
        return y

    # a branch break per resume point; both branches' continuations are reused across
    # iterations and input sets
    check(f, seeds(lambda s: (randn(s, 3),)), graphs=4, breaks=3)


def test_loop_over_dict_items_with_breaks():
    def f(x, weights):
        out = {}
        for k, w in weights.items():
            out[k] = x * w
            kiln.graph_break()
        return out

    # graph_break in the frame, graph_break in the body continuation (it takes the
    # next item from the carried dict iterator itself)
    check(f, [(randn(0, 3), {"a": 1.0, "b": 2.0}), (randn(1, 3), {"a": 1.0, "b": 2.0})], graphs=2, breaks=2)


def test_assert_on_shape_then_print():
    def f(x, n):
        assert x.dim() == 1, "bad"
        print("n", n)
        return x.repeat(n)

    check(f, [(randn(0, 3), 2), (randn(1, 3), 3)], graphs=1, total_graphs=2, breaks=1)


def test_item_inside_boolean_expression():
    def f(x):
        y = x * 2
        print(y.sum().item() > 100 and "big" or "small")
        return y

    # the `and` branches on the comparison of the float read with item() (a break there,
    # the graph computes the comparison), then the print; nothing is specialised, so the
    # second input set reuses every entry
    check(f, seeds(lambda s: (randn(s, 3),)), graphs=1, breaks=2)


def test_numpy_round_trip_is_one_graph():
    def f(x):
        y = x * 2
        a = y.numpy()
        b = a * 3 + 1
        return torch.from_numpy(b) + x, torch.tensor(b.sum()) * 2

    # numpy on arrays from tensors is traced through torch._numpy (issue #32; it ran as
    # Python at six breaks before): one graph, nothing falls back to eager
    check(f, seeds(lambda s: (randn(s, 3, 4),)), graphs=1, breaks=0)


def test_numpy_random_breaks_but_the_frame_stays_compiled():
    def f(x):
        y = x * 2
        noise = np.random.rand(3, 4).astype(np.float32)
        return torch.from_numpy(noise) + y

    # np.random runs as Python (numpy's own stream); the torch work around it stays in graphs
    check(f, seeds(lambda s: (randn(s, 3, 4),)), graphs=2, breaks=1, setup=lambda: np.random.seed(0))

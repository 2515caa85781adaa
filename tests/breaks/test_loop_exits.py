"""The last iteration of a ``for`` loop whose body breaks resumes in a copy of the
continuation of its own (``runtime.steps.LoopExitPicker``): the continuation that takes
the next item and the one that finds the iterator empty and leaves the loop are
separate code objects with one entry each, so the first call makes no recompile
(issue #14: BigBird's layer loop showed one in every run), and the graphs are the
same as when both were entries of one continuation."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import kiln
from kiln import cache

from .harness import check, randn, seeds
from .test_carried_iterators import LOOPS, over_tuple, tensors


def continuations() -> dict:
    """Entries per continuation code (name -> count), for the caches made so far."""
    out = {}
    for c in cache._CACHES.values():
        # continuations are named after the user's code: ``f, from line 40 (loop exit 1)``;
        # two continuations may resume on one line, so each is keyed by its code too
        name = c.code.co_qualname
        if ", from line" in name:
            out[(name, c.code)] = out.get((name, c.code), 0) + len(c.entries)
    return out


def assert_one_entry_each(expected_exits: int):
    made = continuations()
    assert all(n == 1 for n in made.values()), f"continuations with more than one entry: {made}"
    exits = [name for name, _ in made if "(loop exit" in name]
    assert len(exits) == expected_exits, f"loop-exit copies: {made}"


@pytest.mark.parametrize("fn", LOOPS, ids=[f.__name__ for f in LOOPS])
def test_loop_exit_is_a_continuation_of_its_own(fn):
    # graphs: the body continuation (rest of the body, next item, up to the print) and
    # its exit copy (rest of the body, return): as many as before, and no recompile
    check(fn, seeds(tensors(4)), graphs=2, breaks=2, min_prints=4)
    assert kiln.metrics.recompiles == 0
    assert_one_entry_each(expected_exits=1)


def test_one_item_loop_first_then_longer_loops():
    # the first call resumes straight into the exit copy (one item: the iterator is empty
    # after the frame took it); the longer loops then make the body continuation.  The
    # frame itself unrolls the tuple and has an entry per length (the recompiles here),
    # the continuations have one entry each
    check(over_tuple, [tensors(1)(0), tensors(3)(1), tensors(5)(2)], graphs=1, breaks=1, total_graphs=2,
          total_breaks=4)
    assert kiln.metrics.recompiles == 2
    assert_one_entry_each(expected_exits=1)


def test_nested_loops_with_a_break_in_the_inner_body():
    def f(x, t, u):
        for a in t:
            for b in u:
                print("pair")
                x = x * 0.5 + a * b
        return x

    # copies: the inner loop goes on; the inner loop ran out and the outer goes on (the
    # next outer item starts a new inner loop and breaks again); both ran out
    check(f, seeds(lambda s: (randn(s, 3), tuple(randn(s + 10 + i, 3) for i in range(3)),
                              tuple(randn(s + 20 + i, 3) for i in range(2)))), graphs=3, breaks=3, min_prints=6)
    assert kiln.metrics.recompiles == 0
    made = continuations()
    assert all(n == 1 for n in made.values()), made
    assert sorted(name.rsplit("(", 1)[-1] for name, _ in made if "(loop exit" in name) == ["loop exit 1)", "loop exit 2)"], made


def test_two_breaks_in_the_body_copy_only_the_continuation_that_reaches_the_loop_head():
    def f(x, t):
        for v in t:
            print("first")
            x = x + v
            print("second")
            x = x * v
        return x

    # the continuation after the first print breaks again at the second before reading
    # the iterator: it serves the last iteration too (no copy tracing `x + v` again); the
    # one after the second print has its exit copy.  Graphs: `x + v`, `x * v` (and on to
    # the next item), `x * v` (and out)
    check(f, seeds(tensors(3)), graphs=3, breaks=3, min_prints=6)
    assert kiln.metrics.recompiles == 0
    assert_one_entry_each(expected_exits=1)


@pytest.mark.parametrize("stop", [False, True], ids=["runs-out", "breaks-out"])
def test_break_statement_and_else_clause(stop):
    def f(x, t, stop):
        for v in t:
            print("item")
            x = x + v
            if stop:
                x = x * 2
                break
        else:
            x = x - 1
        return x

    # running out reaches the else clause in the exit copy (graphs: `x + v` and on to the
    # next item; `x + v`, `x - 1`); leaving by `break` never reads the iterator again, so
    # the body continuation (`x + v`, `x * 2`) is all there is
    check(f, seeds(lambda s: (*tensors(3)(s), stop)), graphs=1 if stop else 2, breaks=2 - stop)
    assert kiln.metrics.recompiles == 0
    assert_one_entry_each(expected_exits=0 if stop else 1)


def in_try(x, t):
    for v in t:
        try:
            print("in try")
            x = x + v
        except ValueError:
            x = x - 1
    return x


def in_with(x, t):
    for v in t:
        with torch.no_grad():
            print("in with")     # the block's __exit__ sits on the stack above the iterator
            x = x + v
    return x


@pytest.mark.parametrize("fn, graphs", [(in_try, 2), (in_with, 3)], ids=["try", "with"])
def test_break_inside_a_block_in_the_body(fn, graphs):
    # a step function inside a try block pushes the whole stack (the handler may need it);
    # the loop's iterator is handed to the picker all the same.  in_with: the frame's graph
    # also enters no_grad before its print
    check(fn, seeds(tensors(3)), graphs=graphs, breaks=2)
    assert kiln.metrics.recompiles == 0
    assert_one_entry_each(expected_exits=1)


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        x = self.lin(x).relu()
        print("layer")           # a break inside each layer, as in BigBird
        return x * 2


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Noisy() for _ in range(3))
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "training"])
def test_layer_loop_with_a_break_in_each_layer(grad):
    torch.manual_seed(0)
    model = Stack()
    # graphs: the layer up to its print and after it (shared by the layers: same class),
    # the layer loop's exit copy (the head); the loop's body continuation only takes the
    # next layer and calls it (no op).  The one break is the print, recorded in the
    # layer's frame (the loop's frame breaks at the call of the compiled layer)
    check(model, seeds(lambda s: (randn(s, 2, 4, requires_grad=grad),)), graphs=3, breaks=1, grad=grad,
          module=True, min_prints=3)
    assert kiln.metrics.recompiles == 0
    assert_one_entry_each(expected_exits=1)


def test_frame_with_cell_variables():
    def f(x, t):
        scale = 3

        def times(y):
            return y * scale

        for v in t:
            print("step")
            x = times(x) + v
        return times(x)

    # the step functions get fresh cells on every call, and so a fresh picker: the
    # continuations' caches are shared all the same
    check(f, seeds(tensors(3)), graphs=2, breaks=2)
    assert kiln.metrics.recompiles == 0
    assert_one_entry_each(expected_exits=1)


def test_body_that_advances_the_iterator_itself():
    def f(x, t):
        it = iter(t)
        for v in it:
            print("item")
            x = x + v
            extra = next(it, None)
            if extra is not None:
                x = x * extra
        return x

    # the picker looks at the iterator before the body's next(): on the call whose
    # next() empties it, the body continuation finds the loop over after all.  The
    # guards decide: results stay eager's (odd and even lengths)
    check(f, [tensors(4)(0), tensors(5)(1), tensors(4)(2)], graphs=2, breaks=2, total_graphs=3, total_breaks=3)

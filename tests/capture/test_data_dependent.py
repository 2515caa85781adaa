"""Values that depend on tensor data stay in the graph (docs/architecture.md, "Dynamic
shapes": data-dependent values).

``.item()``, ``int(t)`` / ``float(t)`` / ``bool(t)``, boolean-mask indexing, ``nonzero``,
one-argument ``torch.where``, ``unique``, ``bincount``, ``repeat_interleave`` with tensor
repeats and ``torch.tensor`` of such numbers are captured with ``fullgraph=True``: the
number or size is an unbacked symbol of the capture's ShapeEnv, never a guard, so input
sets whose data give other counts (masks with more or fewer True) reuse the entry.  Each
case runs under the eager and the aot_eager backend on three input sets with different
data-dependent sizes, compared with eager by ``kiln.comparison``; graph and op counts
are the ones the graph really holds (run-time assertions inserted for what the trace
assumed, ``_assert_scalar``, count as ops).  Python that needs such a value (a branch,
``range(n)``) is the one place a graph breaks (the last tests).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

import pytest
import torch

import kiln
from kiln import comparison
from kiln.backends import contract
from kiln.backends.registry import lookup
from kiln.comparison import Rules, assert_same
from kiln.fx_ops import op_name, op_nodes
from kiln.testing import CompileCounter

BACKENDS = ["eager", "aot_eager"]
SAME = Rules(rtol=1e-6, atol=1e-6, float_rtol=1e-6, float_atol=1e-9)


class Counting(CompileCounter):
    """Counts graphs and ops as CompileCounter does, then hands each graph to a named
    backend; it declares what that backend declares (``backends/contract.py``)."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def __call__(self, gm, example_inputs):
        forward = super().__call__(gm, example_inputs)
        return forward if self.name == "eager" else lookup(self.name)(gm, example_inputs)

    @property
    def runs_graph_as_is(self) -> bool:
        return self.name == "eager" or contract.runs_graph_as_is(lookup(self.name))

    @property
    def applies_input_mutations_last(self) -> bool:
        return contract.applies_input_mutations_last(lookup(self.name))


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(4242 + 17 * seed)


def masks(seed: int, n: int = 6) -> torch.Tensor:
    """A boolean mask with ``seed + 1`` True entries (so every input set has another count)."""
    order = torch.randperm(n, generator=_gen(seed))
    m = torch.zeros(n, dtype=torch.bool)
    m[order[: (seed % n) + 1]] = True
    return m


def randn(seed: int, *shape, requires_grad=False) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed)).requires_grad_(requires_grad)


def ints(seed: int, high: int, n: int) -> torch.Tensor:
    return torch.randint(0, high + seed, (n,), generator=_gen(seed))


@dataclass
class Case:
    name: str
    fn: Callable
    inputs: Callable[[int], tuple]   # seed -> arguments
    ops: int                         # ops of the one graph
    graphs: int = 1

    def __repr__(self):
        return self.name


# -- the programs ------------------------------------------------------------------------

def item_float(x):
    s = x.sum().item()
    return x * s, s


def item_int_as_size(x):
    n = x.argmax().item()
    return torch.ones(n) * 2, n + 1


def item_python_arithmetic(x):
    s = x.abs().max().item()
    scale = s * 2 + 1
    return x / scale


def int_of_float_tensor(x):
    return x * int(x.sum() * 3), int(x.sum() * 3)


def float_of_int_tensor(x, i):
    return x * float(i.sum()), float(i.max())


def bool_of_tensor(x):
    return x * bool(x.sum() > 0)


def boolean_mask(x, m):
    return x[m] * 2


def boolean_mask_rows(x, m):
    return x[m].sum(0), x[m].shape[0]


def mask_from_comparison(x):
    return x[x > 0].exp()


def masked_mean(x, m):
    y = x[m]
    return y.sum() / y.shape[0]


def nonzero(m):
    return torch.nonzero(m) + 1


def where_one_arg(m, x):
    (i,) = torch.where(m)
    return x[i] * 2, i


def unique_counts(i):
    values, counts = torch.unique(i, return_counts=True)
    return values * 2, counts


def unique_inverse(i):
    values, inverse = torch.unique(i, sorted=True, return_inverse=True)
    return values.float().mean(), inverse


def bincount(i):
    return torch.bincount(i) + 1


def repeat_interleave(x, r):
    return torch.repeat_interleave(x, r, dim=0) * 3


def tensor_of_item(x):
    f = x.sum().item()
    return torch.tensor([f, 2.0]) + x[:2]


def tensor_of_int_item(x):
    n = x.argmax().item()
    return torch.tensor([n, n + 1]) * 2


def item_summed_in_loop(x):
    total = 0.0
    for row in x:
        total += row.sum().item()
    return total, x.mean()


def masked_select(x, m):
    return torch.masked_select(x, m).sum()


def slice_by_item(x):
    n = int(x.argmax())
    return x[:n] * 2


def checked_item(x):
    n = x.argmax().item()
    torch._check(n < 6)
    return torch.zeros(n) + n


def _x(shape):
    return lambda s: (randn(s, *shape),)


CASES = [
    Case("item_float", item_float, _x((5,)), ops=3),
    Case("item_int_as_size", item_int_as_size, _x((6,)), ops=7),
    Case("item_python_arithmetic", item_python_arithmetic, _x((5,)), ops=6),
    Case("int_of_float_tensor", int_of_float_tensor, lambda s: (randn(s, 4) + 1,), ops=9),
    Case("float_of_int_tensor", float_of_int_tensor, lambda s: (randn(s, 4), ints(s, 5, 4)), ops=7),
    Case("bool_of_tensor", bool_of_tensor, lambda s: (randn(s, 4) * (-1) ** s,), ops=4),
    Case("boolean_mask", boolean_mask, lambda s: (randn(s, 6), masks(s)), ops=2),
    Case("boolean_mask_rows", boolean_mask_rows, lambda s: (randn(s, 6, 3), masks(s)), ops=4),
    Case("mask_from_comparison", mask_from_comparison, _x((8,)), ops=3),
    Case("masked_mean", masked_mean, lambda s: (randn(s, 6), masks(s)), ops=4),
    Case("nonzero", nonzero, lambda s: (masks(s),), ops=2),
    Case("where_one_arg", where_one_arg, lambda s: (masks(s), randn(s, 6)), ops=4),
    Case("unique_counts", unique_counts, lambda s: (ints(s, 4, 8),), ops=4),
    Case("unique_inverse", unique_inverse, lambda s: (ints(s, 4, 8),), ops=5),
    Case("bincount", bincount, lambda s: (ints(s, 4, 8),), ops=2),
    Case("repeat_interleave", repeat_interleave, lambda s: (randn(s, 5, 2), ints(s, 3, 5)), ops=2),
    Case("tensor_of_item", tensor_of_item, _x((3,)), ops=7),
    Case("tensor_of_int_item", tensor_of_int_item, _x((5,)), ops=7),
    Case("item_summed_in_loop", item_summed_in_loop, _x((3, 2)), ops=14),
    Case("masked_select", masked_select, lambda s: (randn(s, 6), masks(s)), ops=2),
    Case("slice_by_item", slice_by_item, _x((6,)), ops=9),
    Case("checked_item", checked_item, _x((6,)), ops=10),
]


def _run(fn, args):
    try:
        return "ok", fn(*args)
    except kiln.KilnError:
        raise
    except Exception as e:   # what eager raises is behaviour to compare too
        return "raise", e


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_captured(case, backend):
    kiln.reset()
    counter = Counting(backend)
    compiled = kiln.compile(case.fn, backend=counter, fullgraph=True)
    for seed in range(3):
        base = case.inputs(seed)
        eager_in, compiled_in = copy.deepcopy(base), copy.deepcopy(base)
        expected, actual = _run(case.fn, eager_in), _run(compiled, compiled_in)
        assert expected[0] == actual[0] == "ok", (expected, actual)
        assert_same(expected[1], actual[1], SAME, f"result of input set {seed}")
        assert_same(eager_in, compiled_in, SAME, f"inputs after input set {seed}")
        # other data (other counts) is no recompile: nothing about the data is guarded
        assert (counter.frame_count, counter.op_count) == (case.graphs, case.ops), \
            f"input set {seed}: {counter.frame_count} graph(s) / {counter.op_count} op(s):\n" + \
            "\n".join(g.code for g in counter.graphs)


def test_many_mask_counts_share_one_entry():
    counter = CompileCounter()
    compiled = kiln.compile(boolean_mask, backend=counter, fullgraph=True)
    for seed in range(6):
        x, m = randn(seed, 6), masks(seed)
        assert torch.equal(compiled(x, m), boolean_mask(x, m))
    assert counter.frame_count == 1 and kiln.metrics.recompiles == 0


def test_guards_never_read_tensor_data():
    """The entry's guards check metadata only: no guard mentions an unbacked symbol or
    reads a value with ``item``."""
    counter = CompileCounter()
    compiled = kiln.compile(item_int_as_size, backend=counter, fullgraph=True)
    compiled(randn(0, 6))
    (entry,) = compiled.entries
    assert ".item(" not in entry.guard_source and "u0" not in entry.guard_source, entry.guard_source


def test_symbolic_input_sizes_and_data_dependent_sizes_together():
    counter = CompileCounter()
    compiled = kiln.compile(boolean_mask_rows, backend=counter, fullgraph=True, dynamic=True)
    for seed, n in ((0, 6), (1, 9), (2, 4)):
        x, m = randn(seed, n, 3), masks(seed, n)
        assert_same(boolean_mask_rows(x, m), compiled(x, m), SAME)
    assert counter.frame_count == 1


def checked_small(x):
    n = x.argmax().item()
    torch._check(n < 3)
    return torch.zeros(n) + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failed_assumption_raises_what_eager_raises(backend):
    """``torch._check`` on a number read from data is a run-time assertion in the graph;
    when it fails, the frame runs as Python and raises eager's error."""
    counter = Counting(backend)
    compiled = kiln.compile(checked_small, backend=counter, fullgraph=True)
    ok = torch.tensor([0.0, 5.0, 1.0, 0.0, 0.0])
    assert_same(checked_small(ok), compiled(ok), SAME)
    bad = torch.tensor([0.0, 1.0, 0.0, 0.0, 5.0])
    with pytest.raises(RuntimeError) as eager_error:
        checked_small(bad)
    with pytest.raises(RuntimeError) as compiled_error:
        compiled(bad)
    assert str(compiled_error.value) == str(eager_error.value)
    assert counter.frame_count == 1


# -- training through masked indexing ------------------------------------------------------

def masked_loss(x, w, m):
    y = (x @ w)[m]
    return (y * y).mean()


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_indexing_backward(backend):
    counter = Counting(backend)
    compiled = kiln.compile(masked_loss, backend=counter, fullgraph=True)
    for seed in range(3):
        x, m = randn(seed, 6, 3), masks(seed)
        w_eager = randn(seed + 10, 3, 2, requires_grad=True)
        w_comp = w_eager.detach().clone().requires_grad_()
        expected, actual = masked_loss(x, w_eager, m), compiled(x, w_comp, m)
        expected.backward()
        actual.backward()
        assert_same(expected, actual, SAME, "loss")
        assert_same(w_eager.grad, w_comp.grad, SAME, "gradient")
    assert counter.frame_count == 1


@pytest.mark.slow
def test_inductor_compiles_data_dependent_graphs():
    for fn, inputs in ((boolean_mask, lambda s: (randn(s, 6), masks(s))), (item_int_as_size, _x((6,))),
                       (unique_counts, lambda s: (ints(s, 4, 8),)), (tensor_of_item, _x((3,)))):
        kiln.reset()
        counter = Counting("inductor")
        compiled = kiln.compile(fn, backend=counter, fullgraph=True)
        for seed in range(2):
            args = inputs(seed)
            assert_same(fn(*args), compiled(*args), SAME, fn.__name__)
        assert counter.frame_count == 1


# -- where Python needs the value: one break, and the graph goes on around it ----------------

def branch_on_item(x):
    n = x.sum().item()
    y = x * n
    if n > 0:
        return y + 1
    return y - 1


def range_of_count(x, m):
    k = int(m.sum())
    out = x
    for i in range(k):
        out = out + i
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_branch_on_item_breaks_once(backend):
    counter = Counting(backend)
    compiled = kiln.compile(branch_on_item, backend=counter)
    signs = [1.0, -1.0, 2.0]
    for sign in signs:
        x = randn(0, 4).abs() * sign
        assert_same(branch_on_item(x), compiled(x), SAME)
    # the frame's graph (sum, item, mul, the comparison), then one continuation per side;
    # the third input set takes the first side again with another value: reused
    assert counter.frame_count == 3
    assert len(kiln.metrics.breaks) == 1
    frame_ops = [op_name(n) for n in op_nodes(counter.graphs[0].graph)]
    assert "item" in " ".join(frame_ops)


def test_range_of_count_breaks_at_range():
    counter = CompileCounter()
    compiled = kiln.compile(range_of_count, backend=counter)
    for seed in range(2):
        x, m = randn(seed, 3), masks(seed)
        assert_same(range_of_count(x, m), compiled(x, m), SAME)
    assert len({b.reason for b in kiln.metrics.breaks}) == 1
    assert "computed from tensor data" in kiln.metrics.breaks[0].reason


def test_fullgraph_names_the_line_that_needs_the_value():
    compiled = kiln.compile(branch_on_item, backend=CompileCounter(), fullgraph=True)
    with pytest.raises(kiln.Unsupported, match=r"branching on .* computed from tensor data"):
        compiled(randn(0, 4))

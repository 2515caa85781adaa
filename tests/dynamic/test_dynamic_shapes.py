"""Symbolic sizes: one graph for many sizes, guards on size expressions, the dynamic=
policy, mark_dynamic.  Every test compares compiled against eager on every call and
counts graphs with a counting backend."""
from __future__ import annotations

import warnings

import pytest
import torch

import kiln
from kiln.cache import KilnWarning
from kiln.exc import SpecializationError
from kiln.testing import CompileCounter


class Counting:
    """A backend that counts graphs and hands them to a real backend."""

    def __init__(self, backend="eager"):
        self.inner = kiln.backends.lookup(backend)
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return self.inner(gm, example_inputs)

    @property
    def count(self):
        return len(self.graphs)


def run_all(fn, calls, backend="eager", **compile_kw):
    """Compile ``fn``, call it on each argument tuple, compare with eager each time; no
    recompile-limit warning allowed.  Returns the counting backend."""
    kiln.config.raise_on_backend_error = True
    counter = Counting(backend)
    compiled = kiln.compile(fn, backend=counter, **compile_kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", KilnWarning)
        for args in calls:
            expected = fn(*args)
            got = compiled(*args)
            torch.testing.assert_close(got, expected)
            if isinstance(expected, torch.Tensor):
                assert got.dtype == expected.dtype and got.shape == expected.shape
    return counter


def sizes(*ns, cols=3):
    return [(torch.randn(n, cols),) for n in ns]


def test_elementwise_over_19_sizes_makes_at_most_two_graphs():
    def f(x):
        return torch.relu(x) * 2 + 1
    c = run_all(f, sizes(*range(2, 21)))
    assert c.count == 2
    assert kiln.metrics.recompiles == 1


def test_reshapes_computed_from_sizes():
    def f(x):
        n, m = x.shape
        y = x.reshape(n * m).view(m, n)
        return y.transpose(0, 1).flatten() + x.size(0) + x.numel()
    c = run_all(f, sizes(2, 3, 4, 6, 9, 12))
    assert c.count == 2


def test_sizes_flow_into_factories_slices_and_results():
    def f(x):
        n = x.shape[0]
        z = torch.zeros(n, 2) + x[:, :2]
        return z, n, x[: n // 2]
    c = run_all(f, sizes(4, 6, 8, 10, 12))
    assert c.count == 2


def test_two_dimensions_varying_at_once():
    def f(x, y):
        return (x @ y).sum(1) + x.shape[1]
    calls = [(torch.randn(n, m), torch.randn(m, n)) for n, m in [(2, 3), (4, 5), (6, 7), (3, 9), (8, 2), (5, 5)]]
    c = run_all(f, calls)
    assert c.count == 2


def test_branch_on_a_size_recompiles_for_each_side():
    def f(x):
        if x.shape[0] > 6:
            return x * 2
        return x - 1
    c = run_all(f, sizes(3, 4, 5, 8, 9, 10, 2, 7, 6, 11))
    # a static entry for 3, one symbolic entry per side of the branch
    assert c.count == 3
    assert kiln.metrics.recompiles == 2


def test_python_int_argument_over_14_values():
    def f(x, n):
        return x.view(n, -1).sum(1) * n + n
    calls = [(torch.randn(24), n) for n in (2, 3, 4, 6, 8, 12, 24, 2, 3, 4, 6, 8, 12, 24)]
    c = run_all(f, calls)
    assert c.count <= 3


def test_dynamic_true_makes_one_graph():
    def f(x):
        return torch.zeros(x.shape[0], 2) + x[:, :2]
    c = run_all(f, sizes(*range(2, 9), cols=4), dynamic=True)
    assert c.count == 1


def test_dynamic_false_makes_one_graph_per_size():
    def f(x):
        return x * 2
    c = run_all(f, sizes(*range(2, 9)), dynamic=False)
    assert c.count == 7


def test_automatic_dynamic_can_be_switched_off():
    kiln.config.automatic_dynamic_shapes = False
    try:
        c = run_all(lambda x: x + 1, sizes(2, 3, 4, 5))
    finally:
        kiln.config.automatic_dynamic_shapes = True
    assert c.count == 4


def test_sizes_zero_and_one_are_specialised():
    c = run_all(lambda x: x.sum(0) + x.shape[0], sizes(4, 5, 1, 6, 1, 7), dynamic=True)
    # one symbolic entry (sizes >= 2) and one for size 1
    assert c.count == 2


def test_mark_dynamic_gives_one_graph():
    def f(x):
        return x.cos() + x.shape[0]
    counter = Counting()
    compiled = kiln.compile(f, backend=counter)
    for n in (3, 5, 7, 9):
        x = torch.randn(n, 2)
        kiln.mark_dynamic(x, 0)
        torch.testing.assert_close(compiled(x), f(x))
    assert counter.count == 1


def test_mark_dynamic_then_specialised_is_an_error_naming_the_line():
    def f(x):
        return x.view(x.shape[0] + 0, 2) if x.shape[0] == 5 else x  # specialises dim 0
    x = torch.randn(5, 2)
    kiln.mark_dynamic(x, 0)
    with pytest.raises(SpecializationError) as info:
        kiln.compile(f)(x)
    msg = str(info.value)
    assert "dimension 0 of x" in msg and "test_dynamic_shapes.py" in msg and "x.shape[0] == 5" in msg


def test_maybe_mark_dynamic_allows_specialisation_and_mark_static_wins():
    def f(x):
        return x * 2 if x.shape[0] == 5 else x
    x = torch.randn(5, 2)
    kiln.maybe_mark_dynamic(x, 0)
    torch.testing.assert_close(kiln.compile(f)(x), f(x))
    counter = Counting()
    g = kiln.compile(lambda x: x + 1, backend=counter, dynamic=True)
    for n in (3, 4, 5):
        x = torch.randn(n, 2)
        kiln.mark_static(x, 0)
        torch.testing.assert_close(g(x), x + 1)
    assert counter.count == 3


@pytest.mark.parametrize("backend", ["aot_eager", "aten", "inductor"])
def test_backends_reuse_one_symbolic_graph(backend):
    def f(x, y):
        h = torch.tanh(x @ y)
        return h.reshape(-1).softmax(0), h.shape[0] * 2
    calls = [(torch.randn(n, 4), torch.randn(4, 3)) for n in range(2, 10)]
    c = run_all(f, calls, backend=backend)
    assert c.count == 2


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_accumulated_gradients_over_a_varying_batch(backend):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    ref.load_state_dict(model.state_dict())
    counter = Counting(backend)
    compiled = kiln.compile(model, backend=counter)
    for n in (3, 5, 7, 2, 9, 4, 6):
        x = torch.randn(n, 4)
        compiled(x).pow(2).mean().backward()
        ref(x).pow(2).mean().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    assert counter.count == 2


def test_shape_guard_is_readable_and_named_in_recompile_messages():
    def f(x):
        if x.shape[0] > 6:
            return x * 2
        return x - 1
    compiled = kiln.compile(f, backend=CompileCounter())
    for n in (3, 4, 5):
        compiled(torch.randn(n, 2))
    entry = compiled.entries[-1]
    assert "x.size()[0] <= 6" in entry.guard_source
    reason = entry.explain_guard(f, torch.randn(9, 2))
    assert "x.size()[0] <= 6" in reason and "test_dynamic_shapes.py" in reason


def test_data_dependent_sizes_stay_in_the_graph():
    # a boolean mask's count is an unbacked symbol next to the input's own symbolic size
    # (tests/capture/test_data_dependent.py): no break, and the second size makes the
    # input dynamic as always (one recompile), the counts never do
    def f(x):
        y = x[x > 0]
        return y.sum() + y.shape[0]
    counter = Counting()
    compiled = kiln.compile(f, backend=counter)
    for n in (3, 4, 5, 6):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), f(x))
    assert not kiln.metrics.breaks
    assert counter.count == 2


def test_int_tensor_plus_python_float_keeps_eager_dtype():
    def f(x, s):
        return x + s
    calls = [(torch.arange(n), s) for n, s in [(3, 0.5), (4, 1.5), (5, 2.5), (6, 3.25)]]
    run_all(f, calls)

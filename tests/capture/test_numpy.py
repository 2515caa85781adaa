"""numpy in a compiled frame (docs/architecture.md, "numpy"): arrays that come from
tensors are traced as tensor ops through ``torch._numpy``, with numpy's types and dtypes
(float64 defaults included) checked against real numpy; numpy scalars, dtypes and
``finfo``/``iinfo`` are constants; arrays returned to the caller are real ndarrays.
Table cases run under ``fullgraph=True`` on two input sets; ``np.random`` and in-place
changes of arrays are clean breaks (the last tests)."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import kiln
from kiln.comparison import Rules, assert_same
from kiln.testing import CompileCounter

from .capture_harness import Case, I, parametrize, run_case

TOL = dict(atol=1e-6, rtol=1e-6)   # torch's and numpy's kernels may round differently


def roundtrip(x):
    return torch.from_numpy(np.log1p(x.numpy())) + 1


def float64_default(x):
    a = x.numpy() * (np.arange(x.shape[1]) / x.shape[1])     # int64 / int: float64 in numpy
    return torch.from_numpy(a)


def statistics(x):
    a = np.clip(x.numpy(), -1.0, None)
    a = (a - a.mean(axis=0)) / (a.std(axis=0) + np.finfo(np.float32).eps)
    return torch.from_numpy(a).relu()


def methods_and_attributes(x):
    a = x.numpy()
    b = a.T.reshape(-1)[: a.size // 2]
    return torch.from_numpy(np.concatenate([b, -b]) * a.ndim), a.shape, a.dtype == np.float32


def scalars_and_dtypes(x):
    return x * np.finfo(np.float32).eps + np.float32(2.0) + np.sqrt(2.0)


def int_limits(x):
    return x.to(torch.int32) % np.iinfo(np.int16).max + np.int64(3)


def returns_array(x):
    return np.exp(x.numpy())


def returns_scalar(x):
    return x.numpy().sum(), np.max(x.numpy())


def array_argument(a, x):
    return torch.from_numpy(a * 2) + x


def stacked(x, y):
    return torch.from_numpy(np.stack([x.numpy(), y.numpy()], axis=0).sum(0))


def test_error_state_that_raises_breaks():
    # under np.errstate(invalid="raise") numpy raises on log1p(-2); the graph cannot tell
    def log_of(x):
        return torch.from_numpy(np.log1p(x.numpy())) * 2

    kiln.reset()
    compiled = kiln.compile(log_of, backend=CompileCounter())
    x = torch.tensor([-2.0, 1.0])
    assert torch.isnan(compiled(x)).any()                    # default state: traced
    with np.errstate(invalid="raise"):
        with pytest.raises(FloatingPointError):
            log_of(x)
        with pytest.raises(FloatingPointError):
            compiled(x)                                      # the guard failed: a new entry breaks
    assert any("np.errstate" in str(b) for b in kiln.metrics.breaks)


def scalar_to_number(x):
    # float() of a numpy scalar is its item(): a number computed by the graph
    n = float(x.numpy().sum())
    return x * n, int(np.max(x.numpy()) * 10) + x


def tensor_of_array(x):
    a = x.numpy() * 2
    return (torch.tensor(a), torch.as_tensor(a), torch.as_tensor(a, dtype=torch.float64),
            torch.tensor(a.sum()), torch.tensor(a.T, dtype=torch.float16), torch.as_tensor(x.numpy()))


def mixed_scalars(x):
    # numpy scalars are strongly typed (NEP 50): float16 array + np.float32 is float32,
    # float32 scalar + np.float64 is float64; a Python float would be weak
    a = x.numpy().astype(np.float16) + np.float32(1)
    return torch.from_numpy(a), np.float32(a.sum()) + np.float64(1)


CASES = [
    Case("roundtrip", roundtrip, lambda r: r.rand(3, 4), graphs=1, ops=3, **TOL),
    Case("float64_default", float64_default, lambda r: r.randn(3, 4), graphs=1, ops=4, **TOL),
    Case("statistics", statistics, lambda r: r.randn(5, 4), graphs=1, ops=8, **TOL),
    Case("methods_and_attributes", methods_and_attributes, lambda r: r.randn(3, 4), graphs=1, ops=7, **TOL),
    Case("scalars_and_dtypes", scalars_and_dtypes, lambda r: r.randn(3, 4), graphs=1, ops=3),
    Case("int_limits", int_limits, lambda r: r.randn(3, 4) * 1000, graphs=1, ops=3),
    Case("returns_array", returns_array, lambda r: r.randn(3, 4), graphs=1, ops=1, **TOL),
    Case("returns_scalar", returns_scalar, lambda r: r.randn(3, 4), graphs=1, ops=2, **TOL),
    Case("array_argument", array_argument, lambda r: I(r.randn(2, 3).numpy(), r.randn(2, 3)),
         graphs=1, ops=3, **TOL),
    Case("mixed_scalars", mixed_scalars, lambda r: r.randn(3), graphs=1, ops=6, atol=1e-3, rtol=1e-3),
    Case("scalar_to_number", scalar_to_number, lambda r: r.randn(3, 4), graphs=1, ops=8, **TOL),
    Case("tensor_of_array", tensor_of_array, lambda r: r.randn(3, 4), graphs=1, ops=10, **TOL),
    Case("stacked", stacked, lambda r: (r.randn(2, 3), r.randn(2, 3)), graphs=1, ops=3, **TOL),
]


@parametrize(CASES)
def test_numpy_captured(case):
    run_case(case)


def test_results_are_numpy_types():
    kiln.reset()
    compiled = kiln.compile(returns_scalar, backend=CompileCounter(), fullgraph=True)
    total, top = compiled(torch.randn(3, 4))
    assert type(total) is np.float32 and type(top) is np.float32
    array = kiln.compile(returns_array, backend=CompileCounter(), fullgraph=True)(torch.randn(2))
    assert type(array) is np.ndarray and array.dtype == np.float32


def test_array_of_a_tensor_shares_its_memory():
    def view(x):
        return x.numpy()

    kiln.reset()
    x = torch.randn(3)
    a = kiln.compile(view, backend=CompileCounter(), fullgraph=True)(x)
    x.add_(1)
    assert type(a) is np.ndarray and np.array_equal(a, x.numpy())


def test_array_argument_returned_is_the_same_object():
    def passthrough(a, x):
        return a, torch.from_numpy(a) + x

    kiln.reset()
    a = np.ones((2, 3), dtype=np.float32)
    out, _ = kiln.compile(passthrough, backend=CompileCounter(), fullgraph=True)(a, torch.ones(2, 3))
    assert out is a


def _default_mode(fn, make_inputs, seed=True):
    """Compile ``fn`` in default mode; compare with eager on two input sets (numpy seeded
    alike); return the counter and the breaks of the first call."""
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(fn, backend=counter)
    for i in range(2):
        args = make_inputs(i)
        np.random.seed(i)
        expected = fn(*[a.clone() for a in args])
        after_eager = np.random.rand()
        np.random.seed(i)
        actual = compiled(*[a.clone() for a in args])
        assert np.random.rand() == after_eager        # numpy's stream advanced as in eager
        assert_same(expected, actual, Rules(atol=1e-6, rtol=1e-6))
        if i == 0:
            breaks = [str(b) for b in kiln.metrics.breaks]
    return counter, breaks


def random_draw(x):
    y = x * 2
    noise = np.random.rand(*x.shape).astype(np.float32)
    return y + torch.from_numpy(noise)


def in_place(x):
    a = x.numpy() * 1
    a += 1
    return torch.from_numpy(a) * 2


@pytest.mark.parametrize("fn, graphs, reason", [
    (random_draw, 2, "numpy.random"),
    (in_place, 2, "in-place operator"),
])
def test_clean_breaks(fn, graphs, reason):
    counter, breaks = _default_mode(fn, lambda i: (torch.randn(2, 3, generator=torch.Generator().manual_seed(i)),))
    assert counter.frame_count == graphs, breaks
    assert len(breaks) == 1 and reason in breaks[0], breaks


def test_dtype_disagreement_breaks():
    # torch._numpy and numpy must agree on the result dtype, or the call runs as Python:
    # numpy's sqrt of int8 is float16 and its cumsum of int32 is int64; torch._numpy's are
    # float64 and int32
    def small_ints(x):
        a = (x.numpy() * 10).astype(np.int8)
        return torch.from_numpy(np.sqrt(np.abs(a))) + 1, torch.from_numpy(np.cumsum(a.astype(np.int32))) * 2

    counter, breaks = _default_mode(small_ints, lambda i: (torch.randn(3),))
    assert counter.frame_count == 3 and len(breaks) == 2, breaks
    assert "numpy sqrt: torch._numpy computes torch.float64, numpy float16" in breaks[0], breaks
    assert "numpy cumsum: torch._numpy computes torch.int32, numpy int64" in breaks[1], breaks



@pytest.mark.parametrize("fn", [roundtrip, float64_default, statistics, mixed_scalars, stacked],
                         ids=lambda f: f.__name__)
def test_aot_eager_traces_through_the_runners(fn):
    # AOTAutograd traces torch._numpy's Python inside each runner into ATen ops
    kiln.reset()
    compiled = kiln.compile(fn, backend="aot_eager", fullgraph=True)
    n = len(inspect.signature(fn).parameters)
    for seed in range(2):
        g = torch.Generator().manual_seed(seed)
        args = [torch.randn(5, 4, generator=g) for _ in range(n)]
        assert_same(fn(*[a.clone() for a in args]), compiled(*[a.clone() for a in args]),
                    Rules(atol=1e-3, rtol=1e-3))
    assert kiln.metrics.graphs == 1 and not kiln.metrics.breaks


@pytest.mark.parametrize("fn", [roundtrip, float64_default, statistics, methods_and_attributes],
                         ids=lambda f: f.__name__)
def test_symbolic_sizes(fn):
    # with dynamic=True the arrays' sizes are symbols: one entry serves both shapes
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(fn, backend=counter, dynamic=True)
    for rows, cols in ((5, 4), (7, 6)):
        x = torch.rand(rows, cols)
        assert_same(fn(x.clone()), compiled(x.clone()), Rules(atol=1e-6, rtol=1e-6))
    assert counter.frame_count == 1 and not kiln.metrics.breaks, [str(b) for b in kiln.metrics.breaks]

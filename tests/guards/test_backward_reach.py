"""A backward that reaches some outputs of a graph compiled as one autograd node does what
eager's per-op backward does (runtime/backward_reach.py): the backward ops of outputs it
did not reach do not run (zeros through an infinite local gradient would give NaN), an
input only those outputs reach gets no gradient, and a gradient the backward hands on
unchanged is the tensor eager hands on (its layout: a ``sum``'s gradient is an expanded
view).  Each under every backend, compiled against eager on two inputs, with graph counts."""
from __future__ import annotations

import pytest
import torch

import kiln

BACKENDS = ["eager", "aot_eager", "aten"]


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 4, generator=g)
    x[0, seed % 4] = 0.0                      # y / x has an infinite local gradient here
    return x.requires_grad_(), torch.randn(3, 4, generator=g)


def _grads_after(fn, seed, backward):
    x, y = _inputs(seed)
    out = fn(x, y)
    backward(out)
    return x.grad, y.grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_from_one_returned_output_skips_the_others_backward(backend):
    # the user's loss.backward() after the call: the quotient's backward never runs in eager
    def f(x, y):
        return y / x, x.sum() * 2
    compiled = kiln.compile(f, backend=backend)
    for seed in (1, 2):
        expected = _grads_after(f, seed, lambda out: out[1].backward())
        got = _grads_after(compiled, seed, lambda out: out[1].backward())
        assert torch.isfinite(got[0]).all()
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] is None and expected[1] is None
    assert kiln.metrics.graphs == 1 and not kiln.metrics.breaks


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_after_a_break_skips_an_earlier_graphs_other_outputs(backend):
    # fuzz seed 70276: the quotient is an output of the graph before the print, and the
    # backward (a break of its own) reaches that graph only through the sum
    def f(x, y):
        q = y / torch.nn.functional.dropout(x, 0.5)
        s = x.sum() * 0.25 + x.mean()
        print("between")
        s.backward(retain_graph=True)
        return q.detach()
    compiled = kiln.compile(f, backend=backend)
    for seed in (3, 4):
        results = []
        for fn in (f, compiled):
            torch.manual_seed(seed)
            x, y = _inputs(seed)
            q = fn(x, y)
            results.append((q, x.grad))
        (qe, ge), (qc, gc) = results
        torch.testing.assert_close(qc, qe)
        assert torch.isfinite(gc).all()
        torch.testing.assert_close(gc, ge)
    assert kiln.metrics.graphs == 2 and len(kiln.metrics.breaks) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_reached_only_through_unreached_outputs_gets_no_gradient(backend):
    def f(x, y):
        return (x * y).sum(), y.exp()
    compiled = kiln.compile(f, backend=backend)
    for seed in (5, 6):
        results = []
        for fn in (f, compiled):
            x, y = _inputs(seed)
            y.requires_grad_()
            fn(x, y)[1].sum().backward()
            results.append((x.grad, y.grad))
        assert results[0][0] is None and results[1][0] is None
        torch.testing.assert_close(results[1][1], results[0][1])
    assert kiln.metrics.graphs == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradient_handed_on_unchanged_keeps_eagers_layout(backend):
    # fuzz seed 74477: autograd.grad returns the raw gradient; through x + r it is the sum's
    # gradient itself, an expanded view (strides 0), not a contiguous copy.  (Not "aten":
    # its graphs have no views by design, so the sum's backward returns a copy there.)
    def f(x, r):
        t = x + r
        print("between")
        g, = torch.autograd.grad(t.sum(), [x])
        return g
    compiled = kiln.compile(f, backend=backend)
    for seed in (7, 8):
        x, r = _inputs(seed)
        expected, got = f(x, r), compiled(x, r)
        torch.testing.assert_close(got, expected)
        assert got.stride() == expected.stride() == (0, 0)
    assert kiln.metrics.graphs == 2 and len(kiln.metrics.breaks) == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_reaching_every_output_runs_the_compiled_backward(backend, monkeypatch):
    # the usual case: both outputs reached, gradients as eager's, and no variant of the
    # backward graph is made (the backend's compiled backward runs)
    from kiln.runtime import backward_reach
    variants = []
    real = backward_reach.skipping_absent_tangents
    monkeypatch.setattr(backward_reach, "skipping_absent_tangents", lambda *a: variants.append(a) or real(*a))

    def f(x, y):
        return y / (x + 10), (x * x).sum()
    compiled = kiln.compile(f, backend=backend)
    for seed in (9, 10):
        back = lambda out: (out[0].sum() + out[1]).backward()     # noqa: E731
        expected, got = _grads_after(f, seed, back), _grads_after(compiled, seed, back)
        torch.testing.assert_close(got[0], expected[0])
    assert kiln.metrics.graphs == 1 and not kiln.metrics.breaks
    assert variants == []
    # ... while a backward from one of them makes one (under the AOT backends)
    _grads_after(compiled, 11, lambda out: out[1].backward())
    assert len(variants) == (0 if backend == "eager" else 1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_node_on_the_path_that_no_gradient_reaches_passes_none_on(backend):
    # fuzz seed 80054: the engine runs every node on a path from the root to x, here the
    # first graph's (through t1, an input the second graph changes in place), even though
    # no gradient reaches it; eager's nodes pass None on, so x's gradient is the sum's alone
    def f(x):
        t1 = x - x
        print("between")
        t1[0] = 7.0
        g, = torch.autograd.grad(x.sum(), [x])
        return g, t1
    compiled = kiln.compile(f, backend=backend)
    for seed in (11, 12):
        x, _ = _inputs(seed)
        (ge, te), (gc, tc) = f(x), compiled(x)
        torch.testing.assert_close(gc, ge)
        torch.testing.assert_close(tc, te)
        assert gc.stride() == ge.stride() == (0, 0) and gc._is_view()
    assert kiln.metrics.graphs == 2 and len(kiln.metrics.breaks) == 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradient_summed_with_an_absent_path_is_the_other_path_itself(backend):
    # fuzz seed 89248: t2 and t2.sum() are outputs of one graph; autograd.grad from a later
    # sum of t2 reaches t2 only, so x's gradient is the later sum's expanded gradient itself
    # (eager's engine has nothing to add it to), not that plus zeros
    def f(x, y):
        w = torch.zeros((), requires_grad=True)
        t2 = sum([y * w, x, y * w])
        scale = t2.sum().tolist()   # a break, as item() was when the seed was found
        g, = torch.autograd.grad(t2.sum(), [x])
        return g, t2 * scale
    compiled = kiln.compile(f, backend=backend)
    for seed in (13, 14):
        x, y = _inputs(seed)
        (ge, te), (gc, tc) = f(x, y), compiled(x, y)
        torch.testing.assert_close(gc, ge)
        torch.testing.assert_close(tc, te)
        assert gc.stride() == ge.stride() == (0, 0)
    # under AOT backends the leaf made with requires_grad=True is made in Python (a break)
    assert kiln.metrics.graphs == 3 and len(kiln.metrics.breaks) == (2 if backend == "eager" else 3)

"""torch.utils.checkpoint (recomputes in backward, gradients equal eager) and custom
autograd.Function (the user's backward runs, even when it is not the true derivative)."""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import checkpoint

import kiln

from .harness import Counting, check, hop_nodes

BACKENDS = ["eager", "aot_eager", pytest.param("inductor", marks=pytest.mark.slow)]


class CountSin(TorchDispatchMode):
    """Counts aten.sin calls: the body's forward, once more per recomputation."""

    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.sin.default:
            self.n += 1
        return func(*args, **(kwargs or {}))


class Block(torch.nn.Module):
    def __init__(self, reentrant=False):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.reentrant = reentrant

    def body(self, a, scale):
        return self.lin(a).sin().sin() * scale

    def forward(self, x):
        return checkpoint(self.body, x, 2.0, use_reentrant=self.reentrant).sum()


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_recomputes_and_matches_eager_gradients(backend, reentrant):
    # the reentrant form is captured too (as torch.compile does): same values and gradients
    torch.manual_seed(0)
    m = Block(reentrant)
    cc = Counting(backend)
    cm = kiln.compile(m, backend=cc, fullgraph=True)
    x = torch.randn(2, 3, requires_grad=True)
    cm(x)                                    # capture outside the counting mode
    for _ in range(2):
        xe, xc = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
        m.zero_grad()
        m(xe).backward()
        ge = [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        with CountSin() as forward_only:
            out = cm(xc)
        with CountSin() as backward:
            out.backward()
        torch.testing.assert_close(xc.grad, xe.grad)
        for p, g in zip(m.parameters(), ge):
            torch.testing.assert_close(p.grad, g)
        if backend != "inductor":                    # inductor fuses sin into kernels
            assert forward_only.n == 2
            assert backward.n >= 1, "the body was not recomputed in backward"
    assert cc.frame_count == 1
    assert [n.target.__name__ for n in hop_nodes(cc)] == ["tag_activation_checkpoint"]


def test_checkpoint_under_no_grad_is_a_plain_call():
    m = Block()
    cc = Counting("eager")
    cm = kiln.compile(m, backend=cc, fullgraph=True)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3)
            torch.testing.assert_close(cm(x), m(x))
    assert cc.frame_count == 1 and not hop_nodes(cc)


@pytest.mark.parametrize("reentrant", [True, None])     # None (not passed) means True in torch 2.13
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_reentrant_checkpoint_with_no_input_requiring_grad_gives_no_grad(backend, reentrant):
    # eager's reentrant checkpoint runs the body inside an autograd.Function: with no input
    # requiring grad its output needs none, although the body reads parameters
    torch.manual_seed(0)
    m = Block(reentrant=reentrant)
    cc = Counting(backend)
    cm = kiln.compile(m, backend=cc, fullgraph=True)
    for _ in range(2):
        x = torch.randn(2, 3)
        with pytest.warns(UserWarning, match="requires_grad"):
            expected = m(x)
        got = cm(x)
        torch.testing.assert_close(got, expected)
        assert not expected.requires_grad and not got.requires_grad
    assert cc.frame_count == 1 and not hop_nodes(cc)


def test_reentrant_checkpoint_with_function_kwargs_runs_as_python():
    # eager refuses keyword arguments for the function in the reentrant form: its error
    def f(x):
        return checkpoint(lambda a, k: a * k, x, k=2.0, use_reentrant=True)
    with pytest.raises(kiln.Unsupported, match="reentrant checkpoint with keyword"):
        kiln.compile(f, fullgraph=True)(torch.randn(3, requires_grad=True))
    with pytest.raises(ValueError):
        kiln.compile(f)(torch.randn(3, requires_grad=True))


class StraightThrough(torch.autograd.Function):
    """round() forward, identity-times-k backward: deliberately not the true derivative."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        ctx.save_for_backward(x)
        return x.round() * k

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        assert ctx.needs_input_grad == (True, False)
        return grad * ctx.k + 0 * x, None


def ste(x, w):
    return StraightThrough.apply(x * w, 3.0).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_straight_through_estimator_gives_users_gradient(backend):
    inputs = [(torch.randn(2, 3, requires_grad=True), torch.randn(3)) for _ in range(2)]
    cc = check(ste, inputs, backend, grad=True, ops=3)
    x = inputs[0][0].detach().clone().requires_grad_()
    kiln.compile(ste, backend=backend, fullgraph=True)(x, torch.ones(3)).backward()
    torch.testing.assert_close(x.grad, torch.full((2, 3), 3.0))     # autograd's would be 0
    assert cc.frame_count == 1


class SortWithIndex(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        values, idx = x.sort(dim=-1)
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(idx)
        return values, idx

    @staticmethod
    def backward(ctx, gv, gi):
        (idx,) = ctx.saved_tensors
        return torch.zeros_like(gv).scatter(-1, idx, gv) * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_mark_non_differentiable(backend):
    def f(x):
        v, i = SortWithIndex.apply(x)
        return v * 1.5, i
    cc = check(f, [(torch.randn(2, 4, requires_grad=True),), (torch.randn(2, 4, requires_grad=True),)], backend,
               grad=True)
    assert cc.frame_count == 1


LOG = []


class Logs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        LOG.append(1)              # outer state: eager runs it, Kiln does not capture it
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_forward_mutating_outer_state_breaks_and_is_refused_under_fullgraph():
    def f(x):
        return Logs.apply(x + 1) * 3
    with pytest.raises(kiln.Unsupported, match=r"`LOG\.append\(1\)` mutates `LOG` inside the body of "
                                               r"`autograd.Function`"):
        kiln.compile(f, fullgraph=True)(torch.randn(3))
    assert LOG == []
    x = torch.randn(3)
    torch.testing.assert_close(kiln.compile(f)(x), f(x))
    assert LOG == [1, 1]                      # once eager, once at the break: as eager does


def test_checkpoint_body_mutation_is_a_break_not_fatal():
    seen = []

    def f(x):
        def body(a):
            seen.append(1)
            return a.sin()
        return checkpoint(body, x, use_reentrant=False) + 1
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(kiln.Unsupported, match="inside the body of `checkpoint`"):
        kiln.compile(f, fullgraph=True)(x)
    torch.testing.assert_close(kiln.compile(f)(x), f(x))


class Checked(torch.autograd.Function):
    """A forward that validates its input with a raise Kiln traces but never takes."""

    @staticmethod
    def forward(ctx, x):
        if x.dim() != 2:
            raise ValueError("2-d only")
        ctx.rows = x.shape[0]
        return x * ctx.rows

    @staticmethod
    def backward(ctx, g):
        return g * ctx.rows


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_with_python_checks_and_ctx_attributes(backend):
    def f(x):
        return Checked.apply(x).sum(dim=0)
    check(f, [(torch.randn(3, 2, requires_grad=True),), (torch.randn(3, 2, requires_grad=True),)], backend,
          grad=True)

"""Optimizer steps around and inside compiled code.

* Outside: the compiled model computes loss and gradients, an ordinary optimizer
  updates the (shared) parameters; after two steps the parameters equal those of the
  same loop run eagerly.  Parameters changing in place between calls must not make Kiln
  reuse stale values (they are graph inputs, not constants).
* Inside: a compiled function that runs forward, ``backward()`` and ``optimizer.step()``
  either captures the work or breaks at what it cannot capture; in every case the
  parameters, losses and optimizer state end exactly as in eager.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

import kiln

from .models import batch, build, seed_all

BACKENDS = ["eager", "aot_eager", "aten"]


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 4))


def data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)


def mse_step(fn, model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = ((fn(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss.detach()


def assert_same_params(a: nn.Module, b: nn.Module, exact=True):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        if exact:
            assert torch.equal(p, q), f"{name} differs by {(p - q).abs().max().item():.3g}"
        else:
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_sgd_outside_compiled_region(backend):
    x, y = data()
    eager_model, model = mlp(), mlp()
    eager_opt = torch.optim.SGD(eager_model.parameters(), lr=0.1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    compiled = kiln.compile(model, backend=backend)
    losses = []
    for _ in range(2):
        expected = mse_step(eager_model, eager_model, eager_opt, x, y)
        actual = mse_step(compiled, model, opt, x, y)
        losses.append(actual)
        torch.testing.assert_close(actual, expected, rtol=1e-6, atol=0)
    assert losses[1] < losses[0]                      # the step really changed the weights
    assert_same_params(eager_model, model, exact=False)
    assert kiln.metrics.graphs == 1 and kiln.metrics.recompiles == 0


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_optimizer_step_inside_compiled_function(backend, optimizer):
    make_opt = {
        "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1),
        "momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
        "adam": lambda ps: torch.optim.Adam(ps, lr=0.01),
    }[optimizer]
    x, y = data()
    eager_model, model = mlp(), mlp()
    eager_opt, opt = make_opt(eager_model.parameters()), make_opt(model.parameters())

    def train_step(model, opt, x, y):
        return mse_step(model, model, opt, x, y)

    compiled_step = kiln.compile(train_step, backend=backend)
    for _ in range(3):
        expected = train_step(eager_model, eager_opt, x, y)
        actual = compiled_step(model, opt, x, y)
        torch.testing.assert_close(actual, expected, rtol=1e-6, atol=0)
    assert_same_params(eager_model, model, exact=False)
    # the optimizer's state (momentum buffers, Adam moments and step counts) as well
    for p, q in zip(eager_model.parameters(), model.parameters()):
        s, t = eager_opt.state[p], opt.state[q]
        assert s.keys() == t.keys()
        for k in s:
            torch.testing.assert_close(t[k], s[k], rtol=1e-5, atol=1e-7)


def manual_sgd(model, x, y, lr):
    """Forward, backward and a hand-written SGD update in one function."""
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-lr)
            p.grad.zero_()
    return loss.detach()


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_written_update_inside_compiled_function(backend):
    """The update after the break is captured as a graph that mutates its inputs in
    place (parameters and gradients); those writes must land in the real tensors."""
    x, y = data()
    eager_model, model = mlp(), mlp()
    compiled = kiln.compile(manual_sgd, backend=backend)
    for _ in range(3):
        expected = manual_sgd(eager_model, x, y, 0.1)
        actual = compiled(model, x, y, 0.1)
        torch.testing.assert_close(actual, expected, rtol=1e-6, atol=0)
    assert_same_params(eager_model, model, exact=False)
    assert all(float(p.grad.abs().max()) == 0.0 for p in model.parameters())
    assert kiln.metrics.graphs >= 2      # forward, then the update after backward()'s break


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["aot_eager", "aten"])
def test_gpt2_two_sgd_steps_outside(backend):
    eager_model, model = build("gpt2").train(), build("gpt2").train()
    inputs = batch("gpt2")
    eager_opt = torch.optim.SGD(eager_model.parameters(), lr=0.5)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    compiled = kiln.compile(model, backend=backend)
    for _ in range(2):
        for fn, m, o in ((eager_model, eager_model, eager_opt), (compiled, model, opt)):
            seed_all(0)
            o.zero_grad(set_to_none=True)
            fn(**inputs).loss.backward()
            o.step()
    assert_same_params(eager_model, model, exact=False)
    assert kiln.metrics.recompiles == 0

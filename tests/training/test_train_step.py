"""A whole training step in one compiled function: autocast forward, ``backward()``,
gradient clipping over ``model.parameters()``, the optimizer's step and ``zero_grad``.

``backward()`` runs as Python (a break by design), and so does ``zero_grad()`` (torch
marks it ``_disable_dynamo``); the rest is captured: the forward under autocast in one
graph (autocast recorded in it), and clipping and the optimizer's step (its state made
on the first step) in the continuation's graph, which reads the parameters' ``.grad``
as inputs.  After several
steps the parameters and the optimizer's state equal eager's bit for bit under the
eager backend (dropout on: the RNG is consumed as in eager), and within fp32 noise under
aot_eager.
"""
from __future__ import annotations

import pytest
import torch
import transformers
from torch import nn

import kiln
from kiln.testing import CompileCounter

transformers.logging.set_verbosity_error()


def gpt2(dropout=True):
    torch.manual_seed(0)
    c = transformers.GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                bos_token_id=0, eos_token_id=0)
    if not dropout:
        c.resid_pdrop = c.embd_pdrop = c.attn_pdrop = 0.0
    return transformers.GPT2LMHeadModel(c).train()


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))


OPTIMIZERS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-3),                       # single-tensor on CPU
    "adamw_foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-3, foreach=True),
    "adamw_tensor_lr": lambda ps: torch.optim.AdamW(ps, lr=torch.tensor(1e-3)),
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    "sgd_foreach": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, foreach=True),
    "sgd_tensor_lr": lambda ps: torch.optim.SGD(ps, lr=torch.tensor(0.1), momentum=0.9),
}


def make_step(model, opt, autocast):
    def step(*inputs):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_of(model, *inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        return loss.detach()
    return step


def loss_of(model, *inputs):
    if isinstance(model, transformers.GPT2LMHeadModel):
        return model(inputs[0], labels=inputs[0]).loss
    x, y = inputs
    return ((model(x) - y) ** 2).mean()


def compare(build, inputs, optimizer, backend, steps=5, autocast=True):
    eager_model, model = build(), build()
    eager_opt, opt = OPTIMIZERS[optimizer](eager_model.parameters()), OPTIMIZERS[optimizer](model.parameters())
    counter = CompileCounter()
    inner = kiln.backends.lookup(backend)

    def counting(gm, example_inputs):
        counter(gm, example_inputs)
        return inner(gm, example_inputs)

    eager_step = make_step(eager_model, eager_opt, autocast)
    compiled = kiln.compile(make_step(model, opt, autocast), backend=counting)
    for i in range(steps):
        torch.manual_seed(100 + i)
        expected = eager_step(*inputs)
        torch.manual_seed(100 + i)
        actual = compiled(*inputs)
        assert actual.dtype == expected.dtype
    return eager_model, model, eager_opt, opt, counter


def assert_breaks_are_backward_and_zero_grad(before=0):
    reasons = {b.reason.split(" is ")[0].split("(")[0] for b in kiln.metrics.breaks[before:]}
    assert reasons == {"calling backward", "Optimizer.zero_grad"}, reasons


def max_diff(a, b):
    return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters()))


def assert_state_equal(eager_opt, opt, exact):
    for s, t in zip(eager_opt.state.values(), opt.state.values()):
        assert s.keys() == t.keys()
        for k in s:
            if exact:
                assert torch.equal(s[k], t[k]), k
            else:
                torch.testing.assert_close(t[k], s[k], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("backend,dropout", [("eager", True), ("aot_eager", False), ("aot_eager", True)])
def test_gpt2_training_step(backend, dropout):
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))
    eager_model, model, eager_opt, opt, counter = compare(lambda: gpt2(dropout), (ids,), "adamw", backend)
    # one graph before backward() (the forward under autocast), one after it (clipping,
    # AdamW's step) per state of the optimizer: the first step makes AdamW's state, the
    # others read it (a guarded change of its keys); zero_grad() runs as Python (torch
    # marks it _disable_dynamo), then a last graph returns the loss
    assert counter.frame_count == 4, counter
    assert_breaks_are_backward_and_zero_grad()
    if backend == "eager" or not dropout:
        assert max_diff(eager_model, model) == 0.0
        assert_state_equal(eager_opt, opt, exact=True)
    else:
        # AOTAutograd's decomposed bf16 dropout backward rounds differently from eager's
        # kernel; AdamW turns gradient noise into steps of up to lr, so the bound is in lr
        assert max_diff(eager_model, model) < 10 * 1e-3
    assert all(p.grad is None for p in model.parameters())


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_optimizer_step_and_clipping_captured(backend, optimizer):
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)
    before = len(kiln.metrics.breaks)
    eager_model, model, eager_opt, opt, counter = compare(mlp, (x, y), optimizer, backend, steps=3,
                                                          autocast=False)
    assert_breaks_are_backward_and_zero_grad(before)
    # the first step makes the optimizer's state (a second continuation graph reads it;
    # plain SGD has none); the forward graph and the one after zero_grad() once
    assert counter.frame_count == (3 if optimizer == "sgd" else 4), counter
    if backend == "eager":
        assert max_diff(eager_model, model) == 0.0
        assert_state_equal(eager_opt, opt, exact=True)
    else:
        assert max_diff(eager_model, model) < 1e-5
        assert_state_equal(eager_opt, opt, exact=False)

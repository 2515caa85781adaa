"""Train a model for a few steps and collect what the tests compare: the loss of every
step and each parameter (full, unsharded) and gradient after the last step."""
from __future__ import annotations

import torch

from .tiny_transformer import batch

STEPS = 3


def _full(t):
    # an FSDP2 parameter or gradient is a DTensor shard; compare whole tensors
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def train(model, rank: int, steps: int = STEPS, after_step=None):
    """``after_step(step)`` is called after each optimizer step, if given."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    grads = None
    for step in range(steps):
        loss = model(*batch(step, rank))
        loss.backward()
        losses.append(loss.detach().clone())
        if step == steps - 1:
            grads = [_full(p.grad).detach().clone() for p in model.parameters()]
        opt.step()
        opt.zero_grad()
        if after_step is not None:
            after_step(step)
    params = [_full(p).detach().clone() for p in model.parameters()]
    return losses, grads, params


def assert_same_training(expected, got, what: str):
    """Bit-for-bit equality: the compiled model runs the same ops in the same order
    (eager backend) or AOTAutograd's functional version of them (aot_eager), on the same
    data, with the same collectives, so nothing may differ."""
    for kind, exp, act in zip(("loss", "grad", "param"), expected, got):
        assert len(exp) == len(act), f"{what}: {kind} count differs"
        for i, (e, a) in enumerate(zip(exp, act)):
            assert torch.equal(a, e), f"{what}: {kind} {i} differs by {(a - e).abs().max().item():.3g}"

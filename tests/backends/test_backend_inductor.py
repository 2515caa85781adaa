"""The ``inductor`` backend on a small MLP: forward and training match eager.

Slow: the first inductor compile in a process takes many seconds (C++ codegen)."""
from __future__ import annotations

import pytest
import torch
import torch.fx
import torch.nn as nn

from kiln.backends import lookup
from kiln.debug import compare, fp64_copy

pytestmark = pytest.mark.slow


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 64)
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = nn.functional.gelu(self.fc2(h)) + h
        return (self.head(h).log_softmax(-1),)


def train_step(fn, model, x, target):
    model.zero_grad(set_to_none=True)
    (logp,) = fn(x)
    loss = nn.functional.nll_loss(logp, target)
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


def test_inductor_mlp_forward_and_training():
    torch.manual_seed(0)
    model = MLP()
    gm = torch.fx.symbolic_trace(model)
    code_before = gm.code
    x, target = torch.randn(16, 32), torch.randint(0, 10, (16,))
    compiled = lookup("inductor")(gm, [x])
    assert gm.code == code_before  # inductor got its own copy of the graph

    ref_gm = fp64_copy(gm)
    e_loss, e_grads = train_step(gm, gm, x, target)
    c_loss, c_grads = train_step(compiled, gm, x, target)
    r_loss, r_grads = train_step(ref_gm, ref_gm, x.double(), target)
    assert compare(e_loss, c_loss, r_loss, name="loss").ok
    report = compare(e_grads, c_grads, r_grads, name="grad")
    assert report.ok, str(report)
    with torch.no_grad():
        assert compare(gm(x), compiled(x), ref_gm(x.double())).ok

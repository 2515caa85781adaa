"""The ``inductor`` backend through ``kiln.compile``: a small MLP (forward and one
training step) and BertModel in eval mode match eager, by the fp64-reference rule.

Slow: inductor's C++ code generation takes seconds per graph on CPU, so the models are
tiny.  Backend errors raise (conftest), so a silent fallback to eager cannot pass.
"""
from __future__ import annotations

import pytest
import torch
import transformers
from torch import nn

import kiln
from kiln.debug.accuracy import compare, fp64_copy

pytestmark = pytest.mark.slow


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 32)
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = nn.functional.gelu(self.fc2(h)) + h
        return self.head(h).log_softmax(-1)


def mlp_step(fn, model, x, target):
    model.zero_grad(set_to_none=True)
    out = fn(x)
    loss = nn.functional.nll_loss(out, target)
    loss.backward()
    return out.detach(), loss.detach(), {n: p.grad for n, p in model.named_parameters()}


def test_inductor_mlp_forward_and_training_step():
    torch.manual_seed(0)
    model = MLP()
    ref_model = fp64_copy(model)
    x, target = torch.randn(8, 16), torch.randint(0, 4, (8,))
    expected = mlp_step(model, model, x, target)
    reference = mlp_step(ref_model, ref_model, x.double(), target)
    compiled = kiln.compile(model, backend="inductor")
    actual = mlp_step(compiled, model, x, target)
    report = compare(expected, actual, reference, name="mlp/inductor")
    assert report.ok, str(report)
    assert kiln.metrics.graphs == 1 and kiln.metrics.backend_fallbacks == 0


def test_inductor_bert_eval():
    transformers.logging.set_verbosity_error()
    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=100, max_position_embeddings=32)
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    ref_model = fp64_copy(model)
    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(2, 8, dtype=torch.long)
    compiled = kiln.compile(model, backend="inductor")
    with torch.no_grad():
        expected, reference = model(ids, attention_mask=mask), ref_model(ids, attention_mask=mask)
        actual = compiled(ids, attention_mask=mask)
        again = compiled(ids, attention_mask=mask)
    for label, out in (("first call", actual), ("second call", again)):
        report = compare(expected, out, reference, name=f"bert eval/inductor {label}")
        assert report.ok, str(report)
    assert kiln.metrics.graphs == 1 and kiln.metrics.backend_fallbacks == 0 and kiln.metrics.recompiles == 0

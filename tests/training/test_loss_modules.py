"""Loss modules constructed inside the compiled function, as Hugging Face heads do
(``CrossEntropyLoss(ignore_index=-100)`` in T5's forward).

Regression: T5 training through Kiln once failed with "cannot assign 'int' object to
buffer 'weight'": the keyword ``ignore_index=-100`` reached ``_WeightedLoss`` as its
``weight``.  Construction with keyword, positional and tensor arguments must behave as
in eager (whether Kiln captures the construction or breaks at it), forward and backward.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

import kiln

BACKENDS = ["eager", "aot_eager", "aten"]


def logits_and_target():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 5, generator=g, requires_grad=True)
    target = torch.tensor([0, 1, -100, 3, 4, 1])
    return logits, target


def keyword_ignore_index(logits, target):
    return nn.CrossEntropyLoss(ignore_index=-100)(logits, target)


def keyword_everything(logits, target):
    loss_fct = nn.CrossEntropyLoss(weight=torch.linspace(0.5, 1.5, 5), ignore_index=1,
                                   reduction="sum", label_smoothing=0.1)
    return loss_fct(logits, target.clamp(min=0))


def positional_weight(logits, target):
    w = torch.ones(5) * 2
    return nn.NLLLoss(w, None, 3)(logits.log_softmax(-1), target.clamp(min=0))


def module_attributes(logits, target):
    loss_fct = nn.CrossEntropyLoss(ignore_index=-100)
    assert loss_fct.weight is None and loss_fct.ignore_index == -100
    return loss_fct(logits, target) * (1 + loss_fct.ignore_index * 0)


@pytest.mark.parametrize("fn", [keyword_ignore_index, keyword_everything, positional_weight, module_attributes])
@pytest.mark.parametrize("backend", BACKENDS)
def test_loss_module_built_in_compiled_code(fn, backend):
    logits, target = logits_and_target()
    expected = fn(logits, target)
    expected.backward()
    expected_grad = logits.grad.clone()
    logits.grad = None
    actual = kiln.compile(fn, backend=backend)(logits, target)
    actual.backward()
    torch.testing.assert_close(actual, expected, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(logits.grad, expected_grad, rtol=1e-6, atol=1e-7)

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


# Stateless torch.nn modules built from constant arguments are captured (no graph
# break); anything that would need the trace-time instance to outlive the trace
# (configuring it, reading mutable state) breaks instead, and modules owning state are
# not built at trace time at all.

def test_loss_module_construction_is_captured_in_one_graph():
    logits, target = logits_and_target()
    compiled = kiln.compile(keyword_ignore_index, backend="eager")
    compiled(logits, target)
    assert kiln.metrics.graphs == 1 and not kiln.metrics.breaks


def test_escaping_module_is_a_fresh_instance_per_call():
    def f(x):
        act = nn.Softplus(beta=2.0, threshold=10)
        return act(x), act

    x = torch.randn(4)
    compiled = kiln.compile(f, backend="eager")
    (y1, m1), (y2, m2) = compiled(x), compiled(x)
    assert torch.equal(y1, f(x)[0])
    assert type(m1) is nn.Softplus and m1.beta == 2.0 and m1.threshold == 10
    assert m1 is not m2
    m1.beta = 5.0                                   # the next call is not affected
    assert torch.equal(compiled(x)[0], y1)


def test_module_kept_across_a_graph_break():
    def f(x):
        loss_fct = nn.SmoothL1Loss(beta=0.5, reduction="sum")
        y = x * 3
        print("", end="")                          # a graph break: loss_fct is live
        return loss_fct(y, torch.zeros_like(y))

    x = torch.randn(7)
    assert torch.equal(kiln.compile(f, backend="eager")(x), f(x))


def test_configuring_a_new_module_breaks_and_stays_correct():
    def f(x):
        act = nn.LeakyReLU(0.1)
        act.negative_slope = 0.3
        return act(x)

    x = torch.randn(8)
    assert torch.equal(kiln.compile(f, backend="eager")(x), f(x))
    assert kiln.metrics.breaks


def test_module_with_parameters_built_in_frame_does_not_draw_random_numbers_at_trace_time():
    def f(x):
        lin = nn.Linear(4, 2)                       # random init: must happen at run time, once
        return lin(x)

    x = torch.randn(3, 4)
    torch.manual_seed(0)
    expected = f(x)
    after_eager = torch.rand(1)
    torch.manual_seed(0)
    actual = kiln.compile(f, backend="eager")(x)
    assert torch.equal(actual, expected)
    assert torch.equal(torch.rand(1), after_eager)


def test_dropout_module_built_in_frame_uses_the_same_random_stream():
    def f(x):
        return nn.Dropout(0.5)(x) * 2

    x = torch.randn(64)
    torch.manual_seed(3)
    expected = f(x)
    torch.manual_seed(3)
    assert torch.equal(kiln.compile(f, backend="aot_eager")(x), expected)


def test_constructor_arguments_from_inputs_are_guarded():
    def f(logits, target, ignore, reduction):
        return nn.CrossEntropyLoss(ignore_index=ignore, reduction=reduction)(logits, target)

    logits, target = logits_and_target()
    target = target.clamp(min=0)
    compiled = kiln.compile(f, backend="eager")
    for ignore, reduction in [(1, "mean"), (3, "mean"), (3, "sum"), (1, "mean")]:
        torch.testing.assert_close(compiled(logits, target, ignore, reduction), f(logits, target, ignore, reduction),
                                   rtol=0, atol=0)

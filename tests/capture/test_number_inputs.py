"""Numbers in tensor arithmetic: baked in or graph inputs (``ShapePolicy.number_varies``).

A number given to the frame (an argument, a value carried into a continuation) enters
the graph as a 0-d tensor input, so a new value is not a recompile.  A number read from
an object, a global or a cell (a norm's ``eps``) is baked in and guarded by value until
a capture sees it change; then it is an input.  Each case compares compiled against
eager on several calls and counts graphs and their inputs.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

import kiln
from kiln.testing import CompileCounter

SCALE = 0.5


class RMSNorm(torch.nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(4))
        self.variance_epsilon = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.variance_epsilon))


def _placeholders(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "placeholder")


def _compiled(fn):
    kiln.reset()
    counter = CompileCounter()
    return kiln.compile(fn, backend=counter), counter


def test_module_hyperparameter_is_baked_in_and_guarded():
    model = RMSNorm()
    compiled, counter = _compiled(model)
    xs = [torch.randn(2, 4) for _ in range(3)]
    for x in xs:
        torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    assert counter.frame_count == 1
    gm = counter.graphs[0]
    assert _placeholders(gm) == 2          # x and the weight; eps is in the graph
    assert any(1e-6 in n.args for n in gm.graph.nodes if n.op == "call_function")
    entry = compiled.forward.entries[0]
    assert "variance_epsilon" not in entry.glue_source    # no 0-d tensor made from it per call
    # a new value fails the guard on it: one recompile, after which it is an input
    model.variance_epsilon = 0.25
    for x in xs:
        torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    assert counter.frame_count == 2
    assert _placeholders(counter.graphs[1]) == 3
    model.variance_epsilon = 3.0
    for x in xs:
        torch.testing.assert_close(compiled(x), model(x), rtol=0, atol=0)
    assert counter.frame_count == 2        # the input takes every later value


def test_global_number_is_baked_in_until_it_changes():
    global SCALE

    def f(x):
        return x * SCALE + 1

    compiled, counter = _compiled(f)
    x = torch.randn(3)
    try:
        for v in (0.5, 0.5, 2.0, 3.0, 4.0):
            SCALE = v
            torch.testing.assert_close(compiled(x), f(x), rtol=0, atol=0)
        assert counter.frame_count == 2
        assert [_placeholders(g) for g in counter.graphs] == [1, 2]
    finally:
        SCALE = 0.5


def test_frame_argument_number_is_an_input_from_the_start():
    def f(x, k):
        return x * k

    compiled, counter = _compiled(f)
    x = torch.randn(3)
    for k in (2.0, 3.0, 4.5):
        torch.testing.assert_close(compiled(x, k), f(x, k), rtol=0, atol=0)
    assert counter.frame_count == 1
    assert _placeholders(counter.graphs[0]) == 2


def test_int_attribute_keeps_eager_promotion_when_baked_in():
    class Shift(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.n = 3

        def forward(self, x):
            return x + self.n, x * self.n

    model = Shift()
    compiled, counter = _compiled(model)
    for x in (torch.arange(4, dtype=torch.int32), torch.arange(4, dtype=torch.int32) * 2):
        got, want = compiled(x), model(x)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype == torch.int32
            torch.testing.assert_close(g, w, rtol=0, atol=0)
    assert counter.frame_count == 1


def test_switched_off_randomness_takes_no_generator_snapshot():
    """Eval-mode dropout and attention with dropout_p=0.0 draw no random numbers, so the
    glue does not snapshot the generator around the graph; training-mode dropout does."""
    def evaluate(q):
        return F.scaled_dot_product_attention(q, q, q, dropout_p=0.0) + F.dropout(q, 0.5, training=False)

    def train(q):
        return F.dropout(q, 0.5, training=True)

    for fn, snapshot in ((evaluate, False), (train, True)):
        compiled, counter = _compiled(fn)
        for seed in (0, 1):
            q = torch.randn(1, 2, 3, 4, generator=torch.Generator().manual_seed(seed))
            torch.manual_seed(seed)
            want = fn(q)
            after_eager = torch.get_rng_state()
            torch.manual_seed(seed)
            got = compiled(q)
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            assert torch.equal(torch.get_rng_state(), after_eager)
        assert counter.frame_count == 1
        assert ("___rng = " in compiled.entries[0].glue_source) is snapshot

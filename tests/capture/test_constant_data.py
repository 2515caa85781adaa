"""Numbers read from tensor data that is a constant of the trace
(capture/basics/constant_values.py): computed at trace time and assumed, so Python that
needs them takes eager's path with no break; data that depends on the call (an input,
a random draw, an input written into it) still breaks."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import kiln
from kiln.comparison import Rules, assert_same
from kiln.testing import CompileCounter

SAME = Rules(atol=1e-6, rtol=1e-6)


def branch_on_constant_mask(x):
    n = x.size(0)
    mask = torch.full((n, n), float("-inf")).triu(1)
    causal = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
    if bool((mask == causal).all()):
        return x + 1
    return x - 1


def size_from_constant_item(x):
    k = int(torch.arange(4).sum())          # 6
    return x.sum() + torch.zeros(k).sum() + k


def bool_into_c_function(q):
    n = q.size(-2)
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    is_causal = bool((mask == torch.ones(n, n, dtype=torch.bool).tril()).all())
    return F.scaled_dot_product_attention(q, q, q, is_causal=is_causal)


def constant_written_by_input(x):
    m = torch.zeros(3)
    m[0] = x[0]
    if bool(m.any()):
        return x + 1
    return x - 1


def view_of_constant_written_by_input(x):
    m = torch.zeros(3)
    v = m[:1]
    v.add_(x[:1])
    if bool(m.any()):
        return x + 1
    return x - 1


def mask_of_symbolic_size(x):
    n = x.size(0)   # symbolic from the second size on: the mask is no constant then
    mask = torch.ones(n, n).tril()
    if bool((mask == torch.ones(n, n).tril()).all()):
        return x + 1
    return x - 1


def random_data(x):
    if bool((torch.rand(3) > 2).any()):
        return x + 1
    return x - 1


@pytest.mark.parametrize("fn, inputs", [
    (branch_on_constant_mask, lambda s: (torch.randn(4, 3) + s,)),
    (size_from_constant_item, lambda s: (torch.randn(5) * s,)),
    (bool_into_c_function, lambda s: (torch.randn(2, 2, 5, 4) + s,)),
], ids=["branch", "int_size", "c_function_bool"])
def test_constant_data_is_read_at_trace_time(fn, inputs):
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(fn, backend=counter, fullgraph=True)
    for seed in range(2):
        args = inputs(seed)
        assert_same(fn(*args), compiled(*args), SAME)
    assert counter.frame_count == 1
    assert kiln.metrics.breaks == []


@pytest.mark.parametrize("fn", [constant_written_by_input, view_of_constant_written_by_input, random_data])
def test_data_that_depends_on_the_call_still_breaks(fn):
    kiln.reset()
    with pytest.raises(kiln.Unsupported, match="computed from tensor data"):
        kiln.compile(fn, backend=CompileCounter(), fullgraph=True)(torch.randn(3))
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(fn, backend=counter)
    for x in (torch.randn(3).abs() + 1, torch.zeros(3)):
        torch.manual_seed(0)
        expected = fn(x)
        torch.manual_seed(0)
        assert_same(expected, compiled(x), SAME)
    assert len(kiln.metrics.breaks) == 1


def test_transformer_encoder_causal_mask_made_in_the_frame():
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0), 2).eval()

    def run(x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.size(0))
        return enc(x, mask)

    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(run, backend=counter)
    with torch.no_grad():
        for seed in range(2):
            x = torch.randn(6, 2, 16, generator=torch.Generator().manual_seed(seed))
            assert_same(run(x), compiled(x), Rules(atol=1e-5, rtol=1e-5))
    assert counter.frame_count == 1 and kiln.metrics.breaks == [] and kiln.metrics.recompiles == 0


def test_a_mask_of_symbolic_size_breaks_once_it_is_symbolic():
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(mask_of_symbolic_size, backend=counter)
    for n in (3, 4, 5):
        x = torch.randn(n)
        assert_same(mask_of_symbolic_size(x), compiled(x), SAME)
    # size 3: one graph, the value read at trace time; 4: symbolic, a break there (the
    # graph before it, and the continuation, static at its first size); 5: the
    # continuation's recompile
    assert counter.frame_count == 1 + 2 + 1 and len(kiln.metrics.breaks) == 1


# -- torch.distributions at symbolic sizes ----------------------------------------------------

def size_plus_constant_size(x):
    batch = x.size()[:-1]                   # symbolic from the second size on
    return x.new_zeros(batch + torch.Size([2])), tuple(batch) + torch.Size([]), batch[:1] + (3,)


def categorical_log_prob(logits, actions):
    dist = torch.distributions.Categorical(logits=logits, validate_args=True)
    return dist.log_prob(actions), dist.entropy()


@pytest.mark.parametrize("fn, make", [
    (size_plus_constant_size, lambda n: (torch.randn(n, 3),)),
    (categorical_log_prob, lambda n: (torch.randn(n, 4), torch.randint(0, 4, (n,)))),
], ids=["size_plus_size", "categorical"])
def test_sizes_that_vary_take_one_recompile(fn, make):
    # validation at symbolic sizes: torch._is_all_true is recorded as all() on a bool
    # tensor, and a symbolic batch shape concatenated with a constant torch.Size
    kiln.reset()
    counter = CompileCounter()
    compiled = kiln.compile(fn, backend=counter)
    for n in (5, 7, 9):
        args = make(n)
        expected, actual = fn(*args), compiled(*args)
        assert_same(expected, actual, SAME)
        assert [type(v) for v in expected] == [type(v) for v in actual]
    assert counter.frame_count == 2 and kiln.metrics.recompiles == 1 and kiln.metrics.breaks == []
